"""Requests that size an allocation or a run are checked before any work (issue 28, item 3).

Stan's draws (chains x draws x the program's numbers), simulations
(n_items, n_raters, repeats), posterior predictive replicates and the arrays
of a fit file are checked against ``max_memory_gib`` (default
``pyrater._validation.DEFAULT_MAX_MEMORY_GIB``) before anything runs: one
``MemoryLimitError`` (a ``ValueError``) says what the request would take and
how to ask for less, and the advice works.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest

import pyrater
from pyrater import datasets
from pyrater._validation import (
    DEFAULT_MAX_MEMORY_GIB,
    GIB,
    MemoryLimitError,
    check_memory,
    memory_limit,
)
from pyrater.checking.predict import posterior_predict, posterior_predictive_check
from pyrater.inference.stan import run


@pytest.fixture(scope="module")
def data():
    return pyrater.RatingData.from_long(datasets.anesthesia())


@pytest.fixture(scope="module")
def em_fit(data):
    return pyrater.em(data, method="map", seed=1)


# ------------------------------------------------------------------ the shared check
def test_check_memory_says_what_it_needs_the_limit_and_how_to_ask_for_less():
    with pytest.raises(MemoryLimitError) as info:
        check_memory("the kept draws", 3 * GIB, 1.0, ask=("thin", "draws"), detail="4 chains x 10 draws")
    err = info.value
    assert isinstance(err, ValueError)
    text = str(err)
    assert "the kept draws would need 3.00 GiB (4 chains x 10 draws)" in text
    assert "the limit is max_memory_gib=1" in text
    assert "a larger thin=" in text and "fewer draws" in text and "max_memory_gib=3" in text
    assert (err.needed_gib, err.limit_gib, err.ask, err.suggested_limit_gib) == (3.0, 1.0, ("thin", "draws"), 3.0)
    check_memory("fits", 3 * GIB, 3.0)  # at the limit: allowed
    check_memory("fits", 10**30, float("inf"))  # inf switches the check off
    check_memory("fits", float("nan"), 1.0)  # a NaN estimate is not a refusal
    with pytest.raises(MemoryLimitError, match=f"max_memory_gib={DEFAULT_MAX_MEMORY_GIB:g}"):
        check_memory("fits", 2 * DEFAULT_MAX_MEMORY_GIB * GIB)  # None: the documented default


@pytest.mark.parametrize("bad", [0, -1, "1", True, float("nan"), [1]])
def test_memory_limit_names_the_argument(bad):
    with pytest.raises(ValueError, match=r"max_memory_gib must be a positive number"):
        memory_limit(bad)
    assert memory_limit(None) == DEFAULT_MAX_MEMORY_GIB and memory_limit(2) == 2.0


# ------------------------------------------------------------------ Stan
def test_stan_refuses_huge_draws_before_compiling_or_sampling(data, monkeypatch):
    """draws=10**9 would take days and hundreds of GiB: refused at once, and no engine is even looked up."""

    def no_engine(*args, **kwargs):
        raise AssertionError("the engine was asked for before the size check")

    monkeypatch.setattr(run, "get_engine", no_engine)
    start = time.perf_counter()
    with pytest.raises(MemoryLimitError) as info:
        run.sample(
            data,
            pyrater.DawidSkene(),
            None,
            engine="auto",
            chains=4,
            warmup=1000,
            draws=10**9,
            seed=1,
            inits=None,
            progress=False,
            log_lik=True,
        )
    assert time.perf_counter() - start < 2
    K, J = data.n_categories, data.n_raters
    per_draw = K + J * K * K
    assert info.value.needed_gib == pytest.approx(8 * 4 * 10**9 * per_draw / GIB)
    assert f"4,000,000,000 draws x {per_draw} numbers" in str(info.value)
    assert info.value.ask == ("draws", "chains")
    with pytest.raises(MemoryLimitError, match="Pathfinder's approximate draws"):
        run.pathfinder(
            data,
            pyrater.DawidSkene(),
            None,
            engine="auto",
            chains=4,
            draws=10**9,
            seed=1,
            inits=None,
            log_lik=False,
        )


def test_stan_iterations_must_fit_stan_int(data, monkeypatch):
    monkeypatch.setattr(run, "get_engine", lambda *a, **k: pytest.fail("engine used"))
    kwargs = dict(engine="auto", chains=1, seed=1, inits=None, progress=False, log_lik=False, max_memory_gib=math.inf)
    with pytest.raises(ValueError, match=r"warmup must be an integer in \[0, 2147483547\]"):
        run.sample(data, pyrater.DawidSkene(), None, warmup=2**31, draws=100, **kwargs)
    with pytest.raises(ValueError, match=r"draws must be an integer in \[1, 2147483647\]"):
        run.sample(data, pyrater.DawidSkene(), None, warmup=0, draws=2**31, **kwargs)


@pytest.mark.parametrize(
    "model",
    [
        "dawid_skene",
        "homogeneous",
        "class_conditional",
        "one_coin",
        "mace",
        "ordinal",
        "pooled",
        "community",
        "hierarchical",
    ],
)
def test_the_stan_estimate_counts_what_stan_writes(model, data):
    """The numbers per draw: the model's parameters, pi and theta, as the programs declare them."""
    m = pyrater.get_model(model)
    K, J = data.n_categories, data.n_raters
    expected = {
        "dawid_skene": K + J * K * K,
        "homogeneous": K + K * K,
        "class_conditional": K + J * K + J * K * K,
        "one_coin": K + J + J * K * K,
        "ordinal": K + 2 * J + J * K * K,
        "mace": K + J + J * K + J * K * K,
        "pooled": K + K * K + K + J * K * K,
        # L = 3 communities: rho_raw, m_raw, s_raw and theta, then the sorted m, s, rho and community_prob
        "community": K + 2 * 3 + 2 * 3 * K * K + 2 * 3 * K + J * 3 + J * K * K,
        "hierarchical": K + 2 * K * K + 2 * J * K * K,
    }[model]
    assert run._values_per_draw(m, K, J) == expected
    limit = 8 * 1000 * expected / GIB
    assert run.check_draws_memory(data, m, 1000, False, limit) is False
    with pytest.raises(MemoryLimitError):
        run.check_draws_memory(data, m, 1001, False, limit)


