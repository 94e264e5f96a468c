"""The ordinal rater family: structure, bad input, EM against the model and Stan, recovery, the Fit API.

The Stan program's density against the kernel is checked with the other
programs' (``test_stan_programs.py``, ``test_stan_full_density.py``); here
also against brute-force enumeration of the true classes.  EM MAP against
Stan's optimiser is also in ``test_fit.py`` (parametrised over the families).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import pyrater
from pyrater import Ordinal, RatingData, em, simulate_ordinal
from pyrater.models import ordinal_parameters, ordinal_theta
from pyrater.models.ordinal import m_step_raters
from test_fitfile import assert_same_fit

K = 4
PI = np.array([0.3, 0.3, 0.25, 0.15])
SHIFT = np.array([0.0, 0.3, -0.3, 0.15, -0.15, 0.0])
SCALE = np.array([0.2, 0.3, 0.25, 0.4, 0.3, 0.5])


def scipy_theta(shift: np.ndarray, scale: np.ndarray, K: int) -> np.ndarray:
    """The ordinal error matrices written out with scipy's logistic CDF (not with pyrater's code)."""
    J = len(shift)
    theta = np.empty((J, K, K))
    for j, k in itertools.product(range(J), range(K)):
        cuts = np.concatenate([[-np.inf], (np.arange(1, K) - 0.5 - k - shift[j]) / scale[j], [np.inf]])
        lo, hi = cuts[:-1], cuts[1:]
        # F(hi) - F(lo) in the lower half, S(lo) - S(hi) in the upper (no cancellation near 1)
        theta[j, k] = np.where(
            lo + hi < 0,
            stats.logistic.cdf(hi) - stats.logistic.cdf(lo),
            stats.logistic.sf(lo) - stats.logistic.sf(hi),
        )
    return theta


def scipy_objective(b: float, log_s: float, N: np.ndarray, prior: dict | None) -> float:
    """One rater's expected complete-data log-likelihood (+ log prior), with scipy."""
    th = scipy_theta(np.array([b]), np.array([np.exp(log_s)]), N.shape[0])[0]
    f = float(np.sum(N * np.log(th)))
    if prior is not None:
        f += stats.norm.logpdf(b, 0, prior["shift_sd"]) + stats.norm.logpdf(
            log_s, prior["log_scale_mean"], prior["log_scale_sd"]
        )
    return f


