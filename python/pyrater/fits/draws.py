"""The draws-based fit: posterior draws of pi, theta and the model's own parameters.

:class:`DrawsFit` holds the draws of any sampler (NUTS in Stan,
:class:`~pyrater.fits.mcmc.MCMCFit`; the Gibbs sampler,
:class:`~pyrater.fits.gibbs.GibbsFit`; Pathfinder's PSIS-resampled draws,
:class:`~pyrater.fits.pathfinder.PathfinderFit`) and answers every accessor
from them.  Class probabilities are never stored per draw: they are computed
from the draws of pi and theta with the shared kernel
(:func:`pyrater.models.kernels.rao_blackwell_class_probabilities`).  Rhat and
ESS are computed once, one way, for every sampler: ArviZ's rank-normalised
estimators vectorised over parameters (:mod:`pyrater.fits.diagnostics`).
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .._stacklevel import user_stacklevel
from ..data.ratings import RatingData
from ..models import Model
from ..models.kernels import rao_blackwell_class_probabilities
from .base import Fit, parameter_names, var_dims

__all__ = ["DrawsFit", "RHAT_THRESHOLD", "safe_log"]

RHAT_THRESHOLD = 1.01

#: Model-specific parameters reported by :meth:`DrawsFit.mcmc_diagnostics` after pi and theta.
EXTRA_PARAMETERS = ("p", "mu", "sigma")


def safe_log(x: np.ndarray) -> np.ndarray:
    """``log(x)`` with ``log(0) = -inf`` and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(x)


