"""Tests of pyrater.data: constructors, conversions, validation, real data."""

from __future__ import annotations

import io
import time
import warnings
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyrater
from conftest import shared_file
from pyrater.data import RatingData, RatingDataError, UnratedItemsWarning, as_rating_data


def _tuples(df: pd.DataFrame, cols=("item", "rater", "rating")) -> Counter:
    """Multiset of rows as plain Python values (categoricals unwrapped)."""
    return Counter(zip(*(df[c].astype(object).tolist() for c in cols)))


def _rows(df: pd.DataFrame) -> Counter:
    """Multiset of table rows; missing cells become None, 1.0 compares equal to 1."""
    vals = df.astype(object).to_numpy()
    return Counter(tuple(None if pd.isna(v) else v for v in row) for row in vals)


# ---------------------------------------------------------------- from_codes
def test_from_codes_matches_from_long():
    item = np.array([0, 0, 1, 1, 1, 2])
    rater = np.array([0, 1, 0, 1, 1, 2])
    rating = np.array([0, 2, 1, 1, 0, 2])
    d = RatingData.from_codes(item, rater, rating, n_categories=3)
    assert (d.n_units, d.n_raters, d.n_categories, d.n_ratings) == (3, 3, 3, 6)
    assert list(d.unit_labels) == [1, 2, 3] and list(d.rater_labels) == [1, 2, 3]
    assert list(d.categories) == [1, 2, 3]
    assert d.source_format == "long" and not d.is_grouped
    assert d.has_repeats
    df = pd.DataFrame({"item": item + 1, "rater": rater + 1, "rating": rating + 1})
    assert d.equals(RatingData.from_long(df))
    assert d.to_long().astype({"rating": int}).equals(df)


def test_from_codes_sizes_labels_and_weight():
    d = RatingData.from_codes(
        [0, 1], [0, 0], [1, 0], n_categories=4, n_items=5, n_raters=3, categories=["a", "b", "c", "d"]
    )
    assert (d.n_units, d.n_raters, d.n_categories) == (5, 3, 4)
    assert list(d.categories) == ["a", "b", "c", "d"]
    assert d.counts.shape == (5, 12)
    assert d.rating_counts().to_dict() == {"a": 1, "b": 1, "c": 0, "d": 0}
    g = RatingData.from_codes([0, 0, 1], [0, 1, 0], [0, 0, 1], n_categories=2, weight=[3, 2])
    assert g.is_grouped and g.n_units == 2 and g.n_items == 5
    assert g.unit_labels.name == "pattern"
    wide = g.to_wide()
    assert wide.shape == (5, 2) and int(wide[2].isna().sum()) == 2 and int(wide[1].isna().sum()) == 0


def test_from_codes_does_not_touch_caller_arrays():
    item = np.array([0, 1, 2], dtype=np.int64)
    rater = np.array([0, 0, 1], dtype=np.int64)
    rating = np.array([0, 1, 1], dtype=np.int64)
    d = RatingData.from_codes(item, rater, rating, n_categories=2)
    item[0] = 2  # copied by default: the data is unaffected
    assert d.unit[0] == 0
    shared = RatingData.from_codes(item, rater, rating, n_categories=2, copy=False)
    assert item.flags.writeable  # the caller's flags are left alone
    assert not shared.unit.flags.writeable
    with pytest.raises(ValueError):
        shared.rating[0] = 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(item=[0, 1], rater=[0], rating=[0, 1], n_categories=2), "same length"),
        (dict(item=[], rater=[], rating=[], n_categories=2), "no ratings"),
        (
            dict(item=[0, -1], rater=[0, 0], rating=[0, 1], n_categories=2),
            r"item codes must be >= 0 .*positions 1 hold -1",
        ),
        (
            dict(item=[0, 1], rater=[0, 0], rating=[0, 2], n_categories=2),
            r"rating codes must be < n_categories = 2 .*positions 1 hold 2",
        ),
        (dict(item=[0, 3], rater=[0, 0], rating=[0, 1], n_categories=2, n_items=3), "item codes must be < n_items = 3"),
        (
            dict(item=[0, 1], rater=[0, 4], rating=[0, 1], n_categories=2, n_raters=2),
            "rater codes must be < n_raters = 2",
        ),
        (dict(item=[0, 1], rater=[0, 0], rating=[0, 0], n_categories=1), "n_categories must be at least 2"),
        (dict(item=[0, 1], rater=[0, 0], rating=[0, 1], n_categories=2.0), "n_categories must be an integer"),
        (dict(item=[0.5, 1], rater=[0, 0], rating=[0, 1], n_categories=2), "item codes must be integers"),
        (dict(item=["a", "b"], rater=[0, 0], rating=[0, 1], n_categories=2), "item codes must be integers"),
        (dict(item=[[0, 1]], rater=[0, 0], rating=[0, 1], n_categories=2), "item codes must be a 1-d array"),
        (
            dict(item=[0, 1], rater=[0, 0], rating=[0, 1], n_categories=2, categories=["x"]),
            "categories has 1 labels but n_categories = 2",
        ),
        (
            dict(item=[0, 1], rater=[0, 0], rating=[0, 1], n_categories=2, categories=["x", "x"]),
            "declared categories repeat",
        ),
        (
            dict(item=[0, 1], rater=[0, 0], rating=[0, 1], n_categories=2, weight=[1]),
            r"weight must have shape \(n_items,\) = \(2,\)",
        ),
        (dict(item=[0, 1], rater=[0, 0], rating=[0, 1], n_categories=2, weight=[1, -2]), "weight must be >= 0"),
    ],
)
def test_from_codes_errors(kwargs, match):
    with pytest.raises(RatingDataError, match=match):
        RatingData.from_codes(**kwargs)


