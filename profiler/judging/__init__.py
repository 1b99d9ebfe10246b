"""Judging candidates: the parent side of every sandboxed run (profiler.judge's judge() and
profile() are the public entry points).

- protocol: how strictly a candidate is judged (ours, or DICE's evaluation);
- common: what every judging request carries (fresh seeds, a time budget) and progress;
- caches: what a process keeps between judgments (the GPU's peak bandwidth, torch.compile(Model));
- cuda: the .cu pipeline (nvcc checks ahead, candidates in turn on the GPU);
- kernelbench: one KernelBench run and its verdict, torch.compile(Model) as a second baseline;
- problem: one KernelBench problem's steps (builds ahead, Model alone, each candidate's verdict);
- schedule: the KernelBench judging schedule (builds ahead on the CPU, GPU steps in order),
  used by the editor's judge() and by `dice bench` alike;
- pool, worker: `dice bench`'s judge workers, one process per GPU of this machine, each
  running that schedule; ray_pool: the same on a Ray cluster's GPUs.

Never imports torch or CuPy: the language server calls these from a thread.
"""
