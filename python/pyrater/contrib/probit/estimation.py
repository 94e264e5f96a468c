"""Estimation of the probit Dawid-Skene parameters from a gold-labelled validation set.

For each true class ``k`` in ``{0, 1}`` the model has

* confusion rates ``r_kj = P(y_j = 1 | z = k)`` and probit means
  ``mu_kj = Phi^-1(r_kj)``;
* a latent correlation matrix ``R_k`` (J x J, unit diagonal).

Rates
-----
With ``n1_kj`` ones among ``n_kj`` labels given by annotator ``j`` to
validation items of gold class ``k``, and pseudo-count ``a`` (default 0.5,
the add-one-half / Jeffreys rule),

    r_kj = (n1_kj + a) / (n_kj + 2 a),

so rates of 0 or 1 still give finite probits.

Correlations (``correlation=``)
-------------------------------
``"tetrachoric"`` (default, consistent)
    For each pair ``(j, l)`` and class, the 2 x 2 table of the items both
    labelled is fitted by maximum likelihood over ``rho`` with the thresholds
    held at ``mu_kj, mu_kl`` (two-step tetrachoric estimator):
    ``P(1, 1) = Phi_2(mu_j, mu_l; rho)``, ``P(1, 0) = Phi(mu_j) - P(1, 1)``,
    ``P(0, 1) = Phi(mu_l) - P(1, 1)``, ``P(0, 0) = 1 - Phi(mu_j) - Phi(mu_l) + P(1, 1)``.
    The log-likelihood is concave in ``P(1, 1)``, which increases with
    ``rho``, so it is unimodal in ``rho``; the root of the score is found by
    bisection on ``[-rho_max, rho_max]``, vectorised over pairs and bootstrap
    replicates.  The matrix of pairwise estimates is projected to the
    nearest correlation matrix with eigenvalues ``>= eig_floor`` (Higham
    2002, only when it is not already positive definite) and shrunk towards
    the identity: ``R = (1 - lambda) R + lambda I``.
``"signed_probit"`` (the original specification; not consistent)
    Scores ``a_ij = sign(y_ij - 0.5) * mu_kj`` for the labels of class-``k``
    items; ``C`` is their empirical covariance (pairwise-complete items,
    divisor ``n - 1``), and ``R = D^-1/2 (C + lambda I) D^-1/2`` with
    ``D = diag(C + lambda I)``, projected like above when not positive
    definite.  The scores are two-valued, so ``C`` is not the latent
    covariance: its diagonal is ``4 r (1 - r) mu^2`` (0.3-0.6 for typical
    rates), its off-diagonals are attenuated and carry the sign of
    ``mu_j mu_l``, so the sign flips for annotators on opposite sides of 0.5.
``"independent"``
    ``R = I``: the naive-Bayes (classic) Dawid-Skene model.

All estimators are functions of the per-class pattern counts, so a
bootstrap replicate (a multinomial resample of the validation items within
each gold class) is a weight vector over the distinct patterns, and all
replicates are estimated at once.

References
----------
Higham, N. J. (2002). Computing the nearest correlation matrix -- a problem
from finance.  *IMA Journal of Numerical Analysis* 22, 329-343.
Olsson, U. (1979). Maximum likelihood estimation of the polychoric
correlation coefficient.  *Psychometrika* 44, 443-460.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from ._data import read_validation
from .orthant import MISSING, bvn_cdf, encode_patterns

__all__ = [
    "CorrelationMethod",
    "CORRELATION_METHODS",
    "confusion_rates",
    "tetrachoric",
    "signed_probit_correlation",
    "nearest_correlation",
    "signed_probit_covariance",
    "ProbitParameters",
    "estimate_parameters",
    "estimate_batch",
    "validation_patterns",
]

CorrelationMethod = Literal["tetrachoric", "signed_probit", "independent"]
CORRELATION_METHODS: tuple[str, ...] = ("tetrachoric", "signed_probit", "independent")


# --------------------------------------------------------------- statistics
def _pair_index(J: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(J, 1)


def _pattern_statistics(patterns: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Label tallies from pattern weights.

    Parameters
    ----------
    patterns : int8 array, shape (P, J), ``-1`` missing
    weights : array, shape (B, P)
        Number of items showing each pattern, per replicate.

    Returns
    -------
    dict with ``n1``, ``nobs`` (B, J) and the pair tables ``n11``, ``n10``,
    ``n01``, ``n00`` (B, J(J-1)/2), pairs in ``np.triu_indices(J, 1)`` order.
    """
    weights = np.asarray(weights, dtype=float)
    one = (patterns == 1).astype(float)
    zero = (patterns == 0).astype(float)
    iu, ju = _pair_index(patterns.shape[1])
    return {
        "n1": weights @ one,
        "nobs": weights @ (one + zero),
        "n11": weights @ (one[:, iu] * one[:, ju]),
        "n10": weights @ (one[:, iu] * zero[:, ju]),
        "n01": weights @ (zero[:, iu] * one[:, ju]),
        "n00": weights @ (zero[:, iu] * zero[:, ju]),
    }


