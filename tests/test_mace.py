"""The MACE family: structure, bad input, EM and Gibbs against the model, the Fit API.

The Stan program's density against brute-force enumeration is checked with the
other programs' (``test_stan_programs.py``, ``test_stan_full_density.py``);
Gibbs against NUTS in ``test_gibbs.py`` (parametrised over the families).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

import pyrater
from conftest import shared_file
from pyrater import MACE, RatingData, em, simulate_mace
from pyrater.inference.em.steps import MapPrior, mace_m_step
from pyrater.inference.gibbs import gibbs
from pyrater.inference.gibbs.priors import conjugate_prior, log_prior_density
from pyrater.models import mace_parameters, mace_theta
from pyrater.models.kernels import class_log_posterior
from test_fitfile import assert_same_fit

K = 3
PI = np.array([0.5, 0.3, 0.2])
#: eight raters from expert to spammer
COMPETENCE = np.array([0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.3, 0.05])


def _xi(J: int, K: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.full(K, 2.0), size=J)


def _rater_counts(data: RatingData) -> np.ndarray:
    return np.bincount(data.rater, minlength=data.n_raters)


def _counts_given_classes(data: RatingData, T: np.ndarray) -> np.ndarray:
    """Expected counts N[j, k, l] (true class k, rating l) from class probabilities T (I, K)."""
    J, K = data.n_raters, data.n_categories
    return np.asarray(data.counts.T @ (data.weight[:, None] * T)).reshape(J, K, K).transpose(0, 2, 1)


# ------------------------------------------------------------------ structure
def test_theta_is_competent_copy_or_spam():
    c = np.array([0.9, 0.0, 1.0, 0.4])
    xi = _xi(4, K, 0)
    theta = mace_theta(c, xi)
    assert theta.shape == (4, K, K)
    for j in range(4):
        for k in range(K):
            for l in range(K):
                assert theta[j, k, l] == pytest.approx(c[j] * (k == l) + (1 - c[j]) * xi[j, l])
    np.testing.assert_allclose(theta.sum(-1), 1)
    c_back, xi_back = mace_parameters(theta)
    np.testing.assert_allclose(c_back, c, atol=1e-12)
    np.testing.assert_allclose(xi_back[c < 1], xi[c < 1], atol=1e-12)
    np.testing.assert_allclose(xi_back[2], np.full(K, 1 / K))  # competence 1: xi not in theta
    sim = simulate_mace(50, 4, competence=c, xi=xi, seed=0)
    np.testing.assert_array_equal(sim.theta, theta)
    assert sim.model == "mace" and sim.params["competence"].tolist() == c.tolist()
    same = simulate_mace(50, 4, n_categories=K, competence=0.8, xi=xi[0], seed=0)
    np.testing.assert_array_equal(same.params["competence"], np.full(4, 0.8))
    np.testing.assert_array_equal(same.params["xi"], np.tile(xi[0], (4, 1)))


def test_simulated_ratings_follow_competence_and_spam():
    """P(rating = true class) = c + (1 - c) xi[z]; a spammer's ratings follow xi whatever the class."""
    c = np.array([0.95, 0.6, 0.0])
    xi = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    sim = simulate_mace(6000, 3, pi=PI, competence=c, xi=xi, seed=3)
    d = sim.data
    z = sim.z[d.unit]
    right = np.bincount(d.rater, weights=(d.rating == z), minlength=3)
    n = _rater_counts(d)
    expect = np.array([np.sum(c[j] + (1 - c[j]) * xi[j, z[d.rater == j]]) for j in range(3)]) / n
    assert np.all(np.abs(right / n - expect) < 4.5 * np.sqrt(expect * (1 - expect) / n))
    spam = np.bincount(d.rating[d.rater == 2], minlength=K) / n[2]
    assert np.all(np.abs(spam - xi[2]) < 4.5 * np.sqrt(xi[2] * (1 - xi[2]) / n[2]))


