"""Engine interface shared by the pystan and cmdstanpy back ends.

An *engine* compiles pyrater's Stan programs (``stan/*.stan``) once, caches
them, and runs NUTS (:meth:`Engine.sample`) or posterior-mode optimisation
(:meth:`Engine.optimize`) on a data dictionary made by
:func:`pyrater.inference.stan.data.stan_data`.  Both engines return the same result
classes with the same array layouts, so code above this layer does not care
which one ran.
"""

from __future__ import annotations

import abc
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...._validation import check_int, check_seed
from ..data import STAN_PROGRAM_NAMES

__all__ = [
    "Engine",
    "SampleResult",
    "OptimizeResult",
    "PathfinderResult",
    "StanError",
    "StanCompileError",
    "StanDataError",
    "StanRuntimeError",
    "stan_dir",
    "stan_file",
    "program_code",
    "SAMPLE_STAT_NAMES",
]

#: Sampler diagnostics in :attr:`SampleResult.sample_stats` (ArviZ names).
SAMPLE_STAT_NAMES: tuple[str, ...] = (
    "lp",
    "acceptance_rate",
    "step_size",
    "tree_depth",
    "n_steps",
    "diverging",
    "energy",
)

#: Stan's names of the sampler diagnostics -> ArviZ names.
STAN_SAMPLE_STATS: dict[str, str] = {
    "lp__": "lp",
    "accept_stat__": "acceptance_rate",
    "stepsize__": "step_size",
    "treedepth__": "tree_depth",
    "n_leapfrog__": "n_steps",
    "divergent__": "diverging",
    "energy__": "energy",
}


class StanError(RuntimeError):
    """Stan failed; the message carries Stan's own message."""


class StanCompileError(StanError):
    """The Stan program did not compile (stanc or C++ compiler message)."""


class StanDataError(StanError, ValueError):
    """Stan rejected the data or the initial values (Stan's message included)."""


class StanRuntimeError(StanError):
    """Sampling or optimisation failed inside Stan."""


# ----------------------------------------------------------------- results
@dataclass
class SampleResult:
    """Draws from NUTS, in Stan's row-major shapes.

    Attributes
    ----------
    draws : dict of str -> array
        Every parameter, transformed parameter and generated quantity, shape
        ``(chains, draws, *param_shape)``; e.g. ``theta`` of the Dawid-Skene
        program is ``(chains, draws, J, K, K)`` with
        ``theta[c, s, j, k, l] = P(rating l | class k, rater j)``.
    sample_stats : dict of str -> array
        Sampler diagnostics, shape ``(chains, draws)``: ``lp`` (log density
        up to a constant, with Jacobian), ``acceptance_rate``, ``step_size``,
        ``tree_depth`` (int), ``n_steps`` (int, leapfrog steps),
        ``diverging`` (bool), ``energy``.
    elapsed : float
        Wall-clock seconds of the call (compilation excluded).
    engine : str
        ``"pystan"`` or ``"cmdstanpy"``.
    model_name : str
        Which Stan program ran.
    stan_time : array, shape (chains, 2)
        Stan's own warm-up and sampling seconds per chain (NaN where the
        back end does not report them).
    seed : int or None
        The seed used.
    stan_version : str
        Version of Stan that ran (e.g. ``"2.35.0"``).
    """

    draws: dict[str, np.ndarray]
    sample_stats: dict[str, np.ndarray]
    elapsed: float
    engine: str
    model_name: str = ""
    stan_time: np.ndarray = field(default_factory=lambda: np.full((0, 2), np.nan))
    seed: int | None = None
    stan_version: str = ""

    @property
    def n_chains(self) -> int:
        """Number of chains."""
        return int(next(iter(self.sample_stats.values())).shape[0])

    @property
    def n_draws(self) -> int:
        """Draws per chain."""
        return int(next(iter(self.sample_stats.values())).shape[1])

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}{tuple(v.shape[2:])}" for k, v in self.draws.items())
        return (
            f"SampleResult({self.model_name!r}, engine={self.engine!r}, {self.n_chains} chains x "
            f"{self.n_draws} draws, {self.elapsed:.1f} s; {shapes})"
        )


