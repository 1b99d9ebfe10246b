"""The SGLang client against SGLang's own code: the requests it sends are parsed by SGLang's
request classes and contract check, the answers it reads are built the way SGLang builds
them, and the `dice` preset's schedule is checked on SGLang's LowConfidence algorithm.

SGLang's package (0.5.23) pins torch 2.14.1 and a GPU serving stack, so it is installed
without its dependencies (`pip install --no-deps sglang==0.5.23`; the sglang-contract extra
brings what its request classes import). Without it the tests that need it skip and say so."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

import engine
from engine.decoding import prompts
from engine.serving.sglang import (DICE_DLLM_ALGORITHM, DICE_DLLM_CONFIG, MASK_TOKEN, abort_request, candidate_from_output,
                           dllm_config_yaml, generate_request, last_output, launch_command, stream_events)
from engine.types import Cancelled, EngineError, Sampling

try:
    from sglang.srt.entrypoints.api_contract import generate_contract_error
    from sglang.srt.managers.io_struct import AbortReq, GenerateReqInput
    from sglang.srt.managers.schedule_batch import FINISH_ABORT, FINISH_LENGTH, FINISH_MATCHED_TOKEN
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.utils.json_response import dumps_json
    WHY_NO_SGLANG = None
except Exception as exc:  # noqa: BLE001 - ImportError, or a dependency that fails to load (torchvision on a CPU torch)
    WHY_NO_SGLANG = (f"SGLang's request classes cannot be imported ({type(exc).__name__}: {exc}); "
                     "pip install -e '.[sglang-contract]' && pip install --no-deps sglang==0.5.23")

needs_sglang = pytest.mark.skipif(WHY_NO_SGLANG is not None, reason=str(WHY_NO_SGLANG))

SDAR_VOCAB = 151936  # SDAR's config.json vocab_size (Qwen3's)
SDAR_MASK_ID = 151669
IM_END = 151645


def kernel_task() -> prompts.Task:
    return prompts.infill_task("__global__ void k(float* x) {\n", "}\n", None, "chat", None)


def admitted(body: dict) -> tuple[GenerateReqInput, SamplingParams]:
    """What SGLang's /generate makes of `body`: its contract check, the request object
    FastAPI builds from the JSON, normalized as the tokenizer manager does, and the sampling
    parameters it builds, normalized and verified against SDAR's vocabulary."""
    assert generate_contract_error(json.loads(json.dumps(body))) is None
    request = GenerateReqInput(**json.loads(json.dumps(body)))
    request.normalize_batch_and_arguments()
    params = SamplingParams(**request.sampling_params)
    params.normalize(None)
    params.verify(SDAR_VOCAB)
    return request, params


@needs_sglang
def test_each_candidate_is_one_streamed_request_sglang_accepts_as_meant():
    task = kernel_task()
    sampling = Sampling(temperature=0.6, top_k=20, top_p=0.95, seed=5)
    bodies = [generate_request(task, 128, sampling, f"dice-r-{i}", i) for i in range(3)]
    for index, body in enumerate(bodies):
        request, params = admitted(body)
        assert request.text == task.prompt and request.is_single
        assert request.rid == f"dice-r-{index}"  # one prompt: the id stays ours, so an abort finds it
        assert request.stream is True
        assert (params.max_new_tokens, params.temperature, params.top_p, params.top_k) == (128, 0.6, 0.95, 20)
        assert params.sampling_seed == 5 + index  # SGLang's name for the seed
    assert task.prompt.startswith("<|im_start|>user\n") and task.prompt.endswith("<|im_start|>assistant\n")
    # The seed under another name is no field of SGLang's: it would be refused, not ignored.
    with pytest.raises(TypeError):
        SamplingParams(max_new_tokens=8, seed=5)


@needs_sglang
def test_dice_preset_request_is_greedy_for_sglang():
    _, params = admitted(generate_request(kernel_task(), 4096, Sampling.for_preset("dice"), "dice-d-0"))
    assert params.top_k == 1 and params.max_new_tokens == 4096 and params.sampling_seed is None


def test_no_mask_token_is_sent():
    task = prompts.infill_task(f"// {MASK_TOKEN}\n__global__ void k(float* x) {{\n", "}\n", None, "chat", None)
    with pytest.raises(EngineError, match="mask token"):
        generate_request(task, 16, Sampling(), "dice-m-0")


@needs_sglang
def test_abort_names_the_request_as_sglang_reads_it():
    abort = AbortReq(**abort_request("dice-r-1"))
    assert abort.rid == "dice-r-1" and abort.abort_all is False