def test_from_codes_reports_all_range_problems_at_once():
    with pytest.raises(RatingDataError) as err:
        RatingData.from_codes([0, -1], [0, 9], [0, 5], n_categories=3, n_raters=2)
    msg = str(err.value)
    assert "item codes must be >= 0" in msg and "rater codes must be < n_raters" in msg
    assert "rating codes must be < n_categories = 3" in msg


def test_from_codes_ten_million_ratings_fast():
    n = 10**7
    rng = np.random.default_rng(0)
    item = np.repeat(np.arange(n // 5), 5)
    rater = rng.integers(0, 5000, n)
    rating = rng.integers(0, 5, n)
    t0 = time.perf_counter()
    d = RatingData.from_codes(item, rater, rating, n_categories=5, copy=False)
    assert time.perf_counter() - t0 < 2
    assert d.n_units == n // 5 and d.n_ratings == n and d.n_raters == 5000
    assert np.shares_memory(d.rater, rater)


# ------------------------------------------------------------------ builders
@pytest.fixture
def long_df() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item": ["q1", "q1", "q1", "q2", "q2", "q3"],
            "rater": ["ann", "bob", "ann", "bob", "cy", "cy"],
            "rating": ["yes", "no", "yes", "no", "no", "yes"],
        }
    )


def test_from_long_labels_codes_and_counts(long_df):
    d = RatingData.from_long(long_df)
    assert list(d.unit_labels) == ["q1", "q2", "q3"]
    assert list(d.rater_labels) == ["ann", "bob", "cy"]
    assert list(d.categories) == ["no", "yes"]
    assert (d.n_units, d.n_items, d.n_raters, d.n_categories, d.n_ratings) == (3, 3, 3, 2, 6)
    assert d.has_repeats and not d.is_grouped and d.source_format == "long"
    dense = d.counts.toarray()
    # q1: ann said yes twice (col 0*2+1), bob said no once (col 1*2+0)
    assert dense[0].tolist() == [0, 2, 1, 0, 0, 0]
    assert dense.sum() == 6
    assert d.rating_counts().to_dict() == {"no": 3, "yes": 3}
    assert "3 items" in repr(d) and "from long data" in repr(d)


def test_from_long_custom_columns_and_declared_scale():
    df = pd.DataFrame({"id": [5, 5, 7], "coder": [2, 1, 1], "score": [1, 3, 3]})
    d = RatingData.from_long(df, item="id", rater="coder", rating="score", categories=[1, 2, 3, 4])
    assert list(d.categories) == [1, 2, 3, 4] and d.n_categories == 4
    assert d.rating_counts().to_dict() == {1: 1, 2: 0, 3: 2, 4: 0}
    out = d.to_long()
    assert list(out.columns) == ["id", "coder", "score"]
    assert list(out["score"].cat.categories) == [1, 2, 3, 4]
    assert _tuples(out, ("id", "coder", "score")) == _tuples(df, ("id", "coder", "score"))


def test_from_wide_missing_means_not_rated():
    w = pd.DataFrame({"r1": [1.0, 2.0, np.nan], "r2": [2.0, np.nan, np.nan]}, index=["a", "b", "c"])
    with pytest.warns(UnratedItemsWarning, match=r"1 item has no rating .* dropped \(rows 'c'\)"):
        d = RatingData.from_wide(w)
    assert list(d.categories) == [1, 2] and d.categories.dtype == np.int64  # 1.0 -> 1
    assert (d.n_units, d.n_raters, d.n_ratings) == (2, 2, 3)
    assert list(d.unit_labels) == ["a", "b"]  # unrated item c is dropped, with the warning
    assert _tuples(d.to_long()) == Counter({("a", "r1", 1): 1, ("a", "r2", 2): 1, ("b", "r1", 2): 1})
    # item labels from a column instead of the index; raters chosen explicitly
    w2 = w.reset_index(names="id").assign(note="x")
    with pytest.warns(UnratedItemsWarning):
        d2 = RatingData.from_wide(w2, item="id", raters=["r1", "r2"])
    assert d2.equals(d) and d2.unit_labels.name == "id"


def test_from_grouped_weights_and_missing_entries():
    g = pd.DataFrame({"A": [1, 1, 2, np.nan], "B": [1, 2, np.nan, 2], "n": [5, 3, 2, 1]})
    d = RatingData.from_grouped(g)
    assert d.is_grouped and (d.n_units, d.n_items, d.n_ratings) == (4, 11, 6)
    assert d.weight.tolist() == [5, 3, 2, 1]
    assert d.rating_counts().to_dict() == {1: 5 + 5 + 3, 2: 3 + 2 + 1}
    wide = d.to_wide()
    assert wide.shape == (11, 2) and list(wide.index) == list(range(1, 12))
    assert int(wide["B"].isna().sum()) == 2 and int(wide["A"].isna().sum()) == 1
    long = d.to_long()
    assert len(long) == 5 * 2 + 3 * 2 + 2 + 1
    back = d.to_grouped()
    assert back["n"].tolist() == [5, 3, 2, 1]
    assert _rows(back) == _rows(g)


