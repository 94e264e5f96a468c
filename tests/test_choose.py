"""The data choose: pyrater.fit(data, "auto"), the vote-model baseline and the weights of compare."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import quad
from scipy.stats import beta as beta_dist

import pyrater
from pyrater.checking.choose import ModelChoice, default_candidates
from pyrater.checking.compare import BASELINE_NAME, equivalent_to_best, pseudo_bma_plus_weights
from pyrater.checking.scoring import majority_vote
from pyrater.checking.vote_model import category_counts, fit_vote_model, vote_log_lik, vote_model_kfold
from pyrater.data import RatingData


def _quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyrater.fit(*args, **kwargs)


# ------------------------------------------------------------------ weights
def test_pseudo_bma_plus_is_softmax_of_elpd_when_pointwise_differences_are_constant():
    rng = np.random.default_rng(0)
    base = rng.normal(-3.0, 1.0, size=200)
    shifts = np.array([0.0, -0.004, -0.01])  # per item: elpd totals differ by 0, 0.8 and 2.0
    pointwise = base[:, None] + shifts[None, :]
    w = pseudo_bma_plus_weights(pointwise, seed=1)
    elpd = pointwise.sum(axis=0)
    expected = np.exp(elpd - elpd.max()) / np.exp(elpd - elpd.max()).sum()
    np.testing.assert_allclose(w, expected, rtol=1e-10)


def test_pseudo_bma_plus_splits_evenly_between_models_that_predict_alike_and_is_seeded():
    rng = np.random.default_rng(1)
    a = rng.normal(-2.0, 0.7, size=300)
    b = a + rng.normal(0.0, 0.05, size=300)  # the same model up to noise: stacking may give either all the weight
    w = pseudo_bma_plus_weights(np.column_stack([a, b]), seed=3)
    assert 0.2 < w[0] < 0.8 and w.sum() == pytest.approx(1.0)
    np.testing.assert_array_equal(w, pseudo_bma_plus_weights(np.column_stack([a, b]), seed=3))
    clear = pseudo_bma_plus_weights(np.column_stack([a, a - 0.2]), seed=3)  # 60 nats apart
    assert clear[0] > 0.999


def test_pseudo_bma_plus_draws_its_bootstrap_in_blocks_with_the_same_numbers(monkeypatch):
    """Blocks of bootstrap draws (bounded memory at any number of items) give the one-shot weights."""
    import tracemalloc

    from pyrater.checking import compare as cmp

    rng = np.random.default_rng(2)
    pointwise = rng.normal(-2.0, 0.5, size=(500, 3)) + np.array([0.0, -0.01, -0.02])
    a = np.random.default_rng(7).dirichlet(np.ones(500), size=1000)  # the formula, all draws at once
    z = 500 * (a @ pointwise)
    w = np.exp(z - z.max(axis=1, keepdims=True))
    expected = (w / w.sum(axis=1, keepdims=True)).mean(axis=0)
    monkeypatch.setattr(cmp, "_PBMA_BLOCK_BYTES", 8 * 500 * 3)  # three draws a block, the last one short
    np.testing.assert_allclose(pseudo_bma_plus_weights(pointwise, seed=7), expected, rtol=1e-12)
    monkeypatch.undo()
    # 50,000 items: all 1,000 draws at once would take 400 MB; the blocks stay near their 32 MiB
    big = np.random.default_rng(3).normal(-1.0, 0.3, size=(50_000, 2))
    tracemalloc.start()
    try:
        pseudo_bma_plus_weights(big, seed=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 80 * 2**20


@pytest.mark.parametrize(
    ("diff", "dse", "expected"),
    [(0.0, 0.0, True), (-3.9, 0.1, True), (-4.1, 1.0, False), (-9.0, 5.0, True), (-11.0, 5.0, False)],
)
def test_equivalent_rule(diff, dse, expected):
    assert equivalent_to_best(diff, dse) is expected


# ------------------------------------------------------------------ the vote model
def test_vote_log_lik_is_the_beta_binomial_integral_for_two_categories():
    a = np.array([1.7, 0.6])
    c = np.array([[3.0, 1.0], [0.0, 5.0], [2.0, 2.0], [0.0, 0.0]])
    got = vote_log_lik(c, a)
    for row, value in zip(c, got, strict=True):
        # the ordered ratings: phi^c1 (1 - phi)^c0 integrated against Beta(a1, a0); phi = P(category 1)
        integral, _ = quad(lambda p, r=row: p ** r[1] * (1 - p) ** r[0] * beta_dist.pdf(p, a[1], a[0]), 0, 1)
        assert value == pytest.approx(np.log(integral), rel=1e-8)


def test_fit_vote_model_recovers_the_dirichlet_it_was_simulated_from():
    rng = np.random.default_rng(5)
    a_true = np.array([2.0, 0.5, 1.0])
    phi = rng.dirichlet(a_true, size=4000)
    c = np.array([rng.multinomial(6, p) for p in phi], dtype=float)
    a = fit_vote_model(c, np.ones(len(c), dtype=np.int64))
    np.testing.assert_allclose(a, a_true, rtol=0.15)


def test_vote_model_grouped_and_long_agree():
    caries = pd.DataFrame({"r1": [0, 0, 1, 1, 0], "r2": [0, 1, 1, 0, 0], "r3": [0, 1, 1, 1, 1], "n": [30, 7, 12, 5, 9]})
    grouped = RatingData.from_grouped(caries, tally="n")
    rows = caries.loc[caries.index.repeat(caries["n"])].drop(columns="n").reset_index(drop=True)
    long = RatingData.from_wide(rows)
    for d in (grouped, long):  # per unit (a pattern of grouped data), whoever rated
        assert np.asarray(d.weight) @ category_counts(d).sum(axis=1) == 63 * 3
    a_g = fit_vote_model(category_counts(grouped), np.asarray(grouped.weight))
    a_l = fit_vote_model(category_counts(long), np.asarray(long.weight))
    np.testing.assert_allclose(a_g, a_l, rtol=1e-6)
    res = vote_model_kfold(grouped, k=5, seed=2)
    assert res.n_data_points == 63 and res.method == "kfold" and np.isfinite(res.elpd)
    assert res.elpd < float(np.asarray(grouped.weight) @ vote_log_lik(category_counts(grouped), a_g))


# ------------------------------------------------------------------ compare with the baseline
@pytest.fixture(scope="module")
def two_class_fits():
    sim = pyrater.simulate("dawid_skene", 240, 6, n_categories=2, raters_per_item=4, seed=3)
    ds = _quiet_fit(sim.data, "dawid_skene", method="em", seed=1)
    cc = _quiet_fit(sim.data, "class_conditional", method="em", seed=1)
    return sim, ds, cc


def test_compare_with_baseline_and_equal_weights_for_one_model_twice(two_class_fits):
    sim, ds, cc = two_class_fits
    table = pyrater.compare({"ds": ds, "cc": cc}, baseline=True, seed=4)
    assert set(table.index) == {"ds", "cc", BASELINE_NAME}
    # at K = 2 the class-conditional model is Dawid-Skene with the same prior: one model, two names
    assert table.loc["ds", "elpd_loo"] == pytest.approx(table.loc["cc", "elpd_loo"], abs=1e-6)
    assert table.loc["ds", "weight_pbma"] == pytest.approx(table.loc["cc", "weight_pbma"], abs=0.02)
    assert table.loc["ds", "equivalent"] and table.loc["cc", "equivalent"]
    assert table.index[-1] == BASELINE_NAME and not table.loc[BASELINE_NAME, "equivalent"]
    alone = pyrater.compare({"ds": ds}, baseline=True, seed=4)
    assert list(alone.index) == ["ds", BASELINE_NAME]
    # the baseline is scored on the split the point fits use
    np.testing.assert_allclose(alone.loc[BASELINE_NAME, "elpd_loo"], table.loc[BASELINE_NAME, "elpd_loo"])


def test_compare_baseline_errors(two_class_fits):
    sim, ds, cc = two_class_fits
    with pytest.raises(ValueError, match="at least two fits, got 1"):
        pyrater.compare({"ds": ds})
    with pytest.raises(ValueError, match="baseline row"):
        pyrater.compare({BASELINE_NAME: ds, "cc": cc}, baseline=True)
    with pytest.raises(TypeError, match="baseline must be True or False"):
        pyrater.compare({"ds": ds, "cc": cc}, baseline="yes")
    known = {sim.data.unit_labels[0]: sim.data.categories[int(sim.z[0])]}
    kfit = _quiet_fit(sim.data, "dawid_skene", method="em", seed=1, known=known)
    kfit2 = _quiet_fit(sim.data, "class_conditional", method="em", seed=1, known=known)
    with pytest.raises(ValueError, match="without known items"):
        pyrater.compare({"a": kfit, "b": kfit2}, baseline=True)


# ------------------------------------------------------------------ fit(data, "auto")
@pytest.mark.parametrize("family", ["one_coin", "dawid_skene", "homogeneous"])
def test_auto_chooses_the_generating_family(family):
    kwargs = {"one_coin": {}, "dawid_skene": {}, "homogeneous": {}}[family]
    sim = pyrater.simulate(family, 400, 8, n_categories=3, raters_per_item=4, seed=11, **kwargs)
    f = _quiet_fit(sim.data, "auto", seed=2, progress=False, candidates=["dawid_skene", "one_coin", "homogeneous"])
    choice = f.model_choice
    assert isinstance(choice, ModelChoice)
    assert choice.chosen == family == f.model.name, choice.table
    assert f is choice.fits[family]
    assert choice.table.loc[family, "elpd_diff"] >= -4.0 or choice.table.loc[family, "equivalent"]
    assert BASELINE_NAME in choice.table.index and "agree_mv" in choice.table.columns
    assert choice.table.index[choice.table["chosen"]].tolist() == [family]  # the table marks the choice
    assert choice.reason in str(f.summary())
    accuracy = np.mean(f.class_probabilities().to_numpy().argmax(axis=1) == sim.z)
    vote = majority_vote(sim.data).probabilities.to_numpy().argmax(axis=1)
    assert accuracy >= np.mean(vote == sim.z) - 0.01


def test_the_rule_takes_the_simplest_within_4_nats_not_within_twice_the_standard_error():
    from pyrater.checking.choose import _pick

    table = pd.DataFrame(
        {
            "elpd_kfold": [-937.3, -940.4, -952.1, -961.5],
            "p_kfold": [32.8, 15.9, 7.5, 3.9],
            "dse": [0.0, 5.5, 8.4, 8.6],
            "equivalent": [True, True, True, False],  # one_coin: 14.8 nats behind, within 2 se
        },
        index=["dawid_skene", "class_conditional", "one_coin", BASELINE_NAME],
    )
    assert _pick(table) == "class_conditional"
    assert _pick(table.assign(p_kfold=[32.8, 40.0, 7.5, 3.9])) == "dawid_skene"


def test_the_reason_says_when_equally_predictive_candidates_label_differently():
    from pyrater.checking.choose import _labels_differ

    table = pd.DataFrame(
        {"elpd_loo": [-942.2, -944.3, -946.3, -957.1], "agree_mv": [0.60, 0.87, 0.72, 0.95]},
        index=["ordinal", "mace", "dawid_skene", "one_coin"],  # one_coin agrees most, but is 15 nats behind
    )
    note = _labels_differ(table, "elpd_loo", "ordinal")
    assert note == (
        "; the equally predictive candidates label differently: ordinal gives 60% of the items a majority-vote "
        "class, mace 87% (gold items would tell which labels better)"
    )
    assert _labels_differ(table, "elpd_loo", "mace") == ""  # the chosen one labels as majority vote most
    assert _labels_differ(table.assign(agree_mv=[0.80, 0.87, 0.72, 0.95]), "elpd_loo", "ordinal") == ""


def test_auto_on_a_few_hundred_items_does_not_take_a_simpler_model_that_predicts_clearly_worse():
    """A user's report: on 300 items the simplest 'equivalent' model (one-coin, 15 nats behind) labelled worse than MV."""
    sim = pyrater.simulate("dawid_skene", n_items=300, n_raters=6, n_categories=3, raters_per_item=3, seed=1)
    f = _quiet_fit(sim.data, "auto", seed=1, progress=False)
    table = f.model_choice.table.drop(index=BASELINE_NAME)
    ic = "elpd_loo"
    assert table.loc[f.model.name, ic] >= table[ic].max() - 4.0, table
    assert table.loc["one_coin", "equivalent"] and table.loc["one_coin", ic] < table[ic].max() - 4.0
    accuracy = np.mean(f.class_probabilities().to_numpy().argmax(axis=1) == sim.z)
    one_coin = f.model_choice.fits["one_coin"].class_probabilities().to_numpy().argmax(axis=1)
    assert accuracy > np.mean(one_coin == sim.z) + 0.1


