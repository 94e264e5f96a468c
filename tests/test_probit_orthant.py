"""Orthant probabilities of the probit Dawid-Skene model."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import multivariate_normal

from pyrater.contrib.probit import bvn_cdf, encode_patterns, orthant_log_prob, sobol_points


def random_correlation(J: int, rng: np.random.Generator) -> np.ndarray:
    A = rng.normal(size=(J, J + 2))
    S = A @ A.T
    d = np.sqrt(np.diag(S))
    return S / np.outer(d, d)


def all_patterns(J: int) -> np.ndarray:
    return ((np.arange(2**J)[:, None] >> np.arange(J)) & 1).astype(np.int8)


@pytest.mark.parametrize("J", [3, 4, 5, 6])
def test_orthant_matches_brute_force_monte_carlo(J):
    rng = np.random.default_rng(100 + J)
    R = random_correlation(J, rng)
    mu = rng.normal(0.0, 1.0, size=J)
    pats = all_patterns(J)
    # some patterns with missing labels, marginalised over the absent annotators
    miss = pats[: 2 ** (J - 1)].copy()
    miss[:, 0] = -1
    miss2 = pats[::3].copy()
    miss2[:, [1, J - 1]] = -1
    patterns = np.vstack([pats, miss, miss2])
    p = np.exp(orthant_log_prob(patterns, mu, R, n_qmc=4096, rng=1))

    n = 1_000_000
    e = rng.multivariate_normal(np.zeros(J), R, size=n, method="cholesky")
    y = (e > -mu).astype(np.int8)
    mc = np.empty(len(patterns))
    code = y.astype(np.int64) @ (2 ** np.arange(J))
    freq = np.bincount(code, minlength=2**J) / n
    for i, pat in enumerate(patterns):
        present = pat >= 0
        # frequency of the pattern on the present annotators: sum over full patterns
        match = np.all((pats[:, present] == pat[present]), axis=1)
        mc[i] = freq[match].sum()
    assert np.max(np.abs(p - mc)) < 2e-3
    assert p[: 2**J].sum() == pytest.approx(1.0, abs=2e-3)


def test_scipy_method_agrees_with_sobol():
    rng = np.random.default_rng(5)
    J = 4
    R = random_correlation(J, rng)
    mu = rng.normal(size=J)
    pats = all_patterns(J)
    a = orthant_log_prob(pats, mu, R, n_qmc=4096, rng=0)
    b = orthant_log_prob(pats, mu, R, method="scipy")
    np.testing.assert_allclose(np.exp(a), np.exp(b), atol=2e-4)


def test_identity_is_exact_product_of_univariate_probabilities():
    J = 5
    mu = np.array([-1.2, 0.3, 0.0, 2.1, -0.4])
    pats = np.vstack([all_patterns(J), [[-1, 1, 0, -1, 1]], [[-1] * J]]).astype(np.int8)
    lp = orthant_log_prob(pats, mu, np.eye(J))
    rate = ndtr(mu)
    expected = np.where(pats == 1, rate, np.where(pats == 0, 1 - rate, 1.0)).prod(axis=1)
    np.testing.assert_allclose(np.exp(lp), expected, rtol=1e-12, atol=0)
    assert lp[-1] == 0.0  # nothing observed: probability one


def test_single_label_and_no_label_are_exact():
    R = np.array([[1.0, 0.6, 0.2], [0.6, 1.0, 0.3], [0.2, 0.3, 1.0]])
    mu = np.array([0.5, -0.2, 1.0])
    pats = np.array([[1, -1, -1], [-1, 0, -1], [-1, -1, -1]], dtype=np.int8)
    lp = orthant_log_prob(pats, mu, R)
    np.testing.assert_allclose(np.exp(lp), [ndtr(0.5), ndtr(0.2), 1.0], rtol=1e-14)


def test_orthant_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="shapes do not match"):
        orthant_log_prob(np.zeros((2, 3), np.int8), np.zeros(4), np.eye(4))
    with pytest.raises(ValueError, match="method"):
        orthant_log_prob(np.zeros((2, 2), np.int8), np.zeros(2), np.eye(2) * 0.5 + 0.5, method="mc")


def test_bvn_cdf_matches_scipy():
    rng = np.random.default_rng(2)
    h, k = rng.normal(0, 1.5, size=(2, 50))
    rho = rng.uniform(-0.99, 0.99, size=50)
    ours = bvn_cdf(h, k, rho)
    ref = [multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf([a, b]) for a, b, r in zip(h, k, rho)]
    np.testing.assert_allclose(ours, ref, atol=1e-7)
    # independence and the boundaries
    np.testing.assert_allclose(bvn_cdf(0.3, -0.5, 0.0), ndtr(0.3) * ndtr(-0.5), rtol=1e-14)
    assert bvn_cdf(0.4, 0.4, 0.999999) == pytest.approx(ndtr(0.4), abs=1e-3)


def test_encode_patterns_groups_rows():
    labels = np.array([[1, 0, -1], [0, 0, 0], [1, 0, -1], [-1, -1, -1], [0, 0, 0], [1, 0, -1]], dtype=np.int8)
    pats, inv, counts = encode_patterns(labels)
    np.testing.assert_array_equal(pats[inv], labels)
    assert counts.sum() == len(labels)
    assert sorted(counts.tolist()) == [1, 2, 3]


def test_sobol_points_in_open_unit_cube_and_seeded():
    a = sobol_points(1000, 3, 7)
    assert a.shape == (1024, 3)
    assert np.all((a > 0) & (a < 1))
    np.testing.assert_array_equal(a, sobol_points(1000, 3, 7))
