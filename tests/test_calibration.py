"""pyrater.calibrate (temperature scaling on gold items) and tempered class posteriors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_softmax

import pyrater
from pyrater.checking.calibration import (
    LOG_T_GRID,
    apply_bayes_temperature,
    apply_temperature,
    confidence_prior,
    fit_bayes_temperature,
    fit_temperature,
    min_gold_items,
    stratified_folds,
)
from pyrater.checking.scoring import expected_calibration_error, log_loss


def distorted(n: int, K: int, power: float, seed: int, bias: np.ndarray | None = None):
    """Calibrated probabilities p (classes drawn from them, shifted by ``bias``), reported as p**power renormalised."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 1.5, size=(n, K))
    log_p = log_softmax(logits, axis=1)
    log_true = log_p if bias is None else log_softmax(log_p + bias[None, :], axis=1)
    u = rng.random(n)[:, None]
    y = (u > np.cumsum(np.exp(log_true), axis=1)).sum(axis=1)
    q = np.exp(log_softmax(power * log_p, axis=1))
    items = pd.Index([f"it{i}" for i in range(n)], name="item")
    cats = pd.Index(["a", "b", "c", "d"][:K], name="category")
    probs = pd.DataFrame(q, index=items, columns=cats)
    gold = pd.Series(cats.to_numpy()[y], index=items, name="truth")
    return probs, gold


@pytest.fixture(scope="module")
def sim_fit():
    sim = pyrater.simulate("dawid_skene", n_items=300, n_raters=4, n_categories=3, seed=11)
    fit = pyrater.em(sim.data, method="ml")
    gold = pd.Series(sim.data.categories.to_numpy()[sim.z[:80]], index=sim.data.unit_labels[:80], name="truth")
    return sim, fit, gold


# ------------------------------------------------------------------ recovery
@pytest.mark.parametrize("power", [0.5, 3.0])
def test_temperature_recovers_the_power(power):
    probs, gold = distorted(6000, 3, power, seed=1)
    cal = pyrater.calibrate(probs, gold, method="temperature", seed=0, prior_sd=None, floor=1e-15)
    assert cal.temperature == pytest.approx(power, rel=0.06)
    # fitting the floor too: a low floor (it touches only the rare tiny probabilities), same temperature
    fitted = pyrater.calibrate(probs, gold, method="temperature", seed=0, prior_sd=None)
    assert fitted.floor <= 1e-4 and fitted.temperature == pytest.approx(power, rel=0.06)
    # temperature scaling keeps every item's most probable class
    assert (cal.probabilities.to_numpy().argmax(1) == probs.to_numpy().argmax(1)).all()
    # the cross-validated scores improve on the distorted probabilities and approach the truth
    b, a = cal.scores.loc["before"], cal.scores.loc["after"]
    assert a["log_loss"] < b["log_loss"] and a["ece"] < b["ece"] and a["ece"] < 0.03
    assert a["accuracy"] == b["accuracy"]
    assert np.allclose(cal.fold_temperatures, power, rtol=0.1)


def test_temperature_and_bias_recover_both():
    bias = np.array([0.0, 0.6, -0.4])
    probs, gold = distorted(8000, 3, 2.0, seed=2, bias=bias)
    cal = pyrater.calibrate(probs, gold, method="temperature+bias", seed=0, prior_sd=None)
    assert cal.temperature == pytest.approx(2.0, rel=0.08)
    np.testing.assert_allclose(cal.bias.to_numpy(), bias, atol=0.12)
    assert list(cal.bias.index) == list(probs.columns)


def test_fit_temperature_agrees_with_a_direct_one_dimensional_search():
    probs, gold = distorted(500, 4, 1.7, seed=3)
    y = probs.columns.get_indexer(gold)
    log_p = np.log(probs.to_numpy())
    t, b = fit_temperature(log_p, y, prior_sd=None)
    nll = lambda lt: -log_softmax(log_p * np.exp(-lt), axis=1)[np.arange(y.size), y].sum()  # noqa: E731
    ref = minimize_scalar(nll, bounds=(-3, 3), method="bounded", options={"xatol": 1e-10})
    assert np.log(t) == pytest.approx(ref.x, abs=1e-4)
    assert not b.any()


