"""The Stan programs' full log density, normalising constants included.

httpstan's ``log_prob`` (and CmdStan's ``log_prob`` method) evaluate the
density with ``propto=true``, where ``*_lupdf`` drops constant terms, so they
cannot tell ``beta_lupdf`` + a hand-added constant from ``beta_lpdf``.  CmdStan's
Newton optimiser writes the density at its starting point with
``log_prob<propto=false>`` (first saved iteration), i.e. every constant kept:
that value must equal the brute-force log prior + log likelihood.
"""

from __future__ import annotations

import numpy as np
import pytest

from pyrater import get_model
from pyrater.inference.stan.data import STAN_MODEL_NAMES, stan_data
from pyrater.models.kernels import class_log_posterior
from test_stan_programs import log_prior, log_theta_of, random_params, simulate_long

pytestmark = pytest.mark.stan


@pytest.fixture(scope="module")
def cmdstan_engine():
    from pyrater.inference.stan.engines import cmdstan_available

    if cmdstan_available() is None:
        pytest.skip("no CmdStan installation: the full (non-propto) density needs CmdStan's optimiser")
    from pyrater.inference.stan.engines.cmdstanpy_engine import CmdStanPyEngine

    return CmdStanPyEngine()


def full_log_density(engine, model_name: str, data: dict, params: dict) -> float:
    """log p(params, y) with every constant (no Jacobian), from CmdStan at ``params``."""
    model = engine.compile(model_name)
    mle = model.optimize(
        data=data,
        inits={k: np.asarray(v).tolist() for k, v in params.items()},
        algorithm="newton",
        iter=1,
        save_iterations=True,
        jacobian=False,
        seed=1,
        show_console=False,
        sig_figs=15,
    )
    first = mle.optimized_iterations_pd.iloc[0]
    for name, value in params.items():  # the first saved iteration is the starting point
        np.testing.assert_allclose(
            [first[c] for c in first.index if c.split("[")[0] == name], np.ravel(value, order="F"), rtol=1e-9
        )
    return float(first["lp__"])


@pytest.mark.parametrize(
    "model_name", ["class_conditional", "dawid_skene", "one_coin", "mace", "ordinal", "pooled", "community"]
)
def test_full_log_density_equals_brute_force(cmdstan_engine, model_name):
    assert model_name in STAN_MODEL_NAMES
    data = simulate_long(seed=3)
    K, J = data.n_categories, data.n_raters
    d = stan_data(data, get_model(model_name))
    rng = np.random.default_rng(7)
    for _ in range(2):
        params = random_params(model_name, K, J, rng)
        _, ll = class_log_posterior(data.counts, np.log(params["pi"]), log_theta_of(model_name, params, J))
        expected = log_prior(model_name, params, d) + float(np.dot(data.weight, ll))
        assert full_log_density(cmdstan_engine, model_name, d, params) == pytest.approx(expected, rel=1e-9)
