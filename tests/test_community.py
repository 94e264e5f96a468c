"""The community Dawid-Skene family (CBCC): structure, bad input, Gibbs, EM, Stan, choosing L, the Fit API.

The Stan program's density against brute-force enumeration of the raters'
communities is checked with the other programs' (``test_stan_programs.py``,
``test_stan_full_density.py``).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import logsumexp

import pyrater
from pyrater import CommunityDawidSkene, RatingData, em, simulate_community
from pyrater.inference.gibbs import gibbs
from pyrater.inference.gibbs.priors import conjugate_prior, log_prior_density
from pyrater.models.community import sort_communities
from pyrater.models.kernels import class_log_posterior
from test_fitfile import assert_same_fit

K = 3
PI = np.array([0.5, 0.3, 0.2])
#: two clear communities: diligent raters (about 0.9 right) and near-spammers (0.5 right of 3)
M2 = np.array(
    [
        [[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]],
        [[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]],
    ]
)


def _two_communities(n_items: int, n_raters: int, seed: int, raters_per_item: int = 4, s: float = 60.0):
    return simulate_community(
        n_items, n_raters, n_categories=K, pi=PI, m=M2, s=s, rho=[0.5, 0.5], raters_per_item=raters_per_item, seed=seed
    )


def _dirichlet_density(theta_j: np.ndarray, m: np.ndarray, s: np.ndarray) -> float:
    """sum_k log Dirichlet(theta_j[k] | 1 + s[k] m[k]) with scipy."""
    return float(sum(stats.dirichlet.logpdf(theta_j[k], 1 + s[k] * m[k]) for k in range(theta_j.shape[0])))


# ------------------------------------------------------------------ structure and input
def test_simulator_draws_each_rater_around_its_communitys_rows():
    s = np.array([[40.0, 10.0, 20.0], [15.0, 30.0, 5.0]])
    sim = simulate_community(20, 4000, n_categories=K, pi=PI, m=M2, s=s, rho=[0.3, 0.7], raters_per_item=1, seed=2)
    assert sim.model == "community" and sim.theta.shape == (4000, K, K)
    c = sim.params["community"]
    assert c.shape == (4000,) and abs(np.mean(c == 0) - 0.3) < 4 * np.sqrt(0.21 / 4000)
    for l in range(2):
        members = sim.theta[c == l]
        for k in range(K):
            a = 1 + s[l, k] * M2[l, k]
            mean = a / a.sum()
            sd = np.sqrt(mean * (1 - mean) / (a.sum() + 1))
            assert np.all(np.abs(members[:, k].mean(0) - mean) < 4.5 * sd / np.sqrt(len(members)))
    drawn = pyrater.simulate(CommunityDawidSkene(n_communities=4, s_shape=5, s_rate=1), 10, 3, n_categories=K, seed=1)
    assert drawn.params["m"].shape == (4, K, K) and drawn.params["s"].shape == (4, K)
    assert drawn.params["rho"].shape == (4,) and drawn.params["community"].max() < 4
    fixed = simulate_community(10, 3, n_categories=K, m=M2, community=[1, 1, 0], seed=1)
    np.testing.assert_array_equal(fixed.params["community"], [1, 1, 0])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: simulate_community(10, 3, n_categories=K, m=np.ones((2, 2, 2)) / 2), "m must have shape"),
        (lambda: simulate_community(10, 3, n_categories=K, m=np.full((2, K, K), 0.5)), "m"),
        (lambda: simulate_community(10, 3, n_categories=K, n_communities=2, s=-1.0), "s must be > 0"),
        (lambda: simulate_community(10, 3, n_categories=K, m=M2, rho=[0.2, 0.3, 0.5]), "differs between"),
        (lambda: simulate_community(10, 3, n_categories=K, m=M2, community=[0, 2, 1]), "community must be"),
        (lambda: simulate_community(10, 3, n_categories=K, m=M2, rho=[0.2, 0.7]), "rho"),
        (lambda: CommunityDawidSkene(n_communities=0), "n_communities must be an integer >= 1"),
        (lambda: CommunityDawidSkene(n_communities=2.5), "n_communities must be an integer >= 1"),
        (lambda: CommunityDawidSkene(s_shape=1.0).priors(K, 3), "s_shape must be > 1"),
        (lambda: CommunityDawidSkene(rho_alpha=0).priors(K, 3), "rho_alpha must be > 0"),
        (lambda: CommunityDawidSkene(beta=np.ones((2, 2))).priors(K, 3), "beta must have shape"),
        (lambda: CommunityDawidSkene(em_update="mean"), "em_update must be"),
    ],
)
def test_bad_input_is_refused_with_the_arguments_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.filterwarnings("ignore:MCMC problems")
@pytest.mark.parametrize("method", ["em", "gibbs"])
def test_more_communities_than_raters_is_said(method):
    sim = simulate_community(60, 3, n_categories=2, n_communities=2, seed=4)
    kwargs = {"chains": 2, "warmup": 20, "draws": 20, "progress": False} if method == "gibbs" else {}
    with pytest.warns(UserWarning, match=r"n_communities=5 is more than the 3 raters: at least 2 communities will"):
        pyrater.fit(sim.data, CommunityDawidSkene(n_communities=5), method=method, seed=1, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # as many communities as raters: nothing to say
        pyrater.fit(sim.data, CommunityDawidSkene(n_communities=3), method=method, seed=1, **kwargs)


def test_em_ml_is_refused_and_map_needs_priors_of_at_least_one():
    sim = simulate_community(30, 3, n_categories=K, seed=1)
    with pytest.raises(ValueError, match="method='ml' is not available for the community model"):
        em(sim.data, "community", method="ml")
    # on the simplex a pseudo-count below 1 has no mode; by default EM takes the log-odds mode instead
    with pytest.raises(ValueError, match="rho_alpha"):
        em(sim.data, CommunityDawidSkene(rho_alpha=0.5), method="map", mode_scale="simplex")
    with pytest.raises(ValueError, match="beta"):
        em(sim.data, CommunityDawidSkene(beta=np.full((K, K), 0.5)), method="map", mode_scale="simplex")
    for model in (CommunityDawidSkene(rho_alpha=0.5), CommunityDawidSkene(beta=np.full((K, K), 0.5))):
        assert em(sim.data, model, method="map", progress=False).mode_scale == "log_odds"


def test_registered_with_every_method_and_auto_by_its_samplers_only():
    from pyrater.checking.choose import default_candidates
    from pyrater.inference.stan.data import STAN_MODEL_NAMES

    assert "community" in pyrater.models.MODEL_NAMES and "community" in STAN_MODEL_NAMES
    assert pyrater.get_model("community").methods == ("mcmc", "optimize", "pathfinder", "em", "gibbs")
    # the joint mode over-shrinks the raters towards their community's rows (module notes)
    assert "community" not in default_candidates("em") and "community" in default_candidates("gibbs")
    # a model rebuilt from its resolved priors (as "auto" does) is the same model
    pri = CommunityDawidSkene(n_communities=2).priors(K, 4)
    assert CommunityDawidSkene(**{k: np.asarray(v, dtype=float) for k, v in pri.items()}).L == 2


def test_sorting_relabels_every_parameter_alike():
    rng = np.random.default_rng(0)
    m = rng.dirichlet(np.ones(K), size=(5, 3, K))  # 5 draws, L = 3
    s = rng.uniform(1, 9, size=(5, 3, K))
    rho = rng.dirichlet(np.ones(3), size=5)
    prob = rng.dirichlet(np.ones(3), size=(5, 4))
    c = rng.integers(0, 3, size=(5, 4))
    out = sort_communities({"m": m, "s": s, "rho": rho, "community_prob": prob, "community": c})
    diag = np.diagonal(out["m"], axis1=-2, axis2=-1).mean(-1)
    assert np.all(np.diff(diag, axis=-1) <= 0)
    for t in range(5):
        for l in range(3):  # new community l is old community o
            o = int(np.flatnonzero(np.all(m[t] == out["m"][t, l], axis=(1, 2)))[0])
            np.testing.assert_array_equal(out["s"][t, l], s[t, o])
            assert out["rho"][t, l] == rho[t, o]
            np.testing.assert_array_equal(out["community_prob"][t, :, l], prob[t, :, o])
            np.testing.assert_array_equal(out["community"][t] == l, c[t] == o)


# ------------------------------------------------------------------ Gibbs
def test_gibbs_draws_log_lik_and_lp_are_the_models():
    """Each kept draw's log_lik is the likelihood, lp the log posterior with the communities enumerated."""
    sim = simulate_community(100, 4, n_categories=K, n_communities=2, raters_per_item=3, seed=4)
    model = CommunityDawidSkene(n_communities=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = gibbs(sim.data, model, chains=2, warmup=20, draws=30, seed=3, progress=False)
    assert f.draws["m"].shape == (2, 30, 2, K, K) and f.draws["s"].shape == (2, 30, 2, K)
    assert f.draws["rho"].shape == (2, 30, 2) and f.draws["community_prob"].shape == (2, 30, 4, 2)
    np.testing.assert_allclose(np.asarray(f.draws["m"]).sum(-1), 1.0)
    np.testing.assert_allclose(np.asarray(f.draws["community_prob"]).sum(-1), 1.0)
    diag = np.diagonal(np.asarray(f.draws["m"]), axis1=-2, axis2=-1).mean(-1)
    assert np.all(diag[..., 0] >= diag[..., 1])  # reported sorted
    pi, theta = f._draws()
    m = np.asarray(f.draws["m"]).reshape(-1, 2, K, K)
    s = np.asarray(f.draws["s"]).reshape(-1, 2, K)
    rho = np.asarray(f.draws["rho"]).reshape(-1, 2)
    ll = np.asarray(f.draws["log_lik"]).reshape(pi.shape[0], -1)
    lp = np.asarray(f.sample_stats["lp"]).reshape(-1)
    pri = model.priors(K, 4)
    for t in (0, 17, pi.shape[0] - 1):
        _, ref = class_log_posterior(sim.data.counts, np.log(pi[t]), np.log(theta[t]))
        np.testing.assert_allclose(ll[t], ref, rtol=1e-10)
        log_prior = stats.dirichlet.logpdf(pi[t], pri["alpha"]) + stats.dirichlet.logpdf(rho[t], [2.0, 2.0])
        log_prior += sum(stats.dirichlet.logpdf(m[t, l, k], pri["beta"][k]) for l in range(2) for k in range(K))
        log_prior += stats.gamma.logpdf(s[t], 2.0, scale=10.0).sum()
        dens = [
            [np.log(rho[t, l]) + _dirichlet_density(theta[t, j], m[t, l], s[t, l]) for l in range(2)] for j in range(4)
        ]
        log_prior += logsumexp([sum(dens[j][c[j]] for j in range(4)) for c in itertools.product(range(2), repeat=4)])
        np.testing.assert_allclose(lp[t], ref.sum() + log_prior, rtol=1e-10)


@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")
def test_gibbs_recovers_the_communities_and_the_raters():
    """Two clear communities: every rater's community, the community rows and the raters' matrices recovered."""
    cover_m, cover_theta = [], []
    for seed in range(2):
        sim = _two_communities(800, 30, seed)
        f = gibbs(sim.data, CommunityDawidSkene(n_communities=2), chains=2, warmup=300, draws=400, seed=seed,
                  log_lik=False, progress=False)  # fmt: skip
        prob = np.asarray(f.draws["community_prob"]).mean((0, 1))  # Rao-Blackwellised
        truth = sim.params["community"]
        assert np.all(prob[np.arange(30), truth] > 0.9), prob[np.arange(30), truth].min()
        md = np.asarray(f.draws["m"]).reshape(-1, 2, K, K)
        lo, hi = np.percentile(md, [1, 99], axis=0)
        cover_m.append(np.mean((lo <= M2) & (M2 <= hi)))
        th = np.asarray(f.draws["theta"]).reshape(-1, 30, K, K)
        lo, hi = np.percentile(th, [5, 95], axis=0)
        cover_theta.append(np.mean((lo <= sim.theta) & (sim.theta <= hi)))
        acc = (f.point_estimate("z").to_numpy() == sim.data.categories[sim.z]).mean()
        assert acc > 0.8  # four ratings per item, half of them from near-spammers
    assert np.mean(cover_m) >= 0.8, cover_m
    assert np.mean(cover_theta) >= 0.8, cover_theta


def test_gibbs_prior_density_of_the_kernel_state_matches_enumeration():
    rng = np.random.default_rng(3)
    J, L = 3, 2
    prior = conjugate_prior(CommunityDawidSkene(n_communities=L), K, J)
    m = rng.dirichlet(np.ones(K), size=(L, K))
    s = rng.uniform(1, 30, size=(L, K))
    rho = rng.dirichlet(np.ones(L))
    state = np.zeros((L * K + L + 1 + J, max(K, L)))
    state[: L * K, :K] = m.reshape(L * K, K)
    state[L * K : L * K + L, :K] = s
    state[L * K + L, :L] = rho
    pi = rng.dirichlet(np.ones(K))
    theta = rng.dirichlet(np.ones(K), size=(J, K))
    pri = prior.values
    ref = stats.dirichlet.logpdf(pi, pri["alpha"]) + stats.dirichlet.logpdf(rho, [2.0] * L)
    ref += sum(stats.dirichlet.logpdf(m[l, k], pri["beta"][k]) for l in range(L) for k in range(K))
    ref += stats.gamma.logpdf(s, 2.0, scale=10.0).sum()
    dens = [[np.log(rho[l]) + _dirichlet_density(theta[j], m[l], s[l]) for l in range(L)] for j in range(J)]
    ref += logsumexp([sum(dens[j][c[j]] for j in range(J)) for c in itertools.product(range(L), repeat=J)])
    assert log_prior_density(prior, pi, theta, state) == pytest.approx(ref, rel=1e-12)


# ------------------------------------------------------------------ EM
def test_em_objective_rises_and_the_estimate_is_a_fixed_point():
    sim = _two_communities(400, 12, seed=3, s=30.0)
    model = CommunityDawidSkene(n_communities=2)
    f = em(sim.data, model, method="map", init="majority", tol=1e-12, max_iter=5000, progress=False)
    assert f.converged
    assert np.all(np.diff(f.log_lik_trace) > -1e-9 * np.abs(f.log_lik_trace[1:]))
    mp = f.model_params
    m, s, rho, r = mp["m"], mp["s"], mp["rho"], mp["community_prob"]
    assert np.all(np.diff(np.diagonal(m, axis1=1, axis2=2).mean(1)) <= 0)  # sorted
    # the responsibilities are p(c_j | theta_j, m, s, rho) at the estimate (enumerated with scipy)
    lj = np.array([[np.log(rho[l]) + _dirichlet_density(f.theta[j], m[l], s[l]) for l in range(2)] for j in range(12)])
    np.testing.assert_allclose(r, np.exp(lj - logsumexp(lj, axis=1, keepdims=True)), atol=1e-6)
    # theta is the M-step at (r, m, s): expected counts plus sum_l r[j, l] s[l] m[l], normalised
    N = np.einsum("ik,ijl->jkl", f.class_probs, sim.data.counts.toarray().reshape(-1, 12, K))
    ref = N + np.einsum("jl,lkq->jkq", r, s[..., None] * m)
    np.testing.assert_allclose(f.theta, ref / ref.sum(-1, keepdims=True), atol=1e-6)
    # rho is its closed form, and (m, s) maximise their weighted conditional density: no Newton step moves them
    np.testing.assert_allclose(rho, (1.0 + r.sum(0)) / (2.0 + 12), atol=1e-6)
    from pyrater.inference.em.pooled import hyper_mode_from_sums

    pri = f.priors
    for l in range(2):
        T = np.einsum("j,jkq->kq", r[:, l], np.log(f.theta))
        m2, s2 = m[l].copy(), s[l].copy()
        hyper_mode_from_sums(T, float(r[:, l].sum()), m2, s2, pri["beta"], 2.0, 0.1, 100)
        np.testing.assert_allclose(m2, m[l], atol=1e-5)
        np.testing.assert_allclose(s2, s[l], rtol=1e-4)


def test_em_with_one_community_is_the_pooled_model():
    sim = _two_communities(300, 6, seed=5)
    kw = dict(method="map", init="majority", tol=1e-13, max_iter=20000, progress=False)
    a = em(sim.data, CommunityDawidSkene(n_communities=1), **kw)
    b = em(sim.data, "pooled", **kw)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-5)
    np.testing.assert_allclose(a.model_params["m"][0], b.model_params["m"], atol=1e-5)
    np.testing.assert_allclose(a.model_params["s"][0], b.model_params["s"], rtol=1e-4)
    assert a.log_lik_trace[-1] == pytest.approx(b.log_lik_trace[-1], rel=1e-9)