def test_prior_keeps_the_temperature_finite_when_every_gold_item_is_right():
    probs, gold = distorted(200, 2, 1.0, seed=4)
    right = probs.idxmax(axis=1) == gold
    few = gold[right].iloc[:12]
    assert pyrater.calibrate(probs, few, method="temperature", prior_sd=None, seed=0).temperature == pytest.approx(
        0.01
    )  # ML runs to the bound
    t = pyrater.calibrate(probs, few, method="temperature", seed=0).temperature
    assert 0.2 < t < 1.0


# ------------------------------------------------------------------ posterior-predictive temperature (default)
@pytest.mark.parametrize("power", [0.5, 3.0])
def test_bayes_temperature_recovers_the_power_and_keeps_the_argmax(power):
    probs, gold = distorted(4000, 3, power, seed=1)
    cal = pyrater.calibrate(probs, gold, seed=0, floor=1e-15)  # default method
    assert cal.method == "bayes-temperature"
    w = cal.temperature_weights
    assert w.shape == LOG_T_GRID.shape and w.sum() == pytest.approx(1.0)
    # with 4000 gold items the posterior of log T is narrow and centred at log(power)
    mean = float(w @ LOG_T_GRID)
    sd = float(np.sqrt(w @ (LOG_T_GRID - mean) ** 2))
    assert mean == pytest.approx(np.log(power), abs=0.06) and sd < 0.06
    assert cal.temperature == pytest.approx(power, rel=0.08)
    assert (cal.probabilities.to_numpy().argmax(1) == probs.to_numpy().argmax(1)).all()
    b, a = cal.scores.loc["before"], cal.scores.loc["after"]
    assert a["log_loss"] < b["log_loss"] and a["ece"] < b["ece"] and a["ece"] < 0.03
    assert a["accuracy"] == b["accuracy"]
    # with many items the mixture is close to the single penalised-ML temperature map
    ml = pyrater.calibrate(probs, gold, method="temperature", seed=0, prior_sd=None, floor=1e-15)
    np.testing.assert_allclose(cal.probabilities.to_numpy(), ml.probabilities.to_numpy(), atol=0.02)


def test_confidence_prior_is_uniform_in_the_mean_calibrated_confidence():
    probs, _ = distorted(300, 4, 2.5, seed=12)
    p = probs.to_numpy()
    c = 1e-4
    log_prior = confidence_prior(p, c)
    g = LOG_T_GRID
    edges = np.concatenate([[g[0]], 0.5 * (g[1:] + g[:-1]), [g[-1]]])
    # second route: the mean top-class probability at each cell edge, through apply_temperature
    m = np.array([apply_temperature(np.log(np.maximum(p, c)), np.exp(e)).max(axis=1).mean() for e in edges])
    assert (np.diff(m) <= 1e-12).all()  # softer with larger T
    np.testing.assert_allclose(np.exp(log_prior), -np.diff(m) / (m[0] - m[-1]), rtol=1e-8, atol=1e-14)
    # only every k-th item beyond max_items
    sub = confidence_prior(p, c, max_items=100)
    np.testing.assert_allclose(sub, confidence_prior(p[np.linspace(0, 299, 100).round().astype(int)], c))
    # probabilities that a temperature cannot change get a flat prior
    flat = confidence_prior(np.full((5, 3), 1 / 3), c)
    np.testing.assert_allclose(np.exp(flat), 1 / g.size)


