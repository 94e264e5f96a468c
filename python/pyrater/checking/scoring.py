"""Scoring class probabilities against gold labels, and a deterministic majority vote.

Two layers, as elsewhere in pyrater: a pure numpy core that works on integer
class codes ``0 .. K-1`` and ``(n, K)`` probability arrays, and a thin
labelled layer (:func:`score`, :func:`majority_vote`) that takes the user's
labels (a fit's :meth:`~pyrater.fits.base.Fit.class_probabilities` DataFrame
and a Series of gold labels) and aligns them.

Conventions
-----------
Predicted class
    ``argmax_k p[i, k]``; ties go to the first column (the first category in
    the data's order).  Pass ``pred=`` to score another rule's labels (e.g.
    majority vote with ``tie_break="prevalence"``).
Accuracy
    Share of items whose predicted class equals the truth.
    ``ties="split"`` gives fractional credit ``1/m`` when the truth is one of
    ``m`` tied top classes: the expected accuracy of breaking ties uniformly
    at random, which is what papers with random tie-breaking report on
    average.
Macro-F1
    Mean over classes of ``F1_k = 2 TP_k / (2 TP_k + FP_k + FN_k)`` over the
    classes that occur in the truth or in the predictions (or over
    ``labels``).  This equals the harmonic mean of precision and recall when
    both are defined and is 0 for a class never predicted correctly (the
    same value as scikit-learn's ``f1_score(average="macro",
    zero_division=0)``).
Brier score
    ``mean_i sum_k (p[i, k] - 1[y_i = k])^2``: the original multi-class score
    of Brier (1950), between 0 (perfect) and 2; for K = 2 it is twice the
    binary Brier score of either class.
Log-loss
    ``-mean_i log p[i, y_i]`` with ``p`` clipped below at ``eps = 1e-15``
    (so a confident error costs ``-log(1e-15) = 34.5`` nats rather than
    infinity; maximum-likelihood EM does produce exact zeros).
Expected calibration error (ECE)
    Top-label ECE (Guo et al. 2017): confidence ``c_i = max_k p[i, k]``,
    correctness ``a_i = 1[pred_i = y_i]``; items are put in ``n_bins = 15``
    bins and ``ECE = sum_b (n_b / n) |mean(a)_b - mean(c)_b|``.
    ``strategy="uniform"``: equal-width bins on ``[0, 1]``, bin ``b``
    (``b = 1 .. B``) holding ``((b-1)/B, b/B]`` and the first bin also ``0``;
    ``strategy="quantile"``: edges at the ``b/B`` quantiles of the
    confidences (numpy's linear interpolation), bin ``b`` holding
    ``[edge_b, edge_{b+1})``: nearly equal counts, but equal confidences
    always share a bin, so some bins may be empty.
    Empty bins contribute nothing.  Confidences lie in ``[1/K, 1]``.

Majority vote
-------------
Each rating counts once (a rater who rated an item twice votes twice).
Class probabilities are the vote shares.  The label is the category with
the most votes; ties are broken deterministically by ``tie_break``:
``"first"`` -- the first tied category in the data's category order;
``"prevalence"`` -- the tied category with the most ratings in the whole
data set (then the first).  Random tie-breaking (as in crowd-kit) is not
offered: it makes results irreproducible; use ``accuracy(..., ties="split")``
on the vote shares for its expected accuracy.

References
----------
G. W. Brier (1950). Verification of forecasts expressed in terms of
probability. *Monthly Weather Review* 78(1), 1-3.
C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger (2017). On calibration of modern
neural networks. *ICML*.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd

from .._validation import check_int
from ..data.ratings import RatingData, as_rating_data
from ..models.kernels import category_votes, soft_majority_vote

__all__ = [
    "accuracy",
    "macro_f1",
    "brier_score",
    "log_loss",
    "expected_calibration_error",
    "ece_noise_floor",
    "reliability_diagram",
    "predicted_class",
    "as_probabilities",
    "score_arrays",
    "score",
    "majority_vote",
    "MajorityVote",
    "METRICS",
    "LOG_LOSS_EPS",
    "N_BINS",
]

#: Lower clip of probabilities in :func:`log_loss`.
LOG_LOSS_EPS = 1e-15
#: Default number of bins of :func:`expected_calibration_error`.
N_BINS = 15
#: Keys of :func:`score_arrays` / :func:`score`, in order.
METRICS = ("n", "accuracy", "macro_f1", "ece", "brier", "log_loss")

TieBreak = Literal["first", "prevalence"]
_TIE_BREAKS = ("first", "prevalence")
_STRATEGIES = ("uniform", "quantile")


# ------------------------------------------------------------------ checks
def _probs(probs: np.ndarray) -> np.ndarray:
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"probs must be an (n, K) array with K >= 2; got shape {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("probs must hold finite, non-negative probabilities")
    bad = np.flatnonzero(np.abs(p.sum(axis=1) - 1.0) > 1e-6)
    if bad.size:
        raise ValueError(f"rows of probs must sum to 1; rows {bad[:8].tolist()} do not")
    return p


def _codes(y: np.ndarray, n: int | None = None, K: int | None = None, what: str = "y_true") -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional; got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.mod(arr, 1) == 0):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"{what} must hold integer class codes 0..K-1; got dtype {arr.dtype}")
    if n is not None and arr.size != n:
        raise ValueError(f"{what} has {arr.size} entries for {n} rows of probabilities")
    if arr.size and (arr.min() < 0 or (K is not None and arr.max() >= K)):
        raise ValueError(f"{what} codes must lie in 0..{'K-1' if K is None else K - 1}")
    return arr.astype(np.int64)


# ------------------------------------------------------------------ core
def predicted_class(probs: np.ndarray) -> np.ndarray:
    """``argmax_k p[i, k]``, ties to the first column."""
    return np.argmax(_probs(probs), axis=1)


def accuracy(
    y_true: np.ndarray,
    y_pred: np.ndarray | None = None,
    probs: np.ndarray | None = None,
    ties: Literal["first", "split"] = "first",
) -> float:
    """Share of items classified correctly.

    Parameters
    ----------
    y_true : int array (n,)
    y_pred : int array (n,), optional
        Predicted codes; default ``argmax`` of ``probs`` (ties to the first).
    probs : array (n, K), optional
        Needed when ``y_pred`` is not given, or with ``ties="split"``.
    ties : {"first", "split"}
        ``"split"``: fractional credit ``1/m`` when the truth is among ``m``
        classes tied at the maximum of ``probs`` (exact float equality): the
        expected accuracy of random tie-breaking.

    Examples
    --------
    >>> from pyrater.checking.scoring import accuracy
    >>> accuracy([0, 1, 1], [0, 1, 0])
    0.6666666666666666
    >>> accuracy([0, 1], probs=[[0.5, 0.5], [0.2, 0.8]], ties="split")
    0.75
    """
    if ties not in ("first", "split"):
        raise ValueError(f"ties must be 'first' or 'split', got {ties!r}")
    if ties == "split":
        if probs is None:
            raise ValueError("ties='split' needs probs")
        p = _probs(probs)
        y = _codes(y_true, p.shape[0], p.shape[1])
        top = p == p.max(axis=1, keepdims=True)
        return float(np.mean(top[np.arange(y.size), y] / top.sum(axis=1))) if y.size else float("nan")
    if y_pred is None:
        if probs is None:
            raise ValueError("give y_pred or probs")
        y_pred = predicted_class(probs)
    y = _codes(y_true)
    yp = _codes(y_pred, y.size, what="y_pred")
    return float(np.mean(y == yp)) if y.size else float("nan")


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, labels: np.ndarray | None = None) -> float:
    """Macro-averaged F1 over classes (see the module notes).

    Examples
    --------
    >>> from pyrater.checking.scoring import macro_f1
    >>> round(macro_f1([0, 0, 1, 1], [0, 1, 1, 1]), 4)   # F1 = 2/3 and 4/5
    0.7333
    """
    y = _codes(y_true)
    yp = _codes(y_pred, y.size, what="y_pred")
    if labels is None:
        labels = np.union1d(y, yp)
    labels = np.asarray(labels, dtype=np.int64)
    if labels.size == 0:
        return float("nan")
    f1 = []
    for k in labels:
        tp = np.sum((y == k) & (yp == k))
        fp = np.sum((y != k) & (yp == k))
        fn = np.sum((y == k) & (yp != k))
        den = 2 * tp + fp + fn
        f1.append(2 * tp / den if den > 0 else 0.0)
    return float(np.mean(f1))


def brier_score(y_true: np.ndarray, probs: np.ndarray) -> float:
    """Multi-class Brier score ``mean_i sum_k (p[i, k] - 1[y_i = k])^2`` (0 best, 2 worst)."""
    p = _probs(probs)
    y = _codes(y_true, p.shape[0], p.shape[1])
    d = p.copy()
    d[np.arange(y.size), y] -= 1.0
    return float(np.mean(np.sum(d * d, axis=1))) if y.size else float("nan")


def log_loss(y_true: np.ndarray, probs: np.ndarray, eps: float = LOG_LOSS_EPS) -> float:
    """Mean negative log probability of the true class, ``p`` clipped below at ``eps``."""
    p = _probs(probs)
    y = _codes(y_true, p.shape[0], p.shape[1])
    if y.size == 0:
        return float("nan")
    return float(-np.mean(np.log(np.maximum(p[np.arange(y.size), y], eps))))


def _bins(conf: np.ndarray, n_bins: int, strategy: str) -> np.ndarray:
    """Bin index (0 .. n_bins-1) of each confidence."""
    check_int("n_bins", n_bins, 1)
    if strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {_STRATEGIES}, got {strategy!r}")
    if strategy == "uniform":
        # bin b holds (edge[b], edge[b+1]] with edge[b] = b / B (a correctly rounded division, so a
        # confidence of exactly 0.7 lands in (0.6, 0.7]); 0 goes to the first bin
        edges = np.arange(n_bins + 1) / n_bins
        return np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, n_bins - 1)
    # equal-count bins: interior edges at the quantiles of the confidences; bin b holds
    # [edge[b], edge[b+1]) (the top bin also its upper edge), so equal confidences share a bin
    if conf.size == 0:
        return np.zeros(0, dtype=np.int64)
    inner = np.quantile(conf, np.arange(1, n_bins) / n_bins)
    return np.searchsorted(inner, conf, side="right").astype(np.int64)


def reliability_diagram(
    y_true: np.ndarray,
    probs: np.ndarray,
    n_bins: int = N_BINS,
    strategy: Literal["uniform", "quantile"] = "uniform",
    y_pred: np.ndarray | None = None,
) -> pd.DataFrame:
    """Data of a top-label reliability diagram, one row per bin.

    Returns
    -------
    DataFrame
        ``bin``, ``lower``, ``upper`` (bin edges; for ``"quantile"`` the
        smallest and largest confidence in the bin), ``count``,
        ``confidence`` (mean top probability), ``accuracy`` (share correct)
        and ``gap = accuracy - confidence``.  Empty bins have count 0 and
        NaN means.  ``sum(count / n * |gap|)`` is the ECE.
    """
    p = _probs(probs)
    y = _codes(y_true, p.shape[0], p.shape[1])
    pred = np.argmax(p, axis=1) if y_pred is None else _codes(y_pred, y.size, p.shape[1], "y_pred")
    conf = p[np.arange(y.size), pred]
    correct = (pred == y).astype(float)
    b = _bins(conf, n_bins, strategy)
    count = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mconf = np.bincount(b, weights=conf, minlength=n_bins) / count
        macc = np.bincount(b, weights=correct, minlength=n_bins) / count
    if strategy == "uniform":
        lower = np.arange(n_bins) / n_bins
        upper = np.arange(1, n_bins + 1) / n_bins
    else:
        lower = np.full(n_bins, np.nan)
        upper = np.full(n_bins, np.nan)
        has = count > 0
        lo = np.full(n_bins, np.inf)
        hi = np.full(n_bins, -np.inf)
        np.minimum.at(lo, b, conf)
        np.maximum.at(hi, b, conf)
        lower[has], upper[has] = lo[has], hi[has]
    return pd.DataFrame(
        {
            "bin": np.arange(n_bins),
            "lower": lower,
            "upper": upper,
            "count": count,
            "confidence": mconf,
            "accuracy": macc,
            "gap": macc - mconf,
        }
    )


def expected_calibration_error(
    y_true: np.ndarray,
    probs: np.ndarray,
    n_bins: int = N_BINS,
    strategy: Literal["uniform", "quantile"] = "uniform",
    y_pred: np.ndarray | None = None,
) -> float:
    """Top-label expected calibration error (see the module notes for the binning).

    Examples
    --------
    >>> from pyrater.checking.scoring import expected_calibration_error
    >>> round(expected_calibration_error([0, 1], [[0.9, 0.1], [0.8, 0.2]], n_bins=1), 6)  # |0.5 - 0.85|
    0.35
    >>> round(expected_calibration_error([0, 1], [[0.9, 0.1], [0.8, 0.2]], n_bins=10), 6)  # (0.1 + 0.8) / 2
    0.45
    """
    d = reliability_diagram(y_true, probs, n_bins, strategy, y_pred)
    n = d["count"].sum()
    if n == 0:
        return float("nan")
    has = d["count"] > 0
    return float(np.sum(d["count"][has] / n * np.abs(d["gap"][has])))


def ece_noise_floor(
    probs: np.ndarray,
    n_bins: int = N_BINS,
    strategy: Literal["uniform", "quantile"] = "uniform",
    reps: int = 200,
    seed: int | np.random.Generator | None = 0,
) -> float:
    """Expected ECE of perfectly calibrated probabilities on these items: the noise floor of ECE.

    ECE measured on a finite set of items is positive even for perfectly
    calibrated probabilities, and the more so the fewer the items.  This is
    its mean when each item's class is drawn from ``probs`` itself (``reps``
    draws), with the same bins as :func:`expected_calibration_error`.  A
    measured ECE near this value is within the noise of ECE on this many
    items.

    Parameters
    ----------
    probs : array (n, K)
        Class probabilities; rows summing to 1.
    n_bins, strategy
        As :func:`expected_calibration_error`.
    reps : int
        Number of label draws.
    seed : int, Generator or None
        Seed (or generator) of the draws.  Draw ``r`` uses the ``r``-th
        block of ``n`` uniforms, so a generator gives the same labels as
        ``reps`` successive ``rng.random(n)`` calls.

    Returns
    -------
    float
        NaN for no items.

    Examples
    --------
    >>> from pyrater.checking.scoring import ece_noise_floor
    >>> round(ece_noise_floor([[0.5, 0.5]] * 4, n_bins=1, reps=4000, seed=1), 2)  # E|Bin(4, 1/2)/4 - 1/2|
    0.19
    """
    p = _probs(probs)
    n: int = p.shape[0]  # (n, K): _probs checked the shape
    K: int = p.shape[1]
    check_int("reps", reps, 1)
    if n == 0:
        return float("nan")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    pred = np.argmax(p, axis=1)
    conf = p[np.arange(n), pred]
    b = _bins(conf, n_bins, strategy)
    count = np.bincount(b, minlength=n_bins)
    has = count > 0
    mconf = np.bincount(b, weights=conf, minlength=n_bins)[has] / count[has]
    cum = np.cumsum(p, axis=1)
    out = np.empty(reps)
    for r in range(reps):  # labels drawn by inversion, as many uniforms per draw as items
        y = np.minimum((rng.random(n)[:, None] > cum).sum(axis=1), K - 1)
        macc = np.bincount(b, weights=(y == pred).astype(float), minlength=n_bins)[has] / count[has]
        out[r] = np.sum(count[has] / n * np.abs(macc - mconf))
    return float(out.mean())


def score_arrays(
    y_true: np.ndarray,
    probs: np.ndarray,
    y_pred: np.ndarray | None = None,
    n_bins: int = N_BINS,
    labels: np.ndarray | None = None,
) -> dict[str, float]:
    """Every metric at once: ``n``, ``accuracy``, ``macro_f1``, ``ece``, ``brier``, ``log_loss``.

    ``y_pred`` defaults to the argmax of ``probs`` (ties to the first
    class); ``labels`` (class codes) is passed to :func:`macro_f1`.
    """
    p = _probs(probs)
    y = _codes(y_true, p.shape[0], p.shape[1])
    pred = np.argmax(p, axis=1) if y_pred is None else _codes(y_pred, y.size, p.shape[1], "y_pred")
    return {
        "n": int(y.size),
        "accuracy": accuracy(y, pred),
        "macro_f1": macro_f1(y, pred, labels),
        "ece": expected_calibration_error(y, p, n_bins, "uniform", pred),
        "brier": brier_score(y, p),
        "log_loss": log_loss(y, p),
    }


# --------------------------------------------------------- labelled layer
def _as_truth(truth: pd.Series | pd.DataFrame | dict) -> pd.Series:
    """Gold labels as a Series indexed by item.

    A DataFrame gives its ``item`` and ``label`` columns, else its only two
    columns (item, label), else its only column indexed by item.
    """
    if isinstance(truth, pd.Series):
        return truth
    if isinstance(truth, dict):
        return pd.Series(truth)
    if isinstance(truth, pd.DataFrame):
        cols = list(truth.columns)
        if "item" in cols and "label" in cols:
            item, label = "item", "label"
        elif len(cols) == 2:
            item, label = cols
        elif len(cols) == 1:
            return truth.iloc[:, 0]
        else:
            raise ValueError(
                f"truth DataFrame needs columns 'item' and 'label' (or exactly two columns: item, label); it has {cols}"
            )
        if truth[item].duplicated().any():
            dup = pd.unique(truth[item][truth[item].duplicated()])
            raise ValueError(f"truth gives items {list(dup[:8])} more than one gold label")
        return pd.Series(truth[label].to_numpy(), index=pd.Index(truth[item].to_numpy(), name=item), name=label)
    raise TypeError(f"truth must be a Series, dict or DataFrame (item, label); got {type(truth).__name__}")


def _align(probs: pd.DataFrame, truth: pd.Series | pd.DataFrame | dict, pred: pd.Series | None):
    if not isinstance(probs, pd.DataFrame):
        raise TypeError("probs must be a DataFrame, items x categories (e.g. fit.class_probabilities())")
    truth = _as_truth(truth)
    items = truth.index.intersection(probs.index, sort=False)
    missing = truth.index.difference(probs.index)
    if len(missing):
        raise ValueError(
            f"{len(missing)} gold items are not rows of probs (e.g. {list(missing[:5])}); "
            "score only items that were rated"
        )
    cats = pd.Index(probs.columns)
    y = cats.get_indexer(truth.loc[items].to_numpy())
    if (y < 0).any():
        bad = pd.unique(truth.loc[items].to_numpy()[y < 0])
        raise ValueError(f"gold labels {list(bad[:8])} are not among the categories {list(cats)}")
    p = probs.loc[items].to_numpy(dtype=float)
    yp = None
    if pred is not None:
        yp = cats.get_indexer(pred.loc[items].to_numpy())
        if (yp < 0).any():
            raise ValueError("pred holds labels that are not among the categories")
    return y, p, yp, len(cats)


def as_probabilities(fit_or_probs: Any) -> pd.DataFrame:
    """The class probabilities (items x categories) of a fit, or a DataFrame of them, checked.

    Raises
    ------
    TypeError
        For anything else, and for a distributed fit (whose probabilities are
        a Dask DataFrame: collect them first).
    ValueError
        Duplicated items, or rows that are not probability vectors.
    """
    if isinstance(fit_or_probs, pd.DataFrame):
        probs = fit_or_probs
    elif callable(getattr(fit_or_probs, "class_probabilities", None)):
        probs = fit_or_probs.class_probabilities()
        if not isinstance(probs, pd.DataFrame) and callable(getattr(probs, "compute", None)):
            raise TypeError(
                "fit.class_probabilities() is a Dask DataFrame (a distributed fit): collect it and pass it "
                "instead of the fit, e.g. calibrate(fit.class_probabilities().compute(), gold); the gold items must "
                "not be known= items of the fit (a DataFrame carries no record of them)"
            )
        if not isinstance(probs, pd.DataFrame):
            raise TypeError("fit.class_probabilities() did not return a DataFrame")
    else:
        raise TypeError(
            "fit_or_probs must be a fit with class_probabilities() or a DataFrame of class probabilities "
            f"(items x categories); got {type(fit_or_probs).__name__}"
        )
    if probs.index.has_duplicates:
        dup = probs.index[probs.index.duplicated()].unique()
        raise ValueError(f"the class probabilities have duplicated items {list(dup[:8])}")
    try:
        _probs(probs.to_numpy(dtype=float))
    except ValueError as exc:
        raise ValueError(f"fit_or_probs: {exc}") from None
    return probs


def score(
    probs: Any,
    truth: pd.Series | pd.DataFrame | dict,
    pred: pd.Series | None = None,
    n_bins: int = N_BINS,
) -> dict[str, float]:
    """Score class probabilities against gold labels, by the user's labels.

    Parameters
    ----------
    probs : fit or DataFrame
        A fit (any method; its :meth:`class_probabilities` are scored), or
        class probabilities, items x categories, e.g.
        ``majority_vote(data).class_probabilities()``.
    truth : Series, dict or DataFrame
        ``{item: true category}``, or a gold table with columns ``item`` and
        ``label`` (or exactly two columns, item then label); only these items
        are scored (every one must be a row of ``probs``).
    pred : Series, optional
        Predicted category per item (default: argmax of ``probs``, ties to
        the first category).
    n_bins : int
        Bins of the expected calibration error.

    Returns
    -------
    dict
        ``n``, ``accuracy``, ``macro_f1`` (over all K categories), ``ece``,
        ``brier``, ``log_loss``.
    """
    y, p, yp, K = _align(as_probabilities(probs), truth, pred)
    return score_arrays(y, p, yp, n_bins=n_bins, labels=np.arange(K))


# ------------------------------------------------------------ majority vote
class MajorityVote:
    """Result of :func:`majority_vote`.

    Attributes
    ----------
    labels : Series
        Winning category per item (user labels), ties broken by ``tie_break``.
    probabilities : DataFrame
        Vote shares, items x categories.
    n_tied : Series
        Number of categories tied at the top per item (1 = no tie).
    tie_break : str
    """

    def __init__(self, labels: pd.Series, probabilities: pd.DataFrame, n_tied: pd.Series, tie_break: str):
        self.labels = labels
        self.probabilities = probabilities
        self.n_tied = n_tied
        self.tie_break = tie_break

    def class_probabilities(self) -> pd.DataFrame:
        """Vote shares (same accessor name as the fits)."""
        return self.probabilities

    def point_estimate(self, which: str = "z") -> pd.Series:
        """The majority label per item (``which="z"`` only)."""
        if which != "z":
            raise ValueError("majority vote estimates only 'z' (the class of each item)")
        return self.labels

    def __repr__(self) -> str:
        units = "patterns" if self.labels.index.name == "pattern" else "items"  # grouped data: one row per pattern
        return (
            f"MajorityVote({len(self.labels)} {units}, {int((self.n_tied > 1).sum())} ties broken by "
            f"{self.tie_break!r})"
        )


def majority_vote(
    data: RatingData | pd.DataFrame,
    tie_break: TieBreak = "first",
    data_format: Literal["long", "wide", "grouped"] = "long",
) -> MajorityVote:
    """Majority vote with deterministic tie-breaking and vote-share probabilities.

    Parameters
    ----------
    data : RatingData or DataFrame
    tie_break : {"first", "prevalence"}
        ``"first"``: the first tied category in the data's category order
        (``data.categories``); ``"prevalence"``: the tied category rated
        most often in the whole data set, then the first.
    data_format : {"long", "wide", "grouped"}
        Format of a DataFrame ``data``.

    Returns
    -------
    MajorityVote
        ``labels``, ``probabilities`` (vote shares; ``1/K`` for an item with
        no ratings), ``n_tied``.

    Examples
    --------
    >>> import pyrater
    >>> import pandas as pd
    >>> df = pd.DataFrame({"item": [1, 1, 2, 2, 2], "rater": [1, 2, 1, 2, 3],
    ...                    "rating": ["b", "a", "b", "b", "a"]})
    >>> pyrater.majority_vote(df).labels.tolist()          # item 1 is a tie: "a" comes first
    ['a', 'b']
    """
    if tie_break not in _TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {_TIE_BREAKS}, got {tie_break!r}")
    data = as_rating_data(data, data_format)
    K = data.n_categories
    shares = soft_majority_vote(data.counts, K)
    # votes are integers; compare counts, not float shares, to find exact ties
    votes = category_votes(data.counts, K)
    top = votes == votes.max(axis=1, keepdims=True)
    if tie_break == "first":
        rank = np.arange(K)
    else:
        overall = np.bincount(data.rating, weights=data.weight[data.unit], minlength=K)
        rank = np.empty(K, dtype=np.int64)
        rank[np.lexsort((np.arange(K), -overall))] = np.arange(K)  # 0 = most rated
    # among the tied categories, the one with the smallest rank
    key = np.where(top, rank[None, :], K + 1)
    code = np.argmin(key, axis=1)
    cats = data.categories
    index = data.unit_labels.rename("pattern" if data.is_grouped else "item")
    return MajorityVote(
        labels=pd.Series(cats.to_numpy()[code], index=index, name="z"),
        probabilities=pd.DataFrame(shares, index=index, columns=pd.Index(list(cats), name="category")),
        n_tied=pd.Series(top.sum(axis=1), index=index, name="n_tied"),
        tie_break=tie_break,
    )