def output(text: str, finish: dict, tokens: int, rid: str = "dice-r-0") -> dict:
    """A /generate output as SGLang's tokenizer manager builds it (_handle_batch_output)."""
    return {"text": text, "output_ids": list(range(tokens)),
            "meta_info": {"id": rid, "finish_reason": finish, "prompt_tokens": 40, "weight_version": "default",
                          "num_retractions": 0, "completion_tokens": tokens, "cached_tokens": 0}}


@needs_sglang
def test_answers_become_candidates_with_extracted_code():
    prefix = "__global__ void scale(float* x, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    suffix = "}\n"
    task = prompts.infill_task(prefix, suffix, None, "chat", None)
    done = json.loads(dumps_json(output(f"```cpp\n{prefix}    if (i < n) x[i] *= 2.0f;\n{suffix}```",
                                        FINISH_MATCHED_TOKEN(matched=IM_END).to_json(), 17)))
    cut = json.loads(dumps_json(output(f"```cpp\n{prefix}    if (i <", FINISH_LENGTH(length=6).to_json(), 6)))
    found = [candidate_from_output(done, task, 1.5), candidate_from_output(cut, task, 1.5)]
    assert [c.text for c in found] == ["    if (i < n) x[i] *= 2.0f;\n", "    if (i <"]
    assert [c.extraction for c in found] == ["dice", "lenient"]  # DICE's extraction rejects the unclosed fence
    assert [c.finish_reason for c in found] == ["eos", "length"]
    assert found[0].tokens == 17 and found[0].seconds == 1.5


@needs_sglang
def test_an_aborted_answer_or_an_error_is_no_candidate():
    task = kernel_task()
    aborted = json.loads(dumps_json(output("```cpp\n__glo", FINISH_ABORT().to_json(), 3)))
    with pytest.raises(EngineError, match="aborted the request: Aborted"):
        candidate_from_output(aborted, task, 0.1)
    # http_server's answer to a ValueError (_create_error_response), and the contract check's.
    with pytest.raises(EngineError, match="SGLang: max_new_tokens must be"):
        candidate_from_output({"error": {"message": "max_new_tokens must be at least 0, got -1."}}, task, 0.1)
    refused = generate_contract_error({"text": "x", "sampling_params": {"max_new_tokens": "many"}})
    assert refused is not None
    with pytest.raises(EngineError, match="SGLang: "):
        candidate_from_output({"error": refused}, task, 0.1)


def streamed(chunks: list[dict], error: str | None = None) -> list[bytes]:
    """A streamed /generate answer as http_server writes it (stream_results), split into
    lines as an HTTP response reads them."""
    body = b"".join(b"data: " + dumps_json(chunk) + b"\n\n" for chunk in chunks)
    if error is not None:
        body += b"data: " + dumps_json({"error": {"message": error, "type": "invalid_request_error", "code": 400,
                                                  "retryable": False}}) + b"\n\n"
    body += b"data: [DONE]\n\n"
    return [line + b"\n" for line in body.split(b"\n")]


@needs_sglang
def test_a_stream_gives_its_last_chunk_and_reports_tokens():
    chunks = [output("```cpp\n", None, 4), output("```cpp\nint", None, 8),
              output("```cpp\nint a;\n```", FINISH_MATCHED_TOKEN(matched=IM_END).to_json(), 11)]
    seen = []
    last = last_output(stream_events(streamed(chunks)), lambda c: seen.append(c["meta_info"]["completion_tokens"]))
    assert seen == [4, 8, 11]
    assert candidate_from_output(last, prompts.generate_task("x"), 0.2).raw == "```cpp\nint a;\n```"
    with pytest.raises(EngineError, match="SGLang: Request is disconnected"):
        last_output(stream_events(streamed(chunks[:1], "Request is disconnected from the client side")))
    with pytest.raises(EngineError, match="ended without an answer"):
        last_output(stream_events([b"data: [DONE]\n"]))


