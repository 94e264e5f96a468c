"""The fit API on real Stan fits, under both engines (``stan_engine``: pystan, and cmdstanpy where CmdStan exists)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import _arviz, em, fit, simulate
from pyrater.datasets import EXAMPLE_CATEGORIES, EXAMPLE_RATERS, example_ratings
from pyrater.fits import MCMCFit, OptimizeFit

pytestmark = pytest.mark.stan


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def example_fit(stan_engine):
    """Small MCMC fit on data with string labels and repeated ratings."""
    data = pyrater.RatingData.from_long(example_ratings(n_items=60), categories=EXAMPLE_CATEGORIES)
    # 4 chains: with 2, the largest of 57 Rhat estimates crossed 1.01 (1.0103) on a converged fit (a printed warning)
    return fit(data, "dawid_skene", chains=4, warmup=500, draws=500, seed=3, progress=False, engine=stan_engine)


# --------------------------------------------------- acceptance: anaesthesia
def test_anesthesia_matches_published_rater_results(anesthesia_fit):
    """rater (Pullin et al. 2023) reports pi = (0.37, 0.41, 0.14, 0.07), theta[1,1,1] ~ 0.86."""
    pi = anesthesia_fit.point_estimate("pi")
    np.testing.assert_allclose(pi.to_numpy(), [0.37, 0.41, 0.14, 0.07], atol=0.03)
    theta = anesthesia_fit.point_estimate("theta")
    assert theta.sel(rater=1, category=1, rating=1).item() == pytest.approx(0.86, abs=0.02)
    probs = anesthesia_fit.class_probabilities().loc[3]
    np.testing.assert_allclose(probs.to_numpy(), [0.40, 0.60, 0.0, 0.0], atol=0.04)
    diag = anesthesia_fit.mcmc_diagnostics()
    assert diag["rhat"].max() <= 1.01
    assert diag.attrs["divergences"] == 0


def test_summary_has_parameters_diagnostics_and_classes(anesthesia_fit):
    s = anesthesia_fit.summary()
    assert list(s.parameters.columns) == ["mean", "5%", "95%", "rhat", "ess_bulk"]
    assert len(s.parameters) == 4 + 5 * 4 * 4
    row = s.parameters.loc["theta[1, 1, 1]"]
    assert row["5%"] < row["mean"] < row["95%"]
    draws = anesthesia_fit.posterior_samples("theta").sel(rater=1, category=1, rating=1).to_numpy()
    assert row["mean"] == pytest.approx(draws.mean())
    assert row["5%"] == pytest.approx(np.quantile(draws, 0.05))
    assert s.priors["beta"].shape == (5, 4, 4)
    assert s.classes.loc[3, "z"] == 2
    text = str(s)
    assert "Dawid-Skene fitted by mcmc" in text and "pi[1]" in text and "seed: 1" in text


def test_posterior_interval_and_samples_are_consistent(anesthesia_fit):
    samples = anesthesia_fit.posterior_samples("pi")
    assert samples.dims == ("draw", "category")
    assert samples.shape == (4000, 4)
    np.testing.assert_allclose(samples.sum("category"), 1.0, atol=1e-10)
    iv = anesthesia_fit.posterior_interval(0.5, "pi")
    assert list(iv.coords["bound"].values) == ["lower", "upper"]
    inside = ((samples >= iv.sel(bound="lower")) & (samples <= iv.sel(bound="upper"))).mean("draw")
    np.testing.assert_allclose(inside, 0.5, atol=0.01)
    with pytest.raises(ValueError, match="prob"):
        anesthesia_fit.posterior_interval(1.5)


def test_class_probabilities_are_rao_blackwellised(anesthesia_fit):
    """Mean over draws of the conditional class probabilities, computed independently here."""
    pi = anesthesia_fit.posterior_samples("pi").to_numpy()[::8]
    theta = anesthesia_fit.posterior_samples("theta").to_numpy()[::8]
    data = anesthesia_fit.data
    expected = np.zeros((data.n_units, data.n_categories))
    for s in range(pi.shape[0]):  # explicit loop over draws and ratings, no kernel
        lp = np.tile(np.log(pi[s]), (data.n_units, 1))
        for i, j, l in zip(data.unit, data.rater, data.rating):
            lp[i] += np.log(theta[s, j, :, l])
        p = np.exp(lp - lp.max(axis=1, keepdims=True))
        expected += p / p.sum(axis=1, keepdims=True)
    expected /= pi.shape[0]
    sub = pyrater.models.kernels.rao_blackwell_class_probabilities(data.counts, np.log(pi), np.log(theta))
    np.testing.assert_allclose(sub, expected, atol=1e-10)
    # and the fit's probabilities (all draws) are close to this thinned estimate
    np.testing.assert_allclose(
        anesthesia_fit.class_probabilities().to_numpy(), expected, atol=0.03
    )  # MC error of 500 draws


def test_inference_data_has_named_dims_and_log_lik(anesthesia_fit):
    idata = anesthesia_fit.to_inference_data()
    post = idata.posterior
    assert post["pi"].dims == ("chain", "draw", "category")
    assert post["theta"].dims == ("chain", "draw", "rater", "category", "rating")
    assert list(post["theta"].coords["rater"].values) == [1, 2, 3, 4, 5]
    ll = idata.log_likelihood["log_lik"]
    assert ll.dims == ("chain", "draw", "item") and ll.shape == (4, 1000, 45)
    assert int(idata.sample_stats["diverging"].sum()) == 0
    assert idata.observed_data["rating_obs"].size == anesthesia_fit.data.n_ratings
    res = _arviz.loo(idata)  # ArviZ's own az.loo on the object, InferenceData or DataTree
    assert np.isfinite(res.elpd) and res.elpd < 0


def test_log_lik_equals_kernel_at_each_draw(anesthesia_fit):
    ll = anesthesia_fit.draws["log_lik"][0, :5]
    pi = anesthesia_fit.draws["pi"][0, :5]
    theta = anesthesia_fit.draws["theta"][0, :5]
    for s in range(5):
        _, expect = pyrater.models.kernels.class_log_posterior(
            anesthesia_fit.data.counts, np.log(pi[s]), np.log(theta[s])
        )
        np.testing.assert_allclose(ll[s], expect, rtol=1e-8)


def test_save_and_load_round_trip(anesthesia_fit, tmp_path):
    path = anesthesia_fit.save(tmp_path / "fit.nc")
    back = pyrater.load(path)
    assert isinstance(back, MCMCFit)
    pd.testing.assert_series_equal(back.point_estimate("pi"), anesthesia_fit.point_estimate("pi"))
    pd.testing.assert_frame_equal(back.class_probabilities(), anesthesia_fit.class_probabilities())
    (tmp_path / "junk.nc").write_bytes(b"not a fit")
    with pytest.raises(ValueError, match="not a pyrater fit"):
        pyrater.load(tmp_path / "junk.nc")


# ------------------------------------------------------------- user labels
def test_user_labels_everywhere(example_fit):
    cats = list(EXAMPLE_CATEGORIES)
    assert list(example_fit.point_estimate("pi").index) == cats
    theta = example_fit.point_estimate("theta")
    assert list(theta.coords["rater"].values) == list(EXAMPLE_RATERS)
    assert list(theta.coords["rating"].values) == cats
    probs = example_fit.class_probabilities()
    assert probs.index[0].startswith("case_") and list(probs.columns) == cats
    assert set(example_fit.point_estimate("z")) <= set(cats)
    idata = example_fit.to_inference_data()
    assert list(idata.posterior["pi"].coords["category"].values) == cats
    assert list(idata.log_likelihood["log_lik"].coords["item"].values) == list(probs.index)


# -------------------------------------- optimisation agrees with the EM MAP
@pytest.mark.parametrize("model", ["dawid_skene", "class_conditional", "homogeneous", "one_coin", "mace", "ordinal"])
def test_optimize_matches_em_map(model, stan_engine):
    sim = simulate(model, n_items=300, n_raters=5, n_categories=3, seed=11)
    opt = fit(sim.data, model, method="optimize", seed=2, engine=stan_engine)
    ref = em(sim.data, model, method="map", tol=1e-12, max_iter=5000)
    assert isinstance(opt, OptimizeFit)
    np.testing.assert_allclose(opt.point_estimate("pi"), ref.point_estimate("pi"), atol=2e-4)
    np.testing.assert_allclose(opt.point_estimate("theta"), ref.point_estimate("theta"), atol=2e-3)
    np.testing.assert_allclose(opt.class_probabilities(), ref.class_probabilities(), atol=2e-3)
    assert opt.summary().parameters.columns.tolist() == ["estimate"]
    with pytest.raises(NotImplementedError, match="point estimate"):
        opt.posterior_samples()
    with pytest.raises(NotImplementedError, match="mcmc"):
        opt.mcmc_diagnostics()


def test_optimize_warns_on_off_diagonal_beta_below_one(stan_engine):
    sim = simulate("dawid_skene", n_items=50, n_raters=3, n_categories=3, seed=5)
    beta = np.full((3, 3), 0.5)
    np.fill_diagonal(beta, 4.0)
    with pytest.warns(UserWarning, match="off-diagonal beta"):
        fit(sim.data, pyrater.DawidSkene(beta=beta), method="optimize", seed=1, engine=stan_engine)


# -------------------------------------------- recovery of simulated truth
K_SIM = 3
PI_SIM = np.array([0.5, 0.3, 0.2])
ACC_SIM = np.array([0.9, 0.85, 0.8, 0.75, 0.7, 0.8])


def _truth(model: str) -> dict:
    """Well-identified parameters: raters right 70-90% of the time."""
    K = K_SIM
    if model == "dawid_skene":
        rng = np.random.default_rng(0)
        theta = np.empty((len(ACC_SIM), K, K))
        for j, a in enumerate(ACC_SIM):
            off = rng.dirichlet(np.full(K - 1, 3.0), size=K) * (1 - a)
            for k in range(K):
                theta[j, k] = np.insert(off[k], k, a)
        return {"pi": PI_SIM, "theta": theta}
    if model == "class_conditional":
        return {"pi": PI_SIM, "p": np.tile(ACC_SIM[:, None], (1, K))}
    if model == "one_coin":
        return {"pi": PI_SIM, "p": ACC_SIM}
    if model == "ordinal":  # shifts within 0.2 of a class width, scales 0.2-0.3 (right 70-95% of the time)
        return {"pi": PI_SIM, "shift": [0.0, 0.2, -0.2, 0.1, -0.1, 0.0], "scale": [0.2, 0.25, 0.3, 0.25, 0.2, 0.3]}
    if model == "mace":
        return {"pi": PI_SIM, "competence": ACC_SIM, "xi": np.full(K, 1 / K)}
    if model == "homogeneous":
        theta = np.full((K, K), 0.1)
        np.fill_diagonal(theta, 0.8)
        return {"pi": PI_SIM, "theta": theta}
    mu = np.zeros((K, K))
    np.fill_diagonal(mu, 2.5)
    return {"pi": PI_SIM, "mu": mu, "sigma": np.full((K, K), 0.4)}


# short chains by design; the test asserts its own convergence criterion (max Rhat < 1.05) below
@pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")
@pytest.mark.parametrize(
    "model", ["dawid_skene", "hierarchical", "class_conditional", "homogeneous", "one_coin", "mace", "ordinal"]
)
def test_mcmc_recovers_simulated_truth(model, stan_engine):
    sim = simulate(model, n_items=400, n_raters=6, n_categories=K_SIM, raters_per_item=4, seed=21, **_truth(model))
    f = fit(sim.data, model, chains=2, warmup=400, draws=400, seed=4, progress=False, engine=stan_engine)
    np.testing.assert_allclose(f.point_estimate("pi").to_numpy(), sim.pi, atol=0.06)
    theta_err = np.abs(f.point_estimate("theta").to_numpy() - sim.theta)
    assert theta_err.mean() < 0.05
    z_hat = f.class_probabilities().to_numpy().argmax(axis=1)
    accuracy = (z_hat == sim.z).mean()
    assert accuracy > 0.9
    # posterior intervals cover the truth for most parameters
    iv = f.posterior_interval(0.9, "theta").to_numpy()
    covered = ((iv[0] <= sim.theta + 1e-9) & (sim.theta <= iv[1] + 1e-9)).mean()
    assert covered > 0.75
    assert f.mcmc_diagnostics(warn=False)["rhat"].max() < 1.05


# ---------------------------------------------------- grouped versus long
def test_caries_grouped_and_long_give_the_same_posterior(caries_path, stan_engine):
    grouped = pyrater.RatingData.from_grouped(pd.read_csv(caries_path))
    long = pyrater.RatingData.from_long(grouped.to_long())
    fits = [
        fit(d, chains=2, warmup=500, draws=500, seed=8, progress=False, engine=stan_engine) for d in (grouped, long)
    ]
    for which in ("pi", "theta"):
        a, b = (f.posterior_samples(which) for f in fits)
        diff = np.abs(a.mean("draw") - b.mean("draw")).to_numpy()
        # Monte Carlo standard error of each mean with ESS ~ a few hundred
        mcse = np.sqrt(a.var("draw") / 300 + b.var("draw") / 300).to_numpy()
        assert np.all(diff < 5 * mcse + 1e-4)
    # same per-item log-likelihood layout: patterns expanded to items
    ll_g = fits[0].to_inference_data().log_likelihood["log_lik"]
    assert ll_g.sizes["item"] == grouped.n_items == long.n_units


# --------------------------------------------------------- known truth
def test_known_items_are_conditioned_on(anesthesia_path, stan_engine):
    df = pd.read_csv(anesthesia_path)
    f = fit(df, method="optimize", known={3: 1, 38: 3}, seed=1, engine=stan_engine)
    probs = f.class_probabilities()
    np.testing.assert_allclose(probs.loc[3].to_numpy(), [1, 0, 0, 0])
    np.testing.assert_allclose(probs.loc[38].to_numpy(), [0, 0, 1, 0])
    # the posterior has several modes: EM with restarts and Stan's L-BFGS from
    # several inits must agree on the best one and on its log density
    ref = em(df, "dawid_skene", method="map", known={3: 1, 38: 3}, tol=1e-12, max_iter=5000, n_restarts=10, seed=0)
    assert f.log_density == pytest.approx(ref.log_posterior, abs=1e-6)
    np.testing.assert_allclose(f.point_estimate("pi"), ref.point_estimate("pi"), atol=5e-4)
    with pytest.raises(pyrater.RatingDataError, match="not found"):
        fit(df, method="optimize", known={999: 1})


# -------------------------------------------------------------- bad input
def test_bad_arguments_are_refused_before_any_work(anesthesia_path, stan_engine):
    df = pd.read_csv(anesthesia_path)
    with pytest.raises(ValueError, match="unknown method 'nuts'.*mcmc"):
        fit(df, method="nuts")
    with pytest.raises(ValueError, match="unknown model"):
        fit(df, "rasch")
    with pytest.raises(ValueError, match="chains must be an integer >= 1"):
        fit(df, chains=0)
    with pytest.raises(ValueError, match="beta must have shape"):
        fit(df, pyrater.DawidSkene(beta=np.ones((3, 3))))
    with pytest.raises(ValueError, match="inits has 1 entries for 4 chains"):
        fit(df, inits=[{}])
    with pytest.raises(ValueError, match="unknown engine|engine"):
        fit(df, engine="jags")
    before = df.copy(deep=True)
    fit(df, method="optimize", seed=1, engine=stan_engine)
    pd.testing.assert_frame_equal(df, before)


def test_fit_em_method_uses_model_priors(anesthesia_path):
    df = pd.read_csv(anesthesia_path)
    f = fit(df, method="em")
    ref = em(df, method="map")
    np.testing.assert_allclose(f.point_estimate("pi"), ref.point_estimate("pi"))
    assert f.method == "em_map"


def test_diagnostics_warn_on_sampler_problems(anesthesia_fit):
    """The warnings come from the sampler statistics: mark some transitions as problems."""
    import dataclasses

    stats = {k: np.array(v, copy=True) for k, v in anesthesia_fit.sample_stats.items()}
    stats["diverging"][0, :3] = True
    stats["tree_depth"][1, :2] = 10
    troubled = dataclasses.replace(anesthesia_fit, sample_stats=stats)
    with pytest.warns(RuntimeWarning, match="3 divergent transitions.*2 transitions hit the maximum tree depth"):
        diag = troubled.mcmc_diagnostics()
    assert diag.attrs["divergences"] == 3 and diag.attrs["max_tree_depth_hits"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert anesthesia_fit.mcmc_diagnostics().attrs["max_tree_depth_hits"] == 0


def test_single_chain_fit_warns_that_rhat_needs_two_chains(anesthesia_path, stan_engine):
    df = pd.read_csv(anesthesia_path)
    with pytest.warns(RuntimeWarning, match="Rhat needs at least 2 chains"):
        f = fit(df, chains=1, warmup=200, draws=200, seed=1, progress=False, engine=stan_engine)
    assert np.isnan(f.mcmc_diagnostics(warn=False).attrs["max_rhat"])


def test_an_ml_method_name_is_pointed_to_pyrater_em(anesthesia_path):
    df = pd.read_csv(anesthesia_path)
    for name in ("em-ml", "ml", "EM_ML"):
        with pytest.raises(ValueError, match=r"maximum likelihood by EM: pyrater\.em\(data, model, method='ml'\)"):
            fit(df, method=name)
    with pytest.raises(ValueError, match=r"unknown method 'nuts'; choose one of \(.*\)$"):  # no hint there
        fit(df, method="nuts")


def test_majority_vote_on_grouped_data_counts_patterns():
    import pyrater

    vote = pyrater.majority_vote(pyrater.RatingData.from_grouped(pyrater.datasets.caries(), tally="n"))
    assert repr(vote) == "MajorityVote(32 patterns, 0 ties broken by 'first')"
    assert repr(pyrater.majority_vote(pyrater.datasets.anesthesia())).startswith("MajorityVote(45 items, ")
