"""EM for the Dawid-Skene family: ML, MAP, grouped and long paths, known items."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import pyrater
from conftest import shared_file
from pyrater.data import RatingData
from pyrater.inference.em.algorithm import EMConvergenceWarning, EMFit, em
from pyrater.models import (
    ClassConditionalDawidSkene,
    DawidSkene,
    HierarchicalDawidSkene,
    HomogeneousDawidSkene,
    OneCoinDawidSkene,
    class_conditional_theta,
    default_beta,
    simulate_class_conditional,
    simulate_dawid_skene,
    simulate_homogeneous,
    simulate_mace,
    simulate_one_coin,
)
from pyrater.models.kernels import class_log_posterior, soft_majority_vote

VARIANTS = ["dawid_skene", "class_conditional", "homogeneous", "one_coin", "mace"]
PI3 = np.array([0.5, 0.3, 0.2])


def _theta_ds(J: int, K: int, seed: int) -> np.ndarray:
    """Diagonal-heavy rater-specific error matrices."""
    rng = np.random.default_rng(seed)
    beta = np.full((K, K), 1.0)
    np.fill_diagonal(beta, 12.0)
    return np.stack([np.stack([rng.dirichlet(beta[k]) for k in range(K)]) for _ in range(J)])


def _simulate(variant: str, n_items: int = 1500, n_raters: int = 6, seed: int = 0, raters_per_item=None):
    K = 3
    if variant == "dawid_skene":
        return simulate_dawid_skene(
            n_items, n_raters, pi=PI3, theta=_theta_ds(n_raters, K, seed), raters_per_item=raters_per_item, seed=seed
        )
    if variant == "class_conditional":
        p = np.random.default_rng(seed).uniform(0.6, 0.9, size=(n_raters, K))
        return simulate_class_conditional(n_items, n_raters, pi=PI3, p=p, raters_per_item=raters_per_item, seed=seed)
    if variant == "one_coin":
        p = np.random.default_rng(seed).uniform(0.6, 0.9, size=n_raters)
        return simulate_one_coin(n_items, n_raters, pi=PI3, p=p, raters_per_item=raters_per_item, seed=seed)
    if variant == "mace":
        rng = np.random.default_rng(seed)
        c, xi = rng.uniform(0.6, 0.9, size=n_raters), rng.dirichlet(np.full(K, 2.0), size=n_raters)
        return simulate_mace(n_items, n_raters, pi=PI3, competence=c, xi=xi, raters_per_item=raters_per_item, seed=seed)
    return simulate_homogeneous(
        n_items, n_raters, pi=PI3, theta=_theta_ds(1, K, seed)[0], raters_per_item=raters_per_item, seed=seed
    )


def _log_prior(fit) -> float:
    """Log prior density of fit.pi and fit.theta under fit.priors, via scipy.stats."""
    pri, K = fit.priors, fit.pi.size
    lp = stats.dirichlet.logpdf(fit.pi, pri["alpha"])
    if "gamma" in pri:  # MACE: competence ~ Beta(beta1, beta2), xi ~ Dirichlet(gamma)
        c, xi = pyrater.models.mace_parameters(fit.theta)
        lp += stats.beta.logpdf(c, pri["beta1"], pri["beta2"]).sum()
        return lp + sum(stats.dirichlet.logpdf(x, pri["gamma"]) for x in xi)
    if "beta1" in pri:  # class-conditional: p (J, K); one-coin: p (J,) and scalar priors
        p = fit.theta[:, 0, 0] if np.ndim(pri["beta1"]) == 0 else fit.theta[:, np.arange(K), np.arange(K)]
        return lp + stats.beta.logpdf(p, pri["beta1"], pri["beta2"]).sum()
    if pri["beta"].ndim == 2:  # homogeneous: one matrix
        return lp + sum(stats.dirichlet.logpdf(fit.theta[0, k], pri["beta"][k]) for k in range(K))
    J = fit.theta.shape[0]
    return lp + sum(stats.dirichlet.logpdf(fit.theta[j, k], pri["beta"][j, k]) for j in range(J) for k in range(K))


def _oracle_accuracy(sim) -> float:
    """Accuracy of the Bayes classifier that knows the true pi and theta."""
    with np.errstate(divide="ignore"):
        lp, _ = class_log_posterior(sim.data.counts, np.log(sim.pi), np.log(sim.theta))
    return float(np.mean(lp.argmax(1) == sim.z))


@pytest.fixture(scope="module")
def anesthesia() -> RatingData:
    return RatingData.from_long(pd.read_csv(shared_file("anesthesia.csv")))


@pytest.fixture(scope="module")
def caries_grouped() -> RatingData:
    return RatingData.from_grouped(pd.read_csv(shared_file("caries.csv")))


# ------------------------------------------------------------------ recovery


@pytest.mark.parametrize("variant", VARIANTS)
def test_em_recovers_simulated_truth(variant):
    sim = _simulate(variant, n_items=3000, seed=11)
    fit = em(sim.data, model=variant, method="ml")
    assert isinstance(fit, EMFit) and fit.method == "em_ml"
    assert fit.converged
    np.testing.assert_allclose(fit.pi, sim.pi, atol=0.03)
    assert np.abs(fit.theta - sim.theta).max() < 0.06
    acc = np.mean(fit.class_probs.argmax(1) == sim.z)
    assert acc >= _oracle_accuracy(sim) - 0.01
    assert acc > 0.85


@pytest.mark.parametrize("variant", VARIANTS)
def test_em_recovers_truth_incomplete_design_with_repeats(variant):
    sim = _simulate(variant, n_items=2500, n_raters=10, seed=5, raters_per_item=4)
    fit = em(sim.data, model=variant, method="map")
    assert fit.method == "em_map" and fit.converged
    np.testing.assert_allclose(fit.pi, sim.pi, atol=0.04)
    assert np.mean(fit.class_probs.argmax(1) == sim.z) >= _oracle_accuracy(sim) - 0.015


def test_class_conditional_theta_has_its_structure():
    sim = _simulate("class_conditional", seed=3)
    fit = em(sim.data, model="class_conditional", method="ml")
    K = 3
    p = fit.theta[:, np.arange(K), np.arange(K)]
    np.testing.assert_allclose(fit.theta, class_conditional_theta(p), atol=1e-14)
    fit_h = em(sim.data, model="homogeneous", method="ml")
    assert np.ptp(fit_h.theta, axis=0).max() == 0.0


# ------------------------------------------------------------------ textbook


def _textbook_em(n: np.ndarray, n_iter: int):
    """Dawid & Skene's updates written as explicit loops.

    n[i][j][l] = number of times rater j gave rating l to item i.
    """
    I, J, K = n.shape
    T = [[0.0] * K for _ in range(I)]
    for i in range(I):  # soft majority vote
        tot = sum(n[i][j][l] for j in range(J) for l in range(K))
        for l in range(K):
            T[i][l] = sum(n[i][j][l] for j in range(J)) / tot
    trace = []
    for _ in range(n_iter):
        pi = [sum(T[i][k] for i in range(I)) / I for k in range(K)]
        theta = [[[0.0] * K for _ in range(K)] for _ in range(J)]
        for j in range(J):
            for k in range(K):
                den = sum(T[i][k] * n[i][j][l] for i in range(I) for l in range(K))
                for l in range(K):
                    num = sum(T[i][k] * n[i][j][l] for i in range(I))
                    theta[j][k][l] = num / den if den > 0 else 1.0 / K
        ll = 0.0
        for i in range(I):
            joint = []
            for k in range(K):
                p = pi[k]
                for j in range(J):
                    for l in range(K):
                        p *= theta[j][k][l] ** n[i][j][l]
                joint.append(p)
            s = sum(joint)
            ll += np.log(s)
            T[i] = [v / s for v in joint]
        trace.append(ll)
    return np.array(pi), np.array(theta), np.array(T), np.array(trace)


def test_em_equals_textbook_loops_on_tiny_example():
    # 5 items, 3 raters, 2 categories; rater 0 rated item 0 twice, rater 2 skipped item 4
    rows = [
        (0, 0, 0),
        (0, 0, 0),
        (0, 1, 0),
        (0, 2, 1),
        (1, 0, 1),
        (1, 1, 1),
        (1, 2, 1),
        (2, 0, 0),
        (2, 1, 1),
        (2, 2, 0),
        (3, 0, 1),
        (3, 1, 0),
        (3, 2, 1),
        (4, 0, 0),
        (4, 1, 0),
    ]
    df = pd.DataFrame(rows, columns=["item", "rater", "rating"])
    n = np.zeros((5, 3, 2))
    for i, j, l in rows:
        n[i, j, l] += 1
    fit = em(df, init="majority", tol=1e-13, max_iter=500, compress=False, acceleration="none", method="ml")
    pi, theta, T, trace = _textbook_em(n, fit.n_iter)
    np.testing.assert_allclose(fit.pi, pi, rtol=1e-10)
    np.testing.assert_allclose(fit.theta, theta, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(fit.class_probs, T, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(fit.log_lik_trace, trace, rtol=1e-12)
    assert fit.log_lik == pytest.approx(trace[-1], rel=1e-12)


def test_class_probs_agree_with_the_kernel(anesthesia):
    fit = em(anesthesia, model="dawid_skene", known={1: 2, 5: 1}, method="ml")
    known = anesthesia.known_codes({1: 2, 5: 1})
    with np.errstate(divide="ignore"):
        lp, ll = class_log_posterior(anesthesia.counts, np.log(fit.pi), np.log(fit.theta), known)
    np.testing.assert_allclose(fit.class_probs, np.exp(lp), atol=1e-12)
    assert fit.log_lik == pytest.approx(ll.sum(), rel=1e-12)


# ------------------------------------------------------ grouped, long, compression


def test_grouped_and_long_paths_agree_on_caries(caries_grouped):
    long = RatingData.from_long(caries_grouped.to_long())
    assert long.n_units == caries_grouped.n_items
    g = em(caries_grouped, tol=1e-12, method="ml")
    plain = em(long, tol=1e-12, compress=False, method="ml")
    packed = em(long, tol=1e-12, compress=True, method="ml")
    assert g.n_fitted_units == caries_grouped.n_units and plain.n_fitted_units == long.n_units
    assert packed.compressed and packed.n_fitted_units == caries_grouped.n_units
    for other in (plain, packed):
        assert other.n_iter == g.n_iter
        np.testing.assert_allclose(other.pi, g.pi, atol=1e-8)
        np.testing.assert_allclose(other.theta, g.theta, atol=1e-8)
        np.testing.assert_allclose(other.log_lik_trace, g.log_lik_trace, rtol=1e-10)
    # item-level probabilities of the long fits equal their pattern's probabilities
    item_pattern = np.repeat(np.arange(caries_grouped.n_units), caries_grouped.weight)
    np.testing.assert_allclose(plain.class_probs, g.class_probs[item_pattern], atol=1e-8)
    np.testing.assert_allclose(packed.class_probs, plain.class_probs, atol=1e-8)


def test_grouped_dataframe_input(caries_grouped):
    df = pd.read_csv(shared_file("caries.csv"))
    before = df.copy()
    fit = em(df, data_format="grouped", method="map")
    pd.testing.assert_frame_equal(df, before)
    np.testing.assert_allclose(fit.pi, em(caries_grouped, method="map").pi, rtol=1e-12)


def test_auto_compression_is_exact_with_known_items():
    sim = simulate_dawid_skene(3000, 3, pi=[0.6, 0.4], theta=np.array([[0.8, 0.2], [0.3, 0.7]]), seed=4)
    known = {lab: sim.data.categories[z] for lab, z in zip(sim.data.unit_labels[:40], sim.z[:40])}
    auto = em(sim.data, known=known, method="map")
    plain = em(sim.data, known=known, method="map", compress=False)
    assert auto.compressed and auto.n_fitted_units < 30
    np.testing.assert_allclose(auto.theta, plain.theta, atol=1e-10)
    np.testing.assert_allclose(auto.class_probs, plain.class_probs, atol=1e-10)
    np.testing.assert_allclose(auto.log_lik_trace, plain.log_lik_trace, rtol=1e-12)
    assert np.all(auto.class_probs[np.arange(40), sim.z[:40]] == 1.0)


def test_user_init_array_is_averaged_within_compressed_groups():
    sim = simulate_dawid_skene(600, 3, pi=[0.6, 0.4], theta=np.array([[0.8, 0.2], [0.3, 0.7]]), seed=9)
    init = np.random.default_rng(0).dirichlet([1, 1], size=600)
    before = init.copy()
    a = em(sim.data, init=init, compress=True, method="ml")
    b = em(sim.data, init=init, compress=False, method="ml")
    np.testing.assert_array_equal(init, before)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-10)
    np.testing.assert_allclose(a.log_lik_trace, b.log_lik_trace, rtol=1e-12)


# ------------------------------------------------------------ monotone trace


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("method", ["ml", "map"])
@pytest.mark.parametrize("with_known", [False, True])
def test_trace_never_decreases(variant, method, with_known):
    sim = _simulate(variant, n_items=400, n_raters=5, seed=2, raters_per_item=3)
    known = None
    if with_known:
        labs = sim.data.unit_labels[:50]
        known = dict(zip(labs, sim.data.categories[sim.z[:50]]))
    # a random start makes EM travel further than majority vote does
    fit = em(
        sim.data,
        model=variant,
        method=method,
        known=known,
        init="random",
        seed=1,
        tol=1e-12,
        max_iter=5000,
        compress=False,
    )
    trace = fit.log_lik_trace
    assert trace.size > 5
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    assert trace[-1] > trace[0]
    if method == "map":
        assert fit.objective == "log_posterior" and fit.log_posterior == trace[-1]
        # the two differ by the log prior density at the estimate
        assert fit.log_posterior - fit.log_lik == pytest.approx(_log_prior(fit), rel=1e-10)
    else:
        assert fit.objective == "log_likelihood" and fit.log_lik == pytest.approx(trace[-1], rel=1e-14)


# ------------------------------------------------------------- known items


def test_known_items_clamped_and_improve_accuracy():
    # weak raters, few ratings per item: labels of a fifth of the items help
    K, J = 3, 8
    rng = np.random.default_rng(21)
    theta = np.stack([np.full((K, K), 0.25) + np.diag(np.full(K, 0.25)) for _ in range(J)])
    theta += rng.uniform(-0.05, 0.05, size=theta.shape)
    theta /= theta.sum(axis=2, keepdims=True)
    sim = simulate_dawid_skene(1500, J, pi=PI3, theta=theta, raters_per_item=3, seed=21)
    idx = np.random.default_rng(1).choice(1500, size=300, replace=False)
    labs = sim.data.unit_labels[idx]
    known = dict(zip(labs, sim.data.categories[sim.z[idx]]))
    free = em(sim.data, max_iter=20000, method="ml")
    semi = em(sim.data, known=known, max_iter=20000, method="ml")
    assert free.converged and semi.converged
    # clamped: exactly one-hot on the known class
    np.testing.assert_array_equal(semi.class_probs[idx], np.eye(K)[sim.z[idx]])
    rest = np.setdiff1d(np.arange(1500), idx)
    acc_free = np.mean(free.class_probs.argmax(1)[rest] == sim.z[rest])
    acc_semi = np.mean(semi.class_probs.argmax(1)[rest] == sim.z[rest])
    assert acc_semi > acc_free
    assert np.abs(semi.theta - sim.theta).mean() < np.abs(free.theta - sim.theta).mean()


def test_unknown_known_item_is_refused_before_fitting(anesthesia):
    with pytest.raises(ValueError, match="not found"):
        em(anesthesia, known={"no such item": 1}, method="ml")
    with pytest.raises(ValueError, match="not among the categories"):
        em(anesthesia, known={1: 9}, method="ml")


# ------------------------------------------------------------------ restarts


def test_restarts_keep_the_best_run():
    sim = _simulate("dawid_skene", n_items=300, n_raters=4, seed=8, raters_per_item=2)
    n_restarts, seed = 4, 123
    # a degenerate start (every item in class 1) is a fixed point of EM with pi = (1, 0, 0)
    stuck = np.zeros((sim.data.n_units, 3))
    stuck[:, 0] = 1.0
    fit = em(
        sim.data, init=stuck, n_restarts=n_restarts, seed=seed, compress=False, tol=1e-10, max_iter=3000, method="ml"
    )
    assert fit.best_run > 0
    assert fit.restart_objectives[0] < fit.log_lik_trace[-1] - 50
    # redo every run by hand: the given start, then the same random starts
    rng = np.random.default_rng(seed)
    starts = [stuck] + [rng.dirichlet(np.ones(3), size=sim.data.n_units) for _ in range(n_restarts)]
    finals = np.array(
        [em(sim.data, init=s, compress=False, tol=1e-10, max_iter=3000, method="ml").log_lik_trace[-1] for s in starts]
    )
    np.testing.assert_allclose(fit.restart_objectives, finals, rtol=1e-12)
    # the kept run is the best up to the documented margin tol * |objective| (label-switched
    # copies of one optimum do not replace each other)
    assert fit.log_lik_trace[-1] == pytest.approx(finals[fit.best_run], rel=1e-12)
    assert fit.log_lik_trace[-1] >= finals.max() - 1e-10 * abs(finals.max())
    # the kept run's estimate is the one refitted from its start
    best = em(sim.data, init=starts[fit.best_run], compress=False, tol=1e-10, max_iter=3000, method="ml")
    np.testing.assert_allclose(fit.theta, best.theta, atol=1e-12)


def test_restarts_are_reproducible_with_a_seed():
    sim = _simulate("class_conditional", n_items=200, n_raters=4, seed=1, raters_per_item=2)
    a = em(sim.data, model="class_conditional", init="random", n_restarts=2, seed=5, method="ml")
    b = em(sim.data, model="class_conditional", init="random", n_restarts=2, seed=5, method="ml")
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.restart_objectives, b.restart_objectives)


# ---------------------------------------------------------------------- MAP


@pytest.mark.parametrize(
    "ml_model, flat",
    [
        ("dawid_skene", DawidSkene(alpha=1, beta=np.ones((3, 3)))),
        ("class_conditional", ClassConditionalDawidSkene(alpha=1, beta1=1, beta2=1)),
        ("homogeneous", HomogeneousDawidSkene(alpha=1, beta=np.ones((3, 3)))),
        ("one_coin", OneCoinDawidSkene(alpha=1, beta1=1, beta2=1)),
    ],
)
def test_map_equals_ml_when_all_hyperparameters_are_one(ml_model, flat):
    sim = _simulate(ml_model, n_items=500, seed=4, raters_per_item=3)
    ml = em(sim.data, model=ml_model, method="ml", tol=1e-12)
    mp = em(sim.data, model=flat, method="map", tol=1e-12)
    np.testing.assert_allclose(mp.pi, ml.pi, atol=1e-12)
    np.testing.assert_allclose(mp.theta, ml.theta, atol=1e-12)
    np.testing.assert_allclose(mp.log_lik, ml.log_lik, rtol=1e-12)
    # flat Dirichlet/Beta densities are constants: the objective differs by their log
    assert np.ptp(mp.log_lik_trace - ml.log_lik_trace) < 1e-8


def test_map_uses_the_models_default_priors_and_is_a_fixed_point(anesthesia):
    fit = em(anesthesia, model="dawid_skene", method="map", tol=1e-14, max_iter=5000)
    K, J = anesthesia.n_categories, anesthesia.n_raters
    pri = DawidSkene().priors(K, J)
    np.testing.assert_array_equal(fit.priors["alpha"], pri["alpha"])
    np.testing.assert_array_equal(fit.priors["beta"], pri["beta"])
    # stationarity: the MAP update from the returned class probabilities gives the estimate back
    T = fit.class_probs
    N = np.asarray(anesthesia.counts.T @ T).reshape(J, K, K).transpose(0, 2, 1) + pri["beta"] - 1
    np.testing.assert_allclose(fit.theta, N / N.sum(2, keepdims=True), atol=1e-8)
    a = T.sum(0) + pri["alpha"] - 1
    np.testing.assert_allclose(fit.pi, a / a.sum(), atol=1e-8)
    ml = em(anesthesia, model="dawid_skene", method="ml")
    assert fit.log_lik < ml.log_lik  # ML maximises the likelihood


def test_the_default_is_the_posterior_mode_that_fit_by_em_and_the_cli_give(anesthesia):
    default = em(anesthesia, seed=1)
    assert default.method == "em_map" and default.priors  # the model's default priors, not maximum likelihood
    same = pyrater.fit(anesthesia, "dawid_skene", method="em", seed=1)
    np.testing.assert_allclose(default.theta, same.theta, atol=1e-8)
    np.testing.assert_allclose(default.pi, same.pi, atol=1e-8)
    ml = em(anesthesia, method="ml", seed=1)
    assert ml.method == "em_ml" and not ml.priors and ml.log_lik > default.log_lik
    # the families without maximum likelihood fit by default (the ML default refused them)
    sim = pyrater.simulate("pooled", 120, 8, n_categories=3, seed=2)
    assert em(sim.data, "pooled").method == "em_map"
    with pytest.raises(ValueError, match="method='ml' is not available for the pooled model"):
        em(sim.data, "pooled", method="ml")


def test_class_conditional_map_uses_beta_prior():
    sim = _simulate("class_conditional", n_items=300, seed=6, raters_per_item=2)
    model = ClassConditionalDawidSkene(beta1=[9.0, 9.0, 9.0], beta2=[1.0, 1.0, 1.0])
    fit = em(sim.data, model=model, method="map", tol=1e-14, max_iter=5000)
    K, J = 3, sim.data.n_raters
    T = fit.class_probs
    N = np.asarray(sim.data.counts.T @ T).reshape(J, K, K).transpose(0, 2, 1)
    p_expected = (N[:, np.arange(K), np.arange(K)] + 8.0) / (N.sum(2) + 8.0)
    np.testing.assert_allclose(fit.theta[:, np.arange(K), np.arange(K)], p_expected, atol=1e-8)


@pytest.mark.parametrize(
    "model, name",
    [
        (DawidSkene(alpha=0.5), "alpha"),
        (DawidSkene(beta=np.full((4, 4), 0.9)), "beta"),
        (HomogeneousDawidSkene(beta=np.full((4, 4), 0.5)), "beta"),
        (ClassConditionalDawidSkene(beta2=0.5), "beta2"),
        (OneCoinDawidSkene(beta1=0.7), "beta1"),
    ],
)
def test_map_refuses_hyperparameters_below_one_on_the_simplex(anesthesia, model, name):
    with pytest.raises(ValueError, match=rf">= 1.*{name}"):
        em(anesthesia, model=model, method="map", mode_scale="simplex")
    em(anesthesia, model=model, method="ml")  # ML ignores the priors
    # by default the mode is taken on the log-odds scale: the simplex mode under every pseudo-count + 1
    fit = em(anesthesia, model=model, method="map")
    assert fit.mode_scale == "log_odds" and "log-odds" in str(fit.summary())
    shifted = {k: np.asarray(v, dtype=float) + 1.0 for k, v in model.priors(4, anesthesia.n_raters).items()}
    ref = em(anesthesia, model=type(model)(**shifted), method="map", mode_scale="simplex")
    assert ref.mode_scale == "simplex"
    np.testing.assert_allclose(fit.pi, ref.pi, atol=1e-10)
    np.testing.assert_allclose(fit.theta, ref.theta, atol=1e-10)
    assert fit.priors["alpha"] == pytest.approx(model.priors(4, anesthesia.n_raters)["alpha"])  # the model's own


@pytest.mark.parametrize("K", [5, 6, 8])
def test_map_with_default_priors_works_at_every_k_and_recovers_truth(K):
    """rater's default off-diagonal beta, 3.2 / (K - 1), is below 1 from K = 5: the log-odds mode still exists."""
    sim = simulate_dawid_skene(400, 6, n_categories=K, seed=K)
    fit = em(sim.data, method="map")
    assert fit.converged and fit.mode_scale == "log_odds"
    assert np.all(fit.theta > 0)  # inside the simplex (every pseudo-count + 1 > 1)
    assert np.mean(fit.class_probs.argmax(axis=1) == sim.z) >= 0.9
    np.testing.assert_allclose(fit.pi, sim.pi, atol=0.06)
    # the log-odds mode at K = 5 .. 8 is the simplex mode under pseudo-counts + 1, a fixed point of the MAP M-step
    T = fit.class_probs
    J = sim.data.n_raters
    N = np.asarray(sim.data.counts.T @ T).reshape(J, K, K).transpose(0, 2, 1) + default_beta(K)
    np.testing.assert_allclose(fit.theta, N / N.sum(-1, keepdims=True), atol=1e-5)


