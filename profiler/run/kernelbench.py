"""Measure a KernelBench-format document inside the sandbox (profiler.verdict.decision judges):
`Model` of the baseline document against `ModelNew` of the candidate document (its CUDA built by load_inline when the module
is loaded), with the same weights, on fresh inputs from `get_inputs()`.

Inputs: every set uses a fresh seed; float inputs that get_inputs() makes non-negative
(torch.rand) are also tried shifted to [-1, 1), unless the baseline stops being finite on
them (some problems need positive inputs). Every timed pair gets fresh inputs too, written
into the same tensors (profiler.measure.timing), and randomly chosen timed pairs have their
outputs checked. Outputs: returned tensors, which must be plain torch.Tensors (a subclass can
compute its values when read, outside the timed region). "Poisoning" means the allocator's
free blocks of each output's size, and the storage the candidate returned last, are filled
with a byte pattern before every candidate run; each input set is run twice, with two patterns
(profiler.measure.verify.poison_bytes), so an element the kernel leaves unwritten reads as
one pattern or the other, never as the baseline's last result. Inputs are outputs too: the
candidate must leave them as Model does. Model's outputs are fingerprinted on every set: when
they are the same on every set, comparing proves nothing, and the measurement says so.

The candidate's Python runs in this process from the moment its document loads: the phase
pipe is closed first (profiler.sandbox.channel), and everything measured after that is
only as trustworthy as profiler.verdict.decision's cross-checks make it.

The request: {"kind": "kernelbench", "baseline": {"source", "filename"},
"candidate": {...} | None, "seeds", "time_budget_s", "cuda_arch", "sample_seed"}. A candidate of None
times Model alone; "cuda_arch" ("9.0", or None) is the architecture load_inline builds for;
with "sample_seed" the measurement holds samples of every checked output ("samples"), which
the judge compares with those of a run where no candidate code ran.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import time
import types
from pathlib import Path
from typing import Any

from profiler.checks.compile import parse_compiler_output
from profiler.checks.kernelbench import place_in_string
from profiler.machine import gpu
from profiler.measure import fingerprint as prints
from profiler.measure.timing import Audited, sample_one, time_audited, time_pair
from profiler.measure.verify import compare, constant_across, fingerprint, output_sample, poison_bytes
from profiler.sandbox import clock
from profiler.sandbox.channel import Phase
from profiler.verdict.types import Diagnostic

_BUILD_FILE = re.compile(r"^(/\S+?\.(?:cu|cpp))[(:]\d+", re.MULTILINE)


# ------------------------------------------------------------------ loading

# Every load_inline/load call of this process: {"name", "seconds", "cached", "steps"};
# "cached" is true when the call built nothing (its library was there already, e.g. built
# ahead); "steps": what ninja ran, {output: [start_s, end_s]} from the start of its run
# (main.o: the C++ glue, cuda.cuda.o: nvcc, NAME.so: the link).
BUILDS: list[dict] = []


def _build_folder(name: str) -> Path | None:
    try:
        from torch.utils.cpp_extension import _get_build_directory

        return Path(_get_build_directory(name, False))
    except Exception:  # a private helper of torch: without it, say nothing rather than guess
        return None


def _libraries(folder: Path | None) -> dict[str, float]:
    """The extension libraries in a build folder, with their modification times."""
    return {str(p): p.stat().st_mtime for p in folder.glob("*.so")} if folder and folder.is_dir() else {}


def _ninja_log_size(folder: Path | None) -> int:
    try:
        return (folder / ".ninja_log").stat().st_size if folder else 0
    except OSError:
        return 0


def ninja_steps(folder: Path | None, since: int = 0) -> dict[str, list[float]]:
    """The steps ninja logged in `folder` past byte `since` of its .ninja_log: {output:
    [start_s, end_s]}, times from the start of that ninja run (log lines: start_ms end_ms
    mtime output hash)."""
    try:
        with open(folder / ".ninja_log", "rb") as log:  # type: ignore[operator]
            log.seek(since)
            lines = log.read().decode(errors="replace").splitlines()
    except (OSError, TypeError):
        return {}
    steps = {}
    for line in lines:
        fields = line.split("\t")
        if len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit():
            steps[fields[3]] = [int(fields[0]) / 1000, int(fields[1]) / 1000]
    return steps


def _timing_builds_apart() -> None:
    """Have load_inline/load set the phase "build extension" while they build, so that a
    failure there reads as a build failure (the judge tells build time from run time on its
    own, by the compilers it sees running); and record each build in BUILDS."""
    from torch.utils import cpp_extension

    for name in ("load_inline", "load"):
        original = getattr(cpp_extension, name)
        if getattr(original, "dice_wrapped", False):
            continue

        def building(*args, _original=original, **kwargs):
            before = Phase.current
            Phase.set("build extension")
            extension = kwargs.get("name", args[0] if args else "")
            folder = _build_folder(extension)
            libraries, logged, started = _libraries(folder), _ninja_log_size(folder), time.monotonic()
            try:
                return _original(*args, **kwargs)
            finally:
                after = _libraries(folder)
                BUILDS.append({"name": extension, "seconds": round(time.monotonic() - started, 2),
                               "cached": bool(after) and after == libraries, "steps": ninja_steps(folder, logged)})
                Phase.set(before)

        building.dice_wrapped = True
        setattr(cpp_extension, name, building)


def pin_cuda_arch(capability: str | None) -> None:
    """Have load_inline build for exactly this architecture ("9.0" gives "9.0+PTX", what
    torch picks itself for a visible 9.0 GPU), visible GPU or not: a build made ahead with
    the GPU hidden then has the same compiler flags as the judging run's, which finds it in
    the extension cache instead of building again. A TORCH_CUDA_ARCH_LIST of the user wins."""
    if capability and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{capability}+PTX"


def load_document(source: str, filename: str, module_name: str) -> types.ModuleType:
    """Execute a document as a fresh module (this is where load_inline builds its CUDA)."""
    _timing_builds_apart()
    module = types.ModuleType(module_name)
    module.__file__ = filename
    sys.modules[module_name] = module
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _string_constants(document: str) -> list[ast.Constant]:
    try:
        tree = ast.parse(document)
    except SyntaxError:
        return []
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and len(n.value) > 20]


def map_build_log(log: str, document: str) -> list[Diagnostic]:
    """Compiler messages about the files load_inline wrote (cuda.cu, main.cpp) moved to the
    lines of the Python string they came from: the string's text is found in the file, and
    line L of the file maps to the string's first line plus (L - the line it starts on)."""
    diagnostics: list[Diagnostic] = []
    constants = _string_constants(document)
    for path in dict.fromkeys(_BUILD_FILE.findall(log)):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        placed = [(text.index(c.value), c) for c in constants if c.value in text]
        if not placed:
            continue
        start, constant = max(placed, key=lambda pc: len(pc[1].value))
        first_line = text[:start].count("\n") + 1
        # The log names files by full path; parse as if the path were the document's name.
        for d in parse_compiler_output(log, path, text):
            if d.message.startswith("/") or not (first_line <= d.line < first_line + constant.value.count("\n") + 1):
                continue  # a header's message, or torch's own lines around the user's string
            diagnostics.append(place_in_string(document, constant, d, d.line - first_line))
    return diagnostics


