"""Command line: ``pyrater fit``, ``pyrater compare``, ``pyrater demo``.

``pyrater fit RATINGS.csv --format long --model dawid_skene --method em --out DIR``
reads a CSV (``-``: from standard input), fits, writes ``parameters.csv`` (pi and theta),
``class_probabilities.csv`` (one row per item; for grouped data one row per rating pattern, with the
pattern's ratings and tally), ``raters.csv`` (accuracy and diagonal of each
rater's error matrix, then the model's own per-rater parameters: MACE's ``competence``, the
one-coin model's ``p``, ...), ``summary.txt`` (the full report) and the plots
(``raters.png``, ``class_probabilities.png``, ``prevalence.png``, and
``trace.png`` for MCMC; with more than 24 raters ``raters.png`` summarises
every rater's accuracy and ``raters_least_accurate.png`` shows the error
matrices of the 12 least accurate) into ``DIR`` and prints a short summary (pi, the
raters -- only the least and most accurate when there are many -- and where
the full tables were written).  ``--ml`` (or ``--method em-ml``) fits by
maximum likelihood (EM); ``--alpha``, ``--beta-diag``, ``--beta-off`` or
``--priors FILE.json`` set the priors; ``--known FILE`` gives items of known
class; ``--save-fit PATH`` also saves the fit (``fit.save``) for
``pyrater.load``.  ``pyrater fit --help`` lists every option.
``pyrater compare RATINGS.csv --models dawid_skene class_conditional`` fits each
model by MCMC (``--method gibbs``, ``em`` or ``optimize`` for the others) and prints
the comparison table (PSIS-LOO, or 10-fold cross-validation for posterior modes;
``--baseline`` adds majority vote's vote model).
``pyrater demo --out DIR`` does the same as ``fit`` on the built-in example
(:func:`pyrater.datasets.example_ratings`), the README's main command.

Column names of long data are ``item,rater,rating`` unless ``--item``,
``--rater`` and ``--rating`` name others (``--item`` also names the item
column of a wide table); ``--normalize-labels`` merges ratings that differ
only in whitespace, case or Unicode normalisation.  ``--max-memory-gib``
sets the memory budget that draws, replicates and the like are checked
against before any work (default 1 GiB).

Method-specific flags (``--engine``, ``--chains``, ``--draws``,
``--warmup``, ``--thin``, ``--pi-moves``, ``--restarts``) default to None:
only the flags given are passed on (pyrater.fit's defaults stand for the
others: ``--draws 200`` without ``--warmup`` warms up for pyrater.fit's
1000 iterations, as ``pyrater.fit(..., draws=200)`` does), and a flag the
method does not use is refused before any data is read, naming the methods
that take it.

Errors are one line on stderr: input errors (with the file's line number
and the column) exit with status 2, anything else with status 1; ``--debug``
shows the full traceback.  An unknown option is reported with the
subcommand's usage and its close match (``--chians``: did you mean
``--chains``?), status 2.  Advice in an error or warning names the command
line's flags (``--thin``, ``--draws``, ``--max-memory-gib`` ...) next to
the Python argument names, with their values where the message gives one
(``engine='cmdstanpy'``: ``--engine cmdstanpy``), column names quoted for
the shell (``--item 'Unnamed: 0'``), and the files the command writes in
place of Python attributes (``OUT/comparison.csv``).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import inspect
import io
import json
import os
import re
import shlex
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
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
#: the methods ``pyrater compare`` fits by (those :func:`pyrater.compare` scores: PSIS-LOO or K-fold)
COMPARE_METHODS = ("mcmc", "gibbs", "em", "optimize")
ENGINES = ("auto", "cmdstanpy", "pystan")
# terminal summary: all raters up to this many, else the least and the most accurate few
SHORT_RATERS = 12
SHOWN_RATERS = 5


class CLIError(ValueError):
    """A problem with the command line's arguments or files (exit status 2)."""


__all__ = ["main"]

#: the command line's method-specific flags: the namespace's attribute -> the flag (pyrater.fit's argument of the
#: same name says which methods use it, see METHOD_ARGUMENTS; --restarts is the CLI's own)
_METHOD_FLAGS: dict[str, str] = {
    "engine": "--engine",
    "chains": "--chains",
    "draws": "--draws",
    "warmup": "--warmup",
    "thin": "--thin",
    "pi_moves": "--pi-moves",
    "restarts": "--restarts",
}


def _flag_methods(dest: str) -> tuple[str, ...]:
    """The --method values that use the flag of ``dest`` (``em-ml`` wherever ``em`` is)."""
    if dest == "restarts":  # EM restarts (em, em-ml) or optimize's extra starts (n_inits)
        return ("em", "em-ml", "optimize")
    users = METHOD_ARGUMENTS[dest][0]
    return (*users, "em-ml") if "em" in users else users


#: Cells read as missing: pandas' defaults (R's NA, empty cells, NaN, NULL) except "None", a category word
#: on severity scales (None / Mild / Severe) that pandas would silently read as a missing rating.
_MISSING_TEXT = [
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA",
    "NULL", "NaN", "n/a", "nan", "null",
]  # fmt: skip
#: Separators a file may use instead of commas, named for the message.
_OTHER_SEPARATORS = (("\t", "tab"), (";", "semicolon"), ("|", "vertical-bar"))


def _separator(text: str) -> str:
    """``--sep``: one character, or ``tab`` (also a backslash and t, as typed in a shell)."""
    if text.lower() in ("tab", "\\t", "\t"):
        return "\t"
    if len(text) != 1 or text in '"\r\n':
        raise argparse.ArgumentTypeError(f"give one character, or 'tab'; got {text!r}")
    return text


#: Binary formats known by their first bytes: (signature, kind); a zip is a workbook or a numpy archive
#: (:func:`_zip_kind`), a pickle of protocol 2 or later starts with 0x80 and the protocol (:func:`_binary_kind`)
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89HDF\r\n\x1a\n", "hdf5"),  # HDF5, netCDF-4: pyrater's fit files (fit.save)
    (b"CDF\x01", "netcdf"),  # netCDF classic
    (b"CDF\x02", "netcdf"),  # netCDF 64-bit offset
    (b"CDF\x05", "netcdf"),  # netCDF 64-bit data (CDF-5)
    (b"PAR1", "parquet"),
    (b"ARROW1", "feather"),  # Feather v2 / Arrow IPC file
    (b"\x93NUMPY", "npy"),
    (b"PK\x03\x04", "zip"),  # xlsx, ods, npz
    (b"\xd0\xcf\x11\xe0", "workbook"),  # OLE2: xls
)


#: entries of a zip archive that hold a table pandas reads from the archive itself
_TEXT_TABLES = (".csv", ".tsv", ".txt")


def _zip_kind(path: Path, whole: bytes | None = None) -> str | None:
    """A zip file's kind: ``"npz"`` (numpy.savez), ``"workbook"``, or for one zipped table None or ``"zipped"``.

    A zip of one CSV/TSV/text table is read by pandas when its name ends in
    ``.zip`` (None: no objection); under another name it is ``"zipped"``.
    """
    try:
        with zipfile.ZipFile(path if whole is None else io.BytesIO(whole)) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return "workbook"
    if names and all(name.endswith(".npy") for name in names):
        return "npz"
    if len(names) == 1 and names[0].lower().endswith(_TEXT_TABLES):
        return None if path.suffix.lower() == ".zip" else "zipped"
    return "workbook"


