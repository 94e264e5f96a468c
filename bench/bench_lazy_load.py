"""Lazy against eager ``pyrater.load`` of a 10^6-rating Gibbs fit file, and the first steps on the loaded fit.

Usage: ``python bench/bench_lazy_load.py [FILE]`` (default ``/tmp/pyrater_fit1e6.nc``).  When the file
does not exist the fit is made and saved there first (``bench_gibbs.simulate(10**6, per_item=5)``,
Dawid-Skene, 4 chains x 1,000 draws after 200 warm-up, ``max_memory_gib=1``).  Prints one JSON object:
wall and CPU seconds and the peak resident memory each step adds, in two rounds.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pyrater
from bench_gibbs import simulate
from bench_postfit import _reset_peak, _rss_mib


def step(out: dict, name: str, f: Callable[[], Any]) -> Any:
    """Run ``f`` and record its wall and CPU time and the peak memory it adds under ``out[name]``."""
    _reset_peak()
    base = _rss_mib()
    t, c = time.perf_counter(), time.process_time()
    result = f()
    out[name] = {
        "wall_s": round(time.perf_counter() - t, 3),
        "cpu_s": round(time.process_time() - c, 3),
        "peak_MiB_added": round(_rss_mib("VmHWM") - base, 1),
    }
    return result


def main(path: str) -> dict:
    out: dict = {"load average at start": os.getloadavg()}
    if not os.path.exists(path):
        data = simulate(1_000_000, per_item=5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = step(
                out,
                "fit",
                lambda: pyrater.fit(
                    data, method="gibbs", chains=4, warmup=200, draws=1000, seed=1, max_memory_gib=1.0, progress=False
                ),
            )
        fit.save(path)
        del fit
    out["file_MiB"] = os.path.getsize(path) / 2**20
    for rep in range(2):
        lazy = step(out, f"load() lazy #{rep}", lambda: pyrater.load(path))
        step(out, f"class_probabilities() of the loaded fit #{rep}", lazy.class_probabilities)
        step(out, f"summary() of the loaded fit #{rep}", lambda fit=lazy: str(fit.summary()))
        del lazy
        step(out, f"load(lazy=False) #{rep}", lambda: pyrater.load(path, lazy=False))
    out["load average at end"] = os.getloadavg()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/pyrater_fit1e6.nc"), indent=1))