def _raising_line(exc: BaseException, filename: str) -> int:
    """The document's line where `exc` was raised (its innermost frame in the document)."""
    line = 1
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _build_failure(exc: BaseException, document: str, filename: str) -> dict:
    log = str(exc)
    if "Ninja is required" in log:  # the machine, not the candidate
        return {"outcome": "error", "message": "load_inline needs ninja on this machine: pip install ninja"}
    diagnostics = map_build_log(log, document)
    if not diagnostics:
        tail = [ln for ln in log.strip().splitlines() if ln.strip()][-3:]
        diagnostics = [Diagnostic(_raising_line(exc, filename), 1, "error",
                                  f"{type(exc).__name__}: {' '.join(tail)[:600]}")]
    return {"outcome": "compile_error", "how": "does not build", "diagnostics": [d.to_json() for d in diagnostics]}


# ------------------------------------------------------------------ data

def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _to_device(values: list) -> list:
    import torch

    return [v.cuda() if isinstance(v, torch.Tensor) else v for v in values]


def cuda_inputs(get_inputs, seed: int) -> list:
    """get_inputs() under `seed`, its tensors made on the GPU directly (gigabytes of
    torch.rand on the CPU would eat the time limit)."""
    import torch

    torch.manual_seed(seed)
    with torch.device("cuda"):
        return _to_device(get_inputs())


