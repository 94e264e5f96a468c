"""Fit results of the Stan models: MCMC draws and posterior modes.

Both classes answer the accessors of :class:`pyrater.results.Fit`.  Class
probabilities are never stored per draw by Stan: they are computed here from
the draws of pi and theta with the shared kernel
(:func:`pyrater.kernel.rao_blackwell_class_probabilities`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from .data import RatingData
from .kernel import class_log_posterior, rao_blackwell_class_probabilities
from .models import Model
from .results import Fit, parameter_names

__all__ = ["MCMCFit", "OptimizeFit", "RHAT_THRESHOLD"]

RHAT_THRESHOLD = 1.01
#: Stan's default maximum tree depth of NUTS.
MAX_TREE_DEPTH = 10

# extra (model-specific) parameters and their named dims
_EXTRA_DIMS = {
    "p": ("rater", "category"),
    "mu": ("category", "rating"),
    "sigma": ("category", "rating"),
}


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

    @property
    def _dims(self) -> dict[str, list[str]]:
        dims = {"pi": ["category"], "theta": ["rater", "category", "rating"], "log_lik": ["item"]}
        dims.update({k: list(v) for k, v in _EXTRA_DIMS.items()})
        if self.model.name == "homogeneous":
            dims["theta"] = ["category", "rating"]
        return dims

    @property
    def _coords(self) -> dict[str, list[Any]]:
        d = self.data
        return {
            "category": list(d.categories),
            "rating": list(d.categories),
            "rater": list(d.rater_labels),
            "item": self._item_labels(),
        }

    def _item_labels(self) -> list[Any]:
        d = self.data
        if d.is_grouped:
            return list(range(1, d.n_items + 1))
        return list(d.unit_labels)

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
        chains, warmup, draws, seed.
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
            "chains": self.n_chains,
            "draws per chain": self.n_draws,
            "warmup": self.settings.get("warmup"),
            "seed": self.settings.get("seed"),
            "divergences": n_div,
            "sampling time (s)": round(float(self.elapsed), 2),
        }

    # ---------------------------------------------------------------- arviz
    def to_inference_data(self):
        """ArviZ InferenceData with named dims and the user's labels as coords.

        Groups: ``posterior`` (pi[category], theta[rater, category, rating],
        model-specific parameters), ``log_likelihood`` (``log_lik[item]``; for
        grouped data one column per item, each pattern's value repeated by
        its tally, so LOO treats items as the unit), ``sample_stats`` and
        ``observed_data`` (the ratings in long form).
        """
        from ._quiet import import_arviz

        az = import_arviz()

        dims = self._dims
        posterior = {k: np.asarray(v) for k, v in self.draws.items() if k != "log_lik"}
        log_lik = {}
        if "log_lik" in self.draws and np.asarray(self.draws["log_lik"]).shape[-1] > 0:
            log_lik["log_lik"] = self._expand_units(np.asarray(self.draws["log_lik"]))
        obs = self.data.to_long()
        observed = {
            "item_obs": np.asarray(obs.iloc[:, 0].astype(object)),
            "rater_obs": np.asarray(obs.iloc[:, 1].astype(object)),
            "rating_obs": np.asarray(obs.iloc[:, 2].astype(object)),
        }
        dims = {**dims, "item_obs": ["rating_index"], "rater_obs": ["rating_index"], "rating_obs": ["rating_index"]}
        return az.from_dict(
            posterior=posterior,
            log_likelihood=log_lik or None,
            sample_stats={k: np.asarray(v) for k, v in self.sample_stats.items()},
            observed_data=observed,
            coords=self._coords,
            dims=dims,
            attrs={
                "model": self.model.name,
                "method": self.method,
                "engine": self.engine,
                "inference_library": "pyrater",
            },
        )

    @cached_property
    def _diagnostics(self) -> pd.DataFrame:
        from ._quiet import import_arviz

        az = import_arviz()

        pi = np.asarray(self.draws["pi"])
        theta = self._theta_chains()
        C, S = pi.shape[:2]
        flat = np.concatenate([pi, theta.reshape(C, S, -1)], axis=2)
        pi_names, theta_names = parameter_names(self.data)
        # arviz works on (chain, draw, *shape) arrays directly
        ds = az.convert_to_dataset({"x": flat})
        rhat = az.rhat(ds)["x"].to_numpy()
        ess_bulk = az.ess(ds, method="bulk")["x"].to_numpy()
        ess_tail = az.ess(ds, method="tail")["x"].to_numpy()
        table = pd.DataFrame(
            {"rhat": rhat, "ess_bulk": ess_bulk, "ess_tail": ess_tail},
            index=pd.Index(pi_names + theta_names, name="parameter"),
        )
        return table

    def _diagnostics_table(self) -> pd.DataFrame:
        return self._diagnostics

    def mcmc_diagnostics(self, warn: bool = True) -> pd.DataFrame:
        """Rhat, bulk and tail ESS per parameter, plus sampler problems.

        Returns a DataFrame (one row per pi and theta entry); its ``attrs``
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
                stacklevel=3,
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
            "log posterior at mode": round(float(self.log_density), 4),
            "initialisations": int(np.size(self.all_log_densities)),
            "converged": bool(np.all(self.converged)) if np.size(self.converged) else None,
        }

    def mcmc_diagnostics(self, warn: bool = True) -> pd.DataFrame:
        raise NotImplementedError("an optimisation fit has no MCMC draws to diagnose; refit with method='mcmc'")

    def to_inference_data(self):
        """ArviZ InferenceData holding the mode as a single draw (chain=1, draw=1).

        Useful for uniform downstream code; LOO/WAIC need MCMC draws.
        """
        from ._quiet import import_arviz

        az = import_arviz()

        posterior = {k: np.asarray(v)[None, None] for k, v in self.params.items() if k != "log_lik"}
        return az.from_dict(
            posterior=posterior,
            coords=self._coords,
            dims={k: v for k, v in self._dims.items() if k in posterior},
            attrs={"model": self.model.name, "method": self.method, "engine": self.engine},
        )
