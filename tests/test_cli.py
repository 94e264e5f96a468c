"""The command line: ``pyrater.cli.main`` in this process, and the entry points as subprocesses.

Most tests call :func:`run`, which runs ``main(argv)`` in the test process with
its output and exit status captured and Python's default warning filters of a
fresh interpreter (a subprocess per call cost 3-5 s of imports each, most of
this file's time); ``run(..., subprocess=True)`` and the tests of ``python -m
pyrater`` and ``python -m pyrater.cli`` run a real interpreter.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import subprocess as _subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater.datasets import EXAMPLE_CATEGORIES, example_ratings, example_simulation


def run(*args: str, cwd=None, subprocess: bool = False) -> _subprocess.CompletedProcess:
    """``pyrater <args>``: exit status, standard output and standard error."""
    if subprocess:
        return _subprocess.run(
            [sys.executable, "-m", "pyrater.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=900
        )
    from pyrater import cli

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        # the filters of a fresh interpreter (pytest shows DeprecationWarnings a command line would not)
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        try:
            if cwd is not None:
                os.chdir(cwd)
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse's errors, --help and --version
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.chdir(here)
    return _subprocess.CompletedProcess(["pyrater", *args], code, out.getvalue(), err.getvalue())


def test_example_data_has_labels_repeats_and_known_truth():
    df = example_ratings()
    data = pyrater.RatingData.from_long(df, categories=EXAMPLE_CATEGORIES)
    assert data.has_repeats and data.n_units == 150 and data.n_raters == 6
    assert set(df["rating"]) <= set(EXAMPLE_CATEGORIES)
    sim = example_simulation()
    # the EM recovers the simulated classes of the example well
    z = pyrater.em(data, method="ml").point_estimate("z")
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
    res = run(
        "fit",
        str(anesthesia_path),
        "--method",
        "mcmc",
        "--chains",
        "2",
        "--draws",
        "200",
        "--warmup",
        "200",
        "--out",
        str(tmp_path),
        "--quiet",
    )
    assert res.returncode == 0, res.stderr
    for name in ("raters.png", "class_probabilities.png", "prevalence.png", "trace.png"):
        assert (tmp_path / name).stat().st_size > 1000
    params = pd.read_csv(tmp_path / "parameters.csv", index_col=0)
    assert {"mean", "5%", "95%", "rhat", "ess_bulk"} <= set(params.columns)


@pytest.mark.stan
def test_compare_command_prints_loo_table(anesthesia_path):
    res = run(
        "compare",
        str(anesthesia_path),
        "--models",
        "dawid_skene",
        "class_conditional",
        "--chains",
        "2",
        "--draws",
        "300",
        "--warmup",
        "300",
    )
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert "elpd_loo" in lines[0] and "elpd_diff" in lines[0]
    assert {lines[1].split()[0], lines[2].split()[0]} == {"dawid_skene", "class_conditional"}
    assert "read RatingData(45 items" in res.stderr
    # the columns, the warning column among them, are explained under the table
    assert "warning: True when the PSIS-LOO estimate" in res.stdout
    assert "Pareto k above min(1 - 1/log10 S, 0.7)" in res.stdout and "n_bad_k counts the items above 0.7" in res.stdout
    for column in ("rank: 0 for the best", "weight: stacking", "weight_pbma: pseudo-BMA+", "equivalent: True"):
        assert column in res.stdout


@pytest.mark.stan
def test_compare_command_writes_the_table_and_is_quiet(anesthesia_path, tmp_path):
    out = tmp_path / "comparison.csv"
    args = ("compare", str(anesthesia_path), "--chains", "2", "--draws", "200", "--warmup", "200")
    res = run(*args, "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out, index_col="model")
    assert set(table.index) == {"dawid_skene", "class_conditional"}
    assert list(table["rank"]) == [0, 1] and table["elpd_diff"].iloc[0] == 0.0
    # the printed table is the file's, rounded; --quiet drops the progress, the data line and the note
    printed = res.stdout.strip().splitlines()
    assert len(printed) == 3 and printed[1].split()[0] == table.index[0]
    assert float(printed[1].split()[2]) == pytest.approx(table["elpd_loo"].iloc[0], abs=1e-3)
    assert "read " not in res.stderr and "fitting models" not in res.stderr and f"wrote {out}" in res.stderr


# ------------------------------------------------------------ options, errors, many raters


def _sim_csv(tmp_path, name="ratings.csv", **kw):
    sim = pyrater.simulate_dawid_skene(seed=kw.pop("seed", 3), **kw)
    path = tmp_path / name
    sim.data.to_long().to_csv(path, index=False)
    return sim, path


def test_version_and_help_document_every_option():
    from pyrater.cli import build_parser

    res = run("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"pyrater {pyrater.__version__}"
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in ("fit", "compare", "demo"):
        text = run(name, "--help").stdout
        options = [o for a in sub.choices[name]._actions for o in a.option_strings if o.startswith("--")]
        assert "--seed" in options and "--debug" in options  # on every subcommand
        for action in sub.choices[name]._actions:
            assert action.help, f"{name} {action.option_strings} has no help"
        for option in options:
            assert option in text, f"{name} --help does not show {option}"
    fit_options = [o for a in sub.choices["fit"]._actions for o in a.option_strings]
    for option in ("--ml", "--alpha", "--beta-diag", "--beta-off", "--priors", "--known", "--engine", "--restarts"):
        assert option in fit_options
    # the method list comes from pyrater.fit's METHODS, plus maximum likelihood by EM
    method = next(a for a in sub.choices["fit"]._actions if a.dest == "method")
    assert tuple(method.choices) == (*importlib.import_module("pyrater.fitting").METHODS, "em-ml")


def test_python_dash_m_pyrater_is_the_command_line():
    res = _subprocess.run([sys.executable, "-m", "pyrater", "--version"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == f"pyrater {pyrater.__version__}"
    res = _subprocess.run([sys.executable, "-m", "pyrater", "fit"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("usage: pyrater fit")  # argparse names the command


def test_many_categories_em_takes_the_log_odds_mode_and_ml_and_priors_work(tmp_path):
    import json

    from pyrater.models import DawidSkene

    sim, path = _sim_csv(tmp_path, n_items=150, n_raters=4, n_categories=5)
    # rater's default off-diagonal beta is below 1 at K = 5: the posterior mode on the log-odds scale
    res = run("fit", str(path), "--method", "em", "--out", str(tmp_path / "a"), "--quiet")
    assert res.returncode == 0, res.stderr
    lo = pyrater.em(sim.data, method="map", seed=1)
    assert lo.mode_scale == "log_odds"
    params = pd.read_csv(tmp_path / "a" / "parameters.csv", index_col=0)["estimate"].to_numpy()
    np.testing.assert_allclose(params[:5], lo.pi, atol=1e-10)
    # maximum likelihood: --ml and --method em-ml
    for flag in (["--ml"], ["--method", "em-ml"]):
        out = tmp_path / flag[-1]
        res = run("fit", str(path), *flag, "--out", str(out), "--quiet")
        assert res.returncode == 0, res.stderr
        ml = pyrater.em(sim.data, method="ml", seed=1)
        params = pd.read_csv(out / "parameters.csv", index_col=0)["estimate"].to_numpy()
        np.testing.assert_allclose(params[:5], ml.pi, atol=1e-10)
    # priors from flags: MAP with those priors
    res = run(
        "fit",
        str(path),
        "--method",
        "em",
        "--beta-off",
        "1",
        "--beta-diag",
        "4",
        "--alpha",
        "2",
        "--out",
        str(tmp_path / "b"),
        "--quiet",
    )
    assert res.returncode == 0, res.stderr
    beta = np.ones((5, 5)) + 3 * np.eye(5)
    ref = pyrater.em(sim.data, DawidSkene(alpha=2, beta=beta), method="map", seed=1)
    params = pd.read_csv(tmp_path / "b" / "parameters.csv", index_col=0)["estimate"].to_numpy()
    np.testing.assert_allclose(params[:5], ref.pi, atol=1e-10)
    # priors from a JSON file: all ones, so the mode is the ML estimate
    priors = tmp_path / "flat.json"
    priors.write_text(json.dumps({"alpha": 1, "beta": np.ones((5, 5)).tolist()}))
    res = run("fit", str(path), "--method", "em", "--priors", str(priors), "--out", str(tmp_path / "c"), "--quiet")
    assert res.returncode == 0, res.stderr
    params = pd.read_csv(tmp_path / "c" / "parameters.csv", index_col=0)["estimate"].to_numpy()
    np.testing.assert_allclose(params[:5], ml.pi, atol=1e-6)
    priors.write_text(json.dumps({"alpha": 1, "gamma": 2}))
    res = run("fit", str(path), "--method", "em", "--priors", str(priors), "--out", str(tmp_path / "d"))
    assert res.returncode == 2 and "['gamma'] are not priors of model dawid_skene" in res.stderr


def test_known_file_restarts_and_seed(tmp_path):
    sim, path = _sim_csv(tmp_path, n_items=120, n_raters=4, n_categories=3)
    cats = np.asarray(sim.data.categories)
    known = pd.DataFrame({"item": sim.data.unit_labels[:10], "label": cats[sim.z[:10]]})
    known_path = tmp_path / "known.csv"
    known.to_csv(known_path, index=False)
    res = run(
        "fit",
        str(path),
        "--method",
        "em",
        "--known",
        str(known_path),
        "--restarts",
        "2",
        "--seed",
        "5",
        "--out",
        str(tmp_path / "o"),
    )
    assert res.returncode == 0, res.stderr
    assert "runs (init + restarts): 3" in res.stdout
    probs = pd.read_csv(tmp_path / "o" / "class_probabilities.csv", index_col=0)
    ref = pyrater.em(sim.data, method="map", known=dict(zip(known["item"], known["label"])), n_restarts=2, seed=5)
    np.testing.assert_allclose(probs[[str(c) for c in cats]].to_numpy(), ref.class_probs, atol=1e-10)
    np.testing.assert_array_equal(probs[[str(c) for c in cats]].to_numpy()[np.arange(10), sim.z[:10]], 1.0)
    res = run("fit", str(path), "--method", "em", "--known", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "p"))
    assert res.returncode == 2 and "--known: file not found" in res.stderr


def test_errors_are_one_line_with_traceback_under_debug(tmp_path, monkeypatch, capsys):
    from pyrater import cli

    _, path = _sim_csv(tmp_path, n_items=40, n_raters=3, n_categories=2)
    taken = tmp_path / "taken.txt"
    taken.write_text("x")
    res = run("fit", str(path), "--method", "em", "--out", str(taken))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        f"pyrater: error: --out {taken} exists and is not a folder; give a folder (created if missing)"
    ]  # before reading or fitting
    res = run("fit", str(tmp_path), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "is a directory" in res.stderr and "Traceback" not in res.stderr
    res = run("fit", str(path), "--draws", "-5", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "--draws" in res.stderr and "warmup" not in res.stderr.split("error:")[-1]

    # any other exception: one line naming it, exit status 1; the traceback with --debug
    def boom(data, args, known=None):
        raise RuntimeError("the sampler exploded\nsecond line")

    monkeypatch.setattr(cli, "_fit", boom)
    assert cli.main(["fit", str(path), "--method", "em", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("pyrater: error: RuntimeError: the sampler exploded (in test_cli.py:")
    assert "--debug" in err[-1] and not any("Traceback" in line for line in err)
    with pytest.raises(RuntimeError, match="sampler exploded"):
        cli.main(["fit", str(path), "--method", "em", "--out", str(tmp_path / "o"), "--debug"])


@pytest.mark.parametrize("method", ["em", "gibbs"])
def test_raters_csv_holds_the_models_own_rater_parameters(tmp_path, method):
    """MACE's competence (the spammer finder) in raters.csv: EM's estimate, the Gibbs posterior mean."""
    sim = pyrater.simulate("mace", 200, 6, n_categories=3, raters_per_item=4, seed=2)
    path = tmp_path / "mace.csv"
    sim.data.to_long().to_csv(path, index=False)
    res = run("fit", str(path), "--model", "mace", "--method", method, "--out", str(tmp_path / "o"), "--quiet")
    assert res.returncode == 0, res.stderr
    raters = pd.read_csv(tmp_path / "o" / "raters.csv", index_col=0)
    data = pyrater.RatingData.from_long(pd.read_csv(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pyrater.fit(data, "mace", method=method, seed=1, progress=False)
    expected = ref.model_params["competence"] if method == "em" else ref.draws["competence"].mean(axis=(0, 1))
    np.testing.assert_allclose(raters.loc[list(data.rater_labels), "competence"], expected, rtol=1e-9)
    assert abs(raters["competence"].to_numpy() - sim.params["competence"]).max() < 0.2
    dawid = run("fit", str(path), "--method", "em", "--out", str(tmp_path / "ds"), "--quiet")
    assert dawid.returncode == 0 and "competence" not in pd.read_csv(tmp_path / "ds" / "raters.csv").columns


def test_many_raters_short_summary_and_bounded_plot(tmp_path):
    import matplotlib.image

    sim, path = _sim_csv(tmp_path, n_items=300, n_raters=461, n_categories=3, raters_per_item=5)
    n_raters = pd.read_csv(path)["rater"].nunique()  # the raters who rated something
    assert n_raters > 440
    res = run("fit", str(path), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) < 60
    assert "the 5 least accurate" in res.stdout and "the 5 most accurate" in res.stdout
    assert str(tmp_path / "o" / "raters.csv") in res.stdout  # where the full tables are
    raters = pd.read_csv(tmp_path / "o" / "raters.csv", index_col=0)
    assert len(raters) == n_raters
    fit = pyrater.em(pd.read_csv(path), method="map", seed=1)
    pi, theta = fit.pi, fit.theta
    np.testing.assert_allclose(raters["accuracy"], np.einsum("jkk,k->j", theta, pi), atol=1e-10)
    worst = raters["accuracy"].sort_values(kind="stable").index[:5]
    first = lines.index(next(x for x in lines if "least accurate" in x)) + 3  # after the table's two header lines
    shown = [line.split()[0] for line in lines[first : first + 5]]
    assert [str(w) for w in worst] == shown
    height, width = matplotlib.image.imread(tmp_path / "o" / "raters.png").shape[:2]
    assert height <= 1000 and width <= 1500
    height, width = matplotlib.image.imread(tmp_path / "o" / "raters_least_accurate.png").shape[:2]
    assert height <= 1500 and width <= 1500
    assert (
        len((tmp_path / "o" / "summary.txt").read_text().splitlines()) > n_raters * 9
    )  # the full report is in the file


def test_plot_raters_pages_or_summarises():
    import matplotlib

    matplotlib.use("Agg")
    from pyrater.plots import plot_raters

    sim = pyrater.simulate_dawid_skene(n_items=200, n_raters=30, n_categories=3, raters_per_item=4, seed=2)
    fit = pyrater.em(sim.data, method="ml")
    fig = plot_raters(fit)  # more raters than max_panels: one summary panel
    assert len(fig.axes) == 1 and "accuracy" in fig.axes[0].get_title()
    w, h = fig.get_size_inches()
    assert w <= 12 and h <= 6
    labels = list(sim.data.rater_labels)
    page = plot_raters(fit, raters=labels[:12])
    assert sum(1 for ax in page.axes if ax.images) == 12
    with pytest.raises(ValueError, match="max_panels"):
        plot_raters(fit, raters=labels)


def test_grouped_output_has_the_rating_patterns(tmp_path, caries_path):
    res = run("fit", str(caries_path), "--format", "grouped", "--method", "em", "--out", str(tmp_path), "--quiet")
    assert res.returncode == 0, res.stderr
    raw = pd.read_csv(caries_path)
    probs = pd.read_csv(tmp_path / "class_probabilities.csv")
    pd.testing.assert_frame_equal(probs[list(raw.columns)], raw, check_dtype=False)
    ref = pyrater.em(raw, method="map", data_format="grouped", seed=1)
    np.testing.assert_allclose(probs[["1", "2"]].to_numpy(), ref.class_probs, atol=1e-10)


def test_compare_with_one_model_refuses_before_fitting(anesthesia_path):
    res = run("compare", str(anesthesia_path), "--models", "dawid_skene")
    assert res.returncode == 2 and "at least two models (--models), or one with --baseline" in res.stderr
    assert "read " not in res.stderr and "fitting models" not in res.stderr
    res = run("compare", str(anesthesia_path), "--models", "dawid_skene", "dawid_skene")
    assert res.returncode == 2 and "--models names dawid_skene more than once" in res.stderr
    assert "read " not in res.stderr
    assert "warning: True when" in run("compare", "--help").stdout


def test_compare_by_em_and_gibbs_with_the_baseline(anesthesia_path, tmp_path):
    """--method em: 10-fold cross-validation, the table pyrater.compare gives; --method gibbs: PSIS-LOO."""
    out = tmp_path / "em.csv"
    res = run("compare", str(anesthesia_path), "--method", "em", "--models", "dawid_skene", "one_coin",
              "--baseline", "--out", str(out), "--quiet")  # fmt: skip
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out, index_col="model")
    assert set(table.index) == {"dawid_skene", "one_coin", "majority vote"} and set(table["method"]) == {"kfold"}
    data = pyrater.RatingData.from_long(pd.read_csv(anesthesia_path))
    fits = {m: pyrater.fit(data, m, method="em", seed=1, progress=False) for m in ("dawid_skene", "one_coin")}
    ref = pyrater.compare(fits, baseline=True, progress=False)
    np.testing.assert_allclose(table.loc[ref.index, "elpd_loo"], ref["elpd_loo"], rtol=1e-9)
    # one model and the baseline is a comparison too; by the Gibbs sampler, PSIS-LOO
    out = tmp_path / "gibbs.csv"
    res = run("compare", str(anesthesia_path), "--method", "gibbs", "--models", "mace", "--baseline",
              "--draws", "200", "--out", str(out), "--quiet")  # fmt: skip
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out, index_col="model")
    assert table.loc["mace", "method"] == "exact" and table.loc["majority vote", "method"] == "kfold"
    # refused before reading the data: a flag the method does not take, a model it does not fit
    for flags, message in (
        (("--method", "em", "--chains", "2"), "--chains is an option of --method mcmc, gibbs; got --method em"),
        (("--method", "gibbs", "--models", "hierarchical", "mace"),
         "--method gibbs cannot fit hierarchical; hierarchical is fitted by --method mcmc, optimize"),
        (("--method", "pathfinder",), "invalid choice: 'pathfinder'"),
    ):  # fmt: skip
        res = run("compare", str(anesthesia_path), *flags)
        assert res.returncode == 2 and message in res.stderr and "read " not in res.stderr, res.stderr


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "--out is empty"),
        (".", "is a folder; give a CSV file"),
        ("table.txt", "give a file name ending in .csv"),
        ("missing/table.csv", "does not exist"),
    ],
)
def test_compare_out_is_checked_before_the_data_are_read(anesthesia_path, tmp_path, value, message):
    res = run("compare", str(anesthesia_path), "--out", value, cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr
    assert "read " not in res.stderr and "Traceback" not in res.stderr


@pytest.mark.filterwarnings("ignore:MCMC problems")
def test_gibbs_thin_and_pi_moves_reach_the_sampler(tmp_path, monkeypatch, capsys):
    from pyrater import cli

    sim, path = _sim_csv(tmp_path, n_items=60, n_raters=3, n_categories=2)
    out = tmp_path / "g"
    argv = [
        "fit",
        str(path),
        "--method",
        "gibbs",
        "--chains",
        "2",
        "--draws",
        "40",
        "--warmup",
        "20",
        "--thin",
        "4",
        "--pi-moves",
        "2",
        "--seed",
        "7",
        "--out",
        str(out),
        "--quiet",
    ]
    assert cli.main(argv) == 0
    ref = pyrater.fit(
        sim.data, "dawid_skene", method="gibbs", chains=2, draws=40, warmup=20, thin=4, pi_moves=2, seed=7
    )
    assert ref.draws["pi"].shape[:2] == (2, 10)  # 40 sweeps, every 4th kept
    params = pd.read_csv(out / "parameters.csv", index_col=0)
    np.testing.assert_allclose(params.loc[["pi[1]", "pi[2]"], "mean"], ref.draws["pi"].mean(axis=(0, 1)), atol=1e-12)
    # the options of another method are refused before any data is read
    capsys.readouterr()
    for flags in (["--thin", "2"], ["--pi-moves", "1"], ["--thin", "2", "--pi-moves", "1"]):
        assert (
            cli.main(["fit", str(tmp_path / "missing.csv"), "--method", "em", *flags, "--out", str(tmp_path / "x")])
            == 2
        )
        err = capsys.readouterr().err
        assert "of --method gibbs; got --method em" in err and all(f in err for f in flags if f.startswith("--"))
    assert not (tmp_path / "x").exists()
    assert (
        cli.main(["fit", str(path), "--method", "gibbs", "--thin", "50", "--draws", "40", "--out", str(tmp_path / "y")])
        == 2
    )
    assert "--thin (50) must be at most --draws (40)" in capsys.readouterr().err and not (tmp_path / "y").exists()


def test_files_separated_by_tabs_or_semicolons_are_named_as_such(tmp_path):
    sim, path = _sim_csv(tmp_path, n_items=30, n_raters=3, n_categories=2)
    df = pd.read_csv(path)
    tsv = tmp_path / "ratings.tsv"
    df.to_csv(tsv, sep="\t", index=False)
    res = run("fit", str(tsv), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        f"pyrater: error: {tsv}: the file looks tab-separated (header 'item\\trater\\trating'); pass --sep tab"
    ]
    # the way out the message gives, and the same fit as from the comma-separated file
    res = run("fit", str(tsv), "--sep", "tab", "--method", "em", "--quiet", "--out", str(tmp_path / "tab"))
    assert res.returncode == 0, res.stderr
    assert run("fit", str(path), "--method", "em", "--quiet", "--out", str(tmp_path / "comma")).returncode == 0
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "tab" / "class_probabilities.csv"),
        pd.read_csv(tmp_path / "comma" / "class_probabilities.csv"),
    )
    labels = pd.DataFrame({"item": sim.data.unit_labels[:12], "label": sim.data.categories[sim.z[:12]]})
    semi = tmp_path / "labels.csv"
    labels.to_csv(semi, sep=";", index=False)
    for flag in ("--known", "--gold"):
        res = run("fit", str(path), "--method", "em", flag, str(semi), "--out", str(tmp_path / "o"))
        assert res.returncode == 2 and "Traceback" not in res.stderr
        assert f"{flag} {semi}: the file looks semicolon-separated" in res.stderr
        assert "separated by commas" in res.stderr  # --sep is the ratings file's
        assert not (tmp_path / "o" / "class_probabilities.csv").exists()  # refused before fitting
    # comma-separated, the labels are taken by both flags; the same items in both are refused before the fit
    labels.to_csv(semi, index=False)
    res = run(
        "fit",
        str(path),
        "--method",
        "em",
        "--known",
        str(semi),
        "--gold",
        str(semi),
        "--quiet",
        "--out",
        str(tmp_path / "o"),
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "12 gold item(s) were also given to the fit as known classes (--known" in res.stderr
    assert not (tmp_path / "o" / "class_probabilities.csv").exists()
    known = tmp_path / "known.csv"
    labels.iloc[:2].to_csv(known, index=False)
    labels.iloc[2:].to_csv(semi, index=False)
    res = run(
        "fit",
        str(path),
        "--method",
        "em",
        "--known",
        str(known),
        "--gold",
        str(semi),
        "--quiet",
        "--out",
        str(tmp_path / "o"),
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "o" / "calibrated_probabilities.csv").exists()


# --------------------------------------------------------------- advice that can be followed (issue 28, item 6)
def test_column_options_name_the_columns_of_long_data(tmp_path):
    sim, path = _sim_csv(tmp_path, n_items=80, n_raters=4, n_categories=3)
    renamed = pd.read_csv(path).rename(columns={"item": "doc", "rater": "annotator", "rating": "label"})
    renamed.to_csv(path, index=False)
    res = run("fit", str(path), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    assert "--item, --rater, --rating" in res.stderr  # the hint names options that exist
    res = run(
        "fit", str(path), "--method", "em", "--item", "doc", "--rater", "annotator", "--rating", "label",
        "--out", str(tmp_path / "o"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    probs = pd.read_csv(tmp_path / "o" / "class_probabilities.csv", index_col=0)
    ref = pyrater.em(
        pyrater.RatingData.from_long(renamed, item="doc", rater="annotator", rating="label"), method="map", seed=1
    )
    np.testing.assert_allclose(probs[["1", "2", "3"]].to_numpy(), ref.class_probabilities().to_numpy(), atol=1e-9)
    res = run("fit", str(path), "--format", "wide", "--rater", "annotator", "--out", str(tmp_path / "x"))
    assert res.returncode == 2 and "--rater names a column of long data (--format long)" in res.stderr


def test_raters_chooses_the_rater_columns_of_a_wide_table(tmp_path):
    sim, _ = _sim_csv(tmp_path, n_items=60, n_raters=3, n_categories=2)
    wide = sim.data.to_wide().rename(columns=str)
    wide["age_group"] = np.resize([1, 2], len(wide))  # a covariate whose values fall inside the rating scale
    path = tmp_path / "wide.csv"
    wide.rename_axis(index="item", columns=None).reset_index().to_csv(path, index=False)
    flags = ["--format", "wide", "--method", "em", "--quiet"]
    assert run("fit", str(path), *flags, "--out", str(tmp_path / "all")).returncode == 0
    assert "age_group" in pd.read_csv(tmp_path / "all" / "raters.csv")["rater"].astype(str).tolist()  # read as a rater
    raters = ",".join(str(r) for r in sim.data.rater_labels)
    res = run("fit", str(path), *flags, "--raters", raters, "--out", str(tmp_path / "chosen"))
    assert res.returncode == 0, res.stderr
    got = pd.read_csv(tmp_path / "chosen" / "raters.csv")["rater"].astype(str).tolist()
    assert got == [str(r) for r in sim.data.rater_labels]
    ref = pyrater.fit(sim.data, "dawid_skene", method="em", seed=1, progress=False)
    probs = pd.read_csv(tmp_path / "chosen" / "class_probabilities.csv", index_col=0)
    np.testing.assert_allclose(probs[["1", "2"]].to_numpy(), ref.class_probabilities().to_numpy(), atol=1e-9)
    for bad, message in [
        (f"{raters},nope", "--raters: no column 'nope' in"),
        (f"{raters},", "give comma-separated column names"),
        (f"{raters},{sim.data.rater_labels[0]}", "twice"),
    ]:
        res = run("fit", str(path), *flags, "--raters", bad, "--out", str(tmp_path / "bad"))
        assert res.returncode == 2 and message in res.stderr, res.stderr
    res = run("fit", str(path), "--raters", raters, "--out", str(tmp_path / "long"))
    assert res.returncode == 2 and "long data names its one rater column with --rater" in res.stderr


def test_raters_of_a_grouped_table_merge_the_patterns_they_share(caries_path, tmp_path):
    caries = pd.read_csv(caries_path).assign(site=1)  # a covariate column beside the raters
    path = tmp_path / "grouped.csv"
    caries.to_csv(path, index=False)
    keep = ["rater_1", "rater_2", "rater_3"]
    res = run(
        "fit", str(path), "--format", "grouped", "--raters", ",".join(keep), "--method", "em", "--quiet",
        "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    merged = caries.groupby(keep, as_index=False, sort=False)["n"].sum()
    assert f"its {len(caries)} rating patterns are {len(merged)} over these raters" in res.stderr
    ref = pyrater.em(pyrater.RatingData.from_grouped(merged, tally="n"), method="map", seed=1)
    got = pd.read_csv(tmp_path / "o" / "parameters.csv", index_col=0)
    want = ref.summary().parameters
    np.testing.assert_allclose(got.loc[want.index, "estimate"], want["estimate"], atol=1e-9)
    assert pd.read_csv(tmp_path / "o" / "raters.csv")["rater"].tolist() == keep


def test_a_long_file_read_as_wide_is_told_to_read_it_as_long(tmp_path):
    sim, path = _sim_csv(tmp_path, n_items=60, n_raters=40, n_categories=3, raters_per_item=3)
    res = run("fit", str(path), "--format", "wide", "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    assert "look like long data" in res.stderr and "--format long" in res.stderr
    assert "--format grouped" not in res.stderr and "--tally rater" not in res.stderr  # the wrong first advice
    res = run("fit", str(path), "--format", "long", "--method", "em", "--out", str(tmp_path / "o"), "--quiet")
    assert res.returncode == 0, res.stderr  # following it works


def test_a_request_over_the_memory_budget_names_flags_that_work(tmp_path):
    sim, path = _sim_csv(tmp_path, n_items=60, n_raters=3, n_categories=2)
    base = ["fit", str(path), "--method", "gibbs", "--chains", "2", "--draws", "400", "--warmup", "20", "--quiet"]
    res = run(*base, "--max-memory-gib", "0.00005", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()[-1]
    assert "max_memory_gib" in err and "--max-memory-gib" in err and "--thin" in err
    thin = int(err.split("thin >= ")[1].split(",")[0])
    res = run(*base, "--max-memory-gib", "0.00005", "--thin", str(thin), "--out", str(tmp_path / "a"))
    assert res.returncode == 0, res.stderr  # the suggested thin fits the budget
    res = run(*base, "--max-memory-gib", "0.001", "--out", str(tmp_path / "b"))
    assert res.returncode == 0, res.stderr  # so does a larger budget
    # Stan: refused before Stan runs, with the flags that ask for less
    res = run("fit", str(path), "--method", "mcmc", "--draws", "1000000000", "--out", str(tmp_path / "c"))
    assert res.returncode == 2
    assert "--draws" in res.stderr and "--chains" in res.stderr and "--max-memory-gib" in res.stderr
    # the flag is checked like every number
    res = run(*base, "--max-memory-gib", "-1", "--out", str(tmp_path / "d"))
    assert res.returncode == 2 and "--max-memory-gib: must be a positive number" in res.stderr


def test_normalize_labels_flag_merges_spellings(tmp_path):
    df = pd.DataFrame(
        {
            "item": [i // 3 for i in range(90)],
            "rater": ["a", "b", "c"] * 30,
            "rating": (["yes", "no", "yes"] * 30)[:-3] + ["yes ", "Yes", "no"],
        }
    )
    path = tmp_path / "spell.csv"
    df.to_csv(path, index=False)
    # refused before the fit: each spelling a category of its own is a fit no one wants
    res = run("fit", str(path), "--method", "em", "--out", str(tmp_path / "o"), "--quiet")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "'Yes' (1 rating) and 'yes' (58 ratings) and 'yes ' (1 rating)" in res.stderr
    assert "--normalize-labels" in res.stderr
    assert not (tmp_path / "o").exists()
    # the spellings of another case declared as the scale: kept apart, as asked
    cased = df.assign(rating=df["rating"].str.strip())
    cased.to_csv(path, index=False)
    res = run("fit", str(path), "--method", "em", "--categories", "no,yes,Yes", "--out", str(tmp_path / "c"))
    assert res.returncode == 0 and "3 categories" in res.stderr, res.stderr
    df.to_csv(path, index=False)
    res = run("fit", str(path), "--method", "em", "--normalize-labels", "--out", str(tmp_path / "n"), "--quiet")
    assert res.returncode == 0, res.stderr
    assert "2 categories" in res.stderr and "warning" not in res.stderr


def test_one_coin_model_with_prior_flags_and_file(tmp_path):
    import json

    sim = pyrater.simulate_one_coin(120, 5, n_categories=3, raters_per_item=3, seed=2)
    path = tmp_path / "ratings.csv"
    sim.data.to_long().to_csv(path, index=False)
    res = run(
        "fit", str(path), "--model", "one_coin", "--method", "em", "--beta-diag", "9", "--beta-off", "2",
        "--out", str(tmp_path / "a"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    ref = pyrater.em(sim.data, pyrater.OneCoinDawidSkene(beta1=9, beta2=2), method="map", seed=1)
    params = pd.read_csv(tmp_path / "a" / "parameters.csv", index_col=0)["estimate"]
    np.testing.assert_allclose(params.iloc[:3], ref.pi, atol=1e-10)
    np.testing.assert_allclose(params.iloc[3:], ref.theta.ravel(), atol=1e-10)
    priors = tmp_path / "priors.json"
    priors.write_text(json.dumps({"alpha": 1, "beta1": 1, "beta2": 1}))  # flat: the mode is the ML estimate
    res = run(
        "fit", str(path), "--model", "one_coin", "--method", "em", "--priors", str(priors),
        "--out", str(tmp_path / "b"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    ml = pyrater.em(sim.data, "one_coin", method="ml", seed=1)
    params = pd.read_csv(tmp_path / "b" / "parameters.csv", index_col=0)["estimate"]
    np.testing.assert_allclose(params.iloc[:3], ml.pi, atol=1e-6)
    priors.write_text(json.dumps({"beta1": [1, 2, 3]}))
    res = run(
        "fit", str(path), "--model", "one_coin", "--method", "em", "--priors", str(priors), "--out", str(tmp_path / "c")
    )
    assert res.returncode == 2 and "beta1 must have shape" in res.stderr


def test_pooled_model_with_prior_flags_and_file(tmp_path):
    import json

    sim = pyrater.simulate_pooled(120, 6, n_categories=3, raters_per_item=3, seed=2)
    path = tmp_path / "ratings.csv"
    sim.data.to_long().to_csv(path, index=False)
    priors = tmp_path / "priors.json"
    priors.write_text(json.dumps({"s_shape": 3, "s_rate": 0.5}))
    res = run(
        "fit", str(path), "--model", "pooled", "--method", "em", "--beta-diag", "9", "--priors", str(priors),
        "--out", str(tmp_path / "a"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    beta = np.maximum(pyrater.models.default_beta(3), 1.0)
    np.fill_diagonal(beta, 9.0)
    ref = pyrater.em(sim.data, pyrater.PooledDawidSkene(beta=beta, s_shape=3, s_rate=0.5), method="map", seed=1)
    params = pd.read_csv(tmp_path / "a" / "parameters.csv", index_col=0)["estimate"]
    np.testing.assert_allclose(params.iloc[:3], ref.pi, atol=1e-8)
    np.testing.assert_allclose(params.iloc[3 : 3 + ref.theta.size], ref.theta.ravel(), atol=1e-8)
    priors.write_text(json.dumps({"s_shape": 0.5}))
    res = run(
        "fit", str(path), "--model", "pooled", "--method", "em", "--priors", str(priors), "--out", str(tmp_path / "c")
    )
    assert res.returncode == 2 and "s_shape must be > 1" in res.stderr


def test_ordinal_model_with_a_priors_file(tmp_path):
    import json

    sim = pyrater.simulate_ordinal(150, 5, n_categories=4, raters_per_item=3, seed=2)
    path = tmp_path / "ratings.csv"
    sim.data.to_long().to_csv(path, index=False)
    priors = tmp_path / "priors.json"
    priors.write_text(json.dumps({"shift_sd": 0.5, "log_scale_sd": 0.7}))
    res = run(
        "fit", str(path), "--model", "ordinal", "--method", "em", "--priors", str(priors),
        "--out", str(tmp_path / "a"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    ref = pyrater.em(sim.data, pyrater.Ordinal(shift_sd=0.5, log_scale_sd=0.7), method="map", seed=1)
    params = pd.read_csv(tmp_path / "a" / "parameters.csv", index_col=0)["estimate"]
    np.testing.assert_allclose(params.iloc[:4], ref.pi, atol=1e-8)
    np.testing.assert_allclose(params.iloc[4:], ref.theta.ravel(), atol=1e-8)
    res = run(
        "fit", str(path), "--model", "ordinal", "--method", "em", "--beta-diag", "9", "--out", str(tmp_path / "b")
    )
    assert res.returncode == 2 and "do not apply to the ordinal model" in res.stderr
    priors.write_text(json.dumps({"beta1": 2}))
    res = run("fit", str(path), "--model", "ordinal", "--priors", str(priors), "--out", str(tmp_path / "c"))
    assert res.returncode == 2 and "not priors of model ordinal" in res.stderr
    binary = tmp_path / "binary.csv"
    pyrater.simulate("dawid_skene", 30, 3, n_categories=2, seed=1).data.to_long().to_csv(binary, index=False)
    res = run("fit", str(binary), "--model", "ordinal", "--method", "em", "--out", str(tmp_path / "d"))
    assert res.returncode == 2 and "K >= 3" in res.stderr


def test_mace_model_with_prior_flags_and_file(tmp_path):
    import json

    sim = pyrater.simulate_mace(120, 5, n_categories=3, raters_per_item=3, seed=2)
    path = tmp_path / "ratings.csv"
    sim.data.to_long().to_csv(path, index=False)
    res = run(
        "fit", str(path), "--model", "mace", "--method", "em", "--beta-diag", "3", "--beta-off", "2",
        "--out", str(tmp_path / "a"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    ref = pyrater.em(sim.data, pyrater.MACE(beta1=3, beta2=2), method="map", seed=1)
    params = pd.read_csv(tmp_path / "a" / "parameters.csv", index_col=0)["estimate"]
    np.testing.assert_allclose(params.iloc[:3], ref.pi, atol=1e-10)
    np.testing.assert_allclose(params.iloc[3:], ref.theta.ravel(), atol=1e-10)
    priors = tmp_path / "priors.json"
    priors.write_text(json.dumps({"gamma": [2, 3, 4], "beta1": 2}))
    res = run(
        "fit", str(path), "--model", "mace", "--method", "em", "--priors", str(priors),
        "--out", str(tmp_path / "b"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    ref = pyrater.em(sim.data, pyrater.MACE(beta1=2, gamma=[2, 3, 4]), method="map", seed=1)
    params = pd.read_csv(tmp_path / "b" / "parameters.csv", index_col=0)["estimate"]
    np.testing.assert_allclose(params.iloc[3:], ref.theta.ravel(), atol=1e-10)
    priors.write_text(json.dumps({"gamma": [1, 2]}))
    res = run(
        "fit", str(path), "--model", "mace", "--method", "em", "--priors", str(priors), "--out", str(tmp_path / "c")
    )
    assert res.returncode == 2 and "gamma must have shape" in res.stderr


def test_fit_model_auto_writes_the_comparison(tmp_path):
    sim = pyrater.simulate("one_coin", 120, 5, n_categories=2, raters_per_item=3, seed=4)
    path = tmp_path / "ratings.csv"
    sim.data.to_long().to_csv(path, index=False)
    out = tmp_path / "out"
    res = run("fit", str(path), "--model", "auto", "--out", str(out), "--seed", "1", "--quiet")
    assert res.returncode == 0, res.stderr
    table = pd.read_csv(out / "comparison.csv", index_col=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = pyrater.fit(sim.data, "auto", seed=1, progress=False)
    assert "majority vote" in table.index and set(ref.model_choice.table.index) == set(table.index)
    np.testing.assert_allclose(table.loc[ref.model_choice.table.index, "elpd_loo"], ref.model_choice.table["elpd_loo"])
    assert ref.model_choice.reason in res.stderr
    assert ref.model_choice.reason in (out / "summary.txt").read_text()
    # the chosen row is marked; the warning about majority vote points to the file, not to a Python attribute
    assert table["chosen"].dtype == bool and table.index[table["chosen"]].tolist() == [ref.model_choice.chosen]
    assert f"majority vote's vote model; see {out / 'comparison.csv'}" in res.stderr
    assert "fit.model_choice.table" not in res.stderr
    for bad, message in (
        (("--method", "pathfinder"), "--model auto fits its candidates by --method"),
        (("--alpha", "2"), "default priors"),
        (("--restarts", "2"), "--restarts is not used by --model auto"),
        (("--ml",), "--ml is not available with --model auto"),
    ):
        res = run("fit", str(path), "--model", "auto", "--out", str(tmp_path / "o2"), *bad)
        assert res.returncode != 0 and message in res.stderr, res.stderr
        # said before the file is read
        res = run("fit", str(tmp_path / "missing.csv"), "--model", "auto", "--out", str(tmp_path / "o3"), *bad)
        assert res.returncode == 2 and message in res.stderr and "file not found" not in res.stderr, res.stderr


def test_a_model_its_method_cannot_fit_is_refused_before_the_file_is_read(tmp_path):
    missing = str(tmp_path / "missing.csv")
    res = run("fit", missing, "--model", "hierarchical", "--method", "gibbs", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "file not found" not in res.stderr
    assert "--model hierarchical cannot be fitted by --method gibbs; its methods are mcmc, optimize, pathfinder" in (
        res.stderr
    )
    res = run("fit", missing, "--model", "ordinal", "--method", "gibbs", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "its methods are mcmc, optimize, pathfinder, em, em-ml" in res.stderr
    res = run("fit", missing, "--model", "ordinal", "--method", "em", "--out", str(tmp_path / "o"))
    assert "file not found" in res.stderr  # a pair that goes together reaches the file


def test_files_an_earlier_run_left_in_the_out_folder_are_named(tmp_path):
    path = tmp_path / "ratings.csv"
    pyrater.simulate("dawid_skene", 60, 4, n_categories=3, seed=2).data.to_long().to_csv(path, index=False)
    out = tmp_path / "out"
    (tmp_path / "notes.txt").write_text("mine")
    gibbs = run("fit", str(path), "--method", "gibbs", "--chains", "2", "--draws", "30", "--out", str(out), "--quiet")
    assert gibbs.returncode == 0 and (out / "trace.png").exists() and "earlier run" not in gibbs.stderr
    (out / "notes.txt").write_text("the user's own file")
    em = run("fit", str(path), "--method", "em", "--out", str(out), "--quiet")
    assert em.returncode == 0, em.stderr
    # the EM run writes no trace: the Gibbs run's is named, and nothing is removed; the user's file is not pyrater's
    assert f"pyrater: warning: {out} still holds trace.png from an earlier run" in em.stderr
    assert (out / "trace.png").exists() and "notes.txt" not in em.stderr


# ------------------------------------------------------- new-user trial: flags, usage, advice in command-line terms
def _record_fit(monkeypatch) -> list[dict]:
    """Replace pyrater.fit by a recorder that stops the command: the keyword arguments the CLI passed."""
    calls: list[dict] = []

    def record(data, model="dawid_skene", method=None, **kwargs):
        calls.append({"method": method, **kwargs})
        raise KeyboardInterrupt  # the command stops here, before any sampling

    monkeypatch.setattr("pyrater.fitting.fit", record)
    return calls


def test_method_flags_the_method_does_not_use_are_refused_and_defaults_still_apply(tmp_path, monkeypatch):
    from pyrater.cli import build_parser

    missing = str(tmp_path / "missing.csv")  # refused before the file is read
    for flags, message in (
        (["--method", "em", "--draws", "100", "--chains", "2"], "--chains and --draws are options of --method "
         "mcmc, gibbs, pathfinder; got --method em"),
        (["--method", "em", "--warmup", "50"], "--warmup is an option of --method mcmc, gibbs; got --method em"),
        (["--method", "em", "--engine", "cmdstanpy"], "--engine is an option of --method mcmc, optimize, pathfinder; "
         "got --method em"),
        (["--method", "em", "--thin", "3"], "--thin is an option of --method gibbs; got --method em"),
        (["--ml", "--chains", "2"], "--chains is an option of --method mcmc, gibbs, pathfinder; got --ml"),
        (["--model", "auto", "--draws", "10"], "got --method em (the default with --model auto)"),
        (["--method", "gibbs", "--engine", "pystan"], "--engine is an option of --method mcmc, optimize, pathfinder; "
         "got --method gibbs"),
        (["--method", "pathfinder", "--warmup", "5"], "--warmup is an option of --method mcmc, gibbs; "
         "got --method pathfinder"),
        (["--method", "mcmc", "--restarts", "2"], "--restarts is an option of --method em, em-ml, optimize; "
         "got --method mcmc"),
        (["--method", "gibbs", "--thin", "2000"], "--thin (2000) must be at most --draws (1000, the default)"),
    ):  # fmt: skip
        for command in (["fit", missing], ["demo"]):
            res = run(*command, *flags, "--out", str(tmp_path / "o"))
            assert res.returncode == 2, (flags, res.stderr)
            err = res.stderr.strip().splitlines()
            assert len(err) == 1 and err[0].startswith("pyrater: error: ") and message in err[0], res.stderr
            assert "(command line:" not in res.stderr  # the CLI's own message names its flags once
    assert not (tmp_path / "o").exists()
    # the help shows the defaults the flags (None in argparse) stand for
    for name in ("fit", "demo", "compare"):
        parser = next(a for a in build_parser()._actions if a.dest == "command").choices[name]
        helps = {a.dest: a.help for a in parser._actions}
        assert all(parser.get_default(dest) is None for dest in ("engine", "chains", "draws", "warmup"))
        assert "default auto" in helps["engine"] and "default 4" in helps["chains"]
        assert "default 1000" in helps["draws"] and "default 1000, as in pyrater.fit" in helps["warmup"]
    # what reaches pyrater.fit: only the flags given (pyrater.fit's defaults for the others, warmup too)
    _, path = _sim_csv(tmp_path, n_items=30, n_raters=3, n_categories=2)
    calls = _record_fit(monkeypatch)
    expected = {
        ("--method", "mcmc"): {},
        ("--method", "gibbs", "--draws", "40"): {"draws": 40},
        ("--method", "gibbs", "--draws", "40", "--warmup", "0", "--chains", "2", "--thin", "4"): {
            "draws": 40, "warmup": 0, "chains": 2, "thin": 4,
        },
        ("--method", "pathfinder", "--draws", "30", "--engine", "cmdstanpy"): {"draws": 30, "engine": "cmdstanpy"},
        ("--method", "optimize", "--engine", "pystan", "--restarts", "1"): {"engine": "pystan", "n_inits": 2},
    }  # fmt: skip
    sampler = {"engine", "chains", "draws", "warmup", "thin", "pi_moves", "n_inits"}
    for flags, given in expected.items():
        for command in (["fit", str(path)], ["demo"]):
            res = run(*command, *flags, "--out", str(tmp_path / "f"), "--quiet")
            assert res.returncode == 130, res.stderr
            assert {k: v for k, v in calls[-1].items() if k in sampler} == given, (command, flags)
    for flags, given in (((), {}), (("--draws", "20"), {"draws": 20})):
        res = run("compare", str(path), *flags)
        assert res.returncode == 130 and calls[-1]["method"] == "mcmc", res.stderr
        assert {k: v for k, v in calls[-1].items() if k in sampler} == given


@pytest.mark.filterwarnings("ignore:MCMC problems")
def test_draws_without_warmup_warms_up_as_pyrater_fit_does(tmp_path):
    # --draws 20 without --warmup: pyrater.fit's warm-up (1000), not 20; the same fit as pyrater.fit(..., draws=20)
    sim, path = _sim_csv(tmp_path, n_items=60, n_raters=3, n_categories=2)
    ref = pyrater.fit(sim.data, method="gibbs", chains=2, draws=20, seed=3, progress=False)
    assert ref.settings["warmup"] == 1000
    out = tmp_path / "o"
    flags = ["--method", "gibbs", "--chains", "2", "--draws", "20", "--seed", "3", "--save-fit", str(out / "fit.nc")]
    res = run("fit", str(path), *flags, "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert pyrater.load(out / "fit.nc").settings["warmup"] == ref.settings["warmup"]  # what the sampler ran
    assert f"  warmup: {ref.settings['warmup']}" in res.stdout.splitlines()
    assert f"warmup: {ref.settings['warmup']}" in (out / "summary.txt").read_text()
    params = pd.read_csv(out / "parameters.csv", index_col=0)
    np.testing.assert_allclose(params.loc[["pi[1]", "pi[2]"], "mean"], ref.draws["pi"].mean(axis=(0, 1)), atol=1e-12)
    # --warmup given: that many
    res = run(
        "fit", str(path), "--method", "gibbs", "--chains", "2", "--draws", "20", "--warmup", "7", "--out", str(out)
    )
    assert res.returncode == 0 and "  warmup: 7" in res.stdout.splitlines(), res.stderr


def test_a_misspelt_option_gets_the_subcommands_usage_and_the_close_match(tmp_path):
    _, path = _sim_csv(tmp_path, n_items=30, n_raters=3, n_categories=2)
    res = run("fit", str(path), "--method", "em", "--chians", "2")
    assert res.returncode == 2
    assert res.stderr.startswith("usage: pyrater fit ")
    assert res.stderr.strip().splitlines()[-1] == (
        "pyrater fit: error: unrecognized arguments: --chians 2 (did you mean --chains?)"
    )
    res = run("compare", str(path), "--drws=5", "--warmpu", "3")
    assert res.returncode == 2 and res.stderr.startswith("usage: pyrater compare ")
    assert res.stderr.strip().splitlines()[-1] == (
        "pyrater compare: error: unrecognized arguments: --drws=5 --warmpu 3 "
        "(--drws: did you mean --draws?; --warmpu: did you mean --warmup?)"
    )
    res = run("demo", "--bogus")  # nothing close: no guess
    assert res.returncode == 2 and res.stderr.startswith("usage: pyrater demo ")
    assert res.stderr.strip().splitlines()[-1] == "pyrater demo: error: unrecognized arguments: --bogus"
    res = run("demo", "--known", "k.csv")  # the demo fits its own example: a --known file would be ignored
    assert res.returncode == 2 and res.stderr.strip().endswith("unrecognized arguments: --known k.csv")
    assert not (tmp_path / "pyrater-out").exists()


def test_data_advice_names_the_flags_quoted_for_the_shell(tmp_path):
    sim, path = _sim_csv(tmp_path, n_items=40, n_raters=5, n_categories=3)
    long = pd.read_csv(path)
    table = long.pivot(index="item", columns="rater", values="rating")
    wide = tmp_path / "wide.csv"
    table.to_csv(wide)  # columns item, 1, 2, 3, 4, 5
    res = run("fit", str(wide), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert lines[-1] == "hint: the columns '1', '2', '3', '4', '5' look like one column per rater: read the file as wide data: --format wide"  # fmt: skip
    assert run("fit", str(wide), "--format", "wide", "--method", "em", "--out", str(tmp_path / "w"), "--quiet").returncode == 0  # fmt: skip
    # a close match of a missing column: its flag, quoted for the shell; following the advice works
    for renamed, flag in (({"rating": "ratng"}, ["--rating", "ratng"]), ({"item": "item "}, ["--item", "item "])):
        other = tmp_path / "renamed.csv"
        long.rename(columns=renamed).to_csv(other, index=False)
        res = run("fit", str(other), "--method", "em", "--out", str(tmp_path / "o"))
        assert res.returncode == 2
        shown = f"{flag[0]} 'item '" if flag[1] == "item " else " ".join(flag)
        assert f"(did you mean {flag[1]!r}? use {shown})" in res.stderr, res.stderr
        assert run("fit", str(other), *flag, "--method", "em", "--out", str(tmp_path / "r"), "--quiet").returncode == 0
    # an index column written by DataFrame.to_csv: the items' labels, --item 'Unnamed: 0', quoted
    unnamed = tmp_path / "unnamed.csv"
    table.reset_index(drop=True).to_csv(unnamed)
    res = run("fit", str(unnamed), "--format", "wide", "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    assert "use --item 'Unnamed: 0'" in res.stderr and "--tally Unnamed: 0" not in res.stderr, res.stderr
    res = run("fit", str(unnamed), "--method", "em", "--out", str(tmp_path / "o"))  # read as long
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].endswith("read the file as wide data: --format wide --item 'Unnamed: 0'")
    res = run(
        "fit", str(unnamed), "--format", "wide", "--item", "Unnamed: 0", "--method", "em",
        "--out", str(tmp_path / "u"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    probs = pd.read_csv(tmp_path / "u" / "class_probabilities.csv", index_col=0)
    assert list(probs.index) == list(range(40))
    # grouped data with a tally whose name needs quoting
    grouped = tmp_path / "grouped.csv"
    frame = sim.data.to_long().pivot(index="item", columns="rater", values="rating")
    counts = frame.value_counts().rename("my count").reset_index()
    counts["my count"] *= 25  # tallies far above the ratings
    counts.to_csv(grouped, index=False)
    res = run("fit", str(grouped), "--format", "wide", "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "--format grouped --tally 'my count'" in res.stderr, res.stderr
    res = run("fit", str(grouped), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].endswith("read the file as grouped data: --format grouped --tally 'my count'")  # fmt: skip
    assert sum(line.startswith("hint:") for line in res.stderr.splitlines()) == 1  # in place of the reader's hints
    res = run(
        "fit", str(grouped), "--format", "grouped", "--tally", "my count", "--method", "em",
        "--out", str(tmp_path / "g"), "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    # long data with other column names is not told to read it as wide
    long.rename(columns={"rater": "annotator", "rating": "label"}).to_csv(other, index=False)
    res = run("fit", str(other), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "--format wide" not in res.stderr and "--rater, --rating" not in res.stderr


def test_mcmc_advice_names_the_flags_of_longer_or_more_chains():
    from pyrater import cli
    from pyrater.fits.draws import SINGLE_CHAIN, problems_message

    args = cli.build_parser().parse_args(["fit", "x.csv"])
    # "longer chains" are more warmup and draws per chain; "chains >= 2" is --chains
    assert cli._command_line_terms(problems_message(["max Rhat 1.151 > 1.01"]), args).endswith(
        "Run longer chains or check the model/priors. (command line: --warmup, --draws)"
    )
    assert cli._command_line_terms(problems_message([SINGLE_CHAIN]), args).endswith(
        "Run chains >= 2 to check convergence. (command line: --chains)"
    )
    assert cli._command_line_terms(problems_message([SINGLE_CHAIN, "max Rhat 1.2 > 1.01"]), args).endswith(
        "(command line: --chains, --warmup, --draws)"
    )
    assert cli._command_line_terms("Run more chains", args) == "Run more chains (command line: --chains)"


def test_python_values_and_attributes_in_messages_get_the_command_lines_terms(tmp_path):
    from pyrater import cli

    args = cli.build_parser().parse_args(["fit", "x.csv", "--out", str(tmp_path / "o")])
    # Python values: the flag with the value
    pathfinder = (
        "method='pathfinder' needs the cmdstanpy engine (Stan's Pathfinder runs in CmdStan); the 'pystan' engine "
        "was chosen. Install CmdStan (`python -m cmdstanpy.install_cmdstan`) and use engine='cmdstanpy', or use "
        "method='mcmc'"
    )
    assert cli._command_line_terms(pathfinder, args) == (
        pathfinder + " (command line: --method pathfinder, --engine cmdstanpy, --method mcmc)"
    )
    assert cli._command_line_terms("thin >= 5 or data_format='grouped'", args) == (
        "thin >= 5 or data_format='grouped' (command line: --thin, --format grouped)"
    )
    assert cli._command_line_terms("method='map'", args) == "method='map'"  # not a --method
    # a model named by its Python argument: the --model flag (the ordinal family's refusal of K = 2)
    with pytest.raises(ValueError) as k2:
        pyrater.fit(pyrater.simulate("dawid_skene", 20, 3, n_categories=2, seed=1).data, "ordinal", method="em")
    assert cli._command_line_terms(str(k2.value), args).endswith("(command line: --model class_conditional)")
    # the model choice's table is comparison.csv in --out
    note = "the chosen model (homogeneous) does not predict ... vote model; see fit.model_choice.table"
    assert cli._command_line_terms(note, args) == note.replace(
        "fit.model_choice.table", str(tmp_path / "o" / "comparison.csv")
    )
    # pyrater.fit's refusal of a model the method cannot fit (the command line now refuses the pair itself,
    # before reading the file: test_a_model_its_method_cannot_fit_is_refused_before_the_file_is_read)
    sim, _ = _sim_csv(tmp_path, n_items=30, n_raters=3, n_categories=2)
    with pytest.raises(ValueError) as refused:
        pyrater.fit(sim.data, "hierarchical", method="gibbs")
    assert cli._command_line_terms(str(refused.value), args).endswith(
        "(command line: --method gibbs, --method mcmc, --method optimize, --method pathfinder)"
    )


def test_a_category_called_none_is_a_rating_and_na_is_missing(tmp_path):
    # pandas reads "None" as a missing value by default: a severity scale None / Mild / Severe lost a category
    rng = np.random.default_rng(0)
    scale = np.array(["None", "Mild", "Severe"])
    rows = [(f"c{i}", f"r{j}", scale[(i + (rng.random() < 0.2)) % 3]) for i in range(30) for j in range(3)]
    long = pd.DataFrame(rows, columns=["item", "rater", "rating"])
    long.to_csv(tmp_path / "long.csv", index=False)
    wide = long.pivot(index="item", columns="rater", values="rating").reset_index()
    wide.iloc[::5, 1] = "NA"  # R's write.csv writes NA for a missing rating: still missing
    wide.to_csv(tmp_path / "wide.csv", index=False)
    for name, fmt, n_ratings in (("long", "long", 90), ("wide", "wide", 84)):
        res = run(
            "fit", str(tmp_path / f"{name}.csv"), "--format", fmt, "--method", "em", "--out", str(tmp_path / name)
        )
        assert res.returncode == 0, res.stderr
        assert f"3 categories ['Mild', 'None', 'Severe'], {n_ratings} ratings" in res.stderr
        probs = pd.read_csv(tmp_path / name / "class_probabilities.csv", index_col=0, keep_default_na=False)
        assert "None" in probs.columns and (probs["z"] == "None").sum() > 0


def test_item_and_rater_labels_with_leading_zeros_stay_apart(tmp_path):
    rows = [(item, rater, "yes" if item.endswith("1") else "no") for item in ("001", "01", "1", "002", "2")
            for rater in ("7", "07")]  # fmt: skip
    path = tmp_path / "zeros.csv"
    pd.DataFrame(rows, columns=["item", "rater", "rating"]).to_csv(path, index=False)
    res = run("fit", str(path), "--method", "em", "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    assert "RatingData(5 items, 2 raters" in res.stderr  # read as numbers, 001, 01 and 1 were one item
    items = pd.read_csv(tmp_path / "out" / "class_probabilities.csv", dtype={"item": str})["item"]
    assert sorted(items) == ["001", "002", "01", "1", "2"]
    raters = pd.read_csv(tmp_path / "out" / "raters.csv", dtype={"rater": str})["rater"]
    assert sorted(raters) == ["07", "7"]
    # a --known file names the items as the ratings file does
    (tmp_path / "known.csv").write_text("item,label\n001,no\n01,no\n")
    res = run("fit", str(path), "--method", "em", "--known", str(tmp_path / "known.csv"), "--out", str(tmp_path / "k"))
    assert res.returncode == 0, res.stderr
    probs = pd.read_csv(tmp_path / "k" / "class_probabilities.csv", dtype={"item": str}).set_index("item")
    assert probs.loc["001", "no"] == 1.0 and probs.loc["01", "no"] == 1.0 and probs.loc["1", "no"] < 1.0
    # labels that read back the same as numbers stay numbers (their order, the outputs)
    clean = pd.DataFrame({"item": [1, 1, 2, 2, 10, 10], "rater": [1, 2] * 3, "rating": ["y", "y", "n", "n", "y", "n"]})
    clean.to_csv(tmp_path / "clean.csv", index=False)
    assert run("fit", str(tmp_path / "clean.csv"), "--method", "em", "--out", str(tmp_path / "c")).returncode == 0
    assert pd.read_csv(tmp_path / "c" / "class_probabilities.csv")["item"].tolist() == [1, 2, 10]


def test_an_output_folder_that_cannot_be_made_is_refused_before_the_data_are_read(tmp_path):
    (tmp_path / "afile").write_text("x")
    missing_data = str(tmp_path / "no_such.csv")  # reading it would fail: the --out check comes first
    cases = [
        (str(tmp_path / "afile" / "sub"), "is a file, so the folder cannot be created there"),
        ("", "--out is empty"),
        (str(tmp_path / "afile"), "exists and is not a folder"),
    ]
    if os.path.isdir("/proc/self"):  # a virtual file system: no folder can be made in it, even by root
        cases.append(("/proc/pyrater-out", "cannot create a folder in /proc"))
    for out, message in cases:
        res = run("fit", missing_data, "--method", "em", "--out", out)
        assert res.returncode == 2 and message in res.stderr, (out, res.stderr)
    assert not list(tmp_path.glob(".pyrater-out-*"))  # the probe leaves nothing behind


def test_excel_exports_other_encodings_and_workbooks_are_read_or_named(tmp_path):
    # what Excel writes in many locales: semicolons, a byte-order mark, Windows-1252 text
    rows = [
        (f"case {i}", f"Dr {'ÉFG'[j]}", ["absent", "légère", "sévère"][(i + j) % 3])
        for i in range(20)
        for j in range(3)
    ]
    df = pd.DataFrame(rows, columns=["item", "rater", "rating"])
    df.to_csv(tmp_path / "utf8.csv", index=False)
    df.to_csv(tmp_path / "excel.csv", index=False, sep=";", encoding="cp1252")
    flags = ["--method", "em", "--quiet"]
    res = run("fit", str(tmp_path / "excel.csv"), *flags, "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "not utf-8 text (the byte 0x" in res.stderr and "--encoding" in res.stderr
    res = run("fit", str(tmp_path / "excel.csv"), "--encoding", "cp1252", *flags, "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "looks semicolon-separated" in res.stderr and "--sep ';'" in res.stderr
    res = run(
        "fit", str(tmp_path / "excel.csv"), "--encoding", "cp1252", "--sep", ";", *flags, "--out", str(tmp_path / "x")
    )
    assert res.returncode == 0, res.stderr
    assert run("fit", str(tmp_path / "utf8.csv"), *flags, "--out", str(tmp_path / "u")).returncode == 0
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "x" / "class_probabilities.csv"), pd.read_csv(tmp_path / "u" / "class_probabilities.csv")
    )
    # a workbook is named as one, before pandas reads its bytes as text
    (tmp_path / "ratings.xlsx").write_bytes(b"PK\x03\x04" + bytes(100))
    res = run("fit", str(tmp_path / "ratings.xlsx"), *flags, "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "spreadsheet workbook, not CSV text" in res.stderr
    for bad, message in ((["--sep", ";;"], "give one character"), (["--encoding", "nope"], "not a text encoding")):
        res = run("fit", str(tmp_path / "utf8.csv"), *bad, *flags, "--out", str(tmp_path / "o"))
        assert res.returncode == 2 and message in res.stderr, res.stderr


def test_known_gold_and_priors_errors_name_the_option_and_the_file(tmp_path):
    import json

    sim, path = _sim_csv(tmp_path, n_items=40, n_raters=3, n_categories=2)
    labels = tmp_path / "kn.csv"
    labels.write_text(f"item,label\n{sim.data.unit_labels[0]},5\n")  # a class the ratings do not have
    out = tmp_path / "o"
    for flag, message in (
        ("--known", "known class 5 not among the categories 1, 2"),
        ("--gold", "gold labels [5] are not categories of the ratings file [1, 2]"),
    ):
        res = run("fit", str(path), "--method", "em", flag, str(labels), "--out", str(out))
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip().splitlines()[-1] == f"pyrater: error: {flag} {labels}: {message}"
        assert not (out / "class_probabilities.csv").exists()  # refused before the fit
    labels.write_text("item,label\nnope,1\n")
    res = run("fit", str(path), "--method", "em", "--known", str(labels), "--out", str(out))
    assert res.returncode == 2 and f"--known {labels}: known-class item 'nope' not found" in res.stderr
    # a prior of the wrong shape for the data: the file is named, before any fitting (Gibbs too)
    _, path4 = _sim_csv(tmp_path, "k4.csv", n_items=40, n_raters=3, n_categories=4)
    priors = tmp_path / "pri.json"
    priors.write_text(json.dumps({"beta": np.ones((2, 2)).tolist()}))
    shape = "beta must have shape (K, K) = (4, 4) or (J, K, K) = (3, 4, 4); got shape (2, 2)"
    for method in (["--method", "em"], ["--method", "gibbs", "--draws", "20"]):
        res = run("fit", str(path4), *method, "--priors", str(priors), "--out", str(out))
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip().splitlines()[-1] == f"pyrater: error: --priors {priors}: {shape}"
        assert "fitted" not in res.stderr and not (out / "class_probabilities.csv").exists()
    priors.write_text(json.dumps({"alpha": [1, 2]}))
    res = run("fit", str(path4), "--method", "em", "--priors", str(priors), "--out", str(out))
    assert res.returncode == 2 and f"--priors {priors}: alpha must have shape (K,) = (4,); got shape (2,)" in res.stderr
    res = run("fit", str(path4), "--method", "em", "--priors", str(priors), "--beta-diag", "3", "--out", str(out))
    assert res.returncode == 2 and f"--priors {priors}: alpha must have shape" in res.stderr, res.stderr
    # the Python API's message is its own
    with pytest.raises(ValueError, match=r"^alpha must have shape \(K,\) = \(4,\)"):
        pyrater.fit(pd.read_csv(path4), pyrater.DawidSkene(alpha=[1, 2]), method="em", progress=False)
    # an error that is the data's, not the file's, does not name the file
    res = run("fit", str(path), "--model", "ordinal", "--method", "em", "--priors", str(priors), "--out", str(out))
    assert res.returncode == 2 and "K >= 3" in res.stderr and "--priors" not in res.stderr, res.stderr


def test_binary_files_are_named_by_their_first_bytes_not_sent_to_encoding_advice(tmp_path):
    import pickle

    sim, path = _sim_csv(tmp_path, n_items=30, n_raters=3, n_categories=2)
    # a fit saved in Python (netCDF-4/HDF5) given as the ratings table: what it is, and how to open it
    fit_path = tmp_path / "fit.nc"
    pyrater.fit(sim.data, method="em", seed=1, progress=False).save(fit_path)
    assert fit_path.read_bytes()[:8] == b"\x89HDF\r\n\x1a\n"
    res = run("fit", str(fit_path), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        f"pyrater: error: {fit_path}: this looks like a fit saved by pyrater (fit.save, --save-fit) or another "
        "netCDF-4/HDF5 file, not a table: pyrater fit reads a table of ratings as CSV text (or tab- or semicolon-separated: "
        f"--sep); open a saved fit in Python with pyrater.load({str(fit_path)!r})"
    ]
    for flag, holds in (("--known", "(item, label) rows"), ("--gold", "(item, label) rows")):
        res = run("fit", str(path), "--method", "em", flag, str(fit_path), "--out", str(tmp_path / "o"))
        assert res.returncode == 2, res.stderr
        assert f"{flag} {fit_path}: this looks like a fit saved by pyrater" in res.stderr
        assert f"{flag} reads {holds} from a CSV file" in res.stderr and "--encoding" not in res.stderr
    assert not (tmp_path / "o" / "class_probabilities.csv").exists()
    # other binary formats, by their signatures
    frame = pd.read_csv(path)
    pd.to_pickle(frame, tmp_path / "ratings.pkl")  # protocol 5
    (tmp_path / "old.pkl").write_bytes(pickle.dumps(frame, protocol=2))
    np.save(tmp_path / "ratings.npy", np.zeros((3, 3)))
    np.savez(tmp_path / "ratings.npz", ratings=np.zeros((3, 3)))
    (tmp_path / "classic.nc").write_bytes(b"CDF\x01" + bytes(60))
    (tmp_path / "offset.nc").write_bytes(b"CDF\x02" + bytes(60))
    (tmp_path / "ratings.parquet").write_bytes(b"PAR1" + bytes(60) + b"PAR1")
    (tmp_path / "ratings.feather").write_bytes(b"ARROW1\x00\x00" + bytes(60))
    for name, says in (
        ("ratings.pkl", ["this is a Python pickle, not a table", "allow_pickle=True", "pandas.read_pickle"]),
        ("old.pkl", ["this is a Python pickle, not a table"]),
        ("ratings.npy", ["this is a numpy array (numpy.save)"]),
        ("ratings.npz", ["this is a numpy archive of arrays (numpy.savez)"]),
        ("classic.nc", ["this is a netCDF file (classic format)", "pyrater.load(path)"]),
        ("offset.nc", ["this is a netCDF file (classic format)"]),
        ("ratings.parquet", ["this is a Parquet table", "pandas.read_parquet"]),
        ("ratings.feather", ["this is a Feather (Arrow) table", "pandas.read_feather"]),
    ):
        res = run("fit", str(tmp_path / name), "--method", "em", "--out", str(tmp_path / "o"))
        err = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(err) == 1, (name, res.stderr)
        assert err[0].startswith(f"pyrater: error: {tmp_path / name}: ") and "pyrater fit reads a table" in err[0]
        assert all(text in err[0] for text in says) and "--encoding" not in err[0], (name, err[0])
    # a workbook is still one; cp1252 text starting with the euro sign (0x80) is text: the encoding advice
    (tmp_path / "ratings.xlsx").write_bytes(b"PK\x03\x04" + bytes(100))
    res = run("fit", str(tmp_path / "ratings.xlsx"), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "spreadsheet workbook, not CSV text" in res.stderr
    euro = tmp_path / "euro.csv"
    frame.rename(columns={"item": "€item"}).to_csv(euro, index=False, encoding="cp1252")
    assert euro.read_bytes()[:1] == b"\x80"
    res = run("fit", str(euro), "--method", "em", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "not utf-8 text (the byte 0x80 is not utf-8)" in res.stderr
    assert "--encoding latin-1 or cp1252" in res.stderr


def test_compressed_tables_are_read_by_their_suffix_and_named_under_another(tmp_path):
    import gzip
    import zipfile

    _, path = _sim_csv(tmp_path, n_items=30, n_raters=3, n_categories=2)
    raw = path.read_bytes()
    (tmp_path / "ratings.csv.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "gz.csv").write_bytes(gzip.compress(raw))
    with zipfile.ZipFile(tmp_path / "ratings.zip", "w") as archive:
        archive.writestr("ratings.csv", raw)
    (tmp_path / "zipped.csv").write_bytes((tmp_path / "ratings.zip").read_bytes())
    reference = run("fit", str(path), "--method", "em", "--out", str(tmp_path / "plain"), "--quiet")
    assert reference.returncode == 0, reference.stderr
    expected = pd.read_csv(tmp_path / "plain" / "class_probabilities.csv")
    for name in ("ratings.csv.gz", "ratings.zip"):  # pandas reads them by their suffix
        res = run(
            "fit", str(tmp_path / name), "--method", "em", "--out", str(tmp_path / name.replace(".", "_")), "--quiet"
        )
        assert res.returncode == 0, (name, res.stderr)
        got = pd.read_csv(tmp_path / name.replace(".", "_") / "class_probabilities.csv")
        pd.testing.assert_frame_equal(got, expected)
    for name, says in (
        ("gz.csv", "this is a gzip-compressed file: pyrater fit reads a table of ratings as CSV text"),
        ("zipped.csv", "this is a zip archive holding one table"),
    ):
        res = run("fit", str(tmp_path / name), "--method", "em", "--out", str(tmp_path / "o"))
        assert res.returncode == 2 and says in res.stderr and "--encoding" not in res.stderr, (name, res.stderr)


@pytest.mark.filterwarnings("ignore:MCMC problems")
def test_save_fit_writes_the_fit_that_pyrater_load_reads(tmp_path):
    sim, path = _sim_csv(tmp_path, n_items=40, n_raters=3, n_categories=3)
    cats = [str(c) for c in sim.data.categories]
    # EM, the file in the --out folder (made by the run)
    out = tmp_path / "em"
    res = run("fit", str(path), "--method", "em", "--save-fit", str(out / "fit.nc"), "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    assert f"saved the fit to {out / 'fit.nc'} (open it in Python with pyrater.load(" in res.stderr
    loaded = pyrater.load(out / "fit.nc")
    probs = pd.read_csv(out / "class_probabilities.csv", index_col=0)
    np.testing.assert_allclose(loaded.class_probabilities().to_numpy(), probs[cats].to_numpy(), atol=1e-12)
    assert list(loaded.class_probabilities().index) == list(probs.index)
    # Gibbs: the same fit, with the per-item log-likelihood pyrater.fit keeps (LOO reads it from the file)
    out = tmp_path / "gibbs"
    saved = tmp_path / "gibbs.nc"
    flags = ["--method", "gibbs", "--chains", "2", "--draws", "30", "--warmup", "10", "--seed", "4"]
    res = run("fit", str(path), *flags, "--save-fit", str(saved), "--out", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    loaded = pyrater.load(saved)
    probs = pd.read_csv(out / "class_probabilities.csv", index_col=0)
    np.testing.assert_allclose(loaded.class_probabilities().to_numpy(), probs[cats].to_numpy(), atol=1e-12)
    params = pd.read_csv(out / "parameters.csv", index_col=0)
    np.testing.assert_allclose(params["mean"].iloc[:3], loaded.draws["pi"].mean(axis=(0, 1)), atol=1e-12)
    assert loaded.draws["log_lik"].shape == (2, 30, 40)
    # a suffix of another format: fit.save's warning, once, before the data are read
    res = run("fit", str(path), "--method", "em", "--save-fit", str(tmp_path / "fit.csv"), "--out", str(out))
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    warned = [i for i, line in enumerate(lines) if "will be a netCDF4/HDF5 fit file" in line]
    assert len(warned) == 1 and warned[0] < next(i for i, line in enumerate(lines) if line.startswith("read "))
    assert pyrater.load(tmp_path / "fit.csv").method == "em_map"


def test_a_save_fit_path_that_cannot_take_the_fit_is_refused_before_the_data_are_read(tmp_path):
    _, path = _sim_csv(tmp_path, n_items=20, n_raters=3, n_categories=2)
    (tmp_path / "afile").write_text("x")
    missing = str(tmp_path / "no_such.csv")  # reading it would fail: the --save-fit check comes first
    cases = [
        ("", "--save-fit is empty; give a file name for the fit"),
        (str(tmp_path), f"--save-fit {tmp_path} is a folder; give a file name for the fit"),
        (
            str(tmp_path / "nope" / "fit.nc"),
            f"--save-fit {tmp_path / 'nope' / 'fit.nc'}: no folder {tmp_path / 'nope'}",
        ),
        (str(tmp_path / "afile" / "fit.nc"), f"{tmp_path / 'afile'} is a file, so no folder can hold the fit there"),
    ]
    if os.path.isdir("/proc/self"):  # a virtual file system: no file can be made in it, even by root
        cases.append(("/proc/pyrater-fit.nc", "--save-fit /proc/pyrater-fit.nc: cannot write a file in /proc"))
    for target, message in cases:
        res = run("fit", missing, "--method", "em", "--save-fit", target, "--out", str(tmp_path / "o"))
        assert res.returncode == 2 and "Traceback" not in res.stderr, (target, res.stderr)
        err = res.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("pyrater: error: ") and message in err[0], (target, res.stderr)
    # the ratings file itself: refused before it is read (the fit would replace it)
    res = run("fit", str(path), "--method", "em", "--save-fit", str(path), "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "is the ratings file" in res.stderr and "read " not in res.stderr
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob(".pyrater-save-fit-*"))


def test_a_known_file_with_a_header_and_no_rows_is_refused(tmp_path):
    _, path = _sim_csv(tmp_path, n_items=20, n_raters=3, n_categories=2)
    known = tmp_path / "known.csv"
    known.write_text("item,label\n")
    res = run("fit", str(path), "--method", "em", "--known", str(known), "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "a header and no rows" in res.stderr, res.stderr


class _Stdin(io.TextIOWrapper):
    """Standard input holding ``raw`` (bytes), piped (not a terminal) unless ``tty``."""

    def __init__(self, raw: bytes, tty: bool = False):
        super().__init__(io.BytesIO(raw), encoding="utf-8")
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_ratings_piped_to_standard_input_as_dash(tmp_path, monkeypatch):
    rows = [(item, rater, "yes" if (int(item) + len(rater)) % 3 else "no") for item in ("001", "01", "2", "3", "4")
            for rater in ("7", "07", "x")]  # fmt: skip
    path = tmp_path / "r.csv"
    pd.DataFrame(rows, columns=["item", "rater", "rating"]).to_csv(path, index=False)
    from_file = run("fit", str(path), "--method", "em", "--out", str(tmp_path / "file"))
    assert from_file.returncode == 0, from_file.stderr
    monkeypatch.setattr(sys, "stdin", _Stdin(path.read_bytes()))
    piped = run("fit", "-", "--method", "em", "--out", str(tmp_path / "piped"))
    assert piped.returncode == 0, piped.stderr
    for table in ("class_probabilities.csv", "parameters.csv", "raters.csv"):  # read once, labels kept as written
        a = pd.read_csv(tmp_path / "file" / table, dtype=str)
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "piped" / table, dtype=str), a)
    items = pd.read_csv(tmp_path / "piped" / "class_probabilities.csv", dtype={"item": str})["item"]
    assert {"001", "01"} <= set(items)  # the second read of the label columns (as text) read the same bytes
    for raw, tty, message in (
        (b"", False, r"standard input \('-'\) is empty"),
        (b"item,rater,rating\n", True, "which is a terminal here: pipe a CSV table in"),
        (b"PK\x03\x04\x14\x00", False, "standard input holds binary data"),
        (b"item;rater;rating\n1;a;1\n", False, "standard input: the file looks semicolon-separated"),
    ):
        monkeypatch.setattr(sys, "stdin", _Stdin(raw, tty))
        res = run("fit", "-", "--method", "em", "--out", str(tmp_path / "bad"))
        assert res.returncode == 2 and res.stdout == "", res.stderr
        assert re.search(message, res.stderr), res.stderr
    assert not (tmp_path / "bad").exists()  # refused before any output
