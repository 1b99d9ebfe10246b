"""load_inline builds handed from one sandbox to a later one, verified by digest.

A shared extension cache is a place where one candidate's run can leave a library for
another's to load (a poisoned build). Here each candidate document gets a build folder of
its own, named by the document's content, used only by that document's runs; after each
run the judge records the folder's digest in its own memory, and before the next run of
the same document it checks the folder against it: a folder anything else changed is
emptied, and the run builds again. The digests never touch the disk, so no candidate can
rewrite them; they last as long as the store (one judge() call).

The folder keeps one absolute path for all runs of a document: torch's ninja files name
their sources by absolute path, and a moved folder would build again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path


def tree_digest(folder: Path) -> str:
    """A digest of every path, link target and file's bytes under `folder`."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode() + b"\0")
            if os.path.islink(path):
                digest.update(b"link:" + os.readlink(path).encode() + b"\0")
                continue
            with open(path, "rb") as file:
                for block in iter(lambda: file.read(1 << 20), b""):
                    digest.update(block)
            digest.update(b"\0")
    return digest.hexdigest()


class VerifiedBuilds:
    """Build folders of several candidates, for the length of one judging."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dice-builds-"))
        self.digests: dict[str, str] = {}

    @staticmethod
    def key(document: str, arch: str | None) -> str:
        return hashlib.sha256(f"{arch}\0{document}".encode()).hexdigest()[:32]

    def checkout(self, key: str) -> Path:
        """The document's build folder, as it was after its last run, or empty."""
        folder = self.root / key
        known = self.digests.pop(key, None)
        if folder.exists() and (known is None or tree_digest(folder) != known):
            shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(exist_ok=True)
        return folder

    def checkin(self, key: str) -> None:
        """Record the folder as the run that used it left it (its process tree is dead)."""
        self.digests[key] = tree_digest(self.root / key)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
