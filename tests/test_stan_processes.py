"""Stan's helper processes end with pyrater, and builds stay out of the caller's folder (issue 28, item 5).

Compiles run in a guarded child working in a scratch folder under pyrater's
cache; pystan's chains run in a pool whose workers die with the process that
started them; CmdStan's chains are killed on ``KeyboardInterrupt``.  The slow
tests start a real fit or compile in a child Python, interrupt or kill it,
and look for anything left in its process group or working in its scratch
folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pyrater.inference.stan.engines import _guard
from pyrater.inference.stan.engines.cache import cache_dir


# ------------------------------------------------------------------ process helpers
def _proc_field(pid: int, index: int) -> int | None:
    """Field ``index`` of /proc/PID/stat after the command name: 1 = parent pid, 2 = process group, 3 = session."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[index])


def _group_members(pgid: int) -> list[int]:
    """Live processes (not zombies) of process group ``pgid``."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _proc_field(int(name), 2) == pgid:
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z":
                out.append(int(name))
    return out


def _working_in(folder: Path) -> list[int]:
    """Processes whose working directory is inside ``folder``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
        except OSError:
            continue
        if cwd.startswith(str(folder)):
            out.append(int(name))
    return out


def _wait_for(condition, timeout: float, step: float = 0.5) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(step)
    return condition()


linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


# ------------------------------------------------------------------ scratch folders and the guarded child
def test_scratch_folders_live_in_the_cache_and_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("PYRATER_CACHE_DIR", str(tmp_path / "cache"))
    with _guard.scratch_dir("build") as where:
        assert where.parent == cache_dir() / "tmp" and where.is_dir()
        (where / "x.o").write_bytes(b"0" * 100)
    assert not where.exists()
    with pytest.raises(RuntimeError), _guard.scratch_dir("build") as where:
        raise RuntimeError("compile failed")
    assert not where.exists()
    # a folder left by a process that no longer exists is removed by the next one; a live process's is kept
    dead = 2**22 + 17
    while _guard._alive(dead):
        dead += 1
    stale = cache_dir() / "tmp" / f"build-{dead}-abcd"
    live = cache_dir() / "tmp" / f"build-{os.getppid()}-abcd"
    stale.mkdir(parents=True)
    live.mkdir()
    with _guard.scratch_dir("build"):
        pass
    assert not stale.exists() and live.exists()


def test_a_failing_guarded_child_reports_its_error(tmp_path):
    with pytest.raises(_guard.GuardedError, match="(?i)no such file|does not exist|not found"):
        _guard.run_guarded("cmdstan_compile", {"stan_file": str(tmp_path / "missing.stan")}, cwd=tmp_path)
    with pytest.raises(ValueError, match="unknown guarded target 'os.system'"):
        _guard.run_guarded("os.system", {}, cwd=tmp_path)


@linux_only
def test_the_parent_death_signal_is_set_in_pool_workers():
    """pystan's workers ask the kernel for SIGKILL when their parent dies (no waiting for a stray sampler)."""
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("fork"), initializer=_guard.worker_init
    ) as pool:
        assert pool.submit(_pdeathsig).result(timeout=60) == signal.SIGKILL


def _pdeathsig() -> int:
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    value = ctypes.c_int(0)
    libc.prctl(2, ctypes.byref(value), 0, 0, 0)  # PR_GET_PDEATHSIG
    return value.value


# ------------------------------------------------------------------ real fits and compiles (slow)
FIT_SCRIPT = textwrap.dedent(
    """
    import signal, sys, warnings
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background test process may inherit SIG_IGN
    import pyrater
    from pyrater import datasets
    warnings.simplefilter("ignore")
    data = pyrater.RatingData.from_long(datasets.anesthesia())
    pyrater.fit(data, "dawid_skene", method="mcmc", engine=sys.argv[1], chains=2, warmup=100, draws=300_000,
                seed=1, progress=False)
    """
)


def _chain_processes(pid: int, engine: str) -> list[int]:
    members = [p for p in _group_members(pid) if p != pid]
    if engine == "cmdstanpy":
        return [p for p in members if Path(f"/proc/{p}/comm").read_text().strip() == "dawid_skene"]
    return members


