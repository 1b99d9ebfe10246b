"""Checks of a document that need no GPU and run none of its code: CUDA compiled by nvcc, and
what a compiler prints turned into Diagnostics in the document's coordinates (compile.py,
whose compiler runs and message parsing the sandboxed builds use too); a KernelBench
document's Python syntax (python.py) and the CUDA of its load_inline calls (kernelbench.py);
a `dice:` spec (spec.py); and the patterns of cheating in a candidate's source, each a flag on
its verdict (static.py)."""