def confusion_rates(n1: np.ndarray, nobs: np.ndarray, pseudo_count: float = 0.5) -> np.ndarray:
    """Smoothed rates ``(n1 + a) / (nobs + 2 a)``; any shape."""
    return (np.asarray(n1, float) + pseudo_count) / (np.asarray(nobs, float) + 2 * pseudo_count)


def tetrachoric(
    mu_j: np.ndarray,
    mu_l: np.ndarray,
    n11: np.ndarray,
    n10: np.ndarray,
    n01: np.ndarray,
    n00: np.ndarray,
    rho_max: float = 0.999,
    n_iter: int = 45,
) -> np.ndarray:
    """Two-step maximum-likelihood tetrachoric correlations, vectorised.

    Maximises ``sum_ab n_ab log P_ab(rho)`` over ``rho`` in
    ``[-rho_max, rho_max]`` with the thresholds fixed at ``mu_j, mu_l``
    (``P(y_j = 1) = Phi(mu_j)``).  The score has the sign of
    ``n11/P11 - n10/P10 - n01/P01 + n00/P00``, which decreases in ``rho``;
    its root is found by bisection (``n_iter`` halvings: precision
    ``2 rho_max / 2**n_iter``).  Tables with no items give 0.

    Parameters
    ----------
    mu_j, mu_l, n11, n10, n01, n00 : arrays of a common (broadcast) shape

    Returns
    -------
    array of that shape
    """
    mu_j, mu_l, n11, n10, n01, n00 = np.broadcast_arrays(
        *(np.asarray(a, dtype=float) for a in (mu_j, mu_l, n11, n10, n01, n00))
    )
    pj, pl = ndtr(mu_j), ndtr(mu_l)

    def score_sign(rho: np.ndarray) -> np.ndarray:
        p11 = bvn_cdf(mu_j, mu_l, rho)
        tiny = 1e-300
        p10 = np.maximum(pj - p11, tiny)
        p01 = np.maximum(pl - p11, tiny)
        p00 = np.maximum(1.0 - pj - pl + p11, tiny)
        p11 = np.maximum(p11, tiny)
        return n11 / p11 - n10 / p10 - n01 / p01 + n00 / p00

    lo = np.full(mu_j.shape, -rho_max)
    hi = np.full(mu_j.shape, rho_max)
    up = score_sign(hi) >= 0
    down = score_sign(lo) <= 0
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        pos = score_sign(mid) > 0
        lo = np.where(pos, mid, lo)
        hi = np.where(pos, hi, mid)
    rho = 0.5 * (lo + hi)
    rho = np.where(up, rho_max, np.where(down, -rho_max, rho))
    empty = (n11 + n10 + n01 + n00) == 0
    return np.where(empty, 0.0, rho)