def test_auto_names_the_candidate_in_each_fits_warnings():
    sim = pyrater.simulate("dawid_skene", 60, 4, n_categories=3, raters_per_item=2, seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = pyrater.fit(
            sim.data,
            "auto",
            method="gibbs",
            chains=2,
            warmup=20,
            draws=20,
            seed=1,
            progress=False,
            candidates=["dawid_skene", "one_coin"],
        )
    mcmc = [str(w.message) for w in caught if "MCMC problems" in str(w.message)]
    assert mcmc and all(m.startswith(("candidate dawid_skene: ", "candidate one_coin: ")) for m in mcmc), mcmc
    assert {w.filename for w in caught if "MCMC problems" in str(w.message)} == {__file__}
    # 20 draws: the chosen model's chains have not converged, and the reason says so
    rhat = f.mcmc_diagnostics(warn=False).attrs["max_rhat"]
    assert rhat > 1.01 and f"its chains have not converged (max Rhat {rhat:.3f} at " in f.model_choice.reason


def test_auto_by_a_sampler_keeps_no_log_lik_when_the_candidates_together_exceed_the_budget():
    sim = pyrater.simulate("dawid_skene", 300, 5, n_categories=3, raters_per_item=3, seed=4)
    names = ["dawid_skene", "class_conditional", "one_coin"]
    opts = dict(method="gibbs", chains=2, warmup=50, draws=50, seed=1, progress=False, candidates=names)
    each = 8 * 2 * 50 * 300 / 2**30  # GiB of one candidate's log_lik: 3 of them pass 0.0005 GiB, one does not
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = pyrater.fit(sim.data, "auto", max_memory_gib=0.0005, **opts)
    said = [str(w.message) for w in caught if "per-item log-likelihood is not kept" in str(w.message)]
    assert said == [
        f"model='auto': the 3 candidates' per-item log-likelihood is not kept (3 x {each:.3g} GiB = "
        f"{3 * each:.3g} GiB while they are compared, above max_memory_gib=0.0005); nothing is lost: pyrater.loo "
        "and compare recompute it from the draws in item chunks. Pass a larger max_memory_gib to keep it"
    ]
    assert not any(fit.has_log_lik for fit in f.model_choice.fits.values())
    kept = _quiet_fit(sim.data, "auto", **opts)  # the default budget holds them: kept, and the same choice
    assert all(fit.has_log_lik for fit in kept.model_choice.fits.values())
    assert kept.model_choice.chosen == f.model_choice.chosen
    np.testing.assert_allclose(pyrater.loo(f).elpd_i.to_numpy(), pyrater.loo(kept).elpd_i.to_numpy(), rtol=1e-9)


def test_auto_warns_when_majority_votes_model_predicts_as_well():
    # the vote model's own story: each item its own rating distribution, raters exchangeable
    rng = np.random.default_rng(8)
    rows = []
    for i in range(300):
        phi = rng.dirichlet([0.6, 0.6, 0.6])
        for j in rng.choice(6, size=4, replace=False):
            rows.append((i, j, int(rng.choice(3, p=phi))))
    df = pd.DataFrame(rows, columns=["item", "rater", "rating"])
    with pytest.warns(UserWarning, match="does not predict the ratings clearly better than majority vote"):
        f = pyrater.fit(df, "auto", seed=1, progress=False, candidates=["one_coin", "homogeneous"])
    assert "consider majority vote" in f.model_choice.reason


def test_auto_arguments_are_checked_before_any_fit():
    sim = pyrater.simulate("dawid_skene", 30, 3, n_categories=2, seed=1)
    with pytest.raises(ValueError, match="unknown model"):
        pyrater.fit(sim.data, "auto", candidates=["dawid_skene", "nope"])
    with pytest.raises(ValueError, match="cannot be fitted by method='em'"):
        pyrater.fit(sim.data, "auto", candidates=["hierarchical"])
    with pytest.raises(ValueError, match="given twice"):
        pyrater.fit(sim.data, "auto", candidates=["one_coin", "one_coin"])
    with pytest.raises(TypeError, match="list of model names"):
        pyrater.fit(sim.data, "auto", candidates="one_coin")
    with pytest.raises(ValueError, match="model='auto' fits its candidates by one of"):
        pyrater.fit(sim.data, "auto", method="pathfinder")
    with pytest.raises(ValueError, match="log_lik=False"):
        pyrater.fit(sim.data, "auto", method="gibbs", log_lik=False)
    with pytest.raises(ValueError, match=r"chains=2 is not used by method='em'.*\(model='auto' fits .* by method='em'"):
        pyrater.fit(sim.data, "auto", chains=2)  # the method was not given: say which auto took
    with pytest.raises(ValueError, match=r"chains=2 is not used by method='em'; it applies to [^(]*$"):
        pyrater.fit(sim.data, "auto", method="em", chains=2)
    with pytest.raises(ValueError, match="candidates is used by model='auto' only"):
        pyrater.fit(sim.data, "dawid_skene", method="em", candidates=["one_coin"])
    assert "dawid_skene" in default_candidates("em") and "hierarchical" not in default_candidates("em")
    # the pooled family's joint mode over-shrinks its raters: by its samplers only, unless named
    assert "pooled" not in default_candidates("em") and "pooled" in default_candidates("gibbs")
    # ... and auto says so, with what to do
    from pyrater.checking.choose import _default_candidates

    found, left = _default_candidates("em", 3, 500)
    assert set(left) == {"pooled", "community"} and not set(left) & set(found)
    assert all(why.startswith("not tried by method='em': the joint posterior mode") for why in left.values())
    assert _default_candidates("gibbs", 3, 500)[1] == {}


def test_auto_refuses_fewer_items_than_folds_before_any_fit(monkeypatch):
    """Fewer than 10 items: "auto"'s 10-fold scores (point fits, the vote model) cannot be made; said up front."""
    sim = pyrater.simulate("dawid_skene", 6, 3, n_categories=2, seed=1)
    fitted = []
    real_fit = pyrater.fitting.fit

    def spy(*args, **kwargs):
        fitted.append(args[1] if len(args) > 1 else kwargs.get("model"))
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(pyrater.fitting, "fit", spy)
    with pytest.raises(
        ValueError, match=r"method='em' scores its candidates .* needs at least 10 items; the data hold 6"
    ):
        pyrater.fitting.fit(sim.data, "auto")
    with pytest.raises(ValueError, match=r"vote model, the baseline .* needs at least 10 items; the data hold 6"):
        pyrater.fitting.fit(sim.data, "auto", method="gibbs")
    assert fitted == ["auto", "auto"]  # no candidate was fitted
    monkeypatch.undo()
    # with known items there is no baseline, and the samplers' PSIS-LOO needs no folds
    known = {sim.data.unit_labels[0]: sim.data.categories[int(sim.z[0])]}
    f = _quiet_fit(
        sim.data,
        "auto",
        method="gibbs",
        known=known,
        candidates=["dawid_skene", "one_coin"],
        seed=1,
        draws=100,
        warmup=100,
        chains=2,
        progress=False,
    )
    assert f.model_choice.chosen in ("dawid_skene", "one_coin") and BASELINE_NAME not in f.model_choice.table.index
    # compare(baseline=True) says the same before any LOO
    g = f.model_choice.fits["one_coin"]
    with pytest.raises(ValueError, match="baseline=True needs fits without known items"):
        pyrater.compare({"g": g}, baseline=True)
    h = _quiet_fit(sim.data, "one_coin", method="gibbs", seed=1, draws=100, warmup=100, chains=2, progress=False)
    with pytest.raises(ValueError, match="vote model by 10-fold .* needs at least 10 items; the data hold 6"):
        pyrater.compare({"h": h}, baseline=True)
    assert "_loo_result" not in h.__dict__  # refused before any LOO


def test_the_reason_writes_small_elpd_differences_with_a_digit_that_is_not_zero():
    from pyrater.checking.choose import _nats

    assert [_nats(x) for x in (-0.03, -0.0004, 0.0, 1.25, -4.0)] == ["-0.03", "-0.0004", "+0", "+1.2", "-4.0"]


def test_auto_lifts_priors_below_one_for_the_mode_and_says_so():
    sim = pyrater.simulate("dawid_skene", 150, 5, n_categories=5, raters_per_item=4, seed=2)
    f = _quiet_fit(sim.data, "auto", seed=3, progress=False, candidates=["dawid_skene", "one_coin"])
    assert "log-odds scale" in f.model_choice.skipped["dawid_skene"]
    beta = pyrater.get_model("dawid_skene").priors(5, 5)["beta"]
    np.testing.assert_allclose(f.model_choice.fits["dawid_skene"].model.priors(5, 5)["beta"], beta + 1.0)
    assert np.isfinite(f.model_choice.table.loc["dawid_skene", "elpd_loo"])


def test_auto_skips_a_family_that_refuses_the_data_and_says_why():
    sim = pyrater.simulate("dawid_skene", 60, 4, n_categories=2, raters_per_item=3, seed=5)
    f = _quiet_fit(sim.data, "auto", seed=1, progress=False, candidates=["one_coin", "ordinal"])
    assert f.model.name == "one_coin" and "ordinal" not in f.model_choice.table.index
    assert "K >= 3" in f.model_choice.skipped["ordinal"]
    with pytest.raises(ValueError, match="no candidate could be fitted"):
        _quiet_fit(sim.data, "auto", seed=1, progress=False, candidates=["ordinal"])


def test_auto_with_known_items_and_one_candidate_says_whether_it_was_named_or_left():
    # with known items there is no majority-vote row: one candidate left is the choice, for a reason that fits
    sim = pyrater.simulate("dawid_skene", 60, 4, n_categories=2, raters_per_item=3, seed=5)
    known = {sim.data.unit_labels[0]: sim.data.categories[int(sim.z[0])]}
    named = _quiet_fit(sim.data, "auto", seed=1, progress=False, candidates=["one_coin"], known=known)
    assert named.model_choice.reason.startswith("one_coin: the only candidate named")
    left = _quiet_fit(sim.data, "auto", seed=1, progress=False, candidates=["one_coin", "ordinal"], known=known)
    assert left.model_choice.reason.startswith("one_coin: the only candidate that could be fitted")
    assert "K >= 3" in left.model_choice.skipped["ordinal"]


# ------------------------------------------------------------------ held-out rater agreement
def _brute_force_agreement(counts: np.ndarray, score_rest) -> np.ndarray:
    """Per unit: remove each rating in turn, score the rest (K,), credit 1/ties when the rating is a top class."""
    U, JK = counts.shape
    out = np.full(U, np.nan)
    for u in range(U):
        if counts[u].sum() < 2:
            continue
        matched = 0.0
        for col in np.flatnonzero(counts[u]):
            rest = counts[u].copy()
            rest[col] -= 1
            s = score_rest(rest)
            top = np.flatnonzero(s >= s.max())
            matched += counts[u, col] * ((col % K3) in top) / top.size
        out[u] = matched / counts[u].sum()
    return out


K3 = 3


def _random_counts(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    J = 4
    counts = np.zeros((25, J * K3))
    for u in range(25):
        for j in rng.choice(J, size=rng.integers(1, 4), replace=False):
            counts[u, j * K3 + rng.integers(K3)] += rng.integers(1, 3)  # repeats: a rater rates an item twice
    return counts


def test_label_agreement_is_the_leave_one_rating_out_map_class():
    import scipy.sparse as sp

    from pyrater.checking.agreement import label_agreement

    counts = _random_counts(4)
    rng = np.random.default_rng(9)
    pi = rng.dirichlet(np.ones(K3))
    theta = rng.dirichlet(np.ones(K3), size=(4, K3))

    def posterior(rest):  # log pi_k + sum_{j, l} n_jl log theta[j, k, l]
        return np.log(pi) + np.einsum("jl,jkl->k", rest.reshape(4, K3), np.log(theta))

    got = label_agreement(sp.csr_matrix(counts), pi, theta)
    np.testing.assert_allclose(got, _brute_force_agreement(counts, posterior), equal_nan=True)
    assert np.isnan(got[counts.sum(axis=1) < 2]).all() and np.isfinite(got[counts.sum(axis=1) >= 2]).all()


def test_vote_agreement_is_the_leave_one_rating_out_majority_vote():
    import scipy.sparse as sp

    from pyrater.checking.agreement import vote_agreement

    counts = _random_counts(6)
    got = vote_agreement(sp.csr_matrix(counts), K3)
    expected = _brute_force_agreement(counts, lambda rest: rest.reshape(4, K3).sum(axis=0))
    np.testing.assert_allclose(got, expected, equal_nan=True)


def test_held_out_agreement_ranks_labellers_by_accuracy():
    """The true (pi, theta) labels better than a rival that ignores the raters' skills, and agrees more."""
    from pyrater.checking.agreement import label_agreement

    p = np.r_[np.full(6, 0.9), np.full(6, 0.4)]  # six good raters, six barely above chance (K = 3)
    sim = pyrater.simulate("one_coin", 600, 12, n_categories=3, raters_per_item=5, p=p, seed=2)
    flat = pyrater.models.one_coin_theta(np.full(12, 0.6), 3)  # every rater alike: a vote
    scores, accuracy = [], []
    for theta in (sim.theta, flat):
        a = label_agreement(sim.data.counts, sim.pi, theta)
        scores.append(np.nanmean(a))
        lp = np.log(sim.pi) + np.asarray(sim.data.counts @ np.log(theta).transpose(0, 2, 1).reshape(-1, 3))
        accuracy.append(np.mean(lp.argmax(axis=1) == sim.z))
    assert accuracy[0] > accuracy[1] + 0.03 and scores[0] > scores[1]


def test_auto_with_gold_judges_the_labels_on_the_gold_items():
    p = np.r_[np.full(4, 0.95), np.full(4, 0.4)]  # four good raters, four barely above chance (K = 3)
    sim = pyrater.simulate("one_coin", 300, 8, n_categories=3, raters_per_item=4, p=p, seed=7)
    cats = sim.data.categories
    gold = {sim.data.unit_labels[i]: cats[int(sim.z[i])] for i in range(0, 300, 2)}
    before = dict(gold)
    f = _quiet_fit(sim.data, "auto", seed=1, progress=False, candidates=["one_coin", "homogeneous"], gold=gold)
    table = f.model_choice.table
    assert gold == before  # the user's input is not modified
    for name in ("one_coin", "homogeneous"):
        fit = f.model_choice.fits[name]
        assert fit.known is None or not np.any(np.asarray(fit.known) >= 0)  # fitted without the gold labels
        z = fit.class_probabilities().to_numpy().argmax(axis=1)
        assert table.loc[name, "gold_accuracy"] == pytest.approx(np.mean(z[::2] == sim.z[::2]))
    assert table.loc["one_coin", "gold_accuracy"] > table.loc["homogeneous", "gold_accuracy"] + 0.05
    assert f.model.name == "one_coin" and "accuracy on the gold items" in f.model_choice.reason
    assert not table.loc["homogeneous", "labels_as_well"]


def test_auto_gold_is_checked():
    sim = pyrater.simulate("dawid_skene", 30, 3, n_categories=2, seed=1)
    with pytest.raises(ValueError, match="gold is used by model='auto' only"):
        pyrater.fit(sim.data, "dawid_skene", method="em", gold={sim.data.unit_labels[0]: sim.data.categories[0]})
    with pytest.raises(ValueError, match="gold is empty"):
        pyrater.fit(sim.data, "auto", gold={})
    with pytest.raises(ValueError, match="gold-class item 'no such item' not found"):  # named as the user passed it
        pyrater.fit(sim.data, "auto", gold={"no such item": sim.data.categories[0]})
    with pytest.raises(ValueError, match="gold class 9 not among the categories"):
        pyrater.fit(sim.data, "auto", gold={sim.data.unit_labels[0]: 9})


def test_pointwise_information_averages_to_the_raters_mutual_information():
    """Hard labels: the count-weighted mean is sum_j (n_j / n) I_j, each I_j from its own contingency table."""
    from scipy.stats.contingency import crosstab

    from pyrater.checking.agreement import pointwise_information

    rng = np.random.default_rng(3)
    J, R = 5, 400
    col = rng.integers(0, J, size=R) * K3 + rng.integers(0, K3, size=R)
    label_code = np.where(rng.random(R) < 0.6, col % K3, rng.integers(0, K3, size=R))  # labels that track the ratings
    label = np.eye(K3)[label_code]
    pmi = pointwise_information(col, np.ones(R), label, K3, J)
    expected = 0.0
    for j in range(J):
        mine = col // K3 == j
        table = crosstab(label_code[mine], col[mine] % K3).count.astype(float)
        p = table / table.sum()
        outer = p.sum(axis=1, keepdims=True) * p.sum(axis=0, keepdims=True)
        expected += mine.sum() / R * np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1) / outer), 0.0))
    assert pmi.mean() == pytest.approx(expected, rel=1e-12)
    assert expected > 0.05


