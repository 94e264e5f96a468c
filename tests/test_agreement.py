"""Agreement statistics (pyrater.decisions.agreement): published examples, reference packages, designs.

References checked:

* Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the
  4-coder, 12-unit reliability data with missing values: alpha nominal 0.743,
  ordinal 0.815, interval 0.849 (and ratio 0.797, fast-krippendorff's tests).
* Fleiss (1971), 30 patients x 6 psychiatrists x 5 diagnoses: kappa 0.430.
* Gwet (2014) / irrCAC documentation, the same 12-unit data as
  ``cac.raw4raters``: AC1 0.77544 (se 0.14295, 95% CI 0.46081-1), Fleiss' kappa
  0.76117 (se 0.15302, CI 0.42438-1), AC2 with bipolar weights 0.90037 (se
  0.10582), percent agreement 0.81818; and the 3x3 abstractors table
  (``cont3x3abstractors``): Cohen's kappa 0.79641, se 0.05891.
* SAS PROC FREQ (statsmodels' tests): Cohen's kappa 0.4842, ASE 0.1380, 95%
  CI 0.2137-0.7547; linearly weighted 0.4701, ASE 0.1457, CI 0.1845-0.7558.
* The krippendorff and statsmodels packages on random data with missing ratings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater.decisions import _agreement_core as core
from pyrater.decisions import agreement, model_agreement
from pyrater.decisions.agreement import implied_agreement

nan = np.nan
#: Krippendorff (2011): coders (rows) x units (columns)
KRIPP = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)

#: Fleiss (1971): diagnoses of 30 patients by 6 psychiatrists (raters differ by patient)
FLEISS_1971 = np.array(
    [
        [4, 4, 4, 4, 4, 4],
        [2, 2, 2, 5, 5, 5],
        [2, 3, 3, 3, 3, 5],
        [5, 5, 5, 5, 5, 5],
        [2, 2, 2, 4, 4, 4],
        [1, 1, 3, 3, 3, 3],
        [3, 3, 3, 3, 5, 5],
        [1, 1, 3, 3, 3, 4],
        [1, 1, 4, 4, 4, 4],
        [5, 5, 5, 5, 5, 5],
        [1, 4, 4, 4, 4, 4],
        [1, 2, 4, 4, 4, 4],
        [2, 2, 2, 3, 3, 3],
        [1, 4, 4, 4, 4, 4],
        [2, 2, 4, 4, 4, 5],
        [3, 3, 3, 3, 3, 5],
        [1, 1, 1, 4, 5, 5],
        [1, 1, 1, 1, 1, 2],
        [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 5, 5, 5],
        [5, 5, 5, 5, 5, 5],
        [2, 4, 4, 4, 4, 4],
        [2, 2, 4, 5, 5, 5],
        [1, 1, 4, 4, 4, 4],
        [1, 4, 4, 4, 4, 5],
        [2, 2, 2, 2, 2, 4],
        [1, 1, 1, 1, 5, 5],
        [2, 2, 4, 4, 4, 4],
        [1, 3, 3, 3, 3, 3],
        [5, 5, 5, 5, 5, 5],
    ]
)


def kripp_wide() -> pd.DataFrame:
    return pd.DataFrame(KRIPP.T, columns=["A", "B", "C", "D"], index=pd.RangeIndex(1, 13, name="unit"))


def table_to_long(table: np.ndarray, categories) -> pd.DataFrame:
    """Two raters' cross-table (counts) as a long frame, one item per count."""
    rows = []
    item = 0
    for a, ca in enumerate(categories):
        for b, cb in enumerate(categories):
            for _ in range(int(table[a, b])):
                item += 1
                rows += [(item, "r1", ca), (item, "r2", cb)]
    return pd.DataFrame(rows, columns=["item", "rater", "rating"])


def random_wide(rng: np.random.Generator, n: int, r: int, K: int, missing: float = 0.3) -> pd.DataFrame:
    truth = rng.integers(1, K + 1, size=n)
    X = np.where(rng.random((n, r)) < 0.6, truth[:, None], rng.integers(1, K + 1, size=(n, r))).astype(float)
    X[rng.random((n, r)) < missing] = np.nan
    X = X[np.sum(~np.isnan(X), axis=1) >= 1]
    return pd.DataFrame(X, columns=[f"R{j}" for j in range(r)])