def _binary_kind(start: bytes, path: Path, whole: bytes | None = None) -> str | None:
    """The binary format a file's first bytes ``start`` show (a key of :func:`_binary_message`), or None.

    None: not a format known here, so the file may be text (decoding it
    tells, with the advice on ``--encoding``).  ``whole``: the bytes themselves
    (standard input), where a zip archive is opened instead of ``path``.
    """
    if len(start) >= 2 and start[0] == 0x80 and 2 <= start[1] <= 5:  # pickle protocols 2-5
        return "pickle"
    if start.startswith(b"\x1f\x8b"):  # gzip: pandas reads a .gz name itself
        return None if path.suffix.lower() in (".gz", ".gzip") else "gzip"
    kind = next((kind for signature, kind in _SIGNATURES if start.startswith(signature)), None)
    return _zip_kind(path, whole) if kind == "zip" else kind


def _csv_name(path: Path) -> str:
    """A name for the CSV that a binary file ``path`` converts to, beside it: ``path`` as ``.csv``, if that is free."""
    csv = path.with_suffix(".csv")
    return csv.name if csv != path and not csv.exists() else f"{path.stem}_table.csv"


def _binary_message(kind: str, path: Path, flag: str, holds: str) -> str:
    """The message for a file of binary format ``kind`` given to ``flag`` (``""``: the ratings file).

    It says what the file is, what the option reads, and how to get the
    table out of the file in Python (or, for a saved fit, how to open it).
    """
    where = f"{flag} {path}" if flag else str(path)
    if kind == "workbook":
        return (
            f"{where}: this is a spreadsheet workbook, not CSV text; save the sheet as CSV (UTF-8, comma-separated), "
            "or read it with pandas.read_excel and pass the DataFrame to pyrater.fit"
        )
    name, csv = str(path), _csv_name(path)
    reads = (
        f"{flag} reads {holds} from a CSV file"
        if flag
        else "pyrater fit reads a table of ratings as CSV text (or tab- or semicolon-separated: --sep)"
    )
    what, advice = {
        "hdf5": (
            "this looks like a fit saved by pyrater (fit.save, --save-fit) or another netCDF-4/HDF5 file, not a table",
            f"open a saved fit in Python with pyrater.load({name!r})",
        ),
        "netcdf": (
            "this is a netCDF file (classic format), not a table",
            f"read it in Python with xarray.open_dataset({name!r}) (a fit saved by pyrater is netCDF-4: "
            "pyrater.load(path) opens it)",
        ),
        "pickle": (
            "this is a Python pickle, not a table",
            f"a fit pickled by pyrater 0.1 opens in Python with pyrater.load({name!r}, allow_pickle=True) (only "
            "for a file you trust: reading a pickle runs the code it carries; then save it with fit.save('fit.nc')); "
            f"a pickled DataFrame converts with pandas.read_pickle({name!r}).to_csv({csv!r}, index=False)",
        ),
        "parquet": (
            "this is a Parquet table, not CSV text",
            f"convert it with pandas.read_parquet({name!r}).to_csv({csv!r}, index=False)",
        ),
        "feather": (
            "this is a Feather (Arrow) table, not CSV text",
            f"convert it with pandas.read_feather({name!r}).to_csv({csv!r}, index=False)",
        ),
        "npy": (
            "this is a numpy array (numpy.save), not a table",
            f"write it as CSV, e.g. pandas.DataFrame(numpy.load({name!r})).to_csv({csv!r}, index=False)",
        ),
        "gzip": (
            "this is a gzip-compressed file",
            f"name it {path.name}.gz (compressed tables are read by their suffix) or decompress it (gunzip)",
        ),
        "zipped": (
            "this is a zip archive holding one table",
            f"name it {path.stem}.zip (a zip of one table is read by its suffix) or extract the table (unzip)",
        ),
        "npz": (
            "this is a numpy archive of arrays (numpy.savez), not a table",
            f"load it with numpy.load({name!r}) and write the array of ratings as CSV, e.g. "
            f"pandas.DataFrame(array).to_csv({csv!r}, index=False)",
        ),
    }[kind]
    return f"{where}: {what}: {reads}; {advice}"


