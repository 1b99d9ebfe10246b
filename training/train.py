"""Block-diffusion training of the built-in model on fill-in-the-middle CUDA examples.

    python -m training.train --settings engine/builtin/train_settings.json --out DIR [--resume]

Each step (BD3LM / SDAR style): a packed batch x0 of FIM examples (training/fim_data.py); in
every block of `block_size` tokens, k ~ U{1..block} positions are replaced by <|MASK|>,
giving xt. The model reads [x0 ; xt] (length 2T) under one attention mask:

- clean token in block b: clean tokens of blocks <= b (block-causal, as the KV cache at
  inference holds the committed blocks);
- noisy token in block b: noisy tokens of its own block (bidirectional) and clean tokens of
  blocks < b, which is exactly what a block being denoised sees at inference;
- nothing crosses from one packed example to another.

The loss is a weighted mean of the cross-entropy over masked positions, the weight set by
each token's role (training/fim_data.py): 1 on the middle, `end_weight` on the <|endoftext|>
that marks the span's end (a fill is right only if it stops exactly there),
`after_end_weight` on the end tokens that fill the rest of that block, `context_weight` on
the prompt. All tokens of an example are noised, so the context still teaches CUDA itself,
but the middle and its end, what decoding asks of the model, carry most of the loss. (No
MDLM 1/t weight: with 4-token blocks it takes the values 4, 2, 1.33, 1 and mostly amplifies
the noise of blocks with one masked token; it matters for likelihood bounds, not fills.)
The log has the whole loss and the middle's and end token's own, on training batches and on
the `valid` split.

The learning-rate schedule runs on training seconds (`budget_seconds`), so that one run fits
the device machine's per-command limit whatever its speed; `train_state.pt` (weights,
optimizer, step, seconds trained, data RNG) is written every `save_every_seconds` and at
the end, and `--resume` continues from it. Every step appends to `loss.csv`.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from training.fim_data import (
    PAD_DOC,
    ROLE_AFTER_END,
    ROLE_CONTEXT,
    ROLE_END,
    ROLE_MIDDLE,
    ROLE_PAD,
    Batch,
    CorpusSplit,
    FimSampler,
)
from engine.model.loading import config_from_json, config_to_json, save_checkpoint
from engine.model.routes import Routed
from engine.model.sdar import SDARForCausalLM


@dataclass
class TrainSettings:
    data: str = ".corpus/data"               # scripts/build_corpus.py output
    tokenizer: str = ".corpus/tokenizer"
    init: str | None = None                  # checkpoint folder to start from (same shape and tokenizer)
    model: dict = field(default_factory=dict)   # SDARConfig fields
    seq_len: int = 1024
    batch_size: int = 32
    max_middle: int = 160
    context_weight: float = 0.25
    end_weight: float = 2.0
    after_end_weight: float = 0.5
    peak_lr: float = 2e-3
    final_lr_ratio: float = 0.1
    warmup_steps: int = 200
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    budget_seconds: float = 400.0
    save_every_seconds: float = 120.0
    log_every: int = 10
    valid_every_seconds: float = 60.0
    valid_batches: int = 4
    shard_bytes: int = 15_000_000           # the device machine returns files under 16 MiB
    seed: int = 0
    # "sdpa": torch's scaled_dot_product_attention over training_mask (dense [B, 1, 2T, 2T]);
    # "flex": the model torch.compile'd, flex_attention over training_block_mask (on a GPU;
    # the tiles no query may read are skipped). The same attention (tests/engine).
    attention: str = "sdpa"

    @classmethod
    def load(cls, path: Path) -> TrainSettings:
        return cls(**json.loads(path.read_text()))


def training_mask(doc: torch.Tensor, block_size: int) -> torch.Tensor:
    """bool [B, 1, 2T, 2T] for the [x0 ; xt] layout (True = may attend); see module doc."""
    b, t = doc.shape
    blk = torch.arange(t, device=doc.device) // block_size
    same_doc = doc[:, :, None] == doc[:, None, :]
    le = blk[None, :, None] >= blk[None, None, :]
    lt = blk[None, :, None] > blk[None, None, :]
    eq = blk[None, :, None] == blk[None, None, :]
    clean = torch.cat([same_doc & le, torch.zeros_like(same_doc)], dim=2)
    noisy = torch.cat([same_doc & lt, (same_doc & eq).expand(b, t, t)], dim=2)
    return torch.cat([clean, noisy], dim=1)[:, None]


def training_mask_mod(doc: torch.Tensor, block_size: int):
    """training_mask as a flex_attention mask_mod: (batch, head, query, key) -> may attend."""
    t = doc.shape[1]

    def mask_mod(b, h, q, kv):
        q_noisy, kv_noisy = q >= t, kv >= t
        qp, kp = torch.where(q_noisy, q - t, q), torch.where(kv_noisy, kv - t, kv)
        qb, kb = qp // block_size, kp // block_size
        same_doc = doc[b, qp] == doc[b, kp]
        clean = ~q_noisy & ~kv_noisy & (kb <= qb)
        noisy_reads_clean = q_noisy & ~kv_noisy & (kb < qb)
        noisy_reads_noisy = q_noisy & kv_noisy & (kb == qb)
        return same_doc & (clean | noisy_reads_clean | noisy_reads_noisy)

    return mask_mod


def training_block_mask(doc: torch.Tensor, block_size: int):
    """training_mask as a flex_attention BlockMask (with the query tiles its backward needs)."""
    from torch.nn.attention.flex_attention import create_block_mask

    b, t = doc.shape
    return create_block_mask(training_mask_mod(doc, block_size), b, None, 2 * t, 2 * t, device=doc.device)


def block_noise(ids: torch.Tensor, doc: torch.Tensor, block_size: int, pad_doc: int,
                generator: torch.Generator) -> torch.Tensor:
    """bool [B, T]: which tokens to mask. Each block masks k ~ U{1..block_size} of its
    positions, chosen at random; padding is never masked."""
    b, t = ids.shape
    scores = torch.rand(b, t // block_size, block_size, generator=generator, device=ids.device)
    rank = scores.argsort(-1).argsort(-1)
    k = torch.randint(1, block_size + 1, (b, t // block_size, 1), generator=generator, device=ids.device)
    return (rank < k).reshape(b, t) & (doc < pad_doc)


def role_weights(settings: TrainSettings, device: torch.device) -> torch.Tensor:
    """Loss weight of each ROLE_* (indexed by role)."""
    weights = torch.zeros(5, device=device)
    weights[ROLE_CONTEXT] = settings.context_weight
    weights[ROLE_MIDDLE] = 1.0
    weights[ROLE_END] = settings.end_weight
    weights[ROLE_AFTER_END] = settings.after_end_weight
    weights[ROLE_PAD] = 0.0
    return weights


def diffusion_loss(model: SDARForCausalLM, batch: Batch, mask_id: int, pad_doc: int,
                   generator: torch.Generator, device: torch.device,
                   weights: torch.Tensor, attention: str = "sdpa") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(weighted loss, mean loss on masked middle tokens, mean loss on masked end tokens).
    `model` may be the torch.compile'd model (its config is the model's); `attention` as
    TrainSettings.attention."""
    ids = torch.from_numpy(batch.ids).to(device)
    doc = torch.from_numpy(batch.doc).to(device)
    pos = torch.from_numpy(batch.pos).to(device)
    role = torch.from_numpy(batch.role).to(device)
    bs = model.config.block_size
    t = ids.shape[1]
    masked = block_noise(ids, doc, bs, pad_doc, generator)
    noisy = torch.where(masked, torch.full_like(ids, mask_id), ids)
    # The BlockMask is built outside the compiled model (engine.model.sdar.SDARForCausalLM.forward).
    mask = training_block_mask(doc, bs) if attention == "flex" else training_mask(doc, bs)
    logits = model(
        torch.cat([ids, noisy], dim=1),
        position_ids=torch.cat([pos, pos], dim=1),
        attn_mask=mask,
        logits_to_keep=t,
        kernels=Routed(attention),
    )
    # Weights and masks as multiplications rather than logits[masked]: boolean indexing
    # would sync with the GPU.
    ce = F.cross_entropy(logits.flatten(0, 1).float(), ids.flatten(), reduction="none").view_as(ids)
    on = masked.float()
    w = weights[role] * on
    middle = on * (role == ROLE_MIDDLE)
    end = on * (role == ROLE_END)
    return ((ce * w).sum() / w.sum().clamp_min(1e-6), (ce * middle).sum() / middle.sum().clamp_min(1),
            (ce * end).sum() / end.sum().clamp_min(1))