# ------------------------------------------------------------------ published examples
def test_krippendorff_published_example_all_levels():
    wide = kripp_wide()
    expect = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
    for level, value in expect.items():
        res = agreement(wide, "krippendorff_alpha", level=level, data_format="wide", n_boot=200)
        assert round(res["krippendorff_alpha"].estimate, 3) == value, level
        assert res["krippendorff_alpha"].n_items == 11  # unit 12 has a single value: not pairable


def test_fleiss_1971_kappa():
    wide = pd.DataFrame(FLEISS_1971, columns=[f"p{j}" for j in range(6)])
    res = agreement(wide, "fleiss_kappa", data_format="wide")
    assert round(res["fleiss_kappa"].estimate, 3) == 0.430


def test_gwet_handbook_values_raw4raters():
    wide = kripp_wide()
    res = agreement(wide, ["percent_agreement", "fleiss_kappa", "gwet_ac", "krippendorff_alpha"], data_format="wide")
    t = res.table
    assert t.loc["gwet_ac", "estimate"] == pytest.approx(0.77544, abs=5e-6)
    assert t.loc["gwet_ac", "se"] == pytest.approx(0.14295, abs=5e-6)
    assert t.loc["gwet_ac", "ci_lower"] == pytest.approx(0.46081, abs=5e-6)
    assert t.loc["gwet_ac", "ci_upper"] == 1.0
    assert t.loc["fleiss_kappa", "estimate"] == pytest.approx(0.76117, abs=5e-6)
    assert t.loc["fleiss_kappa", "se"] == pytest.approx(0.15302, abs=5e-6)
    assert t.loc["fleiss_kappa", "ci_lower"] == pytest.approx(0.42438, abs=5e-6)
    assert t.loc["percent_agreement", "estimate"] == pytest.approx(0.81818, abs=5e-6)
    assert t.loc["fleiss_kappa", "expected"] == pytest.approx(0.23872, abs=5e-6)
    assert t.loc["gwet_ac", "expected"] == pytest.approx(0.19032, abs=5e-6)
    # alpha's linearised se: Gwet's R code (pa' in the linearised term) 0.1455;
    # the Python port of irrCAC (pa in that term) prints 0.14557
    assert t.loc["krippendorff_alpha", "se"] == pytest.approx(0.14557, abs=2e-4)
    ac2 = agreement(wide, "gwet_ac", weights="bipolar", data_format="wide")["gwet_ac"]
    assert ac2.estimate == pytest.approx(0.90037, abs=5e-6)
    assert ac2.se == pytest.approx(0.10582, abs=5e-6)


def test_cohen_sas_example_and_gwet_abstractors():
    cats = [1, 2, 3]
    long = table_to_long(np.array([[0, 4, 1], [0, 8, 0], [0, 1, 5]]), cats)
    res = agreement(long, "cohen_kappa", categories=cats)["cohen_kappa"]
    assert res.estimate == pytest.approx(0.4842, abs=5e-5)
    assert res.se == pytest.approx(0.1380, abs=5e-5)
    assert (res.ci_lower, res.ci_upper) == pytest.approx((0.2137, 0.7547), abs=5e-5)
    lin = agreement(long, "cohen_kappa", weights="linear", categories=cats)["cohen_kappa"]
    assert lin.estimate == pytest.approx(0.4701, abs=5e-5)
    assert lin.se == pytest.approx(0.1457, abs=5e-5)
    assert (lin.ci_lower, lin.ci_upper) == pytest.approx((0.1845, 0.7558), abs=5e-5)
    abstractors = np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]])
    gw = agreement(table_to_long(abstractors, ["Ectopic", "AIU", "NIU"]), "cohen_kappa")["cohen_kappa"]
    assert gw.estimate == pytest.approx(0.79641, abs=5e-6)
    assert gw.se == pytest.approx(0.05891, abs=5e-6)


# ------------------------------------------------------------------ reference packages
def test_against_krippendorff_package_with_missing_values():
    kd = pytest.importorskip("krippendorff")
    rng = np.random.default_rng(11)
    for rep in range(5):
        wide = random_wide(rng, n=int(rng.integers(20, 80)), r=int(rng.integers(2, 6)), K=4, missing=0.35)
        for level in ("nominal", "ordinal", "interval", "ratio"):
            ours = agreement(wide, "krippendorff_alpha", level=level, data_format="wide", ci="none")
            theirs = kd.alpha(reliability_data=wide.to_numpy().T, level_of_measurement=level, value_domain=[1, 2, 3, 4])
            assert ours["krippendorff_alpha"].estimate == pytest.approx(theirs, abs=1e-10), (rep, level)


