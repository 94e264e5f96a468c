"""The draws-based fit: posterior draws of pi, theta and the model's own parameters.

:class:`DrawsFit` holds the draws of any sampler (NUTS in Stan,
:class:`~pyrater.fits.mcmc.MCMCFit`; the Gibbs sampler,
:class:`~pyrater.fits.gibbs.GibbsFit`; Pathfinder's PSIS-resampled draws,
:class:`~pyrater.fits.pathfinder.PathfinderFit`) and answers every accessor
from them.  Class probabilities are never stored per draw: they are computed
from the draws of pi and the (effective) theta by the shared compiled pass
over the stored counts (:func:`pyrater.models.kernels.draws_class_probabilities`),
fused across draws and chunked, so memory stays the output plus a few MiB.
Posterior means, interval bounds, rank-normalised Rhat and bulk/tail ESS come
from one pass over the draws, one sort per parameter, in blocks
(:func:`pyrater.fits.diagnostics.draws_statistics`): computed once, one way
(ArviZ's definitions), for every sampler, and cached on the fit.

Extension point for new model families
--------------------------------------
Every post-fit step reads the draws through :meth:`DrawsFit._effective_draws`
(pi ``(S, K)`` and an effective per-rater theta ``(S, J, K, K)``, or
``(S, 1, K, K)`` shared by all raters): a family whose parameters determine
such a theta (MACE, one-coin, pooled, community models, ...) overrides it
(or stores ``theta`` among its draws) and gets class probabilities,
``log_lik`` for LOO and the summary from the shared kernels unchanged.
"""

from __future__ import annotations

import itertools
import math
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
from ..models.kernels import draws_class_probabilities
from ._lazy import LazyDraws, draw_shape
from .base import DEFAULT_PROB, Fit, parameter_names, var_dims

__all__ = ["DrawsFit", "RHAT_THRESHOLD", "safe_log"]

#: the problem a single chain reports: no Rhat
SINGLE_CHAIN = "Rhat needs at least 2 chains"


def problems_message(problems: list[str]) -> str:
    """The text of the "MCMC problems" warning, with advice that fits the problems.

    A single chain alone asks for more chains (longer chains would not give an
    Rhat); anything else for longer chains or another look at the model.
    """
    if problems == [SINGLE_CHAIN]:
        return f"MCMC problems: {SINGLE_CHAIN}. Run chains >= 2 to check convergence."
    advice = "Run longer chains or check the model/priors."
    if SINGLE_CHAIN in problems:
        advice = "Run chains >= 2 and longer chains, or check the model/priors."
    return "MCMC problems: " + "; ".join(problems) + ". " + advice


def _quantile_name(q: float) -> str:
    """Column name of the ``q`` quantile: ``"5%"``, ``"95%"``."""
    return f"{100 * q:g}%"


RHAT_THRESHOLD = 1.01

#: Model-specific parameters reported by :meth:`DrawsFit.mcmc_diagnostics` after pi and theta.
EXTRA_PARAMETERS = ("p", "competence", "xi", "mu", "sigma", "shift", "log_scale", "m", "s", "rho", "community_prob")


def safe_log(x: np.ndarray) -> np.ndarray:
    """``log(x)`` with ``log(0) = -inf`` and no warning."""
    with np.errstate(divide="ignore"):
        return np.log(x)


