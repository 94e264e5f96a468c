"""The pooled (hierarchical Dirichlet) Dawid-Skene family: structure, bad input, EM, Gibbs, Stan, the Fit API.

The Stan program's density against brute force is checked with the other
programs' (``test_stan_programs.py``, ``test_stan_full_density.py``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import gammaln, logsumexp

import pyrater
from conftest import shared_file
from pyrater import PooledDawidSkene, RatingData, em, simulate_pooled
from pyrater.inference import _numba
from pyrater.inference.gibbs import gibbs
from pyrater.inference.gibbs import kernel as gkern
from pyrater.inference.gibbs.priors import conjugate_prior, log_prior_density
from pyrater.models.kernels import class_log_posterior
from test_fitfile import assert_same_fit

K = 3
PI = np.array([0.5, 0.3, 0.2])
M = np.array([[0.8, 0.1, 0.1], [0.1, 0.75, 0.15], [0.1, 0.2, 0.7]])


def _rater_counts(data: RatingData) -> np.ndarray:
    return np.bincount(data.rater, minlength=data.n_raters)


# ------------------------------------------------------------------ structure and input
def test_simulator_draws_raters_around_the_population_rows():
    sim = simulate_pooled(20, 4000, n_categories=K, pi=PI, m=M, s=[40.0, 10.0, 20.0], raters_per_item=1, seed=2)
    assert sim.model == "pooled" and sim.theta.shape == (4000, K, K)
    np.testing.assert_array_equal(sim.params["m"], M)
    # theta[j, k] ~ Dirichlet(1 + s m): mean (1 + s m) / (K + s), variance of a Dirichlet
    for k, s in enumerate([40.0, 10.0, 20.0]):
        a = 1 + s * M[k]
        mean = a / a.sum()
        sd = np.sqrt(mean * (1 - mean) / (a.sum() + 1))
        assert np.all(np.abs(sim.theta[:, k].mean(0) - mean) < 4.5 * sd / np.sqrt(4000))
        assert np.all(np.abs(sim.theta[:, k].std(0) - sd) < 0.1 * sd)
    drawn = pyrater.simulate(PooledDawidSkene(s_shape=5, s_rate=1), 10, 3, n_categories=K, seed=1)
    assert drawn.params["s"].shape == (K,) and drawn.params["m"].shape == (K, K)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: simulate_pooled(10, 3, n_categories=K, m=np.eye(2)), "m must have shape"),
        (lambda: simulate_pooled(10, 3, n_categories=K, m=np.full((K, K), 0.5)), "m"),
        (lambda: simulate_pooled(10, 3, n_categories=K, s=-1.0), "s must be > 0"),
        (lambda: PooledDawidSkene(s_shape=1.0).priors(K, 3), "s_shape must be > 1"),
        (lambda: PooledDawidSkene(s_rate=0).priors(K, 3), "s_rate must be > 0"),
        (lambda: PooledDawidSkene(beta=np.ones((2, 2))).priors(K, 3), "beta must have shape"),
        (lambda: PooledDawidSkene(em_update="mean"), "em_update must be"),
    ],
)
def test_bad_input_is_refused_with_the_arguments_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_em_ml_is_refused_and_map_needs_beta_of_at_least_one():
    sim = simulate_pooled(30, 3, n_categories=K, seed=1)
    with pytest.raises(ValueError, match="method='ml' is not available for the pooled model"):
        em(sim.data, "pooled", method="ml")
    with pytest.raises(ValueError, match="beta"):  # on the simplex; by default the log-odds mode instead
        em(sim.data, PooledDawidSkene(beta=np.full((K, K), 0.5)), method="map", mode_scale="simplex")
    fit = em(sim.data, PooledDawidSkene(beta=np.full((K, K), 0.5)), method="map", progress=False)
    assert fit.mode_scale == "log_odds"


def test_default_prior_on_m_is_at_least_one_for_every_k():
    for k in (2, 3, 5, 8):
        beta = PooledDawidSkene().priors(k, 4)["beta"]
        assert beta.min() >= 1 and np.all(np.diag(beta) > beta[0, 1])


# ------------------------------------------------------------------ the Gibbs hyperparameter step
def _conditional_grid(theta_k: np.ndarray, bm: np.ndarray, a: float, b: float):
    """K = 2: the conditional density of (s, m_0) given the raters' rows, on a grid (independent of the kernel)."""
    s = np.linspace(0.01, 150.0, 1500)[:, None]
    m0 = np.linspace(1e-4, 1 - 1e-4, 1200)[None, :]
    J = theta_k.shape[0]
    T = np.log(theta_k).sum(0)
    a0, a1 = 1 + s * m0, 1 + s * (1 - m0)
    logp = J * (gammaln(a0 + a1) - gammaln(a0) - gammaln(a1)) + (a0 - 1) * T[0] + (a1 - 1) * T[1]
    logp += (bm[0] - 1) * np.log(m0) + (bm[1] - 1) * np.log1p(-m0) + (a - 1) * np.log(s) - b * s
    w = np.exp(logp - logsumexp(logp))
    return float((w * s).sum()), float((w * m0).sum()), float(np.sqrt((w * s**2).sum() - (w * s).sum() ** 2))


