"""Validation of the two input tables of the probit model.

Both tables are wide pandas DataFrames with one column per annotator holding
0/1 labels (NaN = not labelled); the validation table adds a gold-label
column, the test table a group column.  Every problem found is gathered into
one :class:`~pyrater.RatingDataError` naming the column and the offending
values.  The user's frames are never modified (only read).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..._validation import labels_repr
from ...data.ratings import RatingDataError

__all__ = [
    "resolve_annotators",
    "binary_labels",
    "ValidationTable",
    "TestTable",
    "read_validation",
    "read_test",
    "read_population",
]


def _show(values: Sequence[Any], limit: int = 6) -> str:
    return labels_repr(values, limit)


def _fail(problems: list[str], what: str) -> None:
    if problems:
        raise RatingDataError(f"invalid {what}:\n  - " + "\n  - ".join(problems))


def resolve_annotators(
    frame: pd.DataFrame, annotators: Sequence[Hashable] | None, exclude: Sequence[Hashable], what: str
) -> list[Hashable]:
    """Annotator columns: as given, or every column except ``exclude``."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{what} must be a pandas DataFrame, got {type(frame).__name__}")
    if annotators is None:
        cols = [c for c in frame.columns if c not in set(exclude)]
    else:
        cols = list(annotators)
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            columns = _show(list(frame.columns), 12)
            raise RatingDataError(
                f"invalid {what}: annotator column(s) {_show(missing)} not found; columns are {columns}"
            )
        clash = [c for c in cols if c in set(exclude)]
        if clash:
            raise RatingDataError(f"invalid {what}: column(s) {_show(clash)} cannot be both an annotator and {exclude}")
    if len(cols) == 0:
        raise RatingDataError(f"invalid {what}: no annotator columns")
    if len(set(cols)) != len(cols):
        raise RatingDataError(f"invalid {what}: annotator columns repeat: {_show(cols)}")
    return cols


def _as_float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


def binary_labels(column: pd.Series, name: Hashable, problems: list[str], allow_missing: bool = True) -> np.ndarray:
    """0/1 labels of one column as int8 with -1 for missing; problems appended."""
    missing = pd.isna(column).to_numpy()
    if column.dtype == bool:
        vals = column.to_numpy().astype(float)
    else:
        try:
            vals = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        except (TypeError, ValueError):
            vals = np.array([_as_float(v) for v in column.to_numpy(dtype=object)])
    ok = (vals == 0.0) | (vals == 1.0)
    out = np.where(ok, vals, -1).astype(np.int8)
    bad = list(column.to_numpy(dtype=object)[~missing & ~ok])
    if bad:
        uniq = list(dict.fromkeys(bad))
        problems.append(f"column {name!r} has non-binary label(s) {_show(uniq)}; labels must be 0/1 (NaN = missing)")
    if not allow_missing and missing.any():
        rows = list(column.index[missing])
        problems.append(f"column {name!r} has {int(missing.sum())} missing value(s) (rows {_show(rows)})")
    return out


@dataclass(frozen=True, eq=False)
class ValidationTable:
    """Validation labels (n, J) int8 with -1 missing, and gold labels (n,)."""

    labels: np.ndarray
    gold: np.ndarray
    annotators: list[Hashable]


@dataclass(frozen=True, eq=False)
class TestTable:
    """Test labels (m, J), group codes (m,) and the group labels (G,)."""

    labels: np.ndarray
    group_codes: np.ndarray
    groups: pd.Index
    index: pd.Index
    annotators: list[Hashable]


def read_validation(frame: pd.DataFrame, annotators: Sequence[Hashable] | None, gold: Hashable) -> ValidationTable:
    """Check and convert the validation table (annotator columns + gold column)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"validation must be a pandas DataFrame, got {type(frame).__name__}")
    if gold not in frame.columns:
        raise RatingDataError(
            f"invalid validation data: gold column {gold!r} not found; columns are {_show(list(frame.columns), 12)}"
        )
    cols = resolve_annotators(frame, annotators, [gold], "validation data")
    problems: list[str] = []
    if len(frame) == 0:
        problems.append("the table has no rows")
    g = binary_labels(frame[gold], gold, problems, allow_missing=False)
    labels = (
        np.column_stack([binary_labels(frame[c], c, problems) for c in cols])
        if len(frame)
        else np.zeros((0, len(cols)), np.int8)
    )
    if not problems:
        for k in (0, 1):
            if not np.any(g == k):
                problems.append(f"gold column {gold!r} has no items of class {k}; both classes are needed")
    _fail(problems, "validation data")
    return ValidationTable(labels=labels.astype(np.int8), gold=g.astype(np.int64), annotators=cols)


def read_test(
    frame: pd.DataFrame, annotators: Sequence[Hashable], group: Hashable, what: str = "test data"
) -> TestTable:
    """Check and convert the test table (the validation annotators + group column)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"test must be a pandas DataFrame, got {type(frame).__name__}")
    problems: list[str] = []
    if group not in frame.columns:
        problems.append(f"group column {group!r} not found; columns are {_show(list(frame.columns), 12)}")
    absent = [c for c in annotators if c not in frame.columns]
    if absent:
        problems.append(f"annotator column(s) {_show(absent)} of the validation data are missing")
    extra = [c for c in frame.columns if c != group and c not in set(annotators)]
    if extra:
        problems.append(
            f"column(s) {_show(extra)} are neither annotators of the validation data nor the group column {group!r}"
        )
    if len(frame) == 0:
        problems.append("the table has no rows")
    _fail(problems, what)
    labels = np.column_stack([binary_labels(frame[c], c, problems) for c in annotators])
    gcol = frame[group]
    gmiss = pd.isna(gcol).to_numpy()
    if gmiss.any():
        problems.append(
            f"group column {group!r} has {int(gmiss.sum())} missing value(s) (rows {_show(list(frame.index[gmiss]))})"
        )
    _fail(problems, what)
    try:
        codes, uniques = pd.factorize(gcol, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(gcol, sort=False)
    return TestTable(
        labels=labels.astype(np.int8),
        group_codes=np.asarray(codes, dtype=np.int64),
        groups=pd.Index(uniques, name=group),
        index=frame.index,
        annotators=list(annotators),
    )


def read_population(population: Mapping | pd.Series | None, groups: pd.Index, n_items: np.ndarray) -> np.ndarray | None:
    """Population sizes aligned with ``groups`` (float array), or None."""
    if population is None:
        return None
    pop = pd.Series(population) if not isinstance(population, pd.Series) else population
    problems: list[str] = []
    unknown = [g for g in pop.index if g not in groups]
    if unknown:
        problems.append(f"population sizes given for unknown group(s) {_show(unknown)} (not in the test data)")
    absent = [g for g in groups if g not in pop.index]
    if absent:
        problems.append(f"no population size for group(s) {_show(absent)}")
    if pop.index.has_duplicates:
        problems.append(f"population sizes repeat group(s) {_show(list(pop.index[pop.index.duplicated()]))}")
    _fail(problems, "population sizes")
    sizes = pd.to_numeric(pop, errors="coerce").reindex(groups).to_numpy(dtype=float)
    bad = [g for g, s, n in zip(groups, sizes, n_items) if not np.isfinite(s) or s < n]
    if bad:
        problems.append(
            f"population size of group(s) {_show(bad)} is missing, not numeric or smaller than the number of test items"
        )
    _fail(problems, "population sizes")
    return sizes
