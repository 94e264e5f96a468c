"""Benchmark: EM on a Dask LocalCluster against the in-memory EM, on simulated Parquet data.

Data: Dawid-Skene ratings simulated with ``pyrater.simulate.simulate_dawid_skene``
in chunks of 2 x 10^6 ratings (K = 5, 5 distinct random raters per item, items =
ratings / 5, J = min(5000, max(50, ratings / 200)) raters: the design of
``bench/bench_em.py``), one Parquet file of int32 columns ``item, rater, rating``
per chunk, written once into ``--folder``.

For each size, each in its own subprocess (so that peak memory is its own):

``in-memory``
    read the Parquet folder, ``RatingData.from_codes``, then ``pyrater.em(...,
    backend="numba", compress=False)`` for ``--iters`` iterations (tolerance
    disabled); also the time of one fused kernel pass over all the ratings
    (``_FusedKernel``, the same object the EM loop calls), median of 5.
``dask-W`` for each W in ``--workers``
    a ``LocalCluster(n_workers=W, threads_per_worker=1, processes=True)``;
    ``DistributedRatingData.from_parquet`` (the label pass and the one-off
    shuffle by item + encoding + persist, timed separately); then the
    distributed EM for ``--iters`` iterations (tolerance disabled), each
    iteration timed on the client (scatter of the parameters, one task per
    partition, tree reduction, M-step); the estimates are compared with the
    in-memory ones.  Peak memory per worker is the worker process's
    ``ru_maxrss`` (the shuffle included); "resident" is its RSS after the fit.
``latency``
    a tiny data set (10^5 ratings) on 2 workers with 2 .. 64 partitions:
    per-iteration time against the number of partitions gives the fixed
    latency per iteration and the cost per task of the scheduler, the
    constants of the cost model.

Usage::

    python bench/bench_dask.py [--sizes 1e7] [--workers 1 2] [--iters 10]
                               [--partition-ratings 2.5e6] [--folder DIR] [--json out.json]

The worker modes (``worker-memory``, ``worker-dask``, ``worker-latency``) are internal.
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
from pathlib import Path

import numpy as np

K = 5
RATERS_PER_ITEM = 5
SEED = 20261122
CHUNK = 2_000_000  # ratings per Parquet file


def n_raters(n: int) -> int:
    return int(min(5000, max(50, n // 200)))


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------------- data


def make_data(folder: Path, n: int) -> Path:
    """Simulated ratings in Parquet, one file per chunk; reused when already there."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pyrater.models import simulate_dawid_skene

    out = folder / f"ratings_{n:.0e}".replace("+", "")
    meta = out / "_pyrater_meta.json"
    if meta.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    J = n_raters(n)
    # one set of parameters for every chunk: drawn once from rater's default priors
    first = simulate_dawid_skene(10, J, n_categories=K, seed=SEED)
    pi, theta = first.pi, first.theta
    t0 = time.perf_counter()
    items_per_chunk = CHUNK // RATERS_PER_ITEM
    for c, start in enumerate(range(0, n, CHUNK)):
        m = min(CHUNK, n - start)
        sim = simulate_dawid_skene(
            m // RATERS_PER_ITEM, J, pi=pi, theta=theta, raters_per_item=RATERS_PER_ITEM, seed=SEED + 1 + c
        )
        d = sim.data
        order = np.random.default_rng(c).permutation(d.n_ratings)  # items spread within the file
        table = pa.table(
            {
                "item": (d.unit[order] + c * items_per_chunk).astype(np.int32),
                "rater": d.rater[order].astype(np.int32),
                "rating": d.rating[order].astype(np.int32),
            }
        )
        pq.write_table(table, out / f"part-{c:05d}.parquet")
    meta.write_text(json.dumps({"n": n, "J": J, "K": K, "seed": SEED, "seconds": time.perf_counter() - t0}))
    return out