def test_bayes_posterior_and_mixture_agree_with_direct_computation():
    probs, gold = distorted(40, 3, 2.0, seed=13)
    p = probs.to_numpy()
    y = probs.columns.get_indexer(gold)
    floors = (1e-15, 1e-2)
    priors = {c: confidence_prior(p, c) for c in floors}
    c, w = fit_bayes_temperature(p, y, priors)
    # route 2: log posterior from apply_temperature at every grid point, floor by marginal likelihood
    best = None
    for cand in floors:
        lp = np.log(np.maximum(p, cand))
        ll = np.array([np.log(apply_temperature(lp, np.exp(t))[np.arange(y.size), y]).sum() for t in LOG_T_GRID])
        post = priors[cand] + ll
        ml = np.logaddexp.reduce(post)
        if best is None or ml > best[0]:
            best = (ml, cand, np.exp(post - ml))
    assert c == best[1]
    np.testing.assert_allclose(w, best[2], rtol=1e-6, atol=1e-12)
    lp = np.log(np.maximum(p, c))
    direct = sum(wj * apply_temperature(lp, np.exp(t)) for wj, t in zip(w, LOG_T_GRID))
    np.testing.assert_allclose(apply_bayes_temperature(lp, w), direct, atol=1e-9)
    # all weight on one grid point = plain temperature scaling at that T
    one = np.zeros_like(w)
    one[40] = 1.0
    np.testing.assert_allclose(
        apply_bayes_temperature(lp, one), apply_temperature(lp, np.exp(LOG_T_GRID[40])), atol=1e-12
    )


def test_bayes_temperature_with_every_gold_item_right_stays_honest():
    # 12 gold items, all classified correctly: ML sends T to 0 (certainty); the posterior-predictive map
    # reports the confidence that 12 right out of 12 supports, well below 1
    probs, gold = distorted(400, 2, 1.0, seed=4)
    right = probs.idxmax(axis=1) == gold
    few = gold[right].iloc[:12]
    cal = pyrater.calibrate(probs, few, seed=0)
    conf = cal.probabilities.loc[few.index].max(axis=1)
    assert 0.8 < conf.mean() < 0.97
    assert (cal.probabilities.to_numpy().argmax(1) == probs.to_numpy().argmax(1)).all()
    assert np.isfinite(cal.temperature) and cal.fold_temperatures.shape == (5,)


# ------------------------------------------------------------------ cross-validation
def test_cv_is_reproducible_by_seed_and_stratified():
    probs, gold = distorted(300, 3, 2.5, seed=5)
    c1 = pyrater.calibrate(probs, gold, seed=7)
    c2 = pyrater.calibrate(probs, gold, seed=7)
    c3 = pyrater.calibrate(probs, gold, seed=8)
    np.testing.assert_array_equal(c1.probabilities.to_numpy(), c2.probabilities.to_numpy())
    pd.testing.assert_frame_equal(c1.scores, c2.scores)
    pd.testing.assert_series_equal(c1.folds, c2.folds)
    assert not c1.folds.equals(c3.folds)
    table = pd.crosstab(gold, c1.folds)
    assert (table.max(axis=1) - table.min(axis=1)).max() <= 1  # each class spread evenly over the folds
    assert c1.folds.value_counts().max() - c1.folds.value_counts().min() <= 1


def test_cv_scores_are_the_scores_of_out_of_fold_maps():
    probs, gold = distorted(250, 3, 2.0, seed=6)
    cal = pyrater.calibrate(probs, gold, method="temperature", cv=4, seed=3)
    y = probs.columns.get_indexer(gold)
    log_p = np.log(np.maximum(probs.loc[gold.index].to_numpy(), 1e-15))
    folds = stratified_folds(y, 4, np.random.default_rng(3))
    np.testing.assert_array_equal(folds, cal.folds.to_numpy())
    oof = np.empty_like(log_p)
    for f in range(4):
        t, b = fit_temperature(log_p[folds != f], y[folds != f])
        oof[folds == f] = apply_temperature(log_p[folds == f], t, b)
    cal = pyrater.calibrate(probs, gold, method="temperature", cv=4, seed=3, floor=1e-15)
    assert cal.scores.loc["after", "ece"] == pytest.approx(expected_calibration_error(y, oof))
    assert cal.scores.loc["after", "log_loss"] == pytest.approx(log_loss(y, oof))
    assert cal.scores.loc["before", "log_loss"] == pytest.approx(log_loss(y, probs.loc[gold.index].to_numpy()))


