"""The steps after a fit at crowd scale (issue 27): compiled passes, one sort per parameter, bounded views.

Every fast route is checked against an independent one: the compiled class
probabilities and log-likelihoods against the scipy kernel draw by draw, the
one-sort statistics against ArviZ and numpy, the bounded summary against the
full tables it is drawn from; the memory messages against the sizes they
state; the Gibbs sampler's progress bar against the sweeps it ran.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import _arviz
from pyrater.fits import diagnostics as diag
from pyrater.inference.gibbs.sampler import gibbs
from pyrater.models.kernels import (
    class_log_posterior,
    draws_class_probabilities,
    draws_log_lik,
    rao_blackwell_class_probabilities,
)


@pytest.fixture(scope="module")
def sim():
    return pyrater.simulate("dawid_skene", n_items=400, n_raters=6, n_categories=4, seed=11)


@pytest.fixture(scope="module")
def draws(sim):
    rng = np.random.default_rng(0)
    S, J, K = 37, sim.data.n_raters, sim.data.n_categories
    pi = rng.dirichlet(np.ones(K) * 5, size=S)
    theta = 0.5 * rng.dirichlet(np.ones(K), size=(S, J, K)) + 0.5 * np.eye(K)
    return pi, theta


@pytest.fixture(scope="module")
def gfit(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return gibbs(sim.data, chains=3, warmup=100, draws=201, seed=4, progress=False)


# ------------------------------------------------------------- the fused pass
@pytest.mark.parametrize("with_known", [False, True])
def test_compiled_class_probabilities_equal_the_scipy_kernel(sim, draws, with_known):
    pi, theta = draws
    known = None
    if with_known:
        known = np.full(sim.data.n_units, -1)
        known[::7] = 2
    ref = rao_blackwell_class_probabilities(sim.data.counts, np.log(pi), np.log(theta), known=known)
    for threads, chunk in ((1, 10**9), (2, 1)):  # one chunk of draws / one draw per chunk, 1 or 2 threads
        got = draws_class_probabilities(sim.data.counts, pi, theta, known, n_threads=threads, chunk_bytes=chunk)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
    if with_known:
        assert np.array_equal(got[::7].argmax(axis=1), np.full(got[::7].shape[0], 2))


def test_compiled_pass_reads_counts_above_one(sim, draws):
    # data of one rating per item and rater take the gather without count loads; repeats take the other
    pi, theta = draws
    counts = sim.data.counts.copy()
    counts.data[::5] = 2.0
    for c in (sim.data.counts, counts):
        ref = rao_blackwell_class_probabilities(c, np.log(pi), np.log(theta))
        got = draws_class_probabilities(c, pi, theta, None, n_threads=1)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
        ll = draws_log_lik(c, pi, theta, None, n_threads=1)
        _, ll_ref = class_log_posterior(c, np.log(pi[5]), np.log(theta[5]))
        np.testing.assert_allclose(ll[:, 5], ll_ref, rtol=1e-13)
    assert not np.allclose(ll[:, 5], draws_log_lik(sim.data.counts, pi, theta, None, n_threads=1)[:, 5])


def test_compiled_log_lik_equals_the_scipy_kernel_draw_by_draw(sim, draws):
    pi, theta = draws
    known = np.full(sim.data.n_units, -1)
    known[3] = 1
    ll = draws_log_lik(sim.data.counts, pi, theta, known, units=(2, 150), n_threads=2, chunk_bytes=1)
    assert ll.shape == (148, pi.shape[0])
    for s in (0, 17, pi.shape[0] - 1):
        _, ref = class_log_posterior(sim.data.counts, np.log(pi[s]), np.log(theta[s]), known=known)
        np.testing.assert_allclose(ll[:, s], ref[2:150], rtol=1e-13)


def test_a_shared_error_matrix_broadcasts_over_the_raters(sim, draws):
    pi, theta = draws
    shared = theta[:, :1]  # (S, 1, K, K): the homogeneous model's layout
    ref = rao_blackwell_class_probabilities(
        sim.data.counts, np.log(pi), np.log(np.broadcast_to(shared, theta.shape).copy())
    )
    np.testing.assert_allclose(draws_class_probabilities(sim.data.counts, pi, shared[:, 0]), ref, rtol=1e-12)


def test_more_than_eight_classes_take_the_scipy_route():
    sim = pyrater.simulate("dawid_skene", n_items=50, n_raters=3, n_categories=9, seed=2)
    rng = np.random.default_rng(1)
    pi = rng.dirichlet(np.ones(9), size=5)
    theta = rng.dirichlet(np.ones(9), size=(5, 3, 9))
    ref = rao_blackwell_class_probabilities(sim.data.counts, np.log(pi), np.log(theta))
    np.testing.assert_allclose(draws_class_probabilities(sim.data.counts, pi, theta), ref, rtol=1e-12)
    ll = draws_log_lik(sim.data.counts, pi, theta)
    np.testing.assert_allclose(ll[:, 2], class_log_posterior(sim.data.counts, np.log(pi[2]), np.log(theta[2]))[1])


def test_bad_draw_shapes_are_refused(sim, draws):
    pi, theta = draws
    with pytest.raises(ValueError, match=r"pi must have shape \(S, K\) and theta"):
        draws_class_probabilities(sim.data.counts, pi, theta[:-1])


# ----------------------------------------------------- one sort per parameter
@pytest.mark.parametrize("S", [200, 101])
def test_one_sort_statistics_equal_arviz_and_numpy(S):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, S, 8)).cumsum(axis=1) * 0.1 + rng.normal(size=(4, S, 8))
    x[:, :, 3] = np.round(x[:, :, 3])  # ties
    x[:, :, 4] = 0.25  # a constant
    x[:, :, 5] = rng.normal(size=(4, S)).cumsum(axis=1)  # a random walk: Geyer's sequence runs long (FFT route)
    res = diag.draws_statistics(x, (0.05, 0.5, 0.95), mean_ess=True)
    np.testing.assert_allclose(res["rhat"], _arviz.rhat(x), rtol=1e-9)
    np.testing.assert_allclose(res["ess_bulk"], _arviz.ess(x, "bulk"), rtol=1e-9)
    np.testing.assert_allclose(res["ess_tail"], _arviz.ess(x, "tail"), rtol=1e-9)
    flat = x.reshape(-1, 8)
    np.testing.assert_allclose(res["quantiles"], np.quantile(flat, (0.05, 0.5, 0.95), axis=0), rtol=0, atol=0)
    np.testing.assert_allclose(res["mean"], flat.mean(axis=0), rtol=1e-14)
    # the ESS of the raw draws (ArviZ's method="mean"), as LOO's relative efficiency uses it
    np.testing.assert_allclose(res["ess_mean"], diag._ess(diag._split(diag._chains_first(x))), rtol=1e-9)


def test_one_sort_statistics_edge_cases():
    rng = np.random.default_rng(4)
    one_chain = rng.normal(size=(1, 50, 3))
    res = diag.draws_statistics(one_chain)
    assert np.isnan(res["rhat"]).all() and np.isfinite(res["ess_bulk"]).all()
    short = rng.normal(size=(2, 3, 2))  # fewer than 4 draws: no Rhat or ESS, but a mean
    res = diag.draws_statistics(short, (0.5,))
    assert np.isnan(res["ess_bulk"]).all() and np.isfinite(res["mean"]).all()
    with_nan = rng.normal(size=(2, 40, 2))
    with_nan[0, 5, 1] = np.nan
    res = diag.draws_statistics(with_nan)
    assert np.isnan(res["rhat"][1]) and np.isfinite(res["rhat"][0])


def test_summary_and_intervals_are_the_draws_own_statistics(gfit):
    s = gfit.summary()
    theta = gfit.posterior_samples("theta").sel(rater=gfit.data.rater_labels[2])
    draws = theta.isel(category=1, rating=0).to_numpy()
    row = s.parameters.loc[f"theta[{gfit.data.rater_labels[2]}, {gfit.data.categories[1]}, {gfit.data.categories[0]}]"]
    assert row["mean"] == pytest.approx(draws.mean(), rel=1e-12)
    assert row["5%"] == np.quantile(draws, 0.05) and row["95%"] == np.quantile(draws, 0.95)
    table = gfit.mcmc_diagnostics(warn=False)
    assert row["rhat"] == table.loc[row.name, "rhat"]
    # posterior_interval: the same numbers as xarray's quantile over the draws, at any probability
    for prob in (0.9, 0.5):
        got = gfit.posterior_interval(prob, "theta")
        ref = gfit.posterior_samples("theta").quantile([(1 - prob) / 2, (1 + prob) / 2], dim="draw")
        assert got.dims == ("bound", "rater", "category", "rating")
        assert list(got.coords["bound"].values) == ["lower", "upper"]
        np.testing.assert_allclose(got.to_numpy(), ref.to_numpy(), rtol=0, atol=1e-15)
    s50 = gfit.summary(prob=0.5)
    assert list(s50.parameters.columns) == ["mean", "25%", "75%", "rhat", "ess_bulk"]


def test_homogeneous_summary_repeats_the_shared_matrix(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = gibbs(sim.data, "homogeneous", chains=2, warmup=50, draws=100, seed=1, progress=False)
    table = f.summary().parameters
    J, K = sim.data.n_raters, sim.data.n_categories
    theta_rows = table.iloc[K:]
    assert len(theta_rows) == J * K * K
    per_rater = theta_rows["mean"].to_numpy().reshape(J, K * K)
    assert np.all(per_rater == per_rater[0])
    np.testing.assert_allclose(per_rater[0], np.asarray(f.draws["theta"]).mean(axis=(0, 1)).ravel(), rtol=1e-12)
    interval = f.posterior_interval(0.8, "theta")
    assert interval.sizes["rater"] == J
    ref = np.quantile(np.asarray(f.draws["theta"]).reshape(-1, K, K), [0.1, 0.9], axis=0)
    np.testing.assert_allclose(interval.isel(rater=J - 1).to_numpy(), ref, atol=1e-15)


# -------------------------------------------------------------- bounded view
def test_summary_prints_a_bounded_view_with_the_full_tables_one_attribute_away():
    sim = pyrater.simulate("dawid_skene", n_items=3000, n_raters=30, n_categories=3, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = gibbs(sim.data, chains=2, warmup=50, draws=100, seed=1, progress=False)
    s = f.summary()
    text = str(s)
    assert len(s.parameters) == 3 + 30 * 9 and len(s.classes) == 3000
    assert text.count("\n") < 80, text  # not 3,000 items and 270 error-matrix entries
    assert "all: summary.parameters" in text and "all: summary.classes" in text
    view = s.parameters_view()
    assert view.index[:3].tolist() == ["pi[1]", "pi[2]", "pi[3]"]
    rest = s.parameters.iloc[3:]
    assert view["rhat"].iloc[3] == rest["rhat"].max()  # the worst Rhat is shown first
    full = s.to_string(full=True)  # every row, for a file report (the CLI's summary.txt)
    assert full.count("\n") > 3000 + 270 and "all: summary" not in full and full.startswith(text.splitlines()[0])
    classes = s.classes_view()
    certainty = s.classes.drop(columns="z").max(axis=1)
    assert classes.drop(columns="z").max(axis=1).max() <= certainty.sort_values().iloc[len(classes) - 1]
    # a short table is printed whole
    small = pyrater.simulate("dawid_skene", n_items=12, n_raters=2, n_categories=2, seed=1)
    e = pyrater.em(small.data, method="ml")
    assert len(str(e.summary()).splitlines()) > 12 and "summary.classes" not in str(e.summary())


# ------------------------------------------------------------ memory messages
def test_gibbs_log_lik_warning_states_the_total_against_the_budget(sim):
    I, J, K = sim.data.n_units, sim.data.n_raters, sim.data.n_categories
    draws_bytes = 8.0 * 2 * 100 * (K + J * K * K) + 8.0 * 2 * I * K  # the draws and the summed class probabilities
    ll_bytes = 8.0 * 2 * 100 * I
    budget = (draws_bytes + ll_bytes / 2) / 2**30
    with pytest.warns(UserWarning, match="log_lik not kept") as rec, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains
        f = gibbs(sim.data, chains=2, warmup=5, draws=100, seed=1, max_memory_gib=budget, progress=False)
    msg = next(str(r.message) for r in rec if "log_lik not kept" in str(r.message))
    total = float(re.search(r"\) ([0-9.e-]+) GiB in all", msg).group(1))
    assert total == pytest.approx((draws_bytes + ll_bytes) / 2**30, rel=0.005)
    suggested = float(re.search(r"max_memory_gib >= ([0-9.e-]+) to keep it", msg).group(1))
    assert (draws_bytes + ll_bytes) / 2**30 <= suggested <= 1.01 * (draws_bytes + ll_bytes) / 2**30
    assert total > budget and f"max_memory_gib={budget}" in msg and "recompute" in msg
    assert "log_lik" not in f.draws and f.settings["max_memory_gib"] == budget
    # LOO still works: the log-likelihood is recomputed from the draws
    assert pyrater.loo(f, warn=False).n_data_points == I


def test_log_prior_density_in_blocks_equals_one_block(gfit):
    from pyrater.inference.gibbs.priors import conjugate_prior, log_prior_density

    prior = conjugate_prior("dawid_skene", gfit.data.n_categories, gfit.data.n_raters)
    pi, theta = np.asarray(gfit.draws["pi"]), np.asarray(gfit.draws["theta"])
    whole = log_prior_density(prior, pi, theta, max_block=10**9)
    blocks = log_prior_density(prior, pi, theta, max_block=1)
    assert whole.shape == pi.shape[:2]
    np.testing.assert_array_equal(whole, blocks)
    np.testing.assert_allclose(gfit.sample_stats["lp"] - whole, gfit.sample_stats["lp"] - blocks)


def test_every_method_takes_max_memory_gib_and_the_fit_records_it(sim):
    f = pyrater.fit(sim.data, method="em", max_memory_gib=2.0)
    assert f.pi.shape == (4,)
    with pytest.raises(ValueError, match=r"EM's per-unit arrays .* would need .* the limit is max_memory_gib=1e-06"):
        pyrater.fit(sim.data, method="em", max_memory_gib=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = pyrater.fit(sim.data, method="gibbs", chains=2, warmup=5, draws=20, seed=1, max_memory_gib=3.0)
    assert g.settings["max_memory_gib"] == 3.0
    with pytest.raises(ValueError, match="max_memory_gib must be a positive number"):
        pyrater.fit(sim.data, method="em", max_memory_gib=0)


@pytest.mark.parametrize(
    "case",
    ["plain", "known", "grouped", "pi_moves", "thin", "nine_classes"],
)
def test_class_probabilities_summed_while_sampling_equal_the_post_fit_pass(case, caries_path):
    kwargs: dict = {"chains": 2, "warmup": 20, "draws": 60, "seed": 3}
    if case == "grouped":
        data = pyrater.RatingData.from_grouped(pd.read_csv(caries_path))
    elif case == "nine_classes":
        data = pyrater.simulate("dawid_skene", n_items=80, n_raters=4, n_categories=9, seed=2).data
    else:
        data = pyrater.simulate("dawid_skene", n_items=150, n_raters=4, n_categories=3, seed=6).data
    if case == "known":
        kwargs["known"] = {data.unit_labels[0]: data.categories[1], data.unit_labels[5]: data.categories[2]}
    if case == "pi_moves":
        kwargs["pi_moves"] = 2
    if case == "thin":
        kwargs["thin"] = 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = gibbs(data, progress=False, **kwargs)
    assert "_rb_probs" in f.__dict__  # summed by the sampler
    summed = f.class_probabilities().to_numpy()
    pi, theta = f._effective_draws()
    ref = draws_class_probabilities(data.counts, pi, theta, f.known)
    np.testing.assert_allclose(summed, ref, rtol=1e-11, atol=1e-14)
    # without room for the sums the fit computes them after sampling: the same numbers
    tight = 8.0 * 2 * (60 // kwargs.get("thin", 1)) * (data.n_categories + data.n_raters * data.n_categories**2)
    if case == "pi_moves":
        tight += 8.0 * 2 * data.n_units * data.n_categories  # the moves' evidence
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = gibbs(data, progress=False, log_lik=False, max_memory_gib=tight / 2**30, **kwargs)
    assert "_rb_probs" not in g.__dict__
    np.testing.assert_allclose(g.class_probabilities().to_numpy(), summed, rtol=1e-11, atol=1e-14)


# --------------------------------------------------------------- progress
def test_gibbs_progress_bar_counts_every_sweep(sim, monkeypatch):
    from pyrater.inference.gibbs import sampler

    seen = {}

    class Bar:
        def __init__(self, show, total, desc, unit="it"):
            seen.update(show=show, total=total, desc=desc)
            self.n = 0

        def update(self, k=1):
            self.n += k
            seen["n"] = self.n

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(sampler, "progress_bar", Bar)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = gibbs(sim.data, chains=3, warmup=7, draws=20, seed=1, n_threads=2)
    assert seen == {"show": True, "total": 3 * 27, "desc": "Gibbs sweeps", "n": 3 * 27}
    assert f.settings["progress"] is True


def test_post_fit_steps_show_progress_bars(gfit, monkeypatch):
    import pyrater._quiet as quiet

    descs = []
    real = quiet.progress_bar

    def recording(show, total, desc, unit="it"):
        descs.append((desc, total))
        return real(False, total, desc, unit)

    monkeypatch.setattr(quiet, "progress_bar", recording)
    for key in ("_rb_probs", "_stats", "_diagnostics"):
        gfit.__dict__.pop(key, None)
    gfit.summary()
    pyrater.loo(gfit, warn=False, method="exact")
    names = [d for d, _ in descs]
    assert "class probabilities" in names and "diagnostics" in names and "LOO" in names
    assert dict(descs)["class probabilities"] == 3 * 201


def test_cached_post_fit_results_are_not_recomputed(gfit):
    probs = gfit.class_probabilities()
    assert gfit.class_probabilities() is not probs  # a new frame each call ...
    assert np.shares_memory(gfit.class_probabilities().to_numpy(), gfit._rb_probs) or np.array_equal(
        gfit.class_probabilities().to_numpy(), probs.to_numpy()
    )
    table = gfit.mcmc_diagnostics(warn=False)
    assert "_stats" in gfit.__dict__ and list(table.columns) == ["rhat", "ess_bulk", "ess_tail"]
    pd.testing.assert_frame_equal(table, gfit.mcmc_diagnostics(warn=False))
