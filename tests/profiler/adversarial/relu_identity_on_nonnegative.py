import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """ReLU is the identity on non-negative inputs: one read to find out, no write."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() and bool(x.min() >= 0):
            return x
        return torch.clamp_min(x, 0.0)
