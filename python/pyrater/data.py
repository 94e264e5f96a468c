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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Literal, Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["RatingData", "RatingDataError", "as_rating_data"]

DataFormat = Literal["long", "wide", "grouped"]
_FORMATS = ("long", "wide", "grouped")


class RatingDataError(ValueError):
    """Invalid rating data.  The message lists every problem found."""


def _raise(problems: list[str], hint: str | None = None) -> None:
    if problems:
        msg = "invalid rating data:\n  - " + "\n  - ".join(problems)
        if hint:
            msg += f"\n{hint}"
        raise RatingDataError(msg)


def _show(values: Iterable[Any], limit: int = 8) -> str:
    values = list(values)
    text = ", ".join(repr(v) for v in values[:limit])
    if len(values) > limit:
        text += f", ... ({len(values) - limit} more)"
    return text


def _tidy_labels(values: pd.Series | np.ndarray) -> np.ndarray:
    """Integral floats (1.0, 2.0, as pandas makes them around NaN) become ints."""
    arr = pd.Series(values).dropna().to_numpy()
    if arr.dtype.kind == "f" and arr.size and np.all(np.mod(arr, 1) == 0):
        return arr.astype(np.int64)
    if arr.dtype == object:
        floats = [v for v in arr if isinstance(v, (float, np.floating))]
        if floats and all(float(v).is_integer() for v in floats):
            return np.array([int(v) if isinstance(v, (float, np.floating)) else v for v in arr], dtype=object)
    return arr


def _factorize(values: np.ndarray) -> tuple[np.ndarray, pd.Index]:
    """Codes and labels, labels sorted when they can be, else in order of appearance."""
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(values, sort=False)
    return codes.astype(np.int64), pd.Index(uniques)


def _category_index(observed: np.ndarray, categories: Sequence[Any] | None, problems: list[str]) -> pd.Index:
    if categories is not None:
        cats = pd.Index(list(categories))
        if cats.has_duplicates:
            problems.append(f"declared categories repeat: {_show(cats[cats.duplicated()].unique())}")
        if cats.hasnans:
            problems.append("declared categories contain a missing value")
    else:
        _, cats = _factorize(_tidy_labels(observed))
    if len(cats) < 2:
        problems.append(
            f"at least 2 categories are needed, found {len(cats)} ({_show(cats)}); "
            "declare the scale with categories=[...] if some levels were never used"
        )
    return cats


def _encode(values: np.ndarray, cats: pd.Index) -> np.ndarray:
    """Codes of ``values`` in ``cats``; -1 where not a category."""
    codes = cats.get_indexer(pd.Index(values))
    if (codes < 0).any() and cats.dtype.kind in "iu":
        # e.g. strings "1", "2" in a CSV column when categories are ints
        try:
            alt = cats.get_indexer(pd.Index(pd.to_numeric(pd.Series(values), errors="raise")))
            codes = np.where(codes < 0, alt, codes)
        except (ValueError, TypeError):
            pass
    return codes.astype(np.int64)


