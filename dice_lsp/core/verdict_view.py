"""How a profiler Verdict reads to people: titles, one-line summaries, hovers, lenses, and the
table `dice profile` prints (the LSP severities are lsp/diagnostics.py's).

Numbers are printed only where the profiler measured them; anything unmeasured says why
("not timed: no GPU") rather than showing a made-up value. A measurement that proves nothing
(profiler.verdict.types.NOT_PROOF, or a flag raised) says so first, in plain words, before any
number of it is read as a speedup.
"""

from __future__ import annotations

from profiler.verdict.decision import SUSPICIOUS_SPEEDUP
from profiler.verdict.types import NOT_PROOF, PROVEN, Diagnostic, Verdict

# What each status that proves nothing means, where the verdict holds no number to say it with.
NOT_PROOF_MEANING = {
    "impossible": "faster than the GPU's memory bandwidth or arithmetic allows: the timer did not see the work",
    "suspicious": f"over {SUSPICIOUS_SPEEDUP:.0f}x eager PyTorch: more often a cheat than a kernel",
    "unstable": "the timings disagree with themselves or with the baseline timed alone: no speedup can be read",
    "unproven": "the baseline's outputs do not depend on its inputs: matching them shows nothing",
}


def _speed(verdict: Verdict) -> str:
    speedup = verdict.speedup
    if speedup is None:
        return ""
    return f"{speedup:.1f}x faster" if speedup >= 1 else f"{1 / speedup:.1f}x slower"


def _why_not_proof(verdict: Verdict) -> str:
    """The reason a NOT_PROOF verdict proves nothing, with its own number where it has one:
    the profiler's message says it first ("impossible: 0.0010 ms implies ..., 190% of the
    GPU's theoretical memory bandwidth (3350 GB/s); nothing proven ..."), else the verdict's
    fields, else what the status means."""
    lead = f"{verdict.status}: "
    if verdict.message.startswith(lead):
        return verdict.message[len(lead):].split("; ", 1)[0]
    if verdict.status == "impossible" and verdict.bandwidth_gbs and verdict.peak_bandwidth_gbs:
        share = verdict.bandwidth_gbs / verdict.peak_bandwidth_gbs
        if share > 1:
            return f"implies {100 * share:.0f}% of the GPU's memory bandwidth"
    if verdict.status == "suspicious" and verdict.speedup is not None:
        return f"{verdict.speedup:.1f}x eager PyTorch, over {SUSPICIOUS_SPEEDUP:.0f}x: more often a cheat than a kernel"
    return NOT_PROOF_MEANING[verdict.status]


def not_proven(verdict: Verdict) -> str | None:
    """What a measured verdict that proves nothing means, in one line ("impossible: implies
    190% of the GPU's memory bandwidth; nothing proven", "flagged (environment): 1.8x faster,
    not proven"); None for a proven verdict and for one that measured nothing."""
    if verdict.status in NOT_PROOF:
        return f"{verdict.status}: {_why_not_proof(verdict)}; nothing proven"
    if verdict.status in PROVEN and not verdict.proven:
        speed = f"{_speed(verdict)}, " if verdict.speedup is not None else ""
        return f"flagged ({', '.join(verdict.extra['flags'])}): {speed}not proven, never applied by itself"
    return None


def summary(verdict: Verdict) -> str:
    """One short line: "1.8x faster, correct on 5 inputs", what a measurement that proves
    nothing means (not_proven), or the profiler's own message."""
    unproven = not_proven(verdict)
    if unproven is not None:
        return unproven
    if verdict.status in PROVEN and verdict.speedup is not None:
        return f"{_speed(verdict)}, correct on {verdict.inputs_checked} inputs"
    return verdict.message


def speedup_with_interval(verdict: Verdict) -> str:
    """ "1.83x (95% interval 1.79-1.88)" of a verdict with a speedup."""
    text = f"{verdict.speedup:.2f}x"
    if verdict.speedup_ci is not None:
        low, high = verdict.speedup_ci
        text += f" (95% interval {low:.2f}-{high:.2f})"
    return text


def candidate_title(index: int, verdict: Verdict) -> str:
    """Code action title; candidates are numbered from 1 for people."""
    return f"Apply candidate {index + 1}: {summary(verdict)}"


def _ms(value: float) -> str:
    return f"{value:.3f} ms" if value < 100 else f"{value:.0f} ms"


