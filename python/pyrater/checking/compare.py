"""Model comparison by PSIS-LOO and WAIC on the per-item log-likelihood.

Items are the unit of leave-one-out: all ratings of an item share its true
class, so ``log_lik[item]`` is the marginal over the item's class (for grouped
data each pattern's value is repeated for each of its items).

How LOO is computed
-------------------
pyrater computes PSIS-LOO itself, in item chunks, with compiled kernels
(:mod:`pyrater.models._fused`): per chunk of items the log-likelihood of every
draw is read from the fit (when kept) or recomputed from the pi and theta
draws (:meth:`pyrater.fits.DrawsFit.log_lik_units`), then each item's ratios
are Pareto-smoothed (:func:`pyrater._psis.psislw`'s algorithm) and its
``elpd_i`` taken.  The relative efficiency ``r_eff`` and the Pareto tail
length are ArviZ's on the installed line (the mean "mean" ESS of every
posterior entry over the draws; tail ``ceil(3 sqrt(S / r_eff))`` on ArviZ
0.x, ``floor`` on 1.x), so the numbers equal ``az.loo`` / ``az.compare`` to
rounding.  Memory is one chunk of ``draws x items`` doubles; a pattern of
grouped data is computed once.

**Subsampling LOO** (Magnusson, Andersen, Jonasson & Vehtari 2019, 2020;
``loo_subsample`` in R's loo).  When the full ``items x draws`` log-likelihood
would not fit the memory budget (``max_memory_gib``, default the fit's), exact
PSIS-LOO is computed for a simple random sample of items drawn without
replacement (``n_subsample``, default 2,000) and the sum over all items is
estimated by the difference estimator with a cheap approximation for every
item: the log predictive density at the posterior mean of pi and theta
("plpd", one pass over the counts).  The result carries the usual standard
error of elpd and the *subsampling* standard error, the error due to
estimating from a sample (:attr:`ELPD.subsample_se`); ``method="exact"``
forces exact LOO (chunked; slower, never more memory), ``method="subsample"``
subsampling.  :func:`compare` uses the LOO already computed for each fit
(``pyrater.loo(fit)`` keeps its last result on the fit), computes the missing
ones the same way (subsampled fits share one sample of items), estimates
``elpd_diff`` by the difference estimator on the paired pointwise
differences (R's ``loo_compare`` for subsampled LOO) and says in the table
how each was computed.

WAIC is computed here from the pointwise log-likelihood in the same item
chunks (ArviZ 1.x has no WAIC; the result equals ArviZ 0.x's ``az.waic``).

Sign conventions (as in R's ``loo`` and ArviZ 1.x): ``elpd`` is on the log
scale, higher is better; ``elpd_diff`` is each model's elpd minus the best
model's, so 0 for the best and negative for worse models.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import logsumexp

from .._psis import n_pareto_tail
from .._stacklevel import user_stacklevel
from .._validation import GIB, check_choice, check_int, check_number
from ..fits.base import Fit

__all__ = [
    "ELPD",
    "loo",
    "waic",
    "compare",
    "COMPARE_COLUMNS",
    "PARETO_K_THRESHOLD",
    "WAIC_VARIANCE_THRESHOLD",
    "DEFAULT_SUBSAMPLE",
    "BASELINE_NAME",
    "pseudo_bma_plus_weights",
    "equivalent_to_best",
]

PARETO_K_THRESHOLD = 0.7
#: WAIC is flagged (as ArviZ 0.x does) when a pointwise posterior variance of the log-likelihood exceeds this.
WAIC_VARIANCE_THRESHOLD = 0.4
#: items computed exactly by subsampling LOO unless ``n_subsample`` says otherwise
DEFAULT_SUBSAMPLE = 2000
#: the memory budget of LOO for fits that record none (GiB)
DEFAULT_MEMORY_GIB = 1.0


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
        True when the estimate may be unreliable: ``n_bad_k > 0``, or (LOO)
        some item's Pareto k is above the sample-size threshold
        ``min(1 - 1/log10(S), 0.7)`` for S draws (ArviZ's flag; Vehtari et
        al. 2024), 0.57 for 200 draws.
    n_samples : int
        Posterior draws used (chains x draws).
    n_data_points : int
        N, the number of items.
    method : {"exact", "subsample", "kfold"}
        ``"exact"``: every item's elpd computed; ``"subsample"``: subsampling
        LOO, ``elpd_i`` and ``pareto_k`` hold the sampled items only and
        ``elpd``, ``se`` and ``p`` are difference estimates; ``"kfold"``: a
        point fit's K-fold cross-validation over items
        (:func:`pyrater.kfold`; ``p`` is ``p_kfold``, no Pareto k).
    subsample_se : float
        Standard error of ``elpd`` due to subsampling (0 for exact LOO).
    n_subsample : int
        Items whose elpd was computed exactly (N for exact LOO).
    elpd_approx_i : pandas.Series or None
        Subsampling LOO: the approximation of every item's elpd (the log
        predictive density at the posterior mean of pi and theta).
    r_eff : float
        Relative efficiency of the draws used for the Pareto tail (LOO).

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
    method: str = "exact"
    subsample_se: float = 0.0
    n_subsample: int = 0
    elpd_approx_i: pd.Series | None = None
    r_eff: float = 1.0

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
        if self.method == "kfold":
            return (
                f"K-fold cross-validation over {self.n_data_points} items (refits of the point fit)\n"
                f"  elpd_kfold = {self.elpd:.2f} (se {self.se:.2f}), p_kfold = {self.p:.2f}"
            )
        if self.method == "subsample":
            head = (
                f"{name} by subsampling on {self.n_data_points} items ({self.n_subsample} computed exactly, "
                f"difference estimator with the plug-in approximation; {self.n_samples} draws)"
            )
        else:
            head = f"{name} on {self.n_data_points} items ({self.n_samples} draws)"
        lines = [head, f"  elpd_{self.kind} = {self.elpd:.2f} (se {self.se:.2f}), p_{self.kind} = {self.p:.2f}"]
        if self.method == "subsample":
            lines.append(f"  subsampling se of elpd_{self.kind}: {self.subsample_se:.2f}")
        among = " (among the sampled items)" if self.method == "subsample" else ""
        if self.n_bad_k:
            what = "Pareto k > 0.7" if self.kind == "loo" else "posterior variance of log_lik > 0.4"
            lines.append(f"  warning: {self.n_bad_k} item(s) with {what}{among}")
        elif self.warning and self.pareto_k is not None:
            good = _good_k(self.n_samples)
            n = int((np.asarray(self.pareto_k) > good).sum())
            lines.append(
                f"  warning: {n} item(s) with Pareto k > {good:.2f}, the threshold for {self.n_samples} draws "
                f"(min(1 - 1/log10 S, 0.7)){among}; none above 0.7: more draws would make the estimate reliable"
            )
        return "\n".join(lines)


# ------------------------------------------------------------ what LOO needs
def _budget(fit: Fit, max_memory_gib: Any) -> float:
    """The memory budget in bytes: the argument, else the fit's ``max_memory_gib``, else 1 GiB."""
    if max_memory_gib is None:
        max_memory_gib = (getattr(fit, "settings", None) or {}).get("max_memory_gib") or DEFAULT_MEMORY_GIB
    return check_number("max_memory_gib", max_memory_gib, 0, strict_minimum=True) * GIB