def lr_at(settings: TrainSettings, step: int, seconds: float) -> float:
    warm = min(1.0, (step + 1) / settings.warmup_steps)
    progress = min(1.0, seconds / settings.budget_seconds)
    floor = settings.final_lr_ratio
    return settings.peak_lr * warm * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model: torch.nn.Module, settings: TrainSettings, device: torch.device):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": settings.weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=settings.peak_lr, betas=(0.9, 0.95),
                             fused=device.type == "cuda")


def build_model(settings: TrainSettings, device: torch.device) -> SDARForCausalLM:
    torch.manual_seed(settings.seed)
    config = config_from_json(dict(settings.model))
    model = SDARForCausalLM(config)
    std = 0.02
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            torch.nn.init.normal_(p, std=std)
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.data /= math.sqrt(2 * config.num_hidden_layers)   # GPT-2's residual scaling
    return model.to(device)


def load_tokenizer(folder: str):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(folder)


def initial_weights(model: SDARForCausalLM, folder: str, tokenizer) -> None:
    """Start from the checkpoint in `folder` (training a model further on a new corpus): its
    config must have the model's shape and its tokenizer the training tokenizer's vocabulary."""
    from engine.model.loading import load_checkpoint

    start, start_tokenizer, config = load_checkpoint(folder, "cpu", torch.float32)
    theirs, ours = config_to_json(config), config_to_json(model.config)
    # The storage dtype aside (a checkpoint is saved in bf16), and the length the start was
    # trained on (this run's seq_len is written at export).
    differ = sorted(k for k in theirs.keys() | ours.keys()
                    if k not in ("torch_dtype", "trained_context") and theirs.get(k) != ours.get(k))
    if differ:
        raise ValueError(f"--init {folder}: its config differs from the settings' model in {', '.join(differ)}")
    if start_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"--init {folder}: its tokenizer differs from the corpus tokenizer")
    model.load_state_dict(start.state_dict())


