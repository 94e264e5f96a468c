"""The ordinal rater model against Dawid-Skene on real ordered rating scales (issue 26, item 4).

For each gold-labelled data set of ``../shared/data`` whose categories are
ordered (read from its ``SOURCE.md``), and a few unordered ones as controls,
fit by EM (posterior mode, the gold labels never looked at):

=========  ==================================================================
MV         majority vote; ties split evenly (the expected accuracy of a random tie-break)
DS         Dawid-Skene, ``pyrater.em(..., method="map")``, rater's default priors with every
           Dirichlet pseudo-count at least 1.5 (the default off-diagonal 3.2/(K-1) is below 1 for
           K >= 5, where no mode exists; 1.5 keeps every error probability above 0, which K-fold
           needs: a held-out rating of probability 0 has log density -inf)
ORD        the ordinal model (``pyrater.Ordinal()``, default priors), categories in the data's order
ORD-lapse  the ordinal model whose raters lapse (``pyrater.Ordinal(lapse=True)``: with probability
           ``g_j ~ Beta(2, 20)`` rater j rates at random), categories in the data's order
ORD-data   the ordinal model with the order of the categories chosen by the data: the
           ordering (up to reversal) with the highest log posterior of an EM fit from the
           majority vote; no gold used
=========  ==================================================================

then score the most probable class of the gold items (accuracy) and compare
DS and ORD by 10-fold cross-validation over items (``pyrater.compare`` of the
two point fits: one seeded split, the expected log predictive density of a
held-out item's ratings; ``chosen`` is the model with the higher elpd).

Data sets: ordered -- ``zhou_web`` (5 relevance grades), ``adult_content``
(G < P < R < X), ``trec_relevance`` (4 codes; Zheng et al. name the choices
highly relevant / relevant / non-relevant / broken link without the mapping
to codes: not a clean scale), ``snow_emotion_numeric`` (scores in [-100, 100]
binned into 5 equal-width grades, the gold scores binned alike) and
``anesthesia.csv`` (4 grades, no gold: elpd only); unordered controls --
``weather_sentiment_amt`` / ``_cf`` (negative / neutral / positive / not
related / cannot tell) and ``face`` (neutral / happy / sad / angry).

Usage::

    python bench/realdata_ordinal.py                   # all sets; prints the table, writes realdata_ordinal.csv
    python bench/realdata_ordinal.py --datasets zhou_web --no-kfold

Skips cleanly (exit 0, a message) when ``../shared/data`` is absent; the
data are read from there and never copied into the repository.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import pyrater  # noqa: E402
from pyrater.models import default_beta  # noqa: E402

SHARED = HERE.parent.parent / "shared" / "data"

#: name -> (ordered?, note)
DATASETS = {
    "zhou_web": (True, "5 relevance grades"),
    "adult_content": (True, "G < P < R < X"),
    "trec_relevance": (True, "4 codes, one of them 'broken link'"),
    "snow_emotion_numeric": (True, "scores binned into 5 grades"),
    "anesthesia": (True, "4 grades, no gold"),
    "weather_sentiment_amt": (False, "control: not ordered"),
    "weather_sentiment_cf": (False, "control: not ordered"),
    "face": (False, "control: not ordered"),
}
EMOTION_BINS = np.array([-np.inf, -60, -20, 20, 60, np.inf])


def load(name: str) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Long ratings (item, rater, rating) and gold (item, truth) or None."""
    if name == "anesthesia":
        return pd.read_csv(SHARED / "anesthesia.csv"), None
    folder = SHARED / name
    ratings = pd.read_csv(folder / "ratings.csv")
    gold = pd.read_csv(folder / "gold.csv")
    if name == "snow_emotion_numeric":
        ratings["rating"] = np.digitize(ratings["rating"], EMOTION_BINS[1:-1]) + 1
        gold["truth"] = np.digitize(gold["truth"], EMOTION_BINS[1:-1]) + 1
    return ratings, gold


def mv_accuracy(data: pyrater.RatingData, gold: pd.DataFrame) -> float:
    """Expected accuracy of the majority vote with ties split evenly."""
    K = data.n_categories
    votes = np.asarray(data.counts.toarray().reshape(data.n_units, data.n_raters, K).sum(axis=1))
    top = votes == votes.max(axis=1, keepdims=True)
    share = top / top.sum(axis=1, keepdims=True)
    pos = {lab: i for i, lab in enumerate(data.unit_labels)}
    cat = {c: k for k, c in enumerate(data.categories)}
    rows = [pos[i] for i in gold["item"]]
    cols = [cat[t] for t in gold["truth"]]
    return float(share[rows, cols].mean())


def accuracy(fit, gold: pd.DataFrame) -> float:
    z = fit.point_estimate("z")
    return float((z.loc[gold["item"]].to_numpy() == gold["truth"].to_numpy()).mean())


def ds_model(K: int) -> pyrater.DawidSkene:
    return pyrater.DawidSkene(beta=np.maximum(default_beta(K), 1.5))


