"""Calibration on real gold-labelled data: before/after temperature scaling, and a tempered likelihood.

Uses the data loaders, method list and fitting settings of ``bench/realdata.py``
(imported, not copied) on every categorical data set in ``../shared/data``.

Three studies, one run:

1. **Calibration with a few gold items** (:func:`pyrater.calibrate`).  For
   every method, every data set, fractions 5% and 10% and ``--splits``
   repeated random splits (``numpy.random.default_rng([seed, split])``): a
   random share of the gold items calibrates (``calibrate(probs, gold_cal,
   method, cv=5, seed=split)`` for every map of ``CAL_METHODS``; the first,
   ``calibrate``'s default, heads the report), the other gold items are scored before and
   after (:func:`pyrater.checking.scoring.score`: accuracy, ECE with 15 bins, Brier,
   log-loss).  The calibration set has ``max(round(fraction * gold), 10)``
   items: ``calibrate`` refuses fewer than 10 (bluebirds, 108 gold items, has
   10 = 9.3% at "5%"; flagged in the table).  ``temperature+bias`` runs only
   where the fraction gives at least ``10 K`` items.  The class
   probabilities come from one fit per method and data set on all ratings
   (the gold labels are not used by any fit).
2. **Tempered likelihood** (:func:`tempering.tempered_class_probabilities`):
   the power chosen without gold labels by the leave-one-rating-out
   predictive log-likelihood, for every EM variant and Stan-opt; scored on
   all gold items against the untempered fit.
3. **Full Bayesian vs plug-in**: Gibbs (every set) and Stan MCMC (small
   sets), both Rao-Blackwellised, against ML EM, MAP EM and Stan-opt, from
   the same fits, before and after calibration.

Writes ``bench/realdata_calibration_{splits,summary,tempered,reliability}.csv``
and ``bench/RESULTS_calibration.md``.

Usage::

    python bench/realdata_calibration.py                         # everything
    python bench/realdata_calibration.py --datasets bluebirds dog --no-stan --out-dir /tmp/rc
    python bench/realdata_calibration.py --report-only
    python bench/realdata_calibration.py --notebook   # notebooks/real_data.ipynb = realdata.py's cells + these
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import pyrater  # noqa: E402
import realdata as rd  # noqa: E402
from pyrater.checking.calibration import min_gold_items  # noqa: E402
from pyrater.checking.scoring import ece_noise_floor, reliability_diagram, score  # noqa: E402
from tempering import tempered_class_probabilities  # noqa: E402

FRACTIONS = (0.05, 0.10)
N_SPLITS = 8
SEED = 2026
CV = 5
#: Calibration maps compared on every split; the first is ``pyrater.calibrate``'s default and heads the report.
CAL_METHODS = ("bayes-temperature", "temperature", "temperature+bias")
DEFAULT_CAL = CAL_METHODS[0]
#: Methods whose fit has point estimates of pi and theta for the tempered likelihood.
TEMPER_METHODS = ("DS-ML", "DS-MAP", "CC-ML", "CC-MAP", "HOM-ML", "HOM-MAP", "Stan-opt")
#: ... of which these are also calibrated after tempering.
TEMPER_SPLIT_METHODS = ("DS-ML", "DS-MAP")
METRICS = ("accuracy", "ece", "brier", "log_loss")


# ---------------------------------------------------------------- fitting
def fit_object(method: str, ds: rd.Dataset) -> Any:
    """The fit object of one method, with exactly ``realdata.fit_method``'s settings (MV: the vote)."""
    data = ds.data
    K = data.n_categories
    if method == "MV":
        return rd.majority_vote(data, tie_break="first")
    if method in rd.EM_METHODS:
        model, how = rd.EM_METHODS[method]
        if how == "map":
            model = rd.map_model(model, K)
        return rd._quiet(lambda: pyrater.em(data, model, method=how, n_restarts=rd.EM_RESTARTS, seed=rd.EM_SEED))
    if method == "Stan-opt":
        model = rd.map_model("dawid_skene", K)
        return rd._quiet(lambda: pyrater.fit(data, model, method="optimize", seed=rd.STAN_SEED))
    if method == "Stan-MCMC":
        return rd._quiet(
            lambda: pyrater.fit(data, "dawid_skene", method="mcmc", seed=rd.STAN_SEED, progress=False, **rd.MCMC)
        )
    if method in rd.GIBBS_METHODS:
        return rd._quiet(
            lambda: pyrater.fit(data, rd.GIBBS_METHODS[method], method="gibbs", seed=rd.STAN_SEED, **rd.GIBBS)
        )
    raise ValueError(f"unknown method {method!r}")


def _rel(y_items: pd.Series, probs: pd.DataFrame, **tags: Any) -> pd.DataFrame:
    y = pd.Index(probs.columns).get_indexer(y_items.to_numpy())
    d = reliability_diagram(y, probs.loc[y_items.index].to_numpy(), n_bins=rd.N_BINS)
    for i, (k, v) in enumerate(tags.items()):
        d.insert(i, k, v)
    return d


def pool_reliability(df: pd.DataFrame) -> pd.DataFrame:
    """Reliability bins pooled over splits: item count and sums of confidence and correctness per bin."""
    df = df.assign(conf_sum=df.confidence.fillna(0) * df["count"], acc_sum=df.accuracy.fillna(0) * df["count"])
    df = (
        df.groupby(["dataset", "method", "fraction", "stage", "bin"], sort=False)[["count", "conf_sum", "acc_sum"]]
        .sum()
        .reset_index()
    )
    return df[df["count"] > 0].reset_index(drop=True)


