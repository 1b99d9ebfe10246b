"""Attacks on the judge by a hostile candidate, on a machine without a GPU.

A KernelBench candidate is Python that runs inside the sandboxed harness while its module
loads, so every attack here runs for real on the CPU: forging the result, reading the
editor's environment, claiming to build to stretch the time limit, leaving a process
behind, poisoning the build folder of a later candidate. None may yield a correct or
faster verdict, a secret, or a survivor. (The attacks that need a candidate timed on a GPU
are in test_gpu_trust_boundary.py.)
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import time
from pathlib import Path

import pytest

import profiler
from profiler.checks.static import static_flags
from profiler.sandbox.channel import accept_result
from profiler.verdict.decision import SUSPICIOUS_SPEEDUP, from_measurement

_spec = importlib.util.spec_from_file_location("sandbox_cases", Path(__file__).parent.parent / "sandbox_cases.py")
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)
BASELINE, MODEL_NEW, candidate = cases.BASELINE, cases.MODEL_NEW, cases.candidate

# A whole Verdict as JSON, which a candidate might forge, and the measurements the harness sends.
FORGED_VERDICT = {"status": "faster", "compiled": True, "correct": True, "speedup": 50.0,
                  "speedup_ci": [49.0, 51.0], "time_ms": 0.01, "baseline_ms": 0.5, "diagnostics": [],
                  "message": "50.00x faster (49.00-51.00), correct on 4 input sets", "inputs_checked": 4,
                  "gpu": "NVIDIA H200"}
FORGED_MEASUREMENT = {"outcome": "measured", "kind": "kernelbench", "profiling": False, "gpu": "NVIDIA H200",
                      "kernel": "ModelNew", "inputs_checked": 4, "peak_gbs": 4000.0, "bytes_moved": 2048,
                      "timing": {"baseline": [0.5] * 20, "candidate": [0.01] * 20, "seconds": 0.1},
                      "escape": {"baseline": {"flush_ms": [0.08] * 20, "tail_ms": [0.004] * 20},
                                 "candidate": {"flush_ms": [0.08] * 20, "tail_ms": [0.004] * 20}}}

# Writes the forged verdict where the old harness wrote its result, and a forged message
# (with a made-up nonce) on every pipe this process holds, then leaves before the harness
# can answer.
FORGE = f"""
import json as _json, os as _os
_forged = {FORGED_VERDICT!r}
_folder = _os.environ.get("DICE_SANDBOX_DIR", _os.getcwd())
open(_os.path.join(_folder, "result.json"), "w").write(_json.dumps(_forged))
for _fd in _os.listdir("/proc/self/fd"):
    try:
        if _os.readlink(f"/proc/self/fd/{{_fd}}").startswith("pipe:"):
            _os.write(int(_fd), _json.dumps({{"nonce": "0" * 64, "measurement": {FORGED_MEASUREMENT!r}}}).encode())
    except OSError:
        pass