@needs_sglang
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_dice_schedule_on_sglangs_low_confidence_commits_one_token_a_step(device):
    """The step as SGLang's server runs it, on the GPU too: logits and ids on `device`."""
    torch = pytest.importorskip("torch")
    yaml = pytest.importorskip("yaml")
    from sglang.srt.dllm.algorithm import get_algorithm_cls
    from sglang.srt.dllm.config import DllmConfig

    config = DllmConfig(algorithm=DICE_DLLM_ALGORITHM, algorithm_config=yaml.safe_load(dllm_config_yaml()),
                        block_size=DICE_DLLM_CONFIG["block_size"], mask_id=SDAR_MASK_ID, max_running_requests=4)
    algorithm = get_algorithm_cls(DICE_DLLM_ALGORITHM)(config)
    assert algorithm.threshold == 1.0 and algorithm.block_size == 4

    class Batch:
        """The three fields of SGLang's ForwardBatch that LowConfidence.step reads."""

        def __init__(self, ids: list[list[int]]) -> None:
            self.batch_size = len(ids)
            self.input_ids = torch.tensor(ids, device=device).view(-1)
            self.dllm_prompt_mask = None

    vocab = 16
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 4, vocab, generator=generator).to(device)
    logits[0, 2, 7] = 200.0  # a position whose top-1 probability is 1.0 in float32
    batch = Batch([[SDAR_MASK_ID] * 4, [3, SDAR_MASK_ID, SDAR_MASK_ID, SDAR_MASK_ID]])
    probs = torch.softmax(logits, dim=-1).max(dim=-1).values
    assert probs[0, 2].item() == 1.0
    steps = 0
    while True:
        before = batch.input_ids.view(2, 4).clone()
        done = algorithm.step(batch, logits.view(-1, vocab), [None, None])
        if all(done):
            break
        after = batch.input_ids.view(2, 4)
        for row in range(2):
            masked = before[row] == SDAR_MASK_ID
            committed = (before[row] != after[row]).nonzero().view(-1).tolist()
            if masked.any():
                # exactly one, the most confident masked position, with its argmax token
                confidence = torch.where(masked, probs[row], torch.tensor(-1.0, device=device))
                assert committed == [int(confidence.argmax())]
                assert after[row, committed[0]] == logits[row, committed[0]].argmax()
        steps += 1
    assert steps == 4  # 4 masked positions, one a step: DICE's 4 steps per block of 4
    # SGLang's default threshold (0.95) would commit the certain position with another at once.
    eager = get_algorithm_cls(DICE_DLLM_ALGORITHM)(
        DllmConfig(DICE_DLLM_ALGORITHM, {}, 4, SDAR_MASK_ID, 4))
    assert eager.threshold < 1.0


@needs_sglang
def test_launch_command_names_sglangs_options():
    from sglang.srt.server_args import ServerArgs

    command = launch_command("/models/DICE-4B", "dice-dllm.yaml", port=30000, dp=2)
    assert command[:3] == ["python", "-m", "sglang.launch_server"]
    parser = __import__("argparse").ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = parser.parse_args(command[3:])
    assert (args.model_path, args.dllm_algorithm, args.dllm_algorithm_config) == \
        ("/models/DICE-4B", "LowConfidence", "dice-dllm.yaml")
    assert (args.dp_size, args.max_running_requests, args.port) == (2, 32, 30000)


def test_bad_address_and_unreachable_server_are_clear_errors():
    with pytest.raises(EngineError, match="sglang://HOST:PORT"):
        engine.load("sglang://nohost")
    unreachable = engine.load("sglang://127.0.0.1:9")  # the discard port: nothing answers
    with pytest.raises(EngineError, match="SGLang at http://127.0.0.1:9"):
        unreachable.generate("x", max_tokens=4)


class SilentServer:
    """A loopback server that reads requests and never answers: what the client sends, in
    what order, while a request is in flight."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        data = b""
        with connection:
            while b"\r\n\r\n" not in data:
                data += connection.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            while len(body) < length:
                body += connection.recv(65536)
            with self.lock:
                self.requests.append((head.split(b" ")[1].decode(), json.loads(body)))
            connection.recv(1)  # until the client hangs up

    def paths(self) -> list[str]:
        with self.lock:
            return [path for path, _ in self.requests]

    def close(self) -> None:
        self.listener.close()


def test_candidates_are_in_flight_at_once_and_a_cancel_hangs_up_and_aborts_each():
    server = SilentServer()
    try:
        client = engine.load(f"sglang://127.0.0.1:{server.port}")
        asked = time.monotonic()

        def cancel_once_all_sent() -> bool:
            return server.paths().count("/generate") == 3 or time.monotonic() - asked > 20

        started = time.monotonic()
        with pytest.raises(Cancelled):
            client.infill("__global__ void k(float* x) {\n", "}\n", n=3, max_tokens=64,
                          should_cancel=cancel_once_all_sent)
        assert time.monotonic() - started < 15  # nothing waited for an answer
        deadline = time.monotonic() + 10
        while server.paths().count("/abort_request") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        generated = [body for path, body in server.requests if path == "/generate"]
        aborted = [body for path, body in server.requests if path == "/abort_request"]
        assert len(generated) == 3  # three requests in flight before any answer
        assert sorted(b["rid"] for b in aborted) == sorted(b["rid"] for b in generated)
        assert len({b["rid"] for b in generated}) == 3
        if WHY_NO_SGLANG is None:  # what went over the wire, read by SGLang's own classes
            for body in generated:
                admitted(body)
            for body in aborted:
                assert AbortReq(**body).rid == body["rid"]
    finally:
        server.close()
