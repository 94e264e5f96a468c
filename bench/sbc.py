"""Simulation-based calibration of every model family by each of its sampling methods.

For each family (and the ordinal model with lapses) and each method that samples (Gibbs where native, NUTS in Stan),
``pyrater.sbc`` draws ``--sims`` data sets from the family's prior (small data:
40 items, 5 raters rating every item, K = 2, or 3 for the ordinal model; 30 items
and 4 raters for NUTS), fits each, and ranks the true parameters among 99 posterior
draws.  The table reports, per run, the number of quantities ranked, the smallest
chi-square p-value of uniform ranks (20 or 10 bins), its Bonferroni-adjusted value,
whether the run passes at family-wise level 0.01, the mean number of warnings per fit,
and the wall time.  Rank histograms of the least uniform quantities are saved as PNG
with ``--plots DIR``.

Usage::

    python bench/sbc.py [--sims 200] [--families ...] [--methods gibbs mcmc]
                        [--engine cmdstanpy] [--seed 2026] [--markdown out.md] [--plots DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

import pyrater
from pyrater.models import Ordinal
from pyrater.models.registry import get_model, model_names

#: variants of a family checked beside the defaults
VARIANTS = {"ordinal_lapse": Ordinal(lapse=True)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=200)
    ap.add_argument("--families", nargs="*", default=None)
    ap.add_argument("--methods", nargs="*", default=["gibbs", "mcmc"])
    ap.add_argument("--engine", default=None, help="Stan engine for mcmc (default: pyrater's choice)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--plots", default=None, help="a folder for the rank histograms")
    args = ap.parse_args(argv)
    families = args.families or [*model_names(), *VARIANTS]
    info = {
        "python": platform.python_version(),
        "pyrater": pyrater.__version__,
        "numpy": np.__version__,
        "load_average_at_start": os.getloadavg(),
    }
    print(json.dumps(info), flush=True)
    rows = []
    for name in families:
        spec = VARIANTS.get(name) or get_model(name)
        for method in args.methods:
            if method not in type(spec).methods:
                continue
            design = {"n_items": 40, "n_raters": 5} if method == "gibbs" else {"n_items": 30, "n_raters": 4}
            t0 = time.perf_counter()
            result = pyrater.sbc(
                spec,
                method,
                n_sims=args.sims,
                engine=args.engine if method != "gibbs" else None,
                seed=args.seed,
                progress=False,
                **design,
            )
            elapsed = time.perf_counter() - t0
            u = result.uniformity()
            row = {
                "family": name,
                "method": method,
                "sims": result.n_sims,
                "items": design["n_items"],
                "raters": design["n_raters"],
                "K": result.settings["n_categories"],
                "quantities": int(result.ranks.shape[1]),
                "bins": int(result.counts().shape[0]),
                "min_p": float(u["p_value"].iloc[0]),
                "at": str(u.index[0]),
                "min_p_bonferroni": float(u["p_bonferroni"].iloc[0]),
                "passed": result.passed(),
                "warnings_per_fit": float(result.problems.mean()),
                "seconds": elapsed,
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.plots:
                os.makedirs(args.plots, exist_ok=True)
                fig = result.plot(max_panels=8)
                fig.savefig(os.path.join(args.plots, f"sbc_{name}_{method}.png"), dpi=80)
    info["load_average_at_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"info": info, "rows": rows}, fh, indent=1)
    if args.markdown:
        lines = [
            "| family | method | sims | items x raters, K | quantities | smallest p (at) | Bonferroni p | passes at 0.01 | warnings / fit | s |",
            "|---|---|---:|---|---:|---|---:|---|---:|---:|",
        ]
        for r in rows:
            lines.append(
                f"| {r['family']} | {r['method']} | {r['sims']} | {r['items']} x {r['raters']}, {r['K']} | "
                f"{r['quantities']} | {r['min_p']:.3g} ({r['at']}) | {r['min_p_bonferroni']:.3g} | "
                f"{'yes' if r['passed'] else '**no**'} | {r['warnings_per_fit']:.2f} | {r['seconds']:.0f} |"
            )
        with open(args.markdown, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