def train(settings: TrainSettings, out: Path, resume: bool, device: torch.device,
          max_steps: int | None = None, stop_after: float | None = None) -> SDARForCausalLM:
    """Train until `budget_seconds` of training (or max_steps) are done, or, with stop_after,
    until this call has trained that many seconds (the schedule still runs to budget_seconds,
    and `--resume` goes on); returns the model."""
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer(settings.tokenizer)
    model = build_model(settings, device)
    config = model.config
    if settings.init and not (resume and (out / "train_state.pt").is_file()):
        initial_weights(model, settings.init, tokenizer)
        print(f"starting from the weights of {settings.init}", flush=True)
    sampler = FimSampler(CorpusSplit(Path(settings.data), "train"), tokenizer, settings.seq_len,
                         config.block_size, settings.max_middle, settings.seed)
    valid = None
    if (Path(settings.data) / "valid_texts.json").is_file():
        valid_split = CorpusSplit(Path(settings.data), "valid")
        if len(valid_split):
            # Fixed batches (same seed every time) so that the curve compares like with like.
            valid = FimSampler(valid_split, tokenizer, settings.seq_len, config.block_size, settings.max_middle,
                               settings.seed).batch(settings.batch_size * settings.valid_batches)
    if settings.attention not in ("sdpa", "flex"):
        raise ValueError(f"attention must be 'sdpa' or 'flex', not {settings.attention!r}")
    attention = settings.attention
    if attention == "flex" and device.type != "cuda":
        print("attention: sdpa (flex_attention has no backward on a CPU)", flush=True)
        attention = "sdpa"
    # flex_attention is fast only compiled (eager, it computes the whole masked attention).
    stepper = torch.compile(model, dynamic=False) if attention == "flex" else model
    optimizer = make_optimizer(model, settings, device)
    generator = torch.Generator(device=device).manual_seed(settings.seed)
    weights = role_weights(settings, device)
    step, seconds = 0, 0.0
    state_path = out / "train_state.pt"
    if resume and state_path.is_file():
        state = torch.load(state_path, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step, seconds = state["step"], state["seconds"]
        sampler.restore(state["data"])
        generator.set_state(state["noise_rng"].cpu())   # map_location may have moved it
        print(f"resumed at step {step}, {seconds:.0f} s trained", flush=True)

    def save_state() -> None:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                    "seconds": seconds, "data": sampler.state(),
                    "noise_rng": generator.get_state(), "settings": asdict(settings)}, state_path)

    def valid_losses() -> list[float]:
        """Losses on the fixed validation batches, with fixed noise."""
        model.eval()
        noise = torch.Generator(device=device).manual_seed(settings.seed + 1)
        sums = torch.zeros(3, device=device)
        n = settings.batch_size
        with torch.no_grad(), autocast:
            for k in range(settings.valid_batches):
                part = Batch(*(a[k * n:(k + 1) * n] for a in (valid.ids, valid.doc, valid.pos, valid.role)))
                sums += torch.stack(diffusion_loss(stepper, part, config.mask_token_id, PAD_DOC, noise, device,
                                                   weights, attention))
        model.train()
        return (sums / settings.valid_batches).tolist()

    log_path = out / "loss.csv"
    new_log = not (resume and log_path.is_file())
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {params / 1e6:.2f} M parameters; {len(sampler.data)} training files; "
          f"device {device}", flush=True)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    model.train()
    last_save = last_valid = seconds
    stop_at = seconds + stop_after if stop_after is not None else math.inf
    tokens_per_step = settings.batch_size * settings.seq_len
    with open(log_path, "w" if new_log else "a", newline="") as log:
        writer = csv.writer(log)
        if new_log:
            writer.writerow(["step", "seconds", "tokens", "lr", "loss", "middle_loss", "end_loss",
                             "valid_loss", "valid_middle_loss", "valid_end_loss"])
        while (seconds < min(settings.budget_seconds, stop_at)
               and (max_steps is None or step < max_steps)):
            started = time.perf_counter()
            lr = lr_at(settings, step, seconds)
            for group in optimizer.param_groups:
                group["lr"] = lr
            batch = sampler.batch(settings.batch_size)
            with autocast:
                loss, middle_loss, end_loss = diffusion_loss(stepper, batch, config.mask_token_id, PAD_DOC,
                                                             generator, device, weights, attention)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
            optimizer.step()
            step += 1
            if step % settings.log_every == 0 or step == 1:
                # The only GPU sync: steps between logs run ahead. Validation is not timed.
                values = [loss.item(), middle_loss.item(), end_loss.item()]
                seconds += time.perf_counter() - started
                started = time.perf_counter()
                if valid is not None and (step == 1 or seconds - last_valid >= settings.valid_every_seconds):
                    values += valid_losses()
                    last_valid = seconds
                    started = time.perf_counter()
                writer.writerow([step, f"{seconds:.1f}", step * tokens_per_step, f"{lr:.3e}",
                                 *(f"{v:.4f}" for v in values)])
                log.flush()
                print(f"step {step:6d}  {seconds:7.1f} s  lr {lr:.2e}  loss "
                      + " / ".join(f"{v:.3f}" for v in values), flush=True)
            seconds += time.perf_counter() - started
            if seconds - last_save >= settings.save_every_seconds:
                save_state()
                last_save = seconds
    save_state()
    print(f"done: {step} steps, {seconds:.0f} s, {step * tokens_per_step / 1e6:.1f} M tokens", flush=True)
    return model


