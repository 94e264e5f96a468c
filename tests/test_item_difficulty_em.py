"""EM for the item_difficulty family: Stan's mode, a monotone objective, recovery, the constraint, errors, grouped data.

K = 2 (the binary model) first, then K >= 3 categories (GLAD's multi-class form, ``logit_accuracy``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logsumexp

import pyrater
from pyrater import ItemDifficulty, RatingData
from pyrater.fits.item_difficulty import ItemDifficultyEMFit
from pyrater.models.item_difficulty import expand_to_items, item_log_joint, item_log_joint_k
from pyrater.models.kernels import soft_majority_vote

VARIANTS = {
    "1PL": ItemDifficulty(discrimination=False, guessing=False),
    "2PL": ItemDifficulty(guessing=False),
    "3PL": ItemDifficulty(),
}


@pytest.fixture(scope="module")
def small():
    return pyrater.simulate("item_difficulty", 150, 5, seed=2)


def _item_log_prior(p, pri) -> float:
    """Log prior of the item parameters (difficulty, and discrimination and guessing where present), by scipy."""
    total = float(stats.norm(0, pri["difficulty_scale"]).logpdf(p["difficulty"]).sum())
    if "discrimination" in p:
        total += stats.lognorm(s=pri["discrimination_scale"]).logpdf(p["discrimination"]).sum()
    if "guessing" in p:
        total += stats.beta(*pri["guessing_prior"]).logpdf(p["guessing"]).sum()
    return total


def log_posterior(fit: ItemDifficultyEMFit, priors: bool = True) -> float:
    """The objective recomputed from scipy's densities and the family's numpy log joint (an independent route)."""
    p, model = fit.model_params, fit.model
    pri = model.priors(2, fit.data.n_raters)
    lj = item_log_joint(
        fit.data.counts,
        np.log(fit.pi)[None],
        p["logit_sens"][None],
        p["logit_spec"][None],
        p["difficulty"][None],
        p["discrimination"][None] if "discrimination" in p else None,
        p["guessing"][None] if "guessing" in p else None,
    )[0]
    total = float(np.logaddexp(lj[:, 0], lj[:, 1]).sum())
    total += _item_log_prior(p, pri)
    if priors:
        total += stats.dirichlet(pri["alpha"]).logpdf(fit.pi)
        total += stats.norm(*pri["sens_prior"]).logpdf(p["logit_sens"]).sum()
        total += stats.norm(*pri["spec_prior"]).logpdf(p["logit_spec"]).sum()
        if model.non_adversarial:  # the truncated normal's constant: P(sens + spec > 0) under the prior
            m = pri["sens_prior"][0] + pri["spec_prior"][0]
            s = np.hypot(pri["sens_prior"][1], pri["spec_prior"][1])
            total -= fit.data.n_raters * stats.norm.logcdf(m / s)
    return total


# ------------------------------------------------------------------ Stan's optimiser finds the same mode
@pytest.mark.stan
@pytest.mark.parametrize("variant", ["2PL", "3PL"])
def test_em_map_is_stans_posterior_mode(small, stan_engine, variant):
    model = VARIANTS[variant]
    em = pyrater.em(small.data, model, method="map")
    opt = pyrater.fit(small.data, model, method="optimize", seed=1, engine=stan_engine)
    assert em.converged and type(em) is ItemDifficultyEMFit
    # the same density (Stan's log density keeps every constant), EM's mode at least as high (Stan's L-BFGS
    # stops within its tolerances: 1e-5 to 2.3e-4 below EM's mode, by host)
    assert em.log_posterior == pytest.approx(opt.log_density, abs=1e-3)
    assert em.log_posterior >= opt.log_density - 1e-6
    for name in ("logit_sens", "logit_spec", "difficulty", "discrimination", "guessing"):
        if name in em.model_params:
            np.testing.assert_allclose(em.model_params[name], np.asarray(opt.params[name]), atol=3e-3, err_msg=name)
    np.testing.assert_allclose(em.pi, np.asarray(opt.params["pi"]), atol=1e-4)
    np.testing.assert_allclose(em.theta, np.asarray(opt.params["theta"]), atol=1e-3)
    np.testing.assert_allclose(em.class_probs, opt.class_probabilities().to_numpy(), atol=1e-3)
    pd_em, pd_opt = em.item_parameters(), opt.item_parameters()
    assert list(pd_em.index) == list(pd_opt.index)
    np.testing.assert_allclose(pd_em.to_numpy(), pd_opt.to_numpy(), atol=3e-3)


# ------------------------------------------------------------------ the objective
@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("method", ["map", "ml"])
def test_objective_never_falls_and_is_the_log_posterior(small, variant, method):
    fit = pyrater.em(small.data, VARIANTS[variant], method=method, tol=1e-10)
    trace = fit.log_lik_trace
    assert fit.converged and trace.size > 5
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    assert trace[-1] - trace[0] > 1.0  # EM did climb
    assert trace[-1] == pytest.approx(log_posterior(fit, priors=method == "map"), abs=1e-8)
    assert fit.log_lik == pytest.approx(float(fit.item_log_lik().sum()), abs=1e-8)
    assert (fit.log_posterior is None) == (method == "ml")


def test_the_mode_is_a_stationary_point(small):
    """No coordinate of the MAP estimate moves the recomputed log posterior up (central differences ~ 0)."""
    fit = pyrater.em(small.data, VARIANTS["2PL"], method="map", tol=1e-12, param_tol=1e-9)
    base = dict(fit.model_params)
    for name, index in (("logit_sens", 2), ("logit_spec", 0), ("difficulty", 7), ("discrimination", 11)):
        grads = []
        for h in (1e-5, -1e-5):
            fit.model_params = {**base, name: base[name].copy()}
            fit.model_params[name][index] += h
            grads.append(log_posterior(fit))
        fit.model_params = base
        assert (grads[0] - grads[1]) / 2e-5 == pytest.approx(0.0, abs=1e-3), name


@pytest.mark.parametrize("variant", ["1PL", "3PL"])
def test_numba_and_numpy_passes_and_plain_and_squarem_runs_agree(small, variant):
    model = VARIANTS[variant]
    with warnings.catch_warnings():  # 30 iterations only: the same path, not to convergence
        warnings.simplefilter("ignore", pyrater.EMConvergenceWarning)
        plain = {
            b: pyrater.em(small.data, model, backend=b, acceleration="none", max_iter=30, method="ml")
            for b in ("numba", "scipy")
        }
    assert plain["numba"].backend == "numba" and plain["scipy"].backend == "scipy"
    np.testing.assert_allclose(plain["numba"].log_lik_trace, plain["scipy"].log_lik_trace, rtol=1e-10)
    for name, value in plain["numba"].model_params.items():
        np.testing.assert_allclose(value, plain["scipy"].model_params[name], atol=1e-8, err_msg=name)
    fast = pyrater.em(small.data, model, tol=1e-12, param_tol=1e-8, method="ml")
    slow = pyrater.em(small.data, model, acceleration="none", tol=1e-12, param_tol=1e-8, method="ml")
    assert fast.convergence["squarem_jumps"] > 0 and slow.convergence["squarem_cycles"] == 0
    assert fast.convergence["e_steps"] < slow.convergence["e_steps"]
    assert fast.log_posterior == pytest.approx(slow.log_posterior, abs=1e-8)
    np.testing.assert_allclose(fast.class_probs, slow.class_probs, atol=1e-6)


# ------------------------------------------------------------------ recovery
def test_recovers_simulated_truth_near_the_oracle():
    """2PL truth: classes near the oracle's (every true parameter known), raters and prevalence close."""
    n = 2000
    sim = pyrater.simulate("item_difficulty", n, 8, raters_per_item=5, seed=11, guessing=np.zeros(n))
    fit = pyrater.em(sim.data, ItemDifficulty(guessing=False), method="map")
    p = sim.params
    truth = item_log_joint(
        sim.data.counts,
        np.log(sim.pi)[None],
        p["logit_sens"][None],
        p["logit_spec"][None],
        p["difficulty"][None],
        p["discrimination"][None],
    )[0]
    oracle = np.mean(truth.argmax(axis=1) == sim.z)  # the classes under the true parameters, item ones too
    accuracy = np.mean(fit.point_estimate("z").to_numpy() - 1 == sim.z)  # categories 1, 2 <-> codes 0, 1
    dawid_skene = pyrater.em(sim.data, "dawid_skene", method="map")
    assert accuracy >= oracle - 0.02 and accuracy > 0.85
    assert accuracy >= np.mean(dawid_skene.class_probs.argmax(axis=1) == sim.z) - 0.005
    raters = fit.rater_parameters()
    np.testing.assert_allclose(raters["sensitivity"], expit(p["logit_sens"]), atol=0.07)
    np.testing.assert_allclose(raters["specificity"], expit(p["logit_spec"]), atol=0.07)
    np.testing.assert_allclose(fit.point_estimate("theta").to_numpy(), sim.theta, atol=0.07)
    assert fit.pi[1] == pytest.approx(sim.pi[1], abs=0.03)
    assert np.corrcoef(fit.item_parameters()["difficulty"], p["difficulty"])[0, 1] > 0.4


