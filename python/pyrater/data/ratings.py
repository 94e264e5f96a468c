"""Rating data: one immutable object built from long, wide or grouped tables.

Three table formats are accepted (all as pandas DataFrames):

long
    one row per rating, columns ``item``, ``rater``, ``rating`` (names
    configurable).  An item may be rated several times by the same rater.
wide
    one row per item, one column per rater, missing value = not rated.
grouped
    one column per rater plus a tally column; each row is a distinct rating
    pattern and the tally is the number of items showing it.  Missing entries
    are allowed (the rater did not rate those items).

Internally every rating is stored as three integer codes (unit, rater,
rating) together with a weight per unit.  A *unit* is an item for long and
wide data and a distinct rating pattern for grouped data (weight = tally), so
every likelihood is ``sum_i weight_i * log p(y_i)`` and the cost of grouped
data scales with the number of patterns.  The user's labels for items,
raters and categories are kept and used in every output.

Labels
------
* Items, raters and categories may be any hashable labels (strings,
  integers, ...).  Without a declared scale the categories are the sorted
  distinct ratings (text that reads as numbers by value, ``"2"`` before
  ``"10"``; other text alphabetically); declare ``categories=[...]`` to keep
  levels that never occur (K is then the declared count) or to give the
  order of a scale.  An ordered use of alphabetically sorted text (the
  ordinal model, ordinal agreement) warns with :class:`ScaleOrderWarning`
  (:meth:`RatingData.check_scale_order`).
* Integral floats, as pandas makes them in columns with missing values, are
  read as integers (``1.0`` -> ``1``); genuine floats stay floats.
* Ratings are matched to the categories exactly first, then type-blind:
  ``"1"`` and ``1.0`` match the category ``1`` and ``1`` matches ``"1"``
  (e.g. a CSV read as text against an integer scale).  The declared labels
  are the ones kept.
* A column mixing labels that differ only in type (``1`` and ``"1"``) is
  refused rather than guessed at.
* Ratings (without a declared scale) that differ only in surrounding
  whitespace, letter case or Unicode normalisation (``"yes"``, ``"yes "``,
  ``"Yes"``; the composed and decomposed spellings of ``"café"``) are kept
  as different categories, with a :class:`LabelSpellingWarning` naming them
  and how often each was given.  ``normalize_labels=True`` merges them
  instead: every spelling becomes the most frequent one of its group (the
  declared one, for declared categories); it also merges item and rater
  labels that differ only in whitespace or Unicode normalisation (not case:
  identifiers are often case-sensitive; item labels with spaces are
  legitimate, so they are not warned about).  Rater *columns* of wide and
  grouped tables are never merged (that would put two columns into one rater).
* Categorical columns: a categorical rating column brings its own scale
  (order and unused levels included) unless ``categories`` is given;
  categorical item and rater columns keep their category order, unused
  categories dropped.  Every exported table has categorical rating columns
  carrying the full scale, so conversions keep unused levels.

Conversions
-----------
long, wide and grouped convert into each other losslessly wherever the
target can represent the data: wide and grouped tables cannot hold repeated
ratings (converting such data raises :class:`RatingDataError` saying so), and
a long table lists ratings only, so items or raters without any rating, and
zero-tally patterns, do not survive a trip through long format.  Grouped data
expands to items labelled ``1 .. n_items`` in pattern order.

Validation
----------
Constructors check everything before any work and report every problem in
one :class:`RatingDataError`: which column, which values and rows, and what
was expected.  The caller's DataFrame is never modified.  Without declared
``categories``, ratings that look like typos (numbers mixed with text, a
non-integer among integers, a non-finite number) are errors; categories
seen only a handful of times are listed in the repr.  Wide and grouped rows
without any rating are dropped with an :class:`pyrater.UnratedItemsWarning`; in a
wide table, a tally-like or text column taken as a rater by default is an
error naming it.
"""

from __future__ import annotations

import difflib
import inspect
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .._stacklevel import user_stacklevel
from .._validation import label_repr as _r
from .._validation import labels_repr as _show

__all__ = [
    "RatingData",
    "RatingDataError",
    "UnratedItemsWarning",
    "LabelSpellingWarning",
    "ScaleOrderWarning",
    "as_rating_data",
    "check_reader_options",
    "reader_options",
]

DataFormat = Literal["long", "wide", "grouped"]
_FORMATS = ("long", "wide", "grouped")


class RatingDataError(ValueError):
    """Invalid rating data.  The message lists every problem found."""


RARE_COUNT = 5
"""A category given fewer times than this (and in under RARE_SHARE of the ratings) is reported as rare."""
RARE_SHARE = 0.05


class UnratedItemsWarning(UserWarning):
    """Rows of a wide or grouped table without any rating were dropped."""


class LabelSpellingWarning(UserWarning):
    """Labels that differ only in whitespace, case or Unicode normalisation were kept as different labels."""


class ScaleOrderWarning(UserWarning):
    """An ordered use of text categories whose order is only their alphabetical sort, not a declared scale."""


def _spelling_key(value: str, case: bool) -> str:
    """What two spellings of one label share: NFC form, no surrounding whitespace (and case-folded)."""
    key = unicodedata.normalize("NFC", value).strip()
    return key.casefold() if case else key


def _spelling_groups(values: Iterable[Any], case: bool) -> list[list[str]]:
    """Groups of distinct text labels that differ only in spelling (see :func:`_spelling_key`)."""
    groups: dict[str, list[str]] = {}
    for v in values:
        if isinstance(v, str):
            groups.setdefault(_spelling_key(v, case), []).append(v)
    return [g for g in groups.values() if len(g) > 1]


def _warn_spellings(
    labels: pd.Index, counts: np.ndarray | None, what: str, case: bool, can_merge: bool = True, unit: str = "rating"
) -> None:
    """Warn (LabelSpellingWarning) about labels that differ only in spelling, with how often each is used."""
    groups = _spelling_groups(labels, case)
    if not groups:
        return
    position = {v: i for i, v in enumerate(labels) if isinstance(v, str)}

    def shown(v: str, group: list[str]) -> str:
        # spellings that print alike (composed and decomposed accents) are shown with their code points
        alike = len({unicodedata.normalize("NFC", x) for x in group}) < len(group)
        label = ascii(v) if alike and not v.isascii() else _r(v)
        if counts is None:
            return label
        n = int(counts[position[v]])
        return f"{label} ({n:,} {unit}{'s' if n != 1 else ''})"

    text = "; ".join(" and ".join(shown(v, g) for v in g) for g in groups[:5])
    if len(groups) > 5:
        text += f"; ... ({len(groups) - 5} more groups)"
    differences = (
        "surrounding whitespace, letter case or Unicode normalisation"
        if case
        else ("surrounding whitespace or Unicode normalisation")
    )
    advice = (
        "pass normalize_labels=True to merge them (command line: --normalize-labels), or clean the column "
        "(e.g. .str.strip())"
        if can_merge
        else "rename or combine those columns if they are one rater"
    )
    verb = "hold" if what.startswith("the ") else "holds"
    warnings.warn(
        f"{what} {verb} labels that differ only in {differences}: {text}; they are kept as different "
        f"labels. If they mean the same, {advice}",
        LabelSpellingWarning,
        stacklevel=user_stacklevel(),
    )


def _normalize_values(values: Any, case: bool, declared: pd.Index | None = None) -> np.ndarray:
    """``values`` with every text spelling replaced by its group's label (object array, NaN kept).

    The label of a group is the declared label with the same key when
    ``declared`` is given and has one, else the group's most frequent
    spelling (ties: one without surrounding whitespace and in NFC form, then
    the first in sorted order).
    """
    codes, uniques = pd.factorize(np.asarray(values, dtype=object))
    uniques = np.asarray(uniques, dtype=object)
    counts = np.bincount(codes[codes >= 0], minlength=len(uniques))
    target: dict[str, Any] = {}
    if declared is not None:
        for d in declared:
            if isinstance(d, str):
                target.setdefault(_spelling_key(d, case), d)
    best: dict[str, tuple[int, bool, str]] = {}
    for i, u in enumerate(uniques):
        if isinstance(u, str):
            key = _spelling_key(u, case)
            if key not in target:
                # most frequent first; on a tie, a spelling without stray whitespace or odd normalisation
                rank = (-int(counts[i]), unicodedata.normalize("NFC", u).strip() != u, u)
                if key not in best or rank < best[key]:
                    best[key] = rank
    mapped = np.array(
        [
            (target.get(_spelling_key(u, case)) or best[_spelling_key(u, case)][2]) if isinstance(u, str) else u
            for u in uniques
        ]
        + [np.nan],
        dtype=object,
    )
    return mapped[np.where(codes >= 0, codes, len(uniques))]


def _raise(problems: list[str], hint: str | None = None) -> None:
    if problems:
        msg = "invalid rating data:\n  - " + "\n  - ".join(problems)
        if hint:
            msg += f"\n{hint}"
        raise RatingDataError(msg)


_MIXED_KINDS = ("mixed", "mixed-integer")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _canonical(v: Any) -> Any:
    """A type-blind key: ``1``, ``1.0``, ``"1"``, ``"1.0"`` and ``np.int64(1)`` all give ``"1"``.

    Used only to match labels whose types differ (a CSV read as strings
    against integer categories, or the reverse) and to detect columns that
    mix such labels; exact matches always come first.
    """
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return v
        if not np.isfinite(f):
            return v
        v = f
    if _is_number(v):
        f = float(v)
        return str(int(f)) if f.is_integer() else repr(f)
    return v