def test_to_grouped_sums_tallies_of_identical_items():
    d = RatingData.from_wide(pd.DataFrame({"x": [1, 1, 2, 1], "y": [2, 2, 2, np.nan]}))
    g = d.to_grouped()
    assert g.to_dict("list") == {"x": [1, 2, 1], "y": [2, 2, np.nan], "n": [2, 1, 1]} or (
        g["n"].tolist() == [2, 1, 1] and g["x"].tolist() == [1, 2, 1] and g["y"].isna().tolist() == [False, False, True]
    )
    assert RatingData.from_grouped(g).n_items == 4
    with pytest.raises(RatingDataError, match="tally column name 'x' clashes with a rater label"):
        d.to_grouped(tally="x")
    assert list(d.to_grouped(tally="count").columns) == ["x", "y", "count"]


def test_zero_tally_patterns_kept_in_grouped_dropped_in_long():
    g = pd.DataFrame({"a": [1, 2, 2], "b": [1, 2, 1], "n": [2, 0, 1]})
    d = RatingData.from_grouped(g)
    assert d.n_units == 3 and d.n_items == 3
    assert d.to_grouped()["n"].tolist() == [2, 0, 1]
    long = d.to_long()
    assert sorted(long["item"].unique()) == [1, 2, 3]
    assert RatingData.from_long(long).to_grouped()["n"].tolist() == [2, 1]


def test_repeated_ratings_refused_by_wide_and_grouped(long_df):
    d = RatingData.from_long(long_df)
    for fn, name in ((d.to_wide, "wide"), (d.to_grouped, "grouped"), (lambda: d.to_frame("wide"), "wide")):
        with pytest.raises(RatingDataError) as err:
            fn()
        msg = str(err.value)
        assert f"{name} format cannot hold repeated ratings" in msg
        assert "item 'q1' was rated 2 times by rater 'ann'" in msg and "keep the data in long format" in msg
    assert RatingData.from_long(d.to_frame("long")).equals(d)


def test_to_frame_and_as_rating_data(long_df):
    d = RatingData.from_long(long_df.drop_duplicates(["item", "rater"]))
    assert as_rating_data(d) is d
    assert as_rating_data(d.to_wide(), data_format="wide").equals(d)
    g = as_rating_data(d.to_frame("grouped"), data_format="grouped")
    assert g.is_grouped and g.n_items == d.n_items
    with pytest.raises(ValueError, match="data_format must be one of"):
        d.to_frame("tidy")
    with pytest.raises(ValueError, match="data_format must be one of"):
        as_rating_data(long_df, data_format="tidy")
    with pytest.raises(TypeError, match="for reading a DataFrame, but data is already a RatingData"):
        as_rating_data(d, categories=[1, 2])


def test_rating_data_is_immutable(long_df):
    d = RatingData.from_long(long_df)
    with pytest.raises(AttributeError):
        d.unit = np.zeros(3)  # type: ignore[misc]
    for name in ("unit", "rater", "rating", "weight"):
        with pytest.raises(ValueError):
            getattr(d, name)[0] = 1
    out = d.to_long()
    out.loc[0, "item"] = "changed"
    assert d.to_long().loc[0, "item"] == "q1"


def test_equals_detects_differences():
    a = RatingData.from_long(pd.DataFrame({"item": [1, 2], "rater": [1, 1], "rating": [1, 2]}))
    b = RatingData.from_long(pd.DataFrame({"item": [1, 2], "rater": [1, 1], "rating": [2, 1]}))
    c = RatingData.from_long(pd.DataFrame({"item": [1, 2], "rater": [1, 1], "rating": [1, 2]}), categories=[1, 2, 3])
    assert a.equals(RatingData.from_long(pd.DataFrame({"item": [2, 1], "rater": [1, 1], "rating": [2, 1]})))
    assert not a.equals(b) and not a.equals(c) and not a.equals("data")


def test_encode_helpers():
    d = RatingData.from_long(pd.DataFrame({"item": ["a", "b", "c"], "rater": [1, 1, 2], "rating": [1, 2, 3]}))
    assert d.encode_categories([3, "1", 2.0]).tolist() == [2, 0, 1]  # type-blind fallback
    with pytest.raises(RatingDataError, match=r"value 7 not among the categories 1, 2, 3"):
        d.encode_categories([1, 7])
    assert d.encode_units(["c", "a"]).tolist() == [2, 0]
    assert d.encode_units([]).tolist() == []
    n = RatingData.from_long(pd.DataFrame({"item": [7, 8], "rater": [1, 1], "rating": [1, 2]}))
    assert n.encode_units(["8", 7.0]).tolist() == [1, 0]  # CSV-read labels find integer items
    with pytest.raises(RatingDataError, match="item 'z' not found"):
        d.encode_units(["a", "z"])
    assert d.known_codes({"b": 3}).tolist() == [-1, 2, -1]
    assert d.known_codes(None) is None
    assert d.known_codes({}).tolist() == [-1, -1, -1]
    with pytest.raises(RatingDataError, match="known class 9 not among the categories"):
        d.known_codes({"a": 9})
    with pytest.raises(RatingDataError, match="known-class item 'q' not found"):
        d.known_codes(pd.Series({"q": 1}))


# ---------------------------------------------------- label types and dtypes
def test_csv_int_ratings_string_categories_and_back():
    csv = "item,rater,rating\n1,a,1\n1,b,2\n2,a,4\n"
    df = pd.read_csv(io.StringIO(csv))
    d = RatingData.from_long(df, categories=["1", "2", "3", "4"])
    assert list(d.categories) == ["1", "2", "3", "4"]  # declared labels win
    assert d.rating.tolist() == [0, 1, 3]
    df_str = pd.read_csv(io.StringIO(csv), dtype=str)
    d2 = RatingData.from_long(df_str, categories=[1, 2, 3, 4])  # get_indexer's int fallback
    assert list(d2.categories) == [1, 2, 3, 4] and d2.rating.tolist() == [0, 1, 3]
    assert list(d2.unit_labels) == ["1", "2"]  # item labels stay as given (strings)
    # "2.0" and 2.0 match the integer category 2
    df_f = pd.DataFrame({"item": [1, 2, 3], "rater": [1, 1, 1], "rating": ["2.0", 2.0, 1]})
    assert RatingData.from_long(df_f, categories=[1, 2]).rating.tolist() == [1, 1, 0]
    with pytest.raises(RatingDataError, match=r"values '7' \(rows 2\) not among the categories 1, 2"):
        RatingData.from_long(df_str.assign(rating=["1", "2", "7"]), categories=[1, 2])


