"""The built-in model's training pieces: corpus data, FIM examples, the block-diffusion mask
and noise, and a resumable training run of a tiny model on a tiny real corpus (CPU)."""

from __future__ import annotations

import csv
import importlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from training.fim_data import (
    PAD_DOC,
    ROLE_AFTER_END,
    ROLE_CONTEXT,
    ROLE_END,
    ROLE_MIDDLE,
    Batch,
    CorpusSplit,
    FimSampler,
    expression_span,
    random_span,
)
from engine.decoding.prompts import END_OF_TEXT, fim_prompt
from training.train import (
    TrainSettings,
    block_noise,
    build_model,
    diffusion_loss,
    export,
    role_weights,
    train,
    training_block_mask,
    training_mask,
    training_mask_mod,
)

REPO = Path(__file__).resolve().parents[2]


def _script(name: str):
    """A module of training.corpus, the corpus builder."""
    return importlib.import_module(f"training.corpus.{name}")


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    """40 generated kernels, all in the train split, a 600-token BPE, and the split data:
    the same functions training/corpus/build_corpus.py runs."""
    build = _script("build_corpus")
    gen = _script("generate_kernels")
    tok_mod = _script("cuda_tokenizer")
    out = tmp_path_factory.mktemp("corpus")
    paths = gen.generate(out / "generated", 40, seed=1)
    files = [build.CorpusFile("generated", p.name, "train", p.read_text()) for p in paths]
    tokenizer = tok_mod.build_tokenizer((f.text for f in files), 600)
    tok_mod.save_tokenizer(tokenizer, out / "tokenizer")
    build.write_split_data(files, out)
    return out


def _tokenizer(corpus: Path):
    from training.train import load_tokenizer

    return load_tokenizer(str(corpus / "tokenizer"))


def test_generated_kernels_compile(tmp_path):
    """The generator's kernels are valid CUDA (nvcc, device code only)."""
    from profiler.checks.compile import nvcc_check

    gen = _script("generate_kernels")
    sources = [p.read_text() for p in gen.generate(tmp_path, 3, seed=7)]
    errors = [d for src in sources for d in nvcc_check(src, "gen.cu") if d.severity == "error"]
    assert errors == []


def _cuda_of(build, text: str) -> str:
    """The CUDA of a generated file: itself, or the CUDA strings of a Python script."""
    return "\n".join(build.python_cuda_strings(text)) if text.startswith("import") else text


def test_ordinary_kernels_compile_as_cuda_and_inside_python_strings():
    """training/corpus/ordinary_kernels.py writes valid CUDA (nvcc, device code), host programs and
    the CUDA strings of PyCUDA / CuPy / load_inline scripts (valid Python too)."""
    import random

    from profiler.checks.compile import nvcc_check

    build = _script("build_corpus")
    ordinary = _script("ordinary_kernels")
    rng = random.Random(3)
    sources = [ordinary.generate_source(rng, wrap="cuda", host=True) for _ in range(2)]
    sources += [ordinary.generate_source(rng, wrap="python") for _ in range(3)]
    for text in sources[2:]:
        compile(text, "script.py", "exec")
        assert "__global__" in _cuda_of(build, text)
    prelude = "#include <cuda_runtime.h>\n#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
    errors = [d for text in sources for d in nvcc_check(prelude + _cuda_of(build, text), "ordinary.cu")
              if d.severity == "error"]
    assert errors == []


def test_ordinary_kernels_vary_what_authors_vary():
    """The point of the ordinary kernels: not one house spelling. Over a few hundred files, the
    index is declared in many ways (orders, types, names), and kernels are named many ways."""
    import random

    ordinary = _script("ordinary_kernels")
    rng = random.Random(0)
    texts = [ordinary.generate_source(rng) for _ in range(300)]
    index_lines = {m.group(0) for t in texts
                   for m in re.finditer(r"(?m)^\s*[\w ]+ (\w+) = [^;]*threadIdx\.x[^;]*;", t)}
    forms = {re.sub(r"\s", "", line.split("=", 1)[1]) for line in index_lines}
    decls = {line.split("=")[0].strip().rsplit(" ", 1)[0] for line in index_lines}
    names = {n for t in texts for n in re.findall(r"__global__ void (\w+)", t)}
    assert len(forms) >= 8 and len(decls) >= 5 and len(names) >= 80
    assert any("threadIdx.x + blockIdx.x * blockDim.x" in t for t in texts)
    assert any("blockDim.x * blockIdx.x + threadIdx.x" in t for t in texts)
    assert sum(t.startswith("import") for t in texts) > 30 and sum("int main()" in t for t in texts) > 30
    for t in texts:   # no kernel has two things of one name (an array `c` and an index `c`)
        for k in re.findall(r"__global__ void \w+\(([^)]*)\)", t):
            params = [p.split()[-1].lstrip("*") for p in k.split(",") if p.strip()]
            assert len(set(params)) == len(params), k


