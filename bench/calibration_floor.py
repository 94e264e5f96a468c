"""What calibration with a few gold items can achieve: real labels against labels simulated from an exact map.

``bench/realdata_calibration.py`` measures the held-out ECE after
``pyrater.calibrate`` with 5% and 10% of the gold items.  This script asks
how much of what remains is the price of learning a map from 10-40 items,
and how much is the map being the wrong shape, with a parametric bootstrap
on the same fits and the same splits:

1. **Oracle map.**  For each data set and method, the floor and temperature
   are fitted by maximum likelihood on *all* gold items
   (``pyrater.checking.calibration.fit_calibration_map(..., prior_sd=None)``), and
   ``q*`` = that map applied to the fit's class probabilities of the gold
   items.
2. **Simulated world.**  Labels ``y~_i ~ Categorical(q*_i)`` for every gold
   item (``--draws`` sets of labels per split).  In this world a
   one-temperature map is exactly right: ``q*`` are the true class
   probabilities and lie in ``calibrate``'s family (its floor candidates and
   temperature range hold the oracle's).
3. For every split of the study (``max(round(f * gold), 10)`` calibration
   items drawn by ``numpy.random.default_rng([2026, split])``, f = 5%, 10%;
   8 splits), the default map of ``calibrate`` (``"bayes-temperature"``) is
   learnt from the calibration items and scored by top-label ECE (15 bins)
   on the other gold items, three ways:

   - ``observed``: with the real labels (what the study reports);
   - ``exact-map``: with simulated labels, learnt and scored on them (what
     calibration with this many items achieves when the map is exactly
     right);
   - ``noise``: ``q*`` itself scored against simulated labels (the ECE of
     perfectly calibrated probabilities on these held-out items: the noise
     of the metric).

``exact-map - noise`` is the cost of estimating the map from few items;
``observed - exact-map`` is the cost of its shape on the real data.  The
maps are computed with ``pyrater.checking.calibration``'s own functions, the prior
over ``T`` once per fit; the first split of every fit is checked against
``pyrater.calibrate`` (same probabilities to 1e-10), so the numbers are
those of ``calibrate``'s default.

Fits: those of ``bench/realdata_calibration.py`` (``fit_object``: EM with 5
restarts, MAP with rater's default priors, Gibbs 4 x (500 + 1000) sweeps),
Stan excluded (``--methods`` to choose).  Writes
``bench/realdata_calibration_floor.csv`` and
``bench/RESULTS_calibration_floor.md``.

Usage::

    python bench/calibration_floor.py                      # all 18 sets, 10 methods (about 30 min)
    python bench/calibration_floor.py --datasets dog face --methods DS-MAP MV --out-dir /tmp/cf
    python bench/calibration_floor.py --report-only
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
import realdata as rd  # noqa: E402
import realdata_calibration as rc  # noqa: E402
from pyrater.checking import calibration as cal  # noqa: E402
from pyrater.checking.scoring import _probs, expected_calibration_error  # noqa: E402

METHODS = ("MV", "DS-ML", "DS-MAP", "CC-ML", "CC-MAP", "HOM-ML", "HOM-MAP", "Gibbs-DS", "Gibbs-CC", "Gibbs-HOM")
DRAWS = 4
#: Calibration sets smaller than this count as small in the report.
SMALL_CAL = 50
CSV = "realdata_calibration_floor.csv"
REPORT = "RESULTS_calibration_floor.md"
META = "realdata_calibration_floor_meta.txt"


def _ece(y: np.ndarray, q: np.ndarray) -> float:
    return float(expected_calibration_error(y, q, n_bins=rd.N_BINS))


def draw_labels(q: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One label per row of ``q`` (n, K), drawn from that row."""
    u = rng.random(q.shape[0])[:, None]
    return np.minimum((u > np.cumsum(q, axis=1)).sum(axis=1), q.shape[1] - 1)


class DefaultMap:
    """``calibrate``'s default map (``"bayes-temperature"``) for one fit, its prior computed once."""

    def __init__(self, p_all: np.ndarray):
        K = p_all.shape[1]
        self.log_priors = {c: cal.confidence_prior(p_all, c) for c in cal._candidate_floors("fit", K)}

    def __call__(self, p_cal: np.ndarray, y_cal: np.ndarray, p_out: np.ndarray) -> np.ndarray:
        c, w = cal.fit_bayes_temperature(p_cal, y_cal, self.log_priors)
        return cal.apply_bayes_temperature(cal._log_probs(p_out, c), w)