@dataclass(eq=False, repr=False)
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
        own parameters and ``log_lik`` (per unit) when kept.  A fit loaded
        lazily from a file (:func:`pyrater.load`) holds a read-only
        :class:`~pyrater.fits._lazy.LazyDraws` mapping instead, which reads
        each large entry on first access.
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
    draws: dict | LazyDraws
    sample_stats: dict
    known: np.ndarray | None
    engine: str
    settings: dict = field(default_factory=dict)
    elapsed: float = float("nan")
    method: str = "draws"

    def __repr__(self) -> str:  # one line: the draws and priors are arrays (see summary())
        return (
            f"{type(self).__name__}({self.model.title}, engine={self.engine!r}, chains={self.n_chains}, "
            f"draws={self.n_draws}, items={self.data.n_items}, raters={self.data.n_raters}, "
            f"K={self.data.n_categories})"
        )

    def __post_init__(self) -> None:
        # C-ordered draws, whatever the engine's layout (CmdStan's CSV reader gives strided views):
        # sums over draws then do not depend on where the draws came from (a fit and its reloaded
        # file give the same means to the last bit)
        if not isinstance(self.draws, LazyDraws):  # a loaded file's draws are read C-ordered when first used
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

    def _effective_draws(self) -> tuple[np.ndarray, np.ndarray]:
        """Pi draws (S, K) and effective theta draws (S, J, K, K) or (S, 1, K, K), as views of the draws.

        What the shared kernels read (class probabilities, ``log_lik``); a family
        without a ``theta`` among its draws overrides this.
        """
        pi = np.asarray(self.draws["pi"])
        theta = np.asarray(self.draws["theta"])
        S = pi.shape[0] * pi.shape[1]
        if theta.ndim == 4:  # homogeneous: one (K, K) matrix for all raters
            return pi.reshape(S, -1), theta.reshape(S, 1, *theta.shape[2:])
        return pi.reshape(S, -1), theta.reshape(S, *theta.shape[2:])

    @property
    def _progress(self) -> bool:
        """Progress bars for the post-fit steps (the fit's ``progress`` setting; default on)."""
        return bool(self.settings.get("progress", True))

    def _own_source(self) -> Any:
        return self.draws  # a lazily read fit reads an entry when its value is asked for

    def _own_value(self, name: str) -> np.ndarray:
        return np.asarray(self.draws[name], dtype=float).mean(axis=(0, 1))

    def _point(self) -> tuple[np.ndarray, np.ndarray]:
        pi = np.asarray(self.draws["pi"])
        theta = np.asarray(self.draws["theta"])
        pm, tm = pi.mean(axis=(0, 1)), theta.mean(axis=(0, 1))
        if tm.ndim == 2:
            tm = np.broadcast_to(tm, (self.data.n_raters, *tm.shape)).copy()
        return pm, tm

    @cached_property
    def _rb_probs(self) -> np.ndarray:
        pi, theta = self._effective_draws()
        return draws_class_probabilities(self.data.counts, pi, theta, known=self.known, progress=self._progress)

    def _class_probs(self) -> np.ndarray:
        return self._rb_probs

    def log_lik_units(self, units: tuple[int, int] | None = None, out: np.ndarray | None = None, progress=None):
        """Per-unit log-likelihood of every draw, units as rows: stored, or recomputed from the draws.

        ``log p(y_i | pi_s, theta_s)`` (``log p(y_i, z_i)`` for a known unit),
        for units ``lo .. hi - 1`` (default all) and every draw (chains
        concatenated): the stored ``log_lik`` when the fit kept it, else
        computed by the shared compiled pass from the pi and theta draws.

        Returns
        -------
        array, shape (hi - lo, chains * draws)
        """
        lo, hi = (0, self.data.n_units) if units is None else units
        shape = draw_shape(self.draws, "log_lik")
        if shape is not None and shape[-1] == self.data.n_units:
            arr = np.asarray(self.draws["log_lik"])
            block = arr.reshape(-1, arr.shape[-1])[:, lo:hi].T
            if out is None:
                return np.ascontiguousarray(block)
            out[...] = block
            return out
        from ..models.kernels import draws_log_lik

        pi, theta = self._effective_draws()
        return draws_log_lik(self.data.counts, pi, theta, self.known, (lo, hi), out=out, progress=progress)

    @property
    def has_log_lik(self) -> bool:
        """True when the fit stores the per-unit ``log_lik`` of every draw."""
        shape = draw_shape(self.draws, "log_lik")  # a lazily loaded log_lik is not read to answer this
        return shape is not None and shape[-1] == self.data.n_units and self.data.n_units > 0

    # ----------------------------------------------------- parameter statistics
    def _parameter_blocks(self) -> tuple[list[tuple[np.ndarray, int]], list[str]]:
        """(chain, draw, P_b) blocks of pi, theta and the model's own parameters, each with a repeat count.

        A homogeneous theta (one matrix for all raters) is one block of K*K
        entries repeated J times (its statistics are computed once).  Blocks are
        views: no copy of the (possibly large) theta draws.
        """
        pi = np.asarray(self.draws["pi"])
        theta = np.asarray(self.draws["theta"])
        C, S = pi.shape[:2]
        pi_names, theta_names = parameter_names(self.data)
        reps = self.data.n_raters if theta.ndim == 4 else 1
        blocks = [(pi, 1), (np.reshape(theta, (C, S, -1)), reps)]
        names = pi_names + theta_names
        coords = self._coords()
        for name in EXTRA_PARAMETERS:
            if name not in self.draws:
                continue
            arr = np.asarray(self.draws[name])
            dims = var_dims(name, arr.shape[2:])
            labels = [[str(v) for v in coords.get(dim, range(size))] for dim, size in zip(dims, arr.shape[2:])]
            blocks.append((arr.reshape(C, S, -1), 1))
            names += [f"{name}[{', '.join(combo)}]" for combo in itertools.product(*labels)]
        return blocks, names

    def _diagnostic_blocks(self) -> tuple[list[np.ndarray], list[str]]:
        """(chain, draw, P_b) blocks of every reported parameter with their names (homogeneous theta tiled)."""
        blocks, names = self._parameter_blocks()
        out = []
        for arr, reps in blocks:
            out.append(arr if reps == 1 else np.tile(arr, (1, 1, reps)))
        return out, names

    def _statistics(self, quantiles: tuple[float, ...], rank: bool) -> pd.DataFrame:
        """Per parameter: mean, the given quantiles and (``rank``) Rhat, bulk and tail ESS, one pass."""
        from .._quiet import progress_bar
        from .diagnostics import draws_statistics  # numba: loaded when first needed

        blocks, names = self._parameter_blocks()
        total = sum(b.shape[2] for b, _ in blocks)
        cols: dict[str, list[np.ndarray]] = {}
        desc = "diagnostics" if rank else "quantiles"
        with progress_bar(self._progress, total, desc, unit="parameter") as bar:
            for arr, reps in blocks:
                res = draws_statistics(arr, quantiles, rank=rank, progress=bar)
                values = {"mean": res["mean"]}
                for q, row in zip(quantiles, res["quantiles"]):
                    values[_quantile_name(q)] = row
                if rank:
                    values.update(rhat=res["rhat"], ess_bulk=res["ess_bulk"], ess_tail=res["ess_tail"])
                for key, v in values.items():
                    cols.setdefault(key, []).append(np.tile(v, reps) if reps > 1 else v)
        return pd.DataFrame({k: np.concatenate(v) for k, v in cols.items()}, index=pd.Index(names, name="parameter"))

    @cached_property
    def _stats(self) -> pd.DataFrame:
        """Means, 5%/95% bounds, Rhat and bulk/tail ESS of every parameter (computed once, then cached)."""
        lo, hi = (1 - DEFAULT_PROB) / 2, (1 + DEFAULT_PROB) / 2
        return self._statistics((lo, hi), rank=True)

    def _interval_table(self, prob: float) -> pd.DataFrame:
        """Mean and central ``prob`` interval bounds per parameter (the cached table for the default prob)."""
        lo, hi = (1 - prob) / 2, (1 + prob) / 2
        if math.isclose(prob, DEFAULT_PROB):
            return self._stats[["mean", _quantile_name(lo), _quantile_name(hi)]]
        return self._statistics((lo, hi), rank=False)

    def posterior_interval(self, prob: float = DEFAULT_PROB, which: str = "pi") -> xr.DataArray:
        """Central posterior intervals with probability ``prob`` (numpy's linear quantiles over all draws).

        Returns a DataArray with a leading ``bound`` dim (``lower``, ``upper``);
        computed in blocks of parameters from the draws (no copy of them).
        """
        if not 0 < prob < 1:
            raise ValueError(f"prob must be in (0, 1), got {prob!r}")
        if which not in ("pi", "theta"):
            raise ValueError(f"which must be 'pi' or 'theta', got {which!r}")
        from .diagnostics import draws_statistics

        lo, hi = (1 - prob) / 2, (1 + prob) / 2
        arr = np.asarray(self.draws[which])
        C, S = arr.shape[:2]
        if math.isclose(prob, DEFAULT_PROB) and "_stats" in self.__dict__ and not (which == "theta" and arr.ndim == 4):
            table = self._stats
            names = parameter_names(self.data)[0 if which == "pi" else 1]
            bounds = table.loc[names, [_quantile_name(lo), _quantile_name(hi)]].to_numpy().T
        else:
            bounds = draws_statistics(arr.reshape(C, S, -1), (lo, hi), rank=False)["quantiles"]
        shape = arr.shape[2:]
        if which == "theta" and arr.ndim == 4:  # homogeneous: the shared matrix for every rater
            bounds = np.broadcast_to(bounds.reshape(2, 1, *shape), (2, self.data.n_raters, *shape))
            shape = (self.data.n_raters, *shape)
        da = self._label(np.ascontiguousarray(bounds.reshape(2, *shape)), which, sample_dim="bound")
        return da.assign_coords(bound=["lower", "upper"])

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
        if (draw_shape(self.draws, "log_lik") or (0,))[-1] > 0:
            out["log_likelihood"] = self._dataset({"log_lik": self._expand_units(np.asarray(self.draws["log_lik"]))})
        if self.sample_stats:
            out["sample_stats"] = self._dataset({k: np.asarray(v) for k, v in self.sample_stats.items()})
        out["observed_data"] = self._observed_data()
        return out

    # ---------------------------------------------------------- diagnostics
    @cached_property
    def _diagnostics(self) -> pd.DataFrame:
        """Rank-normalised Rhat, bulk and tail ESS per parameter (the diagnostics columns of :attr:`_stats`)."""
        return self._stats[["rhat", "ess_bulk", "ess_tail"]]

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
            problems.append(SINGLE_CHAIN)
        if table.attrs["max_rhat"] > RHAT_THRESHOLD:
            worst = table["rhat"].idxmax()
            problems.append(f"max Rhat {table.attrs['max_rhat']:.3f} > {RHAT_THRESHOLD} (at {worst})")
        problems += self._sampler_problems(table)
        if warn and problems:
            warnings.warn(
                problems_message(problems),
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        return table
