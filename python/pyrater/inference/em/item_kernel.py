"""Compiled passes over the cells for EM of the item-difficulty family (numba).

The same per-cell quantities as the numpy code of
:mod:`pyrater.inference.em.item_steps` (its reference), in one fused loop per
pass with no temporaries: the log probabilities of one class
(:func:`log_probs`), and the gradient and Hessian sums of the rater
(:func:`rater_sums`) and item (:func:`item_sums`) blocks of the M-step.  Cells
are ``(item, rater, rating)`` with the rating's category code; a cell is right
for class ``k`` when its rating is ``k``.  ``disc`` and ``guess`` are empty
arrays for a variant without discrimination or guessing.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["log_probs", "rater_sums", "item_sums", "newton_steps"]


@numba.njit(inline="always", cache=True)
def _log_expit(x):  # pragma: no cover - compiled
    if x >= 0:
        return -math.log1p(math.exp(-x))
    return x - math.log1p(math.exp(x))


@numba.njit(inline="always", cache=True)
def _expit(x):  # pragma: no cover - compiled
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@numba.njit(inline="always", cache=True)
def _cell_log_prob(eta, right, has_guess, g):  # pragma: no cover - compiled
    """``log P(right)`` or ``log P(wrong)``: one exp and one or two logs (no cancellation: ``P >= g``)."""
    if eta >= 0.0:
        e = math.exp(-eta)
        l1p = math.log1p(e)
        log_s, log_1ms = -l1p, -eta - l1p
    else:
        e = math.exp(eta)
        l1p = math.log1p(e)
        log_s, log_1ms = eta - l1p, -l1p
    if not has_guess:
        return log_s if right else log_1ms
    if not right:
        return math.log1p(-g) + log_1ms
    if g == 0.0:
        return log_s
    return math.log(g + (1.0 - g) * math.exp(log_s))


@numba.njit(inline="always", cache=True)
def _cell_derivs(eta, right, has_guess, g):  # pragma: no cover - compiled
    """d/d eta, d2/d eta2, d/d gamma, d2/d gamma2, d2/(d eta d gamma) of a cell's log probability."""
    s = _expit(eta)
    oms = 1.0 - s
    if not has_guess:
        return (oms if right else -s), -s * oms, 0.0, 0.0, 0.0
    if right:
        p = g + (1.0 - g) * s
        inv_p = 1.0 / (p if p > 1e-300 else 1e-300)
        qm = (1.0 - g) * s * inv_p * oms
        dg = oms * inv_p
        return qm, qm * ((1.0 - 2.0 * s) - qm), dg, -dg * dg, -s * oms * inv_p * inv_p
    dg = -1.0 / (1.0 - g)
    return -s, -s * oms, dg, -dg * dg, 0.0


@numba.njit(cache=True, nogil=True)
def log_probs(item, rater, rating, ability, difficulty, disc, guess, k, log_others, idx, out):  # pragma: no cover
    """``out[c] = log P(y_c | z = k)`` at the cells ``idx`` (every cell when ``idx`` is empty); ``out`` (len).

    ``ability`` (J,) is class ``k``'s; a wrong rating also has ``-log_others``
    (``log(K - 1)``: its share of the other categories; 0 at K = 2).
    """
    has_disc = disc.size > 0
    has_guess = guess.size > 0
    n = idx.size if idx.size > 0 else item.size
    for m in range(n):
        c = idx[m] if idx.size > 0 else m
        i = item[c]
        eta = ability[rater[c]] - difficulty[i]
        if has_disc:
            eta *= disc[i]
        right = rating[c] == k
        lp = _cell_log_prob(eta, right, has_guess, guess[i] if has_guess else 0.0)
        if not right and log_others != 0.0:
            lp -= log_others
        out[m] = lp


@numba.njit(cache=True, nogil=True)
def rater_sums(item, rater, rating, omega, ability, difficulty, disc, guess, k, G, H, F):  # pragma: no cover
    """Add each rater's gradient ``G``, Hessian ``H`` and curvature bound ``F`` (J,) of class ``k``'s term."""
    has_disc = disc.size > 0
    has_guess = guess.size > 0
    for c in range(item.size):
        w = omega[c]
        if w == 0.0:
            continue
        i = item[c]
        j = rater[c]
        d = disc[i] if has_disc else 1.0
        eta = d * (ability[j] - difficulty[i])
        right = rating[c] == k
        de, dee, _, _, _ = _cell_derivs(eta, right, has_guess, guess[i] if has_guess else 0.0)
        G[j] += w * de * d
        H[j] += w * dee * d * d
        F[j] += w * 0.25 * d * d