# ------------------------------------------------------------------ step 0: the prior strength
def test_with_prior_scale_multiplies_the_default_pseudo_counts():
    from pyrater.models.base import default_beta

    scaled = pyrater.DawidSkene().with_prior_scale(0.5, 4)
    np.testing.assert_allclose(scaled.priors(4, 2)["beta"][1], default_beta(4, n=4.0))
    np.testing.assert_allclose(scaled.priors(4, 2)["alpha"], pyrater.DawidSkene().priors(4, 2)["alpha"])
    assert pyrater.DawidSkene(beta=np.full((4, 4), 2.0)).with_prior_scale(0.5, 4) is None  # the user's prior
    assert pyrater.HomogeneousDawidSkene().with_prior_scale(0.5, 4) is None  # a family without the scale
    with pytest.raises(ValueError, match="scale must be a positive number"):
        pyrater.DawidSkene().with_prior_scale(0.0, 4)


def _concentrated_errors(seed: int):
    """Dawid-Skene data whose raters each confuse every class with one other class (40 ratings per rater)."""
    K, J = 4, 40
    theta = np.zeros((J, K, K))
    for j in range(J):
        for k in range(K):
            theta[j, k, k] = 0.65
            theta[j, k, (k + 1 + j % (K - 1)) % K] = 0.35  # rater's default prior spreads errors evenly
    return pyrater.simulate("dawid_skene", 400, J, n_categories=K, raters_per_item=4, theta=theta, seed=seed)


