"""The marginal item-difficulty model (item parameters integrated out by quadrature).

Routes checked against each other: the numpy quadrature against brute-force
numerical integration (scipy.integrate); the Stan program's density and
log_lik against the numpy quadrature (both engines); grouped against long
data; the posterior of pi and the rater parameters against the per-item
model's NUTS posterior (two independent samplers of the same model).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats
from scipy.special import betaln, expit, logsumexp

import pyrater
from pyrater import ItemDifficulty, RatingData
from pyrater.checking import vote_histogram
from pyrater.inference.stan.data import stan_data
from pyrater.inference.stan.run import compress_stan_data
from pyrater.models.item_marginal import marginal_log_joint, quadrature_rule, rule_for

MARGINAL = ItemDifficulty(item_effects="marginal")
VARIANTS = [
    MARGINAL,
    ItemDifficulty(discrimination=False, guessing=False, item_effects="marginal"),
    ItemDifficulty(guessing=False, non_adversarial=False, item_effects="marginal"),
]


def tiny_data(I: int = 6, J: int = 3, seed: int = 0) -> RatingData:
    """Incomplete binary design with a repeated rating and two items sharing a row."""
    rng = np.random.default_rng(seed)
    item, rater = [], []
    for i in range(I - 1):
        for j in rng.choice(J, size=rng.integers(1, J + 1), replace=False):
            item.append(i)
            rater.append(int(j))
    item.append(0)
    rater.append(int(rater[0]))  # rater rates item 0 twice
    rating = list(rng.integers(0, 2, size=len(item)))
    # the last item copies item 1's ratings: the two share one distinct row
    rows1 = [t for t, i in enumerate(item) if i == 1]
    for t in rows1:
        item.append(I - 1)
        rater.append(rater[t])
        rating.append(rating[t])
    return RatingData.from_codes(
        np.array(item), np.array(rater), np.array(rating), n_categories=2, n_items=I, n_raters=J
    )


def random_raters(model: ItemDifficulty, J: int, rng: np.random.Generator) -> dict:
    spec = rng.normal(1.0, 1.0, size=J)
    sens = -spec + rng.uniform(0.1, 3.0, size=J) if model.non_adversarial else rng.normal(0.0, 1.5, size=J)
    return {"pi": rng.dirichlet([2.0, 2.0]), "logit_spec": spec, "logit_sens": sens}


def _integral(model: ItemDifficulty, pr: dict, ability: np.ndarray, right: np.ndarray) -> float:
    """p(ratings | class) of one unit by adaptive scipy integration over the item parameters' priors."""
    d_scale, s_scale = float(pr["difficulty_scale"]), float(pr["discrimination_scale"])
    a, b = (float(v) for v in pr["guessing_prior"])
    log_beta_fn = float(betaln(a, b))

    def normal(x: float, scale: float) -> float:
        return math.exp(-0.5 * (x / scale) ** 2) / (scale * math.sqrt(2 * math.pi))

    def f(beta: float, log_delta: float = 0.0, gamma: float = 0.0) -> float:
        q = gamma + (1 - gamma) * expit(math.exp(log_delta) * (ability - beta))
        return normal(beta, d_scale) * float(np.prod(np.where(right, q, 1 - q)))

    lim_b = (-10 * d_scale, 10 * d_scale)
    lim_s = (-10 * s_scale, 10 * s_scale)
    opts = {"epsabs": 1e-12, "epsrel": 1e-10, "limit": 200}
    loose = {"epsabs": 1e-10, "epsrel": 1e-7, "limit": 50}
    if model.guessing:
        return integrate.nquad(
            lambda beta, ld, g: (
                f(beta, ld, g)
                * normal(ld, s_scale)
                * math.exp((a - 1) * math.log(g) + (b - 1) * math.log1p(-g) - log_beta_fn)
            ),
            [lim_b, lim_s, (0, 1)],
            opts=[loose, loose, loose],
        )[0]
    if model.discrimination:
        return integrate.nquad(lambda beta, ld: f(beta, ld) * normal(ld, s_scale), [lim_b, lim_s], opts=[loose, loose])[
            0
        ]
    return integrate.quad(f, *lim_b, **opts)[0]