def _stdin_table() -> bytes:
    """The bytes piped to standard input (the ratings file ``-``), read once; refused from a terminal or empty."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        raise CLIError(
            "'-' reads the ratings from standard input, which is a terminal here: pipe a CSV table in "
            "(cat ratings.csv | pyrater fit - ...) or give the file's name"
        )
    raw = stream.buffer.read() if hasattr(stream, "buffer") else stream.read().encode("utf-8")
    if not raw.strip():
        raise CLIError("standard input ('-') is empty: pipe a CSV table of ratings in, or give the file's name")
    return raw


def _read_table(path: Path | bytes, flag: str, holds: str, sep: str = ",", encoding: str = "utf-8") -> pd.DataFrame:
    """Read the CSV file given to ``flag`` (``holds``: what it should contain), one clear error per failure.

    Raises CLIError for a directory, a missing or unreadable file, a binary
    file known by its first bytes before any decoding (a spreadsheet
    workbook, a fit saved by pyrater or another HDF5/netCDF file, a pickle,
    a Parquet or Feather table, a numpy array; see :data:`_SIGNATURES`), a
    file that is not text in ``encoding``, a file that is not CSV, and a
    file separated by tabs (or semicolons, or vertical bars) instead of
    ``sep``; the ratings file's messages name ``--sep`` and ``--encoding``.
    ``path`` may be the bytes read from standard input (the ratings file ``-``).
    """
    if isinstance(path, bytes):
        where = "standard input"
        if _binary_kind(path[:8], Path("-"), whole=path) is not None:  # a zip is read from the bytes
            raise CLIError(
                "standard input holds binary data (a workbook, archive, saved fit or the like), not a table: "
                "pyrater fit reads a table of ratings as CSV text; give the file's name for a clearer message"
            )
        source: Any = io.BytesIO(path)
    else:
        where = f"{flag} {path}" if flag else str(path)
        if path.is_dir():
            raise CLIError(f"{where} is a directory; give a CSV file of {holds}")
        try:
            with open(path, "rb") as fh:
                start = fh.read(8)
        except FileNotFoundError:
            raise CLIError(f"{flag + ': ' if flag else ''}file not found: {path}") from None
        except PermissionError:
            raise CLIError(f"{where}: permission denied") from None
        kind = _binary_kind(start, path)
        if kind is not None:
            raise CLIError(_binary_message(kind, path, flag, holds))
        source = path
    try:
        df = pd.read_csv(source, sep=sep, encoding=encoding, keep_default_na=False, na_values=_MISSING_TEXT)
    except LookupError:
        raise CLIError(
            f"--encoding {encoding}: not a text encoding Python knows (e.g. utf-8, latin-1, cp1252)"
        ) from None
    except UnicodeDecodeError as exc:
        fix = "pass its encoding, e.g. --encoding latin-1 or cp1252" if not flag else "save it as UTF-8"
        byte = exc.object[exc.start : exc.start + 1].hex()
        raise CLIError(f"{where}: not {encoding} text (the byte 0x{byte} is not {encoding}); {fix}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise CLIError(f"{where}: cannot read as CSV ({holds}): {exc}") from None
    if df.shape[1] == 1:
        header = str(df.columns[0])
        for other, name in _OTHER_SEPARATORS + ((",", "comma"),):
            if other != sep and other in header:
                shown = "tab" if other == "\t" else other
                fix = (
                    f"; pass --sep {shlex.quote(shown)}" if not flag else f"; pyrater reads {holds} separated by commas"
                )
                raise CLIError(f"{where}: the file looks {name}-separated (header {header!r}){fix}")
    return df


def _id_columns_as_text(
    df: pd.DataFrame, path: Path | bytes, columns: list[str], sep: str = ",", encoding: str = "utf-8"
) -> pd.DataFrame:
    """``df`` with its item/rater label columns as written in the file where reading them as numbers changes them.

    pandas reads ``001``, ``01`` and ``1`` as the number 1: different items (or
    raters) would become one.  A label column read as numbers is read again as
    text and kept as text when that happens, or when a label has a leading zero.
    """
    numeric = [c for c in columns if c in df.columns and df[c].dtype.kind in "iuf"]
    if not numeric:
        return df
    text = pd.read_csv(
        io.BytesIO(path) if isinstance(path, bytes) else path,
        usecols=numeric,
        dtype=str,
        keep_default_na=False,
        na_values=_MISSING_TEXT,
        sep=sep,
        encoding=encoding,
    )
    out = df
    for c in numeric:
        raw = text[c]
        zeros = raw.str.match(r"^[+-]?0\d", na=False).any()
        if zeros or raw.nunique() != df[c].nunique():
            out = out.copy() if out is df else out
            out[c] = raw.to_numpy()
    return out


def _read_csv(path: Path, data_format: DataFormat, args: argparse.Namespace) -> RatingData:
    sep, encoding = getattr(args, "sep", ","), getattr(args, "encoding", "utf-8")
    source: Path | bytes = _stdin_table() if str(path) == "-" else path  # '-': standard input, read once
    df = _read_table(source, "", "ratings", sep=sep, encoding=encoding)
    if data_format != "grouped":  # labels of items (and raters) as the file writes them: 001 is not 1
        roles = ("item", "rater") if data_format == "long" else ("item",)
        df = _id_columns_as_text(df, source, [getattr(args, r, None) or r for r in roles], sep, encoding)
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
    names = _rater_names(args)  # the flag itself was checked before the file was read (_check_column_options)
    if names is not None:
        missing = [name for name in names if name not in df.columns]
        if missing:
            raise CLIError(
                f"--raters: no column {', '.join(map(repr, missing))} in {path}; its columns are "
                f"{', '.join(map(str, df.columns))}"
            )
        options["raters"] = names
        if data_format == "grouped":
            df = _merge_patterns(df, names, args.tally)
    if data_format == "wide":
        if args.item is not None:
            options["item"] = args.item
        elif "item" in df.columns:
            options["item"] = "item"
    if getattr(args, "normalize_labels", False):
        options["normalize_labels"] = True
    from .data.ratings import LabelSpellingWarning

    try:
        with warnings.catch_warnings():
            if "categories" not in options and "normalize_labels" not in options:
                warnings.simplefilter("error", LabelSpellingWarning)  # a fit of each spelling as a class is no use
            return as_rating_data(df, data_format, **options)
    except RatingDataError as exc:
        advice = _data_advice(str(exc), df, data_format, args)
        raise RatingDataError(f"{path} (row numbers are lines of the file): {advice}") from None
    except LabelSpellingWarning as exc:
        found = str(exc).split("; they are kept as different labels")[0]
        raise CLIError(
            f"{path}: {found}. Each spelling would be its own category; pass --normalize-labels to merge them "
            "(each becomes its most frequent spelling), or clean the file if they differ in meaning"
        ) from None


def _merge_patterns(df: pd.DataFrame, raters: list[str], tally: str) -> pd.DataFrame:
    """A grouped table restricted to ``raters``: rows whose ratings by them coincide become one pattern.

    Tallies are summed, each pattern keeps the line of its first row (for messages), and the merge is
    reported.  A tally column that is missing or not all integers is left to the reader to report.
    """
    if tally not in df.columns:
        return df
    counts = pd.to_numeric(df[tally], errors="coerce")
    if counts.isna().any() or (counts % 1 != 0).any():
        return df
    patterns = df.assign(**{tally: counts}).groupby(raters, dropna=False, sort=False)  # a gap is one pattern value
    if patterns.ngroups == len(df):
        return df
    merged = patterns.head(1)[raters].copy()  # first rows, in the order of the patterns' first appearance
    merged[tally] = patterns[tally].sum().to_numpy()
    print(
        f"pyrater: --raters keeps {len(raters)} of the table's columns: its {len(df)} rating patterns are "
        f"{len(merged)} over these raters; rows with the same pattern are merged, their tallies summed",
        file=sys.stderr,
    )
    return merged


# ------------------------------------------------------------ the reader's advice in the command line's terms

#: the column each flag names, by the role the reader's messages give it
_ROLE_FLAGS = {"item": "--item", "rater": "--rater", "rating": "--rating", "tally": "--tally"}
#: column names of a tally (as the reader takes them; lower case)
_TALLY_NAMES = ("n", "count", "counts", "tally", "freq", "frequency", "weight", "weights")
#: at most this many distinct ratings in the columns that look like one column per rater
_MAX_SCALE = 20
#: a Python string literal (a column name as the reader's messages show it)
_LITERAL = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""


def _data_advice(message: str, df: pd.DataFrame, data_format: str, args: argparse.Namespace) -> str:
    """The reader's message (a :class:`RatingDataError`) with advice in command-line terms, shell-quoted.

    * a column named in a flag of the reader's advice (``--tally Unnamed: 0``)
      is quoted for the shell (``--tally 'Unnamed: 0'``);
    * a close match of a missing column gets its flag (``did you mean
      'ratng'? use --rating ratng``);
    * in a wide table, a column taken for a tally that holds a different
      value on every row is named as the item column (``--item 'Unnamed: 0'``,
      the index ``DataFrame.to_csv`` writes);
    * long data without its rater or rating column whose other columns look
      like one column per rater gets ``--format wide`` (or ``--format
      grouped`` with a tally column) in place of the general hint.

    Parameters
    ----------
    message : str
        The reader's message.
    df : DataFrame
        The table read from the file.
    data_format : {"long", "wide", "grouped"}
        The format it was read as (``--format``).
    args : argparse.Namespace
        The command's arguments.

    Returns
    -------
    str
    """
    # longest names first, so that a name that begins another is not quoted inside it
    for name in sorted((str(c) for c in df.columns), key=len, reverse=True):
        if shlex.quote(name) != name:
            for flag in _ROLE_FLAGS.values():
                message = message.replace(f"{flag} {name}", f"{flag} {shlex.quote(name)}")
    lines = message.splitlines()
    hint = _format_hint(lines, df, args) if data_format == "long" else None
    # another format: the rater and rating columns are not to be named (their close matches are no rater columns)
    flagged = ("item",) if hint is not None else ("item", "rater", "rating", "tally")
    lines = [_flag_of_close_match(line, data_format, flagged) for line in lines]
    if data_format == "wide" and getattr(args, "item", None) is None:
        lines = [_item_not_rater(line, df) for line in lines]
    if hint is not None:  # in place of the reader's hints (name the columns, or another format)
        lines = [line for line in lines if not (line.startswith("hint:") and "--format" in line)] + [hint]
    return "\n".join(lines)


def _flag_of_close_match(line: str, data_format: str, roles: tuple[str, ...]) -> str:
    """``... column 'rating' not found; ... (did you mean 'ratng'?)`` with ``use --rating ratng`` (for ``roles``)."""
    match = re.search(r"\b(item|rater|rating|tally) column .* not found; .*\(did you mean (.+)\?\)$", line)
    if match is None:
        return line
    role, close = match.group(1), [ast.literal_eval(c) for c in re.findall(_LITERAL, match.group(2))]
    takes = {"long": ("item", "rater", "rating"), "wide": ("item",), "grouped": ("tally",)}.get(data_format, ())
    if role not in takes or role not in roles or not close:
        return line
    use = " or ".join(f"{_ROLE_FLAGS[role]} {shlex.quote(str(c))}" for c in close)
    return line[: match.end(2)] + f"? use {use})"


def _is_id_column(col: pd.Series) -> bool:
    """A column with a value on every row, a different one on each: item labels (or a tally of distinct counts)."""
    return len(col) >= 2 and col.notna().all() and col.nunique() == len(col)


def _is_index_column(name: Any, col: pd.Series) -> bool:
    """An index written by ``DataFrame.to_csv``: named ``Unnamed: ...``, or the integers 0..n-1 or 1..n, in order."""
    if str(name).startswith("Unnamed:"):
        return _is_id_column(col)
    if not pd.api.types.is_integer_dtype(col.dtype) or not len(col):
        return False
    values = col.to_numpy()
    return values[0] in (0, 1) and bool((np.diff(values) == 1).all())


def _item_not_rater(line: str, df: pd.DataFrame) -> str:
    """A wide table's column the reader takes for a tally or a text column, when it holds item labels: ``--item``."""
    for name in df.columns:
        col, flag = df[name], f"--item {shlex.quote(str(name))}"
        body = line.lstrip(" -")  # the problem, without the list's "  - "
        if not body.startswith(f"column {name!r} ") or not _is_id_column(col):
            continue
        prefix = line[: len(line) - len(body)]
        if "looks like a tally" in body and _is_index_column(name, col):
            return (
                f"{prefix}column {name!r} holds a different value on every row ({_few(col)}): the items' labels "
                f"(such as the index DataFrame.to_csv writes), not a rater or a tally: use {flag}"
            )
        if "looks like a tally" in body or "holds text" in body:
            return f"{line} (if it holds the items' labels: {flag})"
    return line


