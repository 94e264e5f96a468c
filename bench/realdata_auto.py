"""The data choose, on real gold-labelled crowdsourcing data: ``pyrater.fit(data, "auto")`` against each family.

For every categorical gold set in ``../shared/data`` (the sets of
``bench/realdata.py``), fit by EM (posterior mode, default priors; a family
with a pseudo-count below 1 at its mode on the log-odds scale, as "auto" does)
every family EM fits, and ``pyrater.fit(data, "auto")``, which chooses among
them by 10-fold cross-validated elpd (the simplest of the equivalent ones).
Scores on the gold items (the gold labels are never used by a fit):
accuracy, log-loss and ECE, beside majority vote.  Writes
``bench/realdata_auto.csv`` and ``bench/RESULTS_realdata_auto.md``.

Usage::

    python bench/realdata_auto.py                        # every set
    python bench/realdata_auto.py --datasets zencrowd_us bluebirds --out-dir /tmp/ra
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
import pandas as pd

import pyrater
from pyrater.checking.choose import _pick
from pyrater.checking.compare import BASELINE_NAME
from pyrater.checking.scoring import majority_vote, score

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from realdata import DEFAULT_DATA, list_datasets, load_dataset  # noqa: E402

SEED = 1


def run_one(name: str, data_dir: Path, details: Path | None = None) -> tuple[list[dict], pd.DataFrame]:
    """Score MV, every candidate family and "auto" on one set; also return auto's comparison table.

    The families' fits are the ones "auto" made (``fit.model_choice.fits``: EM, default priors, at the
    mode on the log-odds scale where a pseudo-count is below 1, seed 1), so every family is fitted once.
    """
    ds = load_dataset(name, data_dir)
    data, truth = ds.data, ds.truth
    K = data.n_categories
    rows = []
    mv = majority_vote(data)
    rows.append({"dataset": name, "K": K, "method": "MV", **score(mv.probabilities, truth), "seconds": 0.0})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        auto = pyrater.fit(data, "auto", seed=SEED, progress=False)
        seconds = time.perf_counter() - start
    choice = auto.model_choice
    for family, fit in choice.fits.items():
        rows.append({"dataset": name, "K": K, "method": family, **score(fit, truth)})
    # the reference of the targets: Dawid-Skene with rater's default prior (auto's may have another strength)
    rows.append({"dataset": name, "K": K, "method": "DS", **score(default_ds(data), truth)})
    rows.append(
        {
            "dataset": name,
            "K": K,
            "method": "auto",
            "chosen": choice.chosen,
            **score(auto, truth),
            "seconds": seconds,
            "ds_scale": choice.prior_scale.get("dawid_skene", np.nan),
        }
    )
    # the rule before held-out agreement: elpd alone (the simplest of the candidates within 4 nats of the best)
    by_elpd = _pick(choice.table.drop(columns=["labels_as_well"], errors="ignore"))
    rows.append(
        {"dataset": name, "K": K, "method": "auto_elpd", "chosen": by_elpd, **score(choice.fits[by_elpd], truth)}
    )
    table = choice.table.assign(dataset=name)
    if details is not None:  # per item, for studying other rules offline
        from pyrater.checking.agreement import held_out_agreement, vote_held_out_agreement

        arrays: dict[str, np.ndarray] = {}
        for family, fit in choice.fits.items():
            arrays[f"elpd_i/{family}"] = fit.__dict__["_kfold_result"].elpd_i.to_numpy()
            agree = held_out_agreement(fit)
            arrays[f"a_i/{family}"], arrays[f"info_i/{family}"] = agree.a_i.to_numpy(), agree.info_i.to_numpy()
            arrays[f"probs/{family}"] = fit.class_probabilities().to_numpy()
            arrays[f"table/{family}"] = agree.table
        vote = vote_held_out_agreement(data)
        arrays["a_i/MV"], arrays["info_i/MV"] = vote.a_i.to_numpy(), vote.info_i.to_numpy()
        arrays["table/MV"] = vote.table
        arrays["units"] = np.asarray(fit.class_probabilities().index.astype(str), dtype=str)
        arrays["gold_items"] = np.asarray(truth.index.astype(str), dtype=str)
        arrays["gold"] = np.asarray([list(data.categories).index(c) for c in truth.to_numpy()])
        np.savez_compressed(details / f"realdata_auto_{name}.npz", **arrays)
    return rows, table


def default_ds(data: pyrater.RatingData) -> pyrater.Fit:
    """Dawid-Skene by EM with rater's default prior, seed 1 (auto's candidate before its prior strength is tuned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyrater.fit(data, "dawid_skene", method="em", seed=SEED, progress=False)


