"""The item_difficulty family with K >= 3 categories: simulator, log joint and quadrature against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logsumexp

import pyrater
from pyrater.models.item_difficulty import (
    ItemDifficulty,
    ability_of,
    accuracy_theta,
    item_log_joint,
    item_log_joint_k,
)
from pyrater.models.item_marginal import marginal_log_joint, marginal_log_joint_k, quadrature_rule

K = 3


def _brute_log_joint(data, log_pi, ability, difficulty, discrimination, guessing):
    """``log p(y_i, z_i = k)`` by a loop over the ratings, from the model's definition (one draw)."""
    n_cat = log_pi.size
    out = np.tile(log_pi, (data.n_units, 1))
    for i, j, y in zip(data.unit, data.rater, data.rating):
        for k in range(n_cat):
            r = guessing[i] + (1 - guessing[i]) * expit(discrimination[i] * (ability[j, k] - difficulty[i]))
            out[i, k] += np.log(r) if y == k else np.log((1 - r) / (n_cat - 1))
    return out


def test_simulator_rates_right_by_the_class_accuracy_and_errs_evenly():
    I, J = 6000, 3
    acc = np.array([[2.0, 0.5, 1.0], [1.0, 1.5, -0.5], [0.0, 2.5, 1.5]])
    sim = pyrater.simulate(
        "item_difficulty", I, J, n_categories=K, logit_accuracy=acc, difficulty=np.zeros(I),
        discrimination=np.ones(I), guessing=np.zeros(I), seed=4,
    )  # fmt: skip
    assert sim.theta.shape == (J, K, K) and sim.params["logit_accuracy"].shape == (J, K)
    np.testing.assert_allclose(sim.theta.sum(axis=2), 1.0)
    z = sim.z[sim.data.unit]
    for j in range(J):
        for k in range(K):
            rows = (sim.data.rater == j) & (z == k)
            freq = np.bincount(sim.data.rating[rows], minlength=K) / rows.sum()
            se = np.sqrt(sim.theta[j, k] * (1 - sim.theta[j, k]) / rows.sum())
            assert np.all(np.abs(freq - sim.theta[j, k]) < 4 * se + 1e-3), (j, k, freq, sim.theta[j, k])
    np.testing.assert_allclose(np.diag(sim.theta[1]), expit(acc[1]))
    # the same seed gives the same data; the generator is the family's
    again = pyrater.simulate_item_difficulty(
        I, J, n_categories=K, logit_accuracy=acc, difficulty=np.zeros(I), discrimination=np.ones(I),
        guessing=np.zeros(I), seed=4,
    )  # fmt: skip
    np.testing.assert_array_equal(again.data.rating, sim.data.rating)


def test_log_joint_matches_a_loop_over_the_ratings_and_the_binary_function():
    sim = pyrater.simulate("item_difficulty", 30, 4, n_categories=K, raters_per_item=3, seed=1)
    p = sim.params
    args = (p["logit_accuracy"], p["difficulty"], p["discrimination"], p["guessing"])
    log_pi = np.log(sim.pi)
    got = item_log_joint_k(sim.data.counts, K, log_pi[None], *(a[None] for a in args))[0]
    np.testing.assert_allclose(got, _brute_log_joint(sim.data, log_pi, *args), rtol=1e-12)
    # K = 2: the general function is the binary model with ability = (logit_spec, logit_sens)
    two = pyrater.simulate("item_difficulty", 30, 4, raters_per_item=3, seed=1)
    q = {k: v[None] for k, v in two.params.items()}
    lp2 = np.log(two.pi)[None]
    binary = item_log_joint(
        two.data.counts, lp2, q["logit_sens"], q["logit_spec"], q["difficulty"], q["discrimination"], q["guessing"]
    )
    general = item_log_joint_k(
        two.data.counts, 2, lp2, ability_of(q, 2), q["difficulty"], q["discrimination"], q["guessing"]
    )
    np.testing.assert_allclose(general, binary, rtol=1e-13)
    p2 = two.params
    brute = _brute_log_joint(
        two.data, lp2[0], p2["logit_accuracy"], p2["difficulty"], p2["discrimination"], p2["guessing"]
    )
    np.testing.assert_allclose(general[0], brute, rtol=1e-12)


def test_theta_of_the_accuracies_spreads_errors_evenly():
    acc = np.array([[0.3, -1.0, 2.0, 0.0]])
    theta = accuracy_theta(acc)
    assert theta.shape == (1, 4, 4)
    np.testing.assert_allclose(np.diag(theta[0]), expit(acc[0]))
    off = theta[0][~np.eye(4, dtype=bool)].reshape(4, 3)
    np.testing.assert_allclose(off, np.repeat(((1 - expit(acc[0])) / 3)[:, None], 3, axis=1))


def test_marginal_log_joint_matches_the_quadrature_sum_by_loops():
    sim = pyrater.simulate("item_difficulty", 12, 3, n_categories=K, raters_per_item=2, seed=6)
    model = ItemDifficulty(item_effects="marginal")
    rule = quadrature_rule(model.priors(K, 3), max_ratings=2, sizes=(7, 3, 3))
    acc = sim.params["logit_accuracy"]
    log_pi = np.log(sim.pi)
    got = marginal_log_joint_k(sim.data.counts, log_pi[None], acc[None], rule)[0]
    per_node = np.stack(
        [
            _brute_log_joint(
                sim.data, log_pi, acc, np.full(12, rule.difficulty[q]), np.full(12, rule.discrimination[q]),
                np.full(12, rule.guessing[q]),
            ) + rule.log_weight[q]
            for q in range(rule.n_nodes)
        ]
    )  # fmt: skip
    np.testing.assert_allclose(got, logsumexp(per_node, axis=0), rtol=1e-12)
    # K = 2: the binary function is the general one's special case
    two = pyrater.simulate("item_difficulty", 12, 3, raters_per_item=2, seed=6)
    p = two.params
    rule2 = quadrature_rule(model.priors(2, 3), max_ratings=2, sizes=(7, 3, 3))
    np.testing.assert_allclose(
        marginal_log_joint(two.data.counts, np.log(two.pi)[None], p["logit_sens"][None], p["logit_spec"][None], rule2),
        marginal_log_joint_k(two.data.counts, np.log(two.pi)[None], ability_of(p, 2)[None], rule2),
        rtol=1e-13,
    )


@pytest.mark.parametrize("K_", [3, 5])
def test_priors_and_stan_entries_for_k_categories(K_):
    model = ItemDifficulty(accuracy_prior=(1.0, 3.0))
    pr = model.priors(K_, 4)
    assert set(pr) == {"alpha", "accuracy_prior", "difficulty_scale", "discrimination_scale", "guessing_prior"}
    np.testing.assert_array_equal(pr["accuracy_prior"], np.tile([1.0, 3.0], (K_, 1)))
    assert pr["alpha"].shape == (K_,)
    stan = model.stan_priors(pr, K_, 4)
    assert stan["accuracy_prior"].shape == (K_, 2)
    assert ItemDifficulty().stan_priors(ItemDifficulty().priors(2, 4), 2, 4)["accuracy_prior"].shape == (0, 2)
    assert ItemDifficulty().stan_init(np.random.default_rng(0), K_, 4)["logit_accuracy"].shape == (4, K_)