def _check_loo_input(fit: Any, name: str | None = None) -> Any:
    """Everything LOO and WAIC need from ``fit``, checked before any work (one clear error each)."""
    who = f"fit {name!r}" if name is not None else "the fit"
    if not isinstance(fit, Fit):
        raise TypeError(f"{who} must be a pyrater fit (from pyrater.fit), got {type(fit).__name__}")
    if not fit.has_draws:
        raise NotImplementedError(
            f"LOO and WAIC need posterior draws; {who} is a point estimate (method {fit.method!r}). Score it by "
            "K-fold cross-validation instead, pyrater.kfold(fit) (pyrater.compare does so for point fits), or "
            "refit it by a sampler, method='gibbs' or 'mcmc' (pyrater.get_model(name).methods lists a family's)."
        )
    if getattr(fit, "blocks", None) is not None and not hasattr(fit.data, "counts"):
        raise NotImplementedError(
            f"LOO and WAIC need the ratings in memory; {who} was fitted on distributed data. Collect a sample of "
            "items into a RatingData (DistributedRatingData.head / compute) and refit it in memory."
        )
    if fit.data.n_units == 0:
        raise ValueError(f"{who} has no rated items")
    if getattr(fit, "has_log_lik", False):
        return fit
    draws_fit: Any = fit
    try:
        draws_fit._effective_draws()
    except (KeyError, NotImplementedError):
        raise ValueError(
            f"{who} keeps no per-item log-likelihood and its {fit.model.title} model has no error matrices to "
            "recompute it from; refit with log_lik=True (and, for the Gibbs sampler, a max_memory_gib that holds "
            f"{_gib(8.0 * _n_draws(fit) * fit.data.n_units)} GiB of log_lik)"
        ) from None
    return fit


def _gib(nbytes: float) -> str:
    return f"{nbytes / GIB:.3g}"


def _n_draws(fit: Any) -> int:
    pi = np.asarray(fit.draws["pi"])
    return int(pi.shape[0] * pi.shape[1])


def _r_eff(fit: Any) -> float:
    """ArviZ's relative efficiency: mean over every posterior entry of its "mean" ESS, over the draws (cached)."""
    cached = fit.__dict__.get("_loo_r_eff")
    if cached is not None:
        return cached
    from ..fits.diagnostics import ess_mean

    pi = np.asarray(fit.draws["pi"])
    C, S = pi.shape[:2]
    if C == 1:
        value = 1.0
    else:
        total, count = 0.0, 0
        for key, arr in fit.draws.items():
            if key == "log_lik":
                continue
            arr = np.asarray(arr)
            flat = arr.reshape(C, S, -1)
            if flat.shape[2] == 0:
                continue
            ess = ess_mean(flat)
            total += float(ess.sum())
            count += ess.size
        value = total / count / (C * S) if count else 1.0
    fit.__dict__["_loo_r_eff"] = value
    return value


def _tail_length(n_draws: int, r_eff: float) -> int:
    """Pareto tail length of ArviZ's ``loo`` on the installed line.

    ArviZ 0.x (and R's loo): ``ceil(min(S / 5, 3 sqrt(S / r_eff)))``; ArviZ 1.x
    (``arviz_stats``): ``floor`` of the same.  The only version-specific rule
    of this module (it would sit in :mod:`pyrater._arviz`).
    """
    from .. import _arviz

    if _arviz.is_datatree_line():
        if n_draws * r_eff > 225:
            return int(math.floor(3.0 * math.sqrt(n_draws / r_eff)))
        return int(math.floor(n_draws / 5.0))
    return n_pareto_tail(n_draws, r_eff)


