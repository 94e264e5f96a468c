"""The blocked Gibbs sampler (method="gibbs") against Stan NUTS, and its own contract."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("numba")

import pyrater
from pyrater import _arviz
from pyrater.fits.gibbs import GibbsFit, label_switching
from pyrater.inference.gibbs.priors import conjugate_prior, log_prior_density
from pyrater.inference.gibbs.sampler import gibbs

MODELS = ("dawid_skene", "class_conditional", "homogeneous", "one_coin", "mace", "pooled", "community")

# short chains in the contract tests: Rhat warnings are expected there (the NUTS comparisons run long chains)
pytestmark = pytest.mark.filterwarnings("ignore:MCMC problems:RuntimeWarning")


# ------------------------------------------------------------------ agreement with NUTS


def _flat(fit) -> np.ndarray:
    """pi and theta draws as (chains, draws, K + J*K*K)."""
    pi = np.asarray(fit.draws["pi"])
    theta = fit._theta_chains()
    C, S = pi.shape[:2]
    return np.concatenate([pi, theta.reshape(C, S, -1)], axis=2)


def _estimates(x: np.ndarray) -> dict:
    """Posterior mean, 5% and 95% quantiles per entry, each with its Monte Carlo standard error."""
    pooled = x.reshape(-1, x.shape[2])
    out = {"mean": (pooled.mean(axis=0), _arviz.mcse(x))}
    for q in (0.05, 0.95):
        out[q] = (np.quantile(pooled, q, axis=0), _arviz.mcse(x, "quantile", prob=q))
    return out


def _z_scores(a_fit, b_fit) -> dict:
    """|z| of the difference of two fits' estimates over their combined Monte Carlo error, per entry."""
    a, b = _estimates(_flat(a_fit)), _estimates(_flat(b_fit))
    out = {}
    for key in a:
        (ea, sa), (eb, sb) = a[key], b[key]
        se = np.hypot(sa, sb)
        # entries fixed in both fits (e.g. a class-conditional off-diagonal with K = 2 equals 1 - p) have se > 0
        out[key] = np.abs(ea - eb) / se
    return out


def _rb_mcse(fit) -> np.ndarray:
    """Monte Carlo standard error of the Rao-Blackwellised class probabilities (units, K)."""
    from pyrater.models.kernels import class_log_posterior

    pi = np.asarray(fit.draws["pi"])
    theta = fit._theta_chains()
    C, S, K = pi.shape
    per_draw = np.empty((C, S, fit.data.n_units * K))
    for c in range(C):
        for s in range(S):
            lp, _ = class_log_posterior(fit.data.counts, np.log(pi[c, s]), np.log(theta[c, s]), known=fit.known)
            per_draw[c, s] = np.exp(lp).ravel()
    se = _arviz.mcse(per_draw)
    return np.nan_to_num(se).reshape(-1, K)


def _assert_agree(gibbs_fit, stan_fit, max_z: float = 4.0, rb_tol: float = 0.01) -> None:
    """|z| < 4 for means and 90% interval bounds of pi and theta; class probabilities within 0.01.

    The class probabilities of an item whose posterior is split between classes are themselves
    Monte Carlo estimates (4,000 NUTS draws give them a standard error near 0.005): where four
    combined standard errors exceed 0.01, that is the tolerance.
    """
    z = _z_scores(gibbs_fit, stan_fit)
    for key, values in z.items():
        assert np.all(np.isfinite(values)), key
        worst = int(np.argmax(values))
        assert values[worst] < max_z, f"{key}: |z| = {values[worst]:.2f} at entry {worst}"
    diff = np.abs(gibbs_fit.class_probabilities().to_numpy() - stan_fit.class_probabilities().to_numpy())
    tol = np.maximum(rb_tol, max_z * np.hypot(_rb_mcse(gibbs_fit), _rb_mcse(stan_fit)))
    assert np.all(diff < tol), f"class probabilities differ by {diff.max():.4f}"


@pytest.fixture(scope="module")
def anesthesia(anesthesia_path):
    return pd.read_csv(anesthesia_path)


@pytest.fixture(scope="module")
def caries(caries_path):
    return pyrater.RatingData.from_grouped(pd.read_csv(caries_path))