def calibration_splits(
    ds: rd.Dataset, method: str, probs: pd.DataFrame, fractions=FRACTIONS, n_splits: int = N_SPLITS, seed: int = SEED
) -> tuple[list[dict], list[pd.DataFrame]]:
    """Before/after scores on the held-out gold items for every fraction, split and calibration method."""
    rows, bins = [], []
    gold = ds.truth
    n = len(gold)
    K = ds.data.n_categories
    for frac in fractions:
        n_cal = max(int(round(frac * n)), min_gold_items(DEFAULT_CAL, K, CV))
        for split in range(n_splits):
            rng = np.random.default_rng([seed, split])
            pick = np.sort(rng.choice(n, n_cal, replace=False))
            cal_gold = gold.iloc[pick]
            rest = gold.drop(cal_gold.index)
            before = score(probs, rest, n_bins=rd.N_BINS)
            for cm in CAL_METHODS:
                row = {
                    "dataset": ds.name,
                    "method": method,
                    "fraction": frac,
                    "split": split,
                    "cal_method": cm,
                    "n_cal": n_cal,
                    "n_scored": len(rest),
                    "padded": n_cal > round(frac * n),
                }
                if n_cal < min_gold_items(cm, K, CV):
                    rows.append({**row, "refused": True})
                    continue
                cal = pyrater.calibrate(probs, cal_gold, method=cm, cv=CV, seed=split)
                after = score(cal.probabilities, rest, n_bins=rd.N_BINS)
                row.update(
                    {
                        "refused": False,
                        "temperature": cal.temperature,
                        "floor": cal.floor,
                        "ece_noise": ece_noise_floor(
                            cal.probabilities.loc[rest.index].to_numpy(), rd.N_BINS, reps=20, seed=rng
                        ),
                        "cv_ece": cal.scores.loc["after", "ece"],
                        "cv_log_loss": cal.scores.loc["after", "log_loss"],
                    }
                )
                for m in METRICS:
                    row[f"{m}_before"] = before[m]
                    row[f"{m}_after"] = after[m]
                rows.append(row)
                if cm == DEFAULT_CAL:
                    bins.append(
                        _rel(rest, probs, dataset=ds.name, method=method, fraction=frac, split=split, stage="before")
                    )
                    bins.append(
                        _rel(
                            rest,
                            cal.probabilities,
                            dataset=ds.name,
                            method=method,
                            fraction=frac,
                            split=split,
                            stage="after",
                        )
                    )
    return rows, bins


def run(
    data_dir: Path,
    names: list[str] | None,
    out_dir: Path | None,
    stan: bool = True,
    mcmc: bool = True,
    n_splits: int = N_SPLITS,
    log: Callable[[str], None] = print,
    parts_dir: Path | None = None,
) -> dict[str, pd.DataFrame]:
    """The three studies on every data set; ``parts_dir``: keep each finished data set's rows there (pickles)
    and reuse those already there, so an interrupted run resumes where it stopped (same settings assumed)."""
    machine = rd.machine_state()
    t0 = time.perf_counter()
    names = rd.list_datasets(data_dir) if names is None else list(names)
    if not names:
        raise FileNotFoundError(f"no categorical data sets found under {data_dir}")
    split_rows, bins, temper_rows, full_rows, skipped = [], [], [], [], []
    for name in names:
        part = None if parts_dir is None else Path(parts_dir) / f"{name}__splits{n_splits}.pkl"
        if part is not None and part.exists():
            saved = pd.read_pickle(part)
            split_rows += saved["split_rows"]
            bins += saved["bins"]
            temper_rows += saved["temper_rows"]
            full_rows += saved["full_rows"]
            skipped += saved["skipped"]
            log(f"{name}: reused {part}")
            continue
        n_before = [len(split_rows), len(bins), len(temper_rows), len(full_rows), len(skipped)]
        ds = rd.load_dataset(name, data_dir)
        log(f"{name}: {ds.n_ratings} ratings, K={ds.data.n_categories}, {len(ds.truth)} gold")
        for method in rd.METHODS:
            why = rd.skip_reason(method, ds, rd.STAN_MAX_RATINGS, rd.MCMC_MAX_RATINGS, stan, mcmc)
            if why:
                skipped.append({"dataset": name, "method": method, "reason": why})
                continue
            t = time.perf_counter()
            fit = fit_object(method, ds)
            secs = time.perf_counter() - t
            probs = fit.class_probabilities()
            full = score(probs, ds.truth, n_bins=rd.N_BINS)
            full_rows.append(
                {
                    "dataset": name,
                    "method": method,
                    "K": ds.data.n_categories,
                    "gold": len(ds.truth),
                    **full,
                    "seconds": secs,
                }
            )
            r, b = calibration_splits(ds, method, probs, n_splits=n_splits)
            split_rows += r
            bins += b
            ok = pd.DataFrame([x for x in r if not x["refused"] and x["cal_method"] == DEFAULT_CAL])
            msg = "  ".join(
                f"{f:.0%}: ECE {g.ece_before.mean():.3f}->{g.ece_after.mean():.3f}" for f, g in ok.groupby("fraction")
            )
            if method in TEMPER_METHODS:
                tp = tempered_class_probabilities(fit)
                s = score(tp.probabilities, ds.truth, n_bins=rd.N_BINS)
                temper_rows.append(
                    {
                        "dataset": name,
                        "method": method,
                        "power": tp.power,
                        "loo_gain": tp.log_score - tp.log_score_untempered,
                        **{f"{m}_before": full[m] for m in METRICS},
                        **{f"{m}_tempered": s[m] for m in METRICS},
                    }
                )
                if method in TEMPER_SPLIT_METHODS:
                    r, b = calibration_splits(ds, method + "+tempered", tp.probabilities, n_splits=n_splits)
                    split_rows += r
                msg += f"  | tempered tau {tp.power:.2f}: ECE {full['ece']:.3f}->{s['ece']:.3f}"
            log(f"  {method:9s} {secs:6.1f} s  {msg}")
        if part is not None:
            part.parent.mkdir(parents=True, exist_ok=True)
            lists = (split_rows, bins, temper_rows, full_rows, skipped)
            pd.to_pickle(
                {
                    key: lst[n:]
                    for key, lst, n in zip(
                        ("split_rows", "bins", "temper_rows", "full_rows", "skipped"), lists, n_before
                    )
                },
                part,
            )
    total = time.perf_counter() - t0
    out = {
        "splits": pd.DataFrame(split_rows),
        "full": pd.DataFrame(full_rows),
        "tempered": pd.DataFrame(temper_rows),
        "reliability": pool_reliability(pd.concat(bins, ignore_index=True)) if bins else pd.DataFrame(),
        "skipped": pd.DataFrame(skipped, columns=["dataset", "method", "reason"]),
    }
    meta = {
        "machine": machine,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "timing": f"{total:.0f} s wall-clock ({total / 60:.1f} min), {len(names)} data sets, {n_splits} splits",
        "command": "python bench/realdata_calibration.py " + " ".join(sys.argv[1:]),
    }
    log(meta["timing"])
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for key, df in out.items():
            df.to_csv(out_dir / f"realdata_calibration_{key}.csv", index=False, float_format="%.6g")
        (out_dir / "realdata_calibration_meta.txt").write_text("\n".join(f"{k}: {v}" for k, v in meta.items()) + "\n")
        write_report(out_dir)
    return out


