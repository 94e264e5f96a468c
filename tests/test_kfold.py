"""K-fold cross-validation of point fits (pyrater.kfold) and point fits in pyrater.compare."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp

import pyrater
from pyrater import datasets, em
from pyrater.checking.kfold import fold_of_items


@pytest.fixture(scope="module")
def anesthesia() -> pyrater.RatingData:
    return pyrater.RatingData.from_long(datasets.anesthesia())


def _log_p_item(pi: np.ndarray, theta: np.ndarray, ratings: pd.DataFrame, data: pyrater.RatingData) -> float:
    """log sum_k pi_k prod_(ratings) theta[rater, k, rating], by hand."""
    raters = data.rater_labels.get_indexer(ratings["rater"])
    cats = data.categories.get_indexer(ratings["rating"])
    return float(logsumexp(np.log(pi) + np.log(theta[raters, :, cats]).sum(axis=0)))


def test_leave_one_out_by_refits_equals_refitting_without_each_item_by_hand(anesthesia):
    """k = I: each item's elpd equals EM refitted on a table without the item's rows, and its predictive
    density computed by hand (two routes: zero weights in kfold, dropped rows here)."""
    df = datasets.anesthesia()
    e = em(anesthesia, method="map", tol=1e-12)
    res = pyrater.kfold(e, k=anesthesia.n_items, seed=3, progress=False)
    assert res.method == "kfold" and res.n_data_points == anesthesia.n_items
    for item in anesthesia.unit_labels[[0, 7, 30]]:
        rest = pyrater.RatingData.from_long(df[df["item"] != item])
        assert list(rest.rater_labels) == list(anesthesia.rater_labels)  # every rater still rates
        refit = em(rest, method="map", tol=1e-12)
        expected = _log_p_item(refit.pi, refit.theta, df[df["item"] == item], anesthesia)
        assert res.elpd_i.loc[item] == pytest.approx(expected, abs=1e-6)
    np.testing.assert_allclose(res.elpd, res.elpd_i.sum())
    assert res.se == pytest.approx(np.sqrt(res.n_data_points * np.var(res.elpd_i)))


def test_p_kfold_is_the_in_sample_lpd_minus_elpd(anesthesia):
    e = em(anesthesia, method="map")
    res = pyrater.kfold(e, k=5, seed=1, progress=False)
    df = datasets.anesthesia()
    lpd = sum(_log_p_item(e.pi, e.theta, g, anesthesia) for _, g in df.groupby("item"))
    assert res.p == pytest.approx(lpd - res.elpd, rel=1e-10)
    assert res.p > 0  # the fit predicts its own items better than held-out ones
    assert "elpd_kfold" in str(res)


def test_grouped_and_long_data_give_the_same_folds_and_elpd():
    """The caries patterns with their tallies, and the same items one row each: the same split, the same numbers."""
    grouped = pyrater.RatingData.from_grouped(datasets.caries(), tally="n")
    long_df = grouped.to_long()
    long = pyrater.RatingData.from_long(long_df)
    assert long.n_items == grouped.n_items
    a = pyrater.kfold(em(grouped, method="map", tol=1e-12), k=4, seed=5, progress=False)
    b = pyrater.kfold(em(long, method="map", tol=1e-12, compress=False), k=4, seed=5, progress=False)
    # the items in the same order: pattern by pattern, as grouped data number them
    order = long.unit_labels.get_indexer(long_df["item"].drop_duplicates())
    np.testing.assert_allclose(b.elpd_i.to_numpy()[order], a.elpd_i.to_numpy(), rtol=1e-6)
    assert a.elpd == pytest.approx(b.elpd, rel=1e-7)


def test_cross_validation_prefers_the_simpler_true_model_that_in_sample_fit_does_not():
    """Raters who share one error matrix and rate few items each: the full Dawid-Skene fits its own items better
    (higher in-sample lpd) but predicts new items worse than the homogeneous model (what k-fold is for)."""
    sim = pyrater.simulate("homogeneous", n_items=400, n_raters=60, n_categories=3, raters_per_item=3, seed=4)
    ds = pyrater.kfold(em(sim.data, "dawid_skene", method="map"), k=5, seed=2, progress=False)
    hom = pyrater.kfold(em(sim.data, "homogeneous", method="map"), k=5, seed=2, progress=False)
    assert ds.elpd + ds.p > hom.elpd + hom.p  # in sample: lpd = elpd + p
    assert hom.elpd > ds.elpd
    table = pyrater.compare(
        {"ds": em(sim.data, "dawid_skene", method="map"), "hom": em(sim.data, "homogeneous", method="map")}
    )
    assert table.index[0] == "hom" and set(table["method"]) == {"kfold"}


def test_compare_ranks_point_and_draws_fits_in_one_table(anesthesia):
    e = em(anesthesia, method="map")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains
        g = pyrater.fit(anesthesia, method="gibbs", chains=2, draws=300, seed=1, progress=False)
    table = pyrater.compare({"em": e, "gibbs": g})
    assert dict(table["method"]) == {"em": "kfold", "gibbs": "exact"}
    assert table.attrs["method"] == {n: table.loc[n, "method"] for n in table.index}
    assert table["weight"].sum() == pytest.approx(1.0)
    # the point fits are scored on one split, seed 0 by default, whatever the order of the fits
    reordered = pyrater.compare({"gibbs": g, "em": e})
    assert reordered.loc["em", "elpd_loo"] == table.loc["em", "elpd_loo"]
    kf = pyrater.kfold(e, seed=9, progress=False)  # a result of kfold is used on its own split only
    assert kf.elpd != table.loc["em", "elpd_loo"]
    assert pyrater.compare({"em": e, "gibbs": g}, seed=9).loc["em", "elpd_loo"] == kf.elpd
    default = pyrater.compare({"em": e, "gibbs": g})
    assert default.loc["em", "elpd_loo"] == table.loc["em", "elpd_loo"]
    with pytest.raises(ValueError, match="WAIC needs posterior draws.*ic='loo'"):
        pyrater.compare({"em": e, "gibbs": g}, ic="waic")


def test_compare_scores_every_point_fit_on_the_same_split(anesthesia):
    """A fit whose K-fold result was kept from another split is scored again on the comparison's split."""
    a, b = em(anesthesia, "dawid_skene", method="map"), em(anesthesia, "class_conditional", method="map")
    pyrater.kfold(a, seed=3, progress=False)  # kept on a
    table = pyrater.compare({"a": a, "b": b}, seed=5)
    for name, f in (("a", a), ("b", b)):
        fresh = pyrater.kfold(em(anesthesia, f.model, method="map"), seed=5, progress=False)
        assert table.loc[name, "elpd_loo"] == pytest.approx(fresh.elpd, rel=1e-9)


