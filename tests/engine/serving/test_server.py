"""`dice engine serve` as a real subprocess on a real socket, used by AsyncEngine and by
engine.load("dice://...")."""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import signal
import time
from pathlib import Path

import pytest

import engine
from engine.serving.client import AsyncEngine
from engine.serving.frames import HEADER, encode_frame, read_frame
from engine.serving.auth import token_matches
from engine.serving.server import HELLO_TIMEOUT_S, MAX_HELLO, MAX_UNAUTHENTICATED_PER_ADDRESS, TOO_MANY
from engine.types import Cancelled, EngineError

pytestmark = pytest.mark.timeout(120)
TOKEN = "s3cret-for-tests"
REPO = Path(__file__).resolve().parents[3]


def start_server(model: Path, runtime: Path, *args: str) -> tuple[subprocess.Popen, int]:
    """A `dice engine serve` on a free loopback port, writing its token file under `runtime`
    (its XDG_RUNTIME_DIR), once it says where it listens."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "XDG_RUNTIME_DIR": str(runtime)}
    env.pop("DICE_ENGINE_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dice_lsp.cli", "engine", "serve", "--host", "127.0.0.1", "--port", "0",
         "--model", str(model), *args],
        stderr=subprocess.PIPE, text=True, env=env,
    )
    port = None
    for line in proc.stderr:
        found = re.search(r"serving .* on 127\.0\.0\.1:(\d+)", line)
        if found:
            port = int(found.group(1))
            break
    assert port, "the server never said where it listens"
    return proc, port


@pytest.fixture(scope="module")
def server_process(tiny_checkpoint, tmp_path_factory):
    """(the `dice engine serve` process, its port)."""
    proc, port = start_server(tiny_checkpoint, tmp_path_factory.mktemp("runtime"), "--token", TOKEN)
    yield proc, port
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(server_process):
    return server_process[1]


def test_async_client_over_tcp_with_the_token(server):
    async def scenario():
        eng = AsyncEngine(f"dice://127.0.0.1:{server}?token={TOKEN}")
        info = await eng.start()
        progress = []
        found = await eng.infill("__global__ void k() {\n", "}\n", n=2, max_tokens=8, on_progress=progress.append)
        await eng.close()
        return info, found, progress

    info, found, progress = asyncio.run(scenario())
    assert info.block_size == 4 and len(found) == 2 and progress


def test_sync_engine_over_tcp_and_cancel(server):
    remote = engine.load(f"dice://127.0.0.1:{server}", token=TOKEN)  # the other way to give the token
    assert len(remote.generate("int x", n=3, max_tokens=4)) == 3
    steps = []
    with pytest.raises(Cancelled):
        remote.generate("x", max_tokens=3000, on_progress=steps.append, should_cancel=lambda: len(steps) > 2)
    assert len(remote.optimize("__global__ void k(float* x) { x[0] = 1; }", max_tokens=4)) == 1


def test_wrong_token_is_refused(server):
    async def scenario():
        with pytest.raises(EngineError, match="bad or missing token"):
            await AsyncEngine(f"dice://127.0.0.1:{server}?token=wrong").start()
        with pytest.raises(EngineError, match="bad or missing token"):
            await AsyncEngine(f"dice://127.0.0.1:{server}").start()
        with pytest.raises(EngineError, match="bad or missing token"):  # the URL's token wins
            await AsyncEngine(f"dice://127.0.0.1:{server}?token=wrong", token=TOKEN).start()

    asyncio.run(scenario())


def fill_through(port: int, runtime: Path, source: Path, **env: str) -> subprocess.CompletedProcess:
    """`dice fill` of saxpy's statement through the engine on `port`, as a user whose runtime
    folder is `runtime`."""
    line, column = 12, 9  # `y[i] = a * x[i] + y[i];` in examples/saxpy.cu
    environment = {k: v for k, v in os.environ.items() if k != "DICE_ENGINE_TOKEN"}
    environment.update({"OMP_NUM_THREADS": "1", "XDG_RUNTIME_DIR": str(runtime), **env})
    return subprocess.run(
        [sys.executable, "-m", "dice_lsp.cli", "fill", str(source), "--range", f"{line}:{column}-{line}:{column + 23}",
         "--model", f"dice://127.0.0.1:{port}", "--candidates", "1", "--max-tokens", "8", "--json"],
        capture_output=True, text=True, env=environment, timeout=300, cwd=REPO,
    )


def test_a_loopback_server_without_a_token_makes_one_and_refuses_clients_without_it(tiny_checkpoint, tmp_path):
    """Any local process reaches a loopback port: `dice engine serve` there makes a token, writes
    it where a dice:// client of its user reads it, and refuses a client that lacks it."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    source = tmp_path / "saxpy.cu"
    source.write_text((REPO / "examples" / "saxpy.cu").read_text())
    assert "y[i] = a * x[i] + y[i];" in source.read_text().split("\n")[11]
    proc, port = start_server(tiny_checkpoint, runtime)
    token_file = runtime / "dice-lsp" / "engine" / f"loopback-{port}.token"
    try:
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert token_file.parent.stat().st_mode & 0o777 == 0o700
        token = token_file.read_text().strip()
        assert len(token) >= 32

        filled = fill_through(port, runtime, source)  # the same user: the token file is read
        assert filled.returncode == 0, filled.stderr[-2000:]
        assert len(json.loads(filled.stdout)["candidates"]) == 1

        stranger = tmp_path / "elsewhere"  # a process that cannot read the token file
        stranger.mkdir()
        refused = fill_through(port, stranger, source)
        assert refused.returncode != 0 and refused.stdout == ""
        assert "bad or missing token" in refused.stderr and str(token_file) in refused.stderr
        assert "dice://HOST:PORT?token=" in refused.stderr and "Traceback" not in refused.stderr

        given = fill_through(port, stranger, source, DICE_ENGINE_TOKEN=token)  # or given explicitly
        assert given.returncode == 0, given.stderr[-2000:]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert not token_file.exists(), "the server removes its token file when it ends"