def test_wide_csv_with_missing_values_gives_integer_labels():
    csv = "id,r1,r2,r3\nA,1,,3\nB,2,2,\nC,,1,1\n"
    w = pd.read_csv(io.StringIO(csv)).set_index("id")
    assert w["r2"].dtype.kind == "f"
    d = RatingData.from_wide(w)
    assert list(d.categories) == [1, 2, 3] and d.categories.dtype == np.int64
    out = d.to_wide()
    assert out.loc["A", "r3"] == 3 and pd.isna(out.loc["A", "r2"])
    d_str = RatingData.from_wide(w, categories=["1", "2", "3"])
    assert d_str.counts.nnz == d.counts.nnz and np.array_equal(d_str.rating, d.rating)


def test_float_labels_become_ints_in_long_data():
    df = pd.DataFrame({"item": [1.0, 2.0], "rater": [3.0, 3.0], "rating": [1.0, 2.0]})
    d = RatingData.from_long(df)
    for idx in (d.unit_labels, d.rater_labels, d.categories):
        assert idx.dtype == np.int64
    assert list(d.to_long()["item"]) == [1, 2]
    d = RatingData.from_long(df.assign(item=[1.5, 2.0]))
    assert list(d.unit_labels) == [1.5, 2.0]  # genuine floats stay floats


def test_mixed_type_labels():
    df = pd.DataFrame({"item": [1, "b", 2.0], "rater": ["x", 7, "x"], "rating": ["lo", "hi", "lo"]})
    d = RatingData.from_long(df)
    assert set(d.unit_labels) == {1, "b", 2} and set(d.rater_labels) == {"x", 7}
    assert _tuples(d.to_long()) == Counter({(1, "x", "lo"): 1, ("b", 7, "hi"): 1, (2, "x", "lo"): 1})
    assert RatingData.from_wide(d.to_wide()).equals(d)


@pytest.mark.parametrize("col", ["item", "rater", "rating"])
def test_labels_differing_only_in_type_are_refused(col):
    df = pd.DataFrame({"item": [1, 2, 3], "rater": [1, 2, 3], "rating": [1, 2, 1]})
    df[col] = pd.Series([1, "1", 2], dtype=object)
    with pytest.raises(RatingDataError, match=rf"column '{col}'.*mixes labels that differ only in type \(1 and '1'\)"):
        RatingData.from_long(df)


def test_pandas_string_dtype():
    df = pd.DataFrame({"item": ["i1", "i2", "i2"], "rater": ["a", "a", "b"], "rating": ["pos", "neg", "pos"]})
    df = df.astype("str")
    assert all(isinstance(t, pd.StringDtype) or t == np.dtype(object) for t in df.dtypes)
    d = RatingData.from_long(df, categories=["neg", "neu", "pos"])
    assert list(d.categories) == ["neg", "neu", "pos"]
    assert d.rating.tolist() == [2, 0, 2]
    w = d.to_wide()
    assert w.loc["i2", "b"] == "pos" and pd.isna(w.loc["i1", "b"])
    assert RatingData.from_wide(w).equals(d)
    sw = pd.DataFrame({"a": ["pos", "neg"], "b": [None, "pos"]}, index=["i1", "i2"]).astype("str")
    assert RatingData.from_wide(sw).n_ratings == 3
    g = RatingData.from_grouped(pd.DataFrame({"a": ["x", "y"], "b": ["y", None], "n": ["3", "4"]}).astype({"a": "str"}))
    assert g.n_items == 7 and g.weight.tolist() == [3, 4]


def test_categorical_columns_keep_their_scale_and_order():
    scale = pd.CategoricalDtype(["low", "mid", "high", "extreme"], ordered=True)
    df = pd.DataFrame(
        {"item": [1, 1, 2], "rater": ["a", "b", "a"], "rating": pd.Series(["low", "high", "mid"], dtype=scale)}
    )
    d = RatingData.from_long(df)
    assert list(d.categories) == ["low", "mid", "high", "extreme"]  # order kept, unused level kept
    assert d.rating.tolist() == [0, 2, 1]
    # a declared scale overrides the dtype's
    assert list(RatingData.from_long(df, categories=["high", "mid", "low"]).categories) == ["high", "mid", "low"]
    # categorical item/rater columns: category order kept, unused categories dropped
    df2 = df.assign(rater=pd.Categorical(["b", "a", "b"], categories=["z", "b", "a"]))
    assert list(RatingData.from_long(df2).rater_labels) == ["b", "a"]
    # wide categorical columns with different scales: union, first column's order
    w = pd.DataFrame(
        {
            "r1": pd.Categorical(["b", "a"], categories=["b", "a"]),
            "r2": pd.Categorical(["c", None], categories=["a", "c"]),
        }
    )
    assert list(RatingData.from_wide(w).categories) == ["b", "a", "c"]


# ---------------------------------------------------------------- validation
def _err(fn, *args, **kwargs) -> str:
    with pytest.raises(RatingDataError) as err:
        fn(*args, **kwargs)
    return str(err.value)


