"""Engine parity: pystan (httpstan 4.13) and cmdstanpy (CmdStan 2.35) run the same Stan 2.35.

For each model, on long and on grouped data, the same seed, chain ids and
initial values give the same MCMC draws under both engines, hence the same
pi/theta summaries and elpd_loo (to floating-point noise: CmdStan's output is
read at full precision, ``sig_figs=18``); the posterior modes agree to the
optimisers' tolerance (scipy's L-BFGS-B for pystan, CmdStan's L-BFGS); both
engines pass Stan's own message on when sampling or compiling fails.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyrater
from pyrater import _arviz, fit, simulate
from pyrater.inference.stan.data import ERROR_MATRIX_MODEL_NAMES
from pyrater.inference.stan.engines import StanCompileError, StanError, cmdstan_available, get_engine

pytestmark = pytest.mark.stan

NO_CMDSTAN = "no working CmdStan installation: parity needs both engines (`python -m cmdstanpy.install_cmdstan`)"
needs_both = pytest.mark.skipif(cmdstan_available() is None, reason=NO_CMDSTAN)

#: Same Stan version, same seed, chain ids and inits: the samplers take the same path. Measured
#: (httpstan 4.13 / CmdStan 2.35 built from its headers, g++ 12): the draws are bit-identical
#: (max |difference| 0.0 for every variable and sample statistic); the tolerance only allows for
#: last-bit noise of other C++ builds of the same program.
DRAWS_RTOL = 1e-12


def _flat(f) -> np.ndarray:
    """pi and theta draws as (chains, draws, K + J*K*K)."""
    pi = np.asarray(f.draws["pi"])
    theta = f._theta_chains()
    return np.concatenate([pi, theta.reshape(*pi.shape[:2], -1)], axis=2)


def _data(model: str, grouped: bool) -> pyrater.RatingData:
    sim = simulate(model, n_items=60, n_raters=4, n_categories=3, seed=7)
    if not grouped:
        return sim.data
    return pyrater.RatingData.from_grouped(sim.data.to_grouped())


def _both(**kwargs):
    pytest.importorskip("stan", reason="pystan is not installed")
    out = {}
    for engine in ("pystan", "cmdstanpy"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # short chains may warn about Rhat
            out[engine] = fit(engine=engine, progress=False, **kwargs)
    return out["pystan"], out["cmdstanpy"]


@needs_both
@pytest.mark.parametrize("grouped", [False, True], ids=["long", "grouped"])
@pytest.mark.parametrize("model", ERROR_MATRIX_MODEL_NAMES)
def test_mcmc_same_seed_same_posterior(model, grouped):
    data = _data(model, grouped)
    a, b = _both(data=data, model=model, method="mcmc", chains=2, warmup=150, draws=100, seed=11)
    assert (a.engine, b.engine) == ("pystan", "cmdstanpy")
    if a.settings["stan_version"] != b.settings["stan_version"]:
        # e.g. pystan 3.14 (Stan 2.39) beside CmdStan 2.35: different samplers, the same posterior
        # within Monte Carlo error (z-scores of the means from both fits' MCSE)
        za = [_arviz.mcse(_flat(f)) for f in (a, b)]
        diff = _flat(a).mean(axis=(0, 1)) - _flat(b).mean(axis=(0, 1))
        se = np.hypot(*za)
        z = np.abs(diff[se > 0]) / se[se > 0]
        assert z.max() < 4.5, z.max()
        return
    for name in a.draws:
        assert a.draws[name].shape == b.draws[name].shape, name
        np.testing.assert_allclose(b.draws[name], a.draws[name], rtol=DRAWS_RTOL, atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(a.sample_stats["n_steps"], b.sample_stats["n_steps"])
    for which in ("pi", "theta"):
        np.testing.assert_allclose(
            b.posterior_interval(0.9, which), a.posterior_interval(0.9, which), rtol=DRAWS_RTOL, atol=1e-12
        )
        np.testing.assert_allclose(b.point_estimate(which), a.point_estimate(which), rtol=DRAWS_RTOL)
    np.testing.assert_allclose(b.class_probabilities(), a.class_probabilities(), rtol=1e-7, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        la, lb = pyrater.loo(a, warn=False), pyrater.loo(b, warn=False)
    assert np.isfinite(la.elpd_loo)
    assert lb.elpd_loo == pytest.approx(la.elpd_loo, rel=1e-7)


@needs_both
@pytest.mark.parametrize("grouped", [False, True], ids=["long", "grouped"])
@pytest.mark.parametrize("model", ERROR_MATRIX_MODEL_NAMES)
def test_optimize_same_mode(model, grouped):
    data = _data(model, grouped)
    a, b = _both(data=data, model=model, method="optimize", seed=3)
    if model == "hierarchical":
        # softmax(gamma) is unchanged by adding a constant to a row and sigma runs towards 0 at the
        # mode (fit's docstring): the optimisers stop at different points of a flat ridge, so only
        # the attained log density is comparable, to the ridge's flatness.
        assert b.log_density == pytest.approx(a.log_density, abs=0.05)
        return
    if model == "community":
        # several local modes within a few nats (which community a rater joins): the two L-BFGS
        # implementations may walk from the same start to different ones (measured under Stan 2.39
        # beside 2.35: -197.68 and -199.66). Parity is then: restarted at the better mode, each
        # engine stays there.
        best = a if a.log_density >= b.log_density else b
        start = {k: np.asarray(v) for k, v in best.params.items() if k != "log_lik"}
        a, b = _both(data=data, model=model, method="optimize", seed=3, inits=[start])
        assert a.log_density == pytest.approx(best.log_density, abs=1e-4)
    # pooled and community: the density is flat along s near the mode; L-BFGS's stopping rules end within
    # ~1e-5 of it
    flat = model in ("pooled", "community")
    assert b.log_density == pytest.approx(a.log_density, abs=1e-4 if flat else 1e-6)
    np.testing.assert_allclose(b.point_estimate("pi"), a.point_estimate("pi"), atol=2e-4)
    np.testing.assert_allclose(b.point_estimate("theta"), a.point_estimate("theta"), atol=2e-3)


# ---------------------------------------------------- Stan's own messages
FAILING = """
data { int<lower=0, upper=1> fail; }
parameters { real mu; }
model {
  if (fail) reject("deliberate failure at mu = ", mu);
  mu ~ normal(0, 1);
}
"""


def test_sampler_failure_carries_stan_message(stan_engine):
    with pytest.raises(StanError, match="(?s)deliberate failure at mu"):
        stan_engine.sample_code(FAILING, {"fail": 1}, chains=1, warmup=10, draws=10, seed=1, progress=False)


def test_compile_failure_carries_stanc_message(stan_engine):
    undeclared = "parameters { real mu; } model { nu ~ normal(0, 1); }"
    with pytest.raises(StanCompileError, match=r"Identifier ['\"]nu['\"] not in scope"):
        stan_engine.compile_code(undeclared, "undeclared")
    broken = "parameters { real mu } model { mu ~ normal(0, 1); }"
    with pytest.raises(StanCompileError, match="(?s)Syntax error.*line 1"):
        stan_engine.compile_code(broken, "broken")


def test_fit_reports_engine_and_stan_version(stan_engine):
    data = _data("homogeneous", grouped=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 2 x 50 draws: Rhat may warn
        f = fit(
            data,
            "homogeneous",
            method="mcmc",
            chains=2,
            warmup=100,
            draws=50,
            seed=2,
            progress=False,
            engine=stan_engine,
        )
    version = f.settings["stan_version"]
    assert version == stan_engine.stan_version and version.startswith("2.")
    info = f.summary().info
    assert info["engine"] == stan_engine.name and info["Stan version"] == version
    assert f"Stan version: {version}" in str(f.summary())
    attrs = f.to_inference_data().attrs
    assert attrs["engine"] == stan_engine.name and attrs["stan_version"] == version
    opt = fit(data, "homogeneous", method="optimize", seed=2, engine=stan_engine)
    assert opt.summary().info["Stan version"] == version
    assert opt.to_inference_data().attrs["stan_version"] == version


def test_auto_prefers_a_working_cmdstan():
    expected = "cmdstanpy" if cmdstan_available() is not None else "pystan"
    assert get_engine("auto").name == expected