# ------------------------------------------------------------------ structure
def test_theta_is_a_difference_of_logistic_cdfs_and_near_misses_are_likelier():
    theta = ordinal_theta(SHIFT, SCALE, K)
    np.testing.assert_allclose(theta, scipy_theta(SHIFT, SCALE, K), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(theta.sum(-1), 1)
    # unbiased rater: for each class, the probability falls with the distance of the rating
    t0 = theta[0]
    for k in range(K):
        assert np.all(np.diff(t0[k, : k + 1]) > 0) and np.all(np.diff(t0[k, k:]) < 0)
    # a positive shift moves ratings up
    up = ordinal_theta([0.4], [0.3], K)[0]
    assert np.all(up @ np.arange(K) > t0 @ np.arange(K))


def test_parameters_are_recovered_from_theta():
    par = ordinal_parameters(ordinal_theta(SHIFT, SCALE, 5))
    np.testing.assert_allclose(par["shift"], SHIFT, atol=1e-9)
    np.testing.assert_allclose(par["scale"], SCALE, atol=1e-9)


def test_simulator_uses_the_given_and_the_prior_parameters():
    sim = simulate_ordinal(50, 6, pi=PI, shift=SHIFT, scale=SCALE, seed=0)
    np.testing.assert_array_equal(sim.theta, ordinal_theta(SHIFT, SCALE, K))
    np.testing.assert_array_equal(sim.params["shift"], SHIFT)
    assert sim.model == "ordinal" and sim.data.n_categories == K
    same = simulate_ordinal(50, 3, n_categories=3, shift=0.1, scale=0.3, seed=0)
    np.testing.assert_array_equal(same.params["scale"], np.full(3, 0.3))
    many = pyrater.simulate("ordinal", 20, 2000, n_categories=3, raters_per_item=2, seed=1)
    b, u = many.params["shift"], np.log(many.params["scale"])  # default priors N(0, 1), N(-1, 1)
    assert abs(b.mean()) < 4 / np.sqrt(2000) and abs(u.mean() + 1) < 4 / np.sqrt(2000)
    assert abs(b.std() - 1) < 0.08 and abs(u.std() - 1) < 0.08
    tight = pyrater.simulate(Ordinal(shift_sd=0.01, log_scale_sd=0.01), 20, 5, n_categories=3, seed=1)
    assert np.all(np.abs(tight.params["shift"]) < 0.05)


def test_the_family_is_registered_everywhere():
    from pyrater.inference.stan.data import STAN_MODEL_NAMES

    m = pyrater.get_model("ordinal")
    assert isinstance(m, Ordinal) and m.conjugate is None
    assert "ordinal" in pyrater.models.MODEL_NAMES and "ordinal" in STAN_MODEL_NAMES
    assert set(m.methods) == {"mcmc", "optimize", "pathfinder", "em"}
    assert pyrater.simulate_ordinal is simulate_ordinal
    pri = m.priors(K, 3)
    assert pri["alpha"].tolist() == [3.0] * K
    assert (float(pri["shift_sd"]), float(pri["log_scale_mean"]), float(pri["log_scale_sd"])) == (1.0, -1.0, 1.0)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: simulate_ordinal(10, 2, n_categories=2), "K >= 3"),
        (lambda: Ordinal().priors(2, 3), "K >= 3"),
        (lambda: ordinal_theta([0.0], [0.3], 2), "K >= 3"),
        (lambda: simulate_ordinal(10, 2, n_categories=3, scale=[0.3, -0.1]), "scale must be > 0"),
        (lambda: simulate_ordinal(10, 2, n_categories=3, shift=[0.1, 0.2, 0.3]), r"shift must have shape \(J,\)"),
        (lambda: simulate_ordinal(10, 2, shift=[0.1, 0.2]), "give n_categories"),
        (lambda: simulate_ordinal(10, 2, n_categories=3, shift_sd=0), "shift_sd must be > 0"),
        (lambda: Ordinal(log_scale_sd=-1).priors(3, 2), "log_scale_sd must be > 0"),
        (lambda: Ordinal(log_scale_mean=np.nan).priors(3, 2), "log_scale_mean must be finite"),
        (lambda: Ordinal(shift_sd=[1.0, 2.0]).priors(3, 2), r"shift_sd must have shape \(\) \(a scalar\)"),
        (lambda: Ordinal(alpha=[1.0, 1.0]).priors(3, 2), r"alpha must have shape \(K,\) = \(3,\)"),
        (lambda: ordinal_theta([0.0, 0.1], [0.3], 3), "shift and scale must have the same shape"),
        (lambda: ordinal_theta([0.0], [0.0], 3), "scale must be > 0"),
        (lambda: ordinal_parameters(np.ones((2, 3))), r"theta must have shape \(J, K, K\)"),
    ],
)
def test_bad_input_is_refused_with_the_arguments_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("method", ["em", "mcmc", "optimize", "pathfinder"])
def test_bad_priors_and_two_categories_are_refused_before_fitting(method):
    sim = simulate_ordinal(20, 3, n_categories=3, seed=1)
    with pytest.raises(ValueError, match="shift_sd must be > 0"):
        pyrater.fit(sim.data, Ordinal(shift_sd=0), method=method, progress=False)
    binary = pyrater.simulate("dawid_skene", 20, 3, n_categories=2, seed=1)
    with pytest.raises(ValueError, match="K >= 3"):
        pyrater.fit(binary.data, "ordinal", method=method, progress=False)


