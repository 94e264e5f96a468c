"""Command line: ``pyrater fit``, ``pyrater compare``, ``pyrater demo``.

``pyrater fit RATINGS.csv --format long --model dawid_skene --method em --out DIR``
reads a CSV, fits, writes ``parameters.csv`` (pi and theta), ``class_probabilities.csv``
(one row per item; for grouped data one row per rating pattern, with the
pattern's ratings and tally), ``raters.csv`` (accuracy and diagonal of each
rater's error matrix), ``summary.txt`` (the full report) and the plots
(``raters.png``, ``class_probabilities.png``, ``prevalence.png``, and
``trace.png`` for MCMC; with more than 24 raters ``raters.png`` summarises
every rater's accuracy and ``raters_least_accurate.png`` shows the error
matrices of the 12 least accurate) into ``DIR`` and prints a short summary (pi, the
raters -- only the least and most accurate when there are many -- and where
the full tables were written).  ``--ml`` (or ``--method em-ml``) fits by
maximum likelihood (EM); ``--alpha``, ``--beta-diag``, ``--beta-off`` or
``--priors FILE.json`` set the priors; ``--known FILE`` gives items of known
class.  ``pyrater fit --help`` lists every option.
``pyrater compare RATINGS.csv --models dawid_skene class_conditional`` fits each
model by MCMC and prints the PSIS-LOO comparison table.
``pyrater demo --out DIR`` does the same as ``fit`` on the built-in example
(:func:`pyrater.datasets.example_ratings`), the README's main command.

Column names of long data are ``item,rater,rating`` unless ``--item``,
``--rater`` and ``--rating`` name others (``--item`` also names the item
column of a wide table); ``--normalize-labels`` merges ratings that differ
only in whitespace, case or Unicode normalisation.  ``--max-memory-gib``
sets the memory budget that draws, replicates and the like are checked
against before any work (default 1 GiB).

Errors are one line on stderr: input errors (with the file's line number
and the column) exit with status 2, anything else with status 1; ``--debug``
shows the full traceback.  Advice in an error names the command line's
flags (``--thin``, ``--draws``, ``--max-memory-gib`` ...) next to the
Python argument names.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import re
import sys
import time
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from ._validation import MemoryLimitError
from .data.ratings import DataFormat, RatingData, RatingDataError, as_rating_data
from .fitting import METHOD_ARGUMENTS, METHODS, Method
from .models import MODEL_NAMES, get_model

# the CLI's methods: pyrater.fit's, plus maximum likelihood by EM
CLI_METHODS = (*METHODS, "em-ml")
ENGINES = ("auto", "cmdstanpy", "pystan")
# terminal summary: all raters up to this many, else the least and the most accurate few
SHORT_RATERS = 12
SHOWN_RATERS = 5


class CLIError(ValueError):
    """A problem with the command line's arguments or files (exit status 2)."""


__all__ = ["main"]


#: Separators a file may use instead of commas, named for the message.
_OTHER_SEPARATORS = (("\t", "tab"), (";", "semicolon"), ("|", "vertical-bar"))


def _read_table(path: Path, flag: str, holds: str) -> pd.DataFrame:
    """Read the comma-separated file given to ``flag`` (``holds``: what it should contain), one clear error per failure.

    Raises CLIError for a directory, a missing or unreadable file, a file
    that is not CSV, and a file that is separated by tabs (or semicolons,
    or vertical bars) instead of commas.
    """
    where = f"{flag} {path}" if flag else str(path)
    if path.is_dir():
        raise CLIError(f"{where} is a directory; give a CSV file of {holds}")
    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise CLIError(f"{flag + ': ' if flag else ''}file not found: {path}") from None
    except PermissionError:
        raise CLIError(f"{where}: permission denied") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise CLIError(f"{where}: cannot read as CSV ({holds}): {exc}") from None
    if df.shape[1] == 1:
        header = str(df.columns[0])
        for sep, name in _OTHER_SEPARATORS:
            if sep in header:
                raise CLIError(
                    f"{where}: the file looks {name}-separated (header {header!r}); pyrater reads "
                    f"comma-separated CSV of {holds}"
                )
    return df


