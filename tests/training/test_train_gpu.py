"""On the GPU: training through the torch.compile'd model with flex_attention over the BlockMask
(TrainSettings.attention = "flex") computes the loss and the gradients that SDPA over the dense
mask does, on packed rows of several examples and padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from training.fim_data import PAD_DOC, ROLE_CONTEXT, ROLE_END, ROLE_MIDDLE, Batch
from engine.model.loading import config_from_json
from engine.model.sdar import SDARForCausalLM
from training.train import TrainSettings, diffusion_loss, role_weights

from tests.training.test_builtin_train import _packed_docs

pytestmark = pytest.mark.gpu


def test_compiled_flex_training_step_is_the_sdpa_step():
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = SDARForCausalLM(config_from_json({
        "vocab_size": 64, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "block_size": 4,
        "mask_token_id": 63, "eos_token_id": 0, "max_position_embeddings": 1024})).to(device)
    rows, t = 4, 512
    doc = _packed_docs(rows, t, seed=4)
    role = np.where(np.arange(t)[None] % 20 < 12, ROLE_CONTEXT, ROLE_MIDDLE).repeat(rows, 0)
    role[:, 7::20] = ROLE_END
    pos = np.concatenate([np.arange(t)[None] % 40] * rows)
    batch = Batch(np.random.default_rng(0).integers(1, 60, (rows, t)), doc.numpy(), pos, role)
    weights = role_weights(TrainSettings(), device)
    compiled = torch.compile(model, dynamic=False)
    results = []
    for stepper, attention in ((model, "sdpa"), (compiled, "flex")):
        model.zero_grad(set_to_none=True)
        losses = diffusion_loss(stepper, batch, 63, PAD_DOC, torch.Generator(device).manual_seed(1), device,
                                weights, attention)
        losses[0].backward()
        results.append((torch.stack(losses).detach(), [p.grad.clone() for p in model.parameters()]))
    (loss_a, grads_a), (loss_b, grads_b) = results
    assert torch.allclose(loss_a, loss_b, rtol=1e-4, atol=1e-5), (loss_a, loss_b)
    for a, b in zip(grads_a, grads_b):   # fp32; the compiled graph fuses and reorders sums
        assert (a - b).norm() <= 1e-3 * a.norm(), ((a - b).norm() / a.norm()).item()
