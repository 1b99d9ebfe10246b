"""The adversarial library on a real GPU: one KernelBench candidate document per known
way to fake a speedup (tests/profiler/adversarial/, README.md there says what each does and
which part of the judge it aims at), each judged through the product's path
(profiler.judge) against a real level1 problem, beside honest controls that must stay
faster. No cheat may come out "faster"; most may not come out proven at all.

The candidates are written as an adversary would write them: correct wherever they expect
to be checked, cheating where a judge might not look, and none of them trips a pattern of
profiler.checks.static, so what stops them is the judge's measurement, not its reading.

Candidates of one problem are judged in one call (their builds run side by side, the
baseline runs alone once). Judging is timing: run this module alone on the GPU, not beside
other GPU tests (`-n`), or the honest controls' speedups are measured under someone else's
load. Needs ninja for load_inline.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

import profiler
from profiler.checks.kernelbench import kernelbench_cuda_diagnostics
from profiler.verdict.types import PROVEN

LIBRARY = Path(__file__).parent.parent / "adversarial"


@dataclass(frozen=True)
class Case:
    file: str  # in LIBRARY
    cheat: str  # the class of cheat (tests/profiler/adversarial/README.md), or "honest"
    expect: str  # "faster": an honest control; "proven": honest, measured for what it is;
    # "never_proven": a cheat whose verdict must not count at all;
    # "not_faster": a cheat that, once the judge's defence holds, can only compute honestly,
    # so a proven not_faster (its honest work, measured) is a right answer too

    def source(self) -> str:
        return (LIBRARY / self.file).read_text()


RELU = "19_ReLU.py"
SOFTMAX = "23_Softmax.py"
MATMUL = "1_Square_matrix_multiplication_.py"
RMSNORM = "36_RMSNorm_.py"

# Each group: (problem, candidates), judged in one profiler.judge call.
RELU_CACHES = (RELU, [
    Case("honest_relu_vec4.py", "honest", "proven"),
    Case("relu_memo_by_address.py", "result reuse keyed on input pointers", "not_faster"),
    Case("relu_memo_by_values.py", "result reuse keyed on sampled input values", "not_faster"),
    Case("relu_answer_from_memory.py", "impossible speed: timed calls answer from memory", "never_proven"),
    Case("relu_worker_thread.py", "work on another host thread", "not_faster"),
    Case("relu_reuse_freed_block.py", "memory reuse: the baseline's freed output", "not_faster"),
    Case("relu_in_place.py", "input mutation: the result written into the input", "not_faster"),
    Case("relu_tagged_input.py", "input mutation: a mark in the input, answered from memory", "not_faster"),
])
RELU_PATCHES = (RELU, [
    Case("relu_lazy_subclass.py", "deferred output: a tensor subclass computed when read", "never_proven"),
    Case("relu_deferred_view.py", "deferred output: a view of a buffer filled when read", "never_proven"),
    Case("relu_slow_baseline_gc.py", "gc: the baseline found in memory and slowed down", "not_faster"),
    Case("relu_event_patch_ctypes.py", "ctypes: the compiled CUDA event type patched", "never_proven"),
    Case("relu_timer_patch_names.py", "timers patched through names built at run time", "never_proven"),
    Case("relu_identity_on_nonnegative.py", "special case: ReLU is the identity on rand() inputs", "not_faster"),
    Case("relu_network.py", "the network: a helper reached over a socket", "not_faster"),
])
SOFTMAX_GROUP = (SOFTMAX, [
    Case("honest_softmax_online.py", "honest", "faster"),
    Case("softmax_side_stream.py", "work on another stream, never joined", "never_proven"),
])
MATMUL_GROUP = (MATMUL, [
    Case("matmul_graph_side_stream.py", "CUDA graph replayed on a side stream, never joined", "never_proven"),
    Case("matmul_tf32.py", "lower precision: TF32 for an FP32 problem", "never_proven"),
    Case("matmul_tf32_nonnegative.py", "lower precision where only rand() inputs are timed", "not_faster"),
    Case("matmul_tf32_unchecked.py", "the loop's comparison switched off, TF32 for an FP32 problem: the "
         "fingerprint's error energy", "never_proven"),
])
RMSNORM_GROUP = (RMSNORM, [
    Case("honest_rmsnorm_fused.py", "honest", "faster"),
])
# Cheats that have read the judge: they read its frames and objects, slow or poison its
# baseline, tell its warm-up and checks from its timed runs, or keep L2 lines across its flush.
RELU_READERS = (RELU, [
    Case("honest_relu_vec4.py", "honest", "proven"),
    Case("relu_reads_checked_set.py", "frames: the checked set read before the runs", "never_proven"),
    Case("relu_takes_held_output.py", "frames: the baseline's output of the pair taken", "not_faster"),
    Case("relu_slows_baseline_slightly.py", "gc: the baseline slowed 18% (none is timed in its process)",
         "not_faster"),
    Case("relu_nan_in_expected.py", "gc: NaN planted in the baseline's outputs, NaN returned", "never_proven"),
    Case("relu_honest_then_cheats.py", "warm-up detection: honest for the first calls, then not", "never_proven"),
    Case("relu_l2_persisting.py", "L2: an access-policy window that persists across the flush", "not_faster"),
])
# Cheats that rewire the timing loop in their own process (found through its frames): its
# work moved into the baseline's timed run (there is none in its process: it finds no such
# loop and runs Model's product), or into the loop's input writes with the L2 flush skipped.
MATMUL_LOOP_GROUP = (MATMUL, [
    Case("matmul_in_baseline_slot.py", "the loop: its work moved into the baseline's timed run", "not_faster"),
    Case("matmul_work_in_input_writes.py", "the loop: its work moved into the input writes, the flush skipped",
         "never_proven"),
])
# A problem of our own whose output is all zeros for every input its get_inputs makes.
DEGENERATE_PROBLEM = "degenerate_problem.py"
DEGENERATE_GROUP = (DEGENERATE_PROBLEM, [
    Case("degenerate_zeros.py", "degenerate problem: a constant answer", "never_proven"),
    Case("degenerate_skip_element.py", "degenerate problem: zeroed output, an element skipped", "never_proven"),
])
GROUPS = [RELU_CACHES, RELU_PATCHES, RELU_READERS, SOFTMAX_GROUP, MATMUL_GROUP, MATMUL_LOOP_GROUP, RMSNORM_GROUP,
          DEGENERATE_GROUP]

# relu_network.py's line naming where it looks for a helper; the test points it at its own listeners.
NETWORK_PEERS = 'PEERS = "tcp:127.0.0.1:47291 abstract:relu-peer unix:/tmp/relu-peer.sock"'


# ReLU and Softmax at 64 rows instead of 4096 (100 MB of inputs instead of 6.4 GB): a run of
# tens of microseconds, where a cheat's gain is largest, and a judging of seconds; what each
# cheat does depends on no size.
SMALLER = {RELU: ("batch_size = 4096", "batch_size = 64"), SOFTMAX: ("batch_size = 4096", "batch_size = 64")}


def problem_source(problem: str, kernelbench_dir: Path) -> str:
    if problem == DEGENERATE_PROBLEM:
        return (LIBRARY / problem).read_text()
    source = (kernelbench_dir / "level1" / problem).read_text()
    if problem in SMALLER:
        old, new = SMALLER[problem]
        assert old in source, f"{problem} no longer holds {old!r}"
        source = source.replace(old, new)
    return source


def failure(case: Case, v: profiler.Verdict) -> str | None:
    """Why `v` is not what `case` expects, or None."""
    said = (f"{case.file} ({case.cheat}): status {v.status}, proven {v.proven}, "
            f"flags {v.extra.get('flags')}: {v.message}")
    if v.status in ("compile_error", "timeout") or "traceback" in v.extra:
        # A candidate that breaks is stopped by its own bug, which proves nothing of the judge.
        return f"the candidate broke (its bug, or a defence it could not survive?): {said}\n" \
               f"{v.extra.get('traceback', '')[-1500:]}"
    if case.expect == "faster":
        return None if v.status == "faster" and v.proven and v.correct is True else f"not proven faster: {said}"
    if case.expect == "proven":
        return None if v.proven and v.correct is True else f"an honest kernel not measured as such: {said}"
    if v.status == "faster":
        return f"a cheat judged faster: {said}"
    if case.expect == "never_proven" and v.proven:
        return f"a cheat's verdict counts (it is in {PROVEN} with no flag): {said}"
    return None


def judge_group(group, kernelbench_dir: Path,
                replace: dict[str, dict[str, str]] | None = None) -> list[profiler.Verdict]:
    """Every candidate of the group judged in one call; each verdict printed."""
    problem, cases = group
    sources = []
    for case in cases:
        source = case.source()
        for old, new in (replace or {}).get(case.file, {}).items():
            assert old in source, f"{case.file} no longer holds {old!r}"
            source = source.replace(old, new)
        sources.append(source)
    verdicts = profiler.judge(problem_source(problem, kernelbench_dir), sources, "model.py", time_limit=300.0)
    for case, v in zip(cases, verdicts):
        print(f"{case.file}: {v.status} proven={v.proven} speedup={v.speedup} ci={v.speedup_ci} "
              f"flags={v.extra.get('flags')} :: {v.message}")
    return verdicts


def assert_expected(group, verdicts: list[profiler.Verdict], *more_problems: str) -> None:
    """Every candidate checked before anything fails, so one verdict does not hide another."""
    _, cases = group
    problems = [why for case, v in zip(cases, verdicts) if (why := failure(case, v)) is not None]
    problems += more_problems
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def ninja_present():
    # torch's load_inline runs `ninja --version`: the binary must be on PATH.
    if shutil.which("ninja") is None:
        pytest.fail("load_inline needs ninja on PATH: pip install ninja (with --target DIR, add DIR/bin to PATH)")


class Listeners:
    """A TCP listener on 127.0.0.1 and an abstract UNIX socket, neither of which any candidate
    may reach (its network namespace has no interface up, and abstract sockets belong to a
    network namespace); each counts the connections waiting in its backlog. A UNIX socket
    file that the candidate's user may open is reachable through the file system (README's
    threat model), so none is offered here."""

    def __init__(self):
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.abstract_name = f"dice-adversarial-{uuid.uuid4().hex[:12]}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        for s in self.sockets().values():
            s.listen(16)
            s.setblocking(False)

    def sockets(self) -> dict[str, socket.socket]:
        return {"tcp 127.0.0.1": self.tcp, "abstract UNIX": self.abstract}

    def peers(self) -> str:
        return f"tcp:127.0.0.1:{self.tcp.getsockname()[1]} abstract:{self.abstract_name}"

    def connections(self) -> dict[str, int]:
        counts = {}
        for name, listener in self.sockets().items():
            counts[name] = 0
            while True:
                try:
                    peer, _ = listener.accept()
                except BlockingIOError:
                    break
                peer.close()
                counts[name] += 1
        return counts

    def close(self) -> None:
        for s in self.sockets().values():
            s.close()


@pytest.fixture
def listeners():
    opened = Listeners()
    yield opened
    opened.close()


@pytest.mark.gpu
@pytest.mark.timeout(1800)
@pytest.mark.usefixtures("ninja_present")
def test_relu_result_caches_inputs_and_memory_prove_nothing(kernelbench_dir):
    assert_expected(RELU_CACHES, judge_group(RELU_CACHES, kernelbench_dir))


@pytest.mark.gpu
@pytest.mark.timeout(1800)
@pytest.mark.usefixtures("ninja_present")
def test_relu_deferred_outputs_patches_and_the_network_prove_nothing(kernelbench_dir, listeners):
    verdicts = judge_group(RELU_PATCHES, kernelbench_dir,
                           replace={"relu_network.py": {NETWORK_PEERS: f'PEERS = "{listeners.peers()}"'}})
    reached = {name: count for name, count in listeners.connections().items() if count}
    assert_expected(RELU_PATCHES, verdicts,
                    *([f"relu_network.py connected to the test's listeners: {reached}"] if reached else []))


@pytest.mark.gpu
@pytest.mark.timeout(1800)
@pytest.mark.usefixtures("ninja_present")
def test_relu_cheats_that_read_the_judge_prove_nothing(kernelbench_dir):
    assert_expected(RELU_READERS, judge_group(RELU_READERS, kernelbench_dir))


@pytest.mark.gpu
@pytest.mark.timeout(1200)
@pytest.mark.usefixtures("ninja_present")
def test_softmax_on_a_side_stream_is_not_the_honest_kernel(kernelbench_dir):
    assert_expected(SOFTMAX_GROUP, judge_group(SOFTMAX_GROUP, kernelbench_dir))


@pytest.mark.gpu
@pytest.mark.timeout(1200)
@pytest.mark.usefixtures("ninja_present")
def test_matmul_graph_replay_and_lower_precision_prove_nothing(kernelbench_dir):
    assert_expected(MATMUL_GROUP, judge_group(MATMUL_GROUP, kernelbench_dir))


@pytest.mark.gpu
@pytest.mark.timeout(1200)
@pytest.mark.usefixtures("ninja_present")
def test_matmul_cheats_that_rewire_the_timing_loop_prove_nothing(kernelbench_dir):
    assert_expected(MATMUL_LOOP_GROUP, judge_group(MATMUL_LOOP_GROUP, kernelbench_dir))


@pytest.mark.gpu
@pytest.mark.timeout(1200)
@pytest.mark.usefixtures("ninja_present")
def test_a_fused_rmsnorm_stays_faster(kernelbench_dir):
    assert_expected(RMSNORM_GROUP, judge_group(RMSNORM_GROUP, kernelbench_dir))


@pytest.mark.gpu
@pytest.mark.timeout(1200)
@pytest.mark.usefixtures("ninja_present")
def test_skipping_work_on_a_degenerate_problem_proves_nothing(kernelbench_dir):
    assert_expected(DEGENERATE_GROUP, judge_group(DEGENERATE_GROUP, kernelbench_dir))


# ------------------------------------------------------------------ without a GPU

# Runs one ReLU candidate's ModelNew on the CPU beside a Model, as a judge's checks would:
# fresh inputs each call (non-negative, then shifted to [-1, 1)), outputs read after the call.
# Prints one JSON list: whether each call matched. A process of its own per candidate, since
# some of them patch torch for the whole process.
CPU_CHECKS = r"""
import importlib.util, json, sys
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return BASELINE