def _tidy_index(labels: Any) -> pd.Index:
    """Labels without NaN, integral floats (1.0, as pandas makes them around NaN) as ints."""
    idx = pd.Index(labels)
    if idx.dtype.kind == "f":
        arr = idx.to_numpy()
        with np.errstate(invalid="ignore"):
            integral = arr.size and np.all(np.mod(arr, 1) == 0)
        if integral:
            return pd.Index(arr.astype(np.int64), name=idx.name)
        return idx
    if idx.dtype == object and len(idx):
        kind = pd.api.types.infer_dtype(idx, skipna=True)
        if kind == "integer":
            try:
                return pd.Index(idx.to_numpy().astype(np.int64), name=idx.name)
            except OverflowError:
                return idx
        if kind in ("floating", "mixed-integer-float"):
            arr = idx.to_numpy().astype(float)
            with np.errstate(invalid="ignore"):
                integral = np.all(np.mod(arr, 1) == 0)
            if integral:
                return pd.Index(arr.astype(np.int64), name=idx.name)
            return pd.Index(arr, name=idx.name)
        if kind in _MIXED_KINDS:
            # loop over distinct labels only, never over ratings
            return pd.Index(
                [int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else v for v in idx],
                dtype=object,
                name=idx.name,
            )
    return idx


def _factorize(values: Any) -> tuple[np.ndarray, pd.Index]:
    """Codes and labels, labels sorted when they can be, else in order of appearance.

    A categorical column keeps its category order (unused categories dropped).
    Missing values get code -1.
    """
    if isinstance(getattr(values, "dtype", None), pd.CategoricalDtype):
        cat = pd.Series(values).cat
        codes = cat.codes.to_numpy().astype(np.int64)
        used = np.zeros(len(cat.categories), dtype=bool)
        used[codes[codes >= 0]] = True
        new = np.cumsum(used) - 1
        codes = np.where(codes >= 0, new[np.maximum(codes, 0)], -1)
        return codes, _tidy_index(cat.categories[used])
    values = np.asarray(values)
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(values, sort=False)
    return codes.astype(np.int64), _tidy_index(uniques)


def _type_clashes(labels: pd.Index) -> list[tuple[Any, ...]]:
    """Groups of distinct labels that differ only in type, e.g. ``(1, "1")``."""
    if labels.dtype != object or pd.api.types.infer_dtype(labels, skipna=True) not in _MIXED_KINDS:
        return []
    groups: dict[Any, list[Any]] = {}
    for v in labels:
        groups.setdefault(_canonical(v), []).append(v)
    return [tuple(g) for g in groups.values() if len(g) > 1]


def _check_clashes(labels: pd.Index, what: str, problems: list[str]) -> None:
    clashes = _type_clashes(labels)
    if clashes:
        shown = "; ".join(" and ".join(_r(v) for v in g) for g in clashes[:5])
        problems.append(
            f"{what} mixes labels that differ only in type ({shown}); "
            "convert the column to one type first (e.g. .astype(str))"
        )


def _category_index(
    observed: Any, categories: Sequence[Any] | None, problems: list[str], what: str = "ratings"
) -> pd.Index:
    """The category scale: declared, or the sorted distinct observed labels.

    Problems with a declared scale (repeats, missing values) are reported and
    the scale is cleaned so that validation can go on and report more.
    """
    if categories is not None:
        if isinstance(categories, pd.CategoricalDtype):
            categories = categories.categories
        if isinstance(categories, (str, bytes)) or not isinstance(categories, Iterable):
            problems.append(f"categories must be a sequence of labels, got {_r(categories)}")
            categories = []
        cats = pd.Index(list(categories))
        if cats.hasnans:
            problems.append("declared categories contain a missing value")
            cats = cats.dropna()
        if cats.has_duplicates:
            problems.append(f"declared categories repeat: {_show(cats[cats.duplicated()].unique())}")
            cats = cats.unique()
        cats = _tidy_index(cats)
        _check_clashes(cats, "the declared categories", problems)
    else:
        _, cats = _factorize(pd.Index(observed).dropna().unique().to_numpy())
        cats = _by_value(cats)
        _check_clashes(cats, what, problems)
    if len(cats) < 2:
        problems.append(
            f"at least 2 categories are needed, found {len(cats)} ({_show(cats)}); "
            "declare the scale with categories=[...] if some levels were never used (command line: "
            f"--categories {','.join(str(c) for c in cats) or 'a'},...)"
        )
    return cats


def _by_value(cats: pd.Index) -> pd.Index:
    """Text labels that all read as numbers (``"1"``, ``"2"``, ``"10"``) in numeric order, not alphabetical."""
    if not all(isinstance(v, str) and _value_kind(v) in ("integer", "fraction") for v in cats):
        return cats
    return cats[np.argsort([float(v) for v in cats], kind="stable")]  # each reads as a number: _value_kind


def _bool_hint(subject: str, values: Any) -> str:
    """Why booleans beside numbers cannot be told apart, and how to convert them (never a mixed category list)."""
    verb = "mix" if subject.startswith("the ") and subject.endswith("s") else "mixes"
    return (
        f"{subject} {verb} booleans (True/False) with numbers, and pandas counts True as 1 and False as 0, so no "
        "category list of booleans and numbers can keep them apart: convert to one type first, e.g. .astype(int) "
        "if True means 1 and False 0, or .astype(str) with the scale declared as text "
        f"(categories=[{_text_scale(values)}])"
    )


def _mixes_bools_and_numbers(values: Any) -> bool:
    """Booleans beside numbers (or text that reads as one): pandas would merge True with 1, False with 0."""
    arr = np.asarray(values, dtype=object).ravel()
    types = set(map(type, arr))  # by type: pd.unique would already merge True into 1
    if not (types & {bool, np.bool_}):
        return False
    if types & {int, float, np.int64, np.float64, np.int32, np.float32}:
        return True
    return any(isinstance(v, str) and _value_kind(v) != "text" for v in pd.unique(arr[[type(v) is str for v in arr]]))


def _text_scale(values: Any) -> str:
    """The distinct values as text, sorted, for a ``categories=[...]`` of strings."""
    seen = sorted({str(v) for v in np.asarray(values, dtype=object).ravel() if not pd.isna(v)})
    return ", ".join(repr(v) for v in seen[:12]) + (", ..." if len(seen) > 12 else "")


def _declare_hint(values: np.ndarray) -> str:
    """How to declare the scale, with the values seen as the example.

    Never a list that mixes booleans with numbers: pandas counts ``True`` as
    1 and ``False`` as 0, so such a list would merge them.
    """
    if _mixes_bools_and_numbers(values):
        return _bool_hint("the column", values)
    seen = [
        int(v) if _is_number(v) and np.isfinite(v) and float(v).is_integer() else v
        for v in pd.unique(np.asarray(values, dtype=object))
    ]
    try:
        seen = sorted(
            seen, key=lambda v: (_value_kind(v) == "text", float(v) if _value_kind(v) != "text" else 0.0, str(v))
        )
    except (TypeError, ValueError):
        seen = list(seen)
    listed = ", ".join(_r(v) for v in seen[:12]) + (", ..." if len(seen) > 12 else "")
    cli = ",".join(str(v) for v in seen[:12]) + (",..." if len(seen) > 12 else "")
    return (
        f"if these are genuine categories, declare the scale explicitly: categories=[{listed}] "
        f"(command line: --categories {cli}); otherwise correct or drop those ratings"
    )


def _value_kind(v: Any) -> str:
    """'integer', 'fraction', 'nonfinite' (numbers, or text that reads as one) or 'text'."""
    if isinstance(v, (bool, np.bool_)):
        return "text"
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return "text"
    elif _is_number(v):
        f = float(v)
    else:
        return "text"
    if not np.isfinite(f):
        return "nonfinite"
    return "integer" if f.is_integer() else "fraction"


def _check_rating_values(values: np.ndarray, where: Callable[[int], str], what: str, problems: list[str]) -> None:
    """Ratings that look like typos when no scale is declared (rule of issue 13, item 2).

    ``values`` are the given (non-missing) ratings and ``where(n)`` says where
    rating ``n`` is (e.g. ``"row 7"``).  Reported, naming the rows and values:
    a non-finite number; numbers mixed with text (the rarer kind is named);
    a non-integer among integers.
    """
    values = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if values.size == 0 or values.dtype.kind in "iub":
        return
    if values.dtype.kind == "f":  # vectorised: no per-rating Python work
        finite = np.isfinite(values)
        with np.errstate(invalid="ignore"):
            fraction = finite & (np.mod(values, 1) != 0)
        nonfinite, text, integer = ~finite, np.zeros(values.size, dtype=bool), finite & ~fraction
    else:  # classify the distinct values only
        inv, uniques = pd.factorize(values)
        kinds = np.array([_value_kind(v) for v in uniques], dtype=object)
        code = {k: np.flatnonzero(kinds == k) for k in ("integer", "fraction", "nonfinite", "text")}

        def mask(kind: str) -> np.ndarray:
            return np.isin(inv, code[kind])

        integer, fraction, nonfinite, text = mask("integer"), mask("fraction"), mask("nonfinite"), mask("text")

    def report(bad: np.ndarray, what_is_wrong: str) -> None:
        rows = np.flatnonzero(bad)
        shown = "; ".join(f"{where(r)}: {_r(values[r])}" for r in rows[:5])
        if rows.size > 5:
            shown += f"; ... ({rows.size - 5} more)"
        problems.append(f"{what} {what_is_wrong} ({shown}); {_declare_hint(values)}")

    holds, mixes = ("hold", "mix") if what.startswith("the ") else ("holds", "mixes")  # "the rater columns"
    if nonfinite.any():
        report(nonfinite, f"{holds} non-finite numbers")
    number = integer | fraction
    if text.any() and number.any():
        if text.sum() <= number.sum():
            report(text, f"{mixes} numbers and text: text ratings among numbers")
        else:
            report(number, f"{mixes} numbers and text: numeric ratings among text")
    elif fraction.any() and integer.any():
        report(fraction, f"{holds} non-integer numbers among integers")


_TALLY_NAMES = ("n", "count", "counts", "tally", "freq", "frequency", "weight", "weights")


