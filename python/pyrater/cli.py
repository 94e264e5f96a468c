"""Command line: ``pyrater fit``, ``pyrater compare``, ``pyrater demo``.

``pyrater fit RATINGS.csv --format long --model dawid_skene --method em --out DIR``
reads a CSV, fits, writes ``parameters.csv`` (pi and theta), ``class_probabilities.csv``
(one row per item), ``summary.txt`` and the plots (``raters.png``,
``class_probabilities.png``, ``prevalence.png``, and ``trace.png`` for MCMC)
into ``DIR`` and prints the summary.
``pyrater compare RATINGS.csv --models dawid_skene class_conditional`` fits each
model by MCMC and prints the PSIS-LOO comparison table.
``pyrater demo --out DIR`` does the same on the built-in example
(:func:`pyrater.datasets.example_ratings`), the README's main command.

Errors in the input are reported with the file's line number and the column,
and the exit status is 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Sequence

import pandas as pd

from .data import RatingData, RatingDataError, as_rating_data
from .models import MODEL_NAMES

__all__ = ["main"]


def _read_csv(path: Path, data_format: str, args: argparse.Namespace) -> RatingData:
    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise RatingDataError(f"file not found: {path}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise RatingDataError(f"{path}: cannot read as CSV: {exc}") from None
    # index rows by their line in the file (header is line 1) so messages point at lines
    df.index = pd.RangeIndex(2, len(df) + 2, name="line")
    options: dict = {}
    if args.categories:
        options["categories"] = _parse_categories(args.categories, df, data_format)
    if data_format == "grouped":
        options["tally"] = args.tally
    if data_format == "wide" and "item" in df.columns:
        options["item"] = "item"
    try:
        return as_rating_data(df, data_format, **options)
    except RatingDataError as exc:
        raise RatingDataError(f"{path} (row numbers are lines of the file): {exc}") from None


def _parse_categories(text: str, df: pd.DataFrame, data_format: str) -> list:
    labels = [c.strip() for c in text.split(",") if c.strip()]
    # keep integers as integers when the file's ratings are integers
    if all(lab.lstrip("-").isdigit() for lab in labels):
        return [int(lab) for lab in labels]
    return labels


def _write_outputs(fit, out: Path, quiet: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import plots

    out.mkdir(parents=True, exist_ok=True)
    summary = fit.summary()
    written = [out / "parameters.csv", out / "class_probabilities.csv", out / "summary.txt"]
    summary.parameters.to_csv(written[0])
    fit.class_probabilities().join(fit.point_estimate("z")).to_csv(written[1])
    written[2].write_text(str(summary) + "\n")
    figures = {
        "raters.png": plots.plot_raters(fit),
        "class_probabilities.png": plots.plot_class_probabilities(fit),
        "prevalence.png": plots.plot_prevalence(fit),
    }
    if fit.has_draws:
        figures["trace.png"] = plots.plot_trace(fit, var_names=["pi"])
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=100, bbox_inches="tight")
        plt.close(fig)
        written.append(out / name)
    if not quiet:
        print(summary)
    print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)


def _fit(data: RatingData, args: argparse.Namespace):
    from .fitting import fit

    kwargs = {"seed": args.seed}
    if args.method in ("mcmc", "gibbs"):
        kwargs.update(chains=args.chains, draws=args.draws, warmup=args.warmup or args.draws)
    return fit(data, args.model, method=args.method, **kwargs)


def _cmd_fit(args: argparse.Namespace) -> int:
    data = _read_csv(Path(args.ratings), args.format, args)
    print(f"read {data}", file=sys.stderr)
    start = time.perf_counter()
    result = _fit(data, args)
    print(f"fitted in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    _write_outputs(result, Path(args.out), args.quiet)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from .compare import compare
    from .fitting import fit

    data = _read_csv(Path(args.ratings), args.format, args)
    print(f"read {data}", file=sys.stderr)
    fits = {}
    for name in tqdm(args.models, desc="fitting models", unit="model", file=sys.stderr):
        fits[name] = fit(
            data, name, method="mcmc", chains=args.chains, draws=args.draws,
            warmup=args.warmup or args.draws, seed=args.seed, progress=False,
        )
    table = compare(fits)
    with pd.option_context("display.width", 120):
        print(table.round(3).to_string())
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .datasets import EXAMPLE_CATEGORIES, example_ratings

    df = example_ratings()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "example_ratings.csv", index=False)
    data = RatingData.from_long(df, categories=EXAMPLE_CATEGORIES)
    print(f"built-in example: {data}", file=sys.stderr)
    start = time.perf_counter()
    result = _fit(data, args)
    print(f"fitted {args.model} by {args.method} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    _write_outputs(result, out, args.quiet)
    return 0


def _add_fit_options(p: argparse.ArgumentParser, default_method: str) -> None:
    p.add_argument("--model", choices=MODEL_NAMES, default="dawid_skene")
    p.add_argument("--method", choices=("mcmc", "optimize", "em", "gibbs"), default=default_method,
                   help="gibbs: blocked Gibbs sampler in numba (not hierarchical), for large data")
    p.add_argument("--out", default="pyrater-out", help="output folder (created)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--draws", type=int, default=1000, help="draws per chain after warmup")
    p.add_argument("--warmup", type=int, default=None, help="warmup per chain (default: = draws)")
    p.add_argument("--quiet", action="store_true", help="do not print the summary")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyrater", description="Bayesian and EM analysis of repeated categorical ratings.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fit", help="fit a model to a CSV of ratings")
    p.add_argument("ratings", help="CSV file")
    p.add_argument("--format", choices=("long", "wide", "grouped"), default="long")
    p.add_argument("--tally", default="n", help="tally column of grouped data (default n)")
    p.add_argument("--categories", default=None, help="comma-separated category scale, e.g. 1,2,3,4")
    _add_fit_options(p, "mcmc")
    p.set_defaults(func=_cmd_fit)
    c = sub.add_parser("compare", help="compare models by PSIS-LOO (MCMC fits)")
    c.add_argument("ratings", help="CSV file")
    c.add_argument("--format", choices=("long", "wide", "grouped"), default="long")
    c.add_argument("--tally", default="n", help="tally column of grouped data (default n)")
    c.add_argument("--categories", default=None, help="comma-separated category scale, e.g. 1,2,3,4")
    c.add_argument("--models", nargs="+", choices=MODEL_NAMES, default=["dawid_skene", "class_conditional"])
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--chains", type=int, default=4)
    c.add_argument("--draws", type=int, default=1000)
    c.add_argument("--warmup", type=int, default=None)
    c.set_defaults(func=_cmd_compare)
    d = sub.add_parser("demo", help="fit the built-in example end to end")
    _add_fit_options(d, "mcmc")
    d.set_defaults(func=_cmd_demo, out="pyrater-demo")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except RatingDataError as exc:
        print(f"pyrater: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"pyrater: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
