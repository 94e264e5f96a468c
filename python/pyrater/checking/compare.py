"""Model comparison by PSIS-LOO and WAIC on the per-item log-likelihood.

Items are the unit of leave-one-out: all ratings of an item share its true
class, so the Stan programs write ``log_lik[item]`` (for grouped data each
pattern's value is repeated for each of its items).  PSIS-LOO is ArviZ's
(``az.loo``, through :mod:`pyrater._arviz`, on ArviZ 0.x and 1.x alike); WAIC
is computed here from the pointwise log-likelihood (ArviZ 1.x has no WAIC; the
result equals ArviZ 0.x's ``az.waic``).  Both return an :class:`ELPD` with the
same fields whatever the ArviZ line, and :func:`compare` returns a table with
a fixed schema (see its docstring).

Sign conventions (as in R's ``loo`` and ArviZ 1.x): ``elpd`` is on the log
scale, higher is better; ``elpd_diff`` is each model's elpd minus the best
model's, so 0 for the best and negative for worse models.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import logsumexp

from .._stacklevel import user_stacklevel
from ..fits.base import Fit

__all__ = ["ELPD", "loo", "waic", "compare", "COMPARE_COLUMNS", "PARETO_K_THRESHOLD", "WAIC_VARIANCE_THRESHOLD"]

PARETO_K_THRESHOLD = 0.7
#: WAIC is flagged (as ArviZ 0.x does) when a pointwise posterior variance of the log-likelihood exceeds this.
WAIC_VARIANCE_THRESHOLD = 0.4


@dataclass(frozen=True)
class ELPD:
    """Expected log pointwise predictive density of a fit, items as the unit.

    The same fields on ArviZ 0.x and 1.x.

    Attributes
    ----------
    kind : {"loo", "waic"}
        How it was estimated (PSIS-LOO or WAIC).
    elpd : float
        Sum of ``elpd_i`` (log scale; higher is better).
    se : float
        Standard error of ``elpd``: ``sqrt(N * var(elpd_i))``.
    p : float
        Effective number of parameters (``p_loo`` or ``p_waic``).
    elpd_i : pandas.Series, length N
        Pointwise values, indexed by item label.
    pareto_k : pandas.Series or None
        PSIS-LOO only: Pareto shape per item; above 0.7 the item's estimate is unreliable.
    n_bad_k : int
        Items with Pareto k > 0.7 (LOO) or with posterior variance of the
        log-likelihood > 0.4 (WAIC).
    warning : bool
        True when the estimate may be unreliable (``n_bad_k > 0``, or ArviZ's
        own Pareto k flag).
    n_samples : int
        Posterior draws used (chains x draws).
    n_data_points : int
        N, the number of items.

    ``elpd_loo``, ``p_loo``, ``loo_i`` (LOO) and ``elpd_waic``, ``p_waic``,
    ``waic_i`` (WAIC) are aliases with ArviZ 0.x's names.
    """

    kind: str
    elpd: float
    se: float
    p: float
    elpd_i: pd.Series
    pareto_k: pd.Series | None
    n_bad_k: int
    warning: bool
    n_samples: int
    n_data_points: int

    def _alias(self, kind: str, value):
        if self.kind != kind:
            raise AttributeError(f"this is a {self.kind} result; use .elpd, .p and .elpd_i")
        return value

    @property
    def elpd_loo(self) -> float:
        """Expected log pointwise predictive density by PSIS-LOO (``kind='loo'`` only)."""
        return self._alias("loo", self.elpd)

    @property
    def p_loo(self) -> float:
        """Effective number of parameters by PSIS-LOO."""
        return self._alias("loo", self.p)

    @property
    def loo_i(self) -> pd.Series:
        """Pointwise elpd by PSIS-LOO, one value per item."""
        return self._alias("loo", self.elpd_i)

    @property
    def elpd_waic(self) -> float:
        """Expected log pointwise predictive density by WAIC (``kind='waic'`` only)."""
        return self._alias("waic", self.elpd)

    @property
    def p_waic(self) -> float:
        """Effective number of parameters by WAIC."""
        return self._alias("waic", self.p)

    @property
    def waic_i(self) -> pd.Series:
        """Pointwise elpd by WAIC, one value per item."""
        return self._alias("waic", self.elpd_i)

    def __str__(self) -> str:
        name = "PSIS-LOO" if self.kind == "loo" else "WAIC"
        lines = [
            f"{name} on {self.n_data_points} items ({self.n_samples} draws)",
            f"  elpd_{self.kind} = {self.elpd:.2f} (se {self.se:.2f}), p_{self.kind} = {self.p:.2f}",
        ]
        if self.n_bad_k:
            what = "Pareto k > 0.7" if self.kind == "loo" else "posterior variance of log_lik > 0.4"
            lines.append(f"  warning: {self.n_bad_k} item(s) with {what}")
        return "\n".join(lines)


def _idata(fit: Fit):
    from .. import _arviz

    if not fit.has_draws:
        raise NotImplementedError(
            f"LOO and WAIC need posterior draws; this is a {fit.method} fit. Refit with method='mcmc'."
        )
    idata = fit.to_inference_data()
    if not _arviz.has_group(idata, "log_likelihood"):
        raise ValueError("the fit has no per-item log-likelihood; refit with log_lik=True")
    return idata


def _item_index(idata) -> pd.Index:
    from .. import _arviz

    return pd.Index(_arviz.group(idata, "log_likelihood")["log_lik"].coords["item"].values, name="item")


def loo(fit: Fit, warn: bool = True) -> ELPD:
    """PSIS-LOO expected log predictive density, items as the unit.

    Parameters
    ----------
    fit : Fit
        A fit with draws and a per-item log-likelihood (MCMC).
    warn : bool
        Warn, naming the items, when some Pareto k > 0.7.

    Returns
    -------
    ELPD
        ``kind="loo"``: ``elpd``, ``se``, ``p``, pointwise ``elpd_i`` and
        ``pareto_k`` (Series over items) and ``n_bad_k``, the number of items
        with Pareto k > 0.7, for which the PSIS estimate is unreliable.
    """
    from .. import _arviz

    idata = _idata(fit)
    res = _arviz.loo(idata, "log_lik")
    items = _item_index(idata)
    k = pd.Series(res.pareto_k, index=items, name="pareto_k")
    bad = np.flatnonzero(res.pareto_k > PARETO_K_THRESHOLD)
    if warn and bad.size:
        warnings.warn(
            f"{bad.size} item(s) with Pareto k > {PARETO_K_THRESHOLD}: {list(items[bad][:10])}; "
            "the PSIS-LOO estimate is unreliable for them (consider K-fold cross-validation)",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return ELPD(
        kind="loo",
        elpd=res.elpd,
        se=float(np.sqrt(res.elpd_i.size * np.var(res.elpd_i))),  # ArviZ 0.x's; 1.x uses ddof=1
        p=res.p,
        elpd_i=pd.Series(res.elpd_i, index=items, name="elpd_loo_i"),
        pareto_k=k,
        n_bad_k=int(bad.size),
        warning=bool(res.warning or bad.size),
        n_samples=res.n_samples,
        n_data_points=res.n_data_points,
    )


def waic_arrays(log_lik: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise WAIC from a log-likelihood array of shape (S, N) (draws x items).

    Returns
    -------
    elpd_i : array (N,)
        ``lppd_i - p_i`` with ``lppd_i = log mean_s exp(log_lik[s, i])``.
    p_i : array (N,)
        ``var_s(log_lik[s, i])``, the variance over draws with divisor S (as
        ArviZ 0.x's ``az.waic``; R's ``loo`` divides by S - 1, a relative
        difference of 1/S).
    """
    log_lik = np.asarray(log_lik, dtype=float)
    if log_lik.ndim != 2 or log_lik.shape[0] < 2:
        raise ValueError(f"log_lik must have shape (draws >= 2, items); got {log_lik.shape}")
    S = log_lik.shape[0]
    lppd_i = logsumexp(log_lik, axis=0) - np.log(S)
    p_i = np.var(log_lik, axis=0)
    return lppd_i - p_i, p_i


