"""The SGLang client's request and response mapping (no SGLang server here: these pin the
JSON it sends to /generate and how it reads the answer)."""

from __future__ import annotations

import pytest

import engine
from engine import prompts
from engine.sglang import candidates_from_response, generate_request
from engine.types import EngineError, Sampling


def test_request_is_a_batch_of_dice_chat_prompts():
    task = prompts.infill_task("__global__ void k(float* x) {\n", "}\n", None, "chat", None)
    body = generate_request(task, 3, 128, Sampling(temperature=0.6, top_k=20, top_p=0.95, seed=5))
    assert body["text"] == [task.prompt] * 3
    assert body["text"][0].startswith("<|im_start|>user\n") and body["text"][0].endswith("<|im_start|>assistant\n")
    assert body["sampling_params"] == {"max_new_tokens": 128, "temperature": 0.6, "top_p": 0.95, "top_k": 20,
                                       "sampling_seed": 5}


def test_response_becomes_candidates_with_extracted_code():
    prefix = "__global__ void scale(float* x, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    suffix = "}\n"
    task = prompts.infill_task(prefix, suffix, None, "chat", None)
    # DICE's infilling answer is the whole file; one answer was cut by max_tokens (unclosed
    # fence: DICE's extraction rejects it, the lenient one takes it).
    body = [
        {"text": f"```cpp\n{prefix}    if (i < n) x[i] *= 2.0f;\n{suffix}```",
         "meta_info": {"completion_tokens": 17, "finish_reason": {"type": "stop"}}},
        {"text": f"```cpp\n{prefix}    if (i <", "meta_info": {"completion_tokens": 6, "finish_reason": {"type": "length"}}},
    ]
    found = candidates_from_response(body, task, 1.5)
    assert [c.text for c in found] == ["    if (i < n) x[i] *= 2.0f;\n", "    if (i <"]
    assert [c.extraction for c in found] == ["dice", "lenient"]
    assert [c.finish_reason for c in found] == ["eos", "length"]
    assert found[0].tokens == 17 and found[0].seconds == 1.5
    with pytest.raises(EngineError, match="not a /generate result"):
        candidates_from_response({"error": "model not loaded"}, task, 0.1)


def test_bad_address_and_unreachable_server_are_clear_errors():
    with pytest.raises(EngineError, match="sglang://HOST:PORT"):
        engine.load("sglang://nohost")
    unreachable = engine.load("sglang://127.0.0.1:9")  # the discard port: nothing answers
    with pytest.raises(EngineError, match="SGLang at http://127.0.0.1:9"):
        unreachable.generate("x", max_tokens=4)
