"""What a judging process keeps between judgments: the GPU's peak bandwidth as a .cu run
measured it (a file in the cache folder, shared by processes), and torch.compile(Model) of a
KernelBench document (in memory, for TTL_S)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable

from profiler.machine.gpu import compute_capability, gpu_name
from profiler.machine.paths import cache_dir
from profiler.sandbox.builds import VerifiedBuilds, reuse_builds
from profiler.verdict.types import Verdict


def _peak_file():
    return cache_dir() / "peak_bandwidth.json"


def known_peak_gbs(gpu: str | None) -> float | None:
    """The GPU's peak bandwidth as a .cu run measured it before, from the judge's own cache."""
    try:
        return float(json.loads(_peak_file().read_text())[gpu])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember_peak(verdict: Verdict) -> None:
    """Keep a peak measured by a .cu run (whose process runs no candidate host code)."""
    if verdict.gpu is None or verdict.peak_bandwidth_gbs is None or known_peak_gbs(verdict.gpu) is not None:
        return
    path = _peak_file()
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known[verdict.gpu] = verdict.peak_bandwidth_gbs
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")  # .cu runs end in threads of their own
    tmp.write_text(json.dumps(known, indent=1))
    tmp.replace(path)  # atomic: two judges measuring at once never leave half a file


@dataclass(frozen=True)
class TorchCompileBaseline:
    """torch.compile(Model) timed against eager Model in a sandbox of its own (no candidate
    code in it): both medians, or why it could not be timed (it may be slow or fail); the
    records of the document's load_inline builds that process found or made."""

    compile_ms: float | None
    eager_ms: float | None
    why: str = ""
    builds: list | None = None
    facts: dict | None = None  # what Model alone says about the problem (profiler.verdict.decision.reference_facts)
    # Seconds since it was measured, when it is a measurement of this process reused
    # (CompiledBaselines); 0 for one made for this verdict.
    age_s: float = 0.0


class CompiledBaselines:
    """torch.compile(Model) of a document, measured once and reused by this process for
    TTL_S: profiling the same document again (the language server's warm case) costs the
    candidate's own run only, not a second process compiling Model for ~10 s. Keyed by the
    whole document (that process loads all of it, ModelNew's load_inline included) and the
    GPU. Only timed measurements are kept (a failure is measured again); DICE_REUSE_BUILDS=0
    keeps nothing. What is reused is Model's eager and compiled times, the second baseline
    and the anchor the candidate's own baseline time is checked against; every check of the
    candidate's own run is made again, and the verdict says how old the reused times are."""

    TTL_S = 600.0
    MAX = 32

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[float, TorchCompileBaseline]] = OrderedDict()
        self._lock = threading.Lock()
        self._measuring: dict[str, threading.Lock] = {}  # a document's second request waits for the first's

    def get(self, document: str, measure: Callable[[], TorchCompileBaseline]) -> TorchCompileBaseline:
        if not reuse_builds():
            return measure()
        key = VerifiedBuilds.key(document, f"{gpu_name()}/{compute_capability()}")
        with self._lock:
            turn = self._measuring.setdefault(key, threading.Lock())
        with turn:
            with self._lock:
                measured, kept = self._kept.get(key, (0.0, None))
                age = time.monotonic() - measured
                if kept is not None and age < self.TTL_S:
                    self._kept.move_to_end(key)
                    return replace(kept, age_s=max(age, 0.1), builds=None)  # no build of this run
            compiled = measure()
            with self._lock:
                if compiled.compile_ms is not None:
                    self._kept[key] = (time.monotonic(), compiled)
                    self._kept.move_to_end(key)
                else:  # not kept: nor its turn (a request waiting on it measures again)
                    self._measuring.pop(key, None)
                while len(self._kept) > self.MAX:
                    dropped, _ = self._kept.popitem(last=False)
                    self._measuring.pop(dropped, None)
            return compiled


COMPILED = CompiledBaselines()
