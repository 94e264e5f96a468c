"""How much do the raters agree?  Classical agreement coefficients and the agreement a fit implies.

:func:`agreement` computes, from the ratings alone, the coefficients that
reviewers of rating studies expect -- percent agreement, Cohen's kappa (two
raters), Fleiss' kappa, Krippendorff's alpha and Gwet's AC1/AC2 -- for long,
wide and grouped data with missing ratings, each with a standard error and a
confidence interval.

:func:`model_agreement` answers the same question from a fitted model: each
rater's accuracy and chance-corrected agreement with the true class, and the
agreement between raters that ``pi`` and ``theta`` imply, with posterior
intervals for fits with draws.

References
----------
Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational
and Psychological Measurement* 20, 37-46.
Cohen, J. (1968). Weighted kappa. *Psychological Bulletin* 70, 213-220.
Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters.
*Psychological Bulletin* 76, 378-382.
Fleiss, J. L., Cohen, J. & Everitt, B. S. (1969). Large sample standard
errors of kappa and weighted kappa. *Psychological Bulletin* 72, 323-327.
Gwet, K. L. (2008). Computing inter-rater reliability and its variance in the
presence of high agreement. *Br. J. Math. Stat. Psychol.* 61, 29-48.
Gwet, K. L. (2014). *Handbook of Inter-Rater Reliability*, 4th ed.
Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability.
Annenberg School for Communication, University of Pennsylvania.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from . import _agreement_core as core

if TYPE_CHECKING:  # pragma: no cover
    from ..data.ratings import RatingData

__all__ = ["agreement", "AgreementResult", "model_agreement", "ModelAgreement", "STATISTICS"]

#: statistics computed by :func:`agreement`, in table order
STATISTICS = ("percent_agreement", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "gwet_ac")
_LEVEL_WEIGHTS = {"nominal": "identity", "ordinal": "ordinal", "interval": "quadratic", "ratio": "ratio"}
_CI = ("auto", "analytic", "bootstrap", "none")
_COLUMNS = [
    "weights",
    "estimate",
    "se",
    "ci_lower",
    "ci_upper",
    "ci_method",
    "observed",
    "expected",
    "n_items",
]


# --------------------------------------------------------------------------- helpers
def _seed_generator(seed: Any) -> np.random.Generator:
    """A Generator from ``seed``: an int in [0, 2**31), a Generator, or None (fixed seed 0)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng(0)
    from .._validation import check_seed  # internal: the package's one seed rule

    return np.random.default_rng(check_seed(seed))


def _check_prob(name: str, prob: Any) -> float:
    from .._validation import check_probability  # internal

    return check_probability(name, prob)


def _as_data(data: Any, data_format: Any, kwargs: dict) -> RatingData:
    from ..data.ratings import RatingData, as_rating_data, check_reader_options

    if not isinstance(data, (RatingData, pd.DataFrame)):
        raise TypeError(f"data must be a pyrater.RatingData or a pandas DataFrame, got {type(data).__name__}")
    own = [name for name in inspect.signature(agreement).parameters if name != "kwargs"]
    check_reader_options(data, data_format, kwargs, caller="pyrater.agreement", own=own)
    return as_rating_data(data, data_format=data_format, **kwargs)


def category_values(categories: pd.Index, values: Any, need_numeric: bool, why: str) -> np.ndarray:
    """Numeric value of each category: ``values`` if given, the labels if numeric, else ranks 1..K."""
    K = len(categories)
    if values is not None:
        if isinstance(values, dict):
            missing = [c for c in categories if c not in values]
            if missing:
                raise ValueError(f"values has no entry for categories {missing}")
            arr = np.array([values[c] for c in categories], dtype=float)
        else:
            arr = np.asarray(values, dtype=float)
        if arr.shape != (K,) or not np.all(np.isfinite(arr)):
            raise ValueError(f"values must give one finite number per category ({K}), got {values!r}")
        if len(np.unique(arr)) != K:
            raise ValueError(f"values must differ between categories, got {values!r}")
        return arr
    try:
        arr = np.asarray(categories, dtype=float)
        if np.all(np.isfinite(arr)) and len(np.unique(arr)) == K:
            return arr
    except (TypeError, ValueError):
        pass
    if need_numeric:
        raise ValueError(
            f"{why} needs numeric category values, but the categories {list(categories)} are not numbers; "
            "pass values=[...] (one number per category, in the order of the categories)"
        )
    return np.arange(1, K + 1, dtype=float)


