"""Warnings name the user's line, whichever pyrater function raised them (``pyrater._stacklevel``)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater.data import UnratedItemsWarning
from pyrater.inference.em.algorithm import EMConvergenceWarning


@pytest.fixture(scope="module")
def sim():
    return pyrater.simulate_dawid_skene(n_items=60, n_raters=3, n_categories=3, seed=2)


def _caught(call, category, match=""):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    hits = [w for w in caught if issubclass(w.category, category) and match in str(w.message)]
    assert hits, f"no {category.__name__} raised"
    return {w.filename for w in hits}


def test_em_convergence_warning_names_the_callers_file(sim):
    assert _caught(lambda: pyrater.em(sim.data, max_iter=2, init="majority", method="ml"), EMConvergenceWarning) == {
        __file__
    }


def test_unrated_items_warning_from_wide_data_names_the_callers_file():
    wide = pd.DataFrame({"a": [1, 2, np.nan, 1], "b": [1, 2, np.nan, 2]}, index=["i1", "i2", "i3", "i4"])
    assert _caught(lambda: pyrater.RatingData.from_wide(wide), UnratedItemsWarning) == {__file__}
    # through pyrater.fit, several frames deeper
    assert _caught(lambda: pyrater.fit(wide, method="em", data_format="wide"), UnratedItemsWarning) == {__file__}


def test_gibbs_memory_warning_names_the_callers_file(sim):
    from pyrater.inference.gibbs.sampler import gibbs

    call = lambda: gibbs(sim.data, chains=2, warmup=2, draws=50, seed=1, max_memory_gib=4e-5)  # noqa: E731
    assert _caught(call, UserWarning, "log_lik not kept") == {__file__}
