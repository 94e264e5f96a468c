"""Numerical core of the agreement statistics: numpy only, no pandas.

Every statistic is computed from the per-unit category counts

    N[u, k] = number of ratings of unit u in category k      (U, K)

and the unit weights ``w[u]`` (1 for items, the tally of a rating pattern for
grouped data), so grouped data cost as much as their distinct patterns and
give exactly the results of the expanded items.  Cohen's kappa, which needs
to know which rater gave which rating, takes the (U, K, K) cross-table of
the two raters' ratings per unit instead.

Conventions follow Gwet (2014), *Handbook of Inter-Rater Reliability*, 4th
ed., and his R package irrCAC (``pa.coeff.raw``, ``fleiss.kappa.raw``,
``gwet.ac1.raw``, ``krippen.alpha.raw``):

* ``W`` (K, K) is an agreement-weight matrix with ones on the diagonal
  (identity = unweighted);
* units with at least two ratings give the observed agreement; every rated
  unit gives the classification probabilities;
* standard errors are Gwet's linearisation variances (no finite-population
  correction) and intervals use Student's t with ``n - 1`` degrees of
  freedom, ``n`` the number of rated items.

Each statistic is also written as ``finalize(w @ F)`` for a per-unit
feature matrix ``F`` (:func:`features`), so that the point estimate and any
number of bootstrap replicates (``W_boot @ F``) share one code path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "weight_matrix",
    "krippendorff_distance",
    "category_counts",
    "Estimate",
    "percent_agreement",
    "fleiss_kappa",
    "gwet_ac",
    "krippendorff_alpha",
    "cohen_kappa",
    "bootstrap",
    "WEIGHT_NAMES",
    "LEVELS",
]

WEIGHT_NAMES = ("identity", "linear", "quadratic", "ordinal", "radical", "ratio", "circular", "bipolar")
LEVELS = ("nominal", "ordinal", "interval", "ratio")


# --------------------------------------------------------------------------- weights
def weight_matrix(name: str, values: np.ndarray) -> np.ndarray:
    """Gwet's (2014, ch. 3) agreement weights for categories with numeric ``values``.

    Parameters
    ----------
    name : {"identity", "linear", "quadratic", "ordinal", "radical", "ratio", "circular", "bipolar"}
    values : array, shape (K,)
        Numeric value of each category (its rank ``1 .. K`` for text labels).

    Returns
    -------
    array, shape (K, K)
        Symmetric, ones on the diagonal, in [0, 1].
    """
    v = np.asarray(values, dtype=float)
    K = v.size
    if name == "identity":
        return np.eye(K)
    d = v[:, None] - v[None, :]
    span = v.max() - v.min()
    if name == "linear":
        return 1.0 - np.abs(d) / span
    if name == "quadratic":
        return 1.0 - (d / span) ** 2
    if name == "radical":
        return 1.0 - np.sqrt(np.abs(d)) / np.sqrt(span)
    if name == "ordinal":
        idx = np.arange(K)
        nkl = np.abs(idx[:, None] - idx[None, :]) + 1.0
        w = nkl * (nkl - 1) / 2
        return 1.0 - w / w.max()
    if name == "ratio":
        s = v[:, None] + v[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            w = (d / s) ** 2 / ((v.max() - v.min()) / (v.max() + v.min())) ** 2
        return 1.0 - np.where(d == 0, 0.0, w)
    if name == "circular":
        w = np.sin(np.pi * d / (v.max() - v.min() + 1)) ** 2
        return 1.0 - w / w.max()
    if name == "bipolar":
        s = v[:, None] + v[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            w = d**2 / ((s - 2 * v.min()) * (2 * v.max() - s))
        w = np.where(d == 0, 0.0, w)
        return 1.0 - w / w.max()
    raise ValueError(f"weights must be one of {WEIGHT_NAMES} or a (K, K) matrix, got {name!r}")


def krippendorff_distance(level: str, values: np.ndarray, marginals: np.ndarray | None = None) -> np.ndarray:
    """Krippendorff's (2011) squared difference functions ``delta[c, k]``.

    Parameters
    ----------
    level : {"nominal", "ordinal", "interval", "ratio"}
    values : array, shape (K,)
        Numeric category values (interval, ratio).
    marginals : array, shape (K,) or (B, K), optional
        ``n_g``, the number of pairable values of each category (ordinal only;
        a leading axis gives one matrix per bootstrap replicate).

    Returns
    -------
    array, shape (K, K) (or (B, K, K) for stacked marginals)
    """
    v = np.asarray(values, dtype=float)
    K = v.size
    if level == "nominal":
        return 1.0 - np.eye(K)
    if level == "interval":
        return (v[:, None] - v[None, :]) ** 2
    if level == "ratio":
        s = v[:, None] + v[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = ((v[:, None] - v[None, :]) / s) ** 2
        return np.where(s == 0, 0.0, r)
    if level == "ordinal":
        n = np.asarray(marginals, dtype=float)
        cum = np.cumsum(n, axis=-1)  # sum_{g <= k} n_g
        lo = np.minimum.outer(np.arange(K), np.arange(K))
        hi = np.maximum.outer(np.arange(K), np.arange(K))
        # sum_{g = lo}^{hi} n_g - (n_c + n_k) / 2
        between = cum[..., hi] - cum[..., lo] + n[..., lo]
        half = (n[..., :, None] + n[..., None, :]) / 2
        return (between - half) ** 2
    raise ValueError(f"level must be one of {LEVELS}, got {level!r}")


def weights_from_distance(delta: np.ndarray) -> np.ndarray:
    """Agreement weights ``1 - delta / max(delta)`` (alpha is invariant to the scale of delta)."""
    top = delta.max(axis=(-2, -1), keepdims=True)
    top = np.where(top > 0, top, 1.0)
    return 1.0 - delta / top


# --------------------------------------------------------------------------- data
def category_counts(unit: np.ndarray, rating: np.ndarray, n_units: int, K: int) -> np.ndarray:
    """``N[u, k]``: ratings of unit ``u`` in category ``k``, shape (U, K), float."""
    return np.bincount(unit * K + rating, minlength=n_units * K).reshape(n_units, K).astype(float)


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Estimate:
    """One coefficient: estimate, observed and chance agreement, analytic standard error."""

    estimate: float
    observed: float
    expected: float
    se: float
    df: float
    n_units: float
    se_method: str


def t_interval(est: float, se: float, df: float, prob: float) -> tuple[float, float]:
    """``est -/+ t_{df, (1+prob)/2} * se``."""
    if not np.isfinite(se) or df < 1:
        return (np.nan, np.nan)
    q = stats.t.ppf((1 + prob) / 2, df)
    return (est - q * se, est + q * se)


def z_interval(est: float, se: float, prob: float) -> tuple[float, float]:
    """``est -/+ z_{(1+prob)/2} * se``."""
    if not np.isfinite(se):
        return (np.nan, np.nan)
    q = stats.norm.ppf((1 + prob) / 2)
    return (est - q * se, est + q * se)


def _linearised_var(x: np.ndarray, centre: float, w: np.ndarray, n: float) -> float:
    """``sum_u w_u (x_u - centre)^2 / (n (n - 1))``: Gwet's variance of a mean of linearised terms."""
    if n < 2:
        return np.nan
    return float(np.sum(w * (x - centre) ** 2) / (n * (n - 1)))


