"""Fit results of the Stan models: MCMC draws and posterior modes.

Both classes answer the accessors of :class:`pyrater.results.Fit`.  Class
probabilities are never stored per draw by Stan: they are computed here from
the draws of pi and theta with the shared kernel
(:func:`pyrater.kernel.rao_blackwell_class_probabilities`).
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

from ._stacklevel import user_stacklevel
from .data import RatingData
from .kernel import class_log_posterior, rao_blackwell_class_probabilities
from .models import Model
from .results import Fit, parameter_names, var_dims

__all__ = ["MCMCFit", "OptimizeFit", "RHAT_THRESHOLD"]

RHAT_THRESHOLD = 1.01
#: Stan's default maximum tree depth of NUTS.
MAX_TREE_DEPTH = 10

#: Model-specific parameters reported by :meth:`MCMCFit.mcmc_diagnostics` after pi and theta.
EXTRA_PARAMETERS = ("p", "mu", "sigma")


def _safe_log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


class _StanFit(Fit):
    """Shared plumbing of the Stan fit classes."""

    data: RatingData
    model: Model
    priors: dict
    known: np.ndarray | None
    engine: str

    def _priors(self) -> dict[str, np.ndarray]:
        return self.priors

    def _expand_units(self, arr: np.ndarray) -> np.ndarray:
        """Repeat per-unit values (last axis) by the tallies, giving per-item values."""
        if not self.data.is_grouped:
            return arr
        return np.repeat(arr, self.data.weight, axis=-1)


@dataclass(eq=False)
class MCMCFit(_StanFit):
    """A Stan model fitted by NUTS.

    Attributes
    ----------
    data : RatingData
    model : model object (with its priors)
    priors : dict
        Resolved prior hyperparameters passed to Stan.
    draws : dict of arrays
        Each of shape ``(chains, draws, *param_shape)``.
    sample_stats : dict of arrays
        Each of shape ``(chains, draws)``: diverging, tree_depth, lp, ...
    known : int array (I,) or None
        Known true class codes conditioned on (-1 = unknown).
    engine : str
        ``"pystan"`` or ``"cmdstanpy"``.
    settings : dict
        chains, warmup, draws, seed, stan_version.
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
    method: str = "mcmc"

    def __post_init__(self) -> None:
        # C-ordered draws, whatever the engine's layout (CmdStan's CSV reader gives strided views):
        # sums over draws then do not depend on where the draws came from (a fit and its reloaded
        # file give the same means to the last bit)
        self.draws = {k: np.ascontiguousarray(v) for k, v in self.draws.items()}
        self.sample_stats = {k: np.ascontiguousarray(v) for k, v in self.sample_stats.items()}

    @property
    def has_draws(self) -> bool:
        return True

    @property
    def n_chains(self) -> int:
        return int(self.draws["pi"].shape[0])

    @property
    def n_draws(self) -> int:
        """Draws per chain."""
        return int(self.draws["pi"].shape[1])

    def _theta_chains(self) -> np.ndarray:
        """theta draws as (chains, draws, J, K, K)."""
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
        return rao_blackwell_class_probabilities(self.data.counts, _safe_log(pi), _safe_log(theta), known=self.known)

    def _class_probs(self) -> np.ndarray:
        return self._rb_probs

    def _summary_info(self) -> dict[str, Any]:
        n_div = int(np.asarray(self.sample_stats.get("diverging", 0)).sum())
        return {
            "engine": self.engine,
            "Stan version": self.settings.get("stan_version"),
            "chains": self.n_chains,
            "draws per chain": self.n_draws,
            "warmup": self.settings.get("warmup"),
            "seed": self.settings.get("seed"),
            "divergences": n_div,
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

    def _diagnostic_draws(self) -> tuple[np.ndarray, list[str]]:
        """(chain, draw, P) draws of pi, theta and the model-specific parameters, with their names."""
        pi = np.asarray(self.draws["pi"])
        theta = self._theta_chains()
        C, S = pi.shape[:2]
        pi_names, theta_names = parameter_names(self.data)
        blocks, names = [pi, theta.reshape(C, S, -1)], pi_names + theta_names
        coords = self._coords()
        for name in EXTRA_PARAMETERS:
            if name not in self.draws:
                continue
            arr = np.asarray(self.draws[name])
            dims = var_dims(name, arr.shape[2:])
            labels = [[str(v) for v in coords.get(dim, range(size))] for dim, size in zip(dims, arr.shape[2:])]
            blocks.append(arr.reshape(C, S, -1))
            names += [f"{name}[{', '.join(combo)}]" for combo in itertools.product(*labels)]
        return np.concatenate(blocks, axis=2), names

    @cached_property
    def _diagnostics(self) -> pd.DataFrame:
        from . import _arviz

        flat, names = self._diagnostic_draws()
        return pd.DataFrame(
            {"rhat": _arviz.rhat(flat), "ess_bulk": _arviz.ess(flat, "bulk"), "ess_tail": _arviz.ess(flat, "tail")},
            index=pd.Index(names, name="parameter"),
        )

    def _diagnostics_table(self) -> pd.DataFrame:
        return self._diagnostics

    def mcmc_diagnostics(self, warn: bool = True) -> pd.DataFrame:
        """Rhat, bulk and tail ESS per parameter, plus sampler problems.

        Returns a DataFrame with one row per entry of pi, theta and the
        model's own parameters (the class-conditional model's ``p[rater,
        category]``; the hierarchical model's ``mu[category, rating]`` and
        ``sigma[category, rating]``, where a funnel would show); its ``attrs``
        hold ``divergences``, ``max_tree_depth_hits`` and ``max_rhat``.
        Warns when Rhat > 1.01 or there are divergent transitions.
        """
        table = self._diagnostics.copy()
        n_div = int(np.asarray(self.sample_stats.get("diverging", np.zeros(1))).sum())
        depth = np.asarray(self.sample_stats.get("tree_depth", np.zeros(1)))
        table.attrs["divergences"] = n_div
        table.attrs["max_tree_depth_hits"] = int((depth >= MAX_TREE_DEPTH).sum())
        # constant entries (and single chains for Rhat) give NaN: summarise the finite ones
        for key, column, reduce in (("max_rhat", "rhat", np.max), ("min_ess_bulk", "ess_bulk", np.min)):
            values = table[column].to_numpy()
            finite = values[np.isfinite(values)]
            table.attrs[key] = float(reduce(finite)) if finite.size else float("nan")
        if warn:
            self._warn(table)
        return table

    def _warn(self, table: pd.DataFrame) -> None:
        problems = []
        if self.n_chains < 2:
            problems.append("Rhat needs at least 2 chains")
        if table.attrs["max_rhat"] > RHAT_THRESHOLD:
            worst = table["rhat"].idxmax()
            problems.append(f"max Rhat {table.attrs['max_rhat']:.3f} > {RHAT_THRESHOLD} (at {worst})")
        if table.attrs["divergences"]:
            problems.append(f"{table.attrs['divergences']} divergent transitions after warmup")
        if table.attrs["max_tree_depth_hits"]:
            problems.append(
                f"{table.attrs['max_tree_depth_hits']} transitions hit the maximum tree depth ({MAX_TREE_DEPTH})"
            )
        if problems:
            warnings.warn(
                "MCMC problems: " + "; ".join(problems) + ". Run longer chains or check the model/priors.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )


@dataclass(eq=False)
class OptimizeFit(_StanFit):
    """A Stan model fitted by posterior-mode optimisation.

    Attributes
    ----------
    params : dict of arrays
        Parameters at the best mode found (constrained scale).
    log_density : float
        Log posterior density (without Jacobian) at the mode, up to a constant.
    all_log_densities : array
        The value reached from every initialisation.
    converged : array of bool
        Convergence flag of every initialisation.
    """

    data: RatingData
    model: Model
    priors: dict
    params: dict
    known: np.ndarray | None
    engine: str
    log_density: float = float("nan")
    all_log_densities: np.ndarray = field(default_factory=lambda: np.array([]))
    converged: np.ndarray = field(default_factory=lambda: np.array([], dtype=bool))
    settings: dict = field(default_factory=dict)
    method: str = "optimize"

    def _point(self) -> tuple[np.ndarray, np.ndarray]:
        pi = np.asarray(self.params["pi"], dtype=float)
        theta = np.asarray(self.params["theta"], dtype=float)
        if theta.ndim == 2:
            theta = np.broadcast_to(theta, (self.data.n_raters, *theta.shape))
        return pi, theta

    @cached_property
    def _probs(self) -> np.ndarray:
        pi, theta = self._point()
        log_post, _ = class_log_posterior(self.data.counts, _safe_log(pi), _safe_log(theta), known=self.known)
        return np.exp(log_post)

    def _class_probs(self) -> np.ndarray:
        return self._probs

    def _summary_info(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "Stan version": self.settings.get("stan_version"),
            "log posterior at mode": round(float(self.log_density), 4),
            "initialisations": int(np.size(self.all_log_densities)),
            "converged": bool(np.all(self.converged)) if np.size(self.converged) else None,
        }

    def _groups(self) -> dict[str, xr.Dataset]:
        """The mode as a single draw (chain = draw = 1) and the observed data."""
        posterior = {k: np.asarray(v)[None, None] for k, v in self.params.items() if k != "log_lik"}
        return {"posterior": self._dataset(posterior), "observed_data": self._observed_data()}