def test_em_finds_the_communities_and_the_expected_update_beats_dawid_skene():
    """40 raters, 150 ratings each: both EM updates find every rater's community; the joint mode over-shrinks
    (s far above the truth, 60), the expected update does not and estimates the raters better than DS."""
    sim = _two_communities(1500, 40, seed=3)
    fits = {
        u: pyrater.fit(sim.data, CommunityDawidSkene(n_communities=2, em_update=u), method="em", progress=False)
        for u in ("mode", "expected")
    }
    fits["ds"] = pyrater.fit(sim.data, "dawid_skene", method="em", progress=False)
    for u in ("mode", "expected"):
        assert np.all(fits[u].model_params["community_prob"].argmax(1) == sim.params["community"])
    s_err = {u: float(np.abs(np.log(fits[u].model_params["s"] / 60.0)).mean()) for u in ("mode", "expected")}
    assert s_err["expected"] < 0.5 * s_err["mode"], s_err
    acc = {u: float((f.point_estimate("z").to_numpy() == sim.data.categories[sim.z]).mean()) for u, f in fits.items()}
    err = {u: float(np.abs(f.theta - sim.theta).mean()) for u, f in fits.items()}
    assert acc["expected"] >= acc["ds"] and err["expected"] < 0.8 * err["ds"], (acc, err)
    assert err["expected"] < err["mode"], err


