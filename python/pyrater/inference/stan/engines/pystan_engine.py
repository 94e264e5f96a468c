"""pystan / httpstan engine: Stan in-process, no CmdStan needed.

Compilation
    httpstan compiles a program into a Python extension module, cached in
    ``~/.cache/httpstan/<version>/models/<hash of the program>``; a program
    is compiled once and recompiled only when its text changes.  stanc runs
    first so that a syntax or semantic error reaches the user as a
    :class:`~pyrater.inference.stan.engines.base.StanCompileError` carrying stanc's message.
    The C++ build runs in a guarded child process working in a scratch
    folder under pyrater's cache (setuptools writes ~40 MB of object files
    into ``build/`` of the working directory), so nothing is written to the
    caller's working directory and an interrupted or killed compile leaves no
    compiler behind (:mod:`pyrater.inference.stan.engines._guard`).
Sampling
    ``stan::services::sample::hmc_nuts_diag_e_adapt`` through
    ``httpstan.services_stub.call`` (what pystan's ``Model.sample`` uses
    behind its HTTP server), chains in parallel worker processes of a pool
    made for the call: the workers die with the calling process (Linux:
    ``PR_SET_PDEATHSIG``) and are killed when the call is interrupted.  Each
    run writes under a unique fit name that is deleted once read, so no draws
    pile up in httpstan's cache; draws are parsed with ``stan.fit.Fit``.
Optimisation
    ``scipy.optimize.minimize(method="L-BFGS-B")`` on the unconstrained
    scale, with the log density and gradient of the compiled module called
    with ``adjust_transform=False`` (no Jacobian: the mode on the
    constrained scale), from several starts; ``write_array`` gives the
    constrained parameters and generated quantities at the best mode.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gzip
import json
import logging
import multiprocessing
import os
import re
import secrets
import signal
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ._guard import GuardedError, run_guarded, scratch_dir, worker_init
from .base import (
    STAN_SAMPLE_STATS,
    Engine,
    OptimizeResult,
    SampleResult,
    StanCompileError,
    StanDataError,
    StanRuntimeError,
    check_data,
    check_model_name,
    check_sample_args,
    optimize_inits,
    parse_elapsed,
    program_code,
    resolve_inits,
    stan_version_from_header,
    unflatten_column_major,
)
from .cache import announce_compile, compile_lock

__all__ = ["PystanEngine"]

logger = logging.getLogger("pyrater.inference.stan.engines")
logger.addHandler(logging.NullHandler())

_ITERATION_RE = re.compile(rb"Iteration:\s+(\d+)\s*/\s*(\d+)")
_NUTS = "stan::services::sample::hmc_nuts_diag_e_adapt"
#: httpstan runs chains in the module-level pool ``services_stub.executor``; a run swaps in its own pool
#: under this lock (pystan runs of one process take turns)
_POOL_LOCK = threading.Lock()


def _import_backend() -> None:
    try:
        import httpstan.models  # noqa: F401
        import stan  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised where pystan is absent
        raise ImportError("the 'pystan' engine needs pystan 3 (which brings httpstan): pip install pystan") from exc


def _run_coroutine(coro_factory: Callable[[], Any]) -> Any:
    """Run a coroutine to completion, also from inside a running event loop (Jupyter).

    Inside a running loop the coroutine runs on that loop, made re-entrant by
    nest_asyncio2 (as pystan recommends for notebooks).  Running it on a fresh
    loop in a helper thread instead makes httpstan's fork-based process pool
    lose its workers ("terminated abruptly") when the main thread's loop is
    running.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    import nest_asyncio2

    nest_asyncio2.apply(loop)
    return loop.run_until_complete(coro_factory())