def test_gibbs_hyperparameter_step_leaves_the_conditional_invariant():
    """Fixed theta: the slice-sampling chain of (m, s) has the conditional's mean (computed on a grid)."""
    rng = np.random.default_rng(5)
    J, K2 = 8, 2
    theta = rng.dirichlet([9.0, 3.0], size=(J, K2))
    bm = np.array([[3.0, 1.5], [1.5, 3.0]])
    a, b = 2.0, 0.1
    beta = np.concatenate([np.full((J, K2, K2), 2.0), bm[None]])
    b1, b2 = np.full(K2, a), np.full(K2, b)
    p = np.empty((K2 + 1, K2))
    gen = np.random.default_rng(1)
    n = 6000
    out = np.empty((n, 2))
    for t in range(n):
        _numba.run(gkern.pooled_hyper_step, J, K2, theta, beta, b1, b2, gen, p, 1)
        out[t] = p[K2, 0], p[0, 0]
    out = out[200:]
    np.testing.assert_allclose(beta[:J, 0], np.broadcast_to(1 + p[K2, 0] * p[0], (J, K2)))
    s_mean, m_mean, s_sd = _conditional_grid(theta[:, 0], bm[0], a, b)
    se = pyrater._arviz.mcse(out[None])  # (2,): Monte Carlo errors of the means of s and m_0
    assert abs(out[:, 0].mean() - s_mean) < 4 * se[0], (out[:, 0].mean(), s_mean, s_sd)
    assert abs(out[:, 1].mean() - m_mean) < 4 * se[1], (out[:, 1].mean(), m_mean)


@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")  # short chains
def test_gibbs_draws_log_lik_and_lp_are_the_models():
    sim = simulate_pooled(100, 5, n_categories=K, raters_per_item=3, seed=4)
    f = gibbs(sim.data, "pooled", chains=2, warmup=20, draws=30, seed=3, progress=False)
    assert f.draws["m"].shape == (2, 30, K, K) and f.draws["s"].shape == (2, 30, K)
    np.testing.assert_allclose(np.asarray(f.draws["m"]).sum(-1), 1.0)
    pi, theta = f._draws()
    m = np.asarray(f.draws["m"]).reshape(-1, K, K)
    s = np.asarray(f.draws["s"]).reshape(-1, K)
    ll = np.asarray(f.draws["log_lik"]).reshape(pi.shape[0], -1)
    lp = np.asarray(f.sample_stats["lp"]).reshape(-1)
    pri = PooledDawidSkene().priors(K, 5)
    for t in (0, 17, pi.shape[0] - 1):
        _, ref = class_log_posterior(sim.data.counts, np.log(pi[t]), np.log(theta[t]))
        np.testing.assert_allclose(ll[t], ref, rtol=1e-10)
        log_prior = stats.dirichlet.logpdf(pi[t], pri["alpha"])
        log_prior += sum(stats.dirichlet.logpdf(m[t, k], pri["beta"][k]) for k in range(K))
        log_prior += stats.gamma.logpdf(s[t], 2.0, scale=10.0).sum()
        log_prior += sum(
            stats.dirichlet.logpdf(theta[t, j, k], 1 + s[t, k] * m[t, k]) for j in range(5) for k in range(K)
        )
        np.testing.assert_allclose(lp[t], ref.sum() + log_prior, rtol=1e-10)
        hyper = np.concatenate([m[t], s[t][None]])
        prior = conjugate_prior("pooled", K, 5)
        assert log_prior_density(prior, pi[t], theta[t], hyper) == pytest.approx(log_prior, rel=1e-12)


