"""Tests of pyrater.simulate: reproducibility, design, distributions, model structure."""

from __future__ import annotations

import importlib
import itertools
import time
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater.data import RatingData
from pyrater.models import (
    ClassConditionalDawidSkene,
    DawidSkene,
    HierarchicalDawidSkene,
    HomogeneousDawidSkene,
    Simulation,
    class_conditional_theta,
    simulate,
    simulate_class_conditional,
    simulate_community,
    simulate_dawid_skene,
    simulate_hierarchical,
    simulate_homogeneous,
    simulate_mace,
    simulate_one_coin,
    simulate_ordinal,
    simulate_pooled,
)

# the package exports a function named simulate, which hides the module attribute
simmod = importlib.import_module("pyrater.models.simulate")

ALL = {
    "dawid_skene": simulate_dawid_skene,
    "homogeneous": simulate_homogeneous,
    "class_conditional": simulate_class_conditional,
    "hierarchical": simulate_hierarchical,
    "one_coin": simulate_one_coin,
    "ordinal": simulate_ordinal,
    "mace": simulate_mace,
    "pooled": simulate_pooled,
    "community": simulate_community,
}


def _same(a: Simulation, b: Simulation) -> bool:
    return (
        np.array_equal(a.z, b.z)
        and np.array_equal(a.pi, b.pi)
        and np.array_equal(a.theta, b.theta)
        and a.data.equals(b.data)
        and np.array_equal(a.data.rating, b.data.rating)
    )


def _empirical_theta(sim: Simulation) -> tuple[np.ndarray, np.ndarray]:
    """Observed rating frequencies given the true class: (J, K, K) and the (J, K) counts."""
    d = sim.data
    J, K = d.n_raters, d.n_categories
    cell = (d.rater * K + sim.z[d.unit]) * K + d.rating
    n = np.bincount(cell, minlength=J * K * K).reshape(J, K, K).astype(float)
    tot = n.sum(axis=2)
    return n / np.maximum(tot, 1)[:, :, None], tot


# -------------------------------------------------------------- reproducible
@pytest.mark.parametrize("name", list(ALL))
def test_seed_reproduces_and_differs(name):
    fn = ALL[name]
    a = fn(60, 4, n_categories=3, raters_per_item=2, repeats=2, seed=11)
    b = fn(60, 4, n_categories=3, raters_per_item=2, repeats=2, seed=11)
    c = fn(60, 4, n_categories=3, raters_per_item=2, repeats=2, seed=12)
    assert _same(a, b)
    assert not _same(a, c)
    assert a.model == name


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_a_bad_seed_is_refused_in_the_users_terms(seed):
    for name in ALL:
        with pytest.raises(ValueError, match=r"seed must be a non-negative integer, a numpy Generator"):
            pyrater.simulate(name, 10, 3, n_categories=3, seed=seed)
    gen = np.random.default_rng(5)  # a Generator and a SeedSequence are seeds too
    assert pyrater.simulate("dawid_skene", 10, 3, n_categories=3, seed=gen).data.n_items == 10
    assert pyrater.simulate("dawid_skene", 10, 3, n_categories=3, seed=np.random.SeedSequence(5)).data.n_items == 10


def test_no_global_random_state_used():
    # the legacy global state is what this test watches: it must stay untouched
    np.random.seed(0)  # noqa: NPY002
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    simulate_dawid_skene(50, 3, n_categories=3, seed=1)
    assert np.array_equal(np.random.get_state()[1], before)  # noqa: NPY002
    # a Generator can be passed and is consumed
    rng = np.random.default_rng(5)
    a = simulate_dawid_skene(50, 3, n_categories=3, seed=rng)
    b = simulate_dawid_skene(50, 3, n_categories=3, seed=rng)
    assert not np.array_equal(a.z, b.z)


