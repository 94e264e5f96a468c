"""The one-coin Dawid-Skene family: structure, bad input, EM and Gibbs against the model, the Fit API.

The Stan program's density against brute force is checked with the other
programs' (``test_stan_programs.py``, ``test_stan_full_density.py``), EM MAP
against Stan's optimiser in ``test_fit.py``, Gibbs against NUTS in
``test_gibbs.py`` (all parametrised over the families).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import pyrater
from conftest import shared_file
from pyrater import OneCoinDawidSkene, RatingData, em, simulate_one_coin
from pyrater.inference.gibbs import gibbs
from pyrater.inference.gibbs.priors import conjugate_prior, log_prior_density
from pyrater.models import one_coin_theta
from pyrater.models.kernels import class_log_posterior
from pyrater.models.one_coin import default_accuracy_prior
from test_fitfile import assert_same_fit

K = 3
PI = np.array([0.5, 0.3, 0.2])


def _rater_counts(data: RatingData) -> np.ndarray:
    """Ratings per rater (J,)."""
    return np.bincount(data.rater, minlength=data.n_raters)


# ------------------------------------------------------------------ structure
def test_theta_has_one_accuracy_per_rater():
    p = np.array([0.9, 0.55, 0.7])
    theta = one_coin_theta(p, 4)
    assert theta.shape == (3, 4, 4)
    off = ~np.eye(4, dtype=bool)
    for j in range(3):
        np.testing.assert_allclose(np.diag(theta[j]), p[j])
        np.testing.assert_allclose(theta[j][off], (1 - p[j]) / 3)
    np.testing.assert_allclose(theta.sum(-1), 1)
    sim = simulate_one_coin(50, 3, n_categories=4, p=p, seed=0)
    np.testing.assert_array_equal(sim.theta, theta)
    np.testing.assert_array_equal(sim.params["p"], p)
    assert sim.model == "one_coin"
    same = simulate_one_coin(50, 3, n_categories=4, p=0.8, seed=0)  # a scalar is every rater's accuracy
    np.testing.assert_array_equal(same.params["p"], np.full(3, 0.8))


def test_simulated_ratings_follow_each_raters_accuracy():
    p = np.array([0.95, 0.75, 0.5, 0.3])
    sim = simulate_one_coin(6000, 4, n_categories=K, p=p, seed=3)
    d = sim.data
    right = np.bincount(d.rater, weights=(d.rating == sim.z[d.unit]), minlength=4)
    n = _rater_counts(d)
    share = right / n
    assert np.all(np.abs(share - p) < 4.5 * np.sqrt(p * (1 - p) / n))


def test_default_and_object_priors_drive_the_simulator():
    sim = pyrater.simulate("one_coin", 30, 500, n_categories=K, raters_per_item=2, seed=1)
    p = sim.params["p"]
    assert p.shape == (500,)
    # the default Beta(4 (1 + 1/K), 4 (1 - 1/K)): mean (1 + 1/K) / 2, weight 8
    b1, b2 = default_accuracy_prior(K)
    mean = 0.5 * (1 + 1 / K)
    assert (b1, b2) == pytest.approx((8 * mean, 8 * (1 - mean)))
    assert abs(p.mean() - mean) < 4 * stats.beta.std(b1, b2) / np.sqrt(500)
    sharp = pyrater.simulate(OneCoinDawidSkene(beta1=1000, beta2=1), 30, 6, n_categories=K, seed=1)
    assert np.all(sharp.params["p"] > 0.97)
    assert OneCoinDawidSkene().priors(K, 4)["beta1"] == pytest.approx(b1)
    assert OneCoinDawidSkene().priors(K, 4)["beta2"] == pytest.approx(b2)
    assert default_accuracy_prior(2) == pytest.approx((6.0, 2.0))
    assert default_accuracy_prior(5) == pytest.approx((4.8, 3.2))
    assert OneCoinDawidSkene().priors(K, 4)["alpha"].tolist() == [3.0, 3.0, 3.0]


def test_the_family_is_registered_everywhere():
    from pyrater.inference.stan.data import STAN_MODEL_NAMES

    m = pyrater.get_model("one_coin")
    assert isinstance(m, OneCoinDawidSkene) and m.conjugate == "one_coin"
    assert "one_coin" in pyrater.models.MODEL_NAMES and "one_coin" in STAN_MODEL_NAMES
    assert set(m.methods) == {"mcmc", "optimize", "pathfinder", "em", "gibbs"}
    assert pyrater.simulate_one_coin is simulate_one_coin


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: simulate_one_coin(10, 2, n_categories=3, p=[1.2, 0.5]), r"p must hold probabilities in \[0, 1\]"),
        (lambda: simulate_one_coin(10, 2, n_categories=3, p=[-0.1, 0.5]), r"p must hold probabilities in \[0, 1\]"),
        (
            lambda: simulate_one_coin(10, 2, n_categories=3, p=np.full((2, 3), 0.7)),
            r"p must have shape \(J,\) = \(2,\)",
        ),
        (lambda: simulate_one_coin(10, 2, n_categories=3, p=[0.7, 0.7, 0.7]), r"p must have shape \(J,\) = \(2,\)"),
        (lambda: simulate_one_coin(10, 2, p=[0.7, 0.8]), "give n_categories"),
        (lambda: simulate_one_coin(10, 2, n_categories=3, beta1=0), "beta1 must be > 0"),
        (lambda: simulate_one_coin(10, 2, n_categories=3, beta2=-1.0), "beta2 must be > 0"),
        (lambda: OneCoinDawidSkene(beta1=0.0).priors(3, 2), "beta1 must be > 0"),
        (lambda: OneCoinDawidSkene(beta2=[1.0, 2.0]).priors(3, 2), r"beta2 must have shape \(\) \(a scalar\)"),
        (lambda: OneCoinDawidSkene(beta1=np.nan).priors(3, 2), "beta1 must be finite"),
        (lambda: OneCoinDawidSkene(alpha=[1.0, 1.0]).priors(3, 2), r"alpha must have shape \(K,\) = \(3,\)"),
        (lambda: one_coin_theta(np.full((2, 3), 0.5), 3), r"p must have shape \(J,\)"),
        (lambda: one_coin_theta(np.full(2, 0.5), 1), "K must be an integer >= 2"),
    ],
)
def test_bad_input_is_refused_with_the_arguments_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("method", ["em", "gibbs", "mcmc", "optimize", "pathfinder"])
def test_bad_priors_are_refused_before_fitting(method):
    sim = simulate_one_coin(20, 3, n_categories=K, seed=1)
    with pytest.raises(ValueError, match="beta2 must be > 0"):
        pyrater.fit(sim.data, OneCoinDawidSkene(beta2=0), method=method, progress=False)


def test_map_needs_hyperparameters_of_at_least_one():
    sim = simulate_one_coin(40, 3, n_categories=K, seed=1)
    with pytest.raises(ValueError, match=r">= 1.*beta1"):
        em(sim.data, OneCoinDawidSkene(beta1=0.5), method="map", mode_scale="simplex")
    assert em(sim.data, OneCoinDawidSkene(beta1=0.5), method="map").mode_scale == "log_odds"
    em(sim.data, OneCoinDawidSkene(beta1=0.5), method="ml")  # ML ignores the priors


def test_user_arrays_are_not_modified():
    p = np.array([0.9, 0.6, 0.7])
    before = p.copy()
    simulate_one_coin(20, 3, n_categories=K, p=p, seed=0)
    one_coin_theta(p, K)
    np.testing.assert_array_equal(p, before)


# ------------------------------------------------------------------ EM
@pytest.mark.parametrize("method", ["ml", "map"])
def test_em_estimate_is_the_fixed_point_of_the_m_step(method):
    """ML: ``p_j = trace(N_j) / total_j``; MAP: with ``beta1 - 1`` and ``beta1 + beta2 - 2`` added."""
    sim = simulate_one_coin(500, 8, n_categories=K, raters_per_item=3, seed=2)
    model = OneCoinDawidSkene(beta1=6.0, beta2=2.0)
    fit = em(sim.data, model, method=method, tol=1e-14, param_tol=1e-12, max_iter=20000, progress=False)
    J = sim.data.n_raters
    N = np.asarray(sim.data.counts.T @ fit.class_probs).reshape(J, K, K).transpose(0, 2, 1)
    right, total = np.einsum("jkk->j", N), N.sum(axis=(1, 2))
    if method == "map":
        right, total = right + 5.0, total + 6.0
    np.testing.assert_allclose(fit.theta, one_coin_theta(right / total, K), atol=1e-8)
    n_k = fit.class_probs.sum(0) + (2.0 if method == "map" else 0.0)  # default alpha = 3
    np.testing.assert_allclose(fit.pi, n_k / n_k.sum(), atol=1e-8)
    if method == "map":  # the objective is the log posterior with every constant
        lp = stats.dirichlet.logpdf(fit.pi, fit.priors["alpha"]) + stats.beta.logpdf(fit.theta[:, 0, 0], 6.0, 2.0).sum()
        assert fit.log_posterior == pytest.approx(fit.log_lik + lp, rel=1e-10)


@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")  # short chains
def test_em_and_gibbs_recover_simulated_truth_over_replicates():
    """Over three replicates, the truth of every p_j and pi_k lies within the fits' error bounds.

    Gibbs: central 95% intervals of p_j (most cover) and 99% intervals of pi (all cover).  EM: the
    mode within 3.5 posterior standard deviations (from the Gibbs draws: they include the
    uncertainty of the classes, which a binomial error given the classes leaves out).
    """
    p_true = np.array([0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55])
    inside_em, inside_gibbs, total = 0, 0, 0
    for seed in range(3):
        sim = simulate_one_coin(600, 8, pi=PI, p=p_true, raters_per_item=3, seed=seed)
        fit = em(sim.data, "one_coin", method="map", progress=False)
        g = gibbs(sim.data, "one_coin", chains=2, warmup=300, draws=600, seed=seed, log_lik=False, progress=False)
        draws = np.asarray(g.draws["p"]).reshape(-1, 8)
        inside_em += int(np.sum(np.abs(fit.theta[:, 0, 0] - p_true) < 3.5 * draws.std(axis=0)))
        pi_sd = np.asarray(g.draws["pi"]).reshape(-1, K).std(axis=0)
        assert np.all(np.abs(fit.pi - PI) < 3.5 * pi_sd), (fit.pi, pi_sd)
        lo, hi = np.quantile(draws, [0.025, 0.975], axis=0)
        inside_gibbs += int(np.sum((lo < p_true) & (p_true < hi)))
        iv = g.posterior_interval(0.99, "pi")
        assert np.all((iv.sel(bound="lower").values < PI) & (PI < iv.sel(bound="upper").values))
        total += 8
    assert inside_em == total, (inside_em, total)
    assert inside_gibbs >= 0.85 * total, (inside_gibbs, total)  # 95% intervals


def test_grouped_and_long_data_give_the_same_em_fit_and_gibbs_posterior():
    grouped = RatingData.from_grouped(pd.read_csv(shared_file("caries.csv")), tally="n")
    long = RatingData.from_long(grouped.to_long(), categories=list(grouped.categories))
    a = em(grouped, "one_coin", method="map", tol=1e-13, progress=False)
    b = em(long, "one_coin", method="map", tol=1e-13, progress=False)
    np.testing.assert_allclose(a.pi, b.pi, atol=1e-8)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-8)
    assert a.log_lik == pytest.approx(b.log_lik, rel=1e-10)
    ga = gibbs(grouped, "one_coin", chains=2, warmup=300, draws=1500, seed=1, log_lik=False, progress=False)
    gb = gibbs(long, "one_coin", chains=2, warmup=300, draws=1500, seed=2, log_lik=False, progress=False)
    for name in ("pi", "p"):
        x, y = np.asarray(ga.draws[name]), np.asarray(gb.draws[name])
        se = np.hypot(*(pyrater._arviz.mcse(v) for v in (x, y)))
        assert np.all(np.abs(x.mean((0, 1)) - y.mean((0, 1))) < 4 * se), name


@pytest.mark.stan
def test_em_ml_and_map_are_stans_posterior_mode(stan_engine):
    """ML is the mode under flat priors (alpha = beta1 = beta2 = 1); MAP under non-default priors."""
    sim = simulate_one_coin(300, 6, n_categories=K, raters_per_item=3, seed=12)
    for model, method in (
        (OneCoinDawidSkene(alpha=1, beta1=1, beta2=1), "ml"),
        (OneCoinDawidSkene(beta1=7, beta2=2), "map"),
    ):
        ref = em(sim.data, model if method == "map" else "one_coin", method=method, tol=1e-13, max_iter=10000)
        opt = pyrater.fit(sim.data, model, method="optimize", seed=3, engine=stan_engine)
        np.testing.assert_allclose(opt.point_estimate("pi").to_numpy(), ref.pi, atol=2e-4)
        np.testing.assert_allclose(opt.point_estimate("theta").to_numpy(), ref.theta, atol=1e-3)


# ------------------------------------------------------------------ Gibbs
@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")  # short chains
def test_gibbs_draws_log_lik_and_lp_are_the_models():
    sim = simulate_one_coin(100, 4, n_categories=K, raters_per_item=3, seed=4)
    f = gibbs(sim.data, "one_coin", chains=2, warmup=20, draws=30, seed=3, progress=False)
    assert f.draws["p"].shape == (2, 30, 4) and f.draws["theta"].shape == (2, 30, 4, K, K)
    pi, theta = f._draws()
    p = np.asarray(f.draws["p"]).reshape(-1, 4)
    np.testing.assert_array_equal(theta, one_coin_theta(p.ravel(), K).reshape(-1, 4, K, K))
    ll = np.asarray(f.draws["log_lik"]).reshape(pi.shape[0], -1)
    lp = np.asarray(f.sample_stats["lp"]).reshape(-1)
    prior = conjugate_prior("one_coin", K, 4)
    for s in (0, 17, pi.shape[0] - 1):
        _, ref = class_log_posterior(sim.data.counts, np.log(pi[s]), np.log(theta[s]))
        np.testing.assert_allclose(ll[s], ref, rtol=1e-10)
        log_prior = (
            stats.dirichlet.logpdf(pi[s], prior.alpha) + stats.beta.logpdf(p[s], *default_accuracy_prior(K)).sum()
        )
        np.testing.assert_allclose(lp[s], ref.sum() + log_prior, rtol=1e-10)
        assert log_prior_density(prior, pi[s], theta[s], p[s]) == pytest.approx(log_prior, rel=1e-12)


def test_gibbs_conditional_of_p_is_the_beta_posterior():
    """With every class known, p_j | z is exactly Beta(beta1 + right_j, beta2 + wrong_j)."""
    sim = simulate_one_coin(40, 2, n_categories=K, p=[0.8, 0.6], seed=6)
    known = dict(zip(sim.data.unit_labels, sim.data.categories[sim.z]))
    f = gibbs(sim.data, OneCoinDawidSkene(beta1=2.0, beta2=3.0), known=known, chains=4, warmup=50, draws=2000,
              seed=1, log_lik=False, progress=False)  # fmt: skip
    d = sim.data
    right = np.bincount(d.rater, weights=(d.rating == sim.z[d.unit]), minlength=2)
    wrong = _rater_counts(d) - right
    draws = np.asarray(f.draws["p"]).reshape(-1, 2)
    for j in range(2):
        res = stats.kstest(draws[:, j], stats.beta(2.0 + right[j], 3.0 + wrong[j]).cdf)
        assert res.pvalue > 1e-3, (j, res)


# ------------------------------------------------------------------ what the family is for
def test_with_few_ratings_per_rater_one_coin_is_at_least_as_accurate_as_dawid_skene():
    """60 one-coin raters with about 20 ratings each: DS's free matrices are estimated from too little."""
    right = {"one_coin": 0, "dawid_skene": 0}
    err = {"one_coin": 0.0, "dawid_skene": 0.0}
    for seed in range(3):
        sim = pyrater.simulate("one_coin", 400, 60, n_categories=K, raters_per_item=3, seed=seed)
        assert np.median(_rater_counts(sim.data)) < 25
        for model in right:
            fit = em(sim.data, model, method="map", progress=False)
            right[model] += int(np.sum(fit.class_probs.argmax(1) == sim.z))
            err[model] += float(np.abs(fit.theta - sim.theta).mean())
    assert right["one_coin"] >= right["dawid_skene"], right
    assert err["one_coin"] < err["dawid_skene"], err


