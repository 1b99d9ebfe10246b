"""Reading sources, the profiler's bottom layer: what a document is and holds (document:
its kind, KernelBench's Model and ModelNew; cuda_source: its `__global__` kernels), the `dice:`
benchmark spec of a .cu document (spec) with the launch a kernel's index arithmetic asks for
(launch_shape), the C element types of kernel parameters and the dtypes that hold them (dtypes),
and how a source file is read (source_files). Imports nothing else of the project."""