def brute_force_log_lik(model: ItemDifficulty, data: RatingData, p: dict) -> np.ndarray:
    """log p(y_i | z_i = k) per unit and class, (I, 2), by numerical integration (no shared code)."""
    pr = model.priors(2, data.n_raters)
    out = np.empty((data.n_units, 2))
    done: dict[tuple, np.ndarray] = {}  # units with the same ratings: integrated once
    for i in range(data.n_units):
        raters, ratings = data.rater[data.unit == i], data.rating[data.unit == i]
        key = tuple(sorted(zip(raters.tolist(), ratings.tolist())))
        if key not in done:
            done[key] = np.array(
                [
                    np.log(_integral(model, pr, (p["logit_sens"] if z == 1 else p["logit_spec"])[raters], ratings == z))
                    for z in (0, 1)
                ]
            )
        out[i] = done[key]
    return out


def numpy_log_lik(model: ItemDifficulty, data: RatingData, p: dict) -> np.ndarray:
    """log p(y_i | z_i = k) per unit and class, (I, 2), by the model's quadrature rule."""
    lj = marginal_log_joint(
        data.counts, np.zeros((1, 2)), p["logit_sens"][None], p["logit_spec"][None], rule_for(model, data.counts)
    )
    return lj[0]


# ------------------------------------------------------------------ quadrature (numpy)
@pytest.mark.parametrize("variant", [1, 2, 0])
def test_quadrature_matches_brute_force_integration(variant):
    model = VARIANTS[variant]
    data = tiny_data(I=3 if model.guessing else 6)  # 3 units, 2 distinct: 4 triple integrals
    p = random_raters(model, data.n_raters, np.random.default_rng(3 + variant))
    np.testing.assert_allclose(numpy_log_lik(model, data, p), brute_force_log_lik(model, data, p), rtol=0, atol=2e-6)


def test_rule_is_the_prior_and_guessing_axis_is_exact():
    pr = MARGINAL.priors(2, 3)
    rule = quadrature_rule(pr, max_ratings=5)
    w = np.exp(rule.log_weight)
    assert rule.sizes[2] == 3 and w.sum() == pytest.approx(1.0, abs=1e-13)
    # prior moments: E[beta^2] = scale^2, E[delta] = exp(s^2 / 2), E[gamma] = a / (a + b)
    assert w @ rule.difficulty**2 == pytest.approx(1.0, rel=1e-9)
    assert w @ rule.discrimination == pytest.approx(np.exp(0.25**2 / 2), rel=1e-10)
    assert w @ rule.guessing == pytest.approx(0.1, rel=1e-12)
    # ceil((n + 1) / 2) Gauss-Jacobi nodes integrate a polynomial of degree n in gamma exactly
    data = RatingData.from_codes(np.zeros(5, int), np.arange(5), np.array([1, 1, 0, 1, 0]), n_categories=2)
    p = random_raters(MARGINAL, 5, np.random.default_rng(0))
    args = (data.counts, np.zeros((1, 2)), p["logit_sens"][None], p["logit_spec"][None])
    exact = marginal_log_joint(*args, quadrature_rule(pr, max_ratings=5))
    finer = marginal_log_joint(*args, quadrature_rule(pr, sizes=(29, 9, 12)))
    np.testing.assert_allclose(exact, finer, rtol=0, atol=1e-13)


def test_model_object_and_errors():
    assert MARGINAL.stan_program == "item_difficulty_marginal" and ItemDifficulty().stan_program == "item_difficulty"
    assert MARGINAL.variant == "3PL" and MARGINAL.stan_item_init(np.random.default_rng(0), 5) == {}
    with pytest.raises(ValueError, match="item_effects must be one of"):
        ItemDifficulty(item_effects="integrated")
    caries = RatingData.from_grouped(pyrater.datasets.caries(), tally="n")
    assert MARGINAL.prepare_data(caries) is caries  # no expansion to items
    d = stan_data(caries, MARGINAL)
    assert d["I"] == 32 and d["Q"] == 29 * 9 * 3 and type(MARGINAL).from_stan_data(d) == MARGINAL
    from pyrater.inference.stan.data import data_inits

    assert set(data_inits("item_difficulty_marginal", d, 1)[0]) == {"pi", "logit_sens", "logit_spec"}


