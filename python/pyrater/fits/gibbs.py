"""Result of the Gibbs sampler: an MCMC fit with a label-switching check.

:class:`GibbsFit` is a :class:`~pyrater.fits.draws.DrawsFit` (same draws layout as NUTS,
so every accessor, the Rao-Blackwellised class probabilities, ArviZ export,
LOO/WAIC, posterior prediction, plots and save/load are shared) whose
diagnostics also say whether a chain's classes are a permutation of the
others' (label switching).

Label switching
---------------
The Dawid-Skene and homogeneous likelihoods are unchanged when the true
classes are permuted (with pi and the true-class axis of theta); only the
prior and the starts tell the labellings apart.  The default diagonal-heavy
priors and starts around the majority vote keep every chain on the labelling
in which class k goes with rating k, but with weak raters, flat priors or
many classes a chain can settle on another labelling.  :func:`label_switching`
compares every chain's posterior means with the others': for each pair it
finds the class permutation that best matches the means (Hungarian method on
squared differences of pi_k and theta[:, k, :]) and calls a chain switched
when that permutation is not the identity and matches at least four times
better (in summed squared difference) than the identity.  The labelling
shared by most chains is the reference.  What to do: refit with stronger
diagonal priors (``beta``), known items, or more informative starts, or drop
the switched chains; do not average draws across switched chains.  Switching
within a chain shows as a high Rhat and in :func:`pyrater.plots.plot_trace`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import linear_sum_assignment

from .._stacklevel import user_stacklevel
from .base import parameter_names
from .draws import RHAT_THRESHOLD, SINGLE_CHAIN, DrawsFit, problems_message

__all__ = ["GibbsFit", "label_switching", "SWITCH_RATIO"]

#: a chain is switched when the best class permutation matches this many times better than the identity
SWITCH_RATIO = 4.0
#: up to this many kept values of pi and theta (chains x draws x entries) the fit-time check is the full
#: rank-normalised table of :meth:`GibbsFit.mcmc_diagnostics` (about a second); above, the classic split-Rhat
FULL_CHECK_VALUES = 20_000_000


def _class_profiles(pi: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Per chain and class, the vector (pi_k, theta[:, k, :]): (C, K, 1 + J*K)."""
    C, K = pi.shape[0], pi.shape[-1]
    pm = pi.mean(axis=1)  # (C, K)
    tm = theta.mean(axis=1)  # (C, J, K, K)
    tk = np.moveaxis(tm, 2, 1).reshape(C, K, -1)  # (C, K, J*K)
    return np.concatenate([pm[:, :, None], tk], axis=2)


def label_switching(pi: np.ndarray, theta: np.ndarray) -> list[dict[str, Any]]:
    """Chains whose classes are a permutation of the reference chains'.

    Parameters
    ----------
    pi : array (C, S, K)
        Draws of pi per chain.
    theta : array (C, S, J, K, K)
        Draws of theta per chain.

    Returns
    -------
    list of dict
        One per switched chain: ``chain`` (0-based), ``permutation`` (list:
        the chain's class ``permutation[k]`` matches reference class ``k``)
        and ``reference_chains``.  Empty when all chains agree.
    """
    C, K = pi.shape[0], pi.shape[-1]
    if C < 2:
        return []
    prof = _class_profiles(pi, theta)
    ident = np.arange(K)

    def perm_to(a: int, b: int) -> np.ndarray:
        """Permutation mapping chain b's classes onto chain a's (identity unless clearly better)."""
        cost = ((prof[a][:, None, :] - prof[b][None, :, :]) ** 2).sum(-1)  # (K ref, K other)
        _, cols = linear_sum_assignment(cost)
        best, same = cost[ident, cols].sum(), cost[ident, ident].sum()
        if np.array_equal(cols, ident) or same <= SWITCH_RATIO * best:
            return ident
        return cols

    perms = [perm_to(0, c) for c in range(C)]
    keys = [tuple(p) for p in perms]
    groups: dict[tuple, list[int]] = {}
    for c, key in enumerate(keys):
        groups.setdefault(key, []).append(c)
    ref_key = max(groups, key=lambda k: (len(groups[k]), k == tuple(ident)))
    ref = groups[ref_key]
    if len(groups) == 1:
        return []
    out = []
    for c in range(C):
        if c in ref:
            continue
        out.append({"chain": c, "permutation": perm_to(ref[0], c).tolist(), "reference_chains": ref})
    return [o for o in out if o["permutation"] != ident.tolist()]


