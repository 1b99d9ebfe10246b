"""From a request to candidates in this process: the Engine API (base), prompts, the context cut, block-diffusion decoding and its forward paths, LocalEngine (local)."""
