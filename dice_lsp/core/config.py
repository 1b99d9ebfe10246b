"""The language server's settings: the "dice" section (defaults, validation, and the sampling
arguments it implies), and the name of its listener's token.

Clients send settings three ways (initializationOptions, workspace/configuration,
didChangeConfiguration), all as loose JSON. A bad value must never crash the server:
`parse_settings` keeps the default for it and returns a message that names the setting,
the value and what would be accepted, for a window/showMessage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.types import PRESETS, STRATEGIES

# The token dice-lsp's TCP listener asks every client for, where a user sets one (else the
# listener makes one per run: dice_lsp.lsp.transport). Not an editor setting: an editor that
# could set it would not need it.
LSP_TOKEN = "DICE_LSP_TOKEN"

# A rewrite of a whole kernel is several times longer than a typical filled span.
OPTIMIZE_BUDGET = 4

# The most a request may ask for, in the editor's settings and on the command line alike: a
# batch of candidates decodes as one, and each candidate is judged in a sandbox of its own.
MAX_CANDIDATES = 64
MAX_TOKENS = 8192


@dataclass(frozen=True)
class Settings:
    model: str = "builtin"
    # "dice": DICE's own decoder and sampling (docs/contracts.md, Presets and prompts); steps, blockSize and
    # temperature then come from the preset, strategy and threshold from these settings.
    preset: str = "default"
    candidates: int = 4
    steps: int = 4
    block_size: int | None = None  # None: the checkpoint's own block size
    strategy: str = "low_confidence_static"
    threshold: float = 0.9
    # Several candidates of one request are only worth judging if they differ, so sample.
    temperature: float = 0.7
    max_tokens: int = 256  # per fill; an optimize writes a whole kernel and gets OPTIMIZE_BUDGET times this
    time_limit: float = 60.0  # seconds per candidate, compile + check + time
    device: str | None = None
    diagnostics_on_change: bool = False
    debounce_ms: int = 500

    @property
    def optimize_tokens(self) -> int:
        return self.max_tokens * OPTIMIZE_BUDGET

    def sampling(self) -> dict[str, Any]:
        """Keyword arguments for Engine.infill/optimize (engine.types.Sampling fields)."""
        if self.preset != "default":
            return {"preset": self.preset, "strategy": self.strategy, "threshold": self.threshold}
        return {
            "temperature": self.temperature,
            "strategy": self.strategy,
            "steps": self.steps,
            "threshold": self.threshold,
            "block_size": self.block_size,
        }


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


@dataclass(frozen=True)
class _Field:
    attr: str
    accepts: str  # for the message: what a valid value looks like
    valid: Callable[[Any], bool]
    convert: Callable[[Any], Any] = lambda v: v


_FIELDS: dict[str, _Field] = {
    "model": _Field(
        "model",
        'a non-empty string: "builtin", a checkpoint folder, a Hub id (ORG/NAME), dice://HOST:PORT or sglang://HOST:PORT',
        lambda v: isinstance(v, str) and v.strip() != "",
        str.strip,
    ),
    "preset": _Field("preset", " or ".join(f'"{p}"' for p in PRESETS), lambda v: v in PRESETS),
    "candidates": _Field("candidates", f"an integer from 1 to {MAX_CANDIDATES}",
                         lambda v: _is_int(v) and 1 <= v <= MAX_CANDIDATES),
    "steps": _Field("steps", "an integer from 1 to 64", lambda v: _is_int(v) and 1 <= v <= 64),
    "blockSize": _Field(
        "block_size", "null or an integer from 1 to 256", lambda v: v is None or (_is_int(v) and 1 <= v <= 256)
    ),
    "strategy": _Field("strategy", " or ".join(f'"{s}"' for s in STRATEGIES), lambda v: v in STRATEGIES),
    "threshold": _Field("threshold", "a number from 0 to 1", lambda v: _is_number(v) and 0 <= v <= 1, float),
    "temperature": _Field("temperature", "a number from 0 to 2", lambda v: _is_number(v) and 0 <= v <= 2, float),
    "maxTokens": _Field("max_tokens", f"an integer from 1 to {MAX_TOKENS}", lambda v: _is_int(v) and 1 <= v <= MAX_TOKENS),
    "timeLimit": _Field("time_limit", "a number of seconds above 0, at most 3600", lambda v: _is_number(v) and 0 < v <= 3600, float),
    "device": _Field(
        "device", 'null or a torch device string such as "cpu" or "cuda:0"', lambda v: v is None or isinstance(v, str)
    ),
    "diagnosticsOnChange": _Field("diagnostics_on_change", "true or false", lambda v: isinstance(v, bool)),
    "debounceMs": _Field("debounce_ms", "an integer from 0 to 60000", lambda v: _is_int(v) and 0 <= v <= 60000),
}


def parse_settings(raw: Any) -> tuple[Settings, list[str]]:
    """Settings from a client's JSON, and one message per value that was ignored.

    `raw` is the "dice" section itself, or an object holding it under "dice" (the shape of
    initializationOptions and of some didChangeConfiguration payloads), or None.
    """
    if raw is None:
        return Settings(), []
    if isinstance(raw, Mapping) and isinstance(raw.get("dice"), Mapping):
        raw = raw["dice"]
    if not isinstance(raw, Mapping):
        return Settings(), [f"dice settings must be an object, got {type(raw).__name__}; using defaults"]
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        field = _FIELDS.get(key)
        if field is None:
            problems.append(f"unknown setting dice.{key} ignored (known: {', '.join(_FIELDS)})")
        elif not field.valid(value):
            default = getattr(Settings(), field.attr)
            problems.append(f"dice.{key} = {value!r} is not {field.accepts}; using {default!r}")
        else:
            values[field.attr] = field.convert(value)
    return dataclasses.replace(Settings(), **values), problems
