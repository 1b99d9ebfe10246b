"""The sandbox: each request runs in a fresh harness process (`python -m profiler.run.harness`),
behind a keeper, and the judge's process only reads what comes back.

The boundary, as the judge's side enforces it:
- the process gets an allowlisted environment (profiler.sandbox.environment), HOME and its
  caches in a temporary folder of its own, resource limits, and a keeper process
  (profiler.sandbox.keeper) that kills everything it started, setsid() or not;
- where the system allows unprivileged namespaces (DICE_SANDBOX_ISOLATION, see isolation()),
  the harness runs in PID and mount namespaces of its own: it sees and can signal no process
  outside the sandbox (the judge, the editor, the language server, other sandboxes), and every
  file system is read-only to it but its own folder and build folder. Each verdict records
  which (`extra["isolation"]`: "namespaces" or "none");
- the request goes in and the measurement comes back over pipes with a per-run nonce
  (profiler.sandbox.channel); no file the process can write is read back;
- the time limit is kept by the judge's clock (profiler.sandbox.watch). Building is not running: a build
  phase the harness reports before any candidate code runs (interpreter start-up, NVRTC,
  torch.compile of the baseline) counts against a build allowance of its own
  (BUILD_LIMIT_S), and so does, once candidate code runs, time in which a compiler process
  (ninja, nvcc, the host compiler) runs under the sandbox, as seen in /proc. Nothing the
  candidate says can extend either limit.

A hang becomes "timeout", a death or a missing/forged result "crash" with the tail of the
process's stderr; the caller's process is never at risk.

The judge's side: start (a harness process started, its folder, pipes and keeper), watch (one
request run and watched to its end; POOL), readers (the judge's threads on the pipes),
processes (stopping the keeper, the second net), outcome (what a run hands back). Both sides:
channel (the pipes' messages), clock (the judge's clock over timed batches). Around them:
environment, isolation and keeper (what the harness may see and do), gpu_turn (one run at a
time on each GPU), pool and spare (harnesses started ahead of their requests), quiet (their
warm-ups kept out of timed batches), builds
(verified load_inline build folders).
"""

from __future__ import annotations

from profiler.sandbox.isolation import ISOLATION_ENV, IsolationUnavailable, isolation, isolation_problem
from profiler.sandbox.outcome import Cancelled, SandboxOutcome
from profiler.sandbox.start import BUILD_LIMIT_S, Started, start_harness
from profiler.sandbox.watch import POOL, run_sandboxed, run_started

__all__ = ["BUILD_LIMIT_S", "ISOLATION_ENV", "POOL", "Cancelled", "IsolationUnavailable", "SandboxOutcome", "Started",
           "isolation", "isolation_problem", "run_sandboxed", "run_started", "start_harness"]