# -------------------------------------------------------------------- design
def test_complete_design_sizes():
    sim = simulate_dawid_skene(30, 4, n_categories=3, repeats=3, seed=0)
    d = sim.data
    assert (d.n_units, d.n_raters, d.n_categories, d.n_ratings) == (30, 4, 3, 30 * 4 * 3)
    per = np.bincount(d.unit * 4 + d.rater, minlength=120)
    assert np.all(per == 3)
    assert d.has_repeats
    assert list(d.unit_labels) == list(range(1, 31))
    assert list(d.rater_labels) == [1, 2, 3, 4]
    assert list(d.categories) == [1, 2, 3]
    assert sim.z.shape == (30,)
    assert sim.theta.shape == (4, 3, 3)
    assert not simulate_dawid_skene(30, 4, n_categories=3, seed=0).data.has_repeats


def _check_incomplete(sim: Simulation, I: int, J: int, R: int, repeats: int) -> None:
    d = sim.data
    assert d.n_ratings == I * R * repeats
    assert d.n_units == I and d.n_raters == J
    pair = np.bincount(d.unit * J + d.rater, minlength=I * J).reshape(I, J)
    # exactly R distinct raters per item, each rating it `repeats` times
    assert np.all((pair > 0).sum(axis=1) == R)
    assert set(np.unique(pair)) <= {0, repeats}


@pytest.mark.parametrize("limit", [10**9, 0], ids=["permute", "floyd"])
def test_incomplete_design_distinct_and_uniform(monkeypatch, limit):
    monkeypatch.setattr(simmod, "_PERMUTE_LIMIT", limit)
    I, J, R = 20000, 5, 2
    sim = simulate_class_conditional(I, J, n_categories=2, raters_per_item=R, repeats=2, seed=3)
    _check_incomplete(sim, I, J, R, 2)
    # every one of the C(5, 2) = 10 rater pairs is equally likely
    d = sim.data
    first = d.rater.reshape(I, R * 2)[:, [0, 2]]
    code = first[:, 0] * J + first[:, 1]
    n = np.bincount(code, minlength=J * J)
    pairs = [a * J + b for a, b in itertools.combinations(range(J), 2)]
    assert n.sum() == n[pairs].sum() == I
    expected = I / len(pairs)
    chi2 = float((((n[pairs] - expected) ** 2) / expected).sum())
    assert chi2 < 30  # chi-square with 9 df: P(> 30) < 0.001


def test_incomplete_design_many_raters_uses_floyd():
    I, J, R = 1000, 5000, 7  # I * J > _PERMUTE_LIMIT
    assert I * J > simmod._PERMUTE_LIMIT
    sim = simulate_dawid_skene(I, J, n_categories=3, raters_per_item=R, seed=4)
    _check_incomplete(sim, I, J, R, 1)
    # raters spread over the whole range
    assert sim.data.rater.min() < 100 and sim.data.rater.max() > J - 100


def test_raters_per_item_equal_to_raters_is_complete():
    sim = simulate_dawid_skene(10, 3, n_categories=2, raters_per_item=3, seed=0)
    _check_incomplete(sim, 10, 3, 3, 1)


# ------------------------------------------------------------- distributions
def test_frequencies_given_z_match_theta():
    K, J, I = 3, 3, 20000
    theta = np.array(
        [
            [[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.05, 0.05, 0.9]],
            [[0.5, 0.3, 0.2], [0.3, 0.4, 0.3], [0.2, 0.1, 0.7]],
            [[0.6, 0.0, 0.4], [0.0, 1.0, 0.0], [0.3, 0.3, 0.4]],
        ]
    )
    pi = np.array([0.5, 0.3, 0.2])
    sim = simulate_dawid_skene(I, J, pi=pi, theta=theta, seed=21)
    assert np.allclose(sim.theta, theta)
    emp, n = _empirical_theta(sim)
    se = np.sqrt(theta * (1 - theta) / n[:, :, None])
    assert np.all(np.abs(emp - theta) <= 4.5 * se + 1e-12)
    # zero probabilities are never drawn
    assert np.all(emp[theta == 0] == 0)
    zf = np.bincount(sim.z, minlength=K) / I
    assert np.all(np.abs(zf - pi) < 4.5 * np.sqrt(pi * (1 - pi) / I))


