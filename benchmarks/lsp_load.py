"""Load test of the language server: `dice-lsp --tcp` on loopback, two editors at once.

What it does, bounded in count and in time (it stops by itself, at the latest after
--deadline seconds):

1. Editor A opens a 5,000-line .cu of 357 kernels, which starts its compile check (nvcc on
   the whole file), and at once asks codeAction, hover and codeLens on it, one after the
   other, --requests times: latency while the compile check runs (target: p95 <= 50 ms).
2. Both editors open --documents small kernels each and send a burst of --edits edits (an
   insert and its undo) with a codeAction after each, concurrently.
3. Editor B opens a 5 MB .cu of 11,813 kernels and asks codeLens, codeAction and hover on it
   (the first answer includes the file's analysis); meanwhile editor A keeps asking hovers
   on its small documents, to see that the big file does not stop the server.

Every request must be answered. Reported: latency percentiles per phase and method, the
server's peak memory (its own VmHWM) and the peak of the server and its compilers together
(sampled every 50 ms). Run from the repository root:
    python benchmarks/lsp_load.py            # writes a table to stdout and JSON to --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

SHARED_SPEC = "// dice: let n = 1 << 16\n\n"


def kernel(i: int) -> str:
    """One spec'd kernel of 13 lines (and a blank one), about 420 bytes."""
    return f"""// dice: buffer x[n], y[n]
// dice: launch grid=(n + 255) / 256, block=256
__global__ void scale_{i}(const float* __restrict__ x, float* y, int n)
{{
    // kernel {i} of the load test: y = 2x + 1, one element of x per thread
    int idx = blockIdx.x * blockDim.x + threadIdx.x;  // the grid covers n
    if (idx < n) {{
        float v = x[idx];
        float w = 2.0f * v;
        w = w * 1.0f;
        y[idx] = w + 1.0f;
    }}
}}

"""


def kernels_source(count: int) -> str:
    """A .cu of `count` kernels: 357 make 5,000 lines; 11,813 make about 5 MB."""
    return SHARED_SPEC + "".join(kernel(i) for i in range(count))


