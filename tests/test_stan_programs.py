"""The Stan programs against independent numpy computations.

At random parameter values, each program's log density (no Jacobian) minus
the log prior computed here with scipy equals ``sum_i w_i log p(y_i)`` from
:func:`pyrater.models.kernels.class_log_posterior`; its ``log_lik`` equals the
kernel's per-unit values; grouped and long data give the same total; known
units are conditioned on.  Programs are compiled once (httpstan cache).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import log_softmax, logsumexp

from conftest import shared_file
from pyrater import RatingData, get_model
from pyrater.inference.stan.data import ERROR_MATRIX_MODEL_NAMES, stan_data, stan_inits
from pyrater.models.kernels import class_log_posterior

pytestmark = pytest.mark.stan

MODELS = list(ERROR_MATRIX_MODEL_NAMES)  # item_difficulty: tests/test_item_difficulty_stan.py


@pytest.fixture(scope="module")
def engine(stan_engine):
    """Each program is checked under both engines (log_prob, generated_quantities)."""
    return stan_engine


def simulate_long(K: int = 3, J: int = 4, I: int = 25, seed: int = 0) -> RatingData:
    """Incomplete design with repeated ratings: each item gets 1-5 ratings by random raters."""
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.full(K, 5.0))
    theta = rng.dirichlet(np.full(K, 1.0), size=(J, K)) + 3 * np.eye(K)
    theta /= theta.sum(-1, keepdims=True)
    rows = []
    for i in range(I):
        z = rng.choice(K, p=pi)
        for _ in range(rng.integers(1, 6)):
            j = rng.integers(J)
            rows.append((f"item{i}", f"r{j}", rng.choice(K, p=theta[j, z])))
    df = pd.DataFrame(rows, columns=["item", "rater", "rating"])
    return RatingData.from_long(df, categories=list(range(K)))


def random_params(model_name: str, K: int, J: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random constrained values of a program's parameters."""
    out: dict[str, np.ndarray] = {"pi": rng.dirichlet(np.full(K, 2.0))}
    if model_name == "dawid_skene":
        out["theta"] = rng.dirichlet(np.full(K, 2.0), size=(J, K))
    elif model_name == "homogeneous":
        out["theta"] = rng.dirichlet(np.full(K, 2.0), size=K)
    elif model_name == "class_conditional":
        out["p"] = rng.uniform(0.2, 0.95, size=(J, K))
    elif model_name == "one_coin":
        out["p"] = rng.uniform(0.2, 0.95, size=J)
    elif model_name == "ordinal":
        out["shift"] = rng.normal(0.0, 1.0, size=J)
        out["log_scale"] = rng.normal(-1.0, 1.0, size=J)
    elif model_name == "mace":
        out["competence"] = rng.uniform(0.05, 0.95, size=J)
        out["xi"] = rng.dirichlet(np.full(K, 2.0), size=J)
    elif model_name == "pooled":
        out["m"] = rng.dirichlet(np.full(K, 2.0), size=K)
        out["s"] = rng.uniform(0.5, 30.0, size=K)
        out["theta"] = rng.dirichlet(np.full(K, 2.0), size=(J, K))
    elif model_name == "community":  # L = 3 (the default): the unsorted parameters of the program
        out["rho_raw"] = rng.dirichlet(np.full(3, 2.0))
        out["m_raw"] = rng.dirichlet(np.full(K, 2.0), size=(3, K))
        out["s_raw"] = rng.uniform(0.5, 30.0, size=(3, K))
        out["theta"] = rng.dirichlet(np.full(K, 2.0), size=(J, K))
    else:
        out["mu"] = rng.normal(size=(K, K))
        out["sigma"] = rng.uniform(0.1, 2.0, size=(K, K))
        out["gamma_raw"] = rng.normal(size=(J, K, K))
    return out