def test_error_empty_and_not_a_frame():
    assert "the table is empty (no rows)" in _err(
        RatingData.from_long, pd.DataFrame({"item": [], "rater": [], "rating": []})
    )
    assert "the table is empty" in _err(RatingData.from_wide, pd.DataFrame({"a": []}))
    assert "expected a pandas DataFrame, got dict" in _err(RatingData.from_long, {"item": [1]})
    assert "no rater columns" in _err(RatingData.from_grouped, pd.DataFrame({"n": [1]}))


def test_error_missing_columns_with_suggestions():
    df = pd.DataFrame({"Item": [1], "rater": [1], "Rating ": [1]})
    msg = _err(RatingData.from_long, df)
    assert "item column 'item' not found" in msg and "(did you mean 'Item'?)" in msg
    assert "rating column 'rating' not found" in msg and "(did you mean 'Rating '?)" in msg
    assert "columns are 'Item', 'rater', 'Rating '" in msg
    msg = _err(RatingData.from_long, pd.DataFrame({"r1": [1], "r2": [2]}))
    assert "data_format='wide'" in msg
    msg = _err(RatingData.from_grouped, pd.DataFrame({"r1": [1], "r2": [2], "count": [3]}))
    assert "tally column 'n' not found" in msg and "tally='count'" in msg
    msg = _err(RatingData.from_wide, pd.DataFrame({"item": [1], "rater": [2], "rating": [1]}), item="id")
    assert "item column 'id' not found" in msg and "suggest long data" in msg
    msg = _err(RatingData.from_wide, pd.DataFrame({"r1": [1, 2]}), raters=["r1", "r9"])
    assert "rater column 'r9' not found" in msg


def test_error_ambiguous_and_duplicated_columns():
    df = pd.DataFrame([[1, 1, 2]], columns=["r", "r", "n"])
    assert "duplicated column names: 'r'" in _err(RatingData.from_grouped, df)
    assert "column 'x' is given both as the item column and as the rater column" in _err(
        RatingData.from_long, pd.DataFrame({"x": [1], "rating": [1]}), item="x", rater="x"
    )
    g = pd.DataFrame({"a": [1, 2], "b": [2, 1], "n": [1, 1]})
    assert "column 'n' is given both as the tally column and as a rater column" in _err(
        RatingData.from_grouped, g, raters=["a", "n"]
    )
    assert "rater columns listed twice: 'a'" in _err(RatingData.from_grouped, g, raters=["a", "a"])
    w = pd.DataFrame([[1, 2], [2, 1]], columns=pd.Index([1, "1"], dtype=object))
    assert "ambiguous column names that print the same: 1 and '1'" in _err(RatingData.from_wide, w)


def test_error_nan_in_long_data():
    df = pd.DataFrame({"item": [1, 2, np.nan, 4], "rater": [1, 1, 1, 1], "rating": [1, np.nan, 2, 2]})
    msg = _err(RatingData.from_long, df)
    assert "column 'rating' (rating) has missing values (NaN) at rows 1" in msg
    assert "drop the rows without one" in msg
    assert "column 'item' (item) has missing values (NaN) at rows 2; every rating needs its item" in msg


def test_error_ratings_outside_declared_categories():
    df = pd.DataFrame({"item": [1, 2, 3, 4], "rater": [1, 1, 1, 1], "rating": [1, 5, 2, 6]})
    msg = _err(RatingData.from_long, df, categories=[1, 2, 3])
    assert "column 'rating' has values 5, 6 (rows 1, 3) not among the categories 1, 2, 3" in msg
    w = pd.DataFrame({"a": [1, 9], "b": [2, np.nan]}, index=["x", "y"])
    msg = _err(RatingData.from_wide, w, categories=[1, 2])
    assert "ratings not among the categories 1, 2: row 'y', column 'a': 9" in msg


def test_error_declared_categories_bad():
    df = pd.DataFrame({"item": [1, 2], "rater": [1, 1], "rating": [1, 2]})
    assert "declared categories repeat: 2" in _err(RatingData.from_long, df, categories=[1, 2, 2])
    assert "declared categories contain a missing value" in _err(RatingData.from_long, df, categories=[1, 2, None])
    assert "categories must be a sequence of labels, got 'abc'" in _err(RatingData.from_long, df, categories="abc")


def test_error_fewer_than_two_categories():
    df = pd.DataFrame({"item": [1, 2], "rater": [1, 1], "rating": [3, 3]})
    msg = _err(RatingData.from_long, df)
    assert "at least 2 categories are needed, found 1 (3)" in msg and "categories=[...]" in msg
    assert RatingData.from_long(df, categories=[3, 4]).n_categories == 2
    assert "found 1" in _err(RatingData.from_long, df, categories=[3])


def test_error_tallies():
    base = {"a": [1, 2, 1], "b": [1, 2, 2]}
    msg = _err(RatingData.from_grouped, pd.DataFrame({**base, "n": [1, -2, 2.5]}))
    assert "tally column 'n' must hold non-negative integers; rows 1, 2 hold -2.0, 2.5" in msg
    msg = _err(RatingData.from_grouped, pd.DataFrame({**base, "n": ["3", "x", None]}))
    assert "rows 1, 2 hold 'x'," in msg
    msg = _err(RatingData.from_grouped, pd.DataFrame({**base, "n": [True, False, True]}))
    assert "it holds booleans" in msg
    assert "tally column 'n' is all zero" in _err(RatingData.from_grouped, pd.DataFrame({**base, "n": [0, 0, 0]}))
    ok = RatingData.from_grouped(pd.DataFrame({**base, "n": [2.0, 1.0, 0.0]}))
    assert ok.weight.tolist() == [2, 1, 0]