def test_grouped_and_long_data_give_the_same_em_fit():
    sim = _two_communities(300, 5, seed=7, raters_per_item=5)
    grouped = RatingData.from_grouped(
        sim.data.to_wide().value_counts().rename("n").reset_index(), tally="n", categories=list(sim.data.categories)
    )
    kw = dict(method="map", tol=1e-13, max_iter=20000, progress=False)
    a = em(grouped, CommunityDawidSkene(n_communities=2), **kw)
    b = em(sim.data, CommunityDawidSkene(n_communities=2), **kw)
    assert grouped.n_units < sim.data.n_units
    np.testing.assert_allclose(a.pi, b.pi, atol=1e-6)
    np.testing.assert_allclose(a.model_params["rho"], b.model_params["rho"], atol=1e-6)
    assert a.log_lik == pytest.approx(b.log_lik, rel=1e-9)


@pytest.mark.stan
def test_em_map_is_stans_posterior_mode(stan_engine):
    sim = _two_communities(300, 6, seed=12, s=20.0)
    model = CommunityDawidSkene(n_communities=2)
    opt = pyrater.fit(sim.data, model, method="optimize", seed=3, engine=stan_engine)
    # EM started at Stan's class probabilities must stay at Stan's mode (the posterior may have several)
    start = opt.class_probabilities().to_numpy()
    ref = em(sim.data, model, method="map", init=start, tol=1e-13, max_iter=20000, progress=False)
    np.testing.assert_allclose(opt.point_estimate("pi").to_numpy(), ref.pi, atol=5e-4)
    np.testing.assert_allclose(opt.point_estimate("theta").to_numpy(), ref.theta, atol=2e-3)
    np.testing.assert_allclose(opt.params["m"], ref.model_params["m"], atol=2e-3)
    np.testing.assert_allclose(opt.params["rho"], ref.model_params["rho"], atol=2e-3)


