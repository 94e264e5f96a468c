"""The probit bootstrap's pi="prior": a warning when the test labels contradict the prior."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from pyrater.contrib.probit import (
    PriorConflictWarning,
    ProbitDawidSkene,
    equicorrelation,
    estimate_prevalence,
    prior_conflict,
    simulate_study,
)

RATES = np.array([[0.10, 0.15, 0.08, 0.20], [0.80, 0.75, 0.85, 0.70]])
R = np.stack([equicorrelation(4, 0.3), equicorrelation(4, 0.5)])


def _study(prevalence: tuple[float, float], seed: int):
    """The calibration study's size (10 groups of 100 test items), group prevalences ~ Beta(*prevalence)."""
    return simulate_study(
        rates=RATES,
        R=R,
        n_validation=400,
        validation_prevalence=0.4,
        n_groups=10,
        items_per_group=100,
        population_per_group=1000,
        group_prevalence=prevalence,
        seed=seed,
    )


def test_prior_conflict_matches_quadrature_by_scipy():
    """Shift and coverage against an independent route: scipy.integrate.quad over the Beta density."""
    from scipy import integrate

    ll1, ll0 = np.log([0.9, 0.1]), np.log([0.05, 0.95])
    cell = np.array([[60.0, 40.0], [10.0, 90.0]])  # two groups, two patterns
    res = prior_conflict(ll1, ll0, cell, pi_prior=(2, 10), n_nodes=2000)
    pi_hat = estimate_prevalence(ll1, ll0, cell.sum(axis=0))
    assert res.pi_hat == pytest.approx(pi_hat)

    def post(pi):
        l1, l0 = pi * np.exp(ll1), (1 - pi) * np.exp(ll0)
        return l1 / (l1 + l0)

    def moment(f):
        return integrate.quad(lambda x: f(x) * stats.beta.pdf(x, 2, 10), 0, 1)[0]

    def moments(c):
        # E[c @ post], E[(c @ post)^2] and E[c @ post (1 - post)] under the Beta(2, 10) prior
        return (
            moment(lambda x: c @ post(x)),
            moment(lambda x: (c @ post(x)) ** 2),
            moment(lambda x: c @ (post(x) * (1 - post(x)))),
        )

    for g in range(2):
        mean, second, within = moments(cell[g])
        sd = np.sqrt(within + second - mean**2)
        shift = abs(mean - cell[g] @ post(pi_hat)) / sd
        assert res.shift[g] == pytest.approx(shift, rel=2e-3)
        z = stats.norm.ppf(0.95)
        assert res.coverage[g] == pytest.approx(stats.norm.cdf(z - shift) - stats.norm.cdf(-z - shift), rel=2e-3)
    # pooled prevalence ~0.35, beyond Beta(2, 10)'s bulk: a conflict; ~0.17 (the prior's mean): none
    assert res.conflict and res.coverage.max() < 0.8
    near = prior_conflict(ll1, ll0, np.array([[20.0, 80.0], [15.0, 85.0]]), pi_prior=(2, 10))
    assert not near.conflict and near.coverage.min() > 0.85


def test_bootstrap_warns_when_the_prevalence_is_far_from_the_prior():
    far = _study((40.0, 60.0), seed=3)  # prevalence ~0.4, the case (coverage 0.72)
    model = ProbitDawidSkene(n_qmc=256)
    with pytest.warns(PriorConflictWarning, match=r"contradict the prevalence prior pi ~ Beta\(2, 10\).*pi='estimate'"):
        model.bootstrap(far.validation, far.test, n_boot=20, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PriorConflictWarning)
        model.bootstrap(far.validation, far.test, n_boot=20, seed=1, pi="estimate")  # no prior, no warning
        model.bootstrap(far.validation, far.test, n_boot=20, seed=1, pi_prior=(40, 60))  # a fitting prior
        near = _study((2.0, 10.0), seed=4)  # prevalence drawn from the prior itself
        model.bootstrap(near.validation, near.test, n_boot=20, seed=1)


def test_the_check_leaves_the_bootstrap_stream_alone(monkeypatch):
    far = _study((40.0, 60.0), seed=3)
    model = ProbitDawidSkene(n_qmc=256)
    with pytest.warns(PriorConflictWarning):
        checked = model.bootstrap(far.validation, far.test, n_boot=20, seed=5)
    monkeypatch.setattr(ProbitDawidSkene, "_check_prior", lambda self, prep, prior: None)
    unchecked = model.bootstrap(far.validation, far.test, n_boot=20, seed=5)
    np.testing.assert_array_equal(checked.counts.to_numpy(), unchecked.counts.to_numpy())