_os._exit(0)
"""


def assert_nothing_proven(verdict: profiler.Verdict) -> None:
    assert verdict.status not in ("faster", "not_faster", "correct_untimed"), verdict.message
    assert verdict.correct is not True and verdict.speedup is None and verdict.time_ms is None
    assert "50.00x" not in verdict.message


def test_a_result_forged_at_module_level_is_a_crash():
    (verdict,) = profiler.judge(BASELINE, [candidate(FORGE)], "relu.py", time_limit=30.0)
    assert_nothing_proven(verdict)
    assert verdict.status == "crash", verdict.message


def test_a_result_forged_from_the_class_body_is_a_crash():
    indented = "\n".join("    " + line for line in FORGE.strip().splitlines())
    body = f"\nclass ModelNew(nn.Module):\n{indented}\n    def forward(self, x):\n        return x\n"
    (verdict,) = profiler.judge(BASELINE, [candidate("", body)], "relu.py", time_limit=30.0)
    assert_nothing_proven(verdict)
    assert verdict.status == "crash", verdict.message


def test_the_channel_accepts_only_one_object_with_the_run_nonce():
    nonce = secrets.token_hex(32)
    genuine = json.dumps({"nonce": nonce, "measurement": {"outcome": "error", "message": "x"}}).encode()
    assert accept_result(genuine, nonce)[0] == {"outcome": "error", "message": "x"}
    forged = json.dumps({"nonce": "0" * 64, "measurement": {"outcome": "error", "message": "x"}}).encode()
    assert accept_result(forged, nonce) == (None, "a result without this run's nonce (forged)")
    # a forged object written before the genuine one: the stream is not one object
    assert accept_result(forged + genuine, nonce)[0] is None
    assert accept_result(b"", nonce) == (None, "no result")


@pytest.mark.usefixtures("unconfined")
def test_the_candidate_sees_no_secret_of_the_editors_environment(tmp_path, monkeypatch):
    secret = "dice-secret-" + secrets.token_hex(8)
    monkeypatch.setenv("DICE_TEST_API_TOKEN", secret)
    monkeypatch.setenv("HF_TOKEN", secret)
    report = tmp_path / "environment.json"
    spy = candidate(f"import json, os\nopen({str(report)!r}, 'w').write(json.dumps("
                    "{'environ': dict(os.environ), 'proc': open('/proc/self/environ').read()}))\n")
    (verdict,) = profiler.judge(BASELINE, [spy], "relu.py", time_limit=30.0)
    seen = report.read_text()
    assert secret not in seen
    environ = json.loads(seen)["environ"]
    assert environ["HOME"] != str(Path.home()) and "dice-sandbox-" in environ["HOME"]
    assert "PATH" in environ  # what a build needs still passes
    assert verdict.status == "no_gpu"
    assert "environment" in verdict.extra["flags"]


def test_claiming_to_build_does_not_stretch_the_time_limit():
    # The harness used to report phases in a file the candidate could write; "building"
    # did not count against the limit (600 s of its own).
    stretch = candidate("""
import os, time
folder = os.environ.get("DICE_SANDBOX_DIR", os.getcwd())
while True:
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                os.write(int(fd), b"build extension\\n")
        except OSError:
            pass
    open(os.path.join(folder, "phase"), "w").write("build extension")
    # and every pipe its ancestors read from, reopened for writing through /proc
    pid = os.getpid()
    for _ in range(4):
        try:  # in namespaces of its own it sees none of its ancestors
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                flags = int(open(f"/proc/{pid}/fdinfo/{fd}").read().split("flags:")[1].split()[0], 8)
                if flags & 3 == 0 and os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                    end = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                    os.write(end, b"compile\\n")
                    os.close(end)
            except (OSError, IndexError, ValueError):
                pass
    time.sleep(0.05)
""")
    started = time.monotonic()
    give_up = started + 90
    (verdict,) = profiler.judge(BASELINE, [stretch], "relu.py", time_limit=3.0,
                                should_cancel=lambda: time.monotonic() > give_up)
    assert verdict.status == "timeout" and "time limit" in verdict.message
    assert time.monotonic() - started < 60


@pytest.mark.usefixtures("unconfined")
def test_a_process_that_leaves_the_session_dies_with_the_sandbox(tmp_path):
    pid_file = tmp_path / "escaped.pid"
    escape = candidate(f"""
import os, time
first = os.fork()
if first == 0:
    os.setsid()  # out of the sandbox's process group
    if os.fork() == 0:  # and orphaned: handed to the nearest subreaper
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    os._exit(0)
os.waitpid(first, 0)
while not os.path.exists({str(pid_file)!r}):
    time.sleep(0.01)
""")
    (verdict,) = profiler.judge(BASELINE, [escape], "relu.py", time_limit=30.0)
    assert verdict.status == "no_gpu", verdict.message
    cases.assert_dies(int(pid_file.read_text()))
    assert "threads" in verdict.extra["flags"]


@pytest.mark.usefixtures("unconfined")
def test_killing_the_keeper_before_escaping_is_a_crash_and_the_escapee_dies(tmp_path):
    pid_file = tmp_path / "escaped.pid"
    escape = candidate(f"""
