"""Shared fixtures: the data in ../shared (skipped cleanly where absent)."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PYRATER_SHARED_DATA", REPO.parent / "shared" / "data"))


def shared_file(*parts: str) -> Path:
    """Path to a file under ../shared/data, or skip the test when absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


@pytest.fixture(scope="session")
def anesthesia_path() -> Path:
    return shared_file("anesthesia.csv")


@pytest.fixture(scope="session")
def caries_path() -> Path:
    return shared_file("caries.csv")


@pytest.fixture(scope="session")
def anesthesia_fit(anesthesia_path):
    """Dawid-Skene MCMC fit of the anaesthesia data (4 x 1000 draws), shared by test modules."""
    import warnings

    import pandas as pd

    from pyrater import fit

    df = pd.read_csv(anesthesia_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no Rhat / divergence warning expected
        return fit(df, "dawid_skene", method="mcmc", chains=4, warmup=1000, draws=1000, seed=1, progress=False)


@pytest.fixture(scope="session")
def anesthesia_cc_fit(anesthesia_path):
    """Class-conditional MCMC fit of the anaesthesia data."""
    import pandas as pd

    from pyrater import fit

    df = pd.read_csv(anesthesia_path)
    return fit(df, "class_conditional", method="mcmc", chains=4, warmup=1000, draws=1000, seed=1, progress=False)