def _nuts(data, model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return pyrater.fit(data, model, method="mcmc", chains=4, warmup=1000, draws=1000, seed=3, progress=False, **kw)


@pytest.mark.stan
@pytest.mark.slow
def test_agrees_with_nuts_on_anesthesia(anesthesia, anesthesia_fit):
    g = pyrater.fit(anesthesia, "dawid_skene", method="gibbs", chains=4, warmup=1000, draws=4000, seed=1)
    _assert_agree(g, anesthesia_fit)


@pytest.mark.stan
@pytest.mark.slow
def test_marginal_pi_moves_agree_with_nuts_on_anesthesia(anesthesia, anesthesia_fit):
    g = pyrater.fit(anesthesia, "dawid_skene", method="gibbs", chains=4, warmup=1000, draws=4000, seed=5, pi_moves=3)
    _assert_agree(g, anesthesia_fit)
    assert all(0.1 < a < 0.6 for a in g.settings["pi_acceptance"])


@pytest.mark.stan
@pytest.mark.slow
def test_class_conditional_agrees_with_nuts_on_anesthesia(anesthesia, anesthesia_cc_fit):
    g = pyrater.fit(anesthesia, "class_conditional", method="gibbs", chains=4, warmup=1000, draws=4000, seed=1)
    _assert_agree(g, anesthesia_cc_fit)
    # p is the diagonal of theta, kept as its own variable like the Stan program's
    p = np.asarray(g.draws["p"])
    theta = np.asarray(g.draws["theta"])
    K = theta.shape[-1]
    np.testing.assert_array_equal(p, theta[..., np.arange(K), np.arange(K)])


@pytest.mark.stan
@pytest.mark.slow
def test_agrees_with_nuts_on_grouped_caries(caries):
    s = _nuts(caries, "dawid_skene")
    g = pyrater.fit(caries, "dawid_skene", method="gibbs", chains=4, warmup=1000, draws=4000, seed=1)
    _assert_agree(g, s)


@pytest.mark.stan
@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_agrees_with_nuts_on_simulated_data(model):
    sim = pyrater.simulate(model, n_items=150, n_raters=4, n_categories=3, seed=11)
    cats = sim.data.categories
    known = {sim.data.unit_labels[i]: cats[sim.z[i]] for i in (0, 1)} if model == "dawid_skene" else None
    s = _nuts(sim.data, model, known=known)
    g = pyrater.fit(sim.data, model, method="gibbs", chains=4, warmup=1000, draws=4000, seed=2, known=known)
    _assert_agree(g, s)
    # the per-item log-likelihood is the same function of the draws as the Stan program's generated quantity
    from pyrater.models.kernels import class_log_posterior

    pi, theta = g._draws()
    ll = np.asarray(g.draws["log_lik"]).reshape(pi.shape[0], -1)
    for s_ in (0, pi.shape[0] // 2, pi.shape[0] - 1):
        _, ref = class_log_posterior(sim.data.counts, np.log(pi[s_]), np.log(theta[s_]), known=g.known)
        np.testing.assert_allclose(ll[s_], ref, rtol=1e-10)


# ------------------------------------------------------------------ the sampler's own contract


@pytest.fixture(scope="module")
def small():
    theta = np.full((4, 3, 3), 0.1) + np.eye(3) * 0.7  # raters right 80% of the time
    return pyrater.simulate("dawid_skene", n_items=120, n_raters=4, n_categories=3, seed=5, theta=theta)


def test_recovers_simulated_truth(small):
    f = pyrater.fit(small.data, "dawid_skene", method="gibbs", chains=2, warmup=300, draws=1000, seed=1)
    assert isinstance(f, GibbsFit) and f.method == "gibbs" and f.engine == "pyrater-gibbs"
    interval = f.posterior_interval(0.99, "pi")
    truth = np.asarray(small.pi)
    assert np.all((interval.sel(bound="lower").values < truth) & (truth < interval.sel(bound="upper").values))
    z = f.point_estimate("z")
    assert (small.data.encode_categories(z.to_numpy()) == small.z).mean() > 0.9
    assert f.draws["pi"].shape == (2, 1000, 3) and f.draws["theta"].shape == (2, 1000, 4, 3, 3)
    assert f.draws["log_lik"].shape == (2, 1000, 120) and f.sample_stats["lp"].shape == (2, 1000)
    assert f.mcmc_diagnostics(warn=False).attrs["max_rhat"] < 1.02


def test_same_seed_same_draws_whatever_the_threads(small):
    a = gibbs(small.data, "dawid_skene", chains=3, warmup=20, draws=50, seed=7, n_threads=1)
    b = gibbs(small.data, "dawid_skene", chains=3, warmup=20, draws=50, seed=7, n_threads=2)
    c = gibbs(small.data, "dawid_skene", chains=3, warmup=20, draws=50, seed=8, n_threads=2)
    for key in ("pi", "theta", "log_lik"):
        np.testing.assert_array_equal(a.draws[key], b.draws[key])
    assert not np.array_equal(a.draws["pi"], c.draws["pi"])
    # chains are different streams, and start at different points
    assert not np.array_equal(a.draws["pi"][0], a.draws["pi"][1])


@pytest.mark.parametrize("model", MODELS)
def test_marginal_pi_moves_sample_the_same_posterior(model):
    """pi_moves=3 (Metropolis on pi | theta, y with z summed out) against plain blocked Gibbs.

    Two different Markov chains on one posterior: means and 90% bounds agree within Monte Carlo
    error.  Ambiguous data (raters right 60% of the time, K = 3) and two known items, where the
    moves matter; the per-item log-likelihood stays the model's.
    """
    theta = np.full((5, 3, 3), 0.2) + np.eye(3) * 0.4
    sim = pyrater.simulate("dawid_skene", n_items=200, n_raters=5, n_categories=3, seed=8, theta=theta)
    known = {sim.data.unit_labels[i]: sim.data.categories[sim.z[i]] for i in (0, 1)}
    plain = gibbs(sim.data, model, chains=4, warmup=500, draws=3000, seed=1, known=known, log_lik=False)
    moved = gibbs(sim.data, model, chains=4, warmup=500, draws=3000, seed=2, known=known, pi_moves=3)
    z = _z_scores(moved, plain)
    worst = max(v.max() for v in z.values())
    assert worst < 4, worst
    acc = moved.settings["pi_acceptance"]
    assert len(acc) == 4 and all(0.1 < a < 0.6 for a in acc), acc
    from pyrater.models.kernels import class_log_posterior

    pi, th = moved._draws()
    ll = np.asarray(moved.draws["log_lik"]).reshape(pi.shape[0], -1)
    for s_ in (0, 999, pi.shape[0] - 1):
        _, ref = class_log_posterior(sim.data.counts, np.log(pi[s_]), np.log(th[s_]), known=moved.known)
        np.testing.assert_allclose(ll[s_], ref, rtol=1e-10)


def test_marginal_pi_moves_mix_pi_faster_where_items_are_ambiguous():
    """The reason for the moves: on ambiguous data the bulk ESS of pi rises (same sweeps, same data)."""
    from pyrater.fits.diagnostics import rank_diagnostics

    theta = np.full((3, 2, 2), 0.35) + np.eye(2) * 0.3  # raters right 65% of the time, 3 ratings per item
    sim = pyrater.simulate("dawid_skene", n_items=2000, n_raters=3, n_categories=2, seed=3, theta=theta)
    ess = {}
    for m in (0, 3):
        f = gibbs(sim.data, "dawid_skene", chains=4, warmup=300, draws=1000, seed=4, log_lik=False, pi_moves=m)
        ess[m] = rank_diagnostics(np.asarray(f.draws["pi"])[..., :1])["ess_bulk"].min()
    assert ess[3] > 1.5 * ess[0], ess


def test_marginal_pi_moves_same_seed_same_draws(small):
    a = gibbs(small.data, "dawid_skene", chains=2, warmup=20, draws=50, seed=7, n_threads=1, pi_moves=2)
    b = gibbs(small.data, "dawid_skene", chains=2, warmup=20, draws=50, seed=7, n_threads=2, pi_moves=2)
    np.testing.assert_array_equal(a.draws["pi"], b.draws["pi"])
    assert a.settings["pi_acceptance"] == b.settings["pi_acceptance"]
    plain = gibbs(small.data, "dawid_skene", chains=2, warmup=20, draws=50, seed=7)
    assert "pi_acceptance" not in plain.settings and plain.settings["pi_moves"] == 0
    # without warm-up the proposal keeps the shape of the starting counts and the first scale
    cold = gibbs(small.data, "dawid_skene", chains=2, warmup=0, draws=200, seed=7, pi_moves=2)
    assert all(0.05 < a < 0.95 for a in cold.settings["pi_acceptance"]), cold.settings["pi_acceptance"]
    assert np.allclose(np.asarray(cold.draws["pi"]).sum(axis=-1), 1.0)


def test_mcmc_warnings_name_the_users_line(small):
    """The fit-time and diagnostics warnings point at the caller's file, not at pyrater's modules."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = pyrater.fit(small.data, "dawid_skene", method="gibbs", chains=4, warmup=0, draws=8, seed=1)
        f.mcmc_diagnostics()
        gibbs(small.data, "dawid_skene", chains=4, warmup=0, draws=8, seed=1)
    mcmc = [w for w in caught if "MCMC problems" in str(w.message)]
    assert len(mcmc) >= 3
    assert {w.filename for w in mcmc} == {__file__}


def test_trigamma_matches_scipy():
    from scipy.special import polygamma

    from pyrater.inference.gibbs.kernel import _trigamma

    for a in (0.01, 0.5, 1.0, 2.5, 9.9, 10.0, 30.0, 1e4):
        assert _trigamma(a) == pytest.approx(float(polygamma(1, a)), rel=1e-10)


def test_thin_keeps_every_thin_th_sweep(small):
    full = gibbs(small.data, "homogeneous", chains=2, warmup=10, draws=40, seed=4)
    thinned = gibbs(small.data, "homogeneous", chains=2, warmup=10, draws=40, thin=4, seed=4)
    assert thinned.draws["theta"].shape == (2, 10, 3, 3)
    np.testing.assert_array_equal(thinned.draws["pi"], full.draws["pi"][:, 3::4])
    np.testing.assert_array_equal(thinned.draws["log_lik"], full.draws["log_lik"][:, 3::4])
    assert thinned.settings["thin"] == 4


def test_grouped_and_long_data_give_the_same_posterior(caries):
    """Grouped data splits each pattern's tally multinomially; long data draws one z per item.

    The two samplers are different Markov chains on the same posterior: estimates agree within
    Monte Carlo error.
    """
    long = pyrater.RatingData.from_long(caries.to_long().rename(columns=str))
    assert long.n_units == caries.n_items
    g = gibbs(caries, "dawid_skene", chains=2, warmup=300, draws=1500, seed=1, log_lik=False)
    lg = gibbs(long, "dawid_skene", chains=2, warmup=300, draws=1500, seed=2, log_lik=False)
    z = _z_scores(g, lg)
    assert max(v.max() for v in z.values()) < 4


def test_log_lik_and_lp_are_the_model_density(small):
    f = gibbs(small.data, "class_conditional", chains=2, warmup=20, draws=30, seed=3)
    from pyrater.models.kernels import class_log_posterior

    pi, theta = f._draws()
    ll = np.asarray(f.draws["log_lik"]).reshape(pi.shape[0], -1)
    lp = np.asarray(f.sample_stats["lp"]).reshape(-1)
    prior = conjugate_prior("class_conditional", 3, 4)
    p = np.asarray(f.draws["p"]).reshape(pi.shape[0], 4, 3)
    for s in (0, 17, pi.shape[0] - 1):  # the last draw's log-likelihood comes from the final pass
        _, ref = class_log_posterior(small.data.counts, np.log(pi[s]), np.log(theta[s]))
        np.testing.assert_allclose(ll[s], ref, rtol=1e-10)
        from scipy.stats import beta as beta_dist
        from scipy.stats import dirichlet

        log_prior = dirichlet.logpdf(pi[s], prior.alpha) + beta_dist.logpdf(p[s], prior.beta1, prior.beta2).sum()
        np.testing.assert_allclose(lp[s], ref.sum() + log_prior, rtol=1e-10)
    assert np.allclose(
        log_prior_density(prior, pi[:1], theta[:1], p[:1])[0],
        dirichlet.logpdf(pi[0], prior.alpha) + beta_dist.logpdf(p[0], prior.beta1, prior.beta2).sum(),
    )


def test_known_items_keep_their_class(small):
    labels = small.data.unit_labels[:10]
    wrong = (small.z[:10] + 1) % 3
    known = dict(zip(labels, small.data.categories[wrong]))  # deliberately the wrong class: the fit must obey it
    f = gibbs(small.data, "dawid_skene", chains=2, warmup=50, draws=100, seed=1, known=known)
    probs = f.class_probabilities().loc[labels]
    assert np.array_equal(probs.to_numpy().argmax(axis=1), wrong)
    assert np.allclose(probs.max(axis=1), 1.0)
    # the per-item log-likelihood of a known item is log p(y_i, z_i), below the marginal
    free = gibbs(small.data, "dawid_skene", chains=2, warmup=50, draws=100, seed=1)
    assert f.draws["log_lik"][..., :10].mean() < free.draws["log_lik"][..., :10].mean()


def test_the_fit_api_works_on_a_gibbs_fit(small, tmp_path):
    f = gibbs(small.data, "homogeneous", chains=2, warmup=100, draws=200, seed=1)
    assert f.draws["theta"].shape == (2, 200, 3, 3)
    assert f.posterior_samples("theta").shape == (400, 4, 3, 3)
    s = f.summary()
    assert {"mean", "rhat", "ess_bulk"} <= set(s.parameters.columns)
    idata = f.to_inference_data()
    assert idata.posterior["theta"].dims == ("chain", "draw", "category", "rating")
    assert _arviz.has_group(idata, "log_likelihood") and idata.attrs["method"] == "gibbs"
    loo = pyrater.loo(f, warn=False)
    assert np.isfinite(loo.elpd)
    back = pyrater.load(f.save(tmp_path / "g.nc"))
    np.testing.assert_array_equal(back.draws["pi"], f.draws["pi"])
    assert isinstance(back, GibbsFit)
    pred = pyrater.posterior_predict(f, draws=5, seed=1)
    assert len(pred) == 5 * small.data.n_ratings


def test_diagnostics_equal_arviz(small):
    # ArviZ's rank-normalised split Rhat, bulk ESS and 5%/95% tail ESS, through pyrater's
    # compatibility layer (ArviZ 0.x or 1.x)
    f = gibbs(small.data, "dawid_skene", chains=3, warmup=20, draws=101, seed=1)
    table = f.mcmc_diagnostics(warn=False)
    x = _flat(f)
    np.testing.assert_allclose(table["rhat"], _arviz.rhat(x), rtol=1e-9)
    np.testing.assert_allclose(table["ess_bulk"], _arviz.ess(x, "bulk"), rtol=1e-9)
    np.testing.assert_allclose(table["ess_tail"], _arviz.ess(x, "tail"), rtol=1e-9)


def test_class_probabilities_are_rao_blackwellised(small):
    f = gibbs(small.data, "dawid_skene", chains=2, warmup=100, draws=200, seed=1)
    from pyrater.models.kernels import rao_blackwell_class_probabilities

    pi, theta = f._draws()
    ref = rao_blackwell_class_probabilities(small.data.counts, np.log(pi), np.log(theta))
    np.testing.assert_allclose(f.class_probabilities().to_numpy(), ref)


def test_label_switching_is_detected_and_reported(small):
    f = gibbs(small.data, "dawid_skene", chains=3, warmup=100, draws=200, seed=1)
    assert f.label_switching == [] and f.mcmc_diagnostics(warn=False).attrs["label_switching"] == []
    perm = np.array([2, 0, 1])
    draws = dict(f.draws)
    draws["pi"] = f.draws["pi"].copy()
    draws["theta"] = f.draws["theta"].copy()
    draws["pi"][1] = draws["pi"][1][..., perm]
    draws["theta"][1] = draws["theta"][1][:, :, perm, :]
    switched = GibbsFit(
        data=f.data,
        model=f.model,
        priors=f.priors,
        draws=draws,
        sample_stats=f.sample_stats,
        known=None,
        engine=f.engine,
        settings=f.settings,
    )
    with pytest.warns(RuntimeWarning, match="label switching: chain 1"):
        table = switched.mcmc_diagnostics()
    (entry,) = table.attrs["label_switching"]
    assert entry["chain"] == 1 and entry["reference_chains"] == [0, 2]
    # chain 1's class perm[k]... is reference class k's: undoing it restores the reference labelling
    assert np.array_equal(np.asarray(entry["permutation"]), np.argsort(perm))
    assert label_switching(np.asarray(f.draws["pi"]), f._theta_chains()) == []


def test_memory_rule(small):
    with pytest.raises(ValueError, match="thin >= "):
        gibbs(small.data, "dawid_skene", chains=4, draws=1000, seed=1, max_memory_gib=1e-4)
    with pytest.warns(UserWarning, match="log_lik not kept"):
        f = gibbs(small.data, "dawid_skene", chains=2, warmup=5, draws=100, seed=1, max_memory_gib=2e-4)
    assert "log_lik" not in f.draws
    # the pi moves' evidence (8 x chains x units x K bytes) counts too: a budget that holds the draws only
    I, J, K = small.data.n_units, small.data.n_raters, small.data.n_categories
    draws_bytes = 8.0 * 2 * 10 * (K + J * K * K)
    budget = (draws_bytes + 8.0 * 2 * I * K / 2) / 2**30
    f = gibbs(small.data, "dawid_skene", chains=2, warmup=5, draws=10, seed=1, log_lik=False, max_memory_gib=budget)
    assert np.asarray(f.draws["pi"]).shape == (2, 10, K)
    with pytest.raises(ValueError, match="pi_moves keeps every unit's rater evidence"):
        gibbs(
            small.data,
            "dawid_skene",
            chains=2,
            warmup=5,
            draws=10,
            seed=1,
            log_lik=False,
            pi_moves=1,
            max_memory_gib=budget,
        )
    with pytest.raises(ValueError, match="thin >= "):
        gibbs(small.data, "dawid_skene", chains=4, draws=1000, seed=1, pi_moves=1, max_memory_gib=1e-4)


def test_hierarchical_is_refused_naming_mcmc(small):
    with pytest.raises(ValueError, match="method='mcmc'"):
        pyrater.fit(small.data, "hierarchical", method="gibbs")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"chains": 0}, "chains must be an integer >= 1"),
        ({"draws": 2.5}, "draws must be an integer"),
        ({"warmup": -1}, "warmup must be an integer >= 0"),
        ({"thin": 0}, "thin must be an integer >= 1"),
        ({"thin": 20, "draws": 10}, "thin must be <= draws"),
        ({"seed": -3}, "seed must be"),
        ({"inits": [{}] * 4}, r"inits=\[.*\] is not used by method='gibbs'; it applies to method='mcmc'"),
        ({"known": {"no such item": 1}}, "not found"),
        ({"pi_moves": -1}, "pi_moves must be an integer >= 0"),
        ({"pi_moves": 1.5}, "pi_moves must be an integer"),
    ],
)
def test_bad_arguments(small, kwargs, match):
    with pytest.raises(ValueError, match=match):
        pyrater.fit(small.data, "dawid_skene", method="gibbs", **kwargs)


def test_thin_with_another_method_is_refused(small):
    with pytest.raises(ValueError, match="thin=2 is not used by method='em'; it applies to method='gibbs'$"):
        pyrater.fit(small.data, "dawid_skene", method="em", thin=2)
    with pytest.raises(ValueError, match="pi_moves=3 is not used by method='em'; it applies to method='gibbs'$"):
        pyrater.fit(small.data, "dawid_skene", method="em", pi_moves=3)


def test_user_priors_are_used(small):
    """A strong prior on pi moves the posterior of pi to it (and is reported)."""
    alpha = np.array([500.0, 20.0, 20.0])
    f = gibbs(small.data, pyrater.DawidSkene(alpha=alpha), chains=2, warmup=100, draws=300, seed=1)
    np.testing.assert_array_equal(f.priors["alpha"], alpha)
    assert f.point_estimate("pi").iloc[0] > 0.7
    beta = np.ones((4, 3, 3))
    f2 = gibbs(small.data, pyrater.DawidSkene(beta=beta), chains=2, warmup=50, draws=50, seed=1)
    np.testing.assert_array_equal(f2.priors["beta"], beta)


def test_command_line_method_gibbs(tmp_path, anesthesia_path):
    import subprocess
    import sys

    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyrater.cli",
            "fit",
            str(anesthesia_path),
            "--method",
            "gibbs",
            "--chains",
            "2",
            "--draws",
            "200",
            "--warmup",
            "200",
            "--out",
            str(tmp_path),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr
    params = pd.read_csv(tmp_path / "parameters.csv", index_col=0)
    assert {"mean", "5%", "95%", "rhat", "ess_bulk"} <= set(params.columns)
    ref = pyrater.fit(pd.read_csv(anesthesia_path), method="gibbs", chains=2, draws=200, warmup=200, seed=1)
    np.testing.assert_allclose(params["mean"].iloc[:4].to_numpy(), ref.point_estimate("pi").to_numpy(), rtol=1e-12)
    assert (tmp_path / "trace.png").stat().st_size > 1000


def test_more_than_eight_categories():
    """K > 8 takes the kernel's plain loop over classes instead of the eight SIMD lanes."""
    sim = pyrater.simulate("class_conditional", n_items=60, n_raters=3, n_categories=9, seed=2)
    f = gibbs(sim.data, "class_conditional", chains=2, warmup=20, draws=30, seed=1)
    from pyrater.models.kernels import class_log_posterior

    pi, theta = f._draws()
    ll = np.asarray(f.draws["log_lik"]).reshape(pi.shape[0], -1)
    for s in (0, pi.shape[0] - 1):
        _, ref = class_log_posterior(sim.data.counts, np.log(pi[s]), np.log(theta[s]))
        np.testing.assert_allclose(ll[s], ref, rtol=1e-10)
    assert f.draws["pi"].shape == (2, 30, 9)


def test_rank_diagnostics_in_one_pass_equal_the_separate_estimators():
    from pyrater.fits import diagnostics as d

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 200, 30)).cumsum(axis=1) * 0.1 + rng.normal(size=(4, 200, 30))
    x[:, :, 3] = np.round(x[:, :, 3])  # ties: average ranks, as scipy.stats.rankdata
    x[:, :, 4] = 0.25  # a constant entry
    res = d.rank_diagnostics(x)
    np.testing.assert_allclose(res["rhat"], _arviz.rhat(x), rtol=1e-9)
    np.testing.assert_allclose(res["ess_bulk"], _arviz.ess(x, "bulk"), rtol=1e-9)
    np.testing.assert_allclose(res["ess_tail"], _arviz.ess(x, "tail"), rtol=1e-9)
    np.testing.assert_allclose(res["rhat"], d.rhat_rank(x), rtol=1e-12)
    # classic split-Rhat: BDA3's formula on the split chains, written out
    half = np.concatenate([x[:, :100], x[:, 100:]], axis=0)  # (8, 100, P)
    w = half.var(axis=1, ddof=1).mean(axis=0)
    b = 100 * half.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.sqrt(((100 - 1) / 100 * w + b / 100) / w)
    np.testing.assert_allclose(d.split_rhat(x), expected, rtol=1e-12)


