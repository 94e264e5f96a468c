"""Posterior predictive simulation: replicated ratings as a labelled table.

:func:`posterior_predict` draws replicated ratings: for posterior draw ``s``,
the true class of an observed item is drawn from ``P(z_i | y_i, pi_s,
theta_s)`` (so ``(pi_s, theta_s, z_s)`` is a draw from the joint posterior),
the class of a new item from ``pi_s``, and each rating from
``theta_s[rater, z]``.  One class is drawn per item: for grouped data the
items sharing a rating pattern share its class posterior but are drawn
independently (a multinomial split of the pattern's tally), so replicated
data have the same spread from grouped and long forms of the same ratings.
``design="new_items"`` replicates the observed design with every item new
(its class from ``pi_s``; see :mod:`pyrater.checking.replicate`).
For optimisation and EM fits the single estimate stands in for every draw (a plug-in predictive that ignores parameter
uncertainty; the returned frame's ``attrs["plug_in"]`` says so).

:func:`posterior_predictive_check` (in :mod:`pyrater.checking.ppc`, also
importable from here) compares statistics of the observed ratings with their
distribution over replicated data sets.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._validation import check_int, check_memory
from ..data.ratings import _encode
from ..fits.base import Fit
from .ppc import PPCResult, PPCResults, posterior_predictive_check
from .replicate import check_design, replicates

__all__ = ["posterior_predict", "posterior_predictive_check", "PPCResult", "PPCResults"]


def _design_codes(fit: Fit, design: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, pd.Index]:
    """The design as codes: one true class is drawn per design *item*.

    Returns
    -------
    item_unit : int array, shape (D,)
        For each distinct item of the design, its unit (the item itself for
        long and wide data, its rating pattern for grouped data), or -1 for
        a new item.
    item_of_row : int array, shape (R,)
        Index into ``item_unit`` of each design row.
    raters : int array, shape (R,)
        Rater code of each design row.
    labels : Index, length R
        Item label of each design row.

    Grouped data's items are labelled ``1 .. n_items`` in pattern order (as
    in :meth:`RatingData.to_long`); a user design naming such items keeps
    them as observed items of their pattern.
    """
    data = fit.data
    # the unit of every item the user can name: itself, or its pattern for grouped data
    unit_of_item = data.unit_of_item
    item_labels = data.item_index if data.is_grouped else data.unit_labels
    if design is None:
        if data.is_grouped:
            long = data.to_long()
            item_codes = long.iloc[:, 0].to_numpy() - 1
            raters = data.rater_labels.get_indexer(long.iloc[:, 1])
            return unit_of_item, item_codes, raters, pd.Index(long.iloc[:, 0])
        return unit_of_item, data.unit.copy(), data.rater.copy(), data.unit_labels[data.unit]
    if not isinstance(design, pd.DataFrame):
        raise TypeError(f"design must be a DataFrame with item and rater columns, got {type(design).__name__}")
    item_col, rater_col, _ = data.long_columns
    missing = [c for c in (item_col, rater_col) if c not in design.columns]
    if missing:
        raise ValueError(f"design is missing column(s) {missing}; columns are {list(design.columns)}")
    raters = data.rater_labels.get_indexer(pd.Index(design[rater_col]))
    if (raters < 0).any():
        bad = pd.unique(design[rater_col].to_numpy()[raters < 0]).tolist()
        raise ValueError(f"design column {rater_col!r} has raters {bad[:8]} not in the fitted data")
    items = pd.Index(design[item_col])
    item_of_row, distinct = pd.factorize(items)
    found = _encode(np.asarray(distinct, dtype=object), item_labels)  # exact, then type-blind ("7" finds 7)
    item_unit = np.where(found >= 0, unit_of_item[np.maximum(found, 0)], -1)
    return item_unit, item_of_row.astype(np.int64), raters, items


#: bytes a replicated rating takes in :func:`posterior_predict`'s result and its making (codes, labels, frame copies)
BYTES_PER_REPLICATED_RATING = 64


def _check_replicates_memory(fit: Fit, design: pd.DataFrame | None, draws: int, max_memory_gib: float | None) -> None:
    """``draws`` replicated data sets of the design, against ``max_memory_gib``, before any drawing."""
    data = fit.data
    rows = (data.n_ratings_total if data.is_grouped else data.n_ratings) if design is None else len(design)
    per_draw = BYTES_PER_REPLICATED_RATING * rows
    if fit.has_draws:  # the picked draws of pi and theta are copied
        per_draw += 8 * (data.n_categories + data.n_raters * data.n_categories**2)
    check_memory(
        f"{draws:,} replicated data sets of {rows:,} ratings",
        float(draws) * per_draw,
        max_memory_gib,
        ask=("draws", "design"),
        detail=f"{draws:,} draws x {per_draw:,} bytes",
    )


def posterior_predict(
    fit: Fit,
    design: pd.DataFrame | str | None = None,
    draws: int = 100,
    seed: int | None = None,
    *,
    max_memory_gib: float | None = None,
) -> pd.DataFrame:
    """Simulate ratings from the posterior predictive distribution.

    Parameters
    ----------
    fit : Fit
        Any fitted model (MCMC, optimisation or EM).
    design : DataFrame or {"same_items", "new_items"}, optional
        Rows of (item, rater) pairs to simulate, in the fitted data's column
        names; items not in the data are new items (class drawn from pi).
        Default (``None`` or ``"same_items"``): the observed design (every
        observed rating, repeats included), each item's class drawn from its
        posterior.  ``"new_items"``: the observed design with every item a
        new one (class drawn from pi; same raters and number of ratings per
        item).
        For grouped data the items are ``1 .. n_items`` in pattern order (as
        in ``fit.data.to_long()``); naming them keeps them observed items
        of their pattern.
    draws : int
        Number of replicated data sets (posterior draws, spread evenly over
        the chains; for point fits, replicates at the estimate).
    seed : int, optional
    max_memory_gib : float, optional
        The memory the replicates may take (default: the documented 1 GiB):
        about :data:`BYTES_PER_REPLICATED_RATING` bytes per replicated rating,
        ``draws * len(design)`` of them.  A larger request is refused before
        any drawing, naming fewer draws or a smaller design.

    Returns
    -------
    DataFrame
        Long: ``draw``, item, rater, rating (user labels; rating categorical),
        ``draws * len(design)`` rows.
    """
    replication = check_design(design) if isinstance(design, str) else "same_items"
    table = None if isinstance(design, str) else design
    draws = check_int("draws", draws, 1)
    _check_replicates_memory(fit, table, draws, max_memory_gib)
    rng = np.random.default_rng(seed)
    data = fit.data
    item_unit, item_of_row, raters, labels = _design_codes(fit, table)
    ratings = np.empty((draws, item_of_row.size), dtype=np.int64)
    for rep in replicates(fit, item_unit, item_of_row, raters, draws, rng, replication):
        ratings[rep.draw] = rep.ratings
    item_col, rater_col, rating_col = data.long_columns
    out = pd.DataFrame(
        {
            "draw": np.repeat(np.arange(draws), item_of_row.size),
            item_col: np.tile(np.asarray(labels, dtype=object), draws),
            rater_col: np.tile(data.rater_labels.to_numpy()[raters], draws),
            rating_col: pd.Categorical.from_codes(ratings.ravel(), categories=data.categories),
        }
    )
    out.attrs["plug_in"] = not fit.has_draws
    return out
