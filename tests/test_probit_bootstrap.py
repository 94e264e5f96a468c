"""Bootstrap of per-group counts under the probit Dawid-Skene model."""

from __future__ import annotations

import matplotlib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from pyrater import RatingDataError
from pyrater.contrib.probit import (
    GroupCounts,
    ProbitDawidSkene,
    equicorrelation,
    estimate_prevalence,
    simulate_study,
)
from pyrater.contrib.probit.calibration import calibration_study, coverage_table
from pyrater.models.kernels import class_log_posterior

matplotlib.use("Agg")

RATES = np.array([[0.10, 0.15, 0.08, 0.20], [0.80, 0.75, 0.85, 0.70]])
R = np.stack([equicorrelation(4, 0.3), equicorrelation(4, 0.5)])


@pytest.fixture(scope="module")
def study():
    return simulate_study(
        rates=RATES,
        R=R,
        n_validation=400,
        validation_prevalence=0.4,
        n_groups=6,
        items_per_group=[50, 80, 120, 60, 100, 90],
        population_per_group=1000,
        missing=0.1,
        seed=42,
    )


@pytest.fixture(scope="module")
def fit(study):
    """One probit fit shared by the tests (B = 1000, all steps on)."""
    return ProbitDawidSkene(n_qmc=256).bootstrap(
        study.validation, study.test, n_boot=1000, population=study.population, seed=7
    )


def kernel_posterior(labels: np.ndarray, rates: np.ndarray, pi: float) -> np.ndarray:
    """Classic Dawid-Skene P(z = 1 | y) from pyrater.models.kernels (K = 2)."""
    n, J = labels.shape
    rows, cols = np.nonzero(labels >= 0)
    counts = sp.csr_matrix((np.ones(rows.size), (rows, cols * 2 + labels[rows, cols])), shape=(n, 2 * J))
    theta = np.empty((J, 2, 2))
    theta[:, :, 1] = rates.T  # theta[j, k, 1] = P(y_j = 1 | z = k)
    theta[:, :, 0] = 1 - rates.T
    log_post, _ = class_log_posterior(counts, np.log([1 - pi, pi]), np.log(theta))
    return np.exp(log_post[:, 1])


def test_independence_posterior_equals_classic_dawid_skene(study):
    model = ProbitDawidSkene(correlation="independent")
    params = model.estimate(study.validation)
    for pi in (0.05, 1 / 6, 0.5):
        ours = model.posterior(study.test, params, pi=pi)
        labels = study.test[params.annotators].fillna(-1).to_numpy(np.int64)
        ref = kernel_posterior(labels, params.rates.to_numpy().T, pi)
        np.testing.assert_allclose(ours.to_numpy(), ref, rtol=0, atol=1e-10)
    assert ours.index.equals(study.test.index)


def test_identity_correlation_in_bootstrap_is_classic_dawid_skene(study):
    """With steps 1, 3, 5 off and fixed pi, the group count is sum_i p_i with the DS posterior."""
    model = ProbitDawidSkene(correlation="independent")
    res = model.bootstrap(
        study.validation,
        study.test,
        n_boot=3,
        pi=0.2,
        resample_validation=False,
        resample_test=False,
        sample_z=False,
        seed=0,
    )
    labels = study.test[res.parameters.annotators].fillna(-1).to_numpy(np.int64)
    p = kernel_posterior(labels, res.parameters.rates.to_numpy().T, 0.2)
    expected = pd.Series(p).groupby(study.test["group"].to_numpy()).sum()
    for b in range(3):
        np.testing.assert_allclose(res.counts.iloc[b].to_numpy(), expected.to_numpy(), atol=1e-9)
    assert (res.pi == 0.2).all()


def test_law_of_total_variance(fit):
    """Var(count) = mean_b sum p(1-p) + var_b sum p, within Monte Carlo error.

    The Monte Carlo error of the difference is estimated from 20 batches of
    50 replicates (each batch gives an unbiased estimate of zero)."""
    vd = fit.variance_decomposition()
    assert np.all(vd["realisation"] > 0) and np.all(vd["epistemic"] > 0)
    np.testing.assert_allclose(vd["total"], vd["realisation"] + vd["epistemic"])
    diff = []
    for batch in np.array_split(np.arange(len(fit.counts)), 20):
        c, e, r = fit.counts.iloc[batch], fit.expected.iloc[batch], fit.realisation.iloc[batch]
        diff.append(c.var(ddof=1) - r.mean() - e.var(ddof=1))
    diff = pd.DataFrame(diff)
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    assert np.all(np.abs(vd["variance"] - vd["total"]) < 4 * se)
    # and the Monte Carlo error is small relative to the variance itself
    assert np.all(se < 0.1 * vd["variance"])


