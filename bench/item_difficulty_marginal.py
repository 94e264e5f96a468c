"""Benchmark: the marginal item-difficulty model on caries (issue 26, "a fast route").

* The accuracy of the quadrature rule: the log-likelihood of every caries
  rating pattern, per class, at rater parameters from the prior and from a
  realistic range, against a much finer rule (300 x 80 nodes, Gauss-Hermite),
  for several node counts.
* NUTS (4 chains, ``--warmup`` / ``--draws`` each) of the marginal model
  (``ItemDifficulty(item_effects="marginal")``), Dawid-Skene and the
  class-conditional model on the grouped caries data (32 patterns of 3,859
  items): wall time, divergences, max R-hat.
* The vote-count posterior predictive check (``vote_histogram``: items with
  0..5 positive votes), ``"new_items"`` design, 1,000 replicates: does the
  central 98% band (1% to 99%) cover every bin?
* PSIS-LOO comparison (``pyrater.compare``).

Usage::

    python bench/item_difficulty_marginal.py [--warmup 1000] [--draws 1000] [--out /tmp/idm]

Prints markdown tables (copied into bench/RESULTS_item_difficulty_marginal.md).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import pyrater  # noqa: E402
from pyrater import ItemDifficulty, RatingData  # noqa: E402
from pyrater.checking import vote_histogram  # noqa: E402
from pyrater.models import item_marginal  # noqa: E402
from pyrater.models.item_marginal import marginal_log_joint, quadrature_rule  # noqa: E402


def accuracy_table(data: RatingData) -> pd.DataFrame:
    """Max abs error of the patterns' per-class log-likelihood against a fine Gauss-Hermite rule."""
    pr = ItemDifficulty().priors(2, data.n_raters)
    rng = np.random.default_rng(0)
    realistic = (rng.uniform(0, 2.5, (20, 5)), rng.uniform(1.5, 4.5, (20, 5)))
    prior = (rng.normal(1, 2, (20, 5)), rng.normal(2, 2, (20, 5)))
    trap = item_marginal._trapezoid_normal_rule
    rows = []
    for label, (sens, spec) in (("realistic", realistic), ("prior draws", prior)):
        lp = np.log(np.full((sens.shape[0], 2), 0.5))
        item_marginal._trapezoid_normal_rule = lambda n, half_width=7.0: item_marginal._normal_rule(n)
        ref = marginal_log_joint(data.counts, lp, sens, spec, quadrature_rule(pr, max_ratings=5, sizes=(300, 80, 3)))
        for rule_name in ("Gauss-Hermite", "trapezoid [-7, 7]"):
            item_marginal._trapezoid_normal_rule = (
                trap if rule_name.startswith("trap") else (lambda n, half_width=7.0: item_marginal._normal_rule(n))
            )
            for nd, ns in ((21, 7), (25, 7), (29, 7), (29, 9), (33, 9), (41, 9), (51, 13)):
                r = quadrature_rule(pr, max_ratings=5, sizes=(nd, ns, 3))
                err = np.abs(marginal_log_joint(data.counts, lp, sens, spec, r) - ref)
                werr = (err * data.weight[None, :, None]).sum(axis=1).max()
                rows.append((label, rule_name, nd, ns, r.n_nodes, err.max(), werr))
    item_marginal._trapezoid_normal_rule = trap
    return pd.DataFrame(
        rows, columns=["raters", "difficulty rule", "n_difficulty", "n_log_discrimination", "Q", "max_abs_err",
                       "max_weighted_sum_err"],
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--out", default=None, help="folder to save the fits in")
    args = ap.parse_args()
    caries = RatingData.from_grouped(pyrater.datasets.caries(), tally="n")
    print(f"machine: {platform.machine()}, {platform.processor() or '?'}; python {platform.python_version()}; "
          f"pyrater {pyrater.__version__}; numpy {np.__version__}")  # fmt: skip
    if not args.skip_accuracy:
        print("\n## Quadrature accuracy\n")
        print(accuracy_table(caries).to_markdown(index=False, floatfmt=".2e"))
    models = {
        "item_difficulty (marginal)": ItemDifficulty(item_effects="marginal"),
        "dawid_skene": "dawid_skene",
        "class_conditional": "class_conditional",
    }
    kw = dict(method="mcmc", chains=args.chains, warmup=args.warmup, draws=args.draws, seed=11, engine="cmdstanpy",
              progress=False)  # fmt: skip
    fits, rows, ppc = {}, [], {}
    hist = vote_histogram(2)
    for name, model in models.items():
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = pyrater.fit(caries, model, **kw)
        wall = time.perf_counter() - t
        diag = fit.mcmc_diagnostics(warn=False)
        fits[name] = fit
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            fit.save(Path(args.out) / f"{name.split()[0]}.nc")
        res = pyrater.posterior_predictive_check(fit, hist, draws=args.replicates, seed=1, design="new_items")
        ppc[name] = res
        rows.append((name, round(wall, 1), round(float(fit.elapsed), 1), int(np.sum(fit.sample_stats["diverging"])),
                     round(float(diag.attrs["max_rhat"]), 3), int(res.covers(0.98).sum())))  # fmt: skip
        print(f"{name}: {wall:.1f} s", flush=True)
    print("\n## NUTS on caries (grouped, 32 patterns)\n")
    print(pd.DataFrame(rows, columns=["model", "wall s (fit call)", "Stan sampling s", "divergences", "max R-hat",
                                      "bins covered (of 6)"]).to_markdown(index=False))  # fmt: skip
    print("\n## Vote-count PPC, new_items design, 1%-99% band\n")
    for name, res in ppc.items():
        lo, hi = np.percentile(res.simulated, [1, 99], axis=0)
        tab = pd.DataFrame({"observed": res.observed, "1%": lo, "99%": hi, "covered": res.covers(0.98)})
        tab.index.name = "positive votes"
        print(f"\n### {name}\n")
        print(tab.to_markdown())
    print("\n## PSIS-LOO\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        print(pyrater.compare(fits).to_markdown(floatfmt=".2f"))


if __name__ == "__main__":
    main()