def test_em_ml_refuses_two_categories_and_gibbs_is_refused():
    binary = pyrater.simulate("dawid_skene", 20, 3, n_categories=2, seed=1)
    with pytest.raises(ValueError, match="K >= 3"):
        em(binary.data, "ordinal", method="ml")
    sim = simulate_ordinal(20, 3, n_categories=3, seed=1)
    with pytest.raises(ValueError, match="method='gibbs'"):
        pyrater.fit(sim.data, "ordinal", method="gibbs")


def test_map_refuses_alpha_below_one():
    sim = simulate_ordinal(30, 3, n_categories=3, seed=1)
    with pytest.raises(ValueError, match=r">= 1.*alpha"):
        em(sim.data, Ordinal(alpha=0.5), method="map", mode_scale="simplex")


# ------------------------------------------------------------------ the M-step
@pytest.mark.parametrize("prior", [None, {"shift_sd": 0.7, "log_scale_mean": -1.5, "log_scale_sd": 0.8}])
def test_m_step_maximises_each_raters_objective(prior):
    """At the M-step's answer the scipy objective's numerical gradient is zero and no nearby point is higher."""
    rng = np.random.default_rng(3)
    N = rng.gamma(1.0, 20.0, size=(5, K, K)) + 30 * np.eye(K)
    b, u = m_step_raters(np.zeros(5), np.full(5, -1.0), N, prior)
    h = 1e-5
    for j in range(5):
        f0 = scipy_objective(b[j], u[j], N[j], prior)
        gb = (scipy_objective(b[j] + h, u[j], N[j], prior) - scipy_objective(b[j] - h, u[j], N[j], prior)) / (2 * h)
        gu = (scipy_objective(b[j], u[j] + h, N[j], prior) - scipy_objective(b[j], u[j] - h, N[j], prior)) / (2 * h)
        assert abs(gb) < 1e-4 * max(1.0, abs(f0)) and abs(gu) < 1e-4 * max(1.0, abs(f0))
        for db, du in ((0.01, 0), (-0.01, 0), (0, 0.01), (0, -0.01)):
            assert scipy_objective(b[j] + db, u[j] + du, N[j], prior) <= f0


@pytest.mark.parametrize("prior", [None, {"shift_sd": 0.7, "log_scale_mean": -1.5, "log_scale_sd": 0.8}])
def test_compiled_m_step_equals_the_numpy_reference(prior):
    rng = np.random.default_rng(4)
    N = rng.gamma(1.0, 20.0, size=(30, 5, 5)) + 30 * np.eye(5)
    N[3] = 0.0  # a rater without ratings: the prior's mode (MAP) or where it started (ML)
    start_b, start_u = rng.normal(0, 0.3, 30), rng.normal(-1, 0.3, 30)
    b1, u1 = m_step_raters(start_b, start_u, N, prior)
    b2, u2 = m_step_raters(start_b, start_u, N, prior, compiled=False)
    np.testing.assert_allclose(b1, b2, atol=1e-8)
    np.testing.assert_allclose(u1, u2, atol=1e-8)
    if prior is None:
        assert (b1[3], u1[3]) == (start_b[3], start_u[3])
    else:
        assert b1[3] == pytest.approx(0.0, abs=1e-9) and u1[3] == pytest.approx(-1.5, abs=1e-9)