def _column_kinds(col: pd.Series) -> tuple[set[str], np.ndarray]:
    """Kinds (see :func:`_value_kind`) and distinct values of a column's given entries."""
    values = col.dropna()
    if values.dtype.kind in "iu":
        uniques = values.unique()
        return ({"integer"} if len(uniques) else set()), np.asarray(uniques)
    if values.dtype.kind == "f":
        uniques = values.unique()  # numeric unique first: no per-rating object conversion
        return {_value_kind(float(v)) for v in uniques}, uniques
    uniques = pd.unique(values.to_numpy(dtype=object))
    return {_value_kind(v) for v in uniques}, uniques


def _check_rater_columns(df: pd.DataFrame, raters: list[Any], fmt: str, problems: list[str], scale_given: bool) -> bool:
    """Columns taken as raters by default that look like something else.

    A tally column in a wide table (by name, or integers mostly outside the
    ratings of the other columns) and a text column among numeric rater
    columns are reported, naming the column and suggesting ``format
    grouped`` / ``raters=[...]``; the text check only when no scale is given
    (declared or from categorical columns).  Returns True when a text column
    was reported (the generic mixed-values message would repeat it).
    """
    if len(raters) < 2:
        return False
    kinds = {c: _column_kinds(df[c]) for c in raters}
    hint_raters = "pass raters=[...] to name the rater columns (command line: --raters col1,col2,...)"
    grouped_hint = (
        "RatingData.from_grouped, or data_format='grouped' in pyrater.fit (command line: --format grouped --tally {0})"
    )
    if fmt == "wide":
        id_like = _id_like_columns(df, raters, kinds)
        for c in id_like:
            n = int(df[c].notna().sum())
            problems.append(
                f"column {_r(c)} holds a different value on each of its {n} rows ({_show(kinds[c][1], 3)}), "
                "values the other columns never give: it looks like the item labels, not a rater; pass "
                f"item={_r(c)} (command line: --item {c})"
            )
        for c in raters:
            k, u = kinds[c]
            if c in id_like or not k or k - {"integer"}:
                continue
            ints = np.asarray([float(v) for v in u])
            if (ints < 0).any():
                continue
            others = [kinds[o] for o in raters if o != c]
            other_values = {float(v) for ok, ou in others if ok and not ok - {"integer"} for v in ou}
            outside = [v for v in u if float(v) not in other_values]
            by_name = str(c).strip().lower() in _TALLY_NAMES
            by_values = all(ok and not ok - {"integer"} for ok, _ in others) and _tally_like(
                set(ints.tolist()), other_values
            )
            if by_name or by_values:
                why = (
                    "its name"
                    if by_name
                    else f"its values ({_show(sorted(outside, key=float))}) lie far outside the other columns' ratings"
                )
                problems.append(
                    f"column {_r(c)} looks like a tally of items per rating pattern, not a rater ({why}): "
                    f"for grouped data use {grouped_hint.format(c)} with tally={_r(c)}; otherwise {hint_raters}"
                )
    text_cols = [c for c in raters if kinds[c][0] == {"text"}]
    number_cols = [c for c in raters if kinds[c][0] and kinds[c][0] <= {"integer", "fraction"}]
    if not scale_given and text_cols and number_cols and len(text_cols) < len(number_cols):
        for c in text_cols:
            problems.append(
                f"column {_r(c)} holds text ({_show(kinds[c][1], 4)}) while the other rater columns hold numbers: "
                f"it is probably not a rater; {hint_raters}"
                + (" or item=... if it holds the item labels" if fmt == "wide" else "")
            )
        return True
    return False


def _encode(values: Any, cats: pd.Index) -> np.ndarray:
    """Codes of ``values`` in ``cats``; -1 where not a category (or missing).

    Exact matches first; values left unmatched are then matched type-blind
    (``"1"`` or ``1.0`` to the category ``1``, ``1`` to the category ``"1"``),
    e.g. a CSV column read as strings against integer categories.
    """
    if isinstance(getattr(values, "dtype", None), pd.CategoricalDtype):
        cat = pd.Series(values).cat
        sub = _encode(cat.categories.to_numpy(dtype=object), cats)
        codes = cat.codes.to_numpy().astype(np.int64)
        return np.where(codes >= 0, sub[np.maximum(codes, 0)] if sub.size else -1, -1).astype(np.int64)
    values = np.asarray(values)
    if values.size == 0:
        return np.empty(0, dtype=np.int64)
    codes = np.asarray(cats.get_indexer(pd.Index(values)), dtype=np.int64)
    miss = np.flatnonzero(codes < 0)
    if miss.size:
        keys = [_canonical(c) for c in cats]
        counts: dict[Any, int] = {}
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
        lookup = {k: i for i, k in enumerate(keys) if counts[k] == 1}
        inv, uniques = pd.factorize(values[miss])  # missing values get -1
        alt = np.array([lookup.get(_canonical(v), -1) for v in uniques], dtype=np.int64)
        codes[miss] = np.where(inv >= 0, alt[np.maximum(inv, 0)] if alt.size else -1, -1)
    return codes