def test_mode_scale_is_checked_and_log_odds_can_be_asked_for(anesthesia):
    with pytest.raises(ValueError, match="mode_scale"):
        em(anesthesia, method="map", mode_scale="logit")
    fit = em(anesthesia, method="map", mode_scale="log_odds")  # K = 4: every default pseudo-count >= 1
    assert fit.mode_scale == "log_odds"
    assert em(anesthesia, method="map").mode_scale == "simplex"
    assert em(anesthesia, method="ml").mode_scale is None


# ----------------------------------------------------------------- real data


def test_anesthesia_ml_matches_published_estimates(anesthesia):
    assert anesthesia.has_repeats
    # Dawid & Skene started their EM from the majority vote; the default search finds a mode of
    # higher likelihood (another local maximum of this multimodal likelihood)
    fit = em(anesthesia, model="dawid_skene", method="ml", init="majority")
    assert fit.converged
    assert em(anesthesia, model="dawid_skene", method="ml").log_lik > fit.log_lik + 1
    # rater's (Bayesian) estimates as quoted in the issue: EM's ML is close
    np.testing.assert_allclose(fit.pi, [0.37, 0.41, 0.14, 0.07], atol=0.035)
    # Dawid & Skene (1979) report prevalences 0.40, 0.42, 0.11, 0.07 from the same EM
    np.testing.assert_allclose(fit.pi, [0.40, 0.42, 0.11, 0.07], atol=0.006)
    mp = em(anesthesia, model="dawid_skene", method="map", init="majority")
    np.testing.assert_allclose(mp.pi, [0.37, 0.41, 0.14, 0.07], atol=0.015)
    # the default search finds the mode of highest posterior density (Stan's optimiser's); a mode,
    # not the posterior mean rater reports, and a little further from it
    best = em(anesthesia, model="dawid_skene", method="map")
    assert best.log_posterior > mp.log_posterior + 1
    np.testing.assert_allclose(best.pi, [0.37, 0.41, 0.14, 0.07], atol=0.03)