@pytest.mark.parametrize("method", ["ml", "map"])
def test_em_estimate_is_a_fixed_point_and_the_objective_never_decreases(method):
    sim = simulate_ordinal(500, 6, pi=PI, shift=SHIFT, scale=SCALE, raters_per_item=3, seed=2)
    model = Ordinal(shift_sd=0.5, log_scale_mean=-1.2)
    fit = em(sim.data, model, method=method, tol=1e-13, param_tol=1e-10, max_iter=5000, progress=False)
    assert fit.converged
    assert np.all(np.diff(fit.log_lik_trace) >= -1e-8 * np.abs(fit.log_lik_trace[1:]))
    J = sim.data.n_raters
    N = np.asarray(sim.data.counts.T @ fit.class_probs).reshape(J, K, K).transpose(0, 2, 1)
    par = ordinal_parameters(fit.theta)
    prior = fit.priors if method == "map" else None
    b, u = m_step_raters(par["shift"], np.log(par["scale"]), N, prior)
    np.testing.assert_allclose(ordinal_theta(b, np.exp(u), K), fit.theta, atol=1e-6)
    n_k = fit.class_probs.sum(0) + (2.0 if method == "map" else 0.0)  # default alpha = 3
    np.testing.assert_allclose(fit.pi, n_k / n_k.sum(), atol=1e-8)
    if method == "map":  # the objective is the log posterior with every constant
        lp = (
            stats.dirichlet.logpdf(fit.pi, fit.priors["alpha"])
            + stats.norm.logpdf(par["shift"], 0, 0.5).sum()
            + stats.norm.logpdf(np.log(par["scale"]), -1.2, 1.0).sum()
        )
        assert fit.log_posterior == pytest.approx(fit.log_lik + lp, rel=1e-8)


def test_em_recovers_simulated_truth_over_replicates():
    """Classes, shifts and scales of 6 raters, 3 replicates: the errors shrink as they should."""
    for seed in range(3):
        sim = simulate_ordinal(800, 6, pi=PI, shift=SHIFT, scale=SCALE, raters_per_item=4, seed=seed)
        fit = em(sim.data, "ordinal", method="map", progress=False)
        par = ordinal_parameters(fit.theta)
        assert (fit.class_probs.argmax(1) == sim.z).mean() > 0.9
        # about 530 ratings per rater: shift sd ~ scale / sqrt(n) * 2, scale relative sd ~ 1 / sqrt(n) * 3
        assert np.all(np.abs(par["shift"] - SHIFT) < 0.1), par["shift"]
        assert np.all(np.abs(np.log(par["scale"] / SCALE)) < 0.25), par["scale"]
        np.testing.assert_allclose(fit.pi, PI, atol=0.05)


def test_grouped_and_long_data_give_the_same_em_fit():
    sim = simulate_ordinal(400, 3, n_categories=3, shift=[0.0, 0.2, -0.2], scale=0.4, seed=5)
    wide = sim.data.to_long().pivot(index="item", columns="rater", values="rating")
    tallies = wide.value_counts().rename("n").reset_index()
    grouped = RatingData.from_grouped(tallies, tally="n")
    long = RatingData.from_long(sim.data.to_long(), categories=list(grouped.categories))
    assert grouped.n_units < long.n_units
    a = em(grouped, "ordinal", method="map", tol=1e-13, progress=False)
    b = em(long, "ordinal", method="map", tol=1e-13, progress=False)
    np.testing.assert_allclose(a.pi, b.pi, atol=1e-7)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-7)
    assert a.log_lik == pytest.approx(b.log_lik, rel=1e-9)


def test_brute_force_enumeration_equals_the_kernel_log_lik():
    """The EM fit's log-likelihood: every item summed over its classes by hand, ratings one by one."""
    sim = simulate_ordinal(25, 3, n_categories=3, seed=9, raters_per_item=2, repeats=2)
    fit = em(sim.data, "ordinal", method="map", progress=False)
    df = sim.data.to_long()
    theta = scipy_theta(ordinal_parameters(fit.theta)["shift"], ordinal_parameters(fit.theta)["scale"], 3)
    raters = {r: j for j, r in enumerate(sim.data.rater_labels)}
    cats = {c: k for k, c in enumerate(sim.data.categories)}
    total = 0.0
    for _, rows in df.groupby("item"):
        p = 0.0
        for z in range(3):
            term = fit.pi[z]
            for r, y in zip(rows["rater"], rows["rating"]):
                term *= theta[raters[r], z, cats[y]]
            p += term
        total += np.log(p)
    assert fit.log_lik == pytest.approx(total, rel=1e-8)


