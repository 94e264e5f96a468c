"""posterior_predictive_check: vector statistics, discrepancies, p-values, designs, results, errors (no Stan needed)."""

from __future__ import annotations

import warnings

import matplotlib
import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import posterior_predict, posterior_predictive_check
from pyrater.checking import Discrepancy, Statistic, category_shares, pair_agreement, vote_histogram
from pyrater.checking.ppc import PPCResult, PPCResults, tail_probabilities

matplotlib.use("Agg")
import matplotlib.pyplot as plt


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _gibbs(data, seed: int = 1):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a short run may warn about Rhat
        return pyrater.fit(data, "dawid_skene", method="gibbs", chains=2, draws=500, seed=seed, progress=False)


@pytest.fixture(scope="module")
def ds_fit():
    """Dawid-Skene fit to 800 items simulated from Dawid-Skene (5 raters, 2 classes, categories 1 and 2)."""
    theta = np.array([[0.85, 0.15], [0.2, 0.8]])
    sim = pyrater.simulate_dawid_skene(800, 5, pi=np.array([0.6, 0.4]), theta=theta, seed=3)
    return _gibbs(sim.data)


def _mixed_difficulty(n: int = 400, n_raters: int = 5, seed: int = 1) -> pd.DataFrame:
    """Half the items easy (every rater 97% right), half impossible (every rater flips a coin)."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, 2 * n)
    item = np.repeat(np.arange(2 * n), n_raters)
    rater = np.tile(np.arange(n_raters), 2 * n)
    right = np.where(item < n, rng.random(item.size) < 0.97, False)
    rating = np.where(item < n, np.where(right, z[item], 1 - z[item]), rng.integers(0, 2, item.size))
    return pd.DataFrame({"item": item, "rater": rater, "rating": rating})


@pytest.fixture(scope="module")
def misfit_fit():
    """Dawid-Skene fitted to items of two difficulties (not a Dawid-Skene model)."""
    return _gibbs(_mixed_difficulty())


@pytest.fixture(scope="module")
def em_fit():
    return pyrater.em(pyrater.datasets.anesthesia(), method="map")


def _votes_frame(df: pd.DataFrame) -> np.ndarray:
    """The vote histogram of category 2 from the long table (the slow, DataFrame route)."""
    positive = (df["rating"].cat.codes == 1).groupby(df["item"], sort=False).sum().to_numpy()
    return np.bincount(positive, minlength=6)


# ------------------------------------------------------------------ one set of replicates
def test_vector_statistic_equals_its_components_checked_one_by_one(ds_fit):
    vector = posterior_predictive_check(ds_fit, vote_histogram(2), draws=60, seed=4)
    assert isinstance(vector, PPCResult) and not vector.is_scalar
    assert vector.simulated.shape == (60, 6) and vector.observed.shape == (6,)
    assert list(vector.components) == list(range(6))
    hist = vote_histogram(2)
    for b in range(6):
        one = posterior_predictive_check(ds_fit, Statistic(lambda r, b=b: hist(r)[b], name=f"bin{b}"), draws=60, seed=4)
        assert one.is_scalar and one.observed == vector.observed[b]
        np.testing.assert_array_equal(one.simulated, vector.simulated[:, b])
        assert (one.p_value, one.p_lower, one.p_two_sided) == (
            vector.p_value[b],
            vector.p_lower[b],
            vector.p_two_sided[b],
        )
    # the DataFrame route (a plain function, as before) gives the same numbers
    frame = posterior_predictive_check(ds_fit, _votes_frame, draws=60, seed=4)
    np.testing.assert_array_equal(frame.simulated, vector.simulated)
    np.testing.assert_array_equal(frame.observed, vector.observed)


def test_several_statistics_share_one_set_of_replicates(ds_fit):
    stats = {"votes": vote_histogram(2), "shares": category_shares(), "agree": pair_agreement(), "frame": _votes_frame}
    given = dict(stats)
    res = posterior_predictive_check(ds_fit, stats, draws=40, seed=5)
    assert stats == given  # nothing the user passed is changed
    assert isinstance(res, PPCResults) and list(res) == ["votes", "shares", "agree", "frame"]
    np.testing.assert_array_equal(res["votes"].simulated, res["frame"].simulated)
    alone = posterior_predictive_check(ds_fit, pair_agreement(), draws=40, seed=5)
    # the statistics asked for do not change the replicates
    np.testing.assert_array_equal(alone.simulated, res["agree"].simulated)
    assert list(res["shares"].components) == [1, 2]
    np.testing.assert_allclose(res["shares"].simulated.sum(axis=1), 1.0)
    table = res.to_frame()
    assert table.index.names == ["statistic", "component"] and len(table) == 6 + 2 + 1 + 6
    as_list = posterior_predictive_check(ds_fit, [vote_histogram(2), pair_agreement()], draws=40, seed=5)
    assert list(as_list) == ["votes_2", "pair_agreement"]


def test_same_items_is_the_default_and_draws_what_posterior_predict_draws(em_fit):
    reps = posterior_predict(em_fit, draws=30, seed=8)
    codes = reps["rating"].cat.codes
    by_draw = (codes == 0).groupby(reps["draw"]).mean().to_numpy()
    res = posterior_predictive_check(em_fit, lambda df: float((df["rating"].cat.codes == 0).mean()), draws=30, seed=8)
    np.testing.assert_allclose(res.simulated, by_draw)
    assert res.design == "same_items" and res.plug_in


# ------------------------------------------------------------------ p-values and intervals
def test_p_values_and_intervals_against_brute_force(ds_fit):
    res = posterior_predictive_check(ds_fit, vote_histogram(2), draws=80, seed=6, probs=(0.5, 0.9))
    sims, obs = res.simulated, res.observed
    for b in range(sims.shape[1]):
        upper = sum(s >= obs[b] for s in sims[:, b]) / 80
        lower = sum(s <= obs[b] for s in sims[:, b]) / 80
        assert res.p_value[b] == pytest.approx(upper) and res.p_lower[b] == pytest.approx(lower)
        assert res.p_two_sided[b] == pytest.approx(min(1.0, 2 * min(upper, lower)))
        lo, hi = np.quantile(sims[:, b], [0.05, 0.95])
        assert tuple(res.interval(0.9)[b]) == pytest.approx((lo, hi))
        assert res.covers(0.9)[b] == (lo <= obs[b] <= hi)
    frame = res.to_frame()
    assert {"observed", "p_upper", "p_lower", "p_two_sided", "q5%", "q95%", "q25%", "q75%", "covered_90%"} <= set(
        frame.columns
    )
    assert res.covered == bool(res.covers(0.9).all())  # the widest of probs by default


def test_two_sided_p_value_properties():
    rng = np.random.default_rng(0)
    rep = rng.integers(0, 5, size=(1000, 4)).astype(float)  # discrete: many ties
    obs = np.array([0.0, 2.0, 4.0, 9.0])
    upper, lower, two = tail_probabilities(rep, obs)
    tie = np.mean(rep == obs, axis=0)
    np.testing.assert_allclose(upper + lower, 1 + tie)  # ties count in both tails
    np.testing.assert_allclose(two, np.minimum(1, 2 * np.minimum(upper, lower)))
    assert ((0 <= two) & (two <= 1)).all() and two[1] == 1.0  # the median: both tails > 1/2, capped at 1
    assert two[3] == 0.0 and upper[3] == 0.0 and lower[3] == 1.0
    # symmetric: reflecting replicates and observed swaps the tails, keeps the two-sided value
    u2, l2, t2 = tail_probabilities(-rep, -obs)
    np.testing.assert_allclose(u2, lower)
    np.testing.assert_allclose(l2, upper)
    np.testing.assert_allclose(t2, two)


# ------------------------------------------------------------------ replication designs
def test_new_items_covers_the_vote_histogram_of_data_simulated_from_the_model(ds_fit):
    res = posterior_predictive_check(ds_fit, vote_histogram(2), draws=200, seed=2, design="new_items")
    assert res.design == "new_items"
    assert res.covered  # every bin inside the 1%-99% band
    assert res.covers(0.98).all() and res.p_two_sided.min() > 0.1


def test_new_items_flags_dawid_skene_on_items_of_varying_difficulty(misfit_fit):
    res = posterior_predictive_check(misfit_fit, vote_histogram(1), draws=200, seed=2, design="new_items")
    assert not res.covered
    outside = set(np.asarray(res.components)[~res.covers(0.98)])
    assert {1, 4} <= outside  # too few items with a split vote of 1 or 4 in the data
    assert res.p_two_sided.min() == 0.0


def test_new_items_keeps_the_design_and_draws_classes_from_pi(ds_fit):
    observed = ds_fit.data.to_long()
    reps = posterior_predict(ds_fit, design="new_items", draws=3, seed=1)
    one = reps[reps["draw"] == 0]
    np.testing.assert_array_equal(one["item"].to_numpy(), observed["item"].to_numpy())
    np.testing.assert_array_equal(one["rater"].to_numpy(), observed["rater"].to_numpy())

    def share_class_2(r, p):
        return float(np.mean(p.z == 1))

    pi2 = float(ds_fit.point_estimate("pi").to_numpy()[1])
    for design in ("same_items", "new_items"):
        res = posterior_predictive_check(ds_fit, Discrepancy(share_class_2), draws=100, seed=3, design=design)
        assert res.discrepancy and res.observed.shape == (100,) and res.simulated.shape == (100,)
        np.testing.assert_allclose(res.simulated.mean(), pi2, atol=0.02)
        if design == "same_items":  # the replicate's classes are the observed data's posterior draws
            np.testing.assert_array_equal(res.simulated, res.observed)
        else:  # fresh classes: they vary from the posterior draws
            assert np.abs(res.simulated - res.observed).max() > 0


def test_caries_vote_histogram_shows_dawid_skene_misfit():
    """Han, Adıgüzel and Carpenter (2024): DS fails the positive-vote histogram of caries (bundled data)."""
    data = pyrater.RatingData.from_grouped(pyrater.datasets.caries(), tally="n")
    res = posterior_predictive_check(_gibbs(data), vote_histogram(2), draws=200, seed=1, design="new_items")
    np.testing.assert_array_equal(res.observed, [1880, 1055, 404, 247, 173, 100])
    assert not res.covered and res.p_two_sided.min() == 0.0


# ------------------------------------------------------------------ discrepancies
def test_discrepancy_is_compared_draw_by_draw(ds_fit):
    def accuracy(r, p):
        return np.mean(r.rating == p.z[r.item])

    res = posterior_predictive_check(ds_fit, Discrepancy(accuracy), draws=150, seed=4)
    assert res.statistic == "accuracy" and res.discrepancy
    assert res.p_value == pytest.approx(np.mean(res.simulated >= res.observed))
    assert 0.05 < res.p_two_sided  # the model holds: accuracy on replicates is like that on the data
    per_rater = Discrepancy(
        lambda r, p: np.bincount(r.rater, weights=r.rating == p.z[r.item], minlength=5) / np.bincount(r.rater),
        name="accuracy_per_rater",
    )
    vec = posterior_predictive_check(ds_fit, per_rater, draws=50, seed=4)
    assert vec.observed.shape == (50, 5) and vec.simulated.shape == (50, 5)
    assert vec.interval().shape == (5, 2)
    assert vec.to_frame()["observed"].to_numpy() == pytest.approx(vec.observed.mean(axis=0))


# ------------------------------------------------------------------ results and plots
def test_old_call_keeps_its_result(em_fit):
    def share_of_first_category(df: pd.DataFrame) -> float:
        return float((df["rating"] == 1).mean())

    res = posterior_predictive_check(em_fit, share_of_first_category, draws=100, seed=2)
    assert res.statistic == "share_of_first_category"
    assert isinstance(res.observed, float) and res.simulated.shape == (100,)
    assert res.p_value == pytest.approx(np.mean(res.simulated >= res.observed))
    assert posterior_predictive_check(em_fit, share_of_first_category, 100, 2, "share").statistic == "share"
    fig = res.plot()
    assert len(fig.axes[0].patches) == 30
    assert "share_of_first_category" in repr(res) and "p (two-sided)" in res.summary()


def test_vector_plot_shows_observed_against_replicated_bands(misfit_fit):
    res = posterior_predictive_check(misfit_fit, vote_histogram(1), draws=100, seed=2, design="new_items")
    fig = res.plot()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(v) for v in range(6)]
    assert ax.get_xlabel() == "votes"
    n_out = int((~res.covers(0.98)).sum())
    assert ax.get_title() == f"new_items: {n_out} of 6 outside the 98% interval"
    np.testing.assert_allclose(ax.collections[-1].get_offsets()[:, 1], res.observed[~res.covers(0.98)])
    assert res.plot(yscale="log").axes[0].get_yscale() == "log"
    both = posterior_predictive_check(misfit_fit, [vote_histogram(1), pair_agreement()], draws=20, seed=2)
    assert len(both.plot().axes) == 2
    scalar_discrepancy = posterior_predictive_check(
        misfit_fit, Discrepancy(lambda r, p: np.mean(r.rating == p.z[r.item]), name="acc"), draws=20, seed=2
    )
    assert scalar_discrepancy.plot().axes[0].get_ylabel() == "acc (replicated)"


# ------------------------------------------------------------------ bad input
def test_bad_statistics_are_refused_with_their_name(em_fit):
    calls = []

    def nan_stat(df):
        calls.append(1)
        return float("nan")

    with pytest.raises(ValueError, match="statistic 'nan_stat' returned NaN .* on the observed data"):
        posterior_predictive_check(em_fit, nan_stat, draws=50)
    assert len(calls) == 1  # refused before any replicate was drawn
    with pytest.raises(ValueError, match="statistic 'text' returned a non-numeric str"):
        posterior_predictive_check(em_fit, Statistic(lambda r: "abc", name="text"))
    with pytest.raises(ValueError, match="statistic 'table' returned shape \\(2, 2\\)"):
        posterior_predictive_check(em_fit, Statistic(lambda r: np.ones((2, 2)), name="table"))
    with pytest.raises(ValueError, match="returned None"):
        posterior_predictive_check(em_fit, Statistic(lambda r: None, name="nothing"))
    with pytest.raises(ValueError, match="non-empty"):
        posterior_predictive_check(em_fit, Statistic(lambda r: np.array([]), name="empty"))

    def ragged(r):  # the most votes for category 4 decides the length: varies between data sets
        return np.bincount(np.bincount(r.item[r.rating == 3], minlength=r.n_items))

    with pytest.raises(ValueError, match=r"statistic 'ragged' returned shape \(\d+,\) on replicate \d+ but"):
        posterior_predictive_check(em_fit, Statistic(ragged), draws=100, seed=1)
    with pytest.raises(ValueError, match="discrepancy 'bad' returned NaN"):
        posterior_predictive_check(em_fit, Discrepancy(lambda r, p: np.nan, name="bad"))
    with pytest.raises(ValueError, match="category 7 is not on the rating scale"):
        posterior_predictive_check(em_fit, vote_histogram(7))


def test_bad_arguments_are_refused(em_fit):
    with pytest.raises(ValueError, match="design must be one of"):
        posterior_predictive_check(em_fit, pair_agreement(), design="fresh")
    with pytest.raises(ValueError, match="design must be one of"):
        posterior_predict(em_fit, design="fresh")
    with pytest.raises(ValueError, match="draws must be an integer >= 1"):
        posterior_predictive_check(em_fit, pair_agreement(), draws=0)
    with pytest.raises(ValueError, match="probs must be a number in"):
        posterior_predictive_check(em_fit, pair_agreement(), probs=(0.9, 1.5))
    with pytest.raises(ValueError, match="distinct names"):
        posterior_predictive_check(em_fit, [pair_agreement(), pair_agreement()])
    with pytest.raises(ValueError, match="name= labels a single statistic"):
        posterior_predictive_check(em_fit, {"a": pair_agreement()}, name="b")
    with pytest.raises(TypeError, match="statistics must be a callable"):
        posterior_predictive_check(em_fit, 3)
    with pytest.raises(TypeError, match="a statistic must be callable"):
        posterior_predictive_check(em_fit, {"a": 3})
