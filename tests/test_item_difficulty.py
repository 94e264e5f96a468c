"""The item_difficulty family: model object, simulator, fits (NUTS, mode), PPC, LOO; errors."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import ItemDifficulty, RatingData, _arviz
from pyrater.checking import vote_histogram
from pyrater.models.item_difficulty import expand_to_items

I, J = 150, 5


@pytest.fixture(scope="module")
def sim():
    return pyrater.simulate("item_difficulty", I, J, seed=2)


@pytest.fixture(scope="module")
def mcmc_fit(sim, stan_engine):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyrater.fit(
            sim.data, "item_difficulty", method="mcmc", chains=2, warmup=300, draws=300, seed=3, engine=stan_engine,
            progress=False,
        )  # fmt: skip


# ------------------------------------------------------------------ model and simulator
def test_model_object_variants_and_registry():
    assert isinstance(pyrater.get_model("item_difficulty"), ItemDifficulty)
    assert ItemDifficulty().variant == "3PL" and ItemDifficulty(guessing=False).variant == "2PL"
    assert ItemDifficulty(discrimination=False, guessing=False).variant == "1PL"
    assert ItemDifficulty.methods == ("mcmc", "optimize", "pathfinder", "em") and ItemDifficulty.conjugate is None
    assert "em" not in ItemDifficulty.auto_methods  # by EM, auto_default decides (binary data, up to a size)
    assert ItemDifficulty().auto_default("em", 2, 1000) == "" and ItemDifficulty().auto_default("em", 3, 1000) is None
    assert ItemDifficulty(item_effects="marginal").auto_default("em", 2, 1000) is None  # EM cannot fit it
    priors = ItemDifficulty().priors(2, 3)
    assert priors["sens_prior"].tolist() == [1.0, 2.0] and priors["discrimination_scale"] == 0.25


def test_errors_of_the_priors_by_number_of_categories_and_bad_priors():
    with pytest.raises(ValueError, match="sens_prior is the binary model's prior; with K = 3"):
        ItemDifficulty(sens_prior=(1.0, 2.0)).priors(3, 4)
    with pytest.raises(ValueError, match="accuracy_prior is the prior of K >= 3"):
        ItemDifficulty(accuracy_prior=(1.0, 2.0)).priors(2, 4)
    with pytest.raises(ValueError, match=r"accuracy_prior must have shape \(2,\) or \(3, 2\)"):
        ItemDifficulty(accuracy_prior=np.ones((4, 2))).priors(3, 4)
    with pytest.raises(ValueError, match="accuracy_prior must have scales"):
        ItemDifficulty(accuracy_prior=(1.0, 0.0)).priors(3, 4)
    with pytest.raises(ValueError, match="logit_accuracy is for K >= 3"):
        pyrater.simulate("item_difficulty", 10, 3, logit_accuracy=np.ones((3, 2)), seed=0)
    with pytest.raises(ValueError, match="logit_sens / logit_spec are the binary model's"):
        pyrater.simulate("item_difficulty", 10, 3, n_categories=3, logit_sens=np.ones(3), seed=0)
    with pytest.raises(ValueError, match="guessing_prior must be > 0"):
        ItemDifficulty(guessing_prior=(0.0, 9.0)).priors(2, 3)
    with pytest.raises(ValueError, match="sens_prior must have a scale"):
        ItemDifficulty(sens_prior=(1.0, -2.0)).priors(2, 3)
    with pytest.raises(ValueError, match="difficulty_scale must have shape"):
        ItemDifficulty(difficulty_scale=[1.0, 2.0]).priors(2, 3)
    with pytest.raises(ValueError, match="discrimination must be True or False"):
        ItemDifficulty(discrimination="yes")


def test_simulator_is_seeded_and_follows_the_model():
    a = pyrater.simulate("item_difficulty", 2000, 4, seed=5, guessing=np.zeros(2000), difficulty=np.zeros(2000))
    b = pyrater.simulate_item_difficulty(2000, 4, seed=5, guessing=np.zeros(2000), difficulty=np.zeros(2000))
    np.testing.assert_array_equal(a.data.rating, b.data.rating)
    assert a.params["discrimination"].shape == (2000,) and a.theta.shape == (4, 2, 2)
    # difficulty 0, no guessing: a rater's agreement with the truth is near inv_logit(delta * logit)
    sens = a.theta[:, 1, 1]
    pos = a.z[a.data.unit] == 1
    for j in range(4):
        rows = pos & (a.data.rater == j)
        assert a.data.rating[rows].mean() == pytest.approx(sens[j], abs=0.06)


def test_grouped_data_is_expanded_to_items():
    caries = RatingData.from_grouped(pyrater.datasets.caries(), tally="n")
    items = expand_to_items(caries)
    assert not items.is_grouped and items.n_units == caries.n_items == 3859
    assert items.n_ratings == caries.n_ratings_total
    assert list(items.rater_labels) == list(caries.rater_labels)
    with pytest.raises(ValueError, match="known classes cannot be given per rating pattern"):
        pyrater.fit(caries, "item_difficulty", method="optimize", known={1: 2})
    from pyrater.inference.stan.data import stan_data

    with pytest.raises(ValueError, match="expand grouped data"):
        stan_data(caries, ItemDifficulty())
    assert stan_data(items, ItemDifficulty())["I"] == 3859
    # the items follow the patterns in order: LOO compares a grouped fit with an expanded one
    unit_of_item = np.repeat(np.arange(caries.n_units), caries.weight)
    np.testing.assert_array_equal(items.counts.toarray(), caries.counts.toarray()[unit_of_item])
    from types import SimpleNamespace

    from pyrater.checking.compare import _same_data

    assert _same_data(SimpleNamespace(data=caries, known=None), SimpleNamespace(data=items, known=None))


# ------------------------------------------------------------------ fits
@pytest.mark.stan
def test_mcmc_recovers_the_truth(mcmc_fit, sim):
    assert type(mcmc_fit).__name__ == "ItemDifficultyMCMCFit"
    probs = mcmc_fit.class_probabilities()
    assert probs.shape == (I, 2) and np.allclose(probs.sum(axis=1), 1)
    assert np.mean(probs.to_numpy().argmax(axis=1) == sim.z) > 0.85
    lo, hi = mcmc_fit.posterior_interval(0.98, "pi").values[:, 1]
    assert lo < sim.pi[1] < hi
    raters = mcmc_fit.rater_parameters()
    assert raters.shape == (J, 4) and (raters["sensitivity"] > 0.5).all()
    items = mcmc_fit.item_parameters()
    assert items.shape == (I, 3) and np.corrcoef(items["difficulty"], sim.params["difficulty"])[0, 1] > 0.3
    diag = mcmc_fit.mcmc_diagnostics(warn=False)
    assert f"difficulty[{sim.data.unit_labels[0]}]" in diag.index and diag.attrs["max_rhat"] < 1.1
    summary = mcmc_fit.summary()
    assert "logit_sens[1]" in diag.index and "Item difficulty" in str(summary) and len(summary.classes) == I


@pytest.mark.stan
def test_log_lik_inference_data_and_loo(mcmc_fit):
    stored = mcmc_fit.log_lik_units()
    recomputed = mcmc_fit.item_log_lik().T
    np.testing.assert_allclose(stored, recomputed, rtol=1e-8, atol=1e-8)
    idata = mcmc_fit.to_inference_data()
    assert _arviz.has_group(idata, "log_likelihood")
    assert _arviz.group(idata, "posterior")["difficulty"].shape[-1] == I
    loo = pyrater.loo(mcmc_fit, warn=False)
    assert np.isfinite(loo.elpd_loo) and loo.elpd_loo < 0
    with pytest.raises(NotImplementedError, match="per-item response probabilities"):
        mcmc_fit._effective_draws()


@pytest.mark.stan
def test_optimize_agrees_with_mcmc_on_pi(mcmc_fit, sim, stan_engine):
    opt = pyrater.fit(sim.data, "item_difficulty", method="optimize", seed=1, engine=stan_engine)
    assert type(opt).__name__ == "ItemDifficultyOptimizeFit"
    assert opt.point_estimate("pi").to_numpy() == pytest.approx(mcmc_fit.point_estimate("pi").to_numpy(), abs=0.08)
    agree = opt.point_estimate("z").to_numpy() == mcmc_fit.point_estimate("z").to_numpy()
    assert agree.mean() > 0.95
    assert opt.item_parameters().shape == (I, 3)


@pytest.mark.stan
def test_ppc_new_items_covers_data_from_the_model(mcmc_fit):
    res = pyrater.posterior_predictive_check(mcmc_fit, vote_histogram(2), draws=100, seed=1, design="new_items")
    assert res.covers(0.98).all()
    again = pyrater.posterior_predictive_check(mcmc_fit, vote_histogram(2), draws=100, seed=1, design="new_items")
    np.testing.assert_array_equal(res.simulated, again.simulated)
    same = pyrater.posterior_predictive_check(mcmc_fit, vote_histogram(2), draws=50, seed=1, design="same_items")
    assert same.covers(0.98).all()


@pytest.mark.stan
@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("PYRATER_LONG_TESTS"),
    reason="30-45 min of NUTS on caries's 3,869 items, too long for CI: PYRATER_LONG_TESTS=1 runs it",
)
def test_caries_item_difficulty_passes_the_vote_histogram_check_dawid_skene_fails():
    """Han, Adiguzel & Carpenter (2024): on caries the 3PL model covers every bin of the positive-vote histogram."""
    caries = RatingData.from_grouped(pyrater.datasets.caries(), tally="n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = dict(method="mcmc", chains=2, warmup=300, draws=300, seed=11, engine="cmdstanpy", progress=False)
        ds = pyrater.fit(caries, "dawid_skene", **kw)
        irt = pyrater.fit(caries, "item_difficulty", **kw)
    hist = vote_histogram(2)
    ds_res = pyrater.posterior_predictive_check(ds, hist, draws=300, seed=1, design="new_items")
    irt_res = pyrater.posterior_predictive_check(irt, hist, draws=300, seed=1, design="new_items")
    np.testing.assert_array_equal(irt_res.observed, [1880, 1055, 404, 247, 173, 100])
    assert ds_res.covers(0.98).sum() <= 2
    assert irt_res.covers(0.98).all()
    table = pyrater.compare({"dawid_skene": ds, "item_difficulty": irt})
    assert isinstance(table, pd.DataFrame) and table.index[0] == "item_difficulty"


@pytest.mark.stan
def test_save_and_load_keep_the_family_fit(mcmc_fit, tmp_path):
    loaded = pyrater.load(mcmc_fit.save(tmp_path / "irt.nc"))
    assert type(loaded) is type(mcmc_fit) and loaded.model == mcmc_fit.model
    np.testing.assert_allclose(loaded.class_probabilities(), mcmc_fit.class_probabilities(), rtol=1e-12)


@pytest.mark.stan
def test_pathfinder_gives_item_level_class_probabilities(sim):
    from pyrater.inference.stan.engines import cmdstan_available

    if cmdstan_available() is None:
        pytest.skip("Pathfinder needs CmdStan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf = pyrater.fit(sim.data, "item_difficulty", method="pathfinder", seed=1, engine="cmdstanpy")
    assert type(pf).__name__ == "ItemDifficultyPathfinderFit"
    assert np.mean(pf.class_probabilities().to_numpy().argmax(axis=1) == sim.z) > 0.85
    assert np.isfinite(pyrater.loo(pf, warn=False).elpd_loo)
