"""cmdstanpy engine: the same ``.stan`` files compiled by CmdStan.

Used when a working CmdStan installation is found (``cmdstanpy.cmdstan_path()``
works, e.g. through ``CMDSTAN``, and its ``stanc`` runs and its build is
complete; see :func:`cmdstan_available`).  Programs are compiled into
pyrater's user cache, ``<cache>/<hash>/``, where ``<hash>`` covers the
program text and the CmdStan version: never next to the ``.stan`` files
inside the package (cmdstanpy issues 628, 289), and a program is recompiled
only when it changes.  Compiles of one program by several processes are
serialised by a file lock; a finished build is marked by a ``.built`` file
written after the executable, so a half-written executable is never used.
The compile runs in a guarded child process (:mod:`._guard`), so an
interrupted or killed compile leaves no ``make`` or compiler behind.

Runs write CmdStan's CSV and console files into a scratch folder under
pyrater's cache (not the system's temporary folder, which may be in memory),
removed as soon as the draws are read.  CmdStan runs in a helper thread, so
``KeyboardInterrupt`` (Ctrl-C, a notebook's interrupt) kills its processes at
once instead of waiting for cmdstanpy to finish them.

CmdStan writes its CSV output at ``sig_figs=18`` (its maximum): every
number reaches Python to double precision, as with pystan, so both engines
give the same numbers to floating-point accuracy.  Outputs mirror the pystan
engine exactly (same result classes, shapes and diagnostic names).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .... import _psis
from ...._stacklevel import user_stacklevel
from ._guard import kill_children, run_guarded, scratch_dir
from .base import (
    STAN_SAMPLE_STATS,
    Engine,
    OptimizeResult,
    PathfinderResult,
    SampleResult,
    StanCompileError,
    StanDataError,
    StanRuntimeError,
    check_data,
    check_model_name,
    check_sample_args,
    check_seed,
    optimize_inits,
    program_code,
    resolve_inits,
    stan_version_from_header,
)
from .cache import announce_compile, compile_lock, model_cache_dir

__all__ = ["CmdStanPyEngine", "cmdstan_available", "SIG_FIGS"]

logger = logging.getLogger("pyrater.inference.stan.engines")
logger.addHandler(logging.NullHandler())

#: Significant figures of CmdStan's CSV output: its maximum, i.e. full double precision.
SIG_FIGS = 18


def cmdstan_available() -> str | None:
    """Path of a working CmdStan installation, or None.

    None when cmdstanpy is missing, ``cmdstanpy.cmdstan_path()`` finds no
    installation, or the installation found is not usable: its ``bin/stanc``
    does not run, its build is incomplete (no ``bin/stansummary`` or no
    ``src/cmdstan/main*.o``), or an offline build
    (``install-cmdstan-offline.sh``) of it is still running.  The check of a
    given path runs once per process (a few milliseconds).
    """
    try:
        import cmdstanpy
    except ImportError:
        return None
    try:
        path = cmdstanpy.cmdstan_path()
    except (ValueError, RuntimeError, OSError):
        return None
    if not path:
        return None
    return path if _cmdstan_works(os.path.realpath(path)) else None


@functools.lru_cache(maxsize=8)
def _cmdstan_works(path: str) -> bool:
    root = Path(path)
    stanc = root / "bin" / ("stanc.exe" if os.name == "nt" else "stanc")
    summary = root / "bin" / ("stansummary.exe" if os.name == "nt" else "stansummary")
    if not (root.is_dir() and stanc.is_file() and summary.is_file()):
        return False
    if not any((root / "src" / "cmdstan").glob("main*.o")):
        return False
    if Path(str(root) + ".lock").exists() and not (root / ".offline-build-done").exists():
        return False  # install-cmdstan-offline.sh has not finished
    try:
        out = subprocess.run([str(stanc), "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "stanc" in (out.stdout + out.stderr)


# Stan rejecting the data or user-given initial values (a failure to find a start for the
# sampler is a runtime failure, as in the pystan engine)
_DATA_KEYS = (
    "data initialization",
    "Error reading data",
    "variable does not exist",
    "mismatch in dimension",
    "mismatch in number dimensions",
    "not a valid simplex",
    "but must be",
    "Error reading",
    "Error transforming variable",
)


# CmdStan echoing its arguments ("seed = 1 (Default)") and their section names ("lbfgs")
_CONFIG_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*( [A-Za-z_]+)* = .*|[a-z_]+)\s*$")
_NOISE = (
    "Iteration:",
    "Gradient evaluation took",
    "leapfrog steps per transition",
    "Adjust your expectations",
    "Chain [",
    "console log output",
    "Error during",
    "Consider re-running",
)
# cmdstanpy's description of the run (command line, files) that follows the messages
_RUNSET = (
    "Command and output files",
    "RunSet:",
    "cmd (chain",
    "[",
    "retcodes",
    "per-chain output",
    "csv_file",
    "console_msgs",
    "/",
)
_STDOUT_FILE = re.compile(r"(\S+-stdout\.txt)")


def _stan_lines(text: str, max_lines: int = 14) -> str:
    """CmdStan's own messages from a cmdstanpy error, without the echoed command and arguments.

    Repeated lines are kept once; a long list (e.g. one rejected initial value
    per attempt) keeps its first and last lines.
    """
    keep: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or _CONFIG_LINE.match(line) or any(n in line for n in _NOISE) or line.startswith(_RUNSET):
            continue
        if line not in keep:
            keep.append(line)
    if len(keep) > max_lines:
        head = max_lines // 3
        keep = keep[:head] + [f"... ({len(keep) - max_lines} similar lines) ..."] + keep[-(max_lines - head) :]
    return "\n".join(keep) or text.strip()


def _console_output(text: str) -> str:
    """The console output CmdStan wrote (cmdstanpy names the files in its error message)."""
    out = []
    for path in dict.fromkeys(_STDOUT_FILE.findall(text)):
        try:
            out.append(Path(path).read_text(errors="replace"))
        except OSError:
            continue
    return "\n".join(out)


def _classify(exc: BaseException, what: str) -> Exception:
    """A cmdstanpy / CmdStan failure as a pyrater Stan error carrying CmdStan's message."""
    text = str(exc).strip() or repr(exc)
    text = text + "\n" + _console_output(text)
    if any(key in text for key in _DATA_KEYS):
        return StanDataError(f"{what} failed; Stan rejected the data or the initial values:\n{_stan_lines(text)}")
    return StanRuntimeError(f"{what} failed; Stan says:\n{_stan_lines(text)}")