def test_long_data_compress_to_the_grouped_patterns():
    caries = RatingData.from_grouped(pyrater.datasets.caries(), tally="n")
    long = RatingData.from_long(caries.to_long(), *caries.long_columns)
    compressed, inverse = compress_stan_data(stan_data(long, MARGINAL))
    grouped = stan_data(caries, MARGINAL)
    assert compressed["I"] == 32 and inverse.shape == (long.n_units,)
    assert sorted(compressed["weight"]) == sorted(grouped["weight"])
    key = {tuple(r): w for r, w in zip(caries.counts.toarray().astype(int).tolist(), grouped["weight"])}
    rows = long.counts.toarray().astype(int)
    first = np.unique(inverse, return_index=True)[1]
    assert all(key[tuple(rows[f])] == w for f, w in zip(first, compressed["weight"]))


# ------------------------------------------------------------------ Stan program
@pytest.mark.stan
@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_stan_density_and_log_lik_match_the_quadrature(stan_engine, variant):
    model = VARIANTS[variant]
    data = tiny_data()
    rng = np.random.default_rng(20 + variant)
    known = np.full(data.n_units, -1)
    known[[1, 4]] = [0, 1]
    for known_arg in (None, known):
        d = stan_data(data, model, known=known_arg)
        p = random_raters(model, data.n_raters, rng)
        lj = numpy_log_lik(model, data, p) + np.log(p["pi"])
        ll = logsumexp(lj, axis=1)
        if known_arg is not None:
            ll[known >= 0] = lj[known >= 0, known[known >= 0]]
        lp = stan_engine.log_prob("item_difficulty_marginal", d, p, jacobian=False)
        pr = model.priors(2, data.n_raters)
        (ms, ss), (mp, sp) = pr["sens_prior"], pr["spec_prior"]
        log_prior = stats.dirichlet.logpdf(p["pi"], pr["alpha"]) + stats.norm.logpdf(p["logit_sens"], ms, ss).sum()
        log_prior += stats.norm.logpdf(p["logit_spec"], mp, sp).sum()
        if model.non_adversarial:
            log_prior -= data.n_raters * stats.norm.logcdf((ms + mp) / np.hypot(ss, sp))
        assert lp - log_prior == pytest.approx(ll.sum(), rel=1e-10)
        gq = stan_engine.generated_quantities("item_difficulty_marginal", d, p)
        np.testing.assert_allclose(gq["log_lik"], ll, rtol=1e-10)
        # the same on the distinct rows, weighted (what the fits run)
        dc, inverse = compress_stan_data(d)
        keyed = np.column_stack([data.counts.toarray(), d["known"]])
        assert dc["I"] == len(np.unique(keyed, axis=0)) and (known_arg is not None or dc["I"] < data.n_units)
        np.testing.assert_array_equal(keyed[np.unique(inverse, return_index=True)[1]][inverse], keyed)
        lpc = stan_engine.log_prob("item_difficulty_marginal", dc, p, jacobian=False)
        assert lpc == pytest.approx(lp, rel=1e-12)
        np.testing.assert_allclose(
            stan_engine.generated_quantities("item_difficulty_marginal", dc, p)["log_lik"][inverse], ll, rtol=1e-12
        )


# ------------------------------------------------------------------ Stan program, K >= 3 categories
K3 = 3