def test_reindex_rebuilds_the_line_and_block_arrays_from_the_texts(tiny_corpus, tmp_path):
    """A corpus carried as texts alone (the device's transfer limit) gets back exactly the
    arrays build_corpus.py wrote."""
    import subprocess

    (tmp_path / "data").mkdir()
    for split in ("train", "valid", "test"):
        source = tiny_corpus / "data" / f"{split}_texts.json"
        (tmp_path / "data" / source.name).write_text(source.read_text() if source.is_file() else "[]")
    subprocess.run([sys.executable, "-m", "training.corpus.build_corpus", "--out", str(tmp_path), "--reindex"],
                   check=True, capture_output=True, cwd=REPO)
    for name in ("train_lines.npy", "train_blocks.npy", "train_files.npy"):
        assert np.array_equal(np.load(tiny_corpus / "data" / name), np.load(tmp_path / "data" / name)), name


def test_held_out_packages_are_the_test_split_whole_and_win_duplicates(tmp_path, monkeypatch):
    """A held-out package's files are all `test`; no training package's file is; and a
    file that is in both (whitespace aside) is kept once, held out."""
    build = _script("build_corpus")
    held = build.Source("held", "held==1", True, "MIT", "u", held_out=True)
    train_src = build.Source("lib", "lib==1", True, "MIT", "u")
    shared = "__global__ void k(float* y) { y[0] = 1.0f; }\n"
    texts = {"held": {"a.cu": shared, "b.cu": "__global__ void h() {}\n"},
             "lib": {"c.cu": shared.replace(" ", "  "), **{f"d{i}.cu": f"__global__ void d{i}() {{}}\n" for i in range(60)}}}
    for name, files in texts.items():
        for path, text in files.items():
            (tmp_path / "downloads" / name).mkdir(parents=True, exist_ok=True)
            (tmp_path / "downloads" / name / path).write_text(text)
    monkeypatch.setattr(build, "SOURCES", [train_src, held])
    files = build.gather(tmp_path, generated=0)
    by_path = {(f.source, f.path): f.split for f in files}
    assert by_path[("held", "a.cu")] == "test" and by_path[("held", "b.cu")] == "test"
    assert ("lib", "c.cu") not in by_path
    assert {s for (src, _), s in by_path.items() if src == "lib"} <= {"train", "valid"}


def test_debian_tarballs_pick_orig_components_and_debian_from_a_sources_stanza():
    build = _script("build_corpus")
    stanza = (
        "Package: opencv\nVersion: 4.10.0+dfsg-9\nDirectory: pool/main/o/opencv\n"
        "Files:\n 11 6466 opencv_4.10.0+dfsg-9.dsc\n"
        "Checksums-Sha256:\n"
        " aa 6466 opencv_4.10.0+dfsg-9.dsc\n"
        " bb 50001392 opencv_4.10.0+dfsg.orig-contrib.tar.xz\n"
        " cc 200 opencv_4.10.0+dfsg.orig-models.tar.bz2\n"
        " dd 77603312 opencv_4.10.0+dfsg.orig.tar.xz\n"
        " ee 50936 opencv_4.10.0+dfsg-9.debian.tar.xz\n"
        "Homepage: https://opencv.org\n")
    assert build.control_stanza(stanza)["Version"] == "4.10.0+dfsg-9"
    assert build.debian_tarballs(stanza, components=("contrib",)) == (
        ("pool/main/o/opencv/opencv_4.10.0+dfsg.orig-contrib.tar.xz", "bb"),
        ("pool/main/o/opencv/opencv_4.10.0+dfsg.orig.tar.xz", "dd"),
        ("pool/main/o/opencv/opencv_4.10.0+dfsg-9.debian.tar.xz", "ee"))
    assert [p for p, _ in build.debian_tarballs(stanza)] == [
        "pool/main/o/opencv/opencv_4.10.0+dfsg.orig.tar.xz", "pool/main/o/opencv/opencv_4.10.0+dfsg-9.debian.tar.xz"]


