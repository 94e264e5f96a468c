"""Benchmark: the steps after a Gibbs fit at crowd scale, side by side with the fit in one run.

Issue 27, item 3.  Simulated Dawid-Skene data (``bench_gibbs.simulate``: K = 5
categories, 1,000 raters, ``--per-item`` ratings per item, 10^6 ratings ->
200,000 items with the default 5), one fresh process per size so that every
number is that run's.  In order, each step timed (wall and CPU seconds of
the process, all threads) with its own peak resident memory (the kernel's
high-water mark ``VmHWM``, reset before each step through
``/proc/self/clear_refs``):

1. the data (``RatingData.from_codes``), the baseline;
2. ``pyrater.fit(..., method="gibbs")``: 4 chains x 1,000 draws (warm-up
   ``--warmup``), ``max_memory_gib=--budget``;
3. ``fit.summary()`` from cold caches (class probabilities, means, intervals,
   Rhat and ESS of every parameter) and ``str()`` of it (lines printed);
4. its parts, each from cold caches again: ``class_probabilities()``,
   ``mcmc_diagnostics()``;
5. ``pyrater.loo(fit)`` (auto: exact when the items x draws log-likelihood
   fits the budget, else subsampling) and, with ``--exact-loo``,
   ``pyrater.loo(fit, method="exact")`` (chunked), to check the subsampling
   estimate against it;
6. ``to_inference_data()``, ``save()`` (file size) and ``pyrater.load``.

Ratios are to the fit's wall time of the same run.  The fit's memory is
reported as its peak RSS above the baseline before the data, against the
bytes of the draws it keeps plus the data's arrays.

Run::

    python bench/bench_postfit.py --sizes 1000000              # writes bench/bench_postfit.json
    python bench/bench_postfit.py --sizes 10000000 --thin 2 --budget 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(HERE))


def _rss_mib(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux >= 4.0)
    except OSError:
        pass


class Step:
    """Times one step (wall and CPU of every thread) and its own peak RSS."""

    def __init__(self, rows: dict, name: str) -> None:
        self.rows, self.name = rows, name

    def __enter__(self) -> Step:
        _reset_peak()
        self.rss0 = _rss_mib()
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.rows[self.name] = {
            "wall s": time.perf_counter() - self.t0,
            "CPU s": time.process_time() - self.c0,
            "RSS before MiB": self.rss0,
            "peak RSS MiB": _rss_mib("VmHWM"),
        }


def data_bytes(data) -> int:
    """Bytes of the arrays of a RatingData (codes, weights, labels, the count matrix)."""
    total = 0
    for value in vars(data).values():
        if isinstance(value, np.ndarray):
            total += value.nbytes
    counts = data.counts
    return total + counts.data.nbytes + counts.indices.nbytes + counts.indptr.nbytes


def one_size(args: argparse.Namespace) -> dict:
    import pyrater
    from bench_gibbs import simulate

    out: dict = {"ratings": args.size}
    with warnings.catch_warnings():  # load the compiled kernels outside the timings (a one-off per process)
        warnings.simplefilter("ignore")
        tiny = pyrater.simulate("dawid_skene", n_items=50, n_raters=4, n_categories=5, seed=1).data
        w = pyrater.fit(tiny, method="gibbs", chains=2, warmup=5, draws=20, seed=1, progress=False)
        w.summary()
        pyrater.loo(w, warn=False)
        pyrater.loo(w, warn=False, method="subsample", n_subsample=10)
    steps: dict = {}
    base = _rss_mib()
    with Step(steps, "data"):
        data = simulate(args.size, per_item=args.per_item)
    out.update(items=data.n_units, raters=data.n_raters, K=data.n_categories, data_MiB=data_bytes(data) / 2**20)
    caught: list[str] = []
    with Step(steps, "fit"), warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fit = pyrater.fit(
            data,
            method="gibbs",
            chains=args.chains,
            warmup=args.warmup,
            draws=args.draws,
            thin=args.thin,
            seed=1,
            max_memory_gib=args.budget,
            progress=False,
        )
    caught += [str(r.message) for r in rec]
    draws_bytes = sum(np.asarray(v).nbytes for v in fit.draws.values())
    out.update(
        draws_MiB=draws_bytes / 2**20,
        log_lik_kept="log_lik" in fit.draws,
        sampling_s=fit.elapsed,
        warnings=caught,
        fit_memory_ratio=(steps["fit"]["peak RSS MiB"] - base) / (draws_bytes / 2**20 + out["data_MiB"]),
    )
    with Step(steps, "summary()"):
        text = str(fit.summary())
    out["summary_lines"] = text.count("\n") + 1
    out["summary_text"] = text

    def cold() -> None:
        for key in ("_rb_probs", "_stats", "_diagnostics"):
            fit.__dict__.pop(key, None)

    cold()
    with Step(steps, "class_probabilities()"):
        fit.class_probabilities()
    cold()
    with Step(steps, "mcmc_diagnostics()"):
        table = fit.mcmc_diagnostics(warn=False)
    out["max_rhat"] = float(table.attrs["max_rhat"])
    out["min_ess_bulk"] = float(table.attrs["min_ess_bulk"])
    with Step(steps, "loo() (auto)"):
        res = pyrater.loo(fit, warn=False)
    out["loo_auto"] = {
        "method": res.method,
        "elpd": res.elpd,
        "se": res.se,
        "subsample_se": res.subsample_se,
        "n_subsample": res.n_subsample,
        "p": res.p,
    }
    if args.exact_loo:
        with Step(steps, "loo(method='exact')"):
            ex = pyrater.loo(fit, warn=False, method="exact", max_memory_gib=args.budget)
        out["loo_exact"] = {"elpd": ex.elpd, "se": ex.se, "p": ex.p, "n_bad_k": ex.n_bad_k}
        if res.method == "subsample":
            out["loo_z"] = (res.elpd - ex.elpd) / res.subsample_se
    with Step(steps, "to_inference_data()"):
        idata = fit.to_inference_data()
    del idata
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fit.nc"
        try:
            with Step(steps, "save()"):
                fit.save(path)
            out["file_MiB"] = path.stat().st_size / 2**20
            with Step(steps, "load() (lazy, the default)"):
                back = pyrater.load(path)
            with Step(steps, "summary() of the loaded fit"):
                str(back.summary())
            del back
            with Step(steps, "load(lazy=False)"):
                back = pyrater.load(path, lazy=False)
            del back
        except Exception as exc:  # the fit file belongs to another part of the package: report, go on
            out["save_error"] = f"{type(exc).__name__}: {exc}"
    fit_wall = steps["fit"]["wall s"]
    fit_cpu = steps["fit"]["CPU s"]
    for row in steps.values():
        row["x fit wall"] = row["wall s"] / fit_wall
        row["x fit CPU"] = row["CPU s"] / fit_cpu
    out["steps"] = steps
    out["baseline RSS MiB"] = base
    return out


def machine() -> str:
    import numba

    load = os.getloadavg()
    return (
        f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {np.__version__}, numba {numba.__version__}; load average at start "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1_000_000])
    ap.add_argument("--per-item", type=int, default=5)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--thin", type=int, default=1)
    ap.add_argument("--budget", type=float, default=1.0, help="max_memory_gib of the fit (and of LOO)")
    ap.add_argument("--exact-loo", action="store_true", help="also exact (chunked) LOO, to check subsampling")
    ap.add_argument("--json", type=Path, default=HERE / "bench_postfit.json")
    args = ap.parse_args(argv)
    if args.size:
        print(json.dumps(one_size(args)))
        return 0
    result = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": []}
    for n in args.sizes:
        cmd = [sys.executable, __file__, "--size", str(n)]
        for flag in ("per_item", "chains", "draws", "warmup", "thin", "budget"):
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
        if args.exact_loo:
            cmd.append("--exact-loo")
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stderr[-3000:], file=sys.stderr)
            return res.returncode
        row = json.loads(res.stdout.strip().splitlines()[-1])
        row["command"] = " ".join(cmd[1:])
        print(json.dumps({k: v for k, v in row.items() if k != "summary_text"}, indent=1), flush=True)
        result["runs"].append(row)
    result["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result["load at end"] = os.getloadavg()
    args.json.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