def test_default_and_object_priors_drive_the_simulator():
    sim = pyrater.simulate("mace", 30, 2000, n_categories=K, raters_per_item=2, seed=1)
    c = sim.params["competence"]
    assert c.shape == (2000,) and sim.params["xi"].shape == (2000, K)
    # default Beta(2, 2): mean 1/2, variance 1/20; Dirichlet(10): each xi_l mean 1/3, sd sqrt(2/279)
    assert abs(c.mean() - 0.5) < 4 / np.sqrt(20 * 2000)
    assert abs(c.var() - 1 / 20) < 0.1 / 20  # Beta(1, 1)'s would be 1/12
    assert np.all(np.abs(sim.params["xi"].mean(0) - 1 / 3) < 4 * np.sqrt(2 / 279 / 2000))
    sharp = pyrater.simulate(MACE(beta1=1000, beta2=1), 30, 6, n_categories=K, seed=1)
    assert np.all(sharp.params["competence"] > 0.97)
    pri = MACE().priors(K, 4)
    assert float(pri["beta1"]) == 2.0 and float(pri["beta2"]) == 2.0
    assert pri["gamma"].tolist() == [10.0] * K and pri["alpha"].tolist() == [3.0] * K
    assert MACE(gamma=2).priors(K, 4)["gamma"].tolist() == [2.0] * K


def test_the_family_is_registered_everywhere():
    from pyrater.inference.stan.data import STAN_MODEL_NAMES

    m = pyrater.get_model("mace")
    assert isinstance(m, MACE) and m.conjugate == "mace"
    assert "mace" in pyrater.models.MODEL_NAMES and "mace" in STAN_MODEL_NAMES
    assert set(m.methods) == {"mcmc", "optimize", "pathfinder", "em", "gibbs"}
    assert pyrater.simulate_mace is simulate_mace and pyrater.MACE is MACE


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: simulate_mace(10, 2, n_categories=3, competence=[1.2, 0.5]), r"competence must hold probabilities"),
        (lambda: simulate_mace(10, 2, n_categories=3, competence=[0.7] * 3), r"competence must have shape \(J,\)"),
        (lambda: simulate_mace(10, 2, n_categories=3, xi=[0.5, 0.6, 0.1]), "xi must hold probability rows"),
        (lambda: simulate_mace(10, 2, n_categories=3, xi=np.full((3, 3), 1 / 3)), r"xi must have shape \(J, K\)"),
        (lambda: simulate_mace(10, 2, competence=[0.7, 0.8]), "give n_categories"),
        (lambda: simulate_mace(10, 2, n_categories=3, beta1=0), "beta1 must be > 0"),
        (lambda: simulate_mace(10, 2, n_categories=3, gamma=[1.0, 0.0, 1.0]), "gamma must be > 0"),
        (lambda: MACE(beta2=[1.0, 2.0]).priors(3, 2), r"beta2 must have shape \(\) \(a scalar\)"),
        (lambda: MACE(gamma=[1.0, 2.0]).priors(3, 2), r"gamma must have shape \(K,\) = \(3,\)"),
        (lambda: MACE(gamma=np.nan).priors(3, 2), "gamma must be finite"),
        (lambda: MACE(alpha=[1.0, 1.0]).priors(3, 2), r"alpha must have shape \(K,\) = \(3,\)"),
        (lambda: mace_theta(np.full(2, 0.5), np.full((3, 3), 1 / 3)), "xi must have shape"),
    ],
)
def test_bad_input_is_refused_with_the_arguments_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("method", ["em", "gibbs", "mcmc", "optimize", "pathfinder"])
def test_bad_priors_are_refused_before_fitting(method):
    sim = simulate_mace(20, 3, n_categories=K, seed=1)
    with pytest.raises(ValueError, match="gamma must be > 0"):
        pyrater.fit(sim.data, MACE(gamma=-1), method=method, progress=False)


@pytest.mark.parametrize("name, model", [("beta1", MACE(beta1=0.5, beta2=0.5)), ("gamma", MACE(gamma=0.5))])
def test_map_needs_hyperparameters_of_at_least_one(name, model):
    """The paper's Beta(0.5, 0.5) has no mode on the simplex: MAP there refuses it by name (by default
    EM takes the log-odds mode instead); ML and the samplers take it."""
    sim = simulate_mace(40, 3, n_categories=K, seed=1)
    with pytest.raises(ValueError, match=rf">= 1.*{name}"):
        em(sim.data, model, method="map", mode_scale="simplex")
    assert em(sim.data, model, method="map", progress=False).mode_scale == "log_odds"
    em(sim.data, model, method="ml")  # ML ignores the priors
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = gibbs(sim.data, model, chains=1, warmup=10, draws=10, seed=1, progress=False)
    assert g.priors["beta1"] == pytest.approx(model.priors(K, 3)["beta1"])