# ------------------------------------------------------------------ the client


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.waiting: dict[int, asyncio.Future] = {}
        self.ids = iter(range(1, 10**9))
        self.pump = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            length = None
            while (line := await self.reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if length is None:
                return
            message = json.loads(await self.reader.readexactly(length))
            if "method" in message and "id" in message:  # the server asks: answer plainly
                self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" not in message and message.get("id") in self.waiting:
                self.waiting.pop(message["id"]).set_result(message)

    def _write(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def notify(self, method: str, params: Any) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any, timeout: float) -> tuple[float, dict]:
        msg_id = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[msg_id] = future
        start = time.perf_counter()
        self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        answer = await asyncio.wait_for(future, timeout)
        if "error" in answer:
            raise RuntimeError(f"{method} failed: {answer['error']}")
        return time.perf_counter() - start, answer

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda", "version": 1, "text": text}})
        return uri


# ------------------------------------------------------------------ measuring


class Latencies:
    def __init__(self) -> None:
        self.samples: dict[tuple[str, str], list[float]] = {}

    def add(self, phase: str, method: str, seconds: float) -> None:
        self.samples.setdefault((phase, method), []).append(seconds)

    def table(self) -> list[dict[str, Any]]:
        rows = []
        for (phase, method), values in self.samples.items():
            ordered = sorted(values)
            rows.append({
                "phase": phase,
                "method": method,
                "n": len(values),
                "p50_ms": 1000 * statistics.median(ordered),
                "p95_ms": 1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
                "max_ms": 1000 * ordered[-1],
            })
        return rows


def _tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(int(entry))
    found, stack = [pid], list(children.get(pid, []))
    while stack:
        found.append(stack.pop())
        stack.extend(children.get(found[-1], []))
    return found


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class MemoryWatch:
    """The peak of the RSS of the server and everything under it (compilers), every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_tree_kib = 0
        self.compiler_seen_s = 0.0
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            pids = _tree(self.pid)
            self.peak_tree_kib = max(self.peak_tree_kib, sum(_status_kib(p, "VmRSS") for p in pids))
            await asyncio.sleep(0.05)


def compiler_running(pid: int) -> bool:
    for child in _tree(pid)[1:]:
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() in ("nvcc", "cicc", "ptxas", "cudafe++"):
                return True
        except OSError:
            pass
    return False


# ------------------------------------------------------------------ the phases


def positions_in(text: str, count: int, rng: random.Random) -> list[dict[str, int]]:
    lines = text.splitlines()
    chosen = []
    for _ in range(count):
        line = rng.randrange(len(lines))
        chosen.append({"line": line, "character": rng.randrange(len(lines[line]) + 1)})
    return chosen


async def big_file_while_compiling(a: Client, folder: Path, server_pid: int, n: int, lat: Latencies, rng: random.Random) -> dict:
    text = kernels_source(357)
    uri = a.open(folder / "k357.cu", text)
    deadline = time.perf_counter() + 30
    while not compiler_running(server_pid) and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)  # measure while the file's nvcc runs
    during = 0
    for position in positions_in(text, n, rng):
        compiling = compiler_running(server_pid)
        rng_range = {"start": position, "end": position}
        for method, params in (
            ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": rng_range, "context": {"diagnostics": []}}),
            ("textDocument/hover", {"textDocument": {"uri": uri}, "position": position}),
            ("textDocument/codeLens", {"textDocument": {"uri": uri}}),
        ):
            seconds, _ = await a.request(method, params, 60)
            lat.add("5,000-line file (357 kernels)", method, seconds)
        during += compiling
    return {"lines": text.count("\n"), "requests_while_nvcc_ran": during, "rounds": n}


async def edit_burst(client: Client, name: str, folder: Path, documents: int, edits: int, lat: Latencies) -> None:
    uris = [client.open(folder / f"{name}_{i}.cu", kernels_source(3)) for i in range(documents)]
    versions = dict.fromkeys(uris, 1)
    for i in range(edits):
        uri = uris[i % len(uris)]
        at = {"line": 5, "character": 4}
        for change in ({"range": {"start": at, "end": at}, "text": "x"},
                       {"range": {"start": at, "end": {"line": 5, "character": 5}}, "text": ""}):
            versions[uri] += 1
            client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": versions[uri]}, "contentChanges": [change]})
        seconds, _ = await client.request(
            "textDocument/codeAction",
            {"textDocument": {"uri": uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}},
            60,
        )
        lat.add("edit burst, 2 editors", "textDocument/codeAction", seconds)
    for uri in uris:
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


async def five_megabytes(a: Client, b: Client, folder: Path, lat: Latencies) -> dict:
    text = kernels_source(11813)
    uri = b.open(folder / "k11813.cu", text)
    small = a.open(folder / "small.cu", kernels_source(1))
    answers: dict[str, Any] = {}

    async def big() -> None:
        at = {"line": 40000, "character": 20}
        for method, params in (
            ("textDocument/codeLens", {"textDocument": {"uri": uri}}),
            ("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": {"start": at, "end": at}, "context": {"diagnostics": []}}),
            ("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 2 + 14 * 5000 + 2, "character": 18}}),
        ):
            started = time.perf_counter()
            seconds, answer = await b.request(method, params, 300)
            lat.add("5 MB file (11,813 kernels)", method, seconds)
            # A request the server answered "skipped: still analysing" (ContentModified, after
            # its bound) is asked again, as an editor does on the refresh that follows.
            while answer.get("error", {}).get("code") == -32801:
                await asyncio.sleep(0.5)
                seconds, answer = await b.request(method, params, 300)
                lat.add("5 MB file (11,813 kernels)", method, seconds)
            answers[method] = answer.get("result")
            answers[f"{method} ready after s"] = round(time.perf_counter() - started, 1)

    async def meanwhile(done: asyncio.Future) -> None:
        while not done.done():
            seconds, _ = await a.request("textDocument/hover", {"textDocument": {"uri": small}, "position": {"line": 4, "character": 18}}, 60)
            lat.add("small file while the 5 MB one is analysed", "textDocument/hover", seconds)
            await asyncio.sleep(0.02)

    task = asyncio.ensure_future(big())
    await asyncio.gather(task, meanwhile(task))
    b.notify("textDocument/didClose", {"textDocument": {"uri": uri}})  # ends its compile check
    return {
        "megabytes": len(text.encode()) / 1e6,
        "lenses": len(answers["textDocument/codeLens"] or []),
        "lenses_ready_after_s": answers["textDocument/codeLens ready after s"],
        "hover": bool(answers["textDocument/hover"]),
    }


async def run(args: argparse.Namespace) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scratch = Path(tempfile.mkdtemp(prefix="dice-lsp-load-"))
    # Every listener needs a token; its token file goes to the scratch folder.
    token = "load-test-token"
    env = {**os.environ, "PYTHONPATH": str(REPO), "DICE_CACHE_DIR": str(scratch / "cache"),
           "DICE_LSP_TOKEN": token, "XDG_RUNTIME_DIR": str(scratch)}
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dice_lsp.server", "--tcp", "--host", "127.0.0.1", "--port", str(port), env=env
    )
    try:
        for _ in range(200):
            try:
                connections = [await asyncio.open_connection("127.0.0.1", port, limit=2**26) for _ in range(2)]
                break
            except OSError:
                await asyncio.sleep(0.1)
        else:
            raise RuntimeError("the server never listened")
        a, b = (Client(r, w) for r, w in connections)
        memory = MemoryWatch(server.pid)
        for client in (a, b):
            await client.request("initialize", {"processId": None, "rootUri": scratch.as_uri(), "capabilities": {},
                                                "initializationOptions": {"token": token}}, 30)
            client.notify("initialized", {})
        lat = Latencies()
        rng = random.Random(0)
        started = time.perf_counter()
        report: dict[str, Any] = {"while_compiling": await big_file_while_compiling(a, scratch, server.pid, args.requests, lat, rng)}
        await asyncio.gather(
            edit_burst(a, "a", scratch, args.documents, args.edits, lat),
            edit_burst(b, "b", scratch, args.documents, args.edits, lat),
        )
        report["five_megabytes"] = await five_megabytes(a, b, scratch, lat)
        report["seconds"] = time.perf_counter() - started
        report["latency"] = lat.table()
        report["server_peak_rss_mib"] = _status_kib(server.pid, "VmHWM") / 1024
        report["tree_peak_rss_mib"] = memory.peak_tree_kib / 1024
        return report
    finally:
        server.terminate()
        await server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100, help="rounds of codeAction+hover+codeLens on the 5,000-line file")
    parser.add_argument("--documents", type=int, default=10, help="small documents per editor")
    parser.add_argument("--edits", type=int, default=200, help="edits (each with a codeAction) per editor")
    parser.add_argument("--deadline", type=float, default=600, help="seconds before the test gives up")
    parser.add_argument("--json", type=Path, default=None, help="write the report here too")
    parser.add_argument("--write-kernels", nargs=2, metavar=("COUNT", "FILE"),
                        help="only write the .cu of COUNT kernels the load test opens to FILE, and stop")
    args = parser.parse_args()
    if args.write_kernels:
        count, path = args.write_kernels
        Path(path).write_text(kernels_source(int(count)))
        return 0
    report = asyncio.run(asyncio.wait_for(run(args), args.deadline))
    print(f"| phase | method | n | p50 ms | p95 ms | max ms |\n| --- | --- | --- | --- | --- | --- |")
    for row in report["latency"]:
        print(f"| {row['phase']} | {row['method']} | {row['n']} | {row['p50_ms']:.1f} | {row['p95_ms']:.1f} | {row['max_ms']:.1f} |")
    rest = {k: v for k, v in report.items() if k != "latency"}
    print(json.dumps(rest, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