def test_large_fits_check_split_rhat_at_fit_time_and_defer_the_rank_table(small, monkeypatch):
    from pyrater.fits import gibbs as results

    monkeypatch.setattr(results, "FULL_CHECK_VALUES", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a converged fit: no warning from the cheap check
        f = gibbs(small.data, "dawid_skene", chains=4, warmup=200, draws=1000, seed=1)
    assert "_diagnostics" not in f.__dict__  # the rank-normalised table is not computed yet
    assert f.mcmc_diagnostics(warn=False).attrs["max_rhat"] < 1.05
    # chains stopped before warm-up: the cheap check warns and names the statistic
    with pytest.warns(RuntimeWarning, match="split-Rhat"):
        gibbs(small.data, "dawid_skene", chains=4, warmup=0, draws=4, seed=3)


def test_a_single_chain_is_told_to_run_more_chains_not_longer_ones():
    from pyrater.fits.draws import SINGLE_CHAIN, problems_message

    sim = pyrater.simulate("dawid_skene", 60, 4, n_categories=2, seed=1)
    with pytest.warns(RuntimeWarning) as record:
        pyrater.fit(sim.data, method="gibbs", chains=1, warmup=50, draws=50, seed=1, progress=False)
    messages = [str(w.message) for w in record if "MCMC problems" in str(w.message)]
    assert messages == ["MCMC problems: Rhat needs at least 2 chains. Run chains >= 2 to check convergence."]
    # with another problem beside it, the advice names both remedies
    both = problems_message([SINGLE_CHAIN, "2 divergent transitions"])
    assert "chains >= 2" in both and "longer chains" in both and "2 divergent transitions" in both
    assert problems_message(["max Rhat 1.2 > 1.01"]).endswith("Run longer chains or check the model/priors.")
