"""Labels that differ only in spelling, and hints that never mix booleans with numbers (issue 28, item 4).

Ratings "yes", "yes " and "Yes", or the composed and decomposed spellings of
"café", are different strings: kept apart by default with a
``LabelSpellingWarning`` that names them and their counts, merged into their
most frequent spelling with ``normalize_labels=True`` (the declared spelling
for declared categories).  No message suggests a category list mixing
booleans with numbers (pandas counts True as 1).
"""

from __future__ import annotations

import unicodedata
import warnings

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater.data.ratings import LabelSpellingWarning, RatingDataError

NFC = unicodedata.normalize("NFC", "café")
NFD = unicodedata.normalize("NFD", "café")


def _long(ratings, items=None, raters=None) -> pd.DataFrame:
    n = len(ratings)
    return pd.DataFrame(
        {
            "item": items if items is not None else [i // 2 for i in range(n)],
            "rater": raters if raters is not None else ["a", "b"] * (n // 2) + ["a"] * (n % 2),
            "rating": ratings,
        }
    )


def test_spellings_of_one_rating_are_kept_apart_with_a_warning_naming_them():
    ratings = ["yes"] * 40 + ["yes "] * 3 + ["Yes"] * 5 + ["no"] * 52
    df = _long(ratings)
    before = df.copy(deep=True)
    with pytest.warns(LabelSpellingWarning) as record:
        data = pyrater.RatingData.from_long(df)
    assert list(data.categories) == ["Yes", "no", "yes", "yes "]
    text = str(record[0].message)
    assert "'Yes' (5 ratings) and 'yes' (40 ratings) and 'yes ' (3 ratings)" in text
    assert "normalize_labels=True" in text and "--normalize-labels" in text
    pd.testing.assert_frame_equal(df, before)  # nothing the caller passed is modified


def test_normalize_labels_merges_into_the_most_frequent_spelling():
    ratings = ["yes"] * 40 + ["yes "] * 3 + ["Yes"] * 5 + ["no"] * 52
    df = _long(ratings)
    before = df.copy(deep=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LabelSpellingWarning)
        data = pyrater.RatingData.from_long(df, normalize_labels=True)
    assert list(data.categories) == ["no", "yes"]
    np.testing.assert_array_equal(data.rating_counts().to_numpy(), [52, 48])
    pd.testing.assert_frame_equal(df, before)
    # the same data without the odd spellings give the same ratings
    clean = pyrater.RatingData.from_long(_long(["yes"] * 48 + ["no"] * 52))
    np.testing.assert_array_equal(np.sort(data.rating), np.sort(clean.rating))


def test_unicode_normalisation_forms_are_named_by_their_code_points():
    assert NFC != NFD
    df = _long([NFC, NFD, NFC, "thé", NFC, "thé"])
    with pytest.warns(LabelSpellingWarning, match=r"'cafe\\u0301' \(1 rating\) and 'caf\\xe9' \(3 ratings\)"):
        data = pyrater.RatingData.from_long(df)
    assert data.n_categories == 3
    merged = pyrater.RatingData.from_long(df, normalize_labels=True)
    assert list(merged.categories) == [NFC, "thé"]


def test_declared_categories_give_the_spelling_and_are_not_warned_about():
    df = _long(["YES", "yes ", "No", "no", " no", "Yes"])
    with pytest.raises(RatingDataError, match="not among the categories"):
        pyrater.RatingData.from_long(df, categories=["no", "yes"])
    data = pyrater.RatingData.from_long(df, categories=["no", "yes"], normalize_labels=True)
    assert list(data.categories) == ["no", "yes"]
    np.testing.assert_array_equal(data.rating_counts().to_numpy(), [3, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("error", LabelSpellingWarning)  # the user's own scale: no warning
        pyrater.RatingData.from_long(_long(["a", "A", "a", "A"]), categories=["a", "A"])


def test_item_and_rater_labels_merge_on_whitespace_and_unicode_not_case():
    df = _long(
        ["y", "n", "y", "n", "y", "n"],
        items=["i1", "i1 ", "i2", "i2", "I2", "I2"],
        raters=["ann", "bob", " ann", "bob", f"z{NFC}", f"z{NFD}"],
    )
    data = pyrater.RatingData.from_long(df, normalize_labels=True)
    assert list(data.unit_labels) == ["I2", "i1", "i2"]  # case kept: identifiers are often case-sensitive
    # a tie goes to the spelling without stray whitespace and in NFC form
    assert list(data.rater_labels) == ["ann", "bob", f"z{NFC}"]


def test_wide_and_grouped_tables_merge_ratings_across_rater_columns():
    wide = pd.DataFrame({"r1": ["yes", "yes ", "no", "Yes"], "r2": ["no", "no", "yes", "yes"]})
    with pytest.warns(LabelSpellingWarning, match="the rater columns"):
        assert pyrater.RatingData.from_wide(wide).n_categories == 4
    data = pyrater.RatingData.from_wide(wide, normalize_labels=True)
    assert list(data.categories) == ["no", "yes"]
    grouped = pd.DataFrame({"r1": ["yes", "Yes", "no"], "r2": ["no", "no ", "yes"], "n": [5, 2, 7]})
    g = pyrater.RatingData.from_grouped(grouped, normalize_labels=True)
    # the first two rows become one pattern: merged, tallies summed
    assert list(g.categories) == ["no", "yes"] and g.n_items == 14 and g.n_units == 2
    np.testing.assert_array_equal(g.weight, [7, 7])
    repeated = pd.DataFrame({"r1": ["yes", "yes", "Yes"], "r2": ["no", "no", "no"], "n": [5, 2, 1]})
    with pytest.raises(RatingDataError, match="pattern rows repeat"):  # repeated as given: the user's to fix
        pyrater.RatingData.from_grouped(repeated, normalize_labels=True)
    as_long = pyrater.RatingData.from_long(g.to_long())
    np.testing.assert_array_equal(as_long.rating_counts().to_numpy(), g.rating_counts().to_numpy())
    cats = pd.DataFrame({"r1": pd.Categorical(["a", "A ", "b"], categories=["a", "A ", "b"]), "r2": ["a", "a", "b"]})
    assert list(pyrater.RatingData.from_wide(cats, normalize_labels=True).categories) == ["a", "b"]


def test_normalize_labels_must_be_a_bool():
    with pytest.raises(ValueError, match="normalize_labels must be True or False, got 'yes'"):
        pyrater.RatingData.from_long(_long(["a", "b"]), normalize_labels="yes")


def test_fit_passes_normalize_labels_to_the_reader():
    df = _long(["yes", "no"] * 20 + ["yes "] * 2)
    fit = pyrater.fit(df, method="em", normalize_labels=True, seed=1)
    assert list(fit.data.categories) == ["no", "yes"]


@pytest.mark.parametrize(
    "values",
    [
        [0, True, 0, 1, 0, False],
        [1, 0, True, False, 1, 1],
        ["1", True, "0", False, "1", "0"],
    ],
)
def test_no_hint_mixes_booleans_with_numbers(values):
    df = _long(values)
    with pytest.raises(RatingDataError) as info:
        pyrater.RatingData.from_long(df)
    text = str(info.value)
    assert text.count("categories=[") == 1 and "counts True as 1 and False as 0" in text and ".astype(str)" in text
    scale = text.split("categories=[", 1)[1].split("]")[0]
    assert all(v.strip().startswith("'") for v in scale.split(","))  # text only: never a bare True, 0 or 1
    # the advice works: text with the scale declared as text
    scale = text.split("categories=[", 1)[1].split("]")[0]
    declared = [v.strip().strip("'") for v in scale.split(",")]
    as_text = pyrater.RatingData.from_long(df.assign(rating=df["rating"].astype(str)), categories=declared)
    assert as_text.n_categories == len(declared) == len({str(v) for v in values})


def test_the_bool_hint_appears_only_when_booleans_meet_numbers():
    df = _long([1, 2, 3, "x", 1, 2])
    with pytest.raises(RatingDataError, match=r"categories=\[1, 2, 3, 'x'\]"):
        pyrater.RatingData.from_long(df)
    assert pyrater.RatingData.from_long(_long([True, False] * 3)).n_categories == 2


# ---------------------------------------------------------------- the order of a scale read from text labels
GRADES = ["none", "mild", "severe"]


def _graded(seed: int = 1) -> pd.DataFrame:
    """Four raters grade 60 items on none < mild < severe, off by one grade 30% of the time."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(60):
        t = int(rng.integers(3))
        for r in range(4):
            k = t if rng.random() < 0.7 else min(2, max(0, t + int(rng.choice([-1, 1]))))
            rows.append((i, r, GRADES[k]))
    return pd.DataFrame(rows, columns=["item", "rater", "rating"])


def test_text_that_reads_as_numbers_is_sorted_by_value():
    df = _long(["1", "10", "2", "9", "10"])
    d = pyrater.RatingData.from_long(df)
    assert list(d.categories) == ["1", "2", "9", "10"]
    assert d.to_long()["rating"].astype(str).tolist() == ["1", "10", "2", "9", "10"]  # each rating keeps its label
    w = pyrater.RatingData.from_wide(pd.DataFrame({"a": ["1", "10", "2"], "b": ["9", "2", None]}))
    assert list(w.categories) == ["1", "2", "9", "10"]
    declared = pyrater.RatingData.from_long(_long(["1", "10", "x"]), categories=["1", "10", "x"])
    assert list(declared.categories) == ["1", "10", "x"]  # a declared scale keeps its order


def test_an_ordinal_use_of_alphabetically_sorted_text_labels_is_warned_about():
    df = _graded()
    d = pyrater.RatingData.from_long(df)
    assert list(d.categories) == ["mild", "none", "severe"]  # the sort, not the scale
    with pytest.warns(pyrater.data.ScaleOrderWarning, match=r"the ordinal model .* 'mild', 'none', 'severe'.*"):
        pyrater.fit(d, "ordinal", method="em", seed=1)
    with pytest.warns(pyrater.data.ScaleOrderWarning, match=r"agreement\(level='ordinal'"):
        pyrater.agreement(d, level="ordinal", ci="none")
    with pytest.warns(pyrater.data.ScaleOrderWarning, match=r"weights='linear'"):
        pyrater.agreement(d, weights="linear", ci="none")
    # grouped data, also when patterns that differ only in spelling are merged (normalize_labels)
    grouped = pd.DataFrame({"a": ["mild", "mild ", "none", "severe"], "b": ["none", "none", "none", "severe"]})
    g = pyrater.RatingData.from_grouped(grouped.assign(n=[3, 2, 4, 5]), normalize_labels=True)
    assert g.weight.tolist() == [5, 4, 5]
    with pytest.warns(pyrater.data.ScaleOrderWarning, match="from_grouped"):
        pyrater.agreement(g, level="ordinal", ci="none")


def test_a_declared_scale_or_a_nominal_use_is_not_warned_about_and_changes_the_result():
    df = _graded()
    sorted_ = pyrater.RatingData.from_long(df)
    declared = pyrater.RatingData.from_long(df, categories=GRADES)
    ordered = pyrater.RatingData.from_long(df.assign(rating=pd.Categorical(df["rating"], GRADES, ordered=True)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for d in (declared, ordered):
            assert list(d.categories) == GRADES
            pyrater.fit(d, "ordinal", method="em", seed=1)
            pyrater.agreement(d, level="ordinal", ci="none")
        pyrater.agreement(sorted_, ci="none")  # nominal: the order does not matter
        pyrater.fit(sorted_, "dawid_skene", method="em", seed=1)
    # the warning is about a real difference: the ordinal coefficient of the graded data depends on the order
    with pytest.warns(pyrater.data.ScaleOrderWarning):
        wrong = pyrater.agreement(sorted_, "krippendorff_alpha", level="ordinal", ci="none").table["estimate"].iloc[0]
    right = pyrater.agreement(declared, "krippendorff_alpha", level="ordinal", ci="none").table["estimate"].iloc[0]
    assert right > wrong + 0.1