@dataclass(frozen=True, eq=False)
class RatingData:
    """Categorical ratings of items by raters, in any design.

    Build with :meth:`from_long`, :meth:`from_wide`, :meth:`from_grouped`,
    :meth:`from_codes` (0-based integer codes, fast) or
    :func:`as_rating_data`; do not call the constructor directly.

    Attributes
    ----------
    unit : int array, shape (N,)
        Unit code of each rating (an item, or a pattern for grouped data).
    rater : int array, shape (N,)
        Rater code of each rating, in ``0 .. J-1``.
    rating : int array, shape (N,)
        Category code of each rating, in ``0 .. K-1``.
    unit_labels : pandas.Index, length I
        Item labels (long, wide) or pattern row labels (grouped).
    rater_labels : pandas.Index, length J
    categories : pandas.Index, length K
    weight : int array, shape (I,)
        Number of items each unit stands for: 1 for long and wide data, the
        tally for grouped data.
    source_format : {"long", "wide", "grouped"}
        The format the data was built from.
    """

    unit: np.ndarray
    rater: np.ndarray
    rating: np.ndarray
    unit_labels: pd.Index
    rater_labels: pd.Index
    categories: pd.Index
    weight: np.ndarray
    source_format: DataFormat = "long"
    _columns: dict = field(default_factory=dict, repr=False)
    #: the categories are the sorted observed labels, not a declared scale (``categories=`` or a categorical column)
    _scale_sorted: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("unit", "rater", "rating", "weight"):
            # a read-only view: never flips the flags of an array the caller owns
            arr = np.asarray(getattr(self, name), dtype=np.int64).view()
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    # ------------------------------------------------------------------ sizes
    @property
    def n_units(self) -> int:
        """I: number of units (items, or patterns for grouped data)."""
        return len(self.unit_labels)

    @property
    def n_items(self) -> int:
        """Number of items (sum of tallies for grouped data)."""
        return int(self.weight.sum())

    @property
    def n_raters(self) -> int:
        """J: number of raters."""
        return len(self.rater_labels)

    @property
    def n_categories(self) -> int:
        """K: number of categories (declared, or observed)."""
        return len(self.categories)

    @property
    def n_ratings(self) -> int:
        """N: number of ratings stored (per unit for grouped data)."""
        return int(self.unit.size)

    @property
    def is_grouped(self) -> bool:
        """True when units are rating patterns with tallies."""
        return self.source_format == "grouped"

    @property
    def n_ratings_total(self) -> int:
        """Number of ratings the data stand for: :attr:`n_ratings` weighted by the tallies.

        Equal to :attr:`n_ratings` for long and wide data; for grouped data
        each pattern's ratings count once per item showing it.
        """
        return int(self.weight[self.unit].sum())

    @property
    def item_index(self) -> pd.Index:
        """The item labels of pyrater's per-item results (LOO, K-fold, replicates, agreement).

        Grouped data have no item labels: their items are numbered ``1 ..
        n_items`` in pattern order (pattern 0's items first).  Long and wide
        data: the items' own labels.
        """
        if self.is_grouped:
            return pd.RangeIndex(1, self.n_items + 1, name="item")
        return pd.Index(self.unit_labels, name="item")

    @property
    def unit_of_item(self) -> np.ndarray:
        """The unit code (row of :attr:`counts`) of every item, in the order of :attr:`item_index`: int64 (n_items,).

        Grouped data: each pattern repeated by its tally; otherwise ``0 .. n_units - 1``.
        """
        units = np.arange(self.n_units, dtype=np.int64)
        return np.repeat(units, np.asarray(self.weight, dtype=np.int64)) if self.is_grouped else units

    def item_units(self) -> pd.Series:
        """The unit of every item, indexed by the item labels of pyrater's per-item results (:attr:`item_index`).

        The values are the units' labels (the patterns of grouped data), the
        index of ``class_probabilities()``; for long and wide data each item
        is its own unit (the values equal the index).

        Returns
        -------
        Series, length n_items
            Index ``item``, values the unit labels (``pattern`` for grouped data).

        Examples
        --------
        >>> import pyrater
        >>> from pyrater import datasets
        >>> caries = pyrater.RatingData.from_grouped(datasets.caries(), tally="n")
        >>> units = caries.item_units()
        >>> len(units), int(units.iloc[0]), int(units.iloc[-1])
        (3859, 0, 31)
        """
        return pd.Series(self.unit_labels[self.unit_of_item], index=self.item_index, name=self.unit_labels.name)

    def rare_categories(self, max_count: int = RARE_COUNT, max_share: float = RARE_SHARE) -> pd.Series:
        """Categories seen only a handful of times: possibly typos, or levels too rare to estimate.

        A category is rare when it was given at least once but fewer than
        ``max_count`` times (tallies applied) and in less than ``max_share``
        of all ratings.  Declared but unused categories are not listed.

        Returns
        -------
        Series
            Number of ratings of each rare category, indexed by category.
        """
        n = self.rating_counts()
        total = max(int(n.sum()), 1)
        return n[(n > 0) & (n < max_count) & (n < max_share * total)]

    def __repr__(self) -> str:
        def n(count: int, noun: str) -> str:
            return f"{count} {noun}{'' if count == 1 else 's'}"

        units = (
            f"{n(self.n_units, 'pattern')} of {n(self.n_items, 'item')}" if self.is_grouped else n(self.n_items, "item")
        )
        text = (
            f"RatingData({units}, {n(self.n_raters, 'rater')}, {self.n_categories} categories "
            f"{list(self.categories)}, {n(self.n_ratings_total, 'rating')}, from {self.source_format} data"
        )
        rare = self.rare_categories()
        if len(rare):
            shown = ", ".join(f"{_r(c)} ({n(count, 'rating')})" for c, count in rare.items())
            text += f"; rarely used categories: {shown}"
        unused = self.rating_counts()
        unused = unused[unused == 0]
        if len(unused):
            text += f"; categories never given: {_show(unused.index)}"
        return text + ")"

    # --------------------------------------------------------- derived arrays
    @cached_property
    def counts(self) -> sp.csr_matrix:
        """Per-unit count matrix, sparse CSR of shape (I, J*K).

        Entry ``(i, j*K + l)`` is how many times rater ``j`` gave rating
        ``l`` to unit ``i``.  Built once and cached.
        """
        K = self.n_categories
        m = sp.csr_matrix(
            (np.ones(self.n_ratings), (self.unit, self.rater * K + self.rating)),
            shape=(self.n_units, self.n_raters * K),
        )
        m.sum_duplicates()
        return m

    @cached_property
    def has_repeats(self) -> bool:
        """True when some rater rated some item more than once."""
        if self.n_ratings < 2:
            return False
        key = self.unit * self.n_raters + self.rater
        cells = self.n_units * self.n_raters
        if cells <= 2 * self.n_ratings + 10**6:
            return bool(np.bincount(key, minlength=cells).max() > 1)
        key = np.sort(key)
        return bool((key[1:] == key[:-1]).any())

    def rating_counts(self) -> pd.Series:
        """Number of ratings per category (tallies applied), indexed by category."""
        w = self.weight[self.unit]
        n = np.bincount(self.rating, weights=w, minlength=self.n_categories)
        return pd.Series(n.astype(np.int64), index=self.categories, name="n_ratings")

    # -------------------------------------------------------------- encoding
    def encode_categories(self, values: Iterable[Any], what: str = "value") -> np.ndarray:
        """Category codes of user labels; raises naming any unknown label."""
        values = np.asarray(list(values), dtype=object)
        codes = _encode(values, self.categories)
        if (codes < 0).any():
            raise RatingDataError(
                f"{what} {_show(pd.unique(values[codes < 0]))} not among the categories {_show(self.categories)}"
            )
        return codes

    def encode_units(self, labels: Iterable[Any], what: str = "item") -> np.ndarray:
        """Unit codes of user item (or pattern) labels; raises naming unknown ones.

        Labels match exactly, else type-blind (``"7"`` finds item ``7``).
        """
        labels = list(labels)
        codes = _encode(np.asarray(labels, dtype=object), self.unit_labels)  # exact, then type-blind
        if (codes < 0).any():
            bad = [lab for lab, c in zip(labels, codes) if c < 0]
            raise RatingDataError(f"{what} {_show(bad)} not found in the data")
        return np.asarray(codes, dtype=np.int64)

    def known_codes(self, known: dict | pd.Series | None, what: str = "known") -> np.ndarray | None:
        """Turn ``{item label: true category label}`` into a (I,) code array (-1 = unknown).

        ``what`` names the argument in the errors (``"known"``, ``"gold"``).
        """
        if known is None:
            return None
        series = pd.Series(known) if not isinstance(known, pd.Series) else known
        out = np.full(self.n_units, -1, dtype=np.int64)
        if len(series) == 0:
            return out
        if series.index.has_duplicates:
            raise RatingDataError(
                f"{what} classes given twice for items {_show(series.index[series.index.duplicated()])}"
            )
        units = self.encode_units(series.index, what=f"{what}-class item")
        out[units] = self.encode_categories(series.to_numpy(), what=f"{what} class")
        return out

    # ------------------------------------------------------------ builders
    @classmethod
    def from_long(
        cls,
        df: pd.DataFrame,
        item: str = "item",
        rater: str = "rater",
        rating: str = "rating",
        categories: Sequence[Any] | None = None,
        normalize_labels: bool = False,
    ) -> RatingData:
        """Build from a long table: one row per rating.

        Parameters
        ----------
        df : DataFrame
            One row per rating; repeated (item, rater) rows allowed.
        item, rater, rating : str
            Column names.
        categories : sequence, optional
            The full, ordered category scale.  Default: the categories of a
            categorical rating column, else the sorted observed ratings.
            Declare it when some level never occurs.  Without it, ratings
            that look like typos are an error naming their rows: a column
            mixing numbers and text (``"x"`` among 1-4), a non-integer among
            integers (``1.5``) or a non-finite number (``inf``).  Rarely
            used categories are listed in the repr
            (:meth:`rare_categories`).
        normalize_labels : bool
            Merge text labels that differ only in spelling: ratings that
            differ in surrounding whitespace, letter case or Unicode
            normalisation (``"yes"``, ``"yes "``, ``"Yes"``), item and rater
            labels that differ in whitespace or Unicode normalisation.  Each
            group becomes its most frequent spelling (the declared one for
            declared categories).  Default False: such labels stay apart,
            with a :class:`LabelSpellingWarning` naming them.

        Returns
        -------
        RatingData
            With ``I`` = number of distinct items, ``J`` = number of distinct
            raters, ``N = len(df)`` ratings; labels sorted where they can be
            (category order for categorical columns).

        Raises
        ------
        RatingDataError
            Listing every problem: missing, duplicated or ambiguous columns,
            missing values, ratings outside the declared scale, fewer than
            2 categories, labels differing only in type.

        Examples
        --------
        >>> from pyrater import RatingData
        >>> import pandas as pd
        >>> df = pd.DataFrame({"item": ["a", "a", "b"], "rater": [1, 2, 1], "rating": ["y", "n", "y"]})
        >>> RatingData.from_long(df, categories=["n", "y", "maybe"]).n_categories
        3
        """
        problems: list[str] = []
        cols = {"item": item, "rater": rater, "rating": rating}
        _check_frame(df, problems, used=list(cols.values()))
        _raise(problems)
        _check_roles(cols, problems)
        _raise(problems)
        missing = [_missing_column(name, role, df) for role, name in cols.items() if name not in df.columns]
        if missing:
            _raise(missing, _suggest_format(df, "long"))
        _check_ambiguous(df, list(cols.values()), problems)
        normalize = _check_bool("normalize_labels", normalize_labels)
        user_declared = categories is not None
        if normalize:  # a shallow copy with the three columns respelled: the caller's frame is untouched
            df, categories = _normalized_long(df, item, rater, rating, categories)
        for role, name in cols.items():
            bad = np.flatnonzero(df[name].isna().to_numpy())
            if bad.size:
                advice = (
                    "long data has one row per given rating: drop the rows without one"
                    if role == "rating"
                    else f"every rating needs its {role}"
                )
                problems.append(
                    f"column {_r(name)} ({role}) has missing values (NaN) at rows {_show(df.index[bad])}; {advice}"
                )
        col = df[rating]
        present = ~col.isna().to_numpy()
        if col.dtype == object and _mixes_bools_and_numbers(col.to_numpy()[present]):
            given = col.to_numpy()[present]
            problems.append(_bool_hint(f"column {_r(rating)}", given))
            _raise(problems)
        if categories is None and isinstance(col.dtype, pd.CategoricalDtype):
            categories = col.dtype.categories  # the column's own scale, unused levels included
        scale_sorted = categories is None
        if categories is None:
            given = np.flatnonzero(present)
            rows = df.index[given]
            _check_rating_values(
                col.to_numpy()[given], lambda n: f"row {_r(rows[n])}", f"column {_r(rating)}", problems
            )
        cats = _category_index(col[present].unique(), categories, problems, what=f"column {_r(rating)}")
        codes = _encode(col, cats)
        bad = np.flatnonzero((codes < 0) & present)
        if bad.size and len(cats):
            values = col.to_numpy(dtype=object)
            problems.append(
                f"column {_r(rating)} has values {_show(pd.unique(values[bad]))} (rows {_show(df.index[bad])}) "
                f"not among the categories {_show(cats)}"
            )
        unit, unit_labels = _factorize(df[item])
        rater_codes, rater_labels = _factorize(df[rater])
        _check_clashes(unit_labels, f"column {_r(item)} (item)", problems)
        _check_clashes(rater_labels, f"column {_r(rater)} (rater)", problems)
        _raise(problems)
        if not normalize:
            if not user_declared:  # a declared scale is the user's own spelling
                counts = np.bincount(codes[codes >= 0], minlength=len(cats))
                _warn_spellings(cats, counts, f"column {_r(rating)} (ratings)", case=True)
        return cls(
            unit=unit,
            rater=rater_codes,
            rating=codes,
            unit_labels=unit_labels.rename(item),
            rater_labels=rater_labels.rename(rater),
            categories=cats.rename(rating),
            weight=np.ones(len(unit_labels), dtype=np.int64),
            source_format="long",
            _columns={"item": item, "rater": rater, "rating": rating},
            _scale_sorted=scale_sorted,
        )

    @classmethod
    def from_codes(
        cls,
        item: np.ndarray | Sequence[int],
        rater: np.ndarray | Sequence[int],
        rating: np.ndarray | Sequence[int],
        n_categories: int,
        n_items: int | None = None,
        n_raters: int | None = None,
        weight: np.ndarray | Sequence[int] | None = None,
        categories: Sequence[Any] | None = None,
        copy: bool = True,
    ) -> RatingData:
        """Build directly from 0-based integer codes (fast path, no factorisation).

        Meant for simulated or pre-encoded data: no pandas work is done on
        the N ratings, so 10^7 ratings take well under a second.  Labels are
        1-based integers: items ``1 .. I``, raters ``1 .. J`` and categories
        ``1 .. K`` unless ``categories`` gives the category labels.

        Parameters
        ----------
        item : int array, shape (N,)
            Item (unit) code of each rating, in ``0 .. I-1``.
        rater : int array, shape (N,)
            Rater code of each rating, in ``0 .. J-1``.
        rating : int array, shape (N,)
            Category code of each rating, in ``0 .. K-1``.
        n_categories : int
            K, at least 2.
        n_items : int, optional
            I.  Default ``max(item) + 1``; give it to keep unrated items.
        n_raters : int, optional
            J.  Default ``max(rater) + 1``; give it to keep raters with no rating.
        weight : int array, shape (I,), optional
            Number of items each unit stands for.  When given, the units are
            rating patterns (``source_format="grouped"``, labels ``1 .. I``
            name "pattern"); default all ones (``source_format="long"``).
        categories : sequence, length K, optional
            Category labels for codes ``0 .. K-1``.
        copy : bool
            Copy the code arrays (default).  ``copy=False`` shares int64
            arrays with the caller, who must then not modify them.

        Returns
        -------
        RatingData

        Raises
        ------
        RatingDataError
            Codes out of range, non-integer codes, mismatched lengths,
            fewer than 2 categories, bad weights or category labels.
        """
        problems: list[str] = []
        arrays: dict[str, np.ndarray] = {}
        for name, values in (("item", item), ("rater", rater), ("rating", rating)):
            arr = np.asarray(values)
            if arr.ndim != 1:
                problems.append(f"{name} codes must be a 1-d array; got shape {arr.shape}")
            elif arr.size and arr.dtype.kind not in "iu":
                if arr.dtype.kind == "f" and np.all(np.mod(arr, 1) == 0):
                    arr = arr.astype(np.int64)
                else:
                    problems.append(f"{name} codes must be integers; got dtype {arr.dtype}")
            arrays[name] = arr
        _raise(problems)
        sizes = {name: arr.size for name, arr in arrays.items()}
        if len(set(sizes.values())) > 1:
            _raise([f"item, rater and rating codes must have the same length; got {sizes}"])
        if sizes["item"] == 0:
            _raise(["no ratings (the code arrays are empty)"])

        def _count(value: Any, name: str) -> int | None:
            if value is None:
                return None
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                problems.append(f"{name} must be an integer; got {_r(value)}")
                return None
            return int(value)

        K = _count(n_categories, "n_categories")
        limits = {"item": _count(n_items, "n_items"), "rater": _count(n_raters, "n_raters"), "rating": K}
        _raise(problems)
        assert K is not None  # n_categories is an int (the signature); a bad value was reported above
        if K < 2:
            problems.append(f"n_categories must be at least 2; got {K}")
        for name, arr in arrays.items():
            lo, hi = int(arr.min()), int(arr.max())
            if lo < 0:
                bad = np.flatnonzero(arr < 0)
                problems.append(
                    f"{name} codes must be >= 0 (0-based); positions {_show(bad)} hold {_show(np.unique(arr[bad]))}"
                )
            limit = limits[name]
            if limit is not None and hi >= limit:
                what = {"item": "n_items", "rater": "n_raters", "rating": "n_categories"}[name]
                bad = np.flatnonzero(arr >= limit)
                problems.append(
                    f"{name} codes must be < {what} = {limit} (0-based); positions {_show(bad)} "
                    f"hold {_show(np.unique(arr[bad]))}"
                )
            if limit is None:
                limits[name] = hi + 1
        I, J = limits["item"], limits["rater"]
        assert I is not None and J is not None  # the loop above fills every missing limit
        if categories is not None:
            cats = pd.Index(list(categories), name="rating")
            if len(cats) != K:
                problems.append(f"categories has {len(cats)} labels but n_categories = {K}")
            if cats.has_duplicates:
                problems.append(f"declared categories repeat: {_show(cats[cats.duplicated()].unique())}")
            if cats.hasnans:
                problems.append("declared categories contain a missing value")
        else:
            cats = pd.RangeIndex(1, (K or 0) + 1, name="rating")
        if weight is None:
            w = np.ones(I, dtype=np.int64)
            fmt: DataFormat = "long"
        else:
            w = np.asarray(weight)
            fmt = "grouped"
            if w.shape != (I,):
                problems.append(f"weight must have shape (n_items,) = ({I},); got {w.shape}")
            elif w.dtype.kind not in "iu" and not (w.dtype.kind == "f" and np.all(np.mod(w, 1) == 0)):
                problems.append(f"weight must hold non-negative integers; got dtype {w.dtype}")
            elif (w < 0).any():
                problems.append(f"weight must be >= 0; positions {_show(np.flatnonzero(w < 0))} are negative")
        _raise(problems)
        return cls(
            unit=arrays["item"].astype(np.int64, copy=copy),
            rater=arrays["rater"].astype(np.int64, copy=copy),
            rating=arrays["rating"].astype(np.int64, copy=copy),
            unit_labels=pd.RangeIndex(1, I + 1, name="pattern" if fmt == "grouped" else "item"),
            rater_labels=pd.RangeIndex(1, J + 1, name="rater"),
            categories=cats,
            weight=w.astype(np.int64, copy=False),
            source_format=fmt,
            _columns={"tally": "n"} if fmt == "grouped" else {},
        )

    @classmethod
    def from_wide(
        cls,
        df: pd.DataFrame,
        raters: Sequence[Any] | None = None,
        item: str | None = None,
        categories: Sequence[Any] | None = None,
        normalize_labels: bool = False,
    ) -> RatingData:
        """Build from a wide table: one row per item, one column per rater.

        Parameters
        ----------
        df : DataFrame
            Missing values mean "not rated".  Rows with no rating at all
            are dropped with an :class:`pyrater.UnratedItemsWarning` that counts
            them (such an item says nothing about the raters, and its class
            would only repeat the prevalence).
        raters : sequence of column names, optional
            Default: every column except ``item``.  Taken by default, a
            column that looks like a tally (named n, count, tally, freq, ...
            or holding integers far outside the other columns' ratings) or a
            text column among numeric rater columns is an error naming it:
            pass ``raters`` to choose the rater columns, or read grouped
            data with :meth:`from_grouped`.
        item : str, optional
            Column holding item labels.  Default: the DataFrame's index.
        categories : sequence, optional
            The full, ordered category scale.  Without it, ratings mixing
            numbers and text, a non-integer among integers or a non-finite
            number are an error (see :meth:`from_long`).
        normalize_labels : bool
            Merge ratings and item labels that differ only in spelling, as in
            :meth:`from_long`; rater columns whose names differ only in
            spelling are warned about, not merged.
        """
        return cls._from_table(
            df, raters=raters, label_col=item, tally=None, categories=categories, normalize_labels=normalize_labels
        )

    @classmethod
    def from_grouped(
        cls,
        df: pd.DataFrame,
        tally: str = "n",
        raters: Sequence[Any] | None = None,
        categories: Sequence[Any] | None = None,
        normalize_labels: bool = False,
    ) -> RatingData:
        """Build from a grouped table: distinct rating patterns with tallies.

        Parameters
        ----------
        df : DataFrame
            One column per rater plus a tally column.  Each row is a distinct
            pattern; missing entries mean that rater did not rate those items.
        tally : str
            Name of the tally column (non-negative integers).
        raters : sequence of column names, optional
            Default: every column except ``tally``.
        categories : sequence, optional
            The full, ordered category scale (checked as in :meth:`from_long`
            when not given).
        normalize_labels : bool
            Merge ratings that differ only in spelling, as in
            :meth:`from_long` (rater columns are not merged).  Pattern rows
            that become one pattern are merged, their tallies summed.

        Pattern rows without any rating are dropped with an
        :class:`pyrater.UnratedItemsWarning` counting the items they stand for.
        """
        return cls._from_table(
            df, raters=raters, label_col=None, tally=tally, categories=categories, normalize_labels=normalize_labels
        )

    @classmethod
    def _from_table(
        cls,
        df: pd.DataFrame,
        raters: Sequence[Any] | None,
        label_col: Any,
        tally: Any,
        categories: Sequence[Any] | None,
        normalize_labels: bool = False,
    ) -> RatingData:
        fmt: DataFormat = "grouped" if tally is not None else "wide"
        problems: list[str] = []
        _check_frame(df, problems)
        _raise(problems)
        normalize = _check_bool("normalize_labels", normalize_labels)
        user_declared = categories is not None
        special = {"item": label_col, "tally": tally}
        special = {role: c for role, c in special.items() if c is not None}
        missing = [_missing_column(c, role, df) for role, c in special.items() if c not in df.columns]
        if missing:
            _raise(missing, _suggest_format(df, fmt))
        chosen = raters is not None
        if raters is None:
            raters = [c for c in df.columns if c not in special.values()]
        else:
            if isinstance(raters, (str, bytes)) or not isinstance(raters, Iterable):
                _raise([f"raters must be a list of column names, got {_r(raters)}"])
            raters = list(raters)
            absent = [r for r in raters if r not in df.columns]
            if absent:
                problems.extend(_missing_column(r, "rater", df) for r in absent)
            if len(set(raters)) < len(raters):
                problems.append(
                    f"rater columns listed twice: {_show(pd.Index(raters)[pd.Index(raters).duplicated()].unique())}"
                )
            for role, c in special.items():
                if c in raters:
                    problems.append(f"column {_r(c)} is given both as the {role} column and as a rater column")
            _raise(problems)
        if not raters:
            _raise([f"no rater columns: the table has only {_show(df.columns)}"], _suggest_format(df, fmt))
        if not chosen and _looks_long(df):  # before any guess about the columns: the one advice that fits
            names = ", ".join(_r(c) for c in df.columns if str(c).strip().lower() in ("item", "rater", "rating"))
            _raise(
                [
                    f"the columns {names} look like long data (one row per rating), not a {fmt} table with one "
                    "column per rater"
                ],
                "hint: read it as long data: RatingData.from_long, or data_format='long' in pyrater.fit (command line: "
                "--format long)",
            )
        _check_ambiguous(df, raters + list(special.values()), problems)
        block = df[raters]
        columns = [block.iloc[:, j] for j in range(len(raters))]
        if categories is None:
            dtypes = [c.dtype for c in columns]
            if all(isinstance(d, pd.CategoricalDtype) for d in dtypes):
                # the columns' own scale, unused levels included (first column's order)
                union = dtypes[0].categories
                for d in dtypes[1:]:
                    if not d.categories.equals(union):
                        union = union.append(d.categories[~d.categories.isin(union)])
                categories = union
        raw_block = block if normalize and tally is not None else None
        if normalize:  # the cells respelled in a new block (the caller's frame is untouched)
            if categories is not None and not user_declared:
                categories = _dedupe_spellings(list(categories), case=True)
            declared = None if categories is None else pd.Index(list(categories))
            cells = _normalize_values(block.to_numpy(dtype=object).ravel(), case=True, declared=declared)
            block = pd.DataFrame(cells.reshape(block.shape), index=block.index, columns=block.columns)
            columns = [block.iloc[:, j] for j in range(len(raters))]
            df = df.copy(deep=False)
            df[raters] = block
        present = ~block.isna().to_numpy()
        if any(c.dtype == object for c in columns):
            cells = block.to_numpy(dtype=object)[present]
            if _mixes_bools_and_numbers(cells):
                _raise([_bool_hint("the rater columns", cells)])
        column_reported = False if chosen else _check_rater_columns(df, raters, fmt, problems, categories is not None)
        if categories is None and not column_reported and any(c.dtype.kind not in "iub" for c in columns):
            r_idx, c_idx = np.nonzero(present)
            numeric = all(c.dtype.kind in "iuf" for c in columns)  # vectorised path for numeric tables
            _check_rating_values(
                block.to_numpy(dtype=float if numeric else object)[r_idx, c_idx],
                lambda n: f"row {_r(df.index[r_idx[n]])}, column {_r(raters[c_idx[n]])}",
                "the rater columns",
                problems,
            )
        per_column = [c[present[:, j]].unique() for j, c in enumerate(columns)]
        observed: np.ndarray | list[Any] = (
            np.concatenate([np.asarray(o, dtype=object) for o in per_column]) if per_column else []
        )
        scale_sorted = categories is None
        cats = _category_index(observed, categories, problems, what="the rater columns")
        # column-major and as small as K allows: wide tables can have many cells
        codes = np.full(present.shape, -1, dtype=np.min_scalar_type(-max(len(cats), 1)), order="F")
        if len(cats):
            for j, c in enumerate(columns):  # a loop over rater columns, vectorised over rows
                codes[:, j] = np.where(present[:, j], _encode(c, cats), -1)
        bad = present & (codes < 0)
        if bad.any() and len(cats):
            rows, cols = np.nonzero(bad)
            where = [
                f"row {_r(df.index[r])}, column {_r(raters[c])}: {_r(block.iat[r, c])}"
                for r, c in zip(rows[:5], cols[:5])
            ]
            if rows.size > 5:
                where.append(f"... ({rows.size - 5} more cells)")
            problems.append(f"ratings not among the categories {_show(cats)}: {'; '.join(where)}")
        if fmt == "wide" and len(cats) and not present.any():
            problems.append("no ratings: every rater column is empty")
        if tally is not None:
            weight = _check_tally(df, tally, problems)
            if not problems and weight.sum() == 0:
                problems.append(f"tally column {_r(tally)} is all zero: there are no items")
            if not present.any() and len(cats):
                problems.append("no ratings: every rater column is empty")
        else:
            weight = np.ones(len(df), dtype=np.int64)
        if normalize and label_col is not None and not pd.api.types.is_numeric_dtype(df[label_col].dtype):
            df = df.copy(deep=False)
            df[label_col] = _normalize_values(df[label_col], case=False)
        elif normalize and label_col is None and df.index.dtype == object:
            df = df.copy(deep=False)
            df.index = pd.Index(_normalize_values(df.index, case=False), name=df.index.name)
        if label_col is not None:
            labels = df[label_col]
            if labels.isna().any():
                missing_rows = _show(df.index[labels.isna().to_numpy()])
                problems.append(f"item column {_r(label_col)} has missing values at rows {missing_rows}")
            unit_labels = _tidy_index(pd.Index(labels.to_numpy())).rename(label_col)
            if unit_labels.has_duplicates:
                repeated = _show(unit_labels[unit_labels.duplicated()].unique())
                problems.append(
                    f"item column {_r(label_col)} repeats labels {repeated}: "
                    "a wide table holds one row per item; use long format for repeated ratings"
                )
        else:
            unit_labels = df.index.copy()
            if unit_labels.name is None:
                unit_labels = unit_labels.rename("pattern" if tally is not None else "item")
            if unit_labels.hasnans:
                problems.append("the index (row labels) has missing values")
            if unit_labels.has_duplicates:
                dups = _show(unit_labels[unit_labels.duplicated()].unique())
                if tally is None:
                    problems.append(
                        f"item labels (the index) repeat: {dups}; a wide table holds one row per item: "
                        "use long format for repeated ratings"
                    )
                else:
                    problems.append(
                        f"pattern row labels (the index) repeat: {dups}; reset it with df.reset_index(drop=True)"
                    )
        _raise(problems)
        if not normalize and not user_declared:
            counts = np.bincount(codes[codes >= 0].astype(np.int64), minlength=len(cats))
            _warn_spellings(cats, counts, "the rater columns (ratings)", case=True)
        rated = (codes >= 0).any(axis=1)
        rows_kept = df.index
        if not rated.all():
            dropped = np.flatnonzero(~rated)
            what = (
                f"{dropped.size} pattern rows (tally {int(weight[dropped].sum())} items)"
                if tally is not None
                else f"{dropped.size} item{'s' if dropped.size != 1 else ''}"
            )
            warnings.warn(
                f"{what} {'has' if dropped.size == 1 and tally is None else 'have'} no rating from any rater column "
                f"and {'was' if dropped.size == 1 and tally is None else 'were'} dropped "
                f"(rows {_show(df.index[dropped])}); "
                "an unrated item carries no information about the raters and its class would only repeat the "
                "prevalence",
                UnratedItemsWarning,
                stacklevel=user_stacklevel(),
            )
            codes, weight, unit_labels, rows_kept = codes[rated], weight[rated], unit_labels[rated], df.index[rated]
        unit, rater_col = np.nonzero(codes >= 0)
        data = cls(
            unit=unit,
            rater=rater_col,
            rating=codes[unit, rater_col],
            unit_labels=unit_labels,
            rater_labels=pd.Index(raters, name="rater"),
            categories=cats.rename("rating"),
            weight=weight,
            source_format=fmt,
            _columns={"tally": tally} if tally is not None else {},
            _scale_sorted=scale_sorted,
        )
        if tally is not None:
            pattern, first = data._pattern_ids()
            if first.size < data.n_units and raw_block is not None and _respelled_only(raw_block, rows_kept, pattern):
                return data._merge_patterns(pattern, first)  # rows that became one pattern by normalize_labels
            if first.size < data.n_units:
                size = np.bincount(pattern)
                groups = np.flatnonzero(size > 1)
                shown = [f"rows {_show(rows_kept[np.flatnonzero(pattern == g)])} share one pattern" for g in groups[:5]]
                if groups.size > 5:
                    shown.append(f"... ({groups.size - 5} more repeated patterns)")
                _raise(
                    [
                        f"pattern rows repeat: {'; '.join(shown)}; each pattern must appear once with its total "
                        f"tally (e.g. df.groupby({_r(raters)}, dropna=False, as_index=False)[{_r(tally)}].sum())"
                    ]
                )
        return data

    def _merge_patterns(self, pattern: np.ndarray, first: np.ndarray) -> RatingData:
        """Grouped data with units of one pattern merged into its first unit, their tallies summed."""
        P = first.size
        new_code = np.full(self.n_units, -1, dtype=np.int64)
        new_code[first] = np.arange(P)
        keep = new_code[self.unit] >= 0
        return type(self)(
            unit=new_code[self.unit[keep]],
            rater=self.rater[keep],
            rating=self.rating[keep],
            unit_labels=self.unit_labels[first],
            rater_labels=self.rater_labels,
            categories=self.categories,
            weight=np.bincount(pattern, weights=self.weight, minlength=P).astype(np.int64),
            source_format=self.source_format,
            _columns=dict(self._columns),
            _scale_sorted=self._scale_sorted,
        )

    # ------------------------------------------------------------ exporters
    def _rating_values(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, categories=self.categories)

    def check_scale_order(self, use: str) -> None:
        """Warn when ``use`` reads the categories as an ordered scale that is only an alphabetical sort.

        Text categories read without ``categories=`` (or a categorical
        column) are sorted alphabetically (``"mild" < "none" < "severe"``);
        an ordinal model or an ordinal agreement coefficient would take that
        sort for the scale.  Nothing is said for numbers (and text that reads
        as numbers, sorted by value), for a declared scale, or for K = 2.

        Parameters
        ----------
        use : str
            What reads the order, for the message (e.g. ``"the ordinal model"``).

        Warns
        -----
        ScaleOrderWarning
        """
        text = [v for v in self.categories if isinstance(v, str) and _value_kind(v) == "text"]
        if not self._scale_sorted or self.n_categories < 3 or not text:
            return
        labels = ", ".join(repr(v) for v in self.categories)
        warnings.warn(
            f"{use} reads the categories as an ordered scale, in the order {labels}; that is their alphabetical "
            "sort, as no scale was declared. If it is not the scale's order, declare it: "
            f"RatingData.from_{self.source_format}(df, categories=[...]) in scale order (command line: --categories "
            "a,b,c), or use an ordered pandas Categorical column",
            ScaleOrderWarning,
            stacklevel=user_stacklevel(),
        )

    @property
    def long_columns(self) -> tuple[str, str, str]:
        """Names of the (item, rater, rating) columns of :meth:`to_long`.

        The names given to :meth:`from_long`, else ``("item", "rater", "rating")``.
        """
        cols = self._columns
        return (cols.get("item", "item"), cols.get("rater", "rater"), cols.get("rating", "rating"))

    def to_long(self) -> pd.DataFrame:
        """Long table (item, rater, rating) with the user's labels.

        Grouped data is expanded: pattern ``p`` with tally ``n`` becomes
        ``n`` items, labelled ``1 .. n_items`` in pattern order.  The rating
        column is categorical with the full declared scale.
        """
        names = self.long_columns
        if self.is_grouped:
            order = np.argsort(self.unit, kind="stable")
            unit, rater, rating = self.unit[order], self.rater[order], self.rating[order]
            first_item = np.concatenate([[0], np.cumsum(self.weight)[:-1]])
            # each rating of unit u is repeated weight[u] times, once per copy
            reps = self.weight[unit]
            copy = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
            item_codes = np.repeat(first_item[unit], reps) + copy
            rater_rep = np.repeat(rater, reps)
            rating_rep = np.repeat(rating, reps)
            sort = np.lexsort((rater_rep, item_codes))
            return pd.DataFrame(
                {
                    names[0]: item_codes[sort] + 1,
                    names[1]: self.rater_labels.to_numpy()[rater_rep[sort]],
                    names[2]: self._rating_values(rating_rep[sort]),
                }
            )
        return pd.DataFrame(
            {
                names[0]: self.unit_labels.to_numpy()[self.unit],
                names[1]: self.rater_labels.to_numpy()[self.rater],
                names[2]: self._rating_values(self.rating),
            }
        )

    def _refuse_repeats(self, target: str) -> None:
        if self.has_repeats:
            key = self.unit * self.n_raters + self.rater
            _, first, n = np.unique(key, return_index=True, return_counts=True)
            i = first[n > 1][0]
            raise RatingDataError(
                f"{target} format cannot hold repeated ratings: item {_r(self.unit_labels[self.unit[i]])} was rated "
                f"{n[n > 1][0]} times by rater {_r(self.rater_labels[self.rater[i]])} "
                f"({int((n > 1).sum())} such item-rater pairs); keep the data in long format"
            )

    def _code_dtype(self) -> np.dtype:
        """Smallest signed integer type holding the codes -1 .. K-1 (categorical codes)."""
        return np.min_scalar_type(-max(self.n_categories, 1))

    def _code_table(self) -> np.ndarray:
        """Dense (I, J) table of rating codes, -1 where not rated."""
        table = np.full((self.n_units, self.n_raters), -1, dtype=self._code_dtype())
        table[self.unit, self.rater] = self.rating
        return table

    def _table_frame(self, table: np.ndarray) -> pd.DataFrame:
        table = np.asfortranarray(table)  # contiguous columns
        return pd.DataFrame({lab: self._rating_values(table[:, j]) for j, lab in enumerate(self.rater_labels)})

    def to_wide(self) -> pd.DataFrame:
        """Wide table: one row per item (index = item labels), one column per rater.

        Cells are categorical ratings, missing where not rated.  Raises
        :class:`RatingDataError` when some rater rated an item twice.
        Grouped data is expanded to one row per item.
        """
        self._refuse_repeats("wide")
        table = self._code_table()
        if self.is_grouped:
            table = np.repeat(table, self.weight, axis=0)
            index = pd.RangeIndex(1, table.shape[0] + 1, name="item")
        else:
            index = self.unit_labels
        out = self._table_frame(table)
        out.index = index
        out.columns = self.rater_labels
        return out

    def to_grouped(self, tally: str | None = None) -> pd.DataFrame:
        """Grouped table: one row per distinct pattern, rater columns plus a tally.

        Raises :class:`RatingDataError` when some rater rated an item twice.
        Rows are in order of first appearance; zero-tally patterns are kept.
        """
        self._refuse_repeats("grouped")
        tally = tally or self._columns.get("tally", "n")
        if tally in list(self.rater_labels):
            raise RatingDataError(f"tally column name {_r(tally)} clashes with a rater label; pass tally=...")
        pattern, first = self._pattern_ids()
        P = first.size
        n = np.bincount(pattern, weights=self.weight, minlength=P).astype(np.int64)
        keys = np.full((P, self.n_raters), -1, dtype=self._code_dtype())
        is_first = np.zeros(self.n_units, dtype=bool)
        is_first[first] = True
        rows = is_first[self.unit]
        keys[pattern[self.unit[rows]], self.rater[rows]] = self.rating[rows]
        out = self._table_frame(keys)
        out.columns = self.rater_labels
        out[tally] = n
        return out

    def _pattern_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """Rating pattern of each unit.

        Returns
        -------
        pattern : int array, shape (I,)
            Pattern code of each unit, numbered in order of first appearance.
        first : int array, shape (P,)
            The first unit showing each pattern.

        Units are hashed from their sparse ratings (a sum of random 64-bit
        words, one per rater and rating) and the grouping is then checked
        exactly against the count matrix; should two patterns ever collide
        the dense table is compared row by row instead.  Assumes no rater
        rated a unit twice.
        """
        K = self.n_categories
        words = _pattern_words(self.n_raters * K)
        order = np.argsort(self.unit, kind="stable")
        unit = self.unit[order]
        h = np.zeros(self.n_units, dtype=np.uint64)
        if unit.size:
            starts = np.flatnonzero(np.r_[True, unit[1:] != unit[:-1]])
            h[unit[starts]] = np.add.reduceat(words[(self.rater * K + self.rating)[order]], starts)
        pattern, uniques = pd.factorize(h)
        pattern = pattern.astype(np.int64)
        first = np.full(len(uniques), self.n_units, dtype=np.int64)
        np.minimum.at(first, pattern, np.arange(self.n_units, dtype=np.int64))
        rep = self.counts[first[pattern]]
        if (self.counts != rep).nnz:  # a hash collision: fall back to the exact dense comparison
            _, first, pattern = np.unique(self._code_table(), axis=0, return_index=True, return_inverse=True)
            relabel = np.empty(first.size, dtype=np.int64)
            order = np.argsort(first, kind="stable")
            relabel[order] = np.arange(first.size)
            return relabel[pattern.ravel()], first[order].astype(np.int64)
        return pattern, first

    def to_frame(self, data_format: DataFormat = "long") -> pd.DataFrame:
        """Table in the given format (see :meth:`to_long`, :meth:`to_wide`, :meth:`to_grouped`)."""
        _check_format(data_format)
        return {"long": self.to_long, "wide": self.to_wide, "grouped": self.to_grouped}[data_format]()

    def equals(self, other: RatingData) -> bool:
        """Same multiset of ratings per unit, labels, categories and weights."""
        if not isinstance(other, RatingData):
            return False
        if not (
            self.unit_labels.equals(other.unit_labels)
            and self.rater_labels.equals(other.rater_labels)
            and self.categories.equals(other.categories)
            and np.array_equal(self.weight, other.weight)
        ):
            return False
        return (self.counts != other.counts).nnz == 0


