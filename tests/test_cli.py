"""The command line, run as a subprocess."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater.datasets import EXAMPLE_CATEGORIES, example_ratings, example_simulation


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pyrater.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=900
    )


def test_example_data_has_labels_repeats_and_known_truth():
    df = example_ratings()
    data = pyrater.RatingData.from_long(df, categories=EXAMPLE_CATEGORIES)
    assert data.has_repeats and data.n_units == 150 and data.n_raters == 6
    assert set(df["rating"]) <= set(EXAMPLE_CATEGORIES)
    sim = example_simulation()
    # the EM recovers the simulated classes of the example well
    z = pyrater.em(data).point_estimate("z")
    truth = np.asarray(EXAMPLE_CATEGORIES)[sim.z]
    assert (z.to_numpy() == truth).mean() > 0.85
    pd.testing.assert_frame_equal(example_ratings(), df)  # seeded


def test_fit_command_writes_tables(tmp_path, anesthesia_path):
    out = tmp_path / "out"
    res = run("fit", str(anesthesia_path), "--method", "em", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert "Dawid-Skene fitted by em_map" in res.stdout
    params = pd.read_csv(out / "parameters.csv", index_col=0)
    probs = pd.read_csv(out / "class_probabilities.csv", index_col=0)
    assert len(params) == 4 + 5 * 16 and len(probs) == 45
    np.testing.assert_allclose(probs[["1", "2", "3", "4"]].sum(axis=1), 1.0, atol=1e-9)
    ref = pyrater.em(pd.read_csv(anesthesia_path), method="map")
    np.testing.assert_allclose(params.loc[["pi[1]", "pi[2]", "pi[3]", "pi[4]"], "estimate"], ref.pi, atol=1e-9)


def test_grouped_file_with_categories_option(tmp_path, caries_path):
    res = run("fit", str(caries_path), "--format", "grouped", "--method", "em", "--out", str(tmp_path), "--quiet")
    assert res.returncode == 0, res.stderr
    probs = pd.read_csv(tmp_path / "class_probabilities.csv", index_col=0)
    assert len(probs) == len(pd.read_csv(caries_path))  # one row per pattern


def test_malformed_file_reports_line_and_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("item,rater,rating\n1,a,1\n1,b,2\n2,a,\n2,b,1\n")
    res = run("fit", str(bad), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    assert "column 'rating'" in res.stderr and "rows 4" in res.stderr and "lines of the file" in res.stderr
    assert "Traceback" not in res.stderr
    res = run("fit", str(tmp_path / "missing.csv"), "--method", "em")
    assert res.returncode == 2 and "file not found" in res.stderr
    res = run("fit", str(bad), "--format", "grouped", "--method", "em")
    assert res.returncode == 2 and "tally column 'n' not found" in res.stderr


def test_unknown_model_is_refused_by_argparse():
    res = run("fit", "x.csv", "--model", "rasch")
    assert res.returncode == 2 and "invalid choice" in res.stderr


@pytest.mark.stan
def test_demo_runs_end_to_end_with_stan(tmp_path):
    res = run("demo", "--method", "optimize", "--out", str(tmp_path), "--quiet")
    assert res.returncode == 0, res.stderr
    for name in ("example_ratings.csv", "parameters.csv", "class_probabilities.csv", "summary.txt"):
        assert (tmp_path / name).exists()
    probs = pd.read_csv(tmp_path / "class_probabilities.csv", index_col=0)
    assert list(probs.columns[:3]) == list(EXAMPLE_CATEGORIES) and probs.index[0].startswith("case_")


@pytest.mark.stan
def test_fit_command_writes_plots_for_mcmc(tmp_path, anesthesia_path):
    res = run("fit", str(anesthesia_path), "--method", "mcmc", "--chains", "2", "--draws", "200",
              "--out", str(tmp_path), "--quiet")
    assert res.returncode == 0, res.stderr
    for name in ("raters.png", "class_probabilities.png", "prevalence.png", "trace.png"):
        assert (tmp_path / name).stat().st_size > 1000
    params = pd.read_csv(tmp_path / "parameters.csv", index_col=0)
    assert {"mean", "5%", "95%", "rhat", "ess_bulk"} <= set(params.columns)


@pytest.mark.stan
def test_compare_command_prints_loo_table(anesthesia_path):
    res = run("compare", str(anesthesia_path), "--models", "dawid_skene", "class_conditional",
              "--chains", "2", "--draws", "300")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert "elpd_loo" in lines[0] and "elpd_diff" in lines[0]
    assert {lines[1].split()[0], lines[2].split()[0]} == {"dawid_skene", "class_conditional"}
    assert "fitting models" in res.stderr  # progress indication