def _few(col: pd.Series, limit: int = 3) -> str:
    """The first and last values of a column, for a message."""
    values = [str(v) for v in col.tolist()]
    return ", ".join(values) if len(values) <= 2 * limit else f"{', '.join(values[:limit])}, ..., {values[-1]}"


def _ratings_scale(df: pd.DataFrame, columns: list[Any]) -> set[str] | None:
    """The ratings the columns share when they look like one column per rater, else None.

    They do when every column holds some value another of them holds, and
    all of them together hold at most ``_MAX_SCALE`` different values.
    """
    sets = []
    for c in columns:
        values = df[c].dropna().tolist()
        sets.append({str(int(v)) if isinstance(v, float) and v.is_integer() else str(v).strip() for v in values})
    scale = set().union(*sets)
    if len(columns) < 2 or not 0 < len(scale) <= _MAX_SCALE:
        return None
    for i, values in enumerate(sets):
        others = set().union(*(o for j, o in enumerate(sets) if j != i))
        if not values & others:
            return None
    return scale


def _format_hint(lines: list[str], df: pd.DataFrame, args: argparse.Namespace) -> str | None:
    """Long data without a rater or rating column, its other columns like raters: ``--format wide`` (or ``grouped``)."""
    missing = {role for role in ("item", "rater", "rating") if any(f"- {role} column " in line for line in lines)}
    if not missing & {"rater", "rating"}:
        return None
    found = [getattr(args, role, None) or role for role in ("item", "rater", "rating") if role not in missing]
    found = [c for c in found if c in df.columns]
    item = (getattr(args, "item", None) or "item") if "item" not in missing else None
    if item is None and len(df.columns) and _is_id_column(df[df.columns[0]]):
        item = df.columns[0]  # no item column by name: the first, with a label on every row, is the items'
    if item is not None and item in df.columns and not _is_id_column(df[item]):
        return None  # items rated more than once: long data after all, with other column names
    rest = [c for c in df.columns if c not in found and c != item]
    tally = rest[-1] if rest and str(rest[-1]).strip().lower() in _TALLY_NAMES else None
    if tally is None and _ratings_scale(df, rest) is None and _ratings_scale(df, rest[:-1]) is not None:
        last = df[rest[-1]]  # a tally by its values: counts, beyond the others' ratings
        if pd.api.types.is_integer_dtype(last.dtype) and (last >= 0).all():
            tally = rest[-1]
    raters = [c for c in rest if c != tally]
    if _ratings_scale(df, raters) is None:
        return None
    shown = ", ".join(repr(str(c)) for c in raters[:5]) + (f", ... ({len(raters)} columns)" if len(raters) > 5 else "")
    drop = [f"--{role}" for role in ("rater", "rating") if getattr(args, role, None) is not None]
    dropping = f" (and drop {' and '.join(drop)})" if drop else ""
    if tally is not None:
        command = "--format grouped" + ("" if str(tally) == "n" else f" --tally {shlex.quote(str(tally))}")
        return (
            f"hint: the columns {shown} look like one column per rater and {str(tally)!r} like a tally of items per "
            f"rating pattern: read the file as grouped data: {command}{dropping}"
        )
    named = item in (None, "item", getattr(args, "item", None))  # no --item needed, or given already
    command = "--format wide" + ("" if named else f" --item {shlex.quote(str(item))}")
    return f"hint: the columns {shown} look like one column per rater: read the file as wide data: {command}{dropping}"


def _rater_names(args: argparse.Namespace) -> list[str] | None:
    """The column names given by ``--raters a,b,c`` (spaces around a name dropped), or None without the flag."""
    raters = getattr(args, "raters", None)
    return None if raters is None else [name.strip() for name in raters.split(",")]


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
    names = _rater_names(args)
    if names is not None:
        if args.format == "long":
            raise CLIError(
                "--raters names the rater columns of a wide or grouped table (--format wide or grouped); long "
                "data names its one rater column with --rater"
            )
        if not all(names):
            raise CLIError(f"--raters {args.raters!r}: give comma-separated column names, e.g. r1,r2,r3")
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise CLIError(f"--raters names {', '.join(map(repr, twice))} twice; name each rater column once")


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


def _check_out(raw: str) -> Path:
    """The output folder ``--out raw``, checked before any data is read or fitted.

    Refused: an empty name, a path that exists and is not a folder, a folder
    that cannot be written, and a folder that cannot be created (a file on
    its path, no permission, a read-only or virtual file system): found
    after a long fit, any of them would throw the fit away.
    """
    if not str(raw).strip():
        raise CLIError("--out is empty; give a folder for the results (created if missing)")
    out = Path(raw)
    if out.exists():
        if not out.is_dir():
            raise CLIError(f"--out {out} exists and is not a folder; give a folder (created if missing)")
        if not os.access(out, os.W_OK | os.X_OK):
            raise CLIError(f"--out {out}: the folder is not writable")
        return out
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CLIError(f"--out {out}: {parent} is a file, so the folder cannot be created there")
    try:  # can a folder be created here? (permissions alone do not say: read-only and virtual file systems)
        os.rmdir(tempfile.mkdtemp(prefix=".pyrater-out-", dir=parent))
    except OSError as exc:
        raise CLIError(f"--out {out}: cannot create a folder in {parent} ({exc.strerror or exc})") from None
    return out


def _check_save_fit(raw: str | None, ratings: Path, out: Path) -> Path | None:
    """The fit file ``--save-fit raw``, checked before any data is read or fitted; None without the flag.

    Refused: an empty name, a folder, a path whose folder does not exist
    (or lies under a file), a folder in which no file can be written (no
    permission, a read-only or virtual file system), and the ratings file
    itself (the fit would replace it): ``fit.save`` would refuse the first
    ones only after the fit.  A path in the ``--out`` folder is taken (that
    folder was checked by :func:`_check_out`, and is made before the fit is
    saved).  A suffix naming another format gets ``fit.save``'s warning now.

    Parameters
    ----------
    raw : str or None
        The flag's value.
    ratings : Path
        The ratings file.
    out : Path
        The output folder (``--out``), already checked.

    Returns
    -------
    Path or None
    """
    if raw is None:
        return None
    if not raw.strip():
        raise CLIError("--save-fit is empty; give a file name for the fit, e.g. --save-fit fit.nc")
    path = Path(raw)
    if path.is_dir():
        raise CLIError(
            f"--save-fit {path} is a folder; give a file name for the fit, e.g. --save-fit "
            f"{shlex.quote(str(path / 'fit.nc'))}"
        )
    if path.exists() and ratings.exists() and path.samefile(ratings):
        raise CLIError(f"--save-fit {path} is the ratings file; give another name (the fit would replace the ratings)")
    folder = Path(os.path.abspath(path)).parent
    if folder != Path(os.path.abspath(out)):
        _check_fit_folder(path, folder)
    from .fits.fitfile import _check_suffix

    _check_suffix(path)  # a .csv, .pkl ... name: fit.save's warning, before the fit rather than after it
    return path