def _weights(weights: Any, level: str, categories: pd.Index, values: Any) -> tuple[np.ndarray, str]:
    K = len(categories)
    if weights is None:
        weights = _LEVEL_WEIGHTS[level]
    if isinstance(weights, str):
        if weights not in core.WEIGHT_NAMES:
            raise ValueError(f"weights must be one of {core.WEIGHT_NAMES} or a (K, K) matrix, got {weights!r}")
        numeric = weights in ("linear", "quadratic", "radical", "ratio", "circular", "bipolar")
        vals = (
            category_values(categories, values, need_numeric=False, why=f"weights={weights!r}")
            if numeric
            else np.arange(1, K + 1.0)
        )
        if weights == "ratio" and np.any(vals <= 0):
            raise ValueError(f"ratio weights need positive category values, got {list(vals)}")
        return core.weight_matrix(weights, vals), weights
    W = np.asarray(weights, dtype=float)
    if W.shape != (K, K):
        raise ValueError(f"a weights matrix must have shape (K, K) = ({K}, {K}), got {W.shape}")
    if not np.all(np.isfinite(W)) or np.any(W < 0) or np.any(W > 1) or not np.allclose(np.diag(W), 1):
        raise ValueError("a weights matrix must hold numbers in [0, 1] with ones on the diagonal")
    return W.copy(), "custom"


# --------------------------------------------------------------------------- result
@dataclass(frozen=True)
class AgreementResult:
    """What :func:`agreement` returns.

    Attributes
    ----------
    table : DataFrame
        One row per statistic (index ``statistic``), columns ``weights``
        (agreement weights, or Krippendorff's distance), ``estimate``,
        ``se``, ``ci_lower``, ``ci_upper``, ``ci_method`` (how the interval
        and the standard error were obtained), ``observed`` and ``expected``
        (observed and chance agreement entering the coefficient) and
        ``n_items`` (items that entered it: for percent agreement the
        items with two or more ratings; for the chance-corrected
        coefficients every rated item, since an item with one rating enters
        their chance agreement; for Cohen's kappa the items both raters
        rated).
    level : str
        Level of measurement: ``"nominal"``, ``"ordinal"``, ``"interval"`` or ``"ratio"``.
    weights : DataFrame, shape (K, K)
        The agreement weights of the weighted coefficients.
    prob : float
        Confidence level of the intervals.
    n_items, n_raters, n_ratings : int
        Size of the data analysed (after selecting ``raters``).
    """

    table: pd.DataFrame
    level: str
    weights: pd.DataFrame
    prob: float
    n_items: int
    n_raters: int
    n_ratings: int
    notes: tuple[str, ...] = field(default=())

    def __getitem__(self, statistic: str) -> pd.Series:
        """The row of one statistic, e.g. ``result["fleiss_kappa"].estimate``."""
        if statistic not in self.table.index:
            raise KeyError(f"no statistic {statistic!r}; this result has {list(self.table.index)}")
        return self.table.loc[statistic]

    def to_frame(self) -> pd.DataFrame:
        """A copy of :attr:`table`."""
        return self.table.copy()

    def __str__(self) -> str:
        head = (
            f"Agreement of {self.n_raters} raters on {self.n_items} items ({self.n_ratings} ratings), "
            f"{self.level} level; {self.prob:.0%} intervals"
        )
        shown = self.table.drop(columns=["observed", "expected"])
        with pd.option_context("display.width", 140, "display.max_columns", 20):
            text = head + "\n" + shown.round(4).to_string()
        return "\n".join([text, *self.notes])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:  # pragma: no cover - notebook display
        return "<pre>" + str(self).replace("&", "&amp;").replace("<", "&lt;") + "</pre>"