def test_against_statsmodels():
    sm = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = np.random.default_rng(3)
    # Fleiss on complete data
    wide = random_wide(rng, n=60, r=5, K=4, missing=0.0)
    table, _ = sm.aggregate_raters(wide.to_numpy().astype(int), n_cat=None)
    assert agreement(wide, "fleiss_kappa", data_format="wide")["fleiss_kappa"].estimate == pytest.approx(
        sm.fleiss_kappa(table), abs=1e-12
    )
    # Cohen, unweighted and weighted, estimate and FCE standard error
    for _ in range(3):
        t = rng.integers(0, 12, size=(4, 4)) + np.diag(rng.integers(5, 20, size=4))
        long = table_to_long(t, [1, 2, 3, 4])
        for weights, sm_kw in (
            ("identity", {}),
            ("linear", {"weights": [0, 1, 2, 3], "wt": "linear"}),
            ("quadratic", {"weights": [0, 1, 2, 3], "wt": "quadratic"}),
        ):
            ours = agreement(long, "cohen_kappa", weights=weights)["cohen_kappa"]
            theirs = sm.cohens_kappa(t, **sm_kw)
            assert ours.estimate == pytest.approx(theirs.kappa, abs=1e-12)
            assert ours.se == pytest.approx(theirs.std_kappa, abs=1e-12)


# ------------------------------------------------------------------ designs and formats
def test_formats_give_identical_results(caries_path):
    caries = pd.read_csv(caries_path)
    grouped = pyrater.as_rating_data(caries, data_format="grouped", tally="n")
    expanded = pyrater.RatingData.from_long(grouped.to_long())
    wide = expanded.to_wide()
    a = agreement(grouped).table
    b = agreement(expanded).table
    c = agreement(wide, data_format="wide").table
    num = ["estimate", "se", "ci_lower", "ci_upper", "observed", "expected", "n_items"]
    pd.testing.assert_frame_equal(a[num], b[num], check_exact=False, rtol=1e-10, atol=1e-12)
    pd.testing.assert_frame_equal(a[num], c[num], check_exact=False, rtol=1e-10, atol=1e-12)
    two = grouped.rater_labels[:2].tolist()
    ca = agreement(grouped, "cohen_kappa", raters=two, weights="linear").table
    cb = agreement(expanded, "cohen_kappa", raters=two, weights="linear").table
    pd.testing.assert_frame_equal(ca[num], cb[num], check_exact=False, rtol=1e-10, atol=1e-12)


def test_bootstrap_agrees_with_analytic_and_is_seeded(caries_path):
    sim = pyrater.simulate("dawid_skene", 1500, 5, n_categories=3, raters_per_item=3, seed=4)
    an = agreement(sim.data, ci="analytic").table
    bo = agreement(sim.data, ci="bootstrap", n_boot=1000, seed=1).table
    bo2 = agreement(sim.data, ci="bootstrap", n_boot=1000, seed=1).table
    pd.testing.assert_frame_equal(bo, bo2)
    assert (bo["ci_method"].str.startswith("bootstrap")).all()
    np.testing.assert_allclose(an["estimate"], bo["estimate"])
    np.testing.assert_allclose(bo["se"], an["se"], rtol=0.12)
    # grouped data: the multinomial bootstrap over patterns matches the item bootstrap in spread
    g = pyrater.as_rating_data(pd.read_csv(caries_path), data_format="grouped", tally="n")
    e = pyrater.RatingData.from_long(g.to_long())
    sg = agreement(g, "fleiss_kappa", ci="bootstrap", n_boot=1000, seed=2)["fleiss_kappa"].se
    se = agreement(e, "fleiss_kappa", ci="bootstrap", n_boot=1000, seed=3)["fleiss_kappa"].se
    sa = agreement(g, "fleiss_kappa")["fleiss_kappa"].se
    assert sg == pytest.approx(se, rel=0.12) and sg == pytest.approx(sa, rel=0.12)


def test_ordinal_alpha_is_bootstrapped_by_default():
    res = agreement(kripp_wide(), "krippendorff_alpha", level="ordinal", data_format="wide", n_boot=500, seed=5)
    row = res["krippendorff_alpha"]
    assert row.ci_method.startswith("bootstrap") and row.ci_lower < row.estimate <= row.ci_upper <= 1