def best_order(ratings: pd.DataFrame, cats: list, seed: int) -> tuple[list, float, float]:
    """The ordering of ``cats`` (up to reversal) with the highest EM log posterior from the majority vote."""
    best, best_lp, natural_lp = list(cats), -np.inf, np.nan
    for perm in itertools.permutations(cats):
        if perm[0] > perm[-1]:  # a reversed ordering is the same model
            continue
        data = pyrater.RatingData.from_long(ratings, categories=list(perm))
        f = pyrater.em(data, "ordinal", method="map", init="majority", progress=False, seed=seed)
        lp = float(f.log_posterior)
        if list(perm) == list(cats):
            natural_lp = lp
        if lp > best_lp:
            best, best_lp = list(perm), lp
    return best, best_lp, natural_lp


def run(name: str, kfold: bool, order_search: bool, seed: int) -> dict:
    ratings, gold = load(name)
    data = pyrater.RatingData.from_long(ratings)
    cats = list(data.categories)
    K = data.n_categories
    row: dict = {"dataset": name, "ordered": DATASETS[name][0], "note": DATASETS[name][1], "K": K}
    row.update(items=data.n_units, raters=data.n_raters, ratings=data.n_ratings)
    row["gold"] = 0 if gold is None else len(gold)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # EM convergence notes on the largest sets; kfold's -inf notes
        ds = pyrater.em(data, ds_model(K), method="map", progress=False, seed=seed)
        od = pyrater.em(data, "ordinal", method="map", progress=False, seed=seed)
        ol = pyrater.em(data, pyrater.Ordinal(lapse=True), method="map", progress=False, seed=seed)
        row["time_ds_s"] = round(time.perf_counter() - t0, 1)
        if gold is not None:
            row["acc_mv"] = mv_accuracy(data, gold)
            row["acc_ds"] = accuracy(ds, gold)
            row["acc_ord"] = accuracy(od, gold)
            row["acc_lapse"] = accuracy(ol, gold)
        row["logpost_ds"], row["logpost_ord"] = ds.log_posterior, od.log_posterior
        if order_search:
            order, lp, lp_nat = best_order(ratings, cats, seed)
            row["order_data"] = " < ".join(str(c) for c in order)
            row["order_gain"] = lp - lp_nat
            if order != cats and gold is not None:
                od2 = pyrater.em(
                    pyrater.RatingData.from_long(ratings, categories=order),
                    "ordinal",
                    method="map",
                    progress=False,
                    seed=seed,
                )
                row["acc_ord_data"] = accuracy(od2, gold)
            elif gold is not None:
                row["acc_ord_data"] = row["acc_ord"]
        if kfold:
            table = pyrater.compare({"DS": ds, "ORD": od, "ORD-lapse": ol}, seed=seed)
            row["elpd_ds"] = float(table.loc["DS", "elpd_loo"])
            row["elpd_ord"] = float(table.loc["ORD", "elpd_loo"])
            row["elpd_lapse"] = float(table.loc["ORD-lapse", "elpd_loo"])
            row["elpd_diff_se"] = float(table["dse"].max())
            row["chosen"] = table.index[0]
    row["time_s"] = round(time.perf_counter() - t0, 1)
    return row


def markdown(df: pd.DataFrame) -> str:
    cols = ["dataset", "K", "items", "ratings", "gold", "acc_mv", "acc_ds", "acc_ord", "acc_lapse", "acc_ord_data"]
    cols += ["order_data", "elpd_ds", "elpd_ord", "elpd_lapse", "elpd_diff_se", "chosen"]
    cols = [c for c in cols if c in df]
    out = df[cols].copy()
    for c in ("acc_mv", "acc_ds", "acc_ord", "acc_lapse", "acc_ord_data"):
        if c in out:
            out[c] = out[c].map(lambda v: "" if pd.isna(v) else f"{v:.4f}")
    for c in ("elpd_ds", "elpd_ord", "elpd_lapse", "elpd_diff_se"):
        if c in out:
            out[c] = out[c].map(lambda v: "" if pd.isna(v) else f"{v:.1f}")
    header = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return header + "\n".join("| " + " | ".join(str(v) for v in r) + " |" for r in out.itertuples(index=False))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", nargs="*", default=list(DATASETS))
    p.add_argument("--no-kfold", action="store_true", help="skip the 10-fold elpd comparison")
    p.add_argument("--no-order-search", action="store_true", help="skip the data-chosen ordering")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=str(HERE / "realdata_ordinal.csv"))
    args = p.parse_args(argv)
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} not found (the shared real data sets are not on this machine)")
        return 0
    rows = []
    for name in args.datasets:
        if name not in DATASETS:
            p.error(f"unknown data set {name!r}; choose from {list(DATASETS)}")
        path = SHARED / ("anesthesia.csv" if name == "anesthesia" else name)
        if not path.exists():
            print(f"skipped {name}: {path} not found")
            continue
        row = run(name, not args.no_kfold, not args.no_order_search, args.seed)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
        rows.append(row)
        pd.DataFrame(rows).to_csv(args.out, index=False)
    print(markdown(pd.DataFrame(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
