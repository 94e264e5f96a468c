"""method="pathfinder": Stan's Pathfinder under cmdstanpy, refused under pystan."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import _arviz, _psis, fit
from pyrater.fits.pathfinder import PathfinderFit
from pyrater.inference.stan.engines import cmdstan_available, get_engine

pytestmark = pytest.mark.stan

needs_cmdstan = pytest.mark.skipif(
    cmdstan_available() is None,
    reason="no working CmdStan installation: Pathfinder runs in CmdStan (`python -m cmdstanpy.install_cmdstan`)",
)


def test_refused_under_pystan(anesthesia_path):
    pytest.importorskip("stan", reason="pystan is not installed")
    df = pd.read_csv(anesthesia_path)
    with pytest.raises(ValueError, match="pathfinder.*needs the cmdstanpy engine.*install_cmdstan"):
        fit(df, method="pathfinder", engine="pystan")
    with pytest.raises(NotImplementedError, match="cmdstanpy"):
        get_engine("pystan").pathfinder("dawid_skene", {"K": 2, "J": 1, "I": 1})


def _pathfinder_and_warnings(df, model):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = fit(df, model, method="pathfinder", engine="cmdstanpy", chains=4, draws=1000, seed=5)
    return f, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def _nuts(df, model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 4 x 500 draws: Rhat may be just above 1.01
        return fit(
            df, model, method="mcmc", engine="cmdstanpy", chains=4, warmup=500, draws=500, seed=5, progress=False
        )


@pytest.fixture(scope="module")
def anesthesia_df(anesthesia_path):
    if cmdstan_available() is None:
        pytest.skip("no working CmdStan installation: Pathfinder runs in CmdStan")
    return pd.read_csv(anesthesia_path)


@pytest.fixture(scope="module")
def pathfinder_ds(anesthesia_df):
    """Dawid-Skene by Pathfinder on the anaesthesia data, and the RuntimeWarnings it gave."""
    return _pathfinder_and_warnings(anesthesia_df, "dawid_skene")


@pytest.fixture(scope="module")
def anesthesia_pathfinder(pathfinder_ds):
    return pathfinder_ds[0]


@needs_cmdstan
def test_dawid_skene_agrees_roughly_with_nuts_and_warns(anesthesia_df, pathfinder_ds):
    """Dawid-Skene on 45 items has 83 free parameters and a skewed posterior (rare classes): the
    normal approximations fit poorly (Pareto k > 0.7, which the fit warns about, as Stan does), so
    pi agrees with NUTS only roughly: within 0.08 (about one posterior sd), not Monte Carlo error."""
    pf, caught = pathfinder_ds
    assert isinstance(pf, PathfinderFit) and pf.method == "pathfinder" and pf.engine == "cmdstanpy"
    k = pf.pathfinder_diagnostics()["pareto_k"]
    assert k > 0.7 and not pf.pathfinder_diagnostics()["reliable"]
    assert any(f"Pareto k value ({k:.2g}) is greater than 0.7" in m for m in caught)
    nuts = _nuts(anesthesia_df, "dawid_skene")
    np.testing.assert_allclose(pf.point_estimate("pi"), nuts.point_estimate("pi"), atol=0.08)
    # the same labelling (no label switching): the most probable classes agree on nearly every item
    z_pf = pf.class_probabilities().to_numpy().argmax(1)
    z_nuts = nuts.class_probabilities().to_numpy().argmax(1)
    assert (z_pf == z_nuts).mean() >= 0.9


@needs_cmdstan
def test_class_conditional_agrees_with_nuts_within_half_a_posterior_sd(anesthesia_df):
    """With one accuracy per rater and class (20 + 3 parameters) the approximation is usable
    (k < 0.7, no warning) and the resampled pi means land within half a posterior sd of NUTS's:
    the approximation's bias, which more draws do not remove, stays small against the posterior
    spread."""
    pf, caught = _pathfinder_and_warnings(anesthesia_df, "class_conditional")
    assert pf.pathfinder_diagnostics()["pareto_k"] < 0.7 and not any("Pareto k" in m for m in caught)
    nuts = _nuts(anesthesia_df, "class_conditional")
    sd = nuts.posterior_samples("pi").std("draw").to_numpy()
    diff = np.abs(pf.point_estimate("pi").to_numpy() - nuts.point_estimate("pi").to_numpy())
    assert np.all(diff < 0.5 * sd)


@needs_cmdstan
def test_result_api_and_psis_diagnostics(anesthesia_pathfinder):
    pf = anesthesia_pathfinder
    assert pf.n_chains == 1 and pf.n_draws == 1000
    samples = pf.posterior_samples("pi")
    assert samples.shape == (1000, 4)
    np.testing.assert_allclose(samples.sum("category"), 1, atol=1e-12)
    iv = pf.posterior_interval(0.9, "pi")
    assert np.all(iv.sel(bound="lower") < iv.sel(bound="upper"))
    # Rao-Blackwellised class probabilities from the resampled pi/theta draws
    pi, theta = pf._draws()
    expect = pyrater.models.kernels.rao_blackwell_class_probabilities(pf.data.counts, np.log(pi), np.log(theta))
    np.testing.assert_allclose(pf.class_probabilities().to_numpy(), expect)
    # PSIS: weights normalised, k from the importance ratios of all 4 x 1000 approximate draws
    diag = pf.pathfinder_diagnostics()
    assert diag["n_approximate_draws"] == 4000 and pf.lp.shape == pf.lp_approx.shape == (4000,)
    assert np.exp(pf.log_weights).sum() == pytest.approx(1.0)
    assert np.isfinite(diag["pareto_k"]) and diag["reliable"] == (diag["pareto_k"] < 0.7)
    assert 1 <= diag["ess_importance"] <= 4000 and 1 <= diag["unique_draws"] <= 1000
    info = pf.summary().info
    assert info["Pareto k"] == pytest.approx(diag["pareto_k"], abs=1e-3) and info["Stan version"].startswith("2.")
    assert "rhat" not in pf.summary().parameters.columns
    with pytest.raises(NotImplementedError, match="pathfinder_diagnostics"):
        pf.mcmc_diagnostics()
    # LOO through log_lik, and the export says which method, engine and Stan version
    idata = pf.to_inference_data()
    assert idata.attrs["method"] == "pathfinder" and idata.attrs["engine"] == "cmdstanpy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = pyrater.loo(pf, warn=False)
    assert np.isfinite(loo.elpd_loo) and loo.elpd_loo < 0


@needs_cmdstan
def test_psis_weights_are_stans_and_not_degenerate(anesthesia_pathfinder):
    """The Pathfinder ratios lp - lp_approx are smoothed as Stan's own PSIS step does (tail length
    floor(min(0.2 S, 3 sqrt(S)))), the same numbers on both ArviZ lines: on 1.x they equal arviz_stats'
    psislw of the negated ratios (it takes the log-likelihood, and uses the same tail rule); on 0.x
    they equal az.psislw given that tail (checked in test_psis.py's reference tests). The heaviest
    draw carries well under the whole weight and the resample keeps many distinct draws."""
    pf = anesthesia_pathfinder
    log_ratios = pf.lp - pf.lp_approx
    S = log_ratios.size
    lw, k = _psis.psislw(log_ratios, tail_length=_psis.stan_tail_length(S))
    np.testing.assert_array_equal(pf.log_weights, lw)
    assert pf.pareto_k == k
    if _arviz.is_datatree_line():
        from arviz_stats.base import array_stats

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref_lw, ref_k = array_stats.psislw(-log_ratios)
        np.testing.assert_allclose(lw, np.asarray(ref_lw), rtol=0, atol=1e-10)
        assert k == pytest.approx(float(ref_k), abs=1e-10)
    assert _psis.stan_tail_length(S) == _psis.n_pareto_tail(S) - 1  # one draw fewer than R's loo at S = 4000
    w = np.exp(pf.log_weights)
    assert w.max() < 0.8 and pf.pathfinder_diagnostics()["unique_draws"] >= 20


@needs_cmdstan
def test_resampled_draws_carry_their_own_log_density(anesthesia_pathfinder):
    """Each kept draw's lp is Stan's log density at that draw (the resampling kept draws and lp aligned)."""
    pf = anesthesia_pathfinder
    eng = get_engine("cmdstanpy")
    from pyrater.inference.stan.data import stan_data

    d = stan_data(pf.data, pf.model)
    diffs = []
    for s in (0, 17, 500):
        params = {k: np.asarray(pf.draws[k])[0, s] for k in ("pi", "theta")}
        diffs.append(pf.sample_stats["lp"][0, s] - eng.log_prob("dawid_skene", d, params, jacobian=True))
    assert np.ptp(diffs) < 1e-6  # equal up to the constant Stan's lp__ drops


@needs_cmdstan
def test_pathfinder_is_reproducible_and_validates(anesthesia_path):
    df = pd.read_csv(anesthesia_path)
    kw = dict(model="homogeneous", method="pathfinder", engine="cmdstanpy", chains=2, draws=200, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # Pareto k ~0.7 for this small run
        a, b = fit(df, **kw), fit(df, **kw)
    np.testing.assert_array_equal(a.draws["pi"], b.draws["pi"])
    with pytest.raises(ValueError, match="draws"):
        fit(df, **dict(kw, draws=0))
