"""Benchmark: EM for the item-difficulty family at crowd scale, beside Dawid-Skene EM on the same data.

Data: ``pyrater.simulate("item_difficulty", ratings / 5, J, raters_per_item=5)``
(binary; the 3PL model's default truth: ``pi ~ Dirichlet(2, 2)``, rater logits
around 1.5 / 2, difficulty ~ N(0, 1), discrimination ~ lognormal(0, 0.25),
guessing ~ Beta(1, 9)), J = ratings / 2000 raters (each with about 2,000
ratings), 5 distinct raters per item.

Each fit runs in its own subprocess, so that its peak memory (``ru_maxrss``) is
its own; the subprocess also reports its resident memory after simulating the
data, before fitting.  Fits, all ``method="map"`` at the default stopping rule
(``tol=1e-8``, ``param_tol=1e-6``):

``item_difficulty 3PL``, ``item_difficulty 2PL``
    ``pyrater.em(data, ItemDifficulty(...), method="map")`` (numba passes,
    SQUAREM then plain EM); ``e-steps`` counts every E-step (the kept ones in
    ``log_lik_trace`` and the rejected SQUAREM jumps).
``item_difficulty 3PL (no SQUAREM)``
    the same with ``acceleration="none"`` (plain generalised EM).
``dawid_skene``
    ``pyrater.em(data, "dawid_skene", method="map")``: full error matrices, its
    default start and backend.

Usage::

    python bench/bench_item_difficulty_em.py [--sizes 1e5 1e6] [--json out.json]

(``--worker`` is internal: one fit in this process, a JSON line on stdout.)
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SEED = 20261127
FITS = ("item_difficulty 3PL", "item_difficulty 2PL", "item_difficulty 3PL (no SQUAREM)", "dawid_skene")


def _rss_mib() -> float:
    """Peak resident memory of this process so far, MiB (Linux ``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(n: int, fit: str) -> dict:
    import warnings

    import pyrater
    from pyrater import ItemDifficulty

    sim = pyrater.simulate("item_difficulty", n // 5, max(10, n // 2000), raters_per_item=5, seed=SEED)
    data = sim.data
    base = _rss_mib()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if fit == "dawid_skene":
            res = pyrater.em(data, "dawid_skene", method="map")
        else:
            model = ItemDifficulty(guessing="3PL" in fit)
            res = pyrater.em(data, model, method="map", acceleration="none" if "no SQUAREM" in fit else "auto")
    total = time.perf_counter() - t0
    conv = res.convergence
    e_steps = int(conv.get("e_steps", res.n_iter))
    loop = float(sum(res.timings["loop"]))
    z = res.class_probs.argmax(axis=1)
    return {
        "ratings": int(data.n_ratings),
        "items": int(data.n_units),
        "raters": int(data.n_raters),
        "fit": fit,
        "seconds": total,
        "iterations": int(res.n_iter),
        "e_steps": e_steps,
        "seconds_per_e_step": loop / max(e_steps, 1),
        "converged": bool(res.converged),
        "accuracy": float(np.mean(z == sim.z)),
        "backend": res.backend,
        "rss_data_mib": base,
        "peak_rss_mib": _rss_mib(),
        "warnings": [str(w.message)[:120] for w in caught],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e5, 1e6])
    ap.add_argument("--fits", nargs="+", default=list(FITS))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(int(float(args.worker[0])), args.worker[1])))
        return
    import numba
    import scipy

    import pyrater

    print(f"machine: {platform.platform()}, {platform.processor() or platform.machine()}")
    print(f"python {platform.python_version()}, pyrater {pyrater.__version__}, numpy {np.__version__}, ")
    print(f"scipy {scipy.__version__}, numba {numba.__version__}")
    rows = []
    for n in args.sizes:
        for fit in args.fits:
            out = subprocess.run(
                [sys.executable, __file__, "--worker", str(int(n)), fit], capture_output=True, text=True, check=True
            )
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"{row['ratings']:>9,} {fit:<34} {row['seconds']:7.1f} s  iterations {row['iterations']:4d}  "
                f"E-steps {row['e_steps']:4d}  {1000 * row['seconds_per_e_step']:7.1f} ms/E-step  "
                f"converged {row['converged']}  accuracy {row['accuracy']:.4f}  "
                f"RSS data {row['rss_data_mib']:.0f} MiB, peak {row['peak_rss_mib']:.0f} MiB",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