def test_fetch_debian_unpacks_pinned_tarballs_already_in_the_pool(tmp_path):
    """No network: archives already in downloads/debian-pool with the pinned SHA-256 are used;
    the orig tarball's CUDA files (not its other files) are collected, debian/ kept apart."""
    import hashlib
    import io
    import tarfile

    build = _script("build_corpus")
    pool = tmp_path / "downloads" / "debian-pool"
    pool.mkdir(parents=True)

    def tarball(name: str, members: dict[str, str]) -> str:
        with tarfile.open(pool / name, "w:gz") as tar:
            for member, text in members.items():
                info = tarfile.TarInfo(member)
                info.size = len(text.encode())
                tar.addfile(info, io.BytesIO(text.encode()))
        return hashlib.sha256((pool / name).read_bytes()).hexdigest()

    orig = tarball("pkg_1.0.orig.tar.gz", {"pkg-1.0/src/k.cu": "__global__ void k() {}\n",
                                          "pkg-1.0/src/main.c": "int main() {}\n", "pkg-1.0/LICENSE": "MIT\n"})
    deb = tarball("pkg_1.0-1.debian.tar.gz", {"debian/copyright": "License: Expat\n",
                                             "debian/patches/p.cu": "__global__ void p() {}\n"})
    source = build.Source("pkg", "pkg 1.0-1 (Debian)", False, "MIT", "u",
                          debian=(("pool/main/p/pkg/pkg_1.0.orig.tar.gz", orig),
                                  ("pool/main/p/pkg/pkg_1.0-1.debian.tar.gz", deb)))
    root = build.fetch(source, tmp_path / "downloads")
    assert [p for p, _ in build.collect(root)] == ["pkg_1.0.orig/pkg-1.0/src/k.cu"]
    assert (root / "pkg_1.0.orig" / "pkg-1.0" / "LICENSE").is_file()
    assert not (root / "pkg_1.0.orig" / "pkg-1.0" / "src" / "main.c").exists()
    assert (tmp_path / "downloads" / "pkg" / "debian-packaging" / "debian" / "copyright").is_file()


def test_load_inline_wrapping_carries_the_kernel_verbatim():
    build = _script("build_corpus")
    gen = _script("generate_kernels")
    import random

    kernel = gen.generate_file(random.Random(4))
    script = build.in_load_inline(kernel, random.Random(0))
    assert kernel.strip() in script and "load_inline(" in script and "cuda_sources=" in script
    compile(script, "inline.py", "exec")   # valid Python


def test_brace_blocks_find_loop_and_function_bodies():
    build = _script("build_corpus")
    text = "__global__ void f(int n) {\n    for (int i = 0; i < n; ++i) {\n        g(i);\n    }\n}\n"
    assert sorted(build.brace_blocks(text)) == [(0, 4), (1, 3)]


def test_fim_example_tokenizes_as_inference_prompt(tiny_corpus):
    """A training example equals tokenize(fim_prompt(prefix, suffix)) + tokenize(middle) + EOS,
    the exact tokens the engine feeds and the model must answer at inference."""
    tokenizer = _tokenizer(tiny_corpus)
    data = CorpusSplit(tiny_corpus / "data", "train")
    sampler = FimSampler(data, tokenizer, seq_len=4096, block_size=4, max_middle=4096, seed=0)
    rng = np.random.default_rng(3)
    checked = 0
    for f in range(len(data)):
        span = random_span(data, f, rng)
        if span is None:
            continue
        text = data.texts[f]
        prefix, middle, suffix = text[:span.start], text[span.start:span.end], text[span.end:]
        sampler.pending = []
        window = sampler.seq_len * 4
        assert len(prefix) < window and len(suffix) < window   # whole file in the windows
        enc = tokenizer.backend_tokenizer.encode_batch([prefix, middle, suffix], add_special_tokens=False)
        from training.fim_data import Example

        laid = sampler.layout(Example(enc[0].ids, enc[1].ids, enc[2].ids), room=4096)
        expected = (tokenizer.encode(fim_prompt(prefix, suffix), add_special_tokens=False)
                    + tokenizer.encode(middle, add_special_tokens=False)
                    + [tokenizer.convert_tokens_to_ids(END_OF_TEXT)])
        assert laid.tolist() == expected
        checked += 1
    assert checked >= 30