def _signed(values: list) -> list:
    """Non-negative float inputs (torch.rand) shifted to [-1, 1)."""
    import torch

    out = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() and bool((v >= 0).all()):
            v = v * 2 - 1
        out.append(v)
    return out


def _clone(values: list) -> list:
    import torch

    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _comparable(t) -> tuple[Any, str]:
    """A tensor as verify.compare takes it, with its dtype's name: compared where it is, with the
    kernels torch ships compiled (CuPy would compile each operation with NVRTC in every judging
    process), bfloat16 too, a chunk at a time."""
    return t.detach(), str(t.dtype).removeprefix("torch.")


def _poison_allocator(like: list, run: int) -> None:
    """Leave blocks of each output's size filled with the output dtype's poison pattern of
    `run` in the caching allocator's free list."""
    import torch

    blocks = [torch.empty(t.numel() * t.element_size(), dtype=torch.uint8, device=t.device).fill_(
        poison_bytes(_comparable(t)[1])[run % 2]) for t in like]
    torch.cuda.synchronize()
    del blocks


def _poison_storage(outputs: list, run: int) -> None:
    """Fill the storage of tensors a candidate returned with the poison pattern of `run`: a
    candidate that returns the same buffer every call finds it poisoned at its next call."""
    import torch

    for t in outputs:
        try:
            if type(t) is torch.Tensor and t.is_cuda:
                storage = t.untyped_storage()
                torch.tensor([], dtype=torch.uint8, device=t.device).set_(storage).fill_(
                    poison_bytes(_comparable(t)[1])[run % 2])
        except RuntimeError:  # a storage that cannot be viewed as bytes: the allocator's poison stays
            pass
    torch.cuda.synchronize()


def subclass_problem(outputs: list) -> str | None:
    """Why outputs that are not plain tensors cannot be judged, or None."""
    import torch

    for i, t in enumerate(outputs):
        if type(t) is not torch.Tensor:
            return (f"output {i} is a {type(t).__module__}.{type(t).__qualname__}, not a plain torch.Tensor: its "
                    "values could be computed when read, outside the timed region")
    return None


def _strict_fp32() -> None:
    """The baseline computes in true fp32: TF32 in cuBLAS/cuDNN would make an exact kernel
    look wrong, and a candidate that switches TF32 on for itself must not switch the
    baseline's on too (set again before every baseline run)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _finite(outputs: list) -> bool:
    """Whether every floating-point output is finite throughout."""
    import torch

    return all(bool(torch.isfinite(t).all()) for t in outputs if t.is_floating_point())


def _mismatch(expected: list, got: list[tuple[Any, str]], tolerance: tuple[float, float] | None = None,
              what: str = "output") -> str | None:
    """How the candidate's outputs (`got`, already _comparable) differ from `expected`."""
    if len(expected) != len(got):
        return f"{len(got)} {what} tensors, expected {len(expected)}"
    for i, (e, (cand, cand_name)) in enumerate(zip(expected, got)):
        base, name = _comparable(e)
        if cand_name != name:
            return f"{what} {i}: dtype torch.{cand_name}, expected {e.dtype}"
        found = compare(f"{what} {i}", base, cand, name, tolerance)
        if found is not None:
            return str(found)
    return None


