"""LOO at crowd scale (issue 27, item 2): exact PSIS-LOO in item chunks and subsampling LOO.

* Exact LOO, computed in chunks with the log-likelihood kept or recomputed from
  the draws, equals ArviZ's ``loo`` on the installed line.
* The difference estimator (Magnusson et al. 2020, R's ``srs_diff_est``) is exact
  when every item is sampled, unbiased over repeated subsamples, and its
  subsampling SE matches the spread of the estimates.
* Subsampling LOO agrees with exact LOO on data where both run, within its
  subsampling SE; ``compare`` uses whichever LOO was computed and says so.
* ``compare`` checks every fit before any LOO is computed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import _arviz, compare, loo, waic
from pyrater.checking.compare import srs_diff_est
from pyrater.inference.gibbs.sampler import gibbs


def _gibbs(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return gibbs(*args, progress=False, **kwargs)


@pytest.fixture(scope="module")
def sim():
    return pyrater.simulate("dawid_skene", n_items=600, n_raters=5, n_categories=3, seed=21)


@pytest.fixture(scope="module")
def ds(sim):
    return _gibbs(sim.data, chains=3, warmup=150, draws=300, seed=2)


@pytest.fixture(scope="module")
def cc(sim):
    return _gibbs(sim.data, "class_conditional", chains=3, warmup=150, draws=300, seed=2)


def _forget(*fits):
    for f in fits:
        f.__dict__.pop("_loo_result", None)


# ----------------------------------------------------------------- exact LOO
def test_exact_loo_in_chunks_equals_arviz_on_this_line(ds):
    ref = _arviz.loo(ds.to_inference_data())
    for budget in (None, 1e-4):  # one chunk / many chunks of 64 items
        res = loo(ds, warn=False, method="exact", max_memory_gib=budget)
        assert res.method == "exact" and res.n_subsample == res.n_data_points == 600
        np.testing.assert_allclose(res.elpd_i.to_numpy(), ref.elpd_i, rtol=0, atol=1e-10)
        np.testing.assert_allclose(res.pareto_k.to_numpy(), ref.pareto_k, rtol=0, atol=1e-10)
        assert res.elpd == pytest.approx(ref.elpd, rel=1e-12) and res.p == pytest.approx(ref.p, rel=1e-9)
        assert res.subsample_se == 0.0


def test_recomputed_log_lik_gives_the_same_loo_and_waic(sim, ds):
    bare = _gibbs(sim.data, chains=3, warmup=150, draws=300, seed=2, log_lik=False)
    assert "log_lik" not in bare.draws and not bare.has_log_lik
    np.testing.assert_array_equal(bare.draws["theta"], ds.draws["theta"])  # the same chains
    a, b = loo(ds, warn=False, method="exact"), loo(bare, warn=False, method="exact")
    np.testing.assert_allclose(a.elpd_i.to_numpy(), b.elpd_i.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(waic(ds).elpd_i.to_numpy(), waic(bare).elpd_i.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(
        bare.log_lik_units((10, 20)), np.asarray(ds.draws["log_lik"]).reshape(-1, 600)[:, 10:20].T, rtol=1e-12
    )


def test_waic_stays_within_its_memory_budget():
    """WAIC's chunk is a quarter of the budget; its row statistics must not add several chunk-sized temporaries."""
    import tracemalloc

    sim = pyrater.simulate("dawid_skene", n_items=12_000, n_raters=20, n_categories=3, raters_per_item=3, seed=4)
    f = _gibbs(sim.data, chains=2, warmup=50, draws=200, seed=1, log_lik=False)
    budget = 0.05  # GiB: chunks of 4,194 items x 400 draws (13 MiB)
    tracemalloc.start()
    try:
        res = waic(f, max_memory_gib=budget, progress=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < budget * 2**30
    ref = waic(f, max_memory_gib=1.0, progress=False)  # one chunk
    np.testing.assert_allclose(res.elpd_i.to_numpy(), ref.elpd_i.to_numpy(), rtol=1e-12)


def test_grouped_data_loo_is_over_items(caries_path):
    df = pd.read_csv(caries_path)
    f = _gibbs(df, chains=2, warmup=100, draws=200, seed=1, data_format="grouped")
    res = loo(f, warn=False)
    ref = _arviz.loo(f.to_inference_data())
    assert res.n_data_points == f.data.n_items == ref.n_data_points
    np.testing.assert_allclose(res.elpd_i.to_numpy(), ref.elpd_i, atol=1e-10)
    sub = loo(f, warn=False, method="subsample", n_subsample=400, seed=3)
    assert sub.n_data_points == f.data.n_items and sub.n_subsample == 400
    assert abs(sub.elpd - res.elpd) < 4 * sub.subsample_se + 1e-9


# ------------------------------------------------------- difference estimator
def test_difference_estimator_is_exact_with_every_item_and_unbiased_over_subsamples():
    rng = np.random.default_rng(7)
    N = 500
    y = rng.normal(-2.0, 1.0, size=N)
    approx = y + rng.normal(0.0, 0.3, size=N) + 0.2  # a biased, noisy approximation
    total, var_total, var_y = srs_diff_est(approx, y, np.arange(N))
    assert total == pytest.approx(y.sum(), rel=1e-12) and var_total == pytest.approx(0.0, abs=1e-9)
    assert var_y == pytest.approx(N * np.var(y), rel=1e-9)  # the usual N var(y) when all are known
    est, ses = [], []
    for seed in range(400):
        idx = np.sort(np.random.default_rng(seed).choice(N, size=50, replace=False))
        t, v, _ = srs_diff_est(approx, y[idx], idx)
        est.append(t)
        ses.append(np.sqrt(v))
    est = np.asarray(est)
    assert abs(est.mean() - y.sum()) < 4 * est.std() / np.sqrt(est.size)  # unbiased
    assert np.mean(ses) == pytest.approx(est.std(), rel=0.15)  # the SE describes the spread


def test_subsampling_loo_agrees_with_exact_loo(ds):
    exact = loo(ds, warn=False, method="exact")
    sub = loo(ds, warn=False, method="subsample", n_subsample=150, seed=5)
    assert sub.method == "subsample" and sub.n_subsample == 150 and sub.n_data_points == 600
    assert len(sub.elpd_i) == 150 and len(sub.elpd_approx_i) == 600
    assert 0 < sub.subsample_se < 0.2 * sub.se
    assert abs(sub.elpd - exact.elpd) < 4 * sub.subsample_se
    assert sub.se == pytest.approx(exact.se, rel=0.2)
    assert sub.p == pytest.approx(exact.p, rel=0.5)
    # the sampled items' pointwise values are the exact ones
    np.testing.assert_allclose(sub.elpd_i.to_numpy(), exact.elpd_i.loc[sub.elpd_i.index].to_numpy(), rtol=1e-12)
    assert "by subsampling" in str(sub) and "subsampling se" in str(sub)
    # same seed, same subsample
    again = loo(ds, warn=False, method="subsample", n_subsample=150, seed=5)
    assert again.elpd == sub.elpd


def test_auto_picks_subsampling_when_the_log_lik_does_not_fit_the_budget(ds):
    S, I = 900, 600
    assert loo(ds, warn=False).method == "exact"  # 4 MB under the fit's budget of 1 GiB
    small = 0.5 * 8 * S * I / 2**30
    res = loo(ds, warn=False, max_memory_gib=small, n_subsample=100)
    assert res.method == "subsample" and res.n_subsample == 100


# -------------------------------------------------------------------- compare
def test_compare_uses_the_loo_already_computed_and_says_how(ds, cc):
    _forget(ds, cc)
    exact = compare({"ds": ds, "cc": cc})
    assert "method" not in exact.columns and exact.attrs["method"] == {"ds": "exact", "cc": "exact"}
    _forget(cc)
    sub = loo(ds, warn=False, method="subsample", n_subsample=200, seed=1)  # kept on the fit
    mixed = compare({"ds": ds, "cc": cc})
    assert mixed.loc["ds", "elpd_loo"] == sub.elpd  # the LOO already computed, as it was
    assert set(mixed["method"]) == {"subsample"}  # cc computed the same way, on ds's sample of items
    assert {"subsampling_se", "subsampling_dse"} <= set(mixed.columns)
    assert mixed.index.tolist() == exact.index.tolist()
    worse = mixed.index[1]
    diff_exact = exact.loc[worse, "elpd_diff"]
    assert abs(mixed.loc[worse, "elpd_diff"] - diff_exact) < 4 * mixed.loc[worse, "subsampling_dse"] + 1e-9
    assert mixed.loc[worse, "dse"] == pytest.approx(exact.loc[worse, "dse"], rel=0.3)
    assert mixed["weight"].sum() == pytest.approx(1.0)
    # an exact result beside a subsampled one: the exact values stand in on the common items
    _forget(cc)
    loo(cc, warn=False, method="exact")
    both = compare({"ds": ds, "cc": cc})
    assert both.attrs["method"] == {"ds": "subsample", "cc": "exact"}
    assert abs(both.loc[worse, "elpd_diff"] - diff_exact) < 4 * both.loc[worse, "subsampling_dse"] + 1e-9
    # method= recomputes every fit that way
    forced = compare({"ds": ds, "cc": cc}, method="exact")
    pd.testing.assert_frame_equal(forced, exact)
    _forget(ds, cc)


def test_compare_checks_every_fit_before_any_work(sim, ds):
    _forget(ds)
    point = pyrater.em(sim.data, method="ml")  # point fits are compared by K-fold, which has no WAIC counterpart
    with pytest.raises(ValueError, match="WAIC needs posterior draws; 'b' is a point fit"):
        compare({"a": ds, "b": point}, ic="waic")
    assert "_loo_result" not in ds.__dict__  # nothing was computed for 'a'
    with pytest.raises(ValueError, match="method must be one of"):
        compare({"a": ds, "b": ds}, method="fast")
    with pytest.raises(ValueError, match="ic must be one of"):
        compare({"a": ds, "b": ds}, ic="dic")
    with pytest.raises(ValueError, match="at least two fits, got 1"):
        compare({"a": ds})
    with pytest.raises(TypeError, match="must be a pyrater fit"):
        compare({"a": ds, "b": "not a fit"})
    long = sim.data.to_long()
    other = _gibbs(long[long.iloc[:, 0] != long.iloc[0, 0]], chains=2, warmup=5, draws=20, seed=1)
    with pytest.raises(ValueError, match="different data"):
        compare({"a": ds, "b": other})
    assert "_loo_result" not in ds.__dict__


def test_a_loo_warning_below_0_7_names_the_sample_size_threshold():
    """ArviZ flags Pareto k above min(1 - 1/log10 S, 0.7); a printed result says so when no item is above 0.7."""
    from pyrater.checking.compare import ELPD

    k = pd.Series([0.59, 0.10, 0.58], index=[1, 2, 3], name="pareto_k")
    res = ELPD(
        kind="loo", elpd=-10.0, se=1.0, p=2.0, elpd_i=pd.Series([-3.0, -4.0, -3.0], index=[1, 2, 3]),
        pareto_k=k, n_bad_k=0, warning=True, n_samples=200, n_data_points=3,
    )  # fmt: skip
    text = str(res).splitlines()[-1]
    assert text == (
        "  warning: 2 item(s) with Pareto k > 0.57, the threshold for 200 draws (min(1 - 1/log10 S, 0.7)); "
        "none above 0.7: more draws would make the estimate reliable"
    )
    assert "warning" not in str(ELPD(**{**res.__dict__, "warning": False}))
