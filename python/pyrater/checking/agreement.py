"""Held-out rater agreement: how often an item's label, inferred without one of its ratings, matches that rating.

The expected log predictive density (:func:`pyrater.kfold`, PSIS-LOO) scores
how well a model predicts *all* of a new item's ratings; a model can win there
by learning each rater's leanings and still label fewer items right.  This
criterion scores the labels.  For every rating ``y_ij`` of a held-out item:

1. the item's class is inferred from its *other* ratings, with the
   parameters estimated without the item (the K-fold refits of
   :func:`pyrater.kfold`, one shared split):
   ``P(z_i = k | y_i without y_ij) ∝ pi_k prod_{(j', l) != (j, y_ij)} theta[j', k, l]``;
2. the most probable class (ties share the credit) is compared with the held-out
   rating ``y_ij``.

An item's agreement ``a_i`` is the share of its ratings so matched; the
criterion is the mean over items with at least two ratings (items with fewer
have no other rating to label them from).  Majority vote's counterpart takes
the most frequent of the other ratings (no parameters, so nothing to refit).

Why it tracks accuracy: for a rater right with probability ``q`` whose errors
spread evenly over the other categories, and a label right with probability
``acc`` whose errors are independent of that rater's given the true class,
``P(label = rating) = acc q + (1 - acc)(1 - q)/(K - 1)``, increasing in
``acc`` whenever ``q > 1/K``.  So among labelling rules scored on the same
held-out ratings, the one that agrees more with raters who are better than
chance is, in expectation, the more accurate one.  The raters' leanings enter
every candidate alike (they are in the held-out ratings, not in the labels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.ratings import RatingData
from ..fits.base import Fit

__all__ = ["Agreement", "label_agreement", "vote_agreement", "held_out_agreement"]


@dataclass(frozen=True)
class Agreement:
    """Held-out agreement of one labelling rule with the ratings.

    Attributes
    ----------
    agreement : float
        Mean over the scored items of ``a_i``, the share of the item's ratings
        matched by the class inferred from its other ratings.
    information : float
        Plug-in conditional mutual information (nats per rating) between the
        held-out label and the held-out rating given the rater
        (:func:`pointwise_information`).
    a_i : Series
        Per item (NaN where the item has fewer than two ratings or a known class).
    info_i : Series
        Per item, the sum of its ratings' pointwise information (0 where not scored).
    n_ratings : float
        Ratings scored (the denominator of ``information``).
    table : array, shape (J, K, K)
        ``table[j, k, l]``: rater j's scored ratings ``l`` whose held-out label is ``k``.
    """

    agreement: float
    information: float
    a_i: pd.Series
    info_i: pd.Series
    n_ratings: float
    table: np.ndarray


def _flat_log_theta(theta: np.ndarray) -> np.ndarray:
    """``log theta`` laid out as (J*K ratings, K classes): row ``j*K + l`` is ``log theta[j, :, l]``."""
    J, K, _ = theta.shape
    with np.errstate(divide="ignore"):
        return np.log(theta).transpose(0, 2, 1).reshape(J * K, K)


def held_out_labels(counts: sp.csr_matrix, pi: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, ...]:
    """For every stored rating of the units, the class inferred from the unit's other ratings.

    Parameters
    ----------
    counts : sparse matrix, shape (U, J*K)
        The units' rating counts (column ``j*K + l``: rater j's ratings of category l).
    pi : array, shape (K,)
    theta : array, shape (J, K, K)
        The parameters the classes are inferred with (estimated without these units).

    Returns
    -------
    unit, col, n : arrays, shape (R,)
        Each stored count: its unit, its column ``j*K + l`` and how many ratings it holds.
    label : array, shape (R, K)
        The most probable class given the unit's other ratings, one-hot (ties share: ``1/ties`` each).
    """
    counts = sp.csr_matrix(counts)
    lt = _flat_log_theta(theta)
    with np.errstate(divide="ignore"):
        lp = np.log(pi)
    joint = np.asarray(counts @ lt) + lp[None, :]  # (U, K): log p(y_u, z_u = k)
    unit = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    col, n = counts.indices, counts.data.astype(float)
    with np.errstate(invalid="ignore"):
        rest = joint[unit] - lt[col]  # one copy of the rating removed
    return unit, col, n, _top(np.where(np.isnan(rest), -np.inf, rest))


def held_out_vote_labels(counts: sp.csr_matrix, K: int) -> tuple[np.ndarray, ...]:
    """Majority vote's counterpart of :func:`held_out_labels`: the most frequent of the unit's other ratings."""
    from ..models.kernels import category_votes

    counts = sp.csr_matrix(counts)
    votes = category_votes(counts, K)  # (U, K)
    unit = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
    col, n = counts.indices, counts.data.astype(float)
    rest = votes[unit].copy()
    rest[np.arange(col.size), col % K] -= 1.0
    return unit, col, n, _top(rest)


def _top(score: np.ndarray) -> np.ndarray:
    top = (score >= score.max(axis=1, keepdims=True)).astype(float)
    return top / top.sum(axis=1, keepdims=True)


def label_agreement(counts: sp.csr_matrix, pi: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Per unit, the share of its ratings matched by the class inferred from its other ratings (NaN: < 2 ratings)."""
    unit, col, n, label = held_out_labels(counts, pi, theta)
    K = pi.size
    return _per_unit(unit, n, label[np.arange(col.size), col % K], counts.shape[0])


def vote_agreement(counts: sp.csr_matrix, K: int) -> np.ndarray:
    """Majority vote's counterpart of :func:`label_agreement` (ties share the credit)."""
    unit, col, n, label = held_out_vote_labels(counts, K)
    return _per_unit(unit, n, label[np.arange(col.size), col % K], counts.shape[0])