# ------------------------------------------------------------------ report
def summarise(splits: pd.DataFrame, cal_method: str = DEFAULT_CAL) -> pd.DataFrame:
    """Per data set, method and fraction: mean and sd over splits of every before/after metric.

    ``cal_method``: the calibration map whose rows are summarised.  Splits
    written before the default map existed hold only ``"temperature"`` (and
    ``"temperature+bias"``); for them the summary is of ``"temperature"``.
    """
    if cal_method not in set(splits.cal_method):
        cal_method = "temperature"
    s = splits[(splits.cal_method == cal_method) & (~splits.refused.astype(bool))]
    cols = [f"{m}_{w}" for m in METRICS for w in ("before", "after")] + ["temperature", "cv_ece", "ece_noise"]
    g = s.groupby(["dataset", "method", "fraction"], sort=False)
    mean = g[cols].mean()
    sd = g[cols].std().add_suffix("_sd")
    out = mean.join(sd).join(g.n_cal.first()).join(g.padded.first()).reset_index()
    return out


def _md(df: pd.DataFrame, nd: int = 3) -> str:
    return rd._md(df, nd)


def _same_sets(summ: pd.DataFrame, method: str, fraction: float = 0.05) -> str:
    """ ", on the same N sets: A x, B y, ..." -- every method's mean ECE after over the sets ``method`` ran on."""
    s = summ[summ.fraction == fraction].pivot_table(index="dataset", columns="method", values="ece_after")
    if method not in s:
        return ""
    s = s.loc[s[method].notna()].dropna(axis=1)
    means = s.mean().reindex([m for m in rd.METHODS if m in s.columns])
    return f"; on the same {len(s)} sets: " + ", ".join(f"{m} {v:.3f}" for m, v in means.items())


def _floor_paragraph(out_dir: Path) -> list[str]:
    """A paragraph on ``bench/calibration_floor.py``'s results, if its CSV is in ``out_dir``."""
    path = Path(out_dir) / "realdata_calibration_floor.csv"
    if not path.exists():
        return []
    import calibration_floor as cf

    s = cf.summary(pd.read_csv(path))
    five = s[s.fraction == 0.05]
    return [
        "**What 5% of the gold items can achieve** (`bench/calibration_floor.py`, "
        "[RESULTS_calibration_floor.md](RESULTS_calibration_floor.md); same fits and splits, "
        f"{len(five)} methods without Stan). In a simulated world where one temperature map is exactly right (gold "
        "labels drawn from the map fitted on all gold items), the default map learnt from the same 5% of the "
        f"items reaches a mean held-out ECE of {five.exact_map.min():.3f}-{five.exact_map.max():.3f} "
        f"({int((five.exact_map <= 0.05).sum())} of {len(five)} methods at or below 0.05): "
        f"{five.noise.min():.3f}-{five.noise.max():.3f} is the noise of ECE itself on the held-out items and "
        f"{five.estimation.min():.3f}-{five.estimation.max():.3f} the cost of learning the map, most of it on the "
        "small sets (10-40 calibration items). The real labels add "
        + ", ".join(f"{r.method} {r.shape:+.3f}" for r in five.itertuples())
        + " (the map's shape on real data).\n"
    ]