@pytest.mark.parametrize("name", list(ALL))
def test_each_model_ratings_follow_its_theta(name):
    sim = ALL[name](8000, 3, n_categories=3, repeats=2, seed=7)
    emp, n = _empirical_theta(sim)
    se = np.sqrt(sim.theta * (1 - sim.theta) / np.maximum(n, 1)[:, :, None])
    ok = n[:, :, None] > 0
    assert np.all((np.abs(emp - sim.theta) <= 5 * se + 1e-3) | ~ok)
    assert np.allclose(sim.theta.sum(axis=2), 1)
    assert np.isclose(sim.pi.sum(), 1)


def test_default_parameters_are_diagonal_heavy():
    sim = simulate_dawid_skene(10, 200, n_categories=4, seed=2)
    diag = np.diagonal(sim.theta, axis1=1, axis2=2)
    off = sim.theta.sum(axis=2) - diag
    assert diag.mean() > 0.5 > off.mean() / 3
    h = simulate_hierarchical(10, 200, n_categories=4, seed=2)
    hd = np.diagonal(h.theta, axis1=1, axis2=2).mean()
    assert hd > 1 / 4 + 0.1


# ---------------------------------------------------------- model structure
def test_class_conditional_structure():
    p = np.array([[0.9, 0.6, 0.7], [0.5, 0.8, 0.95]])
    sim = simulate_class_conditional(100, 2, p=p, seed=0)
    th = sim.theta
    K = 3
    assert np.allclose(np.diagonal(th, axis1=1, axis2=2), p)
    off = ~np.eye(K, dtype=bool)
    for j in range(2):
        for k in range(K):
            row = th[j, k][off[k]]
            assert np.allclose(row, (1 - p[j, k]) / (K - 1))
    assert np.array_equal(sim.params["p"], p)
    # drawn p follows the same structure
    sim2 = simulate_class_conditional(10, 6, n_categories=4, seed=1)
    assert sim2.params["p"].shape == (6, 4)
    assert np.allclose(sim2.theta, class_conditional_theta(sim2.params["p"]))
    assert np.unique(sim2.params["p"]).size == 24  # per rater and class


def test_homogeneous_theta_identical_across_raters():
    sim = simulate_homogeneous(50, 5, n_categories=3, seed=3)
    assert sim.theta.shape == (5, 3, 3)
    assert np.all(sim.theta == sim.theta[0])
    theta = np.array([[0.7, 0.3], [0.2, 0.8]])
    sim = simulate_homogeneous(50, 4, theta=theta, seed=3)
    assert np.allclose(sim.theta, theta[None])


def test_dawid_skene_raters_differ_and_shared_theta_broadcast():
    sim = simulate_dawid_skene(20, 4, n_categories=3, seed=0)
    assert not np.allclose(sim.theta[0], sim.theta[1])
    one = np.array([[0.9, 0.1], [0.3, 0.7]])
    sim = simulate_dawid_skene(20, 4, theta=one, seed=0)
    assert sim.theta.shape == (4, 2, 2) and np.allclose(sim.theta, one)


def test_hierarchical_structure_off_diagonals_vary():
    K, J = 3, 50
    mu = np.array([[2.0, 0.0, -1.0], [0.5, 2.5, 0.0], [0.0, 0.0, 1.5]])
    sigma = np.full((K, K), 0.8)
    sim = simulate_hierarchical(20, J, mu=mu, sigma=sigma, seed=5)
    g = sim.params["gamma"]
    assert g.shape == (J, K, K)
    assert np.array_equal(sim.params["mu"], mu) and np.array_equal(sim.params["sigma"], sigma)
    e = np.exp(g - g.max(axis=2, keepdims=True))
    assert np.allclose(sim.theta, e / e.sum(axis=2, keepdims=True))
    # every entry of gamma varies between raters, off-diagonal ones included
    sd = g.std(axis=0)
    assert np.all(sd > 0.4)
    assert np.all(np.abs(g.mean(axis=0) - mu) < 4 * 0.8 / np.sqrt(J))
    # softmax is invariant to a shift, so compare log-odds against the first column
    assert np.all(sim.theta[:, 0, 1].std() > 0.01) and np.all(sim.theta[:, 1, 0].std() > 0.01)
    # drawn mu and sigma: diagonal mu larger on average, sigma positive, off-diagonals free
    d = simulate_hierarchical(20, 5, n_categories=6, seed=9)
    m = d.params["mu"]
    assert np.diag(m).mean() > m[~np.eye(6, dtype=bool)].mean() + 1
    assert np.all(d.params["sigma"] > 0)
    assert np.unique(d.params["sigma"]).size == 36


