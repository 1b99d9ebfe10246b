"""The built-in model's training corpus: permissively licensed CUDA fetched and split by
repository (build_corpus), generated kernels with benchmark specs (generate_kernels), kernels
spelt the ways people write them (ordinary_kernels), and the byte-level BPE tokenizer
(cuda_tokenizer). `python -m training.corpus.build_corpus` builds it; training.fim_data reads it.
"""
