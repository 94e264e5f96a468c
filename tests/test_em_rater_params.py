"""EM fits of the families with a few numbers per rater report them: one-coin p, class-conditional p, MACE's.

Gibbs and Stan fits have always carried them (they are the samplers' and the
Stan programs' parameters); an EM fit gave only theta, from which a MACE
user had to work out each rater's competence by hand.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyrater
from pyrater.models.class_conditional import class_conditional_theta
from pyrater.models.mace import mace_theta
from pyrater.models.one_coin import one_coin_theta

NAMES = {"one_coin": {"p": (5,)}, "class_conditional": {"p": (5, 3)}, "mace": {"competence": (5,), "xi": (5, 3)}}


def _rebuild(family: str, params: dict) -> np.ndarray:
    if family == "one_coin":
        return one_coin_theta(params["p"], 3)
    if family == "class_conditional":
        return class_conditional_theta(params["p"])
    return mace_theta(params["competence"], params["xi"])


@pytest.fixture(scope="module")
def sims():
    return {f: pyrater.simulate(f, 300, 5, n_categories=3, raters_per_item=4, seed=7) for f in NAMES}


@pytest.mark.parametrize("family", list(NAMES))
@pytest.mark.parametrize("method", ["ml", "map"])
def test_em_reports_the_rater_parameters_its_theta_is_made_of(sims, family, method):
    sim = sims[family]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pyrater.em(sim.data, family, method=method, seed=1)
    params = fit.model_params
    assert {k: v.shape for k, v in params.items()} == NAMES[family]
    np.testing.assert_allclose(_rebuild(family, params), fit.theta, atol=1e-10)
    # the same names and shapes as the Gibbs sampler's draws (and the Stan programs' parameters)
    gibbs = pyrater.fit(sim.data, family, method="gibbs", seed=1, chains=2, warmup=50, draws=50, progress=False)
    assert {k: gibbs.draws[k].shape[2:] for k in NAMES[family]} == NAMES[family]
    posterior = fit.to_inference_data().posterior
    assert set(NAMES[family]) <= set(posterior.data_vars)
    assert posterior[next(iter(NAMES[family]))].dims[:3] == ("chain", "draw", "rater")


def test_mace_em_finds_the_spammers(sims):
    sim = sims["mace"]
    fit = pyrater.em(sim.data, "mace", method="map", seed=1)
    truth = sim.params["competence"]
    np.testing.assert_allclose(fit.model_params["competence"], truth, atol=0.1)
    assert np.argmin(fit.model_params["competence"]) == np.argmin(truth)


def test_rater_parameters_survive_save_and_load(sims, tmp_path):
    fit = pyrater.em(sims["mace"].data, "mace", method="map", seed=1)
    back = pyrater.load(fit.save(tmp_path / "mace.nc"))
    for key, value in fit.model_params.items():
        np.testing.assert_array_equal(np.asarray(back.model_params[key]), value)


def test_dawid_skene_has_no_parameters_besides_theta(sims):
    assert pyrater.em(sims["one_coin"].data, "dawid_skene", method="map", seed=1).model_params is None


@pytest.mark.parametrize("method", ["em", "gibbs", pytest.param("optimize", marks=pytest.mark.stan)])
def test_point_estimate_of_the_models_own_parameters(sims, method, tmp_path):
    """fit.point_estimate("competence"): EM's mode, the optimiser's, the samplers' posterior mean; labelled."""
    sim = sims["mace"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = pyrater.fit(sim.data, "mace", method=method, seed=1, progress=False)
    assert fit.model_parameters() == ["competence", "xi"]
    competence = fit.point_estimate("competence")
    assert competence.dims == ("rater",) and list(competence["rater"].values) == list(sim.data.rater_labels)
    expected = {
        "em": lambda: fit.model_params["competence"],
        "gibbs": lambda: fit.draws["competence"].mean(axis=(0, 1)),
        "optimize": lambda: fit.params["competence"],
    }[method]()
    np.testing.assert_allclose(competence.values, expected, rtol=1e-12)
    np.testing.assert_allclose(competence.values, sim.params["competence"], atol=0.15)
    assert fit.point_estimate("xi").dims == ("rater", "rating")
    back = pyrater.load(fit.save(tmp_path / "f.nc"))
    np.testing.assert_allclose(back.point_estimate("competence").values, competence.values, rtol=1e-12)
    with pytest.raises(ValueError, match=r"or one of this model's own: 'competence', 'xi'; got 'p'"):
        fit.point_estimate("p")


def test_dawid_skene_has_no_own_parameters_to_name(sims):
    fit = pyrater.em(sims["one_coin"].data, "dawid_skene", method="map", seed=1)
    assert fit.model_parameters() == []
    with pytest.raises(ValueError, match=r"^which must be 'pi', 'theta' or 'z'; got 'p'$"):
        fit.point_estimate("p")
