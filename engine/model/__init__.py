"""The SDAR model: its math (sdar), the kernels that compute it and the decoding paths (routes, skinny, decode_attention), a checkpoint read into it (loading, tokenizer, hub)."""
