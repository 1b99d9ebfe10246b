"""Serve an engine over a frame stream (engine.serving.frames): the worker's pipe or a TCP connection.

A reader thread takes messages as they come, so a cancel reaches a job while it decodes;
jobs run one at a time on the calling thread (and, across TCP connections, one at a time on
the GPU through `gpu_lock`). A malformed message is answered with an error and the session
goes on; a stream that is no longer framed ends the session.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import asdict
from typing import Any, BinaryIO

from engine.serving.frames import FrameError, MessageError, encode_frame, read_frame
from engine.types import REQUESTS, Cancelled, EngineError, Progress, request_from_wire


class FrameWriter:
    """Frames from several threads, never interleaved."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = encode_frame(message)
        with self.lock:
            self.stream.write(data)
            self.stream.flush()


def error_message(job_id: Any, message: str, cancelled: bool = False) -> dict[str, Any]:
    return {"type": "error", "id": job_id, "message": message, "cancelled": cancelled}


def _read_jobs(stream: BinaryIO, out: FrameWriter, jobs: queue.Queue, cancelled: set) -> None:
    """Reader thread: runs go to the queue, cancels to the set; None in the queue = stop."""
    try:
        while True:
            try:
                message = read_frame(stream)
            except MessageError as exc:
                out.send(error_message(None, str(exc)))
                continue
            except FrameError as exc:
                out.send(error_message(None, str(exc)))
                return
            if message is None or message.get("op") == "close":
                return
            op, job_id = message.get("op"), message.get("id")
            if op == "cancel":
                cancelled.add(job_id)
            elif op == "run" and message.get("method") in REQUESTS and isinstance(message.get("args", {}), dict):
                jobs.put(message)
            else:
                out.send(error_message(job_id, f"malformed message: unknown op/method in {sorted(message)} "
                                               f"(op={op!r}, method={message.get('method')!r})"))
    except OSError:
        return  # the other side went away
    finally:
        jobs.put(None)


def run_job(engine, message: dict[str, Any], out: FrameWriter, cancelled: set, gpu_lock: threading.Lock) -> None:
    job_id = message.get("id")

    def on_progress(progress: Progress) -> None:
        out.send({"type": "progress", "id": job_id, "progress": asdict(progress)})

    try:
        request = request_from_wire(message["method"], message.get("args") or {})
        with gpu_lock:
            if job_id in cancelled:
                raise Cancelled("cancelled")
            candidates = engine.run(request, on_progress, lambda: job_id in cancelled)
        out.send({"type": "result", "id": job_id, "candidates": [asdict(c) for c in candidates]})
    except Cancelled:
        out.send(error_message(job_id, "cancelled", cancelled=True))
    except EngineError as exc:
        out.send(error_message(job_id, str(exc)))
    except TypeError as exc:  # missing or unknown arguments for the method
        out.send(error_message(job_id, f"bad arguments for {message['method']}: {exc}"))
    except Exception as exc:  # a bug or an out-of-memory must not end the session
        out.send(error_message(job_id, f"{type(exc).__name__}: {exc}"))
    finally:
        cancelled.discard(job_id)


def serve(engine, stream_in: BinaryIO, out: FrameWriter, gpu_lock: threading.Lock | None = None) -> None:
    """Serve jobs until the client closes the stream or sends close."""
    gpu_lock = gpu_lock or threading.Lock()
    jobs: queue.Queue = queue.Queue()
    cancelled: set = set()
    reader = threading.Thread(target=_read_jobs, args=(stream_in, out, jobs, cancelled), daemon=True)
    reader.start()
    while (message := jobs.get()) is not None:
        try:
            run_job(engine, message, out, cancelled, gpu_lock)
        except OSError:
            return  # the client is gone; nobody to answer