def _read_csv(path: Path, data_format: DataFormat, args: argparse.Namespace) -> RatingData:
    df = _read_table(path, "", "ratings")
    # index rows by their line in the file (header is line 1) so messages point at lines
    df.index = pd.RangeIndex(2, len(df) + 2, name="line")
    options: dict = {}
    if args.categories:
        options["categories"] = _parse_categories(args.categories, df, data_format)
    if data_format == "grouped":
        options["tally"] = args.tally
    if data_format == "long":
        for role in ("item", "rater", "rating"):
            if getattr(args, role, None) is not None:
                options[role] = getattr(args, role)
    if data_format == "wide":
        if args.item is not None:
            options["item"] = args.item
        elif "item" in df.columns:
            options["item"] = "item"
    if getattr(args, "normalize_labels", False):
        options["normalize_labels"] = True
    try:
        return as_rating_data(df, data_format, **options)
    except RatingDataError as exc:
        raise RatingDataError(f"{path} (row numbers are lines of the file): {exc}") from None


def _check_column_options(args: argparse.Namespace) -> None:
    """--rater and --rating name columns of long data, --item those of long and wide data: say so before reading."""
    given = [f"--{role}" for role in ("rater", "rating") if getattr(args, role, None) is not None]
    if given and args.format != "long":
        raise CLIError(
            f"{' and '.join(given)} name{'s' if len(given) == 1 else ''} a column of long data (--format long); "
            f"a {args.format} table has one column per rater"
        )
    if getattr(args, "item", None) is not None and args.format == "grouped":
        raise CLIError("--item names the item column of long or wide data; a grouped table has no item column")


def _memory_options(args: argparse.Namespace, method: str) -> dict[str, Any]:
    """``max_memory_gib`` for pyrater.fit when --max-memory-gib was given (and the method takes it)."""
    value = getattr(args, "max_memory_gib", None)
    if value is None:
        return {}
    users = METHOD_ARGUMENTS.get("max_memory_gib", ((), None))[0]
    if method not in users:
        raise CLIError(f"--max-memory-gib applies to --method {', '.join(users) or '(none)'}; got --method {method}")
    return {"max_memory_gib": value}


def _parse_categories(text: str, df: pd.DataFrame, data_format: str) -> list:
    labels = [c.strip() for c in text.split(",") if c.strip()]
    # keep integers as integers when the file's ratings are integers
    if all(lab.lstrip("-").isdigit() for lab in labels):
        return [int(lab) for lab in labels]
    return labels


def _check_out(out: Path) -> None:
    """Refuse an output folder that exists as a file, before any fitting."""
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} exists and is not a folder; give a folder (created if missing)")


def _rater_table(fit, prob: float = 0.9) -> pd.DataFrame:
    """Per rater: ratings, expected accuracy ``sum_k pi_k theta[j, k, k]`` and the diagonal of theta.

    For fits with draws, the accuracy gets a central ``prob`` interval.
    """
    data = fit.data
    K = data.n_categories
    diag = np.arange(K)
    pi, theta = fit.point_estimate("pi").to_numpy(), fit.point_estimate("theta").to_numpy()
    table = pd.DataFrame(index=pd.Index(data.rater_labels, name="rater"))
    table["ratings"] = np.bincount(data.rater, weights=data.weight[data.unit], minlength=data.n_raters).astype(int)
    table["accuracy"] = theta[:, diag, diag] @ pi
    if fit.has_draws:
        pi_s, theta_s = fit._draws()
        acc = np.einsum("sjk,sk->sj", theta_s[:, :, diag, diag], pi_s)
        table[f"accuracy {100 * (1 - prob) / 2:g}%"] = np.quantile(acc, (1 - prob) / 2, axis=0)
        table[f"accuracy {100 * (1 + prob) / 2:g}%"] = np.quantile(acc, (1 + prob) / 2, axis=0)
    for k, cat in enumerate(data.categories):
        table[f"theta[{cat}, {cat}]"] = theta[:, k, k]
    return table


def _class_table(fit) -> pd.DataFrame:
    """Class probabilities and the most probable class; for grouped data with the rating pattern."""
    probs = fit.class_probabilities().join(fit.point_estimate("z"))
    data = fit.data
    if not data.is_grouped:
        return probs
    pattern = data._table_frame(data._code_table())  # one row per pattern: its ratings
    pattern.columns = [str(c) for c in data.rater_labels]
    tally = str(data._columns.get("tally", "n"))
    pattern[tally] = data.weight
    names = [str(c) for c in probs.columns]
    if set(names) & set(pattern.columns):  # rater labels that look like category labels
        probs.columns = [f"P({c})" if c != "z" else c for c in names]
    pattern.index = probs.index
    return pattern.join(probs)