def test_accessors_use_user_labels(anesthesia):
    fit = em(anesthesia, method="ml")
    pi = fit.point_estimate("pi")
    assert list(pi.index) == list(anesthesia.categories)
    np.testing.assert_allclose(pi.to_numpy(), fit.pi)
    theta = fit.point_estimate("theta")
    assert theta.dims == ("rater", "category", "rating")
    probs = fit.class_probabilities()
    assert probs.shape == (anesthesia.n_units, anesthesia.n_categories)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    z = fit.point_estimate("z")
    assert set(z) <= set(anesthesia.categories)
    with pytest.raises(NotImplementedError, match=r"point estimate.*method='gibbs' or method='mcmc'\)$"):
        fit.posterior_samples()  # the samplers of the family, not NUTS alone


# ------------------------------------------------------- empty rows, errors


def test_empty_theta_rows_are_uniform_and_flagged():
    # rater "c" only rated items known to be class 1: its rows for classes 2 and 3 carry no information
    rows = [(i, r, 1 + (i + (r == "b")) % 3) for i in range(30) for r in ("a", "b")]
    rows += [(i, "c", 1) for i in range(5)]
    df = pd.DataFrame(rows, columns=["item", "rater", "rating"])
    data = RatingData.from_long(df)
    fit = em(data, known={i: 1 for i in range(5)}, compress=False, method="ml")
    c = list(data.rater_labels).index("c")
    assert np.all(np.isfinite(np.log(fit.theta[c, 1:])))
    np.testing.assert_allclose(fit.theta[c, 1:], 1 / 3)
    assert fit.empty_rows[c, 1:].all() and not fit.empty_rows[c, 0]
    assert not fit.empty_rows[:c].any()