# ------------------------------------------------------------------ the non-adversarial constraint
def test_non_adversarial_keeps_the_labelling_from_a_swapped_start(small):
    vote = soft_majority_vote(small.data.counts, 2)
    swapped = vote[:, ::-1]
    free = pyrater.em(small.data, ItemDifficulty(guessing=False, non_adversarial=False), method="map", init=swapped)
    kept = pyrater.em(small.data, ItemDifficulty(guessing=False), method="map", init=swapped)
    right = pyrater.em(small.data, ItemDifficulty(guessing=False), method="map")
    sens = lambda f: f.model_params["logit_sens"] + f.model_params["logit_spec"]  # noqa: E731
    # unconstrained, EM stays in the mirror image: every rater adversarial, the classes swapped
    assert np.all(sens(free) < 0) and np.mean(free.class_probs.argmax(1) == small.z) < 0.2
    # constrained, every rater is non-adversarial at every start: the swapped start is taken as the mirror image
    # of the vote (its raters would be adversarial) and finds the same mode
    assert np.all(sens(kept) > 0) and np.all(sens(right) > 0)
    assert kept.log_posterior == pytest.approx(right.log_posterior, abs=1e-5)
    np.testing.assert_allclose(kept.class_probs, right.class_probs, atol=1e-4)
    restarts = pyrater.em(small.data, ItemDifficulty(guessing=False), method="map", n_restarts=3, seed=4)
    assert np.all(sens(restarts) > 0) and restarts.restart_objectives.size == 4
    assert restarts.log_posterior >= right.log_posterior - 1e-6