def _markdown(table: pd.DataFrame) -> list[str]:
    head = "| dataset | " + " | ".join(table.columns) + " |"
    rule = "|---|" + "---|" * len(table.columns)
    body = [
        f"| {name} | " + " | ".join(f"{v:.3f}" if pd.notna(v) else "–" for v in row) + " |"
        for name, row in table.iterrows()
    ]
    return [head, rule, *body]


GOLD_SHARE = 0.1
GOLD_SPLITS = 5


def gold_choice(table: pd.DataFrame, arrays: dict[str, np.ndarray], share: float, splits: int) -> dict[str, float]:
    """``fit(data, "auto", gold=...)`` with a share of the gold items as the user's, from one run's saved arrays.

    The candidates' fits do not depend on ``gold`` (they are fitted without it), so the choice is the rule
    (:func:`pyrater.checking.choose.gold_columns`, then ``_pick``) applied to the saved class probabilities,
    elpd table and per-item elpd.  Scored on the other gold items, averaged over seeded splits; beside it,
    Dawid-Skene and the best candidate on the same items.
    """
    from pyrater.checking.choose import gold_columns

    models = table.drop(index=BASELINE_NAME, errors="ignore").drop(columns=["labels_as_well"], errors="ignore")
    probs = {n: arrays[f"probs/{n}"] for n in models.index}
    units = pd.Index(arrays["units"])
    pos = units.get_indexer(arrays["gold_items"])
    truth = arrays["gold"][pos >= 0]
    pos = pos[pos >= 0]
    out = {"auto_gold": 0.0, "dawid_skene": 0.0, "best": 0.0}
    for split in range(splits):
        rng = np.random.default_rng(split)
        mine = np.zeros(pos.size, dtype=bool)
        mine[rng.choice(pos.size, size=max(1, round(share * pos.size)), replace=False)] = True
        gold = np.full(units.size, -1, dtype=np.int64)
        gold[pos[mine]] = truth[mine]
        chosen = _pick(gold_columns(models, probs, gold, np.ones(units.size)))
        rest, z = pos[~mine], truth[~mine]
        acc = {n: float(np.mean(p[rest].argmax(axis=1) == z)) for n, p in probs.items()}
        out["auto_gold"] += acc[chosen] / splits
        out["dawid_skene"] += acc.get("dawid_skene", np.nan) / splits
        out["best"] += max(acc.values()) / splits
    return out


def rechoose(res: pd.DataFrame, tables: pd.DataFrame, details: list[Path]) -> pd.DataFrame:
    """Each set's ``auto`` row by the current rule on the run's saved table, plus two held-out-agreement rules.

    ``auto`` returns one of its candidates' fits, so its scores are the chosen family's row.  Rebuilt here
    from the saved comparison table (``choose._pick``, as ``fit(data, "auto")`` runs it),
    so a report made after the rule changed shows the rule of the code.  ``auto_agree``: the candidate with
    the highest held-out rater agreement; ``auto_as_well``: the candidates within twice the paired standard
    error of the best agreement, then the elpd rule (both studied, neither the default).
    """
    out = [res[~res["method"].isin(["auto", "auto_elpd", "auto_agree", "auto_as_well"])]]
    for name, tab in tables.groupby("dataset"):
        found = [d / f"realdata_auto_{name}.npz" for d in details if (d / f"realdata_auto_{name}.npz").exists()]
        if not found:
            out.append(res[(res["dataset"] == name) & res["method"].isin(["auto"])])
            continue
        with np.load(found[0]) as z:
            arrays = {k: z[k] for k in z.files}
        tab = tab.set_index("candidate").drop(columns=["labels_as_well"], errors="ignore")
        models = tab.drop(index=BASELINE_NAME, errors="ignore")
        rows = res[res["dataset"] == name].set_index("method")
        chosen = {"auto": _pick(tab)}
        if "agree_cv" in models.columns:
            chosen["auto_agree"] = str(models["agree_cv"].idxmax())
            best = chosen["auto_agree"]
            ref = arrays[f"a_i/{best}"]
            close = []
            for n in tab.index:
                d = arrays[f"a_i/{'MV' if n == BASELINE_NAME else n}"] - ref
                d = d[np.isfinite(d)]
                se = float(np.sqrt(d.size * np.var(d))) / d.size
                close.append(n != BASELINE_NAME and -float(d.mean()) <= 2.0 * se + 1e-9)
            chosen["auto_as_well"] = _pick(tab.assign(labels_as_well=close))
        for method, family in chosen.items():
            row = rows.loc[family].to_dict()
            row.update(dataset=name, method=method, chosen=family)
            if method == "auto":
                for key in ("seconds", "ds_scale"):
                    row[key] = rows.loc["auto", key] if "auto" in rows.index and key in rows.columns else np.nan
            out.append(pd.DataFrame([row]))
    return pd.concat(out, ignore_index=True)