def tiny_data_k3(seed: int = 0) -> RatingData:
    """4 items, 2 raters, K = 3: a repeated rating, an item with one rating, items 1 and 3 sharing a row."""
    rng = np.random.default_rng(seed)
    item = np.array([0, 0, 0, 1, 1, 2, 3, 3])
    rater = np.array([0, 1, 0, 0, 1, 1, 0, 1])  # rater 0 rates item 0 twice
    rating = rng.integers(0, K3, size=item.size)
    rating[6:] = rating[3:5]  # item 3 copies item 1
    return RatingData.from_codes(item, rater, rating, n_categories=K3, n_items=4, n_raters=2)


def stan_data_marginal_k(data: RatingData, model: ItemDifficulty, known: np.ndarray | None = None) -> dict:
    """The marginal program's data at K >= 3: the common layout, the model's prior entries and its rule."""
    K, J = data.n_categories, data.n_raters
    layout = stan_data(data, "dawid_skene", known=known)
    d = {key: layout[key] for key in ("K", "J", "I", "weight", "nnz", "w", "v", "u", "known", "write_log_lik")}
    priors = model.priors(K, J)
    d.update(model.stan_priors(priors, K, J))
    n_ratings = np.asarray(data.counts.sum(axis=1)).ravel()
    rule = quadrature_rule(priors, model.discrimination, model.guessing, max_ratings=int(n_ratings.max()))
    d.update(
        Q=rule.n_nodes,
        node_difficulty=rule.difficulty,
        node_discrimination=rule.discrimination,
        node_guessing=rule.guessing,
        node_log_weight=rule.log_weight,
    )
    return d


def random_raters_k(model: ItemDifficulty, K: int, J: int, rng: np.random.Generator) -> dict:
    """Random pi and logit accuracies; without the constraint, one below chance."""
    if model.non_adversarial:
        accuracy = -np.log(K - 1) + rng.uniform(0.05, 3.0, size=(J, K))
    else:
        accuracy = rng.normal(0.0, 1.5, size=(J, K))
        accuracy[1, 0] = -np.log(K - 1) - 1.0
    return {"pi": rng.dirichlet(np.full(K, 2.0)), "logit_accuracy": accuracy}


def quadrature_log_lik_k(data: RatingData, p: dict, d: dict) -> np.ndarray:
    """log p(y_i | z_i = k), (I, K), K >= 3: the rule's weighted sum over its nodes, by loops over units and ratings."""
    K = data.n_categories
    beta, delta, gamma = d["node_difficulty"], d["node_discrimination"], d["node_guessing"]
    out = np.empty((data.n_units, K))
    for i in range(data.n_units):
        for z in range(K):
            log_node = d["node_log_weight"].copy()  # (Q,)
            for r, y in zip(data.rater[data.unit == i], data.rating[data.unit == i]):
                right = gamma + (1 - gamma) * expit(delta * (p["logit_accuracy"][r, z] - beta))
                log_node += np.log(right if y == z else (1 - right) / (K - 1))
            out[i, z] = logsumexp(log_node)
    return out


@pytest.mark.stan
@pytest.mark.parametrize("variant", range(len(VARIANTS)))
def test_stan_k3_density_log_lik_and_theta_match_the_quadrature(stan_engine, variant):
    model = VARIANTS[variant]
    data = tiny_data_k3()
    rng = np.random.default_rng(40 + variant)
    known = np.array([-1, -1, 1, -1])  # item 2 of known class 2
    for known_arg in (None, known):
        d = stan_data_marginal_k(data, model, known=known_arg)
        p = random_raters_k(model, K3, data.n_raters, rng)
        lj = quadrature_log_lik_k(data, p, d) + np.log(p["pi"])
        ll = logsumexp(lj, axis=1)
        if known_arg is not None:
            ll[known >= 0] = lj[known >= 0, known[known >= 0]]
        log_prior = stats.dirichlet.logpdf(p["pi"], d["alpha"])
        for k, (m, s) in enumerate(d["accuracy_prior"]):
            log_prior += stats.norm.logpdf(p["logit_accuracy"][:, k], m, s).sum()
            if model.non_adversarial:  # truncated to logit_accuracy > -log(K - 1)
                log_prior -= data.n_raters * stats.norm.logsf(-np.log(K3 - 1), m, s)
        lp = stan_engine.log_prob("item_difficulty_marginal", d, p, jacobian=False)
        assert lp - log_prior == pytest.approx(ll.sum(), rel=1e-10)
        gq = stan_engine.generated_quantities("item_difficulty_marginal", d, p)
        np.testing.assert_allclose(gq["log_lik"], ll, rtol=1e-10)
        acc = expit(p["logit_accuracy"])
        np.testing.assert_allclose(gq["theta"][:, np.arange(K3), np.arange(K3)], acc, rtol=1e-12)
        np.testing.assert_allclose(gq["theta"][:, 0, 1:], np.column_stack([(1 - acc[:, 0]) / (K3 - 1)] * 2))
        # the same on the distinct rows, weighted (what the fits run)
        dc, inverse = compress_stan_data(d)
        assert dc["I"] == data.n_units - 1
        assert stan_engine.log_prob("item_difficulty_marginal", dc, p, jacobian=False) == pytest.approx(lp, rel=1e-12)
        np.testing.assert_allclose(
            stan_engine.generated_quantities("item_difficulty_marginal", dc, p)["log_lik"][inverse], ll, rtol=1e-12
        )