def lens_title(verdict: Verdict) -> str:
    """ "0.412 ms, 1.8x faster on NVIDIA H200", why there is no time, or why the time proves
    nothing (not_proven)."""
    unproven = not_proven(verdict)
    if unproven is not None:
        return unproven
    if verdict.time_ms is None:
        return verdict.message
    parts = [_ms(verdict.time_ms)]
    if verdict.speedup is not None:
        parts.append(_speed(verdict))
    where = f" on {verdict.gpu}" if verdict.gpu else ""
    return ", ".join(parts) + where


def hover_markdown(name: str, verdict: Verdict) -> str:
    """Everything measured about one kernel, one fact per line."""
    lines = [f"**{name}**: {verdict.message}", ""]
    if verdict.status in NOT_PROOF:  # a flagged one has its own line below
        lines.append(f"- **{not_proven(verdict)}**: the numbers below are what was measured, not a speedup")
    if verdict.time_ms is not None:
        lines.append(f"- time: {_ms(verdict.time_ms)} (median)")
    if verdict.baseline_ms is not None:
        lines.append(f"- baseline: {_ms(verdict.baseline_ms)}")
    if verdict.speedup is not None:
        lines.append(f"- speedup: {speedup_with_interval(verdict)}")
    if verdict.correct is not None:
        lines.append(f"- correct: {'yes' if verdict.correct else 'no'} on {verdict.inputs_checked} input sets")
    if verdict.extra.get("checked_apart"):
        lines.append(f"- outputs also checked against Model run in a process of its own "
                     f"({verdict.extra['checked_apart']} input sets)")
    if verdict.extra.get("flags"):
        lines.append(f"- flagged: {', '.join(verdict.extra['flags'])} (never applied by itself)")
    if verdict.registers is not None:
        lines.append(f"- registers per thread: {verdict.registers}")
    if verdict.shared_bytes is not None:
        lines.append(f"- shared memory: {verdict.shared_bytes} bytes per block")
    if verdict.bandwidth_gbs is not None:
        peak = ""
        if verdict.peak_bandwidth_gbs:
            peak = f" of {verdict.peak_bandwidth_gbs:.0f} GB/s peak ({100 * verdict.bandwidth_gbs / verdict.peak_bandwidth_gbs:.0f}%)"
        lines.append(f"- bandwidth: {verdict.bandwidth_gbs:.0f} GB/s{peak}")
    lines.append(f"- GPU: {verdict.gpu or 'none (not timed)'}")
    return "\n".join(lines)


def diagnostic_row(d: Diagnostic, path: str) -> str:
    """A diagnostic as compilers print it: PATH:LINE:COLUMN: SEVERITY: MESSAGE."""
    return f"{path}:{d.line}:{d.column}: {d.severity}: {d.message}"


def _table_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} ms"


def verdict_table(verdict: Verdict, path: str) -> str:
    """The verdict as a small two-column table, unmeasured things shown as '-'."""
    speedup = "-" if verdict.speedup is None else speedup_with_interval(verdict)
    correct = "-" if verdict.correct is None else ("yes" if verdict.correct else "no")
    if verdict.inputs_checked:
        correct += f" ({verdict.inputs_checked} input sets)"
    bandwidth = "-"
    if verdict.bandwidth_gbs is not None:
        bandwidth = f"{verdict.bandwidth_gbs:.0f} GB/s"
        if verdict.peak_bandwidth_gbs:
            bandwidth += f" of {verdict.peak_bandwidth_gbs:.0f} GB/s measured peak"
    rows = [
        ("kernel", verdict.kernel or "-"),
        ("gpu", verdict.gpu or "none"),
        ("status", verdict.status),
        ("time", _table_ms(verdict.time_ms) + (" (median)" if verdict.time_ms is not None else "")),
        ("baseline", _table_ms(verdict.baseline_ms)),
        ("speedup", speedup),
        ("correct", correct),
        ("registers", "-" if verdict.registers is None else str(verdict.registers)),
        ("shared", "-" if verdict.shared_bytes is None else f"{verdict.shared_bytes} bytes"),
        ("bandwidth", bandwidth),
    ]
    if "compile_ms" in verdict.extra:
        rows.append(("torch.compile", _table_ms(verdict.extra["compile_ms"])))
    width = max(len(name) for name, _ in rows)
    lines = [f"{path}: {verdict.message}"]
    lines += [f"  {name:<{width}}  {value}" for name, value in rows]
    lines += [diagnostic_row(d, path) for d in verdict.diagnostics]
    return "\n".join(lines)
