"""What a fast decoding path's set-up leaves on disk, so that the next process pays less of it.

A fast path's first use compiles (dynamo traces the model, inductor generates and Triton
compiles its kernels, NVRTC through CuPy compiles the engine's own CUDA kernels) and captures
CUDA graphs. Inductor's, Triton's and CuPy's caches hold the compiled kernels; by default
inductor's lives in /tmp (gone at a reboot, and per user there), so `use_persistent_caches`
points all three at one folder under the user's cache (unless the user set them), where each
keys its entries by the source it compiled and its own versions.

`WarmRecords` keeps what a warm-up learned for one machine and model: which decoding path
passed (a path that failed to compile or disagreed with the eager one is not tried again, as
its failure costs the whole compilation each time) and how long each took. An entry is keyed
by everything that decides that outcome: the GPU, the model's shape and dtype, the path and
fusions, torch's, Triton's and CuPy's versions and a hash of the engine's kernel and model
source. A record that is not valid JSON of that form, or whose stored key is not the current
one, is ignored and overwritten, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

# The source whose change changes what a fast path compiles or computes.
SOURCE_FILES = ("model/sdar.py", "model/routes.py", "model/skinny.py", "model/decode_attention.py",
                "model/decode_attention_kernels.py", "decoding/paths.py", "decoding/decode.py")
ENGINE = Path(__file__).resolve().parent.parent
RECORD_VERSION = 1


def cache_root() -> Path:
    """DICE_COMPILE_CACHE, else dice-lsp/compile under XDG_CACHE_HOME (~/.cache)."""
    if os.environ.get("DICE_COMPILE_CACHE"):
        return Path(os.environ["DICE_COMPILE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dice-lsp" / "compile"


# The environment variable each compiler's cache folder is read from, and its folder under the root.
CACHE_VARIABLES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton", "CUPY_CACHE_DIR": "cupy"}


def use_persistent_caches(root: Path | None = None) -> dict[str, str]:
    """Point inductor's, Triton's and CuPy's caches at folders under `root` (cache_root()),
    each only where the environment does not name one already; returns the folders in use.
    Each of them reads its variable when it compiles, so this takes effect if called before
    the first compilation. A root that cannot be made leaves the defaults."""
    root = root or cache_root()
    in_use = {}
    for variable, name in CACHE_VARIABLES.items():
        if not os.environ.get(variable):
            folder = root / name
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError:
                continue
            os.environ[variable] = str(folder)
        in_use[variable] = os.environ[variable]
    return in_use


def source_hash(files: tuple[str, ...] = SOURCE_FILES, base: Path = ENGINE) -> str:
    """sha256 over the named engine source files (name and bytes; a missing one counts as such)."""
    digest = hashlib.sha256()
    for name in files:
        path = base / name
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"<missing>")
        digest.update(b"\0")
    return digest.hexdigest()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def versions() -> dict[str, str]:
    """torch's (and its CUDA's), Triton's and CuPy's versions: "" for one not installed."""
    import torch

    cupy = next((v for v in (_version(p) for p in ("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x")) if v), "")
    return {"torch": torch.__version__, "cuda": torch.version.cuda or "", "triton": _version("triton"), "cupy": cupy}


def gpu_name(device) -> str:
    """The device's name and compute capability ("cpu" off a GPU)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    major, minor = torch.cuda.get_device_capability(device)
    return f"{torch.cuda.get_device_name(device)} sm_{major}{minor}"


def warm_key(config, dtype, device, path: str, fusion) -> dict[str, Any]:
    """Everything that decides whether `path` compiles and agrees for this model here."""
    shape = {name: getattr(config, name) for name in (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "tie_word_embeddings", "block_size")}
    return {"gpu": gpu_name(device), "shape": shape, "dtype": str(dtype).removeprefix("torch."), "path": path,
            "fusion": asdict(fusion) if is_dataclass(fusion) else fusion, "versions": versions(),
            "source": source_hash()}


def key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


class WarmRecords:
    """The warm-ups' outcomes in one JSON file: {"version": 1, "entries": {digest: {"key": KEY,
    "ok": bool, "seconds": float, "reason": str}}}."""

    def __init__(self, file: Path | None = None) -> None:
        """`file`: DICE_WARM_RECORD, else warm.json under cache_root()."""
        self.file = file or Path(os.environ.get("DICE_WARM_RECORD") or cache_root() / "warm.json")

    def _entries(self) -> dict[str, dict]:
        try:
            data = json.loads(self.file.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or not isinstance(data.get("entries"), dict):
            return {}
        return data["entries"]

    def get(self, key: dict[str, Any]) -> dict | None:
        """The stored outcome for `key`: {"ok", "seconds", "reason"}, or None where there is none
        or the entry is not well formed or was stored for another key."""
        entry = self._entries().get(key_digest(key))
        if (not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("ok"), bool)
                or not isinstance(entry.get("seconds"), (int, float)) or not isinstance(entry.get("reason"), str)):
            return None
        return {"ok": entry["ok"], "seconds": float(entry["seconds"]), "reason": entry["reason"]}

    def put(self, key: dict[str, Any], ok: bool, seconds: float, reason: str = "") -> None:
        """Store the outcome (written whole to a temporary file and renamed over the record, so
        that a reader never sees half of it; a folder that cannot be written keeps nothing)."""
        entries = {digest: entry for digest, entry in self._entries().items()
                   if isinstance(entry, dict) and entry.get("key") is not None}
        entries[key_digest(key)] = {"key": key, "ok": ok, "seconds": seconds, "reason": reason}
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.file.parent, delete=False, suffix=".tmp") as out:
                json.dump({"version": RECORD_VERSION, "entries": entries}, out, indent=1)
            os.replace(out.name, self.file)
        except OSError:
            pass