def _per_unit(unit: np.ndarray, n: np.ndarray, hit: np.ndarray, U: int) -> np.ndarray:
    total = np.bincount(unit, weights=n, minlength=U)
    matched = np.bincount(unit, weights=n * hit, minlength=U)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = matched / total
    a[total < 2] = np.nan
    return a


def pointwise_information(col: np.ndarray, n: np.ndarray, label: np.ndarray, K: int, J: int) -> np.ndarray:
    """Pointwise mutual information between held-out label and rating, given the rater, per stored rating.

    With ``N[j, k, l]`` the (count-weighted) number of rater j's ratings ``l``
    whose held-out label is ``k``, a rating's value is
    ``sum_k label[k] log(N[j, k, l] n_j / (N[j, k, .] N[j, ., l]))``; their
    count-weighted mean is the plug-in conditional mutual information
    ``I(label; rating | rater)``.
    """
    j, rating = col // K, col % K
    by_rating = np.zeros((J, K, K))  # [j, l, k]
    np.add.at(by_rating, (j, rating), n[:, None] * label)
    N = by_rating.transpose(0, 2, 1)
    n_j = N.sum(axis=(1, 2))
    row = N.sum(axis=2)  # (J, K): label margin
    column = N.sum(axis=1)  # (J, K): rating margin
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(N * n_j[:, None, None]) - np.log(row)[:, :, None] - np.log(column)[:, None, :]
    with np.errstate(invalid="ignore"):
        terms = label * pmi[j, :, rating]  # (R, K); a zero label share contributes nothing
    return np.where(label > 0, terms, 0.0).sum(axis=1)


def _collect(
    data: RatingData, item_of_rating: np.ndarray, col: np.ndarray, n: np.ndarray, label: np.ndarray
) -> Agreement:
    """Both statistics from every scored rating (its item, column, count and held-out label)."""
    K, J = data.n_categories, data.n_raters
    n_items = int(np.asarray(data.weight).sum())
    hit = label[np.arange(col.size), col % K]
    total = np.bincount(item_of_rating, weights=n, minlength=n_items)
    matched = np.bincount(item_of_rating, weights=n * hit, minlength=n_items)
    scored = total >= 2
    keep = scored[item_of_rating]
    a_i = np.full(n_items, np.nan)
    a_i[scored] = matched[scored] / total[scored]
    pmi = pointwise_information(col[keep], n[keep], label[keep], K, J)
    by_rating = np.zeros((J, K, K))  # [j, l, k]
    np.add.at(by_rating, (col[keep] // K, col[keep] % K), n[keep, None] * label[keep])
    table = np.ascontiguousarray(by_rating.transpose(0, 2, 1))
    info_i = np.bincount(item_of_rating[keep], weights=n[keep] * pmi, minlength=n_items)
    n_ratings = float(n[keep].sum())
    index = data.item_index
    return Agreement(
        agreement=float(a_i[scored].mean()) if scored.any() else float("nan"),
        information=float(info_i.sum() / n_ratings) if n_ratings else float("nan"),
        a_i=pd.Series(a_i, index=index, name="agreement"),
        info_i=pd.Series(info_i, index=index, name="information"),
        n_ratings=n_ratings,
        table=table,
    )


def _expand(data: RatingData, units: np.ndarray, items: np.ndarray, parts: tuple[np.ndarray, ...]):
    """Per-unit ratings ``parts`` (unit index into ``units``) repeated for each of ``items`` (their units' items)."""
    unit, col, n, label = parts
    # item -> position of its unit in `units`; each item gets a copy of its unit's ratings
    pos = np.searchsorted(units, data.unit_of_item[items])
    starts = np.searchsorted(unit, np.arange(units.size))
    ends = np.searchsorted(unit, np.arange(units.size), side="right")
    lengths = (ends - starts)[pos]
    idx = np.concatenate([np.arange(starts[p], ends[p]) for p in pos]) if pos.size else np.zeros(0, dtype=np.int64)
    return np.repeat(items, lengths), col[idx], n[idx], label[idx]


def vote_held_out_agreement(data: RatingData) -> Agreement:
    """Majority vote's held-out agreement and information on every item of ``data``."""
    units = np.arange(data.n_units)
    parts = held_out_vote_labels(data.counts, data.n_categories)
    items = np.arange(int(np.asarray(data.weight).sum()))
    return _collect(data, *_expand(data, units, items, parts))


def held_out_agreement(fit: Fit) -> Agreement:
    """Held-out agreement and information of a point fit, on the folds of its :func:`pyrater.kfold` (run first).

    Parameters
    ----------
    fit : EMFit or OptimizeFit
        A fit on which :func:`pyrater.kfold` has run (its refits' estimates are reused).

    Returns
    -------
    Agreement
        Items with a known class or fewer than two ratings are not scored.
    """
    folds = fit.__dict__.get("_kfold_params")
    if folds is None:
        raise ValueError("held_out_agreement needs the fit's K-fold refits: run pyrater.kfold(fit) first")
    data = fit.data
    unit_of_item = data.unit_of_item
    given = getattr(fit, "known", None)
    known = None if given is None else np.asarray(given)[unit_of_item] >= 0
    pieces = []
    for f, (pi, theta) in enumerate(folds["params"]):
        items = np.flatnonzero(folds["fold"] == f)
        if known is not None:
            items = items[~known[items]]
        units = np.unique(unit_of_item[items])
        pieces.append(_expand(data, units, items, held_out_labels(data.counts[units], pi, theta)))
    return _collect(data, *(np.concatenate(p) for p in zip(*pieces, strict=True)))
