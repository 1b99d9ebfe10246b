"""`engine.load("sglang://HOST:PORT")`: DICE prompts sent to an SGLang server's native
`/generate` API (a server, or SGLang's router before data-parallel replicas, started with a
DICE checkpoint; SGLang runs the block diffusion).

The prompts and the extraction are the local engine's (engine.decoding.prompts tasks), through SDAR's
chat template. Each candidate is a request of its own (one prompt, its own request id), all
in flight at once, so that the server's scheduler and the router spread them; each streams
(SGLang's default, cumulative: every chunk holds the whole text so far), which gives progress
and lets a cancel end it: the connection is closed and the request is aborted by id
(POST /abort_request), as SGLang aborts a request whose client went away.

The denoising schedule is the server's (`--dllm-algorithm`, `--dllm-algorithm-config`), not
a request's: SGLang serves SDAR checkpoints (`SDARForCausalLM`) with block size 4 and mask id
151669, and its LowConfidence algorithm commits, at each step, every masked position whose
top-1 probability is above `threshold`, else the single most confident one. With a threshold
of 1.0 no probability is above it, so each step commits one token, the most confident: DICE's
static schedule at 4 steps per block of 4 (the `dice` preset). LowConfidence takes the argmax,
so it decodes greedily whatever the request's temperature: the `dice` preset's top_k of 1.
`launch_command` and `DICE_DLLM_CONFIG` are that set-up; docs/contracts.md shows it.

The mask token's text is refused in a prompt: SGLang's tokenizer would read it as the mask
token, a position to fill, inside the prompt.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import secrets
import socket
import threading
import time
from typing import Any, Iterable, Iterator
from urllib.parse import urlsplit

from engine.decoding import prompts
from engine.decoding.base import CancelFn, EngineBase, ProgressFn, request_task
from engine.types import Cancelled, Candidate, EngineError, EngineInfo, Progress, Request, Sampling

CANCEL_POLL_S = 0.1
CONNECT_TIMEOUT_S = 10.0
# An abort is a short request; a cancel does not wait for it.
ABORT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 600.0
# SDAR's mask token (id 151669 in its tokenizer, SGLang's `mask_id` for SDARForCausalLM).
MASK_TOKEN = "<|MASK|>"
SDAR_BLOCK_SIZE = 4
# SGLang's diffusion settings for DICE's evaluation decoder: the algorithm, and the YAML
# mapping given to --dllm-algorithm-config (LowConfidence reads `threshold`; `block_size`
# overrides the architecture's, which for SDAR is already 4).
DICE_DLLM_ALGORITHM = "LowConfidence"
DICE_DLLM_CONFIG = {"block_size": SDAR_BLOCK_SIZE, "threshold": 1.0}
# Requests the server runs at once. SGLang runs one at a time for a diffusion model unless
# --max-running-requests says otherwise.
DEFAULT_MAX_RUNNING = 32


def dllm_config_yaml(config: dict[str, Any] = DICE_DLLM_CONFIG) -> str:
    """The file for --dllm-algorithm-config (YAML; flat numbers, so written by hand)."""
    return "".join(f"{key}: {value}\n" for key, value in config.items())


def launch_command(model: str, config_file: str, *, port: int = 30000, dp: int = 1,
                   max_running: int = DEFAULT_MAX_RUNNING) -> list[str]:
    """The SGLang server for a DICE checkpoint folder, with `dp` data-parallel replicas
    (one GPU each) behind SGLang's own router when dp > 1."""
    command = ["python", "-m", "sglang.launch_server", "--model-path", model, "--trust-remote-code",
               "--dllm-algorithm", DICE_DLLM_ALGORITHM, "--dllm-algorithm-config", config_file,
               "--max-running-requests", str(max_running), "--host", "0.0.0.0", "--port", str(port)]
    if dp > 1:
        command += ["--dp-size", str(dp)]
    return command