def test_adversarial_raters_are_found_without_the_constraint():
    J = 7
    sens = np.array([1.5, 2.0, 1.8, 2.2, 1.6, -1.5, -2.0])
    spec = np.array([2.0, 1.7, 2.1, 1.9, 2.3, -1.8, -1.2])
    sim = pyrater.simulate("item_difficulty", 600, J, seed=5, logit_sens=sens, logit_spec=spec, guessing=np.zeros(600))
    free = pyrater.em(sim.data, ItemDifficulty(guessing=False, non_adversarial=False), method="map")
    total = free.model_params["logit_sens"] + free.model_params["logit_spec"]
    assert np.all(total[:5] > 0) and np.all(total[5:] < 0)
    kept = pyrater.em(sim.data, ItemDifficulty(guessing=False), method="map")
    total = kept.model_params["logit_sens"] + kept.model_params["logit_spec"]
    assert np.all(total > 0) and total[5:].max() < 0.2  # the adversarial raters pressed against the boundary
    assert free.log_posterior > kept.log_posterior


# ------------------------------------------------------------------ results
def test_fit_results_summary_known_and_save_load(small, tmp_path):
    known = {small.data.unit_labels[0]: 2, small.data.unit_labels[1]: 1}
    fit = pyrater.fit(small.data, ItemDifficulty(guessing=False), method="em", known=known)
    assert type(fit) is ItemDifficultyEMFit and fit.method == "em_map"
    probs = fit.class_probabilities()
    assert probs.iloc[0].tolist() == [0.0, 1.0] and probs.iloc[1].tolist() == [1.0, 0.0]
    assert fit.item_parameters().shape == (150, 3) and (fit.item_parameters()["guessing"] == 0).all()
    raters = fit.rater_parameters()
    np.testing.assert_allclose(raters["sensitivity"], fit.theta[:, 1, 1])
    np.testing.assert_allclose(raters["specificity"], fit.theta[:, 0, 0])
    text = str(fit.summary())
    assert "generalised EM" in text and "2PL" in text and "posterior mode" in text
    loaded = pyrater.load(fit.save(tmp_path / "em.nc"))
    assert type(loaded) is ItemDifficultyEMFit and loaded.model == fit.model
    np.testing.assert_array_equal(loaded.class_probabilities(), fit.class_probabilities())
    for name, value in fit.model_params.items():
        np.testing.assert_array_equal(loaded.model_params[name], value)
    np.testing.assert_allclose(loaded.item_log_lik(), fit.item_log_lik(), rtol=1e-12)
    ml = pyrater.em(small.data, VARIANTS["1PL"], method="ml")
    assert "maximum likelihood" in str(ml.summary()) and set(ml.priors) == {
        "difficulty_scale",
        "discrimination_scale",
        "guessing_prior",
    }


