"""The record of a `dice bench` run: results.json, rewritten atomically after every step.

One TaskRecord per problem moves through three states: "generated" (candidates written,
not judged yet), "done" (every candidate has its verdict) or "error" (the problem could
not be generated or judged; `error` says why). A stopped run resumes from this file:
"done" and "error" problems are kept, "generated" ones are judged without asking the model
again, and problems not in the file start from the beginning.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.json"
FORMAT_VERSION = 1
FINISHED_STATES = ("done", "error")


@dataclass
class CandidateRecord:
    text: str                                        # the generated code (what the model wrote)
    generation: dict[str, Any] = field(default_factory=dict)   # tokens, steps, seconds, finish_reason or source file
    verdict: dict[str, Any] | None = None            # profiler Verdict.to_json(); None until judged


@dataclass
class TaskRecord:
    name: str
    level: str
    path: str
    state: str                                       # "generated" | "done" | "error"
    candidates: list[CandidateRecord] = field(default_factory=list)
    error: str | None = None
    # `dice profile` of the best correct candidate (KernelBench only): {"candidate": index,
    # "verdict": Verdict.to_json()}, whose extra holds the torch.compile(Model) baseline.
    profile: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TaskRecord":
        candidates = [CandidateRecord(**c) for c in data.get("candidates", [])]
        return cls(
            name=data["name"],
            level=data["level"],
            path=data["path"],
            state=data["state"],
            candidates=candidates,
            error=data.get("error"),
            profile=data.get("profile"),
        )


@dataclass
class RunRecord:
    settings: dict[str, Any]          # mode, model, candidates: a resumed run must match them
    tasks: dict[str, TaskRecord] = field(default_factory=dict)   # by task name, in run order
    summary: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "settings": self.settings,
            "summary": self.summary,
            "problems": [asdict(task) for task in self.tasks.values()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunRecord":
        if data.get("format") != FORMAT_VERSION:
            raise ValueError(f"unknown results format {data.get('format')!r}")
        tasks = [TaskRecord.from_json(t) for t in data.get("problems", [])]
        return cls(data["settings"], {t.name: t for t in tasks}, data.get("summary"))


def save(run: RunRecord, out_dir: Path) -> Path:
    """Write results.json so that a reader (or a resume after a kill) never sees half a
    file: write a temporary file in the same folder, then rename it over the old one."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / RESULTS_FILE
    fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=out_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(run.to_json(), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load(out_dir: Path) -> RunRecord:
    """The run recorded in out_dir (raises OSError / ValueError with the reason)."""
    path = out_dir / RESULTS_FILE
    try:
        return RunRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a dice bench results file: {exc}") from exc