def test_rows_pack_examples_on_block_boundaries(tiny_corpus):
    tokenizer = _tokenizer(tiny_corpus)
    sampler = FimSampler(CorpusSplit(tiny_corpus / "data", "train"), tokenizer, seq_len=256,
                         block_size=4, max_middle=64, seed=0)
    batch = sampler.batch(4)
    assert batch.ids.shape == (4, 256)
    for ids, doc, pos in zip(batch.ids, batch.doc, batch.pos):
        real = doc < PAD_DOC
        assert real.sum() > 128   # rows are mostly examples, not padding
        for d in np.unique(doc[real]):
            where = np.nonzero(doc == d)[0]
            assert where[0] % 4 == 0 and pos[where[0]] == 0
            assert ids[where[0]] == sampler.special.fim_suffix and ids[where[-1]] == sampler.special.eos


def test_rows_mark_the_span_end_to_the_end_of_its_block(tiny_corpus):
    """Roles: context, then the middle, then <|endoftext|> (ROLE_END) right after it, and the
    rest of that block end tokens of the same example (what the decoder fills there)."""
    tokenizer = _tokenizer(tiny_corpus)
    sampler = FimSampler(CorpusSplit(tiny_corpus / "data", "train"), tokenizer, seq_len=256,
                         block_size=4, max_middle=64, seed=1)
    batch = sampler.batch(8)
    eos, checked = sampler.special.eos, 0
    for ids, doc, pos, role in zip(batch.ids, batch.doc, batch.pos, batch.role):
        for d in np.unique(doc[doc < PAD_DOC]):
            where = np.nonzero(doc == d)[0]
            r = role[where]
            assert len(where) % 4 == 0 and (pos[where] == np.arange(len(where))).all()
            end = int(np.nonzero(r == ROLE_END)[0].item())
            assert ids[where[end]] == eos and ids[where[end] - 1] != eos
            assert (r[:end] != ROLE_END).all() and (r[end + 1:] == ROLE_AFTER_END).all()
            assert (ids[where[end + 1:]] == eos).all() and len(r) - end - 1 < 4
            middle = np.nonzero(r == ROLE_MIDDLE)[0]
            assert len(middle) and middle[-1] == end - 1 and (np.diff(middle) == 1).all()
            assert (r[:middle[0]] == ROLE_CONTEXT).all()
            assert ids[where[middle[0] - 1]] == sampler.special.fim_middle
            checked += 1
    assert checked >= 8


def test_expression_spans_are_what_an_editor_user_selects():
    rng = np.random.default_rng(0)
    line = "y[i] = a * x[i] + y[i];"
    got = {line[a:b] for a, b in (expression_span(line, rng) for _ in range(50))}
    assert got == {"a * x[i] + y[i]"}
    line = "out[k] = fmaxf(v, 0.0f);"
    got = {line[a:b] for a, b in (expression_span(line, rng) for _ in range(50))}
    assert got == {"fmaxf(v, 0.0f)", "v, 0.0f"}
    assert expression_span("if (a == b) {", rng) == (4, 10)
    assert expression_span("__syncthreads();", rng) is None