spec = importlib.util.spec_from_file_location("dice_candidate", sys.argv[1])
candidate = importlib.util.module_from_spec(spec)
sys.modules["dice_candidate"] = candidate
spec.loader.exec_module(candidate)
torch.set_grad_enabled(False)
model = Model()
new = candidate.ModelNew()
matched = []
for seed in range(4):
    torch.manual_seed(seed)
    x = torch.rand(64, 4096)
    if seed % 2:
        x = x * 2 - 1
    want = model(x.clone())
    got = new(x.clone())
    matched.append(bool(torch.equal(got.detach(), want)))
print(json.dumps(matched))
"""

# The candidates whose honest path runs on a CPU (no kernel, stream or CUDA event of their
# own), with what their Model computes.
CPU_RUNNABLE = {
    "relu_memo_by_values.py": "torch.relu(x)",
    "relu_answer_from_memory.py": "torch.relu(x)",
    "relu_worker_thread.py": "torch.relu(x)",
    "relu_reuse_freed_block.py": "torch.relu(x)",
    "relu_tagged_input.py": "torch.relu(x)",
    "relu_lazy_subclass.py": "torch.relu(x)",
    "relu_deferred_view.py": "torch.relu(x)",
    "relu_slow_baseline_gc.py": "torch.relu(x)",
    "relu_timer_patch_names.py": "torch.relu(x)",
    "relu_identity_on_nonnegative.py": "torch.relu(x)",
    "degenerate_zeros.py": "torch.relu(x - 1.0)",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CPU_RUNNABLE))
def test_a_cheat_answers_fresh_inputs_right_on_the_cpu(name):
    """Each cheat is correct where a judge checks (fresh inputs, each read after its call): a
    GPU verdict against it then says what the judge caught, not what the cheat got wrong.
    (relu_answer_from_memory answers from memory only after its third call of a shape.)"""
    pytest.importorskip("torch")
    script = CPU_CHECKS.replace("BASELINE", CPU_RUNNABLE[name])
    done = subprocess.run([sys.executable, "-c", script, str(LIBRARY / name)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    matched = json.loads(done.stdout.strip().splitlines()[-1])
    expected = [True, True, True, False] if name == "relu_answer_from_memory.py" else [True] * 4
    assert matched == expected, f"{name}: calls matched {matched}"


@pytest.mark.slow
def test_every_document_of_the_library_is_judged_parses_and_compiles():
    """The library and the table above agree, every document parses, and the CUDA of every
    load_inline compiles (nvcc, no GPU): a GPU run then tests the judge, not a typo."""
    listed = {case.file for _, cases in GROUPS for case in cases} | {DEGENERATE_PROBLEM}
    on_disk = {p.name for p in LIBRARY.glob("*.py")}
    assert listed == on_disk, f"in the folder, not judged: {on_disk - listed}; judged, not there: {listed - on_disk}"
    assert NETWORK_PEERS in (LIBRARY / "relu_network.py").read_text()
    with_cuda = []
    for name in sorted(on_disk):
        source = (LIBRARY / name).read_text()
        compile(source, name, "exec", dont_inherit=True)  # raises SyntaxError
        if "load_inline(" in source:
            with_cuda.append((name, source))
    assert len(with_cuda) >= 5, [name for name, _ in with_cuda]
    for name, source in with_cuda:
        diagnostics = kernelbench_cuda_diagnostics(source, name)
        if diagnostics is None:
            pytest.skip("no nvcc, torch headers or Python headers here to compile the load_inline CUDA with")
        errors = [d for d in diagnostics if d.severity == "error"]
        assert not errors, f"{name}: {errors}"
