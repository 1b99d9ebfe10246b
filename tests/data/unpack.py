"""Unpack the test data kept in tests/data into ordinary folders the tests can read.

Two things are stored smaller than the tests read them:
- the SDAR tokenizer's vocab.json and merges.txt are xz-compressed (4.4 MB -> 1.3 MB);
- DICE's tiny checkpoint (dice-reference/tiny-sdar) keeps no weights file: its 9.7 MB of
  random bf16 weights are drawn again here, byte for byte, and checked by sha256. Its
  tokenizer files are the SDAR tokenizer's, stored once.

The repository's whole tree travels to the GPU machine, which refuses trees over 64 MiB,
and the built-in model already takes 57 MB of it: that is why.
"""

from __future__ import annotations

import hashlib
import lzma
import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parent
KERNELBENCH = DATA / "kernelbench"

# sha256 of DICE's tiny-sdar/model.safetensors, as dice-reference/SOURCE.md records it.
TINY_SDAR_SHA256 = "cb21304cc63f700bf1a1e5547976ecf634dd23897e984fa9867f226b8a9096ac"

# Uniform draws that DICE's generator made before the first weight: the checkpoint's model
# was built (and initialised by transformers) after torch.manual_seed(25), then its weights
# were drawn. The count was found by matching the first embedding row, and the sha256 above
# pins the whole file.
_DRAWS_BEFORE_WEIGHTS = 19_484_672

# The tokenizer files tiny-sdar shares with sdar-tokenizer; tokenizer_config.json differs
# (tiny-sdar's has no auto_map) and config.json is the shrunk one, both stored in tiny-sdar/.
_SHARED_TOKENIZER_FILES = ("vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja",
                           "generation_config.json", "special_tokens_map.json")


def unpack_tokenizer(dest: Path) -> Path:
    """The SDAR tokenizer folder (tokenizer files, the 4B config, licence) at `dest`."""
    source = DATA / "sdar-tokenizer"
    dest.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.suffix == ".xz":
            with lzma.open(item) as packed, open(dest / item.stem, "wb") as out:
                shutil.copyfileobj(packed, out)
        else:
            shutil.copy(item, dest / item.name)
    return dest


def tiny_sdar_weights() -> dict:
    """DICE's tiny-sdar weights, drawn as dice-reference/SOURCE.md describes (fp32 on the
    CPU generator, then bf16), in the checkpoint's named_parameters() order."""
    import torch

    shapes = [("model.embed_tokens.weight", (151936, 32), "embedding")]
    for layer in range(2):
        prefix = f"model.layers.{layer}."
        shapes += [
            (prefix + "self_attn.q_proj.weight", (32, 32), "linear"),
            (prefix + "self_attn.k_proj.weight", (16, 32), "linear"),
            (prefix + "self_attn.v_proj.weight", (16, 32), "linear"),
            (prefix + "self_attn.o_proj.weight", (32, 32), "linear"),
            (prefix + "self_attn.q_norm.weight", (16,), "norm"),
            (prefix + "self_attn.k_norm.weight", (16,), "norm"),
            (prefix + "mlp.gate_proj.weight", (64, 32), "linear"),
            (prefix + "mlp.up_proj.weight", (64, 32), "linear"),
            (prefix + "mlp.down_proj.weight", (32, 64), "linear"),
            (prefix + "input_layernorm.weight", (32,), "norm"),
            (prefix + "post_attention_layernorm.weight", (32,), "norm"),
        ]
    shapes.append(("model.norm.weight", (32,), "norm"))
    generator = torch.Generator().manual_seed(25)
    torch.empty(_DRAWS_BEFORE_WEIGHTS).uniform_(generator=generator)
    weights = {}
    for name, shape, kind in shapes:
        tensor = torch.empty(shape)
        if kind == "embedding":
            tensor.normal_(0.0, 1.0, generator=generator)
        elif kind == "linear":
            tensor.normal_(0.0, 0.5, generator=generator)
        else:
            tensor = 1 + 0.2 * torch.randn(shape, generator=generator)
        weights[name] = tensor.to(torch.bfloat16)
    return weights


def unpack_dice_reference(dest: Path, tokenizer: Path) -> Path:
    """DICE's golden outputs at `dest`, with tiny-sdar/ as DICE saved it (weights drawn
    again and checked; tokenizer files from the unpacked `tokenizer` folder)."""
    from safetensors.torch import save_file

    source = DATA / "dice-reference"
    shutil.copytree(source, dest, dirs_exist_ok=True)
    tiny = dest / "tiny-sdar"
    for name in _SHARED_TOKENIZER_FILES:
        shutil.copy(tokenizer / name, tiny / name)
    shutil.copy(tokenizer / "LICENSE", tiny / "LICENSE.tokenizer")
    weights = tiny / "model.safetensors"
    save_file(tiny_sdar_weights(), str(weights), metadata={"format": "pt"})
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    if digest != TINY_SDAR_SHA256:
        raise RuntimeError(
            f"tiny-sdar weights drawn again differ from DICE's (sha256 {digest}, expected "
            f"{TINY_SDAR_SHA256}): this torch's CPU generator or normal_ draws otherwise than "
            "torch 2.13.0's, so the golden outputs would not apply")
    return dest