def write_report(out_dir: Path) -> Path:
    splits = pd.read_csv(out_dir / "realdata_calibration_splits.csv")
    full = pd.read_csv(out_dir / "realdata_calibration_full.csv")
    temp = pd.read_csv(out_dir / "realdata_calibration_tempered.csv")
    skipped = pd.read_csv(out_dir / "realdata_calibration_skipped.csv")
    meta = dict(
        line.split(": ", 1)
        for line in (out_dir / "realdata_calibration_meta.txt").read_text().splitlines()
        if ": " in line
    )
    summ = summarise(splits)
    summ.to_csv(out_dir / "realdata_calibration_summary.csv", index=False, float_format="%.6g")
    base_methods = [m for m in rd.METHODS if m in set(full.method)]
    all_methods = base_methods + [m + "+tempered" for m in TEMPER_METHODS if m + "+tempered" in set(summ.method)]
    n_sets = full.dataset.nunique()
    L = [
        "# Calibration on real gold-labelled data: posterior-predictive temperature scaling with 5% / 10% gold "
        "items, Bayesian vs plug-in fits, and a tempered likelihood\n",
        f"Produced by `{meta.get('command', 'python bench/realdata_calibration.py').strip()}` ({meta.get('when', '?')}); "
        f"{meta.get('timing', '')}. Machine: {meta.get('machine', '?')}; scipy "
        f"{__import__('scipy').__version__}, pyrater {pyrater.__version__}. Data: `../shared/data` "
        f"({n_sets} categorical gold-labelled sets). Fits and their settings are those of `bench/realdata.py` "
        "(EM with 5 restarts; MAP with rater's default priors, off-diagonal pseudo-counts >= 1; Gibbs 4 chains x "
        "(500 + 1000) sweeps on every set; Stan only on the smaller sets, see the end).\n",
        "**Protocol.** One fit per method and data set on all ratings (no fit sees a gold label). For each of "
        f"{splits.split.nunique()} random splits (seeded) a fraction of the gold items (5% or 10%; at least 10, "
        "the minimum `pyrater.calibrate` accepts) calibrates the class probabilities with "
        f"`pyrater.calibrate(probs, gold_cal, method=m, cv=5, seed=split)` for m in {', '.join(CAL_METHODS)}; "
        "the remaining gold items are scored before and after: accuracy, top-label ECE (15 equal-width bins), "
        "multi-class Brier score, log-loss. The calibration maps see only the calibration items (and the "
        "unlabelled probabilities of all items); every setting of the maps is a fixed default of "
        "`pyrater.calibrate`, the same on every data set. Tables give means over splits; `sd` is the standard "
        "deviation over splits. Both temperature maps keep each item's most probable class, so accuracy is "
        f"unchanged by construction. Unless named, 'after' is `{DEFAULT_CAL}`, `calibrate`'s default: the "
        "posterior-predictive mixture of temperature maps under a prior uniform in the mean calibrated "
        "confidence of all items (module notes of `pyrater.checking.calibration`); `temperature` is the earlier "
        "default, one penalised-ML temperature.\n",
    ]

    # -------- headline per method
    L.append(f"## Mean over data sets, per method ({DEFAULT_CAL})\n")
    summ_ml = summarise(splits, "temperature")
    rows = []
    for m in all_methods:
        for frac in sorted(summ.fraction.unique()):
            g = summ[(summ.method == m) & (summ.fraction == frac)]
            if not len(g):
                continue
            gm = summ_ml[(summ_ml.method == m) & (summ_ml.fraction == frac)]
            rows.append(
                {
                    "method": m,
                    "gold used": f"{frac:.0%}",
                    "sets": len(g),
                    "ECE before": g.ece_before.mean(),
                    "ECE after": g.ece_after.mean(),
                    "ECE after (mean sd over splits)": g.ece_after_sd.mean(),
                    "ECE after, ML temperature": gm.ece_after.mean() if len(gm) else np.nan,
                    "sets with ECE after <= 0.05": int((g.ece_after <= 0.05).sum()),
                    "ECE noise floor": g.ece_noise.mean(),
                    "Brier before": g.brier_before.mean(),
                    "Brier after": g.brier_after.mean(),
                    "log-loss before": g.log_loss_before.mean(),
                    "log-loss after": g.log_loss_after.mean(),
                    "log-loss after, ML temperature": gm.log_loss_after.mean() if len(gm) else np.nan,
                    "accuracy before": g.accuracy_before.mean(),
                    "accuracy after": g.accuracy_after.mean(),
                    "median T": g.temperature.median(),
                }
            )
    head = pd.DataFrame(rows)
    L.append(_md(head))
    L.append("")
    h5 = head[(head["gold used"] == "5%") & head.method.isin(base_methods)]
    ok = splits[splits.cal_method.isin(["bayes-temperature", "temperature"])].dropna(subset=["accuracy_after"])
    acc_ok = bool(ok.eval("accuracy_after >= accuracy_before - 1e-12").all())
    met = h5[h5["ECE after"] <= 0.05]
    missed = h5[h5["ECE after"] > 0.05]
    ds_methods = [m for m in ("DS-ML", "DS-MAP", "Stan-opt", "Stan-MCMC", "Gibbs-DS") if m in set(h5.method)]
    ds_met = bool(len(ds_methods)) and bool((h5.set_index("method").loc[ds_methods, "ECE after"] <= 0.05).all())
    L.append(
        "**Target (mean ECE <= 0.05 after calibration with 5% gold items, accuracy not lower).** "
        f"Met by {len(met)} of {len(h5)} methods: "
        + (", ".join(f"{r.method} {r['ECE after']:.3f}" for _, r in met.iterrows()) or "none")
        + ". Missed by "
        + (", ".join(f"{r.method} {r['ECE after']:.3f} ({r.sets} sets)" for _, r in missed.iterrows()) or "none")
        + f". Dawid-Skene fits ({', '.join(ds_methods)}): {'all met' if ds_met else 'NOT all met'}. "
        f"Accuracy after = before on every split of both temperature maps: {acc_ok}. Stan-MCMC runs only on "
        "the small sets (see the end), so its mean is over fewer, harder sets" + _same_sets(summ, "Stan-MCMC") + ".\n"
    )
    L.extend(_floor_paragraph(out_dir))

    h10 = head[(head["gold used"] == "10%") & head.method.isin(base_methods)]
    L.append(
        "**Findings.** "
        + (
            f"With 5% of the gold items, `{DEFAULT_CAL}` lowers the mean held-out ECE of every method "
            f"({h5['ECE before'].min():.3f}-{h5['ECE before'].max():.3f} -> "
            f"{h5['ECE after'].min():.3f}-{h5['ECE after'].max():.3f}; one ML temperature: "
            f"{h5['ECE after, ML temperature'].min():.3f}-{h5['ECE after, ML temperature'].max():.3f}) and the mean "
            f"log-loss from {h5['log-loss before'].min():.2f}-{h5['log-loss before'].max():.2f} to "
            f"{h5['log-loss after'].min():.2f}-{h5['log-loss after'].max():.2f} (ML temperature "
            f"{h5['log-loss after, ML temperature'].min():.2f}-{h5['log-loss after, ML temperature'].max():.2f}), with "
            "accuracy unchanged. Averaging the map over the posterior of T matters most where it should: on the "
            "small sets (10-40 calibration items) a single fitted T is noisy and, with a prior centred at T = 1, "
            "pulled back towards the over-confident fit, whereas the full-gold temperatures of the DS fits are "
            "2-10; the prior uniform in the mean calibrated confidence makes no such pull. What remains on the "
            "small sets is the noise of ECE itself on a few hundred held-out items (column 'ECE noise floor': the "
            "expected ECE of perfectly calibrated probabilities on the same items) and of the map. With 10% of "
            "the gold items "
            + ", ".join(f"{r.method} {r['ECE after']:.3f}" for _, r in h10.iterrows())
            + ". Where the fraction gives at least 10 K items, adding per-class biases (penalised ML) helps the "
            "homogeneous model and raises accuracy (table below). The tempered likelihood (no gold labels) moves "
            "ECE only a little and costs accuracy on some sets (its section), so it is not offered as a user "
            "option; calibration on gold items is the remedy that works."
        )
        + "\n"
    )

    # -------- the three maps side by side
    L.append("## Calibration maps compared (mean held-out ECE / log-loss after, same splits)\n")
    rows = []
    for m in base_methods:
        for frac in sorted(summ.fraction.unique()):
            r = {"method": m, "gold used": f"{frac:.0%}"}
            for cm, sm in ((DEFAULT_CAL, summ), ("temperature", summ_ml)):
                g = sm[(sm.method == m) & (sm.fraction == frac)]
                r[f"ECE {cm}"] = g.ece_after.mean() if len(g) else np.nan
                r[f"log-loss {cm}"] = g.log_loss_after.mean() if len(g) else np.nan
            g1, g2 = (
                summ[(summ.method == m) & (summ.fraction == frac)],
                summ_ml[(summ_ml.method == m) & (summ_ml.fraction == frac)],
            )
            j = g1.set_index("dataset").ece_after.sub(g2.set_index("dataset").ece_after).dropna()
            r[f"sets where {DEFAULT_CAL} has lower ECE"] = f"{int((j < -1e-9).sum())} / {len(j)}"
            rows.append(r)
    L.append(_md(pd.DataFrame(rows)))
    L.append("")

    # -------- per data set, 5%
    for frac in sorted(summ.fraction.unique()):
        L.append(
            f"## ECE per data set before -> after, {frac:.0%} gold items (mean over splits; sd after in brackets)\n"
        )
        s = summ[summ.fraction == frac]
        tab = {}
        for _, r in s.iterrows():
            tab.setdefault(r.dataset, {})[r.method] = f"{r.ece_before:.3f} -> {r.ece_after:.3f} ({r.ece_after_sd:.3f})"
        t = pd.DataFrame(tab).T.reindex(columns=[m for m in all_methods if m in set(s.method)])
        t.insert(
            0,
            "n cal",
            s.groupby("dataset", sort=False).n_cal.first().astype(int).astype(str)
            + s.groupby("dataset", sort=False).padded.first().map({True: "*", False: ""}),
        )
        t = t.reset_index().rename(columns={"index": "dataset"}).fillna("–")
        L.append(_md(t))
        L.append("\n`*`: fewer than 10 gold items at this fraction, 10 used.\n")

    # -------- log-loss and Brier per set at 5%
    L.append("## Log-loss and Brier per data set, 5% gold items (before -> after, mean over splits)\n")
    s = summ[summ.fraction == 0.05]
    for metric in ("log_loss", "brier"):
        tab = {}
        for _, r in s[s.method.isin(base_methods)].iterrows():
            tab.setdefault(r.dataset, {})[r.method] = f"{r[metric + '_before']:.3f} -> {r[metric + '_after']:.3f}"
        t = pd.DataFrame(tab).T.reindex(columns=[m for m in base_methods if m in set(s.method)]).fillna("–")
        L.append(f"**{metric}**\n")
        L.append(_md(t.reset_index().rename(columns={"index": "dataset"})))
        L.append("")

    # -------- temperature + bias
    sb = summarise(splits, "temperature+bias")
    if len(sb):
        L.append("## Temperature + per-class bias (only where the fraction gives >= 10 K gold items)\n")
        L.append("'T only' is the penalised-ML temperature (`method=\"temperature\"`) on the same sets and splits.\n")
        rows = []
        for (m, frac), g in sb[sb.method.isin(base_methods)].groupby(["method", "fraction"], sort=False):
            t = summ_ml[(summ_ml.method == m) & (summ_ml.fraction == frac) & summ_ml.dataset.isin(g.dataset)]
            rows.append(
                {
                    "method": m,
                    "gold used": f"{frac:.0%}",
                    "sets": len(g),
                    "ECE after (T only)": t.ece_after.mean(),
                    "ECE after (T + bias)": g.ece_after.mean(),
                    "log-loss after (T only)": t.log_loss_after.mean(),
                    "log-loss after (T + bias)": g.log_loss_after.mean(),
                    "accuracy before": g.accuracy_before.mean(),
                    "accuracy after (T + bias)": g.accuracy_after.mean(),
                }
            )
        L.append(_md(pd.DataFrame(rows)))
        L.append("")

    # -------- CV estimate honesty
    s = splits[(splits.cal_method == DEFAULT_CAL) & (~splits.refused.astype(bool))]
    cvh = (
        s.groupby("fraction")
        .apply(
            lambda g: pd.Series(
                {
                    "mean CV ECE (calibration items)": g.cv_ece.mean(),
                    "mean held-out ECE": g.ece_after.mean(),
                    "mean n cal": g.n_cal.mean(),
                }
            ),
            include_groups=False,
        )
        .reset_index()
    )
    L.append("## Is calibrate()'s cross-validated ECE honest?\n")
    L.append(
        "The 5-fold CV ECE that `calibrate` reports from the calibration items alone, against the ECE "
        "measured on the held-out gold items (means over all methods, sets and splits). ECE is biased "
        "upwards on few items (15 bins, 10-50 items), so the CV figure is pessimistic for small gold sets.\n"
    )
    L.append(_md(cvh))
    L.append("")

    # -------- tempered likelihood
    L.append("## Model-side remedy: tempered likelihood, power chosen without gold labels\n")
    L.append(
        "`tempering.tempered_class_probabilities(fit)`: class posteriors from "
        "`log pi_k + tau * sum_r log theta[j_r, k, y_r]` at the fit's estimates, `tau` in [0.02, 1.5] maximising "
        "the leave-one-rating-out predictive log-likelihood of the ratings. Scored on all gold items.\n"
    )
    rows = []
    for m in TEMPER_METHODS:
        g = temp[temp.method == m]
        if not len(g):
            continue
        rows.append(
            {
                "method": m,
                "sets": len(g),
                "median tau": g.power.median(),
                "ECE better": int((g.ece_tempered < g.ece_before - 1e-9).sum()),
                "ECE worse": int((g.ece_tempered > g.ece_before + 1e-9).sum()),
                "mean ECE": g.ece_before.mean(),
                "mean ECE tempered": g.ece_tempered.mean(),
                "mean log-loss": g.log_loss_before.mean(),
                "mean log-loss tempered": g.log_loss_tempered.mean(),
                "accuracy lower": int((g.accuracy_tempered < g.accuracy_before - 1e-9).sum()),
                "accuracy higher": int((g.accuracy_tempered > g.accuracy_before + 1e-9).sum()),
                "mean accuracy change": (g.accuracy_tempered - g.accuracy_before).mean(),
            }
        )
    tsum = pd.DataFrame(rows)
    L.append(_md(tsum, 3))
    L.append("")
    L.append("Per data set (DS-MAP, the default EM fit; other methods in `realdata_calibration_tempered.csv`):\n")
    g = temp[temp.method == "DS-MAP"][
        [
            "dataset",
            "power",
            "ece_before",
            "ece_tempered",
            "log_loss_before",
            "log_loss_tempered",
            "brier_before",
            "brier_tempered",
            "accuracy_before",
            "accuracy_tempered",
        ]
    ]
    L.append(_md(g, 3))
    L.append("")
    # tempered + calibrated
    tc = head[head.method.str.endswith("+tempered") & (head["gold used"] == "5%")]
    if len(tc):
        L.append(
            "Tempering first and then calibrating with 5% gold items (mean ECE after): "
            + ", ".join(
                f"{r.method} {r['ECE after']:.3f} (untempered "
                f"{head[(head.method == r.method.replace('+tempered', '')) & (head['gold used'] == '5%')]['ECE after'].iloc[0]:.3f})"
                for _, r in tc.iterrows()
            )
            + ".\n"
        )

    # -------- Bayesian vs plug-in (item 2a)
    bayes_methods = [m for m in ("Gibbs-DS", "Stan-MCMC") if m in set(full.method)]
    if bayes_methods:
        plug = [m for m in ("DS-ML", "DS-MAP", "Stan-opt") if m in set(full.method)]
        cols = plug + bayes_methods
        L.append("## Full Bayesian (Gibbs, Stan NUTS; Rao-Blackwellised) vs plug-in Dawid-Skene fits\n")
        L.append(
            "Uncalibrated scores on all gold items of this run's fits (same model, `dawid_skene`: ML EM, MAP EM "
            "and Stan-opt plug in one estimate of pi and theta; Gibbs-DS and Stan-MCMC average the class "
            "posteriors over the posterior draws), and the held-out ECE after `" + DEFAULT_CAL + "` with 5% "
            "gold items. Gibbs runs on every set; NUTS only where it is small enough for this machine.\n"
        )
        s5 = summ[summ.fraction == 0.05]
        rows = []
        for d in full.dataset.unique():
            f = full[full.dataset == d].set_index("method")
            r = {"dataset": d}
            for metric, lab in (("ece", "ECE"), ("log_loss", "log-loss"), ("accuracy", "acc")):
                for m in cols:
                    r[f"{lab} {m}"] = f.loc[m, metric] if m in f.index else np.nan
            for m in ("DS-MAP",) + tuple(bayes_methods):
                g = s5[(s5.dataset == d) & (s5.method == m)]
                r[f"ECE cal-5% {m}"] = g.ece_after.iloc[0] if len(g) else np.nan
            rows.append(r)
        bay = pd.DataFrame(rows)
        L.append(_md(bay, 3))
        L.append("")
        lines = []
        for bm in bayes_methods:
            sub = bay[bay[f"ECE {bm}"].notna()]
            for pm in ("DS-MAP", "DS-ML"):
                if f"ECE {pm}" not in sub:
                    continue
                de = sub[f"ECE {bm}"] - sub[f"ECE {pm}"]
                dl = sub[f"log-loss {bm}"] - sub[f"log-loss {pm}"]
                da = sub[f"acc {bm}"] - sub[f"acc {pm}"]
                lines.append(
                    f"{bm} vs {pm} on {len(sub)} sets: mean ECE {sub[f'ECE {pm}'].mean():.3f} -> "
                    f"{sub[f'ECE {bm}'].mean():.3f} (lower on {int((de < -1e-9).sum())}), mean log-loss "
                    f"{sub[f'log-loss {pm}'].mean():.3f} -> {sub[f'log-loss {bm}'].mean():.3f} (lower on "
                    f"{int((dl < -1e-9).sum())}), mean accuracy change {da.mean():+.4f} (lower on "
                    f"{int((da < -1e-9).sum())}, higher on {int((da > 1e-9).sum())})"
                )
            c5 = sub[[f"ECE cal-5% {bm}", "ECE cal-5% DS-MAP"]].dropna()
            if len(c5):
                lines.append(
                    f"after calibration with 5% gold, {bm} vs DS-MAP on {len(c5)} sets: mean held-out ECE "
                    f"{c5['ECE cal-5% DS-MAP'].mean():.3f} (DS-MAP) vs {c5[f'ECE cal-5% {bm}'].mean():.3f}"
                )
        L.append("Summary: " + "; ".join(lines) + ".\n")
    if len(skipped):
        L.append("## Not run\n")
        L.append(_md(skipped.groupby(["method", "reason"]).dataset.apply(lambda x: ", ".join(x)).reset_index()))
        L.append("")
    path = out_dir / "RESULTS_calibration.md"
    path.write_text("\n".join(L) + "\n")
    return path


