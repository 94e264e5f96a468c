"""Input validation of pyrater.contrib.lcm: clear errors, user labels kept, inputs never modified."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from pyrater.contrib.lcm import LatentGraphLCM, LCMDataError, LCMParams, LCMPriors, as_lcm_data


@pytest.fixture
def frames():
    M = pd.DataFrame({"RSV": [1, 0, 1, 0], "HMPV": [0, 0, 1, 1]}, index=["a", "b", "c", "d"])
    case = pd.Series([1, 1, 0, 0], index=M.index)
    silver = pd.DataFrame({"RSV": [1.0, np.nan, np.nan, 0.0], "HMPV": [np.nan, 0.0, np.nan, np.nan]}, index=M.index)
    return M, case, silver


def test_labels_and_values_are_kept(frames):
    M, case, silver = frames
    data = as_lcm_data(M, case, silver)
    assert list(data.targets) == ["RSV", "HMPV"]
    assert list(data.case_labels) == ["a", "b"]
    assert data.n_cases == 2 and data.n_controls == 2
    assert data.silver[0, 0] == 1 and np.isnan(data.silver[0, 1])
    with pytest.raises(ValueError):
        data.M[0, 0] = 5  # read-only copies


def test_silver_columns_are_reordered_and_case_series_aligned(frames):
    M, case, silver = frames
    data = as_lcm_data(M, case.iloc[::-1], silver[["HMPV", "RSV"]])
    assert data.silver[0, 0] == 1 and data.case.tolist() == [True, True, False, False]


def test_arrays_get_default_names_or_given_targets():
    M = np.array([[1, 0], [0, 1]])
    assert list(as_lcm_data(M, [1, 0]).targets) == ["target0", "target1"]
    assert list(as_lcm_data(M, [True, False], targets=["x", "y"]).targets) == ["x", "y"]


def test_every_problem_is_reported_at_once(frames):
    M, case, _ = frames
    bad = M.copy()
    bad.loc["a", "RSV"] = 2
    bad.loc["b", "HMPV"] = np.nan
    with pytest.raises(LCMDataError) as err:
        as_lcm_data(bad, [1, 1, 0, "x"])
    msg = str(err.value)
    assert "M column 'RSV' has values 2" in msg
    assert "M column 'HMPV' has 1 missing values" in msg
    assert "case has values 'x'" in msg


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"case": [1, 0]}, "one entry per row of M"),
        ({"silver": np.zeros((4, 3))}, "shape of M"),
        (
            {"silver": pd.DataFrame({"RSV": [0.5] * 4, "HMPV": [0.0] * 4}, index=list("abcd"))},
            "silver column 'RSV' has values 0.5",
        ),
        (
            {"silver": pd.DataFrame({"RSV": [0.0] * 4, "flu": [0.0] * 4}, index=list("abcd"))},
            "do not match the targets",
        ),
        ({"case": [0, 0, 0, 0]}, "no cases"),
    ],
)
def test_bad_inputs_name_the_problem(frames, kwargs, match):
    M, case, silver = frames
    args = {"M": M, "case": case, "silver": silver} | kwargs
    with pytest.raises(LCMDataError, match=match):
        as_lcm_data(**args)


def test_positive_silver_standard_on_a_control_is_refused(frames):
    M, case, silver = frames
    silver = silver.copy()
    silver.loc["c", "HMPV"] = 1.0
    with pytest.raises(LCMDataError, match=r"positive for controls 'c' on targets 'HMPV'"):
        as_lcm_data(M, case, silver)


def test_fit_does_not_modify_inputs(frames):
    M, case, silver = frames
    copies = (M.copy(), case.copy(), silver.copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        LatentGraphLCM(max_iter=5).fit(M, case, silver)
    pd.testing.assert_frame_equal(M, copies[0])
    pd.testing.assert_series_equal(case, copies[1])
    pd.testing.assert_frame_equal(silver, copies[2])


def test_model_settings_and_priors_are_validated():
    with pytest.raises(ValueError, match="prior gamma\\[a\\] must be finite and > 0"):
        LCMPriors(gamma=(0, 1))
    with pytest.raises(ValueError, match="neighbour_variance must be 'exact' or 'poisson'"):
        LatentGraphLCM(neighbour_variance="normal")
    with pytest.raises(ValueError, match="init_edge_prob"):
        LatentGraphLCM(init_edge_prob=1.0)
    with pytest.raises(ValueError, match="D must be symmetric"):
        LCMParams(gamma=0.8, delta=0.1, eta=0.5, theta=0, rho=1, D=[[0, 1], [0, 0]])
    with pytest.raises(ValueError, match="gamma must lie strictly between 0.0 and 1.0"):
        LCMParams(gamma=1.0, delta=0.1, eta=0.5, theta=0, rho=1, D=np.zeros((2, 2)))
    assert "gamma ~ Beta(2.0, 1.0)" in str(LCMPriors())


def test_non_numeric_values_are_reported_once():
    M = pd.DataFrame({"a": [True, False, True], "b": ["1", "0", "yes"]})
    with pytest.raises(LCMDataError) as err:
        as_lcm_data(M, [1, 0, 1])
    msg = str(err.value)
    assert "M column 'b' has non-numeric values 'yes'; expected 0 or 1" in msg
    assert "missing" not in msg
    data = as_lcm_data(M.assign(b=[1, 0, 1]), pd.Series([True, False, True]))
    assert data.M.tolist() == [[1, 1], [0, 0], [1, 1]]