def _check_fit_folder(path: Path, folder: Path) -> None:
    """``--save-fit path``: its ``folder`` must exist and take a new file (a probe file is made and removed)."""
    if not folder.is_dir():
        above = folder
        while not above.exists():
            above = above.parent
        if not above.is_dir():
            raise CLIError(f"--save-fit {path}: {above} is a file, so no folder can hold the fit there")
        raise CLIError(f"--save-fit {path}: no folder {folder}; create it first (mkdir -p {shlex.quote(str(folder))})")
    try:  # can a file be written here? (permissions alone do not say: read-only and virtual file systems)
        handle, probe = tempfile.mkstemp(prefix=".pyrater-save-fit-", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise CLIError(f"--save-fit {path}: cannot write a file in {folder} ({exc.strerror or exc})") from None


def _save_fit(fit, path: Path) -> None:
    """``--save-fit``: write ``fit`` with ``fit.save(path)``, as in Python, and say where it went.

    Its folder is made first when it is the ``--out`` folder (the only one
    :func:`_check_save_fit` lets through before it exists).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # the suffix warning was given before the fit (_check_save_fit)
        warnings.filterwarnings("ignore", message=re.escape(f"{str(path)!r} will be a netCDF4/HDF5 fit file"))
        try:
            fit.save(path)
        except OSError as exc:
            raise CLIError(f"--save-fit {path}: cannot write the fit ({exc.strerror or exc})") from None
    print(f"saved the fit to {path} (open it in Python with pyrater.load({str(path)!r}))", file=sys.stderr)


def _rater_table(fit, prob: float = 0.9) -> pd.DataFrame:
    """Per rater: ratings, expected accuracy ``sum_k pi_k theta[j, k, k]``, the diagonal of theta.

    For fits with draws, the accuracy gets a central ``prob`` interval.  The
    family's own per-rater parameters follow (:func:`_own_rater_parameters`).
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
    for name, value in _own_rater_parameters(fit).items():
        table[name] = value
    return table


def _own_rater_parameters(fit) -> dict[str, np.ndarray]:
    """The family's own parameters with one number per rater (MACE ``competence``, one-coin ``p``, ...).

    :meth:`~pyrater.fits.base.Fit.point_estimate` of each of
    :meth:`~pyrater.fits.base.Fit.model_parameters` over raters alone: the
    estimate, or the posterior mean; empty for families whose raters are
    described by theta alone.
    """
    out = {}
    for name in fit.model_parameters():
        value = fit.point_estimate(name)
        if value.dims == ("rater",):
            out[name] = value.to_numpy()
    return out


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


#: every file a fit's --out folder may receive (which ones depends on the method, the model and the raters)
_OUTPUT_NAMES = frozenset(
    {
        "parameters.csv",
        "class_probabilities.csv",
        "raters.csv",
        "summary.txt",
        "comparison.csv",
        "raters.png",
        "class_probabilities.png",
        "prevalence.png",
        "raters_least_accurate.png",
        "trace.png",
        "calibrated_probabilities.csv",
    }
)


def _write_outputs(fit, out: Path, quiet: bool, later: tuple[str, ...] = ()) -> None:
    """Write the fit's tables, summary and figures to ``out``; ``later``: files the caller writes next (--gold)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .checking import plots

    out.mkdir(parents=True, exist_ok=True)
    earlier = {p.name for p in out.iterdir() if p.name in _OUTPUT_NAMES}  # an earlier run's files, if any
    summary = fit.summary()
    rater_table = _rater_table(fit)
    written = [out / "parameters.csv", out / "class_probabilities.csv", out / "raters.csv", out / "summary.txt"]
    summary.parameters.to_csv(written[0])
    _class_table(fit).to_csv(written[1])
    rater_table.to_csv(written[2])
    written[3].write_text(summary.to_string(full=True) + "\n")
    if fit.model_choice is not None:  # --model auto: the comparison that chose the model
        fit.model_choice.table.to_csv(out / "comparison.csv", index_label="model")  # its column chosen marks the choice
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
    stale = sorted(earlier - {p.name for p in written} - set(later))
    if stale:
        print(
            f"pyrater: warning: {out} still holds {', '.join(stale)} from an earlier run, which this run did not "
            "write: they do not describe this fit (remove them, or give each run its own --out)",
            file=sys.stderr,
        )


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


def _resolve_model(args: argparse.Namespace, K: int, J: int):
    """The model object, with ``--beta-diag``/``--beta-off`` turned into K x K (or per-class) values.

    Its priors are resolved for ``K`` categories and ``J`` raters before any
    fitting (see :func:`_checked_model`): a prior of the wrong shape or value
    in the ``--priors`` file is refused naming the file.
    """
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
            try:
                beta = np.array(options.get("beta", base), dtype=float)
            except (TypeError, ValueError):
                raise CLIError(f"--priors {args.priors}: beta must be numbers; got {options['beta']!r}") from None
            if beta.shape != (K, K):
                raise CLIError(
                    f"--beta-diag/--beta-off need a (K, K) = ({K}, {K}) beta; the --priors file {args.priors} gives "
                    f"shape {beta.shape}"
                )
            eye = np.eye(K, dtype=bool)
            if diag is not None:
                beta[eye] = diag
            if off is not None:
                beta[~eye] = off
            options["beta"] = beta
    return _checked_model(cls, options, args, K, J)


def _checked_model(cls: type, options: dict[str, Any], args: argparse.Namespace, K: int, J: int):
    """``cls(**options)`` with its priors resolved for ``K`` categories and ``J`` raters, before any fitting.

    With a ``--priors`` file, an error of the priors (a shape or value the
    model refuses) names ``--priors FILE``; the model's defaults are
    resolved first, so an error that is the data's (the ordinal model on
    two categories) keeps its own message.  The Python API's messages are
    unchanged: only the command line adds the file.

    Parameters
    ----------
    cls : type
        The model family's class.
    options : dict
        Its arguments: the ``--priors`` file's, then the prior flags'.
    args : argparse.Namespace
        The command's arguments (``args.priors``: the file, if any).
    K, J : int
        Categories and raters of the data.

    Returns
    -------
    model object

    Raises
    ------
    CLIError
        ``--priors FILE: <the model's message>``.
    """
    path = getattr(args, "priors", None)
    if not path:
        return cls(**options)
    cls().priors(K, J)  # the defaults: an error here is not the file's
    try:
        model = cls(**options)
        model.priors(K, J)
    except ValueError as exc:
        raise CLIError(f"--priors {path}: {exc}") from None
    return model


def _check_known(known: pd.Series | None, data: RatingData, path_text: str | None) -> None:
    """``--known FILE``'s items and classes checked against the ratings before any fitting.

    An item not in the ratings file, a class not among its categories or an
    item given twice is refused with the reader's message after
    ``--known FILE:`` (the fit would raise it without naming the file).

    Raises
    ------
    CLIError
    """
    if known is None:
        return
    try:
        data.known_codes(known)
    except ValueError as exc:
        raise CLIError(f"--known {path_text}: {exc}") from None


def _read_known(path_text: str | None) -> pd.Series | None:
    """``--known FILE``: a CSV of items of known class, columns ``item,label`` (or the first two)."""
    if not path_text:
        return None
    path = Path(path_text)
    df = _read_table(path, "--known", "(item, label) rows")
    cols = ["item", "label"] if {"item", "label"} <= set(df.columns) else list(df.columns[:2])
    if len(cols) < 2:
        raise CLIError(f"--known {path}: expected two columns item,label; found {list(df.columns)}")
    df = _id_columns_as_text(df, path, [cols[0]])  # 001 stays 001, as in the ratings file
    if df.empty:
        raise CLIError(f"--known {path}: the file has a header and no rows; give item,label rows, or leave out --known")
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


def _fit_method(args: argparse.Namespace) -> str:
    """The method as ``pyrater.fit`` names it: ``em`` for both EM flavours (``em-ml`` is a command-line name)."""
    method = _method(args)
    return "em" if method == "em-ml" else method


def _fit(data: RatingData, args: argparse.Namespace, known: pd.Series | None = None):
    """Fit as the arguments say; ``known``: the items of known class (``--known``, read by the caller)."""
    from .fitting import fit
    from .inference.em.algorithm import em

    method = _method(args)
    if args.model == "auto":
        return _fit_auto(data, args, method, known)
    model = _resolve_model(args, data.n_categories, data.n_raters)
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
    kwargs = {"seed": args.seed, "known": known, **_memory_options(args, method), **_sampler_options(args)}
    if method in ("mcmc", "gibbs", "pathfinder") and getattr(args, "save_fit", None) is None:
        # the command line's outputs need no per-item log-likelihood (no LOO); a fit saved with --save-fit
        # keeps it, as pyrater.fit does, so that the file is the fit Python gives and LOO reads it from the file
        kwargs["log_lik"] = False
    if method == "optimize" and args.restarts is not None:
        kwargs["n_inits"] = args.restarts + 1
    return fit(data, model, method=cast(Method, method), **kwargs)  # not em / em-ml here: one of METHODS


def _fit_auto(data: RatingData, args: argparse.Namespace, method: str, known: pd.Series | None):
    """``--model auto``: :func:`pyrater.fit` with ``model="auto"`` (each family with its default priors)."""
    from .fitting import fit

    kwargs: dict[str, Any] = {
        "seed": args.seed,
        "known": known,
        **_memory_options(args, method),
        **_sampler_options(args),
    }
    if args.restarts is not None:  # only with --method optimize (_check_model_method)
        kwargs["n_inits"] = args.restarts + 1
    result = fit(data, "auto", method=cast(Method, method), progress=not args.quiet, **kwargs)
    print(result.model_choice.reason, file=sys.stderr)
    return result


def _check_method_options(args: argparse.Namespace, offered: tuple[str, ...] = CLI_METHODS) -> None:
    """Refuse, before reading any data, a method-specific flag the method does not use (nothing is ignored).

    Every method-specific flag defaults to None, so only the flags the user
    gave are checked (and passed on).  The message names the methods that
    take each refused flag among those the command ``offered`` (``fit``:
    every method; ``compare``: :data:`COMPARE_METHODS`), e.g. ``--draws and
    --chains are options of --method mcmc, gibbs, pathfinder; got --method em``.
    """
    method = _method(args)
    refused: dict[tuple[str, ...], list[str]] = {}
    for dest, flag in _METHOD_FLAGS.items():
        if getattr(args, dest, None) is not None and method not in _flag_methods(dest):
            users = tuple(m for m in _flag_methods(dest) if m in offered)
            refused.setdefault(users, []).append(flag)
    if refused:
        parts = [
            f"{' and '.join(flags)} {'is an option' if len(flags) == 1 else 'are options'} "
            f"of --method {', '.join(users)}"
            for users, flags in refused.items()
        ]
        if getattr(args, "ml", False):
            chosen = f"--ml (--method {method})"
        elif args.method is None:
            chosen = f"--method {method} (the default{' with --model auto' if args.model == 'auto' else ''})"
        else:
            chosen = f"--method {method}"
        raise CLIError(f"{'; '.join(parts)}; got {chosen}")
    if getattr(args, "thin", None) is not None and args.thin > _draws(args):
        raise CLIError(
            f"--thin ({args.thin}) must be at most --draws ({_draws(args)}{'' if args.draws else ', the default'}) "
            "so that at least one draw is kept"
        )


def _draws(args: argparse.Namespace) -> int:
    """--draws, or pyrater.fit's default when not given."""
    return args.draws if args.draws is not None else int(METHOD_ARGUMENTS["draws"][1])


