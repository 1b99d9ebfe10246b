"""Install the wheels of a folder whose distributions this python lacks, into TARGET:
    python3 scripts/install_missing.py WHEELS_DIR TARGET
The GPU machine has torch and many packages already; a carried wheel of one it has would
shadow that copy (TARGET comes first on PYTHONPATH), so those are left alone. Prints what it
installed, one name a line, and exits non-zero when pip fails."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path


def missing(folder: Path) -> list[Path]:
    lacking = []
    for wheel in sorted(folder.glob("*.whl")):
        try:
            importlib.metadata.distribution(wheel.name.split("-")[0])
        except importlib.metadata.PackageNotFoundError:
            lacking.append(wheel)
    return lacking


def main(folder: str, target: str) -> int:
    wheels = missing(Path(folder))
    for wheel in wheels:
        print(wheel.name.split("-")[0])
    if not wheels:
        return 0
    return subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--no-cache-dir", "--target", target, *map(str, wheels)]).returncode


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
