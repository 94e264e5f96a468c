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
