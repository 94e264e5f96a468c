"""Replicated data sets as integer codes: the one drawing loop of posterior prediction.

For posterior draw ``s`` (``pi_s``, ``theta_s``), every item of the design
gets a true class and every design row a rating from ``theta_s[rater, z]``.
The two replication designs differ in the class of an observed item:

* ``"same_items"``: drawn from its posterior ``P(z_i | y_i, pi_s, theta_s)``
  (known classes stay fixed), so ``(pi_s, theta_s, z_s)`` is a draw from the
  joint posterior and the replicate re-rates the same items;
* ``"new_items"``: drawn afresh from ``pi_s``, so the replicate is a new set of
  items rated in the same pattern (same raters per item, same number of
  ratings).

Items of a user design that are not in the data are new items (class from
``pi_s``) in either design.  Fits with per-item parameters (the
item-difficulty family) draw their replicates in
:mod:`pyrater.checking.item_replicate`, new items with new item
parameters.  :func:`posterior_predict` turns the codes into a
labelled table; :func:`pyrater.posterior_predictive_check` computes its
statistics on them one replicate at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from .._validation import check_choice
from ..fits.base import Fit
from ..models.kernels import log_joint

__all__ = ["DESIGNS", "Replicate", "pick_parameters", "replicates"]

#: the replication designs of :func:`pyrater.posterior_predictive_check` (and :func:`posterior_predict`)
DESIGNS = ("same_items", "new_items")
Design = Literal["same_items", "new_items"]


def check_design(design: str) -> Design:
    """``design`` if it is a known replication design, else a ValueError listing them."""
    return check_choice("design", design, DESIGNS)


def _log(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(x)


def categorical(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One draw per row of ``probs`` (..., K) by inverse CDF; returns (...) codes."""
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random(probs.shape[:-1] + (1,)) * cdf[..., -1:]
    return np.minimum((u > cdf).sum(axis=-1), probs.shape[-1] - 1)


def pick_parameters(fit: Fit, draws: int) -> tuple[np.ndarray, np.ndarray]:
    """The draws of ``pi`` (draws, K) and ``theta`` (draws, J, K, K) the replicates use.

    Draws are spread evenly over the chains; a point fit repeats its estimate
    (a plug-in predictive).
    """
    if fit.has_draws:
        pi_all, theta_all = fit._draws()
        pick = np.linspace(0, pi_all.shape[0] - 1, draws).round().astype(int)
        return pi_all[pick], theta_all[pick]
    p, t = fit._point()
    return np.broadcast_to(p, (draws, *p.shape)), np.broadcast_to(t, (draws, *t.shape))


@dataclass(frozen=True, eq=False)
class Replicate:
    """One replicated data set of a design, as codes.

    Attributes
    ----------
    draw : int
        Index of the replicate (0 .. draws - 1).
    pi : array, shape (K,)
    theta : array, shape (J, K, K)
        The posterior draw it was simulated from.
    z_observed : array of int, shape (D,)
        A draw of each design item's class from its posterior given the
        observed data (``pi`` for items not in the data): with ``pi`` and
        ``theta``, a draw from the joint posterior.
    z : array of int, shape (D,)
        The classes the replicate was drawn with: ``z_observed`` for the
        ``"same_items"`` design, fresh draws from ``pi`` for ``"new_items"``.
    ratings : array of int, shape (R,)
        Rating code of every design row.
    """

    draw: int
    pi: np.ndarray
    theta: np.ndarray
    z_observed: np.ndarray
    z: np.ndarray
    ratings: np.ndarray


def replicates(
    fit: Fit,
    item_unit: np.ndarray,
    item_of_row: np.ndarray,
    raters: np.ndarray,
    draws: int,
    rng: np.random.Generator,
    design: Design = "same_items",
) -> Iterator[Replicate]:
    """Yield ``draws`` replicated data sets of a design, one at a time.

    Parameters
    ----------
    fit : Fit
    item_unit : int array, shape (D,)
        The unit (row of ``fit.data.counts``) of each design item, -1 for a new item.
    item_of_row : int array, shape (R,)
        Design item of each row.
    raters : int array, shape (R,)
        Rater code of each row.
    draws : int
    rng : numpy Generator
        Consumed in a fixed order, so a seed fixes every replicate.
    design : {"same_items", "new_items"}

    Yields
    ------
    Replicate
    """
    from ..fits.item_difficulty import ItemLevelMixin

    if isinstance(fit, ItemLevelMixin):  # per-item parameters: their own drawing loop
        from .item_replicate import item_replicates

        yield from item_replicates(fit, item_unit, item_of_row, raters, draws, rng, design)
        return
    data = fit.data
    pi, theta = pick_parameters(fit, draws)
    known = getattr(fit, "known", None)
    known_arr = None if known is None else np.asarray(known)
    observed = item_unit >= 0
    n_new = int((~observed).sum())
    for s in range(draws):
        lj = log_joint(data.counts, _log(pi[s]), _log(theta[s]))
        if known_arr is not None:
            rows = np.flatnonzero(known_arr >= 0)
            lj[rows] = -np.inf
            lj[rows, known_arr[rows]] = 0.0
        post = np.exp(lj - lj.max(axis=1, keepdims=True))
        # one class per item, independently given (pi_s, theta_s): for grouped data the
        # items of a pattern share its posterior but not its draw (a multinomial split)
        z_obs = np.empty(item_unit.size, dtype=np.int64)
        z_obs[observed] = categorical(rng, post[item_unit[observed]])
        z_obs[~observed] = categorical(rng, np.broadcast_to(pi[s], (n_new, pi.shape[1])))
        if design == "new_items":
            z = categorical(rng, np.broadcast_to(pi[s], (item_unit.size, pi.shape[1])))
        else:
            z = z_obs
        ratings = categorical(rng, theta[s][raters, z[item_of_row]])
        yield Replicate(draw=s, pi=pi[s], theta=theta[s], z_observed=z_obs, z=z, ratings=ratings)


def observed_design(fit: Fit) -> tuple[np.ndarray, np.ndarray, np.ndarray, pd.Index, np.ndarray, pd.Index]:
    """The observed data as a design with its ratings.

    Returns
    -------
    item_unit : int array, shape (D,)
    item_of_row : int array, shape (R,)
    raters : int array, shape (R,)
    labels : Index, length R
        Item label of each row.
    ratings : int array, shape (R,)
        Observed rating code of each row.
    item_labels : Index, length D
        Label of each design item (grouped data: ``1 .. n_items``).
    """
    data = fit.data
    if data.is_grouped:
        long = data.to_long()
        item_of_row = long.iloc[:, 0].to_numpy().astype(np.int64) - 1
        raters = data.rater_labels.get_indexer(long.iloc[:, 1])
        ratings = np.asarray(long.iloc[:, 2].cat.codes, dtype=np.int64)
        return data.unit_of_item, item_of_row, raters, pd.Index(long.iloc[:, 0]), ratings, data.item_index
    item_unit = np.arange(data.n_units, dtype=np.int64)
    return (
        item_unit,
        data.unit.astype(np.int64),
        data.rater.astype(np.int64),
        data.unit_labels[data.unit],
        data.rating.astype(np.int64),
        data.unit_labels,
    )