def test_user_arrays_are_not_modified():
    c, xi = np.array([0.9, 0.6, 0.7]), _xi(3, K, 1)
    before = c.copy(), xi.copy()
    simulate_mace(20, 3, competence=c, xi=xi, seed=0)
    mace_parameters(mace_theta(c, xi))
    np.testing.assert_array_equal(c, before[0])
    np.testing.assert_array_equal(xi, before[1])


# ------------------------------------------------------------------ the M-step
def _q(N: np.ndarray, c: float, xi: np.ndarray, prior: tuple | None) -> float:
    """The M-step objective of one rater: sum N log theta (+ log prior), by scipy."""
    theta = mace_theta(np.array([c]), xi[None])[0]
    val = float(np.sum(N * np.log(theta)))
    if prior is not None:
        b1, b2, g = prior
        val += stats.beta.logpdf(c, b1, b2) + stats.dirichlet.logpdf(xi, g)
    return val


@pytest.mark.parametrize("with_prior", [False, True])
def test_m_step_maximises_the_expected_complete_data_objective(with_prior):
    """On random expected counts the inner EM's (c, xi) beat a general optimiser from several starts."""
    rng = np.random.default_rng(5)
    J = 6
    N = rng.gamma(2.0, 3.0, size=(J, K, K)) + 8 * np.eye(K) * rng.uniform(0, 3, size=(J, 1, 1))
    prior_t = (2.0, 1.5, np.array([10.0, 4.0, 2.0])) if with_prior else None
    prior = None
    if with_prior:
        prior = MapPrior("mace", np.ones(K), beta1=np.array(2.0), beta2=np.array(1.5), gamma=prior_t[2])
    c, xi, empty = mace_m_step(N, prior, max_inner=5000, tol=1e-13)
    assert not empty.any()

    def neg(x, j):  # c = sigmoid(x0), xi = softmax(x1..)
        cc = 1 / (1 + np.exp(-x[0]))
        v = np.exp(x[1:] - x[1:].max())
        return -_q(N[j], cc, v / v.sum(), prior_t)

    for j in range(J):
        ours = _q(N[j], c[j], xi[j], prior_t)
        for s in range(3):
            x0 = np.random.default_rng(s).normal(size=K + 1)
            res = optimize.minimize(neg, x0, args=(j,), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12,
                                    "maxiter": 20000, "maxfev": 40000})  # fmt: skip
            assert ours >= -res.fun - 1e-7, (j, ours, -res.fun)


@pytest.mark.parametrize("with_prior", [False, True])
def test_m_step_compiled_and_numpy_loops_agree(with_prior):
    rng = np.random.default_rng(2)
    N = rng.gamma(2.0, 3.0, size=(40, K, K)) + 10 * np.eye(K)
    N[5] = 0.0  # a rater without ratings
    prior = MapPrior("mace", np.ones(K), beta1=np.array(2.0), beta2=np.array(1.5), gamma=np.full(K, 4.0))
    start = (rng.uniform(0.1, 0.9, 40), rng.dirichlet(np.ones(K), 40))
    for st in (None, start):
        a = mace_m_step(N, prior if with_prior else None, st)
        b = mace_m_step(N, prior if with_prior else None, st, use_numba=False)
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


def test_a_rater_without_ratings_gets_uniform_matrices():
    N = np.zeros((2, K, K))
    N[0] = np.eye(K) * 5 + 1
    c, xi, empty = mace_m_step(N, None)
    assert empty.tolist() == [False, True]
    np.testing.assert_allclose(mace_theta(c, xi)[1], np.full((K, K), 1 / K))


