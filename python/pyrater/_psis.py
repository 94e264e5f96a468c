"""Pareto-smoothed importance sampling (PSIS) of one vector of log importance ratios.

The reference algorithm of Vehtari, Simpson, Gelman, Yao & Gabry (2024),
"Pareto smoothed importance sampling", JMLR 25(72), as in the R package loo
and ArviZ 0.x's ``psislw``:

1. shift the log ratios by their maximum;
2. take the ``M = ceil(min(0.2 S, 3 sqrt(S / r_eff)))`` largest ratios as the
   tail, the next largest as the cutoff ``u``;
3. fit a generalised Pareto distribution to ``exp(tail) - exp(u)`` by the
   Zhang & Stephens (2009) empirical Bayes estimator, with the weakly
   informative prior that shrinks k towards 0.5 with the weight of 10
   observations;
4. replace the tail by ``log(u' + F^-1((j - 1/2) / M))``, ``j = 1..M``, the
   fitted distribution's expected order statistics (``u' = exp(u)``), keeping
   the ranks of the draws;
5. truncate every weight at the largest raw weight, and normalise.

Why pyrater has its own copy: ArviZ 1.x's ``arviz_stats`` implements the
same estimator but (a) its ``psislw`` takes the log-likelihood, that is the
*negated* log ratios (it smooths the right tail of ``-x``, as LOO needs), and
(b) takes ``floor`` instead of ``ceil`` for the tail length, so that even
called with the right sign its Pareto k differs from ArviZ 0.x's by about
0.01 for S = 4000.  This module gives the same numbers on both ArviZ lines
(equal to ArviZ 0.x's ``psislw`` to rounding; equal to ``arviz_stats``'
``psislw(-x)`` when given its tail length).  It is pure NumPy.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["n_pareto_tail", "stan_tail_length", "gpdfit", "psislw"]

#: Fewer tail draws than this and no generalised Pareto fit is attempted (k = inf).
MIN_TAIL = 5
#: Weight, in observations, of the prior on k (centred at 0.5) in :func:`gpdfit`.
PRIOR_K_WEIGHT = 10.0
#: Scale of the prior on theta in Zhang & Stephens' grid (their "3").
PRIOR_THETA = 3.0


def n_pareto_tail(n_draws: int, r_eff: float = 1.0) -> int:
    """Number of largest ratios used as the tail: ``ceil(min(0.2 S, 3 sqrt(S / r_eff)))``.

    Parameters
    ----------
    n_draws : int
        Number of draws S.
    r_eff : float
        Relative efficiency of the draws (ESS / S; 1 for independent draws).
    """
    return int(math.ceil(min(n_draws / 5.0, 3.0 * math.sqrt(n_draws / r_eff))))


def stan_tail_length(n_draws: int) -> int:
    """Stan's tail length (``stan/services/pathfinder/psis.hpp``): ``floor(min(0.2 S, 3 sqrt(S)))``.

    Stan's Pathfinder smooths its importance ratios with ``r_eff = 1`` and
    truncates the tail length to an integer, one draw fewer than
    :func:`n_pareto_tail` for S = 4000.
    """
    return int(min(n_draws / 5.0, 3.0 * math.sqrt(n_draws)))


def gpdfit(x: np.ndarray) -> tuple[float, float]:
    """Generalised Pareto fit (location 0) by Zhang & Stephens (2009) with a prior on k.

    Parameters
    ----------
    x : array, shape (M,)
        Exceedances over the threshold, sorted ascending, positive.

    Returns
    -------
    k : float
        Shape estimate (Stan's and ArviZ's sign: k > 0 is a heavy tail), the
        profile-posterior mean shrunk towards 0.5 with weight 10 observations:
        ``(M k_hat + 10 * 0.5) / (M + 10)``.  NaN when the sample is
        degenerate (its first quartile equals its minimum).
    sigma : float
        Scale estimate (from the unshrunk k, as in the reference code).
    """
    x = np.asarray(x, dtype=float)
    n = x.size
    n_grid = 30 + int(math.sqrt(n))
    first_quartile = x[int(n / 4 + 0.5) - 1]
    if not first_quartile > x[0]:
        return float("nan"), float("nan")
    # grid of theta = -k / sigma values around the data's scale (Zhang & Stephens, section 4)
    theta = 1.0 / x[-1] + (1.0 - np.sqrt(n_grid / (np.arange(1, n_grid + 1) - 0.5))) / (PRIOR_THETA * first_quartile)
    k_of_theta = np.log1p(-theta[:, None] * x).mean(axis=1)
    log_lik = n * (np.log(-theta / k_of_theta) - k_of_theta - 1.0)  # profile log-likelihood
    w = np.exp(log_lik - np.logaddexp.reduce(log_lik))
    keep = w >= 10 * np.finfo(float).eps  # drop negligible grid points, as the reference does
    w, theta = w[keep], theta[keep]
    theta_hat = float(np.sum(theta * (w / w.sum())))
    k = float(np.log1p(-theta_hat * x).mean())
    sigma = -k / theta_hat
    k = (n * k + PRIOR_K_WEIGHT * 0.5) / (n + PRIOR_K_WEIGHT)
    return k, sigma


def _gpd_quantile(p: np.ndarray, k: float, sigma: float) -> np.ndarray:
    """Quantiles of the generalised Pareto distribution (location 0) at ``p`` in (0, 1)."""
    if abs(k) < np.finfo(float).eps:
        return -sigma * np.log1p(-p)
    return sigma * np.expm1(-k * np.log1p(-p)) / k


def psislw(log_ratios: np.ndarray, r_eff: float = 1.0, tail_length: int | None = None) -> tuple[np.ndarray, float]:
    """Pareto-smoothed log importance weights, normalised, and the Pareto k.

    Parameters
    ----------
    log_ratios : array, shape (S,)
        Log importance ratios, target minus proposal log density (any
        constant offset); ``-inf`` (zero weight) is allowed, NaN and ``+inf``
        are not.  Not modified.
    r_eff : float
        Relative efficiency of the draws (1 for independent draws), > 0.
    tail_length : int, optional
        Number of largest ratios in the tail; default
        :func:`n_pareto_tail` ``(S, r_eff)``.  (Stan's Pathfinder and
        ``arviz_stats`` truncate ``min(0.2 S, 3 sqrt(S / r_eff))`` instead.)

    Returns
    -------
    log_weights : array, shape (S,)
        Smoothed, truncated log weights that log-sum-exp to 0.
    k : float
        Estimated Pareto shape of the ratios' right tail: below 0.5 good,
        above 0.7 the importance sampling estimate is unreliable.  ``inf``
        when the tail is too short (fewer than 5 draws above the cutoff) or
        degenerate (no generalised Pareto fit); the weights are then only
        truncated and normalised, not smoothed.

    Raises
    ------
    ValueError
        ``log_ratios`` not one-dimensional, empty, with NaN or ``+inf``, or
        all ``-inf``; ``r_eff`` not positive; ``tail_length`` not a positive
        integer below S.
    """
    x = np.array(log_ratios, dtype=float)  # a copy: the caller's array stays as it was
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"log_ratios must be a non-empty 1-D array (one ratio per draw); got shape {x.shape}")
    if np.isnan(x).any() or np.isposinf(x).any():
        bad = np.flatnonzero(np.isnan(x) | np.isposinf(x))
        raise ValueError(f"log_ratios must not hold NaN or +inf; found at positions {bad[:10].tolist()}")
    if np.isneginf(x).all():
        raise ValueError("log_ratios are all -inf: every importance weight is zero")
    if not (np.isfinite(r_eff) and r_eff > 0):
        raise ValueError(f"r_eff must be a positive number; got {r_eff!r}")
    n = x.size
    if tail_length is None:
        m = n_pareto_tail(n, r_eff)
    else:
        if isinstance(tail_length, bool) or not isinstance(tail_length, (int, np.integer)) or not 1 <= tail_length < n:
            raise ValueError(f"tail_length must be an integer in [1, {n - 1}] (S = {n} draws); got {tail_length!r}")
        m = int(tail_length)

    x -= x.max()
    k = float("inf")
    if m < n:
        order = np.argsort(x)
        # the cutoff is the (m + 1)-th largest ratio (at least log of the smallest normal double, as in
        # ArviZ 0.x, so that exp(cutoff) > 0); ratios tied with it stay in the body
        cutoff = max(x[order[-m - 1]], np.log(np.finfo(float).tiny))
        tail = np.flatnonzero(x > cutoff)
        if tail.size >= MIN_TAIL:
            tail = tail[np.argsort(x[tail])]
            exp_cutoff = math.exp(cutoff)
            k_fit, sigma = gpdfit(np.exp(x[tail]) - exp_cutoff)
            if np.isfinite(k_fit) and np.isfinite(sigma) and sigma > 0:
                k = k_fit
                p = np.arange(0.5, tail.size) / tail.size
                x[tail] = np.log(_gpd_quantile(p, k, sigma) + exp_cutoff)
    np.minimum(x, 0.0, out=x)  # truncate at the largest raw weight (0 after the shift)
    x -= np.logaddexp.reduce(x)
    return x, k