# ------------------------------------------------------------------ what the family is for
def test_on_ordinal_raters_ordinal_is_at_least_as_accurate_as_dawid_skene_and_wins_kfold():
    """40 ordinal raters, 30 ratings each, 5 grades: DS's 20 free probabilities per rater are estimated from too little."""
    right = {"ordinal": 0, "dawid_skene": 0}
    # DS's default off-diagonal (0.8 for K = 5) has no MAP; 1.5 keeps every probability off 0 for K-fold
    beta = np.maximum(pyrater.models.default_beta(5), 1.5)
    models = {"ordinal": Ordinal(), "dawid_skene": pyrater.DawidSkene(beta=beta)}
    for seed in range(2):
        sim = pyrater.simulate("ordinal", 400, 40, n_categories=5, raters_per_item=3, seed=seed)
        fits = {name: em(sim.data, m, method="map", progress=False) for name, m in models.items()}
        for name, f in fits.items():
            right[name] += int(np.sum(f.class_probs.argmax(1) == sim.z))
    assert right["ordinal"] >= right["dawid_skene"], right
    table = pyrater.compare(fits)
    assert table.index[0] == "ordinal" and table.loc["dawid_skene", "elpd_diff"] < 0


def test_em_at_a_million_ratings_runs():
    sim = simulate_ordinal(250_000, 50, n_categories=5, raters_per_item=4, seed=1)
    assert sim.data.n_ratings == 10**6
    fit = em(sim.data, "ordinal", method="map", progress=False)
    assert fit.converged and (fit.class_probs.argmax(1) == sim.z).mean() > 0.8


# ------------------------------------------------------------------ the Fit API, every method
@pytest.fixture(scope="module")
def small():
    return simulate_ordinal(80, 5, n_categories=3, shift=SHIFT[:5], scale=SCALE[:5], raters_per_item=3, seed=8)


def _check_fit_api(f, sim, tmp_path, mcmc: bool) -> None:
    J, K3 = sim.data.n_raters, 3
    pi = f.point_estimate("pi")
    assert pi.shape == (K3,) and pi.sum() == pytest.approx(1)
    theta = f.point_estimate("theta")
    assert theta.dims == ("rater", "category", "rating") and theta.shape == (J, K3, K3)
    th = theta.to_numpy()
    if not f.has_draws:  # a mode's theta is an ordinal matrix (a posterior mean need not be)
        par = ordinal_parameters(th)
        np.testing.assert_allclose(th, ordinal_theta(par["shift"], par["scale"], K3), atol=1e-9)
    probs = f.class_probabilities()
    assert probs.shape == (sim.data.n_units, K3)
    np.testing.assert_allclose(probs.sum(axis=1), 1, atol=1e-9)
    assert (f.point_estimate("z").to_numpy() == sim.data.categories[sim.z]).mean() > 0.8
    s = f.summary()
    assert s.model == "Ordinal raters"
    assert "Ordinal raters" in str(s)
    idata = f.to_inference_data()
    post = pyrater._arviz.group(idata, "posterior")
    if f.has_draws or f.method == "optimize":
        assert post["shift"].dims == ("chain", "draw", "rater")
        assert post["log_scale"].dims == ("chain", "draw", "rater")
    if f.has_draws:
        assert f.posterior_samples("theta").shape[-3:] == (J, K3, K3)
        reps = pyrater.posterior_predict(f, draws=5, seed=1)
        assert len(reps) == 5 * sim.data.n_ratings
        ppc = pyrater.posterior_predictive_check(f, lambda df: float((df["rating"] == 1).mean()), draws=20, seed=1)
        assert 0 <= ppc.p_value <= 1 and ppc.simulated.shape == (20,)
    else:
        with pytest.raises(NotImplementedError):
            f.posterior_samples()
    if mcmc:
        diag = f.mcmc_diagnostics(warn=False)
        names = {f"shift[{r}]" for r in sim.data.rater_labels} | {f"log_scale[{r}]" for r in sim.data.rater_labels}
        assert names <= set(diag.index)
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


