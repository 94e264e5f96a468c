"""Benchmark: a model family against Dawid-Skene by the same native method, side by side.

The target (issue 25, item 4): each native method at 10^6 ratings within 2x
of Dawid-Skene by the same method, per EM iteration and per Gibbs sweep.

Data simulated from the family (``--family``: one_coin, mace, pooled or community;
K = 5 categories, 5 distinct raters per item, items = ratings / 5,
J = min(5000, max(50, ratings / 200)) raters, as ``bench_em.py``), fitted by
the family and by Dawid-Skene on the same data:

* EM (``pyrater.em``, the fused numba backend, one thread, majority-vote
  start, ``tol=0`` so that every run makes ``--em-iters`` iterations): loop
  time per iteration (``fit.timings["loop"] / fit.n_iter``).  Maximum
  likelihood for one_coin and mace (rater's default DS prior has an
  off-diagonal 0.8 < 1 at K = 5, so no MAP); the posterior mode for pooled
  and community, which have no ML, with Dawid-Skene's prior raised to at
  least 1 (``beta = max(default_beta(5), 1)``, the pooled model's prior on
  its population rows).  MACE's M-step is an inner EM on the expected counts;
  pooled's adds a Newton step on its population rows; community's (L = 3,
  its default) the communities' responsibilities and a weighted Newton step
  per community.
* Gibbs (``pyrater.fit(method="gibbs")``, one chain (so one thread), no
  ``log_lik``): sampling time per sweep (``fit.elapsed / (warmup + draws)``).

Each fit runs ``--repeats`` times, interleaved between the models, and the
fastest is reported (a shared machine's noise only adds time).  The numba
kernels are loaded by a small fit of each model first.

Usage::

    python bench/bench_family.py --family mace [--ratings 1e6] [--em-iters 20] [--sweeps 100] [--repeats 3]
                                 [--markdown bench/RESULTS_mace.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

K = 5
RATERS_PER_ITEM = 5
SEED = 1
#: per family: its name in the tables, EM's method, and whether Dawid-Skene takes a prior raised to at least 1
FAMILIES = {
    "one_coin": ("one-coin", "ml", False),
    "mace": ("MACE", "ml", False),
    "pooled": ("pooled", "map", True),
    "community": ("community", "map", True),
}


def simulate(family: str, n_ratings: int):
    """Data from ``family`` with ``n_ratings`` ratings (the design of ``bench_em.py``)."""
    import pyrater

    I = n_ratings // RATERS_PER_ITEM
    J = int(min(5000, max(50, n_ratings // 200)))
    return pyrater.simulate(family, I, J, n_categories=K, raters_per_item=RATERS_PER_ITEM, seed=SEED)


def _model(model: str, family: str):
    """The model object; Dawid-Skene with its prior raised to at least 1 beside the pooled model (MAP exists)."""
    import pyrater
    from pyrater.models import default_beta

    if model == "dawid_skene" and FAMILIES[family][2]:
        return pyrater.DawidSkene(beta=np.maximum(default_beta(K), 1.0))
    return pyrater.get_model(model)


def em_per_iteration(data, model: str, family: str, iters: int) -> float:
    """Seconds per EM iteration (loop only) of a fit with exactly ``iters`` iterations."""
    import pyrater
    from pyrater.inference.em.convergence import EMConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        fit = pyrater.em(
            data, _model(model, family), method=FAMILIES[family][1], init="majority", acceleration="none", tol=0.0, param_tol=0.0, max_iter=iters,
            backend="numba", n_threads=1, progress=False,
        )  # fmt: skip
    assert fit.n_iter == iters, fit.n_iter
    return float(sum(fit.timings["loop"])) / fit.n_iter


def gibbs_per_sweep(data, model: str, family: str, sweeps: int) -> float:
    """Seconds per sweep of one Gibbs chain (sampling only)."""
    import pyrater

    warmup = sweeps // 10
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short chain: Rhat warnings
        fit = pyrater.fit(
            data, _model(model, family), method="gibbs", chains=1, warmup=warmup, draws=sweeps - warmup, seed=SEED,
            log_lik=False, progress=False,
        )  # fmt: skip
    return float(fit.elapsed) / sweeps


def versions() -> str:
    import numba
    import scipy

    import pyrater

    return (
        f"pyrater {pyrater.__version__}, Python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {scipy.__version__}, numba {numba.__version__}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", choices=tuple(FAMILIES), required=True)
    ap.add_argument("--ratings", type=float, default=1e6)
    ap.add_argument("--em-iters", type=int, default=20)
    ap.add_argument("--sweeps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--markdown", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    family = args.family
    title = FAMILIES[family][0]
    models = ("dawid_skene", family)
    sim = simulate(family, int(args.ratings))
    data = sim.data
    print(f"simulated {data.n_ratings:,} ratings, {data.n_units:,} items, {data.n_raters:,} raters, K = {K} "
          f"in {time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
    small = simulate(family, 20_000).data
    for model in models:  # load the numba kernels (a one-off cost per process, not timed)
        em_per_iteration(small, model, family, 2)
        gibbs_per_sweep(small, model, family, 10)

    best: dict[tuple[str, str], float] = {}
    for r in range(args.repeats):
        for model in models:
            for method, run, n in (("em", em_per_iteration, args.em_iters), ("gibbs", gibbs_per_sweep, args.sweeps)):
                s = run(data, model, family, n)
                key = (method, model)
                best[key] = min(best.get(key, np.inf), s)
                print(f"repeat {r + 1}: {method:5s} {model:12s} {1e3 * s:8.2f} ms", flush=True)

    rows = []
    for method, unit in (("em", "iteration"), ("gibbs", "sweep")):
        ds, oc = best[(method, "dawid_skene")], best[(method, family)]
        rows.append(
            f"| {method} | {unit} | {1e3 * ds:.1f} | {1e3 * oc:.1f} | {oc / ds:.2f} | {'yes' if oc <= 2 * ds else 'no'} |"
        )
    command = "python bench/bench_family.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = "\n".join(
        [
            f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared), {platform.platform()}",
            f"Versions: {versions()}",
            f"Command: `{command.strip()}`",
            f"Data: {data.n_ratings:,} ratings simulated from the {title} model, {data.n_units:,} items, "
            f"{data.n_raters:,} raters, K = {K}; fastest of {args.repeats} runs, one thread.",
            "",
            f"| method | per | Dawid-Skene ms | {title} ms | ratio | within 2x |",
            "|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
