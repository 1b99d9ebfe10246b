"""The one form a document's URI is stored and looked up under."""

from __future__ import annotations

from urllib.parse import unquote


def document_key(uri: str) -> str:
    """The one form a document's URI is stored and looked up under, whatever the client's
    percent-encoding ("My%20Projects" and "My Projects" are one file); pygls' workspace
    keys its documents the same way."""
    return unquote(uri)
