"""pyrater.contrib.lcm on simulated data: recovery, mean-field fixed point, comparison models, API."""

from __future__ import annotations

import dataclasses
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pytest

from pyrater.contrib.lcm import (
    LatentGraphLCM,
    LCMParams,
    LCMPriors,
    LCMResult,
    auc,
    default_truth,
    exact_posterior,
    simulate_lcm,
)
from pyrater.contrib.lcm import kernels as kn

SEEDS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def recovery():
    """K = 5, 500 cases, 500 controls, silver standard on a quarter of the cases; 4 data sets."""
    truth = default_truth(5)
    out = []
    for seed in SEEDS:
        sim = simulate_lcm(500, 500, params=truth, silver_fraction=0.25, seed=seed)
        fit = LatentGraphLCM().fit(sim.M, sim.case, sim.silver)
        exact = exact_posterior(sim.M, sim.case, sim.silver, params=truth)
        out.append((sim, fit, exact))
    return truth, out


def test_fits_converge(recovery):
    _, runs = recovery
    for _, fit, _ in runs:
        assert fit.converged and fit.n_iter < 500
        assert fit.trace["max_change"].iloc[-1] < 1e-6


def test_q_auc_is_within_002_of_exact_posterior_at_truth(recovery):
    _, runs = recovery
    for sim, fit, exact in runs:
        L = sim.L_cases.to_numpy()
        a_q, a_exact = auc(L, fit.q_L.to_numpy()), auc(L, exact.to_numpy())
        assert a_exact > 0.9
        assert a_q > a_exact - 0.02


def test_rates_are_recovered(recovery):
    truth, runs = recovery
    g_err = [np.abs(fit.summary()["gamma_mean"].to_numpy() - truth.gamma).mean() for _, fit, _ in runs]
    d_err = [np.abs(fit.summary()["delta_mean"].to_numpy() - truth.delta).mean() for _, fit, _ in runs]
    assert np.mean(g_err) < 0.05 and max(g_err) < 0.07
    assert max(d_err) < 0.03  # delta is pinned down by the controls


def test_true_edges_get_the_highest_edge_probabilities(recovery):
    truth, runs = recovery
    iu = np.triu_indices(5, 1)
    true_edge = truth.D[iu] == 1
    for _, fit, _ in runs:
        P = fit.edge_prob.to_numpy()[iu]
        assert P[true_edge].min() > 0.9
        assert P[~true_edge].max() < 0.1
        top = fit.edges().head(int(true_edge.sum()))
        assert set(zip(top.target, top.target2)) == {("T1", "T2"), ("T3", "T4")}
        assert fit.rho_summary()["lo"] > 0


def test_graph_beats_the_model_without_graph(recovery):
    _, runs = recovery
    for sim, fit, _ in runs:
        L = sim.L_cases.to_numpy()
        fit0 = LatentGraphLCM(graph=False).fit(sim.M, sim.case, sim.silver)
        assert auc(L, fit.q_array) > auc(L, fit0.q_array)


# --------------------------------------------------------- mean-field fixed point
def _weak_truth(K: int = 5) -> LCMParams:
    t = default_truth(K, rho=0.5)
    return t


def test_fixed_point_solves_the_mean_field_equations_and_is_near_exact_when_weakly_coupled():
    truth = _weak_truth()
    sim = simulate_lcm(500, 500, params=truth, seed=7)
    fit = LatentGraphLCM(tol=1e-13, max_iter=2000).fit(sim.M, sim.case, sim.silver, fixed=truth)
    assert fit.converged and fit.fixed
    # the mean-field equations, written out independently of the fitting loop
    c = sim.case.to_numpy() == 1
    Mc = sim.M.to_numpy()[c]
    ss = sim.silver.to_numpy()[c]
    g, dl, e = truth.gamma, truth.delta, truth.eta
    base = Mc * np.log(g / dl) + (1 - Mc) * np.log((1 - g) / (1 - dl))
    base = base + np.where(ss == 0, np.log(1 - e), 0.0)
    q = fit.q_array
    target = 1 / (1 + np.exp(-(base + truth.theta + truth.rho * q @ truth.D)))
    target = np.where(ss == 1, 1.0, target)
    assert np.max(np.abs(q - target)) < 1e-8
    assert kn.mean_field_residual(q, base, truth.theta, truth.rho, truth.D, ss == 1) < 1e-8
    exact = exact_posterior(sim.M, sim.case, sim.silver, params=truth).to_numpy()
    assert np.max(np.abs(q - exact)) < 0.05


