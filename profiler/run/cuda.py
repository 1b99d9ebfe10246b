"""Measure a .cu candidate inside the sandbox (profiler.verdict.decision judges): build with NVRTC
(CuPy), fill inputs, poison outputs, compare with the baseline on fresh input sets, time
both interleaved, and check once more after timing (a kernel that is right only for the
first few calls is caught). The candidate is device code only: none of it runs on the host.

The request (built by profiler.judge) carries the baseline's spec resolved to parameters:
    {"kind": "cuda", "kernel", "baseline": {"source", "filename"}, "candidate": ... | None,
     "params": [{"name", "dtype", "pointer", "role": "input"|"output"|"inout"|"scalar",
                 "count", "value"}], "grid", "block", "shared", "flops", "seeds",
     "time_budget_s", "inputs_on": "device" | "host" (where inputs are drawn; default host)}
A candidate of None profiles the baseline alone: its outputs must be fully written and the
same on two runs, and it is timed without a comparison.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from profiler.checks.compile import content_key, find_nvcc, parse_compiler_output, run_compiler
from profiler.machine import gpu
from profiler.machine.paths import cache_dir
from profiler.measure.timing import TimedRunWrong, sample_one, time_pair
from profiler.measure.verify import compare, constant_across, fingerprint, is_float, poison_byte
from profiler.sandbox.channel import Phase
from profiler.source.dtypes import itemsize, storage_dtype
from profiler.verdict.types import Diagnostic

INT_INPUT_RANGE = {"signed": (-1000, 1000), "unsigned": (0, 1000)}


class CompileFailed(Exception):
    def __init__(self, diagnostics: list[Diagnostic], log: str):
        super().__init__(log)
        self.diagnostics = diagnostics


@dataclass
class Built:
    function: Any  # cupy.RawKernel
    module: Any  # keeps the module (and so the function) alive
    compiler: str  # "nvrtc" | "nvcc"
    registers: int | None = None
    static_shared_bytes: int | None = None


# ------------------------------------------------------------------ build

def _log_filename(log: str, fallback: str) -> str:
    match = re.search(r"^(\S+?)\(\d+\): ", log, re.MULTILINE)
    return match.group(1) if match else fallback


def _nvcc_cubin(source: str, filename: str, arch: str, include_dirs: list[str]) -> tuple[Path, str]:
    """Compile with nvcc to a cubin cached by content hash + arch; (path, ptxas -v log)."""
    nvcc = find_nvcc()
    key = content_key(source, arch, "nvcc-cubin", *include_dirs)
    folder = cache_dir("cubin")
    cubin, log_path = folder / f"{key}.cubin", folder / f"{key}.log"
    if cubin.is_file() and log_path.is_file():
        return cubin, log_path.read_text()
    with tempfile.TemporaryDirectory(prefix="dice-nvcc-") as tmp:
        src = Path(tmp) / (Path(filename).stem + ".cu")
        src.write_text(source)
        # Bounded in memory and time and killed as a process group, as every nvcc run is.
        out = run_compiler([nvcc, "-cubin", f"-arch={arch}", "-std=c++17", "-Xptxas", "-v",
                            *[f"-I{d}" for d in include_dirs], "-o", str(Path(tmp) / "k.cubin"), str(src)],
                           cwd=tmp, time_limit=300)
        log = out.output
        if out.returncode != 0:
            bound = out.bound_hit()
            diagnostics = [] if bound else parse_compiler_output(log, src.name, source)
            raise CompileFailed(diagnostics or [Diagnostic(1, 1, "error", bound or log.strip()[-500:])], log)
        log_path.write_text(log)
        # Copied in under a temporary name, then renamed: a concurrent reader never sees half.
        partial = cubin.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(Path(tmp) / "k.cubin", partial)
        partial.replace(cubin)
    return cubin, log


def _entry_name(ptxas_log: str, kernel: str) -> str:
    """The symbol of `kernel` among the entry functions ptxas compiled (C++-mangled or not)."""
    entries = re.findall(r"Compiling entry function '([^']+)'", ptxas_log)
    for entry in entries:
        if entry == kernel or entry.startswith(f"_Z{len(kernel)}{kernel}"):
            return entry
    raise CompileFailed([Diagnostic(1, 1, "error", f"no entry function for kernel {kernel} (found {entries})")],
                        ptxas_log)


def build(source: str, filename: str, kernel: str, include_dirs: list[str]) -> Built:
    """NVRTC first (CuPy caches it by content and architecture); a document NVRTC cannot
    take (host code, standard headers) is built by nvcc into a cached cubin."""
    import cupy

    options = ("-std=c++17", *[f"-I{d}" for d in include_dirs])
    try:
        module = cupy.RawModule(code=source, options=options, name_expressions=(kernel,))
        function = module.get_function(kernel)
        compiler = "nvrtc"
    except Exception as exc:  # a compile error, or NVRTC refusing the name expression
        log = str(exc)
        if find_nvcc() is None:
            if not isinstance(exc, cupy.cuda.compiler.CompileException):
                raise
            diagnostics = parse_compiler_output(log, _log_filename(log, filename), source)
            raise CompileFailed(diagnostics or [Diagnostic(1, 1, "error", log.strip()[-500:])], log) from exc
        arch = f"sm_{cupy.cuda.Device().compute_capability}"
        cubin, ptxas_log = _nvcc_cubin(source, filename, arch, include_dirs)
        module = cupy.RawModule(path=str(cubin))
        function = module.get_function(_entry_name(ptxas_log, kernel))
        compiler = "nvcc"
    attributes = function.attributes  # also forces the load: a bad module fails here, not later
    return Built(function, module, compiler, attributes.get("num_regs"), attributes.get("shared_size_bytes"))


# ------------------------------------------------------------------ data

def _to_bf16_bits(values):
    """Round float values to bfloat16 bit patterns (numpy or cupy arrays alike)."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16_bits(bits):
    """Widen bfloat16 bit patterns to float32 (numpy or cupy arrays alike)."""
    return (bits.astype("uint32") << 16).view("float32")


