"""pyrater's ArviZ layer (pyrater._arviz) on whichever ArviZ line is installed.

The suite runs on Python 3.11 (ArviZ 0.x, InferenceData) and 3.12 (ArviZ 1.x,
DataTree); each test checks the line-independent contract against an
independent computation or against ArviZ's own function on that line.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.special import logsumexp
from scipy.stats import norm, rankdata

import pyrater
from pyrater import _arviz, compare, loo, waic

AZ_1X = _arviz.is_datatree_line()


# ----------------------------------------------------------------- fixtures
def _quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains may warn about Rhat
        return pyrater.fit(*args, progress=False, **kwargs)


@pytest.fixture(scope="module")
def anesthesia(anesthesia_path):
    return pd.read_csv(anesthesia_path)


@pytest.fixture(scope="module")
def ds_fit(anesthesia):
    return _quiet_fit(anesthesia, "dawid_skene", chains=2, warmup=300, draws=300, seed=2)


@pytest.fixture(scope="module")
def cc_fit(anesthesia):
    return _quiet_fit(anesthesia, "class_conditional", chains=2, warmup=300, draws=300, seed=2)


# ------------------------------------------------------------------- build
@pytest.mark.stan
def test_inference_data_type_groups_dims_and_coords(ds_fit):
    idata = ds_fit.to_inference_data()
    if AZ_1X:
        assert isinstance(idata, xr.DataTree)
    else:
        import arviz as az

        assert isinstance(idata, az.InferenceData)
    assert _arviz.groups(idata) == ["posterior", "log_likelihood", "sample_stats", "observed_data"]
    post = _arviz.group(idata, "posterior")
    assert post["theta"].dims == ("chain", "draw", "rater", "category", "rating")
    assert post["pi"].dims == ("chain", "draw", "category")
    assert list(post["theta"].coords["rater"].values) == list(ds_fit.data.rater_labels)
    assert list(post["pi"].coords["category"].values) == list(ds_fit.data.categories)
    np.testing.assert_array_equal(post["theta"].to_numpy(), ds_fit.draws["theta"])
    ll = _arviz.group(idata, "log_likelihood")["log_lik"]
    assert ll.dims == ("chain", "draw", "item")
    assert list(ll.coords["item"].values) == list(ds_fit.data.unit_labels)
    assert _arviz.has_group(idata, "sample_stats") and not _arviz.has_group(idata, "prior")
    assert idata.attrs["model"] == "dawid_skene" and idata.attrs["method"] == "mcmc"


def test_point_estimate_fits_give_one_draw_and_refuse_diagnostics(anesthesia):
    e = pyrater.em(anesthesia, method="map")
    idata = e.to_inference_data()
    post = _arviz.group(idata, "posterior")
    assert post.sizes["chain"] == 1 and post.sizes["draw"] == 1
    np.testing.assert_array_equal(post["pi"].to_numpy()[0, 0], e.pi)
    np.testing.assert_array_equal(post["theta"].to_numpy()[0, 0], e.theta)
    assert not _arviz.has_group(idata, "log_likelihood")
    assert _arviz.group(idata, "observed_data")["rating_obs"].size == e.data.n_ratings
    with pytest.raises(NotImplementedError, match="method='mcmc'"):
        e.mcmc_diagnostics()
    with pytest.raises(NotImplementedError, match="draws"):
        loo(e)


# ------------------------------------------------------------ diagnostics
def _rank_normalised_split_rhat(x: np.ndarray) -> float:
    """Vehtari et al. (2021) rank-normalised split Rhat of draws (chain, draw), by hand."""

    def split(y):
        half = y.shape[1] // 2
        return np.concatenate([y[:, :half], y[:, -half:]], axis=0)

    def rhat_of(z):
        m, n = z.shape
        w = z.var(axis=1, ddof=1).mean()
        b = n * z.mean(axis=1).var(ddof=1)
        return np.sqrt(((n - 1) / n * w + b / n) / w)

    def z_scale(y):
        r = rankdata(y, method="average").reshape(y.shape)
        return norm.ppf((r - 3 / 8) / (y.size + 1 / 4))

    s = split(x)
    bulk = rhat_of(z_scale(s))
    folded = rhat_of(z_scale(np.abs(s - np.median(s))))
    return max(bulk, folded)


def test_rhat_and_ess_agree_with_hand_computation():
    rng = np.random.default_rng(5)
    C, S = 4, 2000
    iid = rng.normal(size=(C, S))
    ar = np.empty((C, S))  # AR(1), rho = 0.8: ESS ~ N (1 - rho) / (1 + rho)
    ar[:, 0] = rng.normal(size=C)
    for t in range(1, S):
        ar[:, t] = 0.8 * ar[:, t - 1] + rng.normal(scale=0.6, size=C)
    shifted = iid + np.array([0.0, 0.0, 0.0, 1.5])[:, None]  # one chain elsewhere
    x = np.stack([iid, ar, shifted], axis=2)
    rhat = _arviz.rhat(x)
    expected = [_rank_normalised_split_rhat(x[..., p]) for p in range(3)]
    np.testing.assert_allclose(rhat, expected, rtol=1e-10)
    assert rhat[0] < 1.01 and rhat[2] > 1.1
    bulk = _arviz.ess(x, "bulk")
    assert bulk[0] == pytest.approx(C * S, rel=0.1)
    assert bulk[1] == pytest.approx(C * S * 0.2 / 1.8, rel=0.25)  # 730-910 over seeds 0-2
    tail = _arviz.ess(x, "tail")
    assert 0 < tail[1] < tail[0]
    assert np.isnan(_arviz.rhat(x[:1])).all()  # one chain: no Rhat
    with pytest.raises(ValueError, match="bulk' or 'tail"):
        _arviz.ess(x, "mean")


@pytest.mark.stan
def test_mcmc_diagnostics_cover_model_specific_parameters(cc_fit):
    """Issue 13 item 7: p (class-conditional) and mu, sigma (hierarchical) have rows."""
    diag = cc_fit.mcmc_diagnostics(warn=False)
    J, K = cc_fit.data.n_raters, cc_fit.data.n_categories
    p_rows = [name for name in diag.index if name.startswith("p[")]
    assert len(p_rows) == J * K and p_rows[0] == "p[1, 1]"
    p = np.asarray(cc_fit.draws["p"])
    np.testing.assert_allclose(diag.loc["p[2, 3]", "rhat"], _arviz.rhat(p[:, :, 1, 2][..., None])[0])
    np.testing.assert_allclose(diag.loc["p[2, 3]", "ess_bulk"], _arviz.ess(p[:, :, 1, 2][..., None])[0])


@pytest.mark.stan
def test_hierarchical_diagnostics_include_mu_and_sigma():
    sim = pyrater.simulate("hierarchical", n_items=120, n_raters=4, n_categories=2, seed=3)
    f = _quiet_fit(sim.data, "hierarchical", chains=2, warmup=150, draws=150, seed=1)
    diag = f.mcmc_diagnostics(warn=False)
    for name in ("mu", "sigma"):
        rows = [r for r in diag.index if r.startswith(f"{name}[")]
        assert rows == [f"{name}[{k}, {l}]" for k in (1, 2) for l in (1, 2)]
    sigma = np.asarray(f.draws["sigma"])[:, :, 0, 1]
    np.testing.assert_allclose(diag.loc["sigma[1, 2]", "rhat"], _arviz.rhat(sigma[..., None])[0])


# --------------------------------------------------------------- LOO, WAIC
@pytest.mark.stan
def test_loo_fields_and_agreement_with_plain_importance_sampling(ds_fit):
    res = loo(ds_fit, warn=False)
    assert res.kind == "loo" and res.n_data_points == 45 and res.n_samples == 600
    assert list(res.elpd_i.index) == list(ds_fit.data.unit_labels)
    assert res.elpd == pytest.approx(res.elpd_i.sum())
    assert res.se == pytest.approx(np.sqrt(45 * np.var(res.elpd_i.to_numpy())))
    assert res.elpd_loo == res.elpd and res.p_loo == res.p
    with pytest.raises(AttributeError, match="loo result"):
        _ = res.elpd_waic
    # where Pareto k is small, PSIS-LOO is close to plain importance sampling
    ll = np.asarray(ds_fit.draws["log_lik"]).reshape(600, -1)
    is_loo = -(logsumexp(-ll, axis=0) - np.log(600))
    good = res.pareto_k.to_numpy() < 0.5
    assert good.sum() > 20
    np.testing.assert_allclose(res.elpd_i.to_numpy()[good], is_loo[good], atol=0.05)
    lppd = logsumexp(ll, axis=0) - np.log(600)
    assert res.p == pytest.approx((lppd - res.elpd_i.to_numpy()).sum(), rel=1e-6)


@pytest.mark.stan
def test_waic_by_hand_and_equal_to_arviz_0x(ds_fit):
    w = waic(ds_fit)
    ll = np.asarray(ds_fit.draws["log_lik"]).reshape(600, -1)
    lppd = np.array([np.log(np.mean(np.exp(ll[:, i]))) for i in range(ll.shape[1])])
    p_i = np.array([np.mean((ll[:, i] - ll[:, i].mean()) ** 2) for i in range(ll.shape[1])])
    np.testing.assert_allclose(w.elpd_i.to_numpy(), lppd - p_i, rtol=1e-10)
    assert w.elpd == pytest.approx(np.sum(lppd - p_i)) and w.p == pytest.approx(p_i.sum())
    assert w.n_bad_k == int((p_i > 0.4).sum()) and w.warning == bool(w.n_bad_k)
    assert w.pareto_k is None and w.elpd_waic == w.elpd
    if AZ_1X:
        return  # ArviZ 1.x has no WAIC: the hand computation above is the reference
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = az.waic(ds_fit.to_inference_data(), pointwise=True)
    assert w.elpd == pytest.approx(ref["elpd_waic"], rel=1e-12)
    assert w.se == pytest.approx(ref["se"], rel=1e-12)
    assert w.p == pytest.approx(ref["p_waic"], rel=1e-12)
    np.testing.assert_allclose(w.elpd_i.to_numpy(), np.asarray(ref["waic_i"]), rtol=1e-12)


@pytest.mark.stan
def test_compare_agrees_with_arviz_compare_on_this_line(ds_fit, cc_fit):
    fits = {"ds": ds_fit, "cc": cc_fit}
    table = compare(fits)
    assert list(table.columns) == [
        "rank",
        "elpd_loo",
        "p_loo",
        "elpd_diff",
        "dse",
        "se",
        "weight",
        "weight_pbma",
        "equivalent",
        "warning",
        "n_bad_k",
    ]
    import arviz as az

    idatas = {name: f.to_inference_data() for name, f in fits.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if AZ_1X:
            ref = az.compare(idatas, round_to="none")
            ref_elpd, ref_p, ref_diff = ref["elpd"], ref["p"], ref["elpd_diff"]
        else:
            ref = az.compare(idatas, ic="loo")
            ref_elpd, ref_p, ref_diff = ref["elpd_loo"], ref["p_loo"], -ref["elpd_diff"]  # 0.x: best - model
    assert list(table.index) == list(ref.index)
    np.testing.assert_allclose(table["elpd_loo"], ref_elpd, rtol=1e-10)
    np.testing.assert_allclose(table["p_loo"], ref_p, rtol=1e-10)
    np.testing.assert_allclose(table["elpd_diff"], ref_diff, atol=1e-8)
    np.testing.assert_allclose(table["dse"], ref["dse"], rtol=1e-8)
    np.testing.assert_allclose(table["weight"], ref["weight"], atol=2e-3)
    wtable = compare(fits, ic="waic")
    assert list(wtable.columns[:3]) == ["rank", "elpd_waic", "p_waic"]
    elpd = {name: waic(f).elpd for name, f in fits.items()}
    best = max(elpd.values())
    np.testing.assert_allclose(wtable["elpd_diff"], [elpd[n] - best for n in wtable.index])
    with pytest.raises(ValueError, match="ic must be"):
        compare(fits, ic="dic")


def test_stacking_weights_pick_the_model_that_predicts_every_point():
    from pyrater.checking.compare import stacking_weights

    rng = np.random.default_rng(0)
    good = rng.normal(-1.0, 0.1, size=200)
    bad = good - 2.0
    w = stacking_weights(np.column_stack([bad, good]))
    assert w[1] > 0.99 and w.sum() == pytest.approx(1.0)
    # two models each better on half the points share the weight
    a = np.where(np.arange(200) < 100, -1.0, -3.0)
    w = stacking_weights(np.column_stack([a, a[::-1]]))
    np.testing.assert_allclose(w, [0.5, 0.5], atol=1e-4)


# ------------------------------------------------------------------- plots
@pytest.mark.stan
def test_trace_and_rank_plots_return_figures(ds_fit):
    import matplotlib.figure
    import matplotlib.pyplot as plt

    for fig in (pyrater.plots.plot_trace(ds_fit, ["pi", "theta"]), pyrater.plots.plot_rank(ds_fit, ["pi"])):
        assert isinstance(fig, matplotlib.figure.Figure) and fig.axes
        plt.close(fig)


def test_mcse_of_independent_draws_is_sd_over_root_n():
    # independent N(0, 1) draws: the standard error of the mean is 1 / sqrt(n), that of the 5%
    # quantile sqrt(q (1 - q) / n) / phi(z_q) (the asymptotic variance of a sample quantile)
    from scipy import stats

    x = np.random.default_rng(3).normal(size=(4, 2500, 6))
    n = 4 * 2500
    np.testing.assert_allclose(_arviz.mcse(x), 1 / np.sqrt(n), rtol=0.15)
    q = 0.05
    expected = np.sqrt(q * (1 - q) / n) / stats.norm.pdf(stats.norm.ppf(q))
    np.testing.assert_allclose(_arviz.mcse(x, "quantile", prob=q), expected, rtol=0.3)
    with pytest.raises(ValueError, match="method"):
        _arviz.mcse(x, "median")
