"""Pareto-smoothed importance sampling (pyrater._psis): the reference algorithm on both ArviZ lines.

On ArviZ 0.x it must equal ``az.psislw`` (the same algorithm) to rounding; on
ArviZ 1.x it must equal ``arviz_stats``' ``psislw`` called the way that
library means it (negated log ratios, its ``floor`` tail length); and on
either line it must recover the shape of a generalised Pareto sample.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from pyrater import _arviz, _psis


def _log_ratio_samples() -> dict[str, np.ndarray]:
    """Log-ratio samples from light to very heavy right tails (seeded)."""
    rng = np.random.default_rng(20240711)
    return {
        "normal, S=4000": rng.normal(size=4000),
        "normal, S=100 (tail 0.2 S)": rng.normal(size=100),
        "student t3, S=1000": rng.standard_t(3, size=1000),
        "lognormal ratios sd 3, S=2000": 3.0 * rng.normal(size=2000),
        "GPD k=0.8 ratios, S=2000": np.log(stats.genpareto.rvs(0.8, size=2000, random_state=rng)),
        "GPD k=1.5 ratios, S=4000": np.log(stats.genpareto.rvs(1.5, size=4000, random_state=rng)) + 50.0,
    }


SAMPLES = _log_ratio_samples()


def _library_psislw(x: np.ndarray, r_eff: float) -> tuple[np.ndarray, float, int | None]:
    """This line's own PSIS, and the tail length it uses (None: the reference rule)."""
    az = _arviz._az()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if _arviz.is_datatree_line():
            from arviz_stats.base import array_stats

            # arviz_stats' psislw takes the log-likelihood: it smooths the right tail of -ary
            lw, k = array_stats.psislw(-x, r_eff=r_eff)
            n = x.size
            return np.asarray(lw, float), float(k), int(min(n / 5, 3 * math.sqrt(n / r_eff)))
        lw, k = az.psislw(x, reff=r_eff)
        return np.asarray(lw, float), float(k), None


@pytest.mark.parametrize("r_eff", [1.0, 0.4])
@pytest.mark.parametrize("name", list(SAMPLES))
def test_equals_this_arviz_lines_psislw(name, r_eff):
    x = SAMPLES[name]
    ref_lw, ref_k, tail = _library_psislw(x, r_eff)
    lw, k = _psis.psislw(x, r_eff=r_eff, tail_length=tail)
    assert k == pytest.approx(ref_k, abs=1e-10)
    np.testing.assert_allclose(lw, ref_lw, rtol=0, atol=1e-10)
    if tail is None:  # ArviZ 0.x: the default route of pyrater._arviz is exactly az.psislw
        lw_default, k_default = _arviz.psislw(x, r_eff=r_eff)
        np.testing.assert_array_equal(lw_default, lw)
        assert k_default == k


def test_tail_length_rule():
    # ceil(min(0.2 S, 3 sqrt(S / r_eff))): 0.2 S below S = 225 / r_eff, 3 sqrt(S / r_eff) above
    assert [_psis.n_pareto_tail(s) for s in (100, 224, 225, 226, 1000, 4000)] == [20, 45, 45, 46, 95, 190]
    assert _psis.n_pareto_tail(4000, r_eff=0.25) == 380
    assert _psis.n_pareto_tail(101) == 21


@pytest.mark.parametrize("k_true", [0.2, 0.5, 0.9])
def test_recovers_the_shape_of_a_generalised_pareto_sample(k_true):
    rng = np.random.default_rng(int(k_true * 10))
    y = stats.genpareto.rvs(k_true, scale=2.0, size=4000, random_state=rng)
    # the fit alone, on all 4000 exceedances: within 4 asymptotic sd ((1 + k) / sqrt(n)) of the truth
    k, sigma = _psis.gpdfit(np.sort(y))
    assert abs(k - k_true) < 4 * (1 + k_true) / math.sqrt(y.size)
    assert sigma == pytest.approx(2.0, rel=0.15)
    # PSIS on log ratios whose weights are that sample: the tail (190 largest) has the same shape
    _, k_psis = _psis.psislw(np.log(y))
    m = _psis.n_pareto_tail(y.size)
    assert abs(k_psis - k_true) < 4 * (1 + k_true) / math.sqrt(m)


def test_light_tails_give_small_k():
    rng = np.random.default_rng(3)
    _, k_bounded = _psis.psislw(np.log(rng.uniform(0.5, 1.5, size=4000)))  # bounded weights: true k = -1
    assert k_bounded < 0
    _, k_lognormal = _psis.psislw(rng.normal(size=4000))  # lognormal weights: all moments finite
    assert k_lognormal < 0.5


