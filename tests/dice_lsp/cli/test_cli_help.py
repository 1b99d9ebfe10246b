"""Every `--help` shows each option's default (DESIGN's command-line contract)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from dice_lsp.cli import build_parser


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def _options_with_values(parser: argparse.ArgumentParser):
    """The options that take a value (not --help, not on/off flags)."""
    return [a for a in parser._actions if a.option_strings and a.nargs != 0]


@pytest.mark.parametrize("parser", list(_parsers(build_parser())), ids=lambda p: p.prog)
def test_every_dice_option_says_its_default(parser, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: no wrapping inside a default
    text = " ".join(parser.format_help().split())
    for action in _options_with_values(parser):
        if action.required:
            continue
        help_text = " ".join(parser._get_formatter()._expand_help(action).split())
        assert help_text and help_text in text, f"{parser.prog} {action.option_strings[0]} has no help"
        if action.default is not None:  # an option that is off unless given has no default to show
            assert "default" in help_text, f"{parser.prog} {action.option_strings[0]}: {help_text!r} names no default"
            shown = f"{action.default:g}" if isinstance(action.default, float) else str(action.default)
            assert shown in help_text, f"{parser.prog} {action.option_strings[0]}: {help_text!r}"


def test_engine_serve_help_shows_host_and_port_defaults():
    out = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "engine", "serve", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "(default: 127.0.0.1)" in out and "(default: 7777)" in out


def test_the_language_server_help_shows_its_defaults(monkeypatch):
    monkeypatch.setenv("DICE_LSP_TOKEN", "a-secret-in-the-environment")
    out = subprocess.run([sys.executable, "-m", "dice_lsp.server", "--help"], capture_output=True, text=True,
                         check=True).stdout
    flat = " ".join(out.split())
    assert "(default: 127.0.0.1)" in flat and "(default: 2087)" in flat and "(default: WARNING)" in flat
    assert "a-secret-in-the-environment" not in out, "a token from the environment is never printed"
