"""Simulation-based calibration (pyrater.sbc): the ranks, the uniformity test, and SBC of the samplers.

The samplers' SBC runs here are small (100 replicates of 40 items by Gibbs, 60 of 30 items by
NUTS); bench/sbc.py runs every family and method with 200 (bench/RESULTS_sbc.md).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import pyrater
from pyrater import sbc
from pyrater.checking.sbc import SBCResult, sbc_ranks
from pyrater.models import DawidSkene, OneCoinDawidSkene
from pyrater.models.registry import get_model, model_names

GIBBS_FAMILIES = [n for n in model_names() if "gibbs" in type(get_model(n)).methods]


def test_ranks_count_the_draws_below_the_truth_after_thinning():
    rng = np.random.default_rng(1)
    draws = {"pi": rng.random((2, 30, 3)), "theta": rng.random((2, 30, 4, 3, 3))}
    truth = {"pi": rng.random(3), "theta": rng.random((4, 3, 3))}
    ranks = sbc_ranks(draws, truth, thin=3, rng=np.random.default_rng(0))
    kept_pi = draws["pi"][:, 2::3].reshape(-1, 3)  # every third draw, the last of each chain kept
    assert kept_pi.shape == (20, 3)
    for k in range(3):
        assert ranks[f"pi[{k + 1}]"] == int(np.sum(kept_pi[:, k] < truth["pi"][k]))
    kept_theta = draws["theta"][:, 2::3].reshape(-1, 4, 3, 3)
    for j in range(4):
        for k in range(3):
            expected = int(np.sum(kept_theta[:, j, k, k] < truth["theta"][j, k, k]))
            assert ranks[f"theta[{j + 1}, {k + 1}, {k + 1}]"] == expected
    assert len(ranks) == 3 + 4 * 3  # theta is ranked on its diagonal


def test_ties_are_broken_at_random_within_the_tied_draws():
    draws = {"p": np.array([[[0.1], [0.5], [0.5], [0.5], [0.9]]])}  # (1 chain, 5 draws, 1)
    seen = {sbc_ranks(draws, {"p": np.array([0.5])}, 1, np.random.default_rng(s))["p[1]"] for s in range(40)}
    assert seen == {1, 2, 3, 4}


def _result(ranks: np.ndarray, n_draws: int) -> SBCResult:
    frame = pd.DataFrame(ranks, columns=[f"q[{i + 1}]" for i in range(ranks.shape[1])])
    return SBCResult("toy", "exact", frame, n_draws, pd.Series(np.zeros(len(frame), dtype=int)))


def test_exact_posterior_gives_uniform_ranks_and_an_overconfident_one_does_not():
    """Beta-binomial: ranks of the truth among exact posterior draws pass; draws from a too-narrow posterior fail."""
    rng = np.random.default_rng(7)
    n_sims, L, n = 400, 99, 20
    exact, narrow = [], []
    for _ in range(n_sims):
        p = rng.beta(2.0, 3.0)
        y = rng.binomial(n, p)
        post = rng.beta(2.0 + y, 3.0 + n - y, size=(1, L, 1))
        mean = (2.0 + y) / (5.0 + n)
        tight = mean + 0.3 * (post - mean)  # the same centre, 0.3 times the spread
        exact.append(sbc_ranks({"p": post}, {"p": np.array([p])}, 1, rng)["p[1]"])
        narrow.append(sbc_ranks({"p": tight}, {"p": np.array([p])}, 1, rng)["p[1]"])
    ok = _result(np.array(exact)[:, None], L)
    bad = _result(np.array(narrow)[:, None], L)
    assert ok.passed()
    assert not bad.passed()
    counts = bad.counts(10)["q[1]"].to_numpy()
    assert counts[0] + counts[-1] > 3 * n_sims / 10  # the U shape of an over-confident posterior
    # the table's p-value is Pearson's chi-square of the histogram
    c = ok.counts(20)["q[1]"].to_numpy()
    assert ok.uniformity(20)["p_value"].iloc[0] == pytest.approx(stats.chisquare(c).pvalue)


@pytest.mark.parametrize("family", GIBBS_FAMILIES)
def test_gibbs_sampler_passes_sbc(family):
    result = sbc(family, "gibbs", n_sims=100, seed=11, progress=False)
    assert result.ranks.shape == (100, result.ranks.shape[1])
    assert result.ranks.to_numpy().min() >= 0 and result.ranks.to_numpy().max() <= result.n_draws
    own = {"one_coin": "p[1]", "mace": "competence[1]", "pooled": "s[1]", "class_conditional": "p[1, 1]"}
    assert {"pi[1]", "theta[1, 1, 1]"} <= set(result.ranks.columns) or family == "homogeneous"
    if family in own:
        assert own[family] in result.ranks.columns  # the family's own parameters are ranked too
    assert result.passed(alpha=0.01), result.uniformity().head()


def test_sbc_detects_a_prior_that_differs_from_the_simulation():
    result = sbc(DawidSkene(alpha=np.array([12.0, 3.0])), "gibbs", fit_model="dawid_skene", n_sims=100, progress=False)
    assert not result.passed()
    assert result.uniformity().index[0] in {"pi[1]", "pi[2]"}  # the prevalence, whose prior differs
    result = sbc(
        OneCoinDawidSkene(beta1=8.0, beta2=2.0),
        "gibbs",
        fit_model=OneCoinDawidSkene(beta1=4.0, beta2=4.0),
        n_sims=100,
        progress=False,
    )
    assert not result.passed()


def test_nuts_passes_sbc(stan_engine):
    result = sbc("one_coin", "mcmc", n_sims=60, n_items=30, n_raters=4, engine=stan_engine.name, progress=False, seed=3)
    assert set(result.ranks.columns) >= {"pi[1]", "p[1]", "p[4]"}
    assert result.passed(alpha=0.01), result.uniformity().head()


def test_sbc_is_reproducible_and_plots():
    a = sbc("homogeneous", "gibbs", n_sims=20, n_draws=19, seed=5, progress=False)
    b = sbc("homogeneous", "gibbs", n_sims=20, n_draws=19, seed=5, progress=False)
    pd.testing.assert_frame_equal(a.ranks, b.ranks)
    assert a.settings["n_categories"] == 2 and a.settings["thin"] == 4
    fig = pyrater.plots.plot_sbc(a, bins=4)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == a.ranks.shape[1]
    assert "passed=" in repr(a)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"method": "em"}, "SBC needs posterior draws"),
        ({"method": "gibbs", "model": "hierarchical"}, "not fitted by method='gibbs'"),
        ({"method": "gibbs", "chains": 4}, "sbc sets ['chains'] itself"),
        ({"method": "gibbs", "n_sims": 5}, "n_sims=5: expected an integer >= 20"),
        ({"method": "gibbs", "thin": 0}, "thin=0"),
        ({"method": "gibbs", "quantities": ["nope"], "n_sims": 20}, "have no true value"),
    ],
)
def test_bad_arguments_are_refused_with_a_reason(kwargs, message):
    kwargs = {"model": "dawid_skene", **kwargs}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
        sbc(kwargs.pop("model"), progress=False, **kwargs)


def test_bins_must_divide_the_number_of_ranks():
    result = _result(np.arange(100)[:, None] % 100, 99)
    with pytest.raises(ValueError, match="divides the 100 possible ranks"):
        result.counts(7)
    assert result.counts().shape[0] == 20
