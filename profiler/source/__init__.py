"""Reading sources, the profiler's bottom layer: what a document is and holds (document:
its kind, KernelBench's Model and ModelNew; cuda_source: its `__global__` kernels) and how a
source file is read (source_files). Imports nothing else of the project."""