# ------------------------------------------------------------------ fits, inputs and refusals
def test_fit_and_its_probabilities_give_the_same_map_and_the_fit_is_untouched(sim_fit):
    sim, fit, gold = sim_fit
    before = fit.class_probabilities().copy()
    gold_copy = gold.copy()
    cal = pyrater.calibrate(fit, gold, seed=1)
    pd.testing.assert_frame_equal(fit.class_probabilities(), before)
    pd.testing.assert_series_equal(gold, gold_copy)
    cal2 = pyrater.calibrate(before, gold.reset_index().rename(columns={"truth": "label"}), seed=1)
    assert cal.temperature == cal2.temperature
    pd.testing.assert_frame_equal(cal.probabilities, cal2.probabilities)
    pd.testing.assert_index_equal(cal.probabilities.index, before.index)
    pd.testing.assert_index_equal(cal.probabilities.columns, before.columns)
    np.testing.assert_allclose(cal.probabilities.sum(axis=1), 1.0)
    pd.testing.assert_index_equal(cal.gold_items, gold.index)
    # apply() reproduces the calibrated probabilities
    pd.testing.assert_frame_equal(cal.apply(before), cal.probabilities)


def test_majority_vote_probabilities_can_be_calibrated(sim_fit):
    sim, _, gold = sim_fit
    mv = pyrater.majority_vote(sim.data)
    cal = pyrater.calibrate(mv, gold, seed=1)
    assert np.isfinite(cal.temperature) and cal.probabilities.shape == mv.probabilities.shape


def test_noise_floor_of_the_cross_validated_ece(sim_fit):
    """calibrate reports what ECE perfectly calibrated probabilities would show on the same gold items."""
    sim, fit, gold = sim_fit
    few = pyrater.calibrate(fit, gold.iloc[:20], seed=4)
    many = pyrater.calibrate(fit, pd.Series(sim.data.categories.to_numpy()[sim.z], index=sim.data.unit_labels), seed=4)
    assert 0 < many.ece_noise < few.ece_noise < 0.5  # 300 items against 20
    assert pyrater.calibrate(fit, gold.iloc[:20], seed=4).ece_noise == few.ece_noise  # seeded
    assert f"(noise floor {few.ece_noise:.3f})" in repr(few)
    # on simulated Dawid-Skene data the EM fit is nearly calibrated: with all 300 items the cross-validated
    # ECE after calibration is within a few noise floors of zero
    assert many.scores.loc["after", "ece"] < 3 * many.ece_noise


def test_gold_items_the_fit_knew_are_refused(sim_fit):
    sim, _, gold = sim_fit
    known = gold.iloc[:5]
    for fit in (
        pyrater.em(sim.data, method="map", known=known),
        pyrater.fit(sim.data, method="gibbs", known=known, chains=1, warmup=20, draws=20, seed=1),
    ):
        with pytest.raises(ValueError, match=r"5 gold item\(s\) were also given to the fit as known classes"):
            pyrater.calibrate(fit, gold, seed=1)
        cal = pyrater.calibrate(fit, gold.iloc[5:], seed=1)  # the other gold items calibrate it
        assert len(cal.gold_items) == len(gold) - 5
    # why: the known items are one-hot at their given class, so the map would learn the fit is never wrong
    probs = pyrater.em(sim.data, method="map", known=known).class_probabilities()
    np.testing.assert_array_equal(probs.loc[known.index].max(axis=1), 1.0)