def test_soft_majority_vote():
    df = pd.DataFrame({"item": [1, 1, 1, 2], "rater": [1, 2, 3, 1], "rating": ["x", "x", "y", "y"]})
    d = RatingData.from_long(df)
    np.testing.assert_allclose(soft_majority_vote(d.counts, 2), [[2 / 3, 1 / 3], [0, 1]])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"method": "mle"}, "method must be"),
        ({"model": "nonsense"}, "unknown model"),
        ({"model": HierarchicalDawidSkene()}, "not supported by EM"),
        ({"model": "hierarchical"}, "not supported by EM"),
        ({"model": "hierarchical"}, r"models EM fits: 'dawid_skene', .*'item_difficulty', .*'ordinal', .*'community'"),
        ({"tol": -1}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"n_restarts": -1}, "n_restarts"),
        ({"init": "spectral"}, "init must be"),
        ({"init": np.ones((3, 4))}, "shape"),
        ({"compress": "yes"}, "compress"),
    ],
)
def test_bad_arguments_are_refused(anesthesia, kwargs, match):
    with pytest.raises(ValueError, match=match):
        em(anesthesia, **kwargs)


def test_non_convergence_warns(anesthesia):
    with pytest.warns(EMConvergenceWarning, match="did not converge"):
        fit = em(anesthesia, max_iter=3, method="ml")
    assert fit.n_iter == 3 and not fit.converged