# ------------------------------------------------------------------ EM
@pytest.mark.parametrize("method", ["ml", "map"])
def test_em_estimate_is_the_fixed_point_and_the_objective_never_decreases(method):
    sim = simulate_mace(500, 8, pi=PI, competence=COMPETENCE, xi=_xi(8, K, 2), raters_per_item=3, seed=2)
    model = MACE(beta1=3.0, beta2=2.0, gamma=4.0)
    fit = em(sim.data, model, method=method, tol=1e-14, param_tol=1e-11, max_iter=20000, progress=False)
    assert fit.converged
    trace = fit.log_lik_trace
    assert np.all(np.diff(trace) >= -1e-11 * np.abs(trace[1:])), np.diff(trace).min()
    N = _counts_given_classes(sim.data, fit.class_probs)
    prior = MapPrior("mace", np.full(K, 3.0), beta1=np.array(3.0), beta2=np.array(2.0), gamma=np.full(K, 4.0))
    c, xi, _ = mace_m_step(N, prior if method == "map" else None, max_inner=100000, tol=1e-14)
    np.testing.assert_allclose(fit.theta, mace_theta(c, xi), atol=2e-7)
    n_k = fit.class_probs.sum(0) + (2.0 if method == "map" else 0.0)  # default alpha = 3
    np.testing.assert_allclose(fit.pi, n_k / n_k.sum(), atol=1e-8)
    if method == "map":  # the objective is the log posterior with every constant
        cf, xif = mace_parameters(fit.theta)
        lp = (
            stats.dirichlet.logpdf(fit.pi, fit.priors["alpha"])
            + stats.beta.logpdf(cf, 3.0, 2.0).sum()
            + sum(stats.dirichlet.logpdf(x, np.full(K, 4.0)) for x in xif)
        )
        assert fit.log_posterior == pytest.approx(fit.log_lik + lp, rel=1e-10)


@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")  # short chains
def test_em_and_gibbs_recover_simulated_truth_over_replicates():
    """Over three replicates the truth of every competence lies within the fits' error bounds.

    Gibbs: central 95% intervals of the competences (most cover) and 99% intervals of pi (all
    cover).  EM: the MAP competence within 3.5 posterior standard deviations (from the Gibbs draws).
    MACE's classes beat the majority vote (a spammer in the crowd) and the spammer is found.
    """
    inside_em, inside_gibbs, total = 0, 0, 0
    right = {"mace": 0, "vote": 0}
    for seed in range(3):
        sim = simulate_mace(600, 8, pi=PI, competence=COMPETENCE, xi=_xi(8, K, seed), raters_per_item=3, seed=seed)
        fit = em(sim.data, "mace", method="map", progress=False)
        g = gibbs(sim.data, "mace", chains=2, warmup=300, draws=600, seed=seed, log_lik=False, progress=False)
        draws = np.asarray(g.draws["competence"]).reshape(-1, 8)
        c_em, _ = mace_parameters(fit.theta)
        inside_em += int(np.sum(np.abs(c_em - COMPETENCE) < 3.5 * draws.std(axis=0)))
        lo, hi = np.quantile(draws, [0.025, 0.975], axis=0)
        inside_gibbs += int(np.sum((lo < COMPETENCE) & (COMPETENCE < hi)))
        iv = g.posterior_interval(0.99, "pi")
        assert np.all((iv.sel(bound="lower").values < PI) & (PI < iv.sel(bound="upper").values))
        assert hi[-1] < 0.35  # the spammer is recognised
        total += 8
        right["mace"] += int(np.sum(fit.class_probs.argmax(1) == sim.z))
        votes = np.asarray(sim.data.counts.todense()).reshape(-1, 8, K).sum(1)
        right["vote"] += int(np.sum(votes.argmax(1) == sim.z))
    assert inside_em >= total - 1, (inside_em, total)
    assert inside_gibbs >= 0.85 * total, (inside_gibbs, total)
    assert right["mace"] > right["vote"], right


@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")  # Rhat ~1.03 of 1,500 draws: within the MCSE used
def test_grouped_and_long_data_give_the_same_em_fit_and_gibbs_posterior():
    grouped = RatingData.from_grouped(pd.read_csv(shared_file("caries.csv")), tally="n")
    long = RatingData.from_long(grouped.to_long(), categories=list(grouped.categories))
    a = em(grouped, "mace", method="map", tol=1e-13, progress=False)
    b = em(long, "mace", method="map", tol=1e-13, progress=False)
    np.testing.assert_allclose(a.pi, b.pi, atol=1e-7)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-7)
    assert a.log_lik == pytest.approx(b.log_lik, rel=1e-9)
    ga = gibbs(grouped, "mace", chains=2, warmup=300, draws=1500, seed=1, log_lik=False, progress=False)
    gb = gibbs(long, "mace", chains=2, warmup=300, draws=1500, seed=2, log_lik=False, progress=False)
    for name in ("pi", "competence", "xi"):
        x, y = (np.asarray(f.draws[name]).reshape(2, 1500, -1) for f in (ga, gb))
        se = np.hypot(*(pyrater._arviz.mcse(v) for v in (x, y)))
        assert np.all(np.abs(x.mean((0, 1)) - y.mean((0, 1))) < 4.5 * se), name