def sampling_params(max_tokens: int, sampling: Sampling, index: int) -> dict[str, Any]:
    """SGLang's SamplingParams fields for one candidate. The seed's field is `sampling_seed`;
    candidate `index` gets seed + index, so that a server that samples gives n answers."""
    params: dict[str, Any] = {"max_new_tokens": max_tokens, "temperature": sampling.temperature,
                              "top_p": sampling.top_p}
    if sampling.top_k > 0:
        params["top_k"] = sampling.top_k
    if sampling.seed is not None:
        params["sampling_seed"] = sampling.seed + index
    return params


def generate_request(task: prompts.Task, max_tokens: int, sampling: Sampling, rid: str, index: int = 0,
                     *, stream: bool = True) -> dict[str, Any]:
    """The JSON body of POST /generate for one candidate."""
    if MASK_TOKEN in task.prompt:
        raise EngineError(f"the prompt holds SDAR's mask token text {MASK_TOKEN!r}: SGLang would read it as a "
                          "position to fill; take it out of the code sent")
    return {"text": task.prompt, "sampling_params": sampling_params(max_tokens, sampling, index), "rid": rid,
            "stream": stream}


def abort_request(rid: str) -> dict[str, Any]:
    """The JSON body of POST /abort_request for one request."""
    return {"rid": rid}


def error_message(body: Any) -> str | None:
    """What an error answer of SGLang says: {"error": {"message": ...}} from a handler, or
    {"error": "..."} from the request contract check; None for anything else."""
    if not isinstance(body, dict) or "error" not in body:
        return None
    error = body["error"]
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def candidate_from_output(item: Any, task: prompts.Task, seconds: float) -> Candidate:
    """One /generate output ({"text", "meta_info": {"finish_reason", "completion_tokens"...}})."""
    message = error_message(item)
    if message is not None:
        raise EngineError(f"SGLang: {message}")
    if not isinstance(item, dict) or "text" not in item:
        raise EngineError(f"SGLang answered something that is not a /generate result: {str(item)[:200]}")
    meta = item.get("meta_info") or {}
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else None
    if kind == "abort":
        raise EngineError(f"SGLang aborted the request: {finish.get('message') or 'aborted'}")
    if kind is None:
        raise EngineError("SGLang's answer has no finish_reason: the request did not finish")
    reason = "length" if kind == "length" else "eos"
    raw = item["text"]
    text, extraction = task.to_text(raw)
    return Candidate(text, int(meta.get("completion_tokens") or 0), 0, seconds, reason, raw, extraction)