def test_inputs_not_modified():
    sim = _simulate("dawid_skene", n_items=200, seed=3)
    df = sim.data.to_long()
    before = df.copy()
    init = np.full((200, 3), 1 / 3)
    init_before = init.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        fit = em(df, init=init, max_iter=20, method="ml")
    pd.testing.assert_frame_equal(df, before)
    np.testing.assert_array_equal(init, init_before)
    assert fit.class_probs.shape == (200, 3)


def test_fast_log_joint_equals_the_kernel(anesthesia):
    from pyrater.inference.em.steps import _log_joint_into
    from pyrater.models.kernels import log_joint

    rng = np.random.default_rng(0)
    K, J = anesthesia.n_categories, anesthesia.n_raters
    log_pi = np.log(rng.dirichlet(np.ones(K)))
    log_theta = np.log(rng.dirichlet(np.ones(K), size=(J, K)))
    out = np.full((anesthesia.n_units, K), np.nan)
    got = _log_joint_into(anesthesia.counts, log_pi, log_theta, out)
    assert got is out
    np.testing.assert_allclose(got, log_joint(anesthesia.counts, log_pi, log_theta), rtol=1e-14)
    shift = rng.normal(size=anesthesia.n_units)
    got = _log_joint_into(anesthesia.counts, log_pi, log_theta, out, shift)
    np.testing.assert_allclose(
        got, log_joint(anesthesia.counts, log_pi, log_theta) - shift[:, None], rtol=1e-13, atol=1e-12
    )


