"""bench/realdata.py: the real-data comparison on two small data sets (skips without ../shared)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import SHARED_DATA, bench_module, shared_file


@pytest.fixture(scope="module")
def rd():
    return bench_module("realdata")


ZHENG = """# x
## Published accuracies (with source)

- Zheng et al. 2017, Table 6 (complete data), from the paper PDF stored in `a` `b.pdf`: MV accuracy 89.66% (F1 59.05%), D&S 93.66% (F1 71.59%); also ZC 92.80, GLAD 92.20.
- Crowd-Kit JOSS paper (Ustalov, Pavlichenko, Tseitlin 2024, JOSS 9(96):6227, doi:10.21105/joss.06227), table "Comparison", `Toloka/crowd-kit` `joss/paper.md` at commit d3 (v1.3.0): MV 0.897, DS 0.940, GLAD 0.928, MACE 0.929, Wawa 0.897.

## Our own check on these files (not published; for sanity only)

- Majority vote: 0.8966 with ties split at random.
"""


def test_parse_published_reads_both_kinds_of_bullet(rd):
    got = rd.parse_published(ZHENG)
    assert [(g["source"], g["method"]) for g in got] == [
        ("Zheng 2017", "MV"),
        ("Zheng 2017", "DS"),
        ("Crowd-Kit 2024", "MV"),
        ("Crowd-Kit 2024", "DS"),
    ]
    assert [g["accuracy"] for g in got] == pytest.approx([0.8966, 0.9366, 0.897, 0.940])
    assert all(g["usable"] for g in got)
    # the "our own check" section is not read, and a section-less file gives nothing
    assert rd.parse_published("# nothing here\n") == []
    flagged = ZHENG.replace("(F1 71.59%);", "(F1 71.59%). These do NOT match; so do not use them as targets.")
    assert [g["usable"] for g in rd.parse_published(flagged)] == [False, False, True, True]


def test_parse_published_on_the_shared_source_files(rd):
    expected = {
        "zheng_product": {("Zheng 2017", "DS"): 0.9366, ("Crowd-Kit 2024", "DS"): 0.940, ("Zheng 2017", "MV"): 0.8966},
        "zheng_possent": {("Zheng 2017", "DS"): 0.96, ("Crowd-Kit 2024", "DS"): 0.960, ("Crowd-Kit 2024", "MV"): 0.932},
        "trec_relevance": {("Zheng 2017", "DS"): 0.6130, ("Crowd-Kit 2024", "DS"): 0.615, ("Zheng 2017", "MV"): 0.5419},
        "adult_content": {("Crowd-Kit 2024", "DS"): 0.748, ("Crowd-Kit 2024", "MV"): 0.763},
        "bluebirds": {},
    }
    for name, figures in expected.items():
        got = rd.parse_published(shared_file(name, "SOURCE.md").read_text())
        table = {(g["source"], g["method"]): g["accuracy"] for g in got}
        for key, value in figures.items():
            assert table[key] == pytest.approx(value), (name, key)
        if not figures:
            assert got == []
    adult = rd.parse_published(shared_file("adult_content", "SOURCE.md").read_text())
    assert {g["source"]: g["usable"] for g in adult} == {"Zheng 2017": False, "Crowd-Kit 2024": True}


def test_list_datasets_leaves_out_numeric(rd, tmp_path):
    shared_file("snow_emotion_numeric")
    names = rd.list_datasets(SHARED_DATA)
    assert "snow_emotion_numeric" not in names
    assert {"bluebirds", "zheng_possent", "trec_relevance"} <= set(names)
    assert rd.list_datasets(tmp_path / "absent") == []


def test_map_model_raises_small_hyperparameters_only(rd):
    from pyrater.models import default_beta

    assert np.array_equal(rd.map_model("dawid_skene", 4).priors(4, 2)["beta"][0], default_beta(4))
    b5 = rd.map_model("dawid_skene", 5).priors(5, 2)["beta"][0]
    assert b5.min() == 1.0 and np.allclose(np.diag(b5), 4.8)


@pytest.fixture(scope="module")
def small_run(rd, tmp_path_factory):
    shared_file("bluebirds", "ratings.csv")
    shared_file("zheng_possent", "ratings.csv")
    out = tmp_path_factory.mktemp("realdata")
    res = rd.run(
        SHARED_DATA,
        ["bluebirds", "zheng_possent"],
        out_dir=out,
        stan=False,  # the Stan fits have their own test below
        semi=False,
        log=lambda s: None,
    )
    return res, out


def test_comparison_runs_on_two_small_datasets(small_run, rd):
    res, out = small_run
    r = res["results"]
    assert set(r.dataset) == {"bluebirds", "zheng_possent"}
    expected_methods = {"MV", "DS-ML", "DS-MAP", "CC-ML", "CC-MAP", "HOM-ML", "HOM-MAP"}
    assert expected_methods <= set(r[r.dataset == "zheng_possent"].method)
    for col in ("accuracy", "macro_f1", "ece", "brier", "log_loss", "seconds"):
        assert r[col].notna().all(), col
    assert ((r.ece >= 0) & (r.ece <= 1)).all() and ((r.brier >= 0) & (r.brier <= 2)).all()
    assert (r.n == r.gold).all()
    # skipped fits are listed with their reason
    sk = res["skipped"]
    assert set(sk[sk.method == "Stan-MCMC"].dataset) == {"bluebirds", "zheng_possent"}
    assert sk.reason.str.contains("switched off").all()
    # files: CSVs and the markdown report
    for name in ("results", "skipped", "reliability", "published"):
        assert (out / f"realdata_{name}.csv").exists(), name
    report = (out / "RESULTS_realdata.md").read_text()
    assert "Published figures beside ours" in report and "zheng_possent" in report
    rel = pd.read_csv(out / "realdata_reliability.csv")
    assert (
        rel.groupby(["dataset", "method"])["count"]
        .sum()
        .eq(r.set_index(["dataset", "method"]).n.reindex(rel.groupby(["dataset", "method"]).size().index))
        .all()
    )


def test_ds_em_matches_published_figure(small_run):
    res, _ = small_run
    r = res["results"].set_index(["dataset", "method"])
    pub = res["published"]
    pos = pub[(pub.dataset == "zheng_possent") & pub.usable]
    # Zheng et al. 2017 and Crowd-Kit both publish D&S 0.960 on D_PosSent
    for _, p in pos[pos.method == "DS"].iterrows():
        assert r.loc[("zheng_possent", "DS-ML"), "accuracy"] >= p.accuracy - 0.005
    # majority vote: the expected accuracy of random ties is what the papers report (0.9331, 0.932)
    for _, p in pos[pos.method == "MV"].iterrows():
        assert r.loc[("zheng_possent", "MV"), "accuracy_ties_split"] == pytest.approx(p.accuracy, abs=0.005)
    # hand-checkable numbers on these files (SOURCE.md "our own check"): MV with ties to the first category
    assert r.loc[("bluebirds", "MV"), "accuracy"] == pytest.approx(0.7593, abs=1e-4)
    assert r.loc[("zheng_possent", "MV"), "accuracy"] == pytest.approx(0.9320, abs=1e-4)


def test_semi_supervised_scores_held_out_items(rd):
    shared_file("zheng_possent", "ratings.csv")
    ds = rd.load_dataset("zheng_possent", SHARED_DATA)
    rows = rd.semi_supervised(ds, methods=("DS-MAP",), fractions=(0.1,), n_splits=1, log=lambda s: None)
    assert len(rows) == 1
    row = rows[0]
    assert row["n_known"] == 100 and row["n_scored"] == 900
    assert row["gain"] == pytest.approx(row["accuracy_semi"] - row["accuracy_unsupervised"])
    assert 0.9 < row["accuracy_semi"] <= 1.0


@pytest.mark.stan
def test_stan_optimize_matches_map_em_on_bluebirds(rd):
    """Stan's posterior mode and MAP EM share the prior: same class probabilities on a small set."""
    shared_file("bluebirds", "ratings.csv")
    ds = rd.load_dataset("bluebirds", SHARED_DATA)
    rows, skipped, bins = rd.run_dataset(ds, ("DS-MAP", "Stan-opt"), stan_max=5000, mcmc=False, log=lambda s: None)
    r = {row["method"]: row for row in rows}
    assert set(r) == {"DS-MAP", "Stan-opt"}
    assert r["Stan-opt"]["accuracy"] == pytest.approx(r["DS-MAP"]["accuracy"])
    assert r["Stan-opt"]["brier"] == pytest.approx(r["DS-MAP"]["brier"], abs=1e-3)
    assert skipped == []
    # a data set above the size limit is skipped with its reason
    assert "ratings" in rd.skip_reason("Stan-opt", ds, stan_max=100, mcmc_max=100, stan=True, mcmc=True)
    assert "parameters" in rd.skip_reason(
        "Stan-MCMC",
        rd.load_dataset("weather_sentiment_cf", SHARED_DATA),
        stan_max=10**6,
        mcmc_max=10**6,
        stan=True,
        mcmc=True,
    )