def stream_events(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a streamed /generate answer (`data: {...}` lines, blank lines
    between, `data: [DONE]` at the end), until [DONE]."""
    for line in lines:
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[len(b"data:"):].strip()
        if data == b"[DONE]":
            return
        try:
            yield json.loads(data)
        except ValueError as exc:
            raise EngineError(f"SGLang streamed something that is not JSON: {data[:200]!r}") from exc


def last_output(events: Iterable[dict[str, Any]], on_chunk=None) -> dict[str, Any]:
    """The final output of a stream (each chunk holds the whole text so far); an error chunk
    raises at once."""
    last = None
    for event in events:
        message = error_message(event)
        if message is not None:
            raise EngineError(f"SGLang: {message}")
        last = event
        if on_chunk is not None:
            on_chunk(event)
    if last is None:
        raise EngineError("SGLang's stream ended without an answer")
    return last


def hang_up(connection: http.client.HTTPConnection) -> None:
    """End a connection another thread may be reading from: shutting the socket down wakes
    that read (closing it alone may not), and SGLang sees the client gone."""
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    connection.close()


class SGLangEngine(EngineBase):
    model = None
    tokenizer = None

    def __init__(self, spec: str):
        url = urlsplit(spec)
        if url.scheme != "sglang" or not url.hostname or not url.port:
            raise EngineError(f"bad SGLang address {spec!r}: expected sglang://HOST:PORT")
        self.spec = spec
        self.host, self.port = url.hostname, url.port
        self.base = f"http://{url.hostname}:{url.port}"
        # Problems `dice bench` may have in flight at once (each with its candidates): the
        # server and its router queue them; the bench keeps this many going.
        self.parallel_requests = DEFAULT_MAX_RUNNING

    def info(self) -> EngineInfo:
        return EngineInfo(self.spec, self.base, SDAR_BLOCK_SIZE, "chat", "")

    def _connect(self, timeout: float = REQUEST_TIMEOUT_S) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=CONNECT_TIMEOUT_S)
        try:
            connection.connect()
        except OSError as exc:
            raise EngineError(f"SGLang at {self.base}: cannot connect within {CONNECT_TIMEOUT_S:.0f} s: {exc}") from exc
        # Connecting has its own short timeout; the answer may take minutes.
        connection.sock.settimeout(timeout)
        return connection

    def _post_json(self, path: str, body: dict[str, Any], timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, bytes]:
        connection = self._connect(timeout)
        try:
            connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def _generate(self, body: dict[str, Any], task: prompts.Task, started: float, connections: list,
                  on_tokens) -> Candidate:
        """One candidate's streamed request; `connections` holds its connection so that a
        cancel can close it."""
        try:
            connection = self._connect()
            connections.append(connection)
            connection.request("POST", "/generate", json.dumps(body), {"Content-Type": "application/json"})
            response = connection.getresponse()
            if response.status != 200:
                data = response.read()
                try:
                    message = error_message(json.loads(data)) or data[:300]
                except ValueError:
                    message = data[:300]
                raise EngineError(f"SGLang at {self.base}: HTTP {response.status}: {message}")
            output = last_output(stream_events(response),
                                 lambda chunk: on_tokens(int((chunk.get("meta_info") or {}).get("completion_tokens")
                                                             or 0)))
        except (OSError, http.client.HTTPException) as exc:
            raise EngineError(f"SGLang at {self.base}: {exc}") from exc
        finally:
            for connection in connections:
                connection.close()
        return candidate_from_output(output, task, time.perf_counter() - started)

    def _abort(self, rids: list[str]) -> None:
        """Ask the server to drop the requests, each in the background (best effort: closing
        their connections makes SGLang abort them too)."""

        def send(rid: str) -> None:
            try:
                self._post_json("/abort_request", abort_request(rid), ABORT_TIMEOUT_S)
            except (OSError, http.client.HTTPException, EngineError):
                pass

        for rid in rids:
            threading.Thread(target=send, args=(rid,), daemon=True, name="dice-sglang-abort").start()

    def run(self, request: Request, on_progress: ProgressFn = None, should_cancel: CancelFn = None) -> list[Candidate]:
        task = request_task(request, "chat", None)
        tag = secrets.token_hex(8)
        rids = [f"dice-{tag}-{i}" for i in range(request.n)]
        bodies = [generate_request(task, request.max_tokens, request.sampling, rid, i) for i, rid in enumerate(rids)]
        blocks = max(1, -(-request.max_tokens // SDAR_BLOCK_SIZE))
        tokens = [0] * request.n
        lock = threading.Lock()

        def on_tokens(index: int, count: int) -> None:
            with lock:
                tokens[index] = count
                least = min(tokens)
            if on_progress is not None:
                on_progress(Progress("decode", least // SDAR_BLOCK_SIZE + 1, blocks, 0, least))

        started = time.perf_counter()
        connections: list[list[http.client.HTTPConnection]] = [[] for _ in bodies]
        pool = concurrent.futures.ThreadPoolExecutor(len(bodies), thread_name_prefix="dice-sglang")
        try:
            futures = [pool.submit(self._generate, body, task, started, connections[i],
                                   lambda count, i=i: on_tokens(i, count)) for i, body in enumerate(bodies)]
            pending = set(futures)
            while pending:
                done, pending = concurrent.futures.wait(pending, timeout=CANCEL_POLL_S,
                                                        return_when=concurrent.futures.FIRST_EXCEPTION)
                failed = [f for f in done if f.exception() is not None]
                cancelled = should_cancel is not None and should_cancel()
                if (failed or cancelled) and pending:
                    self._abort([rid for rid, f in zip(rids, futures) if f in pending])
                    for held in connections:
                        for connection in held:
                            hang_up(connection)
                if cancelled:
                    raise Cancelled("cancelled")
                if failed:
                    raise failed[0].exception()
            return [f.result() for f in futures]
        finally:
            pool.shutdown(wait=False)