def test_log_lik_that_does_not_fit_is_dropped_with_a_warning(data):
    m = pyrater.DawidSkene()
    per_draw = run._values_per_draw(m, data.n_categories, data.n_raters)
    limit = 8 * 1000 * (per_draw + data.n_units // 2) / GIB  # the parameters fit, not log_lik besides them
    with pytest.warns(UserWarning, match=r"log_lik not kept: 1,000 draws x 45 units.*recompute it from the draws"):
        assert run.check_draws_memory(data, m, 1000, True, limit) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run.check_draws_memory(data, m, 1000, True, 10 * limit) is True


# ------------------------------------------------------------------ simulation
def test_simulate_refuses_huge_designs_before_drawing():
    start = time.perf_counter()
    with pytest.raises(MemoryLimitError, match=r"simulating 5,000,000,000,000 ratings .* would need") as info:
        pyrater.simulate("dawid_skene", n_items=10**12, n_raters=5, n_categories=3, seed=1)
    assert info.value.ask == ("n_items", "raters_per_item", "repeats")
    with pytest.raises(MemoryLimitError, match=r"by 1,000,000 raters with K = 20") as info:
        pyrater.simulate_dawid_skene(10, 10**6, n_categories=20, raters_per_item=2, seed=1)  # fine for K = 2
    assert info.value.ask == ("n_raters",)
    with pytest.raises(MemoryLimitError, match="fewer repeats"):
        pyrater.simulate("class_conditional", n_items=1000, n_raters=10, n_categories=2, repeats=10**8, seed=1)
    assert time.perf_counter() - start < 2


def test_simulate_takes_a_budget_and_the_advice_works():
    design = dict(n_items=20_000, n_raters=10, n_categories=3, raters_per_item=5)
    with pytest.raises(MemoryLimitError) as info:
        pyrater.simulate("dawid_skene", **design, max_memory_gib=0.001)
    # three int64 codes a rating, the classes, the error matrices (refused at the design, K >= 2 known then)
    assert info.value.needed_gib == pytest.approx(8 * (3 * 100_000 + 2 * 20_000) / GIB + 32 * 10 * 2 * 2 / GIB)
    sim = pyrater.simulate("dawid_skene", **design, seed=1, max_memory_gib=info.value.suggested_limit_gib)
    assert sim.data.n_ratings == 100_000
    # the budget belongs to that call: a later direct call has the default again
    pyrater.simulate("dawid_skene", **design, seed=1, max_memory_gib=1000)
    with pytest.raises(MemoryLimitError, match="max_memory_gib=1[.;]"):
        pyrater.simulate_dawid_skene(10, 10**8, n_categories=2, raters_per_item=2, seed=1)


# ------------------------------------------------------------------ posterior predictive replicates
def test_posterior_predict_refuses_huge_replicates_before_drawing(em_fit):
    start = time.perf_counter()
    with pytest.raises(MemoryLimitError, match=r"1,000,000,000 replicated data sets of 315 ratings") as info:
        posterior_predict(em_fit, draws=10**9, seed=1)
    assert info.value.ask == ("draws", "design")
    with pytest.raises(MemoryLimitError):
        posterior_predictive_check(em_fit, lambda df: 0.0, draws=10**9, seed=1)
    assert time.perf_counter() - start < 2
    # the advice works: fewer draws, or the budget it names
    rows = em_fit.data.n_ratings
    few = int(DEFAULT_MAX_MEMORY_GIB * GIB // (64 * rows))
    assert len(posterior_predict(em_fit, draws=min(few, 50), seed=1)) == min(few, 50) * rows
    with pytest.raises(MemoryLimitError) as info:
        posterior_predict(em_fit, draws=200, seed=1, max_memory_gib=1e-4)
    out = posterior_predict(em_fit, draws=200, seed=1, max_memory_gib=info.value.suggested_limit_gib)
    assert len(out) == 200 * rows


def test_posterior_predict_counts_the_design_it_is_given(em_fit):
    design = em_fit.data.to_long().iloc[:10, :2]
    with pytest.raises(MemoryLimitError, match=r"of 10 ratings"):
        posterior_predict(em_fit, design=design, draws=10**8)
    out = posterior_predict(em_fit, design=design, draws=5, seed=1)
    assert len(out) == 50


def test_nothing_is_allocated_when_refused(em_fit):
    """A refusal comes before the allocation: resident memory does not grow."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(3):
        with pytest.raises(MemoryLimitError):
            posterior_predict(em_fit, draws=10**9)
        with pytest.raises(MemoryLimitError):
            pyrater.simulate("dawid_skene", n_items=10**11, n_raters=4, n_categories=2)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 50  # MiB
    assert np.isfinite(em_fit.pi).all()
