"""Benchmark: the defaults of issue 25 item 3 on the gold-labelled sets of ../shared/data.

Four tables, printed as markdown (``bench/RESULTS_defaults.md`` holds a run):

* ``em``: maximum-likelihood EM with rater's defaults, plain (``acceleration="none"``)
  against SQUAREM (the default): E-steps, seconds, converged, log-likelihood and
  accuracy against the gold labels.
* ``map``: MAP by EM with the default priors at K >= 5, the posterior mode on the
  log-odds scale (``mode_scale="auto"``; before, refused), beside bench/realdata.py's
  workaround (off-diagonal pseudo-counts raised to 1) and ML.
* ``default``: ``pyrater.em(data)`` as a user types it (the posterior mode since
  2026-12-06) beside ``method="ml"`` (the default before), each with every other
  argument at its default, in one process: seconds, E-steps, converged, accuracy.
* ``gibbs``: the blocked Gibbs sampler for Dawid-Skene with priors of different
  strength and centre (the diagnosis of Gibbs-DS on zhou_web), and the pooled
  model, whose population rows are learned.

Usage::

    python bench/defaults.py [--tables em,map,default,gibbs] [--sets zhou_web,trec_relevance,...]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import pyrater  # noqa: E402
from pyrater.models import default_beta  # noqa: E402
from realdata import DEFAULT_DATA, list_datasets, load_dataset  # noqa: E402

EM_SETS = ("zhou_web", "trec_relevance", "weather_sentiment_cf", "rodrigues_music_genre", "adult_content", "dog")
MAP_SETS = ("zhou_web", "weather_sentiment_amt", "weather_sentiment_cf", "rodrigues_music_genre")
GIBBS_SETS = (
    "zhou_web",
    "weather_sentiment_amt",
    "weather_sentiment_cf",
    "rodrigues_music_genre",
    "dog",
    "face",
    "bluebirds",
    "zencrowd_in",
)
GIBBS = {"chains": 2, "warmup": 300, "draws": 500, "log_lik": False, "progress": False, "seed": 1}


def accuracy(ds, probs: pd.DataFrame) -> float:
    """Share of gold items whose most probable class is the gold label."""
    label = probs.idxmax(axis=1).reindex(ds.truth.index)
    return float(np.mean(label.astype(str).to_numpy() == ds.truth.astype(str).to_numpy()))


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def em_table(sets) -> pd.DataFrame:
    rows = []
    for name in sets:
        ds = load_dataset(name, DEFAULT_DATA)
        for how in ("none", "squarem"):
            t0 = time.perf_counter()
            fit = _quiet(lambda: pyrater.em(ds.data, method="ml", acceleration=how))  # noqa: B023
            rows.append(
                {
                    "dataset": name,
                    "K": ds.data.n_categories,
                    "EM": "plain" if how == "none" else "SQUAREM",
                    "E-steps": fit.convergence.get("e_steps", fit.n_iter),
                    "seconds": round(time.perf_counter() - t0, 1),
                    "converged": fit.converged,
                    "log-lik": round(fit.log_lik, 3),
                    "accuracy": round(accuracy(ds, fit.class_probabilities()), 4),
                }
            )
            print(rows[-1], file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def default_table(sets) -> pd.DataFrame:
    rows = []
    for name in sets:
        ds = load_dataset(name, DEFAULT_DATA)
        for label, kw in (("pyrater.em(data)", {}), ('method="ml"', {"method": "ml"})):
            t0 = time.perf_counter()
            fit = _quiet(lambda: pyrater.em(ds.data, **kw))  # noqa: B023
            rows.append(
                {
                    "dataset": name,
                    "K": ds.data.n_categories,
                    "call": label,
                    "fit": fit.method,
                    "E-steps (kept run)": fit.convergence.get("e_steps", fit.n_iter),
                    "seconds (whole fit)": round(time.perf_counter() - t0, 1),
                    "converged": fit.converged,
                    "accuracy": round(accuracy(ds, fit.class_probabilities()), 4),
                }
            )
            print(rows[-1], file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def map_table(sets) -> pd.DataFrame:
    rows = []
    for name in sets:
        ds = load_dataset(name, DEFAULT_DATA)
        K = ds.data.n_categories
        fits = {
            "default priors (log-odds mode)": lambda: pyrater.em(ds.data, method="map"),  # noqa: B023
            "off-diagonal raised to 1 (simplex)": lambda: pyrater.em(
                ds.data,  # noqa: B023
                pyrater.DawidSkene(beta=np.maximum(default_beta(K), 1.0)),  # noqa: B023
                method="map",
            ),
            "ML": lambda: pyrater.em(ds.data, method="ml"),  # noqa: B023
        }
        for label, run in fits.items():
            t0 = time.perf_counter()
            fit = _quiet(run)
            rows.append(
                {
                    "dataset": name,
                    "K": K,
                    "EM fit": label,
                    "mode scale": fit.mode_scale,
                    "seconds": round(time.perf_counter() - t0, 1),
                    "accuracy": round(accuracy(ds, fit.class_probabilities()), 4),
                }
            )
            print(rows[-1], file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def _beta(variant: str, K: int) -> np.ndarray:
    """Dirichlet rows: rater's default (N = 8, p = 0.6), a K-invariant diagonal/off-diagonal ratio, or flat."""
    if variant == "default":
        return default_beta(K)
    if variant == "flat":
        return np.ones((K, K))
    ratio = float(variant.split("=")[1])  # diagonal / off-diagonal pseudo-count, total 8 per row
    beta = np.full((K, K), 8.0 / (ratio + K - 1))
    np.fill_diagonal(beta, 8.0 * ratio / (ratio + K - 1))
    return beta


def gibbs_table(sets) -> pd.DataFrame:
    rows = []
    for name in sets:
        ds = load_dataset(name, DEFAULT_DATA)
        K = ds.data.n_categories
        row: dict = {"dataset": name, "K": K}
        for variant in ("default", "ratio=1.5", "ratio=3", "flat"):
            model = pyrater.DawidSkene(beta=_beta(variant, K))
            fit = _quiet(lambda: pyrater.fit(ds.data, model, method="gibbs", **GIBBS))  # noqa: B023
            row[f"DS {variant}"] = round(accuracy(ds, fit.class_probabilities()), 4)
        fit = _quiet(lambda: pyrater.fit(ds.data, "pooled", method="gibbs", **GIBBS))  # noqa: B023
        row["pooled"] = round(accuracy(ds, fit.class_probabilities()), 4)
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", default="em,map,default,gibbs")
    p.add_argument("--sets", default=None, help="comma-separated data sets (default: each table's own)")
    args = p.parse_args(argv)
    available = set(list_datasets(DEFAULT_DATA))
    if not available:
        print(f"no data sets under {DEFAULT_DATA}", file=sys.stderr)
        return 1
    chosen = None if args.sets is None else args.sets.split(",")
    builders = {
        "em": (em_table, EM_SETS),
        "map": (map_table, MAP_SETS),
        "default": (default_table, EM_SETS),
        "gibbs": (gibbs_table, GIBBS_SETS),
    }
    for table in args.tables.split(","):
        build, sets = builders[table]
        sets = [s for s in (chosen or sets) if s in available]
        print(f"\n### {table}\n")
        print(build(sets).to_markdown(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