def test_interval_coverage_against_model_truth():
    """95% intervals cover the population coefficients (computed from pi and theta) about 95% of the time."""
    rng = np.random.default_rng(0)
    K, J = 3, 4
    pi = np.array([0.5, 0.3, 0.2])
    theta = np.stack(
        [np.full((K, K), (1 - a) / (K - 1)) + np.eye(K) * (a - (1 - a) / (K - 1)) for a in (0.8, 0.7, 0.65, 0.6)]
    )
    truth = implied_agreement(pi[None], theta[None], np.eye(K), pairs=False)
    hits = {s: 0 for s in ("percent_agreement", "fleiss_kappa", "gwet_ac")}
    reps = 150
    for _ in range(reps):
        sim = pyrater.simulate("dawid_skene", 150, J, n_categories=K, pi=pi, theta=theta, seed=int(rng.integers(2**31)))
        t = agreement(sim.data, list(hits)).table
        for s in hits:
            hits[s] += t.loc[s, "ci_lower"] <= truth[s][0] <= t.loc[s, "ci_upper"]
    for s, h in hits.items():
        assert 0.88 <= h / reps <= 0.995, (s, h / reps)


def test_missing_ratings_and_single_ratings():
    # an item rated once counts in the classification probabilities (Gwet), not in observed agreement
    wide = pd.DataFrame({"A": [1, 2, 1, 2, 1], "B": [1, 2, 2, nan, 1], "C": [1, nan, 1, nan, nan]})
    t = agreement(wide, data_format="wide", ci="none").table
    assert t.loc["percent_agreement", "n_items"] == 4  # the items it averages over (two ratings or more)
    assert t.loc["fleiss_kappa", "n_items"] == 5  # item 4's single rating enters the chance agreement
    assert t.loc["krippendorff_alpha", "n_items"] == 4
    # percent agreement by hand: items 1 (3/3 agree), 2 (1), 3 (1 of 3 pairs), 5 (1)
    assert t.loc["percent_agreement", "estimate"] == pytest.approx((1 + 1 + 1 / 3 + 1) / 4)


def test_weights_and_levels():
    wide = kripp_wide()
    res = agreement(wide, level="interval", data_format="wide")
    assert res["gwet_ac"].weights == "quadratic"
    assert np.allclose(res.weights.to_numpy(), core.weight_matrix("quadratic", np.arange(1, 6.0)))
    # custom weights equal to the identity give the unweighted coefficients
    a = agreement(wide, weights=np.eye(5), data_format="wide", ci="none").table
    b = agreement(wide, data_format="wide", ci="none").table
    assert a.loc[["fleiss_kappa", "gwet_ac"], "estimate"].tolist() == pytest.approx(
        b.loc[["fleiss_kappa", "gwet_ac"], "estimate"].tolist()
    )


def test_text_categories_need_values_for_interval():
    long = pd.DataFrame(
        {"item": [1, 1, 2, 2, 3, 3], "rater": ["a", "b"] * 3, "rating": ["lo", "lo", "hi", "mid", "mid", "mid"]}
    )
    with pytest.raises(ValueError, match="values="):
        agreement(long, level="interval")
    res = agreement(long, "krippendorff_alpha", level="interval", values={"lo": 0, "mid": 1, "hi": 2}, ci="none")
    assert np.isfinite(res["krippendorff_alpha"].estimate)


def test_cohen_needs_two_raters_and_no_repeats():
    wide = kripp_wide()
    with pytest.raises(ValueError, match="exactly two raters"):
        agreement(wide, "cohen_kappa", data_format="wide")
    two = agreement(wide, "cohen_kappa", raters=["A", "B"], data_format="wide")["cohen_kappa"]
    assert two.n_items == 9  # items rated by both A and B
    rep = pd.DataFrame({"item": [1, 1, 1, 2, 2], "rater": ["a", "a", "b", "a", "b"], "rating": [1, 2, 1, 2, 2]})
    with pytest.raises(ValueError, match="more than once"):
        agreement(rep, "cohen_kappa")
    # the many-rater coefficients take repeated ratings as separate ratings
    assert np.isfinite(agreement(rep, "fleiss_kappa", ci="none")["fleiss_kappa"].estimate)


def test_bad_arguments_are_named():
    wide = kripp_wide()
    for kwargs, word in (
        ({"statistics": "kappa"}, "statistics"),
        ({"level": "cardinal"}, "level"),
        ({"ci": "exact"}, "ci"),
        ({"prob": 1.5}, "prob"),
        ({"n_boot": 10}, "n_boot"),
        ({"seed": -1}, "seed"),
        ({"weights": "cubic"}, "weights"),
        ({"weights": np.ones((2, 2))}, "weights"),
        ({"raters": ["A", "Z"]}, "raters"),
    ):
        with pytest.raises(ValueError, match=word):
            agreement(wide, data_format="wide", **kwargs)
    with pytest.raises(ValueError, match="two or more ratings"):
        agreement(pd.DataFrame({"item": [1, 2], "rater": ["a", "b"], "rating": [1, 2]}))