def _sampler_options(args: argparse.Namespace) -> dict[str, Any]:
    """pyrater.fit's arguments for the sampler flags given (--engine, --chains, --draws, --warmup, --thin, --pi-moves).

    A flag not given is left out, so pyrater.fit's default stands for it
    (``--warmup`` too: ``--draws 200`` alone warms up as ``pyrater.fit(...,
    draws=200)`` does), and the same settings give the same fit on the
    command line and in Python.  Call :func:`_check_method_options` first:
    this passes on every flag given.

    Parameters
    ----------
    args : argparse.Namespace
        The command's arguments.

    Returns
    -------
    dict
        ``{argument: value}`` for each sampler flag given.
    """
    return {
        dest: getattr(args, dest)
        for dest in ("engine", "chains", "draws", "warmup", "thin", "pi_moves")
        if getattr(args, dest, None) is not None
    }


def _check_model_method(args: argparse.Namespace) -> None:
    """--model and --method that do not go together: said before the file is read."""
    method, fit_method = _method(args), _fit_method(args)
    if args.model == "auto":
        from .checking.choose import AUTO_METHODS

        if method == "em-ml":
            raise CLIError(
                "--ml is not available with --model auto: EM compares its candidates at their posterior modes"
            )
        if method not in AUTO_METHODS:
            raise CLIError(f"--model auto fits its candidates by --method {' or '.join(AUTO_METHODS)}; got {method}")
        if any(getattr(args, name, None) is not None for name in ("priors", "alpha", "beta_diag", "beta_off")):
            raise CLIError("--model auto fits each family with its default priors: drop --priors/--alpha/--beta-*")
        if args.restarts is not None and method != "optimize":
            raise CLIError(f"--restarts is not used by --model auto with --method {method}")
        return
    from .models import get_model

    try:
        family = get_model(args.model)
    except ValueError:
        return  # an unknown model: the parser's choices, or the model's own message later
    if fit_method not in family.methods:
        shown = ", ".join("em, em-ml" if m == "em" else m for m in family.methods)
        raise CLIError(f"--model {args.model} cannot be fitted by --method {method}; its methods are {shown}")


def _cmd_fit(args: argparse.Namespace) -> int:
    _check_method_options(args)
    _check_column_options(args)
    _check_model_method(args)
    _memory_options(args, _fit_method(args))
    out = _check_out(args.out)
    save_to = _check_save_fit(args.save_fit, Path(args.ratings), out)
    data = _read_csv(Path(args.ratings), args.format, args)
    print(f"read {data}", file=sys.stderr)
    known = _read_known(args.known)
    _check_known(known, data, args.known)
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
    if save_to is not None:
        _save_fit(result, save_to)
    _write_outputs(result, out, args.quiet, later=("calibrated_probabilities.csv",) if gold is not None else ())
    if gold is not None:
        _write_calibrated(result, gold, Path(args.gold), out, args.seed)
    return 0