@pytest.mark.stan
def test_stan_density_with_one_community_is_the_pooled_models(stan_engine):
    from pyrater.inference.stan.data import stan_data

    sim = _two_communities(40, 4, seed=2)
    rng = np.random.default_rng(1)
    m, s = rng.dirichlet(np.ones(K), size=K), rng.uniform(1, 30, size=K)
    theta, pi = rng.dirichlet(np.ones(K), size=(4, K)), rng.dirichlet(np.ones(K))
    one = stan_engine.log_prob(
        "community",
        stan_data(sim.data, CommunityDawidSkene(n_communities=1)),
        {"pi": pi, "rho_raw": np.ones(1), "m_raw": m[None], "s_raw": s[None], "theta": theta},
        jacobian=False,
    )
    pooled = stan_engine.log_prob(
        "pooled", stan_data(sim.data, "pooled"), {"pi": pi, "m": m, "s": s, "theta": theta}, jacobian=False
    )
    assert one == pytest.approx(pooled, rel=1e-12)


# ------------------------------------------------------------------ Gibbs against NUTS
@pytest.mark.stan
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")
def test_gibbs_agrees_with_nuts(stan_engine):
    m = M2[:, :2, :2] / M2[:, :2, :2].sum(-1, keepdims=True)
    sim = simulate_community(80, 4, n_categories=2, m=m, s=15.0, rho=[0.5, 0.5], raters_per_item=3, seed=9)
    model = CommunityDawidSkene(n_communities=2)
    g = gibbs(sim.data, model, chains=4, warmup=500, draws=2000, seed=1, log_lik=False, progress=False)
    n = pyrater.fit(sim.data, model, method="mcmc", chains=4, warmup=500, draws=1000, seed=2, progress=False,
                    engine=stan_engine)  # fmt: skip
    for name in ("pi", "theta", "m", "s", "rho", "community_prob"):
        x, y = (np.asarray(f.draws[name]) for f in (g, n))
        x, y = x.reshape(*x.shape[:2], -1), y.reshape(*y.shape[:2], -1)
        se = np.hypot(pyrater._arviz.mcse(x), pyrater._arviz.mcse(y))
        z = np.abs(x.mean((0, 1)) - y.mean((0, 1))) / se
        assert np.all(z < 4.5), (name, z.max())