# --------------------------------------------------------------- notebook
#: Cells appended to ``realdata._NB_CELLS`` in notebooks/real_data.ipynb (see :func:`write_notebook`).
_NB_CELLS: list[tuple[str, str]] = [
    (
        "markdown",
        """## Calibration with a few gold items: before and after temperature scaling

`bench/realdata_calibration.py` calibrates every method's class probabilities with `pyrater.calibrate` (its
default map, `"bayes-temperature"`: temperature scaling averaged over the posterior of the temperature) on a
random 5% or 10% of the gold items (at least 10) and scores the other gold items before and after, over
repeated random splits; it also tries a tempered likelihood whose power is chosen without gold labels
(`bench/tempering.py`). This section reads its CSVs (`bench/realdata_calibration_*.csv`); where they are missing
it recomputes the study on two small data sets (no Stan, 3 splits).""",
    ),
    (
        "code",
        """spec = importlib.util.spec_from_file_location("realdata_calibration", repo / "bench" / "realdata_calibration.py")
rc = importlib.util.module_from_spec(spec); sys.modules["realdata_calibration"] = rc; spec.loader.exec_module(rc)
if (bench / "realdata_calibration_splits.csv").exists():
    csource = "bench/realdata_calibration_*.csv (full run of bench/realdata_calibration.py)"
    splits = pd.read_csv(bench / "realdata_calibration_splits.csv")
    crel = pd.read_csv(bench / "realdata_calibration_reliability.csv")
    temp = pd.read_csv(bench / "realdata_calibration_tempered.csv")
else:
    csource = "recomputed here on two small data sets (no Stan, 3 splits)"
    cout = rc.run(rd.DEFAULT_DATA, ["bluebirds", "zheng_possent"], out_dir=None, stan=False, n_splits=3, log=lambda s: None)
    splits, crel, temp = cout["splits"], cout["reliability"], cout["tempered"]
summ = rc.summarise(splits)
cmethods = [m for m in list(rd.METHODS) + [m + "+tempered" for m in rc.TEMPER_METHODS] if m in set(summ.method)]
print(csource, "|", summ.dataset.nunique(), "data sets |", splits.split.nunique(), "splits")
table = (summ.groupby(["method", "fraction"])[["ece_before", "ece_after", "ece_after_sd", "log_loss_before",
                                               "log_loss_after", "brier_before", "brier_after",
                                               "accuracy_before", "accuracy_after"]].mean()
         .reindex(cmethods, level=0))
table.style.format("{:.3f}")""",
    ),
    (
        "markdown",
        """### Reliability diagrams before and after calibration (5% gold items)

Held-out gold items of all data sets and splits pooled: mean top-class probability against the share of
correct top-class predictions per confidence bin, before (grey) and after (blue) `calibrate`'s default map
fitted on 5% of the gold items. Marker area shows the number of items in the bin.""",
    ),
    (
        "code",
        """r5 = crel[crel.fraction == 0.05]
pooled = r5.groupby(["method", "stage", "bin"])[["count", "conf_sum", "acc_sum"]].sum().reset_index()
pooled["confidence"] = pooled.conf_sum / pooled["count"]
pooled["accuracy"] = pooled.acc_sum / pooled["count"]
shown = [m for m in rd.METHODS if m in set(pooled.method)]
n = len(shown); ncol = 3; nrow = int(np.ceil(n / ncol))
fig, axes = plt.subplots(nrow, ncol, figsize=(4 * ncol, 3.6 * nrow), sharex=True, sharey=True, squeeze=False)
for ax, m in zip(axes.flat, shown):
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--")
    for stage, color in (("before", "0.55"), ("after", "C0")):
        g = pooled[(pooled.method == m) & (pooled.stage == stage)]
        ax.plot(g.confidence, g.accuracy, color=color, lw=1, label=stage)
        ax.scatter(g.confidence, g.accuracy, s=10 + 400 * g["count"] / g["count"].sum(), color=color, alpha=0.7)
    t = table.loc[(m, 0.05)]
    ax.set_title(f"{m}: ECE {t.ece_before:.3f} -> {t.ece_after:.3f}", fontsize=10)
    ax.set_xlim(0, 1.02); ax.set_ylim(0, 1.02)
for ax in list(axes.flat)[n:]:
    ax.set_visible(False)
axes.flat[0].legend(loc="upper left", fontsize=8)
for ax in axes[-1]:
    ax.set_xlabel("mean top-class probability")
for ax in axes[:, 0]:
    ax.set_ylabel("share correct")
fig.tight_layout()""",
    ),
    (
        "markdown",
        """### ECE per data set after calibration with 5% gold items

Mean over splits of the held-out ECE after `calibrate`'s default map (blank: method not run on that set).""",
    ),
    (
        "code",
        """e5 = summ[summ.fraction == 0.05].pivot(index="dataset", columns="method", values="ece_after")
e5 = e5.reindex(columns=[m for m in cmethods if m in e5.columns])
e5.style.format("{:.3f}", na_rep="").background_gradient(cmap="Reds", vmin=0, vmax=0.2)""",
    ),
    (
        "markdown",
        """### Tempered likelihood (no gold labels)

Class posteriors with the likelihood raised to the power `tau` chosen by leave-one-rating-out prediction of
the ratings, scored on all gold items, against the untempered fit.""",
    ),
    (
        "code",
        """tt = temp.groupby("method", sort=False).agg(
    sets=("dataset", "size"), median_tau=("power", "median"),
    ece=("ece_before", "mean"), ece_tempered=("ece_tempered", "mean"),
    log_loss=("log_loss_before", "mean"), log_loss_tempered=("log_loss_tempered", "mean"),
    accuracy=("accuracy_before", "mean"), accuracy_tempered=("accuracy_tempered", "mean"))
tt["ECE better on"] = temp.assign(b=temp.ece_tempered < temp.ece_before).groupby("method", sort=False).b.sum()
tt.round(3)""",
    ),
]