def test_refusals_are_specific(sim_fit):
    _, fit, gold = sim_fit
    with pytest.raises(ValueError, match=r"needs at least 10 gold items \(K = 3\); 9 were given"):
        pyrater.calibrate(fit, gold.iloc[:9])
    assert min_gold_items("temperature+bias", 3, 5) == 30
    with pytest.raises(ValueError, match="needs at least 30 gold items.*; 29 were given"):
        pyrater.calibrate(fit, gold.iloc[:29], method="temperature+bias")
    with pytest.raises(ValueError, match="needs at least 20"):
        pyrater.calibrate(fit, gold.iloc[:15], cv=10)
    bad = gold.astype(object)
    bad.iloc[3] = "zebra"
    with pytest.raises(ValueError, match=r"gold labels \['zebra'\] are not categories of the fit"):
        pyrater.calibrate(fit, bad)
    numbers = gold.copy()
    numbers.iloc[3] = 9  # an integer label outside the scale, shown as 9 (not np.int64(9))
    with pytest.raises(ValueError, match=r"gold labels \[9\] are not categories of the fit \[\d"):
        pyrater.calibrate(fit, numbers)
    extra = pd.concat([gold, pd.Series([gold.iloc[0]], index=["nobody"])])
    with pytest.raises(ValueError, match=r"1 of the \d+ gold items are not items of the fit: \['nobody'\]"):
        pyrater.calibrate(fit, extra)
    with pytest.raises(ValueError, match="unknown method 'platt'"):
        pyrater.calibrate(fit, gold, method="platt")
    with pytest.raises(ValueError, match=r"cv \(folds of the gold items\) must be an integer >= 2"):
        pyrater.calibrate(fit, gold, cv=1)
    with pytest.raises(ValueError, match="more than once"):
        pyrater.calibrate(fit, pd.concat([gold, gold.iloc[:1]]))
    with pytest.raises(ValueError, match="two columns"):
        pyrater.calibrate(fit, pd.DataFrame({"item": [1], "a": [1], "b": [2]}))
    with pytest.raises(TypeError, match="class_probabilities"):
        pyrater.calibrate(np.ones((3, 2)) / 2, gold)