def test_error_repeated_pattern_rows():
    g = pd.DataFrame({"a": [1, 2, 1, np.nan, np.nan], "b": [2, 2, 2, 1, 1], "n": [3, 1, 2, 1, 1]}, index=list("pqrst"))
    msg = _err(RatingData.from_grouped, g)
    assert "pattern rows repeat: rows 'p', 'r' share one pattern; rows 's', 't' share one pattern" in msg
    assert "groupby(['a', 'b'], dropna=False, as_index=False)['n'].sum()" in msg
    fixed = g.groupby(["a", "b"], dropna=False, as_index=False)["n"].sum()
    assert RatingData.from_grouped(fixed).n_items == 8


def test_error_repeated_row_labels():
    w = pd.DataFrame({"a": [1, 2], "b": [2, 1]}, index=["x", "x"])
    assert "item labels (the index) repeat: 'x'" in _err(RatingData.from_wide, w)
    w2 = pd.DataFrame({"id": ["x", "x"], "a": [1, 2]})
    assert "item column 'id' repeats labels 'x'" in _err(RatingData.from_wide, w2, item="id")
    g = pd.DataFrame({"a": [1, 2], "n": [1, 1]}, index=[0, 0])
    assert "reset it with df.reset_index(drop=True)" in _err(RatingData.from_grouped, g)


def test_error_no_ratings():
    w = pd.DataFrame({"a": [np.nan, np.nan], "b": [np.nan, np.nan]})
    assert "no ratings: every rater column is empty" in _err(RatingData.from_wide, w, categories=[1, 2])


def test_all_problems_reported_together():
    df = pd.DataFrame({"item": [1, np.nan, 3], "rater": [1, 1, None], "rating": [1, 2, 9]})
    msg = _err(RatingData.from_long, df, categories=[1, 2])
    assert msg.count("\n  - ") == 3
    assert "'item'" in msg and "'rater'" in msg and "9" in msg


# ----------------------------------------- the user's DataFrame is untouched
_G = pd.DataFrame({"r1": [1, 2, np.nan], "r2": ["a", None, "b"], "n": [2, 1, 3]})
_CASES = [
    (RatingData.from_long, pd.DataFrame({"item": ["x", "y"], "rater": [1.0, 2.0], "rating": [1.0, 2.0]}), {}),
    (
        RatingData.from_long,
        pd.DataFrame(
            {"item": [1, 2], "rater": [1, 1], "rating": pd.Categorical(["a", "b"], categories=["a", "b", "c"])}
        ),
        {},
    ),
    (RatingData.from_long, pd.DataFrame({"item": [1, 2], "rater": [1, 1], "rating": [1, np.nan]}), {}),
    (
        RatingData.from_long,
        pd.DataFrame({"item": [1, 2], "rater": [1, 1], "rating": ["1", "3"]}),
        {"categories": [1, 2]},
    ),
    (RatingData.from_long, pd.DataFrame({"Item": [1], "rater": [1], "rating": [1]}), {}),
    (RatingData.from_wide, pd.DataFrame({"a": [1.0, np.nan], "b": [2.0, 1.0]}, index=["p", "q"]), {}),
    (RatingData.from_wide, pd.DataFrame({"id": ["p", "q"], "a": [1, 2], "b": ["1", "2"]}), {"item": "id"}),
    (RatingData.from_wide, pd.DataFrame({"a": [1, 9]}), {"categories": [1, 2]}),
    (RatingData.from_grouped, pd.DataFrame({"r1": [1, 2], "r2": [2, np.nan], "n": [1, 2]}), {}),
    (RatingData.from_grouped, pd.DataFrame({"r1": [1, 1], "r2": [2, 2], "n": [1, -2]}), {}),
    (RatingData.from_grouped, pd.DataFrame({"r1": [1, 1], "r2": [2, 2], "n": [1, 2]}), {}),
    (
        RatingData.from_grouped,
        pd.DataFrame({"r1": ["x", "y"], "r2": ["y", None], "n": [1, 2]}).astype({"r1": "str"}),
        {},
    ),
]


@pytest.mark.parametrize("fn, df, kwargs", _CASES)
def test_input_frame_never_modified(fn, df, kwargs):
    before = df.copy(deep=True)
    dtypes, index, columns = df.dtypes.copy(), df.index.copy(), df.columns.copy()
    try:
        d = fn(df, **kwargs)
    except RatingDataError:
        d = None
    pd.testing.assert_frame_equal(df, before)
    assert df.dtypes.equals(dtypes) and df.index.equals(index) and df.columns.equals(columns)
    assert df.index.name == before.index.name and df.columns.name == before.columns.name
    if d is not None:
        for out in (d.to_long(), d.to_frame("long")):
            out.iloc[:, 0] = out.iloc[:, 0].iloc[::-1].to_numpy()
        pd.testing.assert_frame_equal(df, before)


# ------------------------------------------------ property-based round trips
def _labels(n: int, prefix: str):
    """n distinct labels: integers (any order) or strings (some look numeric)."""
    ints = st.lists(st.integers(-30, 60), min_size=n, max_size=n, unique=True)
    strs = st.lists(st.text(alphabet=prefix + "é1 ", min_size=1, max_size=3), min_size=n, max_size=n, unique=True)
    return st.one_of(ints, strs)


