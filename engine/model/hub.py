"""Checkpoints named by their Hugging Face Hub id: `--model ORG/NAME` (or `ORG/NAME@REVISION`).

`resolve(spec)` returns the checkpoint's folder in the user's Hugging Face cache, downloading
what is missing (with huggingface_hub's progress bars on stderr) when online; with
`HF_HUB_OFFLINE=1`, or without a network, the cached snapshot is used as it is: the Hub's
address is tried first with one short TCP connection, and where that fails (no route, no DNS,
refused) huggingface_hub's own offline switch is turned on for the call, so that the answer is
the cache's or one line, not five retries of each request. The
config is fetched first, so that a repository that is not an SDAR/DICE checkpoint is refused
before any weights are downloaded. Only the files a checkpoint folder needs are fetched.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

from engine.types import EngineError

# ORG/NAME as the Hub spells repository ids, optionally @REVISION (a branch, tag or commit).
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?")

# What engine.model.loading reads from a checkpoint folder.
CHECKPOINT_FILES = [
    "config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
    "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "added_tokens.json",
    "special_tokens_map.json", "chat_template.jinja",
]

MODEL_TYPES = ("sdar", "qwen3")  # as engine.model.loading.load_config accepts them
CONNECT_TIMEOUT_S = 3.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def unreachable(endpoint: str) -> str | None:
    """Why the Hub at `endpoint` cannot be reached from here (one TCP connection, at most
    CONNECT_TIMEOUT_S), or None when it can, or when a proxy stands between (which only
    huggingface_hub's own requests go through)."""
    if any(os.environ.get(name) for name in PROXY_VARIABLES):
        return None
    url = urlsplit(endpoint)
    if not url.hostname:
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        return f"{url.hostname}:{port}: {exc.strerror or type(exc).__name__}" if not isinstance(exc, TimeoutError) \
            else f"{url.hostname}:{port}: no answer within {CONNECT_TIMEOUT_S:.0f} s"
    return None


def is_hub_id(spec: str) -> bool:
    """Whether `spec` names a Hub repository rather than a folder that exists here."""
    return bool(_HUB_ID.fullmatch(spec)) and not Path(spec).expanduser().exists()


def resolve(spec: str) -> Path:
    """The local folder of the Hub checkpoint `spec`; EngineError says what is wrong."""
    from huggingface_hub import constants, hf_hub_download, snapshot_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo_id, _, revision = spec.partition("@")
    revision = revision or None
    offline = constants.HF_HUB_OFFLINE
    why = None if offline else unreachable(constants.ENDPOINT)
    if why is not None:
        constants.HF_HUB_OFFLINE = True  # huggingface_hub's switch: the cache only, no retries
    try:
        config_path = hf_hub_download(repo_id, "config.json", revision=revision)
        model_type = _model_type(Path(config_path))
        if model_type not in MODEL_TYPES:
            raise EngineError(f"the Hub repository {repo_id} is not an SDAR/DICE checkpoint "
                              f"(its config.json says model_type {model_type!r}; expected one of {MODEL_TYPES})")
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=CHECKPOINT_FILES))
    except LocalEntryNotFoundError:
        reason = (" (HF_HUB_OFFLINE is set)" if offline else
                  f", and the Hub cannot be reached ({why})" if why else " and the Hub cannot be reached")
        raise EngineError(f"{spec}: no such folder here, and not in the Hugging Face cache "
                          f"({constants.HF_HUB_CACHE}){reason}; download it once online, or pass a checkpoint "
                          "folder") from None
    except GatedRepoError:
        raise EngineError(f"{repo_id} is gated on the Hub: accept its terms on its page and log in "
                          "(`hf auth login`)") from None
    except RepositoryNotFoundError:
        raise EngineError(f"no folder {spec} here, and no model {repo_id} on the Hugging Face Hub (or it "
                          "is private: log in with `hf auth login`)") from None
    except RevisionNotFoundError:
        raise EngineError(f"{repo_id} has no revision {revision!r} on the Hub") from None
    except EntryNotFoundError:
        raise EngineError(f"the Hub repository {repo_id} has no config.json: not an SDAR/DICE "
                          "checkpoint") from None
    except (HfHubHTTPError, OSError) as exc:
        raise EngineError(f"could not fetch {repo_id} from the Hub ({type(exc).__name__}: {exc})") from None
    finally:
        constants.HF_HUB_OFFLINE = offline


def _model_type(config_path: Path) -> str | None:
    try:
        data = json.loads(config_path.read_text())
    except (OSError, ValueError):
        return None
    return data.get("model_type") if isinstance(data, dict) else None
