"""The tempered-likelihood experiment of the calibration study (bench/tempering.py).

It is a research experiment, not an option of the package (see bench/RESULTS_calibration.md);
these tests keep the study's numbers reproducible.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import pyrater
from conftest import bench_module

tempering = bench_module("tempering")
tempered_class_probabilities = tempering.tempered_class_probabilities
loo_rating_log_score = tempering.loo_rating_log_score


def test_power_one_reproduces_the_em_class_probabilities():
    sim = pyrater.simulate("dawid_skene", n_items=300, n_raters=4, n_categories=3, seed=11)
    fit = pyrater.em(sim.data, method="ml")
    t = tempered_class_probabilities(fit, power=1.0)
    np.testing.assert_allclose(t.probabilities.to_numpy(), fit.class_probabilities().to_numpy(), atol=1e-8)


def test_tempering_power_is_near_one_for_independent_raters_and_below_for_shared_mistakes():
    sim = pyrater.simulate("dawid_skene", n_items=600, n_raters=6, n_categories=3, seed=2)
    assert 0.85 < tempered_class_probabilities(pyrater.em(sim.data, method="ml")).power < 1.2
    # a third of the items are hard: raters share one wrong class, so ratings are correlated given the class
    rng = np.random.default_rng(5)
    I, J, K = 600, 6, 3
    z = rng.integers(0, K, I)
    hard = rng.random(I) < 0.3
    decoy = (z + rng.integers(1, K, I)) % K
    noise = rng.integers(0, K, (I, J))
    u = rng.random((I, J))
    y = np.where(hard[:, None], np.where(u < 0.55, decoy[:, None], z[:, None]), np.where(u < 0.8, z[:, None], noise))
    df = pd.DataFrame({"item": np.repeat(np.arange(I), J), "rater": np.tile(np.arange(J), I), "rating": y.ravel()})
    fit = pyrater.em(df, method="ml")
    t = tempered_class_probabilities(fit)
    assert t.power < 0.75 and t.log_score > t.log_score_untempered
    truth = pd.Series(z, index=np.arange(I))
    assert pyrater.score(t.probabilities, truth)["ece"] < pyrater.score(fit.class_probabilities(), truth)["ece"]
    # the criterion is maximised at the chosen power
    data = fit.data
    args = (data.counts, data.weight.astype(float), np.log(fit.pi), np.log(np.maximum(fit.theta, 1e-15)))
    at = loo_rating_log_score(*args, t.power)
    assert at >= loo_rating_log_score(*args, t.power * 0.8) and at >= loo_rating_log_score(*args, t.power * 1.2)
