"""Benchmark: pyrater's EM against crowd-kit's DawidSkene, side by side in one run.

Simulated Dawid-Skene data (K = 5 categories, 5 distinct raters per item,
items = ratings / 5, J = min(5000, max(50, ratings / 200)) raters, rater's
default priors for pi and theta) at 1e4 .. 1e7 ratings.  Both methods start
from the soft majority vote and run the same fixed number of iterations
(``tol`` disabled); each method runs in its own subprocess so that its peak
memory (``ru_maxrss``) is its own.

crowd-kit is not a dependency of pyrater: install it in a separate virtual
environment and pass its interpreter::

    python -m venv /tmp/benchenv && /tmp/benchenv/bin/pip install crowd-kit
    python bench/bench_em.py --crowdkit-python /tmp/benchenv/bin/python

Each method runs ``--repeats`` times per size (interleaved; crowd-kit once
at 1e7 ratings) and its fastest run is reported, all fit times listed in
the JSON output.

Times are wall-clock (``perf_counter``) and CPU (``process_time``, all
threads of the worker); on a shared machine the CPU time is the steadier
measure of the work done.

pyrater runs ``em(..., backend="auto")``: the fused numba kernel from
500,000 stored counts on, the scipy path below.  Its worker first loads the
numba kernels (a fit of a tiny problem with ``backend="numba"``), a one-off
cost per process like an import, reported as "numba load s" and not
included in the fit time.  ``--pyrater-threads 1 2`` also runs pyrater with
``n_threads=2`` (threads of the numba kernel; BLAS/OpenMP stay at 1 thread),
and ``--pyrater-backends auto scipy`` also runs the scipy path at every size.

Iteration semantics.  crowd-kit: a majority-vote init, one M-step, then
``n_iter`` x (E-step, M-step, evidence lower bound).  pyrater: an M-step from
the majority vote, then ``n_iter`` x (E-step with the log-likelihood, M-step),
the last M-step skipped.  Time per iteration = fit time / iterations (setup
included for both); pyrater's loop-only time is reported too.

Usage::

    python bench/bench_em.py [--sizes 1e4 1e5 1e6 1e7] [--iters 10 10 10 5] [--repeats 3]
                             [--pyrater-threads 1 2] [--pyrater-backends auto scipy]
                             [--crowdkit-python PATH | --no-crowdkit] [--json out.json]

The worker modes (``worker-pyrater``, ``worker-crowdkit``) are internal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

K = 5
RATERS_PER_ITEM = 5
SEED = 20261121


def n_raters_for(n_ratings: int) -> int:
    return int(min(5000, max(50, n_ratings // 200)))


def peak_mib() -> float:
    """Peak resident memory of this process in MiB.

    Read from ``VmHWM`` in /proc/self/status (the high-water mark of this
    process's own address space).  ``ru_maxrss`` is not used: on Linux a
    child started by fork + exec inherits the parent's resident size at the
    fork in it.  Falls back to ``ru_maxrss`` where /proc is absent.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# ------------------------------------------------------------------- simulation


def simulate(n_ratings: int, out: Path) -> dict:
    """Simulate with pyrater.simulate and store the codes as int32 .npy files."""
    from pyrater.models import simulate_dawid_skene

    I = n_ratings // RATERS_PER_ITEM
    J = n_raters_for(n_ratings)
    sim = simulate_dawid_skene(I, J, n_categories=K, raters_per_item=RATERS_PER_ITEM, seed=SEED)
    d = sim.data
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "item.npy", d.unit.astype(np.int32))
    np.save(out / "rater.npy", d.rater.astype(np.int32))
    np.save(out / "rating.npy", d.rating.astype(np.int32))
    np.save(out / "z.npy", sim.z.astype(np.int32))
    # accuracy of the Bayes classifier that knows the true parameters
    from pyrater.models.kernels import class_log_posterior

    lp, _ = class_log_posterior(d.counts, np.log(sim.pi), np.log(sim.theta))
    oracle = float(np.mean(lp.argmax(1) == sim.z))
    return {"n_ratings": int(d.n_ratings), "n_items": I, "n_raters": J, "oracle_accuracy": oracle}


# ---------------------------------------------------------------------- workers


