"""The item_difficulty Stan program against brute force: density, log_lik, variants (both engines)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logsumexp

from pyrater import ItemDifficulty, RatingData
from pyrater.inference.stan.data import stan_data
from pyrater.models.item_difficulty import item_log_joint

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