def signed_probit_covariance(patterns: np.ndarray, weights: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Empirical covariance of the scores ``sign(y - 0.5) * mu`` (pairwise complete).

    Parameters
    ----------
    patterns : int8 array, shape (P, J)
    weights : array, shape (B, P)
    mu : array, shape (B, J)

    Returns
    -------
    array, shape (B, J, J); divisor ``n - 1`` (``n`` items labelled by both).
    """
    weights = np.asarray(weights, dtype=float)
    present = (patterns != MISSING).astype(float)
    s = np.where(patterns == 1, 1.0, np.where(patterns == 0, -1.0, 0.0))
    # n[b, j, l]: items labelled by both j and l; sj[b, j, l]: sum of s_j over them
    n = np.einsum("bp,pj,pl->bjl", weights, present, present)
    sj = np.einsum("bp,pj,pl->bjl", weights, s, present)
    sjl = np.einsum("bp,pj,pl->bjl", weights, s, s)
    with np.errstate(invalid="ignore", divide="ignore"):
        cov_s = (sjl - sj * sj.transpose(0, 2, 1) / n) / (n - 1)
    cov_s = np.where(n > 1, cov_s, 0.0)
    return cov_s * mu[:, :, None] * mu[:, None, :]


def signed_probit_correlation(
    patterns: np.ndarray, weights: np.ndarray, mu: np.ndarray, shrinkage: float, eig_floor: float = 1e-6
) -> np.ndarray:
    """``D^-1/2 (C + lambda I) D^-1/2`` of the signed probit scores, (B, J, J)."""
    C = signed_probit_covariance(patterns, weights, mu)
    J = C.shape[-1]
    C = C + shrinkage * np.eye(J)
    d = np.sqrt(np.clip(np.diagonal(C, axis1=1, axis2=2), 1e-300, None))
    R = C / d[:, :, None] / d[:, None, :]
    R[:, np.arange(J), np.arange(J)] = 1.0
    return nearest_correlation(R, eig_floor=eig_floor)


def nearest_correlation(A: np.ndarray, eig_floor: float = 1e-6, max_iter: int = 200, tol: float = 1e-10) -> np.ndarray:
    """Nearest correlation matrices with eigenvalues ``>= eig_floor`` (Higham 2002).

    Alternating projections with Dykstra's correction between the unit-
    diagonal matrices and the symmetric matrices with eigenvalues
    ``>= eig_floor``, in the Frobenius norm.  Matrices already positive
    definite (smallest eigenvalue ``>= eig_floor``) are returned unchanged.

    Parameters
    ----------
    A : array, shape (..., J, J), symmetric with unit diagonal

    Returns
    -------
    array of the same shape
    """
    A = np.array(A, dtype=float)
    shape = A.shape
    J = shape[-1]
    flat = A.reshape(-1, J, J)
    flat = 0.5 * (flat + flat.transpose(0, 2, 1))
    need = np.linalg.eigvalsh(flat)[:, 0] < eig_floor
    if need.any():
        Y = flat[need].copy()
        dS = np.zeros_like(Y)
        diag = np.arange(J)
        for _ in range(max_iter):
            Rk = Y - dS
            w, V = np.linalg.eigh(Rk)
            X = (V * np.maximum(w, eig_floor)[:, None, :]) @ V.transpose(0, 2, 1)
            dS = X - Rk
            Y_new = X.copy()
            Y_new[:, diag, diag] = 1.0
            done = np.max(np.abs(Y_new - Y)) < tol
            Y = Y_new
            if done:
                break
        # the last diagonal reset can push the smallest eigenvalue a hair
        # below the floor: clip once more and rescale to unit diagonal
        w, V = np.linalg.eigh(Y)
        X = (V * np.maximum(w, eig_floor)[:, None, :]) @ V.transpose(0, 2, 1)
        d = np.sqrt(np.diagonal(X, axis1=1, axis2=2))
        flat[need] = X / d[:, :, None] / d[:, None, :]
    flat[:, np.arange(J), np.arange(J)] = 1.0
    return flat.reshape(shape)


def _tetrachoric_matrix(
    stats: dict[str, np.ndarray], mu: np.ndarray, shrinkage: float, rho_max: float, eig_floor: float
) -> np.ndarray:
    B, J = mu.shape
    iu, ju = _pair_index(J)
    rho = tetrachoric(mu[:, iu], mu[:, ju], stats["n11"], stats["n10"], stats["n01"], stats["n00"], rho_max=rho_max)
    R = np.broadcast_to(np.eye(J), (B, J, J)).copy()
    R[:, iu, ju] = rho
    R[:, ju, iu] = rho
    R = nearest_correlation(R, eig_floor=eig_floor)
    return (1.0 - shrinkage) * R + shrinkage * np.eye(J)


def estimate_batch(
    patterns: Sequence[np.ndarray],
    weights: Sequence[np.ndarray],
    *,
    correlation: CorrelationMethod = "tetrachoric",
    pseudo_count: float = 0.5,
    shrinkage: float = 0.02,
    rho_max: float = 0.999,
    eig_floor: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rates, probit means and correlations for B weightings of the validation set.

    Parameters
    ----------
    patterns : [array (P_0, J), array (P_1, J)]
        Distinct validation label patterns of gold class 0 and 1.
    weights : [array (B, P_0), array (B, P_1)]
        Items per pattern in each replicate (the observed counts for the
        point estimate, multinomial resamples for the bootstrap).

    Returns
    -------
    rates : array, shape (B, 2, J)
        ``P(y_j = 1 | z = k)``.
    mu : array, shape (B, 2, J)
    R : array, shape (B, 2, J, J)
    """
    if correlation not in CORRELATION_METHODS:
        raise ValueError(f"correlation must be one of {CORRELATION_METHODS}, got {correlation!r}")
    rates, mus, Rs = [], [], []
    for pat, w in zip(patterns, weights):
        w = np.atleast_2d(np.asarray(w, dtype=float))
        stats = _pattern_statistics(pat, w)
        r = confusion_rates(stats["n1"], stats["nobs"], pseudo_count)
        mu = ndtri(r)
        B, J = mu.shape
        if correlation == "independent":
            R = np.broadcast_to(np.eye(J), (B, J, J)).copy()
        elif correlation == "tetrachoric":
            R = _tetrachoric_matrix(stats, mu, shrinkage, rho_max, eig_floor)
        else:
            R = signed_probit_correlation(pat, w, mu, shrinkage, eig_floor)
        rates.append(r)
        mus.append(mu)
        Rs.append(R)
    return np.stack(rates, axis=1), np.stack(mus, axis=1), np.stack(Rs, axis=1)


# ------------------------------------------------------------------ results
@dataclass(frozen=True, eq=False)
class ProbitParameters:
    """Point estimates of the probit Dawid-Skene parameters.

    Attributes
    ----------
    annotators : list
        Annotator labels (the validation table's columns), length J.
    rates : pandas.DataFrame
        ``P(y_j = 1 | z = k)``, annotators x class (columns 0, 1).  Column 0
        is the false-positive rate, column 1 the sensitivity.
    mu : array, shape (2, J)
        ``Phi^-1(rates)`` by class.
    R : array, shape (2, J, J)
        Latent correlation matrices by class.
    correlation_method : str
    n_items : pandas.Series
        Validation items per gold class.
    """

    annotators: list
    rates: pd.DataFrame
    mu: np.ndarray
    R: np.ndarray
    correlation_method: str
    n_items: pd.Series

    def __post_init__(self) -> None:
        for name in ("mu", "R"):
            arr = np.array(getattr(self, name), dtype=float)
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def correlation(self, k: int) -> pd.DataFrame:
        """Latent correlation matrix of class ``k`` (0 or 1) as a labelled DataFrame."""
        if k not in (0, 1):
            raise ValueError(f"class must be 0 or 1, got {k!r}")
        idx = pd.Index(self.annotators, name="annotator")
        return pd.DataFrame(self.R[k], index=idx, columns=idx.rename(None))

    def __repr__(self) -> str:
        return (
            f"ProbitParameters({len(self.annotators)} annotators, correlation={self.correlation_method!r}, "
            f"validation items per class {dict(self.n_items)})"
        )


def validation_patterns(labels: np.ndarray, gold: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Distinct patterns and their counts within each gold class."""
    pats, counts = [], []
    for k in (0, 1):
        p, _, c = encode_patterns(labels[gold == k])
        pats.append(p)
        counts.append(c)
    return pats, counts


def estimate_parameters(
    validation: pd.DataFrame,
    *,
    annotators: Sequence[Hashable] | None = None,
    gold: Hashable = "gold",
    correlation: CorrelationMethod = "tetrachoric",
    pseudo_count: float = 0.5,
    shrinkage: float = 0.02,
    rho_max: float = 0.999,
) -> ProbitParameters:
    """Estimate rates and latent correlations from a validation table.

    Parameters
    ----------
    validation : pandas.DataFrame
        One column per annotator (0/1, NaN = missing) and a gold column.
    annotators : sequence, optional
        Annotator columns; default every column except ``gold``.
    gold : column label
    correlation : {"tetrachoric", "signed_probit", "independent"}
    pseudo_count : float
        ``a`` in ``(n1 + a) / (n + 2 a)``.
    shrinkage : float in [0, 1]
        ``lambda``: weight of the identity (tetrachoric) or ridge added to the
        score covariance (signed probit).
    rho_max : float
        Bound on tetrachoric correlations.

    Returns
    -------
    ProbitParameters
    """
    v = read_validation(validation, annotators, gold)
    pats, counts = validation_patterns(v.labels, v.gold)
    rates, mu, R = estimate_batch(
        pats,
        [c[None, :] for c in counts],
        correlation=correlation,
        pseudo_count=pseudo_count,
        shrinkage=shrinkage,
        rho_max=rho_max,
    )
    idx = pd.Index(v.annotators, name="annotator")
    return ProbitParameters(
        annotators=list(v.annotators),
        rates=pd.DataFrame(rates[0].T, index=idx, columns=pd.Index([0, 1], name="class")),
        mu=mu[0],
        R=R[0],
        correlation_method=correlation,
        n_items=pd.Series([int(c.sum()) for c in counts], index=pd.Index([0, 1], name="class"), name="n_items"),
    )
