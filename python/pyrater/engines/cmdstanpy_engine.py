"""cmdstanpy engine: the same ``.stan`` files compiled by CmdStan.

Used when a CmdStan installation is found (``cmdstanpy.cmdstan_path()``
works, e.g. through the ``CMDSTAN`` environment variable).  Programs are
compiled into pyrater's user cache, ``<cache>/<hash>/``, where ``<hash>``
covers the program text and the CmdStan version: never next to the
``.stan`` files inside the package (cmdstanpy issues 628, 289), and a
program is recompiled only when it changes.  Outputs mirror the pystan
engine exactly (same result classes, shapes and diagnostic names).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

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
    check_seed,
    optimize_inits,
    program_code,
    resolve_inits,
)
from .cache import model_cache_dir

__all__ = ["CmdStanPyEngine", "cmdstan_available"]

logger = logging.getLogger("pyrater.engines")
logger.addHandler(logging.NullHandler())


def cmdstan_available() -> str | None:
    """Path of a usable CmdStan installation, or None (cmdstanpy missing or no CmdStan)."""
    try:
        import cmdstanpy
    except ImportError:
        return None
    try:
        path = cmdstanpy.cmdstan_path()
    except (ValueError, RuntimeError, OSError):
        return None
    return path if path and Path(path).is_dir() else None


def _classify(exc: BaseException, what: str) -> Exception:
    """A cmdstanpy / CmdStan failure as a pyrater Stan error carrying CmdStan's message."""
    text = str(exc).strip() or repr(exc)
    if any(key in text for key in ("data initialization", "Error reading data", "variable does not exist",
                                   "mismatch in dimension", "Rejecting initial value", "Initialization failed",
                                   "not a valid simplex")):
        return StanDataError(f"{what} failed; CmdStan says:\n{text}")
    return StanRuntimeError(f"{what} failed; CmdStan says:\n{text}")


def _as_init(init: dict[str, Any]) -> dict[str, Any]:
    return {k: np.asarray(v, dtype=float) for k, v in init.items()}


class CmdStanPyEngine(Engine):
    """Compile and run pyrater's Stan programs with cmdstanpy / CmdStan.

    Raises
    ------
    ImportError
        cmdstanpy is not installed.
    RuntimeError
        No CmdStan installation was found.
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
                "the 'cmdstanpy' engine needs a CmdStan installation: run "
                "`python -m cmdstanpy.install_cmdstan` (needs internet) or set CMDSTAN to an existing "
                "installation; or use engine='pystan'"
            )
        self.cmdstan_path = path
        self._models: dict[str, Any] = {}

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

        Raises
        ------
        StanCompileError
            stanc or the C++ compiler failed (their message included).
        """
        from cmdstanpy import CmdStanModel

        folder = model_cache_dir(code, "cmdstan", self._cmdstan_version(), self.cmdstan_path)
        key = str(folder)
        if key in self._models and not force:
            return self._models[key]
        stan_path = folder / f"{model_name}.stan"
        if not stan_path.exists() or stan_path.read_text() != code:
            stan_path.write_text(code)
        exe = folder / (model_name + (".exe" if os.name == "nt" else ""))
        try:
            if exe.exists() and not force:
                model = CmdStanModel(stan_file=str(stan_path), exe_file=str(exe))
            else:
                logger.info("compiling %s with CmdStan into %s", model_name, folder)
                # the executable is written next to the cached copy of the program
                model = CmdStanModel(stan_file=str(stan_path), force_compile=force)
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
        """:meth:`sample` for any Stan program text (tests, benchmarks)."""
        check_sample_args(chains, warmup, draws, seed)
        if not isinstance(data, dict):
            raise TypeError(f"data must be a dict; got {type(data).__name__}")
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0] % (2**31))
        if model_name:
            init_list = resolve_inits(model_name, check_data(data), inits, chains, seed)
        else:
            init_list = None if inits is None else resolve_inits("", {}, inits, chains, seed)
        model = self.compile_code(code, model_name or "model")
        start = time.perf_counter()
        try:
            fit = model.sample(
                data=data,
                chains=chains,
                parallel_chains=max(1, min(chains, os.cpu_count() or 1)),
                iter_warmup=warmup,
                iter_sampling=draws,
                seed=seed,
                inits=[_as_init(d) for d in init_list] if init_list is not None else None,
                show_progress=progress,
            )
        except Exception as exc:
            raise _classify(exc, "sampling") from None
        elapsed = time.perf_counter() - start
        draws_out: dict[str, np.ndarray] = {}
        for name in fit.metadata.stan_vars:
            try:
                values = np.asarray(fit.stan_variable(name), dtype=float)  # (chains * draws, *dims)
            except Exception:  # zero-size variables (e.g. log_lik switched off)
                dims = tuple(fit.metadata.stan_vars[name].dimensions)
                values = np.zeros((chains * draws,) + dims)
            draws_out[name] = values.reshape((chains, draws) + values.shape[1:])
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
            stan_time = np.array([[t.get("warmup", np.nan), t.get("sampling", np.nan)] for t in fit.time], dtype=float)
        except Exception:  # pragma: no cover - older cmdstanpy
            stan_time = np.full((chains, 2), np.nan)
        return SampleResult(draws=draws_out, sample_stats=stats, elapsed=elapsed, engine=self.name,
                            model_name=model_name, stan_time=stan_time, seed=seed)

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
            seed = int(np.random.SeedSequence().generate_state(1)[0] % (2**31))
        init_list = optimize_inits(model_name, data, seed, inits, n_inits)
        model = self.compile(model_name)
        start = time.perf_counter()
        lds = np.full(n_inits, np.nan)
        converged = np.zeros(n_inits, dtype=bool)
        fits: list[Any] = [None] * n_inits
        errors: list[str] = []
        for s in range(n_inits):
            try:
                fit = model.optimize(
                    data=data,
                    seed=(seed + s) % (2**31),
                    inits=_as_init(init_list[s]) if init_list is not None else None,
                    algorithm="lbfgs",
                    jacobian=False,
                    iter=10000,
                    require_converged=False,
                )
            except Exception as exc:
                errors.append(f"start {s + 1}: {str(exc).strip()}")
                continue
            fits[s] = fit
            converged[s] = bool(getattr(fit, "converged", True))
            lds[s] = float(fit.optimized_params_dict["lp__"])
        if not np.any(np.isfinite(lds)):
            raise _classify(RuntimeError("\n".join(errors)), "optimisation")
        best = int(np.nanargmax(lds))
        params = {k: np.asarray(v, dtype=float) for k, v in fits[best].stan_variables().items()}
        return OptimizeResult(params=params, log_density=float(lds[best]), all_log_densities=lds,
                              converged=converged, engine=self.name, model_name=model_name, best=best,
                              elapsed=time.perf_counter() - start)