# ------------------------------------------------------------------ grouped data
def test_grouped_data_is_expanded_to_items_as_the_stan_route_does(small):
    grouped = RatingData.from_grouped(small.data.to_grouped(tally="n"), tally="n")
    assert grouped.is_grouped and grouped.n_units < grouped.n_items
    fit = pyrater.fit(grouped, ItemDifficulty(guessing=False), method="em")
    items = expand_to_items(grouped)
    ref = pyrater.em(items, ItemDifficulty(guessing=False), method="map")
    assert fit.data.n_units == grouped.n_items == 150 and not fit.data.is_grouped
    np.testing.assert_array_equal(fit.data.counts.toarray(), items.counts.toarray())
    np.testing.assert_array_equal(fit.class_probs, ref.class_probs)
    assert fit.log_posterior == ref.log_posterior
    # the same ratings in long form: the same mode (items in another order)
    long = pyrater.em(small.data, ItemDifficulty(guessing=False), method="map")
    assert long.log_posterior == pytest.approx(fit.log_posterior, abs=1e-6)
    with pytest.raises(ValueError, match="known classes cannot be given per rating pattern"):
        pyrater.em(grouped, ItemDifficulty(), method="map", known={1: 2})


# ------------------------------------------------------------------ errors
def test_bad_input_gives_clear_errors(small):
    three = pyrater.simulate("dawid_skene", 20, 3, n_categories=3, seed=0).data
    # K = 3: the family's prior errors come before any work; the init array has K columns
    with pytest.raises(ValueError, match="sens_prior is the binary model's prior; with K = 3"):
        pyrater.em(three, ItemDifficulty(sens_prior=(1.0, 2.0)), method="map")
    with pytest.raises(ValueError, match=r"init array must have shape \(I, K\) = \(20, 3\)"):
        pyrater.em(three, ItemDifficulty(), init=np.full((20, 2), 0.5), method="ml")
    with pytest.raises(ValueError, match="alpha >= 1"):
        pyrater.em(three, ItemDifficulty(alpha=0.5), method="map")
    with pytest.raises(ValueError, match="method must be one of"):
        pyrater.em(small.data, ItemDifficulty(), method="mle")
    with pytest.raises(ValueError, match="init='search' is not available"):
        pyrater.em(small.data, ItemDifficulty(), init="search", method="ml")
    with pytest.raises(ValueError, match=r"init array must have shape \(I, K\) = \(150, 2\)"):
        pyrater.em(small.data, ItemDifficulty(), init=np.ones((10, 2)), method="ml")
    with pytest.raises(ValueError, match="backend must be one of"):
        pyrater.em(small.data, ItemDifficulty(), backend="cuda", method="ml")
    # the marginal variant (item parameters integrated out) is a Stan model: EM refuses it by name
    marginal = ItemDifficulty(item_effects="marginal")
    assert "em" not in marginal.methods and "em" in ItemDifficulty().methods
    with pytest.raises(ValueError, match="item_effects='marginal'.*runs in Stan"):
        pyrater.em(small.data, marginal, method="ml")
    with pytest.raises(ValueError, match="cannot be fitted by method='em'.*'mcmc'") as err:
        pyrater.fit(small.data, marginal, method="em")
    assert "method='em'" not in str(err.value).split(";", 1)[1]  # the alternatives offered work
    for name, value in (("compress", True), ("n_threads", 2)):
        with pytest.raises(ValueError, match=f"{name}=.* is not available for the Item difficulty"):
            pyrater.em(small.data, ItemDifficulty(), **{name: value})
    with pytest.raises(ValueError, match="guessing_prior >= 1"):
        pyrater.em(small.data, ItemDifficulty(guessing_prior=(0.5, 9.0)), method="map")
    with pytest.raises(ValueError, match="alpha >= 1"):
        pyrater.em(small.data, ItemDifficulty(alpha=(0.5, 0.5)), method="map")
    with pytest.raises(ValueError, match="max_iter must be an integer >= 1"):
        pyrater.em(small.data, ItemDifficulty(), max_iter=0, method="ml")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = pyrater.em(small.data, ItemDifficulty(), max_iter=3, method="ml")
    assert not short.converged and any("did not converge in max_iter=3" in str(w.message) for w in caught)
    # the user's data and init are not modified
    init = soft_majority_vote(small.data.counts, 2)
    before = (init.copy(), small.data.counts.toarray().copy())
    with pytest.warns(pyrater.EMConvergenceWarning):
        pyrater.em(small.data, VARIANTS["1PL"], init=init, max_iter=5, method="ml")
    np.testing.assert_array_equal(init, before[0])
    np.testing.assert_array_equal(small.data.counts.toarray(), before[1])