# --------------------------------------------------------------------------- agreement
def agreement(
    data: RatingData | pd.DataFrame,
    statistics: Sequence[str] | str | None = None,
    *,
    level: Literal["nominal", "ordinal", "interval", "ratio"] = "nominal",
    weights: str | np.ndarray | None = None,
    values: Sequence[float] | dict | None = None,
    raters: Sequence[Any] | None = None,
    prob: float = 0.95,
    ci: Literal["auto", "analytic", "bootstrap", "none"] = "auto",
    n_boot: int = 2000,
    seed: int | np.random.Generator | None = None,
    data_format: Literal["long", "wide", "grouped"] = "long",
    **kwargs: Any,
) -> AgreementResult:
    """Agreement coefficients with standard errors and confidence intervals.

    Parameters
    ----------
    data : RatingData or DataFrame
        Ratings in any design, missing ratings allowed.  A DataFrame is read
        with ``data_format`` and ``**kwargs`` (:func:`pyrater.as_rating_data`).
    statistics : str or sequence of str, optional
        Any of ``"percent_agreement"``, ``"cohen_kappa"`` (exactly two
        raters), ``"fleiss_kappa"``, ``"krippendorff_alpha"``, ``"gwet_ac"``
        (AC1 unweighted, AC2 weighted).  Default: all of them, Cohen's kappa
        only when there are two raters.
    level : {"nominal", "ordinal", "interval", "ratio"}
        Level of measurement of the scale.  It sets Krippendorff's distance
        (nominal, ordinal, interval, ratio) and the default agreement
        weights of the other coefficients: identity (unweighted) for
        nominal, Gwet's ordinal weights (rank-based) for ordinal, quadratic
        for interval, ratio for ratio.
    weights : str or array (K, K), optional
        Agreement weights for percent agreement, Cohen's and Fleiss' kappa
        and Gwet's AC2, overriding the level's default: ``"identity"``,
        ``"linear"``, ``"quadratic"``, ``"ordinal"``, ``"radical"``,
        ``"ratio"``, ``"circular"``, ``"bipolar"`` (Gwet 2014, ch. 3) or a
        matrix with ones on the diagonal and entries in [0, 1].
    values : sequence or dict, optional
        Numeric value of each category for the interval and ratio distances
        and the value-based weights.  Default: the category labels when they
        are numbers; otherwise the interval and ratio levels need ``values``
        and value-based weights use the ranks ``1 .. K`` (as irrCAC does).
    raters : sequence, optional
        Use the ratings of these raters only (e.g. two raters for Cohen's kappa).
    prob : float
        Confidence level of the intervals (default 0.95, the convention of
        reliability studies; fits' posterior intervals default to 0.90).
    ci : {"auto", "analytic", "bootstrap", "none"}
        How standard errors and intervals are obtained.  ``"analytic"``:
        Fleiss, Cohen & Everitt's (1969) large-sample standard error and a
        normal interval for Cohen's kappa; Gwet's (2014) linearisation and a
        Student-t interval (``n - 1`` degrees of freedom) for the others.
        ``"bootstrap"``: ``n_boot`` resamples of the items (percentile
        interval, standard deviation of the replicates).  ``"auto"``
        (default): analytic, except for Krippendorff's ordinal alpha, whose
        distances depend on the data's marginal frequencies and which is
        bootstrapped.  ``"none"``: estimates only.  Upper limits are capped at 1.
    n_boot : int
        Bootstrap resamples (default 2000).
    seed : int or numpy Generator, optional
        Seed of the bootstrap.  None gives a fixed seed (0), so that a
        report can be reproduced; pass other seeds to see the Monte Carlo error.
    data_format : {"long", "wide", "grouped"}
        Format of a DataFrame ``data``.

    Returns
    -------
    AgreementResult
        ``result.table`` is a tidy DataFrame, one row per statistic;
        ``result["fleiss_kappa"]`` one row.

    Notes
    -----
    With missing ratings, items rated once still count in the classification
    probabilities of Fleiss' kappa and Gwet's AC, and only items rated at
    least twice enter the observed agreement (Gwet 2014); Krippendorff's
    alpha uses pairable values only; Cohen's kappa uses the items both raters
    rated.  A rater who rated an item several times contributes each rating
    (Cohen's kappa refuses such data).  Grouped data give the results of
    their expanded items.  Fleiss' and Krippendorff's coefficients are
    undefined (NaN) when every rating falls in one category.

    Examples
    --------
    >>> import pandas as pd, pyrater
    >>> wide = pd.DataFrame({"A": [1, 2, 3, 3, 2], "B": [1, 2, 3, 3, 1], "C": [1, 2, 3, None, 2]})
    >>> res = pyrater.agreement(wide, data_format="wide")
    >>> round(float(res["krippendorff_alpha"].estimate), 3)
    0.8
    """
    # ---- check the arguments before any work
    from .._validation import check_choice, check_int  # internal

    check_choice("level", level, core.LEVELS)
    check_choice("ci", ci, _CI)
    prob = _check_prob("prob", prob)
    n_boot = check_int("n_boot", n_boot, minimum=100)
    if statistics is None:
        wanted = None
    else:
        wanted = [statistics] if isinstance(statistics, str) else list(statistics)
        bad = [s for s in wanted if s not in STATISTICS]
        if bad or not wanted:
            raise ValueError(f"statistics must be among {STATISTICS}, got {statistics!r}")
    rng = _seed_generator(seed)
    d = _as_data(data, data_format, kwargs)

    # ---- select raters
    rater_codes = np.arange(d.n_raters)
    if raters is not None:
        labels = list(raters)
        codes = []
        for lab in labels:
            hit = np.flatnonzero(np.asarray(d.rater_labels == lab))
            if hit.size == 0:
                raise ValueError(f"raters: {lab!r} is not a rater of the data (raters: {list(d.rater_labels)[:20]})")
            codes.append(int(hit[0]))
        if len(set(codes)) != len(codes):
            raise ValueError(f"raters lists a rater twice: {labels!r}")
        rater_codes = np.asarray(codes)
    keep = np.isin(d.rater, rater_codes)
    unit, rater, rating = d.unit[keep], d.rater[keep], d.rating[keep]
    J = rater_codes.size
    if wanted is None:
        wanted = [s for s in STATISTICS if s != "cohen_kappa" or J == 2]
    if "cohen_kappa" in wanted and J != 2:
        raise ValueError(
            f"cohen_kappa needs exactly two raters, the data have {J}; choose two with raters=[a, b] "
            "(Fleiss' kappa, Krippendorff's alpha and Gwet's AC are the many-rater coefficients)"
        )

    K = d.n_categories
    cats = d.categories
    W, w_name = _weights(weights, level, cats, values)
    if values is None and (w_name != "identity" or level != "nominal"):  # the coefficient reads the categories' order
        d.check_scale_order(f"agreement(level={level!r}, weights={w_name!r})")
    vals = None
    if "krippendorff_alpha" in wanted and level in ("interval", "ratio"):
        vals = category_values(cats, values, need_numeric=True, why=f"Krippendorff's alpha at the {level} level")
        if level == "ratio" and np.any(vals < 0):
            raise ValueError(f"the ratio level needs non-negative category values, got {list(vals)}")

    # ---- per-unit counts
    N = core.category_counts(unit, rating, d.n_units, K)
    wts = d.weight.astype(float)
    r = N.sum(axis=1)
    if not np.any((r >= 2) & (wts > 0)):
        raise ValueError("no item has two or more ratings (after selecting raters): agreement is undefined")
    n_items = int(wts[r >= 1].sum())

    rows: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for stat in wanted:
        if stat == "cohen_kappa":
            row = _cohen(unit, rater, rating, rater_codes, d, wts, W, w_name, K, prob, ci, n_boot, rng)
        else:
            row = _multi(stat, N, wts, W, w_name, level, vals, cats, K, prob, ci, n_boot, rng)
        rows[stat] = row
    table = pd.DataFrame.from_dict(rows, orient="index")[_COLUMNS]
    table.index.name = "statistic"
    if table["estimate"].isna().any():
        notes.append("NaN: the coefficient is undefined (e.g. all ratings in one category).")
    return AgreementResult(
        table=table,
        level=level,
        weights=pd.DataFrame(
            W, index=pd.Index(list(cats), name="category"), columns=pd.Index(list(cats), name="category")
        ),
        prob=prob,
        n_items=n_items,
        n_raters=int(J),
        n_ratings=int(np.sum(wts[unit])),
        notes=tuple(notes),
    )


