"""The sandboxed side: `python -m profiler.runner FOLDER` reads FOLDER/request.json, builds,
verifies and times, and writes FOLDER/result.json (a Verdict as JSON).

Only profiler.sandbox starts this, in a fresh process per candidate. CUDA errors that poison
the context (illegal address, launch failure, out of memory) become a "crash" verdict naming
the phase they happened in; the process then exits at once, since the context is unusable.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import traceback
from pathlib import Path

from profiler.results import Verdict

PHASE_FILE = "phase"
# Phases that do not count against a candidate's time limit (they have one of their own):
# starting Python and importing torch/CuPy, and compiling.
BUILD_PHASES = ("start-up", "compile", "compile baseline", "build extension", "torch.compile")
# Phases in which a failure means the candidate did not build.
_BUILDING = ("compile", "load candidate", "build extension")

# Words in CUDA/CuPy/torch error messages that mean the GPU side faulted.
_FAULT_WORDS = ("illegal", "misaligned", "launch failure", "out of memory", "cudaError", "CUDA error",
                "unspecified launch", "hardware stack error", "illegal instruction", "ECC")


class Phase:
    """What the runner is doing now, so that an exception can say where it happened, and so
    that the sandbox can tell building (which has a limit of its own) from running."""

    current = "start-up"

    @classmethod
    def set(cls, name: str) -> None:
        cls.current = name
        folder = os.environ.get("DICE_SANDBOX_DIR")
        if folder:
            Path(folder, PHASE_FILE).write_text(name)


def fault_verdict(exc: BaseException) -> Verdict:
    if isinstance(exc, ModuleNotFoundError) and exc.name in ("cupy", "torch"):
        hint = "pip install 'dice-lsp[gpu]' (cupy-cuda13x)" if exc.name == "cupy" else "pip install torch"
        return Verdict.failed("error", f"the profiler needs {exc.name} to run kernels here: {hint}")
    text = f"{type(exc).__name__}: {exc}".strip()
    first_line = text.splitlines()[0][:400]
    fault = any(word.lower() in text.lower() for word in _FAULT_WORDS)
    status = "crash" if fault else "error"
    return Verdict.failed(status, f"{Phase.current}: {first_line}", compiled=Phase.current not in _BUILDING,
                          extra={"traceback": traceback.format_exc()[-3000:]})


def run(request: dict) -> Verdict:
    kind = request["kind"]
    if kind == "cuda":
        from profiler.cuda_run import run_cuda

        return run_cuda(request)
    if kind == "kernelbench":
        from profiler.kernelbench import run_kernelbench

        return run_kernelbench(request)
    if kind == "torch_compile":
        from profiler.kernelbench import run_torch_compile

        return run_torch_compile(request)
    raise ValueError(f"unknown request kind {kind!r}")


def die_with_parent(deadline_s: float) -> None:
    """Never outlive the judge: die when the parent dies (Linux PR_SET_PDEATHSIG), and kill
    the whole process group (children included) at a hard deadline, in case the parent is
    alive but stuck or gone in a way the kernel does not report."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the deadline still holds
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)
    watchdog = threading.Timer(deadline_s, os.killpg, args=(os.getpgrp(), signal.SIGKILL))
    watchdog.daemon = True
    watchdog.start()


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    Phase.set("start-up")
    request = json.loads((folder / "request.json").read_text())
    die_with_parent(float(request.get("hard_deadline_s", 3600)))
    try:
        verdict = run(request)
    except BaseException as exc:  # a verdict, whatever went wrong: the parent must hear of it
        verdict = fault_verdict(exc)
    tmp = folder / "result.json.tmp"
    tmp.write_text(json.dumps(verdict.to_json()))
    tmp.replace(folder / "result.json")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: after a GPU fault, destroying the context can hang or crash.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