@linux_only
@pytest.mark.slow
@pytest.mark.stan
@pytest.mark.parametrize("how", ["interrupt", "kill"])
def test_an_interrupted_or_killed_fit_leaves_no_sampler_behind(stan_engine, how, tmp_path):
    stan_engine = stan_engine.name  # the engine the fixture chose, by name for the child process
    if how == "kill" and stan_engine == "cmdstanpy":
        pytest.skip("CmdStan ends at its next progress line once the parent is gone: checked with 'interrupt'")
    proc = subprocess.Popen(
        [sys.executable, "-c", FIT_SCRIPT, stan_engine],
        start_new_session=True,  # its own process group: everything it starts is found (and cleaned) by that
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait_for(lambda: len(_chain_processes(proc.pid, stan_engine)) >= 2, 300), proc.stderr
        time.sleep(2)
        proc.send_signal(signal.SIGINT if how == "interrupt" else signal.SIGKILL)
        proc.wait(timeout=60)
        assert _wait_for(lambda: not _group_members(proc.pid), 20), f"left running: {_group_members(proc.pid)}"
        if how == "interrupt":
            assert "KeyboardInterrupt" in proc.stderr.read()
    finally:
        for pid in _group_members(proc.pid):
            os.kill(pid, signal.SIGKILL)


COMPILE_SCRIPT = textwrap.dedent(
    """
    import sys
    from pyrater.inference.stan.engines import get_engine
    code = open(sys.argv[2]).read()
    eng = get_engine(sys.argv[1])
    print(eng.compile_code(code, model_name="guard_test"))
    """
)
PROGRAM = "parameters { real y; } model { y ~ normal(0, 1); } // {}\n"


def _unique_program(tmp_path: Path) -> Path:
    path = tmp_path / "p.stan"
    path.write_text(PROGRAM.replace("{}", f"{os.getpid()}-{time.time_ns()}"))
    return path


@linux_only
@pytest.mark.slow
@pytest.mark.stan
def test_a_pystan_build_writes_nothing_in_the_working_directory(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    program = _unique_program(tmp_path)
    env = {**os.environ, "PYRATER_CACHE_DIR": str(cache)}
    run = subprocess.run(
        [sys.executable, "-c", COMPILE_SCRIPT, "pystan", str(program)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    try:
        assert run.returncode == 0, run.stderr[-2000:]
        assert list(work.iterdir()) == []  # no build/ (setuptools' ~40 MB of object files) in the caller's folder
        assert list((cache / "tmp").iterdir()) == []  # the scratch folder is gone too
    finally:
        import httpstan.cache
        import httpstan.models

        httpstan.cache.delete_model_directory(httpstan.models.calculate_model_name(program.read_text()))


@linux_only
@pytest.mark.slow
@pytest.mark.stan
@pytest.mark.parametrize("engine", ["pystan", "cmdstanpy"])
def test_a_killed_compile_leaves_no_compiler_behind(engine, tmp_path):
    from pyrater.inference.stan.engines import cmdstan_available

    if engine == "cmdstanpy" and not cmdstan_available():
        pytest.skip("no CmdStan")
    cache = tmp_path / "cache"
    program = _unique_program(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", COMPILE_SCRIPT, engine, str(program)],
        cwd=tmp_path,
        env={**os.environ, "PYRATER_CACHE_DIR": str(cache)},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    guards: list[int] = []
    try:
        # the guarded child (started in the scratch folder; cmdstanpy's make then works in CmdStan's folder),
        # with the compiler in its process group
        def compiling() -> bool:
            children = [int(n) for n in os.listdir("/proc") if n.isdigit() and _proc_field(int(n), 1) == proc.pid]
            guards[:] = [p for p in children if "_guard" in _cmdline(p)]
            return any(len(_group_members(g)) > 1 for g in guards)

        assert _wait_for(compiling, 600), "no compiler seen"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        left = lambda: [p for g in guards for p in _group_members(g)]  # noqa: E731
        assert _wait_for(lambda: not left(), 30), f"left running: {left()}"
    finally:
        for pid in [p for g in guards for p in _group_members(g)]:
            os.kill(pid, signal.SIGKILL)
        if engine == "pystan":
            import httpstan.cache
            import httpstan.models

            httpstan.cache.delete_model_directory(httpstan.models.calculate_model_name(program.read_text()))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@linux_only
def test_ctrl_c_kills_the_pystan_workers_at_once_and_restores_the_handler():
    """Ctrl-C during a pystan run kills the chains' workers before anything else (asyncio alone only cancels the
    task, which httpstan's reading loop may not see while draws keep arriving), and the handler is put back."""
    pytest.importorskip("httpstan")
    from pyrater.inference.stan.engines import pystan_engine

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT is handled by something else here")
    interrupted = killed_first = False
    with pystan_engine._guarded_pool(2) as pool:
        pool.submit(time.sleep, 120)
        assert _wait_for(lambda: len(pool._processes) >= 1, 30)
        workers = list(pool._processes.values())
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)  # the handler raises KeyboardInterrupt in this thread long before
        except KeyboardInterrupt:
            interrupted = True
            # already dead when KeyboardInterrupt reaches the caller's code, not only once it leaves the pool
            killed_first = _wait_for(lambda: not any(w.is_alive() for w in workers), 10)
    assert interrupted and killed_first
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
