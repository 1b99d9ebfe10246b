"""Verdicts: what one is (types.py: Diagnostic and Verdict, every status, which of them count as
proof, and their JSON), the rules that decide whether a measured speedup is proof (rules.py:
escaped work, clocks, physical bounds, reproducibility) and the one place a verdict is decided,
in the judge's process, from what a sandboxed run sent back (decision.py)."""