# ------------------------------------------------------------------- output
def test_truth_series_uses_labels():
    sim = simulate_dawid_skene(12, 3, n_categories=3, seed=0, categories=["lo", "mid", "hi"])
    t = sim.truth
    assert isinstance(t, pd.Series)
    assert list(t.index) == list(sim.data.unit_labels) == list(range(1, 13))
    assert list(t) == [["lo", "mid", "hi"][k] for k in sim.z]
    assert list(sim.data.categories) == ["lo", "mid", "hi"]
    long = sim.data.to_long()
    assert set(long["rating"]) <= {"lo", "mid", "hi"}
    tl = sim.theta_labelled
    assert tl.loc[(2, "mid", "hi"), "theta"] == sim.theta[1, 1, 2]


def test_categories_fix_k():
    sim = simulate("hierarchical", 30, 2, categories=["neg", "neu", "pos"], seed=0)
    assert sim.data.n_categories == 3 and sim.theta.shape == (2, 3, 3)
    assert set(sim.truth) <= {"neg", "neu", "pos"}


def test_simulation_is_frozen():
    sim = simulate_dawid_skene(5, 2, n_categories=2, seed=0)
    with pytest.raises(AttributeError):
        sim.z = np.zeros(5)  # type: ignore[misc]
    with pytest.raises(ValueError):
        sim.z[0] = 1
    assert isinstance(sim.data, RatingData)


# ---------------------------------------------------------------- dispatcher
@pytest.mark.parametrize("name", list(ALL))
def test_dispatch_by_name_matches_function(name):
    a = simulate(name, 40, 3, n_categories=3, raters_per_item=2, seed=8)
    b = ALL[name](40, 3, n_categories=3, raters_per_item=2, seed=8)
    assert _same(a, b)


def test_dispatch_model_object_uses_its_priors():
    K = 3
    sharp = np.full((K, K), 0.01)
    np.fill_diagonal(sharp, 1000.0)
    sim = simulate(DawidSkene(beta=sharp), 50, 4, n_categories=K, seed=0)
    assert np.all(np.diagonal(sim.theta, axis1=1, axis2=2) > 0.97)
    sim = simulate(HomogeneousDawidSkene(alpha=[1000, 1, 1]), 50, 4, n_categories=K, seed=0)
    assert sim.pi[0] > 0.95 and np.all(sim.theta == sim.theta[0])
    sim = simulate(ClassConditionalDawidSkene(beta1=1000, beta2=1), 50, 4, n_categories=K, seed=0)
    assert np.all(sim.params["p"] > 0.97) and sim.model == "class_conditional"
    sim = simulate(HierarchicalDawidSkene(), 50, 4, n_categories=K, seed=0)
    assert sim.model == "hierarchical"
    # defaults of a model object equal the named model's defaults
    assert _same(
        simulate(DawidSkene(), 30, 3, n_categories=3, seed=1), simulate("dawid_skene", 30, 3, n_categories=3, seed=1)
    )