def _versions() -> str:
    import scipy

    try:
        import numba

        nb = f", numba {numba.__version__}"
    except ImportError:  # pragma: no cover - numba is optional
        nb = ""
    return (
        f"pyrater {pyrater.__version__}, Python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {scipy.__version__}, pandas {pd.__version__}{nb}"
    )


def _published(names: list[str]) -> pd.DataFrame:
    """Published MV and DS accuracies (``realdata_published.csv``, the usable rows) of the sets, wide."""
    path = HERE / "realdata_published.csv"
    if not path.exists():
        return pd.DataFrame()
    pub = pd.read_csv(path)
    pub = pub[pub["usable"].astype(bool) & pub["dataset"].isin(names)]
    return pub.pivot_table(index="dataset", columns=["source", "method"], values="accuracy")


def report(
    res: pd.DataFrame, tables: pd.DataFrame | None, out: Path, command: str, details: list[Path] | None = None
) -> None:
    """Write ``RESULTS_realdata_auto.md`` from the per-set rows (and auto's comparison tables)."""
    acc = res.pivot(index="dataset", columns="method", values="accuracy")
    first = ["MV", "DS", "dawid_skene"]
    last = ["auto_agree", "auto_as_well", "auto"]
    cols = first + [c for c in acc.columns if c not in first + last] + [c for c in last if c in acc.columns]
    acc = acc[cols]
    chosen = res[res["method"] == "auto"].set_index("dataset")["chosen"]
    by_agree = res[res["method"] == "auto_agree"].set_index("dataset")["chosen"]
    best_mv_ds = acc[["MV", "DS"]].max(axis=1)
    means = acc.mean()
    ok = int((acc["auto"] >= best_mv_ds - 0.005 - 1e-12).sum())
    ok_agree = int((acc["auto_agree"] >= best_mv_ds - 0.005 - 1e-12).sum()) if "auto_agree" in acc else 0
    trec = acc["auto"].get("trec_relevance", float("nan"))
    n = len(acc)
    missing = [d for d in list_datasets(DEFAULT_DATA) if d not in acc.index]
    seconds = res[res["method"] == "auto"].set_index("dataset")["seconds"]
    scale = res[res["method"] == "auto"].set_index("dataset").get("ds_scale", pd.Series(dtype=float))
    lines = [
        '# The data choose: `fit(data, "auto")` on real gold-labelled data',
        "",
        f"- Machine: {platform.machine()}, {os.cpu_count()} cores shared with other jobs, {platform.platform()}",
        f"- Versions: {_versions()}",
        f"- Command: `{command}`",
        f"- Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; data from `../shared/data` (not in the "
        f"repository): the {n} categorical gold sets of `bench/realdata.py` (`snow_emotion_numeric` holds numeric "
        "scores, not categories, and is left out).",
        "- Every fit: EM posterior mode with the family's default priors (a pseudo-count below 1: the mode on the "
        "log-odds scale, as `auto` does), seed 1; the families' fits are the ones `auto` made, so the "
        "`dawid_skene` column has the prior strength auto kept (`DS strength`: the multiple of rater's default "
        "prior, docs/guide/checking.md). `DS`: Dawid-Skene with rater's default prior, the reference of the "
        "targets. The gold labels are used for scoring only.",
        '- `auto`: `pyrater.fit(data, "auto", seed=1)`: the simplest of the candidates whose 10-fold elpd is within '
        "4 nats of the best (docs/guide/checking.md; until 2026-12-06, within twice the standard error of the "
        "difference, which chose item difficulty on snow_rte and class-conditional on zencrowd_us), recomputed "
        "from each run's saved table by `choose._pick` (the rule of the code; the fits do not depend on it). "
        "Two rules studied and not "
        "adopted, from the same tables: `auto_agree`, the candidate with the highest held-out rater agreement; "
        "`auto_as_well`, the candidates within twice the paired standard error of the best agreement, then the "
        "elpd rule.",
        "",
        "## Targets (issue 25, item 6)",
        "",
        *(
            [
                f"Not measured (the run did not reach them before the deadline): {', '.join(missing)}. The means "
                f"below are over the {n} sets measured, so they are not comparable with means over all sets.",
                "",
            ]
            if missing
            else []
        ),
        "| target | measured | met |",
        "|---|---|---|",
        f"| mean accuracy >= 0.815 (crowd-kit's best single method, DS, 0.807) | {means['auto']:.3f} "
        f"(highest agreement {means.get('auto_agree', float('nan')):.3f}, DS {means['DS']:.3f}, "
        f"MV {means['MV']:.3f}) "
        f"| {'yes' if means['auto'] >= 0.815 else 'no'} |",
        f"| at least max(MV, DS) - 0.005 on 15 or more sets | {ok} of {n} (highest agreement {ok_agree}) | "
        f"{'yes' if ok >= 15 else 'no'} |",
        f"| trec_relevance >= 0.62 (published DS 0.613) | {trec:.3f} | {'yes' if trec >= 0.62 else 'no'} |",
        "",
        "## Accuracy on the gold items",
        "",
        "| dataset | K | " + " | ".join(cols) + " | auto chose | DS strength | highest agreement | auto s |",
        "|---|---|" + "---|" * len(cols) + "---|---|---|---|",
    ]
    Ks = res.groupby("dataset")["K"].first()
    for name, row in acc.iterrows():
        cells = [f"{row[c]:.3f}" if pd.notna(row[c]) else "–" for c in cols]
        lines.append(
            f"| {name} | {Ks[name]} | " + " | ".join(cells) + f" | {chosen.get(name, '')} | "
            f"{'x' + format(scale[name], 'g') if pd.notna(scale.get(name)) else '–'} | "
            f"{by_agree.get(name, '')} | {seconds.get(name, float('nan')):.0f} |"
        )
    lines.append("| **mean** | | " + " | ".join(f"**{means[c]:.3f}**" for c in cols) + " | | | | |")
    partial = {c: int(acc[c].notna().sum()) for c in cols if acc[c].notna().sum() < len(acc)}
    if partial:
        shown = "; ".join(f"`{c}` over its {n} sets" for c, n in partial.items())
        same = {c: float(acc.loc[acc[c].notna(), "dawid_skene"].mean()) for c in partial if "dawid_skene" in acc}
        lines += [
            "",
            "A family fitted to some of the sets only (the ordinal family needs K >= 3; auto tries the "
            "item-difficulty family by EM on binary data only) has its mean over those sets: "
            + shown
            + (
                " (`dawid_skene` on the same sets: " + "; ".join(f"{same[c]:.3f} beside `{c}`" for c in same) + ")."
                if same
                else "."
            ),
        ]
    pub = _published(list(acc.index))
    if not pub.empty:
        lines += [
            "",
            "## Beside the published figures",
            "",
            "Published accuracies of majority vote and Dawid-Skene where `bench/realdata_published.csv` has them "
            "(Zheng et al. 2017; crowd-kit's documentation, 2024); on all 19 sets the issue reports crowd-kit 1.4.2 "
            "with its defaults: DS mean 0.807, the best of its eight methods per set 0.824, its one-coin DS 0.904 "
            "on zencrowd_us.",
            "",
            "| dataset | " + " | ".join(f"{s} {m}" for s, m in pub.columns) + " | ours MV | ours DS | ours auto |",
            "|---|" + "---|" * (len(pub.columns) + 3),
        ]
        for name, row in pub.iterrows():
            cells = [f"{v:.3f}" if pd.notna(v) else "–" for v in row]
            lines.append(
                f"| {name} | " + " | ".join(cells) + f" | {acc.loc[name, 'MV']:.3f} | "
                f"{acc.loc[name, 'DS']:.3f} | {acc.loc[name, 'auto']:.3f} |"
            )
    if details and tables is not None:
        gold_rows = {}
        for name in acc.index:
            found = [d / f"realdata_auto_{name}.npz" for d in details if (d / f"realdata_auto_{name}.npz").exists()]
            if found:
                with np.load(found[0]) as z:
                    arrays = {k: z[k] for k in z.files}
                tab = tables[tables["dataset"] == name].set_index("candidate")
                gold_rows[name] = gold_choice(tab, arrays, GOLD_SHARE, GOLD_SPLITS)
        if gold_rows:
            g = pd.DataFrame(gold_rows).T
            lines += [
                "",
                f'## With gold items: `fit(data, "auto", gold=...)` on {GOLD_SHARE:.0%} of them',
                "",
                f"{GOLD_SHARE:.0%} of each set's gold items (random, {GOLD_SPLITS} seeded splits) passed as `gold=`; "
                "accuracy on the other gold items, averaged over the splits, beside Dawid-Skene and the best "
                "candidate on the same items. Computed from this run's saved fits (the candidates are fitted "
                "without `gold`, so only the rule runs again: `choose.gold_columns` and `choose._pick`).",
                "",
            ]
            lines += _markdown(g.rename(columns={"best": "best candidate (oracle)"}))
            lines.append("| **mean** | " + " | ".join(f"**{v:.3f}**" for v in g.mean()) + " |")
    lines += ["", "## Log-loss on the gold items", ""]
    lines += _markdown(res.pivot(index="dataset", columns="method", values="log_loss")[cols])
    lines += ["", "## ECE on the gold items (15 bins, top label)", ""]
    lines += _markdown(res.pivot(index="dataset", columns="method", values="ece")[cols])
    if tables is not None and "agree_cv" in tables.columns:
        lines += ["", "## Held-out rater agreement and elpd of each candidate (auto's table)", ""]
        agree = tables.pivot_table(index="dataset", columns="candidate", values="agree_cv")
        lines += _markdown(agree)
        if "info_cv" in tables.columns:
            lines += ["", "Held-out information (nats per rating; `info_cv`):", ""]
            lines += _markdown(tables.pivot_table(index="dataset", columns="candidate", values="info_cv"))
    (out / "RESULTS_realdata_auto.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="*", default=None)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out-dir", type=Path, default=HERE)
    ap.add_argument("--details", type=Path, default=None, help="a folder for per-item arrays (npz) of every set")
    ap.add_argument(
        "--report-only",
        nargs="*",
        type=Path,
        default=None,
        metavar="DIR",
        help="rebuild the report in --out-dir from the CSVs of earlier runs in these folders (default: --out-dir)",
    )
    args = ap.parse_args(argv)
    command = "python bench/realdata_auto.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.report_only is not None:
        dirs = [d for d in (args.report_only or [args.out_dir]) if (d / "realdata_auto.csv").exists()]
        res = pd.concat([pd.read_csv(d / "realdata_auto.csv") for d in dirs], ignore_index=True)
        res = res.drop_duplicates(["dataset", "method"])  # a set run twice: its first run
        tabs = pd.concat([pd.read_csv(d / "realdata_auto_tables.csv") for d in dirs], ignore_index=True)
        tabs = tabs.drop_duplicates(["dataset", "candidate"])
        res.to_csv(args.out_dir / "realdata_auto.csv", index=False)
        tabs.to_csv(args.out_dir / "realdata_auto_tables.csv", index=False)
        res = rechoose(res, tabs, dirs)
        res.to_csv(args.out_dir / "realdata_auto.csv", index=False)
        report(res, tabs, args.out_dir, command, dirs)
        return 0
    names = args.datasets or list_datasets(args.data_dir)
    if not names:
        print(f"no gold data sets under {args.data_dir}; nothing to do", file=sys.stderr)
        return 0
    rows: list[dict] = []
    tables: list[pd.DataFrame] = []
    for name in names:
        start = time.perf_counter()
        new_rows, table = run_one(name, args.data_dir, args.details)
        rows += new_rows
        tables.append(table)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        pd.DataFrame(rows).to_csv(args.out_dir / "realdata_auto.csv", index=False)
        pd.concat(tables).rename_axis("candidate").to_csv(args.out_dir / "realdata_auto_tables.csv")
    tabs = pd.concat(tables).rename_axis("candidate").reset_index()
    report(pd.DataFrame(rows), tabs, args.out_dir, command, [args.details] if args.details else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