def test_fit_api_em(small, tmp_path):
    f = pyrater.fit(small.data, "ordinal", method="em")
    _check_fit_api(f, small, tmp_path, mcmc=False)
    reps = pyrater.posterior_predict(f, draws=3, seed=1)  # from the point estimate
    assert len(reps) == 3 * small.data.n_ratings


@pytest.mark.stan
@pytest.mark.parametrize("method", ["mcmc", "optimize", "pathfinder"])
def test_fit_api_stan_methods(small, tmp_path, method, stan_engine):
    if method == "pathfinder" and stan_engine.name != "cmdstanpy":
        pytest.skip("Pathfinder runs in CmdStan only (the pystan engine refuses it)")
    kw = dict(chains=2, warmup=200, draws=200) if method == "mcmc" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains, pathfinder's Pareto k
        f = pyrater.fit(small.data, "ordinal", method=method, seed=2, progress=False, engine=stan_engine, **kw)
    if method != "optimize":
        assert f.draws["shift"].shape[2:] == (small.data.n_raters,)
    _check_fit_api(f, small, tmp_path, mcmc=method == "mcmc")


@pytest.mark.stan
def test_em_ml_and_map_are_stans_posterior_mode(stan_engine):
    """ML is the mode under flat priors on pi and very wide ones on the raters; MAP under non-default priors."""
    sim = simulate_ordinal(300, 5, n_categories=3, shift=SHIFT[:5], scale=SCALE[:5], raters_per_item=3, seed=12)
    for model in (Ordinal(alpha=1, shift_sd=0.5, log_scale_mean=-1.5, log_scale_sd=0.7), Ordinal()):
        ref = em(sim.data, model, method="map", tol=1e-13, param_tol=1e-10, max_iter=10000, progress=False)
        opt = pyrater.fit(sim.data, model, method="optimize", seed=3, engine=stan_engine)
        np.testing.assert_allclose(opt.point_estimate("pi").to_numpy(), ref.pi, atol=2e-4)
        np.testing.assert_allclose(opt.point_estimate("theta").to_numpy(), ref.theta, atol=1e-3)
        par = ordinal_parameters(ref.theta)
        np.testing.assert_allclose(opt.params["shift"], par["shift"], atol=2e-3)
        np.testing.assert_allclose(np.exp(opt.params["log_scale"]), par["scale"], atol=2e-3)


@pytest.mark.stan
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")  # short chains
def test_mcmc_intervals_cover_the_truth_over_replicates(stan_engine):
    """90% intervals of the 2 x 5 rater parameters over 3 replicates: most cover (expected 27 of 30)."""
    covered, total = 0, 0
    for seed in range(3):
        sim = simulate_ordinal(150, 5, n_categories=3, shift=SHIFT[:5], scale=SCALE[:5], raters_per_item=3, seed=seed)
        f = pyrater.fit(sim.data, "ordinal", chains=2, warmup=300, draws=300, seed=seed, progress=False,
                        engine=stan_engine)  # fmt: skip
        for name, truth in (("shift", SHIFT[:5]), ("log_scale", np.log(SCALE[:5]))):
            d = np.asarray(f.draws[name]).reshape(-1, 5)
            lo, hi = np.quantile(d, [0.05, 0.95], axis=0)
            covered += int(np.sum((lo < truth) & (truth < hi)))
            total += 5
        assert (f.class_probabilities().to_numpy().argmax(1) == sim.z).mean() > 0.85
    assert covered >= 0.75 * total, (covered, total)


# ------------------------------------------------------------------ raters who lapse (Ordinal(lapse=True))
LAPSE = np.array([0.0, 0.05, 0.1, 0.2, 0.3, 0.15])


