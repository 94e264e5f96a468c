"""Processes that end with pyrater: guarded compiles, sampler workers, scratch folders.

Stan needs other processes: the C++ compiler (both engines), httpstan's worker
processes that run the chains (pystan), the CmdStan executables (cmdstanpy).
None of them may outlive the Python process that started them, whether it
returns, raises, is interrupted (``KeyboardInterrupt``) or is killed:

compiles
    run in a child Python (:func:`run_guarded`) that leads its own process
    group and asks the kernel for ``SIGTERM`` when its parent dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``; elsewhere a thread polls the parent); on
    ``SIGTERM`` it kills its whole group, so ``make``, ``gcc`` and ``cc1plus``
    go with it.  The parent kills the group on any exception.  The child works
    in a scratch folder under pyrater's cache (:func:`scratch_dir`), never in
    the caller's working directory, and the folder is removed afterwards.
pystan's chains
    run in a process pool made for the call, whose workers get ``SIGKILL``
    when pyrater's process dies (:func:`worker_init`) and are killed when the
    call raises.
CmdStan's chains
    are killed by pyrater when the call raises (:func:`kill_children`); when
    pyrater's process is killed, CmdStan ends at its next progress line (a
    write to a closed pipe).

Scratch folders are named ``<cache>/tmp/<kind>-<pid>-<token>``; folders of
processes that no longer exist are removed when the next one is made.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .cache import cache_dir

__all__ = ["scratch_dir", "run_guarded", "worker_init", "kill_children", "parent_death_signal", "GuardedError"]

_PR_SET_PDEATHSIG = 1
_PARENT_ENV = "PYRATER_GUARD_PARENT"


class GuardedError(RuntimeError):
    """The guarded child failed; the message carries its error output."""


def parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent thread ends (Linux); True if set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process
        return True
    return True


def _sweep(folder: Path) -> None:
    """Remove scratch folders whose process no longer exists."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        parts = entry.name.split("-")
        if len(parts) == 3 and parts[1].isdigit() and int(parts[1]) != os.getpid() and not _alive(int(parts[1])):
            shutil.rmtree(entry, ignore_errors=True)


@contextlib.contextmanager
def scratch_dir(kind: str) -> Iterator[Path]:
    """A fresh folder ``<cache>/tmp/<kind>-<pid>-<token>``, removed on exit (also on error)."""
    root = cache_dir() / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    _sweep(root)
    path = root / f"{kind}-{os.getpid()}-{secrets.token_hex(4)}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=30)


def run_guarded(target: str, payload: dict[str, Any], cwd: Path) -> Any:
    """Run ``target`` (a name in :data:`TARGETS`) with ``payload`` in a guarded child; returns its JSON result.

    The child leads a new process group and session, works in ``cwd``, dies
    with its parent (see the module docstring) and is killed with its whole
    group when this call raises (e.g. ``KeyboardInterrupt``).

    Raises
    ------
    GuardedError
        The child failed (its stderr in the message).
    """
    if target not in TARGETS:
        raise ValueError(f"unknown guarded target {target!r}; known: {sorted(TARGETS)}")
    env = dict(os.environ)
    env[_PARENT_ENV] = str(os.getpid())
    # -c rather than -m: the package imports this module first, which runpy would warn about
    launcher = f"import sys; from {__name__} import _main; sys.exit(_main(sys.argv[1:]))"
    proc = subprocess.Popen(
        [sys.executable, "-c", launcher, target],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
    )
    try:
        out, err = proc.communicate(json.dumps(payload).encode())
    except BaseException:  # interrupted: the child's whole group goes (it is not reaped yet, so its id is its own)
        _kill_group(proc)
        raise
    if proc.returncode != 0:
        text = err.decode(errors="replace").strip()
        raise GuardedError(text[-6000:] or f"exit status {proc.returncode}")
    return json.loads(out.decode())


def worker_init() -> None:
    """Initializer of pystan's worker processes: ignore Ctrl-C (the parent handles it), die with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    if not parent_death_signal(signal.SIGKILL):
        _watch_parent(parent, lambda: os._exit(1))
    elif os.getppid() != parent:  # pragma: no cover - the parent died before prctl
        os._exit(1)


def _watch_parent(parent: int, action: Callable[[], None]) -> None:
    """Where the kernel cannot signal a parent's death: a daemon thread polls for it."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        action()

    threading.Thread(target=watch, daemon=True).start()


def _children_linux() -> list[tuple[int, list[str]]]:
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        out.append((int(name), [a.decode(errors="replace") for a in argv if a]))
    return out


def kill_children(executable: str) -> int:
    """Kill this process's children running ``executable`` (CmdStan's chains); returns how many were killed."""
    killed = 0
    if os.path.isdir("/proc"):
        children = _children_linux()
    else:  # pragma: no cover - macOS, Windows: psutil when installed
        try:
            import psutil

            children = [(p.pid, p.cmdline()) for p in psutil.Process().children()]
        except Exception:
            return 0
    target = os.path.realpath(executable)
    for pid, argv in children:
        if argv and os.path.realpath(argv[0]) == target:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


# ----------------------------------------------------------------------- targets (run in the child)
def _httpstan_build(code: str) -> str:
    """Build httpstan's extension module of ``code`` into httpstan's cache; returns the compiler's output."""
    import asyncio
    import warnings

    import httpstan.models

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return asyncio.run(httpstan.models.build_services_extension_module(code))


def _cmdstan_compile(stan_file: str) -> str:
    """Compile ``stan_file`` with cmdstanpy (the executable beside it); returns the executable's path."""
    import logging

    from cmdstanpy import CmdStanModel

    logging.getLogger("cmdstanpy").setLevel(logging.WARNING)
    model = CmdStanModel(stan_file=stan_file, force_compile=True)
    return str(model.exe_file)


#: what :func:`run_guarded` may run in the child
TARGETS: dict[str, Callable[..., Any]] = {"httpstan_build": _httpstan_build, "cmdstan_compile": _cmdstan_compile}


def _main(argv: list[str]) -> int:  # pragma: no cover - runs in the child process
    parent = int(os.environ.get(_PARENT_ENV, "0"))

    def die(*_: Any) -> None:
        with contextlib.suppress(Exception):
            os.killpg(0, signal.SIGKILL)
        os._exit(1)

    signal.signal(signal.SIGTERM, die)
    if not parent_death_signal(signal.SIGTERM):
        _watch_parent(parent, die)
    if parent and os.getppid() != parent:  # the parent died before prctl
        die()
    result_fd = os.dup(1)
    os.dup2(2, 1)  # what the target prints goes to stderr; stdout carries the result only
    try:
        payload = json.loads(sys.stdin.read())
        result = TARGETS[argv[0]](**payload)
    except BaseException as exc:  # everything the child started goes with it
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        die()
    sys.stdout.flush()
    with os.fdopen(result_fd, "w") as fh:
        fh.write(json.dumps(result))
    return 0


if __name__ == "__main__":  # pragma: no cover - the guarded child
    sys.exit(_main(sys.argv[1:]))