# ------------------------------------------------------------------ the Fit API, every method
@pytest.fixture(scope="module")
def small():
    return simulate_one_coin(80, 5, n_categories=K, p=[0.9, 0.8, 0.75, 0.7, 0.6], raters_per_item=3, seed=8)


def _check_fit_api(f, sim, tmp_path, mcmc: bool) -> None:
    J = sim.data.n_raters
    pi = f.point_estimate("pi")
    assert pi.shape == (K,) and pi.sum() == pytest.approx(1)
    theta = f.point_estimate("theta")
    assert theta.dims == ("rater", "category", "rating") and theta.shape == (J, K, K)
    th = theta.to_numpy()
    # the one-coin structure: one accuracy per rater, the rest spread evenly
    np.testing.assert_allclose(th, one_coin_theta(th[:, 0, 0], K), atol=1e-10)
    probs = f.class_probabilities()
    assert probs.shape == (sim.data.n_units, K)
    np.testing.assert_allclose(probs.sum(axis=1), 1, atol=1e-9)
    assert (f.point_estimate("z").to_numpy() == sim.data.categories[sim.z]).mean() > 0.8
    s = f.summary()
    assert s.model == "One-coin Dawid-Skene" and float(s.priors["beta1"]) == pytest.approx(default_accuracy_prior(K)[0])
    assert "One-coin Dawid-Skene" in str(s)
    idata = f.to_inference_data()
    post = pyrater._arviz.group(idata, "posterior")
    if f.has_draws:
        assert post["p"].dims == ("chain", "draw", "rater")
        assert f.posterior_samples("theta").shape[-3:] == (J, K, K)
        reps = pyrater.posterior_predict(f, draws=5, seed=1)
        assert len(reps) == 5 * sim.data.n_ratings
        ppc = pyrater.posterior_predictive_check(f, lambda df: float((df["rating"] == 1).mean()), draws=20, seed=1)
        assert 0 <= ppc.p_value <= 1 and ppc.simulated.shape == (20,)
    else:
        with pytest.raises(NotImplementedError):
            f.posterior_samples()
    if mcmc:
        diag = f.mcmc_diagnostics(warn=False)
        assert {f"p[{r}]" for r in sim.data.rater_labels} <= set(diag.index)
    else:
        with pytest.raises(NotImplementedError):
            f.mcmc_diagnostics()
    back = pyrater.load(f.save(tmp_path / "fit.nc"))
    if mcmc or not f.has_draws:
        assert_same_fit(f, back)
    else:  # Pathfinder: every accessor but the MCMC diagnostics assert_same_fit reads
        assert type(back) is type(f) and back.draws.keys() == f.draws.keys()
        for key, value in f.draws.items():
            np.testing.assert_array_equal(back.draws[key], value)
        pd.testing.assert_frame_equal(back.class_probabilities(), f.class_probabilities())
        pd.testing.assert_frame_equal(back.summary().parameters, f.summary().parameters)


