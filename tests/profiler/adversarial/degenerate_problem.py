import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU above a threshold of 1: relu(x - 1). Every input get_inputs() makes is below 1
    (and so are its inputs shifted to [-1, 1)), so the output is all zeros whatever the
    input: a problem on which no comparison of outputs can tell a kernel from a constant."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x - 1.0)


batch_size = 8192
dim = 16384


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
