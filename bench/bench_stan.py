"""Benchmark: pyrater's Dawid-Skene Stan program against the textbook formulation.

Effective samples per second of sampling (minimum bulk ESS over every
element of ``pi`` and ``theta``, :func:`arviz.ess`, divided by Stan's own
sampling seconds summed over chains) for

* ``stan/dawid_skene.stan`` (sparse count matrix, log theta once per
  evaluation, K sparse products), and
* ``bench/textbook_dawid_skene.stan`` (the Stan User's Guide formulation
  extended to long data: a loop over ratings accumulating ``log_p_z`` per
  item, ``log(theta)`` per rating),

on the same data, priors, initial values and seeds, run side by side
(alternating, so that load from other processes hits both alike).  Both
programs have the same parameters in the same order, so with the same seed
and inits they follow the same trajectories up to rounding: the ESS are
nearly equal and the ratio is a ratio of gradient costs.

Also: grouped (patterns + tallies) against long (expanded) caries data with
pyrater's program.

Run::

    python bench/bench_stan.py            # writes bench/RESULTS_stan.md
    python bench/bench_stan.py --quick    # fewer iterations, prints only
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "python"))

import arviz as az  # noqa: E402

from pyrater import DawidSkene, RatingData  # noqa: E402
from pyrater.inference.stan.data import stan_data, stan_inits  # noqa: E402
from pyrater.inference.stan.engines import get_engine  # noqa: E402

SHARED = Path(os.environ.get("PYRATER_SHARED_DATA", REPO.parent / "shared" / "data"))


def simulate_incomplete(n_ratings: int = 50_000, I: int = 10_000, J: int = 50, K: int = 4, seed: int = 2024):
    """Incomplete design: each item rated by n_ratings / I distinct raters drawn at random."""
    rng = np.random.default_rng(seed)
    per_item = n_ratings // I
    pi = rng.dirichlet(np.full(K, 10.0))
    theta = rng.dirichlet(np.full(K, 1.0), size=(J, K)) * 0.35
    theta[:, np.arange(K), np.arange(K)] += 0.65
    z = rng.choice(K, size=I, p=pi)
    raters = np.argsort(rng.random((I, J)), axis=1)[:, :per_item]
    items = np.repeat(np.arange(I), per_item)
    rj = raters.ravel()
    u = rng.random(items.size)
    cdf = np.cumsum(theta[rj, z[items]], axis=1)
    ratings = (u[:, None] > cdf).sum(axis=1).clip(max=K - 1)
    df = pd.DataFrame({"item": items, "rater": rj, "rating": ratings})
    return RatingData.from_long(df, categories=list(range(K)))


def textbook_data(data: RatingData, d: dict) -> dict:
    return {
        "K": d["K"],
        "I": d["I"],
        "J": d["J"],
        "N": data.n_ratings,
        "ii": data.unit + 1,
        "jj": data.rater + 1,
        "y": data.rating + 1,
        "alpha": d["alpha"],
        "beta": d["beta"],
    }


def min_bulk_ess(fit) -> float:
    from pyrater import _arviz  # ArviZ 0.x or 1.x

    pi, theta = np.asarray(fit.draws["pi"]), np.asarray(fit.draws["theta"])
    flat = np.concatenate([pi.reshape(*pi.shape[:2], -1), theta.reshape(*theta.shape[:2], -1)], axis=2)
    return float(np.nanmin(_arviz.ess(flat, "bulk")))


def run_pair(eng, data: RatingData, label: str, chains: int, warmup: int, draws: int, seeds: list[int]) -> list[dict]:
    textbook = (HERE / "textbook_dawid_skene.stan").read_text()
    d = stan_data(data, DawidSkene(), log_lik=False)
    dt = textbook_data(data, d)
    rows = []
    for seed in seeds:
        inits = stan_inits("dawid_skene", d["K"], d["J"], chains, seed)
        for which in ("pyrater", "textbook"):
            start = time.perf_counter()
            if which == "pyrater":
                fit = eng.sample(
                    "dawid_skene", d, chains=chains, warmup=warmup, draws=draws, seed=seed, inits=inits, progress=False
                )
            else:
                fit = eng.sample_code(
                    textbook, dt, chains=chains, warmup=warmup, draws=draws, seed=seed, inits=inits, progress=False
                )
            wall = time.perf_counter() - start
            ess = min_bulk_ess(fit)
            t_samp = float(np.sum(fit.stan_time[:, 1]))
            t_warm = float(np.sum(fit.stan_time[:, 0]))
            rows.append(
                {
                    "data": label,
                    "program": which,
                    "seed": seed,
                    "min_bulk_ess": ess,
                    "sampling_s": t_samp,
                    "warmup_s": t_warm,
                    "wall_s": wall,
                    "ess_per_s": ess / t_samp,
                    "grad_evals": int(fit.sample_stats["n_steps"].sum()),
                    "s_per_1000_grads": 1000 * t_samp / max(1, int(fit.sample_stats["n_steps"].sum())),
                    "divergences": int(fit.sample_stats["diverging"].sum()),
                }
            )
            print(rows[-1], flush=True)
    return rows


def run_grouped(eng, chains: int, warmup: int, draws: int, seeds: list[int]) -> list[dict]:
    path = SHARED / "caries.csv"
    if not path.exists():
        print(f"skipping grouped benchmark: {path} absent")
        return []
    grouped = RatingData.from_grouped(pd.read_csv(path), tally="n")
    long = RatingData.from_long(grouped.to_long(), categories=list(grouped.categories))
    rows = []
    for seed in seeds:
        inits = stan_inits("dawid_skene", grouped.n_categories, grouped.n_raters, chains, seed)
        for label, data in (("grouped", grouped), ("long", long)):
            d = stan_data(data, DawidSkene(), log_lik=False)
            start = time.perf_counter()
            fit = eng.sample(
                "dawid_skene", d, chains=chains, warmup=warmup, draws=draws, seed=seed, inits=inits, progress=False
            )
            wall = time.perf_counter() - start
            ess = min_bulk_ess(fit)
            t_samp = float(np.sum(fit.stan_time[:, 1]))
            rows.append(
                {
                    "data": f"caries {label} ({data.n_units} units, {data.n_ratings} ratings)",
                    "seed": seed,
                    "min_bulk_ess": ess,
                    "sampling_s": t_samp,
                    "warmup_s": float(np.sum(fit.stan_time[:, 0])),
                    "wall_s": wall,
                    "ess_per_s": ess / t_samp,
                    "pi_mean": np.round(fit.draws["pi"].mean(axis=(0, 1)), 4).tolist(),
                }
            )
            print(rows[-1], flush=True)
    return rows


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("Model name")), cpu)
    except OSError:
        pass
    import httpstan
    import stan

    return (
        f"{platform.platform()}, {cpu}, {os.cpu_count()} CPUs (shared with other processes); "
        f"Python {platform.python_version()}, pystan {stan.__version__ if hasattr(stan, '__version__') else '3'}, "
        f"httpstan {httpstan.__version__} (Stan 2.35), numpy {np.__version__}, arviz {az.__version__}"
    )


def markdown(df: pd.DataFrame) -> str:
    """A DataFrame as a markdown table (no tabulate dependency)."""

    def fmt(v):
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    out = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    out += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(out)


def summarise(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    g = df.groupby(["data", "program"], sort=False).agg(
        min_bulk_ess=("min_bulk_ess", "mean"),
        sampling_s=("sampling_s", "sum"),
        ess_per_s=("ess_per_s", "mean"),
        s_per_1000_grads=("s_per_1000_grads", "mean"),
        divergences=("divergences", "sum"),
    )
    return g


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs, print only")
    args = parser.parse_args()
    eng = get_engine("pystan")
    eng.compile("dawid_skene")
    eng.compile_code((HERE / "textbook_dawid_skene.stan").read_text())

    anes = RatingData.from_long(pd.read_csv(SHARED / "anesthesia.csv"))
    big = simulate_incomplete()
    if args.quick:
        cfg_small, cfg_big, seeds, big_seeds = (4, 300, 300), (2, 100, 100), [1], [1]
    else:
        cfg_small, cfg_big, seeds, big_seeds = (4, 1000, 1000), (2, 200, 200), [1, 2, 3], [1]
    rows = run_pair(eng, anes, f"anaesthesia ({anes.n_units} items, {anes.n_ratings} ratings)", *cfg_small, seeds)
    rows += run_pair(
        eng,
        big,
        f"simulated ({big.n_units} items, {big.n_raters} raters, {big.n_ratings} ratings)",
        *cfg_big,
        big_seeds,
    )
    grouped_rows = run_grouped(eng, *cfg_small, seeds[:2])
    table = summarise(rows)
    print(table.to_string())
    ratios = {}
    for data_label in table.index.get_level_values(0).unique():
        ours = table.loc[(data_label, "pyrater"), "ess_per_s"]
        theirs = table.loc[(data_label, "textbook"), "ess_per_s"]
        ratios[data_label] = ours / theirs
        print(f"{data_label}: ESS/s ratio pyrater / textbook = {ours / theirs:.2f}")
    if args.quick:
        return
    write_results(rows, table, ratios, grouped_rows, cfg_small, cfg_big, seeds, big_seeds)


NOTES = [
    "- The 2 CPUs are shared with other developers' jobs (load average 6-8 during the recorded run), so",
    "  single timings are noisy; the runs alternate so that load hits both programs alike, and the ratio",
    "  of mean seconds per 1000 leapfrog steps (last column of the first table) is the least noisy",
    "  measure of the per-gradient speed-up.",
    "- Small data (anaesthesia) gains least: the fixed per-gradient costs that both programs share (the",
    "  J*K = 20 simplex transforms with their Jacobians, NUTS bookkeeping) are a large part of the work,",
    "  and the textbook's per-rating loop is only 315 x 4 logs.  pyrater's program spends its time on",
    "  J*K*K logs, one sparse product and I log-sum-exps, independent of repeated ratings.",
    "- Large data: the textbook program evaluates N*K = 200,000 logs and additions as separate autodiff",
    "  nodes per gradient; pyrater's evaluates 800 logs and one sparse product with 4*(N + I) nonzeros.",
    "- Both programs target the same posterior (tests/test_stan_programs.py checks pyrater's density",
    "  against numpy); with the same seeds and inits the ESS are similar and the ratio reflects cost.",
    "- Grouped caries data (32 patterns) against its long expansion (3,859 items): same posterior means,",
    "  about 40x the ESS per second, because the cost scales with the number of patterns.",
]


def write_results(rows, table, ratios, grouped_rows, cfg_small, cfg_big, seeds, big_seeds) -> None:
    lines = [
        "# Stan benchmark: pyrater's Dawid-Skene program vs the textbook formulation",
        "",
        f"Machine: {machine()}.",
        "",
        "Command: `python bench/bench_stan.py` (from the repository root; writes this file).",
        "",
        "Method: same data, priors (rater's defaults), diagonal-heavy inits (`stan_inits`) and seeds for both",
        "programs, run alternately in one process with the pystan engine.  ESS = minimum bulk ESS",
        "(`arviz.ess`) over every element of `pi` and `theta`; time = Stan's own sampling seconds summed over",
        "chains (warm-up excluded), so that the 2 shared CPUs running chains in parallel do not blur it.",
        "pyrater's program is run with `write_log_lik = 0`; the textbook program has no generated quantities.",
        f"Anaesthesia: {cfg_small[0]} chains x {cfg_small[1]} warm-up + {cfg_small[2]} draws, seeds {seeds}.",
        f"Simulated: {cfg_big[0]} chains x {cfg_big[1]} warm-up + {cfg_big[2]} draws, seeds {big_seeds}",
        "(10,000 items, 50 raters, 4 categories, 5 distinct raters per item, 50,000 ratings).",
        "",
        "## ESS per second (mean over seeds)",
        "",
        "| data | program | min bulk ESS | sampling s (total) | ESS / s | s per 1000 leapfrog steps | divergences |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (data_label, program), r in table.iterrows():
        lines.append(
            f"| {data_label} | {program} | {r.min_bulk_ess:.0f} | {r.sampling_s:.2f} | {r.ess_per_s:.1f} | "
            f"{r.s_per_1000_grads:.3f} | {int(r.divergences)} |"
        )
    lines += ["", "## Speed-up (ESS/s ratio, pyrater / textbook; target >= 2)", ""]
    for data_label, ratio in ratios.items():
        lines.append(f"- {data_label}: **{ratio:.1f}x**")
    lines += ["", "## All runs", "", markdown(pd.DataFrame(rows))]
    if grouped_rows:
        lines += [
            "",
            "## Grouped vs long (caries, pyrater's program)",
            "",
            "Same model and seeds; the grouped data has one unit per distinct pattern weighted by its tally.",
            "",
            markdown(pd.DataFrame(grouped_rows)),
        ]
    lines += ["", "## Notes", ""] + NOTES
    (HERE / "RESULTS_stan.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {HERE / 'RESULTS_stan.md'}")


if __name__ == "__main__":
    main()