@dataclass
class OptimizeResult:
    """Posterior mode (maximum a posteriori on the constrained scale).

    Attributes
    ----------
    params : dict of str -> array
        Parameters, transformed parameters and generated quantities (e.g.
        ``theta``, ``log_lik``) at the best mode, in Stan's shapes.
    log_density : float
        Log posterior density at the best mode, without the Jacobian of the
        constraining transforms (the programs include every normalising
        constant of the priors).
    all_log_densities : array, shape (n_starts,)
        The final log density of every start (NaN for a failed start).
    converged : array of bool, shape (n_starts,)
        Whether each start's optimiser reported convergence.
    engine : str
        ``"pystan"`` or ``"cmdstanpy"``.
    model_name : str
    best : int
        Index of the start that gave the best mode.
    elapsed : float
        Wall-clock seconds of the call.
    stan_version : str
        Version of Stan that ran.
    """

    params: dict[str, np.ndarray]
    log_density: float
    all_log_densities: np.ndarray
    converged: np.ndarray
    engine: str
    model_name: str = ""
    best: int = 0
    elapsed: float = 0.0
    stan_version: str = ""

    def __repr__(self) -> str:
        return (
            f"OptimizeResult({self.model_name!r}, engine={self.engine!r}, log_density={self.log_density:.4f}, "
            f"{int(np.sum(self.converged))}/{len(self.converged)} starts converged)"
        )


@dataclass
class PathfinderResult:
    """Draws from Stan's Pathfinder variational approximation, PSIS-resampled.

    Attributes
    ----------
    draws : dict of str -> array
        Every parameter, transformed parameter and generated quantity after
        Pareto-smoothed importance resampling, shape ``(1, draws, *shape)``
        (one "chain", so the layout matches :class:`SampleResult`).
    lp, lp_approx : array, shape (n_approx,)
        Log density of the model (``lp__``) and of the approximation
        (``lp_approx__``) at every approximate draw of every path, before
        resampling; ``lp - lp_approx`` are the importance log ratios.
    log_weights : array, shape (n_approx,)
        Pareto-smoothed, normalised log importance weights.
    pareto_k : float
        Pareto k of the importance ratios (above 0.7 the approximation is
        poor and resampling cannot repair it; Stan warns at the same value).
    resampled : array of int, shape (draws,)
        Index into the approximate draws of each resampled draw.
    num_paths : int
    elapsed : float
        Wall-clock seconds of the call.
    engine : str
    model_name : str
    seed : int or None
    stan_version : str
    messages : str
        Stan's console output (its warnings included).
    """

    draws: dict[str, np.ndarray]
    lp: np.ndarray
    lp_approx: np.ndarray
    log_weights: np.ndarray
    pareto_k: float
    resampled: np.ndarray
    num_paths: int
    elapsed: float
    engine: str
    model_name: str = ""
    seed: int | None = None
    stan_version: str = ""
    messages: str = ""

    @property
    def n_draws(self) -> int:
        """Number of resampled draws."""
        return int(self.resampled.shape[0])