def warm_up_numba() -> float:
    """Load (or, the very first time, compile) the fused numba kernels; returns the seconds taken.

    A one-off cost per process, like an import: numba itself and the
    kernels from numba's on-disk cache, loaded by a fit of a tiny problem
    with ``backend="numba"`` along the big fits' path (majority-vote start,
    plain EM; the same argument types) and the compiled compression check.
    Until 2026-12-06 the tiny fit took the default start, so the majority
    start's kernel and the compression check were loaded inside the first
    timed fit (about 10-20 ms, a tenth of a 10-iteration fit at 10^6).
    Returns NaN when numba is not installed.
    """
    import warnings

    from pyrater.data import RatingData
    from pyrater.inference.em.algorithm import EMConvergenceWarning, em
    from pyrater.inference.em.compress import may_compress

    t0 = time.perf_counter()
    try:
        import pyrater.inference.em.kernel
    except ImportError:
        return float("nan")
    tiny = RatingData.from_codes(
        np.array([0, 0, 1, 1], np.int32),
        np.array([0, 1, 0, 1], np.int32),
        np.array([0, 1, 1, 1], np.int32),
        n_categories=K,
        n_items=2,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        # the measured fits' path: the majority-vote start's one-pass sums, plain EM
        em(tiny, method="ml", max_iter=2, backend="numba", init="majority", acceleration="none")
    # and "auto" compression's check, which runs compiled from 500,000 stored counts on
    may_compress(tiny.counts, pyrater.inference.em.kernel)
    return time.perf_counter() - t0


def method_name(backend: str, n_threads: int) -> str:
    """Row label of a pyrater run: "pyrater", "pyrater, 2 threads", "pyrater, backend=scipy", ..."""
    parts = ["pyrater"]
    if backend != "auto":
        parts.append(f"backend={backend}")
    if n_threads != 1:
        parts.append(f"{n_threads} threads")
    return ", ".join(parts)


def worker_pyrater(folder: Path, n_iter: int, n_threads: int = 1, backend: str = "auto") -> dict:
    import warnings

    from pyrater.data import RatingData
    from pyrater.inference.em.algorithm import EMConvergenceWarning, em

    kernel_load = warm_up_numba() if backend != "scipy" else float("nan")  # the scipy path never imports numba
    base = current_mib()
    item = np.load(folder / "item.npy")
    rater = np.load(folder / "rater.npy")
    rating = np.load(folder / "rating.npy")
    z = np.load(folder / "z.npy")
    t0 = time.perf_counter()
    data = RatingData.from_codes(item, rater, rating, n_categories=K, n_items=z.size)
    del item, rater, rating
    t_codes = time.perf_counter() - t0
    _ = data.counts  # the per-unit count matrix (cached on the data; built once)
    t_data = time.perf_counter() - t0
    mem_data = peak_mib()
    t1, c1 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)  # a fixed number of iterations on purpose
        # plain EM steps, as crowd-kit takes (SQUAREM, the default, keeps one point per three E-steps)
        # init="majority": the soft-majority start crowd-kit uses (the default "auto" start runs a search of
        # short runs below 200,000 counts, which is not one EM run)
        kw = dict(method="ml", tol=0.0, n_threads=n_threads, backend=backend, acceleration="none", init="majority")
        fit = em(data, max_iter=n_iter, **kw)
    t_fit, c_fit = time.perf_counter() - t1, time.process_time() - c1
    # the marginal cost of an iteration: a second fit with 3x the iterations, minus the first
    t2, c2 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        long = em(data, max_iter=3 * n_iter, **kw)
    t_long, c_long = time.perf_counter() - t2, time.process_time() - c2
    extra = long.n_iter - fit.n_iter
    acc = float(np.mean(fit.class_probs.argmax(1) == z))
    return {
        "method": method_name(backend, n_threads),
        "backend": fit.backend,
        "n_threads": n_threads,
        "kernel_load_s": kernel_load,
        "iterations": fit.n_iter,
        "data_s": t_data,
        "counts_s": t_data - t_codes,
        "fit_s": t_fit,
        "cpu_fit_s": c_fit,
        "per_iter_s": t_fit / fit.n_iter,
        "cpu_per_iter_s": c_fit / fit.n_iter,
        "loop_per_iter_s": sum(fit.timings["loop"]) / fit.n_iter,
        "marginal_per_iter_s": (t_long - t_fit) / extra,
        "cpu_marginal_per_iter_s": (c_long - c_fit) / extra,
        "setup_s": fit.timings["setup"],
        "accuracy": acc,
        "log_lik": fit.log_lik,
        "compressed": fit.compressed,
        "rss_after_imports_mib": base,
        "peak_after_data_mib": mem_data,
        "peak_mib": peak_mib(),
    }