def floor_rows(
    ds: rd.Dataset,
    method: str,
    probs: pd.DataFrame,
    n_splits: int = rc.N_SPLITS,
    draws: int = DRAWS,
    seed: int = rc.SEED,
) -> list[dict]:
    """Observed, exact-map and noise ECE on every split and fraction of the study, for one fit."""
    K = probs.shape[1]
    p_all = _probs(probs.to_numpy(dtype=float))
    gold = ds.truth
    rows_gold = probs.index.get_indexer(gold.index)
    P = p_all[rows_gold]
    y = pd.Index(probs.columns).get_indexer(gold.to_numpy())
    c0, t0, _ = cal.fit_calibration_map(P, y, prior_sd=None)
    q_star = cal.apply_temperature(cal._log_probs(P, c0), t0)
    mapper = DefaultMap(p_all)
    n = len(y)
    out = []
    for frac in rc.FRACTIONS:
        n_cal = max(int(round(frac * n)), cal.min_gold_items(rc.DEFAULT_CAL, K, rc.CV))
        for split in range(n_splits):
            pick = np.sort(np.random.default_rng([seed, split]).choice(n, n_cal, replace=False))
            mask = np.zeros(n, dtype=bool)
            mask[pick] = True
            q = mapper(P[mask], y[mask], P[~mask])
            if split == 0:  # the same map as pyrater.calibrate's default
                ref = pyrater.calibrate(probs, gold.iloc[pick], cv=rc.CV, seed=split).probabilities
                np.testing.assert_allclose(q, ref.to_numpy()[rows_gold[~mask]], rtol=0, atol=1e-10)
            exact, noise = [], []
            for d in range(draws):
                ys = draw_labels(q_star, np.random.default_rng([seed, split, 1, d]))
                exact.append(_ece(ys[~mask], mapper(P[mask], ys[mask], P[~mask])))
                noise.append(_ece(ys[~mask], q_star[~mask]))
            out.append(
                {
                    "dataset": ds.name,
                    "method": method,
                    "K": K,
                    "fraction": frac,
                    "split": split,
                    "n_cal": n_cal,
                    "n_scored": int((~mask).sum()),
                    "oracle_T": t0,
                    "oracle_floor": c0,
                    "oracle_ece_in_sample": _ece(y, q_star),
                    "observed": _ece(y[~mask], q),
                    "exact_map": float(np.mean(exact)),
                    "noise": float(np.mean(noise)),
                }
            )
    return out