def _read_gold(gold_path: Path, data: RatingData) -> pd.Series:
    """``--gold FILE``: the known classes (item, label), checked against the ratings before any fitting."""
    from .checking.calibration import check_gold

    frame = _read_table(gold_path, "--gold", "(item, label) rows")
    frame = _id_columns_as_text(frame, gold_path, ["item" if "item" in frame.columns else str(frame.columns[0])])
    try:
        gold, _ = check_gold(frame, data.unit_labels, data.categories, what="the ratings file")
    except (TypeError, ValueError) as exc:
        # the command line calibrates with calibrate()'s defaults: say it in its own terms
        text = re.sub(r"^calibrate\(method='[^']*', cv=\d+\) needs", "calibrating on --gold needs", str(exc))
        raise CLIError(f"--gold {gold_path}: {text}") from None
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
    "rank: 0 for the best model. elpd_loo: expected log predictive density of a new item (items left out: "
    "PSIS-LOO for --method mcmc and gibbs, 10-fold cross-validation for em and optimize); higher is better. "
    "elpd_diff, dse: difference from the best model and its standard error. "
    "p_loo: effective number of parameters. se: standard error of elpd_loo. weight: stacking weights; "
    "weight_pbma: pseudo-BMA+ weights, shared evenly by models that predict alike. equivalent: True when "
    "elpd_diff is within 4 or within twice dse of the best. warning: True when the PSIS-LOO estimate of that "
    "model is unreliable (some item has Pareto k above min(1 - 1/log10 S, 0.7) for S draws, 0.57 for 200 "
    "draws, or the Pareto smoothing failed; n_bad_k counts the items above 0.7): treat its elpd_loo with "
    "caution or refit with more draws."
)


def _check_table_out(raw: str | None) -> Path | None:
    """The CSV file ``compare --out raw``, checked before any data is read or fitted; None without the flag.

    Refused: an empty name, a folder, a suffix other than ``.csv``, and a
    file whose folder does not exist or cannot be written.
    """
    if raw is None:
        return None
    if not str(raw).strip():
        raise CLIError("--out is empty; give a CSV file for the comparison table, e.g. --out comparison.csv")
    path = Path(raw)
    if path.is_dir():
        raise CLIError(
            f"--out {path} is a folder; give a CSV file for the comparison table, e.g. {path / 'comparison.csv'}"
        )
    if path.suffix.lower() != ".csv":
        raise CLIError(f"--out {path}: the comparison table is written as CSV; give a file name ending in .csv")
    folder = path.absolute().parent
    if not folder.is_dir():
        raise CLIError(f"--out {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise CLIError(f"--out {path}: cannot write there")
    return path


def _cmd_compare(args: argparse.Namespace) -> int:
    twice = sorted({m for m in args.models if args.models.count(m) > 1})
    if twice:
        raise CLIError(f"--models names {', '.join(twice)} more than once")
    if len(args.models) < 2 - int(args.baseline):
        raise CLIError(
            f"compare needs at least two models (--models), or one with --baseline; got {' '.join(args.models)}"
        )
    from ._quiet import progress_bar
    from .checking.compare import compare
    from .fitting import fit

    _check_column_options(args)
    method = args.method
    _check_method_options(args, offered=COMPARE_METHODS)
    unfit = [name for name in args.models if method not in get_model(name).methods]
    if unfit:
        raise CLIError(
            f"--method {method} cannot fit {', '.join(unfit)}; "
            + "; ".join(
                f"{n} is fitted by --method {', '.join(m for m in COMPARE_METHODS if m in get_model(n).methods)}"
                for n in unfit
            )
        )
    out = _check_table_out(args.out)
    memory = _memory_options(args, method)
    sampler = _sampler_options(args)  # the flags given; pyrater.fit's defaults for the others
    data = _read_csv(Path(args.ratings), args.format, args)
    if not args.quiet:
        print(f"read {data}", file=sys.stderr)
    fits = {}
    with progress_bar(not args.quiet, len(args.models), "fitting models", unit="model") as bar:
        for name in args.models:
            fits[name] = fit(
                data,
                name,
                method=method,
                seed=args.seed,
                progress=False,
                **memory,
                **sampler,
            )
            bar.update()
    table = compare(fits, baseline=args.baseline, progress=not args.quiet)
    if out is not None:
        table.to_csv(out, index_label="model")
        print(f"wrote {out}", file=sys.stderr)
    with pd.option_context("display.width", 120):
        print(table.round(3).to_string())
    if not args.quiet:
        print(COMPARE_NOTE)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .datasets import EXAMPLE_CATEGORIES, example_ratings

    _check_method_options(args)
    _memory_options(args, _fit_method(args))
    out = _check_out(args.out)
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
    p.add_argument("ratings", help="CSV file of ratings ('-': read them from standard input)")
    p.add_argument(
        "--format",
        choices=("long", "wide", "grouped"),
        default="long",
        help="long: item,rater,rating rows; wide: one column per rater; grouped: one row per rating "
        "pattern with a tally column (default long)",
    )
    p.add_argument("--tally", default="n", help="tally column of grouped data (default n)")
    p.add_argument(
        "--item",
        default=None,
        help="item column of long data (default item), or of a wide table (default: a column named item, if any)",
    )
    p.add_argument("--rater", default=None, help="rater column of long data (default rater)")
    p.add_argument(
        "--raters",
        default=None,
        help="comma-separated rater columns of a wide or grouped table, e.g. r1,r2,r3 (default: every column "
        "but the item or tally column); other columns are left out",
    )
    p.add_argument("--rating", default=None, help="rating column of long data (default rating)")
    p.add_argument("--categories", default=None, help="comma-separated category scale, e.g. 1,2,3,4")
    p.add_argument(
        "--sep",
        type=_separator,
        default=",",
        help="the file's field separator: one character, or 'tab' (default ','; Excel in many locales saves ';')",
    )
    p.add_argument(
        "--encoding", default="utf-8", help="the file's text encoding, e.g. latin-1 or cp1252 (default utf-8)"
    )
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


def _add_sampler_options(p: argparse.ArgumentParser, with_method: bool = True) -> None:
    """--engine, --chains, --draws, --warmup: default None (only the flags given are passed on), defaults in the help.

    ``with_method``: the subcommand has --method, and each help names the methods that take the flag.
    """

    def used_by(dest: str) -> str:
        return f"--method {', '.join(_flag_methods(dest))}; " if with_method else ""

    p.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help=f"Stan interface ({used_by('engine')}default {METHOD_ARGUMENTS['engine'][1]}): auto (cmdstanpy when "
        "CmdStan is installed, else pystan), cmdstanpy, pystan",
    )
    p.add_argument(
        "--chains",
        type=_int_at_least(1),
        default=None,
        help=f"MCMC chains{', or Pathfinder paths' if with_method else ''} ({used_by('chains')}default "
        f"{METHOD_ARGUMENTS['chains'][1]})",
    )
    p.add_argument(
        "--draws",
        type=_int_at_least(1),
        default=None,
        help=f"MCMC draws per chain after warmup ({used_by('draws')}default {METHOD_ARGUMENTS['draws'][1]})",
    )
    p.add_argument(
        "--warmup",
        type=_int_at_least(0),
        default=None,
        help=f"MCMC warmup per chain ({used_by('warmup')}default {METHOD_ARGUMENTS['warmup'][1]}, as in "
        "pyrater.fit, whatever --draws is)",
    )


