"""EM for finite mixtures of binomials: the three-coin worked example and more."""

from __future__ import annotations

from math import comb, log

import numpy as np
import pytest

from pyrater.contrib.mixture import (
    binomial_log_pmf,
    binomial_mixture_em,
    binomial_mixture_responsibilities,
)

HEADS = [6, 5, 4, 2, 6, 6, 6, 5, 4, 2, 5, 5, 3, 4, 6, 4, 5, 6, 3, 3]
W0 = [0.25, 0.5, 0.25]
P0 = [0.4, 0.5, 0.65]


def test_first_e_step_three_coins_six_heads():
    r = binomial_mixture_responsibilities([6], 10, W0, P0)
    # the values (the first one truncated rather than rounded)
    np.testing.assert_allclose(r[0], [0.146814, 0.5401758, 0.3130094], atol=1e-6)


def test_first_e_step_matches_hand_formula_for_every_outcome():
    r = binomial_mixture_responsibilities(HEADS, 10, W0, P0)
    for x, row in zip(HEADS, r):
        lik = [w * comb(10, x) * p**x * (1 - p) ** (10 - x) for w, p in zip(W0, P0)]
        np.testing.assert_allclose(row, np.array(lik) / sum(lik), rtol=1e-12)


def test_log_pmf_matches_comb():
    got = binomial_log_pmf(np.array([0, 3, 10]), 10, np.array([0.3, 0.9]))
    for i, x in enumerate([0, 3, 10]):
        for c, p in enumerate([0.3, 0.9]):
            assert got[i, c] == pytest.approx(log(comb(10, x) * p**x * (1 - p) ** (10 - x)), rel=1e-12)


def test_three_coins_log_lik_increases_and_converges():
    fit = binomial_mixture_em(HEADS, 10, W0, P0)
    trace = fit.log_lik_trace
    assert fit.converged
    assert np.all(np.diff(trace) >= -1e-12)
    assert trace[-1] > trace[0] + 1.0
    # the first value is the log-likelihood at the starting values
    start = sum(log(sum(w * comb(10, x) * p**x * (1 - p) ** (10 - x) for w, p in zip(W0, P0))) for x in HEADS)
    assert trace[0] == pytest.approx(start, rel=1e-12)
    # these counts are underdispersed: the ML mixture is one coin at the overall rate
    rate = sum(HEADS) / (10 * len(HEADS))
    one_coin = sum(log(comb(10, x) * rate**x * (1 - rate) ** (10 - x)) for x in HEADS)
    assert fit.log_lik == pytest.approx(one_coin, abs=1e-6)
    np.testing.assert_allclose(fit.p, rate, atol=1e-3)
    np.testing.assert_allclose(fit.weights.sum(), 1.0)


def test_frequency_weights_equal_expanded_data():
    values, freq = np.unique(HEADS, return_counts=True)
    with pytest.warns(UserWarning, match="did not converge"):
        a = binomial_mixture_em(HEADS, 10, W0, P0, tol=0.0, max_iter=7)
    with pytest.warns(UserWarning, match="did not converge"):
        b = binomial_mixture_em(values, 10, W0, P0, freq=freq, tol=0.0, max_iter=7)
    np.testing.assert_allclose(a.log_lik_trace, b.log_lik_trace, rtol=1e-12)
    np.testing.assert_allclose(a.p, b.p, rtol=1e-12)
    np.testing.assert_allclose(a.weights, b.weights, rtol=1e-12)


def test_recovers_well_separated_mixture():
    rng = np.random.default_rng(7)
    n = rng.integers(15, 30, size=3000)
    comp = rng.choice(2, size=n.size, p=[0.3, 0.7])
    x = rng.binomial(n, np.array([0.15, 0.8])[comp])
    fit = binomial_mixture_em(x, n, [0.5, 0.5], [0.3, 0.6])
    assert fit.converged
    np.testing.assert_allclose(fit.weights, [0.3, 0.7], atol=0.03)
    np.testing.assert_allclose(fit.p, [0.15, 0.8], atol=0.02)
    assert np.mean(fit.responsibilities.argmax(1) == comp) > 0.99


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"x": [1, 2], "n_trials": 1, "weights": [1.0], "p": [0.5]}, "x <= n_trials"),
        ({"x": [1, -2], "n_trials": 5, "weights": [1.0], "p": [0.5]}, "non-negative integer"),
        ({"x": [1, 2], "n_trials": 5, "weights": [0.5, 0.6], "p": [0.5, 0.2]}, "sum to 1"),
        ({"x": [1, 2], "n_trials": 5, "weights": [0.5, 0.5], "p": [0.5]}, "same length"),
        ({"x": [1, 2], "n_trials": 5, "weights": [1.0], "p": [1.5]}, r"\[0, 1\]"),
    ],
)
def test_bad_input_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        binomial_mixture_em(**kwargs)
