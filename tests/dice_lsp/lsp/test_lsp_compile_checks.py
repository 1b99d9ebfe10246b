"""Compile checks under a burst of saves: one compiler per document at a time, the older
check's compiler killed, and the last check's diagnostics delivered."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from pathlib import Path

import pytest

from ..conftest import end_process, notification, start_stdio_server

pytestmark = [pytest.mark.asyncio, pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"), reason="needs nvcc")]

# About three seconds of nvcc on the CPU box: 400 instantiations of an unrolled kernel.
SLOW = """\
template <int K>
__global__ void step(float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? y[i] : 0.0f;
#pragma unroll
    for (int r = 0; r < 64; ++r) {
        v = v * (1.0f + K * 1e-3f) + __sinf(v + r);
    }
    if (i < n) y[i] = v;
}
""" + "".join(f"template __global__ void step<{k}>(float*, int);\n" for k in range(1, 401))


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every process under `pid`, from /proc; one that has exited and
    waits to be reaped is named so."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        children.setdefault(int(parent), []).append(int(entry))
        names[int(entry)] = name if state != "Z" else f"{name} (exited)"
    found, stack = [], list(children.get(pid, []))
    while stack:
        child = stack.pop()
        found.append((child, names[child]))
        stack.extend(children.get(child, []))
    return found


def compilers(pid: int) -> int:
    """The nvcc processes under `pid`, not counting one forked by an nvcc: between fork and exec
    the child that will be cicc or ptxas still bears its parent's name (a loaded machine shows
    it: "3 compilers at once with 2 slots")."""
    under = dict(descendants(pid))
    parents = {}
    for child in under:
        with contextlib.suppress(OSError, ValueError):
            stat = Path(f"/proc/{child}/stat").read_text()
            parents[child] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return sum(1 for child, name in under.items() if name == "nvcc" and under.get(parents.get(child)) != "nvcc")


async def test_six_saves_one_second_apart_run_one_compiler_at_a_time(child_env, tmp_path: Path):
    """Each save started another nvcc and cancelled checks kept running: six 2 GB compilers
    at once for a load_inline file."""
    process, client = await start_stdio_server(child_env)
    peak = 0
    watching = True

    async def watch() -> None:
        nonlocal peak
        while watching:
            peak = max(peak, compilers(process.pid))
            await asyncio.sleep(0.05)

    try:
        await client.initialize(tmp_path)
        path = tmp_path / "slow.cu"
        path.write_text(SLOW)
        uri = path.as_uri()
        watcher = asyncio.ensure_future(watch())
        client.send(notification("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda", "version": 1, "text": SLOW}}))
        for _ in range(6):
            await asyncio.sleep(1.0)
            client.send(notification("textDocument/didSave", {"textDocument": {"uri": uri}}))

        deadline = asyncio.get_running_loop().time() + 120
        while not any(m.get("method") == "textDocument/publishDiagnostics" for m in client.received):
            assert asyncio.get_running_loop().time() < deadline, "no diagnostics after the last save"
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        left = [p for p in descendants(process.pid) if p[1] in ("nvcc", "cicc", "ptxas", "cudafe++")]
        watching = False
        await watcher
    finally:
        watching = False
        await end_process(process)
    assert peak == 1, f"{peak} compilers ran at once for one document"
    assert left == [], f"compilers left running after the last check: {left}"


async def test_a_killed_server_takes_its_compiler_down(child_env, tmp_path: Path):
    """The checks run in processes of their own: a server that is killed outright (no
    shutdown, no chance to cancel) must not leave a compiler running for minutes."""
    process, client = await start_stdio_server(child_env)
    try:
        await client.initialize(tmp_path)
        path = tmp_path / "slow.cu"
        path.write_text(SLOW)
        client.send(notification("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "cuda", "version": 1, "text": SLOW}}))
        compilers: list[tuple[int, str]] = []
        for _ in range(200):
            compilers = [p for p in descendants(process.pid) if p[1] in ("nvcc", "cicc")]
            if compilers:
                break
            await asyncio.sleep(0.05)
        assert compilers, "no compiler started"
        process.kill()
        await process.wait()

        def alive() -> list[int]:
            running = []
            for pid, _ in compilers:
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                except OSError:
                    continue
                if stat[stat.rindex(")") + 2] != "Z":
                    running.append(pid)
            return running

        # The parent-death signal, the check's handler and the group's kill all wait for the
        # CPU on a busy machine; what must never happen is a compiler left for minutes.
        deadline = asyncio.get_running_loop().time() + 15
        while alive() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert alive() == [], f"compilers still running after the server died: {alive()}"
    finally:
        await end_process(process)


async def test_checks_of_several_documents_share_the_compiler_budget(child_env, tmp_path: Path):
    """At most compiler_slots() compilers in the whole server (one per 2 GiB of half the RAM,
    no more than the cores), however many documents are opened at once."""
    from dice_lsp.lsp.compile_check import compiler_slots

    slots = compiler_slots()
    if slots > 4:
        pytest.skip(f"{slots} compiler slots here: too many slow compiles to reach the cap cheaply")
    process, client = await start_stdio_server(child_env)
    peak = 0
    try:
        await client.initialize(tmp_path)
        for i in range(slots + 1):
            path = tmp_path / f"slow{i}.cu"
            client.send(notification("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "cuda", "version": 1, "text": SLOW}}))
        deadline = asyncio.get_running_loop().time() + 120
        published: set[str] = set()
        while len(published) < slots + 1:
            assert asyncio.get_running_loop().time() < deadline, f"diagnostics for {len(published)} of {slots + 1} documents"
            peak = max(peak, compilers(process.pid))
            await asyncio.sleep(0.05)
            published = {m["params"]["uri"] for m in client.received if m.get("method") == "textDocument/publishDiagnostics"}
    finally:
        await end_process(process)
    assert 1 <= peak <= slots, f"{peak} compilers at once with {slots} slots"