def make_inputs(params: list[dict], seed: int, on_device: bool = True) -> dict[str, Any]:
    """Fresh signed random contents for every input and inout buffer, as arrays in their
    device storage dtype: drawn on the device (cuRAND through CuPy: a 16M-element buffer
    costs milliseconds there, a large share of a judging on the host), or with numpy on the
    host (the request's "inputs_on": "host", as before the sandbox pool)."""
    if on_device:
        import cupy

        rng, xp = cupy.random.RandomState(seed), cupy
        integers = rng.randint
    else:
        rng, xp = np.random.default_rng(seed), np
        integers = rng.integers
    inputs: dict[str, Any] = {}
    for p in params:
        if p["role"] not in ("input", "inout"):
            continue
        dtype, count = p["dtype"], p["count"]
        if is_float(dtype):
            values = rng.standard_normal(count, dtype=xp.float32)
            inputs[p["name"]] = _to_bf16_bits(values) if dtype == "bfloat16" else values.astype(dtype)
        elif dtype == "bool":
            inputs[p["name"]] = integers(0, 2, count).astype(xp.bool_)
        else:
            low, high = INT_INPUT_RANGE["unsigned" if dtype.startswith("u") else "signed"]
            inputs[p["name"]] = integers(low, high, count).astype(dtype)
    return inputs


def _scalar(p: dict):
    if p["dtype"] == "bfloat16":
        return _to_bf16_bits(np.array([p["value"]], dtype=np.float32))[0]
    return np.dtype(p["dtype"]).type(p["value"])


# The largest buffer whose host copy is page-locked (Side._host_copy).
PINNED_MAX_BYTES = 1 << 30