def _pattern_words(n: int) -> np.ndarray:
    """``n`` fixed pseudo-random 64-bit words (uint64), one per (rater, rating), for pattern hashing."""
    return np.random.default_rng(20240607).integers(1, np.iinfo(np.int64).max, size=n, dtype=np.int64).astype(np.uint64)


def _respelled_only(raw_block: pd.DataFrame, rows: pd.Index, pattern: np.ndarray) -> bool:
    """True when every group of rows sharing a pattern was made of different rows before respelling.

    Then the rows became one pattern by ``normalize_labels`` and are merged;
    rows repeated in the table as given are the user's to fix (an error).
    """
    size = np.bincount(pattern)
    raw = raw_block.loc[rows].astype(object).where(raw_block.loc[rows].notna(), None)
    for g in np.flatnonzero(size > 1):
        members = raw.iloc[np.flatnonzero(pattern == g)]
        if len({tuple(map(repr, row)) for row in members.itertuples(index=False)}) < len(members):
            return False
    return True


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _dedupe_spellings(labels: Sequence[Any], case: bool) -> list[Any]:
    """A declared scale with only the first spelling of each label kept (order kept)."""
    seen: set[Any] = set()
    out = []
    for v in labels:
        key = ("s", _spelling_key(v, case)) if isinstance(v, str) else ("v", v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _normalized_long(df: pd.DataFrame, item: Any, rater: Any, rating: Any, categories: Any) -> tuple[pd.DataFrame, Any]:
    """``normalize_labels=True`` for a long table: the three columns respelled in a shallow copy."""
    col = df[rating]
    if categories is None and isinstance(col.dtype, pd.CategoricalDtype):
        categories = _dedupe_spellings(list(col.dtype.categories), case=True)
    declared = None if categories is None else pd.Index(list(categories))
    out = df.copy(deep=False)
    out[rating] = _normalize_values(col, case=True, declared=declared)
    for name in (item, rater):
        if df[name].dtype == object or pd.api.types.is_string_dtype(df[name].dtype):
            out[name] = _normalize_values(df[name], case=False)
    return out, categories


def _check_frame(df: Any, problems: list[str], used: Sequence[Any] | None = None) -> None:
    """A non-empty DataFrame without duplicated column names (among ``used`` if given)."""
    if not isinstance(df, pd.DataFrame):
        problems.append(f"expected a pandas DataFrame, got {type(df).__name__}")
        return
    if df.shape[0] == 0:
        problems.append("the table is empty (no rows)")
    dup = df.columns[df.columns.duplicated()].unique()
    if used is not None:
        dup = dup[dup.isin(list(used))]
    if len(dup):
        problems.append(f"duplicated column names: {_show(dup)}")


def _check_roles(cols: dict[str, Any], problems: list[str]) -> None:
    """The same column may not play two roles (item, rater, rating)."""
    seen: dict[Any, str] = {}
    for role, name in cols.items():
        if name in seen:
            problems.append(f"column {_r(name)} is given both as the {seen[name]} column and as the {role} column")
        else:
            seen[name] = role


def _check_ambiguous(df: pd.DataFrame, used: list[Any], problems: list[str]) -> None:
    """Columns whose names differ but print the same (``1`` and ``"1"``) are ambiguous."""
    keys: dict[str, list[Any]] = {}
    for c in df.columns:
        keys.setdefault(str(c), []).append(c)
    clashes = [g for g in keys.values() if len(g) > 1 and any(c in used for c in g)]
    if clashes:
        shown = "; ".join(" and ".join(_r(c) for c in g) for g in clashes[:5])
        problems.append(f"ambiguous column names that print the same: {shown}; rename them")


def _missing_column(name: Any, role: str, df: pd.DataFrame) -> str:
    """'column not found' message with close matches (case, spaces, str vs int)."""
    msg = f"{role} column {_r(name)} not found; columns are {_show(df.columns, 20)}"
    want = str(name).strip().lower()
    close = [c for c in df.columns if str(c).strip().lower() == want]
    if not close:
        lookup = {str(c).strip().lower(): c for c in df.columns}
        close = [lookup[m] for m in difflib.get_close_matches(want, list(lookup), n=3, cutoff=0.75)]
    if close:
        msg += f" (did you mean {' or '.join(_r(c) for c in close)}?)"
    elif role == "tally":
        counts = _tally_like_columns(df)
        if len(counts) == 1:
            c = counts[0]
            msg += (
                f"; column {_r(c)} looks like the tally (its values lie far outside the other columns' ratings): "
                f"pass tally={_r(c)} (command line: --tally {c})"
            )
    return msg


#: a column taken for a rater needs at least this many rows, all different, to be read as the item labels
_ID_MIN_ROWS = 10


def _id_like_columns(df: pd.DataFrame, raters: list[Any], kinds: dict[Any, tuple[set, Any]]) -> list[Any]:
    """Columns of a wide table taken for raters that hold the item labels instead.

    Such a column has a different value on every row (at least
    :data:`_ID_MIN_ROWS` of them), and none of its values is one the other
    columns give, which hold a small scale (2 to 20 values): a rater with as
    many categories as items is an ID column whose name the reader did not
    recognise (``case_id``, ``patient``).
    """
    found = []
    for c in raters:
        n = int(df[c].notna().sum())
        own = kinds[c][1]
        if n < _ID_MIN_ROWS or len(own) != n:
            continue
        others = {_canonical(v) for o in raters if o != c for v in kinds[o][1]}
        if not 2 <= len(others) <= 20:
            continue
        if not any(_canonical(v) in others for v in own):
            found.append(c)
    return found


def _tally_like_columns(df: pd.DataFrame) -> list[Any]:
    """Columns of non-negative integers mostly outside the values of every other column, reaching well beyond them.

    The other columns must hold integers on a small scale (2 to 20 values): the ratings of grouped data.
    """
    values = {}
    for c in df.columns:
        num = pd.to_numeric(df[c], errors="coerce")
        if pd.api.types.is_bool_dtype(df[c].dtype) or num.isna().any():
            return []  # text, booleans or gaps: no safe guess
        arr = num.to_numpy(dtype=float)
        if (np.mod(arr, 1) != 0).any() or (arr < 0).any():
            return []
        values[c] = set(arr.tolist())
    return [c for c, own in values.items() if _tally_like(own, set().union(*(v for o, v in values.items() if o != c)))]


def _tally_like(own: set[float], others: set[float]) -> bool:
    """Whether a column of non-negative integers ``own`` reads as a tally beside rating columns holding ``others``.

    A tally: mostly values the rating columns do not hold, several of them, reaching well beyond a small
    rating scale (2 to 20 values).  Shared by the wide reader's check and the grouped reader's hint.
    """
    if not own or not 2 <= len(others) <= 20:
        return False
    outside = own - others
    return len(outside) >= max(3, len(own) / 2) and max(own) >= max(10.0, 2 * max(others))


def _check_tally(df: pd.DataFrame, tally: Any, problems: list[str]) -> np.ndarray:
    """Tallies as int64 (I,); reports non-integer, negative or missing ones."""
    t = df[tally]
    if pd.api.types.is_bool_dtype(t.dtype):
        problems.append(f"tally column {_r(tally)} must hold non-negative integers; it holds booleans")
        return np.zeros(len(df), dtype=np.int64)
    num = pd.to_numeric(t, errors="coerce").astype(float)
    arr = num.to_numpy()
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (arr < 0) | (np.mod(arr, 1) != 0)
    if bad.any():
        rows = np.flatnonzero(bad)
        problems.append(
            f"tally column {_r(tally)} must hold non-negative integers; rows {_show(df.index[rows])} "
            f"hold {_show(t.iloc[rows].tolist())}"
        )
    return np.where(bad, 0, arr).astype(np.int64)


def _suggest_format(df: pd.DataFrame, asked: str) -> str | None:
    """A hint at the likely format when the asked one does not fit."""
    cols = [str(c).strip().lower() for c in df.columns]
    if asked != "long" and {"item", "rater", "rating"} <= set(cols):
        return (
            "hint: the columns item, rater, rating suggest long data (RatingData.from_long, or data_format='long' in "
            "pyrater.fit; command line: --format long)"
        )
    if asked != "grouped" and cols and cols[-1] in ("n", "count", "tally", "freq", "frequency", "weight"):
        return (
            f"hint: the last column {_r(df.columns[-1])} looks like a tally: is this grouped data "
            f"(RatingData.from_grouped, or data_format='grouped' in pyrater.fit, with tally={_r(df.columns[-1])}; "
            f"command line: --format grouped --tally "
            f"{df.columns[-1]})?"
        )
    if asked == "grouped" and cols and cols[-1] in ("count", "tally", "freq", "frequency", "weight"):
        return (
            f"hint: the last column {_r(df.columns[-1])} looks like the tally: pass tally={_r(df.columns[-1])} "
            f"(command line: --tally {df.columns[-1]})"
        )
    if asked == "long" and not ({"item", "rater", "rating"} & set(cols)):
        return (
            "hint: name the columns with item=..., rater=..., rating=... (command line: --item, --rater, --rating); "
            "a table with one column per rater is wide data (RatingData.from_wide, or data_format='wide' in "
            "pyrater.fit; command line: --format wide), or grouped data if it has a tally column "
            "(RatingData.from_grouped, or data_format='grouped'; command line: --format grouped)"
        )
    return None


def _looks_long(df: pd.DataFrame) -> bool:
    """A table whose columns are named item, rater and rating (any case): long data."""
    return {"item", "rater", "rating"} <= {str(c).strip().lower() for c in df.columns}


def _check_format(data_format: str) -> None:
    if data_format not in _FORMATS:
        raise ValueError(f"data_format must be one of {_FORMATS}, got {_r(data_format)}")


def _builders() -> dict[str, Callable[..., RatingData]]:
    return {"long": RatingData.from_long, "wide": RatingData.from_wide, "grouped": RatingData.from_grouped}


def reader_options(data_format: DataFormat) -> tuple[str, ...]:
    """The keyword options of the DataFrame reader of ``data_format`` (column names, ``categories``, ...)."""
    _check_format(data_format)
    return tuple(p for p in inspect.signature(_builders()[data_format]).parameters if p != "df")


def check_reader_options(
    data: Any,
    data_format: DataFormat,
    options: dict[str, Any],
    *,
    caller: str = "this function",
    own: Sequence[str] = (),
    elsewhere: dict[str, Sequence[str]] | None = None,
) -> None:
    """Refuse, before any work, options that would not reach a DataFrame reader.

    A function that passes its extra keyword arguments on to the reader
    (``fit(df, ..., item="id")``) calls this first, so that a misspelt or
    misplaced argument is named as such, not reported by the reader or
    silently taken.

    Parameters
    ----------
    data : RatingData or DataFrame
    data_format : {"long", "wide", "grouped"}
    options : dict
        The extra keyword arguments.
    caller : str
        The function's name, for the message.
    own : sequence of str
        The function's own arguments, offered as close matches of a misspelt name.
    elsewhere : dict, optional
        ``{function: its arguments}``: where an argument the caller does not
        take belongs (e.g. ``{"pyrater.em": ("max_iter", "tol", ...)}``).

    Raises
    ------
    TypeError
        For a name that neither ``caller`` nor the reader takes (with close
        matches and where it belongs), or reader options given with data
        that is already a :class:`RatingData`.
    """
    if not options:
        return
    _check_format(data_format)
    readers = reader_options(data_format)
    unknown = [name for name in options if name not in readers]
    if unknown:
        notes = []
        for name in unknown:
            homes = [f for f, names in (elsewhere or {}).items() if name in names]
            close = difflib.get_close_matches(name, [*own, *readers], n=1, cutoff=0.6)
            note = repr(name)
            if homes:
                note += f" (an argument of {homes[0]}, which {caller} does not pass on; call {homes[0]} for it)"
            elif close:
                note += f" (did you mean {close[0]!r}?)"
            notes.append(note)
        message = f"{caller} got unknown argument(s) {', '.join(notes)}"
        if not isinstance(data, RatingData):
            message += (
                f"; besides its own arguments it takes only the {data_format!r} DataFrame reader's options: "
                + ", ".join(readers)
            )
        raise TypeError(message)
    if isinstance(data, RatingData):
        raise TypeError(
            f"options {sorted(options)} are for reading a DataFrame, but data is already a RatingData; "
            f"set them when you build it (RatingData.from_{data_format}(df, ...))"
        )


def as_rating_data(
    data: RatingData | pd.DataFrame,
    data_format: DataFormat = "long",
    **kwargs: Any,
) -> RatingData:
    """Return ``data`` as :class:`RatingData`.

    Parameters
    ----------
    data : RatingData or DataFrame
    data_format : {"long", "wide", "grouped"}
        Format of a DataFrame (ignored for RatingData).
    **kwargs
        Passed to :meth:`RatingData.from_long` / ``from_wide`` / ``from_grouped``
        (column names, ``categories``); a name the reader does not take, or
        any option with a RatingData, is a TypeError (:func:`check_reader_options`).
    """
    if isinstance(data, RatingData) and not kwargs:
        return data
    _check_format(data_format)
    check_reader_options(data, data_format, kwargs)
    return _builders()[data_format](data, **kwargs)
