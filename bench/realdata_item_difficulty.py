"""The item-difficulty family against Dawid-Skene on real gold-labelled data, chosen by 10-fold elpd.

For every categorical gold set in ``../shared/data`` (the sets of
``bench/realdata.py``), ``pyrater.fit(data, "auto", method="em",
candidates=["dawid_skene", "item_difficulty"])``: both families by EM
(posterior mode, default priors; the item-difficulty model is the 3PL, at
K >= 3 its GLAD-type form with errors spread evenly), compared by 10-fold
cross-validated elpd over items, a held-out item's own parameters integrated
out over their prior.  Reports each family's accuracy on the gold items (the
gold labels are never used by a fit), both elpds, their paired standard
error, the effective numbers of parameters and the family "auto" chose.
Writes ``realdata_item_difficulty.csv`` and ``RESULTS_realdata_item_difficulty.md``
in ``--out-dir`` (default ``bench/``).

Usage::

    python bench/realdata_item_difficulty.py
    python bench/realdata_item_difficulty.py --datasets snow_rte zencrowd_us --out-dir /tmp/rid
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

import pyrater

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from realdata import DEFAULT_DATA, list_datasets, load_dataset  # noqa: E402

SEED = 1
CANDIDATES = ["dawid_skene", "item_difficulty"]


def run_one(name: str, data_dir: Path) -> dict:
    """Fit both families, compare them by 10-fold elpd, score their labels on the gold items."""
    ds = load_dataset(name, data_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        auto = pyrater.fit(ds.data, "auto", method="em", candidates=CANDIDATES, seed=SEED, progress=False)
        seconds = time.perf_counter() - start
    choice = auto.model_choice
    table = choice.table
    truth = ds.truth
    row: dict = {"dataset": name, "K": ds.data.n_categories, "ratings": ds.data.n_ratings, "gold": truth.size}
    for family, fit in choice.fits.items():
        z = fit.class_probabilities().idxmax(axis=1)
        row[f"acc_{family}"] = float(np.mean(z[truth.index].astype(str).to_numpy() == truth.astype(str).to_numpy()))
        row[f"elpd_{family}"] = float(table.loc[family, "elpd_loo"])
        row[f"p_{family}"] = float(table.loc[family, "p_loo"])
    pointwise = {n: f.__dict__["_kfold_result"].elpd_i.to_numpy() for n, f in choice.fits.items()}
    d = pointwise["item_difficulty"] - pointwise["dawid_skene"]
    row["elpd_diff"] = float(d.sum())
    row["dse"] = float(np.sqrt(d.size * np.var(d)))
    row["chosen"] = choice.chosen
    row["seconds"] = round(seconds, 1)
    return row


def write_report(res: pd.DataFrame, out_dir: Path, command: str) -> Path:
    lines = [
        "# The item-difficulty family on real data: labels and 10-fold elpd against Dawid-Skene",
        "",
        f"- Machine: {platform.machine()}, 2 cores shared with other jobs, {platform.platform()}",
        f"- Versions: pyrater {pyrater.__version__}, Python {platform.python_version()}, numpy {np.__version__}, "
        f"pandas {pd.__version__}",
        f"- Command: `{command}`",
        '- Every fit: EM posterior mode, default priors, seed 1 (`pyrater.fit(data, "auto", method="em", '
        'candidates=["dawid_skene", "item_difficulty"])`); the item-difficulty model is the 3PL, at K >= 3 its '
        "GLAD-type form (errors spread evenly over the other categories). elpd: 10-fold cross-validation over "
        "items on one seeded split, a held-out item's own parameters integrated out over their prior "
        "(`pyrater.kfold`); `diff` = item difficulty minus Dawid-Skene, `dse` its paired standard error; "
        "`chosen`: the rule of `auto` (the simplest of the candidates not separated from the best). Gold labels "
        "score only.",
        "",
        "| dataset | K | ratings | gold | acc DS | acc ID | elpd DS | elpd ID | diff | dse | p DS | p ID | chosen |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res.itertuples():
        lines.append(
            f"| {r.dataset} | {r.K} | {r.ratings} | {r.gold} | {r.acc_dawid_skene:.3f} | {r.acc_item_difficulty:.3f} "
            f"| {r.elpd_dawid_skene:.1f} | {r.elpd_item_difficulty:.1f} | {r.elpd_diff:+.1f} | {r.dse:.1f} "
            f"| {r.p_dawid_skene:.0f} | {r.p_item_difficulty:.0f} | {r.chosen} |"
        )
    binary = res[res.K == 2]
    multi = res[res.K > 2]
    lines += [
        "",
        f"- Binary sets: item difficulty predicts held-out items better on {int((binary.elpd_diff > 0).sum())} of "
        f"{len(binary)}; mean accuracy DS {binary.acc_dawid_skene.mean():.3f}, item difficulty "
        f"{binary.acc_item_difficulty.mean():.3f}; chosen on {int((binary.chosen == 'item_difficulty').sum())}.",
    ]
    if len(multi):
        lines.append(
            f"- K >= 3: item difficulty predicts better on {int((multi.elpd_diff > 0).sum())} of {len(multi)}; "
            f"mean accuracy DS {multi.acc_dawid_skene.mean():.3f}, item difficulty "
            f"{multi.acc_item_difficulty.mean():.3f}; chosen on {int((multi.chosen == 'item_difficulty').sum())}."
        )
    path = out_dir / "RESULTS_realdata_item_difficulty.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out-dir", type=Path, default=HERE)
    args = ap.parse_args(argv)
    names = args.datasets or list_datasets(args.data_dir)
    if not names:
        print(f"no gold-labelled data sets under {args.data_dir}: nothing to do")
        return 0
    rows = []
    for name in names:
        rows.append(run_one(name, args.data_dir))
        print(rows[-1], flush=True)
    res = pd.DataFrame(rows)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    res.to_csv(args.out_dir / "realdata_item_difficulty.csv", index=False)
    command = "python bench/realdata_item_difficulty.py" + (" " + " ".join(argv) if argv else "")
    print(write_report(res, args.out_dir, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