def read_codes(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    return tuple(t.column(c).to_numpy().astype(np.int64) for c in ("item", "rater", "rating"))  # type: ignore[return-value]


# -------------------------------------------------------------------------------- workers


def worker_memory(path: Path, iters: int, gibbs_sweeps: int = 0) -> dict:
    import warnings

    import pyrater
    from pyrater.inference import em as em_mod

    t0 = time.perf_counter()
    item, rater, rating = read_codes(path)
    t_read = time.perf_counter() - t0
    data = pyrater.RatingData.from_codes(item, rater, rating, n_categories=K, copy=False)
    _ = data.counts
    t_build = time.perf_counter() - t0 - t_read
    # load the numba kernels once (a one-off per process, like an import)
    tiny = pyrater.simulate("dawid_skene", n_items=50, n_raters=3, n_categories=K, seed=1).data
    pyrater.em(tiny, backend="numba", max_iter=2, tol=0, method="ml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t1 = time.perf_counter()
        fit = pyrater.em(data, backend="numba", compress=False, max_iter=iters, tol=0, method="ml")
        t_fit = time.perf_counter() - t1
    # one fused pass (E-step + expected counts), as the EM loop calls it
    prob = em_mod._Problem(
        counts=data.counts, weight=np.ones(data.n_units), unit_weights=True, known=None, J=data.n_raters, K=K
    )
    kern = em_mod._FusedKernel(em_mod._load_fused(), prob, 1)
    passes = []
    for _ in range(5):
        t2 = time.perf_counter()
        kern(fit.pi, fit.theta, None)
        passes.append(time.perf_counter() - t2)
    gibbs = {}
    if gibbs_sweeps:
        from pyrater.inference.gibbs.sampler import gibbs as memory_gibbs

        memory_gibbs(tiny, chains=1, warmup=1, draws=2, seed=1, log_lik=False)  # load the kernels
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = memory_gibbs(data, chains=1, warmup=0, draws=gibbs_sweeps, seed=1, log_lik=False)
        gibbs = {"gibbs_per_sweep_s": g.elapsed / (gibbs_sweeps + 1)}  # + the start's parameter step and last ll pass
    return {
        **gibbs,
        "mode": "in-memory",
        "n": int(data.n_ratings),
        "I": data.n_units,
        "J": data.n_raters,
        "nnz": int(data.counts.nnz),
        "read_s": t_read,
        "build_s": t_build,
        "fit_s": t_fit,
        "loop_s": float(fit.timings["loop"][0]),
        "iters": int(fit.n_iter),
        "per_iter_s": float(fit.timings["loop"][0]) / fit.n_iter,
        "kernel_pass_s": float(np.median(passes)),
        "maxrss_mib": maxrss_mib(),
        "pi": fit.pi.tolist(),
        "theta_sum": float(fit.theta.sum()),
        "log_lik": fit.log_lik,
        "theta": fit.theta.ravel().tolist(),
    }


def _worker_rss(client) -> dict:
    def probe() -> dict:
        import resource as r

        import psutil

        return {
            "peak_mib": r.getrusage(r.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_mib": psutil.Process().memory_info().rss / 2**20,
        }

    return client.run(probe)


def worker_dask(path: Path, iters: int, workers: int, partition_ratings: float, n: int, gibbs_sweeps: int = 0) -> dict:
    import warnings

    from dask.distributed import Client, LocalCluster

    import pyrater
    from pyrater.inference.distributed.em import em as distributed_em

    nparts = max(workers, int(round(n / partition_ratings)))
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
        ) as cluster,
        Client(cluster) as client,
    ):
        # load pyrater and the numba kernels on every worker (a one-off per process, like an import)
        def warm() -> None:
            import pyrater as p

            tiny = p.simulate("dawid_skene", n_items=50, n_raters=3, n_categories=K, seed=1).data
            p.em(tiny, backend="numba", max_iter=2, tol=0)

        client.run(warm)
        rss0 = _worker_rss(client)
        t0 = time.perf_counter()
        data = pyrater.DistributedRatingData.from_parquet(str(path / "*.parquet"), npartitions=nparts)
        t_data = time.perf_counter() - t0
        rss_data = _worker_rss(client)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t1 = time.perf_counter()
            fit = distributed_em(data, backend="numba", max_iter=iters, tol=0, method="ml")
            t_fit = time.perf_counter() - t1
        gibbs = {}
        if gibbs_sweeps:
            from pyrater.inference.distributed.gibbs import gibbs as distributed_gibbs

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                distributed_gibbs(data, chains=1, warmup=0, draws=1, seed=1)  # load the kernels on the workers
                g = distributed_gibbs(data, chains=1, warmup=0, draws=gibbs_sweeps, seed=1)
            gibbs = {"gibbs_per_sweep_s": g.elapsed / (gibbs_sweeps + 1)}  # + the last log-likelihood pass
        rss = _worker_rss(client)
        return {
            **gibbs,
            "mode": f"dask-{workers}",
            "workers": workers,
            "partitions": data.n_partitions,
            "n": data.n_ratings,
            "I": data.n_items,
            "J": data.n_raters,
            "discover_s": data.timings["discover"],
            "shuffle_s": data.timings["shuffle"],
            "from_parquet_s": t_data,
            "fit_s": t_fit,
            "start_s": fit.timings["start"],
            "iter_s": fit.timings["iterations"],
            "per_iter_s": float(np.median(fit.timings["iterations"])),
            "iters": fit.n_iter,
            "worker_rss_before_mib": {k: v["rss_mib"] for k, v in rss0.items()},
            "worker_rss_after_load_mib": {k: v["rss_mib"] for k, v in rss_data.items()},
            "worker_peak_mib": {k: v["peak_mib"] for k, v in rss.items()},
            "worker_rss_mib": {k: v["rss_mib"] for k, v in rss.items()},
            "client_maxrss_mib": maxrss_mib(),
            "pi": fit.pi.tolist(),
            "log_lik": fit.log_lik,
            "theta": fit.theta.ravel().tolist(),
        }


def worker_latency(iters: int, partitions: list[int]) -> dict:
    import warnings

    import dask.dataframe as dd
    from dask.distributed import Client, LocalCluster

    import pyrater
    from pyrater.inference.distributed.em import em as distributed_em

    sim = pyrater.simulate("dawid_skene", n_items=20_000, n_raters=50, n_categories=K, raters_per_item=5, seed=1)
    df = sim.data.to_long()
    df["rating"] = df["rating"].astype(int)
    out = {}
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
        ) as cluster,
        Client(cluster),
    ):
        ddf = dd.from_pandas(df, npartitions=2)
        for p in partitions:
            data = pyrater.DistributedRatingData.from_dask(ddf, npartitions=p)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                distributed_em(data, max_iter=2, tol=0, method="ml")  # warm-up
                fit = distributed_em(data, max_iter=iters, tol=0, method="ml")
            out[p] = float(np.median(fit.timings["iterations"]))
    slope, intercept = np.polyfit(list(out), list(out.values()), 1)
    return {
        "mode": "latency",
        "n": int(sim.data.n_ratings),
        "per_iter_s": out,
        "per_task_s": float(slope),
        "fixed_s": float(intercept),
    }


