"""A small generic EM for finite mixtures of binomials.

Model: observation ``i`` is the number of successes ``x_i`` out of ``n_i``
trials, drawn from component ``c`` with probability ``w_c``:

    p(x_i) = sum_c w_c Binomial(x_i | n_i, p_c).

EM (Dempster, Laird & Rubin 1977) alternates

E-step
    responsibilities ``r[i, c] = w_c Bin(x_i | n_i, p_c) / sum_c' w_c' Bin(x_i | n_i, p_c')``
    (computed in log space);
M-step
    ``w_c = sum_i f_i r[i, c] / sum_i f_i`` and
    ``p_c = sum_i f_i r[i, c] x_i / sum_i f_i r[i, c] n_i``,

with optional frequency weights ``f_i`` (e.g. tallies of distinct outcomes).
Each iteration never decreases the log-likelihood
``sum_i f_i log p(x_i)``.  This is the one-rater, binary special case of the
Dawid-Skene EM in :mod:`pyrater.inference.em.algorithm`, kept separate as a readable worked
example.

Worked example: three coins
---------------------------
Three coins with initial biases 0.4, 0.5, 0.65 and weights 0.25, 0.5, 0.25;
twenty experiments each record the number of heads in 10 tosses of one coin
chosen at random.  The first E-step gives, for an outcome of 6 heads,
posterior coin probabilities 0.146815, 0.540176, 0.313009 (0.1468149,
0.5401758, 0.3130094 to seven decimals):

>>> import numpy as np
>>> from pyrater.contrib.mixture import binomial_mixture_em, binomial_mixture_responsibilities
>>> heads = [6, 5, 4, 2, 6, 6, 6, 5, 4, 2, 5, 5, 3, 4, 6, 4, 5, 6, 3, 3]
>>> r = binomial_mixture_responsibilities([6], 10, [0.25, 0.5, 0.25], [0.4, 0.5, 0.65])
>>> np.round(r[0], 7)
array([0.1468149, 0.5401758, 0.3130094])
>>> fit = binomial_mixture_em(heads, 10, weights=[0.25, 0.5, 0.25], p=[0.4, 0.5, 0.65])
>>> bool(fit.converged), bool(np.all(np.diff(fit.log_lik_trace) >= -1e-12))
(True, True)
>>> np.round(fit.log_lik_trace[:3], 4)
array([-36.8246, -34.8297, -34.6568])
>>> np.round(fit.p, 3)
array([0.45, 0.45, 0.45])

The likelihood rises from -36.82 to -34.53, where all three coins share
the overall proportion of heads, 90 / 200 = 0.45: these counts vary less
than a single binomial would (variance 1.75 against 10 * 0.45 * 0.55 =
2.475), so the maximum-likelihood mixture collapses to one coin and the
weights are not identified.  EM finds this on its own; a mixture model
can only separate coins whose counts are overdispersed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gammaln, logsumexp, xlog1py, xlogy

from .._stacklevel import user_stacklevel

__all__ = [
    "BinomialMixtureFit",
    "binomial_mixture_em",
    "binomial_mixture_responsibilities",
    "binomial_log_pmf",
]


@dataclass(eq=False)
class BinomialMixtureFit:
    """Result of :func:`binomial_mixture_em`.

    Attributes
    ----------
    weights : array, shape (C,)
        Mixing weights ``w_c``.
    p : array, shape (C,)
        Success probabilities ``p_c``.
    responsibilities : array, shape (N, C)
        ``P(component c | x_i)`` at the estimate.
    log_lik : float
        ``sum_i f_i log p(x_i)`` at the estimate.
    log_lik_trace : array, shape (n_iter + 1,)
        Log-likelihood at the initial values and after each iteration.
    n_iter : int
    converged : bool
    """

    weights: np.ndarray
    p: np.ndarray
    responsibilities: np.ndarray = field(repr=False)
    log_lik: float
    log_lik_trace: np.ndarray = field(repr=False)
    n_iter: int
    converged: bool


def binomial_log_pmf(x: np.ndarray, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``log Bin(x | n, p)`` broadcast over ``x, n`` (N,) and ``p`` (C,): shape (N, C)."""
    x = np.asarray(x, dtype=float)[:, None]
    n = np.broadcast_to(np.asarray(n, dtype=float), x.shape[:1])[:, None]
    p = np.asarray(p, dtype=float)[None, :]
    log_choose = gammaln(n + 1) - gammaln(x + 1) - gammaln(n - x + 1)
    return log_choose + xlogy(x, p) + xlog1py(n - x, -p)