def _add_fit_options(p: argparse.ArgumentParser, default_method: str, known: bool = True) -> None:
    """The model, method, prior and sampler options; ``known``: also ``--known`` (not for the demo's own data)."""
    p.add_argument(
        "--model",
        choices=(*MODEL_NAMES, "auto"),
        default="dawid_skene",
        help="model (default dawid_skene); auto: fit every family the method fits (pooled and community by the "
        "samplers only: their posterior modes over-shrink; the summary lists what was left out and why), compare "
        "them (K-fold for em and optimize, PSIS-LOO for the samplers) beside majority vote, keep the best "
        "(comparison.csv)",
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
        help="extra random starts (--method em, em-ml, optimize): EM restarts (em, em-ml; default 0 besides EM's "
        "own search of starts), or optimize starts beyond the first (default 3)",
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
    if known:
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
    p.add_argument(
        "--save-fit",
        metavar="PATH",
        default=None,
        help="also save the fitted model to PATH, as fit.save(PATH) does in Python (a netCDF-4 file; suffix .nc): "
        "open it later with pyrater.load(PATH) for LOO, posterior predictive checks or the next ratings to "
        "collect; the path is checked before the data are read",
    )
    p.set_defaults(func=_cmd_fit)
    c = sub.add_parser(
        "compare",
        parents=[common],
        help="compare models by expected log predictive density (PSIS-LOO or 10-fold)",
        description="Fit each model by one method and print the comparison table: PSIS-LOO for the samplers "
        "(mcmc, gibbs), 10-fold cross-validation over items for the posterior modes (em, optimize).",
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
    c.add_argument(
        "--method",
        choices=COMPARE_METHODS,
        default="mcmc",
        help="how every model is fitted (default mcmc): mcmc (NUTS in Stan) or gibbs (the Gibbs sampler, for large "
        "data), compared by PSIS-LOO; em or optimize (posterior modes), compared by 10-fold cross-validation "
        "over items",
    )
    c.add_argument(
        "--baseline",
        action="store_true",
        help="add a row for majority vote's vote model (it ignores who rated; scored by 10-fold "
        "cross-validation): a model not clearly above it learns nothing from the raters that predicts the ratings",
    )
    _add_sampler_options(c, with_method=False)
    _add_memory_option(c)
    c.add_argument(
        "--out",
        metavar="FILE.csv",
        default=None,
        help="also write the comparison table to this CSV file (checked before the data are read)",
    )
    c.add_argument("--quiet", action="store_true", help="no progress bars and no explanation of the columns")
    c.set_defaults(func=_cmd_compare)
    d = sub.add_parser(
        "demo",
        parents=[common],
        help="fit the built-in example end to end",
        description="Fit the built-in example and write its tables and plots to --out.",
    )
    _add_fit_options(d, "mcmc", known=False)  # the demo's items are its own: no --known file
    d.set_defaults(func=_cmd_demo, out="pyrater-demo", known=None)
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
#: Python arguments whose values a message names (``engine='cmdstanpy'``) -> (attribute, flag, the flag's choices)
_VALUED_FLAGS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "method": ("method", "--method", CLI_METHODS),
    "engine": ("engine", "--engine", ENGINES),
    "data_format": ("format", "--format", ("long", "wide", "grouped")),
    "model": ("model", "--model", (*MODEL_NAMES, "auto")),
}
#: phrases of pyrater's advice that name flags by what they do (matched before the single words of _FLAGS)
_PHRASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\blonger chains\b", ("warmup", "draws")),  # longer chains: more warmup and draws per chain
    (r"\bchains\s*>=\s*\d+|\bmore chains\b", ("chains",)),
)
#: Python names in pyrater's messages -> what the command line shows instead (a function of the arguments)
_REPLACEMENTS: dict[str, Any] = {
    # --model auto: the comparison table is written to --out (see _write_outputs)
    "fit.model_choice.table": lambda args: shlex.quote(str(Path(args.out) / "comparison.csv")),
}
#: the running command's arguments (what the messages' flags are looked up in)
_ARGS: argparse.Namespace | None = None


def _command_line_terms(text: str, args: argparse.Namespace | None = None) -> str:
    """``text`` with the command line's flags for the Python arguments it names (those this command has).

    Python arguments with a value (``engine='cmdstanpy'``, ``method='gibbs'``)
    get the flag with that value (``--engine cmdstanpy``); phrases such as
    "longer chains" (``--warmup``, ``--draws``) and "chains >= 2"
    (``--chains``) name the flags that do what they say; names of Python
    objects the command line does not have (``fit.model_choice.table``) are
    replaced by what it writes (``OUT/comparison.csv``).  A message that
    already names its command-line form (``command line: ...``) is left as it is.

    Parameters
    ----------
    text : str
        A message of pyrater's Python interface.
    args : argparse.Namespace, optional
        The running command's arguments (default: those of :func:`main`'s run).

    Returns
    -------
    str
        The message, followed by ``(command line: --flag, ...)`` when it names any.
    """
    args = args if args is not None else _ARGS
    if args is None:
        return text
    for name, replacement in _REPLACEMENTS.items():
        if name in text and hasattr(args, "out"):
            text = text.replace(name, replacement(args))
    if "command line" in text:
        return text
    found: list[tuple[int, str]] = []  # (where in the message, the flag), shown in the message's order
    rest = text  # the message without the parts already translated
    for name, (dest, flag, choices) in _VALUED_FLAGS.items():
        for match in re.finditer(rf"\b{name}=(['\"])([^'\"]*)\1", text):
            if hasattr(args, dest) and match.group(2) in choices:
                found.append((match.start(), f"{flag} {match.group(2)}"))
                rest = rest.replace(match.group(0), " " * len(match.group(0)))  # not again as the bare flag
    for pattern, dests in _PHRASES:
        for match in re.finditer(pattern, rest):
            found += [(match.start(), _FLAGS[dest][1]) for dest in dests if hasattr(args, _FLAGS[dest][0])]
        rest = re.sub(pattern, lambda m: " " * len(m.group(0)), rest)
    for name, (dest, flag) in _FLAGS.items():  # the Python names, not the flags a message may name (--draws)
        word = re.search(rf"(?<!-)\b{name}\b", rest)
        if word and hasattr(args, dest):
            found.append((word.start(), flag))
    flags = list(dict.fromkeys(flag for _, flag in sorted(found, key=lambda f: f[0])))  # each once
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


def _subcommand_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of the subcommand ``command`` (``fit``, ``compare``, ``demo``)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return cast(argparse.ArgumentParser, sub.choices[command])


def _parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``, but unknown arguments are reported by the subcommand, with close matches.

    argparse reports them with the top-level usage (``usage: pyrater [-h]
    ...``); here the subcommand's parser exits with status 2 after printing
    its own usage and ``unrecognized arguments: --chians 2 (did you mean
    --chains?)``.
    """
    args, extras = parser.parse_known_args(argv)
    if not extras:
        return args
    sub = _subcommand_parser(parser, args.command)
    options = [o for action in sub._actions for o in action.option_strings if o.startswith("--")]
    close: dict[str, str] = {}  # a misspelt option -> the subcommand's option it is closest to
    for extra in extras:
        name = extra.split("=", 1)[0]
        if name.startswith("-") and name not in ("-", "--"):
            # compared without the dashes, which every option shares
            match = difflib.get_close_matches(name.lstrip("-"), [o[2:] for o in options], n=1, cutoff=0.6)
            if match:
                close[name] = "--" + match[0]
    message = "unrecognized arguments: " + " ".join(extras)
    if len(close) == 1:
        message += f" (did you mean {next(iter(close.values()))}?)"
    elif close:
        message += " (" + "; ".join(f"{name}: did you mean {match}?" for name, match in close.items()) + ")"
    sub.error(message)  # exits with status 2


@_one_line_warnings
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    global _ARGS
    parser = build_parser()
    args = _parse_args(parser, argv)
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