def test_lapse_mixes_the_ordinal_matrix_with_a_uniform_rating():
    sim = simulate_ordinal(50, 6, pi=PI, shift=SHIFT, scale=SCALE, lapse=LAPSE, seed=0)
    expected = (1 - LAPSE)[:, None, None] * scipy_theta(SHIFT, SCALE, K) + LAPSE[:, None, None] / K
    np.testing.assert_allclose(sim.theta, expected, rtol=1e-12)
    np.testing.assert_array_equal(sim.params["lapse"], LAPSE)
    drawn = pyrater.simulate(Ordinal(lapse=True), 20, 4000, n_categories=3, raters_per_item=2, seed=1)
    g = drawn.params["lapse"]  # Beta(2, 20) by default: mean 1/11, sd 0.06
    assert g.mean() == pytest.approx(2 / 22, abs=0.005) and g.std() == pytest.approx(0.0597, abs=0.005)
    assert "lapse" not in simulate_ordinal(10, 2, n_categories=3, seed=0).params  # no lapse unless asked


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Ordinal(lapse_prior=(2, 20)), "give lapse=True"),
        (lambda: Ordinal(lapse="yes"), "lapse must be True or False"),
        (lambda: Ordinal(lapse=True, lapse_prior=(0.5, 20)).priors(3, 2), "two finite numbers >= 1"),
        (lambda: Ordinal(lapse=True, lapse_prior=(2, 20, 1)).priors(3, 2), r"lapse_prior must .* shape \(2,\)"),
        (lambda: simulate_ordinal(10, 2, n_categories=3, lapse=[0.1, 1.2]), r"probabilities in \[0, 1\]"),
    ],
)
def test_lapse_bad_input(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _lapse_objective(x: np.ndarray, N: np.ndarray, prior: dict | None) -> float:
    """sum N log theta (+ log prior) of raters who lapse, written with scipy."""
    J = N.shape[0]
    b, u, g = x[:J], x[J : 2 * J], x[2 * J :]
    theta = (1 - g)[:, None, None] * scipy_theta(b, np.exp(u), N.shape[1]) + g[:, None, None] / N.shape[1]
    f = float(np.sum(N * np.log(theta)))
    if prior is not None:
        f += float(np.sum(stats.norm.logpdf(b, 0, prior["shift_sd"])))
        f += float(np.sum(stats.norm.logpdf(u, prior["log_scale_mean"], prior["log_scale_sd"])))
        f += float(np.sum(stats.beta.logpdf(g, *prior["lapse_prior"])))
    return f


@pytest.mark.parametrize("method", ["ml", "map"])
def test_lapse_m_step_raises_the_objective_and_em_climbs(method):
    model = Ordinal(lapse=True)
    prior = model.priors(K, 6) if method == "map" else None
    rng = np.random.default_rng(5)
    N = rng.gamma(1.0, 5.0, size=(6, K, K)) + 40 * np.eye(K)
    x = model.em_start(K, 6)
    values = [_lapse_objective(x, N, prior)]
    for _ in range(5):
        x = model.em_m_step(x, N, prior)
        values.append(_lapse_objective(x, N, prior))
    assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))
    assert values[-1] > values[0]
    if prior is not None:  # em_log_prior is the scipy log prior
        assert model.em_log_prior(x, prior) == pytest.approx(_lapse_objective(x, np.zeros_like(N), prior), rel=1e-12)
    sim = simulate_ordinal(400, 6, pi=PI, shift=SHIFT, scale=SCALE, lapse=LAPSE, raters_per_item=3, seed=4)
    fit = em(sim.data, model, method=method, tol=1e-12, max_iter=3000, progress=False)
    assert np.all(np.diff(fit.log_lik_trace) >= -1e-8 * np.abs(fit.log_lik_trace[1:]))