# ------------------------------------------------------------------ EM
def test_em_objective_rises_and_the_estimate_is_a_fixed_point():
    sim = simulate_pooled(300, 6, n_categories=K, pi=PI, m=M, s=20.0, raters_per_item=3, seed=3)
    f = em(sim.data, "pooled", method="map", init="majority", tol=1e-12, max_iter=5000, progress=False)
    assert f.converged
    assert np.all(np.diff(f.log_lik_trace) > -1e-9 * np.abs(f.log_lik_trace[1:]))
    m, s = f.model_params["m"], f.model_params["s"]
    # theta is the M-step at (m, s): the expected counts plus s m, normalised
    T = f.class_probs
    N = np.einsum("ik,ijl->jkl", T, sim.data.counts.toarray().reshape(-1, 6, K))
    ref = N + s[None, :, None] * m[None]
    np.testing.assert_allclose(f.theta, ref / ref.sum(-1, keepdims=True), atol=1e-6)
    # and (m, s) maximise their conditional density given theta: no small move raises it
    from pyrater.inference.em.steps import pooled_hyper_mode

    pri = f.priors
    m2, s2 = pooled_hyper_mode(f.theta, m, s, pri["beta"], float(pri["s_shape"]), float(pri["s_rate"]))
    np.testing.assert_allclose(m2, m, atol=1e-5)
    np.testing.assert_allclose(s2, s, rtol=1e-4)


def test_em_expected_update_keeps_s_near_the_truth_where_the_joint_mode_overshrinks():
    """60 raters, about 33 ratings per row: the joint mode's s runs far above the truth, the expected update's not."""
    sim = simulate_pooled(2000, 60, n_categories=K, pi=PI, m=M, s=[30.0, 10.0, 20.0], raters_per_item=3, seed=3)
    fits = {u: em(sim.data, PooledDawidSkene(em_update=u), method="map", progress=False) for u in ("mode", "expected")}
    s_err = {u: float(np.abs(np.log(f.model_params["s"] / [30.0, 10.0, 20.0])).mean()) for u, f in fits.items()}
    th_err = {u: float(np.abs(f.theta - sim.theta).mean()) for u, f in fits.items()}
    assert fits["expected"].converged
    assert s_err["expected"] < 0.5 * s_err["mode"], s_err
    assert th_err["expected"] < th_err["mode"], th_err
    # and the expected update's estimate is its own fixed point: theta is the M-step at its (m, s)
    f = fits["expected"]
    N = np.einsum("ik,ijl->jkl", f.class_probs, sim.data.counts.toarray().reshape(-1, 60, K))
    ref = N + f.model_params["s"][None, :, None] * f.model_params["m"][None]
    np.testing.assert_allclose(f.theta, ref / ref.sum(-1, keepdims=True), atol=1e-5)


def test_grouped_and_long_data_give_the_same_em_fit():
    grouped = RatingData.from_grouped(pd.read_csv(shared_file("caries.csv")), tally="n")
    long = RatingData.from_long(grouped.to_long(), categories=list(grouped.categories))
    a = em(grouped, "pooled", method="map", tol=1e-13, max_iter=20000, progress=False)
    b = em(long, "pooled", method="map", tol=1e-13, max_iter=20000, progress=False)
    np.testing.assert_allclose(a.pi, b.pi, atol=1e-6)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-6)
    np.testing.assert_allclose(a.model_params["s"], b.model_params["s"], rtol=1e-5)
    assert a.log_lik == pytest.approx(b.log_lik, rel=1e-9)