def waic(fit: Fit) -> ELPD:
    """WAIC (widely applicable information criterion) on the per-item log-likelihood.

    Computed by pyrater from the draws (ArviZ 1.x has no WAIC); equal to
    ArviZ 0.x's ``az.waic``.  ``se = sqrt(N * var(elpd_i))``; ``n_bad_k``
    counts items whose posterior variance of the log-likelihood exceeds 0.4,
    where WAIC is unreliable (prefer :func:`loo`).

    Returns
    -------
    ELPD
        ``kind="waic"``, ``pareto_k=None``.
    """
    from .. import _arviz

    idata = _idata(fit)
    ll = _arviz.group(idata, "log_likelihood")["log_lik"]
    values = ll.transpose("chain", "draw", "item").to_numpy()
    S = values.shape[0] * values.shape[1]
    elpd_i, p_i = waic_arrays(values.reshape(S, -1))
    n = elpd_i.size
    n_bad = int((p_i > WAIC_VARIANCE_THRESHOLD).sum())
    return ELPD(
        kind="waic",
        elpd=float(elpd_i.sum()),
        se=float(np.sqrt(n * np.var(elpd_i))),
        p=float(p_i.sum()),
        elpd_i=pd.Series(elpd_i, index=_item_index(idata), name="elpd_waic_i"),
        pareto_k=None,
        n_bad_k=n_bad,
        warning=bool(n_bad),
        n_samples=S,
        n_data_points=n,
    )