def _row(
    est: core.Estimate,
    w_name: str,
    ci_bounds: tuple[float, float],
    ci_method: str,
    se: float,
    lower_cap: float | None = None,
) -> dict[str, Any]:
    lo, hi = ci_bounds
    if np.isfinite(hi):
        hi = min(hi, 1.0)
    if lower_cap is not None and np.isfinite(lo):
        lo = max(lo, lower_cap)
    return {
        "weights": w_name,
        "estimate": est.estimate,
        "se": se,
        "ci_lower": lo,
        "ci_upper": hi,
        "ci_method": ci_method,
        "observed": est.observed,
        "expected": est.expected,
        "n_items": int(round(est.n_units)),
    }


def _boot_interval(reps: np.ndarray, prob: float) -> tuple[tuple[float, float], float]:
    reps = reps[np.isfinite(reps)]
    if reps.size < 10:
        return (np.nan, np.nan), np.nan
    a = (1 - prob) / 2
    lo, hi = np.quantile(reps, [a, 1 - a])
    return (float(lo), float(hi)), float(np.std(reps, ddof=1))


def _multi(stat, N, wts, W, w_name, level, vals, cats, K, prob, ci, n_boot, rng) -> dict[str, Any]:
    lower_cap = 0.0 if stat == "percent_agreement" else None
    if stat == "krippendorff_alpha":
        name = f"{level} distance"
        if level == "ordinal":
            # distances from the pairable marginals of the data (Krippendorff 2011)
            F = core.features("alpha_ordinal", N, None)
            ranks = np.arange(1, K + 1.0)

            def fin(S):
                return core.finalize("alpha_ordinal", S, None, K, values=ranks)

            marg = (wts @ F)[2 + K * K :]
            Wa = core.weights_from_distance(core.krippendorff_distance("ordinal", ranks, marg))
        else:
            Wa = core.weights_from_distance(
                core.krippendorff_distance(level, vals if vals is not None else np.arange(1, K + 1.0))
            )
            F = None

            def fin(S):
                return core.finalize("alpha", S, Wa, K)

        est = core.krippendorff_alpha(N, wts, Wa)
        kind = "alpha"
        analytic_ok = level != "ordinal"
        analytic_label = "Gwet (2014) linearisation, t" + ("" if analytic_ok else " (distances held fixed)")
    else:
        name = w_name
        fn = {"percent_agreement": core.percent_agreement, "fleiss_kappa": core.fleiss_kappa, "gwet_ac": core.gwet_ac}[
            stat
        ]
        est = fn(N, wts, W)
        kind = {"percent_agreement": "pa", "fleiss_kappa": "fleiss", "gwet_ac": "ac"}[stat]
        F = None
        Wa = W

        def fin(S):
            return core.finalize(kind, S, W, K)

        analytic_ok = True
        analytic_label = "Gwet (2014) linearisation, t"
    use_boot = ci == "bootstrap" or (ci == "auto" and not analytic_ok)
    if ci == "none" or not np.isfinite(est.estimate):
        return _row(est, name, (np.nan, np.nan), "none", np.nan)
    if use_boot:
        if F is None:
            F = core.features(kind, N, Wa)
        keep = N.sum(axis=1) >= 1
        reps = core.bootstrap(kind, F[keep], wts[keep], n_boot, rng, fin)
        bounds, se = _boot_interval(reps, prob)
        return _row(est, name, bounds, f"bootstrap percentile ({n_boot} item resamples)", se, lower_cap)
    bounds = core.t_interval(est.estimate, est.se, est.df, prob)
    return _row(est, name, bounds, analytic_label, est.se, lower_cap)


