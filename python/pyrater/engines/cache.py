"""Caching helpers: where compiled models live, keyed by program hash.

Compiled programs are never written next to the ``.stan`` files (which may
sit in a read-only installed package; cmdstanpy issues 628 and 289): the
cmdstanpy engine compiles into ``<cache>/<hash>/`` where ``<cache>`` is
``PYRATER_CACHE_DIR`` or the user cache folder (``~/.cache/pyrater`` on
Linux) and ``<hash>`` a hash of the program text and the toolchain version,
so a changed program is recompiled and an unchanged one never is.  The
pystan engine relies on httpstan's own cache, which is keyed the same way
(by the program code, httpstan and Python versions).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["cache_dir", "program_hash", "model_cache_dir"]


def cache_dir() -> Path:
    """pyrater's cache folder (created on demand)."""
    env = os.environ.get("PYRATER_CACHE_DIR")
    if env:
        path = Path(env).expanduser()
    else:
        try:
            import platformdirs

            path = Path(platformdirs.user_cache_dir("pyrater"))
        except ImportError:  # pragma: no cover - platformdirs ships with most environments
            path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pyrater"
    path.mkdir(parents=True, exist_ok=True)
    return path


def program_hash(code: str, *extra: str) -> str:
    """Short hex digest of a program's text plus toolchain identifiers."""
    h = hashlib.sha256(code.encode())
    for item in extra:
        h.update(b"\0" + item.encode())
    return h.hexdigest()[:16]


def model_cache_dir(code: str, *extra: str) -> Path:
    """``<cache>/<hash>/`` for a program (created on demand)."""
    path = cache_dir() / program_hash(code, *extra)
    path.mkdir(parents=True, exist_ok=True)
    return path
