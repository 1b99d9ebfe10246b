"""Build the built-in model's training corpus, tokenizer and token arrays (rerunnable).

    python scripts/build_corpus.py [--out .corpus] [--generated 4000]

Steps, each skipped when its output is already there:
1. fetch: `pip download` the pinned packages below (sdists or wheels) into OUT/downloads;
2. collect: CUDA sources (.cu/.cuh, and headers that are clearly CUDA: they contain
   `__global__`, `__shared__` or `threadIdx`), plus kernels from scripts/generate_kernels.py;
   exact duplicates dropped; nothing from the project's KernelBench folder;
3. split by file: about 3% of files (chosen by a hash of the text) are held out as `test`;
4. tokenizer: byte-level BPE trained on the train split (OUT/tokenizer);
5. data: the texts of each split with, per line, the character offsets of its start, its
   first non-blank character and its end, and the brace-matched blocks, from which
   engine/fim_data.py cuts fill-in-the-middle spans (and tokenizes them as inference does).

OUT/stats.json records source, version, licence, files, bytes and tokens of every part: the
data card in docs/model-card.md is written from it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_tokenizer import build_tokenizer, save_tokenizer
from generate_kernels import generate

CUDA_SUFFIXES = (".cu", ".cuh")
HEADER_SUFFIXES = (".h", ".hpp", ".inl")
CLEARLY_CUDA = re.compile(r"__global__|__shared__|threadIdx")
MAX_FILE_BYTES = 200_000      # generated tables and amalgamations teach nothing useful
TEST_PERCENT = 3


@dataclass(frozen=True)
class Source:
    name: str            # short name used in the data card
    requirement: str     # pip requirement, pinned so that the corpus is reproducible
    sdist: bool          # the CUDA files are in the sdist (else in the wheel)
    licence: str
    url: str


SOURCES = [
    Source("cupy", "cupy==14.2.0", True, "MIT (CuPy); CCCL/CUB headers: Apache-2.0 WITH LLVM-exception / BSD-3-Clause",
           "https://pypi.org/project/cupy/"),
    Source("nvidia-cutlass", "nvidia-cutlass==4.2.0.0", False, "BSD-3-Clause",
           "https://pypi.org/project/nvidia-cutlass/"),
    Source("awkward", "awkward==2.14.0", True, "BSD-3-Clause",
           "https://pypi.org/project/awkward/"),
    Source("numba-cuda", "numba-cuda==0.24.0", True, "BSD-2-Clause",
           "https://pypi.org/project/numba-cuda/"),
]
GENERATED = Source("generated", "scripts/generate_kernels.py (seed 0)", False,
                   "MIT (this project)", "scripts/generate_kernels.py")


@dataclass
class CorpusFile:
    source: str
    path: str
    split: str
    text: str


def fetch(source: Source, downloads: Path) -> Path:
    """Download and unpack one package; returns the folder that holds its files.

    CuPy's sdist cannot build its metadata without the full CUDA toolkit (cuBLAS headers),
    which `pip download` insists on, so pip is told to keep its unpacked build folder
    (--no-clean) and we take the sources from there."""
    unpacked = downloads / source.name
    if unpacked.is_dir():
        return unpacked
    work = downloads / f"{source.name}.tmp"
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(work)]
    pkg = source.requirement.split("==")[0]
    cmd += ["--no-binary", pkg, "--no-clean"] if source.sdist else ["--only-binary", ":all:"]
    env_tmp = work / "pip-tmp"
    env_tmp.mkdir(exist_ok=True)
    # check=False: for CuPy pip fails after the download (see above); what it left decides.
    subprocess.run(cmd + [source.requirement], env={"TMPDIR": str(env_tmp), "PATH": "/usr/bin:/bin"},
                   capture_output=True, text=True, check=False)
    archives = [p for p in work.iterdir() if p.suffix in (".whl", ".gz", ".zip")]
    unpacked.mkdir()
    if archives:
        archive = archives[0]
        if archive.suffix == ".gz":
            with tarfile.open(archive) as tar:
                tar.extractall(unpacked, filter="data")
        else:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(unpacked)
    else:
        kept = sorted(env_tmp.glob(f"pip-download-*/{pkg.replace('-', '_')}_*"))
        if not kept:
            raise SystemExit(f"could not fetch {source.requirement}: pip kept no sources")
        kept[0].rename(unpacked / kept[0].name)
    shutil.rmtree(work)
    return unpacked


def is_cuda_file(path: Path, text: str) -> bool:
    if path.suffix in CUDA_SUFFIXES:
        return True
    return path.suffix in HEADER_SUFFIXES and CLEARLY_CUDA.search(text) is not None


def collect(root: Path) -> list[tuple[str, str]]:
    """(relative path, text) of every CUDA file under root."""
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in CUDA_SUFFIXES + HEADER_SUFFIXES:
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if is_cuda_file(path, text):
            found.append((str(path.relative_to(root)), text.replace("\r\n", "\n")))
    return found


def split_of(text: str) -> str:
    digest = int(hashlib.sha1(text.encode()).hexdigest(), 16)
    return "test" if digest % 100 < TEST_PERCENT else "train"


def gather(out: Path, generated: int) -> list[CorpusFile]:
    files: list[CorpusFile] = []
    seen: set[str] = set()

    def add(source: str, path: str, text: str) -> None:
        key = hashlib.sha1(text.encode()).hexdigest()
        if key in seen or not text.strip():
            return
        seen.add(key)
        files.append(CorpusFile(source, path, split_of(text), text))

    for source in SOURCES:
        root = fetch(source, out / "downloads")
        for path, text in collect(root):
            add(source.name, path, text)
    gen_dir = out / "generated"
    if not gen_dir.is_dir() or len(list(gen_dir.glob("*.cu"))) != generated:
        generate(gen_dir, generated, seed=0)
    for path in sorted(gen_dir.glob("*.cu")):
        add(GENERATED.name, path.name, path.read_text())
    return files


# --- line structure, for fill-in-the-middle spans on line boundaries -----------------

def line_spans(text: str) -> list[tuple[int, int, int]]:
    """(start, first non-blank, end) character offsets of each line, end before '\\n'."""
    spans, pos = [], 0
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" \t"))
        spans.append((pos, pos + indent, pos + len(line)))
        pos += len(line) + 1
    return spans


def brace_blocks(text: str) -> list[tuple[int, int]]:
    """(opening line, closing line) of `{ ... }` blocks whose `{` ends its line and whose
    `}` starts its line: loop bodies, if bodies, function bodies. Braces in comments and
    strings are rare enough in this corpus to ignore."""
    stack, blocks = [], []
    for number, line in enumerate(text.split("\n")):
        code = line.split("//")[0]
        for ch in code:
            if ch == "{":
                stack.append((number, code.rstrip().endswith("{")))
            elif ch == "}" and stack:
                opened, ends_line = stack.pop()
                if ends_line and code.strip().startswith("}") and number > opened + 1:
                    blocks.append((opened, number))
    return blocks


def write_split_data(files: list[CorpusFile], out: Path) -> None:
    """OUT/data/{split}_texts.json (the file texts) and {split}_lines.npy (char offsets of each
    line's start, first non-blank character and end), {split}_blocks.npy (opening and
    closing line of each block), {split}_files.npy (each file's first line and block)."""
    data_dir = out / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    for split in ("train", "test"):
        chosen = [f for f in files if f.split == split]
        lines, blocks, index = [], [], []
        for f in chosen:
            index.append((len(lines), len(blocks)))
            lines.extend(line_spans(f.text))
            blocks.extend(brace_blocks(f.text))
        (data_dir / f"{split}_texts.json").write_text(json.dumps([f.text for f in chosen]))
        np.save(data_dir / f"{split}_lines.npy", np.array(lines, dtype=np.int32).reshape(-1, 3))
        np.save(data_dir / f"{split}_blocks.npy", np.array(blocks, dtype=np.int32).reshape(-1, 2))
        np.save(data_dir / f"{split}_files.npy", np.array(index, dtype=np.int32).reshape(-1, 2))


def count_tokens(files: list[CorpusFile], tokenizer) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f, enc in zip(files, tokenizer.encode_batch([f.text for f in files], add_special_tokens=False)):
        counts[f.source] = counts.get(f.source, 0) + len(enc.ids)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(".corpus"))
    ap.add_argument("--generated", type=int, default=4000, help="generated kernel files")
    ap.add_argument("--vocab", type=int, default=8192)
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    files = gather(out, args.generated)
    with open(out / "files.jsonl", "w") as fh:
        fh.writelines(json.dumps(asdict(f)) + "\n" for f in files)
    tokenizer = build_tokenizer((f.text for f in files if f.split == "train"), args.vocab)
    save_tokenizer(tokenizer, out / "tokenizer")
    write_split_data(files, out)
    tokens = count_tokens(files, tokenizer)

    stats = []
    for source in SOURCES + [GENERATED]:
        mine = [f for f in files if f.source == source.name]
        stats.append({
            **asdict(source),
            "files": len(mine),
            "test_files": sum(f.split == "test" for f in mine),
            "bytes": sum(len(f.text.encode()) for f in mine),
            "tokens": tokens.get(source.name, 0),
        })
    (out / "stats.json").write_text(json.dumps(stats, indent=1))
    for s in stats:
        print(f"{s['name']:>15}: {s['files']:5d} files ({s['test_files']} test), "
              f"{s['bytes'] / 1e6:6.2f} MB, {s['tokens'] / 1e6:5.2f} M tokens  [{s['licence']}]")


if __name__ == "__main__":
    main()