def test_auto_tunes_the_prior_strength_by_held_out_items_and_agrees_with_fitting_each_strength():
    from pyrater.checking.choose import PRIOR_SCALES
    from pyrater.models.base import default_beta

    sim = _concentrated_errors(2)
    auto = _quiet_fit(sim.data, "auto", candidates=["dawid_skene"], seed=1, progress=False)
    choice = auto.model_choice
    # the other route: each strength fitted by hand and scored on the comparison's split
    elpd, fits = {}, {}
    for scale in PRIOR_SCALES:
        model = pyrater.DawidSkene(beta=default_beta(4, n=8.0 * scale))
        fits[scale] = _quiet_fit(sim.data, model, method="em", seed=1, progress=False)
        elpd[scale] = pyrater.kfold(fits[scale], seed=1, progress=False).elpd_i.to_numpy()
    best = max(PRIOR_SCALES, key=lambda s: elpd[s].sum())
    d = elpd[best] - elpd[1.0]
    assert best < 1.0 and not equivalent_to_best(-d.sum(), np.sqrt(d.size * np.var(d)))
    assert choice.prior_scale == {"dawid_skene": best}
    assert f"prior strength x{best:g} of the default" in choice.reason
    np.testing.assert_allclose(auto._point()[1], fits[best]._point()[1], atol=1e-8)
    assert choice.table.loc["dawid_skene", "elpd_loo"] == pytest.approx(elpd[best].sum(), abs=1e-6)
    # the raters' concentrated errors, learned with a weaker prior, label at least as well as the default
    accuracy = {s: np.mean(f.class_probabilities().to_numpy().argmax(axis=1) == sim.z) for s, f in fits.items()}
    assert accuracy[best] >= accuracy[1.0]


def test_auto_keeps_a_prior_the_user_set():
    sim = _concentrated_errors(2)
    model = pyrater.DawidSkene(beta=np.full((4, 4), 2.0) + 4 * np.eye(4))
    auto = _quiet_fit(sim.data, "auto", candidates=[model], seed=1, progress=False)
    assert auto.model_choice.prior_scale == {}
    np.testing.assert_allclose(auto.model.beta, model.beta)
