"""The engine's data: sampling settings, the typed requests, candidates, progress, errors
(docs/architecture.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

# DICE's own strategy first: the editors list them in this order, the default at the top.
STRATEGIES = ("low_confidence_static", "sequential", "low_confidence_dynamic")
PRESETS = ("default", "dice")


class EngineError(Exception):
    """A user-facing failure: missing model, bad checkpoint, worker died, bad request."""


class EngineGone(EngineError):
    """The worker process died, or the remote engine's connection closed: a new start may
    help (the job itself may have been fine)."""


class Cancelled(EngineError):
    """The caller asked to stop (should_cancel() returned true, or the task was cancelled)."""


@dataclass
class Sampling:
    """How to decode. `preset` names the decoder's rules (engine/decoding/decode.py): "default" is the
    project's own; "dice" is DICE's evaluation decoder, token for token (confidence after
    top-k/top-p, commits by torch.topk, a per-step quota from the block length, whole blocks,
    the mask token allowed, no stop at EOS). `Sampling.for_preset` gives a preset's values."""

    temperature: float = 0.0  # 0 = greedy
    top_k: int = 0  # 0 = off
    top_p: float = 1.0
    strategy: str = "low_confidence_static"  # | "sequential" | "low_confidence_dynamic"
    steps: int = 4  # denoising steps per block
    threshold: float = 0.9  # low_confidence_dynamic only
    block_size: int | None = None  # None = the checkpoint's block_size
    seed: int | None = None
    preset: str = "default"

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise EngineError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        if self.strategy not in STRATEGIES:
            raise EngineError(f"unknown strategy {self.strategy!r}; choose one of {', '.join(STRATEGIES)}")
        if self.steps < 1:
            raise EngineError(f"steps must be at least 1, got {self.steps}")
        if self.temperature < 0 or self.top_k < 0 or not 0 < self.top_p <= 1:
            raise EngineError(
                f"bad sampling: temperature={self.temperature} (>= 0), top_k={self.top_k} (>= 0), "
                f"top_p={self.top_p} (in (0, 1])"
            )
        if self.block_size is not None and self.block_size < 1:
            raise EngineError(f"block_size must be at least 1, got {self.block_size}")

    @classmethod
    def for_preset(cls, preset: str = "default", **overrides: Any) -> "Sampling":
        """A preset's values, with `overrides` on top. "dice" is what DICE's evaluation passes to
        its decoder (evaluation/src/utils.py, sdar branch): block 4, 4 steps, temperature 1.0,
        top_k 1, top_p 1.0, low_confidence_static (the RL stage uses low_confidence_dynamic
        with threshold 0.9, hence that threshold)."""
        if preset not in PRESETS:
            raise EngineError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        values: dict[str, Any] = {}
        if preset == "dice":
            values = dict(temperature=1.0, top_k=1, top_p=1.0, strategy="low_confidence_static", steps=4,
                          threshold=0.9, block_size=4)
        return cls(**{**values, **overrides, "preset": preset})

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> "Sampling":
        """From an API call's **sampling, refusing unknown names with a clear message. With
        `preset`, the preset's values are the defaults and the other names override them."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise EngineError(f"unknown sampling option(s): {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        kwargs = dict(kwargs)
        return cls.for_preset(kwargs.pop("preset", None) or "default", **kwargs)


@dataclass(frozen=True, kw_only=True)
class Budget:
    """What every request has besides its text: how many answers, how many tokens each, and
    how to decode. Each request sets its own max_tokens default (docs/DESIGN.md's)."""

    n: int = 1
    max_tokens: int
    sampling: Sampling = field(default_factory=Sampling)


@dataclass(frozen=True)
class InfillRequest(Budget):
    """Each answer replaces the span between `prefix` and `suffix`. `reference`: DICE's
    KernelBench infilling shows the PyTorch reference above the file (engine.decoding.prompts)."""

    method: ClassVar[str] = "infill"
    prefix: str
    suffix: str
    reference: str | None = None
    max_tokens: int = field(default=256, kw_only=True)


@dataclass(frozen=True)
class GenerateRequest(Budget):
    """Continue `prompt` as it is (no template)."""

    method: ClassVar[str] = "generate"
    prompt: str
    max_tokens: int = field(default=512, kw_only=True)


@dataclass(frozen=True)
class OptimizeRequest(Budget):
    """language "cuda": `code` is one __global__ function; "kernelbench": a KernelBench file."""

    method: ClassVar[str] = "optimize"
    code: str
    language: str = "cuda"
    max_tokens: int = field(default=1024, kw_only=True)


Request = InfillRequest | GenerateRequest | OptimizeRequest
REQUESTS: dict[str, type] = {kind.method: kind for kind in (InfillRequest, GenerateRequest, OptimizeRequest)}


def request_to_wire(request: Request) -> dict[str, Any]:
    """The request as a frame's `args` (engine.serving.service): plain values, sampling a map."""
    return asdict(request)


def request_from_wire(method: str, args: dict[str, Any]) -> Request:
    """A frame's method and args as a request: TypeError for missing or unknown arguments,
    EngineError for bad sampling settings."""
    args = dict(args)
    sampling = args.pop("sampling", None) or {}
    if not isinstance(sampling, dict):
        raise TypeError(f"sampling must be a map, not {type(sampling).__name__}")
    return REQUESTS[method](**args, sampling=Sampling.from_kwargs(sampling))


@dataclass
class Candidate:
    text: str  # code only, extracted from the answer
    tokens: int  # tokens generated
    steps: int  # forward passes spent
    seconds: float
    finish_reason: str  # "eos" | "length" | "cancelled"
    raw: str = ""  # the whole decoded answer, for debugging
    # How .text came out of a chat answer: "dice" (DICE's own extraction accepted it),
    # "lenient" (our fallback, for answers DICE rejects), "" (no extraction: FIM, generate).
    extraction: str = ""


@dataclass
class Progress:
    phase: str  # "prefill" | "decode"
    block: int  # 1-based block being decoded
    blocks: int  # max blocks (max_tokens / block_size)
    step: int
    tokens: int  # tokens committed so far (per candidate)


@dataclass
class EngineInfo:
    name: str  # the spec it was loaded from
    device: str
    block_size: int
    prompt_format: str  # "fim" | "chat"
    dtype: str = ""
    decode_path: str = ""  # a local model's decoding path (engine.model.routes.PATHS); "" for a server's