@pytest.mark.stan
def test_stan_k3_all_rating_patterns_sum_to_one(stan_engine):
    """The marginal likelihood is a distribution over the ratings: the 3^2 patterns of 2 raters sum to 1."""
    patterns = np.array(list(itertools.product(range(K3), repeat=2)))
    n = len(patterns)
    data = RatingData.from_codes(
        np.repeat(np.arange(n), 2), np.tile([0, 1], n), patterns.ravel(), n_categories=K3, n_items=n, n_raters=2
    )
    p = random_raters_k(MARGINAL, K3, 2, np.random.default_rng(6))
    gq = stan_engine.generated_quantities("item_difficulty_marginal", stan_data_marginal_k(data, MARGINAL), p)
    assert np.exp(logsumexp(gq["log_lik"])) == pytest.approx(1.0, rel=1e-12)


# ------------------------------------------------------------------ fits
@pytest.fixture(scope="module")
def sim():
    return pyrater.simulate("item_difficulty", 60, 4, seed=4)


def _cmdstan(engine) -> None:
    if engine.name != "cmdstanpy":
        pytest.skip("run with one engine (the programs' two engines are compared in the density test)")


@pytest.mark.stan
@pytest.mark.slow  # two NUTS fits of 4 chains (the per-item one with 60 x 3 item parameters): ~1-3 min
def test_marginal_posterior_agrees_with_per_item_nuts(sim, stan_engine):
    _cmdstan(stan_engine)
    kw = dict(method="mcmc", chains=4, warmup=300, draws=400, seed=5, engine=stan_engine.name, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        marg = pyrater.fit(sim.data, MARGINAL, **kw)
        item = pyrater.fit(sim.data, ItemDifficulty(), **kw)
    assert type(marg).__name__ == "ItemDifficultyMCMCFit" and marg.marginal and not item.marginal
    assert "difficulty" not in marg.draws and marg.draws["log_lik"].shape[-1] == 60
    labels = list(sim.data.rater_labels)

    def moments(fit):
        """Posterior mean, sd and Monte Carlo SE (sd / sqrt(bulk ESS)) of pi[2] and every logit_sens, logit_spec."""
        ess = fit.mcmc_diagnostics(warn=False)["ess_bulk"]
        out = {}
        for name, values in [("pi[2]", np.asarray(fit.draws["pi"])[..., 1])] + [
            (f"{p}[{r}]", np.asarray(fit.draws[p])[..., j])
            for p in ("logit_sens", "logit_spec")
            for j, r in enumerate(labels)
        ]:
            sd = float(values.std())
            out[name] = (float(values.mean()), sd, sd / np.sqrt(ess[name]))
        return out

    a, b = moments(marg), moments(item)
    for name in a:
        (ma, sa, ea), (mb, sb, eb) = a[name], b[name]
        assert abs(ma - mb) < 4 * np.hypot(ea, eb), (name, a[name], b[name])
        assert sa == pytest.approx(sb, rel=0.3), (name, a[name], b[name])
    # class probabilities: both Rao-Blackwellised, the same posterior
    np.testing.assert_allclose(marg.class_probabilities(), item.class_probabilities(), atol=0.05)
    # the item parameters' posterior means given the ratings agree with the per-item draws' means
    items_m, items_i = marg.item_parameters(), item.item_parameters()
    assert np.corrcoef(items_m["difficulty"], items_i["difficulty"])[0, 1] > 0.95
    # log_lik: stored (gathered from the distinct rows) equals the recomputed quadrature
    np.testing.assert_allclose(marg.log_lik_units(), marg.item_log_lik().T, rtol=1e-8, atol=1e-8)
    assert np.isfinite(pyrater.loo(marg, warn=False).elpd_loo)
    for design in ("new_items", "same_items"):
        res = pyrater.posterior_predictive_check(marg, vote_histogram(2), draws=100, seed=1, design=design)
        assert res.covers(0.98).all(), design


@pytest.mark.stan
def test_grouped_and_long_give_the_same_mode_and_save_load(stan_engine, tmp_path):
    caries = RatingData.from_grouped(pyrater.datasets.caries(), tally="n")
    long = RatingData.from_long(caries.to_long(), *caries.long_columns)
    fits = [pyrater.fit(d, MARGINAL, method="optimize", seed=2, engine=stan_engine) for d in (caries, long)]
    for name in ("pi", "logit_sens", "logit_spec"):
        np.testing.assert_allclose(fits[0].params[name], fits[1].params[name], rtol=1e-4, atol=1e-4)
    assert fits[0].log_density == pytest.approx(fits[1].log_density, rel=1e-8)
    probs_g, probs_l = fits[0].class_probabilities(), fits[1].class_probabilities()
    assert probs_g.shape == (32, 2) and probs_l.shape == (long.n_units, 2)
    unit_of_item = np.repeat(np.arange(32), caries.weight)
    np.testing.assert_allclose(probs_l.to_numpy(), probs_g.to_numpy()[unit_of_item], atol=1e-4)
    loaded = pyrater.load(fits[0].save(tmp_path / "marginal.nc"))
    assert loaded.model == MARGINAL and type(loaded) is type(fits[0])
    np.testing.assert_allclose(loaded.class_probabilities(), probs_g, rtol=1e-12)
    assert isinstance(fits[0].item_parameters(), pd.DataFrame)


@pytest.mark.stan
def test_on_caries_the_vote_count_check_passes_for_the_marginal_model_and_fails_for_dawid_skene():
    """Issue 26's target (Han et al. 2024): the replicated histogram of positive votes per x-ray covers the
    observed one in every bin at the 1%-99% band for the item-difficulty model, where Dawid-Skene misses bins.

    Posterior modes (fast; the NUTS fits give the same verdicts, bench/RESULTS_item_difficulty_marginal.md),
    new x-rays replicated from pi and the item parameters' priors; one engine (the mode is the same under
    both, test above).
    """
    caries = RatingData.from_grouped(pyrater.datasets.caries(), tally="n")
    table = pyrater.datasets.caries()
    positive = (table[[f"rater_{j}" for j in range(1, 6)]] == 2).sum(axis=1)  # category 2 = carious
    observed = np.bincount(positive, weights=table["n"], minlength=6)
    covered = {}
    for name, model in (("item_difficulty", MARGINAL), ("dawid_skene", "dawid_skene")):
        fit = pyrater.fit(caries, model, method="optimize", seed=2)
        res = pyrater.posterior_predictive_check(fit, vote_histogram(2), draws=400, seed=1, design="new_items")
        np.testing.assert_array_equal(res.observed, observed)
        covered[name] = res.covers(0.98)
    assert covered["item_difficulty"].all(), covered
    assert (~covered["dawid_skene"]).sum() >= 4, covered  # too few x-rays with 1 positive vote, too many with 5