def _cohen(unit, rater, rating, rater_codes, d, wts, W, w_name, K, prob, ci, n_boot, rng) -> dict[str, Any]:
    a, b = rater_codes
    U = d.n_units
    got = np.full((2, U), -1, dtype=np.int64)
    for row_, code in enumerate((a, b)):
        sel = rater == code
        units = unit[sel]
        per_unit = np.bincount(units, minlength=U)
        if per_unit.max(initial=0) > 1:
            dup = d.unit_labels[np.flatnonzero(per_unit > 1)]
            shown = ", ".join(str(u) for u in dup[:5]) + (", ..." if len(dup) > 5 else "")
            raise ValueError(
                f"cohen_kappa needs one rating per rater and item; rater {d.rater_labels[code]} rated "
                f"{len(dup)} items more than once (items {shown}); keep one rating per item, or use "
                "fleiss_kappa, krippendorff_alpha or gwet_ac, which take every rating"
            )
        got[row_, units] = rating[sel]
    both = (got[0] >= 0) & (got[1] >= 0) & (wts > 0)
    cell = got[0, both] * K + got[1, both]
    table = np.bincount(cell, weights=wts[both], minlength=K * K).reshape(K, K)
    est = core.cohen_kappa(table, W)
    if ci == "none" or not np.isfinite(est.estimate):
        return _row(est, w_name, (np.nan, np.nan), "none", np.nan)
    if ci == "bootstrap":
        F = np.zeros((int(both.sum()), K * K))
        F[np.arange(F.shape[0]), cell] = 1.0

        def fin(S):
            return core.finalize("cohen", S, W, K)

        reps = core.bootstrap("cohen", F, wts[both], n_boot, rng, fin)
        bounds, se = _boot_interval(reps, prob)
        return _row(est, w_name, bounds, f"bootstrap percentile ({n_boot} item resamples)", se)
    bounds = core.z_interval(est.estimate, est.se, prob)
    return _row(est, w_name, bounds, "Fleiss, Cohen & Everitt (1969), normal", est.se)


