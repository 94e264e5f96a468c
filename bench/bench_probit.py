"""Benchmark and calibration study of the bootstrap probit Dawid-Skene model.

Usage
-----
    python bench/bench_probit.py speed                  # B = 1000, J = 5, 10,000 items, 100 groups
    python bench/bench_probit.py calibration --datasets 100 --boot 200
    python bench/bench_probit.py all

Speed: one bootstrap with every step on (validation resampling, pi ~ Beta(2, 10),
test resampling, z draws) on simulated correlated annotators, timed as wall
clock and CPU time, without and with 10% missing labels.

Calibration: data sets simulated from the probit model with correlated
annotators (:func:`pyrater.contrib.probit.calibration.default_simulation`); coverage
of the 90% intervals of the group counts for the probit model with the
tetrachoric and the signed-probit estimators and the independence model.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import time

import numpy as np
import pandas as pd
import scipy

import pyrater.contrib.probit as pp
from pyrater.contrib.probit.calibration import calibration_study, coverage_table, default_models, default_simulation


def machine() -> str:
    try:
        model = [
            line.split(":", 1)[1].strip()
            for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if line.startswith("Model name")
        ][0]
    except Exception:  # pragma: no cover
        model = platform.processor()
    import os

    return (
        f"CPU: {model}, {os.cpu_count()} cores; Python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {scipy.__version__}, pandas {pd.__version__}"
    )


def markdown(df: pd.DataFrame, floatfmt: str = "{:.3f}") -> str:
    """A DataFrame as a GitHub markdown table (no tabulate dependency)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        cells = [floatfmt.format(v) if isinstance(v, (float, np.floating)) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed(n_boot: int = 1000, missing: float = 0.0, seed: int = 0) -> dict:
    sim = pp.simulate_study(
        rates=np.array([[0.10, 0.15, 0.08, 0.20, 0.12], [0.80, 0.75, 0.85, 0.70, 0.78]]),
        R=np.stack([pp.equicorrelation(5, 0.3), pp.equicorrelation(5, 0.5)]),
        n_validation=500,
        validation_prevalence=0.3,
        n_groups=100,
        items_per_group=100,
        population_per_group=1000,
        missing=missing,
        seed=seed,
    )
    pats = pp.encode_patterns(sim.test.drop(columns="group").fillna(-1).to_numpy(np.int8))[0]
    out = {"missing": missing, "test patterns": len(pats)}
    for name, model in default_models().items():
        t0, c0 = time.perf_counter(), time.process_time()
        res = model.bootstrap(sim.validation, sim.test, n_boot=n_boot, population=sim.population, seed=seed)
        out[f"{name} wall s"] = round(time.perf_counter() - t0, 2)
        out[f"{name} cpu s"] = round(time.process_time() - c0, 2)
        assert res.counts.shape == (n_boot, 100)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["speed", "calibration", "all"])
    ap.add_argument("--datasets", type=int, default=100)
    ap.add_argument("--boot", type=int, default=200)
    ap.add_argument("--n-qmc", type=int, default=256, help="Sobol points per orthant probability in the calibration")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--pi", default="prior", help="'prior' (Beta(2, 10) draws, default), 'estimate' or a number")
    args = ap.parse_args()
    print(machine())
    if args.what in ("speed", "all"):
        rows = [speed(missing=m) for m in (0.0, 0.1)]
        print("\n## Speed: B = 1000, J = 5, 10,000 test items in 100 groups, 500 validation items\n")
        print(markdown(pd.DataFrame(rows), "{:.2f}"))
    if args.what in ("calibration", "all"):
        models = {
            name: pp.ProbitDawidSkene(correlation=m.correlation, n_qmc=args.n_qmc)
            for name, m in default_models().items()
        }
        sim = default_simulation()
        t0 = time.perf_counter()
        pi = args.pi if args.pi in ("prior", "estimate") else float(args.pi)
        study = calibration_study(
            args.datasets, models=models, simulation=sim, n_boot=args.boot, seed=args.seed, pi=pi, progress=True
        )
        elapsed = time.perf_counter() - t0
        print(
            f"\n## Calibration: {args.datasets} data sets x 10 groups, B = {args.boot}, "
            f"n_qmc = {args.n_qmc}, pi = {args.pi}, 90% intervals ({elapsed:.0f} s)\n"
        )
        tab = coverage_table(study).reset_index()
        print(markdown(tab))
        # coverage split by group prevalence: where the shared pi misleads
        study["truth_prop"] = np.where(study["target"] == "population", study["truth"] / 2000, study["truth"] / 100)
        study["prevalence band"] = pd.cut(study["truth_prop"], [0, 0.1, 0.2, 0.3, 1.0], include_lowest=True)
        by = (
            study.groupby(["target", "model", "prevalence band"], observed=True, sort=False)["covered"]
            .agg(["mean", "size"])
            .unstack("prevalence band")
        )
        by = by.reindex(columns=sorted(by.columns, key=lambda c: (c[0] != "mean", c[1].left)))
        by.columns = [f"{'coverage' if a == 'mean' else 'n'} {b}" for a, b in by.columns]
        print("\nCoverage by the group's true proportion of positives:\n")
        print(markdown(by.reset_index()))


if __name__ == "__main__":
    main()