import os, signal, time
keeper = os.getppid()
if os.fork() == 0:
    os.setsid()
    open({str(pid_file)!r}, "w").write(str(os.getpid()))
    time.sleep(600)
while not os.path.exists({str(pid_file)!r}):
    time.sleep(0.01)
os.kill(keeper, signal.SIGKILL)
time.sleep(600)
""")
    (verdict,) = profiler.judge(BASELINE, [escape], "relu.py", time_limit=30.0)
    assert verdict.status == "crash" and "keeper was killed" in verdict.message, verdict.message
    cases.assert_dies(int(pid_file.read_text()))


def _listing_candidate(report: Path, extra: str = "") -> str:
    """Records what its build folder holds when it starts, then builds (writes a file)."""
    return candidate(f"""
import json, os, pathlib
ext = pathlib.Path(os.environ.get("TORCH_EXTENSIONS_DIR", ""))
with open({str(report)!r}, "a") as report:
    report.write(json.dumps(sorted(os.listdir(ext))) + "\\n")
(ext / "built.so").write_text("built by this candidate")
{extra}
""")


POISON = """
import os, pathlib
ext = pathlib.Path(os.environ.get("TORCH_EXTENSIONS_DIR", ""))
for folder in [ext, *ext.parent.iterdir()]:
    if folder.is_dir():
        (folder / "poison.so").write_text("poison")