# --------------------------------------------------------------------------- model-based
@dataclass(frozen=True)
class ModelAgreement:
    """What :func:`model_agreement` returns.

    Attributes
    ----------
    raters : DataFrame
        One row per rater: ``accuracy`` (``sum_k pi_k theta[j, k, k]``,
        weighted if weights were given) and ``kappa`` (Cohen's kappa between
        the rater and the true class), each as ``<name>``, ``<name>_se``,
        ``<name>_lower``, ``<name>_upper``.
    panel : DataFrame
        One row per statistic the model implies for two distinct raters
        drawn from the panel rating the same item: ``percent_agreement``,
        ``fleiss_kappa`` (equal to Krippendorff's alpha for many items) and
        ``gwet_ac``; columns ``estimate``, ``se``, ``ci_lower``, ``ci_upper``.
    pairs : DataFrame or None
        One row per pair of raters: implied ``agreement`` and ``cohen_kappa``
        with intervals (for at most ``max_pairs_raters`` raters).
    prob : float
        Posterior probability of the intervals.
    n_draws : int
        Draws used (0 for a point-estimate fit, whose intervals are NaN).
    ci_method : str
    """

    raters: pd.DataFrame
    panel: pd.DataFrame
    pairs: pd.DataFrame | None
    prob: float
    n_draws: int
    ci_method: str

    def to_frame(self) -> pd.DataFrame:
        """All statistics in one tidy long table: statistic, rater, rater2, estimate, se, ci_lower, ci_upper."""
        parts = []
        for stat in ("accuracy", "kappa"):
            t = self.raters[[stat, f"{stat}_se", f"{stat}_lower", f"{stat}_upper"]].copy()
            t.columns = ["estimate", "se", "ci_lower", "ci_upper"]
            t.insert(0, "statistic", f"rater_{stat}")
            t.insert(1, "rater", self.raters.index)
            t.insert(2, "rater2", None)
            parts.append(t.reset_index(drop=True))
        p = self.panel.reset_index().rename(columns={"index": "statistic"})
        p.insert(1, "rater", None)
        p.insert(2, "rater2", None)
        parts.append(p)
        if self.pairs is not None:
            for stat in ("agreement", "cohen_kappa"):
                t = self.pairs.reset_index()[
                    ["rater", "rater2", stat, f"{stat}_se", f"{stat}_lower", f"{stat}_upper"]
                ].copy()
                t.columns = ["rater", "rater2", "estimate", "se", "ci_lower", "ci_upper"]
                t.insert(0, "statistic", f"pair_{stat}")
                parts.append(t)
        out = pd.concat(parts, ignore_index=True)
        out["ci_method"] = self.ci_method
        return out

    def __str__(self) -> str:
        with pd.option_context("display.width", 140, "display.max_columns", 20, "display.max_rows", 40):
            return (
                f"Agreement implied by the model ({self.ci_method}"
                f"{f'; {self.prob:.0%} intervals' if self.n_draws else ''})\n"
                f"Raters:\n{self.raters.round(3).to_string()}\nPanel:\n{self.panel.round(3).to_string()}"
            )

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:  # pragma: no cover
        return "<pre>" + str(self).replace("&", "&amp;").replace("<", "&lt;") + "</pre>"