class Problem:
    """Model (baseline), ModelNew (candidate) and their inputs, in this process."""

    def __init__(self, base_module, cand_module, seed: int, sample_seed: int | None = None,
                 tolerance: tuple[float, float] | None = None):
        import torch

        # Samples of every checked output, for the judge to compare with a run of Model in a
        # process where no candidate code ran (profiler.verdict.decision.against_reference_outputs);
        # None once sampling failed, which the judge reads as nothing to compare.
        self.sample_seed = sample_seed
        self.samples: list[dict] | None = [] if sample_seed is not None else None
        self.tolerance = tolerance  # the protocol's (rtol, atol), or None: the dtype's own
        # Model's output fingerprints, one list per checked input set (verify.constant_across).
        self.fingerprints: list[list[tuple]] = []
        self.returned: list = []  # what the candidate returned last (poisoned before its next run)
        self.like: list | None = None  # empty tensors shaped as Model's outputs (_output_like)

        self.get_inputs = base_module.get_inputs
        init = base_module.get_init_inputs()
        torch.manual_seed(seed)
        self.model = base_module.Model(*init).cuda()
        self.new = None
        self.weights_note = ""
        if cand_module is not None:
            if not hasattr(cand_module, "ModelNew"):
                raise LookupError("the candidate defines no ModelNew")
            torch.manual_seed(seed)
            self.new = cand_module.ModelNew(*init).cuda()
            try:
                result = self.new.load_state_dict(self.model.state_dict(), strict=False)
                if result.missing_keys:
                    self.weights_note = f"ModelNew parameters not in Model: {', '.join(result.missing_keys[:5])}"
            except RuntimeError as exc:  # shapes differ: ModelNew keeps its own (seeded) weights
                self.weights_note = f"weights not copied: {str(exc).splitlines()[0][:200]}"
        self.signed_ok: bool | None = None

    @property
    def runner(self):
        return self.new if self.new is not None else self.model

    def inputs(self, seed: int, signed: bool) -> list:
        values = cuda_inputs(self.get_inputs, seed)
        return _signed(values) if signed else values

    def _output_like(self, signed: bool) -> list:
        """Model's outputs on a throwaway input set: their sizes and dtypes, for poisoning the
        allocator before a candidate's run, with no output of the set being checked alive."""
        import secrets

        import torch

        if self.like is None:
            throwaway = self.inputs(secrets.randbits(31), signed)
            self.like = [torch.empty_like(t) for t in _tensors(self.model(*throwaway))]
            del throwaway
        return self.like

    def check(self, seed: int, signed: bool, what: str) -> str | None:
        """Model against the candidate on input set (seed, signed): the candidate runs first,
        twice, its output memory poisoned with each of the two patterns, and only then Model (no
        output of Model for these inputs exists while the candidate runs); the candidate's
        outputs, and its inputs after the run (Model's after Model's run), must be Model's."""
        import torch

        inputs = self.inputs(seed, signed)
        like = self._output_like(signed)
        runs = []
        for run in (0, 1):
            if self.new is not None:  # Model's own returns are never written over (they may be its weights)
                _poison_storage(self.returned, run)
            _poison_allocator(like, run)
            Phase.set(f"{what} run")
            cand_inputs = _clone(inputs)
            got = _tensors(self.runner(*cand_inputs))
            torch.cuda.synchronize()  # work left on any stream must finish before reading
            self.returned = got
            problem = subclass_problem(got)
            if problem is not None:
                return problem
            # Copied at once: the candidate's code, run again, could change what it returned.
            runs.append(([_comparable(t.detach().clone()) for t in got], _tensors(cand_inputs)))
        Phase.set("baseline run")
        _strict_fp32()
        base_inputs = _clone(inputs)
        expected = _tensors(self.model(*base_inputs))
        torch.cuda.synchronize()
        if signed and self.signed_ok is None:
            self.signed_ok = _finite(expected)
            if not self.signed_ok:
                return None
        self.fingerprints.append([fingerprint(_comparable(t)[0]) for t in expected])
        for run, (comparable, cand_inputs) in enumerate(runs):
            if run == 0:
                self.sample(seed, bool(signed), comparable)
            problem = _mismatch(expected, comparable, self.tolerance)
            if problem is None:
                changed = _mismatch(_tensors(base_inputs), [_comparable(t) for t in cand_inputs],
                                    self.tolerance, "input")
                problem = None if changed is None else f"its inputs after the run are not Model's: {changed}"
            if problem is not None:
                return problem
        return None

    def takes_signed(self, seed: int) -> bool:
        """Whether Model's outputs stay finite on input set `seed` shifted to [-1, 1): check()'s
        rule for signed_ok, on its first signed set, for a process that runs no checks."""
        import torch

        _strict_fp32()
        expected = _tensors(self.model(*self.inputs(seed, True)))
        torch.cuda.synchronize()
        return _finite(expected)

    def sample(self, seed: int, signed: bool | None, outputs: list) -> None:
        """Samples of `outputs` (tensors, or pairs _comparable made of them) of the input set
        (seed, signed); signed None: the inputs the timing runs used."""
        if self.samples is None:
            return
        try:
            pairs = [t if isinstance(t, tuple) else _comparable(t) for t in outputs]
            self.samples.append({"seed": seed, "signed": signed, "outputs": [
                output_sample(array, name, [self.sample_seed, seed, i], self.tolerance)
                for i, (array, name) in enumerate(pairs)]})
        except Exception:  # noqa: BLE001 - an output the sampler cannot read: nothing to compare
            self.samples = None