def _same_data(a: Fit, b: Fit) -> bool:
    ka = getattr(a, "known", None)
    kb = getattr(b, "known", None)
    same_known = (ka is None and kb is None) or (
        ka is not None and kb is not None and np.array_equal(np.asarray(ka), np.asarray(kb))
    )
    return a.data.equals(b.data) and same_known


def stacking_weights(elpd_i: np.ndarray) -> np.ndarray:
    """Stacking weights (Yao et al. 2018) from pointwise elpd, shape (N, M) -> (M,).

    Maximises ``sum_i log sum_m w_m exp(elpd_i[i, m])`` over the simplex,
    as ArviZ's ``compare(method="stacking")`` does.
    """
    elpd_i = np.asarray(elpd_i, dtype=float)
    M = elpd_i.shape[1]
    shift = elpd_i.max(axis=1, keepdims=True)
    dens = np.exp(elpd_i - shift)  # the shift only adds a constant to the objective

    def objective(z: np.ndarray) -> tuple[float, np.ndarray]:
        w = np.exp(z - z.max())
        w /= w.sum()
        mix = dens @ w
        grad_w = -(dens / mix[:, None]).sum(axis=0)
        return -np.log(mix).sum(), w * (grad_w - grad_w @ w)  # chain rule through the softmax

    res = minimize(objective, np.zeros(M), jac=True, method="L-BFGS-B")
    w = np.exp(res.x - res.x.max())
    return w / w.sum()


#: Columns of :func:`compare`'s table, in order (``<ic>`` is ``loo`` or ``waic``).
COMPARE_COLUMNS = ("rank", "elpd_<ic>", "p_<ic>", "elpd_diff", "dse", "se", "weight", "warning", "n_bad_k")


def compare(fits: Mapping[str, Fit], ic: str = "loo") -> pd.DataFrame:
    """Rank fits by expected log predictive density, items as the unit.

    Parameters
    ----------
    fits : dict
        ``{name: fit}``, at least two MCMC fits of the same data (and the same
        known items).
    ic : {"loo", "waic"}

    Returns
    -------
    DataFrame
        One row per model (index: the names), best first, with the columns
        (the same on ArviZ 0.x and 1.x):

        ``rank``
            0 for the best model.
        ``elpd_<ic>``, ``p_<ic>``, ``se``
            The model's elpd, effective number of parameters and the
            standard error of its elpd (from :func:`loo` or :func:`waic`).
        ``elpd_diff``
            ``elpd - elpd(best)``: 0 for the best, negative for worse models
            (the sign of R's ``loo_compare`` and ArviZ 1.x).
        ``dse``
            Standard error of ``elpd_diff``: ``sqrt(N * var(elpd_i - elpd_i(best)))``
            from the paired pointwise differences.
        ``weight``
            Stacking weights (Yao et al. 2018), summing to 1.
        ``warning``
            True when the model's estimate is unreliable: for LOO some item
            has Pareto k > 0.7, for WAIC some item's posterior variance of the
            log-likelihood exceeds 0.4 (then prefer LOO).
        ``n_bad_k``
            How many items triggered ``warning``.
    """
    if ic not in ("loo", "waic"):
        raise ValueError(f"ic must be 'loo' or 'waic', got {ic!r}")
    if len(fits) < 2:
        raise ValueError("compare needs at least two fits")
    names = list(fits)
    first = fits[names[0]]
    for name in names[1:]:
        if not _same_data(first, fits[name]):
            raise ValueError(
                f"fits {names[0]!r} and {name!r} were made on different data (or different known items); "
                "LOO comparisons are only meaningful on the same data"
            )
    results = {name: (loo(f, warn=False) if ic == "loo" else waic(f)) for name, f in fits.items()}
    order = sorted(names, key=lambda n: -results[n].elpd)
    best = results[order[0]]
    pointwise = np.column_stack([results[n].elpd_i.to_numpy() for n in order])
    weights = stacking_weights(pointwise)
    rows = []
    for rank, name in enumerate(order):
        res = results[name]
        diff_i = res.elpd_i.to_numpy() - best.elpd_i.to_numpy()
        rows.append(
            {
                "rank": rank,
                f"elpd_{ic}": res.elpd,
                f"p_{ic}": res.p,
                "elpd_diff": res.elpd - best.elpd,
                "dse": float(np.sqrt(diff_i.size * np.var(diff_i))),
                "se": res.se,
                "weight": float(weights[rank]),
                "warning": bool(res.warning),
                "n_bad_k": res.n_bad_k,
            }
        )
    return pd.DataFrame(rows, index=pd.Index(order))