def test_mean_field_error_grows_with_coupling():
    """Documented limitation: with rho = 2.5 the mean-field marginals drift from the exact ones."""
    strong = default_truth(5, rho=2.5)
    sim = simulate_lcm(500, 500, params=strong, seed=7)
    fit = LatentGraphLCM(tol=1e-12).fit(sim.M, sim.case, sim.silver, fixed=strong)
    exact = exact_posterior(sim.M, sim.case, sim.silver, params=strong).to_numpy()
    weak = _weak_truth()
    simw = simulate_lcm(500, 500, params=weak, seed=7)
    fitw = LatentGraphLCM(tol=1e-12).fit(simw.M, simw.case, simw.silver, fixed=weak)
    exactw = exact_posterior(simw.M, simw.case, simw.silver, params=weak).to_numpy()
    assert np.abs(fit.q_array - exact).max() > np.abs(fitw.q_array - exactw).max()


# ------------------------------------------------------------ without the graph
def test_model_without_graph_is_k_separate_two_class_models():
    sim = simulate_lcm(300, 300, K=4, seed=4)
    joint = LatentGraphLCM(graph=False, tol=1e-10).fit(sim.M, sim.case, sim.silver)
    assert joint.rho_mean == 0 and not joint.edge_prob.to_numpy().any()
    for k, name in enumerate(sim.M.columns):
        single = LatentGraphLCM(graph=False, tol=1e-10).fit(sim.M[[name]], sim.case, sim.silver[[name]])
        np.testing.assert_allclose(single.q_array[:, 0], joint.q_array[:, k], atol=1e-7)
        np.testing.assert_allclose(single.gamma_ab[0], joint.gamma_ab[k], rtol=1e-7)
        assert single.theta_mean[0] == pytest.approx(joint.theta_mean[k], abs=1e-6)


def test_poisson_neighbour_variance_finds_the_same_graph_but_shrinks_rho():
    """The specification's Poisson approximation (Var N = E N) overstates the variance of the
    neighbour count (a Bernoulli sum), which inflates the curvature penalty in q(rho): same
    graph, but a smaller rho and slightly worse q(L) than the exact mean-field variance."""
    sim = simulate_lcm(400, 400, K=4, seed=8)
    L = sim.L_cases.to_numpy()
    a = LatentGraphLCM().fit(sim.M, sim.case, sim.silver)
    b = LatentGraphLCM(neighbour_variance="poisson").fit(sim.M, sim.case, sim.silver)
    assert b.converged
    assert np.array_equal(np.round(a.edge_prob_array), np.round(b.edge_prob_array))
    assert 0 < b.rho_mean < a.rho_mean
    assert auc(L, a.q_array) > auc(L, b.q_array)