@dataclass
class Side:
    """One compiled kernel with buffers of its own (so one side cannot see the other's)."""

    built: Built
    params: list[dict]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    buffers: dict[str, Any] = field(default_factory=dict)
    host: dict[str, np.ndarray] = field(default_factory=dict)  # host copies of buffers (_host_copy)

    def __post_init__(self) -> None:
        import cupy

        for p in self.params:
            if p["pointer"]:
                self.buffers[p["name"]] = cupy.empty(p["count"], dtype=storage_dtype(p["dtype"]))
        if self.shared > 48 * 1024:
            self.built.function.max_dynamic_shared_size_bytes = self.shared
        self.args = tuple(self.buffers[p["name"]] if p["pointer"] else _scalar(p) for p in self.params)

    def load(self, inputs: dict[str, Any], run: int = 0) -> None:
        """Inputs and inouts copied from `inputs` (make_inputs); outputs poisoned with the
        pattern of `run` (profiler.measure.verify.poison_bytes)."""
        import cupy

        for p in self.params:
            if p["name"] in inputs:
                buffer, values = self.buffers[p["name"]], inputs[p["name"]]
                if isinstance(values, np.ndarray):
                    buffer.set(values)
                elif buffer.nbytes != values.nbytes:
                    raise ValueError(f"{p['name']}: {values.nbytes} bytes of inputs for a buffer of {buffer.nbytes}")
                else:
                    buffer.data.copy_from_device(values.data, values.nbytes)
            elif p["role"] == "output":
                self.buffers[p["name"]].view(cupy.uint8).fill(poison_byte(p["dtype"], run))

    def launch(self) -> None:
        self.built.function(self.grid, self.block, self.args, shared_mem=self.shared)

    def outputs(self) -> dict[str, Any]:
        """The outputs, copied to the host, where they are compared: numpy's operations
        are compiled already, while each CuPy operation the comparison would run on the
        device is compiled by NVRTC at its first use in a process, and every judging is a
        new process with a cache of its own: 8 s of a 10.5 s .cu judging on the H200
        (2026-12-03), against milliseconds for the copy and the host comparison.

        The copies land in page-locked buffers of this side's own, made at its first call
        and overwritten by the next (the caller compares before it runs this side again):
        a 64 MB output then takes a DMA copy of ~2 ms, where a new pageable array costs
        its page faults and a staged copy, ~25 ms a set on the H200."""
        result = {}
        for p in self.params:
            if p["role"] in ("output", "inout"):
                buffer = self.buffers[p["name"]]
                values = buffer.get(out=self._host_copy(p["name"], buffer))
                result[p["name"]] = _from_bf16_bits(values) if p["dtype"] == "bfloat16" else values
        return result

    def host_copies(self, inputs_on_host: bool) -> None:
        """Make now the host arrays the checks copy into (an allocation, no copy): every
        output's, and each const input's where inputs are drawn on the host (on the device
        they are compared there)."""
        for p in self.params:
            if p["role"] in ("output", "inout") or (p["role"] == "input" and inputs_on_host):
                self._host_copy(p["name"], self.buffers[p["name"]])

    def _host_copy(self, name: str, buffer) -> np.ndarray:
        """This side's page-locked host array for buffer `name`; pageable for a buffer over
        PINNED_MAX_BYTES (page-locked memory is taken from the machine's RAM for the run) or
        where the driver refuses page-locked memory: slower, the same bytes."""
        if name not in self.host:
            import cupy

            copy = None
            if buffer.nbytes <= PINNED_MAX_BYTES:
                try:
                    # The array holds the memory through its buffer (CuPy's __getbuffer__ sets
                    # itself as the buffer's owner): it is freed with the array.
                    copy = np.frombuffer(cupy.cuda.alloc_pinned_memory(max(1, buffer.nbytes)), buffer.dtype,
                                         buffer.size)
                except cupy.cuda.runtime.CUDARuntimeError:
                    pass
            self.host[name] = copy if copy is not None else np.empty(buffer.size, buffer.dtype)
        return self.host[name]

    def modified_input(self, inputs: dict[str, Any]) -> str | None:
        """The first const input whose buffer no longer holds the bytes loaded into it.
        Inputs drawn on the device are compared there, byte for byte (`_differs`); inputs
        from the host are compared on the host."""
        for p in self.params:
            if p["role"] != "input":
                continue
            values, buffer = inputs[p["name"]], self.buffers[p["name"]]
            if isinstance(values, np.ndarray):
                same = _same_bits(buffer.get(out=self._host_copy(p["name"], buffer)), values)
            else:
                same = values.nbytes == buffer.nbytes and not _differs(buffer, values)
            if not same:
                return p["name"]
        return None