@st.composite
def long_tables(draw, repeats: bool):
    K = draw(st.integers(2, 4))
    cats = draw(_labels(K + draw(st.integers(0, 2)), "kc"))  # declared scale, maybe with unused levels
    I, J = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    items, raters = draw(_labels(I, "iq")), draw(_labels(J, "rs"))
    cells = draw(
        st.lists(
            st.tuples(st.integers(0, I - 1), st.integers(0, J - 1), st.integers(0, len(cats) - 1)),
            min_size=1,
            max_size=3 * I * J if repeats else I * J,
        )
    )
    if not repeats:
        cells = list({(i, j): (i, j, r) for i, j, r in cells}.values())
    df = pd.DataFrame(
        {
            "item": [items[i] for i, _, _ in cells],
            "rater": [raters[j] for _, j, _ in cells],
            "rating": [cats[r] for _, _, r in cells],
        }
    )
    return df, cats


@st.composite
def wide_tables(draw):
    cats = draw(_labels(draw(st.integers(2, 5)), "kc"))
    I, J = draw(st.integers(1, 7)), draw(st.integers(1, 4))
    raters = draw(_labels(J, "rs"))
    cells = draw(st.lists(st.lists(st.integers(-1, len(cats) - 1), min_size=J, max_size=J), min_size=I, max_size=I))
    if all(c < 0 for row in cells for c in row):
        cells[0][0] = 0
    table = {r: [cats[row[j]] if row[j] >= 0 else None for row in cells] for j, r in enumerate(raters)}
    return pd.DataFrame(table, index=pd.Index(draw(_labels(I, "iq")), name="item")), cats


@st.composite
def grouped_tables(draw):
    cats = draw(_labels(draw(st.integers(2, 4)), "kc"))
    J = draw(st.integers(1, 4))
    raters = draw(_labels(J, "rs"))
    pattern = st.tuples(*[st.integers(-1, len(cats) - 1)] * J).filter(lambda p: max(p) >= 0)
    patterns = draw(st.lists(pattern, min_size=1, max_size=8, unique=True))
    # every rater rates somewhere, so long data (which lists only ratings) can keep all of them
    for j in range(J):
        if all(p[j] < 0 for p in patterns):
            patterns[0] = patterns[0][:j] + (0,) + patterns[0][j + 1 :]
    patterns = list(dict.fromkeys(patterns))
    tallies = draw(st.lists(st.integers(1, 4), min_size=len(patterns), max_size=len(patterns)))
    table = {r: [cats[p[j]] if p[j] >= 0 else None for p in patterns] for j, r in enumerate(raters)}
    table["n"] = tallies
    return pd.DataFrame(table), cats


PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(long_tables(repeats=False))
def test_roundtrip_long_wide_long(case):
    df, cats = case
    d = RatingData.from_long(df, categories=cats)
    assert list(d.categories) == list(cats)
    wide = d.to_wide()
    dw = RatingData.from_wide(wide)
    assert dw.equals(d)
    assert list(dw.categories) == list(cats)  # unused declared levels survive via the dtype
    assert _tuples(dw.to_long()) == _tuples(df)
    assert RatingData.from_long(d.to_long()).equals(d)


@PROPS
@given(long_tables(repeats=True))
def test_roundtrip_long_with_repeats(case):
    df, cats = case
    d = RatingData.from_long(df, categories=cats)
    assert d.n_ratings == len(df)
    back = d.to_long()
    assert _tuples(back) == _tuples(df)
    assert RatingData.from_long(back).equals(d)
    if d.has_repeats:
        with pytest.raises(RatingDataError, match="cannot hold repeated ratings"):
            d.to_wide()
        with pytest.raises(RatingDataError, match="cannot hold repeated ratings"):
            d.to_grouped()
    else:
        assert RatingData.from_wide(d.to_wide()).equals(d)


@PROPS
@given(wide_tables())
def test_roundtrip_wide_grouped_wide(case):
    w, cats = case
    before = w.copy(deep=True)
    rated = w.notna().any(axis=1).to_numpy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnratedItemsWarning)
        d = RatingData.from_wide(w, categories=cats)
    # rows without any rating are dropped, with one warning counting them
    assert len(caught) == int((~rated).any()) and d.n_units == rated.sum()
    if (~rated).any():
        assert f"{(~rated).sum()} item" in str(caught[0].message)
    g = d.to_grouped()
    assert g["n"].sum() == rated.sum()
    assert not g.drop(columns="n").duplicated().any()
    dg = RatingData.from_grouped(g)
    assert dg.n_items == d.n_items and list(dg.categories) == list(cats)
    assert list(dg.rater_labels) == list(w.columns)
    w2 = dg.to_wide()
    assert list(w2.columns) == list(w.columns)
    assert _rows(w2) == _rows(w[rated])  # same rows up to item order and labels
    pd.testing.assert_frame_equal(w, before)


@PROPS
@given(grouped_tables())
def test_roundtrip_grouped_long_grouped(case):
    g, cats = case
    d = RatingData.from_grouped(g, categories=cats)
    long = d.to_long()
    assert len(long) == int((g.drop(columns="n").notna().sum(axis=1) * g["n"]).sum())
    back = RatingData.from_long(long).to_grouped()
    back = back[list(g.columns)]  # long data sorts the rater labels
    assert back["n"].tolist() == g["n"].tolist()
    assert _rows(back) == _rows(g)
    for c in g.columns[:-1]:
        got = back[c].astype(object).where(back[c].notna(), None).tolist()
        want = g[c].astype(object).where(g[c].notna(), None).tolist()
        assert got == want
        assert list(back[c].cat.categories) == list(cats)