@pytest.mark.stan
def test_em_ml_and_map_are_stans_posterior_mode(stan_engine):
    """ML is the mode under flat priors (every hyperparameter 1); MAP under the default priors."""
    sim = simulate_mace(300, 6, pi=PI, competence=COMPETENCE[:6], xi=_xi(6, K, 4), raters_per_item=3, seed=12)
    for model, method in ((MACE(alpha=1, beta1=1, beta2=1, gamma=1), "ml"), (MACE(), "map")):
        ref = em(sim.data, model if method == "map" else "mace", method=method, tol=1e-13, max_iter=20000)
        opt = pyrater.fit(sim.data, model, method="optimize", seed=3, engine=stan_engine)
        np.testing.assert_allclose(opt.point_estimate("pi").to_numpy(), ref.pi, atol=5e-4)
        np.testing.assert_allclose(opt.point_estimate("theta").to_numpy(), ref.theta, atol=2e-3)


# ------------------------------------------------------------------ Gibbs
@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")  # short chains
def test_gibbs_draws_log_lik_and_lp_are_the_models():
    sim = simulate_mace(100, 4, n_categories=K, raters_per_item=3, seed=4)
    f = gibbs(sim.data, "mace", chains=2, warmup=20, draws=30, seed=3, progress=False)
    assert f.draws["competence"].shape == (2, 30, 4) and f.draws["xi"].shape == (2, 30, 4, K)
    pi, theta = f._draws()
    c = np.asarray(f.draws["competence"]).reshape(-1, 4)
    xi = np.asarray(f.draws["xi"]).reshape(-1, 4, K)
    np.testing.assert_allclose(theta, mace_theta(c, xi), atol=1e-14)
    ll = np.asarray(f.draws["log_lik"]).reshape(pi.shape[0], -1)
    lp = np.asarray(f.sample_stats["lp"]).reshape(-1)
    prior = conjugate_prior("mace", K, 4)
    for s in (0, 17, pi.shape[0] - 1):
        _, ref = class_log_posterior(sim.data.counts, np.log(pi[s]), np.log(theta[s]))
        np.testing.assert_allclose(ll[s], ref, rtol=1e-10)
        log_prior = (
            stats.dirichlet.logpdf(pi[s], prior.alpha)
            + stats.beta.logpdf(c[s], 2.0, 2.0).sum()  # the default Beta(2, 2)
            + sum(stats.dirichlet.logpdf(x, np.full(K, 10.0)) for x in xi[s])
        )
        np.testing.assert_allclose(lp[s], ref.sum() + log_prior, rtol=1e-10)
        raw = np.concatenate([c[s][:, None], xi[s]], axis=1)
        assert log_prior_density(prior, pi[s], theta[s], raw) == pytest.approx(log_prior, rel=1e-12)


def test_gibbs_posterior_of_competence_and_xi_given_the_classes_is_the_models():
    """All classes known, K = 2: posterior means of (c, xi_1) by quadrature on a grid, against Gibbs.

    The sampler splits the diagonal counts into competent and spam ratings by binomial draws (data
    augmentation); the grid integrates the marginal density of (c, xi) directly, with no such split.
    """
    sim = simulate_mace(60, 2, n_categories=2, competence=[0.7, 0.2], xi=[[0.3, 0.7], [0.8, 0.2]], seed=6)
    known = dict(zip(sim.data.unit_labels, sim.data.categories[sim.z]))
    model = MACE(beta1=2.0, beta2=1.5, gamma=[3.0, 2.0])
    f = gibbs(sim.data, model, known=known, chains=4, warmup=200, draws=4000, seed=1, log_lik=False, progress=False)
    N = _counts_given_classes(sim.data, np.eye(2)[sim.z])
    g = np.linspace(0, 1, 801)[1:-1]
    cc, xx = np.meshgrid(g, g, indexing="ij")
    for j in range(2):
        t = np.stack([cc + (1 - cc) * xx, (1 - cc) * (1 - xx)], -1)  # true class 0: P(rating 0), P(rating 1)
        u = np.stack([(1 - cc) * xx, cc + (1 - cc) * (1 - xx)], -1)  # true class 1
        logd = (N[j, 0] * np.log(t)).sum(-1) + (N[j, 1] * np.log(u)).sum(-1)
        logd += stats.beta.logpdf(cc, 2.0, 1.5) + stats.beta.logpdf(xx, 3.0, 2.0)
        w = np.exp(logd - logd.max())
        w /= w.sum()
        for name, grid, draws in (
            ("competence", cc, np.asarray(f.draws["competence"])[:, :, j, None]),
            ("xi", xx, np.asarray(f.draws["xi"])[:, :, j, :1]),
        ):
            exact = float(np.sum(w * grid))
            se = float(pyrater._arviz.mcse(draws)[0])
            assert abs(draws.mean() - exact) < 4 * se + 1e-4, (j, name, draws.mean(), exact, se)