@dataclass(eq=False)
class DrawsFit(Fit):
    """A model fitted by a sampler: every accessor answered from the posterior draws.

    Attributes
    ----------
    data : RatingData
    model : model object (with its priors)
    priors : dict
        Resolved prior hyperparameters.
    draws : dict of arrays
        Each of shape ``(chains, draws, *param_shape)``: ``pi``, ``theta``
        (``(J, K, K)``, or ``(K, K)`` for the homogeneous model), the model's
        own parameters and ``log_lik`` (per unit) when kept.
    sample_stats : dict of arrays
        Each of shape ``(chains, draws)``.
    known : int array (I,) or None
        Known true class codes conditioned on (-1 = unknown).
    engine : str
        What produced the draws (``"pystan"``, ``"cmdstanpy"``, ``"pyrater-gibbs"``).
    settings : dict
        The run's settings (chains, warmup, draws, seed, ...).
    elapsed : float
        Sampling time in seconds.
    """

    data: RatingData
    model: Model
    priors: dict
    draws: dict
    sample_stats: dict
    known: np.ndarray | None
    engine: str
    settings: dict = field(default_factory=dict)
    elapsed: float = float("nan")
    method: str = "draws"

    def __post_init__(self) -> None:
        # C-ordered draws, whatever the engine's layout (CmdStan's CSV reader gives strided views):
        # sums over draws then do not depend on where the draws came from (a fit and its reloaded
        # file give the same means to the last bit)
        self.draws = {k: np.ascontiguousarray(v) for k, v in self.draws.items()}
        self.sample_stats = {k: np.ascontiguousarray(v) for k, v in self.sample_stats.items()}

    @property
    def has_draws(self) -> bool:
        """True: the fit holds posterior draws."""
        return True

    @property
    def n_chains(self) -> int:
        """Number of chains."""
        return int(self.draws["pi"].shape[0])

    @property
    def n_draws(self) -> int:
        """Draws per chain."""
        return int(self.draws["pi"].shape[1])

    def _priors(self) -> dict[str, np.ndarray]:
        return self.priors

    def _expand_units(self, arr: np.ndarray) -> np.ndarray:
        """Repeat per-unit values (last axis) by the tallies, giving per-item values."""
        if not self.data.is_grouped:
            return arr
        return np.repeat(arr, self.data.weight, axis=-1)

    def _theta_chains(self) -> np.ndarray:
        """Theta draws as (chains, draws, J, K, K)."""
        theta = np.asarray(self.draws["theta"])
        if theta.ndim == 4:  # homogeneous: (chains, draws, K, K)
            J = self.data.n_raters
            theta = np.broadcast_to(theta[:, :, None], (theta.shape[0], theta.shape[1], J, *theta.shape[2:]))
        return theta

    def _draws(self) -> tuple[np.ndarray, np.ndarray]:
        pi = np.asarray(self.draws["pi"])
        theta = self._theta_chains()
        S = pi.shape[0] * pi.shape[1]
        return pi.reshape(S, -1), theta.reshape(S, *theta.shape[2:])

    def _point(self) -> tuple[np.ndarray, np.ndarray]:
        pi, theta = self._draws()
        return pi.mean(axis=0), theta.mean(axis=0)

    @cached_property
    def _rb_probs(self) -> np.ndarray:
        pi, theta = self._draws()
        return rao_blackwell_class_probabilities(self.data.counts, safe_log(pi), safe_log(theta), known=self.known)

    def _class_probs(self) -> np.ndarray:
        return self._rb_probs

    def _summary_info(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "chains": self.n_chains,
            "draws per chain": self.n_draws,
            "warmup": self.settings.get("warmup"),
            "seed": self.settings.get("seed"),
            "sampling time (s)": round(float(self.elapsed), 2),
        }

    # ---------------------------------------------------------------- arviz
    def _groups(self) -> dict[str, xr.Dataset]:
        """posterior, log_likelihood (per item), sample_stats and observed_data as Datasets."""
        out = {"posterior": self._dataset({k: v for k, v in self.draws.items() if k != "log_lik"})}
        if "log_lik" in self.draws and np.asarray(self.draws["log_lik"]).shape[-1] > 0:
            out["log_likelihood"] = self._dataset({"log_lik": self._expand_units(np.asarray(self.draws["log_lik"]))})
        if self.sample_stats:
            out["sample_stats"] = self._dataset({k: np.asarray(v) for k, v in self.sample_stats.items()})
        out["observed_data"] = self._observed_data()
        return out

    # ---------------------------------------------------------- diagnostics
    def _diagnostic_blocks(self) -> tuple[list[np.ndarray], list[str]]:
        """(chain, draw, P_b) blocks of pi, theta and the model-specific parameters, with their names.

        Blocks, not one concatenated array: no copy of the (possibly large) theta draws.
        """
        pi = np.asarray(self.draws["pi"])
        theta = self._theta_chains()
        C, S = pi.shape[:2]
        pi_names, theta_names = parameter_names(self.data)
        blocks, names = [pi, np.reshape(theta, (C, S, -1))], pi_names + theta_names
        coords = self._coords()
        for name in EXTRA_PARAMETERS:
            if name not in self.draws:
                continue
            arr = np.asarray(self.draws[name])
            dims = var_dims(name, arr.shape[2:])
            labels = [[str(v) for v in coords.get(dim, range(size))] for dim, size in zip(dims, arr.shape[2:])]
            blocks.append(arr.reshape(C, S, -1))
            names += [f"{name}[{', '.join(combo)}]" for combo in itertools.product(*labels)]
        return blocks, names

    @cached_property
    def _diagnostics(self) -> pd.DataFrame:
        from .diagnostics import rank_diagnostics  # numba: loaded when first needed

        blocks, names = self._diagnostic_blocks()
        each = [rank_diagnostics(x) for x in blocks]
        stats = {name: np.concatenate([d[name] for d in each]) for name in ("rhat", "ess_bulk", "ess_tail")}
        return pd.DataFrame(stats, index=pd.Index(names, name="parameter"))

    def _diagnostics_table(self) -> pd.DataFrame | None:
        return self._diagnostics

    def _sampler_problems(self, table: pd.DataFrame) -> list[str]:
        """Problems particular to the sampler, recorded in ``table.attrs`` (NUTS: divergences)."""
        return []

    def mcmc_diagnostics(self, warn: bool = True) -> pd.DataFrame:
        """Rank-normalised Rhat, bulk and tail ESS per parameter, plus the sampler's own checks.

        Returns a DataFrame with one row per entry of pi, theta and the
        model's own parameters (the class-conditional model's ``p[rater,
        category]``; the hierarchical model's ``mu[category, rating]`` and
        ``sigma[category, rating]``, where a funnel would show); its ``attrs``
        hold ``max_rhat`` and ``min_ess_bulk`` and what the sampler adds
        (NUTS: ``divergences``, ``max_tree_depth_hits``; Gibbs:
        ``label_switching``).  Warns (RuntimeWarning) when Rhat > 1.01 or the
        sampler reports a problem.
        """
        table = self._diagnostics.copy()
        # constant entries (and single chains for Rhat) give NaN: summarise the finite ones
        for key, column, reduce in (("max_rhat", "rhat", np.max), ("min_ess_bulk", "ess_bulk", np.min)):
            values = table[column].to_numpy()
            finite = values[np.isfinite(values)]
            table.attrs[key] = float(reduce(finite)) if finite.size else float("nan")
        problems = []
        if self.n_chains < 2:
            problems.append("Rhat needs at least 2 chains")
        if table.attrs["max_rhat"] > RHAT_THRESHOLD:
            worst = table["rhat"].idxmax()
            problems.append(f"max Rhat {table.attrs['max_rhat']:.3f} > {RHAT_THRESHOLD} (at {worst})")
        problems += self._sampler_problems(table)
        if warn and problems:
            warnings.warn(
                "MCMC problems: " + "; ".join(problems) + ". Run longer chains or check the model/priors.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        return table