def test_folds_are_balanced_and_seeded():
    fold = fold_of_items(103, 10, seed=1)
    assert np.bincount(fold).tolist() == [11, 11, 11] + [10] * 7
    np.testing.assert_array_equal(fold, fold_of_items(103, 10, seed=1))
    assert not np.array_equal(fold, fold_of_items(103, 10, seed=2))


def test_bad_input_is_refused_before_any_refit(anesthesia):
    e = em(anesthesia, method="map")
    with pytest.raises(ValueError, match="k must be an integer >= 2"):
        pyrater.kfold(e, k=1)
    with pytest.raises(ValueError, match="k=50 folds need at least 50 items; the data hold 45"):
        pyrater.kfold(e, k=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = pyrater.fit(anesthesia, method="gibbs", chains=2, draws=50, seed=1, progress=False)
    with pytest.raises(NotImplementedError, match="point fits.*use pyrater.loo"):
        pyrater.kfold(g)
    # and the other way round: LOO of a point fit points to K-fold
    with pytest.raises(NotImplementedError, match=r"the fit is a point estimate \(method 'em_map'\).*pyrater.kfold"):
        pyrater.loo(e)
    with pytest.raises(TypeError, match="needs a pyrater fit"):
        pyrater.kfold("fit.nc")


@pytest.mark.stan
def test_kfold_of_stan_optimize_agrees_with_em_map(anesthesia, stan_engine):
    """The same model, priors and folds: Stan's mode and EM's MAP predict the held-out items alike."""
    opt = pyrater.fit(anesthesia, method="optimize", seed=2, engine=stan_engine)
    a = pyrater.kfold(opt, k=3, seed=4, progress=False)
    b = pyrater.kfold(em(anesthesia, method="map", tol=1e-12), k=3, seed=4, progress=False)
    np.testing.assert_allclose(a.elpd_i.to_numpy(), b.elpd_i.to_numpy(), atol=5e-3)
