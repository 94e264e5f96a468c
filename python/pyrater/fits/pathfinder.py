"""Fits by Stan's Pathfinder variational approximation (cmdstanpy engine only).

Pathfinder (Zhang, Carpenter, Gelman & Vehtari 2022, JMLR 23(306)) follows
L-BFGS paths from several starts, fits a normal approximation along each and
keeps the one closest to the posterior (largest ELBO); draws from the
approximations of all paths are then importance-resampled with Pareto
smoothing (PSIS).  The result is a set of approximate posterior draws,
cheaper than NUTS and good for a first look, but not exact: its quality is
judged by the Pareto k of the importance ratios ``lp - lp_approx``
(k < 0.5 good, 0.5-0.7 usable, > 0.7 the approximation is poor and
resampling cannot repair it; Stan and pyrater warn).

:class:`PathfinderFit` answers the accessors of every draws-based fit
(:class:`~pyrater.fits.draws.DrawsFit`): Rao-Blackwellised class probabilities
from the pi and theta draws, ``posterior_samples``, ``posterior_interval``,
``to_inference_data`` and LOO through ``log_lik``.  Markov-chain diagnostics
(Rhat, ESS) do not apply; :meth:`PathfinderFit.pathfinder_diagnostics`
reports the PSIS diagnostics instead.

>>> import pyrater
>>> f = pyrater.fit(df, method="pathfinder", engine="cmdstanpy", seed=1)  # doctest: +SKIP
>>> f.pathfinder_diagnostics()["pareto_k"]                                # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .draws import DrawsFit

__all__ = ["PathfinderFit", "PARETO_K_GOOD", "PARETO_K_BAD"]

#: Below this Pareto k the importance-resampled draws are reliable.
PARETO_K_GOOD = 0.5
#: Above this Pareto k the approximation is poor (Stan's warning threshold).
PARETO_K_BAD = 0.7


@dataclass(eq=False, repr=False)
class PathfinderFit(DrawsFit):
    """A Stan model fitted by Pathfinder, with PSIS-resampled draws.

    Attributes
    ----------
    draws : dict of arrays
        Resampled draws, each of shape ``(1, draws, *param_shape)`` (one
        "chain", so every draws-based accessor of :class:`~pyrater.fits.draws.DrawsFit` applies).
    sample_stats : dict of arrays, shape (1, draws)
        ``lp`` (log density) and ``lp_approx`` (log density of the normal
        approximation) of each resampled draw.
    pareto_k : float
        Pareto k of the importance ratios over all approximate draws.
    lp, lp_approx : array, shape (num_paths * draws,)
        Both log densities at every approximate draw before resampling.
    log_weights : array, shape (num_paths * draws,)
        Pareto-smoothed normalised log importance weights.
    settings : dict
        num_paths, draws, seed, stan_version.
    """

    pareto_k: float = float("nan")
    lp: np.ndarray = field(default_factory=lambda: np.array([]))
    lp_approx: np.ndarray = field(default_factory=lambda: np.array([]))
    log_weights: np.ndarray = field(default_factory=lambda: np.array([]))
    method: str = "pathfinder"

    def pathfinder_diagnostics(self) -> pd.Series:
        """PSIS diagnostics of the approximation.

        Returns
        -------
        Series with ``pareto_k`` (of ``lp - lp_approx`` over all approximate
        draws), ``ess_importance`` (``1 / sum(w**2)`` of the normalised
        smoothed weights: how many independent draws the resample is worth
        at most), ``unique_draws`` (distinct approximate draws among the
        resampled ones), ``n_approximate_draws`` and ``reliable``
        (``pareto_k < 0.7``).
        """
        w = np.exp(self.log_weights)
        pi = np.asarray(self.draws["pi"]).reshape(self.n_draws, -1)
        return pd.Series(
            {
                "pareto_k": float(self.pareto_k),
                "ess_importance": float(1.0 / np.sum(w**2)) if w.size else float("nan"),
                "unique_draws": int(np.unique(pi, axis=0).shape[0]),
                "n_approximate_draws": int(self.lp.size),
                "reliable": bool(self.pareto_k < PARETO_K_BAD),
            },
            name="pathfinder",
        )

    def _diagnostics_table(self) -> pd.DataFrame | None:
        return None  # no Rhat / ESS columns in the summary: not a Markov chain

    def _summary_info(self) -> dict[str, Any]:
        diag = self.pathfinder_diagnostics()
        return {
            "engine": self.engine,
            "Stan version": self.settings.get("stan_version"),
            "paths": self.settings.get("num_paths"),
            "draws (PSIS-resampled)": self.n_draws,
            "seed": self.settings.get("seed"),
            "Pareto k": round(float(diag["pareto_k"]), 3),
            "unique draws": int(diag["unique_draws"]),
            "run time (s)": round(float(self.elapsed), 2),
        }

    def mcmc_diagnostics(self, warn: bool = True) -> pd.DataFrame:
        """Not available: Pathfinder draws are not a Markov chain.

        Raises
        ------
        NotImplementedError
            Always; the message points to :meth:`pathfinder_diagnostics`.
        """
        raise NotImplementedError(
            "a Pathfinder fit has no Markov chains, so Rhat and ESS do not apply; use "
            "fit.pathfinder_diagnostics() (PSIS Pareto k) or refit with method='mcmc'"
        )