class TimedInputs:
    """The inputs of the timing runs: one set of tensors per side (an audited timing has one),
    written with fresh values
    before every pair (the same values on both sides), in place, so that the tensors a side is
    called with stay the same objects and addresses while their values never repeat. Pair i
    is signed (shifted to [-1, 1)) when i is odd and `signed` allows it: the judge's reference
    says whether Model takes signed inputs (a candidate's process could lie to itself)."""

    def __init__(self, problem: Problem, seed: int, signed: bool | None = None, sides: int = 2):
        self.problem = problem
        self.signed = bool(problem.signed_ok) if signed is None else bool(signed)
        first = problem.inputs(seed, False)
        self.sides = [_clone(first) for _ in range(sides)]

    def signed_pair(self, pair: int) -> bool:
        return self.signed and pair % 2 == 1

    def fresh(self, pair: int, seed: int | None = None) -> None:
        """Write pair `pair`'s inputs from `seed` (the judge's, profiler.sandbox.clock.pair_seed),
        or from a seed no code in this process can predict."""
        import secrets

        self.write(self.problem.inputs(secrets.randbits(31) if seed is None else seed, self.signed_pair(pair)))

    def write(self, values: list) -> None:
        for side in self.sides:
            write_in_place(side, values)


def write_in_place(targets: list, values: list) -> None:
    """Copy each tensor of `values` into the tensor at its place in `targets` (the other
    arguments stay as they are)."""
    for target, value in zip(targets, values):
        if hasattr(target, "copy_") and hasattr(value, "shape"):
            target.copy_(value)


def model_flops(model, inputs: list) -> int | None:
    """Model's floating-point operations on `inputs`, by torch's flop counter (matrix products
    and convolutions; elementwise work is not counted), or None where it cannot count."""
    try:
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            model(*_clone(inputs))
        return int(counter.get_total_flops()) or None
    except Exception:  # noqa: BLE001 - a model the counter cannot trace: no bound from its FLOPs
        return None


