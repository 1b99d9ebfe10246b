"""The one place a verdict is decided, in the judge's process, for .cu and KernelBench alike.

The sandboxed harness sends a measurement (raw facts: which input set failed and why, the
timing samples of every run, event-against-wall-clock numbers, the measured peak
bandwidth); this module checks that the measurement is possible and turns it into a
Verdict: correctness, the speedup and its interval (recomputed here from the samples),
status and message. What it cannot check it flags:

- timings that do not fit the process's wall clock (by this process's clock) are
  rejected: a crash verdict, nothing measured;
- a KernelBench candidate's timing is audited (Audit): its times are the runs its process
  reported batch by batch to the judge's clock, charged for time the clock saw it spend
  outside them beyond Model's runs of the same loop, and the baseline's times are Model's,
  timed in that loop in a process that ran no candidate code; a sample of its timed runs'
  fingerprints must be Model's on the same inputs (profiler.measure.fingerprint);
- a baseline time that is not the baseline timed alone before it (Model's first run on the
  problem) within REFERENCE_AGREEMENT makes the timing unstable, past REFERENCE_TOLERANCE it
  is rejected;
- a KernelBench candidate's outputs (samples of them, on the same input sets) that are not
  those of Model run in a process of its own are wrong, whatever the candidate's process
  concluded: Model runs in the candidate's process too, where the candidate's code could
  change what it computes;
- the rules of profiler.verdict.rules: work outside the launching stream's timed region is
  charged to the candidate (flag "escaped_timer"), threads busy beside the runs are flagged
  ("host_threads"); a time faster than the GPU's memory or arithmetic allows is "impossible";
  a baseline whose outputs do not depend on its inputs makes the comparison "unproven";
  timings that drift or spread are "unstable"; the reported interval covers the drift
  between halves of the run and the spread between processes;
- a KernelBench speedup above SUSPICIOUS_SPEEDUP over eager PyTorch is "suspicious";
- the candidate's source is read for patterns of cheating (profiler.checks.static); each
  found is a named flag. A flagged verdict keeps its numbers but is never applied by
  itself (dice_lsp.core.jobs.best_candidate): the user chooses. A candidate that patches the
  timer or the comparison, or reaches into the harness's memory (CHEAT_FLAGS), would
  have written its own numbers: it gets an "error" verdict, nothing proven.

Never imports torch or CuPy (numpy, for the statistics, only when a measurement arrives).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from profiler.sandbox import SandboxOutcome
from profiler.verdict import rules
from profiler.verdict.types import NOT_PROOF, PROVEN, Diagnostic, Verdict

# A KernelBench ModelNew this much faster than eager PyTorch is more often a cheat than a kernel.
SUSPICIOUS_SPEEDUP = 10.0
# Words in CUDA/CuPy/torch error messages that mean the GPU side faulted.
FAULT_WORDS = ("illegal", "misaligned", "launch failure", "out of memory", "cudaError", "CUDA error",
               "unspecified launch", "hardware stack error", "illegal instruction", "ECC")
# How far the baseline timed for a verdict may be from the baseline timed alone before it: past
# REFERENCE_AGREEMENT the timing is unstable (measured again by the judge); past
# REFERENCE_TOLERANCE what was timed did not happen as timed.
REFERENCE_AGREEMENT = 1.25
REFERENCE_TOLERANCE = 3.0
# Flags under which the harness's numbers are the candidate's to choose.
CHEAT_FLAGS = {"timer_patch": "patches a timer", "comparison_patch": "patches a comparison or the profiler",
               "library_patch": "patches a library function the baseline uses too",
               "introspection": "reaches into the harness (frames, objects, raw memory)"}
MISSING_MODULE_HINTS = {"cupy": "pip install 'dice-lsp[gpu]' (cupy-cuda13x)", "torch": "pip install torch"}


# Statuses of a verdict that holds numbers measured by the candidate's process.
MEASURED = PROVEN + NOT_PROOF


class Rejected(ValueError):
    """A measurement that is malformed or impossible."""


@dataclass(frozen=True)
class Reference:
    """What a run of Model alone (no candidate code in its process) says about the baseline:
    its median time, samples of its outputs, and the input sets it ran ({"seeds",
    "sample_seed"}, for the candidates' runs to use too). Empty where there was none."""

    ms: float | None = None
    samples: list[dict] | None = None
    inputs: dict | None = None
    facts: dict | None = None  # sizes, FLOPs, constant outputs (reference_facts)


@dataclass
class Audit:
    """What the judge's own clock and a run of Model alone say about a KernelBench candidate's
    timing (profiler.sandbox.clock, profiler.run.kernelbench.run_audit): the candidate run's
    clock log, the audit run's (Model alone in the same loop: the baseline's times), the runs
    the judge picked after the timing ended (indices into the candidate's runs, in order) with Model's
    fingerprints and their tolerances on each (profiler.measure.fingerprint's fingerprint() and
    tolerance() lists, with the pair's key); `problem` says why there is none to rely on."""

    log: list[dict]
    reference_log: list[dict] = field(default_factory=list)
    audited: list[int] = field(default_factory=list)
    fingerprints: list[list[float]] = field(default_factory=list)
    tolerances: list[list[float]] = field(default_factory=list)
    problem: str = ""

    def disagreement(self, runs: rules.ClockRuns) -> tuple[int, str] | None:
        """(timed run, how) of the first audited pair whose fingerprint is not Model's."""
        from profiler.measure.fingerprint import disagreement

        for index, want, allowed in zip(self.audited, self.fingerprints, self.tolerances):
            found = disagreement(runs.pairs[index][2], want, allowed)
            if found is not None:
                return index + 1, found
        return None


def from_outcome(outcome: SandboxOutcome, *, flags: list[str] | None = None, facts: dict | None = None,
                 audit: Audit | None = None, **fields) -> Verdict:
    """The verdict of one sandboxed run. `fields` (diagnostics, kernel) fill what the
    measurement left empty; `flags` are the static checker's, for a candidate's source;
    `facts` what a run of the baseline alone said about the problem (sizes, FLOPs, constant
    outputs: profiler.verdict.rules), which win over the candidate's process's own."""
    if outcome.status != "ok":
        status = "timeout" if outcome.status == "timeout" else "crash"
        verdict = Verdict.failed(status, f"{'timed out' if status == 'timeout' else 'crashed'}: {outcome.why()}",
                                 **fields)
        verdict.extra["stderr_tail"] = outcome.stderr_tail
    else:
        try:
            verdict = from_measurement(outcome.result, outcome.seconds, facts, audit)
        except (Rejected, KeyError, TypeError, ValueError) as exc:
            verdict = Verdict.failed("crash", f"crashed: measurements rejected: {exc}", **fields)
        for key, value in fields.items():
            if getattr(verdict, key) in (None, []):
                setattr(verdict, key, value)
    if outcome.escaped:
        flags = [*(flags or []), "escaped_sandbox"]
        verdict.message += f"; {outcome.escaped} process(es) outlived the sandbox's keeper and were killed"
    cheats = [name for name in flags or [] if name in CHEAT_FLAGS]
    if cheats and verdict.status in MEASURED:
        reasons = "; ".join(f"{CHEAT_FLAGS[name]} ({name})" for name in cheats)
        untrusted = verdict
        verdict = Verdict.failed("error", f"not judged: the candidate {reasons}, so its measurements are its own",
                                 compiled=untrusted.compiled, gpu=untrusted.gpu, kernel=untrusted.kernel,
                                 extra={"untrusted_message": untrusted.message})
    verdict.extra["isolation"] = outcome.isolation
    if flags:
        _flag(verdict, *flags)
    return verdict


def _flag(verdict: Verdict, *names: str) -> None:
    known = verdict.extra.setdefault("flags", [])
    new = [n for n in names if n not in known]
    known += new
    if new and verdict.status in MEASURED:
        verdict.message += f"; flagged: {', '.join(new)}"


def from_measurement(m: dict, wall_s: float, facts: dict | None = None, audit: Audit | None = None) -> Verdict:
    outcome = m["outcome"]
    if outcome == "fault":
        return _fault(m)
    if outcome == "error":
        return Verdict.failed("error", str(m["message"]))
    if outcome == "no_gpu":
        return Verdict.failed("no_gpu", str(m["message"]), compiled=bool(m["compiled"]))
    if outcome == "compile_error":
        diagnostics = [Diagnostic.from_json(d) for d in m["diagnostics"]]
        if not diagnostics:
            raise Rejected("a compile error without diagnostics")
        first = next((d for d in diagnostics if d.severity == "error"), diagnostics[0])
        kernel = {"kernel": m["kernel"]} if m.get("kernel") else {}
        return Verdict.failed("compile_error", f"{m['how']}: line {first.line}: {first.message}",
                              diagnostics=diagnostics, **kernel)
    if outcome == "wrong":
        return _wrong(m, wall_s)
    if outcome == "measured":
        return _measured(m, wall_s, facts, audit)
    raise Rejected(f"unknown outcome {outcome!r}")


def _fault(m: dict) -> Verdict:
    name = m.get("missing_module")
    if name in MISSING_MODULE_HINTS:
        return Verdict.failed("error", f"the profiler needs {name} to run kernels here: {MISSING_MODULE_HINTS[name]}")
    text = str(m["error"])
    first_line = (text.splitlines() or [""])[0][:400]
    fault = any(word.lower() in text.lower() for word in FAULT_WORDS)
    return Verdict.failed("crash" if fault else "error", f"{m['phase']}: {first_line}", compiled=not m["building"],
                          extra={"traceback": str(m.get("traceback", ""))})


def _common(m: dict) -> dict:
    keys = ("kernel", "gpu", "registers", "shared_bytes")
    return {k: m[k] for k in keys if m.get(k) is not None}


def _samples(values, what: str) -> list[float]:
    if not isinstance(values, list) or not values:
        raise Rejected(f"no {what} timing samples")
    out = [float(v) for v in values]
    if not all(math.isfinite(v) and v > 0 for v in out):
        raise Rejected(f"{what} timing samples that are not positive numbers")
    return out


def _timing(m: dict, wall_s: float, paired: bool = True) -> tuple[list[float] | None, list[float]]:
    """(baseline samples, or None when profiling or when the baseline is timed apart (paired
    False: an audited KernelBench timing, whose candidate's process times none), candidate
    samples), checked against the wall clock of the whole process: runs that took longer than
    the process lived did not happen as reported."""
    timing = m["timing"]
    cand = _samples(timing["candidate"], "candidate")
    base = None if m["profiling"] or not paired else _samples(timing["baseline"], "baseline")
    if base is not None and (len(base) != len(cand) or len(base) < 2):
        raise Rejected("baseline and candidate runs are not paired")
    event_s = (sum(cand) + sum(base or [])) / 1000
    claimed_s = float(timing.get("seconds", 0.0))
    if event_s > wall_s or claimed_s > wall_s:
        raise Rejected(f"the timings ({max(event_s, claimed_s):.2f} s) exceed the process's wall clock "
                       f"({wall_s:.2f} s)")
    return base, cand


def _timing_json(base: list[float] | None, cand: list[float], seconds: float) -> dict:
    from profiler.measure.stats import summarize

    if base is None:
        return summarize(cand).to_json()
    return {"baseline": summarize(base).to_json(), "candidate": summarize(cand).to_json(), "runs": len(cand),
            "baseline_runs": len(base), "seconds": seconds}


def _wrong(m: dict, wall_s: float) -> Verdict:
    extra = dict(m.get("extra", {}))
    where = m["where"]
    if where == "after timing":
        base, cand = _timing(m, wall_s, paired="baseline" in m["timing"])
        extra["timing"] = _timing_json(base, cand, float(m["timing"].get("seconds", 0.0)))
        head = "wrong on the input set checked after timing"
    elif where == "timed run":
        head = f"wrong on timed run {int(m['timed_run'])}"
    else:
        head = f"wrong on input set {int(where)}"
    return Verdict.failed("wrong", f"{head}: {m['problem']}", compiled=True, inputs_checked=int(m["inputs_checked"]),
                          extra=extra, **_common(m))


def _audited_timing(m: dict, audit: Audit, extra: dict, flags: list[str]):
    """(baseline runs, candidate runs, escape records) from the judge's clock rather than from
    the candidate's result: the candidate's runs as its process reported them batch by batch,
    charged for what the clock saw it do outside them beyond Model's runs of the same loop;
    the baseline's runs from Model's own process, which ran no candidate code. Or a wrong
    verdict where an audited run's fingerprint is not Model's. Raises Rejected where a clock's
    log does not hold together."""
    if audit.problem:
        return Verdict.failed("error", f"not judged: {audit.problem}", compiled=True, **_common(m))
    try:
        runs = rules.clock_runs(audit.log)
        reference = rules.clock_runs(audit.reference_log)
    except (ValueError, TypeError, KeyError) as exc:
        raise Rejected(str(exc)) from exc
    wrong = audit.disagreement(runs)
    if wrong is not None:
        number, how = wrong
        return Verdict.failed("wrong", f"wrong on timed run {number} against Model run in a process of its own: "
                                       f"{how}", compiled=True, inputs_checked=int(m["inputs_checked"]),
                              extra={**extra, "checked_apart_pairs": len(audit.audited)}, **_common(m))
    extra["checked_apart_pairs"] = len(audit.audited)
    base, cand = list(reference.sides[0]["event_ms"]), list(runs.sides[0]["event_ms"])
    extra["baseline"] = "Model timed in a process of its own, by the judge's clock"
    try:
        charged, past_limit = rules.clock_excess(runs, reference, extra)
    except ValueError as exc:
        raise Rejected(str(exc)) from exc
    if past_limit:
        flags.append("escaped_clock")
    if charged:
        extra["charged_ms"] = charged
        cand = [ms + charged for ms in cand]
    escape = {"baseline": reference.sides[0], "candidate": runs.sides[0],
              "other_threads_cpu_s": (m.get("escape") or {}).get("other_threads_cpu_s", 0.0),
              "checked_pairs": len(runs.pairs)}
    return base, cand, escape


def _measured(m: dict, wall_s: float, facts: dict | None = None, audit: Audit | None = None) -> Verdict:
    from profiler.measure.stats import CI_METHOD, CI_METHOD_APART, summarize

    # An audited timing is a candidate's, whatever its process says (its result's "profiling"
    # and "kind" are its own to write): the judge audits only candidates' timings.
    audited = audit is not None
    base, cand = _timing(m, wall_s, paired=not audited)
    extra = dict(m.get("extra", {}))
    extra["ci_method"] = CI_METHOD_APART if audited else CI_METHOD
    flags: list[str] = []
    escape = m.get("escape")
    if audited:
        found = _audited_timing(m, audit, extra, flags)
        if isinstance(found, Verdict):
            return found
        base, cand, escape = found
    extra["timing"] = _timing_json(base, cand, float(m["timing"].get("seconds", 0.0)))
    if base is not None:
        if rules.clock_disagreement(escape, base, cand, extra) is not None:
            flags.append("clock_disagrees")
        charged = rules.escaped_work(escape, cand, extra)
        if charged is not None:  # work outside the launching stream's timed region, charged to the candidate
            cand = charged
            flags.append("escaped_timer")
        if rules.busy_threads(escape, float(m["timing"].get("seconds", 0.0)), extra):
            flags.append("host_threads")
    time_ms = summarize(cand).median_ms
    base_ms = None if base is None else summarize(base).median_ms
    checked = int(m["inputs_checked"])
    peak = float(m["peak_gbs"])
    moved = int(m["bytes_moved"])
    bandwidth = moved / (time_ms * 1e-3) / 1e9
    extra["bytes_moved"] = moved
    common = _common(m)
    sizes = dict(inputs_checked=checked, bandwidth_gbs=bandwidth, peak_bandwidth_gbs=peak)
    kernelbench = audited or m["kind"] == "kernelbench"
    if kernelbench:
        roof = f"{bandwidth:.0f} GB/s of inputs+outputs ({100 * bandwidth / peak:.0f}% of the measured {peak:.0f} GB/s)"
    else:
        roof = f"{bandwidth:.0f} GB/s ({100 * bandwidth / peak:.0f}% of the measured {peak:.0f} GB/s)"
        if base_ms is not None:
            extra["baseline_bandwidth_gbs"] = moved / (base_ms * 1e-3) / 1e9
        if m.get("flops"):
            extra["tflops"] = m["flops"] / (time_ms * 1e-3) / 1e12
            if base_ms is not None:
                extra["baseline_tflops"] = m["flops"] / (base_ms * 1e-3) / 1e12
    if base is None:
        if kernelbench:
            message = f"Model: {time_ms:.4f} ms median (eager), {roof}; no ModelNew to compare with"
        else:
            message = (f"{time_ms:.4f} ms median (IQR {extra['timing']['iqr_ms']:.4f} ms), {roof}; outputs fully "
                       f"written and repeatable on {checked} input sets (nothing to compare with)")
        return Verdict("not_faster", True, None, None, None, time_ms, None, [], message, extra=extra, **sizes, **common)
    speedup = rules.reproducible_interval(base, cand, paired=not audited)
    extra["speedup_interval_within_run"] = [speedup.within_low, speedup.within_high]
    against = " vs eager PyTorch Model" if kernelbench else ""
    interval = f"{speedup.low:.2f}-{speedup.high:.2f}"
    numbers = dict(speedup=speedup.ratio, speedup_ci=(speedup.low, speedup.high), time_ms=time_ms,
                   baseline_ms=base_ms)
    facts = {**(m.get("sizes") or {}), **{k: v for k, v in (facts or {}).items() if v is not None}}
    correct: bool | None = True
    broken = rules.physical_bound(facts, peak, time_ms)
    if broken is not None:
        extra["untrusted"] = {**numbers, "speedup_ci": [speedup.low, speedup.high]}
        verdict = Verdict("impossible", True, True, None, None, None, None, [],
                          f"impossible: {broken}; nothing proven (measured {time_ms:.4f} ms against {base_ms:.4f} "
                          f"ms{against})", inputs_checked=checked, extra=extra, **common)
        if flags:
            _flag(verdict, *flags)
        return verdict
    constant = facts.get("constant_outputs", m.get("constant_outputs"))
    unstable = rules.instability(base, cand)
    if constant:
        status, correct = "unproven", None
        head = (f"unproven: the baseline's outputs are the same on every input set, so matching them shows nothing; "
                f"{speedup.ratio:.2f}x ({interval})")
    elif unstable is not None:
        status = "unstable"
        head = f"unstable: {unstable}; {speedup.ratio:.2f}x ({interval}) is not a reproducible number"
    elif kernelbench and speedup.ratio > SUSPICIOUS_SPEEDUP:
        status = "suspicious"
        head = (f"suspicious: {speedup.ratio:.2f}x ({interval}) is over {SUSPICIOUS_SPEEDUP:.0f}x eager PyTorch, "
                f"more often a cheat than a kernel: check")
    elif {"escaped_timer", "clock_disagrees", "escaped_clock"} & set(flags):
        status = "suspicious"
        if "escaped_timer" in flags:
            what = "work outside the stream it was timed on (another stream or thread), charged to it"
        elif "clock_disagrees" in flags:
            what = "its CUDA events read less time than the wall clock saw"
        else:
            what = "the judge's clock saw it spend time outside its timed runs, charged to it"
        head = f"suspicious: {what}; {speedup.ratio:.2f}x ({interval}) with that work counted"
    elif speedup.faster:
        status, head = "faster", f"{speedup.ratio:.2f}x faster ({interval})"
    else:
        status, head = "not_faster", f"not faster: {speedup.ratio:.2f}x ({interval}, 95%)"
    verdict = Verdict(status, True, correct, speedup.ratio, (speedup.low, speedup.high), time_ms, base_ms, [],
                      f"{head}{against}, {'compared' if correct is None else 'correct'} on {checked} input sets; "
                      f"{roof}", extra=extra, **sizes, **common)
    if flags:
        _flag(verdict, *flags)
    return verdict


def against_reference(verdict: Verdict, reference_ms: float | None) -> Verdict:
    """`verdict` when its baseline time agrees with the baseline timed alone (reference_ms,
    in a process that ran no candidate code), else a crash: the candidate's process timed
    what did not happen."""
    if reference_ms is None or verdict.baseline_ms is None or verdict.speedup_ci is None:
        return verdict
    ratio = verdict.baseline_ms / reference_ms
    verdict.extra["reference_ms"] = reference_ms
    if 1 / REFERENCE_AGREEMENT <= ratio <= REFERENCE_AGREEMENT:
        return verdict
    if 1 / REFERENCE_TOLERANCE <= ratio <= REFERENCE_TOLERANCE:
        if verdict.status in ("faster", "not_faster", "suspicious"):
            verdict.status = "unstable"
            verdict.message = (f"unstable: the baseline timed for this verdict ({verdict.baseline_ms:.4f} ms) is "
                               f"{ratio:.2f}x the baseline timed alone ({reference_ms:.4f} ms); "
                               f"{verdict.speedup:.2f}x is not a reproducible number")
        return verdict
    return _overruled(verdict, "crash", f"crashed: measurements rejected: the baseline timed for this "
                                        f"verdict ({verdict.baseline_ms:.4f} ms) is not the baseline timed "
                                        f"alone ({reference_ms:.4f} ms)")


def against_model_alone(verdict: Verdict, outcome: SandboxOutcome, reference_ms: float | None,
                        reference: list[dict] | None) -> Verdict:
    """`verdict` checked against Model run in a process of its own: its outputs first (a
    candidate whose outputs differ from Model alone is wrong, whatever it did to the clock),
    then its baseline time (against_reference_outputs, then against_reference)."""
    if reference is not None:
        verdict = against_reference_outputs(verdict, outcome, reference)
    return against_reference(verdict, reference_ms)


def _overruled(verdict: Verdict, status: str, message: str, *flags: str, **fields) -> Verdict:
    """A verdict that replaces `verdict` after a check in this process: nothing measured, the
    candidate's own message kept as untrusted, its flags (and `flags`) carried over."""
    replaced = Verdict.failed(status, message, compiled=fields.pop("compiled", verdict.compiled), gpu=verdict.gpu,
                              kernel=verdict.kernel, extra={"untrusted_message": verdict.message}, **fields)
    names = [*verdict.extra.get("flags", []), *flags]
    if names:
        _flag(replaced, *names)
    return replaced


def reference_ms(outcome: SandboxOutcome) -> float | None:
    """The median time of Model alone from a profiling run of the baseline (no candidate)."""
    if outcome.status != "ok":
        return None
    verdict = from_outcome(outcome)
    return verdict.time_ms if verdict.status == "not_faster" and verdict.baseline_ms is None else None


FACT_KEYS = ("input_bytes", "output_bytes", "l2_bytes", "flops", "sms", "capability", "signed_ok")


def reference_facts(outcome: SandboxOutcome) -> dict | None:
    """What a run of the baseline alone (no candidate code) says about the problem: the bytes
    its inputs and outputs take, Model's FLOPs, the GPU's SMs and L2, and (from a checking run)
    whether Model's outputs were the same on every input set."""
    if outcome.status != "ok" or outcome.result.get("outcome") not in ("measured", "torch_compile"):
        return None
    sizes = outcome.result.get("sizes")
    if not isinstance(sizes, dict):
        return None
    facts = {k: sizes[k] for k in FACT_KEYS if isinstance(sizes.get(k), (int, float, str))}
    if isinstance(outcome.result.get("constant_outputs"), bool):
        facts["constant_outputs"] = outcome.result["constant_outputs"]
    return facts


def reference_samples(outcome: SandboxOutcome) -> list[dict] | None:
    """The samples of Model's outputs from a run of the baseline alone, or None."""
    if outcome.status != "ok" or outcome.result.get("outcome") != "measured":
        return None
    samples = outcome.result.get("samples")
    return samples if isinstance(samples, list) and samples else None


def against_reference_outputs(verdict: Verdict, outcome: SandboxOutcome, reference: list[dict] | None) -> Verdict:
    """`verdict` when the outputs its process called correct are, on every input set it
    checked and on the inputs it was timed on, those of Model run alone (`reference`,
    profiler.measure.verify's rules); a wrong verdict when they differ; an error, nothing
    proven, when the candidate's process sent no samples, malformed ones, or samples of other
    input sets. extra["checked_apart"]: how many input sets were compared (0: there was no
    reference to compare with)."""
    from profiler.measure.verify import compare_samples

    if verdict.status not in MEASURED or verdict.correct is False:
        return verdict
    if reference is None:
        verdict.extra["checked_apart"] = 0
        return verdict

    def unproven(why: str) -> Verdict:
        return _overruled(verdict, "error", f"not judged: {why}")

    samples = outcome.result.get("samples") if outcome.status == "ok" else None
    if not isinstance(samples, list):
        return unproven("the candidate's process sent no samples of its outputs to compare with Model run alone")
    try:
        expected = {(r["seed"], r["signed"]): r["outputs"] for r in reference}
        got = {(entry["seed"], entry["signed"]): list(entry["outputs"]) for entry in samples}
        if set(got) != set(expected):
            return unproven("the candidate's process checked other input sets than Model run alone did")
        for number, key in enumerate(expected, start=1):
            want, have = expected[key], got[key]
            mismatch = f"{len(have)} output tensors, expected {len(want)}" if len(have) != len(want) else next(
                (str(m) for i, (w, h) in enumerate(zip(want, have))
                 if (m := compare_samples(f"output {i}", w, h)) is not None), None)
            if mismatch is not None:
                where = "the inputs it was timed on" if key[1] is None else f"input set {number}"
                return _overruled(verdict, "wrong", f"wrong on {where} against Model run in a process of its "
                                                    f"own: {mismatch} (in the candidate's own process the outputs "
                                                    f"matched Model there)", "baseline_changed", compiled=True,
                                  inputs_checked=number - 1)
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
        return unproven(f"malformed samples of the candidate's outputs ({type(exc).__name__})")
    verdict.extra["checked_apart"] = len(expected)
    return verdict


def torch_compile_ms(outcome: SandboxOutcome) -> tuple[float | None, float | None, str]:
    """(torch.compile(Model)'s median time, eager Model's, "") from their own sandboxed run,
    or (None, None, why not)."""
    if outcome.status != "ok":
        return None, None, outcome.why()
    m = outcome.result
    if m.get("outcome") != "torch_compile":
        return None, None, from_outcome(outcome).message
    try:
        eager, compiled = _timing({**m, "profiling": False}, outcome.seconds)
    except (Rejected, KeyError, TypeError, ValueError) as exc:
        return None, None, f"measurements rejected: {exc}"
    from profiler.measure.stats import summarize

    return summarize(compiled).median_ms, summarize(eager).median_ms, ""
