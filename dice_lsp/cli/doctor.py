"""`dice doctor`: what this machine gives the judge, one fact a line: the GPU, the compiler,
how candidates are isolated (namespaces of their own: PID, mount, network; or why not), and
the DICE_ environment variables set (profiler.machine.settings, and the listeners' tokens, shown only
as set) with any that cannot be read. Exit 0 when candidates can be judged in isolation on a GPU, 1 otherwise."""

from __future__ import annotations

import argparse
import json


def facts() -> dict:
    from profiler.checks.compile import find_nvcc
    from profiler.machine.gpu import compute_capability, gpu_name
    from profiler.sandbox.isolation import describe
    from dice_lsp.core.config import LSP_TOKEN
    from engine.serving.auth import environment_token
    from engine.serving.client import ENGINE_TOKEN
    from profiler.machine.settings import current

    isolated, sandbox = describe()
    environment = current()
    shown = dict(environment.shown()) | {name: "(set)" for name in (LSP_TOKEN, ENGINE_TOKEN) if environment_token(name)}
    return {"gpu": gpu_name(), "compute_capability": compute_capability(), "nvcc": find_nvcc(),
            "isolated": isolated, "sandbox": sandbox, "environment": shown,
            "environment_problems": list(environment.problems)}


def main(args: argparse.Namespace) -> int:
    found = facts()
    if args.json:
        print(json.dumps(found))
    else:
        print(f"GPU: {found['gpu'] or 'none: candidates are compiled, not checked or timed'}"
              + (f" (compute capability {found['compute_capability']})" if found["compute_capability"] else ""))
        print(f"nvcc: {found['nvcc'] or 'not found: dice check needs it; install the CUDA toolkit or set CUDA_HOME'}")
        print(f"candidates run in: {found['sandbox']}")
        shown = ", ".join(f"{name}={value}" for name, value in found["environment"].items())
        print(f"environment: {shown or 'no DICE_ variable set: the defaults (README, Configuration)'}")
        for problem in found["environment_problems"]:
            print(f"environment: {problem}")
    return 0 if found["gpu"] and found["isolated"] else 1
