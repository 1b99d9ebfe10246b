"""The pure core of measuring: the timing loop (timing.py), output comparison
(verify.py) and statistics (stats.py). No process, no CUDA library of its own: the harness
runs the first two on the device, the judge recomputes the statistics from raw samples."""
