"""The item_difficulty Stan program against brute force: density, log_lik, variants (both engines)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logsumexp

from pyrater import ItemDifficulty, RatingData
from pyrater.inference.stan.data import stan_data
from pyrater.inference.stan.engines import StanDataError
from pyrater.models.item_difficulty import ITEM_PARAMETERS, item_log_joint

pytestmark = pytest.mark.stan

VARIANTS = [
    ItemDifficulty(),
    ItemDifficulty(discrimination=False, guessing=False),
    ItemDifficulty(discrimination=True, guessing=False, non_adversarial=False),
]


@pytest.fixture(scope="module")
def engine(stan_engine):
    return stan_engine


def tiny_data(I: int = 6, J: int = 3, seed: int = 0) -> RatingData:
    """Incomplete binary design with a repeated rating."""
    rng = np.random.default_rng(seed)
    item, rater = [], []
    for i in range(I):
        for j in rng.choice(J, size=rng.integers(1, J + 1), replace=False):
            item.append(i)
            rater.append(int(j))
    item.append(0)
    rater.append(int(rater[0]))  # rater rates item 0 twice
    rating = rng.integers(0, 2, size=len(item))
    return RatingData.from_codes(np.array(item), np.array(rater), rating, n_categories=2, n_items=I, n_raters=J)


def random_params(model: ItemDifficulty, I: int, J: int, rng: np.random.Generator) -> dict:
    spec = rng.normal(1.0, 1.0, size=J)
    sens = -spec + rng.uniform(0.1, 3.0, size=J) if model.non_adversarial else rng.normal(0.0, 1.5, size=J)
    out = {"pi": rng.dirichlet([2.0, 2.0]), "logit_spec": spec, "logit_sens": sens, "difficulty": rng.normal(size=I)}
    if model.discrimination:
        out["discrimination"] = np.exp(rng.normal(0.0, 0.5, size=I))
    if model.guessing:
        out["guessing"] = rng.uniform(0.01, 0.5, size=I)
    return out


def log_prior(model: ItemDifficulty, p: dict, d: dict) -> float:
    """The program's prior with scipy, every normalising constant kept."""
    lp = stats.dirichlet.logpdf(p["pi"], d["alpha"])
    (ms, ss), (mp, sp) = d["sens_prior"], d["spec_prior"]
    lp += stats.norm.logpdf(p["logit_sens"], ms, ss).sum() + stats.norm.logpdf(p["logit_spec"], mp, sp).sum()
    if model.non_adversarial:  # the normal prior truncated to logit_sens + logit_spec > 0
        lp -= len(p["logit_sens"]) * stats.norm.logcdf((ms + mp) / np.hypot(ss, sp))
    lp += stats.norm.logpdf(p["difficulty"], 0, d["difficulty_scale"]).sum()
    if model.discrimination:
        lp += stats.lognorm.logpdf(p["discrimination"], s=d["discrimination_scale"]).sum()
    if model.guessing:
        lp += stats.beta.logpdf(p["guessing"], *d["guessing_prior"]).sum()
    return float(lp)


def enumerate_log_lik(data: RatingData, p: dict, known: np.ndarray | None = None) -> np.ndarray:
    """log p(y_i) per item by a loop over items, raters and classes (no shared code with the kernel)."""
    I = data.n_units
    disc = p.get("discrimination", np.ones(I))
    guess = p.get("guessing", np.zeros(I))
    out = np.empty(I)
    for i in range(I):
        terms = []
        for z in (0, 1):
            t = np.log(p["pi"][z])
            for r, y in zip(data.rater[data.unit == i], data.rating[data.unit == i]):
                ability = p["logit_sens"][r] if z == 1 else p["logit_spec"][r]
                right = guess[i] + (1 - guess[i]) * expit(disc[i] * (ability - p["difficulty"][i]))
                t += np.log(right if y == z else 1 - right)
            terms.append(t)
        out[i] = terms[known[i]] if known is not None and known[i] >= 0 else np.logaddexp(*terms)
    return out


