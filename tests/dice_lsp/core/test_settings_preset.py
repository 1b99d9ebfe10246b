"""The `preset` setting: what it sends the engine, and that the engine reads it as its preset."""

from __future__ import annotations

from dice_lsp.core.config import parse_settings
from engine.types import Sampling


def test_the_dice_preset_setting_reaches_the_engine_as_dices_sampling():
    settings, problems = parse_settings({"preset": "dice", "strategy": "low_confidence_dynamic", "temperature": 0.3})
    assert problems == []
    sampling = Sampling.from_kwargs(settings.sampling())
    # DICE's decoder and sampling; the editor's strategy and threshold still apply.
    assert sampling == Sampling.for_preset("dice", strategy="low_confidence_dynamic", threshold=0.9)
    assert (sampling.temperature, sampling.top_k, sampling.block_size) == (1.0, 1, 4)


def test_the_default_preset_keeps_the_editors_sampling():
    settings, _ = parse_settings({"temperature": 0.3, "steps": 2})
    sampling = Sampling.from_kwargs(settings.sampling())
    assert (sampling.preset, sampling.temperature, sampling.steps) == ("default", 0.3, 2)


def test_an_unknown_preset_is_named_and_ignored():
    settings, problems = parse_settings({"preset": "fast"})
    assert settings.preset == "default"
    assert problems and "dice.preset = 'fast'" in problems[0] and '"dice"' in problems[0]


def test_a_time_limit_past_an_hour_is_named_and_ignored():
    # 1e308 s reached the sandbox's timers, which cannot wait that long.
    for bad in (1e308, 3601, float("inf"), float("nan")):
        settings, problems = parse_settings({"timeLimit": bad})
        assert settings.time_limit == 60.0 and problems and "at most 3600" in problems[0], bad
    assert parse_settings({"timeLimit": 3600})[0].time_limit == 3600.0