def test_auto_compression_prefilter():
    from pyrater.inference.em.compress import may_compress as _may_compress

    few = simulate_dawid_skene(5000, 3, pi=[0.6, 0.4], theta=np.array([[0.8, 0.2], [0.3, 0.7]]), seed=4)
    many = simulate_dawid_skene(5000, 200, n_categories=5, raters_per_item=5, seed=4)
    assert _may_compress(few.data.counts)
    assert not _may_compress(many.data.counts)
    assert not em(many.data, method="ml").compressed and em(few.data, method="ml").compressed


def test_summary_and_save_load_round_trip(anesthesia, tmp_path):
    import pyrater

    fit = em(anesthesia, method="map")
    text = str(fit.summary())
    assert "EM" in text and "iterations" in text and "alpha" in text
    assert em(anesthesia, method="ml").summary().priors == {}
    back = pyrater.load(fit.save(tmp_path / "fit.nc"))
    np.testing.assert_array_equal(back.theta, fit.theta)
    np.testing.assert_array_equal(back.class_probabilities(), fit.class_probabilities())
    assert "EMFit(Dawid-Skene" in repr(fit)


def test_summary_names_a_class_with_no_items_whose_category_raters_use():
    # items are of class 0 or 1; every rater answers 2 a tenth of the time, whatever the item
    rng = np.random.default_rng(0)
    rows = []
    for i in range(400):
        p = [0.8, 0.1, 0.1] if rng.integers(2) == 0 else [0.1, 0.8, 0.1]
        rows += [(i, j, int(rng.choice(3, p=p))) for j in rng.choice(8, 3, replace=False)]
    data = RatingData.from_long(pd.DataFrame(rows, columns=["item", "rater", "rating"]))
    share = float(np.mean(data.rating == 2))
    # one-coin by ML spreads errors evenly: the best account of the 2s is no item of class 2
    ml = em(data, "one_coin", method="ml")
    assert ml.pi[2] * data.n_items < 0.5
    note = ml.summary().info["classes without items"]
    assert note.startswith(f"2 (pi {ml.pi[2]:.2g}; {100 * share:.0f}% of the ratings)") and "error" in note
    assert "classes without items" in str(ml.summary())
    # with the prior, class 2 keeps a few items: no note
    mode = em(data, "one_coin", method="map")
    assert mode.pi[2] * data.n_items >= 0.5
    assert "classes without items" not in mode.summary().info


