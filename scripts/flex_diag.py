"""Where the `flex` decoding path goes wrong, on the GPU machine (from the repository root):

    python3 scripts/flex_diag.py

One decoding window of a tiny fp32 SDAR model (head_dim 16) through each way the engine can
run attention, against the eager SDPA path: eager flex_attention, the torch.compile'd model
with SDPA, the compiled model with flex_attention, and that inside a CUDA graph (the `flex`
path). Prints the largest absolute difference of the logits for each. On the H200 with
torch 2.11 (2026-12-03): eager flex 5.4e-6, compiled SDPA 2.3e-6, compiled flex 2.19, graph
flex 2.19: the compiled flex kernel is what is wrong, not the block mask or the graph.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.getcwd())

from engine.fast_paths import GraphForward, StaticForward  # noqa: E402
from engine.model import KVCache  # noqa: E402
from tests.engine.conftest import random_model, tiny_sdar_config  # noqa: E402


def main() -> None:
    device = torch.device("cuda")
    model = random_model(tiny_sdar_config(vocab_size=1024, mask_token_id=1023, head_dim=16)).to(device).float()
    ids = torch.randint(0, 1000, (8, 40), generator=torch.Generator().manual_seed(0)).to(device)

    def window(cls, **kwargs) -> torch.Tensor:
        cache = KVCache.allocate(model.config, 8, 2048, device, torch.float32)
        forward = cls(model, cache, 4, **kwargs)
        forward.prefill(ids[:1, :32])
        return forward.window_logits(ids, 28, 36, 2048)

    with torch.no_grad():
        reference = window(StaticForward)
        for name, cls, kwargs in [("eager-flex", StaticForward, dict(attention="flex")),
                                  ("compiled-sdpa", StaticForward, dict(compiled=True)),
                                  ("compiled-flex", StaticForward, dict(compiled=True, attention="flex")),
                                  ("graph-flex", GraphForward, dict(compiled=True, attention="flex"))]:
            try:
                print(name, "max abs diff", (window(cls, **kwargs) - reference).abs().max().item(), flush=True)
            except Exception as exc:  # noqa: BLE001 - a diagnosis prints every failure and goes on
                print(name, "ERROR", type(exc).__name__, str(exc)[:300], flush=True)


if __name__ == "__main__":
    main()