def device_facts() -> dict:
    """What profiler.verdict.decision's physical bounds need from the GPU: SMs, L2 bytes, capability."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"sms": int(props.multi_processor_count), "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
            "capability": f"{props.major}.{props.minor}"}


def _bytes(values) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(values))


# ------------------------------------------------------------------ the measurement

def run_kernelbench(request: dict) -> dict:
    measurement = _run_kernelbench(request)
    if BUILDS:
        measurement.setdefault("extra", {})["builds"] = BUILDS
    return measurement


def _run_kernelbench(request: dict) -> dict:
    import torch

    from profiler.run.device import capture_torch, l2_reset_state, torch_ops, torch_peak_bandwidth_gbs

    torch.set_grad_enabled(False)
    _strict_fp32()
    capture_torch()  # before any document's code runs here
    pin_cuda_arch(request.get("cuda_arch"))
    baseline, candidate = request["baseline"], request["candidate"]
    profiling = candidate is None
    # profile() of a file with a ModelNew: Model and ModelNew come from one module, built once.
    one_file = candidate is not None and candidate["source"] == baseline["source"]
    if not one_file:
        Phase.set("load baseline")
        base_module = load_document(baseline["source"], baseline["filename"], "dice_baseline")
    cand_module = None
    if candidate is not None:
        # The candidate's Python runs from here on: it must not be able to report phases
        # (a build phase would not count against its time limit).
        Phase.close("load candidate")
        try:
            cand_module = load_document(candidate["source"], candidate["filename"], "dice_candidate")
        except Exception as exc:
            if not torch.cuda.is_available():
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                return {"outcome": "no_gpu", "compiled": False,
                        "message": f"not run: no GPU (the candidate cannot be built here: {first})"}
            return _build_failure(exc, candidate["source"], candidate["filename"])
    if one_file:
        base_module = cand_module
    if not torch.cuda.is_available():
        return {"outcome": "no_gpu", "compiled": True, "message": "loaded; not timed: no GPU"}
    seeds = request["seeds"]
    protocol = request.get("protocol") or {}
    tolerance = tuple(protocol["tolerance"]) if protocol.get("tolerance") else None
    gpu_name = torch.cuda.get_device_name()
    Phase.set("construct models")
    problem = Problem(base_module, cand_module, seeds[0], request.get("sample_seed"), tolerance)
    what = "second" if profiling else "candidate"
    common = dict(kind="kernelbench", profiling=profiling, gpu=gpu_name, kernel="ModelNew" if not profiling else "Model")
    extra: dict = {"seeds": seeds, "protocol": protocol.get("name", "dice-lsp"),
                   "persisting_l2_reset": l2_reset_state()}
    if problem.weights_note:
        extra["weights"] = problem.weights_note
    checked = 0
    for i, seed in enumerate(seeds[:-1]):
        signed = i % 2 == 1 and problem.signed_ok is not False
        problem_text = problem.check(seed, signed, what)
        if problem_text is None and signed and problem.signed_ok is False:
            problem_text = problem.check(seed, False, what)  # the baseline needs non-negative inputs
        if problem_text is not None:
            return {"outcome": "wrong", "where": i + 1, "problem": problem_text, "inputs_checked": checked,
                    "extra": extra, **common}
        checked += 1
    extra["signed_inputs"] = bool(problem.signed_ok)
    Phase.set("timing")
    ops = torch_ops()
    # One set of timed tensors: no baseline runs beside the candidate's timing (Model's times
    # come from the audit's process: profiler.measure.timing).
    timed = TimedInputs(problem, seeds[0], request.get("signed_timing"), sides=1)
    (inputs,) = timed.sides
    runner = problem.runner
    base_fn = lambda: problem.model(*inputs)  # noqa: E731 - closures the timer calls
    cand_fn = lambda: runner(*inputs)  # noqa: E731
    budget = float(request["time_budget_s"])
    sizes = {"input_bytes": _bytes(inputs), "output_bytes": _bytes(base_fn()), **device_facts()}
    if profiling:
        sizes["flops"] = model_flops(problem.model, inputs)
        sizes["signed_ok"] = bool(problem.signed_ok)
    escape = None
    if profiling:
        timing = {"candidate": sample_one(base_fn, ops, budget_s=budget, fresh=timed.fresh,
                                          runs=protocol.get("timed_runs"))}
    else:
        done = time_audited(cand_fn, ops, audited(timed), budget_s=budget, runs=protocol.get("timed_runs"))
        timing = {"candidate": done.runs.event_ms, "seconds": done.seconds}
        escape = done.escape_json()
    # What a timed call returns, in the timed tensors, on input set seeds[0], which the judge
    # compares with Model's in a process of its own (Model alone samples the same call).
    timed.write(problem.inputs(seeds[0], False))
    problem.sample(seeds[0], None, _tensors(cand_fn()))
    torch.cuda.synchronize()
    extra["clocks_mhz"] = gpu.clocks_mhz()
    final = problem.check(seeds[-1], bool(problem.signed_ok), what)
    if final is not None:
        return {"outcome": "wrong", "where": "after timing", "problem": final, "inputs_checked": checked,
                "timing": timing, "escape": escape, "extra": extra, **common}
    checked += 1
    Phase.set("peak bandwidth")
    peak = torch_peak_bandwidth_gbs(ops, request.get("peak_gbs"))
    return {"outcome": "measured", "inputs_checked": checked, "timing": timing, "escape": escape, "peak_gbs": peak,
            "bytes_moved": sizes["input_bytes"] + sizes["output_bytes"], "sizes": sizes,
            "constant_outputs": constant_across(problem.fingerprints), "samples": problem.samples, "extra": extra, **common}


def audited(timed: TimedInputs) -> Audited:
    """A timing's pairs in the judge's batches (profiler.sandbox.clock), each pair's inputs from
    its seed, the candidate's output of every pair fingerprinted with the batch's key."""
    return Audited(clock.current(), timed.fresh, lambda kept, key: prints.fingerprint(kept, key), clock.pair_seed)


def run_audit(request: dict) -> dict:
    """Model alone, in a process that runs no candidate code, on pairs of a candidate's timing
    the judge picked after that timing ended: Model's fingerprint of each pair's inputs with
    the pair's key, and how far an agreeing output's may lie (profiler.measure.fingerprint, with
    the protocol's tolerance); then the candidate's timing loop with Model in it, by the
    candidate's rule for how many runs ("timed_runs", else "time_budget_s"), in the judge's
    batches: the baseline's times, and what that loop costs
    outside its timed runs where no candidate code runs, both by the judge's clock.

    The request: {"kind": "kernelbench_audit", "baseline": {"source", "filename"}, "seeds",
    "pairs": [{"seed", "signed", "key"}], "signed_timing", "tolerance", "timed_runs": N,
    "time_budget_s", "cuda_arch"}. A pair marked "signed" has its inputs shifted where Model
    takes signed inputs: "signed_timing" says whether it does, or (None) this process finds
    out as a candidate's checks do, on the first signed input set (seeds[1])."""
    import torch

    from profiler.run.device import capture_torch, torch_ops

    torch.set_grad_enabled(False)
    _strict_fp32()
    capture_torch()
    if not torch.cuda.is_available():
        return {"outcome": "no_gpu", "compiled": False, "message": "not audited: no GPU"}
    pin_cuda_arch(request.get("cuda_arch"))
    Phase.set("load baseline")
    module = load_document(request["baseline"]["source"], request["baseline"]["filename"], "dice_baseline")
    problem = Problem(module, None, request["seeds"][0])
    Phase.set("audit")
    tolerance = tuple(request["tolerance"]) if request.get("tolerance") else None
    signed_ok = request.get("signed_timing")
    if signed_ok is None:
        signed_ok = len(request["seeds"]) > 2 and problem.takes_signed(request["seeds"][1])
    fingerprints, tolerances = [], []
    for pair in request["pairs"]:
        _strict_fp32()
        expected = _tensors(problem.model(*problem.inputs(int(pair["seed"]), bool(signed_ok and pair["signed"]))))
        torch.cuda.synchronize()
        fingerprints.append(prints.fingerprint(expected, int(pair["key"])))
        tolerances.append(prints.tolerance(expected, tolerance, key=int(pair["key"])))
        del expected
    Phase.set("timing")
    timed = TimedInputs(problem, request["seeds"][0], bool(signed_ok), sides=1)
    (inputs,) = timed.sides
    runs = request.get("timed_runs")
    time_audited(lambda: problem.model(*inputs), torch_ops(), audited(timed),
                 budget_s=float(request.get("time_budget_s") or 2.0), runs=None if runs is None else max(2, int(runs)))
    return {"outcome": "audit", "fingerprints": fingerprints, "tolerances": tolerances}


def _compile_caches_beside_the_build() -> None:
    """torch.compile's caches (Inductor's compiled graphs, Triton's kernels) in this run's
    build folder: the document's own, verified between its runs (profiler.sandbox.builds), so
    that profiling the same document again compiles Model from the cache. The sandbox's
    environment names no other cache folder for them; by default they would land in its
    temporary folder, which ends with the run."""
    folder = os.environ.get("TORCH_EXTENSIONS_DIR")
    if folder:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "torchinductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")


