"""What the operating system says of memory (Linux; nothing elsewhere): what is available, what
this process's memory cgroup leaves, how many processes the OOM killer has killed, and a
process's resident size. Torch-free, so that the language server can tell why its engine
worker died."""

from __future__ import annotations

import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _field(path: Path, name: str) -> int | None:
    """`name VALUE` in a file of such lines (memory.events, memory.oom_control, /proc/vmstat)."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name and value.strip().isdigit():
                return int(value)
    except OSError:
        return None
    return None


def memory_cgroup() -> tuple[int, Path] | None:
    """(version, folder) of this process's memory cgroup, or None where there is none to read."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, where = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = CGROUP_ROOT / "memory" / where.lstrip("/")
            if folder.is_dir():
                return 1, folder
    for line in lines:
        _, controllers, where = line.split(":", 2)
        if controllers == "":
            for root in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
                folder = root / where.lstrip("/")
                if (folder / "memory.current").is_file():
                    return 2, folder
    return None


def cgroup_room() -> int | None:
    """Bytes this process's memory cgroup lets it still use, or None where it sets no limit."""
    found = memory_cgroup()
    if found is None:
        return None
    version, folder = found
    names = ("memory.max", "memory.current") if version == 2 else ("memory.limit_in_bytes", "memory.usage_in_bytes")
    limit, usage = (_read_int(folder / name) for name in names)
    if limit is None or usage is None or limit >= 1 << 60:  # "max", or v1's no-limit value
        return None
    return max(0, limit - usage)


def mem_available() -> int | None:
    """/proc/meminfo's MemAvailable in bytes."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def oom_kills() -> tuple[int | None, int | None]:
    """(processes the OOM killer has killed in this process's memory cgroup, on the whole
    machine: /proc/vmstat), each None where the system does not say."""
    found = memory_cgroup()
    in_cgroup = None
    if found is not None:
        version, folder = found
        in_cgroup = _field(folder / ("memory.events" if version == 2 else "memory.oom_control"), "oom_kill")
    return in_cgroup, _field(Path("/proc/vmstat"), "oom_kill")


def resident_bytes(pid: int) -> int | None:
    """The process's resident set size, or None once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None



def describe(count: int) -> str:
    """Bytes for a message: 25769803776 -> "24 GiB", 113246208 -> "108 MiB"."""
    return f"{count / (1 << 30):.3g} GiB" if count >= 1 << 30 else f"{count / (1 << 20):.3g} MiB"
