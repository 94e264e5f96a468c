"""The data sets shipped inside the package (pyrater.datasets)."""

from __future__ import annotations

import os

import pytest

import pyrater
from conftest import SHARED_DATA, packaged_file
from pyrater import RatingData, datasets


def test_anesthesia_is_the_dawid_skene_table():
    df = datasets.anesthesia()
    assert list(df.columns) == ["item", "rater", "rating"] and df.shape == (315, 3)
    d = RatingData.from_long(df)
    assert (d.n_items, d.n_raters, d.n_categories) == (45, 5, 4)
    assert d.has_repeats  # rater 1 rated every patient three times
    per_rater = df.groupby("rater").size().to_dict()
    assert per_rater == {1: 135, 2: 45, 3: 45, 4: 45, 5: 45}
    # a fresh copy each call: changing one never changes the next
    df.loc[0, "rating"] = 99
    assert datasets.anesthesia().loc[0, "rating"] != 99


def test_caries_is_the_grouped_table():
    g = datasets.caries()
    assert list(g.columns) == [f"rater_{j}" for j in range(1, 6)] + ["n"] and g.shape == (32, 6)
    d = RatingData.from_grouped(g, tally="n")
    assert d.n_items == 3859 and d.n_units == 32 and d.n_ratings_total == 5 * 3859
    assert pyrater.datasets is datasets


@pytest.mark.parametrize("name", ["anesthesia.csv", "caries.csv"])
def test_packaged_copies_equal_the_shared_data(name):
    shared = SHARED_DATA / name
    if not shared.exists():
        pytest.skip(f"shared data not available: {shared}")
    assert packaged_file(name).read_bytes() == shared.read_bytes()


def test_wheel_includes_the_data_files(tmp_path):
    """hatch's wheel holds pyrater/data/_datasets/*.csv (the wheel config ships the package folder)."""
    pytest.importorskip("hatchling")
    import subprocess
    import sys
    import zipfile

    # the checkout holding the installed package (python/pyrater/data/_datasets/...), if any
    root = next((d for d in packaged_file("anesthesia.csv").parents if (d / "pyproject.toml").exists()), None)
    if root is None:
        pytest.skip("not run from a source checkout")
    # the PEP 517 hook pip calls, run in the checkout
    res = subprocess.run(
        [sys.executable, "-c", f"import hatchling.build as b; print(b.build_wheel({str(tmp_path)!r}))"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    wheel = tmp_path / res.stdout.strip().splitlines()[-1]
    names = zipfile.ZipFile(wheel).namelist()
    for f in ("anesthesia.csv", "caries.csv", "SOURCE.md"):
        assert f"pyrater/data/_datasets/{f}" in names
    assert os.path.basename(wheel).startswith("pyrater-")
