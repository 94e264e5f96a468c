"""posterior_predict on grouped data: one class per item, and user designs (no Stan needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import posterior_predict


@pytest.fixture(scope="module")
def grouped_and_long():
    """400 items, 3 raters, 2 categories: at most 8 patterns; the same ratings in both forms."""
    sim = pyrater.simulate_dawid_skene(400, 3, pi=[0.6, 0.4], theta=np.array([[0.8, 0.2], [0.25, 0.75]]), seed=11)
    long = sim.data
    grouped = pyrater.RatingData.from_grouped(long.to_grouped(tally="n"), tally="n")
    assert grouped.n_units <= 8 and grouped.n_items == 400
    fit_long = pyrater.em(long, method="ml", seed=1)
    fit_grouped = pyrater.em(grouped, method="ml", seed=1)
    # the same estimate from both forms, so the replicates differ only by how z is drawn
    np.testing.assert_allclose(fit_grouped.pi, fit_long.pi, atol=1e-6)
    np.testing.assert_allclose(fit_grouped.theta, fit_long.theta, atol=1e-6)
    return fit_grouped, fit_long


def _share_per_draw(reps: pd.DataFrame, category) -> np.ndarray:
    return (reps["rating"] == category).groupby(reps["draw"]).mean().to_numpy()


def test_grouped_replicates_spread_like_long(grouped_and_long):
    """The replicated share of a category has the same sd from grouped and long data.

    With one z per pattern (the old bug) the sd was ~3 times larger.  With 400 replicates
    per form, the standard error of log(sd_grouped / sd_long) is about
    sqrt(2 / (2 * 399)) = 0.05, so the ratio lies within [0.8, 1.25] (|log| < 0.22, > 4 SE)
    unless the spreads really differ.
    """
    fit_grouped, fit_long = grouped_and_long
    n = 400
    reps_grouped = posterior_predict(fit_grouped, draws=n, seed=3)
    assert len(reps_grouped) == n * len(fit_grouped.data.to_long())
    sd_grouped = _share_per_draw(reps_grouped, 2).std(ddof=1)
    sd_long = _share_per_draw(posterior_predict(fit_long, draws=n, seed=4), 2).std(ddof=1)
    assert 0.8 < sd_grouped / sd_long < 1.25, (sd_grouped, sd_long)


def test_user_design_on_grouped_data_keeps_observed_items():
    """An item of an all-'2' pattern keeps its class (2), it is not treated as a new item."""
    theta = np.array([[0.95, 0.05], [0.05, 0.95]])
    sim = pyrater.simulate_dawid_skene(300, 4, pi=[0.85, 0.15], theta=theta, seed=5)
    grouped = pyrater.RatingData.from_grouped(sim.data.to_grouped(tally="n"), tally="n")
    fit = pyrater.em(grouped, method="ml", seed=1)
    table = grouped.to_grouped(tally="n")
    row = int(np.flatnonzero((table[list(grouped.rater_labels)].astype(float) == 2).all(axis=1))[0])
    item = int(grouped.weight[:row].sum()) + 1  # items are 1 .. n_items in pattern order
    design = pd.DataFrame({"item": [item] * 10 + ["new"] * 10, "rater": [1] * 20})
    reps = posterior_predict(fit, design=design, draws=200, seed=7)
    share = (reps["rating"] == 2).groupby(reps["item"].astype(str)).mean()
    # observed item: P(rating 2) = theta[1, 2, 2] ~ 0.95; a new item: ~ 0.85 * 0.05 + 0.15 * 0.95 ~ 0.19
    assert share[str(item)] > 0.85
    assert share["new"] < 0.35
    # labels given as text find the same item (type-blind, as elsewhere)
    text = posterior_predict(fit, design=pd.DataFrame({"item": [str(item)] * 10, "rater": [1] * 10}), draws=200, seed=7)
    assert (text["rating"] == 2).mean() > 0.85