def test_caller_frame_unchanged():
    wide = kripp_wide()
    before = wide.copy()
    agreement(wide, data_format="wide", ci="bootstrap", n_boot=200)
    pd.testing.assert_frame_equal(wide, before)


def test_undefined_kappa_is_nan():
    wide = pd.DataFrame({"A": [1, 1, 1], "B": [1, 1, 1]})
    res = agreement(wide, ["fleiss_kappa", "gwet_ac"], data_format="wide", categories=[1, 2])
    assert np.isnan(res["fleiss_kappa"].estimate)
    assert res["gwet_ac"].estimate == pytest.approx(1.0)


# ------------------------------------------------------------------ model-based agreement
def test_implied_agreement_matches_observed_on_large_simulation():
    sim = pyrater.simulate("dawid_skene", 30000, 5, n_categories=3, raters_per_item=3, seed=8)
    implied = implied_agreement(sim.pi[None], sim.theta[None], np.eye(3), pairs=True)
    obs = agreement(sim.data, ["percent_agreement", "fleiss_kappa", "gwet_ac"]).table
    for s in ("percent_agreement", "fleiss_kappa", "gwet_ac"):
        assert abs(obs.loc[s, "estimate"] - implied[s][0]) < 3 * obs.loc[s, "se"], s
    # per-rater accuracy: share of a rater's ratings equal to the true class
    z = sim.z[sim.data.unit]
    for j in range(5):
        sel = sim.data.rater == j
        assert implied["accuracy"][0, j] == pytest.approx(np.mean(sim.data.rating[sel] == z[sel]), abs=0.02)
    # pairwise Cohen's kappa of raters 0 and 1 from their co-rated items
    a = agreement(sim.data, "cohen_kappa", raters=[1, 2])["cohen_kappa"]
    assert abs(a.estimate - implied["pair_kappa"][0, 0, 1]) < 3 * a.se


@pytest.mark.filterwarnings("ignore:MCMC problems")
def test_model_agreement_point_and_draws():
    theta = np.array(
        [[[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.3, 0.7]], [[0.75, 0.25], [0.1, 0.9]], [[0.6, 0.4], [0.4, 0.6]]]
    )
    sim = pyrater.simulate("dawid_skene", 400, 4, n_categories=2, raters_per_item=3, pi=[0.6, 0.4], theta=theta, seed=2)
    em = pyrater.em(sim.data, method="map")
    ma = model_agreement(em)
    assert ma.n_draws == 0 and ma.raters["accuracy_se"].isna().all()
    assert ma.raters["accuracy"].between(0, 1).all()
    gibbs = pyrater.fit(sim.data, "dawid_skene", method="gibbs", draws=300, warmup=200, chains=2, seed=3)
    mb = model_agreement(gibbs, prob=0.8, n_draws=200, seed=1)
    assert mb.n_draws == 200
    r = mb.raters
    assert ((r["accuracy_lower"] <= r["accuracy"]) & (r["accuracy"] <= r["accuracy_upper"])).all()
    assert (r["accuracy_se"] > 0).all()
    # posterior means near the EM mode, and the true accuracies inside wide intervals
    true_acc = implied_agreement(sim.pi[None], sim.theta[None], np.eye(2), pairs=False)["accuracy"][0]
    assert (
        np.mean((mb.raters["accuracy_lower"] - 0.05 <= true_acc) & (true_acc <= mb.raters["accuracy_upper"] + 0.05))
        >= 0.75
    )
    long = mb.to_frame()
    assert {"rater_accuracy", "rater_kappa", "fleiss_kappa", "pair_cohen_kappa"} <= set(long["statistic"])
    assert len(mb.pairs) == 6


def test_model_agreement_homogeneous_and_weights():
    sim = pyrater.simulate("dawid_skene", 300, 3, n_categories=3, raters_per_item=2, seed=5)
    fit = pyrater.em(sim.data, "homogeneous", method="map")
    ma = model_agreement(fit)
    # one error matrix for all raters: identical accuracies
    assert np.ptp(ma.raters["accuracy"].to_numpy()) < 1e-12
    mq = model_agreement(fit, weights="quadratic")
    assert (mq.raters["accuracy"] >= ma.raters["accuracy"] - 1e-12).all()  # partial credit only adds
    with pytest.raises(TypeError, match="fit"):
        model_agreement(sim.data)