def test_a_rater_without_ratings_gets_the_prior_under_map_and_is_flagged_under_ml(small):
    wide = small.data.to_wide()
    wide["ghost"] = np.nan
    data = RatingData.from_wide(wide)
    assert data.n_raters == 6
    fit = pyrater.em(data, VARIANTS["2PL"], method="map")
    pri = fit.model.priors(2, 6)
    # the ghost's logits sit at its prior's mode but for the common shift every logit and difficulty shares
    shift = fit.model_params["logit_sens"][-1] - pri["sens_prior"][0]
    assert fit.model_params["logit_spec"][-1] - pri["spec_prior"][0] == pytest.approx(shift, abs=1e-6)
    assert not fit.empty_rows.any()
    ml = pyrater.em(data, VARIANTS["2PL"], method="ml")
    assert ml.empty_rows[-1].all() and not ml.empty_rows[:-1].any()


# ================================================================== K >= 3 categories
VARIANTS_K = {
    "1PL": ItemDifficulty(discrimination=False, guessing=False),
    "2PL": ItemDifficulty(guessing=False),
    "3PL": ItemDifficulty(),
    "2PL free": ItemDifficulty(guessing=False, non_adversarial=False),
}


@pytest.fixture(scope="module")
def small3():
    return pyrater.simulate("item_difficulty", 150, 6, n_categories=3, raters_per_item=4, seed=7)


def log_posterior_k(fit: ItemDifficultyEMFit, priors: bool = True) -> float:
    """The objective at K >= 3 from ``item_log_joint_k`` and scipy's densities (an independent route).

    The rater prior is scipy's truncated normal above ``-log(K - 1)`` when the
    model is non-adversarial (its normalising constant included), as the
    spec's Stan program writes it.
    """
    p, model, data = fit.model_params, fit.model, fit.data
    K, J = data.n_categories, data.n_raters
    pri = model.priors(K, J)
    acc = p["logit_accuracy"]
    assert acc.shape == (J, K)
    lj = item_log_joint_k(
        data.counts,
        K,
        np.log(fit.pi)[None],
        acc[None],
        p["difficulty"][None],
        p["discrimination"][None] if "discrimination" in p else None,
        p["guessing"][None] if "guessing" in p else None,
    )[0]
    total = float(logsumexp(lj, axis=1).sum())
    total += _item_log_prior(p, pri)
    if priors:
        total += stats.dirichlet(pri["alpha"]).logpdf(fit.pi)
        m, s = pri["accuracy_prior"][:, 0], pri["accuracy_prior"][:, 1]
        if model.non_adversarial:
            lower = (-np.log(K - 1) - m) / s
            total += stats.truncnorm(lower, np.inf, loc=m, scale=s).logpdf(acc).sum()
        else:
            total += stats.norm(m, s).logpdf(acc).sum()
    return total