def _rated(N: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r = N.sum(axis=1)
    keep = (r >= 1) & (w > 0)
    return N[keep], w[keep], r[keep]


def _observed(N: np.ndarray, W: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit weighted agreement ``sum_k N_k (N W^T)_k - r`` and its denominator ``r (r - 1)``."""
    sum_q = np.einsum("uk,uk->u", N, N @ W.T) - r  # diag(W) = 1
    return sum_q, r * (r - 1)


# --------------------------------------------------------------------------- statistics
def percent_agreement(N: np.ndarray, w: np.ndarray, W: np.ndarray) -> Estimate:
    """Gwet's (weighted) percent agreement among all raters, with its standard error.

    Parameters
    ----------
    N : array, shape (U, K)
    w : array, shape (U,)
    W : array, shape (K, K)
    """
    N, w, r = _rated(N, w)
    n = w.sum()
    two = r >= 2
    n2 = w[two].sum()
    if n2 == 0:
        return Estimate(np.nan, np.nan, 0.0, np.nan, n - 1, n, "")
    sum_q, den = _observed(N, W, r)
    pa_u = np.where(two, sum_q / np.where(two, den, 1.0), 0.0)
    pa = float(np.sum(w * pa_u) / n2)
    x = (n / n2) * pa_u
    var = _linearised_var(x, pa, w, n)
    # its items are those with two or more ratings (one rating has no pair to agree with)
    return Estimate(pa, pa, 0.0, float(np.sqrt(var)), n - 1, n2, "Gwet (2014) linearisation")


def _chance_corrected(N, w, W, pe_fn: Callable, pe_unit_fn: Callable) -> Estimate:
    N, w, r = _rated(N, w)
    n = w.sum()
    two = r >= 2
    n2 = w[two].sum()
    if n2 == 0:
        return Estimate(np.nan, np.nan, np.nan, np.nan, n - 1, n, "")
    sum_q, den = _observed(N, W, r)
    pa_u = np.where(two, sum_q / np.where(two, den, 1.0), 0.0)
    pa = float(np.sum(w * pa_u) / n2)
    pi = (w @ (N / r[:, None])) / n  # classification probabilities (K,)
    pe = float(pe_fn(pi))
    if pe >= 1 - 1e-12:
        return Estimate(np.nan, pa, pe, np.nan, n - 1, n, "")
    kappa = (pa - pe) / (1 - pe)
    k_u = (n / n2) * (pa_u - pe * two) / (1 - pe)
    pe_u = pe_unit_fn(N, r, pi)
    k_x = k_u - 2 * (1 - kappa) * (pe_u - pe) / (1 - pe)
    var = _linearised_var(k_x, kappa, w, n)
    return Estimate(float(kappa), pa, pe, float(np.sqrt(var)), n - 1, n, "Gwet (2014) linearisation")


def fleiss_kappa(N: np.ndarray, w: np.ndarray, W: np.ndarray) -> Estimate:
    """Fleiss' (1971) kappa, generalised to missing ratings and weights (Gwet 2014, ch. 5).

    ``pe = pi' W pi`` with ``pi_k`` the mean share of category ``k`` among each unit's ratings.
    """
    W_sym = (W + W.T) / 2
    return _chance_corrected(
        N,
        w,
        W,
        lambda pi: pi @ W @ pi,
        lambda N, r, pi: (N @ (W_sym @ pi)) / r,
    )


def gwet_ac(N: np.ndarray, w: np.ndarray, W: np.ndarray) -> Estimate:
    """Gwet's AC1 (identity weights) or AC2 (Gwet 2008; 2014, ch. 6).

    ``pe = T_w / (K (K - 1)) * sum_k pi_k (1 - pi_k)``, ``T_w`` the sum of the weights.
    """
    K = W.shape[0]
    c = W.sum() / (K * (K - 1))
    return _chance_corrected(
        N,
        w,
        W,
        lambda pi: c * np.sum(pi * (1 - pi)),
        lambda N, r, pi: c * (N @ (1 - pi)) / r,
    )


def krippendorff_alpha(N: np.ndarray, w: np.ndarray, W: np.ndarray) -> Estimate:
    """Krippendorff's alpha with agreement weights ``W = 1 - delta / max(delta)``.

    The estimate equals Krippendorff's ``1 - D_o / D_e`` (units with fewer
    than two ratings are not pairable and drop out).  The standard error is
    Gwet's (2014, ch. 5) linearisation, which treats ``W`` as fixed: exact for
    the nominal, interval and ratio distances, not for the ordinal one (whose
    distances depend on the marginal frequencies; bootstrap that one).
    """
    N, w, r = _rated(N, w)
    n0 = w.sum()
    two = r >= 2
    N, w, r = N[two], w[two], r[two]
    n = w.sum()
    if n == 0:
        return Estimate(np.nan, np.nan, np.nan, np.nan, n0 - 1, n0, "")
    r_mean = float(w @ r / n)
    eps = 1.0 / float(w @ r)
    sum_q, _ = _observed(N, W, r)
    pa_prime = float(np.sum(w * sum_q / (r_mean * (r - 1))) / n)
    pa = (1 - eps) * pa_prime + eps
    pi = (w @ (N / r_mean)) / n
    pe = float(pi @ W @ pi)
    if pe >= 1 - 1e-12:
        return Estimate(np.nan, pa, pe, np.nan, n0 - 1, n0, "")
    alpha = (pa - pe) / (1 - pe)
    alpha_prime = (pa_prime - pe) / (1 - pe)
    pa_u = sum_q / (r_mean * (r - 1)) - pa_prime * (r - r_mean) / r_mean
    a_u = (pa_u - pe) / (1 - pe)
    pi_w = ((W + W.T) / 2) @ pi
    pe_u = (N @ pi_w) / r_mean - pe * (r - r_mean) / r_mean
    a_x = a_u - 2 * (1 - alpha_prime) * (pe_u - pe) / (1 - pe)
    var = _linearised_var(a_x, alpha_prime, w, n)
    # t degrees of freedom from all rated items, as Gwet's krippen.alpha.raw
    return Estimate(float(alpha), pa, pe, float(np.sqrt(var)), n0 - 1, n, "Gwet (2014) linearisation")


def cohen_kappa(table: np.ndarray, W: np.ndarray) -> Estimate:
    """Cohen's (1960) kappa, weighted (Cohen 1968), from a (K, K) table of two raters' ratings.

    The standard error is the large-sample one of Fleiss, Cohen & Everitt
    (1969), for weighted and unweighted kappa alike.

    Parameters
    ----------
    table : array, shape (K, K)
        ``table[k, l]`` = number (weighted) of items rater 1 put in ``k`` and rater 2 in ``l``.
    W : array, shape (K, K)
    """
    n = float(table.sum())
    if n == 0:
        return Estimate(np.nan, np.nan, np.nan, np.nan, np.nan, 0.0, "")
    p = table / n
    row, col = p.sum(axis=1), p.sum(axis=0)
    po = float(np.sum(W * p))
    pe = float(row @ W @ col)
    if pe >= 1 - 1e-12:
        return Estimate(np.nan, po, pe, np.nan, n - 1, n, "")
    kappa = (po - pe) / (1 - pe)
    w_row = W @ col  # wbar_{k.}
    w_col = row @ W  # wbar_{.l}
    term = np.sum(p * (W - (w_row[:, None] + w_col[None, :]) * (1 - kappa)) ** 2)
    var = (term - (kappa - pe * (1 - kappa)) ** 2) / (n * (1 - pe) ** 2)
    se = float(np.sqrt(max(var, 0.0))) if n > 1 else np.nan
    return Estimate(float(kappa), po, pe, se, n - 1, n, "Fleiss, Cohen & Everitt (1969)")


# --------------------------------------------------------------------------- bootstrap
def features(kind: str, N: np.ndarray, W: np.ndarray | None) -> np.ndarray:
    """Per-unit features whose weighted sums determine statistic ``kind``.

    ``kind`` is ``"pa"``, ``"fleiss"``, ``"ac"``, ``"alpha"`` (fixed W) or
    ``"alpha_ordinal"`` / ``"cohen"`` (W recomputed or applied from sums).
    For ``"cohen"`` ``N`` is the (U, K*K) flattened two-rater cross-table.

    Returns
    -------
    array, shape (U, m)
    """
    if kind == "cohen":
        return N
    r = N.sum(axis=1)
    two = (r >= 2).astype(float)
    rr = np.where(r >= 1, r, 1.0)
    if kind in ("pa", "fleiss", "ac"):
        if W is None:
            raise ValueError(f"statistic {kind!r} needs a weight matrix")
        sum_q, den = _observed(N, W, r)
        pa_u = np.where(r >= 2, sum_q / np.where(r >= 2, den, 1.0), 0.0)
        rated = (r >= 1).astype(float)
        return np.column_stack([rated, two, pa_u, N / rr[:, None]])
    if kind in ("alpha", "alpha_ordinal"):
        # pairable units only: counts n, sum r, coincidences sum N_k N_l / (r - 1)
        d = np.where(r >= 2, r - 1, 1.0)
        K = N.shape[1]
        co = (N[:, :, None] * N[:, None, :]).reshape(-1, K * K) / d[:, None] * two[:, None]
        return np.column_stack([two, r * two, co, N * two[:, None]])
    raise ValueError(kind)


def finalize(
    kind: str, S: np.ndarray, W: np.ndarray | None, K: int, level: str | None = None, values: np.ndarray | None = None
) -> np.ndarray:
    """Statistic ``kind`` from summed features ``S`` (B, m), one value per row."""
    S = np.atleast_2d(S)
    if kind == "alpha_ordinal":
        if values is None:
            raise ValueError("the ordinal distance needs the category values")
    elif W is None:
        raise ValueError(f"statistic {kind!r} needs a weight matrix")
    Wm = np.zeros((K, K)) if W is None else np.asarray(W)  # unused by the ordinal alpha
    with np.errstate(invalid="ignore", divide="ignore"):
        if kind == "cohen":
            T = S.reshape(-1, K, K)
            n = T.sum(axis=(1, 2))
            p = T / n[:, None, None]
            row, col = p.sum(axis=2), p.sum(axis=1)
            po = np.einsum("kl,bkl->b", Wm, p)
            pe = np.einsum("bk,kl,bl->b", row, Wm, col)
            return (po - pe) / (1 - pe)
        if kind in ("pa", "fleiss", "ac"):
            n, n2, pa_sum, pis = S[:, 0], S[:, 1], S[:, 2], S[:, 3:]
            pa = pa_sum / n2
            if kind == "pa":
                return pa
            pi = pis / n[:, None]
            if kind == "fleiss":
                pe = np.einsum("bk,kl,bl->b", pi, Wm, pi)
            else:
                pe = Wm.sum() / (K * (K - 1)) * np.sum(pi * (1 - pi), axis=1)
            return (pa - pe) / (1 - pe)
        # alpha: 1 - D_o / D_e with D from the coincidence matrix
        sum_r = S[:, 1]
        co = S[:, 2 : 2 + K * K].reshape(-1, K, K)  # sum_u N_k N_l / (r_u - 1)
        marg = S[:, 2 + K * K :]  # n_k: pairable values of category k
        if kind == "alpha_ordinal":
            delta = krippendorff_distance("ordinal", np.asarray(values), marg)
        else:
            delta = np.broadcast_to(1.0 - Wm, (S.shape[0], K, K))
        # Krippendorff's coincidences o_kl differ from co only on the diagonal
        # (N_k (N_k - 1) instead of N_k^2), where delta_kk = 0
        d_o = np.einsum("bkl,bkl->b", co, delta)
        d_e = (np.einsum("bk,bkl,bl->b", marg, delta, marg)) / (sum_r - 1)
        return 1.0 - d_o / d_e


def bootstrap(
    kind: str,
    F: np.ndarray,
    w: np.ndarray,
    n_boot: int,
    rng: np.random.Generator,
    fin: Callable[[np.ndarray], np.ndarray],
    block: int = 128,
) -> np.ndarray:
    """Bootstrap replicates of a statistic, resampling items with replacement.

    Units stand for ``w[u]`` items each, so a replicate draws ``n = sum(w)``
    items as ``Multinomial(n, w / n)`` counts over units (for item-level data
    the ordinary bootstrap).

    Returns
    -------
    array, shape (n_boot,)
    """
    n_items = int(round(w.sum()))
    p = w / w.sum()
    out = np.empty(n_boot)
    for start in range(0, n_boot, block):
        b = min(block, n_boot - start)
        counts = rng.multinomial(n_items, p, size=b).astype(float)
        out[start : start + b] = fin(counts @ F)
    return out
