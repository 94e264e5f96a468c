"""Estimation of rates and latent correlations from validation data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtri

from pyrater import RatingDataError
from pyrater.contrib.probit import (
    ProbitDawidSkene,
    confusion_rates,
    equicorrelation,
    estimate_parameters,
    nearest_correlation,
    simulate_labels,
    tetrachoric,
)
from pyrater.contrib.probit.estimation import signed_probit_covariance, validation_patterns


def validation_frame(rates, R, n_per_class, seed, missing=0.0):
    rng = np.random.default_rng(seed)
    z = np.repeat([0, 1], n_per_class)
    y = simulate_labels(z, rates, R, rng, missing=missing)
    df = pd.DataFrame(y, columns=[f"a{j}" for j in range(y.shape[1])])
    df["gold"] = z
    return df


RATES = np.array([[0.20, 0.30, 0.25, 0.35], [0.75, 0.65, 0.80, 0.70]])
R0 = np.array(
    [
        [1.0, 0.3, 0.1, 0.0],
        [0.3, 1.0, 0.2, 0.1],
        [0.1, 0.2, 1.0, 0.4],
        [0.0, 0.1, 0.4, 1.0],
    ]
)
R1 = np.array(
    [
        [1.0, 0.6, 0.5, -0.2],
        [0.6, 1.0, 0.4, 0.0],
        [0.5, 0.4, 1.0, 0.3],
        [-0.2, 0.0, 0.3, 1.0],
    ]
)


def test_tetrachoric_recovers_simulated_correlations():
    """n = 5000 items per class: the MLE's standard error is about 0.02-0.03
    here, so each estimate is within 0.05 of the truth with probability ~95%.
    Over 12 simulated data sets we require >= 90% of the estimates within 0.05
    and every entry's mean error (the bias; SE ~0.008) within 0.03."""
    truth = np.stack([R0, R1])
    iu = np.triu_indices(4, 1)
    errors = []
    for seed in range(12):
        df = validation_frame(RATES, truth, 5000, seed=500 + seed)
        est = estimate_parameters(df, correlation="tetrachoric", shrinkage=0.0)
        errors.append((est.R - truth)[:, iu[0], iu[1]])
        np.testing.assert_allclose(est.rates.to_numpy().T, RATES, atol=0.03)
    errors = np.array(errors)  # (data sets, class, pair)
    assert np.mean(np.abs(errors) < 0.05) >= 0.9
    assert np.max(np.abs(errors.mean(axis=0))) < 0.03
    # default shrinkage pulls towards the identity by lambda = 0.02
    est2 = ProbitDawidSkene().estimate(df)
    np.testing.assert_allclose(est2.R, 0.98 * est.R + 0.02 * np.eye(4), atol=1e-8)


def test_tetrachoric_with_missing_labels():
    df = validation_frame(RATES, np.stack([R0, R1]), 5000, seed=12, missing=0.15)
    est = estimate_parameters(df, shrinkage=0.0)
    assert np.max(np.abs(est.R[1] - R1)) < 0.07
    assert np.max(np.abs(est.R[0] - R0)) < 0.07


def test_tetrachoric_scalar_cases():
    mu = ndtri(np.array([0.3, 0.6]))
    # a table generated exactly from rho = 0.45 gives back 0.45
    from scipy.special import ndtr

    from pyrater.contrib.probit import bvn_cdf

    p11 = bvn_cdf(mu[0], mu[1], 0.45)
    p10 = ndtr(mu[0]) - p11
    p01 = ndtr(mu[1]) - p11
    p00 = 1 - p11 - p10 - p01
    rho = tetrachoric(mu[0], mu[1], 1e4 * p11, 1e4 * p10, 1e4 * p01, 1e4 * p00)
    assert rho == pytest.approx(0.45, abs=1e-8)
    # an empty table gives 0; perfect agreement hits the bound
    assert tetrachoric(0.0, 0.0, 0, 0, 0, 0) == 0.0
    assert tetrachoric(0.0, 0.0, 50, 0, 0, 50, rho_max=0.99) == pytest.approx(0.99)