@pytest.mark.parametrize(("variant", "K"), [("1PL", 3), ("3PL", 3), ("2PL free", 3), ("2PL", 4)])
def test_k_numba_and_numpy_passes_agree(variant, K):
    data = pyrater.simulate("item_difficulty", 120, 5, n_categories=K, raters_per_item=4, seed=K).data
    model = VARIANTS_K[variant]
    with warnings.catch_warnings():  # 30 iterations only: the same path, not to convergence
        warnings.simplefilter("ignore", pyrater.EMConvergenceWarning)
        fits = {b: pyrater.em(data, model, backend=b, max_iter=30, method="ml") for b in ("numba", "scipy")}
    assert fits["numba"].backend == "numba" and fits["scipy"].backend == "scipy"
    np.testing.assert_allclose(fits["numba"].log_lik_trace, fits["scipy"].log_lik_trace, rtol=1e-10)
    assert fits["numba"].model_params["logit_accuracy"].shape == (5, K)
    for name, value in fits["numba"].model_params.items():
        np.testing.assert_allclose(value, fits["scipy"].model_params[name], atol=1e-8, err_msg=name)
    np.testing.assert_allclose(fits["numba"].class_probs, fits["scipy"].class_probs, atol=1e-8)


@pytest.mark.parametrize("variant", ["1PL", "2PL", "3PL", "2PL free"])
@pytest.mark.parametrize("method", ["map", "ml"])
def test_k_objective_never_falls_and_is_the_log_posterior(small3, variant, method):
    model = VARIANTS_K[variant]
    fit = pyrater.em(small3.data, model, method=method, tol=1e-10)
    trace = fit.log_lik_trace
    assert fit.converged and trace.size > 5
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    assert trace[-1] - trace[0] > 1.0  # EM did climb
    assert trace[-1] == pytest.approx(log_posterior_k(fit, priors=method == "map"), abs=1e-8)
    assert fit.log_lik == pytest.approx(float(fit.item_log_lik().sum()), abs=1e-8)
    # the fit's shapes: K classes, (J, K) accuracies, (J, K, K) error matrices from them
    K, J = 3, small3.data.n_raters
    acc = fit.model_params["logit_accuracy"]
    assert "logit_sens" not in fit.model_params and acc.shape == (J, K)
    assert fit.class_probs.shape == (150, K) and fit.pi.shape == (K,) and fit.theta.shape == (J, K, K)
    np.testing.assert_allclose(np.einsum("jkk->jk", fit.theta), expit(acc))
    np.testing.assert_allclose(fit.theta.sum(axis=2), 1.0)
    if model.non_adversarial:
        assert np.all(acc > -np.log(K - 1))
    if method == "map":
        assert set(fit.priors) == set(model.priors(K, J)) and "accuracy_prior" in fit.priors


def test_k_squarem_and_plain_em_reach_the_same_mode(small3):
    model = VARIANTS_K["3PL"]
    fast = pyrater.em(small3.data, model, tol=1e-12, param_tol=1e-8, method="ml")
    slow = pyrater.em(small3.data, model, acceleration="none", tol=1e-12, param_tol=1e-8, method="ml")
    assert fast.convergence["squarem_jumps"] > 0 and fast.convergence["e_steps"] < slow.convergence["e_steps"]
    assert fast.log_posterior == pytest.approx(slow.log_posterior, abs=1e-8)
    np.testing.assert_allclose(fast.class_probs, slow.class_probs, atol=1e-6)


def test_k_mode_is_a_stationary_point(small3):
    """No interior coordinate of the K = 3 MAP estimate moves the recomputed log posterior (central differences)."""
    fit = pyrater.em(small3.data, VARIANTS_K["2PL"], method="map", tol=1e-12, param_tol=1e-9)
    base = dict(fit.model_params)
    acc = base["logit_accuracy"]
    assert np.all(acc > -np.log(2) + 0.5)  # every accuracy inside the constraint: the gradient vanishes there
    for name, index in (
        ("logit_accuracy", (0, 0)),
        ("logit_accuracy", (2, 1)),
        ("logit_accuracy", (5, 2)),
        ("difficulty", 7),
        ("discrimination", 11),
    ):
        values = []
        for h in (1e-5, -1e-5):
            fit.model_params = {**base, name: base[name].copy()}
            fit.model_params[name][index] += h
            values.append(log_posterior_k(fit))
        fit.model_params = base
        assert (values[0] - values[1]) / 2e-5 == pytest.approx(0.0, abs=1e-3), (name, index)


