"""Each coordinate-ascent update of pyrater.contrib.lcm against an exact answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit, logit

from pyrater.contrib.lcm import LatentGraphLCM, LCMParams, auc, exact_posterior, log_partition, simulate_lcm
from pyrater.contrib.lcm import kernels as kn
from pyrater.contrib.lcm.exact import all_states, ising_log_prob, pseudo_log_lik


def _ring(K: int) -> np.ndarray:
    D = np.zeros((K, K))
    for k in range(K):
        D[k, (k + 1) % K] = D[(k + 1) % K, k] = 1
    return D


# ------------------------------------------------------------ exact helpers
def test_log_partition_matches_brute_force():
    theta = np.array([0.3, -1.0, 0.5])
    D = np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], float)
    rho = 0.7
    total = 0.0
    for L in itertools.product([0, 1], repeat=3):
        L = np.array(L)
        energy = theta @ L + rho * (L[0] * L[1] + L[0] * L[2])  # each edge once
        total += np.exp(energy)
    assert log_partition(theta, rho, D) == pytest.approx(np.log(total), rel=1e-12)
    # probabilities sum to one
    assert np.exp(ising_log_prob(all_states(3), theta, rho, D)).sum() == pytest.approx(1.0)


def test_exact_posterior_matches_bayes_rule_by_hand():
    p = LCMParams(
        gamma=[0.9, 0.7, 0.8],
        delta=[0.1, 0.2, 0.05],
        eta=[0.6, 0.5, 0.7],
        theta=[-1.0, 0.2, -0.5],
        rho=1.2,
        D=[[0, 1, 0], [1, 0, 1], [0, 1, 0]],
    )
    M = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0]])
    ss = np.array([[np.nan, np.nan, 1.0], [0.0, np.nan, np.nan], [np.nan, np.nan, np.nan]])
    got = exact_posterior(M, np.ones(3), ss, params=p).to_numpy()
    for i in range(3):
        w = {}
        for L in itertools.product([0, 1], repeat=3):
            L = np.array(L)
            lp = p.theta @ L + p.rho * (L[0] * L[1] + L[1] * L[2])
            for k in range(3):
                pm = p.gamma[k] if L[k] else p.delta[k]
                lp += np.log(pm if M[i, k] else 1 - pm)
                if np.isfinite(ss[i, k]):
                    pe = p.eta[k] * L[k]
                    if ss[i, k] == 1 and pe == 0:
                        lp = -np.inf
                    else:
                        lp += np.log(pe) if ss[i, k] == 1 else np.log(1 - pe)
            w[tuple(L)] = np.exp(lp) if np.isfinite(lp) else 0.0
        z = sum(w.values())
        marg = [sum(v for L, v in w.items() if L[k]) / z for k in range(3)]
        np.testing.assert_allclose(got[i], marg, rtol=1e-10)
    assert got[0, 2] == 1.0  # positive silver standard forces L = 1


def test_auc_matches_pairwise_count():
    rng = np.random.default_rng(3)
    y = rng.random(200) < 0.3
    s = np.round(rng.random(200) + y * 0.4, 1)  # ties on purpose
    pos, neg = s[y], s[~y]
    pairs = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    assert auc(y, s) == pytest.approx(pairs, rel=1e-12)
    with pytest.raises(ValueError, match="both positives and negatives"):
        auc(np.ones(3), [0.1, 0.2, 0.3])


# ------------------------------------------------------------- expectations
def test_neighbour_moments_match_enumeration():
    rng = np.random.default_rng(0)
    K = 4
    q = rng.random((3, K))
    d = rng.random((K, K))
    d = np.triu(d, 1) + np.triu(d, 1).T
    mu, s2 = kn.neighbour_moments(q, d, "exact")
    for i in range(3):
        for k in range(K):
            others = [j for j in range(K) if j != k]
            p = d[k, others] * q[i, others]
            vals, probs = [], []
            for bits in itertools.product([0, 1], repeat=K - 1):
                b = np.array(bits)
                vals.append(b.sum())
                probs.append(np.prod(np.where(b == 1, p, 1 - p)))
            vals, probs = np.array(vals), np.array(probs)
            assert mu[i, k] == pytest.approx(probs @ vals)
            assert s2[i, k] == pytest.approx(probs @ vals**2 - (probs @ vals) ** 2)
    mu_p, s2_p = kn.neighbour_moments(q, d, "poisson")
    np.testing.assert_allclose(mu_p, mu)
    np.testing.assert_allclose(s2_p, mu)  # Poisson: variance = mean


def test_second_order_softplus_expansion_error_is_fourth_order():
    """E f(m + sqrt(v) Z) by Gauss-Hermite vs the expansion: error shrinks like v^2."""
    z, w = np.polynomial.hermite_e.hermegauss(60)
    w = w / w.sum()
    for m in (-2.0, 0.0, 1.5):
        errs = []
        for v in (0.4, 0.1):
            exact = w @ kn.softplus(m + np.sqrt(v) * z)
            errs.append(abs(kn.expected_softplus(np.array(m), np.array(v)) - exact))
        assert errs[0] < 0.01
        assert errs[1] < errs[0] / 10  # fourth-order remainder (ratio 16 in theory)
    # exact at zero variance, stable far in the tails
    x = np.array([-800.0, -30.0, 0.0, 30.0, 800.0])
    np.testing.assert_allclose(kn.expected_softplus(x, np.zeros(5)), np.logaddexp(0, x), rtol=1e-14)


# ----------------------------------------------------- theta, rho, D updates
@pytest.fixture(scope="module")
def observed_L():
    """Fully observed latent states from an Ising prior on a 4-ring (hard q)."""
    K = 4
    truth = LCMParams(
        gamma=np.full(K, 0.8),
        delta=np.full(K, 0.1),
        eta=np.full(K, 0.5),
        theta=[-1.0, -0.5, -1.5, -0.8],
        rho=1.0,
        D=_ring(K),
    )
    sim = simulate_lcm(400, 0, params=truth, seed=11)
    return sim.L_cases.to_numpy().astype(float), truth


def test_theta_update_is_the_pseudo_likelihood_map_with_hard_inputs(observed_L):
    """With q, D hard and Var(rho) = 0 the expansion is exact: the Laplace mode is the PL MAP."""
    L, truth = observed_L
    rho, D = 0.8, truth.D
    prior_m, prior_sd = np.full(4, 0.5), np.full(4, 1.5)
    mu, s2 = kn.neighbour_moments(L, D)
    assert np.all(s2 == 0)
    mode, var = kn.update_theta(L, mu, s2, rho, 0.0, np.zeros(4), prior_m, prior_sd)

    def neg_log_post(t):
        return -(pseudo_log_lik(L, t, rho, D).sum() - 0.5 * (((t - prior_m) / prior_sd) ** 2).sum())

    ref = optimize.minimize(neg_log_post, np.zeros(4), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(mode, ref.x, atol=1e-6)
    # Laplace variance = 1 / (minus second derivative), by finite differences
    h = 1e-4
    for k in range(4):
        e = np.zeros(4)
        e[k] = h
        second = (neg_log_post(mode + e) - 2 * neg_log_post(mode) + neg_log_post(mode - e)) / h**2
        assert var[k] == pytest.approx(1 / second, rel=1e-4)


def test_rho_update_is_the_pseudo_likelihood_map_with_hard_inputs(observed_L):
    L, truth = observed_L
    theta, D = truth.theta, truth.D
    mu, s2 = kn.neighbour_moments(L, D)
    mean, var = kn.update_rho(L, mu, s2, theta, np.zeros(4), 0.0, 0.0, 2.0)

    def neg_log_post(r):
        return -(pseudo_log_lik(L, theta, r, D).sum() - 0.5 * (r / 2.0) ** 2)

    ref = optimize.minimize_scalar(neg_log_post, bounds=(-5, 5), method="bounded", options={"xatol": 1e-10})
    assert mean == pytest.approx(ref.x, abs=1e-6)
    h = 1e-4
    second = (neg_log_post(mean + h) - 2 * neg_log_post(mean) + neg_log_post(mean - h)) / h**2
    assert var == pytest.approx(1 / second, rel=1e-4)


def test_edge_update_is_the_pseudo_likelihood_difference_with_hard_inputs(observed_L):
    """logit q(D_kk') = E logit pi + log PL(D_kk' = 1) - log PL(D_kk' = 0), exactly, for hard inputs."""
    L, truth = observed_L
    theta, rho, D = truth.theta, 0.9, truth.D
    elogit = -0.3
    got = kn.edge_logodds(L, D, theta, np.zeros(4), rho, 0.0, elogit)
    for k, j in itertools.combinations(range(4), 2):
        D1, D0 = D.copy(), D.copy()
        D1[k, j] = D1[j, k] = 1
        D0[k, j] = D0[j, k] = 0
        want = elogit + pseudo_log_lik(L, theta, rho, D1).sum() - pseudo_log_lik(L, theta, rho, D0).sum()
        assert got[k, j] == pytest.approx(want, rel=1e-10, abs=1e-8)
        assert got[j, k] == got[k, j]
    assert np.all(np.isneginf(np.diag(got)))


def test_pseudo_likelihood_estimates_agree_with_exact_likelihood():
    """For fully observed L the PL MAP of (theta, rho) is close to the exact-likelihood MAP
    computed with the 2^K log-partition (K = 4): the approximation used for q(theta), q(rho)."""
    K = 4
    truth = LCMParams(
        gamma=np.full(K, 0.8),
        delta=np.full(K, 0.1),
        eta=np.full(K, 0.5),
        theta=[-1.0, -0.5, -1.5, -0.8],
        rho=1.2,
        D=_ring(K),
    )
    L = simulate_lcm(3000, 0, params=truth, seed=5).L_cases.to_numpy().astype(float)
    D = truth.D

    def nll(x):
        return -ising_log_prob(L, x[:K], x[K], D).sum()

    exact = optimize.minimize(nll, np.zeros(K + 1), method="BFGS").x
    th, r = np.zeros(K), 0.0
    for _ in range(100):
        mu, s2 = kn.neighbour_moments(L, D)
        th, _ = kn.update_theta(L, mu, s2, r, 0.0, th, np.zeros(K), np.full(K, 100.0))
        r, _ = kn.update_rho(L, mu, s2, th, np.zeros(K), r, 0.0, 100.0)
    np.testing.assert_allclose(th, exact[:K], atol=0.1)
    assert r == pytest.approx(exact[K], abs=0.1)
    assert r == pytest.approx(truth.rho, abs=0.25)


# --------------------------------------------------------- Beta and q(L)
def test_beta_updates_are_conjugate_counts():
    """One sweep from a hard q = true L: Beta parameters equal prior + counts; eta counts only
    cases whose silver standard was measured; delta includes every control."""
    sim = simulate_lcm(150, 120, K=3, seed=2, silver_fraction=0.3)
    L = sim.L_cases.to_numpy().astype(float)
    model = LatentGraphLCM(max_iter=1)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        fit = model.fit(sim.M, sim.case, sim.silver, init_q=L)
    c = sim.case.to_numpy() == 1
    Mc, M0 = sim.M.to_numpy()[c], sim.M.to_numpy()[~c]
    ss = sim.silver.to_numpy()[c]
    meas = np.isfinite(ss)
    pr = model.priors
    np.testing.assert_allclose(fit.gamma_ab[:, 0], pr.gamma[0] + (L * Mc).sum(0))
    np.testing.assert_allclose(fit.gamma_ab[:, 1], pr.gamma[1] + (L * (1 - Mc)).sum(0))
    np.testing.assert_allclose(fit.delta_ab[:, 0], pr.delta[0] + ((1 - L) * Mc).sum(0) + M0.sum(0))
    np.testing.assert_allclose(fit.delta_ab[:, 1], pr.delta[1] + ((1 - L) * (1 - Mc)).sum(0) + (1 - M0).sum(0))
    np.testing.assert_allclose(fit.eta_ab[:, 0], pr.eta[0] + np.nansum(np.where(meas, L * ss, 0), 0))
    np.testing.assert_allclose(fit.eta_ab[:, 1], pr.eta[1] + np.where(meas, L * (1 - ss), 0).sum(0))


def test_q_update_log_odds_terms():
    """bronze_logodds is the log-likelihood ratio of target k's measurements."""
    elog = {"lg": np.log([0.9]), "l1g": np.log([0.1]), "ld": np.log([0.2]), "l1d": np.log([0.8]), "l1e": np.log([0.4])}
    Mc = np.array([[1.0], [0.0], [0.0]])
    meas = np.array([[False], [True], [True]])
    val = np.array([[0.0], [0.0], [1.0]])
    got = kn.bronze_logodds(Mc, meas, val, elog)[:, 0]
    want = [np.log(0.9 / 0.2), np.log(0.1 / 0.8) + np.log(0.4), np.log(0.1 / 0.8)]
    np.testing.assert_allclose(got, want)
    q = np.full((3, 1), 0.5)
    kn.update_q(q, got[:, None], np.array([0.3]), 0.0, np.zeros((1, 1)), val.astype(bool))
    np.testing.assert_allclose(q[:, 0], [expit(want[0] + 0.3), expit(want[1] + 0.3), 1.0])
    assert logit(q[0, 0]) == pytest.approx(want[0] + 0.3)
