"""What a model's weights take, reckoned from its config before any of them is read, and what a
device has for a new allocation.

Available: on a GPU the free memory CUDA reports; on a CPU /proc/meminfo's MemAvailable, or less
where the process's memory cgroup leaves less (engine.model.system_memory); and never more than
the caller's budget (`memory`: the dice commands and the language server pass
DICE_ENGINE_MEMORY), which holds the weights and each request together.
"""

from __future__ import annotations

from pathlib import Path

import torch

from engine.model.system_memory import cgroup_room, describe, mem_available
from engine.types import EngineError


def weights_bytes(config, dtype_bytes: int) -> int:
    """The parameters config implies (embeddings, each layer's projections and norms, the
    head unless tied to the embeddings), in bytes."""
    hidden, heads, kv = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    head_dim = config.head_dim
    attention = hidden * heads * head_dim * 2 + hidden * kv * head_dim * 2 + 2 * head_dim
    mlp = 3 * hidden * config.intermediate_size
    layer = attention + mlp + 2 * hidden
    embeddings = config.vocab_size * hidden * (1 if config.tie_word_embeddings else 2)
    return (embeddings + config.num_hidden_layers * layer + hidden) * dtype_bytes


def available(device: torch.device, memory: int | None = None, held: int = 0) -> tuple[int | None, str]:
    """(bytes a new allocation on `device` can have, where that number comes from). `memory`:
    the caller's budget for weights and request together, of which the model already holds
    `held` (which the device's free memory no longer counts)."""
    found: list[tuple[int, str]] = []
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        found.append((free, f"free on {torch.cuda.get_device_name(device)}"))
    elif device.type == "cpu":
        if (meminfo := mem_available()) is not None:
            found.append((meminfo, "available (MemAvailable, /proc/meminfo)"))
        if (room := cgroup_room()) is not None:
            found.append((room, "left under this process's memory cgroup limit"))
    if memory is not None:
        where = (f"left of the {describe(memory)} allowed (DICE_ENGINE_MEMORY) beside the weights' {describe(held)}"
                 if held else "allowed (DICE_ENGINE_MEMORY)")
        found.append((max(0, memory - held), where))
    if not found:
        return None, "unknown"
    return min(found)


def check_weights(config, dtype: torch.dtype, device: torch.device, folder: Path, memory: int | None = None) -> None:
    """EngineError when the checkpoint's weights cannot fit on `device`, before they are read."""
    need = weights_bytes(config, torch.finfo(dtype).bits // 8)
    have, where = available(device, memory)
    if have is not None and need > have:
        raise EngineError(f"{folder}: the model's weights need {describe(need)} in "
                          f"{str(dtype).removeprefix('torch.')} on {device}, and {describe(have)} is {where}")