def run(
    data_dir: Path,
    names: list[str] | None,
    methods: list[str],
    out_dir: Path,
    n_splits: int = rc.N_SPLITS,
    draws: int = DRAWS,
) -> pd.DataFrame:
    machine = rd.machine_state()
    t0 = time.perf_counter()
    names = rd.list_datasets(data_dir) if names is None else list(names)
    if not names:
        raise FileNotFoundError(f"no categorical data sets found under {data_dir}")
    rows = []
    for name in names:
        ds = rd.load_dataset(name, data_dir)
        print(f"{name}: {ds.n_ratings} ratings, K={ds.data.n_categories}, {len(ds.truth)} gold", flush=True)
        for method in methods:
            t = time.perf_counter()
            probs = rc.fit_object(method, ds).class_probabilities()
            r = floor_rows(ds, method, probs, n_splits=n_splits, draws=draws)
            rows += r
            g = pd.DataFrame(r).groupby("fraction")[["observed", "exact_map", "noise"]].mean()
            print(
                f"  {method:9s} {time.perf_counter() - t:6.1f} s  "
                + "  ".join(
                    f"{f:.0%}: observed {v.observed:.3f} exact-map {v.exact_map:.3f} noise {v.noise:.3f}"
                    for f, v in g.iterrows()
                ),
                flush=True,
            )
    total = time.perf_counter() - t0
    df = pd.DataFrame(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    df.to_csv(out_dir / CSV, index=False, float_format="%.6g")
    argv = " ".join(sys.argv[1:])
    (out_dir / META).write_text(
        f"machine: {machine}\nwhen: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
        f"timing: {total:.0f} s wall-clock ({total / 60:.1f} min), {len(names)} data sets, {n_splits} splits, "
        f"{draws} label draws per split\ncommand: python bench/calibration_floor.py {argv}\n"
    )
    write_report(out_dir)
    return df


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean over data sets (of means over splits), per method and fraction."""
    per_set = df.groupby(["method", "fraction", "dataset"], sort=False)[["observed", "exact_map", "noise"]].mean()
    s = per_set.groupby(["method", "fraction"], sort=False).agg(
        sets=("observed", "size"),
        observed=("observed", "mean"),
        exact_map=("exact_map", "mean"),
        noise=("noise", "mean"),
    )
    s["estimation"] = s.exact_map - s.noise
    s["shape"] = s.observed - s.exact_map
    s["exact_map_sets_over_0.05"] = (per_set.exact_map > 0.05).groupby(["method", "fraction"], sort=False).sum()
    return s.reset_index()


def _md(df: pd.DataFrame, nd: int = 3) -> str:
    def fmt(v):
        if isinstance(v, (float, np.floating)):
            return f"{v:.{nd}f}"
        return str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * df.shape[1]]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def write_report(out_dir: Path) -> Path:
    df = pd.read_csv(out_dir / CSV)
    meta = dict(line.split(": ", 1) for line in (out_dir / META).read_text().splitlines() if ": " in line)
    s = summary(df)
    tab = s.assign(fraction=s.fraction.map("{:.0%}".format)).rename(
        columns={
            "observed": "ECE after, real labels",
            "exact_map": "ECE after, exact map",
            "noise": "ECE noise floor",
            "estimation": "cost of estimating the map",
            "shape": "cost of the map's shape",
            "exact_map_sets_over_0.05": "sets with exact-map ECE > 0.05",
        }
    )
    five = s[s.fraction == 0.05]
    per5 = (
        df[df.fraction == 0.05]
        .groupby(["dataset", "method"], sort=False)[["n_cal", "observed", "exact_map", "noise"]]
        .mean()
    )
    wide = per5.apply(lambda r: f"{r.observed:.3f} / {r.exact_map:.3f} / {r.noise:.3f}", axis=1).unstack("method")
    wide.insert(0, "n cal", per5.n_cal.groupby("dataset", sort=False).first().astype(int))
    wide = wide.reset_index()
    ok = five[five.exact_map <= 0.05]
    est = (
        df[df.fraction == 0.05]
        .assign(estimation=lambda d: d.exact_map - d.noise)
        .groupby(["method", "dataset"], sort=False)[["n_cal", "estimation"]]
        .mean()
    )
    small, large = est.estimation[est.n_cal < SMALL_CAL], est.estimation[est.n_cal >= SMALL_CAL]
    text = [
        "# What calibration with 5% / 10% gold items can achieve: real labels against labels simulated from an exact map",
        "",
        f"Produced by `{meta.get('command', 'python bench/calibration_floor.py')}` ({meta.get('when', '?')}); "
        f"{meta.get('timing', '?')}. Machine: {meta.get('machine', '?')}. Data: `../shared/data`. Method and "
        "design: the module docstring of `bench/calibration_floor.py`. Fits and splits are those of "
        "`bench/realdata_calibration.py` (`RESULTS_calibration.md`); the map is `pyrater.calibrate`'s default, "
        "`bayes-temperature` (checked against `calibrate` on the first split of every fit).",
        "",
        "**Columns.** *Real labels*: held-out ECE after calibration, as in the study. *Exact map*: the same, "
        "in a simulated world where the true class probabilities are the oracle map (floor and temperature "
        "fitted by maximum likelihood on all gold items) applied to the fit, so that one temperature is exactly "
        "right; labels are drawn from it. *Noise floor*: the ECE of those true probabilities on the held-out "
        "items. *Cost of estimating the map* = exact map - noise floor; *cost of the map's shape* = real "
        "labels - exact map. All are means over data sets of means over splits.",
        "",
        "## Mean over data sets",
        "",
        _md(tab),
        "",
        "## Per data set, 5% gold items: real labels / exact map / noise floor",
        "",
        _md(wide),
        "",
        "## Findings",
        "",
        f"With 5% of the gold items, calibration learnt on labels drawn from an exactly right one-temperature "
        f"map reaches a mean held-out ECE of {five.exact_map.min():.3f}-{five.exact_map.max():.3f} over the "
        f"{len(five)} methods ({len(ok)} of them at or below 0.05), of which {five.noise.min():.3f}-"
        f"{five.noise.max():.3f} is the noise of ECE itself on the held-out items and "
        f"{five.estimation.min():.3f}-{five.estimation.max():.3f} the cost of learning the map (mean over methods: "
        + "; ".join(
            f"{v.mean():.3f} on the {v.size // max(1, len(five))} sets with {what} {SMALL_CAL} calibration items"
            for v, what in ((small, "fewer than"), (large, "at least"))
            if v.size
        )
        + "). The 0.05 target with 5% gold items is therefore "
        "at the limit of what any calibration of this kind can reach even when its form is exactly right; on "
        "the real labels the Dawid-Skene and class-conditional fits lose another "
        + ", ".join(
            f"{r.method} {r.shape:+.3f}"
            for r in five.itertuples()
            if not r.method.startswith(("HOM", "MV", "Gibbs-HOM"))
        )
        + " to the map's shape, and the homogeneous and majority-vote probabilities "
        + ", ".join(
            f"{r.method} {r.shape:+.3f}" for r in five.itertuples() if r.method.startswith(("HOM", "MV", "Gibbs-HOM"))
        )
        + " (one temperature cannot undo one shared error matrix, or vote shares).",
        "",
    ]
    path = out_dir / REPORT
    path.write_text("\n".join(text))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=rd.DEFAULT_DATA)
    ap.add_argument("--datasets", nargs="*", default=None)
    ap.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(rd.METHODS))
    ap.add_argument("--out-dir", type=Path, default=HERE)
    ap.add_argument("--splits", type=int, default=rc.N_SPLITS)
    ap.add_argument("--draws", type=int, default=DRAWS, help="simulated label sets per split")
    ap.add_argument("--report-only", action="store_true", help=f"rebuild {REPORT} from {CSV}")
    args = ap.parse_args(argv)
    if args.report_only:
        print(write_report(args.out_dir))
        return 0
    if rd.data_missing(args.data_dir):
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(args.data_dir, args.datasets, args.methods, args.out_dir, n_splits=args.splits, draws=args.draws)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
