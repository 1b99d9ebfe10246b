"""Speaking DICE exactly: DICE's own outputs (tests/data/dice-reference, made by DICE's code on the
tiny-sdar checkpoint) against ours, with tiny-sdar loaded through the real loading path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import engine
from engine.decoding import prompts
from engine.decoding.decode import decode
from engine.types import EngineError, Sampling
from profiler.source import document as document_parts


def golden(reference: Path, name: str) -> dict:
    return json.loads((reference / name).read_text())


@pytest.fixture(scope="module")
def tiny_sdar(dice_reference):
    return engine.load(str(dice_reference / "tiny-sdar"), device="cpu", dtype="float32")


def decode_cases(reference: Path) -> list[dict]:
    return golden(reference, "decode_golden.json")["cases"]


def dice_sampling(case: dict) -> Sampling:
    settings = case["settings"]
    assert (settings["block_length"], settings["denoising_steps"], settings["temperature"], settings["top_k"],
            settings["top_p"]) == (4, 4, 1.0, 1, 1.0), "the preset's values are DICE's evaluation settings"
    return Sampling.for_preset("dice", strategy=settings["remasking_strategy"],
                               threshold=settings["confidence_threshold"])


def test_every_decode_case_token_for_token(tiny_sdar, dice_reference):
    cases = decode_cases(dice_reference)
    assert len(cases) == 12
    for case in cases:
        result = decode(tiny_sdar.model, case["prompt_ids"], max_tokens=case["settings"]["gen_length"],
                        sampling=dice_sampling(case), stop_ids=tiny_sdar.config.eos_token_ids)
        assert result.tokens[0] == case["tokens_after_prompt"], case["name"]
        # Our cache writes a finished block in the next block's first step; DICE spends a
        # separate call on it. The denoising calls are the same.
        assert result.steps == case["forward_passes"]["denoise"], case["name"]


def test_no_stop_at_a_stop_token_and_whole_blocks(tiny_sdar, dice_reference):
    """DICE's evaluation never stops early and returns whole blocks: a stop token in the
    middle of the answer and a max_tokens inside a block change nothing."""
    case = decode_cases(dice_reference)[1]  # a prompt of 10: 11 blocks, 34 tokens after it
    expected = case["tokens_after_prompt"]
    assert len(case["prompt_ids"]) == 10 and len(expected) == 34
    result = decode(tiny_sdar.model, case["prompt_ids"], max_tokens=31, sampling=dice_sampling(case),
                    stop_ids=[expected[5]])
    assert result.tokens[0] == expected and result.finish_reasons == ["length"]


def test_candidates_in_one_batch_each_decode_as_dice(tiny_sdar, dice_reference):
    case = decode_cases(dice_reference)[2]
    result = decode(tiny_sdar.model, case["prompt_ids"], n=3, max_tokens=32, sampling=dice_sampling(case), stop_ids=[])
    assert result.tokens == [case["tokens_after_prompt"]] * 3


@pytest.mark.parametrize("path", ["recompute", "static"])
def test_the_other_cpu_paths_give_the_same_tokens(tiny_sdar, dice_reference, path):
    for case in decode_cases(dice_reference)[1::4]:  # one prompt per strategy, a partial first block
        result = decode(tiny_sdar.model, case["prompt_ids"], max_tokens=32, sampling=dice_sampling(case),
                        stop_ids=[], path=path)
        assert result.tokens[0] == case["tokens_after_prompt"], (path, case["name"])


def test_the_answer_text_is_what_dice_scores(tiny_sdar, dice_reference):
    case = decode_cases(dice_reference)[3]
    assert case["prompt"] == "chat_user_message"
    candidate, = tiny_sdar.generate(tiny_sdar.tokenizer.decode(case["prompt_ids"]), max_tokens=32, preset="dice")
    assert candidate.raw.replace("<|MASK|>", "") == case["eval_response_text"]


def test_the_default_preset_is_not_dice(tiny_sdar, dice_reference):
    """Without the preset the same settings decode otherwise (leftmost ties, the mask
    excluded): the preset is what makes the golden cases pass."""
    case = decode_cases(dice_reference)[0]
    own = Sampling(temperature=1.0, top_k=1, steps=4, block_size=4)
    result = decode(tiny_sdar.model, case["prompt_ids"], max_tokens=32, sampling=own, stop_ids=[])
    assert result.tokens[0] != case["tokens_after_prompt"]


def test_a_model_that_predicts_the_mask_gets_a_clear_error(dice_reference):
    from engine.model.loading import load_checkpoint

    model, _, config = load_checkpoint(dice_reference / "tiny-sdar", "cpu", torch.float32)
    # A real head whose every answer is the mask token: DICE's decoder commits it and never
    # fills the block (it fails with IndexError).
    head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=True)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[config.mask_token_id] = 100.0
    model.lm_head = head
    with pytest.raises(EngineError, match="predicted the mask token"):
        decode(model, [1, 2, 3, 4], max_tokens=8, sampling=Sampling.for_preset("dice"), stop_ids=[])
    # The default preset never commits the mask token, so it finishes.
    result = decode(model, [1, 2, 3, 4], max_tokens=8, sampling=Sampling(), stop_ids=[])
    assert config.mask_token_id not in result.tokens[0]


def test_logits_match_dices_model(tiny_sdar, dice_reference):
    reference = golden(dice_reference, "logits_golden.json")
    tolerance = reference["suggested_tolerance"]
    for sequence in reference["sequences"]:
        with torch.inference_mode():
            logits = tiny_sdar.model(torch.tensor([sequence["ids"]]))[0]
        for expected in sequence["positions"]:
            row = logits[expected["position"]]
            values, ids = torch.topk(row, len(expected["top_ids"]))
            assert ids.tolist() == expected["top_ids"]
            assert torch.allclose(values, torch.tensor(expected["top_values"]), atol=tolerance, rtol=0)
            assert abs(float(torch.logsumexp(row, -1)) - expected["logsumexp"]) < tolerance


def test_kernelbench_prompt_byte_for_byte(tiny_sdar, dice_reference):
    for example in golden(dice_reference, "prompts_golden.json")["kernelbench_one_shot"]["examples"]:
        task = prompts.optimize_task(example["pytorch_code"], "kernelbench", "chat", tiny_sdar.tokenizer.chat_template)
        assert prompts.kernelbench_prompt(example["pytorch_code"]) == example["user_text"]
        assert task.prompt == example["chat_text"]
        assert tiny_sdar.tokenizer.encode(task.prompt, add_special_tokens=False) == example["token_ids"]
        # A ModelNew already in the file is not part of the problem DICE is shown: the editor
        # sends the problem cut out of the file (dice_lsp.core.jobs.optimize).
        with_answer = example["pytorch_code"] + "\n\n\nclass ModelNew(Model):\n    pass\n"
        again = prompts.optimize_task(document_parts.kernelbench_problem(with_answer), "kernelbench", "chat", tiny_sdar.tokenizer.chat_template)
        assert again.prompt == example["chat_text"]


def test_infilling_prompt_byte_for_byte(tiny_sdar, dice_reference):
    for example in golden(dice_reference, "prompts_golden.json")["kernel_infilling"]["examples"]:
        task = prompts.infill_task(example["prefix"], example["suffix"], example["pytorch_code"], "chat",
                                   tiny_sdar.tokenizer.chat_template)
        assert task.prompt == example["chat_text"]
        assert tiny_sdar.tokenizer.encode(task.prompt, add_special_tokens=False) == example["token_ids"]
        # The answer DICE asks for, the whole new file, comes back as the middle.
        whole = example["prefix"] + example["middle"] + example["suffix"]
        assert task.to_text(f"```python\n{whole}```") == (example["middle"], "dice")


def test_fill_on_a_kernelbench_file_sends_dices_prompt(tiny_sdar, dice_reference):
    """The editor's document: the problem, then the ModelNew being written. Its problem part
    is the reference and the rest is the file DICE's template cuts into prefix and suffix:
    Fill's prompt is DICE's, byte for byte."""
    for example in golden(dice_reference, "prompts_golden.json")["kernel_infilling"]["examples"]:
        document = example["pytorch_code"] + "\n\n" + example["prefix"] + example["middle"] + example["suffix"]
        start = len(document) - len(example["suffix"]) - len(example["middle"])
        parts = document_parts.kernelbench_infill_parts(document, start, start + len(example["middle"]))
        assert parts == (example["pytorch_code"], example["prefix"], example["suffix"])
        task = prompts.infill_task(*parts[1:], parts[0], "chat", tiny_sdar.tokenizer.chat_template)
        assert task.prompt == example["chat_text"]
    # A span inside the problem itself, or a file without a problem: no reference.
    assert document_parts.kernelbench_infill_parts(document, 5, 6) == (None, document[:5], document[6:])
    assert document_parts.kernelbench_problem_end("class Model: pass\n") is None  # no get_inputs
    code = example["pytorch_code"]
    assert document_parts.kernelbench_problem_end(code + "\n") == len(code) + 1  # nothing after it: all of it


def test_extraction_is_dices_on_every_case(dice_reference):
    cases = golden(dice_reference, "extraction_golden.json")["cases"]
    assert len(cases) == 15
    for case in cases:
        assert prompts.dice_extract_code(case["input"]) == case["evaluation_output"], case["name"]


def test_answers_dice_rejects_go_to_the_named_fallback(dice_reference):
    cases = {c["name"]: c for c in golden(dice_reference, "extraction_golden.json")["cases"]}
    cut = cases["unclosed fence (generation cut)"]["input"]
    code, extraction = prompts.extract_dice_answer(cut, prompts.PYTHON_LANGUAGES)
    assert extraction == "lenient" and code.startswith("import torch") and code.endswith("pass")
    accepted = cases["python block"]
    assert prompts.extract_dice_answer(accepted["input"], ()) == (accepted["evaluation_output"], "dice")