@contextlib.contextmanager
def _guarded_pool(chains: int):
    """Run httpstan's chains in a pool made for this call: workers die with this process and on interruption.

    httpstan's own module-level pool outlives the call, and its workers keep
    sampling when the Python process that started them is killed (they were
    re-parented to init and ran on).
    """
    import httpstan.services_stub as services_stub

    workers = max(1, min(chains, os.cpu_count() or 1))
    with _POOL_LOCK:
        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("fork"), initializer=worker_init
        )
        previous = services_stub.executor
        services_stub.executor = pool
        previous_sigint = _kill_workers_on_sigint(pool)
        try:
            yield pool
        except BaseException:
            _kill_pool(pool)
            raise
        else:
            pool.shutdown(wait=True)
        finally:
            services_stub.executor = previous
            if previous_sigint is not None:
                signal.signal(signal.SIGINT, previous_sigint)


def _kill_workers_on_sigint(pool: concurrent.futures.ProcessPoolExecutor) -> Any:
    """Ctrl-C kills the pool's workers at once, then raises KeyboardInterrupt; returns the handler it replaced.

    Left to asyncio, Ctrl-C only cancels the task, and httpstan's reading loop
    sees the cancellation at its next ``await``, which it reaches only when no
    draw is waiting on its socket: with chains writing draws faster than the
    loop reads them, the fit ran on after Ctrl-C.  With the workers gone the
    sockets close and every loop ends.  Installed only in the main thread and
    over Python's default handler (anything else the caller set is left alone).
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None

    def interrupt(signum: int, frame: Any) -> None:
        _kill_workers(pool)
        raise KeyboardInterrupt

    return signal.signal(signal.SIGINT, interrupt)


def _kill_workers(pool: concurrent.futures.ProcessPoolExecutor) -> dict[int, Any]:
    """Send SIGKILL to every worker of the pool; returns them (pid -> process)."""
    processes = dict(getattr(pool, "_processes", None) or {})
    for proc in processes.values():
        with contextlib.suppress(Exception):
            proc.kill()
    return processes


def _kill_pool(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Kill the pool's workers (a run interrupted mid-chain), then shut it down without waiting."""
    processes = _kill_workers(pool)
    for proc in processes.values():
        with contextlib.suppress(Exception):
            proc.join(timeout=10)
    with contextlib.suppress(Exception):
        pool.shutdown(wait=False, cancel_futures=True)


