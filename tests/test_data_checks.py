"""Careless input (issue 13, items 2, 3, 13): typo-like ratings, wide-table pitfalls, the repr.

Each check is also run through the command line's ``main()`` on a temporary CSV.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from pyrater.cli import main
from pyrater.data import RatingData, RatingDataError, UnratedItemsWarning


def _long(ratings) -> pd.DataFrame:
    n = len(ratings)
    return pd.DataFrame({"item": np.arange(n) // 2, "rater": np.arange(n) % 2, "rating": ratings})


# ---------------------------------------------------- item 2: typo-like ratings
@pytest.mark.parametrize(
    "ratings, bad_row, words",
    [
        ([1, 2, 3, 4, 2, "x", 1, 3], 5, "mixes numbers and text: text ratings among numbers (row 5: 'x')"),
        (["1", "2", "3", "4", "2", "x", "1", "3"], 5, "row 5: 'x'"),  # a CSV column read as text
        ([1.0, 2.0, 3.0, 1.5, 2.0, 3.0, 1.0, 2.0], 3, "holds non-integer numbers among integers (row 3: 1.5)"),
        ([1.0, 2.0, np.inf, 1.0, 2.0, 3.0, 1.0, 2.0], 2, "holds non-finite numbers (row 2: inf)"),
    ],
)
def test_typo_like_ratings_are_errors_without_declared_categories(ratings, bad_row, words):
    df = _long(ratings)
    with pytest.raises(RatingDataError) as err:
        RatingData.from_long(df)
    msg = str(err.value)
    assert words in msg and "categories=[" in msg and "--categories" in msg
    # declaring the scale accepts the same values as genuine categories
    scale = list(pd.unique(pd.Series(ratings, dtype=object)))
    d = RatingData.from_long(df, categories=scale)
    assert d.n_categories == len(scale)


def test_typo_like_cells_of_wide_tables_are_named_by_row_and_column():
    w = pd.DataFrame({"a": [1, 2, 3, 1], "b": [2.0, 2.5, 3.0, 1.0]})
    with pytest.raises(RatingDataError, match=r"non-integer numbers among integers \(row 1, column 'b': 2.5\)"):
        RatingData.from_wide(w)


def test_clean_numeric_and_text_scales_still_pass():
    assert RatingData.from_long(_long([1, 2, 3, 2, 1, 2])).n_categories == 3
    assert RatingData.from_long(_long(["no", "yes", "no", "yes"])).n_categories == 2
    assert RatingData.from_long(_long([1.0, 2.0, 2.0, 1.0])).categories.dtype == np.int64


def test_rare_categories_are_listed_in_the_repr():
    ratings = [1, 2, 3, 4] * 30 + [9]
    d = RatingData.from_long(_long(ratings + [1]))
    assert d.rare_categories().to_dict() == {9: 1}
    assert "rarely used categories: 9 (1 rating)" in repr(d)
    # a category given 30 times is not rare
    assert "rarely" not in repr(RatingData.from_long(_long([1, 2, 3, 4] * 30)))


# ------------------------------------------------- item 3: wide-table pitfalls
def test_unrated_rows_of_a_wide_table_are_dropped_with_a_count():
    w = pd.DataFrame({"r1": [1, np.nan, 2, np.nan], "r2": [1, np.nan, 1, np.nan]}, index=list("abcd"))
    with pytest.warns(UnratedItemsWarning, match=r"2 items have no rating .* dropped \(rows 'b', 'd'\)"):
        d = RatingData.from_wide(w)
    assert list(d.unit_labels) == ["a", "c"]
    g = pd.DataFrame({"r1": [1, np.nan], "r2": [2, np.nan], "n": [4, 3]})
    with pytest.warns(UnratedItemsWarning, match=r"1 pattern rows \(tally 3 items\)"):
        dg = RatingData.from_grouped(g)
    assert dg.n_items == 4


def test_tally_column_in_a_wide_table_is_an_error_naming_it():
    g = pd.DataFrame({"r1": [1, 1, 2, 2], "r2": [1, 2, 1, 2], "n": [40, 5, 3, 30]})
    with pytest.raises(RatingDataError, match=r"column 'n' looks like a tally.*data_format='grouped'.*raters="):
        RatingData.from_wide(g)
    # by its values, whatever its name
    with pytest.raises(
        RatingDataError, match=r"column 'm' looks like a tally .*\(its values \(3, 5, 30, 40\) lie far outside"
    ):
        RatingData.from_wide(g.rename(columns={"n": "m"}))
    # the way out: read it as grouped, or choose the raters
    assert RatingData.from_grouped(g).n_items == 78
    assert RatingData.from_wide(g, raters=["r1", "r2"]).n_raters == 2


def test_an_item_label_column_of_a_wide_table_not_named_item_is_an_error_naming_it():
    rng = np.random.default_rng(1)
    w = pd.DataFrame({f"dr_{j}": rng.choice(["absent", "mild", "severe"], size=30) for j in range(4)})
    w.insert(0, "case_id", [f"case_{i:03d}" for i in range(30)])
    with pytest.raises(RatingDataError, match=r"column 'case_id' holds a different value on each of its 30 rows .*"
                       r"item labels, not a rater; pass item='case_id' \(command line: --item case_id\)"):  # fmt: skip
        RatingData.from_wide(w)
    d = RatingData.from_wide(w, item="case_id")
    assert d.n_items == 30 and d.n_raters == 4 and d.n_categories == 3
    # integer labels too; the check needs a different value on every row
    w2 = w.assign(case_id=np.arange(101, 131))
    with pytest.raises(RatingDataError, match=r"column 'case_id' holds a different value .*looks like the item"):
        RatingData.from_wide(w2)
    w3 = w.assign(case_id=["x"] * 15 + [f"y{i}" for i in range(15)])  # repeats: a (strange) rater, not the labels
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its rarely given categories
        assert RatingData.from_wide(w3).n_raters == 5


def test_text_column_among_numeric_raters_is_an_error_naming_it():
    w = pd.DataFrame({"r1": [1, 2, 1], "r2": [2, 2, 1], "note": ["ok", "check", "ok"]})
    with pytest.raises(RatingDataError, match=r"column 'note' holds text \('ok', 'check'\).*raters="):
        RatingData.from_wide(w)
    assert RatingData.from_wide(w, raters=["r1", "r2"]).n_raters == 2


# ------------------------------------------------------------- item 13: repr
def test_repr_counts_items_once_and_ratings_with_tallies():
    long = RatingData.from_long(_long([1, 2, 1, 2, 2, 1]))
    assert repr(long).startswith("RatingData(3 items, 2 raters, 2 categories [1, 2], 6 ratings")
    g = RatingData.from_grouped(pd.DataFrame({"A": [1, 2, 1], "B": [1, 2, np.nan], "n": [10, 5, 2]}))
    assert g.n_ratings == 5 and g.n_ratings_total == 2 * 10 + 2 * 5 + 2
    assert repr(g).startswith("RatingData(3 patterns of 17 items, 2 raters, 2 categories [1, 2], 32 ratings")
    assert g.n_ratings_total == len(g.to_long())


def test_repr_counts_in_good_english_and_names_declared_categories_never_given():
    one = RatingData.from_long(pd.DataFrame({"item": [1], "rater": ["a"], "rating": [1]}), categories=[1, 2, 4])
    assert repr(one) == (
        "RatingData(1 item, 1 rater, 3 categories [1, 2, 4], 1 rating, from long data; categories never given: 2, 4)"
    )


# ------------------------------------------------------- the same via the CLI
def _cli(tmp_path, text: str, *args: str, capsys) -> tuple[int, str]:
    path = tmp_path / "ratings.csv"
    path.write_text(text)
    code = main(["fit", str(path), "--method", "em", "--out", str(tmp_path / "out"), "--quiet", *args])
    return code, capsys.readouterr().err


def test_cli_refuses_a_stray_text_rating(tmp_path, capsys):
    rows = "".join(f"{i},{j},{1 + (i + j) % 3}\n" for i in range(6) for j in range(3))
    code, err = _cli(tmp_path, "item,rater,rating\n" + rows + "6,0,x\n6,1,2\n", capsys=capsys)
    assert code == 2
    assert "row 20: 'x'" in err and "lines of the file" in err and "--categories" in err
    # declared with --categories, the same file fits
    code, err = _cli(
        tmp_path, "item,rater,rating\n" + rows + "6,0,x\n6,1,2\n", "--categories", "1,2,3,x", capsys=capsys
    )
    assert code == 0, err


def test_cli_refuses_grouped_data_read_as_wide(tmp_path, capsys):
    text = "r1,r2,r3,n\n1,1,1,40\n1,2,1,5\n2,2,2,30\n2,1,2,4\n"
    code, err = _cli(tmp_path, text, "--format", "wide", capsys=capsys)
    assert code == 2 and "column 'n' looks like a tally" in err and "--format grouped" in err
    code, err = _cli(tmp_path, text, "--format", "grouped", capsys=capsys)
    assert code == 0, err
    assert "4 patterns of 79 items" in err and "237 ratings" in err


def test_a_grouped_tally_under_another_name_is_pointed_at(caries_path, tmp_path, capsys):
    caries = pd.read_csv(caries_path).rename(columns={"n": "patients"})
    with pytest.raises(RatingDataError) as err:
        RatingData.from_grouped(caries)
    assert "tally column 'n' not found" in str(err.value)
    assert "column 'patients' looks like the tally" in str(err.value) and "tally='patients'" in str(err.value)
    following = RatingData.from_grouped(caries, tally="patients")  # the advice works
    assert following.n_items == caries["patients"].sum()
    # no guess where no column stands out (two candidate counts), nor for text
    two = caries.assign(visits=caries["patients"] * 2)
    with pytest.raises(RatingDataError) as err:
        RatingData.from_grouped(two)
    assert "looks like the tally" not in str(err.value)
    code, err = _cli(tmp_path, caries.to_csv(index=False), "--format", "grouped", capsys=capsys)
    assert code == 2 and "(command line: --tally patients)" in err