def log_theta_of(model_name: str, params: dict[str, np.ndarray], J: int) -> np.ndarray:
    """log theta (J, K, K) implied by the parameters, computed in numpy."""
    K = params["pi"].size
    if model_name in ("dawid_skene", "pooled", "community"):
        return np.log(params["theta"])
    if model_name == "homogeneous":
        return np.log(np.broadcast_to(params["theta"], (J, K, K)))
    if model_name == "class_conditional":
        p = params["p"]
        theta = np.repeat(((1 - p) / (K - 1))[:, :, None], K, axis=2)
        theta[:, np.arange(K), np.arange(K)] = p
        return np.log(theta)
    if model_name == "one_coin":  # written out here, not with pyrater's one_coin_theta
        p = params["p"]
        theta = np.empty((J, K, K))
        for j in range(J):
            theta[j] = np.where(np.eye(K, dtype=bool), p[j], (1 - p[j]) / (K - 1))
        return np.log(theta)
    if model_name == "ordinal":  # written out here with scipy's logistic CDF, not with pyrater's ordinal_theta
        theta = np.empty((J, K, K))
        for j in range(J):
            for k in range(K):
                cuts = (np.arange(K + 1) - 0.5 - k - params["shift"][j]) / np.exp(params["log_scale"][j])
                cuts[0], cuts[K] = -np.inf, np.inf
                lo, hi = cuts[:-1], cuts[1:]
                # F(hi) - F(lo) in the lower half, S(lo) - S(hi) in the upper (no cancellation near 1)
                theta[j, k] = np.where(
                    lo + hi < 0,
                    stats.logistic.cdf(hi) - stats.logistic.cdf(lo),
                    stats.logistic.sf(lo) - stats.logistic.sf(hi),
                )
        return np.log(theta)
    if model_name == "mace":  # written out here, not with pyrater's mace_theta
        c, xi = params["competence"], params["xi"]
        theta = np.empty((J, K, K))
        for j in range(J):
            for k in range(K):
                for l in range(K):
                    theta[j, k, l] = (1 - c[j]) * xi[j, l] + (c[j] if k == l else 0.0)
        return np.log(theta)
    gamma = params["mu"][None] + params["sigma"][None] * params["gamma_raw"]
    return log_softmax(gamma, axis=-1)


def community_log_prior_enumerated(params: dict[str, np.ndarray], d: dict) -> float:
    """log p(theta, m, s, rho) of the community model: the sum over every assignment c of p(c | rho) p(theta | c)."""
    J, K, L = d["J"], d["K"], d["L"]
    m, s, rho, theta = params["m_raw"], params["s_raw"], params["rho_raw"], params["theta"]
    lp = stats.dirichlet.logpdf(rho, np.full(L, float(d["rho_alpha"])))
    lp += sum(stats.dirichlet.logpdf(m[l, k], d["beta"][k]) for l in range(L) for k in range(K))
    lp += stats.gamma.logpdf(s, float(d["s_shape"]), scale=1 / float(d["s_rate"])).sum()
    dens = np.array([[sum(stats.dirichlet.logpdf(theta[j, k], 1 + s[l, k] * m[l, k]) for k in range(K))
                      for l in range(L)] for j in range(J)])  # fmt: skip
    terms = [sum(np.log(rho[c[j]]) + dens[j, c[j]] for j in range(J)) for c in itertools.product(range(L), repeat=J)]
    return float(lp + logsumexp(terms))