def test_loss_is_weighted_by_role():
    """With weight only on the middle and its end, the loss is the mean cross-entropy of the
    masked middle and end tokens alone: the context does not count."""
    torch.manual_seed(0)
    from engine.model.loading import config_from_json
    from engine.model.sdar import SDARForCausalLM

    model = SDARForCausalLM(config_from_json({
        "vocab_size": 32, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "block_size": 4,
        "mask_token_id": 31, "eos_token_id": 0, "max_position_embeddings": 64}))
    ids = torch.randint(1, 30, (1, 16))
    role = torch.tensor([[ROLE_CONTEXT] * 8 + [ROLE_MIDDLE] * 5 + [ROLE_END] + [ROLE_AFTER_END] * 2])
    batch = Batch(ids.numpy(), np.zeros((1, 16), dtype=np.int64), np.arange(16)[None], role.numpy())
    settings = TrainSettings(context_weight=0.0, end_weight=1.0, after_end_weight=0.0)
    weights = role_weights(settings, torch.device("cpu"))
    gen = torch.Generator().manual_seed(5)
    loss, middle, end = diffusion_loss(model, batch, 31, PAD_DOC, gen, torch.device("cpu"), weights)
    # The same noise again, and the loss by hand.
    masked = block_noise(ids, torch.zeros(1, 16, dtype=torch.long), 4, PAD_DOC, torch.Generator().manual_seed(5))
    noisy = torch.where(masked, torch.full_like(ids, 31), ids)
    logits = model(torch.cat([ids, noisy], 1), position_ids=torch.arange(16).repeat(1, 2),
                   attn_mask=training_mask(torch.zeros(1, 16, dtype=torch.long), 4), logits_to_keep=16)
    ce = torch.nn.functional.cross_entropy(logits[0], ids[0], reduction="none")
    chosen = masked[0] & ((role[0] == ROLE_MIDDLE) | (role[0] == ROLE_END))
    assert chosen.any()
    assert torch.allclose(loss, ce[chosen].mean(), atol=1e-5)
    mid = masked[0] & (role[0] == ROLE_MIDDLE)
    assert torch.allclose(middle, ce[mid].mean(), atol=1e-5)


def test_training_mask_is_block_diffusion_within_examples():
    # Two examples of 8 and 4 tokens in a row of 12, block size 4.
    doc = torch.tensor([[0] * 8 + [1] * 4])
    mask = training_mask(doc, 4)[0, 0]
    t = 12
    clean, noisy = slice(0, t), slice(t, 2 * t)
    # Clean tokens: block-causal inside their example, never see noisy tokens.
    assert mask[clean, noisy].sum() == 0
    assert mask[5, 0] and mask[5, 7] and not mask[1, 4] and not mask[9, 3]
    # Noisy token of block 1: its own noisy block, and the clean block 0; not its clean self.
    q = t + 5
    assert mask[q, t + 4 : t + 8].all() and mask[q, 0:4].all()
    assert not mask[q, 4:8].any() and not mask[q, t : t + 4].any()
    # Noisy first block of example 1 sees nothing of example 0.
    assert not mask[t + 9, 0:8].any() and mask[t + 9, t + 8 : t + 12].all()


def _packed_docs(rows: int, t: int, seed: int) -> torch.Tensor:
    """doc ids as FimSampler packs them: examples of whole blocks, then padding, one id a block."""
    g = torch.Generator().manual_seed(seed)
    doc = torch.empty(rows, t, dtype=torch.long)
    for r in range(rows):
        at, n = 0, 0
        while at < t - 8:
            length = min(4 * int(torch.randint(1, 6, (1,), generator=g)), t - at)
            doc[r, at:at + length] = n
            at, n = at + length, n + 1
        doc[r, at:] = PAD_DOC + torch.arange(t - at) // 4 + at // 4
    return doc


def test_flex_training_mask_is_the_dense_one_query_by_key():
    doc = _packed_docs(3, 40, seed=1)
    dense = training_mask(doc, 4)[:, 0]
    b, q, kv = torch.meshgrid(torch.arange(3), torch.arange(80), torch.arange(80), indexing="ij")
    assert torch.equal(training_mask_mod(doc, 4)(b, None, q, kv), dense)