@pytest.mark.stan
def test_em_map_is_stans_posterior_mode(stan_engine):
    sim = simulate_pooled(300, 6, n_categories=K, pi=PI, m=M, s=15.0, raters_per_item=3, seed=12)
    for model in (PooledDawidSkene(), PooledDawidSkene(s_shape=3, s_rate=0.5)):
        opt = pyrater.fit(sim.data, model, method="optimize", seed=3, engine=stan_engine)
        # the posterior may have several modes, and the optimiser keeps the best of its starts (EM's mode among
        # them; Stan versions may end at different ones): EM started at Stan's class probabilities must stay at
        # Stan's mode, the same point of the same density reached by the other route
        start = opt.class_probabilities().to_numpy()
        ref = em(sim.data, model, method="map", init=start, tol=1e-13, max_iter=20000, progress=False)
        np.testing.assert_allclose(opt.point_estimate("pi").to_numpy(), ref.pi, atol=5e-4)
        np.testing.assert_allclose(opt.point_estimate("theta").to_numpy(), ref.theta, atol=2e-3)
        np.testing.assert_allclose(opt.params["m"], ref.model_params["m"], atol=2e-3)
        np.testing.assert_allclose(opt.params["s"], ref.model_params["s"], rtol=1e-2)


# ------------------------------------------------------------------ what the family is for
@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")
def test_gibbs_recovers_the_population_and_shrinkage_helps_raters_with_few_ratings():
    """80 raters, most with a handful of ratings: pooling estimates their matrices better than DS."""
    err = {"pooled": [], "dawid_skene": []}
    cover = []
    for seed in range(2):
        sim = simulate_pooled(600, 80, n_categories=K, pi=PI, m=M, s=[30.0, 20.0, 25.0], raters_per_item=3, seed=seed)
        n = _rater_counts(sim.data)
        few = n <= np.median(n)
        for model in err:
            f = gibbs(sim.data, model, chains=2, warmup=300, draws=400, seed=seed, log_lik=False, progress=False)
            th = np.asarray(f.draws["theta"]).mean((0, 1))
            err[model].append(float(np.abs(th[few] - sim.theta[few]).mean()))
            if model == "pooled":
                md = np.asarray(f.draws["m"]).reshape(-1, K, K)
                lo, hi = np.percentile(md, [1, 99], axis=0)
                cover.append(np.mean((lo <= M) & (M <= hi)))
                acc = (f.point_estimate("z").to_numpy() == sim.data.categories[sim.z]).mean()
                assert acc > 0.85
    assert np.mean(err["pooled"]) < 0.8 * np.mean(err["dawid_skene"]), err
    assert np.mean(cover) >= 0.8, cover


# ------------------------------------------------------------------ Gibbs against NUTS
@pytest.mark.stan
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")
def test_gibbs_agrees_with_nuts(stan_engine):
    sim = simulate_pooled(80, 4, n_categories=2, m=[[0.8, 0.2], [0.25, 0.75]], s=15.0, raters_per_item=3, seed=9)
    g = gibbs(sim.data, "pooled", chains=4, warmup=500, draws=2000, seed=1, log_lik=False, progress=False)
    n = pyrater.fit(sim.data, "pooled", method="mcmc", chains=4, warmup=500, draws=1000, seed=2, progress=False,
                    engine=stan_engine)  # fmt: skip
    for name in ("pi", "m", "s", "theta"):
        x, y = (np.asarray(f.draws[name]) for f in (g, n))
        x, y = x.reshape(*x.shape[:2], -1), y.reshape(*y.shape[:2], -1)
        se = np.hypot(pyrater._arviz.mcse(x), pyrater._arviz.mcse(y))
        z = np.abs(x.mean((0, 1)) - y.mean((0, 1))) / se
        assert np.all(z < 4.5), (name, z.max())