def log_prior(model_name: str, params: dict[str, np.ndarray], d: dict) -> float:
    """The program's log prior density, with scipy."""
    lp = stats.dirichlet.logpdf(params["pi"], d["alpha"])
    if model_name == "dawid_skene":
        J, K = d["J"], d["K"]
        lp += sum(stats.dirichlet.logpdf(params["theta"][j, k], d["beta"][j, k]) for j in range(J) for k in range(K))
    elif model_name == "homogeneous":
        lp += sum(stats.dirichlet.logpdf(params["theta"][k], d["beta"][k]) for k in range(d["K"]))
    elif model_name == "class_conditional":
        lp += stats.beta.logpdf(params["p"], d["beta1"][None, :], d["beta2"][None, :]).sum()
    elif model_name == "one_coin":
        lp += stats.beta.logpdf(params["p"], float(d["beta1"]), float(d["beta2"])).sum()
    elif model_name == "ordinal":
        lp += stats.norm.logpdf(params["shift"], 0.0, d["shift_sd"]).sum()
        lp += stats.norm.logpdf(params["log_scale"], d["log_scale_mean"], d["log_scale_sd"]).sum()
    elif model_name == "mace":
        lp += stats.beta.logpdf(params["competence"], float(d["beta1"]), float(d["beta2"])).sum()
        lp += sum(stats.dirichlet.logpdf(x, d["gamma"]) for x in params["xi"])
    elif model_name == "pooled":  # theta[j, k] ~ Dirichlet(1 + s[k] m[k]), m[k] ~ Dirichlet(beta[k]), s ~ Gamma
        J, K = d["J"], d["K"]
        m, s = params["m"], params["s"]
        lp += sum(stats.dirichlet.logpdf(m[k], d["beta"][k]) for k in range(K))
        lp += stats.gamma.logpdf(s, float(d["s_shape"]), scale=1 / float(d["s_rate"])).sum()
        lp += sum(stats.dirichlet.logpdf(params["theta"][j, k], 1 + s[k] * m[k]) for j in range(J) for k in range(K))
    elif model_name == "community":  # by brute force over the L^J assignments of raters to communities
        lp += community_log_prior_enumerated(params, d)
    else:
        K = d["K"]
        lp += stats.norm.logpdf(params["mu"], loc=2 * np.eye(K), scale=1).sum()
        lp += stats.halfnorm.logpdf(params["sigma"]).sum()
        lp += stats.norm.logpdf(params["gamma_raw"]).sum()
    return float(lp)