def test_a_token_file_others_could_read_is_not_trusted(tmp_path):
    from engine.serving.auth import read_token_file, write_token_file

    path = tmp_path / "tokens" / "loopback-1.token"
    write_token_file(path, "s3cret")
    assert read_token_file(path) == "s3cret"
    path.chmod(0o644)
    assert read_token_file(path) is None
    assert read_token_file(tmp_path / "missing.token") is None


def test_garbage_instead_of_hello_gets_an_error(server):
    with socket.create_connection(("127.0.0.1", server), timeout=30) as sock:
        sock.sendall(encode_frame({"op": "run", "id": 1, "method": "generate", "args": {}}))
        reply = read_frame(sock.makefile("rb"))
    assert reply["type"] == "error" and "hello" in reply["message"]


def test_nothing_listening_is_a_clear_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]

    async def scenario():
        with pytest.raises(EngineError, match="cannot reach the engine"):
            await AsyncEngine(f"dice://127.0.0.1:{free_port}").start()

    asyncio.run(scenario())


def test_a_public_address_needs_a_token():
    env = {k: v for k, v in os.environ.items() if k != "DICE_ENGINE_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "dice_lsp.cli", "engine", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert done.returncode == 2
    assert "without a token" in done.stderr


def rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def reply_to(sock: socket.socket) -> dict | None:
    try:
        return read_frame(sock.makefile("rb"))
    except ConnectionResetError:
        return None


def test_a_big_hello_is_refused_from_its_header_alone(server):
    with socket.create_connection(("127.0.0.1", server), timeout=5) as sock:
        sock.sendall(HEADER.pack(64 << 20))  # announces 64 MiB, sends none of it
        reply = read_frame(sock.makefile("rb"))  # before: the server waited for the 64 MiB
    assert reply["type"] == "error" and f"limit {MAX_HELLO}" in reply["message"]


def test_fifty_strangers_with_big_frames_take_no_memory(server_process):
    proc, port = server_process
    before = rss_bytes(proc.pid)
    chunk = b"\0" * (2 << 20)
    strangers = []
    for _ in range(50):  # before: each one's 2 MiB was buffered towards a 64 MiB hello
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        strangers.append(sock)
        try:
            sock.sendall(HEADER.pack(64 << 20) + chunk)
        except OSError:
            pass  # refused or answered already: the server closed its end
    time.sleep(0.5)
    grown = rss_bytes(proc.pid) - before
    for sock in strangers:
        sock.close()
    assert grown < 20 << 20, f"the server grew by {grown >> 20} MiB"


def test_strangers_over_the_cap_are_refused_and_their_slots_come_back(server):
    silent = [socket.create_connection(("127.0.0.1", server), timeout=5)
              for _ in range(MAX_UNAUTHENTICATED_PER_ADDRESS)]
    try:
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", server), timeout=5) as extra:
            assert reply_to(extra) == {"type": "error", "id": None, "message": TOO_MANY, "cancelled": False}
    finally:
        for sock in silent:
            sock.close()

    async def connect_when_free():
        deadline = time.monotonic() + 10
        while True:
            try:
                return await AsyncEngine(f"dice://127.0.0.1:{server}?token={TOKEN}").start()
            except EngineError as exc:
                if "too many" not in str(exc) or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    assert asyncio.run(connect_when_free()).block_size == 4


def test_a_hello_trickled_in_is_cut_off_at_the_deadline(server):
    hello = encode_frame({"op": "hello", "token": TOKEN, "padding": "x" * 30})
    with socket.create_connection(("127.0.0.1", server), timeout=HELLO_TIMEOUT_S + 5) as sock:
        started = time.monotonic()
        reply = None
        for byte in hello:  # one byte every 0.5 s: the whole hello would take about 25 s
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            readable, _, _ = select.select([sock], [], [], 0.5)
            if readable:
                reply = reply_to(sock)
                break
        waited = time.monotonic() - started
    assert reply is not None and f"within {HELLO_TIMEOUT_S:.0f} s" in reply["message"]
    # Cut off near the deadline, long before the whole hello (25 s) could have arrived; the
    # margin above is for a thread-per-connection server on a busy machine.
    assert HELLO_TIMEOUT_S - 1 < waited < HELLO_TIMEOUT_S + 8


def test_token_comparison():
    assert token_matches("s3cret", "s3cret")
    assert not token_matches("s3cre", "s3cret") and not token_matches("s3cret-and-more", "s3cret")
    assert not token_matches(None, "s3cret") and not token_matches(12, "s3cret")


def serve_once(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DICE_ENGINE_TOKEN"}
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", "engine", "serve", *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_bad_ports_are_one_line_errors():
    done = serve_once("--port", "70000")
    assert done.returncode == 2 and "70000 is not a port number (0 to 65535)" in done.stderr
    assert "Traceback" not in done.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        done = serve_once("--port", str(port))  # told before the model is loaded
    assert done.returncode == 2 and time.monotonic() - started < 30
    assert done.stderr.strip() == f"dice engine serve: cannot listen on 127.0.0.1:{port}: Address already in use"


def test_a_broken_checkpoint_gets_the_message_fill_gets(tmp_path, tiny_checkpoint):
    shutil.copytree(tiny_checkpoint, tmp_path / "ckpt")
    weights = tmp_path / "ckpt" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100_000])
    done = serve_once("--port", "0", "--model", str(tmp_path / "ckpt"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"dice engine serve: {weights}: not a readable safetensors file " \
                                  "(Error while deserializing header: incomplete metadata, file not fully covered)"

    async def start_worker():
        with pytest.raises(EngineError) as info:
            await AsyncEngine(str(tmp_path / "ckpt")).start()
        return str(info.value)

    assert f"dice engine serve: {asyncio.run(start_worker())}" == done.stderr.strip()


def test_a_listener_that_never_answers_is_an_error_not_a_hang(monkeypatch):
    import engine.serving.client

    monkeypatch.setattr(engine.serving.client, "READY_TIMEOUT_S", 1.0, raising=False)
    with socket.socket() as silent:  # the kernel accepts connections for it; it never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]

        async def scenario():
            with pytest.raises(EngineError, match="accepted the connection but did not answer within 1 s"):
                await asyncio.wait_for(AsyncEngine(f"dice://127.0.0.1:{port}").start(), 10)

        started = time.monotonic()
        asyncio.run(scenario())
    assert time.monotonic() - started < 5


def test_a_listener_that_never_accepts_is_an_error_not_a_hang(monkeypatch):
    import engine.serving.client

    monkeypatch.setattr(engine.serving.client, "CONNECT_TIMEOUT_S", 1.0, raising=False)
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)  # never accepts: once its queue is full, connections hang in SYN_SENT
        port = full.getsockname()[1]
        queued = []
        for _ in range(3):
            sock = socket.socket()
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
            queued.append(sock)
        time.sleep(0.2)

        async def scenario():
            with pytest.raises(EngineError, match="no connection within 1 s"):
                await asyncio.wait_for(AsyncEngine(f"dice://127.0.0.1:{port}").start(), 10)

        try:
            asyncio.run(scenario())
        finally:
            for sock in queued:
                sock.close()