@numba.njit(cache=True, nogil=True)
def item_sums(item, rater, rating, omega, ability, difficulty, disc, guess, G, H):  # pragma: no cover
    """Add each item's gradient ``G`` (I, p) and upper Hessian ``H`` (I, p, p) in (difficulty, log disc., guessing).

    Every class's term: ``omega`` (K, nnz) the cells' class weights, ``ability``
    (K, J) the abilities each class reads; the lower triangle of ``H`` is left
    to the caller.
    """
    has_disc = disc.size > 0
    has_guess = guess.size > 0
    K = omega.shape[0]
    cu = 1
    cg = 2 if has_disc else 1
    for c in range(item.size):
        i = item[c]
        j = rater[c]
        d = disc[i] if has_disc else 1.0
        g = guess[i] if has_guess else 0.0
        y = rating[c]
        for k in range(K):
            w = omega[k, c]
            if w == 0.0:
                continue
            eta = d * (ability[k, j] - difficulty[i])
            right = y == k
            de, dee, dg, dgg, deg = _cell_derivs(eta, right, has_guess, g)
            m = -d  # d eta / d difficulty
            G[i, 0] += w * de * m
            H[i, 0, 0] += w * dee * m * m
            if has_disc:  # d eta / du = eta, d2 eta / du2 = eta, d2 eta / (d difficulty du) = -d
                G[i, cu] += w * de * eta
                H[i, cu, cu] += w * (dee * eta * eta + de * eta)
                H[i, 0, cu] += w * (dee * m * eta + de * m)
            if has_guess:
                G[i, cg] += w * dg
                H[i, cg, cg] += w * dgg
                H[i, 0, cg] += w * deg * m
                if has_disc:
                    H[i, cu, cg] += w * deg * eta


@numba.njit(inline="always", cache=True)
def _cholesky(A, L, p):  # pragma: no cover - compiled
    """Lower Cholesky factor of ``A`` (p, p) into ``L``; False when ``A`` is not positive definite."""
    for a in range(p):
        s = A[a, a]
        for c in range(a):
            s -= L[a, c] * L[a, c]
        if not s > 0.0:
            return False
        L[a, a] = math.sqrt(s)
        for b in range(a + 1, p):
            t = A[b, a]
            for c in range(a):
                t -= L[b, c] * L[a, c]
            L[b, a] = t / L[a, a]
    return True


@numba.njit(cache=True, nogil=True)
def newton_steps(H, G, out):  # pragma: no cover - compiled
    """``out[i]`` solves ``-H[i] d = G[i]`` (n, p): Newton where ``-H[i]`` is positive definite.

    Elsewhere ``-H[i] + lambda I`` with ``lambda`` making it diagonally
    dominant (so the step is an ascent direction); a unit with a non-finite
    entry gets no step.
    """
    n, p = G.shape
    A = np.empty((p, p))
    L = np.zeros((p, p))
    y = np.empty(p)
    for i in range(n):
        finite = True
        for a in range(p):
            finite = finite and math.isfinite(G[i, a])
            for b in range(p):
                A[a, b] = -H[i, a, b]
                finite = finite and math.isfinite(A[a, b])
        for a in range(p):
            out[i, a] = 0.0
        if not finite:
            continue
        if not _cholesky(A, L, p):
            lam = 0.0
            big = 0.0
            for a in range(p):
                off = 0.0
                for b in range(p):
                    big = max(big, abs(A[a, b]))
                    if b != a:
                        off += abs(A[a, b])
                lam = max(lam, off - A[a, a])
            lam += 1e-6 * (1.0 + big)
            for a in range(p):
                A[a, a] += lam
            if not _cholesky(A, L, p):
                continue
        for a in range(p):  # L y = G, then L^T d = y
            t = G[i, a]
            for c in range(a):
                t -= L[a, c] * y[c]
            y[a] = t / L[a, a]
        for a in range(p - 1, -1, -1):
            t = y[a]
            for c in range(a + 1, p):
                t -= L[c, a] * out[i, c]
            out[i, a] = t / L[a, a]
