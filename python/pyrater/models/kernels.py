"""The one numerical kernel of pyrater: log class posteriors per item.

Every method that needs ``P(z_i = k | ratings, pi, theta)`` (the EM E-step, the
Rao-Blackwellised class probabilities after MCMC, optimisation fits, posterior
prediction) calls the functions here.  They are free of pandas: the plug-in
functions are numpy/scipy; the functions over posterior draws
(:func:`draws_class_probabilities`, :func:`draws_log_lik`) run the compiled fused
pass of :mod:`pyrater.models._fused` (numba, loaded when first used) over chunks
of draws, in threads over the units, with bounded memory.

Draws of any model family
-------------------------
The draws-based functions take ``pi`` draws ``(S, K)`` and an *effective*
per-rater error matrix ``theta`` ``(S, J, K, K)`` (or ``(S, 1, K, K)``: one
matrix shared by all raters, as the homogeneous model).  Every family whose
ratings are independent given the true class and whose parameters determine
such a ``theta`` (Dawid-Skene, class-conditional, homogeneous, hierarchical,
and families such as MACE, one-coin, pooled or community models) reuses them
unchanged: it only has to hand over its ``pi`` and effective ``theta`` draws
(:meth:`pyrater.fits.DrawsFit._effective_draws`).

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

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from ..data.rows import unit_counts

__all__ = [
    "log_theta_matrix",
    "log_joint",
    "class_log_posterior",
    "rao_blackwell_class_probabilities",
    "draws_class_probabilities",
    "draws_log_lik",
    "soft_majority_vote",
    "DRAW_CHUNK_BYTES",
]

#: bytes of the padded log tables of one chunk of draws in the fused pass (J*K*8*8 bytes a draw)
DRAW_CHUNK_BYTES = 2 * 2**20
#: units per tile of the fused pass (their running sums stay in the L2 cache over a chunk of draws)
UNIT_TILE = 8192


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


def _n_threads(n_threads: int | None) -> int:
    return max(1, min(2, os.cpu_count() or 1)) if n_threads is None else max(1, int(n_threads))


class _Counts:
    """The CSR arrays of a count matrix as the compiled kernels take them."""

    def __init__(self, counts: sp.spmatrix, known: np.ndarray | None) -> None:
        counts = sp.csr_matrix(counts)
        self.shape = counts.shape
        self.indptr = np.ascontiguousarray(counts.indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(counts.indices)
        # empty when every stored count is 1: the compiled gather then skips the counts (its faster path)
        self.data = np.empty(0) if unit_counts(counts) else np.ascontiguousarray(counts.data, dtype=np.float64)
        self.known = np.empty(0, np.int64) if known is None else np.ascontiguousarray(np.asarray(known), dtype=np.int64)

    def ranges(self, lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
        """``[lo, hi)`` split into ``parts`` ranges of about equal stored counts."""
        if parts <= 1 or hi - lo < 2 * parts:
            return [(lo, hi)]
        cum = self.indptr[lo : hi + 1] - self.indptr[lo] + np.arange(hi - lo + 1)  # counts + a unit's own cost
        cuts = np.searchsorted(cum, np.linspace(0, cum[-1], parts + 1)[1:-1]) + lo
        edges = [lo, *sorted(set(int(c) for c in cuts)), hi]
        return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _as_draws(pi: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pi (S, K) and theta (S, Jt, K, K) (a homogeneous (S, K, K) becomes (S, 1, K, K))."""
    pi = np.asarray(pi, dtype=float)
    theta = np.asarray(theta, dtype=float)
    if theta.ndim == 3:
        theta = theta[:, None]
    if pi.ndim != 2 or theta.ndim != 4 or theta.shape[0] != pi.shape[0] or theta.shape[2:] != (pi.shape[1],) * 2:
        raise ValueError(
            f"pi must have shape (S, K) and theta (S, J, K, K) or (S, K, K); got {pi.shape} and {theta.shape}"
        )
    return pi, theta