# ------------------------------------------------------------------ choosing L
@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")
def test_compare_picks_the_true_number_of_communities():
    """Two clear communities, raters with few ratings: L = 2 predicts better than L = 1 (one pooled population)."""
    sim = _two_communities(600, 60, seed=21, raters_per_item=3)
    kw = dict(method="gibbs", chains=2, warmup=300, draws=400, seed=3, progress=False)
    fits = {f"L={L}": pyrater.fit(sim.data, CommunityDawidSkene(n_communities=L), **kw) for L in (1, 2)}
    table = pyrater.compare(fits)
    assert table.index[0] == "L=2", table


# ------------------------------------------------------------------ the Fit API
@pytest.fixture(scope="module")
def small():
    """Two communities of fair raters (0.9 and 0.7 right): tiny data every method fits."""
    m = np.stack([np.where(np.eye(K, dtype=bool), d, (1 - d) / 2) for d in (0.9, 0.7)])
    return simulate_community(80, 5, n_categories=K, pi=PI, m=m, s=40.0, rho=[0.5, 0.5], raters_per_item=3, seed=8)


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
    assert s.model == "Community Dawid-Skene" and int(s.priors["n_communities"]) == 3
    post = pyrater._arviz.group(f.to_inference_data(), "posterior")
    assert post["m"].dims[-3:] == ("community", "category", "rating") and post["s"].dims[-2:] == (
        "community",
        "category",
    )
    assert post["community_prob"].dims[-2:] == ("rater", "community")
    if draws:
        diag = f.mcmc_diagnostics(warn=False)
        assert any(str(i).startswith("rho[") for i in diag.index)
        reps = pyrater.posterior_predict(f, draws=5, seed=1)
        assert len(reps) == 5 * sim.data.n_ratings
        ppc = pyrater.posterior_predictive_check(f, lambda df: float((df["rating"] == 1).mean()), draws=20, seed=1)
        assert 0 <= ppc.p_value <= 1
    back = pyrater.load(f.save(tmp_path / "fit.nc"))
    if f.method == "pathfinder":
        assert type(back) is type(f) and back.draws.keys() == f.draws.keys()
        for key, value in f.draws.items():
            np.testing.assert_array_equal(back.draws[key], value)
        pd.testing.assert_frame_equal(back.class_probabilities(), f.class_probabilities())
    else:
        assert_same_fit(f, back)
    if getattr(f, "model_params", None) is not None:  # EM: m, s, rho, community_prob at the mode
        for key, value in f.model_params.items():
            np.testing.assert_array_equal(back.model_params[key], value)