# --------------------------------------------------------- weak identification
def test_without_silver_standard_gamma_and_theta_follow_the_prior():
    """Documented: without silver-standard data, a case's positive rate pins down only a
    combination of prevalence (theta) and TPR (gamma).  Changing the gamma prior then moves
    gamma and theta far more than when a quarter of the cases have a silver standard."""
    sim = simulate_lcm(500, 500, params=default_truth(5), seed=0)
    shifts = {}
    for label, silver in (("silver", sim.silver), ("none", None)):
        fits = []
        for prior in ((2.0, 1.0), (4.0, 4.0)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # the no-silver fits converge slowly
                fits.append(LatentGraphLCM(priors=LCMPriors(gamma=prior), max_iter=300).fit(sim.M, sim.case, silver))
        s0, s1 = fits[0].summary(), fits[1].summary()
        shifts[label] = (
            np.abs(s0.gamma_mean - s1.gamma_mean).to_numpy(),
            np.abs(s0.theta_mean - s1.theta_mean).to_numpy(),
        )
    g_none, th_none = shifts["none"]
    g_ss, th_ss = shifts["silver"]
    assert np.median(g_none) > 0.15 and g_none.max() > 0.25
    assert np.median(g_ss) < 0.06 and np.median(g_none) > 3 * np.median(g_ss)
    assert th_none.max() > 1.0 and th_ss.max() < 0.3


# --------------------------------------------------------------------- API
@pytest.fixture(scope="module")
def small_fit():
    sim = simulate_lcm(200, 150, K=4, seed=3, targets=["RSV", "HMPV", "Flu", "PIV"])
    M = sim.M.set_axis([f"s{i}" for i in range(len(sim.M))])
    case = sim.case.set_axis(M.index)
    silver = sim.silver.set_axis(M.index)
    return (M, case, silver), LatentGraphLCM().fit(M, case, silver)


def test_result_tables_use_user_labels(small_fit):
    (M, case, _), fit = small_fit
    assert isinstance(fit, LCMResult)
    assert list(fit.q_L.columns) == ["RSV", "HMPV", "Flu", "PIV"]
    assert list(fit.q_L.index) == list(M.index[case == 1])
    E = fit.edge_prob
    assert list(E.index) == list(E.columns) == ["RSV", "HMPV", "Flu", "PIV"]
    np.testing.assert_array_equal(E.to_numpy(), E.to_numpy().T)
    assert np.all(np.diag(E.to_numpy()) == 0)
    edges = fit.edges()
    assert len(edges) == 6 and edges.edge_prob.is_monotonic_decreasing
    assert "LCMResult(with graph, 200 cases, 150 controls, K=4, converged" in repr(fit)


def test_summary_intervals(small_fit):
    _, fit = small_fit
    s = fit.summary()
    for name in ("gamma", "delta", "eta", "theta"):
        assert np.all(s[f"{name}_lo"] < s[f"{name}_mean"]) and np.all(s[f"{name}_mean"] < s[f"{name}_hi"])
    wide = fit.summary(prob=0.99)
    assert np.all(wide.gamma_hi - wide.gamma_lo > s.gamma_hi - s.gamma_lo)
    r = fit.rho_summary()
    assert r["lo"] < r["mean"] < r["hi"] and r["sd"] > 0
    with pytest.raises(ValueError, match="prob must lie in"):
        fit.summary(prob=1.5)
    p = fit.point_estimate()
    np.testing.assert_allclose(p.gamma, s.gamma_mean)


def test_result_is_frozen_and_reproducible(small_fit):
    (M, case, silver), fit = small_fit
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.rho_mean = 3.0
    with pytest.raises(ValueError):
        fit.q_array[0, 0] = 0.5
    again = LatentGraphLCM().fit(M, case, silver)
    np.testing.assert_array_equal(again.q_array, fit.q_array)
    a = LatentGraphLCM().fit(M, case, silver, seed=1)
    b = LatentGraphLCM().fit(M, case, silver, seed=1)
    np.testing.assert_array_equal(a.q_array, b.q_array)


def test_non_convergence_warns_and_is_recorded(small_fit):
    (M, case, silver), _ = small_fit
    with pytest.warns(RuntimeWarning, match="did not converge in 3 iterations"):
        fit = LatentGraphLCM(max_iter=3).fit(M, case, silver)
    assert not fit.converged and len(fit.trace) == 3 and "NOT converged" in repr(fit)


def test_fixed_parameters_are_checked(small_fit):
    (M, case, silver), _ = small_fit
    with pytest.raises(ValueError, match="K=5 targets but the data have 4"):
        LatentGraphLCM().fit(M, case, silver, fixed=default_truth(5))
    with pytest.raises(ValueError, match="init_q must have shape"):
        LatentGraphLCM().fit(M, case, silver, init_q=np.zeros((3, 4)))


def test_plots(small_fit):
    _, fit = small_fit
    ax = fit.plot_graph()
    assert ax.get_title().startswith("estimated graph")
    assert len(ax.lines) == 6  # every edge drawn, width by probability
    ax2 = fit.plot_rates(truth=None)
    assert [t.get_text() for t in ax2.get_xticklabels()] == ["RSV", "HMPV", "Flu", "PIV"]
    plt.close("all")