def _short_summary(fit, summary, rater_table: pd.DataFrame, written: list[Path]) -> str:
    """What the terminal shows: header, method details, pi, the raters (or the extremes), the files."""
    lines = [f"{summary.model} fitted by {summary.method}"]
    lines += [f"  {key}: {value}" for key, value in summary.info.items()]
    data = fit.data
    lines.append(f"Data: {data.n_items} items, {data.n_raters} raters, {data.n_categories} categories")
    pi_rows = summary.parameters.iloc[: data.n_categories]
    with pd.option_context("display.width", 120):
        lines += ["Prevalence pi:", pi_rows.round(3).to_string()]
        table = rater_table.round(3)
        if len(table) <= SHORT_RATERS:
            lines += ["Raters (accuracy = sum_k pi_k theta[k, k]):", table.to_string()]
        else:
            order = table.sort_values("accuracy", kind="stable")
            lines += [
                f"Raters: {len(table)}; the {SHOWN_RATERS} least accurate (accuracy = sum_k pi_k theta[k, k]):",
                order.head(SHOWN_RATERS).to_string(),
                f"the {SHOWN_RATERS} most accurate:",
                order.tail(SHOWN_RATERS).iloc[::-1].to_string(),
            ]
    z = fit.point_estimate("z")
    counts = pd.Series(
        np.bincount(
            pd.Index(data.categories).get_indexer(z.to_numpy()), weights=data.weight, minlength=data.n_categories
        ).astype(int),
        index=list(data.categories),
    )
    lines.append("Items per most probable class: " + ", ".join(f"{k}: {v}" for k, v in counts.items()))
    lines.append("Full tables: " + ", ".join(str(p) for p in written if p.suffix in (".csv", ".txt")))
    return "\n".join(lines)