# ------------------------------------------------------------------ the Fit API
@pytest.fixture(scope="module")
def small():
    return simulate_pooled(80, 5, n_categories=K, pi=PI, m=M, s=20.0, raters_per_item=3, seed=8)


def _check_fit_api(f, sim, tmp_path, draws: bool) -> None:
    J = sim.data.n_raters
    pi = f.point_estimate("pi")
    assert pi.shape == (K,) and pi.sum() == pytest.approx(1)
    theta = f.point_estimate("theta")
    assert theta.dims == ("rater", "category", "rating") and theta.shape == (J, K, K)
    probs = f.class_probabilities()
    np.testing.assert_allclose(probs.sum(axis=1), 1, atol=1e-9)
    assert (f.point_estimate("z").to_numpy() == sim.data.categories[sim.z]).mean() > 0.75
    s = f.summary()
    assert s.model == "Pooled Dawid-Skene" and float(s.priors["s_shape"]) == 2.0
    post = pyrater._arviz.group(f.to_inference_data(), "posterior")
    assert post["m"].dims[-2:] == ("category", "rating") and post["s"].dims[-1] == "category"
    if draws:
        diag = f.mcmc_diagnostics(warn=False)
        assert any(str(i).startswith("s[") for i in diag.index)
        reps = pyrater.posterior_predict(f, draws=5, seed=1)
        assert len(reps) == 5 * sim.data.n_ratings
        ppc = pyrater.posterior_predictive_check(f, lambda df: float((df["rating"] == 1).mean()), draws=20, seed=1)
        assert 0 <= ppc.p_value <= 1
    back = pyrater.load(f.save(tmp_path / "fit.nc"))
    if f.method == "pathfinder":  # every accessor but the MCMC diagnostics assert_same_fit reads
        assert type(back) is type(f) and back.draws.keys() == f.draws.keys()
        for key, value in f.draws.items():
            np.testing.assert_array_equal(back.draws[key], value)
        pd.testing.assert_frame_equal(back.class_probabilities(), f.class_probabilities())
    else:
        assert_same_fit(f, back)
    if getattr(f, "model_params", None) is not None:  # EM: m and s at the mode
        for key, value in f.model_params.items():
            np.testing.assert_array_equal(back.model_params[key], value)


def test_fit_api_em(small, tmp_path):
    f = pyrater.fit(small.data, "pooled", method="em")
    assert set(f.model_params) == {"m", "s"}
    _check_fit_api(f, small, tmp_path, draws=False)


def test_fit_api_gibbs_and_compare_with_dawid_skene(small, tmp_path):
    kw = dict(method="gibbs", chains=2, warmup=200, draws=300, seed=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains
        f = pyrater.fit(small.data, "pooled", **kw)
        ds = pyrater.fit(small.data, "dawid_skene", **kw)
    _check_fit_api(f, small, tmp_path, draws=True)
    table = pyrater.compare({"pooled": f, "dawid_skene": ds})
    assert set(table.index) == {"pooled", "dawid_skene"} and table["weight"].sum() == pytest.approx(1.0)


@pytest.mark.stan
@pytest.mark.parametrize("method", ["mcmc", "optimize", "pathfinder"])
def test_fit_api_stan_methods(small, tmp_path, method, stan_engine):
    if method == "pathfinder" and stan_engine.name != "cmdstanpy":
        pytest.skip("Pathfinder runs in CmdStan only (the pystan engine refuses it)")
    kw = dict(chains=2, warmup=200, draws=200) if method == "mcmc" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains, pathfinder's Pareto k
        f = pyrater.fit(small.data, "pooled", method=method, seed=2, progress=False, engine=stan_engine, **kw)
    J = small.data.n_raters
    if method == "optimize":
        assert f.params["m"].shape == (K, K) and f.params["s"].shape == (K,)
    else:
        assert f.draws["m"].shape[2:] == (K, K) and f.draws["theta"].shape[2:] == (J, K, K)
    _check_fit_api(f, small, tmp_path, draws=method == "mcmc")
    if method == "optimize":
        np.testing.assert_array_equal(pyrater.load(f.save(tmp_path / "o.nc")).params["s"], f.params["s"])