def test_fit_api_em(small, tmp_path):
    f = pyrater.fit(small.data, "one_coin", method="em")
    _check_fit_api(f, small, tmp_path, mcmc=False)


def test_fit_api_gibbs_and_compare_with_dawid_skene(small, tmp_path):
    kw = dict(method="gibbs", chains=2, warmup=200, draws=300, seed=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains
        f = pyrater.fit(small.data, "one_coin", **kw)
        ds = pyrater.fit(small.data, "dawid_skene", **kw)
    _check_fit_api(f, small, tmp_path, mcmc=True)
    _check_compare(f, ds)


@pytest.mark.stan
@pytest.mark.parametrize("method", ["mcmc", "optimize", "pathfinder"])
def test_fit_api_stan_methods(small, tmp_path, method, stan_engine):
    if method == "pathfinder" and stan_engine.name != "cmdstanpy":
        pytest.skip("Pathfinder runs in CmdStan only (the pystan engine refuses it)")
    kw = dict(chains=2, warmup=200, draws=200) if method == "mcmc" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains, pathfinder's Pareto k
        f = pyrater.fit(small.data, "one_coin", method=method, seed=2, progress=False, engine=stan_engine, **kw)
        if method == "mcmc":
            ds = pyrater.fit(small.data, "dawid_skene", method=method, seed=2, progress=False, engine=stan_engine, **kw)
    if method != "optimize":
        assert f.draws["p"].shape[2:] == (small.data.n_raters,)
    _check_fit_api(f, small, tmp_path, mcmc=method == "mcmc")
    if method == "mcmc":
        _check_compare(f, ds)


def _check_compare(f, ds) -> None:
    table = pyrater.compare({"one_coin": f, "dawid_skene": ds})
    assert set(table.index) == {"one_coin", "dawid_skene"}
    assert table["weight"].sum() == pytest.approx(1.0)
    elpd = {name: pyrater.loo(x, warn=False).elpd_loo for name, x in {"one_coin": f, "dawid_skene": ds}.items()}
    best = max(elpd, key=elpd.get)
    for name in table.index:
        assert table.loc[name, "elpd_diff"] == pytest.approx(elpd[name] - elpd[best])


# ------------------------------------------------------------------ the collapsed mode
def _leaning_raters(seed: int) -> pyrater.Simulation:
    """K = 2, 300 items, 100 raters x 15 ratings; half lean to class 0 (0.95 / 0.55), half to class 1."""
    theta = np.array([[[0.95, 0.05], [0.45, 0.55]], [[0.55, 0.45], [0.05, 0.95]]])[np.arange(100) % 2]
    return pyrater.simulate(
        "dawid_skene", 300, 100, n_categories=2, raters_per_item=5, theta=theta, pi=[0.55, 0.45], seed=seed
    )


@pytest.mark.parametrize("seed", [0, 3, 4])
def test_default_prior_does_not_collapse_the_classes_at_k2(seed):
    """At K = 2 the former default Beta(4.8, 3.2) (mean 0.6, where the collapsed mode puts the accuracies)
    made "every item in one class" the posterior mode on data with leaning raters (as on the snow_temp gold set);
    the default halfway between chance and certainty keeps the mode that labels the items."""
    sim = _leaning_raters(seed)
    z = np.asarray(sim.z)

    def labelled(fit) -> float:
        return float(np.mean(fit.class_probabilities().to_numpy().argmax(axis=1) == z))

    old = em(sim.data, OneCoinDawidSkene(beta1=4.8, beta2=3.2), method="map", seed=1)
    new = em(sim.data, "one_coin", method="map", seed=1)
    assert float(old.point_estimate("pi").max()) > 0.85 and labelled(old) < 0.7  # collapsed
    assert float(new.point_estimate("pi").max()) < 0.7 and labelled(new) > 0.8