def stan_version_from_header(include_dir: str | Path) -> str:
    """``"major.minor.patch"`` read from ``<include_dir>/stan/version.hpp`` ("" if absent)."""
    path = Path(include_dir) / "stan" / "version.hpp"
    try:
        text = path.read_text()
    except OSError:
        return ""
    parts = [re.search(rf"#define STAN_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m is not None) if all(parts) else ""


# --------------------------------------------------------- program files
def _package_dir() -> Path:
    """The installed ``pyrater`` package folder (this file is ``pyrater/inference/stan/engines/base.py``)."""
    return Path(__file__).resolve().parents[3]


def stan_dir() -> Path:
    """Folder holding pyrater's ``.stan`` files.

    Looked up in order: the ``PYRATER_STAN_DIR`` environment variable;
    ``pyrater/stan`` inside an installed wheel (the build force-includes the
    top-level ``stan/`` folder there); the repository's top-level ``stan/``
    (editable installs).

    Raises
    ------
    FileNotFoundError
        None of these exists.
    """
    env = os.environ.get("PYRATER_STAN_DIR")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"PYRATER_STAN_DIR={env!r} is not a directory")
        return path
    candidates = [_package_dir() / "stan", _package_dir().parents[1] / "stan"]
    for path in candidates:
        if (path / "dawid_skene.stan").is_file():
            return path
    raise FileNotFoundError(
        "pyrater's Stan programs were not found in "
        + ", ".join(str(p) for p in candidates)
        + "; set PYRATER_STAN_DIR to the folder holding dawid_skene.stan"
    )


def check_model_name(model_name: str) -> str:
    """Return ``model_name`` or raise ``ValueError`` listing the valid names."""
    if model_name not in STAN_PROGRAM_NAMES:
        raise ValueError(f"unknown Stan model {model_name!r}; choose one of {STAN_PROGRAM_NAMES}")
    return model_name


def stan_file(model_name: str) -> Path:
    """Path of the ``.stan`` file of a model (``"dawid_skene"``, ...)."""
    path = stan_dir() / f"{check_model_name(model_name)}.stan"
    if not path.is_file():
        raise FileNotFoundError(f"Stan program {path} not found")
    return path


def program_code(model_name: str) -> str:
    """Source code of a model's Stan program."""
    return stan_file(model_name).read_text()


# ---------------------------------------------------------------- helpers
def unflatten_column_major(
    values: np.ndarray, names: Sequence[str], dims: Sequence[Sequence[int]]
) -> dict[str, np.ndarray]:
    """Split flat Stan output into named arrays.

    Parameters
    ----------
    values : array, shape (..., P)
        Flat values, variables one after the other, each in Stan's
        column-major order (as ``write_array`` and the CSV/JSON outputs
        give them); leading axes (chains, draws) are kept.
    names, dims : sequences
        Variable names and their Stan dimensions.

    Returns
    -------
    dict of str -> array, shape (..., *dims) in row-major order.
    """
    values = np.asarray(values, dtype=float)
    lead = values.shape[:-1]
    out: dict[str, np.ndarray] = {}
    pos = 0
    for name, dim in zip(names, dims):
        dim = tuple(int(d) for d in dim)
        size = int(np.prod(dim)) if dim else 1
        block = values[..., pos : pos + size]
        pos += size
        # column-major flat -> reversed row-major dims, then reverse the axes
        block = block.reshape(lead + dim[::-1])
        n = len(lead)
        order = list(range(n)) + [n + len(dim) - 1 - a for a in range(len(dim))]
        out[name] = np.ascontiguousarray(np.transpose(block, order)) if dim else block.reshape(lead)
    if pos != values.shape[-1]:
        raise ValueError(f"{values.shape[-1]} values for variables totalling {pos}")
    return out


def flatten_column_major(value: Any) -> np.ndarray:
    """Flatten an array in Stan's column-major order."""
    return np.asarray(value, dtype=float).ravel(order="F")


def check_sample_args(chains: int, warmup: int, draws: int, seed: int | None) -> None:
    """Validate sampler arguments before any work (``ValueError`` naming the argument)."""
    for name, value, low in (("chains", chains, 1), ("warmup", warmup, 0), ("draws", draws, 1)):
        check_int(name, value, low)
    check_seed(seed)


def check_data(data: Any) -> dict[str, Any]:
    """The data must be a dict as :func:`pyrater.inference.stan.data.stan_data` makes."""
    if not isinstance(data, dict):
        raise TypeError(f"data must be a dict (see pyrater.inference.stan.data.stan_data); got {type(data).__name__}")
    for key in ("K", "J", "I"):
        if key not in data:
            raise ValueError(f"data lacks {key!r}; build it with pyrater.inference.stan.data.stan_data")
    return data


def resolve_inits(
    model_name: str, data: dict[str, Any], inits: Any, n: int, seed: int | None
) -> list[dict[str, np.ndarray]] | None:
    """Initial values, one dict per chain or start.

    ``None`` gives :func:`pyrater.inference.stan.data.stan_inits` (diagonal-heavy,
    seeded by ``seed``); ``"random"`` leaves Stan's own uniform(-2, 2)
    initialisation (returns None); one dict is repeated; a list must have
    ``n`` dicts.
    """
    from ..data import data_inits

    if inits is None:
        if not model_name:
            return None
        return data_inits(model_name, data, n, seed)
    if isinstance(inits, str):
        if inits != "random":
            raise ValueError(f"inits must be None, 'random', a dict or a list of {n} dicts; got {inits!r}")
        return None
    if isinstance(inits, dict):
        return [dict(inits) for _ in range(n)]
    inits = list(inits)
    if len(inits) != n or not all(isinstance(d, dict) for d in inits):
        raise ValueError(f"inits must be None, 'random', a dict or a list of {n} dicts; got {len(inits)} items")
    return [dict(d) for d in inits]


def optimize_inits(
    model_name: str, data: dict[str, Any], seed: int | None, inits: Any, n_inits: int
) -> list[dict[str, np.ndarray]] | None:
    """Validate :meth:`Engine.optimize`'s arguments and resolve its starts.

    A list of ``inits`` sets the number of starts; otherwise ``n_inits``
    starts as in :func:`resolve_inits`.
    """
    check_model_name(model_name)
    check_data(data)
    check_seed(seed)
    check_int("n_inits", n_inits, 1)
    if isinstance(inits, (list, tuple)):
        n_inits = len(inits)
    return resolve_inits(model_name, data, inits, n_inits, seed)


_ELAPSED_RE = re.compile(r"([0-9.eE+-]+)\s+seconds\s+\((Warm-up|Sampling)\)")


def parse_elapsed(lines: Sequence[str]) -> tuple[float, float]:
    """Warm-up and sampling seconds from Stan's "Elapsed Time" messages."""
    found = {"Warm-up": np.nan, "Sampling": np.nan}
    for line in lines:
        m = _ELAPSED_RE.search(line)
        if m:
            found[m.group(2)] = float(m.group(1))
    return found["Warm-up"], found["Sampling"]


class Engine(abc.ABC):
    """A Stan back end: compile once, then sample or optimise.

    Subclasses: :class:`~pyrater.inference.stan.engines.pystan_engine.PystanEngine`,
    :class:`~pyrater.inference.stan.engines.cmdstanpy_engine.CmdStanPyEngine`.  Obtain
    one with :func:`pyrater.inference.stan.engines.get_engine`.
    """

    #: Engine name as given to :func:`get_engine`.
    name: str = ""
    #: Version of Stan the engine runs (e.g. ``"2.35.0"``).
    stan_version: str = ""

    @abc.abstractmethod
    def compile(self, model_name: str, force: bool = False) -> Any:
        """Compile (or load from the cache) the program of ``model_name``."""

    def sample(
        self,
        model_name: str,
        data: dict[str, Any],
        chains: int = 4,
        warmup: int = 1000,
        draws: int = 1000,
        seed: int | None = None,
        inits: Any = None,
        progress: bool = True,
    ) -> SampleResult:
        """Run NUTS (diagonal metric, adapted during warm-up).

        Parameters
        ----------
        model_name : {"dawid_skene", "hierarchical", "class_conditional", "homogeneous", "one_coin", "mace"}
        data : dict
            From :func:`pyrater.inference.stan.data.stan_data`.
        chains, warmup, draws : int
            Number of chains, warm-up iterations and kept draws per chain.
        seed : int, optional
            Seed in ``[0, 2**31)``; the same seed, data and inits give the
            same draws.
        inits : None, "random", dict or list of dicts
            ``None``: :func:`pyrater.inference.stan.data.stan_inits` (diagonal-heavy,
            seeded by ``seed``); ``"random"``: Stan's uniform(-2, 2) on the
            unconstrained scale; a dict (all chains) or one dict per chain.
        progress : bool
            Show progress while sampling.

        Returns
        -------
        SampleResult

        Raises
        ------
        ValueError
            Bad arguments (before any work).
        StanDataError
            Stan rejected the data or the initial values.
        StanRuntimeError
            Sampling failed inside Stan.
        """
        check_model_name(model_name)
        return self.sample_code(
            program_code(model_name),
            data,
            chains=chains,
            warmup=warmup,
            draws=draws,
            seed=seed,
            inits=inits,
            progress=progress,
            model_name=model_name,
        )

    @abc.abstractmethod
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
        """:meth:`sample` for any Stan program text (used by tests and benchmarks)."""

    @abc.abstractmethod
    def optimize(
        self,
        model_name: str,
        data: dict[str, Any],
        seed: int | None = None,
        inits: Any = None,
        n_inits: int = 4,
    ) -> OptimizeResult:
        """Posterior mode from several starts; the best one is kept.

        The mode is found on the constrained scale: the log density is
        maximised without the Jacobian of the transforms.

        Parameters
        ----------
        model_name, data
            As for :meth:`sample`.
        seed : int, optional
        inits : None, "random", dict or list of dicts
            As for :meth:`sample`; a list sets the number of starts.
        n_inits : int
            Number of starts when ``inits`` is not a list.

        Returns
        -------
        OptimizeResult
        """

    def pathfinder(
        self,
        model_name: str,
        data: dict[str, Any],
        draws: int = 1000,
        num_paths: int = 4,
        seed: int | None = None,
        inits: Any = None,
    ) -> PathfinderResult:
        """Stan's Pathfinder; only the cmdstanpy engine has it.

        Raises
        ------
        NotImplementedError
            This engine cannot run Pathfinder (the message says which can).
        """
        raise NotImplementedError(
            f"method='pathfinder' needs the cmdstanpy engine (CmdStan >= 2.33); the {self.name!r} engine "
            "(pystan/httpstan) offers only NUTS and optimisation. Install CmdStan "
            "(`python -m cmdstanpy.install_cmdstan`) and use engine='cmdstanpy'"
        )
