"""AsyncEngine: the engine in a worker process (msgpack frames over its stdin/stdout), or a
remote `dice engine serve` (the same frames over TCP). The language server's way in: it never
imports torch, and a crash on the other side is an EngineError, not a dead server.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import itertools
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from engine.model import hub, system_memory
from engine.serving import auth
from engine.serving.frames import encode_frame, read_frame_async
from engine.decoding.base import CancelFn, EngineBase, ProgressFn
from engine.types import Cancelled, Candidate, EngineError, EngineGone, EngineInfo, Progress, Request, request_to_wire

STDERR_LINES = 40
CANCEL_POLL_S = 0.05
RSS_POLL_S = 0.5  # how often the worker's resident size is read, to say what it held when it died
# A remote engine has its model loaded already: it accepts and says ready at once. A listener
# that does neither (a wrong port, a stopped process, a firewall eating packets) is an error
# after these, not a hang. During a job, TCP keepalive notices a peer that is gone.
CONNECT_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 30.0
SEND_TIMEOUT_S = 60.0  # a request frame must leave within this (the server reads as it goes)
KEEPALIVE = {"TCP_KEEPIDLE": 30, "TCP_KEEPINTVL": 10, "TCP_KEEPCNT": 3}
ENGINE_TOKEN = "DICE_ENGINE_TOKEN"  # the token of `dice engine serve`, and the one a dice:// client sends


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_file(host: str, port: int) -> Path:
    """Where the engine listening on host:port writes its token, and where a dice:// client of
    the same user looks for it. Every loopback name is one key: a server on 127.0.0.1 is
    reached as localhost too."""
    key = "loopback" if is_loopback(host) else host.lower()
    return auth.token_folder("engine") / f"{key}-{port}.token"


def parse_dice_url(spec: str, token: str | None = None) -> tuple[str, int, str | None]:
    """dice://HOST:PORT[?token=...] -> (host, port, token). The token sent is the first of: the
    URL's, `token` (the caller's), $DICE_ENGINE_TOKEN, and the one a `dice engine serve` of this
    user on HOST:PORT wrote to its token file."""
    url = urlsplit(spec)
    if url.scheme != "dice" or not url.hostname or not url.port:
        raise EngineError(f"bad engine address {spec!r}: expected dice://HOST:PORT[?token=...]")
    given = parse_qs(url.query).get("token", [None])[0] or token or auth.environment_token(ENGINE_TOKEN)
    return url.hostname, url.port, given or auth.read_token_file(token_file(url.hostname, url.port))


def keep_alive(sock) -> None:
    """Probe an idle connection, so that a remote engine whose host vanished ends the job
    with an error within about a minute instead of never."""
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in KEEPALIVE.items():
        if hasattr(socket, name):  # Linux names; other systems keep their defaults
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def killed_report(code: int, kills_before: tuple[int | None, int | None], kills_after: tuple[int | None, int | None],
                  last_rss: int | None, tail: str) -> str:
    """Why the worker ended, in words: a SIGKILL while the OOM killer's count (the memory
    cgroup's, or the machine's) went up is "killed for memory"; another signal is named; an
    exit says its code. Its last stderr lines follow, or that it wrote none."""
    rss = f"; it held {system_memory.describe(last_rss)} when last seen" if last_rss else ""
    output = tail or "(it wrote nothing on stderr)"
    if code == -signal.SIGKILL and any(a is not None and b is not None and a > b
                                       for a, b in zip(kills_after, kills_before)):
        return (f"engine worker killed for memory (out of memory: the kernel's OOM killer ended it{rss}); "
                f"ask for fewer candidates or tokens, or free memory. {output}")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "an unnamed signal"
        return f"engine worker killed by signal {-code} ({name}{rss}): {output}"
    return f"engine worker exited (code {code}): {output}"


class AsyncEngine(EngineBase):
    """See docs/architecture.md. Cancelling the awaiting task cancels the job between steps."""

    def __init__(self, spec: str = "builtin", *, device: str | None = None, dtype: str | None = None,
                 token: str | None = None, memory: int | None = None):
        self.spec = spec
        self.memory = memory  # bytes a local model and each request may take (engine.model.memory)
        self.token = token  # a dice:// engine's, where the URL carries none
        self.device = device
        self.dtype = dtype
        self.info: EngineInfo | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._stderr_task: asyncio.Task | None = None
        self._rss_task: asyncio.Task | None = None
        self._last_rss: int | None = None
        self._oom_kills: tuple[int | None, int | None] = (None, None)
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._jobs: dict[int, asyncio.Queue] = {}
        self._cancel_sent: set[int] = set()
        self._ids = itertools.count(1)
        self._start_lock = asyncio.Lock()

    @property
    def runs_here(self) -> bool:
        """Whether the engine is a worker process of this one (its model on this machine),
        not a dice:// engine elsewhere."""
        return not self.spec.startswith("dice://")

    # --- connection -------------------------------------------------------------------------

    async def start(self) -> EngineInfo:
        """Start the worker (or connect) and wait until the model is loaded. Idempotent."""
        async with self._start_lock:
            if self.info is not None and self._reader_task is not None and not self._reader_task.done():
                return self.info
            await self._shutdown()
            reader = await self._open()
            remote = self._process is None
            try:
                first = await asyncio.wait_for(read_frame_async(reader), READY_TIMEOUT_S if remote else None)
            except asyncio.TimeoutError:
                await self._shutdown()
                raise EngineError(f"the engine at {self.spec} accepted the connection but did not answer within "
                                  f"{READY_TIMEOUT_S:.0f} s: is a `dice engine serve` listening there?") from None
            except (EngineError, OSError) as exc:
                await self._shutdown()
                raise EngineError(f"engine at {self.spec}: {exc}") from exc
            if first is None or first.get("type") != "ready":
                message = (first or {}).get("message") or await self._exit_report()
                await self._shutdown()
                raise EngineError(message)
            self.info = EngineInfo(**first["info"])
            self._reader_task = asyncio.create_task(self._read_loop(reader))
            return self.info

    async def _open(self) -> asyncio.StreamReader:
        if self.spec.startswith("dice://"):
            host, port, token = parse_dice_url(self.spec, self.token)
            try:
                reader, self._writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
            except asyncio.TimeoutError:
                raise EngineError(f"cannot reach the engine at {host}:{port}: no connection within "
                                  f"{CONNECT_TIMEOUT_S:.0f} s") from None
            except OSError as exc:
                raise EngineError(f"cannot reach the engine at {host}:{port}: {exc}") from exc
            keep_alive(self._writer.get_extra_info("socket"))
            self._send({"op": "hello", "token": token})
            return reader
        command = [sys.executable, "-m", "engine.serving.worker", "--model", self.spec]
        if self.device:
            command += ["--device", self.device]
        if self.dtype:
            command += ["--dtype", self.dtype]
        if self.memory is not None:
            command += ["--memory", str(self.memory)]
        env = None
        if hub.is_hub_id(self.spec):
            # Download here, where stderr is the user's terminal (huggingface_hub's progress
            # bars); the worker then reads the same snapshot from the cache, offline.
            await asyncio.to_thread(hub.resolve, self.spec)
            env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        self._stderr.clear()
        self._oom_kills, self._last_rss = system_memory.oom_kills(), None
        self._process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=1 << 20,
            env=env,
        )
        self._writer = self._process.stdin
        self._stderr_task = asyncio.create_task(self._drain_stderr(self._process.stderr))
        self._rss_task = asyncio.create_task(self._watch_rss(self._process))
        return self._process.stdout

    async def _watch_rss(self, process: asyncio.subprocess.Process) -> None:
        """Keep the worker's last resident size, for the report if it is killed."""
        while process.returncode is None and (rss := system_memory.resident_bytes(process.pid)) is not None:
            self._last_rss = rss
            await asyncio.sleep(RSS_POLL_S)

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        """Keep the worker's last stderr lines (and never let its pipe fill up)."""
        while line := await stream.readline():
            self._stderr.append(line.decode(errors="replace").rstrip())

    async def _exit_report(self) -> str:
        if self._process is None:
            return f"the engine at {self.spec} closed the connection"
        code = await self._process.wait()
        if self._stderr_task is not None:
            await asyncio.wait([self._stderr_task], timeout=2)
        tail = "\n".join(self._stderr)
        return killed_report(code, self._oom_kills, system_memory.oom_kills(), self._last_rss, tail)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        """Route messages to their jobs; when the stream ends, fail every waiting job."""
        failure = None
        try:
            while (message := await read_frame_async(reader)) is not None:
                queue = self._jobs.get(message.get("id"))
                if queue is not None:
                    queue.put_nowait(message)
        except (EngineError, OSError) as exc:
            failure = f"engine stream broke: {exc}"
        if failure is None:
            failure = await self._exit_report()
        for queue in self._jobs.values():
            queue.put_nowait({"type": "error", "message": failure, "cancelled": False, "gone": True})

    def _send(self, message: dict[str, Any]) -> None:
        if self._writer is None or self._writer.is_closing():
            raise EngineGone("the engine is not running")
        self._writer.write(encode_frame(message))

    async def _shutdown(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            try:
                self._writer.write(encode_frame({"op": "close"}))
                self._writer.close()
            except (OSError, RuntimeError):
                pass
        if self._process is not None and self._process.returncode is None:
            try:
                await asyncio.wait_for(self._process.wait(), timeout=5)
            except asyncio.TimeoutError:
                self._process.kill()
                await self._process.wait()
        for task in (self._reader_task, self._stderr_task, self._rss_task):
            if task is not None and not task.done():
                task.cancel()
        self._process = self._writer = self._reader_task = self._stderr_task = self._rss_task = None
        self.info = None

    async def close(self) -> None:
        async with self._start_lock:
            await self._shutdown()

    async def restart(self) -> EngineInfo:
        await self.close()
        return await self.start()

    # --- jobs ---------------------------------------------------------------------------------

    async def _next_message(self, queue: asyncio.Queue, job_id: int, should_cancel: CancelFn):
        """The job's next message; with should_cancel, polled while waiting, as Engine does."""
        while should_cancel is not None and job_id not in self._cancel_sent:
            if should_cancel():
                self._send({"op": "cancel", "id": job_id})
                self._cancel_sent.add(job_id)  # the worker's answer (cancelled) ends the job
                break
            try:
                return await asyncio.wait_for(queue.get(), CANCEL_POLL_S)
            except asyncio.TimeoutError:
                pass
        return await queue.get()

    async def run(self, request: Request, on_progress: ProgressFn = None,
                  should_cancel: CancelFn = None) -> list[Candidate]:
        await self.start()
        job_id = next(self._ids)
        queue: asyncio.Queue = asyncio.Queue()
        self._jobs[job_id] = queue
        try:
            self._send({"op": "run", "id": job_id, "method": request.method, "args": request_to_wire(request)})
            try:
                await asyncio.wait_for(self._writer.drain(), SEND_TIMEOUT_S)
            except asyncio.TimeoutError:
                raise EngineGone(f"the engine at {self.spec} took no data for {SEND_TIMEOUT_S:.0f} s") from None
            while True:
                message = await self._next_message(queue, job_id, should_cancel)
                kind = message.get("type")
                if kind == "progress" and on_progress is not None:
                    on_progress(Progress(**message["progress"]))
                elif kind == "result":
                    return [Candidate(**c) for c in message["candidates"]]
                elif kind == "error":
                    if message.get("cancelled"):
                        raise Cancelled(message["message"])
                    raise (EngineGone if message.get("gone") else EngineError)(message["message"])
        except asyncio.CancelledError:
            try:
                self._send({"op": "cancel", "id": job_id})
            except EngineError:
                pass
            raise
        finally:
            del self._jobs[job_id]
            self._cancel_sent.discard(job_id)
