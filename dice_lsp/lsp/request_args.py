"""The arguments of DICE's commands and code-action data ({uri, range}, {uri, position},
{uri, job, index}), checked and turned into a snapshot and offsets, with messages that say
what was wrong."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.exceptions import JsonRpcInvalidParams

from dice_lsp.core.jobs import Snapshot
from dice_lsp.lsp.lsp_text import read_document, text_document

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

_converter = get_converter()


def _field(args: Any, name: str, kind: type) -> Any:
    if not isinstance(args, dict) or name not in args:
        raise ValueError(f"missing argument {name!r}")
    try:
        return _converter.structure(args[name], kind)
    except Exception as exc:
        raise ValueError(f"argument {name!r} is not a {kind.__name__}: {args[name]!r}") from exc


async def document_snapshot(server: LanguageServer, args: Any) -> Snapshot:
    uri = _field(args, "uri", str)
    try:
        document = await read_document(server.workspace, uri)
    except JsonRpcInvalidParams as exc:
        raise ValueError(exc.message) from None
    return Snapshot(uri, document.version, document.path, document.source)


def range_offsets(server: LanguageServer, snapshot: Snapshot, args: Any) -> tuple[int, int]:
    rng = _field(args, "range", types.Range)
    document = text_document(server, snapshot.uri, snapshot.text)
    start, end = document.offset_at_position(rng.start), document.offset_at_position(rng.end)
    return min(start, end), max(start, end)


def offset_of(server: LanguageServer, snapshot: Snapshot, args: Any) -> int:
    position = _field(args, "position", types.Position)
    return text_document(server, snapshot.uri, snapshot.text).offset_at_position(position)


def job_and_index(args: Any) -> tuple[str, int]:
    job = args.get("job") if isinstance(args, dict) else None
    if not isinstance(job, (str, int)) or isinstance(job, bool):
        raise ValueError(f"argument 'job' must be a job id, got {job!r}")
    return str(job), _field(args, "index", int)
