"""`engine.load("sglang://HOST:PORT")`: DICE prompts sent to an SGLang server's native
`/generate` API (a server started with a DICE checkpoint; SGLang runs the block diffusion).

The prompts and the extraction are the local engine's (engine.prompts tasks), through SDAR's
chat template. The denoising schedule (strategy, steps, block size) is the server's own
setting, so those sampling fields are not sent; temperature, top-k, top-p and the seed are.
Written against SGLang's documented API; not yet run against a real SGLang server.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import time
from typing import Any
from urllib.parse import urlsplit

from engine import prompts
from engine.base import CancelFn, EngineBase, ProgressFn, request_task
from engine.types import Cancelled, Candidate, EngineError, EngineInfo, Request, Sampling

CANCEL_POLL_S = 0.1
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 600.0


def generate_request(task: prompts.Task, n: int, max_tokens: int, sampling: Sampling) -> dict[str, Any]:
    """The JSON body of POST /generate: n copies of the prompt, one batch."""
    params: dict[str, Any] = {"max_new_tokens": max_tokens, "temperature": sampling.temperature, "top_p": sampling.top_p}
    if sampling.top_k > 0:
        params["top_k"] = sampling.top_k
    if sampling.seed is not None:
        params["sampling_seed"] = sampling.seed
    return {"text": [task.prompt] * n, "sampling_params": params}


def candidates_from_response(body: Any, task: prompts.Task, seconds: float) -> list[Candidate]:
    """/generate answers a batch with a list of {"text", "meta_info": {...}}."""
    items = body if isinstance(body, list) else [body]
    candidates = []
    for item in items:
        if not isinstance(item, dict) or "text" not in item:
            raise EngineError(f"SGLang answered something that is not a /generate result: {str(item)[:200]}")
        meta = item.get("meta_info") or {}
        finish = meta.get("finish_reason") or {}
        reason = "length" if isinstance(finish, dict) and finish.get("type") == "length" else "eos"
        raw = item["text"]
        text, extraction = task.to_text(raw)
        candidates.append(Candidate(text, int(meta.get("completion_tokens", 0)), 0, seconds, reason, raw, extraction))
    return candidates


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

    def info(self) -> EngineInfo:
        return EngineInfo(self.spec, self.base, 4, "chat", "")

    def _post(self, body: dict[str, Any]) -> Any:
        # Connecting gets its own short timeout; the answer may take minutes (a whole batch
        # decoded before the reply), so each read waits up to REQUEST_TIMEOUT_S.
        connection = http.client.HTTPConnection(self.host, self.port, timeout=CONNECT_TIMEOUT_S)
        try:
            try:
                connection.connect()
            except OSError as exc:
                raise EngineError(f"SGLang at {self.base}: cannot connect within {CONNECT_TIMEOUT_S:.0f} s: {exc}") from exc
            connection.sock.settimeout(REQUEST_TIMEOUT_S)
            connection.request("POST", "/generate", json.dumps(body), {"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
            if response.status != 200:
                raise EngineError(f"SGLang at {self.base}: HTTP {response.status}: {data[:300]!r}")
            return json.loads(data)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise EngineError(f"SGLang at {self.base}: {exc}") from exc
        finally:
            connection.close()

    def run(self, request: Request, on_progress: ProgressFn = None, should_cancel: CancelFn = None) -> list[Candidate]:
        """SGLang reports no progress; a cancel drops the answer (the server finishes the batch)."""
        task = request_task(request, "chat", None)
        body = generate_request(task, request.n, request.max_tokens, request.sampling)
        started = time.perf_counter()
        # The HTTP call blocks; wait on it in slices so that a cancel is noticed (the server
        # finishes the request, its answer is dropped).
        pool = concurrent.futures.ThreadPoolExecutor(1)
        try:
            future = pool.submit(self._post, body)
            while True:
                try:
                    answer = future.result(timeout=CANCEL_POLL_S)
                    break
                except concurrent.futures.TimeoutError:
                    if should_cancel is not None and should_cancel():
                        raise Cancelled("cancelled") from None
        finally:
            pool.shutdown(wait=False)
        return candidates_from_response(answer, task, time.perf_counter() - started)
