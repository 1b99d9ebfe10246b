"""This machine, as the profiler and dice-lsp see it: the environment variables that set how
it judges (settings.py, every DICE_ variable of judging in one typed object), where the
profiler keeps things between runs (paths.py: the cache folders, lock files, removing a folder
a candidate may have shaped) and the facts of its GPU, read without a CUDA library (gpu.py).
Imports nothing else of the project."""