def test_result_tables_keyed_by_group(fit, study):
    assert isinstance(fit, GroupCounts)
    groups = sorted(study.test["group"].unique())
    assert list(fit.groups) == groups
    assert fit.counts.shape == (1000, 6)
    assert fit.counts.to_numpy().dtype.kind == "i"
    np.testing.assert_array_equal(fit.n_items.to_numpy(), [50, 80, 120, 60, 100, 90])
    s = fit.summary()
    assert list(s.index) == groups
    for col in [
        "count_mean",
        "count_sd",
        "count_lower",
        "count_upper",
        "proportion_mean",
        "total_mean",
        "total_lower",
        "var_realisation",
        "var_epistemic",
    ]:
        assert col in s.columns
    assert np.all(s["count_lower"] <= s["count_mean"]) and np.all(s["count_mean"] <= s["count_upper"])
    np.testing.assert_allclose(s["proportion_mean"], s["count_mean"] / fit.n_items)
    np.testing.assert_allclose(fit.totals, fit.counts * (1000 / fit.n_items), rtol=1e-12)
    # intervals are quantiles of the draws
    iv = fit.interval(0.8)
    np.testing.assert_allclose(iv["lower"], fit.counts.quantile(0.1))
    pct = fit.percentiles([0.5])
    np.testing.assert_allclose(pct["q50"], fit.counts.median())
    d = fit.distribution(groups[0])
    assert d.sum() == pytest.approx(1.0)
    with pytest.raises(KeyError, match="unknown group"):
        fit.distribution("nope")
    # the estimates are near the truth: sample counts inside generous intervals
    wide = fit.interval(0.999)
    inside = (wide["lower"] <= study.sample_counts) & (study.sample_counts <= wide["upper"])
    assert inside.mean() >= 5 / 6


def test_plot(fit, study):
    ax = fit.plot(truth=study.sample_counts)
    assert len(ax.get_yticklabels()) == 6
    assert ax.get_xlabel() == "number of positive items"
    ax2 = fit.plot(groups=["g001", "g003"], which="proportion")
    assert [t.get_text() for t in ax2.get_yticklabels()] == ["g001", "g003"]
    import matplotlib.pyplot as plt

    plt.close("all")


def test_switches(study):
    model = ProbitDawidSkene(n_qmc=128)
    kw = dict(n_boot=150, seed=3)
    ev = model.bootstrap(study.validation, study.test, sample_z=False, **kw)
    # expected-value summation: the count is sum p, its variance the epistemic part
    pd.testing.assert_frame_equal(ev.counts, ev.expected)
    assert ev.counts.to_numpy().dtype.kind == "f"
    fixed = model.bootstrap(
        study.validation, study.test, resample_validation=False, resample_test=False, sample_z=False, pi=0.15, **kw
    )
    # everything off: the same value in every replicate
    assert np.allclose(fixed.counts.std(), 0.0)
    direct = model.posterior(study.test, fixed.parameters, pi=0.15, seed=1)
    by_group = direct.groupby(study.test["group"]).sum()
    np.testing.assert_allclose(fixed.counts.iloc[0], by_group, atol=0.05)  # QMC points differ
    # fixed pi only: smaller spread than with pi drawn from Beta(2, 10)
    prior = model.bootstrap(study.validation, study.test, **kw)
    pinned = model.bootstrap(study.validation, study.test, pi=1 / 6, **kw)
    assert (pinned.pi == 1 / 6).all()
    assert prior.pi.std() > 0.05
    assert (pinned.expected.var() < prior.expected.var()).all()
    # no test resampling: n_items fixed, less variance than with it
    notest = model.bootstrap(study.validation, study.test, resample_test=False, pi=1 / 6, **kw)
    assert (notest.expected.var() < pinned.expected.var()).mean() >= 5 / 6
    # reproducible with a seed
    again = model.bootstrap(study.validation, study.test, sample_z=False, **kw)
    pd.testing.assert_frame_equal(ev.counts, again.counts)
    assert "expected-value summation" in str(ev.settings)