def _switching_text(switched: list[dict[str, Any]]) -> str:
    text = "; ".join(
        f"chain {s['chain']} (its classes {s['permutation']} match classes 0..K-1 of chains {s['reference_chains']})"
        for s in switched
    )
    return (
        f"label switching: {text}. Do not pool these chains; refit with stronger diagonal priors, "
        "known items or more draws, or drop the switched chains"
    )


@dataclass(eq=False, repr=False)
class GibbsFit(DrawsFit):
    """A model fitted by the blocked Gibbs sampler (:func:`pyrater.inference.gibbs.gibbs`).

    Same fields and accessors as every :class:`~pyrater.fits.draws.DrawsFit`: ``draws``
    holds ``pi`` (chains, draws, K), ``theta`` (chains, draws, J, K, K), or
    (chains, draws, K, K) for the homogeneous model, ``p`` (chains, draws,
    J, K) for the class-conditional model, ``p`` (chains, draws, J) for the
    one-coin model, ``competence`` (chains, draws, J) and ``xi`` (chains,
    draws, J, K) for MACE, and ``log_lik`` (chains, draws,
    units) when kept; ``sample_stats`` holds ``lp``, the log posterior
    density up to a constant (log-likelihood plus log prior, no Jacobian:
    not comparable with Stan's ``lp__``).  ``settings`` holds chains,
    warmup, draws, thin, seed and the threads used.

    :meth:`mcmc_diagnostics` adds ``label_switching`` to the table's
    ``attrs`` (see :func:`label_switching`) and warns about switched chains.
    """

    method: str = "gibbs"

    @cached_property
    def label_switching(self) -> list[dict[str, Any]]:
        """Switched chains (see :func:`label_switching`); empty when none."""
        return label_switching(np.asarray(self.draws["pi"]), self._theta_chains())

    def _summary_info(self) -> dict[str, Any]:
        return {
            "sampler": "blocked Gibbs (pyrater.inference)",
            "chains": self.n_chains,
            "draws per chain": self.n_draws,
            "warmup": self.settings.get("warmup"),
            "thin": self.settings.get("thin", 1),
            "seed": self.settings.get("seed"),
            "label-switched chains": [s["chain"] for s in self.label_switching],
            "sampling time (s)": round(float(self.elapsed), 2),
        }

    def _fit_time_check(self) -> None:
        """Warn about non-convergence when the sampler returns, at a cost that stays small at crowd scale.

        Small fits get the full :meth:`mcmc_diagnostics` (rank-normalised Rhat,
        bulk and tail ESS).  Above :data:`FULL_CHECK_VALUES` kept values
        (e.g. 1,000 raters, K = 5, 4 chains x 1,000 draws: 10^8) that table
        takes tens of seconds, more than the sampling of 10^6 ratings; the
        fit then checks the classic split-Rhat of every entry (one pass of
        means and variances) and the label switching, and the full table is
        computed on the first call of :meth:`mcmc_diagnostics` or
        :meth:`summary`.
        """
        pi = np.asarray(self.draws["pi"])
        theta = self._theta_chains()
        C, S = pi.shape[:2]
        from .diagnostics import split_rhat

        if C * S * (pi.shape[2] + theta[0, 0].size) <= FULL_CHECK_VALUES:
            self.mcmc_diagnostics(warn=True)
            return
        rhat = np.concatenate([split_rhat(pi), split_rhat(np.reshape(theta, (C, S, -1)))])
        finite = rhat[np.isfinite(rhat)]
        problems = []
        if C < 2:
            problems.append(SINGLE_CHAIN)
        elif finite.size and finite.max() > RHAT_THRESHOLD:
            pi_names, theta_names = parameter_names(self.data)
            worst = (pi_names + theta_names)[int(np.nanargmax(rhat))]
            problems.append(
                f"max split-Rhat {finite.max():.3f} > {RHAT_THRESHOLD} (at {worst}; the classic statistic, "
                "checked at fit time for this many parameters: mcmc_diagnostics() gives the "
                "rank-normalised one)"
            )
        if problems:
            warnings.warn(
                problems_message(problems),
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        self._warn_label_switching()

    def _warn_label_switching(self) -> None:
        switched = self.label_switching
        if switched:
            warnings.warn(_switching_text(switched) + ".", RuntimeWarning, stacklevel=user_stacklevel())

    def _sampler_problems(self, table: pd.DataFrame) -> list[str]:
        switched = self.label_switching
        table.attrs["label_switching"] = switched
        return [_switching_text(switched)] if switched else []