def _module_data(data: dict[str, Any]) -> dict[str, Any]:
    """Data as numpy arrays of int64 / float64 (what httpstan's var_context reader wants)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        arr = np.asarray(value)
        if arr.dtype == bool:
            arr = arr.astype(np.int64)
        elif arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
        elif arr.dtype.kind == "f":
            arr = arr.astype(np.float64)
        else:
            raise TypeError(f"data[{key!r}] must be numeric; got dtype {arr.dtype}")
        out[key] = arr if arr.ndim else arr.item()
    return out


def _stan_message(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or repr(exc)


class PystanEngine(Engine):
    """Compile and run pyrater's Stan programs with pystan 3 / httpstan.

    Examples
    --------
    >>> from pyrater.inference.stan.engines import get_engine
    >>> eng = get_engine("pystan")                       # doctest: +SKIP
    >>> fit = eng.sample("dawid_skene", d, chains=2)     # doctest: +SKIP
    """

    name = "pystan"

    def __init__(self) -> None:
        _import_backend()
        import httpstan

        self._modules: dict[str, Any] = {}
        self.stan_version = stan_version_from_header(Path(httpstan.__file__).parent / "include")

    # ------------------------------------------------------------ compiling
    def compile(self, model_name: str, force: bool = False) -> str:
        """Compile the program of ``model_name`` unless httpstan has it cached.

        Returns httpstan's model name (``models/<hash>``).
        """
        return self.compile_code(program_code(check_model_name(model_name)), force=force, model_name=model_name)

    def compile_code(self, code: str, model_name: str = "", force: bool = False) -> str:
        """Compile Stan program text (cached by httpstan); returns the model name.

        The first compile of a program prints one line saying so and where
        the build is cached.  Concurrent compiles of the same program (other
        processes) wait on a file lock and then reuse the finished build.

        Raises
        ------
        StanCompileError
            stanc rejected the program (its message included) or the C++
            build failed.
        """
        import httpstan.cache
        import httpstan.compile
        import httpstan.models

        name = httpstan.models.calculate_model_name(code)
        if not force and self._load(name):
            return name
        stan_model_name = f"model_{name.split('/')[1]}"
        try:
            _, stanc_warnings = self._stanc(code, stan_model_name)
        except ValueError as exc:
            raise StanCompileError(f"Stan program did not compile:\n{_stan_message(exc)}") from None
        # the lock lives in httpstan's cache, shared by every process using it
        with compile_lock(name.split("/")[1], httpstan.cache.cache_directory() / "pyrater-locks"):
            if not force and self._load(name):  # another process built it while we waited
                return name
            announce_compile(model_name, httpstan.cache.model_directory(name))
            self._build(code, name, stanc_warnings)
        return name

    def _load(self, name: str) -> bool:
        """Import httpstan's cached build of ``name``; False when there is none."""
        import httpstan.models

        # re-imported on every use, never served from self._modules: httpstan names every
        # extension module "stan_services", and importing another model's module can leave an
        # older module object of this process pointing at the wrong model
        try:
            self._modules[name] = httpstan.models.import_services_extension_module(name)
        except KeyError:
            return False
        except Exception:  # a build being written by another process: wait for its lock
            return False
        return True

    def _build(self, code: str, name: str, stanc_warnings: str) -> None:
        """Build the extension module into httpstan's cache (under the compile lock)."""
        import httpstan.cache
        import httpstan.models

        logger.info("compiling Stan program %s (about a minute)", name)
        start = time.perf_counter()
        httpstan.cache.delete_model_directory(name)
        httpstan.cache.dump_stanc_warnings(stanc_warnings, name)
        try:
            # in a guarded child working in a scratch folder: setuptools' build/ never lands in the caller's
            # working directory, and an interrupted compile takes its compiler processes with it
            with scratch_dir("httpstan-build") as where:
                output = run_guarded("httpstan_build", {"code": code}, cwd=where)
        except GuardedError as exc:  # C++ compiler failure
            raise StanCompileError(f"C++ compilation of the Stan program failed:\n{exc}") from None
        httpstan.cache.dump_services_extension_module_compiler_output(output, name)
        try:
            self._modules[name] = httpstan.models.import_services_extension_module(name)
        except KeyError as exc:  # pragma: no cover
            raise StanCompileError(f"compiled module for {name} not found after building:\n{output}") from exc
        logger.info("compiled %s in %.1f s", name, time.perf_counter() - start)

    @staticmethod
    def _stanc(code: str, stan_model_name: str) -> tuple[str, str]:
        import httpstan.compile

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # httpstan's importlib.resources use
            try:
                return httpstan.compile.compile(code, stan_model_name)
            except ValueError:
                raise
            except Exception:  # e.g. stanc's 1 s timeout on a busy machine: retry once
                return httpstan.compile.compile(code, stan_model_name)

    def module(self, model_name: str) -> Any:
        """The compiled extension module of a model (compiling if needed)."""
        name = self.compile(model_name)
        return self._modules[name]

    # ------------------------------------------------------- data and inits
    def _checked(self, module: Any, data: dict[str, Any]) -> tuple[list[str], list[list[int]], list[str]]:
        """Parameter names, dims and flat names; raises StanDataError on bad data."""
        try:
            names = list(module.get_param_names(data))
            dims = [list(d) for d in module.get_dims(data)]
            flat = list(module.constrained_param_names(data))
        except Exception as exc:
            raise StanDataError(f"Stan rejected the data:\n{_stan_message(exc)}") from None
        return names, dims, flat

    @staticmethod
    def _unconstrain(module: Any, data: dict[str, Any], init: dict[str, Any], which: str) -> np.ndarray:
        """Initial values -> unconstrained vector; checks the density is finite there."""
        try:
            x = np.asarray(module.transform_inits(data, _module_data(init)), dtype=float)
        except Exception as exc:
            raise StanDataError(f"Stan rejected the initial values of {which}:\n{_stan_message(exc)}") from None
        try:
            lp = module.log_prob(data, x.tolist(), True)
        except Exception as exc:
            raise StanDataError(
                f"the log density cannot be evaluated at the initial values of {which}:\n{_stan_message(exc)}"
            ) from None
        if not np.isfinite(lp):
            raise StanDataError(f"the log density is {lp} at the initial values of {which}")
        return x

    # ------------------------------------------------------------- sampling
    def sample_code(
        self,
        code: str,
        data: dict[str, Any],
        chains: int = 4,
        warmup: int = 1000,
        draws: int = 1000,
        seed: int | None = None,
        inits: Any = None,
        progress: bool = True,
        model_name: str = "",
    ) -> SampleResult:
        """:meth:`sample` for any Stan program text (used by tests and benchmarks).

        ``inits=None`` uses :func:`~pyrater.inference.stan.data.stan_inits` only when
        ``model_name`` is one of pyrater's models; otherwise Stan's default.
        """
        check_sample_args(chains, warmup, draws, seed)
        if not isinstance(data, dict):
            raise TypeError(f"data must be a dict; got {type(data).__name__}")
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0] % (2**31))
        if model_name:
            init_list = resolve_inits(model_name, check_data(data), inits, chains, seed)
        else:
            init_list = None if inits is None else resolve_inits("", {}, inits, chains, seed)
        name = self.compile_code(code, model_name=model_name)
        module = self._modules[name]
        mdata = _module_data(data)
        names, dims, flat = self._checked(module, mdata)
        if init_list is not None:
            for c, init in enumerate(init_list):
                self._unconstrain(module, mdata, init, f"chain {c + 1}")
        start = time.perf_counter()
        outputs = self._run_chains(name, mdata, chains, warmup, draws, seed, init_list, progress)
        elapsed = time.perf_counter() - start
        return self._to_result(outputs, chains, warmup, draws, names, dims, flat, elapsed, model_name, seed)

    def _run_chains(self, name, mdata, chains, warmup, draws, seed, init_list, progress) -> list[bytes]:
        import httpstan.cache
        import httpstan.services_stub as services_stub

        total = chains * (warmup + draws)
        refresh = max(1, (warmup + draws) // 50)
        fit_names = [f"{name}/fits/pyrater{secrets.token_hex(6)}c{c + 1}" for c in range(chains)]
        bar = None
        if progress:
            try:
                from ...._quiet import import_tqdm

                tqdm = import_tqdm()

                bar = tqdm(total=total, desc=f"Sampling {chains} chains", unit="it", leave=False)
            except ImportError:  # pragma: no cover
                bar = None
        done = [0] * chains

        def callback(c: int) -> Callable[[bytes], None]:
            def update(message: bytes) -> None:
                found = _ITERATION_RE.findall(message)
                if found and bar is not None:
                    it = int(found[-1][0])
                    bar.update(max(0, it - done[c]))
                    done[c] = max(done[c], it)

            return update

        async def run_all() -> list[BaseException | None]:
            tasks: list[Any] = []
            for c in range(chains):
                kwargs: dict[str, Any] = {
                    "data": mdata,
                    "init": _module_data(init_list[c]) if init_list is not None else {},
                    "random_seed": int(seed),
                    "chain": c + 1,
                    "num_warmup": int(warmup),
                    "num_samples": int(draws),
                    "refresh": refresh,
                }
                tasks.append(services_stub.call(_NUTS, name, fit_names[c], callback(c), **kwargs))
            return await asyncio.gather(*tasks, return_exceptions=True)

        try:
            with warnings.catch_warnings(), _guarded_pool(chains):
                warnings.simplefilter("ignore", DeprecationWarning)  # httpstan's importlib.resources use
                results = _run_coroutine(run_all)
        except BaseException:
            for fit_name in fit_names:
                with contextlib.suppress(Exception):
                    httpstan.cache.delete_fit(fit_name)
            raise
        finally:
            if bar is not None:
                bar.close()
        outputs: list[bytes] = []
        errors: list[str] = []
        try:
            for c, (res, fit_name) in enumerate(zip(results, fit_names)):
                try:
                    raw = gzip.decompress(httpstan.cache.load_fit(fit_name))
                except (KeyError, FileNotFoundError, OSError):
                    raw = b""
                if isinstance(res, BaseException):
                    errors.append(f"chain {c + 1}: {_stan_message(res)}{self._log_tail(raw)}")
                outputs.append(raw)
        finally:
            for fit_name in fit_names:
                httpstan.cache.delete_fit(fit_name)
        if errors:
            raise StanRuntimeError("Stan's sampler failed:\n" + "\n".join(errors))
        for c, raw in enumerate(outputs):
            for text in self._logger_lines(raw):
                if text.startswith(("error:", "warn:")) or "Informational" in text or "Exception" in text:
                    logger.debug("chain %d: %s", c + 1, text)
        return outputs

    @staticmethod
    def _logger_lines(raw: bytes) -> list[str]:
        lines: list[str] = []
        for line in raw.splitlines():
            if b'"logger"' not in line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            lines.extend(str(v) for v in msg.get("values", []))
        return lines

    @classmethod
    def _log_tail(cls, raw: bytes, n: int = 8) -> str:
        msgs = [
            t.split(":", 1)[1].strip()
            for t in cls._logger_lines(raw)
            if t.split(":", 1)[1].strip() and not t.startswith("info:Iteration") and "Elapsed" not in t
        ]
        return ("\n  " + "\n  ".join(msgs[-n:])) if msgs else ""

    def _to_result(self, outputs, chains, warmup, draws, names, dims, flat, elapsed, model_name, seed) -> SampleResult:
        import stan.fit

        fit = stan.fit.Fit(
            tuple(outputs), chains, tuple(names), tuple(flat), tuple(tuple(d) for d in dims), warmup, draws, 1, False
        )
        raw = np.asarray(fit._draws)  # (n_stats + n_flat, draws, chains)
        n_stats = len(fit.sample_and_sampler_param_names)
        values = np.transpose(raw[n_stats:], (2, 1, 0))  # (chains, draws, n_flat)
        draws_out = unflatten_column_major(values, names, dims)
        stats: dict[str, np.ndarray] = {}
        for i, stan_name in enumerate(fit.sample_and_sampler_param_names):
            key = STAN_SAMPLE_STATS.get(stan_name, stan_name.rstrip("_"))
            arr = np.ascontiguousarray(raw[i].T)  # (chains, draws)
            if key in ("tree_depth", "n_steps"):
                arr = arr.astype(np.int64)
            elif key == "diverging":
                arr = arr.astype(bool)
            stats[key] = arr
        stan_time = np.array([parse_elapsed(self._logger_lines(o)) for o in outputs], dtype=float).reshape(chains, 2)
        return SampleResult(
            draws=draws_out,
            sample_stats=stats,
            elapsed=elapsed,
            engine=self.name,
            model_name=model_name,
            stan_time=stan_time,
            seed=seed,
            stan_version=self.stan_version,
        )

    # --------------------------------------------------------- optimisation
    def optimize(
        self,
        model_name: str,
        data: dict[str, Any],
        seed: int | None = None,
        inits: Any = None,
        n_inits: int = 4,
    ) -> OptimizeResult:
        """Posterior mode by L-BFGS-B; see :meth:`pyrater.inference.stan.engines.base.Engine.optimize`."""
        from scipy.optimize import minimize

        init_list = optimize_inits(model_name, data, seed, inits, n_inits)
        module = self.module(model_name)
        mdata = _module_data(data)
        names, dims, _ = self._checked(module, mdata)
        rng = np.random.default_rng(seed)
        starts: list[np.ndarray] = []
        if init_list is None:  # "random": Stan's uniform(-2, 2) on the unconstrained scale
            n_par = self._n_unconstrained(module, mdata, model_name, data)
            starts = [rng.uniform(-2, 2, size=n_par) for _ in range(n_inits)]
        else:
            starts = [self._unconstrain(module, mdata, init, f"start {s + 1}") for s, init in enumerate(init_list)]

        def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
            xs = x.tolist()
            try:
                lp = module.log_prob(mdata, xs, False)
                grad = np.asarray(module.log_prob_grad(mdata, xs, False), dtype=float)
            except Exception:  # outside the support numerically: reject the step
                return np.inf, np.zeros_like(x)
            if not np.isfinite(lp) or not np.all(np.isfinite(grad)):
                return np.inf, np.zeros_like(x)
            return -lp, -grad

        start = time.perf_counter()
        results = []
        for x0 in starts:
            res = minimize(
                objective,
                x0,
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": 10000, "ftol": 1e-12, "gtol": 1e-8, "maxcor": 20},
            )
            results.append(res)
        lds = np.array([-r.fun if np.isfinite(r.fun) else np.nan for r in results])
        converged = np.array([bool(r.success) and np.isfinite(r.fun) for r in results])
        if not np.any(np.isfinite(lds)):
            raise StanRuntimeError(
                "optimisation failed from every start: " + "; ".join(str(r.message) for r in results)
            )
        best = int(np.nanargmax(lds))
        try:
            flat_values = np.asarray(module.write_array(mdata, results[best].x.tolist(), True, True), dtype=float)
        except Exception as exc:
            raise StanRuntimeError(f"Stan failed to write the parameters at the mode:\n{_stan_message(exc)}") from None
        params = unflatten_column_major(flat_values, names, dims)
        return OptimizeResult(
            params=params,
            log_density=float(lds[best]),
            all_log_densities=lds,
            converged=converged,
            engine=self.name,
            model_name=model_name,
            best=best,
            elapsed=time.perf_counter() - start,
            stan_version=self.stan_version,
        )

    def _n_unconstrained(self, module: Any, mdata: dict[str, Any], model_name: str, data: dict[str, Any]) -> int:
        from ..data import data_inits

        init = data_inits(model_name, data, 1, 0)[0]
        return len(module.transform_inits(mdata, _module_data(init)))

    def log_prob(self, model_name: str, data: dict[str, Any], params: dict[str, Any], jacobian: bool = False) -> float:
        """Log density at constrained parameter values (without Jacobian by default).

        The programs include every normalising constant of their priors,
        so with ``jacobian=False`` this is ``log p(params) + log p(y | params)``.
        """
        module = self.module(model_name)
        mdata = _module_data(check_data(data))
        self._checked(module, mdata)
        try:
            x = module.transform_inits(mdata, _module_data(params))
            return float(module.log_prob(mdata, list(x), bool(jacobian)))
        except Exception as exc:
            raise StanDataError(f"Stan could not evaluate the log density:\n{_stan_message(exc)}") from None

    def generated_quantities(
        self, model_name: str, data: dict[str, Any], params: dict[str, Any]
    ) -> dict[str, np.ndarray]:
        """All parameters, transformed parameters and generated quantities at constrained values."""
        module = self.module(model_name)
        mdata = _module_data(check_data(data))
        names, dims, _ = self._checked(module, mdata)
        try:
            x = module.transform_inits(mdata, _module_data(params))
            flat = np.asarray(module.write_array(mdata, list(x), True, True), dtype=float)
        except Exception as exc:
            raise StanDataError(f"Stan could not evaluate the generated quantities:\n{_stan_message(exc)}") from None
        return unflatten_column_major(flat, names, dims)