def implied_agreement(pi: np.ndarray, theta: np.ndarray, W: np.ndarray, pairs: bool) -> dict[str, np.ndarray]:
    """Population agreement statistics implied by ``pi`` and ``theta``, vectorised over draws.

    Parameters
    ----------
    pi : array, shape (S, K)
    theta : array, shape (S, J, K, K)
    W : array, shape (K, K)
    pairs : bool
        Also return the (S, J, J) pairwise agreement and kappa.

    Returns
    -------
    dict of arrays
        ``accuracy`` (S, J), ``kappa`` (S, J), ``percent_agreement``,
        ``fleiss_kappa``, ``gwet_ac`` (S,), and ``pair_agreement``,
        ``pair_kappa`` (S, J, J) when asked.
    """
    S, J, K, _ = theta.shape
    q = np.einsum("sk,sjkl->sjl", pi, theta)  # each rater's marginal rating distribution
    acc = np.einsum("sk,sjkl,kl->sj", pi, theta, W)
    pe_truth = np.einsum("sk,sjl,kl->sj", pi, q, W)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = (acc - pe_truth) / (1 - pe_truth)
    # mean agreement over ordered pairs of distinct raters:
    # sum_{j != j'} sum_k pi_k theta_jk' W theta_j'k = sum_k pi_k (T_k' W T_k - sum_j theta_jk' W theta_jk)
    T = theta.sum(axis=1)  # (S, K, K): sum over raters
    tot = np.einsum("sk,skl,lm,skm->s", pi, T, W, T)
    own = np.einsum("sk,sjkl,lm,sjkm->s", pi, theta, W, theta)
    po = (tot - own) / (J * (J - 1))
    qbar = q.mean(axis=1)
    pe_f = np.einsum("sl,lm,sm->s", qbar, W, qbar)
    pe_g = W.sum() / (K * (K - 1)) * np.sum(qbar * (1 - qbar), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "accuracy": acc,
            "kappa": kappa,
            "percent_agreement": po,
            "fleiss_kappa": (po - pe_f) / (1 - pe_f),
            "gwet_ac": (po - pe_g) / (1 - pe_g),
        }
        if pairs:
            A = np.einsum("sk,sjkl,lm,sikm->sji", pi, theta, W, theta)
            pe = np.einsum("sjl,lm,sim->sji", q, W, q)
            out["pair_agreement"] = A
            out["pair_kappa"] = (A - pe) / (1 - pe)
    return out


def _summarise(x: np.ndarray, prob: float, has_draws: bool) -> tuple[np.ndarray, ...]:
    """Mean, sd and central interval over the leading draw axis (NaN spread for point estimates)."""
    est = x.mean(axis=0)
    if not has_draws:
        nan = np.full_like(est, np.nan)
        return est, nan, nan, nan
    a = (1 - prob) / 2
    lo, hi = np.quantile(x, [a, 1 - a], axis=0)
    return est, x.std(axis=0, ddof=1), lo, hi