def _as_init(init: dict[str, Any]) -> dict[str, Any]:
    return {k: np.asarray(v, dtype=float) for k, v in init.items()}


@contextlib.contextmanager
def _quiet_cmdstanpy(drop: tuple[str, ...] = ()) -> Iterator[None]:
    """Hide cmdstanpy's per-run INFO lines ("CmdStan start processing") during one call.

    Its warnings and errors still show, except those containing one of the
    strings in ``drop`` (outcomes pyrater records and reports itself); the
    logger's level and filters are restored afterwards.
    """
    try:
        from cmdstanpy.utils import get_logger

        cmd_logger = get_logger()  # sets up cmdstanpy's handler first, so that it cannot reset the level later
    except ImportError:  # pragma: no cover
        cmd_logger = logging.getLogger("cmdstanpy")
    level = cmd_logger.level
    if level < logging.WARNING:
        cmd_logger.setLevel(logging.WARNING)

    def keep(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(text in message for text in drop)

    cmd_logger.addFilter(keep)
    try:
        yield
    finally:
        cmd_logger.removeFilter(keep)
        cmd_logger.setLevel(level)


#: cmdstanpy warnings on an L-BFGS run that stops at its start (e.g. the EM mode, already optimal):
#: the console dump of "Line search failed" and "Invalid estimate"; pyrater records each start's
#: convergence in ``OptimizeResult.converged`` instead
_OPTIMIZE_NOISE = ("Line search failed", "optimization failed to converge", "error: code '1'")


def _interruptible(call: Callable[[], Any], executable: str) -> Any:
    """``call()`` in a helper thread; on ``KeyboardInterrupt`` (or any exception here) CmdStan's processes are killed.

    cmdstanpy waits for its CmdStan processes in a thread pool and only then
    sees an interrupt, so Ctrl-C during a long run would wait for the run.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the calling thread
            box["error"] = exc

    thread = threading.Thread(target=run, name="pyrater-cmdstan", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except BaseException:
        kill_children(executable)
        thread.join(30)
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _new_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1)[0] % (2**31))


class CmdStanPyEngine(Engine):
    """Compile and run pyrater's Stan programs with cmdstanpy / CmdStan.

    Raises
    ------
    ImportError
        cmdstanpy is not installed.
    RuntimeError
        No working CmdStan installation was found.
    """

    name = "cmdstanpy"

    def __init__(self) -> None:
        try:
            import cmdstanpy  # noqa: F401
        except ImportError as exc:
            raise ImportError("the 'cmdstanpy' engine needs cmdstanpy: pip install cmdstanpy") from exc
        path = cmdstan_available()
        if path is None:
            raise RuntimeError(
                "the 'cmdstanpy' engine needs a working CmdStan installation: run "
                "`python -m cmdstanpy.install_cmdstan` (needs internet) or set CMDSTAN to an existing "
                "installation; or use engine='pystan'"
            )
        self.cmdstan_path = path
        self.stan_version = stan_version_from_header(Path(path) / "stan" / "src") or self._cmdstan_version()
        self._models: dict[str, Any] = {}
        self._declared_cache: dict[str, dict[str, int]] = {}

    def _cmdstan_version(self) -> str:
        import cmdstanpy

        try:
            return ".".join(str(p) for p in cmdstanpy.cmdstan_version() or ())
        except Exception:  # pragma: no cover
            return os.path.basename(self.cmdstan_path)

    # ------------------------------------------------------------ compiling
    def compile(self, model_name: str, force: bool = False) -> Any:
        """Compile (or load from the cache) a model's program; returns the CmdStanModel."""
        check_model_name(model_name)
        return self.compile_code(program_code(model_name), model_name, force=force)

    def compile_code(self, code: str, model_name: str = "model", force: bool = False) -> Any:
        """Compile Stan program text into ``<cache>/<hash>/``; returns the CmdStanModel.

        The first compile prints one line saying so and where the build is
        cached.  The build happens under a file lock: a second process
        compiling the same program waits, then loads the finished build.

        Raises
        ------
        StanCompileError
            stanc or the C++ compiler failed (their message included).
        """
        from cmdstanpy import CmdStanModel

        model_name = model_name or "model"
        folder = model_cache_dir(code, "cmdstan", self.stan_version, self.cmdstan_path)
        key = f"{folder}/{model_name}"
        if key in self._models and not force:
            return self._models[key]
        stan_path = folder / f"{model_name}.stan"
        exe = folder / (model_name + (".exe" if os.name == "nt" else ""))
        done = folder / f".{model_name}.built"
        with compile_lock(f"cmdstan-{folder.name}-{model_name}"):
            try:
                if done.exists() and exe.exists() and not force:
                    with _quiet_cmdstanpy():
                        model = CmdStanModel(stan_file=str(stan_path), exe_file=str(exe))
                else:
                    done.unlink(missing_ok=True)
                    exe.unlink(missing_ok=True)
                    stan_path.write_text(code)
                    announce_compile(model_name, folder)
                    start = time.perf_counter()
                    # a guarded child: killed with its make and compiler processes if this call is interrupted
                    with scratch_dir("cmdstan-build") as where:
                        run_guarded("cmdstan_compile", {"stan_file": str(stan_path)}, cwd=where)
                    with _quiet_cmdstanpy():
                        model = CmdStanModel(stan_file=str(stan_path), exe_file=str(exe))
                    done.write_text(f"compiled in {time.perf_counter() - start:.1f} s\n")
            except Exception as exc:
                raise StanCompileError(f"Stan program did not compile:\n{str(exc).strip()}") from None
        self._models[key] = model
        return model

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
        """:meth:`sample` for any Stan program text (tests, benchmarks).

        Chain ``c`` (1-based) runs with Stan's chain id ``c`` and ``seed``,
        as in the pystan engine.
        """
        check_sample_args(chains, warmup, draws, seed)
        if not isinstance(data, dict):
            raise TypeError(f"data must be a dict; got {type(data).__name__}")
        if seed is None:
            seed = _new_seed()
        if model_name:
            init_list = resolve_inits(model_name, check_data(data), inits, chains, seed)
        else:
            init_list = None if inits is None else resolve_inits("", {}, inits, chains, seed)
        model = self.compile_code(code, model_name or "model")
        start = time.perf_counter()
        with scratch_dir("cmdstan-run") as out_dir:
            try:
                with _quiet_cmdstanpy():
                    fit = _interruptible(
                        lambda: model.sample(
                            data=data,
                            chains=chains,
                            chain_ids=list(range(1, chains + 1)),
                            parallel_chains=max(1, min(chains, os.cpu_count() or 1)),
                            iter_warmup=warmup,
                            iter_sampling=draws,
                            seed=seed,
                            inits=[_as_init(d) for d in init_list] if init_list is not None else None,
                            sig_figs=SIG_FIGS,
                            show_progress=progress,
                            output_dir=str(out_dir),
                        ),
                        str(model.exe_file),
                    )
            except Exception as exc:
                raise _classify(exc, "sampling") from None
            elapsed = time.perf_counter() - start
            draws_out = self._variables(fit, (chains, draws), self._declared(model))
            stats: dict[str, np.ndarray] = {}
            for stan_name, arr in fit.method_variables().items():
                key = STAN_SAMPLE_STATS.get(stan_name, stan_name.rstrip("_"))
                arr = np.ascontiguousarray(np.asarray(arr).reshape(draws, chains).T)
                if key in ("tree_depth", "n_steps"):
                    arr = arr.astype(np.int64)
                elif key == "diverging":
                    arr = arr.astype(bool)
                stats[key] = arr
            try:
                stan_time = np.array(
                    [[t.get("warmup", np.nan), t.get("sampling", np.nan)] for t in fit.time], dtype=float
                )
            except Exception:  # pragma: no cover - older cmdstanpy
                stan_time = np.full((chains, 2), np.nan)
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

    @staticmethod
    def _variables(fit: Any, lead: tuple[int, ...], declared: dict[str, int] | None = None) -> dict[str, np.ndarray]:
        """Every Stan variable of a cmdstanpy fit, reshaped to ``lead + shape``."""
        out: dict[str, np.ndarray] = {}
        n = int(np.prod(lead))
        for name in fit.metadata.stan_vars:
            try:
                values = np.asarray(fit.stan_variable(name), dtype=float)  # (n, *dims)
            except Exception:  # zero-size variables (e.g. log_lik switched off)
                dims = tuple(fit.metadata.stan_vars[name].dimensions)
                values = np.zeros((n,) + dims)
            out[name] = values.reshape(lead + values.shape[1:])
        # CmdStan's CSV has no column for a zero-size variable (e.g. log_lik switched off): the
        # program declares it, so give it an empty shape, as the pystan engine does
        for name, ndim in (declared or {}).items():
            if name not in out and ndim > 0:
                out[name] = np.zeros(lead + (0,) * ndim)
        return out

    def _declared(self, model: Any) -> dict[str, int]:
        """Parameters, transformed parameters and generated quantities of a program -> number of dims."""
        key = str(model.exe_file)
        if key not in self._declared_cache:
            try:
                info = model.src_info()
            except Exception:  # pragma: no cover - stanc --info unavailable
                info = {}
            self._declared_cache[key] = {
                name: int(v.get("dimensions", 0))
                for block in ("parameters", "transformed parameters", "generated quantities")
                for name, v in info.get(block, {}).items()
            }
        return self._declared_cache[key]

    # --------------------------------------------------------- optimisation
    def optimize(
        self,
        model_name: str,
        data: dict[str, Any],
        seed: int | None = None,
        inits: Any = None,
        n_inits: int = 4,
    ) -> OptimizeResult:
        """Posterior mode by CmdStan's L-BFGS (``jacobian=False``) from several starts."""
        check_seed(seed)
        if seed is None:
            seed = _new_seed()
        init_list = optimize_inits(model_name, data, seed, inits, n_inits)
        if init_list is not None:
            n_inits = len(init_list)
        model = self.compile(model_name)
        start = time.perf_counter()
        lds = np.full(n_inits, np.nan)
        converged = np.zeros(n_inits, dtype=bool)
        fits: list[Any] = [None] * n_inits
        errors: list[str] = []
        with scratch_dir("cmdstan-run") as out_dir:
            for s in range(n_inits):

                def run(s: int = s) -> Any:
                    return model.optimize(
                        data=data,
                        seed=(seed + s) % (2**31),
                        inits=_as_init(init_list[s]) if init_list is not None else None,
                        algorithm="lbfgs",
                        jacobian=False,
                        iter=10000,
                        require_converged=False,
                        sig_figs=SIG_FIGS,
                        output_dir=str(out_dir),
                    )

                try:
                    with _quiet_cmdstanpy(drop=_OPTIMIZE_NOISE):
                        fit = _interruptible(run, str(model.exe_file))
                except Exception as exc:
                    errors.append(str(exc))
                    continue
                fits[s] = fit
                converged[s] = bool(getattr(fit, "converged", True))
                with _quiet_cmdstanpy(drop=_OPTIMIZE_NOISE):
                    lds[s] = float(fit.optimized_params_dict["lp__"])
            if not np.any(np.isfinite(lds)):
                raise _classify(RuntimeError("\n".join(errors)), "optimisation")
            best = int(np.nanargmax(lds))
            with _quiet_cmdstanpy(drop=_OPTIMIZE_NOISE):
                params = {k: np.asarray(v, dtype=float) for k, v in fits[best].stan_variables().items()}
        for name, ndim in self._declared(model).items():  # zero-size variables have no CSV column
            if name not in params and ndim > 0:
                params[name] = np.zeros((0,) * ndim)
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

    # ------------------------------------------------------------ pathfinder
    def pathfinder(
        self,
        model_name: str,
        data: dict[str, Any],
        draws: int = 1000,
        num_paths: int = 4,
        seed: int | None = None,
        inits: Any = None,
    ) -> PathfinderResult:
        """Stan's multi-path Pathfinder, then Pareto-smoothed importance resampling.

        CmdStan runs ``num_paths`` single-path Pathfinders (each L-BFGS
        from its own start, by default :func:`~pyrater.inference.stan.data.stan_inits`'
        diagonal-heavy values, then ``draws`` draws from its normal
        approximation) without resampling (``psis_resample=False``); the
        importance ratios ``lp__ - lp_approx__`` of all approximate draws are
        Pareto-smoothed by :func:`pyrater._psis.psislw` (Vehtari et al.
        2024, the same numbers under ArviZ 0.x and 1.x) with Stan's own tail
        length ``floor(min(0.2 S, 3 sqrt(S)))`` (:func:`pyrater._psis.stan_tail_length`;
        R's loo and ArviZ 0.x round up, one draw more for S = 4000), and
        ``draws`` draws are resampled with replacement by the smoothed
        weights (seeded).  The Pareto k of that step is the diagnostic Stan
        computes for its own resampling; above 0.7 a warning says so, as Stan does.

        Parameters
        ----------
        model_name, data
            As for :meth:`sample`.
        draws : int
            Draws per path and resampled draws returned.
        num_paths : int
            Number of single-path Pathfinders.
        seed : int, optional
        inits : None, "random", dict or list of ``num_paths`` dicts

        Returns
        -------
        PathfinderResult

        Raises
        ------
        ValueError
            Bad arguments (before any work).
        StanDataError, StanRuntimeError
            Stan rejected the data or every path failed (Stan's message included).
        """
        check_model_name(model_name)
        check_data(data)
        check_sample_args(num_paths, 0, draws, seed)
        if seed is None:
            seed = _new_seed()
        init_list = resolve_inits(model_name, data, inits, num_paths, seed)
        model = self.compile(model_name)
        start = time.perf_counter()
        with scratch_dir("cmdstan-run") as out_dir:
            try:
                with _quiet_cmdstanpy():
                    fit = _interruptible(
                        lambda: model.pathfinder(
                            data=data,
                            num_paths=num_paths,
                            draws=draws * num_paths,
                            num_single_draws=draws,
                            psis_resample=False,
                            calculate_lp=True,
                            seed=seed,
                            inits=[_as_init(d) for d in init_list] if init_list is not None else None,
                            sig_figs=SIG_FIGS,
                            output_dir=str(out_dir),
                        ),
                        str(model.exe_file),
                    )
            except Exception as exc:
                raise _classify(exc, "Pathfinder") from None
            elapsed = time.perf_counter() - start
            stats = fit.method_variables()
            lp = np.asarray(stats["lp__"], dtype=float).ravel()
            lp_approx = np.asarray(stats["lp_approx__"], dtype=float).ravel()
            n = lp.shape[0]
            values = self._variables(fit, (n,), self._declared(model))
            messages = ""
            try:
                messages = Path(fit._runset.stdout_files[0]).read_text()  # CmdStan's console output
            except Exception:  # pragma: no cover - console output not kept
                pass
        log_weights, k = _psis.psislw(lp - lp_approx, tail_length=_psis.stan_tail_length(n))
        rng = np.random.default_rng(seed)
        idx = rng.choice(n, size=draws, replace=True, p=np.exp(log_weights))
        if k > 0.7:
            warnings.warn(
                f"Pathfinder: Pareto k value ({k:.2g}) is greater than 0.7. Importance resampling was not able to "
                "improve the approximation, which may indicate that the approximation itself is poor; "
                "use method='mcmc'.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        return PathfinderResult(
            draws={name: v[idx][None] for name, v in values.items()},
            lp=lp,
            lp_approx=lp_approx,
            log_weights=log_weights,
            pareto_k=float(k),
            resampled=idx,
            num_paths=num_paths,
            elapsed=elapsed,
            engine=self.name,
            model_name=model_name,
            seed=seed,
            stan_version=self.stan_version,
            messages=messages,
        )

    # ------------------------------------------------ log density, quantities
    def log_prob(self, model_name: str, data: dict[str, Any], params: dict[str, Any], jacobian: bool = False) -> float:
        """Log density at constrained parameter values (without Jacobian by default).

        CmdStan's ``log_prob`` method; see
        :meth:`~pyrater.inference.stan.engines.pystan_engine.PystanEngine.log_prob`.
        """
        model = self.compile(model_name)
        check_data(data)
        try:
            with warnings.catch_warnings(), _quiet_cmdstanpy():
                warnings.simplefilter("ignore")
                out = model.log_prob(_as_init(params), data, jacobian=bool(jacobian), sig_figs=SIG_FIGS)
        except Exception as exc:
            raise StanDataError(f"Stan could not evaluate the log density:\n{_stan_lines(str(exc))}") from None
        return float(out["lp__"].iloc[0])

    def generated_quantities(
        self, model_name: str, data: dict[str, Any], params: dict[str, Any]
    ) -> dict[str, np.ndarray]:
        """All parameters, transformed parameters and generated quantities at constrained values.

        One iteration of CmdStan's ``fixed_param`` sampler started at ``params``.
        """
        model = self.compile(model_name)
        check_data(data)
        try:
            with _quiet_cmdstanpy():
                fit = model.sample(
                    data=data,
                    fixed_param=True,
                    chains=1,
                    iter_warmup=0,
                    iter_sampling=1,
                    adapt_engaged=False,
                    inits=_as_init(params),
                    seed=1,
                    sig_figs=SIG_FIGS,
                    show_progress=False,
                )
        except Exception as exc:
            raise StanDataError(f"Stan could not evaluate the generated quantities:\n{_stan_lines(str(exc))}") from None
        return {k: v[0] for k, v in self._variables(fit, (1,), self._declared(model)).items()}
