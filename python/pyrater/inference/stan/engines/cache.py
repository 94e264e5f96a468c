"""Caching helpers: where compiled models live, keyed by program hash.

Compiled programs are never written next to the ``.stan`` files (which may
sit in a read-only installed package; cmdstanpy issues 628 and 289): the
cmdstanpy engine compiles into ``<cache>/<hash>/`` where ``<cache>`` is
``PYRATER_CACHE_DIR`` or the user cache folder (``~/.cache/pyrater`` on
Linux) and ``<hash>`` a hash of the program text and the toolchain version,
so a changed program is recompiled and an unchanged one never is.  The
pystan engine relies on httpstan's own cache, which is keyed the same way
(by the program code, httpstan and Python versions), in
``~/.cache/httpstan/<httpstan version>/models/`` (``XDG_CACHE_HOME``
moves it).

Compilation is serialised across processes by a file lock per program
(:func:`compile_lock`, ``fcntl.flock`` on ``<cache>/locks/<key>.lock``): a
second process wanting the same program waits for the first and then finds
the finished build, so two processes never write one cache entry at once.
The first use of a program prints one line (:func:`announce_compile`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["cache_dir", "program_hash", "model_cache_dir", "compile_lock", "announce_compile"]


def cache_dir() -> Path:
    """Pyrater's cache folder (created on demand)."""
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


@contextlib.contextmanager
def compile_lock(key: str, folder: Path | None = None) -> Iterator[Path]:
    """Hold an exclusive inter-process lock for compiling program ``key``.

    Parameters
    ----------
    key : str
        Identifies the cache entry (e.g. ``"cmdstan-<hash>"``); one lock
        file ``<folder>/<key>.lock`` per entry.
    folder : Path, optional
        Where the lock files live: beside the cache they protect (default
        ``<cache>/locks``, pyrater's own cache).

    Yields
    ------
    Path of the lock file.  The lock is released when the block exits
    (also on error, or when the process dies: ``flock`` locks belong to the
    open file).  Where ``fcntl`` is unavailable (Windows) no lock is taken.
    """
    folder = cache_dir() / "locks" if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (key.replace("/", "-") + ".lock")
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield path
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def announce_compile(model_name: str, where: Path | str) -> None:
    """Print the one line shown before a program is compiled (to stderr).

    ``"compiling the dawid_skene Stan program once, ~30-60 s; cached in <where>"``
    """
    what = f"the {model_name} Stan program" if model_name else "a Stan program"
    print(f"compiling {what} once, ~30-60 s; cached in {where}", file=sys.stderr, flush=True)