def _write_outputs(fit, out: Path, quiet: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .checking import plots

    out.mkdir(parents=True, exist_ok=True)
    summary = fit.summary()
    rater_table = _rater_table(fit)
    written = [out / "parameters.csv", out / "class_probabilities.csv", out / "raters.csv", out / "summary.txt"]
    summary.parameters.to_csv(written[0])
    _class_table(fit).to_csv(written[1])
    rater_table.to_csv(written[2])
    written[3].write_text(summary.to_string(full=True) + "\n")
    if fit.model_choice is not None:  # --model auto: the comparison that chose the model
        fit.model_choice.table.to_csv(out / "comparison.csv", index_label="model")
        written.append(out / "comparison.csv")
    figures = {
        "raters.png": plots.plot_raters(fit),
        "class_probabilities.png": plots.plot_class_probabilities(fit),
        "prevalence.png": plots.plot_prevalence(fit),
    }
    if fit.data.n_raters > plots.MAX_RATER_PANELS:
        # raters.png summarises every rater; the error matrices of the least accurate on a page of their own
        worst = rater_table["accuracy"].sort_values(kind="stable").index[: plots.MAX_RATER_PANELS // 2]
        figures["raters_least_accurate.png"] = plots.plot_raters(fit, raters=list(worst))
    if fit.has_draws:
        figures["trace.png"] = plots.plot_trace(fit, var_names=["pi"])
    for name, fig in figures.items():
        fig.savefig(out / name, dpi=100, bbox_inches="tight")
        plt.close(fig)
        written.append(out / name)
    if not quiet:
        print(_short_summary(fit, summary, rater_table, written))
    print("wrote " + ", ".join(str(p) for p in written), file=sys.stderr)


# ------------------------------------------------------------------ priors and known classes


def _model(args: argparse.Namespace):
    """The model object with the priors given on the command line (``--priors`` file, then the flags)."""
    name = args.model
    cls = type(get_model(name))
    allowed = [p for p in inspect.signature(cls).parameters]
    options: dict[str, Any] = {}
    if getattr(args, "priors", None):
        path = Path(args.priors)
        try:
            options = json.loads(path.read_text())
        except FileNotFoundError:
            raise CLIError(f"--priors: file not found: {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError, IsADirectoryError) as exc:
            raise CLIError(f"--priors {path}: not a JSON file: {exc}") from None
        if not isinstance(options, dict):
            raise CLIError(f'--priors {path}: expected a JSON object such as {{"alpha": 1, "beta": [[...]]}}')
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise CLIError(f"--priors {path}: {unknown} are not priors of model {name}; its priors are {allowed}")
    if getattr(args, "alpha", None) is not None:
        options["alpha"] = args.alpha
    diag, off = getattr(args, "beta_diag", None), getattr(args, "beta_off", None)
    if diag is not None or off is not None:
        if name == "hierarchical":
            raise CLIError("--beta-diag/--beta-off do not apply to the hierarchical model (its priors: --alpha)")
        if name == "ordinal":
            raise CLIError(
                "--beta-diag/--beta-off do not apply to the ordinal model (its priors: --alpha, and shift_sd, "
                'log_scale_mean, log_scale_sd in a --priors file, e.g. {"shift_sd": 0.5})'
            )
        options["_beta"] = (diag, off)
    return cls, options


def _resolve_model(args: argparse.Namespace, K: int):
    """The model object, with ``--beta-diag``/``--beta-off`` turned into K x K (or per-class) values."""
    from .models import default_beta

    cls, options = _model(args)
    if "_beta" in options:
        diag, off = options.pop("_beta")
        # p ~ Beta(beta1, beta2): correct vs wrong; MACE's competence ~ Beta(beta1, beta2): competent vs spam
        if args.model in ("class_conditional", "one_coin", "mace"):
            if diag is not None:
                options["beta1"] = diag
            if off is not None:
                options["beta2"] = off
        else:  # a Dirichlet beta (K, K); the pooled model's (on its population rows) is at least 1
            base = np.maximum(default_beta(K), 1.0) if args.model in ("pooled", "community") else default_beta(K)
            beta = np.array(options.get("beta", base), dtype=float)
            if beta.shape != (K, K):
                raise CLIError(
                    f"--beta-diag/--beta-off need a (K, K) = ({K}, {K}) beta; the --priors file gives "
                    f"shape {beta.shape}"
                )
            eye = np.eye(K, dtype=bool)
            if diag is not None:
                beta[eye] = diag
            if off is not None:
                beta[~eye] = off
            options["beta"] = beta
    return cls(**options)


def _read_known(path_text: str | None) -> pd.Series | None:
    """``--known FILE``: a CSV of items of known class, columns ``item,label`` (or the first two)."""
    if not path_text:
        return None
    path = Path(path_text)
    df = _read_table(path, "--known", "(item, label) rows")
    cols = ["item", "label"] if {"item", "label"} <= set(df.columns) else list(df.columns[:2])
    if len(cols) < 2:
        raise CLIError(f"--known {path}: expected two columns item,label; found {list(df.columns)}")
    missing = df[cols].isna().any(axis=1)
    if missing.any():
        lines = (np.flatnonzero(missing.to_numpy()) + 2).tolist()
        raise CLIError(f"--known {path}: empty item or label on line(s) {lines[:8]}")
    return pd.Series(df[cols[1]].to_numpy(), index=df[cols[0]].to_numpy())


# ------------------------------------------------------------------------------- fitting


def _method(args: argparse.Namespace) -> str:
    if getattr(args, "ml", False):
        return "em-ml"
    if args.method is not None:
        return args.method
    return "em" if getattr(args, "model", None) == "auto" else args.default_method


def _fit(data: RatingData, args: argparse.Namespace, known: pd.Series | None = None):
    """Fit as the arguments say; ``known``: the items of known class (``--known``, read by the caller)."""
    from .fitting import fit
    from .inference.em.algorithm import em

    method = _method(args)
    if args.model == "auto":
        return _fit_auto(data, args, method, known)
    model = _resolve_model(args, data.n_categories)
    if method in ("em", "em-ml"):
        kwargs: dict[str, Any] = {"n_restarts": args.restarts} if args.restarts is not None else {}
        budget = getattr(args, "max_memory_gib", None)
        if budget is not None:
            if "max_memory_gib" in inspect.signature(em).parameters:
                kwargs["max_memory_gib"] = budget
            else:  # EM's budget check of pyrater.fit, before EM runs
                from . import fitting

                check = getattr(fitting, "_check_em_memory", None)
                if check is not None:
                    check(data, budget)
        return em(data, model, method="ml" if method == "em-ml" else "map", known=known, seed=args.seed, **kwargs)
    kwargs = {"seed": args.seed, "known": known, **_memory_options(args, method)}
    if method in ("mcmc", "gibbs", "pathfinder"):
        kwargs["log_lik"] = False  # the command line's outputs need no per-item log-likelihood (no LOO)
    if method != "gibbs":  # the Stan methods
        kwargs["engine"] = args.engine
    if method == "optimize":
        if args.restarts is not None:
            kwargs["n_inits"] = args.restarts + 1
    else:  # samplers (Pathfinder: paths and resampled draws, no warm-up)
        kwargs.update(chains=args.chains, draws=args.draws)
        if method != "pathfinder":
            kwargs["warmup"] = args.draws if args.warmup is None else args.warmup
    if method == "gibbs":
        kwargs.update({k: v for k, v in (("thin", args.thin), ("pi_moves", args.pi_moves)) if v is not None})
    return fit(data, model, method=cast(Method, method), **kwargs)  # not em / em-ml here: one of METHODS


def _fit_auto(data: RatingData, args: argparse.Namespace, method: str, known: pd.Series | None):
    """``--model auto``: :func:`pyrater.fit` with ``model="auto"`` (each family with its default priors)."""
    from .checking.choose import AUTO_METHODS
    from .fitting import fit

    if method == "em-ml":
        raise CLIError("--ml is not available with --model auto: EM compares its candidates at their posterior modes")
    if method not in AUTO_METHODS:
        raise CLIError(f"--model auto fits its candidates by --method {' or '.join(AUTO_METHODS)}; got {method}")
    if any(getattr(args, name, None) is not None for name in ("priors", "alpha", "beta_diag", "beta_off")):
        raise CLIError("--model auto fits each family with its default priors: drop --priors/--alpha/--beta-*")
    kwargs: dict[str, Any] = {"seed": args.seed, "known": known, **_memory_options(args, method)}
    if method in ("mcmc", "optimize"):
        kwargs["engine"] = args.engine
    if method in ("mcmc", "gibbs"):
        kwargs.update(chains=args.chains, draws=args.draws, warmup=args.draws if args.warmup is None else args.warmup)
    if method == "gibbs":
        kwargs.update({k: v for k, v in (("thin", args.thin), ("pi_moves", args.pi_moves)) if v is not None})
    if args.restarts is not None:
        if method != "optimize":
            raise CLIError(f"--restarts is not used by --model auto with --method {method}")
        kwargs["n_inits"] = args.restarts + 1
    result = fit(data, "auto", method=cast(Method, method), progress=not args.quiet, **kwargs)
    print(result.model_choice.reason, file=sys.stderr)
    return result


def _check_gibbs_options(args: argparse.Namespace) -> None:
    """--thin and --pi-moves belong to --method gibbs: say so before reading any data."""
    given = [flag for flag, value in (("--thin", args.thin), ("--pi-moves", args.pi_moves)) if value is not None]
    if given and _method(args) != "gibbs":
        raise CLIError(
            f"{' and '.join(given)} {'is an option' if len(given) == 1 else 'are options'} of --method gibbs; "
            f"got --method {_method(args)}"
        )
    if args.thin is not None and args.thin > args.draws:
        raise CLIError(f"--thin ({args.thin}) must be at most --draws ({args.draws}) so that at least one draw is kept")


def _cmd_fit(args: argparse.Namespace) -> int:
    _check_gibbs_options(args)
    _check_column_options(args)
    _memory_options(args, "em" if _method(args) == "em-ml" else _method(args))
    out = Path(args.out)
    _check_out(out)
    data = _read_csv(Path(args.ratings), args.format, args)
    print(f"read {data}", file=sys.stderr)
    known = _read_known(args.known)
    gold = _read_gold(Path(args.gold), data) if args.gold else None  # checked before the fit
    if gold is not None and known is not None:
        from .checking.calibration import check_gold_not_known

        try:
            check_gold_not_known(gold.index, known.index, where=f"--known {args.known}")
        except ValueError as exc:
            raise CLIError(f"--gold {args.gold}: {exc}") from None
    start = time.perf_counter()
    result = _fit(data, args, known)
    print(f"fitted in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    _write_outputs(result, out, args.quiet)
    if gold is not None:
        _write_calibrated(result, gold, Path(args.gold), out, args.seed)
    return 0


def _read_gold(gold_path: Path, data: RatingData) -> pd.Series:
    """``--gold FILE``: the known classes (item, label), checked against the ratings before any fitting."""
    from .checking.calibration import check_gold

    frame = _read_table(gold_path, "--gold", "(item, label) rows")
    try:
        gold, _ = check_gold(frame, data.unit_labels, data.categories, what="the ratings file")
    except (TypeError, ValueError) as exc:
        raise CLIError(f"--gold {gold_path}: {exc}") from None
    return gold


def _write_calibrated(fit, gold: pd.Series, gold_path: Path, out: Path, seed: int) -> None:
    """``--gold``: calibrate on the gold items (``calibrate``'s default map), write and score the probabilities.

    Writes ``calibrated_probabilities.csv`` and prints the cross-validated scores.
    """
    from .checking.calibration import calibrate

    try:
        cal = calibrate(fit, gold, seed=seed)
    except ValueError as exc:
        raise ValueError(f"--gold {gold_path}: {exc}") from None
    path = out / "calibrated_probabilities.csv"
    z = cal.probabilities.idxmax(axis=1).rename("z")
    cal.probabilities.join(z).to_csv(path)
    b, a = cal.scores.loc["before"], cal.scores.loc["after"]
    print(
        f"calibration on {len(cal.gold_items)} gold items: temperature {cal.temperature:.3f}, floor {cal.floor:.3g}; "
        f"{cal.cv}-fold cross-validated ECE {b['ece']:.4f} -> {a['ece']:.4f} (perfectly calibrated probabilities "
        f"would score about {cal.ece_noise:.4f} on these {len(cal.gold_items)} items), "
        f"log-loss {b['log_loss']:.4f} -> {a['log_loss']:.4f}, accuracy {b['accuracy']:.4f} -> {a['accuracy']:.4f}"
    )
    print(f"wrote {path}", file=sys.stderr)


COMPARE_NOTE = (
    "elpd_loo: expected log predictive density of a new item (PSIS-LOO, items left out); higher is better. "
    "elpd_diff, dse: difference from the best model and its standard error. p_loo: effective number of "
    "parameters. warning: True when the PSIS-LOO estimate of that model is unreliable (some item has "
    "Pareto k > 0.7, or the Pareto smoothing failed): treat its elpd_loo with caution or refit with more draws."
)


def _cmd_compare(args: argparse.Namespace) -> int:
    if len(set(args.models)) < 2:
        raise CLIError(f"compare needs at least two different models (--models), got {args.models}")
    from ._quiet import import_tqdm
    from .checking.compare import compare
    from .fitting import fit

    tqdm = import_tqdm()

    _check_column_options(args)
    memory = _memory_options(args, "mcmc")
    data = _read_csv(Path(args.ratings), args.format, args)
    print(f"read {data}", file=sys.stderr)
    fits = {}
    for name in tqdm(args.models, desc="fitting models", unit="model", file=sys.stderr):
        fits[name] = fit(
            data,
            name,
            method="mcmc",
            chains=args.chains,
            draws=args.draws,
            engine=args.engine,
            warmup=args.draws if args.warmup is None else args.warmup,
            seed=args.seed,
            progress=False,
            **memory,
        )
    table = compare(fits)
    with pd.option_context("display.width", 120):
        print(table.round(3).to_string())
    print(COMPARE_NOTE)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .datasets import EXAMPLE_CATEGORIES, example_ratings

    _check_gibbs_options(args)
    _memory_options(args, "em" if _method(args) == "em-ml" else _method(args))
    out = Path(args.out)
    _check_out(out)
    df = example_ratings()
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "example_ratings.csv", index=False)
    data = RatingData.from_long(df, categories=EXAMPLE_CATEGORIES)
    print(f"built-in example: {data}", file=sys.stderr)
    start = time.perf_counter()
    result = _fit(data, args)
    print(f"fitted {args.model} by {_method(args)} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    _write_outputs(result, out, args.quiet)
    return 0


# -------------------------------------------------------------------------------- parser


def _int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not value > 0 or np.isnan(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**31), got {text!r}") from None
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2**31), got {value}")
    return value


def _common() -> argparse.ArgumentParser:
    """Options of every subcommand."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--seed", type=_seed, default=1, help="random seed (default 1): the same seed gives the same result")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    return p


def _add_data_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("ratings", help="CSV file of ratings")
    p.add_argument(
        "--format",
        choices=("long", "wide", "grouped"),
        default="long",
        help="long: item,rater,rating rows; wide: one column per rater; grouped: one row per rating "
        "pattern with a tally column (default long)",
    )
    p.add_argument("--tally", default="n", help="tally column of grouped data (default n)")
    p.add_argument(
        "--item", default=None, help="item column of long data (default item), or of a wide table (default: none)"
    )
    p.add_argument("--rater", default=None, help="rater column of long data (default rater)")
    p.add_argument("--rating", default=None, help="rating column of long data (default rating)")
    p.add_argument("--categories", default=None, help="comma-separated category scale, e.g. 1,2,3,4")
    p.add_argument(
        "--normalize-labels",
        action="store_true",
        help="merge ratings that differ only in surrounding whitespace, letter case or Unicode normalisation "
        "('yes', 'yes ', 'Yes'): each becomes its most frequent spelling (default: keep them apart, with a warning)",
    )


def _add_memory_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-memory-gib",
        type=_positive_float,
        default=None,
        metavar="GIB",
        help="memory budget in GiB for the kept draws and the fit's other large arrays, checked before any work "
        "(default 1; 'inf' switches the check off)",
    )


def _add_sampler_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="auto",
        help="Stan interface: auto (cmdstanpy when CmdStan is installed, else pystan), cmdstanpy, pystan",
    )
    p.add_argument("--chains", type=_int_at_least(1), default=4, help="MCMC chains (default 4)")
    p.add_argument(
        "--draws", type=_int_at_least(1), default=1000, help="MCMC draws per chain after warmup (default 1000)"
    )
    p.add_argument("--warmup", type=_int_at_least(0), default=None, help="MCMC warmup per chain (default: = --draws)")


def _add_fit_options(p: argparse.ArgumentParser, default_method: str) -> None:
    p.add_argument(
        "--model",
        choices=(*MODEL_NAMES, "auto"),
        default="dawid_skene",
        help="model (default dawid_skene); auto: fit every family the method fits, compare them (K-fold for em "
        "and optimize, PSIS-LOO for the samplers) beside majority vote, keep the best (comparison.csv)",
    )
    p.add_argument(
        "--method",
        choices=CLI_METHODS,
        default=None,
        help=f"mcmc: NUTS in Stan; optimize: posterior mode in Stan; em: posterior mode by EM; em-ml: "
        f"maximum likelihood by EM; gibbs: blocked Gibbs sampler in numba (not hierarchical), for "
        f"large data; pathfinder: Stan's Pathfinder approximation (cmdstanpy engine) "
        f"(default {default_method}; em with --model auto)",
    )
    p.set_defaults(default_method=default_method)
    p.add_argument(
        "--ml", action="store_true", help="maximum likelihood by EM (the same as --method em-ml; overrides --method)"
    )
    p.add_argument("--out", default="pyrater-out", help="output folder (created; default pyrater-out)")
    p.add_argument(
        "--restarts",
        type=_int_at_least(0),
        default=None,
        help="extra random starts: EM restarts (em, em-ml; default 0 besides EM's own search of starts), "
        "or optimize starts beyond the first (default 3)",
    )
    _add_sampler_options(p)
    _add_memory_option(p)
    p.add_argument(
        "--thin",
        type=_int_at_least(1),
        default=None,
        help="--method gibbs: keep every THIN-th of the --draws sweeps (default 1; saves memory on large data)",
    )
    p.add_argument(
        "--pi-moves",
        type=_int_at_least(0),
        default=None,
        help="--method gibbs: Metropolis moves on pi with the classes summed out, per sweep (default 0); "
        "try 3 when the diagnostics show pi mixing slowly",
    )
    pri = p.add_argument_group("priors (rater's defaults unless given)")
    pri.add_argument(
        "--alpha",
        type=_positive_float,
        default=None,
        help="Dirichlet prior on the prevalence pi: the same value for every class (default 3)",
    )
    pri.add_argument(
        "--beta-diag",
        type=_positive_float,
        default=None,
        help="prior pseudo-count of a correct rating: the diagonal of the Dirichlet prior on each "
        "error-matrix row (class_conditional, one_coin: beta1; mace: beta1, a competent rating); default 4.8 "
        "(one_coin: 4 (1 + 1/K); mace: 2)",
    )
    pri.add_argument(
        "--beta-off",
        type=_positive_float,
        default=None,
        help="prior pseudo-count of each wrong rating: the off-diagonal; default 3.2 / (K - 1), below 1 "
        "for K >= 5 (then --method em takes the posterior mode on the log-odds scale). class_conditional, "
        "one_coin: beta2 of p ~ Beta(beta1, beta2), default 3.2 (one_coin: 4 (1 - 1/K)); mace: beta2 "
        "(a spam rating) of competence ~ Beta(beta1, beta2), default 2",
    )
    pri.add_argument(
        "--priors",
        metavar="FILE.json",
        default=None,
        help='JSON object of the model\'s priors, e.g. {"alpha": [3, 3], "beta": [[8, 1], [1, 8]]} '
        "(class_conditional: alpha, beta1, beta2 per class; one_coin: alpha, beta1, beta2 scalars; "
        "ordinal: alpha, shift_sd, log_scale_mean, log_scale_sd; "
        "mace: alpha, beta1, beta2 scalars, gamma per rating; "
        "pooled: alpha, beta (K, K) on the population rows, s_shape, s_rate; "
        "community: those of pooled, rho_alpha and n_communities); "
        "--alpha/--beta-* override it",
    )
    p.add_argument(
        "--known",
        metavar="FILE",
        default=None,
        help="CSV of items whose true class is known, columns item,label; the fit conditions on them",
    )
    p.add_argument("--quiet", action="store_true", help="do not print the summary")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="pyrater", description="Bayesian and EM analysis of repeated categorical ratings."
    )
    parser.add_argument("--version", action="version", version=f"pyrater {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    common = _common()
    p = sub.add_parser(
        "fit",
        parents=[common],
        help="fit a model to a CSV of ratings",
        description="Fit a model to a CSV of ratings; write tables and plots to --out.",
    )
    _add_data_options(p)
    _add_fit_options(p, "mcmc")
    p.add_argument(
        "--gold", default=None, help="CSV of known classes (item, label): also write calibrated_probabilities.csv"
    )
    p.set_defaults(func=_cmd_fit)
    c = sub.add_parser(
        "compare",
        parents=[common],
        help="compare models by PSIS-LOO (MCMC fits)",
        description="Fit each model by MCMC and print the PSIS-LOO comparison table.",
        epilog=COMPARE_NOTE,
    )
    _add_data_options(c)
    c.add_argument(
        "--models",
        nargs="+",
        choices=MODEL_NAMES,
        default=["dawid_skene", "class_conditional"],
        help="two or more models (default dawid_skene class_conditional)",
    )
    _add_sampler_options(c)
    _add_memory_option(c)
    c.set_defaults(func=_cmd_compare)
    d = sub.add_parser(
        "demo",
        parents=[common],
        help="fit the built-in example end to end",
        description="Fit the built-in example and write its tables and plots to --out.",
    )
    _add_fit_options(d, "mcmc")
    d.set_defaults(func=_cmd_demo, out="pyrater-demo")
    return parser


#: Python argument names in pyrater's messages -> (the namespace's attribute, the command line's flag)
_FLAGS: dict[str, tuple[str, str]] = {
    "max_memory_gib": ("max_memory_gib", "--max-memory-gib"),
    "thin": ("thin", "--thin"),
    "draws": ("draws", "--draws"),
    "chains": ("chains", "--chains"),
    "warmup": ("warmup", "--warmup"),
    "pi_moves": ("pi_moves", "--pi-moves"),
    "data_format": ("format", "--format"),
    "normalize_labels": ("normalize_labels", "--normalize-labels"),
}
#: the running command's arguments (what the messages' flags are looked up in)
_ARGS: argparse.Namespace | None = None


def _command_line_terms(text: str, args: argparse.Namespace | None = None) -> str:
    """``text`` with the command line's flags for the Python arguments it names (those this command has).

    A message that already names its command-line form (``command line: ...``) is left as it is.
    """
    args = args if args is not None else _ARGS
    if args is None or "command line" in text:
        return text
    flags = [flag for name, (dest, flag) in _FLAGS.items() if re.search(rf"\b{name}\b", text) and hasattr(args, dest)]
    return text + (f" (command line: {', '.join(flags)})" if flags else "")


def _memory_advice(exc: MemoryLimitError, args: argparse.Namespace) -> str:
    """A memory refusal in the command line's terms: the flags that ask for less, and a --max-memory-gib that fits."""
    names = {"thin": "thin", "draws": "draws", "chains": "chains"}
    flags = [_FLAGS[name][1] for name in exc.ask if name in names and hasattr(args, _FLAGS[name][0])]
    if "data_format" in exc.ask and hasattr(args, "format"):
        flags.append("--format grouped")
    if hasattr(args, "max_memory_gib"):
        flags.append(f"--max-memory-gib {exc.suggested_limit_gib:g}")
    return f"{exc} (command line: {', '.join(flags)})" if flags else str(exc)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as one line, ``pyrater: warning: <message>`` (no Python source line), in command-line terms."""
    print(f"pyrater: warning: {_command_line_terms(str(message))}", file=sys.stderr if file is None else file)


def _one_line_warnings(func):
    """Run the command line with :func:`_show_warning` (the previous display restored afterwards)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return func(*args, **kwargs)

    return wrapper


@_one_line_warnings
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    global _ARGS
    parser = build_parser()
    args = parser.parse_args(argv)
    _ARGS = args
    if args.debug:
        return args.func(args)
    try:
        with warnings.catch_warnings():
            # warnings as one line each, without the Python source line
            warnings.showwarning = _show_warning
            return args.func(args)
    except MemoryLimitError as exc:  # a request over the budget: the flags that ask for less
        print(f"pyrater: error: {_memory_advice(exc, args)}", file=sys.stderr)
        return 2
    except (RatingDataError, CLIError, ValueError) as exc:  # bad input or arguments (pyrater's ValueErrors name them)
        print(f"pyrater: error: {_command_line_terms(str(exc), args)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pyrater: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(
            f"pyrater: error: {type(exc).__name__}: {text} (in {Path(where.filename).name}:{where.lineno}; "
            "run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
