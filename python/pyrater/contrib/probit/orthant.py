"""Multivariate normal orthant probabilities for binary label patterns.

Under the probit Dawid-Skene model an item of true class ``k`` has latent
scores ``y* ~ N(mu_k, R_k)`` and annotator ``j`` says ``y_j = 1[y*_j > 0]``.
Writing ``e = y* - mu_k ~ N(0, R)`` and ``s_j = 2 y_j - 1``, the event
``y_j = 1`` is ``e_j > -mu_j`` and ``y_j = 0`` is ``e_j <= -mu_j``, i.e.
``s_j e_j < s_j mu_j`` in both cases.  Hence, over the set ``S`` of annotators
who labelled the item (missing labels are marginalised by dropping them),

    P(y_S | z = k) = Phi_d(b; D R_SS D),   b = s_S * mu_S,  D = diag(s_S),

the ``d = |S|``-variate standard normal CDF with correlation ``D R_SS D``
evaluated at the upper limits ``b``.

Three cases are computed:

* ``R = I`` (the independence / naive-Bayes Dawid-Skene model): the
  probability factorises, ``log P = sum_j log Phi(s_j mu_j)`` -- computed
  exactly with :func:`scipy.special.log_ndtr`, no integration;
* ``d <= 2``: ``P = 1``, ``Phi(b)`` or the bivariate CDF (:func:`bvn_cdf`),
  exactly;
* otherwise Genz's separation-of-variables algorithm (Genz 1992), with the
  variables ordered by increasing limit and randomised quasi-Monte Carlo on a
  scrambled Sobol sequence (:class:`scipy.stats.qmc.Sobol`).  Everything is
  vectorised over patterns and QMC points and accumulated in log space.

``method="scipy"`` calls :func:`scipy.stats.multivariate_normal.cdf` (Genz's
own randomised lattice QMC) pattern by pattern instead; it is slower and is
kept as an independent cross-check.

Label patterns are ``int8`` arrays with ``1``, ``0`` and ``-1`` for missing.

References
----------
Genz, A. (1992). Numerical computation of multivariate normal probabilities.
*Journal of Computational and Graphical Statistics* 1, 141-149.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.special import log_ndtr, logsumexp, ndtr, ndtri
from scipy.stats import multivariate_normal, qmc

__all__ = [
    "encode_patterns",
    "sobol_points",
    "orthant_log_prob",
    "bvn_cdf",
]

MISSING = -1


def encode_patterns(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct label patterns of an ``(n, J)`` array of ``{1, 0, -1}`` codes.

    Rows are encoded as base-3 integers (``-1, 0, 1 -> 0, 1, 2``) and grouped
    with :func:`numpy.unique`, so the cost of everything downstream scales
    with the number of distinct patterns, not items.

    Parameters
    ----------
    labels : int array, shape (n, J)

    Returns
    -------
    patterns : int8 array, shape (P, J)
        The distinct rows.
    inverse : int array, shape (n,)
        ``labels[i] == patterns[inverse[i]]``.
    counts : int array, shape (P,)
        Number of rows showing each pattern.
    """
    labels = np.asarray(labels)
    if labels.ndim != 2:
        raise ValueError(f"labels must be 2-D (items, annotators); got shape {labels.shape}")
    n, J = labels.shape
    if J <= 39:  # 3**39 < 2**63
        powers = 3 ** np.arange(J, dtype=np.int64)
        codes = (labels.astype(np.int64) + 1) @ powers
        uniq, first, inverse, counts = np.unique(codes, return_index=True, return_inverse=True, return_counts=True)
        patterns = labels[first]
    else:
        patterns, inverse, counts = np.unique(labels, axis=0, return_inverse=True, return_counts=True)
    return patterns.astype(np.int8), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