def run_torch_compile(request: dict) -> dict:
    """Time torch.compile(Model) against eager Model (a second baseline; merged into the
    candidate's verdict by profiler.judge)."""
    _compile_caches_beside_the_build()
    import torch

    from profiler.run.device import capture_torch, torch_ops

    torch.set_grad_enabled(False)
    _strict_fp32()
    capture_torch()  # before the document's code runs here
    if not torch.cuda.is_available():
        return {"outcome": "no_gpu", "compiled": False, "message": "not timed: no GPU"}
    pin_cuda_arch(request.get("cuda_arch"))  # the flags of the document's judging run: its build is found
    Phase.set("load baseline")
    module = load_document(request["baseline"]["source"], request["baseline"]["filename"], "dice_baseline")
    model = module.Model(*module.get_init_inputs()).cuda()
    inputs = cuda_inputs(module.get_inputs, request["seeds"][0])
    sizes = {"input_bytes": _bytes(inputs), "output_bytes": _bytes(model(*inputs)), "flops": model_flops(model, inputs),
             **device_facts()}
    Phase.set("torch.compile")
    compiled = torch.compile(model)
    compiled(*inputs)  # compiles
    torch.cuda.synchronize()
    Phase.set("timing")

    def fresh(pair: int) -> None:  # as a candidate's timing runs have it: the eager time is their anchor
        import secrets

        write_in_place(inputs, cuda_inputs(module.get_inputs, secrets.randbits(31)))

    pair = time_pair(lambda: model(*inputs), lambda: compiled(*inputs), torch_ops(),
                     budget_s=float(request["time_budget_s"]), fresh=fresh)
    return {"outcome": "torch_compile", "timing": {"baseline": pair.baseline_runs, "candidate": pair.candidate_runs,
                                                   "seconds": pair.seconds}, "sizes": sizes, "extra": {"builds": BUILDS}}