def test_shifted_log_sum_exp_equals_exact_and_recovers_bad_guesses(anesthesia):
    from scipy.special import logsumexp

    from pyrater.inference.em.steps import Problem as _Problem
    from pyrater.inference.em.steps import e_step as _e_step
    from pyrater.inference.em.steps import normalise_rows_in_place as _normalise_rows_in_place

    rng = np.random.default_rng(3)
    lj = rng.normal(scale=200.0, size=(1000, 4))
    lj[::7, 1] = -np.inf
    exact_ll = logsumexp(lj, axis=1)
    exact_T = np.exp(lj - exact_ll[:, None])
    guess = exact_ll + rng.normal(scale=5.0, size=1000)
    guess[::10] += 2000.0  # far off: these rows must be flagged
    guess[5::10] -= 2000.0
    out = lj.copy()
    ll, redo = _normalise_rows_in_place(out, guess)
    assert set(np.arange(0, 1000, 10)) | set(np.arange(5, 1000, 10)) == set(redo)
    keep = np.setdiff1d(np.arange(1000), redo)
    np.testing.assert_allclose(ll[keep], exact_ll[keep], rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(out[keep], exact_T[keep], rtol=1e-12, atol=1e-300)
    # the E-step redoes the flagged rows with the kernel
    K, J = anesthesia.n_categories, anesthesia.n_raters
    pi = rng.dirichlet(np.ones(K))
    theta = rng.dirichlet(np.ones(K), size=(J, K))
    prob = _Problem(anesthesia.counts, np.ones(anesthesia.n_units), True, None, J, K)
    T0, ll0, tot0 = _e_step(prob, pi, theta)
    bad = ll0.copy()
    bad[::3] -= 1e4
    T1, ll1, tot1 = _e_step(prob, pi, theta, out=np.empty_like(T0), shift=bad)
    np.testing.assert_allclose(T1, T0, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ll1, ll0, rtol=1e-13)
    assert tot1 == pytest.approx(tot0, rel=1e-13)


def test_wide_input_with_an_unrated_item():
    wide = pd.DataFrame(
        {"r1": [1, 2, 1, 2, np.nan, 1], "r2": [1, 2, 2, 2, np.nan, 1], "r3": [1, 1, 1, 2, np.nan, 2]},
        index=pd.Index(list("abcdef"), name="item"),
    )
    with pytest.warns(UserWarning, match="1 item has no rating"):
        fit = em(wide, data_format="wide", method="map")
    probs = fit.class_probabilities()
    # an item nobody rated is dropped, with a warning (it would only get the prevalence)
    assert list(probs.index) == list("abcdf")


def test_ml_classes_are_aligned_with_the_ratings_whatever_the_start():
    """ML Dawid-Skene is label-symmetric: a start with permuted classes must not
    come back with permuted classes (the Hungarian relabelling undoes it)."""
    from pyrater.models import simulate_dawid_skene

    K = 3
    theta = np.full((6, K, K), 0.1)
    theta[:, np.arange(K), np.arange(K)] = 0.8
    sim = simulate_dawid_skene(300, 6, K, pi=np.array([0.5, 0.3, 0.2]), theta=theta, seed=3)
    ref = pyrater.em(sim.data, method="ml", tol=1e-13, max_iter=5000)
    shares = ref.class_probabilities().to_numpy()
    perm = np.array([2, 0, 1])
    swapped = pyrater.em(sim.data, method="ml", init=shares[:, perm], tol=1e-13, max_iter=5000)
    np.testing.assert_allclose(swapped.pi, ref.pi, atol=1e-6)
    np.testing.assert_allclose(swapped.theta, ref.theta, atol=1e-5)
    assert (swapped.point_estimate("z").to_numpy() == ref.point_estimate("z").to_numpy()).all()
    np.testing.assert_allclose(ref.pi, sim.pi, atol=0.08)
    # with known items the labels are anchored by them, and nothing is relabelled
    known = {lab: sim.data.categories[z] for lab, z in zip(sim.data.unit_labels[:30], sim.z[:30])}
    anchored = pyrater.em(sim.data, method="ml", known=known)
    np.testing.assert_allclose(anchored.pi, sim.pi, atol=0.08)


# ----------------------------------------------- stopping rule and search for the best mode


def _flat_ml_case():
    """Weak raters, two ratings per item: a flat likelihood on which EM creeps."""
    K, J = 3, 8
    rng = np.random.default_rng(6)
    beta = np.ones((K, K))
    np.fill_diagonal(beta, 3.0)
    theta = np.stack([np.stack([rng.dirichlet(beta[k]) for k in range(K)]) for _ in range(J)])
    return simulate_dawid_skene(300, J, pi=np.full(K, 1 / K), theta=theta, raters_per_item=2, seed=6)


def test_convergence_is_judged_on_the_parameters_on_a_flat_likelihood():
    data = _flat_ml_case().data
    # the long-run answer: iterate until the parameters stop moving at 1e-12
    ref = em(data, init="majority", tol=0.0, param_tol=1e-12, max_iter=50_000, method="ml")
    assert ref.converged
    # the objective-only rule (the old behaviour) claims convergence far from it
    old = em(data, init="majority", param_tol=np.inf, method="ml")
    assert old.converged and np.abs(old.class_probs - ref.class_probs).max() > 0.02
    fit = em(data, init="majority", method="ml")
    assert fit.converged and fit.n_iter > 2 * old.n_iter
    assert np.abs(fit.class_probs - ref.class_probs).max() < 1e-4
    np.testing.assert_allclose(fit.theta, ref.theta, atol=1e-4)
    # the result says how convergence was judged, with the last changes
    conv = fit.convergence
    assert "objective" in conv["rule"] and "parameter" in conv["rule"] and "class probability" in conv["rule"]
    assert conv["tol"] == 1e-8 and conv["param_tol"] == 1e-6
    assert conv["objective_change"] <= 1e-8
    assert conv["param_change"] <= 1e-6 and conv["param_distance"] <= 1e-6 and conv["class_change"] <= 1e-6
    assert "convergence rule" in fit.summary().info


def test_too_few_iterations_for_the_parameters_warn(anesthesia):
    with pytest.warns(EMConvergenceWarning, match="parameter change"):
        fit = em(_flat_ml_case().data, init="majority", max_iter=300, method="ml")
    assert not fit.converged
    with pytest.raises(ValueError, match="param_tol"):
        em(anesthesia, param_tol=-1, method="ml")


def _log_posterior(data: RatingData, pi: np.ndarray, theta: np.ndarray) -> float:
    """Log-likelihood plus the full log prior density of rater's Dawid-Skene priors (scipy.stats)."""
    from scipy.special import logsumexp

    from pyrater.models.kernels import log_joint

    pri = DawidSkene().priors(data.n_categories, data.n_raters)
    ll = logsumexp(log_joint(data.counts, np.log(pi), np.log(theta)), axis=1).sum()
    lp = stats.dirichlet.logpdf(pi, pri["alpha"])
    lp += sum(
        stats.dirichlet.logpdf(theta[j, k], pri["beta"][j, k])
        for j in range(data.n_raters)
        for k in range(data.n_categories)
    )
    return float(ll + lp)


def test_default_map_search_finds_the_best_mode_em_finds(anesthesia):
    fit = em(anesthesia, method="map")
    assert fit.converged and fit.start.startswith("search")
    assert fit.start.endswith("rater 1's ratings")  # the rater's label as the user wrote it (not np.int64(1))
    assert fit.log_posterior == pytest.approx(_log_posterior(anesthesia, fit.pi, fit.theta), abs=1e-8)
    # better than the majority-vote start and than 20 random restarts (all of their modes)
    many = em(anesthesia, method="map", init="majority", n_restarts=20, seed=3)
    assert fit.log_posterior > many.restart_objectives[0] + 1.0
    assert fit.log_posterior >= many.restart_objectives.max() - 1e-6
    # reproducible without a seed; pyrater.fit's EM route uses the same search
    assert em(anesthesia, method="map").log_posterior == fit.log_posterior
    assert pyrater.fit(anesthesia, method="em").log_posterior == pytest.approx(fit.log_posterior, abs=1e-9)


def test_search_passes_over_starts_whose_objective_is_nan():
    """A start whose short run ends at NaN is never kept over one with a finite objective; all NaN keeps the first."""
    from pyrater.inference.em.start import search

    values = {"a": np.nan, "b": -10.0, "c": -3.0, "d": np.nan}

    def run_from(T0, n_iter, x=None):
        return {"trace": np.array([values[T0]]), "converged": True, "T": T0}

    starts = [(k, k) for k in values]
    assert search(run_from, starts, max_iter=5)["T"] == "c"
    values.update(b=np.nan, c=np.nan)
    assert search(run_from, starts, max_iter=5)["T"] == "a"  # no StopIteration


@pytest.mark.stan
def test_default_map_search_reaches_stans_optimum(anesthesia):
    opt = pyrater.fit(anesthesia, "dawid_skene", method="optimize", seed=1, progress=False)
    # CmdStan writes 6 significant digits: renormalise onto the simplex
    pi, theta = opt.point_estimate("pi").to_numpy(), opt.point_estimate("theta").to_numpy()
    at_stan = _log_posterior(anesthesia, pi / pi.sum(), theta / theta.sum(axis=-1, keepdims=True))
    fit = pyrater.fit(anesthesia, "dawid_skene", method="em", seed=1)
    assert fit.log_posterior >= at_stan - 1e-3
    assert fit.log_posterior == pytest.approx(at_stan, abs=1e-3)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_iter": 0},
        {"max_iter": True},
        {"tol": -1.0},
        {"tol": "x"},
        {"param_tol": -1e-6},
        {"param_tol": True},
        {"param_tol": float("nan")},
    ],
)
def test_stopping_arguments_are_checked_once_for_both_em_routes(bad):
    from pyrater.inference.em.convergence import check_stopping as _check_stopping

    args = {"max_iter": 10, "tol": 1e-8, "param_tol": 1e-6, **bad}
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        _check_stopping(**args)
    sim = pyrater.simulate("dawid_skene", n_items=30, n_raters=3, n_categories=2, seed=1)
    with pytest.raises(ValueError, match=name):
        pyrater.em(sim.data, **bad)
    assert _check_stopping(5, 0, 0) == (5, 0.0, 0.0)  # zero tolerances: run to max_iter or an exact fixed point