"""


@pytest.mark.usefixtures("unconfined")
def test_a_candidate_cannot_poison_a_later_candidates_build(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the old shared cache lived here
    report = tmp_path / "listings.jsonl"
    honest = _listing_candidate(report)
    poisoner = candidate(POISON)
    profiler.judge(BASELINE, [honest, honest], "relu.py", time_limit=30.0)
    first, again = [json.loads(line) for line in report.read_text().splitlines()]
    assert first == [] and again == ["built.so"]  # its own build, verified, is kept for it
    report.unlink()
    honest = _listing_candidate(report, "# another document: a folder of its own, empty at first")
    profiler.judge(BASELINE, [honest, poisoner, honest], "relu.py", time_limit=30.0)
    first, again = [json.loads(line) for line in report.read_text().splitlines()]
    assert first == [] and "poison.so" not in again and again == []  # tampered with: emptied


# ------------------------------------------------------------------ the judge's own checks

def test_timings_that_do_not_fit_the_wall_clock_are_rejected():
    verdict = from_measurement(FORGED_MEASUREMENT, wall_s=5.0)
    assert verdict.status == "suspicious" and not verdict.proven
    assert "more often a cheat" in verdict.message and verdict.speedup > SUSPICIOUS_SPEEDUP
    impossible = {**FORGED_MEASUREMENT, "timing": {"baseline": [500.0] * 20, "candidate": [10.0] * 20}}
    with pytest.raises(ValueError, match="wall clock"):
        from_measurement(impossible, wall_s=5.0)
    unpaired = {**FORGED_MEASUREMENT, "timing": {"baseline": [0.5] * 20, "candidate": [0.01] * 19}}
    with pytest.raises(ValueError, match="paired"):
        from_measurement(unpaired, wall_s=5.0)
    negative = {**FORGED_MEASUREMENT, "timing": {"baseline": [0.5] * 20, "candidate": [-0.01] * 20}}
    with pytest.raises(ValueError, match="positive"):
        from_measurement(negative, wall_s=5.0)


def test_static_checks_name_each_pattern_the_candidate_adds():
    cases = {
        "other_stream": "s = torch.cuda.Stream()\n",
        "threads": "import threading\n",
        "timer_patch": "torch.cuda.Event.elapsed_time = lambda self, end: 0.001\n",
        "comparison_patch": "torch.allclose = lambda *a, **k: True\n",
        "library_patch": "torch.relu = lambda x: x\n",
        "introspection": "import gc\nframes = gc.get_objects()\n",
        "environment": "token = os.environ['HF_TOKEN']\n",
        "file_write": "open('/tmp/x', 'w').write('y')\n",
    }
    # the same under a renaming import (a GPU test's double fork hid behind `import os as _os`)
    renamed = {
        "threads": "import os as _os\nif _os.fork() == 0:\n    _os._exit(0)\n",
        "environment": "import os as q\ntoken = q.getenv('HF_TOKEN')\n",
        "file_write": "from os import unlink as gone\ngone('/tmp/x')\n",
        "library_patch": "import torch.nn.functional as G\nG.relu = lambda x: x\n",
    }
    # a made-up alias (in a string, or never run) hides nothing that was seen without it
    renamed["threads "] = "'''\nimport sys as os\n'''\nimport os\nos.fork()\n"
    renamed["library_patch "] = "if False:\n    import sys as torch\ntorch.relu = lambda x: x\n"
    renamed["threads  "] = "from os import (\n    fork as spawn,\n)\nspawn()\n"
    # the harness reached by a computed import, a module's namespace written through vars()
    renamed["introspection"] = "k = __import__('pro' + 'filer.run.kernelbench')\n"
    renamed["introspection "] = "vars(torch)['re' + 'lu'] = lambda x: x\n"
    for name, code in [*cases.items(), *((n.strip(), c) for n, c in renamed.items())]:
        assert static_flags(candidate(code), BASELINE) == [name], (name, code)
    assert static_flags(candidate("from os import fork as spawn\nspawn()\n"), BASELINE) == ["threads"]
    assert static_flags(candidate(""), BASELINE) == []
    assert static_flags(candidate("torch.backends.cuda.matmul.allow_tf32 = True\n"), BASELINE) == []
    # annotations with defaults are not patches (an honest candidate would be "not judged")
    assert static_flags(candidate("out: torch.Tensor = torch.empty(4)\n"), BASELINE) == []
    assert static_flags(candidate("def f(x: torch.Tensor = None):\n    return x\n"), BASELINE) == []
    # a variable named like a timer is not a patched timer
    assert static_flags(candidate("elapsed_time = 0.0\n"), BASELINE) == []
    # ... but a patch after a colon, deleted or in a tuple, is one
    for patch in ("if True: torch.relu = abs\n", "del torch.relu\n", "torch.relu, y = abs, 1\n",
                  "torch.nn.functional.gelu: object = abs\n"):
        assert static_flags(candidate(patch), BASELINE) == ["library_patch"], patch
    # the user's own baseline reading the environment is not the candidate's doing
    user = BASELINE + "import os\nDEBUG = os.environ.get('DEBUG')\n"
    assert static_flags(user + MODEL_NEW, user) == []


def test_a_flagged_verdict_is_never_applied_by_itself():
    from dice_lsp.core.jobs import best_candidate

    flagged = from_measurement(FORGED_MEASUREMENT, wall_s=5.0)
    honest = from_measurement({**FORGED_MEASUREMENT, "timing": {"baseline": [0.5] * 20, "candidate": [0.25] * 20}},
                              wall_s=5.0)
    assert honest.status == "faster" and "flags" not in honest.extra
    assert best_candidate([flagged, honest]) == 1
    assert best_candidate([flagged]) is None


def test_a_baseline_timed_unlike_the_baseline_alone_is_rejected():
    from profiler.verdict.decision import against_reference

    # A timer patched for the whole process scales the baseline's runs too: 50x faster
    # "measured" against a baseline that took 0.5 ms here and 25 ms alone.
    measured = from_measurement({**FORGED_MEASUREMENT, "timing": {"baseline": [0.5] * 20, "candidate": [0.25] * 20}},
                                wall_s=5.0)
    assert against_reference(measured, 0.6) is measured and measured.extra["reference_ms"] == 0.6
    rejected = against_reference(measured, 25.0)
    assert_nothing_proven(rejected)
    assert rejected.status == "crash" and "timed alone" in rejected.message


def test_a_cheating_pattern_means_nothing_is_proven():
    from profiler.sandbox import SandboxOutcome
    from profiler.verdict.decision import from_outcome

    honest = {**FORGED_MEASUREMENT, "timing": {"baseline": [0.5] * 20, "candidate": [0.25] * 20}}
    outcome = SandboxOutcome("ok", honest, 0, "", 5.0)
    assert from_outcome(outcome, flags=["threads"]).status == "faster"  # flagged, still measured
    verdict = from_outcome(outcome, flags=["timer_patch"])
    assert_nothing_proven(verdict)
    assert verdict.status == "error" and "patches a timer" in verdict.message
    assert verdict.extra["flags"] == ["timer_patch"]


@pytest.mark.slow
def test_a_real_build_counts_against_the_build_allowance_not_the_time_limit():
    # The judge sees the compilers running under the sandbox (no phase the candidate
    # reports): a C++ load_inline build of tens of seconds (torch's headers) fits a 10 s time
    # limit, which the rest of the run (interpreter, imports, load_inline's own set-up) stays
    # well inside even on a busy machine.
    pytest.importorskip("ninja", reason="load_inline needs ninja: pip install ninja")
    name = f"dice_allowance_{secrets.token_hex(4)}"
    building = candidate(f"""
