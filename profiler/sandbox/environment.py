"""What a sandboxed process is given: an environment from an allowlist.

The editor's environment holds tokens and keys (cloud credentials, a model server's token,
SSH agents); a candidate's code must see none of it. Only the variables a CUDA build and
run need pass through; HOME, the caches and the temporary folder point into the sandbox's
own folder, so that nothing the candidate writes there is read by anyone after it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Exact names that pass through from the caller's environment.
ALLOWED = frozenset({
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ",
    "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
    "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS",
    "TORCH_CUDA_ARCH_LIST", "MAX_JOBS",
})
# Prefixes that pass through: the CUDA toolkit and driver's own settings.
ALLOWED_PREFIXES = ("CUDA_", "NVIDIA_", "CUPY_", "CUDNN_", "NCCL_")
# Set by the sandbox, whatever the caller's environment says.
OWN = ("HOME", "TMPDIR", "XDG_CACHE_HOME", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR", "PYTHONPATH", "USER", "LOGNAME")
# The user name tools ask for (getpass.getuser(), which names Inductor's cache folder): in
# namespaces the candidate's uid may have no entry in /etc/passwd.
SANDBOX_USER = "dice-sandbox"

# The folder that holds the `profiler` package, so the child imports this same code.
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)


def sandbox_environment(folder: Path, extensions: Path, overrides: dict[str, str] | None = None,
                        source: dict[str, str] | None = None) -> dict[str, str]:
    """The child's whole environment: the allowlisted part of `source` (this process's
    environment by default), `overrides` (only allowlisted names), and the sandbox's own
    folders. `extensions` is the load_inline build folder of this run alone, made by the
    caller (profiler.sandbox.start_harness: a spare started late must not bring back a build
    folder removed meanwhile)."""
    source = os.environ if source is None else source
    env = {k: v for k, v in {**source, **(overrides or {})}.items() if allowed(k)}
    # The interpreter's own bin folder first: ninja (a pip package) lives there.
    env["PATH"] = os.pathsep.join(filter(None, [str(Path(sys.executable).parent), env.get("PATH")]))
    home = folder / "home"
    for sub in (home, home / "tmp", home / "cache"):
        sub.mkdir(parents=True, exist_ok=True)
    env.update({
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "TORCH_EXTENSIONS_DIR": str(extensions),
        "CUPY_CACHE_DIR": str(home / "cache" / "cupy"),
        "PYTHONPATH": os.pathsep.join(python_path(source)),
        "PYTHONDONTWRITEBYTECODE": "1",
        "USER": SANDBOX_USER,
        "LOGNAME": SANDBOX_USER,
    })
    return env


def python_path(source: dict[str, str]) -> list[str]:
    """This package first, then where the caller finds its packages outside the interpreter's
    own: its PYTHONPATH and its user site folder (which HOME no longer leads to)."""
    import site

    paths = [PACKAGE_ROOT, *filter(None, source.get("PYTHONPATH", "").split(os.pathsep))]
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site and user_site in sys.path:
        paths.append(user_site)
    return list(dict.fromkeys(paths))


def allowed(name: str) -> bool:
    return name not in OWN and (name in ALLOWED or name.startswith(ALLOWED_PREFIXES))
