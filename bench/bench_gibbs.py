"""Benchmark: the blocked Gibbs sampler (``method="gibbs"``) against Stan NUTS, and at crowd scale.

1. Side by side in one run, same data, same (default) priors, 4 chains:
   minimum bulk ESS per second over every entry of ``pi`` and ``theta``
   (:func:`arviz.ess`), Gibbs against NUTS (``pyrater.fit(method="mcmc")``),
   on zheng_product (~25k ratings) and trec_relevance (~98k ratings) from
   ``../shared/data``.  Seconds are the samplers' own wall-clock times
   (``fit.elapsed``: for NUTS Stan's sampling, for Gibbs the chains;
   compilation and data preparation excluded for both), so the ratio is the
   ratio of sampling efficiency.
2. Gibbs alone on simulated Dawid-Skene data (K = 5) with 10^6 and 10^7
   ratings: wall-clock time of ``pyrater.fit`` (data preparation included),
   sampling time, min bulk ESS/s and the process's peak resident memory
   (each size in a fresh subprocess, so the peak is that fit's).

Run::

    python bench/bench_gibbs.py                    # everything, writes bench/RESULTS_gibbs.md
    python bench/bench_gibbs.py --skip-nuts        # the simulated sizes only
    python bench/bench_gibbs.py --sizes 1000000    # one size
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "python"))
SHARED = Path(os.environ.get("PYRATER_SHARED_DATA", REPO.parent / "shared" / "data"))


def min_bulk_ess(fit) -> float:
    """Minimum bulk ESS over pi and theta entries with spread (constant entries have none)."""
    import arviz as az

    pi = np.asarray(fit.draws["pi"])
    theta = fit._theta_chains()
    C, S = pi.shape[:2]
    flat = np.concatenate([pi, theta.reshape(C, S, -1)], axis=2)
    ess = az.ess(az.convert_to_dataset({"x": flat}), method="bulk")["x"].to_numpy()
    return float(np.nanmin(ess))


def load_real(name: str):
    import pyrater

    r = pd.read_csv(SHARED / name / "ratings.csv")
    return pyrater.as_rating_data(r)


def compare_with_nuts(name: str, draws: int, gibbs_draws: int, seed: int, pi_moves: int = 0) -> list[dict]:
    """Gibbs (and, with ``pi_moves``, Gibbs with marginal pi moves) then NUTS, one after the other."""
    import pyrater

    data = load_real(name)
    rows = []
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for moves in [0] + ([pi_moves] if pi_moves else []):
            t = time.perf_counter()
            g = pyrater.fit(
                data,
                "dawid_skene",
                method="gibbs",
                chains=4,
                warmup=gibbs_draws // 2,
                draws=gibbs_draws,
                seed=seed,
                log_lik=False,
                pi_moves=moves,
            )
            runs.append(("Gibbs" + (f" (pi_moves={moves})" if moves else ""), g, time.perf_counter() - t, gibbs_draws))
        t = time.perf_counter()
        s = pyrater.fit(
            data,
            "dawid_skene",
            method="mcmc",
            chains=4,
            warmup=draws,
            draws=draws,
            seed=seed,
            progress=False,
            log_lik=False,
        )
        runs.append(("NUTS", s, time.perf_counter() - t, draws))
    for label, f, wall, n in runs:
        ess = min_bulk_ess(f)
        rows.append(
            {
                "data": name,
                "ratings": data.n_ratings,
                "raters": data.n_raters,
                "K": data.n_categories,
                "method": label,
                "engine": f.engine,
                "draws/chain": n,
                "sampling s": f.elapsed,
                "wall s": wall,
                "min bulk ESS": ess,
                "min ESS/s": ess / f.elapsed,
                "max Rhat": f.mcmc_diagnostics(warn=False).attrs["max_rhat"],
                "pi mean": np.round(np.asarray(f.draws["pi"]).mean((0, 1)), 4).tolist(),
            }
        )
    return rows


def simulate(n_ratings: int, K: int = 5, per_item: int = 10, n_raters: int = 1000, seed: int = 7):
    """Incomplete design: n_ratings / per_item items, each rated by per_item raters drawn at random.

    Raters are drawn with replacement (an item is now and then rated twice by one rater: repeated
    ratings are part of the model), so that 10^7 ratings simulate in seconds.
    """
    import pyrater

    rng = np.random.default_rng(seed)
    I = n_ratings // per_item
    pi = rng.dirichlet(np.full(K, 10.0))
    theta = rng.dirichlet(np.ones(K), size=(n_raters, K)) * 0.4
    theta[:, np.arange(K), np.arange(K)] += 0.6
    z = rng.choice(K, size=I, p=pi)
    item = np.repeat(np.arange(I), per_item)
    rater = rng.integers(0, n_raters, size=item.size)
    rating = np.empty(item.size, dtype=np.int64)
    for start in range(0, item.size, 1_000_000):  # blocks bound the temporary (block, K) arrays
        sl = slice(start, start + 1_000_000)
        cum = np.cumsum(theta[rater[sl], z[item[sl]]], axis=1)
        rating[sl] = np.minimum((rng.random(cum.shape[0])[:, None] > cum).sum(axis=1), K - 1)
    return pyrater.RatingData.from_codes(item, rater, rating, n_categories=K, n_items=I, n_raters=n_raters, copy=False)


def one_size(n_ratings: int, chains: int, draws: int, warmup: int, thin: int) -> dict:
    """Run in a fresh process: simulate, fit, report time and peak memory."""
    import pyrater

    t0 = time.perf_counter()
    data = simulate(n_ratings)
    t_sim = time.perf_counter() - t0
    rss_data = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with warnings.catch_warnings():  # compile or load the kernel outside the timing
        warnings.simplefilter("ignore")
        pyrater.fit(data, "dawid_skene", method="gibbs", chains=1, warmup=0, draws=1, seed=1, log_lik=False)
    t = time.perf_counter()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = pyrater.fit(
            data,
            "dawid_skene",
            method="gibbs",
            chains=chains,
            warmup=warmup,
            draws=draws,
            thin=thin,
            seed=1,
            log_lik=False,
        )
    wall = time.perf_counter() - t
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    sweeps = chains * (warmup + draws)
    draws_mib = sum(np.asarray(v).nbytes for v in f.draws.values()) / 2**20
    ess = min_bulk_ess(f)
    return {
        "ratings": data.n_ratings,
        "items": data.n_units,
        "raters": data.n_raters,
        "K": data.n_categories,
        "chains": chains,
        "warmup": warmup,
        "draws/chain": draws,
        "thin": thin,
        "simulate s": round(t_sim, 1),
        "fit wall s": round(wall, 1),
        "sampling s": round(f.elapsed, 1),
        "fit CPU s": round(cpu, 1),
        "CPU ms/sweep": round(1000 * cpu / sweeps, 2),
        "stored draws MiB": round(draws_mib),
        "min bulk ESS": round(ess),
        "min ESS/s": round(ess / f.elapsed, 1),
        "max Rhat": round(f.mcmc_diagnostics(warn=False).attrs["max_rhat"], 4),
        "peak RSS MiB (after data)": round(rss_data),
        "peak RSS MiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def sweep_vs_em(n_ratings: int, per_item: int = 5, sweeps: int = 40, iters: int = 40, repeats: int = 3) -> dict:
    """CPU time of one Gibbs sweep against one EM iteration, same data, one thread, side by side (issue 27, item 4).

    One chain of ``sweeps`` sweeps (``log_lik=False``: the z step, the conjugate
    draws of pi and theta) and EM by maximum likelihood from the majority vote
    (the fused kernel, ``n_threads=1``), interleaved ``repeats`` times; the EM
    iteration is ``(fit(iters + 1) - fit(1)) / iters`` so that its one-off
    costs (start, first M-step) cancel.  CPU seconds of the process
    (``time.process_time``): steadier than wall time on a shared machine.
    """
    import pyrater
    from pyrater.inference.gibbs.sampler import gibbs

    data = simulate(n_ratings, per_item=per_item)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gibbs(data, chains=1, warmup=0, draws=2, seed=1, log_lik=False, progress=False)
        pyrater.em(data, max_iter=2, tol=0, n_threads=1, init="majority", method="ml")
        rows = []
        for _ in range(repeats):
            c0 = time.process_time()
            gibbs(data, chains=1, warmup=0, draws=sweeps, seed=1, log_lik=False, n_threads=1, progress=False)
            c1 = time.process_time()
            gibbs(data, chains=1, warmup=0, draws=1, seed=1, log_lik=False, n_threads=1, progress=False)
            c2 = time.process_time()
            pyrater.em(data, max_iter=iters + 1, tol=0, n_threads=1, init="majority", method="ml")
            c3 = time.process_time()
            pyrater.em(data, max_iter=1, tol=0, n_threads=1, init="majority", method="ml")
            c4 = time.process_time()
            sweep = ((c1 - c0) - (c2 - c1)) / (sweeps - 1)
            it = ((c3 - c2) - (c4 - c3)) / iters
            rows.append({"sweep CPU ms": 1e3 * sweep, "EM iteration CPU ms": 1e3 * it, "ratio": sweep / it})
    best = min(rows, key=lambda r: r["ratio"])
    return {
        "ratings": data.n_ratings,
        "items": data.n_units,
        "raters": data.n_raters,
        "K": data.n_categories,
        "runs": rows,
        "median ratio": float(np.median([r["ratio"] for r in rows])),
        "best": best,
    }


def machine() -> str:
    import numba
    import numpy

    load = os.getloadavg()
    return (
        f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {numpy.__version__}, numba {numba.__version__}; load average at start "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one-size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1_000_000, 10_000_000])
    ap.add_argument("--datasets", nargs="*", default=["zheng_product", "trec_relevance"])
    ap.add_argument("--skip-nuts", action="store_true")
    ap.add_argument("--nuts-draws", type=int, default=500)
    ap.add_argument("--gibbs-draws", type=int, default=2000)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--thin", type=int, default=1)
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS_gibbs.md")
    ap.add_argument("--json", type=Path, default=HERE / "bench_gibbs.json")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument(
        "--sweep-vs-em",
        type=int,
        default=0,
        help="only measure one Gibbs sweep against one EM iteration (CPU, one thread) at this many ratings",
    )
    ap.add_argument(
        "--pi-moves",
        type=int,
        default=0,
        help="also run Gibbs with this many marginal pi moves per sweep beside plain Gibbs",
    )
    args = ap.parse_args(argv)
    if args.sweep_vs_em:
        res = sweep_vs_em(args.sweep_vs_em)
        print(json.dumps(res, indent=1))
        return 0
    if args.one_size:
        print(json.dumps(one_size(args.one_size, args.chains, args.draws, args.warmup, args.thin)))
        return 0
    result = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if args.json.exists():
        result = {**json.loads(args.json.read_text()), **result}
    if not args.skip_nuts:
        rows = []
        for name in args.datasets:
            rows += compare_with_nuts(name, args.nuts_draws, args.gibbs_draws, seed=1, pi_moves=args.pi_moves)
            print(pd.DataFrame(rows).to_string(), flush=True)
        result["nuts"] = rows
    sizes = []
    for n in args.sizes:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one-size",
                str(n),
                "--draws",
                str(args.draws),
                "--warmup",
                str(args.warmup),
                "--thin",
                str(args.thin),
                "--chains",
                str(args.chains),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(row, flush=True)
        sizes.append(row)
    if sizes:
        result.setdefault("sizes", [])
        result["sizes"] += sizes
    args.json.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