def worker_crowdkit(folder: Path, n_iter: int) -> dict:
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    base = current_mib()
    item = np.load(folder / "item.npy")
    rater = np.load(folder / "rater.npy")
    rating = np.load(folder / "rating.npy")
    z = np.load(folder / "z.npy")
    t0 = time.perf_counter()
    df = pd.DataFrame({"task": item, "worker": rater, "label": rating})
    del item, rater, rating
    t_data = time.perf_counter() - t0
    mem_data = peak_mib()
    t1, c1 = time.perf_counter(), time.process_time()
    ds = DawidSkene(n_iter=n_iter, tol=-np.inf).fit(df)
    t_fit, c_fit = time.perf_counter() - t1, time.process_time() - c1
    iters = len(ds.loss_history_)
    # the marginal cost of an iteration, as for pyrater
    t2, c2 = time.perf_counter(), time.process_time()
    long = DawidSkene(n_iter=3 * n_iter, tol=-np.inf).fit(df)
    t_long, c_long = time.perf_counter() - t2, time.process_time() - c2
    extra = len(long.loss_history_) - iters
    labels = ds.labels_.reindex(np.arange(z.size))
    acc = float(np.mean(labels.to_numpy() == z))
    return {
        "method": "crowd-kit",
        "iterations": iters,
        "data_s": t_data,
        "fit_s": t_fit,
        "cpu_fit_s": c_fit,
        "per_iter_s": t_fit / iters,
        "cpu_per_iter_s": c_fit / iters,
        "marginal_per_iter_s": (t_long - t_fit) / extra,
        "cpu_marginal_per_iter_s": (c_long - c_fit) / extra,
        "accuracy": acc,
        "rss_after_imports_mib": base,
        "peak_after_data_mib": mem_data,
        "peak_mib": peak_mib(),
    }


# ----------------------------------------------------------------------- driver


