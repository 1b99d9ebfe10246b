"""What the profiler hands back: compiler diagnostics and a verdict per candidate.

These two dataclasses are the profiler's side of the interface in docs/architecture.md; the
language server and the CLIs turn them into LSP objects and JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Every status a Verdict can carry; the server maps them to editor severities.
STATUSES = (
    "faster",
    "not_faster",
    "wrong",
    "compile_error",
    "timeout",
    "crash",
    "no_gpu",
    "no_spec",
    "error",
    # Measured, but what was measured proves nothing (profiler.verdict.decision says which rule):
    "impossible",  # faster than the GPU's memory or arithmetic allows: the timer did not see the work
    "suspicious",  # over SUSPICIOUS_SPEEDUP times eager PyTorch: more often a cheat than a kernel
    "unstable",  # the timings disagree with themselves or with the baseline timed alone
    "unproven",  # the baseline's outputs do not depend on its inputs: a comparison shows nothing
)
# Statuses whose numbers are proof, one way or the other. Only a verdict with one of these and
# no flag counts in `dice bench`'s correct/fast_p/mean, and only such a "faster" is applied.
PROVEN = ("faster", "not_faster")
# The statuses of a measurement that proves nothing: shown beside what counts, never counted.
NOT_PROOF = ("impossible", "suspicious", "unstable", "unproven")


def proven(status: str, flags: list | None) -> bool:
    """The rule for whether a verdict's numbers count, for Verdict objects and for verdicts as
    JSON (results.json, the editor's cache) alike: a proven status and no flag raised."""
    return status in PROVEN and not flags


@dataclass
class Diagnostic:
    """One compiler message at a place in the user's document (1-based, as compilers print)."""

    line: int
    column: int
    severity: str  # "error" | "warning" | "note"
    message: str

    def to_json(self) -> dict:
        return {"line": self.line, "column": self.column, "severity": self.severity, "message": self.message}

    @classmethod
    def from_json(cls, data: dict) -> "Diagnostic":
        return cls(int(data["line"]), int(data["column"]), str(data["severity"]), str(data["message"]))


@dataclass
class Verdict:
    """Whether one candidate compiled, computes what the baseline computes, and is faster."""

    status: str
    compiled: bool
    correct: bool | None  # None: not measured (no GPU, no spec)
    speedup: float | None  # baseline_ms / time_ms, both medians
    speedup_ci: tuple[float, float] | None  # 95% interval of the speedup
    time_ms: float | None
    baseline_ms: float | None
    diagnostics: list[Diagnostic]
    message: str  # one line for humans
    inputs_checked: int = 0
    gpu: str | None = None
    kernel: str | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    bandwidth_gbs: float | None = None
    peak_bandwidth_gbs: float | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}; expected one of {STATUSES}")

    @property
    def proven(self) -> bool:
        """Whether this verdict's numbers count: a proven status and no flag raised."""
        return proven(self.status, self.extra.get("flags"))

    def to_json(self) -> dict:
        data = asdict(self)
        data["diagnostics"] = [d.to_json() for d in self.diagnostics]
        data["speedup_ci"] = list(self.speedup_ci) if self.speedup_ci is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Verdict":
        fields = dict(data)
        fields["diagnostics"] = [Diagnostic.from_json(d) for d in data.get("diagnostics", [])]
        ci = data.get("speedup_ci")
        fields["speedup_ci"] = (float(ci[0]), float(ci[1])) if ci is not None else None
        return cls(**fields)

    @classmethod
    def failed(cls, status: str, message: str, *, diagnostics: list[Diagnostic] | None = None,
               compiled: bool = False, **extra_fields) -> "Verdict":
        """A verdict with nothing measured: every number None, never invented."""
        return cls(
            status=status,
            compiled=compiled,
            correct=False if status == "wrong" else None,
            speedup=None,
            speedup_ci=None,
            time_ms=None,
            baseline_ms=None,
            diagnostics=diagnostics or [],
            message=message,
            **extra_fields,
        )
