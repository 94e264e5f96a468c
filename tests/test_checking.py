"""Posterior predictive checks, LOO/WAIC comparison and plots, on real fits."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import compare, loo, plots, posterior_predict, posterior_predictive_check, waic

matplotlib.use("Agg")
import matplotlib.pyplot as plt

pytestmark = pytest.mark.stan


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ------------------------------------------------------- posterior predict
def test_posterior_predict_observed_design(anesthesia_fit):
    reps = posterior_predict(anesthesia_fit, draws=50, seed=1)
    data = anesthesia_fit.data
    assert len(reps) == 50 * data.n_ratings
    assert list(reps.columns) == ["draw", "item", "rater", "rating"]
    one = reps[reps["draw"] == 0]
    observed = data.to_long()
    np.testing.assert_array_equal(one["item"].to_numpy(), observed["item"].to_numpy())
    np.testing.assert_array_equal(one["rater"].to_numpy(), observed["rater"].to_numpy())
    assert set(reps["rating"].cat.categories) == {1, 2, 3, 4}
    pd.testing.assert_frame_equal(reps, posterior_predict(anesthesia_fit, draws=50, seed=1))  # seeded


def test_posterior_predict_matches_analytic_predictive_probabilities(anesthesia_fit):
    """Replicated rating frequencies of a new item equal E[sum_k pi_k theta[j,k,l]] over draws."""
    design = pd.DataFrame({"item": ["new"] * 1, "rater": [2]})
    reps = posterior_predict(anesthesia_fit, design=design, draws=4000, seed=3)
    freq = reps["rating"].value_counts(normalize=True).sort_index().to_numpy()
    pi = anesthesia_fit.posterior_samples("pi").to_numpy()
    theta = anesthesia_fit.posterior_samples("theta").sel(rater=2).to_numpy()
    expected = np.einsum("sk,skl->l", pi, theta) / pi.shape[0]
    np.testing.assert_allclose(freq, expected, atol=0.025)


def test_posterior_predict_observed_item_follows_its_class(anesthesia_fit):
    """Item 1 is class 1 with probability ~1: its replicated ratings by rater 1 follow theta[1, 1]."""
    design = pd.DataFrame({"item": [1] * 20, "rater": [1] * 20})
    reps = posterior_predict(anesthesia_fit, design=design, draws=400, seed=5)
    freq = reps["rating"].value_counts(normalize=True).sort_index().to_numpy()
    theta11 = anesthesia_fit.posterior_samples("theta").sel(rater=1, category=1).mean("draw").to_numpy()
    np.testing.assert_allclose(freq, theta11, atol=0.02)


def test_posterior_predict_rejects_bad_design(anesthesia_fit):
    with pytest.raises(ValueError, match="missing column"):
        posterior_predict(anesthesia_fit, design=pd.DataFrame({"item": [1]}))
    with pytest.raises(ValueError, match="raters \\[99\\] not in the fitted data"):
        posterior_predict(anesthesia_fit, design=pd.DataFrame({"item": [1], "rater": [99]}))
    with pytest.raises(ValueError, match="draws"):
        posterior_predict(anesthesia_fit, draws=0)


def test_posterior_predict_for_point_fits_is_flagged_plug_in(anesthesia_path):
    f = pyrater.em(pd.read_csv(anesthesia_path), method="map")
    reps = posterior_predict(f, draws=3, seed=1)
    assert reps.attrs["plug_in"] is True and len(reps) == 3 * f.data.n_ratings


def test_posterior_predict_grouped_data(caries_path):
    data = pyrater.RatingData.from_grouped(pd.read_csv(caries_path))
    f = pyrater.em(data, method="map")
    reps = posterior_predict(f, draws=2, seed=1)
    assert len(reps) == 2 * len(data.to_long())
    # the positive-rating rate of replicated data matches the observed one closely (n ~ 19000)
    observed = (data.to_long()["rating"] == 2).mean()
    np.testing.assert_allclose((reps["rating"] == 2).mean(), observed, atol=0.02)


def _share_of_first_category(df: pd.DataFrame) -> float:
    return float((df["rating"] == 1).mean())


def test_ppc_tail_probability_and_plot(anesthesia_fit):
    res = posterior_predictive_check(anesthesia_fit, _share_of_first_category, draws=200, seed=2)
    assert res.statistic == "_share_of_first_category"
    assert res.observed == pytest.approx(_share_of_first_category(anesthesia_fit.data.to_long()))
    assert res.simulated.shape == (200,)
    assert res.p_value == pytest.approx(np.mean(res.simulated >= res.observed))
    assert 0.05 < res.p_value < 0.95  # the model reproduces the marginal rating frequencies
    fig = res.plot()
    ax = fig.axes[0]
    assert len(ax.patches) == 30  # histogram bars
    assert ax.lines[0].get_xdata()[0] == pytest.approx(res.observed)
    assert ax.get_xlabel() == "_share_of_first_category"


# ------------------------------------------------------------ comparison
def test_loo_and_waic_on_items(anesthesia_fit):
    res = loo(anesthesia_fit, warn=False)
    assert res.n_data_points == 45
    assert res.pareto_k.shape == (45,)
    assert res.n_bad_k == int((np.asarray(res.pareto_k) > 0.7).sum())
    w = waic(anesthesia_fit)
    # LOO and WAIC agree closely for well-behaved fits, and elpd is the sum of pointwise values
    assert w.elpd_waic == pytest.approx(res.elpd_loo, abs=3.0)
    assert res.elpd_loo == pytest.approx(float(np.sum(res.loo_i)))


def test_compare_ds_with_class_conditional_on_anesthesia(anesthesia_fit, anesthesia_cc_fit):
    table = compare({"dawid_skene": anesthesia_fit, "class_conditional": anesthesia_cc_fit})
    assert list(table.index) == sorted(table.index, key=lambda n: -table.loc[n, "elpd_loo"])
    assert table["rank"].tolist() == [0, 1]
    # elpd_diff = elpd - elpd(best): 0 for the best, negative below (R's loo_compare, ArviZ 1.x)
    assert table["elpd_diff"].iloc[0] == 0 and table["elpd_diff"].iloc[1] < 0
    assert table["elpd_diff"].iloc[1] == pytest.approx(table["elpd_loo"].iloc[1] - table["elpd_loo"].iloc[0])
    assert table["weight"].sum() == pytest.approx(1.0)
    assert table["dse"].iloc[1] > 0
    elpd = {
        name: loo(f, warn=False).elpd_loo
        for name, f in {"dawid_skene": anesthesia_fit, "class_conditional": anesthesia_cc_fit}.items()
    }
    assert table.loc[table.index[0], "elpd_loo"] == pytest.approx(max(elpd.values()))


def test_compare_refuses_different_data_and_point_fits(anesthesia_fit, anesthesia_path):
    df = pd.read_csv(anesthesia_path)
    with pytest.warns(RuntimeWarning, match="Rhat needs at least 2 chains"):  # a deliberately tiny fit
        other = pyrater.fit(df[df["item"] != 45], chains=1, warmup=100, draws=100, seed=1, progress=False)
    with pytest.raises(ValueError, match="different data"):
        compare({"a": anesthesia_fit, "b": other})
    point = pyrater.em(df, method="ml")
    with pytest.raises(NotImplementedError, match="draws"):
        loo(point)
    with pytest.raises(ValueError, match="at least two"):
        compare({"a": anesthesia_fit})


# ------------------------------------------------------------------ plots
def test_plot_raters_draws_one_annotated_heatmap_per_rater(anesthesia_fit):
    fig = plots.plot_raters(anesthesia_fit)
    heatmaps = [ax for ax in fig.axes if ax.images]
    assert len(heatmaps) == 5
    ax = heatmaps[0]
    assert ax.get_title() == "rater 1"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4"]
    values = anesthesia_fit.point_estimate("theta").sel(rater=1).to_numpy()
    texts = [t.get_text() for t in ax.texts]
    assert texts == [f"{v:.2f}" for v in values.ravel()]
    assert all(im.get_clim() == (0.0, 1.0) for a in heatmaps for im in a.images)
    fig2 = plots.plot_raters(anesthesia_fit, raters=[2, 3])
    assert len([a for a in fig2.axes if a.images]) == 2
    with pytest.raises(ValueError, match="not in the fitted data"):
        plots.plot_raters(anesthesia_fit, raters=[42])


def test_plot_class_probabilities_picks_most_uncertain_items(anesthesia_fit):
    fig = plots.plot_class_probabilities(anesthesia_fit, n=5)
    ax = fig.axes[0]
    assert len(ax.patches) == 5 * 4  # 5 items x 4 stacked categories
    shown = [t.get_text() for t in ax.get_xticklabels()]
    p = anesthesia_fit.class_probabilities()
    entropy = -(p * np.log(p.where(p > 0, 1))).sum(axis=1)
    assert shown[0] == str(entropy.idxmax())  # item 3 (0.40 / 0.60) is the most uncertain
    heights = [bar.get_height() for bar in ax.patches[::5]]  # first item's bar per category
    np.testing.assert_allclose(heights, p.loc[int(shown[0])].to_numpy())
    fig = plots.plot_class_probabilities(anesthesia_fit, items=[1, 2])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "2"]


def test_plot_prevalence_shows_intervals(anesthesia_fit):
    fig = plots.plot_prevalence(anesthesia_fit)
    ax = fig.axes[0]
    line = ax.lines[0]
    np.testing.assert_allclose(line.get_ydata(), anesthesia_fit.point_estimate("pi").to_numpy())
    assert len(ax.collections) == 1  # the error bars
    segments = ax.collections[0].get_segments()
    iv = anesthesia_fit.posterior_interval(0.9, "pi")
    np.testing.assert_allclose([s[0][1] for s in segments], iv.sel(bound="lower").to_numpy())
    np.testing.assert_allclose([s[1][1] for s in segments], iv.sel(bound="upper").to_numpy())


def test_trace_and_rank_plots(anesthesia_fit, anesthesia_path):
    fig = plots.plot_trace(anesthesia_fit, var_names=["pi"])
    assert len(fig.axes) == 2  # density and trace panels for pi
    fig = plots.plot_rank(anesthesia_fit, var_names=["pi"])
    assert len([a for a in fig.axes if a.get_visible()]) == 4  # one rank panel per category
    with pytest.raises(NotImplementedError, match="MCMC"):
        plots.plot_trace(pyrater.em(pd.read_csv(anesthesia_path), method="ml"))