def test_non_convergence_warning_names_the_way_out():
    import re

    sim = _simulate("dawid_skene", n_items=200, seed=3)
    df = sim.data.to_long()
    rater = df["rater"].iloc[0]
    top = sim.data.categories[-1]
    df = df[~((df["rater"] == rater) & (df["rating"] == top))]  # one rater never gives the top rating
    with pytest.warns(EMConvergenceWarning, match="lies on the boundary") as rec:
        fit = em(df, method="ml", max_iter=3)
    n_zero = int(re.search(r"(\d+) of (\d+) error-matrix entries", str(rec[0].message)).group(1))
    assert n_zero == np.count_nonzero(fit.theta < 1e-8) > 0 and "method='map'" in str(rec[0].message)
    # the posterior mode is inside: the advice is more iterations
    with pytest.warns(EMConvergenceWarning, match="increase max_iter$"):
        em(df, method="map", max_iter=3)


# ----------------------------------------------------------------- SQUAREM


def _sparse_slow_data():
    """Many raters with few ratings each: plain ML EM crawls here (theta rows creep towards the boundary)."""
    return simulate_dawid_skene(500, 40, n_categories=3, raters_per_item=3, seed=12)


@pytest.mark.parametrize(
    "model, method",
    [
        ("dawid_skene", "ml"),
        ("dawid_skene", "map"),
        ("homogeneous", "ml"),
        ("class_conditional", "map"),
        ("one_coin", "ml"),
    ],
)
def test_squarem_reaches_plain_ems_fixed_point_and_never_lowers_the_objective(model, method):
    # an interior optimum (every rater rates every item): one fixed point for both to reach
    sim = simulate_dawid_skene(800, 5, n_categories=3, pi=PI3, theta=_theta_ds(5, 3, seed=3), seed=5)
    start = soft_majority_vote(sim.data.counts, 3)
    plain = em(sim.data, model, method, init=start, acceleration="none", tol=1e-12, param_tol=1e-8)
    fast = em(sim.data, model, method, init=start, acceleration="squarem", tol=1e-12, param_tol=1e-8)
    assert fast.converged and plain.converged
    trace = fast.log_lik_trace
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))  # the objective never decreases
    assert trace[-1] == pytest.approx(plain.log_lik_trace[-1], abs=1e-7)
    np.testing.assert_allclose(fast.pi, plain.pi, atol=1e-6)
    np.testing.assert_allclose(fast.theta, plain.theta, atol=1e-6)
    np.testing.assert_allclose(fast.class_probs, plain.class_probs, atol=1e-6)
    if model == "one_coin":  # the constrained structure survives the log-scale jumps
        off = ~np.eye(3, dtype=bool)
        np.testing.assert_allclose(fast.theta[:, off], fast.theta[:, off][:, :1] * np.ones(6), rtol=1e-10)


def test_squarem_is_faster_where_plain_em_crawls():
    """Sparse raters: plain ML EM creeps along a flat ridge; SQUAREM gets as high in far fewer E-steps."""
    sim = _sparse_slow_data()
    start = soft_majority_vote(sim.data.counts, 3)
    plain = em(sim.data, method="ml", init=start, acceleration="none")
    fast = em(sim.data, method="ml", init=start)
    assert fast.converged and fast.convergence["squarem_jumps_kept"] > 0
    assert np.all(np.diff(fast.log_lik_trace) >= -1e-10 * np.abs(fast.log_lik_trace[1:]))
    assert fast.log_lik >= plain.log_lik - 1e-6
    assert fast.convergence["e_steps"] < 0.5 * plain.convergence["e_steps"]
    # plain EM from SQUAREM's estimate stays there (a fixed point of plain EM by its own rule)
    again = em(sim.data, method="ml", init=fast.class_probs, acceleration="none")
    assert again.log_lik == pytest.approx(fast.log_lik, abs=1e-6)


def test_acceleration_is_checked_and_plain_for_other_models(anesthesia):
    with pytest.raises(ValueError, match="acceleration must be"):
        em(anesthesia, acceleration="fast", method="ml")
    with pytest.raises(ValueError, match="MACE model is fitted by plain EM"):
        em(anesthesia, model="mace", acceleration="squarem", method="ml")  # MACE: not a function of pi and theta alone
    fit = em(anesthesia, model="mace", method="map")  # "auto": plain EM for MACE
    assert "squarem_cycles" not in fit.convergence
    assert "squarem_cycles" in em(anesthesia, method="ml").convergence
