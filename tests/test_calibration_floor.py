"""bench/calibration_floor.py: what calibration with few gold items achieves when its map is exactly right."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import softmax

from conftest import bench_module


@pytest.fixture(scope="module")
def cf():
    return bench_module("calibration_floor")


def test_draw_labels_follow_the_probabilities(cf):
    q = np.array([[0.7, 0.2, 0.1], [0.0, 0.0, 1.0]])
    rows = np.repeat(q, 20000, axis=0)
    y = cf.draw_labels(rows, np.random.default_rng(3)).reshape(2, -1)
    share = np.stack([np.bincount(r, minlength=3) / r.size for r in y])
    np.testing.assert_allclose(share, q, atol=0.01)
    assert (y[1] == 2).all()


def test_observed_equals_exact_map_when_the_truth_is_a_temperature_map(cf):
    """Two routes to the same number: gold labels drawn from a temperature map of the fit's probabilities
    make the real-label column estimate what the simulated-label column estimates."""
    import realdata as rd

    rng = np.random.default_rng(11)
    n, K, T = 3000, 3, 3.0
    logits = rng.normal(0.0, 2.0, size=(n, K))
    probs = pd.DataFrame(softmax(T * logits, axis=1), index=[f"i{j}" for j in range(n)], columns=["a", "b", "c"])
    y = cf.draw_labels(softmax(logits, axis=1), rng)  # the fit is over-confident by exactly T
    truth = pd.Series(np.array(["a", "b", "c"])[y], index=probs.index)
    ds = rd.Dataset(name="sim", data=None, truth=truth)
    rows = pd.DataFrame(cf.floor_rows(ds, "sim", probs, n_splits=6, draws=4))
    assert set(rows.fraction) == {0.05, 0.10} and (rows.n_cal + rows.n_scored == n).all()
    assert rows.oracle_T.iloc[0] == pytest.approx(T, rel=0.1)  # the oracle recovers the true temperature
    m = rows[["observed", "exact_map", "noise"]].mean()
    assert abs(m.observed - m.exact_map) < 0.01  # seeds 11-13: differences 0.000-0.006, both about 0.025
    assert m.noise < m.exact_map  # learning the map from 150-300 items costs something
    # over-confident probabilities scored raw are far worse than any of the three
    from pyrater.checking.scoring import expected_calibration_error

    assert expected_calibration_error(y, probs.to_numpy(), n_bins=15) > 0.1 > m.observed


def test_script_on_one_small_set(cf, tmp_path):
    from conftest import SHARED_DATA, shared_file

    shared_file("bluebirds", "ratings.csv")
    assert (
        cf.main(
            [
                "--data-dir",
                str(SHARED_DATA),
                "--datasets",
                "bluebirds",
                "--methods",
                "MV",
                "DS-MAP",
                "--splits",
                "2",
                "--draws",
                "2",
                "--out-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    df = pd.read_csv(tmp_path / cf.CSV)
    assert len(df) == 2 * 2 * 2 and set(df.method) == {"MV", "DS-MAP"}
    assert (df.n_cal >= 10).all() and (df.n_cal + df.n_scored == 108).all()
    text = (tmp_path / cf.REPORT).read_text()
    assert "| DS-MAP | 5% | 1 |" in text and "## Findings" in text
    assert cf.main(["--report-only", "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / cf.REPORT).read_text() == text