# ------------------------------------------------------------------ CLI
def test_cli_gold_writes_calibrated_probabilities(tmp_path, sim_fit):
    sim, _, gold = sim_fit
    ratings = tmp_path / "ratings.csv"
    sim.data.to_long().to_csv(ratings, index=False)
    gold_file = tmp_path / "gold.csv"
    gold.rename("label").rename_axis("item").reset_index().to_csv(gold_file, index=False)
    out = tmp_path / "out"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyrater.cli",
            "fit",
            str(ratings),
            "--method",
            "em",
            "--out",
            str(out),
            "--quiet",
            "--gold",
            str(gold_file),
            "--seed",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "5-fold cross-validated ECE" in res.stdout
    raw = pd.read_csv(out / "class_probabilities.csv", index_col=0)
    cal = pd.read_csv(out / "calibrated_probabilities.csv", index_col=0)
    cats = [str(c) for c in sim.data.categories]
    pd.testing.assert_index_equal(raw.index, cal.index)
    ref = pyrater.calibrate(pyrater.em(sim.data, method="map", seed=3), pd.read_csv(gold_file), seed=3)
    np.testing.assert_allclose(cal[cats].to_numpy(), ref.probabilities.to_numpy(), atol=1e-9)
    assert f"{ref.scores.loc['after', 'ece']:.4f}" in res.stdout
    assert f"perfectly calibrated probabilities would score about {ref.ece_noise:.4f} on these 80 items" in res.stdout
    assert "earlier run" not in res.stderr
    rerun = subprocess.run(res.args, capture_output=True, text=True, timeout=600)  # --gold again: rewritten, no warning
    assert rerun.returncode == 0 and "earlier run" not in rerun.stderr, rerun.stderr
    # the same --out without --gold: the calibrated probabilities of the earlier run are named, not taken for this fit's
    again = subprocess.run(
        [sys.executable, "-m", "pyrater.cli", "fit", str(ratings), "--method", "em", "--out", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0 and "still holds calibrated_probabilities.csv from an earlier run" in again.stderr
    bad = tmp_path / "bad_gold.csv"
    pd.DataFrame({"item": ["ghost"] + list(gold.index[:20]), "label": ["1"] + list(gold.iloc[:20])}).to_csv(
        bad, index=False
    )
    fresh = tmp_path / "never_written"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pyrater.cli",
            "fit",
            str(ratings),
            "--method",
            "em",
            "--out",
            str(fresh),
            "--quiet",
            "--gold",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 2 and "--gold" in res.stderr and "not items of the ratings file" in res.stderr
    assert "'ghost'" in res.stderr and "Traceback" not in res.stderr
    assert not (fresh / "class_probabilities.csv").exists()  # refused before fitting and writing anything
    # a file that is not (item, label), and one with too few items: refused before the fit, naming the problem
    wide = tmp_path / "wide_gold.csv"
    pd.DataFrame({"a": [1], "b": [2], "c": [3]}).to_csv(wide, index=False)
    few = tmp_path / "few_gold.csv"
    gold.iloc[:3].rename("label").rename_axis("item").reset_index().to_csv(few, index=False)
    for path, text in ((wide, "two columns (item, label)"), (few, "calibrating on --gold needs at least")):
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "pyrater.cli",
                "fit",
                str(ratings),
                "--method",
                "em",
                "--out",
                str(fresh),
                "--quiet",
                "--gold",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert res.returncode == 2 and text in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert not (fresh / "class_probabilities.csv").exists()


def test_fitted_floor_softens_exact_zeros_without_flattening_the_rest():
    # 30% of the items have one-hot probabilities (as ML EM gives) but are right only 90% of the time;
    # the rest are calibrated already
    probs, gold = distorted(4000, 3, 1.0, seed=9)
    rng = np.random.default_rng(9)
    certain = rng.random(len(probs)) < 0.3
    p = probs.to_numpy().copy()
    top = np.where(rng.random(len(p)) < 0.9, probs.columns.get_indexer(gold), rng.integers(0, 3, len(p)))
    p[certain] = np.eye(3)[top[certain]]
    probs = pd.DataFrame(p, index=probs.index, columns=probs.columns)
    fitted = pyrater.calibrate(probs, gold, method="temperature", seed=0)
    plain = pyrater.calibrate(probs, gold, method="temperature", seed=0, floor=1e-15)
    assert 1e-4 <= fitted.floor <= 1e-1 and plain.floor == 1e-15
    assert fitted.scores.loc["after", "log_loss"] < plain.scores.loc["after", "log_loss"]
    assert fitted.scores.loc["after", "ece"] < plain.scores.loc["after", "ece"]
    # the one-hot items end near their accuracy (0.9 + 0.1 / 3 of lucky draws)
    conf = fitted.probabilities.to_numpy()[certain].max(axis=1)
    assert abs(conf.mean() - (0.9 + 0.1 / 3)) < 0.04
    with pytest.raises(ValueError, match="floor must be 'fit' or a number"):
        pyrater.calibrate(probs, gold, floor=0.4)


# ------------------------------------------------------------------ the real-data study script
def test_realdata_calibration_study_on_one_small_set(tmp_path):
    from conftest import SHARED_DATA, bench_module, shared_file

    shared_file("bluebirds", "ratings.csv")
    rc = bench_module("realdata_calibration")
    out = rc.run(
        SHARED_DATA, ["bluebirds"], tmp_path, stan=False, n_splits=2, log=lambda s: None, parts_dir=tmp_path / "parts"
    )
    splits = out["splits"]
    t = splits[(splits.cal_method == "temperature") & ~splits.refused.astype(bool)]
    assert set(t.method) >= {"MV", "DS-ML", "DS-MAP"} and set(t.fraction) == {0.05, 0.10}
    # 108 gold items: 5% would be 5, so the minimum of 10 is used and flagged; the rest are scored
    assert (t.n_cal >= 10).all() and (t.n_cal + t.n_scored == 108).all()
    assert t[t.fraction == 0.05].padded.all()
    np.testing.assert_array_equal(t.accuracy_after, t.accuracy_before)  # temperature keeps the argmax
    # K = 2: temperature+bias needs 20 items, refused at 10 with the split recorded
    assert splits[(splits.cal_method == "temperature+bias") & (splits.n_cal < 20)].refused.all()
    assert (tmp_path / "RESULTS_calibration.md").exists() and len(out["tempered"]) == 6
    # reproducible by seed: the same run gives the same numbers
    again = rc.run(SHARED_DATA, ["bluebirds"], None, stan=False, n_splits=2, log=lambda s: None)
    pd.testing.assert_frame_equal(again["splits"], splits)
    # a resumed run reuses the finished data set's saved rows instead of refitting
    said = []
    reused = rc.run(
        SHARED_DATA, ["bluebirds"], None, stan=False, n_splits=2, log=said.append, parts_dir=tmp_path / "parts"
    )
    assert said[0].startswith("bluebirds: reused")
    for key in ("splits", "full", "tempered", "reliability"):
        pd.testing.assert_frame_equal(reused[key], out[key])
