"""Stan engines: the same ``.stan`` programs run by cmdstanpy or pystan.

>>> from pyrater.inference.stan.engines import get_engine
>>> from pyrater.inference.stan.data import stan_data
>>> eng = get_engine()                                   # doctest: +SKIP
>>> fit = eng.sample("dawid_skene", stan_data(data, DawidSkene()), seed=1)   # doctest: +SKIP
>>> fit.draws["theta"].shape                             # doctest: +SKIP
(4, 1000, J, K, K)

:func:`get_engine` picks cmdstanpy when a working CmdStan installation is
found and pystan (httpstan) otherwise.  Both compile each program once
(printing one line the first time), cache it keyed by the program text, and
return :class:`SampleResult` / :class:`OptimizeResult` with identical
layouts; both report the Stan version that ran.  Only cmdstanpy offers
Stan's Pathfinder (:class:`PathfinderResult`).
"""

from __future__ import annotations

from .base import (
    SAMPLE_STAT_NAMES,
    Engine,
    OptimizeResult,
    PathfinderResult,
    SampleResult,
    StanCompileError,
    StanDataError,
    StanError,
    StanRuntimeError,
    program_code,
    stan_dir,
    stan_file,
)
from .cmdstanpy_engine import CmdStanPyEngine, cmdstan_available
from .pystan_engine import PystanEngine

__all__ = [
    "get_engine",
    "ENGINE_NAMES",
    "Engine",
    "PystanEngine",
    "CmdStanPyEngine",
    "SampleResult",
    "OptimizeResult",
    "PathfinderResult",
    "StanError",
    "StanCompileError",
    "StanDataError",
    "StanRuntimeError",
    "SAMPLE_STAT_NAMES",
    "cmdstan_available",
    "stan_dir",
    "stan_file",
    "program_code",
]

#: Valid values of ``engine`` in :func:`get_engine`.
ENGINE_NAMES: tuple[str, ...] = ("auto", "cmdstanpy", "pystan")

_ENGINES: dict[str, Engine] = {}


def get_engine(engine: str = "auto") -> Engine:
    """A Stan engine by name (one shared instance per name).

    Parameters
    ----------
    engine : {"auto", "cmdstanpy", "pystan"}
        ``"auto"``: cmdstanpy when a working CmdStan installation is found
        (``cmdstanpy.cmdstan_path()`` works, e.g. via ``CMDSTAN``, and the
        build is complete; checked once per process, see
        :func:`cmdstan_available`), else pystan.

    Returns
    -------
    Engine

    Raises
    ------
    ValueError
        Unknown name (the valid names are listed).
    ImportError
        The requested back end's Python package is missing (named).
    RuntimeError
        cmdstanpy was requested but no CmdStan installation was found.
    """
    if isinstance(engine, Engine):
        return engine
    if engine not in ENGINE_NAMES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {ENGINE_NAMES}")
    if engine == "auto":
        engine = "cmdstanpy" if cmdstan_available() else "pystan"
    if engine not in _ENGINES:
        _ENGINES[engine] = CmdStanPyEngine() if engine == "cmdstanpy" else PystanEngine()
    return _ENGINES[engine]
