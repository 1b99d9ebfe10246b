"""The engine worker process: `python -m engine.serving.worker --model SPEC`.

Loads the model once, pays its decoding path's first-use cost (compilation, CUDA graphs;
progress on stderr), says {"type": "ready", "info"} (or {"type": "error"} and exits 2), then
serves jobs on stdin/stdout (engine.serving.frames, engine.serving.service) until stdin closes. stdout carries
only frames: anything a library prints goes to stderr, which the client keeps for error reports.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict

from engine.decoding.base import report_to_stderr
from engine.serving.frames import encode_frame
from engine.serving.service import FrameWriter, serve


def claim_stdout():
    """A private handle on the real stdout for frames; fd 1 becomes stderr for stray prints."""
    frames = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return frames


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.serving.worker")
    parser.add_argument("--model", default="builtin")
    parser.add_argument("--device")
    parser.add_argument("--dtype")
    parser.add_argument("--memory", type=int, help="bytes the weights and each request may take (engine.model.memory)")
    parser.add_argument("--decode-path", help="a local model's decoding path (engine.model.routes.PATHS; "
                        "default: the fastest the machine runs)")
    args = parser.parse_args(argv)
    frames = claim_stdout()
    import engine

    try:
        routing = None
        if args.decode_path:
            from engine.model.routes import Routing  # torch: only for a local model

            routing = Routing(path=args.decode_path)
        loaded = engine.load(args.model, device=args.device, dtype=args.dtype, routing=routing, memory=args.memory)
        loaded.warm_up(report_to_stderr)
    except Exception as exc:  # whatever breaks loading is reported, not a silent exit
        message = engine.load_failure(args.model, exc)
        frames.write(encode_frame({"type": "error", "id": None, "message": message, "cancelled": False}))
        frames.flush()
        return 2
    frames.write(encode_frame({"type": "ready", "info": asdict(loaded.info())}))
    frames.flush()
    serve(loaded, sys.stdin.buffer, FrameWriter(frames))
    # Every answer is written; nothing else is left to save. Exit now rather than through the
    # interpreter's teardown of torch's modules, which a CLI fill would wait for (~0.4 s).
    frames.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