def _validate(x, n_trials, weights, p, freq):
    x = np.asarray(x, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("x is empty")
    n = np.broadcast_to(np.asarray(n_trials, dtype=float), x.shape).copy()
    if np.any(~np.isfinite(x)) or np.any(x < 0) or np.any(np.mod(x, 1) != 0):
        raise ValueError("x must hold non-negative integer counts of successes")
    if np.any(np.mod(n, 1) != 0) or np.any(x > n):
        raise ValueError("n_trials must be integers with x <= n_trials")
    w = np.array(weights, dtype=float).ravel()
    pp = np.array(p, dtype=float).ravel()
    if w.size != pp.size or w.size < 1:
        raise ValueError(f"weights and p must have the same length >= 1; got {w.size} and {pp.size}")
    if np.any(w <= 0) or not np.isclose(w.sum(), 1.0):
        raise ValueError(f"weights must be positive and sum to 1; got {w.tolist()}")
    if np.any(pp < 0) or np.any(pp > 1):
        raise ValueError(f"p must lie in [0, 1]; got {pp.tolist()}")
    f = np.ones_like(x) if freq is None else np.broadcast_to(np.asarray(freq, dtype=float), x.shape).copy()
    if np.any(f < 0) or f.sum() <= 0:
        raise ValueError("freq must be non-negative with a positive sum")
    return x, n, w, pp, f


def _e_step(x, n, w, p):
    lj = binomial_log_pmf(x, n, p) + np.log(w)[None, :]
    ll = logsumexp(lj, axis=1)
    return np.exp(lj - ll[:, None]), ll


def binomial_mixture_responsibilities(
    x: np.ndarray | list, n_trials: int | np.ndarray, weights: np.ndarray | list, p: np.ndarray | list
) -> np.ndarray:
    """E-step: posterior component probabilities ``r[i, c]``, shape (N, C).

    Parameters
    ----------
    x : array (N,)
        Successes.
    n_trials : int or array (N,)
        Trials.
    weights : array (C,)
        Mixing weights (positive, sum to 1).
    p : array (C,)
        Success probability of each component.
    """
    x, n, w, pp, _ = _validate(x, n_trials, weights, p, None)
    return _e_step(x, n, w, pp)[0]


def binomial_mixture_em(
    x: np.ndarray | list,
    n_trials: int | np.ndarray,
    weights: np.ndarray | list,
    p: np.ndarray | list,
    freq: np.ndarray | list | None = None,
    tol: float = 1e-10,
    max_iter: int = 1000,
) -> BinomialMixtureFit:
    """EM for a finite mixture of binomials from given starting values.

    Parameters
    ----------
    x : array (N,)
        Number of successes of each observation.
    n_trials : int or array (N,)
        Number of trials of each observation.
    weights : array (C,)
        Initial mixing weights (positive, sum to 1).
    p : array (C,)
        Initial success probabilities.
    freq : array (N,), optional
        Frequency weight of each observation (e.g. how often an outcome
        occurred); the result equals that of the expanded data.
    tol : float
        Stop when the log-likelihood changes by at most
        ``tol * max(1, |log_lik|)``.
    max_iter : int
        Maximum number of iterations.

    Returns
    -------
    BinomialMixtureFit
    """
    x, n, w, pp, f = _validate(x, n_trials, weights, p, freq)
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    r, ll_i = _e_step(x, n, w, pp)
    trace = [float(f @ ll_i)]
    converged = False
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count of iterations is reported after the loop
        fr = f[:, None] * r
        tot = fr.sum(axis=0)
        w = tot / tot.sum()
        trials = fr.T @ n
        pp = np.divide(fr.T @ x, trials, out=pp.copy(), where=trials > 0)
        with np.errstate(divide="ignore"):
            r, ll_i = _e_step(x, n, w, pp)
        trace.append(float(f @ ll_i))
        if abs(trace[-1] - trace[-2]) <= tol * max(1.0, abs(trace[-1])):
            converged = True
            break
    if not converged:
        warnings.warn(
            f"binomial mixture EM did not converge in {max_iter} iterations", UserWarning, stacklevel=user_stacklevel()
        )
    return BinomialMixtureFit(
        weights=w,
        p=pp,
        responsibilities=r,
        log_lik=trace[-1],
        log_lik_trace=np.asarray(trace),
        n_iter=it,
        converged=converged,
    )