# ------------------------------------------------------------------ the Fit API, every method
@pytest.fixture(scope="module")
def small():
    return simulate_mace(80, 5, pi=PI, competence=[0.9, 0.8, 0.75, 0.7, 0.1], xi=_xi(5, K, 3), raters_per_item=3,
                         seed=8)  # fmt: skip


def _check_fit_api(f, sim, tmp_path, mcmc: bool) -> None:
    J = sim.data.n_raters
    pi = f.point_estimate("pi")
    assert pi.shape == (K,) and pi.sum() == pytest.approx(1)
    theta = f.point_estimate("theta")
    assert theta.dims == ("rater", "category", "rating") and theta.shape == (J, K, K)
    th = theta.to_numpy()
    if not f.has_draws:  # a mode has the MACE structure (a posterior mean of theta has it too, by linearity)
        np.testing.assert_allclose(th, mace_theta(*mace_parameters(th)), atol=1e-10)
    probs = f.class_probabilities()
    assert probs.shape == (sim.data.n_units, K)
    np.testing.assert_allclose(probs.sum(axis=1), 1, atol=1e-9)
    assert (f.point_estimate("z").to_numpy() == sim.data.categories[sim.z]).mean() > 0.8
    s = f.summary()
    assert s.model == "MACE" and float(s.priors["gamma"][0]) == pytest.approx(10.0)
    assert "MACE" in str(s)
    idata = f.to_inference_data()
    post = pyrater._arviz.group(idata, "posterior")
    if f.has_draws:
        np.testing.assert_allclose(th, mace_theta(*mace_parameters(th)), atol=1e-10)
        assert post["competence"].dims == ("chain", "draw", "rater")
        assert post["xi"].dims == ("chain", "draw", "rater", "rating")
        reps = pyrater.posterior_predict(f, draws=5, seed=1)
        assert len(reps) == 5 * sim.data.n_ratings
        ppc = pyrater.posterior_predictive_check(f, lambda df: float((df["rating"] == 1).mean()), draws=20, seed=1)
        assert 0 <= ppc.p_value <= 1 and ppc.simulated.shape == (20,)
    else:
        with pytest.raises(NotImplementedError):
            f.posterior_samples()
    if mcmc:
        diag = f.mcmc_diagnostics(warn=False)
        assert {f"competence[{r}]" for r in sim.data.rater_labels} <= set(diag.index)
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
    f = pyrater.fit(small.data, "mace", method="em")
    _check_fit_api(f, small, tmp_path, mcmc=False)