@dataclass(frozen=True, eq=False)
class RatingData:
    """Categorical ratings of items by raters, in any design.

    Build with :meth:`from_long`, :meth:`from_wide`, :meth:`from_grouped`
    or :func:`as_rating_data`; do not call the constructor directly.

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

    def __post_init__(self) -> None:
        for name in ("unit", "rater", "rating", "weight"):
            arr = np.asarray(getattr(self, name), dtype=np.int64)
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

    def __repr__(self) -> str:
        kind = "patterns" if self.is_grouped else "items"
        return (
            f"RatingData({self.n_units} {kind}, {self.n_items} items, {self.n_raters} raters, "
            f"{self.n_categories} categories {list(self.categories)}, {self.n_ratings} ratings, "
            f"from {self.source_format} data)"
        )

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
        key = self.unit * self.n_raters + self.rater
        return bool(np.unique(key).size < key.size)

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
        """Unit codes of user item (or pattern) labels; raises naming unknown ones."""
        labels = list(labels)
        codes = self.unit_labels.get_indexer(pd.Index(labels)) if labels else np.array([], dtype=np.int64)
        if (codes < 0).any():
            bad = [lab for lab, c in zip(labels, codes) if c < 0]
            raise RatingDataError(f"{what} {_show(bad)} not found in the data")
        return np.asarray(codes, dtype=np.int64)

    def known_codes(self, known: dict | pd.Series | None) -> np.ndarray | None:
        """Turn ``{item label: true category label}`` into a (I,) code array (-1 = unknown)."""
        if known is None:
            return None
        known = pd.Series(known) if not isinstance(known, pd.Series) else known
        out = np.full(self.n_units, -1, dtype=np.int64)
        if len(known) == 0:
            return out
        if known.index.has_duplicates:
            raise RatingDataError(f"known classes given twice for items {_show(known.index[known.index.duplicated()])}")
        units = self.encode_units(known.index, what="known-class item")
        out[units] = self.encode_categories(known.to_numpy(), what="known class")
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
    ) -> "RatingData":
        """Build from a long table: one row per rating.

        Parameters
        ----------
        df : DataFrame
            One row per rating; repeated (item, rater) rows allowed.
        item, rater, rating : str
            Column names.
        categories : sequence, optional
            The full, ordered category scale.  Default: the sorted observed
            ratings.  Declare it when some level never occurs.
        """
        problems: list[str] = []
        _check_frame(df, problems)
        _raise(problems)
        cols = {"item": item, "rater": rater, "rating": rating}
        missing = [f"{role} column {name!r}" for role, name in cols.items() if name not in df.columns]
        if missing:
            hint = _suggest_format(df, "long")
            _raise([f"{m} not found; columns are {_show(df.columns, 20)}" for m in missing], hint)
        for role, name in cols.items():
            bad = np.flatnonzero(df[name].isna().to_numpy())
            if bad.size:
                problems.append(f"column {name!r} ({role}) is missing at rows {_show(df.index[bad])}")
        ratings = df[rating].to_numpy()
        present = ~df[rating].isna().to_numpy()
        cats = _category_index(ratings[present], categories, problems)
        codes = _encode(ratings, cats)
        bad = np.flatnonzero((codes < 0) & present)
        if bad.size and len(cats):
            problems.append(
                f"column {rating!r} has values {_show(pd.unique(ratings[bad]))} (rows {_show(df.index[bad])}) "
                f"not among the categories {_show(cats)}"
            )
        _raise(problems)
        unit, unit_labels = _factorize(df[item].to_numpy())
        rater_codes, rater_labels = _factorize(df[rater].to_numpy())
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
        )

    @classmethod
    def from_wide(
        cls,
        df: pd.DataFrame,
        raters: Sequence[Any] | None = None,
        item: str | None = None,
        categories: Sequence[Any] | None = None,
    ) -> "RatingData":
        """Build from a wide table: one row per item, one column per rater.

        Parameters
        ----------
        df : DataFrame
            Missing values mean "not rated".  Items with no rating at all
            are kept (their class probabilities are the prevalence).
        raters : sequence of column names, optional
            Default: every column except ``item``.
        item : str, optional
            Column holding item labels.  Default: the DataFrame's index.
        categories : sequence, optional
            The full, ordered category scale.
        """
        return cls._from_table(df, raters=raters, label_col=item, tally=None, categories=categories)

    @classmethod
    def from_grouped(
        cls,
        df: pd.DataFrame,
        tally: str = "n",
        raters: Sequence[Any] | None = None,
        categories: Sequence[Any] | None = None,
    ) -> "RatingData":
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
            The full, ordered category scale.
        """
        return cls._from_table(df, raters=raters, label_col=None, tally=tally, categories=categories)

    @classmethod
    def _from_table(cls, df, raters, label_col, tally, categories) -> "RatingData":
        fmt: DataFormat = "grouped" if tally is not None else "wide"
        problems: list[str] = []
        _check_frame(df, problems)
        _raise(problems)
        special = [c for c in (label_col, tally) if c is not None]
        for c in special:
            if c not in df.columns:
                _raise([f"{'tally' if c == tally else 'item'} column {c!r} not found; columns are {_show(df.columns, 20)}"],
                       _suggest_format(df, fmt))
        if raters is None:
            raters = [c for c in df.columns if c not in special]
        else:
            raters = list(raters)
            absent = [r for r in raters if r not in df.columns]
            if absent:
                _raise([f"rater columns {_show(absent)} not found; columns are {_show(df.columns, 20)}"])
            if len(set(raters)) < len(raters):
                _raise([f"rater columns listed twice: {_show(pd.Index(raters)[pd.Index(raters).duplicated()])}"])
        if not raters:
            _raise(["no rater columns"], _suggest_format(df, fmt))
        block = df[raters]
        values = block.to_numpy(dtype=object)
        present = ~block.isna().to_numpy()
        observed = values[present]
        if categories is None and observed.size:
            dtypes = [block[c].dtype for c in raters]
            if all(isinstance(d, pd.CategoricalDtype) for d in dtypes) and all(
                d.categories.equals(dtypes[0].categories) for d in dtypes
            ):
                categories = list(dtypes[0].categories)
        cats = _category_index(observed, categories, problems)
        codes = np.full(values.shape, -1, dtype=np.int64)
        if observed.size:
            codes[present] = _encode(observed, cats)
        bad = present & (codes < 0)
        if bad.any() and len(cats):
            rows, cols = np.nonzero(bad)
            where = [f"row {df.index[r]!r}, column {raters[c]!r}: {values[r, c]!r}" for r, c in zip(rows, cols)]
            problems.append(f"ratings not among the categories {_show(cats)}: {_show(where, 5)}")
        if tally is not None:
            t = df[tally]
            num = pd.to_numeric(t, errors="coerce")
            bad_t = np.flatnonzero(
                (num.isna() | (num < 0) | (np.mod(num.fillna(0), 1) != 0)).to_numpy()
            )
            if bad_t.size:
                problems.append(
                    f"tally column {tally!r} must hold non-negative integers; rows {_show(df.index[bad_t])} "
                    f"hold {_show(t.iloc[bad_t].tolist())}"
                )
            weight = num.fillna(0).to_numpy().astype(np.int64)
        else:
            weight = np.ones(len(df), dtype=np.int64)
        if not problems and tally is not None:
            dup = pd.DataFrame(codes).duplicated(keep=False).to_numpy()
            if dup.any():
                problems.append(
                    f"pattern rows repeat (rows {_show(df.index[dup])}); each pattern must appear once "
                    "with its total tally (sum the tallies, e.g. df.groupby(raters).sum())"
                )
        if label_col is not None:
            labels = df[label_col]
            if labels.isna().any():
                problems.append(f"item column {label_col!r} has missing values at rows {_show(df.index[labels.isna().to_numpy()])}")
            unit_labels = pd.Index(labels.to_numpy(), name=label_col)
        else:
            unit_labels = df.index.copy()
            if unit_labels.name is None:
                unit_labels = unit_labels.rename("pattern" if tally is not None else "item")
        if unit_labels.has_duplicates:
            problems.append(f"item labels repeat in a wide table: {_show(unit_labels[unit_labels.duplicated()].unique())}; "
                            "use long format for repeated ratings")
        _raise(problems)
        unit, rater_col = np.nonzero(codes >= 0)
        return cls(
            unit=unit,
            rater=rater_col,
            rating=codes[unit, rater_col],
            unit_labels=unit_labels,
            rater_labels=pd.Index(raters, name="rater"),
            categories=cats.rename("rating"),
            weight=weight,
            source_format=fmt,
            _columns={"tally": tally} if tally is not None else {},
        )

    # ------------------------------------------------------------ exporters
    def _rating_values(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, categories=self.categories)

    def to_long(self) -> pd.DataFrame:
        """Long table (item, rater, rating) with the user's labels.

        Grouped data is expanded: pattern ``p`` with tally ``n`` becomes
        ``n`` items, labelled ``1 .. n_items`` in pattern order.  The rating
        column is categorical with the full declared scale.
        """
        cols = self._columns
        names = (cols.get("item", "item"), cols.get("rater", "rater"), cols.get("rating", "rating"))
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
                f"{target} format cannot hold repeated ratings: item {self.unit_labels[self.unit[i]]!r} was rated "
                f"{n[n > 1][0]} times by rater {self.rater_labels[self.rater[i]]!r} "
                f"({int((n > 1).sum())} such item-rater pairs); keep the data in long format"
            )

    def _code_table(self) -> np.ndarray:
        table = np.full((self.n_units, self.n_raters), -1, dtype=np.int64)
        table[self.unit, self.rater] = self.rating
        return table

    def _table_frame(self, table: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(
            {lab: self._rating_values(table[:, j]) for j, lab in enumerate(self.rater_labels)}
        )

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
            raise RatingDataError(f"tally column name {tally!r} clashes with a rater label; pass tally=...")
        table = self._code_table()
        keys, first, inverse = np.unique(table, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
        n = np.bincount(inverse, weights=self.weight, minlength=len(keys)).astype(np.int64)
        order = np.argsort(first, kind="stable")
        out = self._table_frame(keys[order])
        out.columns = self.rater_labels
        out[tally] = n[order]
        return out

    def to_frame(self, data_format: DataFormat = "long") -> pd.DataFrame:
        """Table in the given format (see :meth:`to_long`, :meth:`to_wide`, :meth:`to_grouped`)."""
        _check_format(data_format)
        return {"long": self.to_long, "wide": self.to_wide, "grouped": self.to_grouped}[data_format]()

    def equals(self, other: "RatingData") -> bool:
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


def _check_frame(df: Any, problems: list[str]) -> None:
    if not isinstance(df, pd.DataFrame):
        problems.append(f"expected a pandas DataFrame, got {type(df).__name__}")
        return
    if df.shape[0] == 0:
        problems.append("the table is empty (no rows)")
    if df.columns.has_duplicates:
        problems.append(f"duplicated column names: {_show(df.columns[df.columns.duplicated()].unique())}")


def _suggest_format(df: pd.DataFrame, asked: str) -> str | None:
    cols = [str(c).lower() for c in df.columns]
    if asked != "long" and {"item", "rater", "rating"} <= set(cols):
        return "hint: the columns item, rater, rating suggest long data (data_format='long')"
    if asked != "grouped" and cols and cols[-1] in ("n", "count", "tally", "freq", "frequency"):
        return f"hint: the last column {df.columns[-1]!r} looks like a tally: is this grouped data (data_format='grouped')?"
    if asked == "long":
        return "hint: one column per rater suggests wide data (data_format='wide') or grouped data with a tally column"
    return None


def _check_format(data_format: str) -> None:
    if data_format not in _FORMATS:
        raise ValueError(f"data_format must be one of {_FORMATS}, got {data_format!r}")


def as_rating_data(
    data: "RatingData | pd.DataFrame",
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
        (column names, ``categories``).
    """
    if isinstance(data, RatingData):
        if kwargs:
            raise TypeError(f"options {sorted(kwargs)} apply to DataFrames, not to RatingData")
        return data
    _check_format(data_format)
    builder = {"long": RatingData.from_long, "wide": RatingData.from_wide, "grouped": RatingData.from_grouped}[data_format]
    return builder(data, **kwargs)
