"""Every compile is bounded: memory for each process of it, time for the whole, killed as a
process group, and a bound that is hit is a diagnostic that names it. Real nvcc, real files."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import profiler
import profiler.checks.compile
from profiler.checks.compile import DEFAULT_COMPILER_MEMORY, compiler_memory_limit, find_nvcc, run_compiler

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")


def _members_left(session: int, within_s: float = 15.0) -> list[int]:
    """The session's members once it is empty, or after `within_s` (killing a group and
    reaping it takes scheduling, slow on a busy machine; the fault guarded against is a
    compiler left running for minutes)."""
    deadline = time.monotonic() + within_s
    while (members := _session_members(session)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return members


def _session_members(session: int) -> list[int]:
    """Processes whose session is `session` (the compiler's group and anything it started)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            members.append(int(entry))
    return members


@needs_nvcc
def test_an_include_of_a_device_through_a_macro_stops_at_the_memory_bound(tmp_path, monkeypatch):
    # The macro hides the file from the include scan: only the bound stops cc1plus.
    monkeypatch.setenv("DICE_COMPILER_MEMORY", "1G")
    source = "#define ENDLESS </dev/zero>\n#include ENDLESS\n__global__ void k() {}\n"
    started = time.monotonic()
    diagnostics = profiler.check(source, str(tmp_path / "endless.cu"))
    assert time.monotonic() - started < 60
    assert diagnostics[0].severity == "error"
    assert "memory bound of 1 GiB" in diagnostics[0].message
    assert "DICE_COMPILER_MEMORY" in diagnostics[0].message


@needs_nvcc
@pytest.mark.parametrize("include", ["</dev/zero>", '"pipe.h"', '"folder"', '"zero.h"'])
def test_an_include_of_something_other_than_a_file_is_refused_at_its_line(tmp_path, include):
    os.mkfifo(tmp_path / "pipe.h")
    (tmp_path / "folder").mkdir()
    (tmp_path / "zero.h").symlink_to("/dev/zero")
    source = f"// first line\n#include {include}\n__global__ void k() {{}}\n"
    started = time.monotonic()
    (diagnostic,) = profiler.check(source, str(tmp_path / "k.cu"))
    assert time.monotonic() - started < 5
    assert (diagnostic.line, diagnostic.column, diagnostic.severity) == (2, 11, "error")
    kind = {"</dev/zero>": "a character device", '"pipe.h"': "a FIFO", '"folder"': "a folder",
            '"zero.h"': "a character device"}[include]
    assert kind in diagnostic.message


@needs_nvcc
def test_the_time_bound_kills_the_whole_group_and_leaves_no_orphan(tmp_path):
    # cc1plus waits on a FIFO (named through a macro, so the scan cannot see it) until the bound.
    os.mkfifo(tmp_path / "pipe.h")
    (tmp_path / "k.cu").write_text('#define WAIT "pipe.h"\n#include WAIT\n')
    nvcc = find_nvcc()
    sessions: list[int] = []
    real_popen = subprocess.Popen

    class Recorded(real_popen):  # the compiler's pid is its session's id
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            sessions.append(self.pid)

    subprocess.Popen = Recorded
    try:
        started = time.monotonic()
        run = run_compiler([nvcc, "-cubin", "-arch=sm_90", "-I", str(tmp_path), "k.cu"], cwd=str(tmp_path),
                           time_limit=3)
    finally:
        subprocess.Popen = real_popen
    assert run.timed_out
    assert time.monotonic() - started < 30
    assert "time bound of 3 s" in run.bound_hit()
    assert _members_left(sessions[0]) == []


@needs_nvcc
def test_a_load_inline_sized_compile_fits_the_default_bound(repo_root):
    # torch's headers are the largest thing a check compiles (3.5 GiB of address space).
    kernelbench = repo_root / "benchmarks" / "kernelbench_controls" / "level1" / "19_ReLU.correct.py"
    if profiler.checks.kernelbench.torch_include_dirs() is None:
        pytest.skip("torch headers not installed")
    diagnostics = profiler.checks.kernelbench.kernelbench_cuda_diagnostics(kernelbench.read_text(), str(kernelbench))
    assert diagnostics is not None
    assert not [d for d in diagnostics if d.severity == "error"]


def test_the_memory_setting_reads_sizes_and_never_turns_a_typo_into_no_bound(monkeypatch):
    monkeypatch.delenv("DICE_COMPILER_MEMORY", raising=False)
    assert compiler_memory_limit() == DEFAULT_COMPILER_MEMORY
    monkeypatch.setenv("DICE_COMPILER_MEMORY", "4096M")
    assert compiler_memory_limit() == 4 << 30
    monkeypatch.setenv("DICE_COMPILER_MEMORY", "2.5GiB")
    assert compiler_memory_limit() == int(2.5 * (1 << 30))
    monkeypatch.setenv("DICE_COMPILER_MEMORY", "off")
    assert compiler_memory_limit() is None
    for typo in ("6 gigs", "-1", "12"):
        monkeypatch.setenv("DICE_COMPILER_MEMORY", typo)
        assert compiler_memory_limit() == DEFAULT_COMPILER_MEMORY


@needs_nvcc
def test_dice_check_names_the_bound_without_a_traceback(tmp_path, monkeypatch):
    path = tmp_path / "endless.cu"
    path.write_text("#define ENDLESS </dev/zero>\n#include ENDLESS\n")
    env = dict(os.environ, DICE_COMPILER_MEMORY="1G", XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "dice_lsp.cli", "check", str(path)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 1
    assert "memory bound of 1 GiB" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_what_a_compiler_prints_is_read_only_so_far(tmp_path):
    # nvcc echoes the source line with each error: a 6 MB line with 100 errors is 600 MB.
    flood = "import sys\nfor i in range(40):\n    sys.stdout.write(f'k.cu({i}): error: x\\n' + 'y' * 300_000 + '\\n')\n"
    run = run_compiler([sys.executable, "-c", flood], cwd=str(tmp_path))
    assert run.returncode == 0 and run.bound_hit() is None
    lines = run.output.splitlines()
    assert max(map(len, lines)) <= 16 * 1024 + 3
    assert sum(1 for line in lines if ": error: x" in line) == 40


def test_a_compiler_past_the_file_size_bound_is_stopped_and_named(tmp_path, monkeypatch):
    monkeypatch.setattr(profiler.checks.compile, "COMPILER_FILE_BYTES", 1 << 20)
    run = run_compiler(["yes", "what a flood"], cwd=str(tmp_path), time_limit=30)
    assert "bound of 1 MiB for one file" in run.bound_hit()


@needs_nvcc
def test_dice_check_ended_by_sigterm_takes_its_compiler_with_it(tmp_path):
    os.mkfifo(tmp_path / "pipe.h")
    path = tmp_path / "waits.cu"
    path.write_text('#define WAIT "pipe.h"\n#include WAIT\n')  # cc1plus waits on the FIFO
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    check = subprocess.Popen([sys.executable, "-m", "dice_lsp.cli", "check", str(path)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    session = None
    for _ in range(400):  # the compiler's session (another child, a probe, may come and go first)
        for pid in _children_of(check.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    # The compile's nvcc runs in a session of its own; a probe (`nvcc --version`)
                    # may run in this one, whose members are this test's own processes.
                    if b"nvcc" in cmdline.read() and os.getsid(pid) != os.getsid(0):
                        session = os.getsid(pid)
            except (OSError, ProcessLookupError):
                continue
        if session is not None:
            break
        time.sleep(0.05)
    assert session is not None, "nvcc never started"
    time.sleep(0.5)
    check.terminate()
    check.communicate(timeout=30)
    assert _members_left(session) == []


def _children_of(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry))
    return found


@needs_nvcc
def test_the_sandbox_cubin_compile_is_bounded_too(tmp_path, monkeypatch):
    """The .cu runner's own nvcc (a cubin, where NVRTC is not used) runs under the same bounds:
    the include the scan cannot see stops at the memory bound, named, and a plain kernel builds."""
    from profiler.run.cuda import CompileFailed, _nvcc_cubin

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("DICE_COMPILER_MEMORY", "1G")
    with pytest.raises(CompileFailed) as failed:
        _nvcc_cubin("#define ENDLESS </dev/zero>\n#include ENDLESS\n__global__ void k() {}\n", "endless.cu", "sm_90", [])
    assert "memory bound of 1 GiB" in failed.value.diagnostics[0].message
    cubin, log = _nvcc_cubin('extern "C" __global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n', "k.cu", "sm_90", [])
    assert cubin.is_file() and "k" in log