def test_flex_training_loss_is_the_sdpa_loss():
    """The same weights, batch and noise: the loss through flex_attention over the BlockMask
    (eager here; compiled on a GPU by train) is the loss through SDPA over the dense mask."""
    torch.manual_seed(0)
    from engine.model.loading import config_from_json
    from engine.model.sdar import SDARForCausalLM

    model = SDARForCausalLM(config_from_json({
        "vocab_size": 32, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "block_size": 4,
        "mask_token_id": 31, "eos_token_id": 0, "max_position_embeddings": 256}))
    doc = _packed_docs(2, 160, seed=2)
    ids = torch.randint(1, 30, (2, 160))
    role = torch.full((2, 160), ROLE_MIDDLE)
    batch = Batch(ids.numpy(), doc.numpy(), (torch.arange(160)[None] % 40).expand(2, -1).numpy(), role.numpy())
    weights = role_weights(TrainSettings(), torch.device("cpu"))
    with torch.no_grad():   # flex_attention has no backward on a CPU (the GPU test has)
        losses = [diffusion_loss(model, batch, 31, PAD_DOC, torch.Generator().manual_seed(3), torch.device("cpu"),
                                 weights, attention) for attention in ("sdpa", "flex")]
    assert torch.allclose(torch.stack(losses[0]), torch.stack(losses[1]), atol=1e-5)
    assert training_block_mask(doc, 4).shape == (2, 1, 320, 320)


def test_block_noise_masks_one_to_block_size_per_block_and_never_padding():
    ids = torch.zeros(3, 64, dtype=torch.long)
    doc = torch.zeros(3, 64, dtype=torch.long)
    doc[:, 48:] = PAD_DOC
    masked = block_noise(ids, doc, 4, PAD_DOC, torch.Generator().manual_seed(0))
    per_block = masked[:, :48].reshape(3, 12, 4).sum(-1)
    assert per_block.min() >= 1 and per_block.max() <= 4
    assert len(set(per_block.flatten().tolist())) > 1
    assert not masked[:, 48:].any()


def _tiny_settings(corpus: Path, tokenizer, **overrides) -> TrainSettings:
    return TrainSettings(
        data=str(corpus / "data"), tokenizer=str(corpus / "tokenizer"),
        model={"vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                   "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "tie_word_embeddings": True,
                   "block_size": 4, "mask_token_id": tokenizer.mask_token_id, "eos_token_id": tokenizer.eos_token_id,
                   "bos_token_id": None, "pad_token_id": tokenizer.eos_token_id, "prompt_format": "fim",
                   "rope_theta": 10000.0, "max_position_embeddings": 1024},
        seq_len=128, batch_size=2, max_middle=48, warmup_steps=2, log_every=1, budget_seconds=600, **overrides,
    )