def export(model: SDARForCausalLM, settings: TrainSettings, folder: Path, with_tokenizer: bool) -> None:
    """The checkpoint folder `engine.load` reads, in bf16, in shards under shard_bytes. Its config
    records the examples' length (`trained_context`): the engine cuts prompts to it."""
    model = model.to(torch.bfloat16).eval()
    model.config.extra["trained_context"] = settings.seq_len
    tokenizer = load_tokenizer(settings.tokenizer) if with_tokenizer else None
    save_checkpoint(model, tokenizer, folder, max_shard_bytes=settings.shard_bytes)


def main() -> None:
    ap = argparse.ArgumentParser(description="Train the built-in model (block diffusion, FIM).")
    ap.add_argument("--settings", type=Path, default=Path("engine/builtin/train_settings.json"))
    ap.add_argument("--out", type=Path, required=True, help="train_state.pt, loss.csv, checkpoint/")
    ap.add_argument("--resume", action="store_true", help="continue from OUT/train_state.pt")
    ap.add_argument("--budget-seconds", type=float, help="override the settings' budget")
    ap.add_argument("--max-steps", type=int, help="stop after this many steps (smoke tests)")
    ap.add_argument("--stop-after", type=float,
                    help="stop after this many seconds of training in this call (a run longer than one "
                         "device command: --resume continues it)")
    ap.add_argument("--no-tokenizer", action="store_true",
                    help="export weights and config only (the tokenizer is rebuilt from the corpus)")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    settings = TrainSettings.load(args.settings)
    if args.budget_seconds is not None:
        settings.budget_seconds = args.budget_seconds
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    model = train(settings, args.out, args.resume, device, args.max_steps, args.stop_after)
    export(model, settings, args.out / "checkpoint", with_tokenizer=not args.no_tokenizer)
    print(f"checkpoint written to {args.out / 'checkpoint'}", flush=True)


if __name__ == "__main__":
    main()
