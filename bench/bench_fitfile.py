"""Benchmark: saving and loading fits, the new encoding against the format as it was (issue 27 item 6, issue 28).

Side by side in one process, on the same fit:

* **before**: the fit-file code of the last commit (``git show HEAD:python/pyrater/fits/fitfile.py``, or
  ``--before FILE``): every number deflated at level 4 in HDF5's own chunks; ``load`` reads every group
  through xarray;
* **now**: ``pyrater.fits.fitfile``: floats stored as they are in chunks of whole draws, integers
  shuffled and deflated at level 1, everything checksummed; ``load`` reads only what the fit needs,
  through h5py, checking every part.

Fits:

1. ``gibbs_1e6``: the G-gibbs bench data (``bench_gibbs.simulate``: 10^6 ratings, I = 200,000 items,
   J = 1,000 raters, K = 5), ``method="gibbs"``, 4 chains x 1,000 draws after 1,000 warm-up sweeps
   (the kept ``log_lik``, 6.4 GB, does not fit the default budget and is not kept).
2. ``trec``: trec_relevance from ``../shared/data`` (98k ratings, 20k items, 766 raters, K = 4), Gibbs
   4 x 1,000 with ``log_lik`` kept (0.65 GB): the case of issue 27 (save 90 s, 0.9 GB, load 21 s).

For each: the fit's wall time, then save and load times, file size and the peak memory a load adds
(``/proc/self/clear_refs``), and a check that every draw loads back to the last bit (both readers).

Run::

    NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench/bench_fitfile.py            # both fits
    python bench/bench_fitfile.py --fits gibbs_1e6 --repeats 1
"""

from __future__ import annotations

import argparse
import importlib.util
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
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(HERE))
SHARED = Path(os.environ.get("PYRATER_SHARED_DATA", REPO.parent / "shared" / "data"))


def before_module(path: Path | None):
    """The fit-file module of the last commit (or ``path``), imported beside the current one."""
    if path is None:
        source = subprocess.run(
            ["git", "-C", str(REPO), "show", "HEAD:python/pyrater/fits/fitfile.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        path = Path(tempfile.mkdtemp()) / "fitfile_before.py"
        path.write_text(source)
    spec = importlib.util.spec_from_file_location("pyrater.fits._fitfile_before", path)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "pyrater.fits"
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def peak_added_mib(run):
    """Run ``run()``; returns its result and the peak resident memory it added (MiB; NaN where unmeasurable)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        before = _status_kib("VmRSS")
    except OSError:
        before = -1
    out = run()
    peak = _status_kib("VmHWM") if before >= 0 else -1
    return out, (peak - before) / 1024 if before >= 0 else float("nan")


def same_draws(a, b) -> bool:
    return a.draws.keys() == b.draws.keys() and all(
        np.asarray(a.draws[k]).dtype == np.asarray(b.draws[k]).dtype and np.array_equal(a.draws[k], b.draws[k])
        for k in a.draws
    )


def make_fit(name: str, draws: int, warmup: int):
    import pyrater

    if name == "gibbs_1e6":
        from bench_gibbs import simulate

        data = simulate(1_000_000, per_item=5)
        keep = False
    elif name == "trec":
        data = pyrater.as_rating_data(pd.read_csv(SHARED / "trec_relevance" / "ratings.csv"))
        keep = True
    else:
        raise ValueError(name)
    with warnings.catch_warnings():  # compile or load the kernel outside the timing
        warnings.simplefilter("ignore")
        pyrater.fit(data, "dawid_skene", method="gibbs", chains=1, warmup=0, draws=1, seed=1, progress=False)
        start = time.perf_counter()
        fit = pyrater.fit(
            data,
            "dawid_skene",
            method="gibbs",
            chains=4,
            warmup=warmup,
            draws=draws,
            seed=1,
            log_lik=keep,
            max_memory_gib=2.0,
            progress=False,
        )
    return fit, time.perf_counter() - start


def bench_one(name: str, draws: int, warmup: int, repeats: int, before, folder: Path) -> list[dict]:
    from pyrater.fits import fitfile

    fit, fit_wall = make_fit(name, draws, warmup)
    kept = {k: list(np.shape(v)) for k, v in fit.draws.items()}
    draw_bytes = sum(np.asarray(v).nbytes for v in fit.draws.values())
    rows = []
    for label, module in (("before", before), ("now", fitfile)):
        path = folder / f"{name}_{label}.nc"
        saves, loads, peaks = [], [], []
        for _ in range(repeats):
            if path.exists():
                path.unlink()
            start = time.perf_counter()
            module.save_fit(fit, path)
            saves.append(time.perf_counter() - start)
            start = time.perf_counter()
            back, peak = peak_added_mib(lambda m=module, p=path: m.load_fit(p))
            loads.append(time.perf_counter() - start)
            peaks.append(peak)
            exact = same_draws(fit, back)
            del back
        size = path.stat().st_size
        rows.append(
            {
                "fit": name,
                "format": label,
                "items": fit.data.n_units,
                "ratings": fit.data.n_ratings,
                "draws kept": kept,
                "draws GB": round(draw_bytes / 1e9, 3),
                "fit wall s": round(fit_wall, 1),
                "save s": round(min(saves), 2),
                "save / fit": round(min(saves) / fit_wall, 3),
                "load s": round(min(loads), 2),
                "load / fit": round(min(loads) / fit_wall, 3),
                "file GB": round(size / 1e9, 3),
                "file / draws": round(size / draw_bytes, 3),
                "load peak added MiB": round(min(peaks)),
                "draws exact": exact,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        path.unlink()
    return rows


def machine() -> str:
    import h5py
    import numba

    load = os.getloadavg()
    return (
        f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {np.__version__}, numba {numba.__version__}, h5py {h5py.__version__} (HDF5 "
        f"{h5py.version.hdf5_version}); load average at start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fits", nargs="*", default=["gibbs_1e6", "trec"])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2, help="save/load each this many times, the fastest counted")
    ap.add_argument("--before", type=Path, default=None, help="the earlier fitfile.py (default: git HEAD's)")
    ap.add_argument("--folder", type=Path, default=None, help="where the files are written (default: a temp dir)")
    ap.add_argument("--json", type=Path, default=HERE / "bench_fitfile.json")
    args = ap.parse_args(argv)
    before = before_module(args.before)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="pyrater-fitfile-"))
    folder.mkdir(parents=True, exist_ok=True)
    result = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": []}
    for name in args.fits:
        if name == "trec" and not (SHARED / "trec_relevance" / "ratings.csv").exists():
            print("trec_relevance not found; skipped", file=sys.stderr)
            continue
        result["rows"] += bench_one(name, args.draws, args.warmup, args.repeats, before, folder)
    result["finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    args.json.write_text(json.dumps(result, indent=1))
    print(pd.DataFrame(result["rows"]).drop(columns=["draws kept"]).to_markdown(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