def test_training_logs_the_validation_split(tiny_corpus, tmp_path):
    """With a `valid` split, the first logged step has its losses on it (and the middle's)."""
    build = _script("build_corpus")
    files = [build.CorpusFile("generated", f"{k}", "valid" if k < 5 else "train", text)
             for k, text in enumerate(json.loads((tiny_corpus / "data" / "train_texts.json").read_text()))]
    corpus = tmp_path / "corpus"
    build.write_split_data(files, corpus)
    (corpus / "tokenizer").symlink_to(tiny_corpus / "tokenizer")
    settings = _tiny_settings(corpus, _tokenizer(tiny_corpus), valid_batches=1)
    train(settings, tmp_path / "run", resume=False, device=torch.device("cpu"), max_steps=2)
    with open(tmp_path / "run" / "loss.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert np.isfinite(float(rows[0]["valid_loss"])) and np.isfinite(float(rows[0]["valid_middle_loss"]))
    assert rows[1]["valid_loss"] in ("", None)   # not every step: every valid_every_seconds


def test_training_resumes_and_exports_a_loadable_checkpoint(tiny_corpus, tmp_path):
    """Two steps, then a resumed run to four: the step count, the optimizer and the log carry
    on; the exported folder loads through engine.model.loading like any checkpoint."""
    tokenizer = _tokenizer(tiny_corpus)
    settings = _tiny_settings(tiny_corpus, tokenizer)
    out = tmp_path / "run"
    train(settings, out, resume=False, device=torch.device("cpu"), max_steps=2)
    model = train(settings, out, resume=True, device=torch.device("cpu"), max_steps=4)
    state = torch.load(out / "train_state.pt", weights_only=False)
    assert state["step"] == 4 and len(state["optimizer"]["state"]) > 0
    with open(out / "loss.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]
    assert all(np.isfinite(float(r["loss"])) and np.isfinite(float(r["middle_loss"])) for r in rows)

    export(model, settings, out / "checkpoint", with_tokenizer=True)
    from engine.model.loading import load_checkpoint

    loaded, tok, config = load_checkpoint(out / "checkpoint", "cpu", torch.float32)
    assert config.prompt_format == "fim" and config.mask_token_id == tok.mask_token_id
    assert config.extra["trained_context"] == settings.seq_len   # the engine cuts prompts to it
    ids = torch.tensor([tok.encode(fim_prompt("int a;\n", "\n"), add_special_tokens=False)])
    assert loaded(ids).shape == (1, ids.shape[1], len(tokenizer))


def test_training_starts_from_init_weights_and_stops_after_its_seconds(tiny_corpus, tmp_path):
    """`init` starts a run from a checkpoint (training a model further on a new corpus); a run
    stopped by stop_after keeps its schedule, and --resume goes on from where it stopped."""
    from training.train import initial_weights

    tokenizer = _tokenizer(tiny_corpus)
    first = train(_tiny_settings(tiny_corpus, tokenizer), tmp_path / "first", resume=False,
                  device=torch.device("cpu"), max_steps=1)
    export(first, _tiny_settings(tiny_corpus, tokenizer), tmp_path / "start", with_tokenizer=True)
    settings = _tiny_settings(tiny_corpus, tokenizer, init=str(tmp_path / "start"))
    model = build_model(settings, torch.device("cpu"))
    initial_weights(model, settings.init, tokenizer)
    exported = first.to(torch.bfloat16).float().state_dict()
    assert all(torch.equal(v, exported[k]) for k, v in model.state_dict().items())
    other = _tiny_settings(tiny_corpus, tokenizer)
    other.model = {**other.model, "hidden_size": 48}
    with pytest.raises(ValueError, match="config differs"):
        initial_weights(build_model(other, torch.device("cpu")), settings.init, tokenizer)

    out = tmp_path / "run"
    train(settings, out, resume=False, device=torch.device("cpu"), stop_after=0.0)
    assert torch.load(out / "train_state.pt", weights_only=False)["step"] == 0
    train(settings, out, resume=True, device=torch.device("cpu"), max_steps=2)
    state = torch.load(out / "train_state.pt", weights_only=False)
    assert state["step"] == 2 and state["seconds"] < settings.budget_seconds


def test_settings_file_in_repository_matches_the_shipped_model():
    settings = TrainSettings.load(REPO / "engine" / "builtin" / "train_settings.json")
    shipped = json.loads((REPO / "engine" / "builtin" / "config.json").read_text())
    for key, value in settings.model.items():
        assert shipped[key] == value, key


def test_python_strings_collects_the_cuda_strings_of_included_scripts_only(tmp_path):
    """A source whose CUDA lives in Python strings (PyCUDA's examples): each string with a
    kernel is a file `SCRIPT.py#N`; other strings, excluded and not-included paths are not."""
    build = _script("build_corpus")
    examples = tmp_path / "pkg-1.0" / "examples"
    examples.mkdir(parents=True)
    (examples / "hello.py").write_text(
        'from pycuda.compiler import SourceModule\n'
        'doc = "a string without a kernel"\n'
        'mod = SourceModule("""\n__global__ void twice(float *a)\n{\n  a[threadIdx.x] *= 2;\n}\n""")\n'
        "other = SourceModule('__global__ void zero(int *a) { a[0] = 0; }')\n"
    )
    (examples / "gpl.py").write_text('SourceModule("""__global__ void g(int *a) { a[0] = 1; }""")\n')
    (examples / "broken.py").write_text('SourceModule("""__global__ void b(""" +\n')  # not Python: skipped
    (tmp_path / "pkg-1.0" / "setup.py").write_text('K = "__global__ void outside(int *a) { }"\n')
    found = dict(build.collect(tmp_path, exclude=("*/gpl.py",), include=("*/examples/*",), python_strings=True))
    assert sorted(found) == ["pkg-1.0/examples/hello.py#0", "pkg-1.0/examples/hello.py#1"]
    assert "a[threadIdx.x] *= 2;" in found["pkg-1.0/examples/hello.py#0"]
    assert found["pkg-1.0/examples/hello.py#1"] == "__global__ void zero(int *a) { a[0] = 0; }"
