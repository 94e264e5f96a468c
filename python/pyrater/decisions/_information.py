"""Numerical core of :func:`pyrater.next_ratings`: expected information gain, numpy only.

Notation: ``S`` parameter draws (1 for a point estimate), ``K`` classes,
``q[s, k] = P(z_i = k | data, pi_s, theta_s)`` an item's class posterior
under draw ``s`` and ``theta[s, j, k, l]`` rater ``j``'s error matrix.  The
joint distribution of the item's class and a new rating by rater ``c``,
averaged over the draws (Rao-Blackwellised: conditional probabilities, not
sampled classes), is

    P(z = k, y_c = l) = 1/S sum_s q[s, k] theta[s, c, k, l]

and the expected information gain of the rating is the mutual information
``I(z; y_c) = H(z) + H(y_c) - H(z, y_c)``.  Given ratings already planned for
the item (set ``A`` with outcomes ``y_A``), the gain of one more is the
conditional mutual information ``I(z; y_c | y_A) = sum_m P(y_A = m) I(z; y_c
| y_A = m)``: the fantasised outcomes ``m`` are enumerated (``K^|A|`` of
them) or, beyond ``max_outcomes``, sampled.  Because ratings are
conditionally independent given the class, this gain shrinks as ``A`` grows
(diminishing returns), which is what spreads a batch over items.
"""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

__all__ = ["entropy", "initial_gains", "conditional_gains"]

LN2 = np.log(2.0)


def entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy in nats along ``axis`` (0 log 0 = 0)."""
    return -np.sum(xlogy(p, p), axis=axis)


def _gains(P: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Information gain and error reduction from joints ``P[..., k, c, l]`` and class posteriors ``prior[..., k]``.

    ``P`` sums to ``prior`` over the rating ``l``.  The error reduction is the
    expected fall of the Bayes misclassification probability,
    ``sum_l max_k P[k, l] - max_k prior[k]``.
    """
    h_z = entropy(prior)  # (...,)
    h_y = entropy(P.sum(axis=-3))  # (..., C)
    h_zy = -np.sum(xlogy(P, P), axis=(-3, -1))  # (..., C)
    mi = h_z[..., None] + h_y - h_zy
    err = P.max(axis=-3).sum(axis=-1) - prior.max(axis=-1)[..., None]
    return np.maximum(mi, 0.0), np.maximum(err, 0.0)


def initial_gains(q: np.ndarray, theta: np.ndarray, both: bool = False):
    """``I(z_i; y_ij)`` for items without planned ratings, vectorised over items and raters.

    Parameters
    ----------
    q : array, shape (n, S, K)
        Per-draw class posteriors of ``n`` items.
    theta : array, shape (S, J, K, K)
        Per-draw error matrices of the candidate raters.

    both : bool
        Also return the expected reduction of the misclassification probability.

    Returns
    -------
    array, shape (n, J)
        Expected information gain in nats, clipped at 0 (and, with ``both``,
        the error reduction, shape (n, J)).
    """
    n, S, K = q.shape
    J = theta.shape[1]
    # P[i, k, j, l] = 1/S sum_s q[i, s, k] theta[s, j, k, l]: one matrix product per class k
    P = np.empty((n, K, J, K))
    for k in range(K):
        P[:, k] = (q[:, :, k] @ theta[:, :, k, :].reshape(S, J * K)).reshape(n, J, K) / S
    mi, err = _gains(P, q.mean(axis=1))
    return (mi, err) if both else mi


def _outcomes(K: int, m: int) -> np.ndarray:
    """All ``K^m`` outcome tuples of ``m`` ratings, shape (K^m, m)."""
    if m == 0:
        return np.zeros((1, 0), dtype=np.int64)
    grids = np.meshgrid(*([np.arange(K)] * m), indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1)


def conditional_gains(
    q: np.ndarray,
    theta_pending: np.ndarray,
    theta_cand: np.ndarray,
    max_outcomes: int,
    rng: np.random.Generator,
    both: bool = False,
):
    """``I(z; y_c | y_A)`` for one item, each candidate rater ``c``, given planned raters ``A``.

    Parameters
    ----------
    q : array, shape (S, K)
        The item's per-draw class posteriors.
    theta_pending : array, shape (S, m, K, K)
        Error matrices of the ``m`` raters already planned for the item.
    theta_cand : array, shape (S, C, K, K)
        Error matrices of the candidate raters.
    max_outcomes : int
        Enumerate the ``K^m`` outcomes of the planned ratings up to this
        many; beyond, average over ``max_outcomes`` outcomes drawn from
        their predictive distribution (an unbiased Monte Carlo estimate).
    rng : numpy Generator
        For the Monte Carlo case.
    both : bool
        Also return the conditional expected reduction of the misclassification probability.

    Returns
    -------
    array, shape (C,)
        Conditional expected information gain in nats, clipped at 0 (and,
        with ``both``, the error reduction, shape (C,)).
    """
    S, K = q.shape
    m = theta_pending.shape[1]
    C = theta_cand.shape[1]
    with np.errstate(divide="ignore"):
        log_q = np.log(q)  # (S, K)
        log_tp = np.log(theta_pending)  # (S, m, K, K)
    if K**m <= max_outcomes:
        Y = _outcomes(K, m)  # (M, m)
        sampled = False
    else:
        # draw outcomes from the predictive: a draw s, a class z ~ q_s, each rating ~ theta_s[j, z]
        n = max_outcomes
        s_idx = rng.integers(0, S, size=n)
        cum = np.cumsum(q[s_idx], axis=1)
        z = np.minimum((rng.random(n)[:, None] > cum).sum(axis=1), K - 1)
        Y = np.empty((n, m), dtype=np.int64)
        for a in range(m):
            cum_a = np.cumsum(theta_pending[s_idx, a, z, :], axis=1)
            Y[:, a] = np.minimum((rng.random(n)[:, None] > cum_a).sum(axis=1), K - 1)
        sampled = True
    M = Y.shape[0]
    # log joint of (draw s, class k, outcome m): log q_s[k] + sum_a log theta_s[a, k, y_a(m)] - log S
    lj = np.broadcast_to(log_q[:, :, None] - np.log(S), (S, K, M)).copy()
    for a in range(m):
        lj += log_tp[:, a, :, :][:, :, Y[:, a]]  # (S, K, M)
    top = lj.max(axis=(0, 1))
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        log_pm = np.log(np.exp(lj - top).sum(axis=(0, 1))) + top  # (M,)
    with np.errstate(invalid="ignore"):
        omega = np.exp(lj - log_pm[None, None, :])  # posterior over (s, k) given outcome m
    omega = np.nan_to_num(omega)
    weight = np.full(M, 1.0 / M) if sampled else np.exp(log_pm)
    keep = weight > 0
    omega, weight = omega[:, :, keep], weight[keep]
    M = weight.size
    # P[m, k, c, l] = sum_s omega[s, k, m] theta_cand[s, c, k, l]
    P = np.empty((M, K, C, K))
    for k in range(K):
        P[:, k] = (omega[:, k, :].T @ theta_cand[:, :, k, :].reshape(S, C * K)).reshape(M, C, K)
    post_z = omega.sum(axis=0).T  # (M, K): P(z | y_A = m)
    mi, err = _gains(P, post_z)  # (M, C) each
    mi, err = np.maximum(weight @ mi, 0.0), np.maximum(weight @ err, 0.0)
    return (mi, err) if both else mi
