"""The `dice` command line: argument parsing only.

Each subcommand hands its parsed arguments to a plain function in the package that owns
the work (engine, profiler, the job pipeline), imported lazily so that `dice check` does
not pay for importing torch. The flags here are a contract (README, docs/DESIGN contract):
change them only together with the docs.
"""

from __future__ import annotations

import argparse
import sys

from dice_lsp.core.config import MAX_CANDIDATES, MAX_TOKENS


def _add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        default="builtin",
        help="builtin (default), a checkpoint folder, a Hugging Face Hub id (ORG/NAME[@REVISION]), "
        "dice://HOST:PORT or sglang://HOST:PORT",
    )


def _add_preset(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--preset",
        choices=("default", "dice"),
        default=default,
        help=f"decoding rules: dice = DICE's own evaluation decoder and sampling (default: {default})",
    )


def _add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def _bounded(what: str, limit: int):
    """An argparse type: a whole number from 1 to `limit`, refused with one line that names the
    bound otherwise (the editor's settings have the same bounds, dice_lsp.core.config)."""

    def read(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"{value} {what}: one request takes from 1 to {limit} {what}")
        return value

    return read


CANDIDATES = _bounded("candidates", MAX_CANDIDATES)
TOKENS = _bounded("tokens", MAX_TOKENS)


def _add_candidates(p: argparse.ArgumentParser, default: int, help: str) -> None:
    p.add_argument("--candidates", type=CANDIDATES, default=default, metavar="N",
                   help=f"{help}, at most {MAX_CANDIDATES}")


def _add_max_tokens(p: argparse.ArgumentParser, help: str = "tokens per candidate (default 256 for fill; optimize gets 4x this)") -> None:
    p.add_argument("--max-tokens", type=TOKENS, metavar="N", help=f"{help}; at most {MAX_TOKENS}")


class DefaultsShown(argparse.HelpFormatter):
    """Every option's help ends with its default, unless the help already says it in words
    (a default that is a secret from the environment is never printed)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def _show_defaults(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """DefaultsShown for the parser and every subcommand's parser under it."""
    parser.formatter_class = DefaultsShown
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _show_defaults(child)
    return parser


def _port(text: str) -> int:
    """A TCP port (0: any free one), refused by argparse with one line otherwise."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535)")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dice",
        description="Fill, optimize and profile CUDA kernels with a diffusion language model.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("fill", help="fill a range of a file with model candidates, judged on the GPU")
    p.add_argument("file")
    p.add_argument(
        "--range",
        required=True,
        metavar="L:C-L:C",
        help="1-based line:column, end exclusive (e.g. 12:5-14:1)",
    )
    _add_candidates(p, 4, "candidates to generate and judge")
    _add_max_tokens(p)
    _add_preset(p, "default")
    _add_model(p)
    _add_json(p)

    p = sub.add_parser("optimize", help="rewrite one kernel (or write ModelNew for a KernelBench file)")
    p.add_argument("file")
    p.add_argument("--kernel", metavar="NAME", help="the __global__ function (default: the only one)")
    _add_candidates(p, 4, "candidates to generate and judge")
    _add_max_tokens(p)
    _add_preset(p, "default")
    _add_model(p)
    _add_json(p)

    p = sub.add_parser("profile", help="compile, check and time what is in the file")
    p.add_argument("file")
    p.add_argument("--kernel", metavar="NAME", help="the __global__ function (default: the only one)")
    _add_json(p)

    p = sub.add_parser("check", help="compile only; compiler diagnostics (no GPU needed)")
    p.add_argument("file")
    _add_json(p)

    p = sub.add_parser("doctor", help="what this machine gives the judge: GPU, compiler, how candidates are isolated")
    _add_json(p)

    p = sub.add_parser("bench", help="KernelBench-style evaluation of a model over a folder")
    p.add_argument("dir", nargs="?", help="folder of KernelBench problems (not needed with --infill)")
    p.add_argument("--limit", type=int, metavar="N", help="at most N problems (default: every problem)")
    _add_candidates(p, 1, "candidates per problem")
    p.add_argument("--infill", metavar="FILE.json", help="run the infilling variant on these records")
    p.add_argument("--out", metavar="DIR", help="where the JSON and the chart go (default: dice-bench-out)")
    p.add_argument("--resume", action="store_true", help="continue a run that stopped, from --out")
    p.add_argument(
        "--judge",
        metavar="ray|ray://HEAD:PORT",
        help="judge on a Ray cluster: builds on its CPUs, each problem on a free GPU (`ray`: a local cluster; "
        "needs the cluster extra); default: this machine's GPUs",
    )
    p.add_argument(
        "--solutions",
        metavar="SOLDIR",
        help="judge files instead of model answers: SOLDIR/**/STEM[.label].py is a ModelNew "
        "candidate for problem STEM.py (e.g. benchmarks/kernelbench_controls)",
    )
    _add_max_tokens(p, "tokens per candidate (default: the engine's)")
    p.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        help="sampling temperature (default: 0, greedy, for 1 candidate; 0.7 for several)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds per candidate for checks and timing; builds have their own limit (default 60)",
    )
    p.add_argument(
        "--protocol",
        choices=("dice-lsp", "dice"),
        default="dice-lsp",
        help="how candidates are judged: dice-lsp (default: tolerances per dtype, 4 input sets, adaptive timing) "
        "or dice (DICE's evaluation: allclose 1e-2, 5 input sets, 100 timed runs; an answer without DICE's "
        "code fence fails)",
    )
    _add_preset(p, "dice")
    _add_model(p)
    _add_json(p)

    p = sub.add_parser("engine", help="the diffusion engine")
    esub = p.add_subparsers(dest="engine_command", metavar="ENGINE_COMMAND", required=True)
    s = esub.add_parser("serve", help="serve the engine over TCP for remote editors")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on")
    s.add_argument("--port", type=_port, default=7777, help="TCP port (0: any free one)")
    s.add_argument(
        "--token",
        help="the token every client must send; required for any address but loopback (default: "
        "$DICE_ENGINE_TOKEN, which other users cannot read in the process list, else a new one per run); "
        "written to $XDG_RUNTIME_DIR/dice-lsp/engine/HOST-PORT.token (else under ~/.cache), readable "
        "by this user only, where a dice:// client finds it",
    )
    _add_model(s)
    return _show_defaults(parser)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "engine":
        from engine.serving import server

        from profiler.machine import settings

        args.memory = settings.current().engine_memory
        return server.main(args)
    # Every other command checks or judges code with the profiler.
    from profiler.machine.paths import CacheFolderError

    try:
        return run(args)
    except CacheFolderError as exc:
        print(f"dice {args.command}: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    if args.command in ("fill", "optimize"):
        from dice_lsp.cli import jobs as jobs_cli

        return jobs_cli.main(args)
    if args.command in ("profile", "check"):
        from dice_lsp.cli import profile as profile_cli

        return profile_cli.main(args)
    if args.command == "bench":
        from dice_lsp.bench import run as bench

        return bench.main(args)
    if args.command == "doctor":
        from dice_lsp.cli import doctor

        return doctor.main(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