def test_lapse_em_recovers_the_lapses_and_beats_the_plain_model_where_raters_lapse():
    sim = simulate_ordinal(3000, 6, pi=PI, shift=SHIFT, scale=SCALE, lapse=LAPSE, raters_per_item=4, seed=8)
    fit = em(sim.data, Ordinal(lapse=True), method="map", progress=False)
    g = fit.model_params["lapse"]  # about 2,000 ratings per rater; a lapse shows only in a far miss
    assert np.all(np.abs(g - LAPSE) < 0.07) and np.mean(np.abs(g - LAPSE)) < 0.035, g
    assert np.corrcoef(g, LAPSE)[0, 1] > 0.9
    np.testing.assert_allclose(fit.model_params["shift"], SHIFT, atol=0.08)
    np.testing.assert_allclose(np.exp(fit.model_params["log_scale"]), SCALE, rtol=0.25)
    plain = em(sim.data, "ordinal", method="map", progress=False)
    table = pyrater.compare({"lapse": fit, "plain": plain}, seed=1, progress=False)
    assert table.index[0] == "lapse" and table.loc["plain", "elpd_diff"] < -4 * table.loc["plain", "dse"]


@pytest.mark.stan
def test_lapse_em_map_is_stans_posterior_mode(stan_engine):
    model = Ordinal(lapse=True)
    sim = simulate_ordinal(300, 5, n_categories=4, shift=SHIFT[:5], scale=SCALE[:5], lapse=LAPSE[:5], raters_per_item=3, seed=1)  # fmt: skip
    ref = em(sim.data, model, method="map", tol=1e-13, param_tol=1e-10, max_iter=10000, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = pyrater.fit(sim.data, model, method="optimize", seed=3, engine=stan_engine)
    np.testing.assert_allclose(opt.point_estimate("pi").to_numpy(), ref.pi, atol=2e-4)
    np.testing.assert_allclose(opt.point_estimate("theta").to_numpy(), ref.theta, atol=1e-3)
    np.testing.assert_allclose(opt.params["lapse"], ref.model_params["lapse"], atol=2e-3)
    np.testing.assert_allclose(opt.params["shift"], ref.model_params["shift"], atol=2e-3)


@pytest.mark.stan
def test_lapse_stan_log_density_equals_brute_force_enumeration(stan_engine):
    """Stan's log density (no Jacobian) of the program with lapses: every item's classes summed by hand."""
    from pyrater.inference.stan.data import stan_data

    model = Ordinal(lapse=True, lapse_prior=(1.5, 12.0))
    sim = simulate_ordinal(12, 3, n_categories=3, seed=4, raters_per_item=2, repeats=2)
    d = stan_data(sim.data, model)
    assert d["has_lapse"] == 1 and list(d["lapse_prior"]) == [1.5, 12.0]
    rng = np.random.default_rng(6)
    raters = {r: j for j, r in enumerate(sim.data.rater_labels)}
    cats = {c: k for k, c in enumerate(sim.data.categories)}
    df = sim.data.to_long()
    for _ in range(2):
        params = {
            "pi": rng.dirichlet(np.full(3, 2.0)),
            "shift": rng.normal(0, 1, 3),
            "log_scale": rng.normal(-1, 1, 3),
            "lapse": rng.uniform(0.01, 0.5, 3),
        }
        g = params["lapse"]
        theta = (1 - g)[:, None, None] * scipy_theta(params["shift"], np.exp(params["log_scale"]), 3) + g[
            :, None, None
        ] / 3
        ll = 0.0
        for _, rows in df.groupby("item"):
            p = 0.0
            for z in range(3):
                term = params["pi"][z]
                for r, y in zip(rows["rater"], rows["rating"]):
                    term *= theta[raters[r], z, cats[y]]
                p += term
            ll += np.log(p)
        prior = (
            stats.dirichlet.logpdf(params["pi"], d["alpha"])
            + stats.norm.logpdf(params["shift"], 0, 1).sum()
            + stats.norm.logpdf(params["log_scale"], -1, 1).sum()
            + stats.beta.logpdf(g, 1.5, 12.0).sum()
        )
        lp = stan_engine.log_prob("ordinal", d, params, jacobian=False)
        assert lp == pytest.approx(ll + prior, rel=1e-10)
        gq = stan_engine.generated_quantities("ordinal", d, params)
        np.testing.assert_allclose(gq["theta"], theta, rtol=1e-10)
