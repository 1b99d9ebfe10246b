"""The language server's first fill after start-up, and the next one, on the README's example.

    python benchmarks/lsp_first_fill.py [--rounds 3] [--model builtin]

Each round starts `python -m dice_lsp.server` on stdio, as an editor does, sends initialize,
initialized and didOpen of examples/saxpy.cu, then `dice.fill` of line 12, columns 9-32 (the
README's range) at once, and a second `dice.fill` of the same range once the first has
answered. Reported per round, wall clock: the server's answer to initialize (from its start),
the first fill (from its request: it includes starting the engine worker and loading the
model, which the server begins only when a job needs it) and the second (the model warm).
Requests the server sends the client (configuration, progress, edits) get the answers an
editor without those features gives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "saxpy.cu"
RANGE = {"start": {"line": 11, "character": 8}, "end": {"line": 11, "character": 31}}  # 12:9-12:32, 1-based


class Client:
    """JSON-RPC over the server's stdio: requests out, answers picked by id, the server's own
    requests answered as an editor without their features would."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.answers: dict[int, asyncio.Future] = {}
        self.reader = asyncio.ensure_future(self._read())

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def call(self, msg_id: int, method: str, params: Any) -> dict:
        self.answers[msg_id] = asyncio.get_running_loop().create_future()
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await self.answers[msg_id]

    async def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while (line := await stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if length is None:
                return
            message = json.loads(await stream.readexactly(length))
            if "method" in message and "id" in message:  # the server asks the client
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": self._result(message)})
            elif "id" in message and message["id"] in self.answers:
                self.answers[message["id"]].set_result(message)

    @staticmethod
    def _result(message: dict) -> Any:
        if message["method"] == "workspace/configuration":
            return [None for _ in message["params"]["items"]]
        if message["method"] == "workspace/applyEdit":
            return {"applied": False}
        return None


async def one_round(model: str) -> dict[str, float]:
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dice_lsp.server", cwd=REPO, limit=1 << 26,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    client = Client(process)
    await client.call(0, "initialize", {"processId": None, "rootUri": REPO.as_uri(), "capabilities": {},
                                        "initializationOptions": {"dice": {"model": model}}})
    initialized = time.perf_counter() - start
    client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    uri = EXAMPLE.as_uri()
    client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "cuda-cpp", "version": 1, "text": EXAMPLE.read_text()}}})
    times = {"initialize_s": initialized}
    for msg_id, name in ((1, "first_fill_s"), (2, "second_fill_s")):
        asked = time.perf_counter()
        answer = await client.call(msg_id, "workspace/executeCommand",
                                   {"command": "dice.fill", "arguments": [{"uri": uri, "range": RANGE}]})
        times[name] = time.perf_counter() - asked
        result = answer.get("result") or {}
        if "error" in answer or result.get("error"):
            raise SystemExit(f"dice.fill failed: {answer}")
    times["start_to_first_fill_s"] = initialized + times["first_fill_s"]
    await client.call(3, "shutdown", None)
    client.send({"jsonrpc": "2.0", "method": "exit", "params": None})
    await process.wait()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="server starts to measure (default: %(default)s)")
    parser.add_argument("--model", default="builtin", help="the dice.model setting (default: %(default)s)")
    args = parser.parse_args()
    rounds = []
    for k in range(1, args.rounds + 1):
        rounds.append(asyncio.run(one_round(args.model)))
        print(f"round {k}: " + ", ".join(f"{name} {value:.2f}" for name, value in rounds[-1].items()), flush=True)
    medians = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    print(f"median of {args.rounds}: " + ", ".join(f"{name} {value:.2f}" for name, value in medians.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
