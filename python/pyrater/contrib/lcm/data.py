"""Input validation for the latent class model: cases, bronze and silver standard.

:func:`as_lcm_data` turns user inputs (pandas objects or arrays) into an
immutable :class:`LCMData` holding float copies, so the caller's objects are
never modified.  Every problem found is gathered into one
:class:`LCMDataError` message naming the column and the offending values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["LCMData", "LCMDataError", "as_lcm_data"]


class LCMDataError(ValueError):
    """Invalid input for the latent class model (the message lists every problem)."""


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _show(values: Any, limit: int = 6) -> str:
    vals = [_plain(v) for v in pd.unique(pd.Series(list(values), dtype=object))]
    text = ", ".join(repr(v) for v in vals[:limit])
    return text + (f", ... ({len(vals)} distinct)" if len(vals) > limit else "")


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr = np.array(arr, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class LCMData:
    """Validated data: n subjects, K targets.

    Attributes
    ----------
    case : bool array, shape (n,)
        True for cases (Y = 1), False for controls (Y = 0).
    M : float array, shape (n, K)
        Bronze-standard measurements, 0 or 1.
    silver : float array, shape (n, K)
        Silver-standard measurements, 0, 1 or NaN (not measured).
    targets : pandas.Index, length K
        The user's target names (columns of ``M`` or ``target0 ..``).
    subjects : pandas.Index, length n
        The user's subject labels (index of ``M`` or ``0 .. n-1``).
    """

    case: np.ndarray
    M: np.ndarray
    silver: np.ndarray
    targets: pd.Index
    subjects: pd.Index

    @property
    def n_targets(self) -> int:
        """K: number of targets."""
        return len(self.targets)

    @property
    def n_cases(self) -> int:
        """Number of cases."""
        return int(self.case.sum())

    @property
    def n_controls(self) -> int:
        """Number of controls."""
        return int((~self.case).sum())

    @property
    def case_labels(self) -> pd.Index:
        """Subject labels of the cases, in data order."""
        return self.subjects[self.case]

    @property
    def has_silver(self) -> bool:
        """True when at least one silver-standard measurement is present."""
        return bool(np.isfinite(self.silver).any())

    def __repr__(self) -> str:
        n_ss = int(np.isfinite(self.silver[self.case]).any(axis=1).sum())
        return (
            f"LCMData({self.n_cases} cases, {self.n_controls} controls, {self.n_targets} targets "
            f"{list(self.targets)}, silver standard on {n_ss} cases)"
        )


def _as_table(value: Any, name: str, problems: list[str]) -> tuple[np.ndarray | None, pd.Index | None, pd.Index | None]:
    """(float array (n, K), column labels or None, row labels or None)."""
    if isinstance(value, pd.DataFrame):
        cols, rows = value.columns, value.index
        try:
            arr = value.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        except (TypeError, ValueError):
            problems.append(f"{name} must be numeric 0/1")
            return None, None, None
        bad_cols = [
            c for c in value.columns if (value[c].notna() & pd.to_numeric(value[c], errors="coerce").isna()).any()
        ]
        for c in bad_cols:
            col = value[c]
            nonnum = (col.notna() & pd.to_numeric(col, errors="coerce").isna()).to_numpy()
            problems.append(f"{name} column {c!r} has non-numeric values {_show(col[nonnum])}; expected 0 or 1")
            arr[nonnum, value.columns.get_loc(c)] = 0.0  # reported once, not again as missing
        return arr, cols, rows
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        problems.append(f"{name} must be a DataFrame or a numeric array of shape (n, K) with 0/1 values")
        return None, None, None
    if arr.ndim != 2:
        problems.append(f"{name} must be two-dimensional (n subjects, K targets); got shape {arr.shape}")
        return None, None, None
    return arr, None, None


def as_lcm_data(M: Any, case: Any, silver: Any = None, targets: Any = None) -> LCMData:
    """Validate and copy the inputs of the latent class model.

    Parameters
    ----------
    M : DataFrame or array-like, shape (n, K)
        Bronze-standard measurements, 0/1 (booleans accepted), no missing
        values.  DataFrame columns name the targets and its index the subjects.
    case : Series or array-like, shape (n,)
        Case indicator: 1/True for cases, 0/False for controls.  A Series is
        aligned on ``M``'s index when ``M`` is a DataFrame.
    silver : DataFrame or array-like, shape (n, K), optional
        Silver-standard measurements, 0/1 with NaN where not measured.  A
        DataFrame must have the same columns as ``M`` (reordered if needed)
        and, when ``M`` is a DataFrame, the same index.  Controls may only
        have 0 or NaN (the silver standard has perfect specificity).
    targets : sequence, optional
        Target names when ``M`` is an array (default ``target0 ..``).

    Returns
    -------
    LCMData

    Raises
    ------
    LCMDataError
        Listing every problem found, with the column and values at fault.
    """
    problems: list[str] = []
    arr, cols, rows = _as_table(M, "M", problems)
    if arr is None:
        raise LCMDataError("; ".join(problems))
    n, K = arr.shape
    if K == 0 or n == 0:
        raise LCMDataError(f"M must have at least one subject and one target; got shape {arr.shape}")
    if cols is None:
        if targets is None:
            cols = pd.Index([f"target{k}" for k in range(K)], name="target")
        else:
            cols = pd.Index(list(targets), name="target")
            if len(cols) != K:
                raise LCMDataError(f"targets has {len(cols)} names but M has {K} columns")
    else:
        cols = pd.Index(cols, name="target")
    if cols.has_duplicates:
        problems.append(f"target names are duplicated: {_show(cols[cols.duplicated()])}")
    rows = pd.RangeIndex(n, name="subject") if rows is None else rows.copy()

    # bronze standard: 0/1, no NaN
    for k in range(K):
        col = arr[:, k]
        if np.isnan(col).any():
            problems.append(
                f"M column {cols[k]!r} has {int(np.isnan(col).sum())} missing values; "
                "the bronze standard must be measured on every subject (0 or 1)"
            )
        bad = col[np.isfinite(col) & (col != 0) & (col != 1)]
        if bad.size:
            problems.append(f"M column {cols[k]!r} has values {_show(bad)}; expected 0 or 1")

    # case indicator
    if isinstance(case, pd.Series) and isinstance(M, pd.DataFrame):
        if not case.index.equals(M.index):
            if set(case.index) == set(M.index) and not case.index.has_duplicates:
                case = case.reindex(M.index)
            else:
                problems.append("case is a Series whose index does not match the index of M")
    try:
        y = np.array(pd.to_numeric(pd.Series(np.asarray(case).ravel()), errors="coerce"), dtype=float)
    except (TypeError, ValueError):
        y = np.full(0, np.nan)
    if np.ndim(case) != 1 or y.size != n:
        problems.append(f"case must be one-dimensional with one entry per row of M ({n}); got shape {np.shape(case)}")
    else:
        bad = np.asarray(case, dtype=object)[~np.isin(y, (0.0, 1.0))]
        if bad.size:
            problems.append(f"case has values {_show(bad)}; expected 0/1 or False/True (1 = case, 0 = control)")
    # silver standard
    ss: np.ndarray | None
    if silver is None:
        ss = np.full((n, K), np.nan)
    else:
        ss, scols, srows = _as_table(silver, "silver", problems)
        if ss is not None and scols is not None:
            scols = pd.Index(scols)
            if set(scols) != set(cols) or scols.has_duplicates:
                problems.append(f"silver columns {_show(scols)} do not match the targets {_show(cols)}")
                ss = None
            else:
                ss = ss[:, scols.get_indexer(cols)]
                assert srows is not None  # column labels come from a DataFrame, with its row labels
                if isinstance(M, pd.DataFrame) and not srows.equals(M.index):
                    problems.append("silver is a DataFrame whose index does not match the index of M")
        if ss is not None and ss.shape != (n, K):
            problems.append(f"silver must have the shape of M {(n, K)}; got {ss.shape}")
            ss = None
        if ss is not None:
            for k in range(K):
                col = ss[:, k]
                bad = col[np.isfinite(col) & (col != 0) & (col != 1)]
                if bad.size:
                    problems.append(f"silver column {cols[k]!r} has values {_show(bad)}; expected 0, 1 or NaN")
    if problems:
        raise LCMDataError("invalid latent class model data:\n  - " + "\n  - ".join(problems))
    assert ss is not None  # every path that drops the silver standard reported a problem
    is_case = y == 1
    if not is_case.any():
        raise LCMDataError("case has no cases (no entry equal to 1); the latent states are defined for cases only")
    ctrl_pos = np.isfinite(ss) & (ss == 1) & ~is_case[:, None]
    if ctrl_pos.any():
        ks = np.flatnonzero(ctrl_pos.any(axis=0))
        who = rows[ctrl_pos.any(axis=1)]
        raise LCMDataError(
            f"silver standard is positive for controls {_show(who)} on targets {_show(cols[ks])}; "
            "controls have L = 0 and the silver standard has perfect specificity, so only 0 or NaN is possible"
        )
    return LCMData(
        case=_readonly(is_case),
        M=_readonly(arr),
        silver=_readonly(ss),
        targets=cols,
        subjects=rows,
    )