def test_dispatch_errors():
    with pytest.raises(ValueError, match="unknown model 'rasch'"):
        simulate("rasch", 10, 2, n_categories=2)
    with pytest.raises(ValueError, match=r"\['mu'\] do not apply to the Dawid-Skene model"):
        simulate("dawid_skene", 10, 2, n_categories=2, mu=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="'theta'.*do not apply to the Class-conditional"):
        simulate("class_conditional", 10, 2, n_categories=2, theta=np.eye(2))
    sim = simulate("class_conditional", 10, 2, p=[0.9, 0.8], seed=0)
    assert sim.params["p"].shape == (2, 2)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: simulate_dawid_skene(10, 2), "give n_categories"),
        (lambda: simulate_dawid_skene(10, 2, n_categories=1), "n_categories must be an integer >= 2"),
        (lambda: simulate_dawid_skene(0, 2, n_categories=2), "n_items must be an integer >= 1"),
        (lambda: simulate_dawid_skene(10, 2.5, n_categories=2), "n_raters must be an integer"),
        (lambda: simulate_dawid_skene(10, 2, n_categories=2, repeats=0), "repeats must be an integer >= 1"),
        (
            lambda: simulate_dawid_skene(10, 2, n_categories=2, raters_per_item=3),
            "raters_per_item must be at most n_raters = 2",
        ),
        (lambda: simulate_dawid_skene(10, 2, pi=[0.5, 0.6]), "pi must sum to 1"),
        (lambda: simulate_dawid_skene(10, 2, pi=[1.5, -0.5]), "pi must be non-negative"),
        (lambda: simulate_dawid_skene(10, 2, n_categories=3, pi=[0.5, 0.5]), r"pi must have shape \(K,\) = \(3,\)"),
        (
            lambda: simulate_dawid_skene(10, 2, theta=np.ones((3, 2, 2)) / 2),
            r"theta must have shape \(J, K, K\) = \(2, 2, 2\)",
        ),
        (lambda: simulate_dawid_skene(10, 2, theta=[[0.5, 0.5], [0.5, 0.6]]), r"theta must sum to 1.*index \(1,\)"),
        (lambda: simulate_dawid_skene(10, 2, theta=[[np.nan, 0.5], [0.5, 0.5]]), "theta must be finite"),
        (lambda: simulate_homogeneous(10, 2, theta=np.ones((2, 2, 2)) / 2), r"theta must have shape \(K, K\)"),
        (lambda: simulate_class_conditional(10, 2, p=[1.2, 0.5]), r"p must hold probabilities in \[0, 1\]"),
        (lambda: simulate_class_conditional(10, 2, p=np.ones((3, 2))), r"p must have shape \(J, K\) = \(2, 2\)"),
        (lambda: simulate_hierarchical(10, 2, n_categories=2, sigma=-1.0), "sigma must be > 0"),
        (lambda: simulate_hierarchical(10, 2, mu=np.zeros((2, 3))), r"mu must have shape \(K, K\) = \(3, 3\)"),
        (lambda: simulate_hierarchical(10, 2, n_categories=2, mu="abc"), "mu must be a numeric array"),
        (
            lambda: simulate_dawid_skene(10, 2, n_categories=3, categories=["a", "b"]),
            "categories must have K = 3 labels; got 2",
        ),
        (lambda: simulate_homogeneous(10, 2, categories=["a", "a"]), "categories must be distinct"),
        (lambda: simulate_class_conditional(10, 2, n_categories=2, repeats=-1), "repeats must be an integer >= 1"),
    ],
)
def test_validation_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------- scale
def test_large_simulation_fast_and_lean():
    """10^7 ratings (K=5, 5 ratings per item, 5000 raters): seconds, well under 1 GiB."""
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        sim = simulate_dawid_skene(2_000_000, 5000, n_categories=5, raters_per_item=5, seed=1)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    d = sim.data
    assert d.n_ratings == 10**7 and d.n_units == 2_000_000 and d.n_raters == 5000
    assert elapsed < 15
    assert peak < 0.6 * 2**30
    # five distinct raters per item
    r = np.sort(d.rater.reshape(-1, 5), axis=1)
    assert np.all(np.diff(r, axis=1) > 0)
    # the category frequencies agree with pi and theta
    expected = sim.pi @ sim.theta.mean(axis=0)
    observed = np.bincount(d.rating, minlength=5) / d.n_ratings
    assert np.allclose(observed, expected, atol=0.01)