def _fused_sweep(
    c: _Counts,
    pi: np.ndarray,
    theta: np.ndarray,
    lo: int,
    hi: int,
    acc: np.ndarray,
    ll: np.ndarray,
    n_threads: int,
    chunk_bytes: int,
    bar: Any = None,
) -> None:
    """Run the fused pass over units ``[lo, hi)`` for every draw, chunk by chunk of draws."""
    from . import _fused

    S, K = pi.shape
    if K > _fused.KP:
        raise ValueError(f"the compiled pass supports at most {_fused.KP} categories, got {K}")
    J = c.shape[1] // K
    n = max(1, min(S, int(chunk_bytes // max(1, J * K * _fused.KP * 8))))
    LT = np.empty((n, J * K, _fused.KP))
    LP = np.empty((n, _fused.KP))
    ranges = c.ranges(lo, hi, n_threads)

    def args(a: int, b: int, m: int, s0: int) -> tuple:
        return (c.indptr, c.indices, c.data, c.known, LT[:m], LP[:m], a, b, UNIT_TILE, acc, ll, lo, s0)

    _fused.compile_for(_fused.draws_pass, *args(lo, lo, n, 0))
    ex = ThreadPoolExecutor(len(ranges)) if len(ranges) > 1 else None
    try:
        for s0 in range(0, S, n):
            m = min(n, S - s0)
            _fused.log_tables(pi[s0 : s0 + m], theta[s0 : s0 + m], J, LT[:m], LP[:m])
            if ex is None:
                _fused.draws_pass(*args(lo, hi, m, s0))
            else:
                list(ex.map(lambda r, m=m, s0=s0: _fused.draws_pass(*args(r[0], r[1], m, s0)), ranges))
            if bar is not None:
                bar.update(m)
    finally:
        if ex is not None:
            ex.shutdown()


def _full_theta(theta: np.ndarray, counts: sp.spmatrix, K: int) -> np.ndarray:
    """Theta draws (n, J, K, K), a shared (n, 1, K, K) matrix broadcast over the J raters of ``counts``."""
    J = counts.shape[1] // K
    return np.broadcast_to(theta, (theta.shape[0], J, K, K)) if theta.shape[1] == 1 else theta


def draws_class_probabilities(
    counts: sp.spmatrix,
    pi: np.ndarray,
    theta: np.ndarray,
    known: np.ndarray | None = None,
    *,
    n_threads: int | None = None,
    chunk_bytes: int = DRAW_CHUNK_BYTES,
    progress: bool = False,
) -> np.ndarray:
    """Rao-Blackwellised class probabilities: the mean over draws of ``P(z_i = k | y_i, pi_s, theta_s)``.

    The compiled fused pass (:func:`pyrater.models._fused.draws_pass`): one pass
    over the stored counts per draw, no per-draw temporaries; memory is the
    output, its padded running sum ``(I, 8)`` and the log tables of one chunk
    of draws (``chunk_bytes``).  Equal to :func:`rao_blackwell_class_probabilities`
    to rounding.

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
    pi : array, shape (S, K)
        Draws of pi (probabilities, not logs).
    theta : array, shape (S, J, K, K), (S, 1, K, K) or (S, K, K)
        Draws of the (effective) error matrices; a single matrix is shared by all raters.
    known : int array, shape (I,), optional
        Known class per unit (-1 unknown): a point mass.
    n_threads : int, optional
        Threads over the units (default: the cores, at most 2).
    chunk_bytes : int
        Bytes of log tables per chunk of draws.
    progress : bool
        A progress bar over the draws (shown after 2 s).

    Returns
    -------
    array, shape (I, K)
    """
    from .._quiet import progress_bar
    from . import _fused

    pi, theta = _as_draws(pi, theta)
    S, K = pi.shape
    if K > _fused.KP:  # the compiled pass has eight lanes: the scipy route, a block of draws at a time
        with np.errstate(divide="ignore"):
            return (
                sum(
                    rao_blackwell_class_probabilities(
                        counts, np.log(pi[a : a + 64]), np.log(_full_theta(theta[a : a + 64], counts, K)), known
                    )
                    * (min(S, a + 64) - a)
                    for a in range(0, S, 64)
                )
                / S
            )
    c = _Counts(counts, known)
    I = c.shape[0]
    acc = np.zeros((I, _fused.KP))
    with progress_bar(progress, S, "class probabilities", unit="draw") as bar:
        _fused_sweep(c, pi, theta, 0, I, acc, np.empty((0, 0)), _n_threads(n_threads), chunk_bytes, bar)
    out = acc[:, :K] / S
    return out


def draws_log_lik(
    counts: sp.spmatrix,
    pi: np.ndarray,
    theta: np.ndarray,
    known: np.ndarray | None = None,
    units: tuple[int, int] | None = None,
    *,
    out: np.ndarray | None = None,
    n_threads: int | None = None,
    chunk_bytes: int = DRAW_CHUNK_BYTES,
    progress: Any = None,
) -> np.ndarray:
    """Per-unit log-likelihood ``log p(y_i | pi_s, theta_s)`` of every draw, units as rows.

    The marginal over the true class by log-sum-exp (``log p(y_i, z_i)`` for a
    unit whose class is known, as the Stan programs and the Gibbs sampler write
    ``log_lik``), computed by the compiled fused pass.

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
    pi : array, shape (S, K)
    theta : array, shape (S, J, K, K), (S, 1, K, K) or (S, K, K)
    known : int array, shape (I,), optional
    units : (lo, hi), optional
        Only units ``lo .. hi - 1`` (default: all).
    out : float64 array, shape (hi - lo, S), optional
        Written in place and returned.
    n_threads, chunk_bytes
        As :func:`draws_class_probabilities`.
    progress : tqdm bar, optional
        Updated by the number of draws as each chunk of draws is done.

    Returns
    -------
    array, shape (hi - lo, S)
        Units as rows (each row one unit's draws, as LOO reads them).
    """
    from . import _fused

    pi, theta = _as_draws(pi, theta)
    S, K = pi.shape
    c = _Counts(counts, known)
    lo, hi = (0, c.shape[0]) if units is None else (int(units[0]), int(units[1]))
    if out is None:
        out = np.empty((hi - lo, S))
    if out.shape != (hi - lo, S) or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous float64 array of shape {(hi - lo, S)}, got {out.shape}")
    if K > _fused.KP and hi > lo:  # eight lanes in the compiled pass: the scipy route, one draw at a time
        rows = sp.csr_matrix(counts)[lo:hi]
        sub_known = None if known is None else np.asarray(known)[lo:hi]
        with np.errstate(divide="ignore"):
            for s in range(S):
                th = _full_theta(theta[s : s + 1], counts, K)[0]
                out[:, s] = class_log_posterior(rows, np.log(pi[s]), np.log(th), sub_known)[1]
                if progress is not None:
                    progress.update(1)
        return out
    if hi > lo:
        _fused_sweep(c, pi, theta, lo, hi, np.empty((0, 0)), out, _n_threads(n_threads), chunk_bytes, progress)
    return out


def category_votes(counts: sp.spmatrix, n_categories: int) -> np.ndarray:
    """Ratings of each category per unit, whoever gave them: ``(I, K)`` floats.

    ``V[i, l] = sum_j C[i, j*K + l]``, one sparse-dense product with the
    ``(J*K, K)`` indicator of each column's rating.
    """
    K = int(n_categories)
    sel = np.tile(np.eye(K), (counts.shape[1] // K, 1))
    return np.asarray(counts @ sel, dtype=float)


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
    votes = category_votes(counts, K)
    total = votes.sum(axis=1)
    empty = total <= 0
    votes[empty] = 1.0
    total[empty] = K
    votes /= total[:, None]
    return votes