@pytest.mark.parametrize("model_name", MODELS)
def test_log_density_matches_numpy(engine, model_name):
    data = simulate_long(seed=1)
    K, J = data.n_categories, data.n_raters
    rng = np.random.default_rng(42)
    known = np.full(data.n_units, -1)
    known[[0, 3]] = [1, 2]
    for known_arg in (None, known):
        d = stan_data(data, get_model(model_name), known=known_arg)
        for _ in range(3):
            params = random_params(model_name, K, J, rng)
            lt = log_theta_of(model_name, params, J)
            _, ll = class_log_posterior(data.counts, np.log(params["pi"]), lt, known=known_arg)
            lp = engine.log_prob(model_name, d, params, jacobian=False)
            assert lp - log_prior(model_name, params, d) == pytest.approx(np.dot(data.weight, ll), rel=1e-10, abs=1e-8)
            gq = engine.generated_quantities(model_name, d, params)
            np.testing.assert_allclose(gq["log_lik"], ll, rtol=1e-10, atol=1e-10)
            theta = np.exp(lt) if model_name != "homogeneous" else params["theta"]
            np.testing.assert_allclose(gq["theta"], theta, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("model_name", MODELS)
def test_known_units_condition_on_the_class(engine, model_name):
    data = simulate_long(seed=2, I=10)
    known = np.full(data.n_units, -1)
    known[2] = 0
    d_known = stan_data(data, get_model(model_name), known=known)
    d_free = stan_data(data, get_model(model_name))
    params = random_params(model_name, data.n_categories, data.n_raters, np.random.default_rng(3))
    lj = np.log(params["pi"]) + np.asarray(data.counts[2] @ _lt_matrix(log_theta_of(model_name, params, data.n_raters)))
    ll_known = engine.generated_quantities(model_name, d_known, params)["log_lik"]
    ll_free = engine.generated_quantities(model_name, d_free, params)["log_lik"]
    assert ll_known[2] == pytest.approx(lj[0, 0], rel=1e-12)
    assert ll_free[2] == pytest.approx(np.logaddexp.reduce(lj[0]), rel=1e-12)
    np.testing.assert_allclose(np.delete(ll_known, 2), np.delete(ll_free, 2), rtol=1e-12)


def _lt_matrix(lt: np.ndarray) -> np.ndarray:
    J, K, _ = lt.shape
    return lt.transpose(0, 2, 1).reshape(J * K, K)


@pytest.mark.parametrize("model_name", MODELS)
def test_grouped_equals_long_caries(engine, model_name):
    df = pd.read_csv(shared_file("caries.csv"))
    if model_name == "ordinal":  # K >= 3: the caries patterns with three ordered grades (2 -> 1 or 2 by rater)
        df = df.copy()
        for c in df.columns[:-1:2]:
            df[c] = df[c] + (df[c] == 2) * (df.index % 2)
    grouped = RatingData.from_grouped(df, tally="n")
    long = RatingData.from_long(grouped.to_long(), categories=list(grouped.categories))
    assert grouped.n_units < long.n_units
    assert grouped.n_ratings < long.n_ratings
    model = get_model(model_name)
    params = random_params(model_name, grouped.n_categories, grouped.n_raters, np.random.default_rng(7))
    lp_grouped = engine.log_prob(model_name, stan_data(grouped, model, log_lik=False), params)
    lp_long = engine.log_prob(model_name, stan_data(long, model, log_lik=False), params)
    assert lp_grouped == pytest.approx(lp_long, rel=1e-10)
    # per pattern log_lik times tally = sum over its items
    gq = engine.generated_quantities(model_name, stan_data(grouped, model), params)
    _, ll = class_log_posterior(
        grouped.counts, np.log(params["pi"]), log_theta_of(model_name, params, grouped.n_raters)
    )
    np.testing.assert_allclose(gq["log_lik"], ll, rtol=1e-10)


def test_community_generated_quantities_are_sorted_and_enumerated(engine):
    """community_prob is p(c_j = l | theta, m, s, rho) by enumeration; m, s, rho sorted by m's mean diagonal."""
    data = simulate_long(seed=6, I=10)
    K, J = data.n_categories, data.n_raters
    d = stan_data(data, "community")
    params = random_params("community", K, J, np.random.default_rng(11))
    gq = engine.generated_quantities("community", d, params)
    m, s, rho, theta = params["m_raw"], params["s_raw"], params["rho_raw"], params["theta"]
    order = np.argsort(-np.diagonal(m, axis1=1, axis2=2).mean(1))
    np.testing.assert_allclose(gq["m"], m[order], rtol=1e-12)
    np.testing.assert_allclose(gq["s"], s[order], rtol=1e-12)
    np.testing.assert_allclose(gq["rho"], rho[order], rtol=1e-12)
    for j in range(J):
        logp = np.array(
            [np.log(rho[l]) + sum(stats.dirichlet.logpdf(theta[j, k], 1 + s[l, k] * m[l, k]) for k in range(K))
             for l in range(3)]
        )  # fmt: skip
        np.testing.assert_allclose(gq["community_prob"][j], np.exp(logp - logsumexp(logp))[order], rtol=1e-9)


def test_log_lik_switch_off(engine):
    data = simulate_long(seed=4, I=8)
    d = stan_data(data, "dawid_skene", log_lik=False)
    params = random_params("dawid_skene", data.n_categories, data.n_raters, np.random.default_rng(0))
    gq = engine.generated_quantities("dawid_skene", d, params)
    assert gq["log_lik"].shape == (0,)
    assert gq["theta"].shape == (data.n_raters, data.n_categories, data.n_categories)


def test_jacobian_flag(engine):
    """With the Jacobian the density differs by log|J| of the simplex transform (nonzero)."""
    data = simulate_long(seed=5, I=8)
    d = stan_data(data, "dawid_skene")
    params = random_params("dawid_skene", data.n_categories, data.n_raters, np.random.default_rng(1))
    assert engine.log_prob("dawid_skene", d, params, jacobian=True) != pytest.approx(
        engine.log_prob("dawid_skene", d, params, jacobian=False)
    )


# ------------------------------------------------------------- stan_data
def test_stan_data_layout():
    df = pd.DataFrame(
        {"item": [1, 1, 1, 2, 3], "rater": ["a", "a", "b", "b", "a"], "rating": ["x", "x", "y", "y", "y"]}
    )
    data = RatingData.from_long(df)
    d = stan_data(data, "dawid_skene", known=np.array([-1, 1, -1]))
    assert (d["K"], d["J"], d["I"], d["nnz"]) == (2, 2, 3, 4)
    # item 1: rater a said x twice (col 1), rater b said y (col 4); item 2: b y; item 3: a y
    assert d["w"].tolist() == [2.0, 1.0, 1.0, 1.0]
    assert d["v"].tolist() == [1, 4, 4, 2]
    assert d["u"].tolist() == [1, 3, 4, 5]
    assert d["known"].tolist() == [0, 2, 0]
    assert d["weight"].tolist() == [1, 1, 1]
    assert d["beta"].shape == (2, 2, 2) and d["alpha"].tolist() == [3.0, 3.0]
    assert d["write_log_lik"] == 1
    hom = stan_data(data, "homogeneous")
    assert hom["beta"].shape == (2, 2)
    cc = stan_data(data, "class_conditional")
    assert cc["beta1"].tolist() == [4.8, 4.8] and cc["beta2"].tolist() == pytest.approx([3.2, 3.2])
    po = stan_data(data, "pooled")
    assert po["beta"].shape == (2, 2) and float(po["s_shape"]) == 2.0 and float(po["s_rate"]) == 0.1
    co = stan_data(data, "community")
    assert co["L"] == 3 and co["beta"].shape == (2, 2) and float(co["rho_alpha"]) == 2.0
    oc = stan_data(data, "one_coin")
    # one-coin's default at K = 2: Beta(4 (1 + 1/K), 4 (1 - 1/K)) = Beta(6, 2), halfway between chance and certainty
    assert np.shape(oc["beta1"]) == () and float(oc["beta1"]) == 6.0 and float(oc["beta2"]) == pytest.approx(2.0)
    ma = stan_data(data, "mace")
    assert np.shape(ma["beta1"]) == () and float(ma["beta1"]) == 2.0 and float(ma["beta2"]) == 2.0
    assert ma["gamma"].tolist() == [10.0, 10.0] and "beta" not in ma
    assert "beta" not in stan_data(data, "hierarchical")


def test_stan_data_ordinal():
    sim = __import__("pyrater").simulate("ordinal", 10, 3, n_categories=4, seed=0)
    d = stan_data(sim.data, get_model("ordinal"))
    assert (d["shift_sd"], d["log_scale_mean"], d["log_scale_sd"]) == (1.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="K >= 3"):
        df = pd.DataFrame({"item": [1, 2], "rater": ["a", "b"], "rating": [0, 1]})
        stan_data(RatingData.from_long(df), "ordinal")


def test_stan_data_errors():
    df = pd.DataFrame({"item": [1, 2], "rater": ["a", "b"], "rating": [0, 1]})
    data = RatingData.from_long(df)
    with pytest.raises(ValueError, match="shape"):
        stan_data(data, "dawid_skene", known=np.array([0]))
    with pytest.raises(ValueError, match="-1 .. 1"):
        stan_data(data, "dawid_skene", known=np.array([0, 2]))
    with pytest.raises(TypeError, match="RatingData"):
        stan_data(df, "dawid_skene")
    with pytest.raises(ValueError, match="unknown model"):
        stan_data(data, "nope")


@pytest.mark.parametrize("model_name", MODELS)
def test_stan_inits_are_valid_and_diagonal_heavy(model_name):
    inits = stan_inits(model_name, K=3, J=4, n=3, seed=1)
    assert len(inits) == 3
    assert all(np.isclose(i["pi"].sum(), 1) for i in inits)
    again = stan_inits(model_name, K=3, J=4, n=3, seed=1)
    for a, b in zip(inits, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    for init in inits:
        lt = log_theta_of(model_name, init, 4)
        theta = np.exp(lt)
        np.testing.assert_allclose(theta.sum(-1), 1)
        diag = theta[:, np.arange(3), np.arange(3)]
        assert np.all(diag > theta.max(axis=-1) - 1e-12)  # the diagonal is each row's largest
        assert np.all(diag > 0.5)