# ----------------------------------------------------------------------------------- main


def run_worker(args: list[str]) -> dict:
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def machine() -> dict:
    import dask
    import distributed
    import numba
    import pandas as pd
    import pyarrow

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "dask": dask.__version__,
        "distributed": distributed.__version__,
        "pyarrow": pyarrow.__version__,
        "numba": numba.__version__,
        "cpus": os.cpu_count(),
        "load_start": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode")
    for name in ("worker-memory", "worker-dask", "worker-latency"):
        w = sub.add_parser(name)
        w.add_argument("--path", type=Path)
        w.add_argument("--iters", type=int, default=10)
        w.add_argument("--workers", type=int, default=1)
        w.add_argument("--partition-ratings", type=float, default=2.5e6)
        w.add_argument("--n-total", type=int, default=0)
        w.add_argument("--partitions", type=int, nargs="*", default=[2, 8, 32, 64])
        w.add_argument("--gibbs-sweeps", type=int, default=0)
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e7])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--partition-ratings", type=float, default=2.5e6)
    ap.add_argument("--folder", type=Path, default=Path("/tmp/pyrater_bench_dask"))
    ap.add_argument("--no-memory", action="store_true", help="skip the in-memory run (e.g. when it does not fit)")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--gibbs-sweeps", type=int, default=0, help="also time this many Gibbs sweeps (1 chain)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    if a.mode == "worker-memory":
        print(json.dumps(worker_memory(a.path, a.iters, a.gibbs_sweeps)))
        return
    if a.mode == "worker-dask":
        print(json.dumps(worker_dask(a.path, a.iters, a.workers, a.partition_ratings, a.n_total, a.gibbs_sweeps)))
        return
    if a.mode == "worker-latency":
        print(json.dumps(worker_latency(a.iters, a.partitions)))
        return

    results: dict = {"machine": machine(), "runs": []}
    print(json.dumps(results["machine"]), flush=True)
    if not a.no_latency:
        r = run_worker(["worker-latency", "--iters", str(a.iters)])
        results["runs"].append(r)
        print(json.dumps(r), flush=True)
    for size in a.sizes:
        n = int(size)
        t0 = time.perf_counter()
        path = make_data(a.folder, n)
        print(
            json.dumps(
                {
                    "data": str(path),
                    "seconds": time.perf_counter() - t0,
                    "bytes": sum(f.stat().st_size for f in path.glob("*.parquet")),
                }
            ),
            flush=True,
        )
        mem = None
        if not a.no_memory:
            mem = run_worker(
                ["worker-memory", "--path", str(path), "--iters", str(a.iters), "--gibbs-sweeps", str(a.gibbs_sweeps)]
            )
            results["runs"].append({k: v for k, v in mem.items() if k != "theta"})
            print(json.dumps(results["runs"][-1]), flush=True)
        for w in a.workers:
            r = run_worker(
                [
                    "worker-dask",
                    "--path",
                    str(path),
                    "--iters",
                    str(a.iters),
                    "--workers",
                    str(w),
                    "--partition-ratings",
                    str(a.partition_ratings),
                    "--n-total",
                    str(n),
                    "--gibbs-sweeps",
                    str(a.gibbs_sweeps),
                ]
            )
            if mem is not None:
                r["max_abs_diff_theta_vs_memory"] = float(np.max(np.abs(np.subtract(r["theta"], mem["theta"]))))
                r["max_abs_diff_pi_vs_memory"] = float(np.max(np.abs(np.subtract(r["pi"], mem["pi"]))))
            r.pop("theta")
            results["runs"].append(r)
            print(json.dumps(r), flush=True)
    results["machine"]["load_end"] = os.getloadavg()
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
