"""next_ratings: information gains against brute-force enumeration, batch behaviour, constraints."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater.decisions import _information as info
from pyrater.decisions import next_ratings

LN2 = np.log(2)


def brute_mi(q: np.ndarray, thetas: list[np.ndarray]) -> float:
    """I(z; y_1..y_m) in nats by enumerating every outcome; q (S, K), thetas: list of (S, K, K)."""
    S, K = q.shape
    qbar = q.mean(axis=0)
    h_z = -np.sum(qbar[qbar > 0] * np.log(qbar[qbar > 0]))
    h_z_given_y = 0.0
    for ys in itertools.product(range(K), repeat=len(thetas)):
        joint = q.copy()  # (S, K)
        for th, y in zip(thetas, ys):
            joint = joint * th[:, :, y]
        pz_y = joint.mean(axis=0)  # P(z, y)
        p_y = pz_y.sum()
        if p_y <= 0:
            continue
        post = pz_y / p_y
        h_z_given_y += p_y * -np.sum(post[post > 0] * np.log(post[post > 0]))
    return h_z - h_z_given_y


def brute_error_drop(q: np.ndarray, thetas: list[np.ndarray]) -> float:
    """E[max_k P(z = k | y)] - max_k P(z = k) by enumeration; q (S, K), thetas: list of (S, K, K)."""
    S, K = q.shape
    total = 0.0
    for ys in itertools.product(range(K), repeat=len(thetas)):
        joint = q.copy()
        for th, y in zip(thetas, ys):
            joint = joint * th[:, :, y]
        total += joint.mean(axis=0).max()
    return total - q.mean(axis=0).max()


def random_draws(rng, S, J, K):
    q = rng.dirichlet(np.ones(K), size=S)
    theta = rng.dirichlet(np.ones(K) * 0.7, size=(S, J, K)) * 0.5 + np.eye(K)[None, None] * 0.5
    return q, theta


def test_initial_gains_equal_brute_force():
    rng = np.random.default_rng(1)
    for S, K in ((1, 2), (1, 4), (5, 3)):
        q, theta = random_draws(rng, S, 4, K)
        g, e = info.initial_gains(q[None], theta, both=True)
        for j in range(4):
            assert g[0, j] == pytest.approx(brute_mi(q, [theta[:, j]]), abs=1e-12)
            assert e[0, j] == pytest.approx(brute_error_drop(q, [theta[:, j]]), abs=1e-12)


def test_conditional_gains_equal_brute_force_difference():
    rng = np.random.default_rng(2)
    for S, K, m in ((1, 3, 1), (4, 3, 2), (3, 2, 3)):
        q, theta = random_draws(rng, S, 5, K)
        pend = list(range(m))
        cand = list(range(m, 5))
        g, e = info.conditional_gains(q, theta[:, pend], theta[:, cand], max_outcomes=10**6, rng=rng, both=True)
        base = brute_mi(q, [theta[:, a] for a in pend])
        base_e = brute_error_drop(q, [theta[:, a] for a in pend])
        for c_pos, c in enumerate(cand):
            full = brute_mi(q, [theta[:, a] for a in pend] + [theta[:, c]])
            assert g[c_pos] == pytest.approx(full - base, abs=1e-12)
            full_e = brute_error_drop(q, [theta[:, a] for a in pend] + [theta[:, c]])
            assert e[c_pos] == pytest.approx(max(full_e - base_e, 0.0), abs=1e-12)


def test_sampled_outcomes_estimate_the_exact_gain():
    rng = np.random.default_rng(3)
    q, theta = random_draws(rng, 4, 6, 3)
    exact = info.conditional_gains(q, theta[:, :4], theta[:, 4:], max_outcomes=10**6, rng=rng)
    approx = info.conditional_gains(q, theta[:, :4], theta[:, 4:], max_outcomes=20000, rng=np.random.default_rng(0))
    # 3^4 = 81 outcomes > ... force sampling with a small cap:
    sampled = info.conditional_gains(q, theta[:, :4], theta[:, 4:], max_outcomes=50, rng=np.random.default_rng(0))
    np.testing.assert_allclose(approx, exact, atol=1e-12)  # 81 <= 20000: enumerated
    assert np.all(np.abs(sampled - exact) < 0.25 * exact.max() + 0.02)
    many = np.mean(
        [info.conditional_gains(q, theta[:, :4], theta[:, 4:], 50, np.random.default_rng(s)) for s in range(200)],
        axis=0,
    )
    np.testing.assert_allclose(many, exact, atol=0.01)


@pytest.fixture(scope="module")
def unequal_raters():
    """3 classes, 6 raters: two experts, two mediocre, two near-random; 2 ratings per item."""
    K = 3
    acc = [0.92, 0.9, 0.7, 0.65, 0.45, 0.4]
    theta = np.stack([np.full((K, K), (1 - a) / (K - 1)) + np.eye(K) * (a - (1 - a) / (K - 1)) for a in acc])
    sim = pyrater.simulate(
        "dawid_skene", 400, 6, n_categories=K, raters_per_item=2, pi=[0.5, 0.3, 0.2], theta=theta, seed=7
    )
    fit = pyrater.em(sim.data, method="map")
    return sim, fit


def test_first_pick_is_the_best_pair_and_gains_match_the_model(unequal_raters):
    sim, fit = unequal_raters
    plan = next_ratings(fit, 30, rater_uncertainty="none")
    assert list(plan.columns) == [
        "rank",
        "item",
        "rater",
        "info_gain",
        "error_reduction",
        "item_entropy",
        "item_error",
        "cost",
        "cumulative_gain",
    ]
    assert plan["rank"].tolist() == list(range(1, 31))
    # brute force over every unrated (item, rater) pair with the fit's own probabilities and theta
    q = fit.class_probabilities().to_numpy()
    theta = np.asarray(fit.point_estimate("theta"))
    rated = set(zip(sim.data.unit.tolist(), sim.data.rater.tolist()))
    best = max(
        (brute_mi(q[i][None], [theta[j][None]]), i, j)
        for i in range(q.shape[0])
        for j in range(theta.shape[0])
        if (i, j) not in rated
    )
    assert plan["info_gain"].iloc[0] * LN2 == pytest.approx(best[0], abs=1e-10)
    assert plan["item_entropy"].iloc[0] * LN2 == pytest.approx(-np.sum(q[best[1]] * np.log(q[best[1]])), abs=1e-10)
    # the gains of one item's successive picks are conditional informations
    i_label = plan["item"].iloc[0]
    one = next_ratings(fit, 3, items=[i_label], rater_uncertainty="none")
    i = sim.data.encode_units([i_label])[0]
    js = sim.data.rater_labels.get_indexer(one["rater"])
    chain = [brute_mi(q[i][None], [theta[j][None] for j in js[: n + 1]]) for n in range(3)]
    np.testing.assert_allclose(one["cumulative_gain"] * LN2, chain, atol=1e-10)
    assert one["info_gain"].is_monotonic_decreasing  # diminishing returns


def test_error_objective(unequal_raters):
    sim, fit = unequal_raters
    plan = next_ratings(fit, 40, objective="error", rater_uncertainty="none")
    assert plan.attrs["objective"] == "error"
    q = fit.class_probabilities().to_numpy()
    theta = np.asarray(fit.point_estimate("theta"))
    rated = set(zip(sim.data.unit.tolist(), sim.data.rater.tolist()))
    best = max(
        brute_error_drop(q[i][None], [theta[j][None]])
        for i in range(q.shape[0])
        for j in range(theta.shape[0])
        if (i, j) not in rated
    )
    assert plan["error_reduction"].iloc[0] == pytest.approx(best, abs=1e-10)
    assert plan["error_reduction"].is_monotonic_decreasing or (np.diff(plan["error_reduction"]) <= 1e-6).all()
    np.testing.assert_allclose(plan["cumulative_gain"], plan["error_reduction"].cumsum())
    # the error objective favours items whose top class is least sure; information the most entropic
    info_plan = next_ratings(fit, 40, rater_uncertainty="none")
    assert plan["item_error"].mean() >= info_plan["item_error"].mean() - 1e-12


def test_batch_spreads_and_prefers_good_raters(unequal_raters):
    sim, fit = unequal_raters
    plan = next_ratings(fit, 100)
    assert plan["item"].nunique() >= 80  # does not pile on a few items
    experts = {1, 2}  # rater labels of the two accurate raters
    assert plan["rater"].isin(experts).mean() >= 0.8
    assert plan["info_gain"].iloc[:50].mean() >= plan["info_gain"].iloc[50:].mean()
    # never an already rated pair
    rated = set(zip(sim.data.unit_labels[sim.data.unit], sim.data.rater_labels[sim.data.rater]))
    assert not any((i, r) in rated for i, r in zip(plan["item"], plan["rater"]))


def test_constraints(unequal_raters):
    sim, fit = unequal_raters
    p = next_ratings(fit, 60, max_per_rater=10)
    assert p["rater"].value_counts().max() <= 10 and len(p) == 60
    p = next_ratings(fit, 40, raters=[3, 4])
    assert set(p["rater"]) <= {3, 4}
    p = next_ratings(fit, 30, max_per_item=1)
    assert p["item"].is_unique
    items = list(sim.data.unit_labels[:20])
    p = next_ratings(fit, 15, items=items)
    assert set(p["item"]) <= set(items)
    cand = pd.DataFrame({"item": list(sim.data.unit_labels[:50]) * 2, "rater": [5] * 50 + [6] * 50})
    p = next_ratings(fit, 20, candidates=cand)
    assert set(zip(p["item"], p["rater"])) <= set(zip(cand["item"], cand["rater"]))
    # costs: an expert at 4x the price; budget is spent in cost units
    cost = {1: 4.0, 2: 4.0, 3: 1.0, 4: 1.0, 5: 1.0, 6: 1.0}
    p = next_ratings(fit, 40, cost=cost, rater_uncertainty="none")
    assert 40 - 4 < p["cost"].sum() <= 40 + 1e-9
    ratio = (p["info_gain"] / p["cost"]).to_numpy()
    assert np.all(np.diff(ratio) <= 1e-12)  # greedy on a submodular gain: ratios never increase
    cheap = next_ratings(fit, 40, rater_uncertainty="none")
    assert p["rater"].isin([1, 2]).mean() < cheap["rater"].isin([1, 2]).mean()


def test_known_items_and_exhausted_candidates_are_skipped(unequal_raters):
    sim, _ = unequal_raters
    known = {sim.data.unit_labels[i]: sim.data.categories[sim.z[i]] for i in range(50)}
    fit = pyrater.em(sim.data, method="map", known=known)
    p = next_ratings(fit, 50)
    assert not set(p["item"]) & set(known)
    small = pd.DataFrame({"item": [sim.data.unit_labels[60]] * 2, "rater": [5, 6]})
    small = small[[not ((sim.data.unit == 60) & (sim.data.rater == r - 1)).any() for r in small["rater"]]]
    with pytest.warns(RuntimeWarning, match="positive expected gain"):
        p = next_ratings(fit, 5, candidates=small)
    assert len(p) == len(small)


def test_pruning_is_exact(unequal_raters):
    _, fit = unequal_raters
    a = next_ratings(fit, 25)  # skips low-entropy items
    b = next_ratings(fit, 25, max_per_rater=10**6)  # a workload cap turns the skipping off
    assert b.attrs["items_scored"] >= a.attrs["items_scored"]
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.filterwarnings("ignore:MCMC problems")
def test_draws_are_rao_blackwellised():
    theta = np.array([[[0.9, 0.1], [0.15, 0.85]], [[0.7, 0.3], [0.3, 0.7]], [[0.85, 0.15], [0.1, 0.9]]])
    sim = pyrater.simulate("dawid_skene", 150, 3, n_categories=2, raters_per_item=2, pi=[0.6, 0.4], theta=theta, seed=1)
    gibbs = pyrater.fit(sim.data, "dawid_skene", method="gibbs", draws=200, warmup=200, chains=2, seed=2)
    p = next_ratings(gibbs, 20, n_draws=16, seed=0)
    assert p.attrs["n_draws"] == 16 and len(p) == 20
    # with every draw equal to one point, the Rao-Blackwellised gains reduce to the point gains
    q = np.full((8, 2), 0.5)
    q[:, 0] = 0.7
    q[:, 1] = 0.3
    th = np.broadcast_to(theta[None], (8, 3, 2, 2))
    np.testing.assert_allclose(info.initial_gains(q[None], th), info.initial_gains(q[None, :1], th[:1]))
    # parameter uncertainty lowers the value of a rating: mixing two error matrices
    th2 = th.copy()
    th2[::2, 0] = [[0.55, 0.45], [0.45, 0.55]]
    mixed = info.initial_gains(q[None], th2)[0, 0]
    assert mixed < info.initial_gains(q[None, :1], th[:1])[0, 0]


def test_bad_arguments(unequal_raters, caries_path):
    sim, fit = unequal_raters
    for kwargs, word in (
        ({"budget": 0}, "budget"),
        ({"budget": 2.5}, "budget"),
        ({"budget": 5, "raters": ["nobody"]}, "raters"),
        ({"budget": 5, "items": ["nothing"]}, "items"),
        ({"budget": 5, "n_draws": 0}, "n_draws"),
        ({"budget": 5, "max_per_item": 0}, "max_per_item"),
        ({"budget": 5, "cost": {1: -1.0}}, "cost"),
        ({"budget": 5, "candidates": pd.DataFrame({"x": [1]})}, "candidates"),
        ({"budget": 5, "seed": -3}, "seed"),
        ({"budget": 5, "objective": "accuracy"}, "objective"),
        ({"budget": 5, "rater_uncertainty": "laplace"}, "rater_uncertainty"),
        ({"budget": 5, "rater_uncertainty": "draws"}, "draws"),
    ):
        with pytest.raises(ValueError, match=word):
            next_ratings(fit, **kwargs)
    grouped = pyrater.as_rating_data(pd.read_csv(caries_path), data_format="grouped", tally="n")
    with pytest.raises(ValueError, match="grouped"):
        next_ratings(pyrater.em(grouped, method="map"), 5)
    with pytest.raises(TypeError, match="fit"):
        next_ratings(sim.data, 5)


def test_active_learning_beats_random_on_simulated_ds():
    """A short version of bench/active_learning.py: after 4 rounds, next_ratings > random in accuracy."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "active_learning.py"
    spec = importlib.util.spec_from_file_location("active_learning", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.simulate_study(n_items=600, rounds=4, per_round=150, seeds=[0], strategies=("random", "next_ratings"))
    last = res[res["round"] == 4].set_index("strategy")["accuracy"]
    assert last["next_ratings"] >= last["random"] + 0.01


def test_draw_posteriors_match_the_kernel():
    from pyrater.decisions.next_ratings import DrawPosteriors
    from pyrater.models.kernels import class_log_posterior

    rng = np.random.default_rng(4)
    sim = pyrater.simulate("dawid_skene", 200, 5, n_categories=3, raters_per_item=3, seed=3)
    S = 6
    pi = rng.dirichlet(np.ones(3), size=S)
    theta = rng.dirichlet(np.ones(3), size=(S, 5, 3))
    known = np.full(200, -1)
    known[:10] = 2
    rows = np.array([0, 5, 17, 150, 199])
    got = DrawPosteriors(sim.data.counts, np.log(pi), np.log(theta), known)(rows)
    for s in range(S):
        lp, _ = class_log_posterior(sim.data.counts[rows], np.log(pi[s]), np.log(theta[s]), known=known[rows])
        np.testing.assert_allclose(got[:, s], np.exp(lp), atol=1e-12)


def test_dirichlet_rater_uncertainty_distrusts_raters_seen_rarely():
    """Two raters with the same estimated error matrix: the one with few ratings is worth less."""
    from pyrater.decisions.next_ratings import dirichlet_rater_draws

    K = 2
    theta = np.array([[[0.85, 0.15], [0.15, 0.85]]] * 3)
    sim = pyrater.simulate("dawid_skene", 600, 3, n_categories=K, raters_per_item=2, pi=[0.5, 0.5], theta=theta, seed=3)
    long = sim.data.to_long()
    # rater 3 keeps only 6 of its ratings
    r3 = long.index[long["rater"] == 3]
    long = long.drop(r3[6:])
    data = pyrater.RatingData.from_long(long)
    fit = pyrater.em(data, method="map")
    est = np.asarray(fit.point_estimate("theta"))
    q = fit.class_probabilities().to_numpy()
    draws = dirichlet_rater_draws(data.counts, q, est, 4000, np.random.default_rng(0))
    # the draws' spread shrinks with the number of ratings
    sd = draws[:, :, 0, 0].std(axis=0)
    assert sd[2] > 3 * sd[0]
    # expected counts: the draws' means are the conjugate posterior means (1 + n) / (K + n_k)
    n = np.asarray(data.counts.T @ q).reshape(3, K, K).transpose(0, 2, 1)
    np.testing.assert_allclose(draws.mean(axis=0), (1 + n) / (K + n.sum(-1, keepdims=True)), atol=0.01)
    # with equal point estimates a rare rater is chosen less often under rater uncertainty
    eq = pyrater.em(data, "homogeneous", method="map")
    hom = dirichlet_rater_draws(
        data.counts,
        eq.class_probabilities().to_numpy(),
        np.asarray(eq.point_estimate("theta")),
        50,
        np.random.default_rng(1),
    )
    assert np.allclose(hom[:, 0], hom[:, 2])  # a shared matrix stays shared
    plan_none = next_ratings(fit, 100, rater_uncertainty="none")
    plan_dir = next_ratings(fit, 100, n_draws=64, seed=2)
    assert plan_dir.attrs["rater_uncertainty"] == "dirichlet" and plan_dir.attrs["n_draws"] == 64
    assert (plan_dir["rater"] == 3).sum() <= (plan_none["rater"] == 3).sum()
    pd.testing.assert_frame_equal(plan_dir, next_ratings(fit, 100, n_draws=64, seed=2))  # seeded
