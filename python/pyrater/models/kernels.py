"""The one numerical kernel of pyrater: log class posteriors per item.

Every method that needs ``P(z_i = k | ratings, pi, theta)`` (the EM E-step, the
Rao-Blackwellised class probabilities after MCMC, optimisation fits, posterior
prediction) calls the functions here.  They are pure numpy/scipy, free of pandas.

Notation
--------
I units (items, or distinct rating patterns in grouped data), J raters,
K categories.  ``counts`` is the sparse per-unit count matrix of shape
``(I, J * K)`` whose entry ``(i, j * K + l)`` is the number of times rater ``j``
gave rating ``l`` to unit ``i`` (see :attr:`pyrater.RatingData.counts`).
``log_theta[j, k, l] = log P(rater j says l | true class k)``.

Because the Dawid-Skene likelihood factorises over ratings given the class,

    log p(y_i, z_i = k) = log pi_k + sum_{j, l} counts[i, jK + l] * log theta[j, k, l]

is a single sparse-times-dense product ``counts @ LT`` with ``LT`` the
``(J * K, K)`` reshaping of ``log_theta``.  Only stored (observed) entries enter
the product, so ``log theta = -inf`` for an unobserved rating is harmless.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

__all__ = [
    "log_theta_matrix",
    "log_joint",
    "class_log_posterior",
    "rao_blackwell_class_probabilities",
    "soft_majority_vote",
]


def log_theta_matrix(log_theta: np.ndarray) -> np.ndarray:
    """Reshape ``log_theta`` (J, K, K) to the (J*K, K) matrix used by the kernel.

    ``out[j * K + l, k] = log_theta[j, k, l]``.
    """
    log_theta = np.asarray(log_theta, dtype=float)
    J, K, K2 = log_theta.shape
    if K != K2:
        raise ValueError(f"log_theta must have shape (J, K, K); got {log_theta.shape}")
    return np.ascontiguousarray(log_theta.transpose(0, 2, 1).reshape(J * K, K))


def log_joint(counts: sp.spmatrix, log_pi: np.ndarray, log_theta: np.ndarray) -> np.ndarray:
    """Log joint ``log p(y_i, z_i = k)`` for every unit and class.

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
    log_pi : array, shape (K,)
    log_theta : array, shape (J, K, K)

    Returns
    -------
    array, shape (I, K)
    """
    out = np.asarray(counts @ log_theta_matrix(log_theta))
    out += np.asarray(log_pi, dtype=float)[None, :]
    return out


def _clamp_known(lj: np.ndarray, known: np.ndarray | None) -> np.ndarray:
    """Set ``lj[i, k] = -inf`` for ``k != known[i]`` where ``known[i] >= 0``."""
    if known is None:
        return lj
    known = np.asarray(known)
    rows = np.flatnonzero(known >= 0)
    if rows.size:
        keep = lj[rows, known[rows]]
        lj[rows, :] = -np.inf
        lj[rows, known[rows]] = keep
    return lj


def class_log_posterior(
    counts: sp.spmatrix,
    log_pi: np.ndarray,
    log_theta: np.ndarray,
    known: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Log class posteriors and per-unit log-likelihoods.

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
    log_pi : array, shape (K,)
    log_theta : array, shape (J, K, K)
    known : int array, shape (I,), optional
        Known true class code per unit, ``-1`` where unknown.  A known unit's
        posterior is a point mass and its log-likelihood is ``log p(y_i, z_i)``.

    Returns
    -------
    log_post : array, shape (I, K)
        ``log P(z_i = k | y_i)``.
    log_lik : array, shape (I,)
        ``log p(y_i)`` (or ``log p(y_i, z_i)`` for known units).
    """
    lj = _clamp_known(log_joint(counts, log_pi, log_theta), known)
    log_lik = logsumexp(lj, axis=1)
    with np.errstate(invalid="ignore"):
        log_post = lj - log_lik[:, None]
    return log_post, log_lik


def rao_blackwell_class_probabilities(
    counts: sp.spmatrix,
    log_pi_draws: np.ndarray,
    log_theta_draws: np.ndarray,
    known: np.ndarray | None = None,
    max_block: int = 2**22,
) -> np.ndarray:
    """Average over draws of ``P(z_i = k | y_i, pi_s, theta_s)``.

    This is the Rao-Blackwellised estimate of the posterior class
    probabilities: conditional probabilities given each draw's parameters,
    averaged, rather than a histogram of sampled classes.

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
    log_pi_draws : array, shape (S, K)
    log_theta_draws : array, shape (S, J, K, K)
    known : int array, shape (I,), optional
    max_block : int
        Upper bound on ``I * K * draws`` held in memory at once.

    Returns
    -------
    array, shape (I, K)
    """
    log_pi_draws = np.asarray(log_pi_draws, dtype=float)
    log_theta_draws = np.asarray(log_theta_draws, dtype=float)
    S, K = log_pi_draws.shape
    I = counts.shape[0]
    J = log_theta_draws.shape[1]
    block = max(1, int(max_block // max(1, I * K)))
    total = np.zeros((I, K))
    for start in range(0, S, block):
        stop = min(S, start + block)
        n = stop - start
        # (J*K, n*K): column s*K + k holds log theta_s[j, k, l] at row j*K + l.
        lt = log_theta_draws[start:stop].transpose(1, 3, 0, 2).reshape(J * K, n * K)
        lj = np.asarray(counts @ lt).reshape(I, n, K)
        lj += log_pi_draws[start:stop][None, :, :]
        if known is not None:
            rows = np.flatnonzero(np.asarray(known) >= 0)
            if rows.size:
                kk = np.asarray(known)[rows]
                mask = np.full((rows.size, 1, K), -np.inf)
                mask[np.arange(rows.size), 0, kk] = 0.0
                lj[rows] += mask
        lj -= logsumexp(lj, axis=2, keepdims=True)
        total += np.exp(lj).sum(axis=1)
    return total / S


def soft_majority_vote(counts: sp.spmatrix, n_categories: int) -> np.ndarray:
    """Share of each category among each unit's ratings (soft majority vote).

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
        Per-unit count matrix (:attr:`pyrater.RatingData.counts`).
    n_categories : int
        K.

    Returns
    -------
    array, shape (I, K)
        ``T[i, l] = sum_j C[i, j*K + l] / sum_{j, l} C[i, j*K + l]``; a unit
        without ratings gets ``1/K``.
    """
    K = int(n_categories)
    JK = counts.shape[1]
    # (J*K, K) dense indicator of the rating l of column j*K + l: one sparse-dense product
    sel = np.tile(np.eye(K), (JK // K, 1))
    votes = np.asarray(counts @ sel, dtype=float)
    total = votes.sum(axis=1)
    empty = total <= 0
    votes[empty] = 1.0
    total[empty] = K
    votes /= total[:, None]
    return votes