@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_density_and_log_lik_match_enumeration(engine, variant):
    model = VARIANTS[variant]
    data = tiny_data()
    rng = np.random.default_rng(10 + variant)
    known = np.full(data.n_units, -1)
    known[[1, 4]] = [0, 1]
    for known_arg in (None, known):
        d = stan_data(data, model, known=known_arg)
        params = random_params(model, data.n_units, data.n_raters, rng)
        ll = enumerate_log_lik(data, params, known_arg)
        lp = engine.log_prob("item_difficulty", d, params, jacobian=False)
        assert lp - log_prior(model, params, d) == pytest.approx(ll.sum(), rel=1e-10, abs=1e-8)
        gq = engine.generated_quantities("item_difficulty", d, params)
        np.testing.assert_allclose(gq["log_lik"], ll, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(gq["theta"][:, 1, 1], expit(params["logit_sens"]), rtol=1e-12)
        np.testing.assert_allclose(gq["theta"][:, 0, 0], expit(params["logit_spec"]), rtol=1e-12)


def test_numpy_log_joint_matches_enumeration():
    data = tiny_data(seed=3)
    model = ItemDifficulty()
    rng = np.random.default_rng(5)
    draws = [random_params(model, data.n_units, data.n_raters, rng) for _ in range(3)]
    lj = item_log_joint(
        data.counts,
        np.log(np.stack([p["pi"] for p in draws])),
        np.stack([p["logit_sens"] for p in draws]),
        np.stack([p["logit_spec"] for p in draws]),
        np.stack([p["difficulty"] for p in draws]),
        np.stack([p["discrimination"] for p in draws]),
        np.stack([p["guessing"] for p in draws]),
    )
    for s, p in enumerate(draws):
        np.testing.assert_allclose(logsumexp(lj[s], axis=1), enumerate_log_lik(data, p), rtol=1e-12)


def test_all_binary_patterns_sum_to_one():
    """The likelihood is a distribution over the ratings: the 2^n patterns of one item sum to 1."""
    model = ItemDifficulty()
    p = random_params(model, 1, 3, np.random.default_rng(1))
    total = []
    for ys in itertools.product([0, 1], repeat=3):
        d = RatingData.from_codes(np.zeros(3, int), np.arange(3), np.array(ys), n_categories=2, n_items=1, n_raters=3)
        total.append(enumerate_log_lik(d, p)[0])
        lj = item_log_joint(
            d.counts,
            np.log(p["pi"])[None],
            p["logit_sens"][None],
            p["logit_spec"][None],
            p["difficulty"][None],
            p["discrimination"][None],
            p["guessing"][None],
        )
        assert logsumexp(lj[0, 0]) == pytest.approx(total[-1], rel=1e-12)
    assert np.exp(logsumexp(total)) == pytest.approx(1.0, rel=1e-12)


# ------------------------------------------------------------------ K >= 3 categories (GLAD-type errors)
K3 = 3


def tiny_data_k3(seed: int = 0) -> RatingData:
    """3 items, 2 raters, K = 3: an incomplete design with a repeated rating."""
    rng = np.random.default_rng(seed)
    item = np.array([0, 0, 0, 1, 1, 2])
    rater = np.array([0, 1, 0, 0, 1, 1])  # rater 0 rates item 0 twice; item 2 has one rating
    rating = rng.integers(0, K3, size=item.size)
    return RatingData.from_codes(item, rater, rating, n_categories=K3, n_items=3, n_raters=2)


def stan_data_k(data: RatingData, model: ItemDifficulty, known: np.ndarray | None = None) -> dict:
    """The program's data at K >= 3: the common layout plus the model's prior entries."""
    K, J = data.n_categories, data.n_raters
    layout = stan_data(data, "dawid_skene", known=known)
    d = {key: layout[key] for key in ("K", "J", "I", "weight", "nnz", "w", "v", "u", "known", "write_log_lik")}
    d.update(model.stan_priors(model.priors(K, J), K, J))
    return d


def random_params_k(model: ItemDifficulty, K: int, I: int, J: int, rng: np.random.Generator) -> dict:
    """Random constrained values; without the constraint, some accuracies below chance."""
    if model.non_adversarial:
        accuracy = -np.log(K - 1) + rng.uniform(0.05, 3.0, size=(J, K))
    else:
        accuracy = rng.normal(0.0, 1.5, size=(J, K))
        accuracy[0, 1] = -np.log(K - 1) - 1.0  # an adversarial rater on class 2
    out = {"pi": rng.dirichlet(np.full(K, 2.0)), "logit_accuracy": accuracy, "difficulty": rng.normal(size=I)}
    if model.discrimination:
        out["discrimination"] = np.exp(rng.normal(0.0, 0.5, size=I))
    if model.guessing:
        out["guessing"] = rng.uniform(0.01, 0.5, size=I)
    return out


def log_prior_k(model: ItemDifficulty, p: dict, d: dict) -> float:
    """The K >= 3 prior with scipy: normal accuracies, truncated to above chance when non-adversarial."""
    K, J = d["K"], d["J"]
    lp = stats.dirichlet.logpdf(p["pi"], d["alpha"])
    for k, (m, s) in enumerate(d["accuracy_prior"]):
        lp += stats.norm.logpdf(p["logit_accuracy"][:, k], m, s).sum()
        if model.non_adversarial:  # each accuracy's normal prior truncated to > -log(K - 1)
            lp -= J * stats.norm.logsf(-np.log(K - 1), m, s)
    I = d["I"]
    lp += stats.norm.logpdf(p["difficulty"], 0, d["difficulty_scale"]).sum()
    if model.discrimination:
        lp += stats.lognorm.logpdf(p["discrimination"], s=d["discrimination_scale"]).sum()
        assert p["discrimination"].shape == (I,)
    if model.guessing:
        lp += stats.beta.logpdf(p["guessing"], *d["guessing_prior"]).sum()
    return float(lp)


def enumerate_log_lik_k(data: RatingData, p: dict, known: np.ndarray | None = None) -> np.ndarray:
    """log p(y_i) per item, K >= 3, by loops over items, classes and ratings (right: r; wrong: (1 - r) / (K - 1))."""
    I, K = data.n_units, data.n_categories
    disc = p.get("discrimination", np.ones(I))
    guess = p.get("guessing", np.zeros(I))
    out = np.empty(I)
    for i in range(I):
        terms = []
        for z in range(K):
            t = np.log(p["pi"][z])
            for r, y in zip(data.rater[data.unit == i], data.rating[data.unit == i]):
                right = guess[i] + (1 - guess[i]) * expit(disc[i] * (p["logit_accuracy"][r, z] - p["difficulty"][i]))
                t += np.log(right if y == z else (1 - right) / (K - 1))
            terms.append(t)
        out[i] = terms[known[i]] if known is not None and known[i] >= 0 else logsumexp(terms)
    return out


@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_k3_density_log_lik_and_theta_match_enumeration(engine, variant):
    model = VARIANTS[variant]
    data = tiny_data_k3()
    rng = np.random.default_rng(30 + variant)
    known = np.array([-1, 2, -1])  # item 1 of known class 3
    for known_arg in (None, known):
        d = stan_data_k(data, model, known=known_arg)
        assert d["accuracy_prior"].shape == (K3, 2)
        params = random_params_k(model, K3, data.n_units, data.n_raters, rng)
        ll = enumerate_log_lik_k(data, params, known_arg)
        lp = engine.log_prob("item_difficulty", d, params, jacobian=False)
        assert lp - log_prior_k(model, params, d) == pytest.approx(ll.sum(), rel=1e-10, abs=1e-8)
        gq = engine.generated_quantities("item_difficulty", d, params)
        np.testing.assert_allclose(gq["log_lik"], ll, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(gq["logit_accuracy"], params["logit_accuracy"], rtol=1e-12)
        assert gq["logit_sens"].size == 0 and gq["logit_spec"].size == 0
        # theta[j, k, k] = inv_logit(a[j, k]); the rest of row k: (1 - inv_logit(a[j, k])) / (K - 1)
        acc = expit(params["logit_accuracy"])
        expected = np.broadcast_to(((1 - acc) / (K3 - 1))[:, :, None], (data.n_raters, K3, K3)).copy()
        expected[:, np.arange(K3), np.arange(K3)] = acc
        np.testing.assert_allclose(gq["theta"], expected, rtol=1e-12)


def test_k3_all_rating_patterns_sum_to_one(engine):
    """The program's likelihood is a distribution over the ratings: the 3^2 patterns of 2 raters sum to 1."""
    model = ItemDifficulty()
    patterns = np.array(list(itertools.product(range(K3), repeat=2)))
    n = len(patterns)
    data = RatingData.from_codes(
        np.repeat(np.arange(n), 2), np.tile([0, 1], n), patterns.ravel(), n_categories=K3, n_items=n, n_raters=2
    )
    rng = np.random.default_rng(4)
    p = random_params_k(model, K3, 1, 2, rng)
    params = {k: (np.repeat(v, n) if k in ITEM_PARAMETERS else v) for k, v in p.items()}  # the same item n times
    gq = engine.generated_quantities("item_difficulty", stan_data_k(data, model), params)
    assert np.exp(logsumexp(gq["log_lik"])) == pytest.approx(1.0, rel=1e-12)


def test_k3_adversarial_accuracy_is_outside_the_constrained_support(engine):
    """non_adversarial: an accuracy at or below chance has zero density; without it, it is allowed."""
    data = tiny_data_k3()
    params = random_params_k(
        ItemDifficulty(non_adversarial=False), K3, data.n_units, data.n_raters, np.random.default_rng(1)
    )
    assert params["logit_accuracy"].min() < -np.log(K3 - 1)
    assert np.isfinite(
        engine.log_prob("item_difficulty", stan_data_k(data, ItemDifficulty(non_adversarial=False)), params)
    )
    with pytest.raises(StanDataError):
        engine.log_prob("item_difficulty", stan_data_k(data, ItemDifficulty()), params)


def test_stan_prior_entries_per_k():
    """The prior entries the program reads: accuracy_prior has 0 rows at K = 2 and K rows at K >= 3."""
    model = ItemDifficulty()
    binary, multi = model.stan_priors(model.priors(2, 4), 2, 4), model.stan_priors(model.priors(K3, 4), K3, 4)
    assert binary["accuracy_prior"].shape == (0, 2) and multi["accuracy_prior"].shape == (K3, 2)
    for d in (binary, multi):
        assert np.shape(d["sens_prior"]) == (2,) and np.shape(d["spec_prior"]) == (2,)