def test_signed_probit_estimator_is_inconsistent():
    """The original specification: diagonal 4 r (1 - r) mu^2, attenuated, sign flips."""
    rates = np.array([[0.1, 0.2, 0.15], [0.8, 0.7, 0.3]])  # annotator 2 below 0.5 for positives
    R = np.stack([equicorrelation(3, 0.5), equicorrelation(3, 0.5)])
    df = validation_frame(rates, R, 20000, seed=3)
    labels = df[["a0", "a1", "a2"]].fillna(-1).to_numpy(np.int8)
    pats, counts = validation_patterns(labels, df["gold"].to_numpy())
    est_rates = confusion_rates(*(np.asarray(x) for x in _tallies(labels[df["gold"] == 1])))
    mu = ndtri(est_rates)[None, :]
    C = signed_probit_covariance(pats[1], counts[1][None, :], mu)[0]
    r = est_rates
    np.testing.assert_allclose(np.diag(C), 4 * r * (1 - r) * ndtri(r) ** 2, rtol=1e-3)
    assert np.all((np.diag(C) > 0.2) & (np.diag(C) < 0.7))
    sp = estimate_parameters(df, correlation="signed_probit", shrinkage=0.0)
    tc = estimate_parameters(df, correlation="tetrachoric", shrinkage=0.0)
    # latent correlation 0.5 everywhere: tetrachoric recovers it ...
    assert np.max(np.abs(tc.R[1] - R[1])) < 0.05
    # ... the signed-probit estimate is attenuated and flips sign for the
    # annotator on the other side of 0.5
    assert 0 < sp.R[1][0, 1] < 0.45
    assert sp.R[1][0, 2] < 0 and sp.R[1][1, 2] < 0
    np.testing.assert_allclose(np.diag(sp.R[1]), 1.0)


def _tallies(labels):
    return (labels == 1).sum(axis=0), (labels >= 0).sum(axis=0)


def test_pseudo_count_keeps_probits_finite():
    df = pd.DataFrame({"a": [1, 1, 1, 0, 0, 0], "b": [1, 0, 1, 0, 1, 0], "gold": [1, 1, 1, 0, 0, 0]})
    est = estimate_parameters(df)
    np.testing.assert_allclose(est.rates.loc["a"].to_numpy(), [0.5 / 4, 3.5 / 4])
    assert np.all(np.isfinite(est.mu))
    est0 = estimate_parameters(df, pseudo_count=1.0)
    np.testing.assert_allclose(est0.rates.loc["a"].to_numpy(), [1 / 5, 4 / 5])
    assert np.all(np.linalg.eigvalsh(est.R[1]) > 0)


def test_nearest_correlation_higham_example():
    A = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]])
    X = nearest_correlation(A, eig_floor=0.0, max_iter=2000, tol=1e-12)
    expected = np.array([[1.0, 0.7607, 0.1573], [0.7607, 1.0, 0.7607], [0.1573, 0.7607, 1.0]])
    np.testing.assert_allclose(X, expected, atol=2e-3)
    Y = nearest_correlation(A, eig_floor=1e-4)
    assert np.linalg.eigvalsh(Y).min() > 1e-5
    np.testing.assert_allclose(np.diag(Y), 1.0)
    # positive definite input is untouched; batches work
    P = equicorrelation(3, 0.4)
    out = nearest_correlation(np.stack([P, A]))
    np.testing.assert_array_equal(out[0], P)
    assert np.linalg.eigvalsh(out[1]).min() > 0


def test_independent_estimator_is_identity():
    df = validation_frame(RATES, np.stack([R0, R1]), 200, seed=1)
    est = ProbitDawidSkene(correlation="independent").estimate(df)
    np.testing.assert_array_equal(est.R, np.broadcast_to(np.eye(4), (2, 4, 4)))
    assert est.correlation(1).index.tolist() == ["a0", "a1", "a2", "a3"]


# ------------------------------------------------------------ validation
def test_validation_errors_name_column_and_value():
    good = pd.DataFrame({"x": [1, 0, 1, 0], "y": [1, np.nan, 0, 0], "gold": [1, 1, 0, 0]})
    snapshot = good.copy()
    estimate_parameters(good)
    pd.testing.assert_frame_equal(good, snapshot)  # never modified

    bad = good.assign(y=[1, 2, 0, "maybe"])
    with pytest.raises(RatingDataError, match=r"column 'y' has non-binary label\(s\) 2, 'maybe'"):
        estimate_parameters(bad)
    with pytest.raises(RatingDataError, match="column 'gold' has 1 missing value"):
        estimate_parameters(good.assign(gold=[1, np.nan, 0, 0]))
    with pytest.raises(RatingDataError, match="gold column 'truth' not found"):
        estimate_parameters(good, gold="truth")
    with pytest.raises(RatingDataError, match="no items of class 0"):
        estimate_parameters(good.assign(gold=1))
    with pytest.raises(RatingDataError, match=r"annotator column\(s\) 'z' not found"):
        estimate_parameters(good, annotators=["x", "z"])
    with pytest.raises(ValueError, match="correlation must be one of"):
        ProbitDawidSkene(correlation="pearson")
    with pytest.raises(ValueError, match="shrinkage"):
        ProbitDawidSkene(shrinkage=1.5)


def test_boolean_and_string_labels_accepted():
    df = pd.DataFrame({"x": [True, False, True, False], "y": ["1", "0", "0", None], "gold": [1, 1, 0, 0]})
    est = estimate_parameters(df)
    np.testing.assert_allclose(est.rates.loc["x"].to_numpy(), [1.5 / 3, 1.5 / 3])
    np.testing.assert_allclose(est.rates.loc["y"].to_numpy(), [0.5 / 2, 1.5 / 3])
