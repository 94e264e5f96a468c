"""pyrater.checking.scoring: metrics against hand-computed values and independent formulas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pyrater import RatingData
from pyrater.checking.scoring import (
    MajorityVote,
    accuracy,
    brier_score,
    ece_noise_floor,
    expected_calibration_error,
    log_loss,
    macro_f1,
    majority_vote,
    predicted_class,
    reliability_diagram,
    score,
    score_arrays,
)

# a small hand-worked example: 6 items, K = 3
Y = np.array([0, 0, 1, 1, 2, 2])
P = np.array(
    [
        [0.7, 0.2, 0.1],  # pred 0, right, conf 0.7
        [0.4, 0.4, 0.2],  # tie 0/1 -> pred 0 (first), right, conf 0.4
        [0.1, 0.8, 0.1],  # pred 1, right, conf 0.8
        [0.6, 0.3, 0.1],  # pred 0, wrong, conf 0.6
        [0.2, 0.2, 0.6],  # pred 2, right, conf 0.6
        [0.3, 0.5, 0.2],  # pred 1, wrong, conf 0.5
    ]
)


def test_predicted_class_ties_go_to_first_column():
    assert predicted_class(P).tolist() == [0, 0, 1, 0, 2, 1]


def test_accuracy_hand_computed():
    assert accuracy(Y, probs=P) == pytest.approx(4 / 6)
    assert accuracy(Y, [0, 0, 1, 1, 2, 2]) == 1.0
    # ties split: item 2 has truth 0 among {0, 1} -> 1/2 credit
    assert accuracy(Y, probs=P, ties="split") == pytest.approx((1 + 0.5 + 1 + 0 + 1 + 0) / 6)


def test_macro_f1_hand_computed():
    pred = predicted_class(P)  # [0, 0, 1, 0, 2, 1]
    # class 0: TP 2, FP 1, FN 0 -> 4/5; class 1: TP 1, FP 1, FN 1 -> 2/4; class 2: TP 1, FP 0, FN 1 -> 2/3
    assert macro_f1(Y, pred) == pytest.approx((4 / 5 + 1 / 2 + 2 / 3) / 3)


def test_macro_f1_equals_harmonic_mean_of_precision_and_recall():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 300)
    yp = np.where(rng.random(300) < 0.6, y, rng.integers(0, 4, 300))
    f1 = []
    for k in range(4):
        prec = np.mean(y[yp == k] == k)
        rec = np.mean(yp[y == k] == k)
        f1.append(2 * prec * rec / (prec + rec))
    assert macro_f1(y, yp) == pytest.approx(np.mean(f1))


def test_macro_f1_class_never_predicted_counts_zero():
    # class 1 is never predicted: F1 = 0; class 0: TP 2, FP 2 -> 2*2/(4+2) = 2/3
    assert macro_f1([0, 0, 1, 1], [0, 0, 0, 0]) == pytest.approx((2 / 3 + 0) / 2)
    # with a label absent from both, averaged only when asked for
    assert macro_f1([0, 0], [0, 0]) == 1.0
    assert macro_f1([0, 0], [0, 0], labels=[0, 1]) == 0.5


def test_brier_hand_computed_and_loop_formula():
    # item 1: (0.7-1)^2 + 0.2^2 + 0.1^2 = 0.14
    first = brier_score(Y[:1], P[:1])
    assert first == pytest.approx(0.09 + 0.04 + 0.01)
    onehot = np.eye(3)[Y]
    assert brier_score(Y, P) == pytest.approx(sum(((P[i] - onehot[i]) ** 2).sum() for i in range(6)) / 6)
    assert brier_score([0, 1], [[1.0, 0.0], [1.0, 0.0]]) == pytest.approx(1.0)  # (0 + 2) / 2


def test_log_loss_hand_computed_and_clipping():
    expected = -np.mean(np.log([0.7, 0.4, 0.8, 0.3, 0.6, 0.2]))
    assert log_loss(Y, P) == pytest.approx(expected)
    assert log_loss([0], [[0.0, 1.0]]) == pytest.approx(-np.log(1e-15))
    assert np.isfinite(log_loss([0], [[0.0, 1.0]]))


def test_ece_hand_computed_uniform_bins():
    # 10 bins of width 0.1, bin b = ((b-1)/10, b/10]:
    # conf 0.4 -> (0.3, 0.4]; 0.5 -> (0.4, 0.5]; 0.6, 0.6 -> (0.5, 0.6]; 0.7 -> (0.6, 0.7]; 0.8 -> (0.7, 0.8]
    # |acc - conf|: 0.4 -> |1 - .4| = .6; 0.5 -> |0 - .5| = .5; 0.6 x2 -> |0.5 - 0.6| = .1 (x2 items);
    # 0.7 -> .3; 0.8 -> .2
    expected = (0.6 + 0.5 + 2 * 0.1 + 0.3 + 0.2) / 6
    assert expected_calibration_error(Y, P, n_bins=10) == pytest.approx(expected)


def test_ece_independent_loop_formula_random():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(4), size=500)
    y = np.array([rng.choice(4, p=row) for row in p])
    B = 15
    conf = p.max(axis=1)
    correct = p.argmax(axis=1) == y
    total = 0.0
    for b in range(B):
        lo, hi = b / B, (b + 1) / B
        inb = (conf > lo) & (conf <= hi) if b > 0 else (conf <= hi)
        if inb.any():
            total += inb.mean() * abs(correct[inb].mean() - conf[inb].mean())
    assert expected_calibration_error(y, p) == pytest.approx(total)
    # the reliability table adds up to the same number
    d = reliability_diagram(y, p)
    assert d["count"].sum() == 500
    has = d["count"] > 0
    assert (d["count"][has] / 500 * d["gap"][has].abs()).sum() == pytest.approx(total)


def test_ece_bin_edges_are_right_closed():
    # confidence exactly 0.5 belongs to (0.4, 0.5] with 10 bins, not (0.5, 0.6]
    d = reliability_diagram([0], [[0.5, 0.5]], n_bins=10)
    assert d.loc[d["count"] > 0, "bin"].tolist() == [4]


def test_ece_perfectly_calibrated_and_quantile_bins():
    # two groups whose accuracy equals their confidence exactly
    p = np.array([[0.8, 0.2]] * 5 + [[0.6, 0.4]] * 5)
    y = np.array([0, 0, 0, 0, 1, 0, 0, 0, 1, 1])
    assert expected_calibration_error(y, p) == pytest.approx(0.0)
    assert expected_calibration_error(y, p, n_bins=2, strategy="quantile") == pytest.approx(0.0)
    # one quantile bin = |overall accuracy - mean confidence|
    assert expected_calibration_error(y, p, n_bins=1, strategy="quantile") == pytest.approx(abs(0.7 - 0.7))
    q = reliability_diagram(y, p, n_bins=2, strategy="quantile")
    assert q["count"].tolist() == [5, 5]


def test_quantile_bins_never_split_equal_confidences():
    p = np.array([[0.9, 0.1]] * 7 + [[0.7, 0.3]] * 3)
    d = reliability_diagram(np.zeros(10, dtype=int), p, n_bins=2, strategy="quantile")
    assert sorted(d["count"].tolist()) == [3, 7]


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="sum to 1"):
        brier_score([0], [[0.5, 0.6]])
    with pytest.raises(ValueError, match="codes"):
        log_loss([2], [[0.5, 0.5]])
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error([0], [[0.5, 0.5]], n_bins=0)
    with pytest.raises(ValueError, match="strategy"):
        expected_calibration_error([0], [[0.5, 0.5]], strategy="equal")
    with pytest.raises(ValueError, match="ties"):
        accuracy([0], [0], ties="random")


def test_score_arrays_and_labelled_score_agree():
    s = score_arrays(Y, P)
    assert s["n"] == 6
    assert s["accuracy"] == pytest.approx(4 / 6)
    assert s["brier"] == pytest.approx(brier_score(Y, P))
    cats = ["lo", "mid", "hi"]
    probs = pd.DataFrame(P[::-1], index=[f"i{k}" for k in range(6)][::-1], columns=cats)
    truth = pd.Series({f"i{k}": cats[Y[k]] for k in range(6)})  # another order than probs
    t = score(probs, truth)
    for key in s:
        assert t[key] == pytest.approx(s[key])
    # a gold table (item, label), as read from a CSV, gives the same scores
    gold = pd.DataFrame({"item": list(truth.index), "label": list(truth)})
    for table in (gold, gold.rename(columns={"item": "id", "label": "gold"}), gold.set_index("item")):
        u = score(probs, table)
        for key in s:
            assert u[key] == pytest.approx(s[key])
    with pytest.raises(ValueError, match="more than one gold label"):
        score(probs, pd.concat([gold, gold.iloc[:1]]))
    with pytest.raises(ValueError, match="columns 'item' and 'label'"):
        score(probs, gold.rename(columns={"item": "id"}).assign(extra=1))
    with pytest.raises(ValueError, match="not rows"):
        score(probs, pd.Series({"nope": "lo"}))
    with pytest.raises(ValueError, match="categories"):
        score(probs, pd.Series({"i0": "huge"}))


# --------------------------------------------------------------- majority vote
def _votes() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item": ["a", "a", "b", "b", "b", "c", "c", "d", "d", "d", "d"],
            "rater": [1, 2, 1, 2, 3, 1, 2, 1, 1, 2, 3],
            "rating": ["no", "yes", "yes", "yes", "no", "maybe", "yes", "maybe", "maybe", "yes", "yes"],
        }
    )


def test_majority_vote_first_tie_break_and_shares():
    data = RatingData.from_long(_votes(), categories=["no", "maybe", "yes"])
    mv = majority_vote(data)
    assert isinstance(mv, MajorityVote)
    # a: no/yes tie -> "no" (first); b: yes; c: maybe/yes tie -> "maybe"; d: repeated rating counts twice,
    # maybe 2 vs yes 2 -> tie -> "maybe"
    assert mv.labels.to_dict() == {"a": "no", "b": "yes", "c": "maybe", "d": "maybe"}
    assert mv.n_tied.to_dict() == {"a": 2, "b": 1, "c": 2, "d": 2}
    shares = mv.class_probabilities()
    assert list(shares.columns) == ["no", "maybe", "yes"]
    np.testing.assert_allclose(shares.loc["b"].to_numpy(), [1 / 3, 0, 2 / 3])
    np.testing.assert_allclose(shares.loc["d"].to_numpy(), [0, 0.5, 0.5])
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)
    assert mv.point_estimate("z").equals(mv.labels)


def test_majority_vote_category_order_decides_first():
    data = RatingData.from_long(_votes(), categories=["yes", "maybe", "no"])
    assert majority_vote(data).labels.to_dict() == {"a": "yes", "b": "yes", "c": "yes", "d": "yes"}


def test_majority_vote_prevalence_tie_break():
    # overall: yes 5, maybe 3, no 2 (repeated rating counted)
    data = RatingData.from_long(_votes(), categories=["no", "maybe", "yes"])
    mv = majority_vote(data, tie_break="prevalence")
    assert mv.labels.to_dict() == {"a": "yes", "b": "yes", "c": "yes", "d": "yes"}
    with pytest.raises(ValueError, match="tie_break"):
        majority_vote(data, tie_break="random")


def test_majority_vote_is_deterministic_under_row_order():
    df = _votes()
    rng = np.random.default_rng(5)
    a = majority_vote(RatingData.from_long(df, categories=["no", "maybe", "yes"]))
    for _ in range(5):
        shuffled = df.iloc[rng.permutation(len(df))]
        b = majority_vote(RatingData.from_long(shuffled, categories=["no", "maybe", "yes"]))
        assert b.labels.sort_index().equals(a.labels.sort_index())


def test_majority_vote_accepts_a_dataframe_and_scores():
    mv = majority_vote(_votes())  # categories sorted: maybe, no, yes
    truth = pd.Series({"a": "yes", "b": "yes", "c": "maybe", "d": "yes"})
    s = score(mv.probabilities, truth, pred=mv.labels)
    # labels: a maybe? no: a = no/yes tie -> "no" (sorted order maybe, no, yes); b yes; c maybe; d maybe
    assert mv.labels.to_dict() == {"a": "no", "b": "yes", "c": "maybe", "d": "maybe"}
    assert s["accuracy"] == pytest.approx(2 / 4)
    y = np.array([2, 2, 0, 2])
    p = mv.probabilities.loc[["a", "b", "c", "d"]].to_numpy()
    # ties split: a: yes among {no, yes} -> 1/2; b: 1; c: maybe among {maybe, yes} -> 1/2; d: yes in {maybe, yes} -> 1/2
    assert accuracy(y, probs=p, ties="split") == pytest.approx((0.5 + 1 + 0.5 + 0.5) / 4)


def test_uniform_bins_respect_decimal_edges():
    # 0.7 * 10 is 7.000000000000001 in floating point; 0.7 must still fall in (0.6, 0.7]
    d = reliability_diagram([0, 0, 0], [[0.7, 0.3], [0.6, 0.4], [0.3 + 0.4, 0.3]], n_bins=10)
    assert d.loc[d["count"] > 0, "bin"].tolist() == [5, 6]
    assert d.loc[6, "count"] == 2


# ------------------------------------------------------------------ noise floor of ECE
def test_ece_noise_floor_equals_the_binomial_expectation():
    """One bin, every item at confidence c: ECE = |Bin(n, c) / n - c|, whose mean is a finite sum."""
    from scipy.stats import binom

    for n, c in ((4, 0.5), (25, 0.7), (60, 0.9)):
        k = np.arange(n + 1)
        exact = float(np.sum(binom.pmf(k, n, c) * np.abs(k / n - c)))
        got = ece_noise_floor(np.tile([c, 1 - c], (n, 1)), n_bins=1, reps=20000, seed=3)
        assert got == pytest.approx(exact, abs=4 * np.sqrt(c * (1 - c) / n) / np.sqrt(20000))


def test_ece_noise_floor_matches_brute_force_draws_and_shrinks_with_items():
    rng = np.random.default_rng(8)
    q = rng.dirichlet([1.0, 1.0, 1.0], size=300)
    # the same labels drawn one at a time and scored by expected_calibration_error
    draw = np.random.default_rng(5)
    brute = []
    for _ in range(30):
        y = np.minimum((draw.random(300)[:, None] > np.cumsum(q, axis=1)).sum(axis=1), 2)
        brute.append(expected_calibration_error(y, q))
    assert ece_noise_floor(q, reps=30, seed=np.random.default_rng(5)) == pytest.approx(np.mean(brute), abs=1e-12)
    assert ece_noise_floor(q, seed=1) == ece_noise_floor(q, seed=1)  # seeded
    small, large = ece_noise_floor(q[:30], seed=1), ece_noise_floor(np.tile(q, (10, 1)), seed=1)
    assert small > 2 * ece_noise_floor(q, seed=1) > 4 * large  # about 1 / sqrt(n) once bins fill
    assert np.isnan(ece_noise_floor(np.zeros((0, 3))))
    with pytest.raises(ValueError, match="reps must be an integer >= 1"):
        ece_noise_floor(q, reps=0)
