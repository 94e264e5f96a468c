"""The pooled model's hyperparameter M-step: the mode of ``(m[k], s[k])`` given the raters' rows.

For row k, with ``T[l] = sum_j log theta[j, k, l]``, the conditional log density
(no Jacobian: the mode on the parameters' own scale, as Stan's optimiser)

``f = J lgamma(K + s) - J sum_l lgamma(1 + s m_l) + s sum_l m_l T_l
+ sum_l (beta_l - 1) log m_l + (a - 1) log s - b s``

is maximised over ``x = (log s, eta_1 .. eta_{K-1})`` (additive log-ratios of
``m``, ``eta_K = 0``) by Newton's method: the Hessian from differences of the
analytic gradient, its eigenvalues made negative (an ascent direction always),
and a backtracking line search that only accepts increases.  Compiled with
numba: the step costs microseconds, whatever the data size.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["pooled_hyper_mode_rows"]


@numba.njit(cache=True, nogil=True)
def _digamma(x):  # pragma: no cover - compiled
    """psi(x) for x > 0: recurrence up to 6, then the asymptotic series (error < 1e-12)."""
    r = 0.0
    while x < 6.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + math.log(x) - 0.5 / x - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))))


@numba.njit(cache=True, nogil=True)
def _f_grad(x, J, K, T, bm, a, b, g):  # pragma: no cover - compiled
    """The conditional log density f at x and its gradient (written into g, length K)."""
    eta = np.zeros(K)
    for l in range(K - 1):
        eta[l] = x[1 + l]
    mx = eta[0]
    for l in range(1, K):
        mx = max(mx, eta[l])
    tot = 0.0
    for l in range(K):
        tot += math.exp(eta[l] - mx)
    lse = mx + math.log(tot)
    sv = math.exp(x[0])
    f = J * math.lgamma(K + sv) + (a - 1.0) * x[0] - b * sv
    # d f / d log s, and h[l] = m_l d f / d m_l: written without dividing by s or m (either may underflow)
    g0 = sv * (J * _digamma(K + sv) - b) + (a - 1.0)
    mk = np.empty(K)
    h = np.empty(K)
    hs = 0.0
    for l in range(K):
        lm = eta[l] - lse
        mk[l] = math.exp(lm)
        al = 1.0 + sv * mk[l]
        dg = _digamma(al)
        f += -J * math.lgamma(al) + sv * mk[l] * T[l] + (bm[l] - 1.0) * lm
        g0 += sv * mk[l] * (T[l] - J * dg)
        h[l] = sv * mk[l] * (T[l] - J * dg) + (bm[l] - 1.0)
        hs += h[l]
    g[0] = g0
    for l in range(K - 1):
        g[1 + l] = h[l] - mk[l] * hs
    return f


@numba.njit(cache=True, nogil=True)
def _newton(x, J, K, T, bm, a, b, max_iter):  # pragma: no cover - compiled
    g = np.empty(K)
    g2 = np.empty(K)
    H = np.empty((K, K))
    xt = np.empty(K)
    f = _f_grad(x, J, K, T, bm, a, b, g)
    for _ in range(max_iter):
        gmax = 0.0
        for i in range(K):
            gmax = max(gmax, abs(g[i]))
        if gmax < 1e-10:
            break
        for i in range(K):
            h = 1e-6 * max(1.0, abs(x[i]))
            for q in range(K):
                xt[q] = x[q]
            xt[i] += h
            _f_grad(xt, J, K, T, bm, a, b, g2)
            for q in range(K):
                H[q, i] = (g2[q] - g[q]) / h
        Hs = 0.5 * (H + H.T)
        w, V = np.linalg.eigh(Hs)
        d = np.zeros(K)
        for e in range(K):  # -H^-1 g with every curvature taken as negative: an ascent direction
            lam = max(abs(w[e]), 1e-8)
            c = 0.0
            for q in range(K):
                c += V[q, e] * g[q]
            for q in range(K):
                d[q] += V[q, e] * c / lam
        t = 1.0
        moved = False
        for _ls in range(60):
            for q in range(K):
                xt[q] = x[q] + t * d[q]
            ft = _f_grad(xt, J, K, T, bm, a, b, g2)
            if ft > f:
                moved = True
                break
            t *= 0.5
        if not moved:
            break
        for q in range(K):
            x[q] = xt[q]
            g[q] = g2[q]
        f = ft
    return f


@numba.njit(cache=True, nogil=True)
def pooled_hyper_mode_rows(theta, m, s, beta, a, b, max_iter):  # pragma: no cover - compiled
    """Update ``m`` (K, K) and ``s`` (K,) in place to the mode given ``theta`` (J, K, K), from their values.

    ``beta`` (K, K): Dirichlet prior on the rows of ``m`` (>= 1); ``a > 1``, ``b > 0``:
    Gamma prior on ``s``.  Each step raises the conditional density (never lowers it).
    """
    J, K = theta.shape[0], theta.shape[1]
    T = np.empty((K, K))  # T[k, l] = sum_j log theta[j, k, l]
    for k in range(K):
        for l in range(K):
            t = 0.0
            for j in range(J):
                t += math.log(max(theta[j, k, l], 1e-300))
            T[k, l] = t
    hyper_mode_from_sums(T, float(J), m, s, beta, a, b, max_iter)


@numba.njit(cache=True, nogil=True)
def hyper_mode_from_sums(T, n, m, s, beta, a, b, max_iter):  # pragma: no cover - compiled
    """:func:`pooled_hyper_mode_rows` from sums: ``T[k, l] = sum_j w_j log theta[j, k, l]``, ``n = sum_j w_j``.

    The community model's M-step for one community, whose raters enter with
    weights ``w_j`` (their responsibilities): ``n`` may be any float >= 0.
    Updates ``m`` (K, K) and ``s`` (K,) in place, never lowering the density.
    """
    K = m.shape[0]
    x = np.empty(K)
    for k in range(K):
        x[0] = math.log(max(s[k], 1e-300))
        ref = math.log(max(m[k, K - 1], 1e-300))
        for l in range(K - 1):
            x[1 + l] = math.log(max(m[k, l], 1e-300)) - ref
        _newton(x, n, K, T[k], beta[k], a, b, max_iter)
        mx = 0.0
        for l in range(K - 1):
            mx = max(mx, x[1 + l])
        tot = math.exp(-mx)
        for l in range(K - 1):
            tot += math.exp(x[1 + l] - mx)
        for l in range(K - 1):
            m[k, l] = math.exp(x[1 + l] - mx) / tot
        m[k, K - 1] = math.exp(-mx) / tot
        s[k] = math.exp(x[0])