@PROPS
@given(grouped_tables())
def test_grouped_to_wide_expands_tallies(case):
    g, cats = case
    d = RatingData.from_grouped(g, categories=cats)
    w = d.to_wide()
    assert len(w) == g["n"].sum()
    expected: Counter = Counter()
    for vals, n in zip(g.drop(columns="n").astype(object).to_numpy(), g["n"]):
        expected[tuple(None if pd.isna(v) else v for v in vals)] += int(n)
    assert _rows(w) == expected
    assert RatingData.from_wide(w).to_grouped()["n"].tolist() == g["n"].tolist()


# ------------------------------------------------------------------ real data
def test_anesthesia_long_data():
    df = pd.read_csv(shared_file("anesthesia.csv"))
    before = df.copy(deep=True)
    d = RatingData.from_long(df)
    pd.testing.assert_frame_equal(df, before)
    assert (d.n_units, d.n_raters, d.n_categories, d.n_ratings) == (45, 5, 4, len(df))
    assert list(d.categories) == [1, 2, 3, 4] and list(d.rater_labels) == [1, 2, 3, 4, 5]
    assert d.has_repeats
    per_pair = pd.Series(d.counts.sum(axis=1).A1)
    assert (per_pair == df.groupby("item").size().to_numpy()).all()
    # rater 1 rated every item several times, the others once
    by_rater = df.groupby(["item", "rater"]).size().unstack()
    assert (by_rater[1] > 1).all() and (by_rater.drop(columns=1) == 1).all().all()
    assert d.rating_counts().to_dict() == df["rating"].value_counts().sort_index().to_dict()
    with pytest.raises(
        RatingDataError, match="wide format cannot hold repeated ratings: item 1 was rated 3 times by rater 1"
    ):
        d.to_wide()
    assert RatingData.from_long(d.to_long()).equals(d)
    assert _tuples(d.to_long()) == _tuples(df)


def test_caries_grouped_data_roundtrip_exact():
    g = pd.read_csv(shared_file("caries.csv"))
    d = RatingData.from_grouped(g)
    assert (d.n_units, d.n_raters, d.n_categories) == (len(g), 5, 2)
    assert d.n_items == int(g["n"].sum()) == 3859
    assert list(d.rater_labels) == [f"rater_{j}" for j in range(1, 6)]
    assert d.rating_counts().sum() == 5 * d.n_items
    long = d.to_long()
    assert len(long) == 5 * d.n_items and long["item"].nunique() == d.n_items
    back = RatingData.from_long(long).to_grouped()
    restored = back.astype({c: int for c in back.columns[:-1]})
    restored.columns = list(restored.columns)
    pd.testing.assert_frame_equal(restored, g)
    assert RatingData.from_grouped(d.to_grouped()).equals(d)
    w = d.to_wide()
    assert w.shape == (d.n_items, 5) and RatingData.from_wide(w).to_grouped()["n"].tolist() == g["n"].tolist()


def test_pattern_grouping_exact_even_when_hashes_collide(monkeypatch):
    import pyrater.data.ratings as datamod

    w = pd.DataFrame({"a": [1, 2, 1, 2, np.nan, 1], "b": [2, 1, 2, np.nan, 1, 2], "c": [1, 1, 1, 2, 2, 1]})
    expected = RatingData.from_wide(w).to_grouped()
    assert expected["n"].tolist() == [3, 1, 1, 1]
    # all words equal: every pattern with the same number of ratings collides
    monkeypatch.setattr(datamod, "_pattern_words", lambda n: np.ones(n, dtype=np.uint64))
    got = RatingData.from_wide(w).to_grouped()
    pd.testing.assert_frame_equal(got, expected)
    g = pd.DataFrame({"a": [1, 2], "b": [2, 1], "n": [1, 1]})
    assert RatingData.from_grouped(g).n_units == 2  # not mistaken for repeated patterns
    with pytest.raises(RatingDataError, match="pattern rows repeat"):
        RatingData.from_grouped(pd.DataFrame({"a": [1, 1], "b": [2, 2], "n": [1, 1]}))


def test_unused_duplicated_columns_do_not_block_long_data():
    df = pd.DataFrame([[1, 1, 1, "x", "y"], [2, 1, 2, "x", "y"]], columns=["item", "rater", "rating", "note", "note"])
    assert RatingData.from_long(df).n_ratings == 2
    df.columns = ["item", "rater", "item", "note", "rating"]
    assert "duplicated column names: 'item'" in _err(RatingData.from_long, df)


def test_item_units_maps_the_items_of_per_item_results_to_their_units():
    from pyrater import datasets

    caries = RatingData.from_grouped(datasets.caries(), tally="n")
    units = caries.item_units()
    assert units.size == caries.n_items == 3859 and units.index[0] == 1 and units.index.name == "item"
    np.testing.assert_array_equal(units.value_counts().sort_index().to_numpy(), caries.weight)  # the tallies
    fit = pyrater.em(caries, seed=1)
    held_out = pyrater.kfold(fit, k=5, seed=1, progress=False).elpd_i
    assert held_out.index.equals(units.index)  # the per-item results' labels
    # each item's class probabilities, through its pattern
    per_item = fit.class_probabilities().loc[units.to_numpy()].set_axis(units.index)
    assert per_item.shape == (3859, 2) and np.allclose(per_item.iloc[0], fit.class_probabilities().iloc[0])
    # long data: every item its own unit, labels as given
    long = RatingData.from_long(pd.DataFrame({"item": ["x", "x", "y"], "rater": [1, 2, 1], "rating": [1, 2, 2]}))
    pd.testing.assert_series_equal(long.item_units(), pd.Series(["x", "y"], index=pd.Index(["x", "y"], name="item")),
                                   check_names=False)  # fmt: skip