def _threads() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def _psis_rows(ll: np.ndarray, tail: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """elpd_i, Pareto k and lppd_i of every row of ``ll`` (units, S), rows split over threads."""
    from ..models import _fused

    n = ll.shape[0]
    elpd, k, lppd = np.empty(n), np.empty(n), np.empty(n)
    if n == 0:
        return elpd, k, lppd
    parts = _threads()
    edges = np.linspace(0, n, min(parts, n) + 1).astype(int)
    if len(edges) > 2:
        with ThreadPoolExecutor(len(edges) - 1) as ex:
            list(
                ex.map(
                    lambda a: _fused.psis_loo_rows(ll, edges[a], edges[a + 1], tail, elpd, k, lppd),
                    range(len(edges) - 1),
                )
            )
    else:
        _fused.psis_loo_rows(ll, 0, n, tail, elpd, k, lppd)
    return elpd, k, lppd


def _unit_chunks(fit: Any, budget: float) -> int:
    """Units per chunk: a quarter of the budget for the (units x draws) log-likelihood block, at least 64."""
    return max(64, int(budget / 4 // (8.0 * _n_draws(fit))))


def _exact_units(fit: Any, tail: int, budget: float, progress: bool) -> tuple[np.ndarray, ...]:
    """Exact PSIS-LOO of every unit, in chunks: elpd_u, k_u, lppd_u."""
    from .._quiet import progress_bar

    I = fit.data.n_units
    step = _unit_chunks(fit, budget)
    S = _n_draws(fit)
    elpd, k, lppd = (np.empty(I) for _ in range(3))
    buf = np.empty((min(step, I), S))
    with progress_bar(progress, I, "LOO", unit="unit") as bar:
        for lo in range(0, I, step):
            hi = min(I, lo + step)
            ll = fit.log_lik_units((lo, hi), out=buf[: hi - lo])
            elpd[lo:hi], k[lo:hi], lppd[lo:hi] = _psis_rows(ll, tail)
            bar.update(hi - lo)
    return elpd, k, lppd


def _expand(fit: Any, per_unit: np.ndarray) -> np.ndarray:
    """Per-unit values as one value per item (:attr:`RatingData.unit_of_item`; grouped data: by the tallies)."""
    return per_unit[fit.data.unit_of_item]


def _good_k(n_samples: int) -> float:
    return min(1.0 - 1.0 / math.log10(n_samples), PARETO_K_THRESHOLD) if n_samples > 10 else PARETO_K_THRESHOLD


def _warn_bad(items: pd.Index, bad: np.ndarray, among: str = "") -> None:
    warnings.warn(
        f"{bad.size} item(s){among} with Pareto k > {PARETO_K_THRESHOLD}: {list(items[bad][:10])}; "
        "the PSIS-LOO estimate is unreliable for them (consider K-fold cross-validation)",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def _loo_exact(fit: Any, budget: float, warn: bool, progress: bool) -> ELPD:
    S = _n_draws(fit)
    r_eff = _r_eff(fit)
    elpd_u, k_u, lppd_u = _exact_units(fit, _tail_length(S, r_eff), budget, progress)
    elpd_i, k_i, lppd_i = (_expand(fit, v) for v in (elpd_u, k_u, lppd_u))
    items = fit.data.item_index
    bad = np.flatnonzero(k_i > PARETO_K_THRESHOLD)
    if warn and bad.size:
        _warn_bad(items, bad)
    n = elpd_i.size
    return ELPD(
        kind="loo",
        elpd=float(elpd_i.sum()),
        se=float(np.sqrt(n * np.var(elpd_i))),  # ArviZ 0.x's; 1.x uses ddof=1
        p=float(lppd_i.sum() - elpd_i.sum()),
        elpd_i=pd.Series(elpd_i, index=items, name="elpd_loo_i"),
        pareto_k=pd.Series(k_i, index=items, name="pareto_k"),
        n_bad_k=int(bad.size),
        warning=bool(bad.size or np.any(k_i > _good_k(S))),
        n_samples=S,
        n_data_points=n,
        method="exact",
        subsample_se=0.0,
        n_subsample=n,
        r_eff=r_eff,
    )


def _plpd_items(fit: Any) -> np.ndarray:
    """The subsampling approximation of every item's elpd: ``log p(y_i | posterior mean of pi, theta)``."""
    from ..models.kernels import class_log_posterior

    pi, theta = fit._effective_draws()
    pm, tm = pi.mean(axis=0), theta.mean(axis=0)
    if tm.shape[0] == 1:
        tm = np.broadcast_to(tm, (fit.data.n_raters, *tm.shape[1:]))
    with np.errstate(divide="ignore"):
        _, ll = class_log_posterior(fit.data.counts, np.log(pm), np.log(tm), known=fit.known)
    return _expand(fit, ll)


def _subsample_items(n_items: int, m: int, seed: int) -> np.ndarray:
    """A simple random sample of ``m`` of ``n_items`` items without replacement, sorted (seeded)."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_items, size=m, replace=False))


def _sampled_units_loo(fit: Any, units: np.ndarray, tail: int, progress: bool) -> tuple[np.ndarray, ...]:
    """Exact elpd, k and lppd of the given (distinct, sorted) units."""
    from .._quiet import progress_bar

    S = _n_draws(fit)
    if fit.has_log_lik:
        arr = np.asarray(fit.draws["log_lik"])
        ll = np.ascontiguousarray(arr.reshape(S, -1)[:, units].T)
    else:
        from ..models.kernels import draws_log_lik

        pi, theta = fit._effective_draws()
        counts = fit.data.counts[units]
        known = None if fit.known is None else np.asarray(fit.known)[units]
        with progress_bar(progress, S, "LOO (sampled items)", unit="draw") as bar:
            ll = draws_log_lik(counts, pi, theta, known, progress=bar)
    return _psis_rows(ll, tail)


def srs_diff_est(approx: np.ndarray, y: np.ndarray, idx: np.ndarray) -> tuple[float, float, float]:
    """Difference estimator of a total under simple random sampling without replacement.

    Magnusson et al. (2020), equations (7)-(9) with the correction of their
    supplementary material, as ``srs_diff_est`` in R's loo.

    Parameters
    ----------
    approx : array (N,)
        The approximation of every unit's value.
    y : array (m,)
        The exact values of the sampled units.
    idx : int array (m,)
        Their positions in ``approx``.

    Returns
    -------
    total : float
        Estimate of ``sum_i y_i``.
    var_total : float
        Variance of that estimate due to subsampling (its square root is the subsampling SE).
    var_y : float
        Estimate of ``N * var(y_i)`` over all units (its square root is the usual SE of the total).
    """
    N, m = approx.size, y.size
    e = y - approx[idx]
    t_pi = float(approx.sum())
    t_pi2 = float((approx**2).sum())
    t_e = N * float(e.mean())
    t_eps = N * float(np.mean(y**2 - approx[idx] ** 2))
    total = t_pi + t_e
    var_total = N**2 * (1 - m / N) * float(np.var(e, ddof=1)) / m if m > 1 else float("nan")
    var_y = (t_pi2 + t_eps) - (1.0 / N) * (t_e**2 - var_total + 2 * t_pi * total - t_pi**2)
    return total, var_total, var_y


def _loo_subsample(fit: Any, items_idx: np.ndarray, warn: bool, progress: bool) -> ELPD:
    S = _n_draws(fit)
    r_eff = _r_eff(fit)
    approx = _plpd_items(fit)
    N = approx.size
    units_of = fit.data.unit_of_item[items_idx]
    units, inverse = np.unique(units_of, return_inverse=True)
    elpd_u, k_u, lppd_u = _sampled_units_loo(fit, units, _tail_length(S, r_eff), progress)
    y, k, p_i = elpd_u[inverse], k_u[inverse], (lppd_u - elpd_u)[inverse]
    total, var_total, var_y = srs_diff_est(approx, y, items_idx)
    m = y.size
    p_hat = N * float(p_i.mean())
    all_items = fit.data.item_index
    items = all_items[items_idx]
    bad = np.flatnonzero(k > PARETO_K_THRESHOLD)
    if warn and bad.size:
        _warn_bad(items, bad, among=" among the sampled items")
    return ELPD(
        kind="loo",
        elpd=float(total),
        se=float(np.sqrt(max(var_y, 0.0))),
        p=p_hat,
        elpd_i=pd.Series(y, index=items, name="elpd_loo_i"),
        pareto_k=pd.Series(k, index=items, name="pareto_k"),
        n_bad_k=int(bad.size),
        warning=bool(bad.size or np.any(k > _good_k(S))),
        n_samples=S,
        n_data_points=N,
        method="subsample",
        subsample_se=float(np.sqrt(var_total)) if m < N else 0.0,
        n_subsample=m,
        elpd_approx_i=pd.Series(approx, index=all_items, name="elpd_loo_approx_i"),
        r_eff=r_eff,
    )


def _loo_plan(fit: Any, method: str, budget: float) -> str:
    """``"exact"`` or ``"subsample"``: auto is exact when the (units x draws) log-likelihood fits the budget."""
    if method != "auto":
        return method
    return "exact" if 8.0 * _n_draws(fit) * fit.data.n_units <= budget else "subsample"


def _subsample_size(n_items: int, n_subsample: Any) -> int:
    if n_subsample is None:
        return min(DEFAULT_SUBSAMPLE, n_items)
    return min(check_int("n_subsample", n_subsample, 2), n_items)


def _kfold_on_split(fit: Any, seed: int, progress: bool | None) -> ELPD:
    """The fit's K-fold result on the split of ``DEFAULT_FOLDS`` folds seeded ``seed``, kept or computed.

    ``pyrater.kfold(fit)`` keeps its last result on the fit; it is reused only
    when it was computed on this split, so that every point fit of a
    comparison is scored on the same folds.
    """
    from .kfold import DEFAULT_FOLDS, kfold

    kept = fit.__dict__.get("_kfold_result")
    split = fit.__dict__.get("_kfold_params") or {}
    if kept is not None and split.get("k") == DEFAULT_FOLDS and split.get("seed") == seed:
        return kept
    return kfold(fit, DEFAULT_FOLDS, seed=seed, progress=progress)


def _default_seed(fit: Any) -> int:
    seed = (getattr(fit, "settings", None) or {}).get("seed")
    return int(seed) if isinstance(seed, (int, np.integer)) else 0


def loo(
    fit: Fit,
    warn: bool = True,
    *,
    method: str = "auto",
    n_subsample: int | None = None,
    seed: int | None = None,
    max_memory_gib: float | None = None,
    progress: bool | None = None,
) -> ELPD:
    """PSIS-LOO expected log predictive density, items as the unit.

    Parameters
    ----------
    fit : Fit
        A fit with posterior draws (``"gibbs"``, ``"mcmc"``, ``"pathfinder"``).
        Its per-item log-likelihood is read from the fit when kept, else
        recomputed from the pi and theta draws.
    warn : bool
        Warn, naming the items, when some Pareto k > 0.7.
    method : {"auto", "exact", "subsample"}
        ``"exact"``: every item, in chunks; ``"subsample"``: subsampling LOO
        with the difference estimator (see the module notes); ``"auto"``
        (default): exact when the whole ``items x draws`` log-likelihood
        (8 bytes a value) fits ``max_memory_gib``, else subsampling.
    n_subsample : int, optional
        Items computed exactly by subsampling LOO (default 2,000, or every
        item when there are fewer).
    seed : int, optional
        Seed of the subsample (default the fit's seed).
    max_memory_gib : float, optional
        Memory budget (default: the fit's ``max_memory_gib``, else 1 GiB).
    progress : bool, optional
        Progress bar (default: the fit's setting).

    Returns
    -------
    ELPD
        ``kind="loo"``: ``elpd``, ``se``, ``p``, pointwise ``elpd_i`` and
        ``pareto_k`` (Series over items; the sampled items when subsampled),
        ``n_bad_k``, the number of items with Pareto k > 0.7, for which the
        PSIS estimate is unreliable, and ``method``, ``subsample_se``,
        ``n_subsample``.  The result is also kept on the fit for
        :func:`compare`.

    Examples
    --------
    >>> res = pyrater.loo(fit)                      # doctest: +SKIP
    >>> res.method, res.elpd, res.se, res.subsample_se  # doctest: +SKIP
    """
    f: Any = _check_loo_input(fit)
    method = check_choice("method", method, ("auto", "exact", "subsample"))
    budget = _budget(f, max_memory_gib)
    n_items = f.data.n_items
    m = _subsample_size(n_items, n_subsample)
    seed = _default_seed(f) if seed is None else seed
    if progress is None:
        progress = bool(getattr(f, "_progress", True))
    plan = _loo_plan(f, method, budget)
    if plan == "exact" or m >= n_items and method == "auto":
        res = _loo_exact(f, budget, warn, progress)
    else:
        res = _loo_subsample(f, _subsample_items(n_items, m, seed), warn, progress)
    f.__dict__["_loo_result"] = res
    return res


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


#: units per block of WAIC's row statistics (each block's temporaries: 1024 x draws doubles)
_WAIC_ROWS = 1024


def waic(fit: Fit, *, max_memory_gib: float | None = None, progress: bool | None = None) -> ELPD:
    """WAIC (widely applicable information criterion) on the per-item log-likelihood.

    Computed by pyrater from the draws in item chunks (ArviZ 1.x has no
    WAIC); equal to ArviZ 0.x's ``az.waic``.  ``se = sqrt(N * var(elpd_i))``;
    ``n_bad_k`` counts items whose posterior variance of the log-likelihood
    exceeds 0.4, where WAIC is unreliable (prefer :func:`loo`).  Every item
    is computed (WAIC has no subsampling version here).

    Returns
    -------
    ELPD
        ``kind="waic"``, ``pareto_k=None``.
    """
    f: Any = _check_loo_input(fit)
    budget = _budget(f, max_memory_gib)
    if progress is None:
        progress = bool(getattr(f, "_progress", True))
    from .._quiet import progress_bar

    I = f.data.n_units
    S = _n_draws(f)
    if S < 2:
        raise ValueError(f"WAIC needs at least 2 posterior draws; the fit has {S}")
    step = _unit_chunks(f, budget)
    lppd, var = np.empty(I), np.empty(I)
    buf = np.empty((min(step, I), S))
    with progress_bar(progress, I, "WAIC", unit="unit") as bar:
        for lo in range(0, I, step):
            hi = min(I, lo + step)
            ll = f.log_lik_units((lo, hi), out=buf[: hi - lo])
            for a in range(0, hi - lo, _WAIC_ROWS):  # logsumexp and var make temporaries of their input's size
                rows = ll[a : a + _WAIC_ROWS]
                lppd[lo + a : lo + a + rows.shape[0]] = logsumexp(rows, axis=1) - np.log(S)
                var[lo + a : lo + a + rows.shape[0]] = np.var(rows, axis=1)
            bar.update(hi - lo)
    elpd_i, p_i = _expand(f, lppd - var), _expand(f, var)
    n = elpd_i.size
    n_bad = int((p_i > WAIC_VARIANCE_THRESHOLD).sum())
    return ELPD(
        kind="waic",
        elpd=float(elpd_i.sum()),
        se=float(np.sqrt(n * np.var(elpd_i))),
        p=float(p_i.sum()),
        elpd_i=pd.Series(elpd_i, index=f.data.item_index, name="elpd_waic_i"),
        pareto_k=None,
        n_bad_k=n_bad,
        warning=bool(n_bad),
        n_samples=S,
        n_data_points=n,
        n_subsample=n,
    )


def _same_data(a: Fit, b: Fit) -> bool:
    ka = getattr(a, "known", None)
    kb = getattr(b, "known", None)
    same_known = (ka is None and kb is None) or (
        ka is not None and kb is not None and np.array_equal(np.asarray(ka), np.asarray(kb))
    )
    da, db = a.data, b.data
    if da.is_grouped != db.is_grouped:
        # a family with per-item parameters (item_difficulty) fits grouped data expanded to its items, in
        # pattern order: the same items as the grouped fit's log_lik expanded by the tallies
        from ..models.item_difficulty import expand_to_items

        da, db = expand_to_items(da), expand_to_items(db)
    return da.equals(db) and same_known


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


#: bytes of Bayesian-bootstrap weights drawn at a time by :func:`pseudo_bma_plus_weights`
_PBMA_BLOCK_BYTES = 32 * 2**20


def pseudo_bma_plus_weights(elpd_i: np.ndarray, n_items: int | None = None, *, draws: int = 1000, seed: int = 0):
    """Pseudo-BMA+ weights (Yao et al. 2018): pseudo-BMA regularised by the Bayesian bootstrap, (N, M) -> (M,).

    For each of ``draws`` Bayesian-bootstrap draws ``a ~ Dirichlet(1, ..., 1)``
    over the N items, ``z_m = n_items * sum_i a_i elpd_i[i, m]`` and the
    weights are ``softmax(z)``; the result is their mean.  Unlike stacking,
    whose optimum is not unique when two models predict alike (it may put all
    the weight on either), these weights split evenly between models whose
    pointwise elpd agree, and move towards 1 for a model only as the evidence
    for it grows.  ``n_items`` (default N) scales sums over a sample of items
    to the whole data (subsampled LOO).  Seeded: the same table every time.
    """
    elpd_i = np.asarray(elpd_i, dtype=float)
    N, M = elpd_i.shape
    scale = float(N if n_items is None else n_items)
    rng = np.random.default_rng(seed)
    ones = np.ones(N)
    rows = max(1, _PBMA_BLOCK_BYTES // (8 * N))  # bootstrap draws per block: memory bounded at any N
    total = np.zeros(M)
    for start in range(0, draws, rows):
        a = rng.dirichlet(ones, size=min(rows, draws - start))  # (block, N): the same stream as one call
        z = scale * (a @ elpd_i)  # (block, M)
        z -= z.max(axis=1, keepdims=True)
        w = np.exp(z)
        w /= w.sum(axis=1, keepdims=True)
        total += w.sum(axis=0)
    return total / draws


#: the name of :func:`compare`'s majority-vote baseline row
BASELINE_NAME = "majority vote"

#: Beyond this (nats) an elpd difference is not "small" (Sivula, Magnusson, Matamoros & Vehtari 2020).
SMALL_ELPD_DIFF = 4.0


def equivalent_to_best(elpd_diff: float, dse: float) -> bool:
    """True when ``elpd_diff`` (<= 0) does not separate a model from the best.

    The difference is small (``> -4``) or within two of its standard errors:
    the rule of thumb of the LOO literature (Sivula et al. 2020; Vehtari's
    cross-validation FAQ).  The best model is equivalent to itself.
    """
    return bool(-elpd_diff < SMALL_ELPD_DIFF or -elpd_diff < 2.0 * dse)


#: Columns of :func:`compare`'s table, in order (``<ic>`` is ``loo`` or ``waic``).
COMPARE_COLUMNS = (
    "rank",
    "elpd_<ic>",
    "p_<ic>",
    "elpd_diff",
    "dse",
    "se",
    "weight",
    "weight_pbma",
    "equivalent",
    "warning",
    "n_bad_k",
)


def _positions(res: ELPD, fit: Any) -> np.ndarray:
    """Positions (0 .. N-1) of the items whose elpd ``res`` computed exactly."""
    if res.method != "subsample":  # exact LOO and K-fold: every item
        return np.arange(res.n_data_points)
    return fit.data.item_index.get_indexer(res.elpd_i.index)


def _approx(res: ELPD) -> np.ndarray:
    """Every item's elpd: exact values for exact LOO, the approximation for subsampled LOO."""
    if res.method != "subsample" or res.elpd_approx_i is None:
        return res.elpd_i.to_numpy()
    return res.elpd_approx_i.to_numpy()


def _diff(best: ELPD, other: ELPD, pos: dict[int, np.ndarray], ids: tuple[int, int]) -> tuple[float, float, float]:
    """``elpd(other) - elpd(best)``, its SE and its subsampling SE.

    Both exact: the paired pointwise differences (ArviZ's ``dse``).  Otherwise
    the difference estimator on the pointwise differences over the items both
    computed exactly, with the difference of the approximations for the rest
    (R's ``loo_compare`` for subsampled LOO); with no items in common, the
    naive combination of the two standard errors.
    """
    if best.method != "subsample" and other.method != "subsample":  # every item's elpd on both sides
        d = other.elpd_i.to_numpy() - best.elpd_i.to_numpy()
        return other.elpd - best.elpd, float(np.sqrt(d.size * np.var(d))), 0.0
    pb, po = pos[ids[0]], pos[ids[1]]
    common = np.intersect1d(pb, po)
    if common.size < 2:
        warnings.warn(
            "the two LOO results share fewer than 2 sampled items; the SE of elpd_diff combines the two SEs "
            "(compute both with the same n_subsample and seed, or let compare compute them)",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        return (
            other.elpd - best.elpd,
            float(np.hypot(best.se, other.se)),
            float(np.hypot(best.subsample_se, other.subsample_se)),
        )
    yb = pd.Series(best.elpd_i.to_numpy(), index=pb).loc[common].to_numpy()
    yo = pd.Series(other.elpd_i.to_numpy(), index=po).loc[common].to_numpy()
    total, var_total, var_y = srs_diff_est(_approx(other) - _approx(best), yo - yb, common)
    sub = float(np.sqrt(var_total)) if common.size < best.n_data_points else 0.0
    return total, float(np.sqrt(max(var_y, 0.0))), sub


def compare(
    fits: Mapping[str, Fit],
    ic: str = "loo",
    *,
    method: str | None = None,
    n_subsample: int | None = None,
    seed: int | None = None,
    max_memory_gib: float | None = None,
    baseline: bool = False,
    progress: bool | None = None,
) -> pd.DataFrame:
    """Rank fits by expected log predictive density, items as the unit.

    Everything each fit needs (posterior draws, the same data and known
    items, a log-likelihood kept or recomputable, valid arguments) is checked
    before any LOO is computed.

    Parameters
    ----------
    fits : dict
        ``{name: fit}``, at least two fits of the same data (and the same
        known items).  Fits with draws are compared by PSIS-LOO; point fits
        (EM, Stan's optimiser) by K-fold cross-validation over items
        (:func:`pyrater.kfold`, 10 folds on one seeded split shared by every
        point fit: 10 refits each; a result of ``pyrater.kfold(fit)`` is
        used when it was computed on that split, ``k=10`` and this
        ``seed``).  Both estimate the expected log predictive density of a
        new item's ratings, so they share one table; the ``method`` column
        says which each row is.
    ic : {"loo", "waic"}
    method : {"auto", "exact", "subsample"}, optional
        How to compute LOO for each fit (see :func:`loo`).  Default: the LOO
        already computed for a fit (``pyrater.loo(fit)`` keeps its last
        result) is used as it is; the missing ones are computed the same way
        (subsampled on the same items as an existing subsampled result), or,
        when none exists, exactly if every fit's ``items x draws``
        log-likelihood fits its memory budget and otherwise all by
        subsampling on one shared sample of items.
    n_subsample, seed, max_memory_gib
        As in :func:`loo`, for the LOO computed here (``seed`` also seeds the
        split of K-fold and the Bayesian bootstrap of ``weight_pbma``).
        Default seed 0, as :func:`pyrater.kfold`'s: the same split and
        subsample whatever the fits and their order.
    baseline : bool
        Add a row ``"majority vote"``: the vote model, majority vote's
        predictive counterpart, which ignores who rated
        (:mod:`pyrater.checking.vote_model`), scored by K-fold on the same
        split as the point fits.  A rating model that is not clearly better
        than it (``equivalent`` True, or ranked below it) gains nothing from
        modelling the raters.  Not with known items (the fits then score
        ``log p(y, z)`` of those items, the vote model cannot) and not with
        ``ic="waic"``.  With a baseline a single fit may be compared.
    progress : bool, optional
        Progress bars for the LOO and K-fold computed here (shown when a
        step takes more than 2 s).  Default: each fit's own setting for LOO,
        on for K-fold.

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
            from the paired pointwise differences (subsampled LOO: the
            difference estimator's, see :func:`loo`).
        ``weight``
            Stacking weights (Yao et al. 2018), summing to 1 (subsampled
            LOO: from the items every model computed exactly).  When two
            models predict alike stacking may give either all the weight:
            read ``weight_pbma`` and ``equivalent`` as well.
        ``weight_pbma``
            Pseudo-BMA+ weights (Yao et al. 2018; Bayesian bootstrap, 1,000
            draws, seeded), summing to 1: models that predict alike share
            the weight evenly.
        ``equivalent``
            True when the model's ``elpd_diff`` does not separate it from the
            best: smaller than 4 or than twice ``dse`` (Sivula et al. 2020).
        ``warning``
            True when the model's estimate is unreliable: for LOO some item
            has Pareto k > 0.7, for WAIC some item's posterior variance of the
            log-likelihood exceeds 0.4 (then prefer LOO).
        ``n_bad_k``
            How many items triggered ``warning``.

        When some LOO was computed by subsampling, three columns follow:
        ``method`` (``"exact"`` or ``"subsample"``), ``subsampling_se``
        (of ``elpd_loo``) and ``subsampling_dse`` (of ``elpd_diff``).
        ``table.attrs["method"]`` always says how each LOO was computed.
    """
    ic = check_choice("ic", ic, ("loo", "waic"))
    if not isinstance(fits, Mapping):
        raise TypeError(f"fits must be a dict {{name: fit}}, got {type(fits).__name__}")
    if not isinstance(baseline, (bool, np.bool_)):
        raise TypeError(f"baseline must be True or False, got {baseline!r}")
    if len(fits) < 2 - int(baseline):
        raise ValueError(f"compare needs at least two fits, got {len(fits)} (or one fit and baseline=True)")
    if baseline and ic == "waic":
        raise ValueError("the majority-vote baseline is scored by K-fold; use ic='loo' with baseline=True")
    if baseline and BASELINE_NAME in fits:
        raise ValueError(f"a fit is named {BASELINE_NAME!r}, the name of the baseline row; rename it")
    if method is not None:
        method = check_choice("method", method, ("auto", "exact", "subsample"))
    names = list(fits)
    point = [n for n in names if isinstance(fits[n], Fit) and not fits[n].has_draws]
    if point and ic == "waic":
        raise ValueError(
            f"WAIC needs posterior draws; {point[0]!r} is a point fit ({fits[point[0]].method}). Use ic='loo': "
            "point fits are then compared by K-fold cross-validation (pyrater.kfold)"
        )
    from .kfold import DEFAULT_FOLDS, _check_input

    for name in names:
        if name in point:
            try:
                _check_input(fits[name], DEFAULT_FOLDS)
            except (NotImplementedError, ValueError) as exc:
                raise type(exc)(f"fit {name!r}: {exc}") from None
        else:
            _check_loo_input(fits[name], name)
    first = fits[names[0]]
    for name in names[1:]:
        if not _same_data(first, fits[name]):
            raise ValueError(
                f"fits {names[0]!r} and {name!r} were made on different data (or different known items); "
                "LOO comparisons are only meaningful on the same data"
            )
    known = getattr(first, "known", None)
    if baseline and known is not None and np.any(np.asarray(known) >= 0):
        raise ValueError(
            "baseline=True needs fits without known items: they score log p(y, z) of a known item, which the vote "
            "model cannot"
        )
    n_items = first.data.n_items
    if baseline and n_items < DEFAULT_FOLDS:
        raise ValueError(
            f"baseline=True scores majority vote's vote model by {DEFAULT_FOLDS}-fold cross-validation over items, "
            f"which needs at least {DEFAULT_FOLDS} items; the data hold {n_items}"
        )
    budgets = {name: _budget(f, max_memory_gib) for name, f in fits.items()}
    m = _subsample_size(n_items, n_subsample)
    if seed is None:  # one fixed split and sample whatever the fits' order (not the first fit's seed)
        seed = 0

    if ic == "waic":
        results = {name: waic(f, max_memory_gib=max_memory_gib) for name, f in fits.items()}
    else:
        draws_names = [n for n in names if n not in point]
        found = {} if method is not None else {n: fits[n].__dict__.get("_loo_result") for n in draws_names}
        cached: dict[str, ELPD] = {n: r for n, r in found.items() if r is not None}
        shared = next((r for r in cached.values() if r.method == "subsample"), None)
        if shared is not None:
            sample = _positions(shared, fits[next(n for n, r in cached.items() if r is shared)])
            plan = "subsample"
        elif cached:
            sample, plan = None, "exact"
        else:
            plans = {_loo_plan(fits[n], method or "auto", budgets[n]) for n in draws_names}
            plan = "subsample" if "subsample" in plans and m < n_items else "exact"
            sample = _subsample_items(n_items, m, seed) if plan == "subsample" else None
        results = {}
        for name in names:
            f = fits[name]
            if name in point:  # a point fit: K-fold cross-validation over items, on the same folds for all
                results[name] = _kfold_on_split(f, seed, progress)
                continue
            if name in cached:
                results[name] = cached[name]
                continue
            show = bool(getattr(f, "_progress", True)) if progress is None else bool(progress)
            if plan == "exact":
                res = _loo_exact(f, budgets[name], False, show)
            else:
                assert sample is not None
                res = _loo_subsample(f, sample, False, show)
            f.__dict__["_loo_result"] = res
            results[name] = res

    if baseline:
        from .vote_model import vote_model_kfold

        results[BASELINE_NAME] = vote_model_kfold(first.data, DEFAULT_FOLDS, seed=seed)
        names.append(BASELINE_NAME)
    order = sorted(names, key=lambda n: -results[n].elpd)
    best = results[order[0]]
    pos = {i: _positions(results[n], fits.get(n, first)) for i, n in enumerate(order)}
    subsampled = any(r.method == "subsample" for r in results.values())
    if subsampled:
        common = pos[0]
        for i in range(1, len(order)):
            common = np.intersect1d(common, pos[i])
        pointwise = np.column_stack(
            [pd.Series(results[n].elpd_i.to_numpy(), index=pos[i]).loc[common].to_numpy() for i, n in enumerate(order)]
        )
    else:
        pointwise = np.column_stack([results[n].elpd_i.to_numpy() for n in order])
    weights = stacking_weights(pointwise)
    pbma = pseudo_bma_plus_weights(pointwise, n_items, seed=seed)
    rows = []
    for rank, name in enumerate(order):
        res = results[name]
        diff, dse, sub_dse = (0.0, 0.0, 0.0) if rank == 0 else _diff(best, res, pos, (0, rank))
        row: dict[str, Any] = {
            "rank": rank,
            f"elpd_{ic}": res.elpd,
            f"p_{ic}": res.p,
            "elpd_diff": diff,
            "dse": dse,
            "se": res.se,
            "weight": float(weights[rank]),
            "weight_pbma": float(pbma[rank]),
            "equivalent": equivalent_to_best(diff, dse),
            "warning": bool(res.warning),
            "n_bad_k": res.n_bad_k,
        }
        if subsampled:
            row.update(method=res.method, subsampling_se=res.subsample_se, subsampling_dse=sub_dse)
        elif point or baseline:
            row.update(method=res.method)
        rows.append(row)
    table = pd.DataFrame(rows, index=pd.Index(order))
    table.attrs["method"] = {n: results[n].method for n in order}
    return table