def write_notebook(path: Path = rd.REPO / "notebooks" / "real_data.ipynb", execute: bool = True) -> Path:
    """notebooks/real_data.ipynb: the cells of ``realdata.py`` followed by the calibration cells, executed."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    for kind, text in list(rd._NB_CELLS) + _NB_CELLS:
        nb.cells.append(nbformat.v4.new_markdown_cell(text) if kind == "markdown" else nbformat.v4.new_code_cell(text))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if execute:
        import nbclient

        nbclient.NotebookClient(
            nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
        ).execute()
    nbformat.write(nb, str(path))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=rd.DEFAULT_DATA)
    ap.add_argument("--datasets", nargs="*", default=None)
    ap.add_argument("--out-dir", type=Path, default=HERE)
    ap.add_argument("--splits", type=int, default=N_SPLITS)
    ap.add_argument("--no-stan", action="store_true")
    ap.add_argument("--no-mcmc", action="store_true")
    ap.add_argument(
        "--parts-dir",
        type=Path,
        default=None,
        help="keep each finished data set's results here and reuse them (resume an interrupted run)",
    )
    ap.add_argument("--report-only", action="store_true", help="rebuild RESULTS_calibration.md from the CSVs")
    ap.add_argument("--notebook", action="store_true", help="rewrite and execute notebooks/real_data.ipynb")
    args = ap.parse_args(argv)
    if args.report_only or args.notebook:
        if args.report_only:
            print(write_report(args.out_dir))
        if args.notebook:
            print(write_notebook())
        return 0
    if rd.data_missing(args.data_dir):
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(
            args.data_dir,
            args.datasets,
            args.out_dir,
            stan=not args.no_stan,
            mcmc=not args.no_mcmc,
            n_splits=args.splits,
            parts_dir=args.parts_dir,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