def test_fit_api_gibbs_and_compare_with_dawid_skene(small, tmp_path):
    kw = dict(method="gibbs", chains=2, warmup=200, draws=300, seed=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains
        f = pyrater.fit(small.data, "mace", **kw)
        ds = pyrater.fit(small.data, "dawid_skene", **kw)
    _check_fit_api(f, small, tmp_path, mcmc=True)
    _check_compare(f, ds)


@pytest.mark.stan
@pytest.mark.parametrize(
    "method",
    [pytest.param("mcmc", marks=pytest.mark.slow), "optimize", "pathfinder"],  # mcmc: up to 50 s here
)
def test_fit_api_stan_methods(small, tmp_path, method, stan_engine):
    if method == "pathfinder" and stan_engine.name != "cmdstanpy":
        pytest.skip("Pathfinder runs in CmdStan only (the pystan engine refuses it)")
    kw = dict(chains=2, warmup=200, draws=200) if method == "mcmc" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains, pathfinder's Pareto k
        f = pyrater.fit(small.data, "mace", method=method, seed=2, progress=False, engine=stan_engine, **kw)
        if method == "mcmc":
            ds = pyrater.fit(small.data, "dawid_skene", method=method, seed=2, progress=False, engine=stan_engine, **kw)
    if method != "optimize":
        assert f.draws["competence"].shape[2:] == (small.data.n_raters,)
    _check_fit_api(f, small, tmp_path, mcmc=method == "mcmc")
    if method == "mcmc":
        _check_compare(f, ds)


def _check_compare(f, ds) -> None:
    table = pyrater.compare({"mace": f, "dawid_skene": ds})
    assert set(table.index) == {"mace", "dawid_skene"}
    assert table["weight"].sum() == pytest.approx(1.0)
    elpd = {name: pyrater.loo(x, warn=False).elpd_loo for name, x in {"mace": f, "dawid_skene": ds}.items()}
    best = max(elpd, key=elpd.get)
    for name in table.index:
        assert table.loc[name, "elpd_diff"] == pytest.approx(elpd[name] - elpd[best])


def test_under_a_prior_a_rater_without_ratings_sits_at_the_prior_mode():
    """MAP: competence (beta1 - 1) / (beta1 + beta2 - 2) and the Dirichlet mode, so the log prior stays finite
    (a competence of 0 has log density -inf under Beta(2, 2), and EM could then never see its objective move)."""
    N = np.zeros((2, K, K))
    N[0] = np.eye(K) * 5 + 1
    gamma = np.arange(2.0, 2.0 + K)
    prior = MapPrior("mace", np.ones(K), beta1=np.array(3.0), beta2=np.array(2.0), gamma=gamma)
    for numba in (True, False):
        c, xi, empty = mace_m_step(N, prior, use_numba=numba)
        assert empty.tolist() == [False, True]
        assert c[1] == pytest.approx(2.0 / 3.0)
        np.testing.assert_allclose(xi[1], (gamma - 1) / (gamma - 1).sum())
    # a fit whose data leave one rater without a rating keeps a finite, converging objective
    sim = pyrater.simulate("mace", 60, 5, n_categories=K, raters_per_item=3, seed=2)
    data = pyrater.RatingData.from_codes(
        sim.data.unit, sim.data.rater, sim.data.rating, n_categories=K, n_raters=6
    )  # rater 6 has no ratings
    fit = pyrater.em(data, pyrater.MACE(beta1=2.0, beta2=2.0), method="map")
    assert fit.converged and np.isfinite(fit.log_posterior)
    assert fit.theta[5, 0, 0] == pytest.approx(0.5 + 0.5 / K)  # competence 1/2, xi uniform (gamma default 10)


def test_default_competence_prior_keeps_em_inside_and_held_out_items_likely():
    """Beta(2, 2), the default: raters who never disagree stay below competence 1, so an item on which two
    of them disagree keeps a reasonable held-out probability.  Under the uniform Beta(1, 1) (maximum
    likelihood in the competence) their competences run towards 1 and that item's held-out density
    towards 0 (on real crowds to exactly 0: tests/test_defaults_realdata.py)."""
    rng = np.random.default_rng(5)
    truth = rng.integers(0, K, 60)
    rows = []  # (item, rater, rating)
    for i, z in enumerate(truth):
        for j in range(4):  # raters 0-3: competence 0.7, spam uniform
            rows.append((i, j, z if rng.random() < 0.7 else rng.integers(0, K)))
        for j in (4, 5):  # raters 4 and 5: always right, except on item 0, where they disagree
            rows.append((i, j, z if i else (z + j - 3) % K))
    items, raters, ratings = np.array(rows).T
    data = pyrater.RatingData.from_codes(items, raters, ratings, n_categories=K)
    assert MACE().priors(K, 6)["beta1"] == 2.0
    fit = pyrater.fit(data, "mace", method="em", seed=1, progress=False)
    flat = pyrater.fit(data, MACE(beta1=1, beta2=1), method="em", seed=1, progress=False)
    competence = mace_parameters(fit.theta)[0]
    assert fit.converged and np.all((competence > 0.05) & (competence < 0.96))
    assert np.all(mace_parameters(flat.theta)[0][4:] > competence[4:] + 0.02)
    held_out = pyrater.kfold(fit, seed=1, progress=False).elpd_i.to_numpy()
    held_out_flat = pyrater.kfold(flat, seed=1, progress=False).elpd_i.to_numpy()
    assert held_out[0] > held_out_flat[0] + 10  # -11.4 against -38.4 nats
