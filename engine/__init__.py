"""The diffusion engine: SDAR/DICE checkpoints, block-diffusion decoding, DICE prompts.

`engine.load(spec)` returns an Engine (docs/architecture.md). Heavy modules (torch,
transformers) are imported only when a model is loaded, so that `engine.serving.client` and
`engine.types` stay cheap to import in the language server.
"""

from __future__ import annotations

from pathlib import Path

from engine.types import Cancelled, Candidate, EngineError, EngineGone, EngineInfo, Progress, Sampling

BUILTIN_DIR = Path(__file__).parent / "builtin"

__all__ = ["load", "load_failure", "resolve_builtin", "Cancelled", "Candidate", "EngineError", "EngineGone", "EngineInfo", "Progress", "Sampling"]


def resolve_builtin() -> Path:
    """The built-in model's folder, or a clear EngineError while it holds no weights."""
    if not (BUILTIN_DIR / "config.json").is_file() or not any(BUILTIN_DIR.glob("*.safetensors")):
        raise EngineError(
            f"the built-in model is not installed ({BUILTIN_DIR} holds no weights). Point --model "
            "at a checkpoint folder (config.json + *.safetensors + tokenizer files), e.g. "
            "--model ~/models/DICE-1.7B, or at a running engine: --model dice://HOST:PORT"
        )
    return BUILTIN_DIR


def load_failure(spec: str, exc: Exception) -> str:
    """What to tell the user when engine.load(spec) raised exc: an EngineError says it all;
    anything else is a bug or a library's surprise, named with its type."""
    return str(exc) if isinstance(exc, EngineError) else f"could not load {spec}: {type(exc).__name__}: {exc}"


def load(spec: str = "builtin", device=None, dtype=None, *, routing=None, token: str | None = None,
         memory: int | None = None):
    """spec: `builtin`, a checkpoint folder, a Hugging Face Hub id (`ORG/NAME[@REVISION]`,
    engine.model.hub), `dice://HOST:PORT[?token=...]` or `sglang://HOST:PORT`. `routing`: a
    local model's decoding path and fusions (engine.model.routes.Routing; None: the fastest
    the machine runs). `token`: a dice:// server's, where the URL carries none. `memory`: bytes a
    local model's weights and each request together may take, besides what the device has free
    (engine.model.memory; None: no budget of its own)."""
    if spec.startswith("dice://"):
        from engine.serving.remote import RemoteEngine

        return RemoteEngine(spec, token)
    if spec.startswith("sglang://"):
        from engine.serving.sglang import SGLangEngine

        return SGLangEngine(spec)
    from engine.model import hub

    if spec == "builtin":
        folder = resolve_builtin()
    elif hub.is_hub_id(spec):
        folder = hub.resolve(spec)
    else:
        folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise EngineError(
            f"--model {spec!r}: not a checkpoint folder, 'builtin', a Hub id (ORG/NAME), dice://HOST:PORT "
            "or sglang://HOST:PORT"
        )
    from engine.decoding.local import LocalEngine  # torch: only once there is a model to load
    from engine.model.routes import Routing

    return LocalEngine.from_folder(folder, device, dtype, name=spec, routing=routing or Routing(),
                                  memory=memory)
