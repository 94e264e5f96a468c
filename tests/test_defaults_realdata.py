"""The defaults of issue 25 item 3 on gold-labelled crowd data (skips without ../shared/data)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrater
from conftest import SHARED_DATA, bench_module, shared_file


@pytest.fixture(scope="module")
def weather():
    shared_file("weather_sentiment_amt", "ratings.csv")
    return bench_module("realdata").load_dataset("weather_sentiment_amt", SHARED_DATA)


def _accuracy(ds, fit) -> float:
    return bench_module("defaults").accuracy(ds, fit.class_probabilities())


def test_map_with_the_default_priors_at_k5_on_crowd_data(weather):
    """K = 5: the default off-diagonal pseudo-count is 0.8; the log-odds mode exists and beats ML here."""
    assert weather.data.n_categories == 5
    mode = pyrater.em(weather.data, method="map")
    ml = pyrater.em(weather.data, method="ml")
    assert mode.converged and mode.mode_scale == "log_odds"
    assert np.all(mode.theta > 0)
    assert _accuracy(weather, mode) >= _accuracy(weather, ml)
    assert _accuracy(weather, mode) > 0.84  # majority vote: 0.847


def test_squarem_reaches_plain_ems_estimate_on_crowd_data(weather):
    plain = pyrater.em(weather.data, method="ml", acceleration="none")
    fast = pyrater.em(weather.data, method="ml")
    assert plain.converged and fast.converged
    assert fast.log_lik >= plain.log_lik - 1e-6
    np.testing.assert_allclose(fast.class_probs, plain.class_probs, atol=1e-4)
    assert np.all(np.diff(fast.log_lik_trace) >= -1e-10 * np.abs(fast.log_lik_trace[1:]))


def test_mace_default_prior_converges_and_predicts_held_out_items_on_crowd_data():
    """MACE's default competence prior Beta(2, 2) on weather_sentiment_cf (K = 5, 461 raters, 1720
    ratings, most raters with a handful): EM converges in under a hundred iterations and every held-out
    item has a positive predictive density.  Under the uniform Beta(1, 1) EM pushes hundreds of raters
    to competence exactly 0 or 1, leaves error probabilities of exactly 0, and does not converge."""
    shared_file("weather_sentiment_cf", "ratings.csv")
    ds = bench_module("realdata").load_dataset("weather_sentiment_cf", SHARED_DATA)
    mace = pyrater.em(ds.data, "mace", method="map")
    assert mace.converged and mace.n_iter < 500 and np.all(mace.theta > 0)
    assert np.isfinite(pyrater.kfold(mace, seed=1, progress=False).elpd)
    assert _accuracy(ds, mace) > 0.86  # majority vote: 0.900, Dawid-Skene 0.880
    with pytest.warns(pyrater.EMConvergenceWarning):
        flat = pyrater.em(ds.data, pyrater.MACE(beta1=1, beta2=1), method="map", max_iter=500)
    competence = pyrater.models.mace_parameters(flat.theta)[0]
    assert not flat.converged and np.sum((competence < 1e-9) | (competence > 1 - 1e-9)) > 100
    assert np.any(flat.theta == 0)
