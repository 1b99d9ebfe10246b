"""What runs inside the sandboxed harness process, and only there: building, loading and
calling candidates, and measuring them (harness.py is the entry point, cuda.py the .cu
path, kernelbench.py the KernelBench path, device.py the GPU through CuPy or torch).

Candidate code may run in this process, so nothing here decides a verdict: it returns
measurements, and profiler.verdict.decision judges them in the judge's process.
"""