def test_prevalence_estimated_from_test_labels():
    sim = simulate_study(
        rates=RATES,
        R=np.stack([np.eye(4)] * 2),
        n_validation=2000,
        n_groups=4,
        items_per_group=2000,
        population_per_group=2000,
        group_prevalence=(30, 70),
        seed=9,
    )
    model = ProbitDawidSkene(correlation="independent")
    res = model.bootstrap(sim.validation, sim.test, n_boot=100, pi="estimate", seed=1)
    true_pi = sim.sample_counts.sum() / len(sim.test)
    assert res.pi.mean() == pytest.approx(true_pi, abs=0.03)
    assert 0 < res.pi.std() < 0.05
    # the bisection solves the score equation
    ll1 = np.log([0.9, 0.1])
    ll0 = np.log([0.2, 0.8])
    pi = estimate_prevalence(ll1, ll0, np.array([30, 70]))
    grad = 30 * (0.9 - 0.2) / (pi * 0.9 + (1 - pi) * 0.2) + 70 * (0.1 - 0.8) / (pi * 0.1 + (1 - pi) * 0.8)
    assert abs(grad) < 1e-6
    assert estimate_prevalence(ll1, ll0, np.array([0, 10])) == 0.0


def test_input_validation(study):
    model = ProbitDawidSkene(n_qmc=64)
    val, test = study.validation, study.test
    snap_v, snap_t = val.copy(), test.copy()
    model.bootstrap(val, test, n_boot=5, population=study.population.to_dict(), seed=0)
    pd.testing.assert_frame_equal(val, snap_v)
    pd.testing.assert_frame_equal(test, snap_t)
    with pytest.raises(RatingDataError, match=r"unknown group\(s\) 'g999'"):
        model.bootstrap(val, test, n_boot=5, population={**study.population.to_dict(), "g999": 10})
    with pytest.raises(RatingDataError, match=r"no population size for group\(s\) 'g005'"):
        model.bootstrap(val, test, n_boot=5, population=study.population.drop("g005"))
    with pytest.raises(RatingDataError, match="smaller than the number of test items"):
        model.bootstrap(val, test, n_boot=5, population=study.population.clip(upper=10))
    with pytest.raises(RatingDataError, match=r"column 'a1' has non-binary label\(s\) 3"):
        model.bootstrap(val, test.assign(a1=3), n_boot=5)
    with pytest.raises(RatingDataError, match="group column 'company' not found"):
        model.bootstrap(val, test, group="company", n_boot=5)
    with pytest.raises(RatingDataError, match=r"annotator column\(s\) 'a3' of the validation data are missing"):
        model.bootstrap(val, test.drop(columns="a3"), n_boot=5)
    with pytest.raises(RatingDataError, match="group column 'group' has 1 missing"):
        model.bootstrap(val, test.assign(group=test["group"].where(test.index != 3)), n_boot=5)
    with pytest.raises(RatingDataError, match="column 'gold' has 1 missing"):
        model.bootstrap(val.assign(gold=val["gold"].where(val.index != 0)), test, n_boot=5)
    with pytest.raises(ValueError, match="pi must be"):
        model.bootstrap(val, test, n_boot=5, pi="flat")
    with pytest.raises(ValueError, match="pi_prior"):
        model.bootstrap(val, test, n_boot=5, pi_prior=(0, 1))
    with pytest.raises(ValueError, match="n_boot"):
        model.bootstrap(val, test, n_boot=1)
    # non-string group labels are kept
    res = model.bootstrap(val, test.assign(group=test["group"].str[1:].astype(int) * 10), n_boot=5, seed=0)
    assert list(res.groups) == [0, 10, 20, 30, 40, 50]


def test_calibration_study_runs_and_reports():
    out = calibration_study(
        2,
        n_boot=40,
        models={"probit": ProbitDawidSkene(n_qmc=128), "independence": ProbitDawidSkene(correlation="independent")},
        simulation=dict(rates=RATES, R=R, n_validation=300, n_groups=3, items_per_group=60, population_per_group=300),
        seed=1,
    )
    assert len(out) == 2 * 2 * 2 * 3
    assert set(out["target"]) == {"sample", "population"}
    tab = coverage_table(out)
    assert tab["intervals"].tolist() == [6, 6, 6, 6]
    assert np.all((tab["coverage"] >= 0) & (tab["coverage"] <= 1))
    assert np.all(tab["mean_width"] > 0)