def sobol_points(n: int, dim: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """Scrambled Sobol points in ``(0, 1)^dim``, shape (n, dim).

    ``n`` is rounded up to a power of two (Sobol balance properties).  A
    ``dim`` of 0 gives an array of shape (n, 0).
    """
    m = max(0, int(np.ceil(np.log2(max(int(n), 1)))))
    if dim <= 0:
        return np.zeros((2**m, 0))
    rng = np.random.default_rng(rng)
    try:
        engine = qmc.Sobol(d=dim, scramble=True, rng=rng)
    except TypeError:  # scipy < 1.15 names the argument ``seed``
        engine = qmc.Sobol(d=dim, scramble=True, seed=rng)
    pts = engine.random_base2(m)
    # keep strictly inside (0, 1) so ndtri stays finite
    return np.clip(pts, 1e-15, 1 - 1e-15)


def _is_identity(R: np.ndarray) -> bool:
    return bool(np.array_equal(R, np.eye(R.shape[0])))


def _genz_log_prob(b: np.ndarray, C: np.ndarray, w: np.ndarray, d_max: int | None = None) -> np.ndarray:
    """Log Phi_d(b; C) for a stack of problems by Genz's algorithm.

    Limits may be ``+inf`` (variables integrated out); sorted last, they
    contribute factors of exactly one, so only the first ``d_max`` (the
    largest number of finite limits) variables are processed.

    Parameters
    ----------
    b : array, shape (P, d)
        Upper limits.
    C : array, shape (P, d, d)
        Correlation matrices.
    w : array, shape (N, >= d-1)
        QMC points in (0, 1).
    d_max : int, optional
        Largest number of finite limits in a row (default d).

    Returns
    -------
    array, shape (P,)
    """
    P, d = b.shape
    # most restrictive variable first (smallest limit): better conditioning
    order = np.argsort(b, axis=1, kind="stable")
    b = np.take_along_axis(b, order, axis=1)
    C = np.take_along_axis(np.take_along_axis(C, order[:, :, None], axis=1), order[:, None, :], axis=2)
    L = np.linalg.cholesky(C)  # (P, d, d)
    d = d if d_max is None else int(d_max)
    N = w.shape[0]
    y: list[np.ndarray] = []
    # first variable: no dependence on the points
    t0 = b[:, 0] / L[:, 0, 0]
    e0 = ndtr(t0)
    logf = np.broadcast_to(log_ndtr(t0)[:, None], (P, N)).copy()
    y.append(ndtri(np.maximum(w[None, :, 0] * e0[:, None], 1e-300)))
    for i in range(1, d):
        shift = L[:, i, 0, None] * y[0]
        for j in range(1, i):
            shift += L[:, i, j, None] * y[j]
        t = (b[:, i, None] - shift) / L[:, i, i, None]
        e = ndtr(t)
        with np.errstate(divide="ignore"):
            le = np.log(e)
        tiny = e < 1e-300  # deep lower tail: log_ndtr keeps full precision
        if tiny.any():
            le[tiny] = log_ndtr(t[tiny])
        logf += le
        if i < d - 1:
            y.append(ndtri(np.maximum(w[None, :, i] * e, 1e-300)))
    return logsumexp(logf, axis=1) - np.log(N)


def orthant_log_prob(
    patterns: np.ndarray,
    mu: np.ndarray,
    R: np.ndarray,
    *,
    points: np.ndarray | None = None,
    n_qmc: int = 2048,
    rng: np.random.Generator | int | None = None,
    method: Literal["sobol", "scipy"] = "sobol",
    chunk_elements: int = 2**15,
) -> np.ndarray:
    """``log P(y = pattern | z = k)`` for every pattern, given ``mu_k`` and ``R_k``.

    Parameters
    ----------
    patterns : int array, shape (P, J)
        Labels ``1``/``0``, ``-1`` for missing (marginalised out).
    mu : array, shape (J,)
        Probit means, ``mu[j] = Phi^-1(P(y_j = 1 | z = k))``.
    R : array, shape (J, J)
        Latent correlation matrix (unit diagonal, positive definite).
    points : array, shape (N, >= J-1), optional
        QMC points in (0, 1) to reuse (common random numbers across calls);
        by default ``n_qmc`` scrambled Sobol points are drawn from ``rng``.
    n_qmc : int
        Number of QMC points when ``points`` is not given (a power of two).
    rng : numpy Generator or seed, optional
        Scrambling of the Sobol sequence.
    method : {"sobol", "scipy"}
        Genz separation of variables on Sobol points (vectorised, default) or
        :func:`scipy.stats.multivariate_normal.cdf` per pattern.
    chunk_elements : int
        Patterns are integrated in chunks of about this many
        (pattern, point) pairs.

    Returns
    -------
    array, shape (P,)
        Log probabilities.  Exact when ``R`` is the identity (product of
        univariate CDFs) or at most two labels are present (univariate or
        bivariate CDF, :func:`bvn_cdf`); QMC estimates otherwise.
    """
    patterns = np.asarray(patterns)
    mu = np.asarray(mu, dtype=float)
    R = np.asarray(R, dtype=float)
    if patterns.ndim != 2 or patterns.shape[1] != mu.shape[0] or R.shape != (mu.shape[0], mu.shape[0]):
        raise ValueError(
            f"shapes do not match: patterns {patterns.shape}, mu {mu.shape}, R {R.shape}; expected (P, J), (J,), (J, J)"
        )
    if method not in ("sobol", "scipy"):
        raise ValueError(f"method must be 'sobol' or 'scipy', got {method!r}")
    P, J = patterns.shape
    present = patterns != MISSING
    signs = np.where(patterns == 1, 1.0, -1.0)
    b_full = signs * mu[None, :]
    out = np.zeros(P)
    if _is_identity(R):
        # exact: product of univariate probabilities Phi(s_j mu_j)
        return np.where(present, log_ndtr(b_full), 0.0).sum(axis=1)
    n_present = present.sum(axis=1)
    low = n_present <= 1
    if low.any():
        out[low] = np.where(present[low], log_ndtr(b_full[low]), 0.0).sum(axis=1)
    rest = np.flatnonzero(~low)
    if rest.size == 0:
        return out
    if method == "sobol":
        if points is None:
            points = sobol_points(n_qmc, max(J - 1, 1), rng)
        # Two labels: the bivariate normal CDF, exactly (no QMC).
        two = rest[n_present[rest] == 2]
        if two.size:
            idx = np.argsort(~present[two], axis=1, kind="stable")[:, :2]  # the two present annotators
            bb = np.take_along_axis(b_full[two], idx, axis=1)
            ss = np.take_along_axis(signs[two], idx, axis=1)
            rho = R[idx[:, 0], idx[:, 1]] * ss[:, 0] * ss[:, 1]
            out[two] = np.log(np.maximum(bvn_cdf(bb[:, 0], bb[:, 1], rho), 1e-300))
        # Three or more: Genz, in chunks of patterns with similar numbers of
        # labels (small arrays stay in cache).  A missing annotator gets the
        # upper limit +inf, which integrates it out exactly (its factor is
        # Phi(inf) = 1), so every missingness pattern shares one code path.
        many = rest[n_present[rest] > 2]
        many = many[np.argsort(n_present[many], kind="stable")]
        step = max(1, chunk_elements // points.shape[0])
        for start in range(0, many.size, step):
            rows = many[start : start + step]
            b = np.where(present[rows], b_full[rows], np.inf)
            s = np.where(present[rows], signs[rows], 1.0)
            C = R[None, :, :] * s[:, :, None] * s[:, None, :]
            out[rows] = _genz_log_prob(b, C, points, n_present[rows].max())
        return out
    masks, inv = np.unique(present[rest], axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    for m, mask in enumerate(masks):
        rows = rest[inv == m]
        idx = np.flatnonzero(mask)
        b = b_full[np.ix_(rows, idx)]
        s = signs[np.ix_(rows, idx)]
        C = R[np.ix_(idx, idx)][None, :, :] * s[:, :, None] * s[:, None, :]
        for r, bb, cc in zip(rows, b, C):
            out[r] = np.log(multivariate_normal(mean=np.zeros(idx.size), cov=cc).cdf(bb))
    return out


# 40-point Gauss-Legendre rule on [0, 1] for the bivariate normal integral
_GL_X, _GL_W = np.polynomial.legendre.leggauss(40)
_GL_X = 0.5 * (_GL_X + 1.0)
_GL_W = 0.5 * _GL_W


def bvn_cdf(h: np.ndarray, k: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """Bivariate standard normal CDF ``P(X < h, Y < k)`` with correlation ``rho``.

    Uses Sheppard's / Drezner's formula with the substitution ``r = sin(t)``:

        Phi_2(h, k; rho) = Phi(h) Phi(k)
            + 1/(2 pi) int_0^{asin rho} exp(-(h^2 - 2 h k sin t + k^2) / (2 cos^2 t)) dt,

    integrated with a 40-point Gauss-Legendre rule.  The integrand is smooth
    and bounded for ``|rho| < 1``, giving about 1e-12 accuracy for
    ``|rho| <= 0.999``; the function is smooth in ``rho``, as maximum
    likelihood needs.  Broadcasts over its arguments.
    """
    h, k, rho = np.broadcast_arrays(np.asarray(h, float), np.asarray(k, float), np.asarray(rho, float))
    a = np.arcsin(np.clip(rho, -1.0, 1.0))
    t = a[..., None] * _GL_X  # (..., 40)
    st, ct2 = np.sin(t), np.cos(t) ** 2
    hh, kk = h[..., None], k[..., None]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        integrand = np.exp(-(hh * hh - 2 * hh * kk * st + kk * kk) / (2 * ct2))
    integrand = np.nan_to_num(integrand, nan=0.0)
    integral = a * (integrand @ _GL_W)
    return ndtr(h) * ndtr(k) + integral / (2 * np.pi)