def test_k_recovers_simulated_truth_near_the_oracle():
    """2PL truth at K = 3: classes near the oracle's (every true parameter known), accuracies and prevalence close."""
    n, J = 400, 10
    truth_acc = np.random.default_rng(3).uniform(0.3, 3.0, (J, 3))
    sim = pyrater.simulate(
        "item_difficulty", n, J, n_categories=3, raters_per_item=5, seed=3, guessing=np.zeros(n),
        logit_accuracy=truth_acc,
    )  # fmt: skip
    fit = pyrater.em(sim.data, ItemDifficulty(guessing=False), method="map")
    p = sim.params
    np.testing.assert_array_equal(p["logit_accuracy"], truth_acc)
    truth = item_log_joint_k(
        sim.data.counts, 3, np.log(sim.pi)[None], truth_acc[None], p["difficulty"][None], p["discrimination"][None]
    )[0]
    oracle = np.mean(truth.argmax(axis=1) == sim.z)  # the classes under the true parameters, item ones too
    accuracy = np.mean(fit.class_probs.argmax(axis=1) == sim.z)
    assert fit.converged and accuracy >= oracle - 0.025 and accuracy > 0.9
    est = fit.model_params["logit_accuracy"]
    assert np.corrcoef(est.ravel(), truth_acc.ravel())[0, 1] > 0.7
    np.testing.assert_allclose(np.einsum("jkk->jk", fit.theta), expit(truth_acc), atol=0.2)
    np.testing.assert_allclose(fit.pi, sim.pi, atol=0.06)
    assert np.corrcoef(fit.model_params["difficulty"], p["difficulty"])[0, 1] > 0.4


def test_k_constraint_holds_a_rater_below_chance_at_the_boundary():
    """A rater who is worse than chance on one class: found by the free model, held at -log(K - 1) otherwise."""
    n, J, K = 500, 6, 3
    acc = np.full((J, K), 2.0)
    acc[5, 0] = -2.5  # rater 6 mislabels class 0 (accuracy 8% < 1/3)
    sim = pyrater.simulate("item_difficulty", n, J, n_categories=K, seed=8, guessing=np.zeros(n), logit_accuracy=acc)
    free = pyrater.em(sim.data, ItemDifficulty(guessing=False, non_adversarial=False), method="map")
    kept = pyrater.em(sim.data, ItemDifficulty(guessing=False), method="map")
    lower = -np.log(K - 1)
    a_free, a_kept = free.model_params["logit_accuracy"], kept.model_params["logit_accuracy"]
    assert a_free[5, 0] < lower - 1.0 and np.all(np.delete(a_free.ravel(), 15) > lower + 0.5)
    assert np.all(a_kept > lower) and a_kept[5, 0] < lower + 0.05
    for fit in (free, kept):
        assert fit.converged and fit.log_lik_trace[-1] == pytest.approx(log_posterior_k(fit), abs=1e-8)


def test_k_known_classes_grouped_data_and_restarts(small3):
    data = small3.data
    labels = data.unit_labels
    known = {labels[0]: data.categories[2], labels[1]: data.categories[0]}
    fit = pyrater.fit(data, ItemDifficulty(guessing=False), method="em", known=known)
    assert type(fit) is ItemDifficultyEMFit and fit.method == "em_map"
    np.testing.assert_array_equal(fit.class_probs[0], [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(fit.class_probs[1], [1.0, 0.0, 0.0])
    grouped = RatingData.from_grouped(data.to_grouped(tally="n"), tally="n")
    g = pyrater.em(grouped, ItemDifficulty(guessing=False), method="map")
    ref = pyrater.em(data, ItemDifficulty(guessing=False), method="map")
    assert g.data.n_units == 150 and g.log_posterior == pytest.approx(ref.log_posterior, abs=1e-6)
    restarts = pyrater.em(data, ItemDifficulty(guessing=False), method="map", n_restarts=2, seed=1)
    assert restarts.restart_objectives.size == 3 and restarts.log_posterior >= ref.log_posterior - 1e-6
    # a rater without ratings sits at its prior (truncated normal: mode at the location, above the bound)
    wide = data.to_wide()
    wide["ghost"] = np.nan
    ghost = pyrater.em(RatingData.from_wide(wide), VARIANTS_K["2PL"], method="map")
    pri = ghost.model.priors(3, 7)
    shift = ghost.model_params["logit_accuracy"][-1] - pri["accuracy_prior"][:, 0]
    np.testing.assert_allclose(shift, shift[0], atol=1e-6)  # only the common shift of every logit and difficulty