def bandwidth_gbs(n_bytes: int = 2**29, repeats: int = 5) -> float:
    """Copy bandwidth in GB/s (bytes read + bytes written) of a numpy copy."""
    a = np.ones(n_bytes // 8)
    b = np.empty_like(a)
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best / 1e9


def one_pass_bytes(n_ratings: int, n_items: int) -> int:
    """Bytes of one pass over the data: CSR counts (float64 data + int32 indices),
    int32 indptr, and one (I, K) float64 array of class probabilities."""
    return n_ratings * 12 + (n_items + 1) * 4 + n_items * K * 8


def run_worker(python: str, mode: str, folder: Path, n_iter: int, n_threads: int = 1, backend: str = "auto") -> dict:
    cmd = [python, os.path.abspath(__file__), mode, str(folder), str(n_iter), str(n_threads), backend]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        name = "crowd-kit" if mode == "worker-crowdkit" else method_name(backend, n_threads)
        return {"method": name, "error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def versions(crowdkit_python: str | None) -> dict:
    import scipy

    out = {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__}
    if crowdkit_python:
        code = (
            "import sys, numpy, pandas, importlib.metadata as m;"
            "print(sys.version.split()[0], numpy.__version__, pandas.__version__, m.version('crowd-kit'))"
        )
        res = subprocess.run([crowdkit_python, "-c", code], capture_output=True, text=True)
        if res.returncode == 0:
            py, npv, pdv, ck = res.stdout.split()
            out["crowdkit_env"] = {"python": py, "numpy": npv, "pandas": pdv, "crowd-kit": ck}
    try:
        cpu = [
            ln.split(":", 1)[1].strip()
            for ln in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if ln.startswith("Model name")
        ][0]
    except Exception:  # lscpu missing is not fatal
        cpu = platform.processor()
    out["cpu"] = cpu
    out["cores"] = os.cpu_count()
    out["vector_isa"] = vector_isa()
    return out


def vector_isa() -> str:
    """The widest vector instructions the CPU offers ("avx512f", "avx2", ...), and the CPU LLVM compiles for.

    The compiled kernels are vectorised for the host, so the ratio to crowd-kit depends on it: 42x on an
    AVX-512 host, 22-26x on an AVX2 one (bench/RESULTS_em.md).
    """
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((ln.split(":", 1)[1].split() for ln in fh if ln.startswith("flags")), [])
    except OSError:
        flags = []
    widest = next((f for f in ("avx512f", "avx2", "avx", "sse4_2") if f in flags), "unknown")
    try:
        import llvmlite.binding as llvm

        return f"{widest} (LLVM host CPU {llvm.get_host_cpu_name()})"
    except Exception:  # llvmlite comes with numba; the scipy-only path may lack it
        return widest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e4, 1e5, 1e6, 1e7])
    ap.add_argument(
        "--iters", nargs="+", type=int, default=None, help="iterations per size (default 10, and 5 at 1e7 ratings)"
    )
    ap.add_argument("--crowdkit-python", default="/tmp/benchenv/bin/python")
    ap.add_argument("--no-crowdkit", action="store_true")
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs per method and size, interleaved; the fastest is reported (crowd-kit runs once at 1e7)",
    )
    ap.add_argument(
        "--pyrater-threads",
        nargs="+",
        type=int,
        default=[1],
        help="n_threads values for pyrater's numba backend, each run as its own method (default 1)",
    )
    ap.add_argument(
        "--pyrater-backends",
        nargs="+",
        default=["auto"],
        choices=["auto", "numba", "scipy"],
        help="em(backend=...) values, each run as its own method (default auto)",
    )
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--markdown", default=None, help="also write a Markdown table here")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes]
    iters = args.iters or [5 if s >= 10**7 else 10 for s in sizes]
    if len(iters) != len(sizes):
        ap.error("--iters needs one value per size")
    ck = None if args.no_crowdkit else args.crowdkit_python
    if ck and not Path(ck).exists():
        ap.error(
            f"crowd-kit interpreter {ck} not found; create the venv (see the module docstring) or pass --no-crowdkit"
        )

    info = versions(ck)
    info["bandwidth_GBps"] = bandwidth_gbs()
    info["load_average_at_start"] = os.getloadavg()
    print(json.dumps(info), flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_em_") as tmp:
        for n, n_iter in zip(sizes, iters):
            folder = Path(tmp) / f"n{n}"
            meta = simulate(n, folder)
            bound = one_pass_bytes(meta["n_ratings"], meta["n_items"]) / (info["bandwidth_GBps"] * 1e9)
            # interleave the methods, repeat, keep each method's fastest run (the machine is shared)
            names = {
                (b, t): method_name(b, t)
                for b in args.pyrater_backends
                for t in args.pyrater_threads
                if t == 1 or b != "scipy"
            }  # threads only matter for the numba backend
            runs: dict[str, list[dict]] = {name: [] for name in names.values()}
            runs["crowd-kit"] = []
            for rep in range(args.repeats):
                for (b, t), name in names.items():
                    runs[name].append(run_worker(sys.executable, "worker-pyrater", folder, n_iter, t, b))
                if ck and (rep == 0 or n < 10**7):
                    runs["crowd-kit"].append(run_worker(ck, "worker-crowdkit", folder, n_iter))
            results = []
            for rs in runs.values():
                ok = [r for r in rs if "error" not in r]
                if not ok:
                    results.extend(rs[:1])
                    continue
                best = min(ok, key=lambda r: r["fit_s"])
                best["fit_s_all"] = [r["fit_s"] for r in ok]
                best["peak_mib_all"] = [r["peak_mib"] for r in ok]
                results.append(best)
            for r in results:
                r.update(meta)
                r["one_pass_bound_s"] = bound
                rows.append(r)
                print(json.dumps(r), flush=True)
    print()
    head = (
        f"{'ratings':>9} {'items':>8} {'raters':>6} {'method':>9} {'iters':>5} {'s/iter':>9} "
        f"{'CPU s/it':>9} {'total s':>8} {'peak MiB':>9} {'accuracy':>8} {'oracle':>7} {'x pass':>7}"
    )
    print(head)
    for r in rows:
        if "error" in r:
            print(f"{r['n_ratings']:>9} {r['method']:>28} ERROR {r['error']}")
            continue
        print(
            f"{r['n_ratings']:>9} {r['n_items']:>8} {r['n_raters']:>6} {r['method']:>9} {r['iterations']:>5} "
            f"{r['per_iter_s']:>9.4f} {r['cpu_per_iter_s']:>9.4f} {r['fit_s']:>8.2f} {r['peak_mib']:>9.0f} {r['accuracy']:>8.4f} "
            f"{r['oracle_accuracy']:>7.4f} {r['per_iter_s'] / r['one_pass_bound_s']:>7.1f}"
        )
    info["load_average_at_end"] = os.getloadavg()
    print(f"load average at start {info['load_average_at_start']}, at end {info['load_average_at_end']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"info": info, "rows": rows}, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(markdown_table(rows))


def markdown_table(rows: list[dict]) -> str:
    """The results as a Markdown table, with the speed-up of pyrater over crowd-kit."""
    by_n: dict[int, dict[str, dict]] = {}
    for r in rows:
        by_n.setdefault(r["n_ratings"], {})[r["method"]] = r
    out = [
        "| ratings | items | raters | method | iterations | s / iteration | CPU s / iteration | loop s / iteration "
        "| marginal s / iteration | marginal CPU s / iteration | total fit s "
        "| data build s | numba load s | peak RSS MiB | accuracy | oracle accuracy | one-pass bound ms | x bound | speed-up "
        "| marginal speed-up |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, methods in sorted(by_n.items()):
        ck = methods.get("crowd-kit")
        for name in sorted(methods, key=lambda m: (m == "crowd-kit", m)):
            r = methods.get(name)
            if r is None:
                continue
            if "error" in r:
                out.append(f"| {n:,} | | | {name} | error: {r['error']} |" + " |" * 15)
                continue
            loop = f"{r['loop_per_iter_s']:.4f}" if "loop_per_iter_s" in r else "n/a"
            speed = marginal_speed = ""
            if name.startswith("pyrater") and ck and "error" not in ck:
                speed = (
                    f"{ck['per_iter_s'] / r['per_iter_s']:.0f}x wall, "
                    f"{ck['cpu_per_iter_s'] / r['cpu_per_iter_s']:.0f}x CPU"
                )
                if "marginal_per_iter_s" in ck and "marginal_per_iter_s" in r:
                    marginal_speed = (
                        f"{ck['marginal_per_iter_s'] / r['marginal_per_iter_s']:.0f}x wall, "
                        f"{ck['cpu_marginal_per_iter_s'] / r['cpu_marginal_per_iter_s']:.0f}x CPU"
                    )
            marginal = (
                f"{r['marginal_per_iter_s']:.4f} | {r['cpu_marginal_per_iter_s']:.4f}"
                if "marginal_per_iter_s" in r
                else "n/a | n/a"
            )
            label = f"{name} ({r['backend']})" if "backend" in r else name
            numba_load = (
                f"{r['kernel_load_s']:.2f}" if r.get("kernel_load_s", float("nan")) == r.get("kernel_load_s") else "n/a"
            )
            out.append(
                f"| {n:,} | {r['n_items']:,} | {r['n_raters']:,} | {label} | {r['iterations']} | {r['per_iter_s']:.4f} "
                f"| {r['cpu_per_iter_s']:.4f} "
                f"| {loop} | {marginal} | {r['fit_s']:.2f} | {r['data_s']:.2f} | {numba_load} "
                f"| {r['peak_mib']:.0f} | {r['accuracy']:.4f} "
                f"| {r['oracle_accuracy']:.4f} | {1e3 * r['one_pass_bound_s']:.3f} "
                f"| {r['per_iter_s'] / r['one_pass_bound_s']:.0f} | {speed} | {marginal_speed} |"
            )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1].startswith("worker-"):
        mode, folder, n_iter = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
        if mode == "worker-pyrater":
            out = worker_pyrater(
                folder,
                n_iter,
                int(sys.argv[4]) if len(sys.argv) > 4 else 1,
                sys.argv[5] if len(sys.argv) > 5 else "auto",
            )
        else:
            out = worker_crowdkit(folder, n_iter)
        print(json.dumps(out), flush=True)
    else:
        main()