def model_agreement(
    fit: Any,
    *,
    weights: str | np.ndarray | None = None,
    values: Sequence[float] | dict | None = None,
    prob: float = 0.9,
    n_draws: int | None = None,
    seed: int | np.random.Generator | None = None,
    max_pairs_raters: int = 30,
) -> ModelAgreement:
    """Rater accuracy and the agreement implied by a fitted model, with posterior intervals.

    For rater ``j`` with error matrix ``theta[j]`` and class prevalence ``pi``:

    * accuracy ``a_j = sum_k pi_k sum_l theta[j, k, l] W[k, l]`` (``W`` the
      identity unless weights are given: the share of items rated correctly);
    * kappa with the truth ``(a_j - e_j) / (1 - e_j)`` with
      ``e_j = sum_{k, l} pi_k q_j[l] W[k, l]`` and ``q_j = pi' theta[j]`` the
      rater's marginal rating distribution (Cohen's kappa between the rater
      and the true class);
    * for two distinct raters on the same item, agreement
      ``A_jj' = sum_k pi_k theta[j, k]' W theta[j', k]`` (ratings are
      independent given the class), its mean over pairs ``P_o``, and the
      chance-corrected ``(P_o - P_e) / (1 - P_e)`` with Fleiss' ``P_e =
      qbar' W qbar`` and Gwet's ``P_e = T_W / (K (K - 1)) sum_l qbar_l (1 -
      qbar_l)``, ``qbar`` the mean of the raters' marginals.  These are the
      population values the classical coefficients of :func:`agreement`
      estimate when every item is rated by raters drawn evenly from the panel.

    Parameters
    ----------
    fit : pyrater fit
        Any fit that answers ``point_estimate("pi"|"theta")`` with theta of
        dims (rater, category, rating); fits with draws
        (``fit.has_draws``) also ``posterior_samples``.
    weights, values
        Agreement weights, as in :func:`agreement` (default unweighted).
    prob : float
        Posterior probability of the central intervals (default 0.90, as the
        fits' ``posterior_interval``).
    n_draws : int, optional
        Use a random subset of this many draws (default all).
    seed : int or Generator, optional
        For the subset of draws.
    max_pairs_raters : int
        The pairwise table is computed when there are at most this many raters.

    Returns
    -------
    ModelAgreement
        Estimates are posterior means (point estimates for fits without
        draws, whose standard errors and intervals are NaN).
    """
    if not hasattr(fit, "point_estimate") or not hasattr(fit, "data"):
        raise TypeError(f"fit must be a pyrater fit (with point_estimate and data), got {type(fit).__name__}")
    prob = _check_prob("prob", prob)
    from .._validation import check_int  # internal

    if n_draws is not None:
        n_draws = check_int("n_draws", n_draws, minimum=2)
    max_pairs_raters = check_int("max_pairs_raters", max_pairs_raters, minimum=2)
    d = fit.data
    W, w_name = _weights(weights, "nominal", d.categories, values)
    pi, theta, has_draws = fit_parameters(fit, n_draws, _seed_generator(seed))
    J = theta.shape[1]
    if J < 2:
        raise ValueError("model_agreement needs at least two raters")
    pairs = J <= max_pairs_raters
    res = implied_agreement(pi, theta, W, pairs)
    raters_idx = pd.Index(list(d.rater_labels), name="rater")
    cols: dict[str, np.ndarray] = {}
    for stat in ("accuracy", "kappa"):
        est, se, lo, hi = _summarise(res[stat], prob, has_draws)
        cols[stat], cols[f"{stat}_se"], cols[f"{stat}_lower"], cols[f"{stat}_upper"] = est, se, lo, hi
    raters_tab = pd.DataFrame(cols, index=raters_idx)
    panel_rows = {}
    for stat in ("percent_agreement", "fleiss_kappa", "gwet_ac"):
        est, se, lo, hi = _summarise(res[stat], prob, has_draws)
        panel_rows[stat] = {"estimate": float(est), "se": float(se), "ci_lower": float(lo), "ci_upper": float(hi)}
    panel = pd.DataFrame.from_dict(panel_rows, orient="index")
    panel.index.name = "statistic"
    pairs_tab = None
    if pairs:
        ja, jb = np.triu_indices(J, k=1)
        pcols: dict[str, Any] = {"rater": d.rater_labels[ja], "rater2": d.rater_labels[jb]}
        for stat, key in (("agreement", "pair_agreement"), ("cohen_kappa", "pair_kappa")):
            est, se, lo, hi = _summarise(res[key][:, ja, jb], prob, has_draws)
            pcols[stat], pcols[f"{stat}_se"], pcols[f"{stat}_lower"], pcols[f"{stat}_upper"] = est, se, lo, hi
        pairs_tab = pd.DataFrame(pcols).set_index(["rater", "rater2"])
    method = (
        f"posterior mean, sd and central interval over {pi.shape[0]} draws"
        if has_draws
        else f"point estimate of the {getattr(fit, 'method', 'point')} fit: no draws, no standard errors or intervals"
    )
    if w_name != "identity":
        method += f"; {w_name} weights"
    return ModelAgreement(raters_tab, panel, pairs_tab, prob, int(pi.shape[0]) if has_draws else 0, method)


def fit_parameters(fit: Any, n_draws: int | None, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, bool]:
    """``pi`` (S, K) and ``theta`` (S, J, K, K) of a fit: draws when it has them, else its point estimate (S = 1).

    A theta of dims (category, rating) (one matrix for all raters) is broadcast to every rater.
    """
    d = fit.data
    J, K = d.n_raters, d.n_categories
    has_draws = bool(getattr(fit, "has_draws", False))
    if has_draws:
        pi = np.asarray(fit.posterior_samples("pi").values, dtype=float)
        theta = np.asarray(fit.posterior_samples("theta").values, dtype=float)
        if n_draws is not None and n_draws < pi.shape[0]:
            idx = np.sort(rng.choice(pi.shape[0], size=n_draws, replace=False))
            pi, theta = pi[idx], theta[idx]
    else:
        pi = np.asarray(fit.point_estimate("pi"), dtype=float)[None]
        theta = np.asarray(fit.point_estimate("theta"), dtype=float)[None]
    if theta.ndim == 3:  # one matrix shared by all raters
        theta = np.broadcast_to(theta[:, None], (theta.shape[0], J, K, K))
    if theta.shape[1:] != (J, K, K) or pi.shape[1:] != (K,):
        raise ValueError(
            f"the fit's theta must have shape (rater, category, rating) = ({J}, {K}, {K}) and pi ({K},); "
            f"got {theta.shape[1:]} and {pi.shape[1:]}"
        )
    return pi, np.ascontiguousarray(theta), has_draws