def test_smoothing_smooths_the_right_tail_of_the_ratios():
    """The sign convention (ArviZ 1.x's psislw takes the negated ratios): a heavy right tail is seen."""
    rng = np.random.default_rng(8)
    x = np.log1p(stats.genpareto.rvs(0.8, size=4000, random_state=rng))  # weights 1 + y: tail shape 0.8
    _, k_right = _psis.psislw(x)
    _, k_negated = _psis.psislw(-x)  # weights 1 / (1 + y), bounded by 1: a light tail
    assert k_right > 0.5 and k_negated < 0


@pytest.mark.parametrize("name", list(SAMPLES))
def test_weights_normalised_body_kept_tail_ranked_and_truncated(name):
    x = SAMPLES[name]
    before = x.copy()
    lw, k = _psis.psislw(x)
    np.testing.assert_array_equal(x, before)  # the caller's array is not modified
    assert logsumexp(lw) == pytest.approx(0.0, abs=1e-12)
    m = _psis.n_pareto_tail(x.size)
    order = np.argsort(x)
    body, tail = order[:-m], order[-m:]
    shift = lw[body] - x[body]  # the body keeps its raw ratios up to the normalising constant
    np.testing.assert_allclose(shift, shift[0], atol=1e-10)
    raw = x + shift[0]  # raw log weights on the scale of lw
    assert np.isfinite(k)
    assert np.all(np.diff(lw[tail]) >= 0)  # smoothing keeps the draws' ranks
    assert np.all(lw <= raw.max() + 1e-12)  # no weight above the largest raw weight
    assert lw[tail].min() >= raw[body].max() - 1e-12  # the tail stays above the cutoff


def test_short_or_flat_tail_gives_infinite_k_and_unsmoothed_weights():
    x = np.random.default_rng(5).normal(size=50)
    lw, k = _psis.psislw(x, tail_length=4)
    assert k == math.inf
    np.testing.assert_allclose(lw, x - logsumexp(x), atol=1e-12)
    flat = np.r_[np.zeros(20), np.full(80, -1.0)]  # a tail of 20 equal ratios: no Pareto fit
    lw, k = _psis.psislw(flat)
    assert k == math.inf and logsumexp(lw) == pytest.approx(0.0)


def test_zero_weights_allowed():
    x = np.random.default_rng(6).normal(size=500)
    x[:3] = -np.inf
    lw, k = _psis.psislw(x)
    assert np.all(np.isneginf(lw[:3])) and np.isfinite(k) and logsumexp(lw) == pytest.approx(0.0)


@pytest.mark.parametrize(
    "args, match",
    [
        ((np.zeros((10, 10)),), "1-D"),
        ((np.array([]),), "1-D"),
        ((np.r_[np.zeros(9), np.nan],), r"NaN or \+inf.*\[9\]"),
        ((np.r_[np.zeros(9), np.inf],), r"NaN or \+inf"),
        ((np.full(10, -np.inf),), "all -inf"),
        ((np.zeros(10), 0.0), "r_eff must be a positive number"),
        ((np.zeros(10), 1.0, 10), r"tail_length must be an integer in \[1, 9\]"),
        ((np.zeros(10), 1.0, 2.5), "tail_length"),
    ],
)
def test_bad_input_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        _psis.psislw(*args)


def test_loo_on_each_line_is_psis_of_the_negated_log_lik_with_that_lines_tail_length():
    """What pyrater._arviz.loo (ArviZ's own loo) does on each line, pinned: the same PSIS as
    pyrater._psis applied to -log_lik (so arviz_stats' sign convention is right for LOO), with
    the tail ceil(3 sqrt(S / r_eff)) on 0.x and floor(...) on 1.x -- the one cross-line
    difference, which moves Pareto k by a few hundredths and elpd_i by ~1e-4."""
    import xarray as xr

    rng = np.random.default_rng(11)
    draws = 2000  # one chain: both lines take r_eff = 1; 3 sqrt(2000) = 134.2
    mu = 0.3 + rng.normal(scale=0.25, size=(1, draws))  # posterior draws of a normal mean
    y = np.r_[rng.normal(size=15), 6.0]  # one outlying item: a large k
    ll = stats.norm.logpdf(y, loc=mu[..., None])
    coords = {"chain": [0], "draw": np.arange(draws)}
    obj = _arviz.build(
        {
            "posterior": xr.Dataset({"mu": (("chain", "draw"), mu)}, coords=coords),
            "log_likelihood": xr.Dataset({"log_lik": (("chain", "draw", "item"), ll)}, coords=coords),
        }
    )
    res = _arviz.loo(obj)
    tail = 134 if _arviz.is_datatree_line() else 135
    assert _psis.n_pareto_tail(draws) == 135
    k, elpd_i = [], []
    for i in range(y.size):
        lw, k_i = _psis.psislw(-ll[0, :, i], tail_length=tail)
        k.append(k_i)
        elpd_i.append(logsumexp(lw + ll[0, :, i]))
    np.testing.assert_allclose(res.pareto_k, k, rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.elpd_i, elpd_i, rtol=0, atol=1e-10)
    assert res.pareto_k.max() > 0.5  # the outlier's tail is smoothed