def test_fit_api_em(small, tmp_path):
    f = pyrater.fit(small.data, "community", method="em")
    assert set(f.model_params) == {"m", "s", "rho", "community_prob"}
    _check_fit_api(f, small, tmp_path, draws=False)


def test_fit_api_gibbs_and_compare_with_dawid_skene(small, tmp_path):
    kw = dict(method="gibbs", chains=2, warmup=200, draws=300, seed=1, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains
        f = pyrater.fit(small.data, "community", **kw)
        ds = pyrater.fit(small.data, "dawid_skene", **kw)
    _check_fit_api(f, small, tmp_path, draws=True)
    table = pyrater.compare({"community": f, "dawid_skene": ds})
    assert set(table.index) == {"community", "dawid_skene"} and table["weight"].sum() == pytest.approx(1.0)


@pytest.mark.stan
@pytest.mark.parametrize("method", ["mcmc", "optimize", "pathfinder"])
def test_fit_api_stan_methods(small, tmp_path, method, stan_engine):
    if method == "pathfinder" and stan_engine.name != "cmdstanpy":
        pytest.skip("Pathfinder runs in CmdStan only (the pystan engine refuses it)")
    kw = dict(chains=2, warmup=200, draws=200) if method == "mcmc" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains, pathfinder's Pareto k
        f = pyrater.fit(small.data, "community", method=method, seed=2, progress=False, engine=stan_engine, **kw)
    J = small.data.n_raters
    if method == "optimize":
        assert f.params["m"].shape == (3, K, K) and f.params["community_prob"].shape == (J, 3)
    else:
        assert f.draws["m"].shape[2:] == (3, K, K) and f.draws["theta"].shape[2:] == (J, K, K)
    _check_fit_api(f, small, tmp_path, draws=method == "mcmc")