from torch.utils.cpp_extension import load_inline
ext = load_inline(name={name!r}, cpp_sources="int twice(int x) {{ return 2 * x; }}", functions=["twice"])
assert ext.twice(21) == 42
""")
    started = time.monotonic()
    (verdict,) = profiler.judge(BASELINE, [building], "relu.py", time_limit=10.0)
    print(f"{time.monotonic() - started:.1f} s:", verdict.status, verdict.message)
    assert verdict.status == "no_gpu", verdict.message
    assert time.monotonic() - started > 10.0  # it did build, past the time limit


@pytest.mark.usefixtures("unconfined")
def test_the_environment_is_an_allowlist(tmp_path):
    from profiler.sandbox.environment import PACKAGE_ROOT, sandbox_environment

    source = {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "1", "NVIDIA_DRIVER_CAPABILITIES": "all",
              "TORCH_CUDA_ARCH_LIST": "9.0", "CXX": "g++", "HF_TOKEN": "secret", "AWS_SECRET_ACCESS_KEY": "secret",
              "SSH_AUTH_SOCK": "/tmp/agent", "LD_PRELOAD": "/tmp/evil.so", "HOME": "/root",
              "TORCH_EXTENSIONS_DIR": "/shared/cache", "PYTHONPATH": "/opt/lib", "DICE_ENGINE_TOKEN": "secret"}
    env = sandbox_environment(tmp_path, tmp_path / "ext", {"CUDA_VISIBLE_DEVICES": "", "OTHER": "x"}, source)
    assert "secret" not in env.values() and "SSH_AUTH_SOCK" not in env and "LD_PRELOAD" not in env
    assert "OTHER" not in env  # overrides pass the same allowlist
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["NVIDIA_DRIVER_CAPABILITIES"] == "all"
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0" and env["CXX"] == "g++" and env["PATH"].endswith("/usr/bin")
    assert env["HOME"].startswith(str(tmp_path)) and env["TORCH_EXTENSIONS_DIR"] == str(tmp_path / "ext")
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [PACKAGE_ROOT, "/opt/lib"]


def _sampled_run(outputs_per_set: list[list], seeds=(11, 12, 13), signed=(False, True, None)) -> dict:
    """A measurement whose samples are of `outputs_per_set` (numpy arrays), as the harness
    sends them."""
    from profiler.measure.verify import output_sample

    samples = [{"seed": seed, "signed": s, "outputs": [output_sample(a, str(a.dtype), [7, seed, i]) for i, a in
                                                        enumerate(outputs)]}
               for seed, s, outputs in zip(seeds, signed, outputs_per_set)]
    honest = {**FORGED_MEASUREMENT, "timing": {"baseline": [0.5] * 20, "candidate": [0.4] * 20, "seconds": 0.1},
              "escape": FORGED_MEASUREMENT["escape"]}
    return {**honest, "samples": samples}


def test_outputs_are_judged_against_model_run_in_a_process_of_its_own():
    """Model runs in the candidate's process too, where its code can change what Model
    computes (a patch no pattern sees: `torch.__setattr__("re" + "lu", ...)`); the candidate's
    outputs are compared with those of Model run where no candidate code ran."""
    import numpy as np

    from profiler.sandbox import SandboxOutcome
    from profiler.verdict.decision import (against_model_alone, against_reference_outputs, from_outcome,
                                           reference_samples)

    assert static_flags(candidate('torch.__setattr__("re" + "lu", lambda x: x)\n'), BASELINE) == []
    rng = np.random.default_rng(0)
    right = [[rng.standard_normal((64, 33)).astype(np.float32)] for _ in range(3)]
    reference = reference_samples(SandboxOutcome("ok", _sampled_run(right), 0, "", 5.0))

    def judged(measurement: dict) -> profiler.Verdict:
        outcome = SandboxOutcome("ok", measurement, 0, "", 5.0)
        return against_reference_outputs(from_outcome(outcome), outcome, reference)

    # the same outputs, within the float32 tolerance: the verdict stands
    close = [[a + np.float32(1e-6) for a in outputs] for outputs in right]
    honest = judged(_sampled_run(close))
    assert honest.status == "faster" and honest.extra["checked_apart"] == 3
    # what the candidate's process called correct differs from Model run alone on the second set
    changed = [right[0], [np.maximum(right[1][0], 0)], right[2]]
    wrong = judged(_sampled_run(changed))
    assert wrong.status == "wrong" and wrong.correct is False
    assert "input set 2 against Model run in a process of its own" in wrong.message
    assert "baseline_changed" in wrong.extra["flags"]
    # no samples, other input sets, another dtype: nothing proven
    no_samples = judged({k: v for k, v in _sampled_run(close).items() if k != "samples"})
    other_sets = judged(_sampled_run(close, signed=(False, False, None)))
    malformed = _sampled_run(close)
    malformed["samples"][1]["seed"] = [12]  # unhashable
    broken_values = _sampled_run(close)
    broken_values["samples"][0]["outputs"][0]["values"][5] = "x"
    for measurement in (malformed, broken_values):
        verdict = judged(measurement)
        assert verdict.status == "error" and "malformed samples" in verdict.message, verdict.message
    other_dtype = judged(_sampled_run([[outputs[0].astype(np.float64)] for outputs in right]))
    for verdict in (no_samples, other_sets):
        assert verdict.status == "error" and verdict.message.startswith("not judged"), verdict.message
    assert other_dtype.status == "wrong" and "dtype float64, expected float32" in other_dtype.message
    # what the timed calls returned (the third entry) is compared too
    timed_wrong = judged(_sampled_run([right[0], right[1], [right[2][0] * 2]]))
    assert timed_wrong.status == "wrong" and "on the inputs it was timed on" in timed_wrong.message
    # a patch of Model also changes the baseline's time beside the candidate (the H200 run of
    # 2026-12-03: 0.0012 ms beside it, 0.1303 ms alone): outputs are compared first, so the
    # verdict is wrong, not a crash of the measurements
    outcome = SandboxOutcome("ok", _sampled_run(changed), 0, "", 5.0)
    both = against_model_alone(from_outcome(outcome), outcome, from_outcome(outcome).baseline_ms * 100, reference)
    assert both.status == "wrong" and "against Model run in a process of its own" in both.message, both.message
    outcome = SandboxOutcome("ok", _sampled_run(close), 0, "", 5.0)
    slow = against_model_alone(from_outcome(outcome), outcome, from_outcome(outcome).baseline_ms * 100, reference)
    assert slow.status == "crash" and "is not the baseline timed alone" in slow.message
    # without a reference (Model alone did not run to the end) there is nothing to compare, and
    # the verdict says so
    assert reference_samples(SandboxOutcome("crash", None, 1, "", 5.0)) is None
    outcome = SandboxOutcome("ok", _sampled_run(close), 0, "", 5.0)
    assert against_reference_outputs(from_outcome(outcome), outcome, None).extra["checked_apart"] == 0


def test_output_samples_follow_the_comparisons_rules():
    import numpy as np

    from profiler.measure.verify import compare, compare_samples, output_sample

    rng = np.random.default_rng(1)
    base = rng.standard_normal(10_000).astype(np.float32)
    near = base + np.float32(5e-5) * np.float32(np.sqrt(np.mean(base.astype(np.float64) ** 2)))
    off = base.copy()
    off[::2] += 1.0
    for cand in (near, off):
        whole = compare("out", base, cand, "float32")
        sampled = compare_samples("out", output_sample(base, "float32", [3]), output_sample(cand, "float32", [3]))
        assert (whole is None) == (sampled is None)
    ints = np.arange(100, dtype=np.int64)
    assert compare_samples("out", output_sample(ints, "int64", [3]), output_sample(ints, "int64", [3])) is None
    assert compare_samples("out", output_sample(ints, "int64", [3]), output_sample(ints + 1, "int64", [3])) is not None
    # positions drawn from another seed are not a sample of the same elements
    assert compare_samples("out", output_sample(base, "float32", [3]), output_sample(base, "float32", [4])) is not None
    nan = np.array([np.nan, 1.0, np.inf], dtype=np.float32)
    assert compare_samples("out", output_sample(nan, "float32", [0]), output_sample(nan.copy(), "float32", [0])) is None
    # distinct positions, the first and last among them
    sample = output_sample(np.arange(10_000, dtype=np.int64), "int64", [5, 6])
    assert len(set(sample["values"])) == 512 and sample["values"][0] == 0 and sample["values"][-1] == 9_999
    # one element in a thousand wrong, most likely between the samples: the whole output's
    # root mean square still tells
    rare = base.copy()
    rare[1::1000] += 50.0
    assert compare("out", base, rare, "float32") is not None
    assert compare_samples("out", output_sample(base, "float32", [9]), output_sample(rare, "float32", [9])) is not None
    zeros = np.zeros(4096, dtype=np.float32)
    tiny = zeros + np.float32(1e-5)  # within atol * 1.0 of an all-zero output
    assert compare("out", zeros, tiny, "float32") is None
    assert compare_samples("out", output_sample(zeros, "float32", [1]), output_sample(tiny, "float32", [1])) is None


def test_work_that_escaped_the_timed_stream_is_charged_and_never_faster():
    """A candidate whose work runs on another stream, never joined: its events see little, the
    device was busy for long after them (the tails) or beside the flush."""
    escape = {"baseline": {"flush_ms": [0.085] * 20, "tail_ms": [0.004] * 20, "wall_ms": [0.6] * 20},
              "candidate": {"flush_ms": [0.085] * 20, "tail_ms": [0.304] * 20, "wall_ms": [0.4] * 20},
              "other_threads_cpu_s": 0.0}
    measured = {**FORGED_MEASUREMENT, "timing": {"baseline": [0.5] * 20, "candidate": [0.01] * 20, "seconds": 0.1},
                "escape": escape}
    verdict = from_measurement(measured, wall_s=5.0)
    assert verdict.status == "suspicious" and not verdict.proven, verdict.message
    assert "escaped_timer" in verdict.extra["flags"] and verdict.time_ms == pytest.approx(0.31)
    assert "another stream or thread" in verdict.message