# A byte comparison of two device buffers. A kernel of the judge's own, not CuPy's
# `array_equal`: CuPy compiles each of its operations with NVRTC at its first use in a
# process (an elementwise kernel and a reduction: 3-4 s of every pre-started harness's
# warm-up on the H200, 2026-12-03), this one is compiled in tens of milliseconds.
DIFFERS_SOURCE = r"""
extern "C" __global__ void dice_differs(const unsigned char* a, const unsigned char* b,
                                        unsigned long long n, int* differs)
{
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (a[i] != b[i]) { *differs = 1; return; }
    }
}
"""


@functools.cache
def _differs_kernel():
    import cupy

    return cupy.RawKernel(DIFFERS_SOURCE, "dice_differs")


def _differs(a, b) -> bool:
    """Whether two device arrays of as many bytes differ in any byte."""
    import cupy

    flag = cupy.zeros(1, dtype=cupy.int32)
    n = a.nbytes
    _differs_kernel()((max(1, min((n + 255) // 256, 8192)),), (256,),
                      (a.view(cupy.uint8), b.view(cupy.uint8), np.uint64(n), flag))
    return bool(int(flag.get()[0]))


def _run(side: Side, inputs: dict[str, Any], phase: str, run: int = 0) -> dict[str, Any]:
    import cupy

    Phase.set(phase)
    side.load(inputs, run)
    side.launch()
    # A device-wide synchronize: work the kernel left anywhere must finish before reading.
    cupy.cuda.runtime.deviceSynchronize()
    return side.outputs()


def _mismatch(params: list[dict], base: dict, cand: dict) -> str | None:
    """Why the outputs `cand` differ from `base` (host arrays, Side.outputs), or None."""
    for p in params:
        if p["name"] in base:
            expected, got = base[p["name"]], cand[p["name"]]
            if _same_bits(expected, got):
                continue  # compare finds nothing in two outputs of the same bits
            found = compare(p["name"], expected, got, p["dtype"])
            if found is not None:
                return str(found)
    return None


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Byte for byte the same array: one pass over the bytes, where compare makes a dozen over
    the values (every check of it passes for identical bits: nothing unwritten that the
    baseline wrote, not constant where the baseline varies, no value off, NaN where NaN).
    Compared as the widest unsigned words the size divides into (8 bytes at a time for most
    outputs: a 64 MB output in ~5 ms, where byte by byte took ~40 ms)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    raw_a, raw_b = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
    for word in (np.uint64, np.uint32, np.uint16):
        if raw_a.nbytes % np.dtype(word).itemsize == 0:
            return np.array_equal(raw_a.view(word), raw_b.view(word))
    return np.array_equal(raw_a, raw_b)


def _check_set(reference: Side, other: Side, params: list[dict], seed: int, what: str,
               on_device: bool = True, fingerprints: list | None = None) -> str | None:
    """`other` against `reference` on input set `seed`: `other` runs twice, its outputs poisoned
    with each of the two patterns, so that an element it does not write is wrong in one of
    them. `fingerprints` collects those of the reference's outputs (constant outputs)."""
    # Each side copies its outputs into host arrays of its own, overwritten at its next run:
    # one side on both ends would compare a run with itself.
    assert reference is not other, "a check compares two sides"
    inputs = make_inputs(params, seed, on_device)
    expected = _run(reference, inputs, "baseline run")
    if fingerprints is not None:
        fingerprints.append([fingerprint(expected[name]) for name in sorted(expected)])
    for run in (0, 1):
        got = _run(other, inputs, f"{what} run", run)
        problem = _mismatch(params, expected, got)
        if problem is None and (changed := other.modified_input(inputs)) is not None:
            problem = f"{changed}: the kernel wrote into this const input"
        if problem is not None:
            return problem
    return None


# ------------------------------------------------------------------ the measurement

def _bytes_moved(params: list[dict]) -> int:
    factor = {"input": 1, "output": 1, "inout": 2}
    return sum(factor[p["role"]] * p["count"] * itemsize(p["dtype"]) for p in params if p["pointer"])


def _sizes(params: list[dict]) -> dict:
    """Bytes a kernel must read (inputs, inouts) and write (outputs, inouts), and the GPU's
    facts profiler.verdict.decision's physical bounds need."""
    import cupy

    def total(roles: tuple[str, ...]) -> int:
        return sum(p["count"] * itemsize(p["dtype"]) for p in params if p["pointer"] and p["role"] in roles)

    attribute = cupy.cuda.runtime.deviceGetAttribute
    device = cupy.cuda.Device().id
    capability = cupy.cuda.Device().compute_capability  # "90" for 9.0
    return {"input_bytes": total(("input", "inout")), "output_bytes": total(("output", "inout")),
            "sms": attribute(cupy.cuda.runtime.cudaDevAttrMultiProcessorCount, device),
            "l2_bytes": attribute(cupy.cuda.runtime.cudaDevAttrL2CacheSize, device),
            "capability": f"{capability[:-1]}.{capability[-1]}"}


# A run allocates its buffers before its turn only where AHEAD_ROOM times what it allocates
# is free: the judge lets up to two runs wait, buffers allocated, while one has the GPU, and a
# run that found no memory while waiting would be judged for the others' buffers.
AHEAD_ROOM = 4


def _allocate_ahead(params: list[dict]) -> bool:
    """Whether this run's buffers (both sides') may be allocated before its turn."""
    import cupy

    need = 2 * sum(p["count"] * itemsize(p["dtype"]) for p in params if p["pointer"])
    try:
        free, _ = cupy.cuda.runtime.memGetInfo()
    except cupy.cuda.runtime.CUDARuntimeError:
        return False
    return AHEAD_ROOM * need <= free


def run_cuda(request: dict) -> dict:
    """The measurement of one .cu request (profiler.verdict.decision turns it into a Verdict)."""
    import cupy

    from profiler.run.device import cupy_ops, cupy_peak_bandwidth_gbs

    kernel, params = request["kernel"], request["params"]
    includes = request.get("include_dirs", [])
    launch = (tuple(request["grid"]), tuple(request["block"]), int(request["shared"]))
    Phase.set("compile baseline")
    try:
        base_built = build(request["baseline"]["source"], request["baseline"]["filename"], kernel, includes)
    except CompileFailed as exc:
        return {"outcome": "error", "message": f"the baseline does not compile: {exc.diagnostics[0].message}"}
    candidate = request["candidate"]
    profiling = candidate is None
    Phase.set("compile")
    try:
        cand_built = base_built if profiling else build(candidate["source"], candidate["filename"], kernel,
                                                        includes)
    except CompileFailed as exc:
        return {"outcome": "compile_error", "how": "does not compile", "kernel": kernel,
                "diagnostics": [d.to_json() for d in exc.diagnostics]}
    device = cupy.cuda.Device()
    gpu_name = cupy.cuda.runtime.getDeviceProperties(device.id)["name"].decode()
    on_device = request.get("inputs_on", "host") == "device"

    def allocate() -> tuple[Side, Side]:
        Phase.set("allocate")
        sides = Side(base_built, params, *launch), Side(cand_built, params, *launch)
        for side in sides:
            side.host_copies(inputs_on_host=not on_device)
        return sides

    # Built, loaded, its buffers allocated on the device and page-locked on the host before its
    # turn: no kernel has run (a spare's warm-up does more beside another run). From the turn
    # every step runs work on the GPU: the judge lets one run at a time past it, in order. A
    # run whose buffers do not fit beside the others' (_allocate_ahead, or the allocation
    # failing while it waits) allocates them at its turn instead.
    sides = None
    if _allocate_ahead(params):
        try:
            sides = allocate()
        except cupy.cuda.memory.OutOfMemoryError:
            cupy.get_default_memory_pool().free_all_blocks()
    Phase.wait_turn()
    baseline, cand = sides if sides is not None else allocate()
    what = "second" if profiling else "candidate"
    seeds = request["seeds"]
    common = dict(kind="cuda", profiling=profiling, kernel=kernel, gpu=gpu_name, registers=cand_built.registers,
                  shared_bytes=(cand_built.static_shared_bytes or 0) + launch[2])
    fingerprints: list = []
    for checked, seed in enumerate(seeds[:-1]):
        problem = _check_set(baseline, cand, params, seed, what, on_device, fingerprints)
        if problem is not None:
            return {"outcome": "wrong", "where": checked + 1, "problem": problem, "inputs_checked": checked,
                    "extra": {"seeds": seeds}, **common}
    Phase.set("timing")
    ops = cupy_ops()
    budget = float(request["time_budget_s"])
    extra: dict = {"seeds": seeds, "compiler": cand_built.compiler, "baseline_registers": base_built.registers}
    import secrets

    def fresh(pair: int) -> None:  # new values for every timed pair, from a seed no kernel can know
        values = make_inputs(params, secrets.randbits(31), on_device)
        baseline.load(values)
        cand.load(values)

    sides = (baseline, cand)
    escape = None
    try:
        if profiling:
            timing = {"candidate": sample_one(baseline.launch, ops, budget_s=budget, fresh=fresh)}
        else:
            pair = time_pair(baseline.launch, cand.launch, ops, budget_s=budget, fresh=fresh,
                             keep=lambda side, _: sides[side].outputs(),
                             check=lambda kept: _mismatch(params, kept[0], kept[1]))
            timing = {"baseline": pair.baseline_runs, "candidate": pair.candidate_runs, "seconds": pair.seconds}
            escape = pair.escape_json()
    except TimedRunWrong as exc:
        return {"outcome": "wrong", "where": f"timed run {exc.pair + 1}", "problem": exc.problem,
                "inputs_checked": len(seeds) - 1, "extra": extra, **common}
    extra["clocks_mhz"] = gpu.clocks_mhz()
    # Checked again after the timing runs: right at first and wrong later is still wrong.
    problem = _check_set(baseline, cand, params, seeds[-1], what, on_device, fingerprints)
    if problem is not None:
        return {"outcome": "wrong", "where": "after timing", "problem": problem, "inputs_checked": len(seeds) - 1,
                "timing": timing, "escape": escape, "extra": extra, **common}
    Phase.set("peak bandwidth")
    peak = cupy_peak_bandwidth_gbs(ops, request.get("peak_gbs"))
    return {"outcome": "measured", "inputs_checked": len(seeds), "timing": timing, "escape": escape, "peak_gbs": peak,
            "bytes_moved": _bytes_moved(params), "sizes": _sizes(params), "flops": request.get("flops"),
            "constant_outputs": constant_across(fingerprints), "extra": extra, **common}


# ------------------------------------------------------------------ warm-up

WARM_SOURCE = r"""
extern "C" __global__ void dice_warm_up(float a, const float* x, float* y, float* z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { z[i] = a * x[i] + y[i]; y[i] += 1.0f; }
}
"""
WARM_COUNT = 1024
# Every parameter of WARM_SOURCE, in order (tests/profiler/sandbox/test_sandbox_pool.py checks them
# against the parsed kernel): a launch with fewer arguments than the kernel takes reads past
# the argument array, which segfaulted pre-started harnesses on the H200 (`n` was missing).
WARM_PARAMS = [{"name": "a", "dtype": "float32", "pointer": False, "role": "scalar", "count": None, "value": 2.0}]
WARM_PARAMS += [{"name": name, "dtype": "float32", "pointer": True, "role": role, "count": WARM_COUNT, "value": None}
                for name, role in (("x", "input"), ("y", "inout"), ("z", "output"))]
WARM_PARAMS += [{"name": "n", "dtype": "int32", "pointer": False, "role": "scalar", "count": None, "value": WARM_COUNT}]


def warm_up() -> None:
    """What every .cu request needs before its own work, done by a pre-started harness
    (profiler.sandbox.pool) with its own kernel, so that a request finds it done: CuPy and
    NVRTC loaded, the CUDA context made, the kernels that draw, fill and copy float
    buffers built, and the byte comparison of const inputs (`_differs`; outputs are compared
    on the host, from page-locked copies: the pinned pool opened), the timing loop's buffer
    allocated, NVML open. Tiny work on the GPU, and no timing loop (another process may be
    timing)."""
    from profiler.run.device import cupy_ops

    params = WARM_PARAMS
    built = build(WARM_SOURCE, "warm_up.cu", "dice_warm_up", [])
    first, second = (Side(built, params, ((WARM_COUNT + 255) // 256, 1, 1), (256, 1, 1), 0) for _ in range(2))
    problem = _check_set(first, second, params, 0, "warm-up")
    if problem is not None:
        raise RuntimeError(f"the warm-up kernel disagrees with itself: {problem}")
    cupy_ops()
    gpu.clocks_mhz()
