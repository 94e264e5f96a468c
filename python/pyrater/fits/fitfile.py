"""Fit files: one data-only netCDF4 (HDF5) file per fit, readable without pyrater.

``fit.save(path)`` writes, and :func:`load_fit` (``pyrater.load``) reads back,
every fit class (EM, optimisation, MCMC and any other draws-based fit)
without pickle: a file holds numbers, text and one JSON block, never code.
What a file can and cannot do to the machine that loads it is summarised in
the repository's ``SECURITY.md``.

Layout (format ``"pyrater-fit"``, version :data:`FORMAT_VERSION`)
--------------------------------------------------------------------
Root attributes
    ``pyrater_fit``: the JSON settings block (below) and
    ``pyrater_fit_sha256``, the SHA-256 of its text; ``format``,
    ``format_version``, ``model``, ``method``, ``inference_library``.
``/posterior``
    ArviZ's posterior group, dims ``(chain, draw, ...)`` named as in
    :meth:`Fit.to_inference_data` with the user's labels as coordinates:
    the draws (MCMC and other draws-based fits) or the estimate as a single
    draw (EM, optimisation).
``/log_likelihood``, ``/sample_stats``
    Draws-based fits: ``log_lik[chain, draw, item]`` (per item, so ``az.loo``
    works on the file) and the sampler statistics.
``/observed_data``
    The ratings in long form (``item_obs``, ``rater_obs``, ``rating_obs``),
    for ArviZ readers; :func:`load_fit` does not read it.
``/rating_data``
    The rating data exactly: 0-based codes ``unit_code``, ``rater_code``,
    ``rating_code`` per rating (dim ``rating_index``) into the ``unit``,
    ``rater`` and ``category`` coordinates, and ``tally[unit]`` (1 per item for
    long data, the pattern tally for grouped data: the grouped table in long form).
``/unit_log_likelihood``
    Grouped draws-based fits only: ``log_lik[chain, draw, unit]`` per pattern
    (what :func:`load_fit` reads; the per-item ``/log_likelihood`` of grouped
    data repeats it by the tallies for ArviZ readers).
``/fit_state``
    The fit's other array attributes (EM's ``class_probs``, ``log_lik_trace``,
    ...; the optimiser's ``converged``), one variable each; for a draws-based
    fit whose Rao-Blackwellised class probabilities were computed (a Gibbs fit
    always: the sampler sums them), ``rb_class_probs[unit, category]``, so a
    loaded fit answers ``class_probabilities()`` without a pass over the draws.

The JSON block holds ``format``, ``format_version``, ``method``, ``class``,
``model`` (name and prior arguments), ``priors`` (resolved hyperparameters as
arrays), ``engine``, ``seed``, ``settings``, ``known_items``
(``{item: category}``), ``versions`` (pyrater, Python, numpy, pandas, xarray,
ArviZ, Stan engine), ``data`` (the exact label values and their types),
``layout`` (which variables hold the fit's arrays), ``fields`` (the fit's
remaining attributes) and, for a fit chosen by ``fit(data, "auto")``,
``model_choice`` (``chosen``, ``reason``, the comparison ``table`` as
``index``/``columns``/``data`` with NaN as null, ``skipped``,
``prior_scale``; not the candidates' fits).  Arrays inside the JSON block are
``{"__ndarray__": dtype, "shape": [...], "data": [...]}``; non-finite floats
are written as Python's ``json`` writes them (``NaN``, ``Infinity``).

Encoding and size
-----------------
Every numeric variable is chunked (chunks of at most :data:`CHUNK_BYTES`,
whole draws along ``(chain, draw)``) and carries an HDF5 Fletcher-32
checksum, so a damaged file is detected when read.  Integer and boolean
variables (rating codes, tallies, sampler flags) are compressed (byte
shuffle and deflate level 1: a rating code takes about a byte); floating
point variables are stored as they are, 8 bytes a number: posterior draws
are noise in their low bits, and deflate saved 14% of their size at ten
times the writing time (``bench/RESULTS_fitfile.md``).  So the size of a
fit file is predictable: about

    8 x (chains x draws x numbers per draw)  +  8 x chains x draws x units (log_lik, when the fit keeps it)
    +  8 x units x K (the class probabilities, when computed)  +  ~3 bytes per rating
    +  the labels and the JSON block,

where the numbers per draw are ``K + J*K*K`` for Dawid-Skene (plus the
model's own parameters), so a Gibbs fit of 10^6 ratings by 1,000 raters with
K = 5, 4 chains x 1,000 draws, is a 0.8 GB file.  Mode fits (EM, optimisation)
hold one estimate and the class probabilities (``8 x I x K`` bytes).

Loading
-------
:func:`load_fit` reads only the groups and variables the fit needs (never
``/observed_data`` nor the per-item log-likelihood of grouped data), through
h5py and without xarray, and trusts nothing in the file:

* the path must be a regular file (a FIFO, device or directory is refused
  without blocking);
* links to other files, external raw storage, virtual datasets and filters
  other than deflate, shuffle and Fletcher-32 are refused before any read;
* every variable's shape must follow from the file's own dimensions
  (chains and draws of ``pi``; units, raters and categories of the labels;
  ratings of the codes), its dtype must be what the format writes, and the
  bytes of everything to be read must fit in ``max_memory_gib`` (default
  :data:`DEFAULT_LOAD_GIB`) before anything is read; large variables are
  read in blocks, each checked before the next is read, so a declared size
  that the data do not back costs no more than one block;
* the parts are checked against each other: label counts and coordinates,
  labels unique, codes within their ranges, tallies non-negative, known
  classes valid, draws and estimates finite (``pi`` and ``theta`` on the
  simplex), priors of the shapes the model gives for the data's K and J,
  settings of the declared types, the JSON block against its checksum;
* any exception while reading becomes one :class:`FitFileError` naming the
  file, the part and the problem.

Lazy loading (the default, ``lazy=True``): the settings block, the rating
data, ``pi``, the sampler statistics and the fit's state are read and checked
at once, and so is everything about the large per-draw arrays (``theta``,
``log_lik``, the model's own parameters) except their values: structure,
dtype, shape and declared size against the memory limit.  Their values are
read, and checked as above, when the fit first uses them (the fit's
``draws`` is then a :class:`~pyrater.fits._lazy.LazyDraws` mapping).  Such
a read reopens the file and refuses it with :class:`FitFileError` if it has
changed (device, inode, size or modification time) or gone since the load.
``lazy=False`` reads everything at once.

New fit classes
---------------
:func:`load_fit` finds the class of a file by its ``method`` in a small
registry (:func:`register_fit_class`), else by the class path recorded in the
file, imported only from ``pyrater.fits`` or ``pyrater.contrib``.  A fit
class must be a dataclass whose fields are ``data``, ``model``, ``draws`` /
``sample_stats`` (dicts of ``(chain, draw, ...)`` arrays) or ``params`` (dict
of arrays), and otherwise arrays or JSON-able values: then it round-trips
with no code here (at most a one-line ``register_fit_class(method, Class)``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import json
import math
import os
import pickle
import platform
import re
import stat
import warnings
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, Final, NoReturn, TypeGuard, cast

import numpy as np
import pandas as pd
import xarray as xr

from .._stacklevel import user_stacklevel
from .._validation import GIB, memory_limit
from ..data.ratings import RatingData
from ._lazy import LazyDraws

__all__ = [
    "FitFileError",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "DEFAULT_LOAD_GIB",
    "CHUNK_BYTES",
    "save_fit",
    "load_fit",
    "register_fit_class",
]

FORMAT_NAME = "pyrater-fit"
FORMAT_VERSION = 1
_ENGINE: Final = "h5netcdf"
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

#: at most this many bytes per chunk of a stored variable
CHUNK_BYTES = 4 * 2**20
#: what :func:`load_fit` may allocate for a file's arrays when ``max_memory_gib`` is None: files written
#: under the default budgets (1 GiB of draws, see ``pyrater._validation``) stay well below it
DEFAULT_LOAD_GIB = 4.0
#: variables larger than this are read in blocks, each checked before the next is read
_READ_BLOCK = 32 * 2**20
#: the JSON block may be at most this many characters (a fit of 10^7 items with text labels writes ~200 MB)
_MAX_JSON_CHARS = 512 * 2**20
#: nesting depth of the JSON block's values that the reader follows (pyrater writes at most 4)
_MAX_JSON_DEPTH = 32
#: deflate expands at most ~1032-fold: a variable declaring more bytes than this many times what it stores is refused
#: (HDF5 fills chunks never written with a fill value: a small file could otherwise declare gigabytes)
_MAX_EXPANSION = 1100
#: parsing the JSON block takes at most about this many bytes a character (counted against the memory limit)
_JSON_SHARE = 16
#: chunks smaller than this (for variables larger than it) make reading slow: refused
_MIN_CHUNK_BYTES = 1024
#: chunks larger than this are not written by pyrater or by h5py's defaults: refused
_MAX_CHUNK_BYTES = 256 * 2**20
#: HDF5 filters the reader lets run: deflate (1), shuffle (2), Fletcher-32 (3)
_ALLOWED_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32"}
#: a simplex's entries may sum to 1 within this (draws are written to the last bit; CmdStan at 18 digits)
_SIMPLEX_TOL = 1e-6
#: a draws fit's cached Rao-Blackwellised class probabilities (attribute) and where a file keeps them
_RB_CACHE = "_rb_probs"
_RB_STATE = "rb_class_probs"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,127}$")
_CLASS_RE = re.compile(r"^pyrater\.(fits|contrib)(\.[A-Za-z_][A-Za-z0-9_]*)+:[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_DTYPES = {
    "int64",
    "int32",
    "int16",
    "int8",
    "uint64",
    "uint32",
    "uint16",
    "uint8",
    "float64",
    "float32",
    "bool",
    "object",
    "str",
    "string",
    "string[python]",
}

#: method -> fit class, or "module:Class" (imported when first needed).
_FIT_CLASSES: dict[str, Any] = {
    "mcmc": "pyrater.fits.mcmc:MCMCFit",
    "optimize": "pyrater.fits.optimize:OptimizeFit",
    "em_ml": "pyrater.fits.em:EMFit",
    "em_map": "pyrater.fits.em:EMFit",
    "pathfinder": "pyrater.fits.pathfinder:PathfinderFit",
    "gibbs": "pyrater.fits.gibbs:GibbsFit",
}

# fields with their own place in the file
_DRAWS, _STATS, _PARAMS = "draws", "sample_stats", "params"


class FitFileError(ValueError):
    """A file that :func:`pyrater.load` cannot turn into a fit, with the reason.

    The message names the file, the part of it (group, variable, JSON key)
    and the problem.
    """


class _Bad(ValueError):
    """A problem found by a check of the reader: its text is the problem, the reader adds the file and part."""


def register_fit_class(method: str, cls: Any) -> None:
    """Make fits whose ``method`` is ``method`` loadable as ``cls``.

    Parameters
    ----------
    method : str
        The fit's ``method`` attribute (``"gibbs"``, ``"pathfinder"``, ...).
    cls : type or str
        A dataclass subclass of :class:`pyrater.Fit` (or ``"module:Class"``)
        following the field conventions in this module's docstring.
    """
    if not isinstance(method, str) or not method:
        raise ValueError(f"method must be a non-empty string; got {method!r}")
    _FIT_CLASSES[method] = cls


def _import_class(path: str) -> type:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _fit_class(method: Any, class_path: Any) -> type:
    from .base import Fit

    if not isinstance(method, str):
        raise _Bad(f"the method {method!r} is not a string")
    target = _FIT_CLASSES.get(method)
    if target is None and isinstance(class_path, str) and _CLASS_RE.match(class_path):
        target = class_path  # a pyrater class not (yet) in the registry: imported from pyrater.fits/contrib only
    if target is None:
        raise _Bad(
            f"fits by method {method!r} are not known to this pyrater (known: {sorted(_FIT_CLASSES)}); "
            "upgrade pyrater, or register the class with pyrater.fits.fitfile.register_fit_class"
        )
    try:
        cls = _import_class(target) if isinstance(target, str) else target
    except (ImportError, AttributeError) as exc:
        raise _Bad(f"the fit class {target!r} for method {method!r} cannot be imported: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Fit) and dataclasses.is_dataclass(cls)):
        raise _Bad(f"{target!r} is not a dataclass subclass of pyrater.Fit")
    if isinstance(class_path, str) and class_path != target and _CLASS_RE.match(class_path):
        # a pyrater subclass of the method's class (a family's own fit, e.g. item_difficulty's) loads as itself
        try:
            own = _import_class(class_path)
        except (ImportError, AttributeError):
            return cls
        if isinstance(own, type) and issubclass(own, cls):
            return own
    return cls


# ------------------------------------------------------------------ JSON values
def _to_json(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{where}: arrays of dtype {value.dtype} cannot be saved")
        return {"__ndarray__": value.dtype.str, "shape": list(value.shape), "data": value.ravel().tolist()}
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise TypeError(f"{where}: dict keys must be strings to be saved; got {bad[:3]}")
        return {k: _to_json(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"{where}: a {type(value).__name__} cannot be saved in a fit file")


def _json_array(value: dict[str, Any]) -> np.ndarray:
    """An ``{"__ndarray__": ...}`` value of the JSON block, checked (numeric dtype, shape matching the data)."""
    dtype = np.dtype(value["__ndarray__"]) if isinstance(value["__ndarray__"], str) else None
    if dtype is None or dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise ValueError(f"array dtype {value['__ndarray__']!r} is not a numeric dtype of at most 8 bytes")
    shape = value.get("shape")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape) or len(shape) > 32:
        raise ValueError(f"array shape {shape!r} is not a list of non-negative integers")
    data = value.get("data")
    if not isinstance(data, list) or len(data) != math.prod(shape):
        raise ValueError(f"array data do not hold the {math.prod(shape)} values of shape {tuple(shape)}")
    if not all(type(v) in (int, float, bool) for v in data):
        raise ValueError("array data hold values that are not numbers")
    return np.asarray(data, dtype=dtype).reshape(shape)


def _from_json(value: Any, depth: int = 0) -> Any:
    if depth > _MAX_JSON_DEPTH:
        raise ValueError(f"values nested deeper than {_MAX_JSON_DEPTH} levels")
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return _json_array(value)
        return {k: _from_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v, depth + 1) for v in value]
    return value


# ------------------------------------------------------------------- labels
def _label_value(v: Any) -> tuple[str, Any]:
    if isinstance(v, (bool, np.bool_)):
        return "bool", bool(v)
    if isinstance(v, (int, np.integer)):
        return "int", int(v)
    if isinstance(v, (float, np.floating)):
        return "float", float(v)
    if isinstance(v, str):
        return "str", v
    raise TypeError(
        f"label {v!r} of type {type(v).__name__} cannot be saved in a fit file (labels must be strings or "
        "numbers); relabel the data, e.g. with string labels"
    )


def _index_to_json(index: pd.Index) -> dict[str, Any]:
    name = index.name
    out: dict[str, Any] = {"name": name if name is None or isinstance(name, (str, int, float)) else str(name)}
    if isinstance(index, pd.RangeIndex):
        out["range"] = [int(index.start), int(index.stop), int(index.step)]
        return out
    typed = [_label_value(v) for v in index]
    out["dtype"] = str(index.dtype)
    out["types"] = sorted({t for t, _ in typed})
    if len(out["types"]) > 1:  # keep each value's own type
        out["values"] = [[t, v] for t, v in typed]
    else:
        out["values"] = [v for _, v in typed]
    return out


_LABEL_TYPES: dict[str, type] = {"bool": bool, "int": int, "float": float, "str": str}


def _index_from_json(spec: Any) -> pd.Index:
    """The labels of a JSON index spec, checked: plain scalar labels, a known dtype, no repeats."""
    if not isinstance(spec, dict):
        raise ValueError(f"the label spec is a {type(spec).__name__}, not an object")
    name = spec.get("name")
    if name is not None and type(name) not in (str, int, float):
        raise ValueError(f"the label name {name!r} is not a string or number")
    if "range" in spec:
        rng = spec["range"]
        if not (isinstance(rng, list) and len(rng) == 3 and all(type(v) is int for v in rng) and rng[2] != 0):
            raise ValueError(f"the label range {rng!r} is not [start, stop, step] with integers and step != 0")
        return pd.RangeIndex(*rng, name=name)
    values = spec.get("values")
    if not isinstance(values, list):
        raise ValueError("the labels are missing (no 'values' list)")
    types = spec.get("types", [])
    if not isinstance(types, list) or not all(t in _LABEL_TYPES for t in types):
        raise ValueError(f"the label types {types!r} are not among {sorted(_LABEL_TYPES)}")
    if len(types) > 1:
        out = []
        for item in values:
            if not (isinstance(item, list) and len(item) == 2 and item[0] in _LABEL_TYPES):
                raise ValueError(f"the typed label {item!r} is not [type, value]")
            t, v = item
            if not _json_scalar_of(v, t):
                raise ValueError(f"the label {v!r} is not of its declared type {t!r}")
            out.append(_LABEL_TYPES[t](v))
        index = pd.Index(out, dtype=object, name=name)
    else:
        if not all(type(v) in (str, int, float, bool) for v in values):
            raise ValueError("the labels hold values that are not strings or numbers")
        dtype = spec.get("dtype")
        if dtype is not None and dtype not in _LABEL_DTYPES:
            raise ValueError(f"the label dtype {dtype!r} is not one pyrater writes")
        try:
            index = pd.Index(values, dtype=dtype, name=name)
        except (TypeError, ValueError, OverflowError):
            index = pd.Index(values, name=name)
    if index.has_duplicates:
        raise ValueError(f"labels repeat: {list(index[index.duplicated()].unique()[:5])}")
    if index.hasnans:
        raise ValueError("labels hold a missing value (NaN)")
    return index


def _json_scalar_of(v: Any, t: str) -> bool:
    if t == "bool":
        return type(v) is bool
    if t == "int":
        return type(v) is int
    if t == "float":
        return type(v) in (int, float)
    return type(v) is str


def _index_length(spec: Any) -> int:
    """How many labels a JSON index spec declares (without building a huge index)."""
    if isinstance(spec, dict) and isinstance(spec.get("range"), list) and len(spec["range"]) == 3:
        start, stop, step = spec["range"]
        if all(type(v) is int for v in (start, stop, step)) and step != 0:
            return len(range(start, stop, step))
    if isinstance(spec, dict) and isinstance(spec.get("values"), list):
        return len(spec["values"])
    raise ValueError("the label spec declares no labels ('range' or 'values')")


def _storable(values: Any) -> np.ndarray:
    """Coordinate/label values netCDF can hold: numbers or strings (mixed types become strings)."""
    arr = np.asarray(values)
    if arr.dtype.kind in "biufU":
        return arr
    kinds = {type(v) for v in arr.ravel()}
    if kinds <= {int, np.int64, np.int32} and arr.size:
        return arr.astype(np.int64)
    if kinds <= {float, int, np.float64, np.int64} and arr.size:
        return arr.astype(np.float64)
    return np.asarray([str(v) for v in arr.ravel()], dtype=object).reshape(arr.shape)


def _storable_dataset(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with object/text variables and coordinates turned into :func:`_storable` arrays."""
    coords: dict[Hashable, tuple[Any, np.ndarray]] = {}
    variables: dict[Hashable, tuple[Any, np.ndarray]] = {}
    for name, var in ds.variables.items():
        if var.dtype == object or var.dtype.kind == "U":
            target = coords if name in ds.coords else variables
            target[name] = (var.dims, _storable(var.values))
    return ds.assign_coords(coords).assign(variables)


# --------------------------------------------------------------------- save
def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for dist in ("pyrater", "numpy", "pandas", "xarray", "arviz", "h5netcdf", "pystan", "httpstan", "cmdstanpy"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return out


def _data_groups(data: RatingData) -> tuple[xr.Dataset, dict[str, Any]]:
    ds = xr.Dataset(
        {
            "unit_code": ("rating_index", np.asarray(data.unit, dtype=np.int64)),
            "rater_code": ("rating_index", np.asarray(data.rater, dtype=np.int64)),
            "rating_code": ("rating_index", np.asarray(data.rating, dtype=np.int64)),
            "tally": ("unit", np.asarray(data.weight, dtype=np.int64)),
        },
        coords={
            "unit": _storable(np.asarray(data.unit_labels, dtype=object)),
            "rater": _storable(np.asarray(data.rater_labels, dtype=object)),
            "category": _storable(np.asarray(data.categories, dtype=object)),
        },
        attrs={
            "description": "ratings as 0-based codes into the unit, rater and category coordinates; "
            "tally = items per unit (1 for long data, the pattern count for grouped data)",
            "source_format": data.source_format,
        },
    )
    spec = {
        "source_format": data.source_format,
        "columns": _to_json(dict(data._columns), "data columns"),
        "unit_labels": _index_to_json(data.unit_labels),
        "rater_labels": _index_to_json(data.rater_labels),
        "categories": _index_to_json(data.categories),
    }
    return ds, spec


def _model_to_json(model: Any) -> dict[str, Any]:
    params = {f.name: _to_json(_plain(getattr(model, f.name)), f"model.{f.name}") for f in dataclasses.fields(model)}
    return {"name": model.name, "title": model.title, "params": params}


def _plain(value: Any) -> Any:
    """Prior arguments as given (lists, scalars, arrays) in a JSON-able form."""
    if isinstance(value, (list, tuple)):
        return np.asarray(value, dtype=float)
    return value


def _known_items(fit: Any) -> dict[str, Any] | None:
    known = getattr(fit, "known", None)
    if known is None:
        return None
    data = fit.data
    codes = np.asarray(known)
    units = np.flatnonzero(codes >= 0)
    return {str(data.unit_labels[u]): _label_value(data.categories[codes[u]])[1] for u in units}


def _chunks(shape: tuple[int, ...], itemsize: int, target: int = CHUNK_BYTES) -> tuple[int, ...] | None:
    """Chunk shape of at most ``target`` bytes: whole trailing axes, as many leading entries as fit.

    For ``(chain, draw, ...)`` arrays a chunk is a run of whole draws of one chain.
    """
    if not shape or 0 in shape:
        return None
    chunk = [1] * len(shape)
    size = itemsize
    for axis in range(len(shape) - 1, -1, -1):
        if size * shape[axis] <= target:
            chunk[axis] = shape[axis]
            size *= shape[axis]
        else:
            chunk[axis] = max(1, target // size)
            break
    return tuple(chunk)


def _encoding(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """Per-variable netCDF encoding: chunked, checksummed; integers and booleans compressed, floats as they are."""
    out: dict[str, dict[str, Any]] = {}
    for name, var in ds.data_vars.items():
        kind = var.dtype.kind
        if kind not in "biuf" or var.size == 0:
            continue
        itemsize = 1 if kind == "b" else var.dtype.itemsize
        enc: dict[str, Any] = {"fletcher32": True, "chunksizes": _chunks(var.shape, itemsize)}
        if kind in "biu":
            enc.update(zlib=True, complevel=1, shuffle=True)
        else:
            enc.update(zlib=False, shuffle=False)
        out[str(name)] = enc
    return out


def _choice_to_json(choice: Any) -> dict[str, Any]:
    """The JSON of an "auto" fit's model choice: chosen, reason, table (split layout, NaN as null), skipped, scales."""

    def cell(v: Any) -> Any:
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            return float(v) if np.isfinite(v) else None
        return None if v is None else str(v)

    table = choice.table
    return {
        "chosen": str(choice.chosen),
        "reason": str(choice.reason),
        "table": {
            "index": [str(i) for i in table.index],
            "columns": [str(c) for c in table.columns],
            "data": [[cell(v) for v in row] for row in table.itertuples(index=False, name=None)],
        },
        "skipped": {str(k): str(v) for k, v in choice.skipped.items()},
        "prior_scale": {str(k): float(v) for k, v in choice.prior_scale.items()},
    }


def _str_list(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


#: suffixes that name another file format than a fit file's (netCDF4/HDF5)
_OTHER_FORMATS = {
    ".pkl": "a pickle",
    ".pickle": "a pickle",
    ".joblib": "a joblib pickle",
    ".csv": "a CSV table",
    ".tsv": "a tab-separated table",
    ".txt": "a text file",
    ".json": "JSON",
    ".npy": "a numpy array",
    ".npz": "a numpy archive",
    ".parquet": "a Parquet table",
    ".feather": "a Feather table",
    ".xlsx": "an Excel workbook",
    ".zarr": "a Zarr store",
}


def _check_suffix(path: Path) -> None:
    """Warn when ``path``'s suffix names another format than the netCDF4/HDF5 file that is written."""
    kind = _OTHER_FORMATS.get(path.suffix.lower())
    if kind is not None:
        warnings.warn(
            f"{str(path)!r} will be a netCDF4/HDF5 fit file, not {kind} as its suffix {path.suffix!r} suggests: "
            f"load it with pyrater.load (or az.from_netcdf); the suggested suffix is '.nc'",
            UserWarning,
            stacklevel=user_stacklevel(),
        )


def _check_target(path: Path) -> None:
    """Refuse, before anything is written, a path the fit cannot be saved to: a folder, or one in no folder."""
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give a file name for the fit, e.g. {path / 'fit.nc'}")
    if not path.parent.is_dir():
        raise FileNotFoundError(
            f"cannot save the fit to {path}: no folder {path.parent} (create it first, e.g. "
            f"Path({str(path.parent)!r}).mkdir(parents=True))"
        )


def save_fit(fit: Any, path: str | Path, *, log_lik: bool = True) -> Path:
    """Write ``fit`` to ``path`` (see the module docstring); returns the path.

    Parameters
    ----------
    fit : Fit
    path : str or Path
    log_lik : bool
        Store the per-unit log-likelihood the fit keeps (default): the file
        loads as the same fit, and ``az.loo`` works on it.  ``False`` leaves
        it out (``8 x chains x draws x units`` bytes less): the loaded fit is
        then one fitted with ``log_lik=False``, and ``pyrater.loo``
        recomputes it from the draws (equal to rounding, not to the bit).

    The file is written beside ``path`` under a temporary name and moved into
    place when complete, so ``path`` never holds a half-written fit.
    """
    if not isinstance(log_lik, (bool, np.bool_)):
        raise ValueError(f"log_lik must be True or False, got {log_lik!r}")
    if not dataclasses.is_dataclass(fit):
        raise TypeError(f"only dataclass fits can be saved; got {type(fit).__name__}")
    fit = cast(Any, fit)  # undo is_dataclass's narrowing: the attributes used below are the fit's own
    cls = type(fit)
    method = fit.method
    registered = _FIT_CLASSES.get(method)
    if registered is None and cls.__module__.split(".")[0] != "pyrater":
        raise ValueError(
            f"no fit class is registered for method {method!r}: call "
            f"pyrater.fits.fitfile.register_fit_class({method!r}, {cls.__name__}) so the file can be loaded"
        )
    path = Path(path)
    _check_target(path)
    _check_suffix(path)
    data: RatingData = fit.data
    groups: dict[str, xr.Dataset] = {}
    fields_json: dict[str, Any] = {}
    state: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
    layout: dict[str, Any] = {}
    field_names = [f.name for f in dataclasses.fields(fit) if f.init]
    for name in field_names:
        value = getattr(fit, name)
        if name in ("data", "model"):
            continue
        if name == _DRAWS:
            draws = {k: np.asarray(v) for k, v in value.items()}
            groups["posterior"] = fit._dataset({k: v for k, v in draws.items() if k != "log_lik"})
            layout["draws"] = list(draws)
            ll = draws.get("log_lik")
            if ll is not None and not log_lik:
                ll = np.zeros((*ll.shape[:-1], 0))  # left out: as a fit that did not keep it
            if ll is not None and ll.shape[-1] > 0:
                groups["log_likelihood"] = fit._dataset(
                    {"log_lik": np.repeat(ll, data.weight, axis=-1) if data.is_grouped else ll}
                )
                if data.is_grouped:
                    groups["unit_log_likelihood"] = xr.Dataset({"log_lik": (("chain", "draw", "unit"), ll)})
                layout["log_lik"] = "unit_log_likelihood" if data.is_grouped else "log_likelihood"
            elif ll is not None:
                layout["log_lik"] = list(ll.shape)  # written without log_lik: an empty array
        elif name == _STATS:
            if value:
                groups["sample_stats"] = fit._dataset({k: np.asarray(v) for k, v in value.items()})
            layout["sample_stats"] = list(value)
        elif name == _PARAMS:
            params = {k: np.asarray(v) for k, v in value.items()}
            groups["posterior"] = fit._dataset({k: v[None, None] for k, v in params.items() if k != "log_lik"})
            layout["params"] = list(params)
            if "log_lik" in params:
                state["params.log_lik"] = (
                    tuple(f"params.log_lik_dim_{i}" for i in range(params["log_lik"].ndim)),
                    params["log_lik"],
                )
        elif isinstance(value, np.ndarray):
            state[name] = (tuple(f"{name}_dim_{i}" for i in range(value.ndim)), value)
        else:
            try:
                fields_json[name] = _to_json(value, f"{cls.__name__}.{name}")
            except TypeError as exc:
                raise TypeError(f"cannot save this fit: {exc}") from None
    rb = fit.__dict__.get(_RB_CACHE)  # Rao-Blackwellised class probabilities a draws fit has computed (or sampled)
    if isinstance(rb, np.ndarray) and rb.shape == (data.n_units, data.n_categories):
        state[_RB_STATE] = ((f"{_RB_STATE}_dim_0", f"{_RB_STATE}_dim_1"), rb)
    if "posterior" not in groups:  # EM and other point fits: the estimate as one draw, for ArviZ readers
        groups["posterior"] = fit._groups()["posterior"]
    groups["observed_data"] = fit._observed_data()
    rating_ds, data_spec = _data_groups(data)
    groups["rating_data"] = rating_ds
    if state:
        groups["fit_state"] = xr.Dataset({k: v for k, v in state.items()})
    # what load must find there, and of what shape (files before 0.2 do not list it)
    layout["state"] = {name: list(np.shape(value)) for name, (_, value) in sorted(state.items())}
    engine = getattr(fit, "engine", None)
    settings = fields_json.get("settings")
    if not isinstance(settings, dict):
        settings = {}
    block = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "method": method,
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "model": _model_to_json(fit.model),
        "priors": _to_json(fit._priors(), "priors"),
        "engine": engine if isinstance(engine, str) else None,
        "seed": settings.get("seed"),
        "settings": settings,
        "known_items": _known_items(fit),
        "versions": _versions(),
        "data": data_spec,
        "layout": layout,
        "fields": fields_json,
    }
    choice = fit.__dict__.get("_model_choice")
    if choice is not None:  # fit(data, "auto"): its reason and table (the candidates' fits are not saved)
        block["model_choice"] = _choice_to_json(choice)
    text = json.dumps(block)
    attrs = {
        "pyrater_fit": text,
        "pyrater_fit_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "inference_library": "pyrater",
        "model": fit.model.name,
        "method": method,
    }
    stored = {name: _storable_dataset(ds) for name, ds in groups.items()}
    tree = xr.DataTree.from_dict({f"/{name}": ds for name, ds in stored.items()})
    tree.attrs = attrs
    encoding = {f"/{name}": _encoding(ds) for name, ds in stored.items()}
    tmp = path.with_name(path.name + ".tmp")
    try:
        tree.to_netcdf(tmp, engine=_ENGINE, encoding=encoding)
        tmp.replace(path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


# --------------------------------------------------------------------- load
def _read_pickle(path: Path, handle: io.BufferedReader, allow_pickle: bool):
    from .base import Fit

    if not allow_pickle:
        raise FitFileError(
            f"{path} is a pickle, the format pyrater 0.1 wrote; pickles can run arbitrary code when read, so "
            "pyrater no longer reads them by default. If you trust the file, convert it once with "
            f"pyrater.load({str(path)!r}, allow_pickle=True).save('fit.nc'), or refit and save again"
        )
    warnings.warn(
        f"reading the pickle {path}: this runs any code the file carries; re-save it with fit.save(...)",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    handle.seek(0)
    obj = pickle.load(handle)
    fit = obj.get("fit") if isinstance(obj, dict) else None
    if not isinstance(fit, Fit):
        raise FitFileError(f"{path} is a pickle but not a pyrater 0.1 fit file")
    return fit


def _open_regular(path: Path) -> io.BufferedReader:
    """Open ``path`` for reading without blocking, refusing anything but a regular file.

    The file is opened first and checked through its descriptor (``fstat``), so
    it cannot be swapped for a FIFO between the check and the read; a FIFO
    opened with ``O_NONBLOCK`` does not wait for a writer.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise FitFileError(f"{path} is a directory, not a fit file") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(mode)
                else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "not a regular file"
            )
            raise FitFileError(f"{path} is {kind}, not a regular file: pyrater reads fit files from regular files only")
        if getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)  # a regular file: ordinary reads from here on
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def load_fit(path: str | Path, allow_pickle: bool = False, *, max_memory_gib: float | None = None, lazy: bool = True):
    """Read a fit written by ``fit.save(path)``.

    Parameters
    ----------
    path : str or Path
        A regular file (FIFOs, devices and directories are refused).
    allow_pickle : bool
        Also read the pickle files of pyrater 0.1.  **Only for files you
        trust**: reading a pickle runs whatever code it carries.  Re-save such
        a fit at once with ``fit.save(...)`` to get a safe file.
    max_memory_gib : float, optional
        The most the file's arrays may take in memory, checked from their
        declared sizes before anything is read (default
        :data:`DEFAULT_LOAD_GIB`); raise it for a file you trust that holds
        more (e.g. a fit kept with a larger ``max_memory_gib``).
    lazy : bool
        Read the large per-draw arrays (``theta``, ``log_lik`` and the
        model's own parameters) when the fit first uses them (default), or
        all of them now (``False``).  Either way everything about them but
        their values (structure, dtype, shape, declared size against
        ``max_memory_gib``) is checked now, and their values when read: a
        lazily loaded fit raises :class:`FitFileError` on first use if its
        draws are damaged, or if the file has changed or gone since it was
        loaded.  ``fit.draws.read_all()`` reads and checks them at once.

    Returns
    -------
    Fit
        The same class as was saved, answering every accessor with the same
        numbers.

    Raises
    ------
    FitFileError
        The file is not a pyrater fit file, is not a regular file, is
        truncated, corrupted or inconsistent (the message names the part),
        needs more than ``max_memory_gib``, comes from a newer format
        version, or is a 0.1 pickle (without ``allow_pickle=True``).
    FileNotFoundError, PermissionError
        No file at ``path``, or no permission to read it.
    """
    path = Path(path)
    limit = DEFAULT_LOAD_GIB if max_memory_gib is None else memory_limit(max_memory_gib)
    if not isinstance(lazy, (bool, np.bool_)):
        raise ValueError(f"lazy must be True or False, got {lazy!r}")
    handle = _open_regular(path)
    try:
        head = handle.read(8)
        if head[:1] == b"\x80":  # pickle protocol >= 2
            return _read_pickle(path, handle, allow_pickle)
        if len(head) == 0:
            raise FitFileError(f"{path} is empty: not a fit file")
        if len(head) < len(_HDF5_SIGNATURE):
            what = "a fit file cut short" if _HDF5_SIGNATURE.startswith(head) else "not a pyrater fit file"
            raise FitFileError(f"{path} holds only {len(head)} bytes: {what} (a fit file is netCDF4/HDF5)")
        if head != _HDF5_SIGNATURE:
            raise FitFileError(f"{path} is not a pyrater fit file (not a netCDF4/HDF5 file)")
        handle.seek(0)
        reader = _Reader(path, limit, lazy=bool(lazy), identity=_identity(handle))
        try:
            return reader.read(handle)
        except FitFileError:
            raise
        except Exception as exc:  # anything at all from h5py, HDF5, numpy, pandas or the fit class
            raise FitFileError(reader.message(exc)) from None
    finally:
        handle.close()


def _identity(handle: io.BufferedReader) -> tuple[int, ...]:
    """(device, inode, size, modification time in ns) of an open file."""
    st = os.fstat(handle.fileno())
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _read_later(
    path: Path,
    limit_gib: float,
    identity: tuple[int, ...],
    group: str,
    name: str,
    shape: tuple[int, ...],
    kinds: str,
    check: Callable[[np.ndarray], str | None] | None,
) -> np.ndarray:
    """Read one variable of a lazily loaded fit, from the file as it was when loaded."""
    import h5py

    where = f"group '{group}', variable '{name}'"
    try:
        handle = _open_regular(path)
    except (FileNotFoundError, PermissionError) as exc:
        raise FitFileError(
            f"{path}: {where}: the file can no longer be read ({type(exc).__name__}); a lazily loaded fit reads its "
            "draws when first used: keep the file, or load with lazy=False (or call fit.draws.read_all()) first"
        ) from None
    try:
        if _identity(handle) != identity:
            raise FitFileError(
                f"{path}: {where}: the file has changed since the fit was loaded; load it again "
                "(a lazily loaded fit reads its draws when first used)"
            )
        reader = _Reader(path, limit_gib)
        reader.part = where
        try:
            with h5py.File(handle, "r") as h5:
                reader.h5 = h5
                return reader.read_array(group, name, shape, kinds, check)
        except FitFileError as exc:
            raise FitFileError(f"{exc} (read on first use, after a lazy load)") from None
        except Exception as exc:  # anything from h5py, HDF5 or numpy
            raise FitFileError(reader.message(exc) + " (read on first use, after a lazy load)") from None
    finally:
        handle.close()


class _Reader:
    """Reads one fit file through h5py, checking every part before it is used (see the module docstring)."""

    def __init__(self, path: Path, limit_gib: float, lazy: bool = False, identity: tuple[int, ...] = ()) -> None:
        self.path = path
        self.limit_gib = limit_gib
        self.lazy = lazy
        self.identity = identity  # the file's (device, inode, size, mtime): what a deferred read must find
        self.part = "the file"
        self.h5: Any = None

    # ---------------------------------------------------------------- errors
    def fail(self, problem: str, part: str | None = None) -> NoReturn:
        raise FitFileError(f"{self.path}: {part or self.part}: {problem}")

    def message(self, exc: BaseException) -> str:
        text = str(exc).strip() or type(exc).__name__
        if isinstance(exc, _Bad):
            problem = text
        elif isinstance(exc, MemoryError):
            problem = f"memory ran out while reading it ({text})"
        elif isinstance(exc, RecursionError):
            problem = "nested too deeply to read"
        elif isinstance(exc, OSError) and "filter" in text.lower():
            problem = f"the file is truncated or corrupted: a checksum or decompression failed ({text})"
        else:
            problem = f"the file is truncated, corrupted or inconsistent ({type(exc).__name__}: {text[:500]})"
        return f"{self.path}: {self.part}: {problem}"

    # ------------------------------------------------------------- the file
    def read(self, handle: io.BufferedReader) -> Any:
        import h5py

        self.part = "the HDF5 structure"
        try:
            h5 = h5py.File(handle, "r")
        except Exception as exc:
            raise FitFileError(
                f"{self.path} cannot be read as a fit file: it is truncated or corrupted ({type(exc).__name__}: {exc})"
            ) from None
        with h5:
            self.h5 = h5
            block = self.block()
            return self.rebuild(block)

    def block(self) -> dict[str, Any]:
        import h5py

        self.part = "the root attribute 'pyrater_fit' (the JSON settings block)"
        h5 = self.h5
        if "pyrater_fit" not in h5.attrs:
            raise FitFileError(
                f"{self.path} is a netCDF/HDF5 file but not a pyrater fit file (no 'pyrater_fit' attribute); "
                "open it with xarray.open_datatree or arviz instead"
            )
        aid = h5.attrs.get_id("pyrater_fit")
        if aid.get_type().get_class() != h5py.h5t.STRING or aid.shape not in ((), (1,)):
            self.fail("it is not a text attribute")
        text = h5.attrs["pyrater_fit"]
        if isinstance(text, np.ndarray):
            text = text.reshape(-1)[0]
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not isinstance(text, str):
            self.fail(f"it holds a {type(text).__name__}, not text")
        if len(text) > _MAX_JSON_CHARS:
            self.fail(f"it holds {len(text):,} characters, more than the {_MAX_JSON_CHARS:,} a fit file may carry")
        self.json_chars = len(text)
        self.reserve(_JSON_SHARE * len(text), self.part)  # what parsing it takes, at most
        try:
            block = json.loads(text)
        except RecursionError:
            self.fail("the settings block is corrupted (nested too deeply)")
        except (TypeError, ValueError) as exc:
            raise FitFileError(f"{self.path}: the pyrater_fit settings block is corrupted ({exc})") from None
        if not isinstance(block, dict) or block.get("format") != FORMAT_NAME:
            found = block.get("format") if isinstance(block, dict) else type(block).__name__
            raise FitFileError(f"{self.path} is not a pyrater fit file (format {found!r})")
        version = block.get("format_version")
        if type(version) is not int:
            raise FitFileError(f"{self.path}: the fit file's format version {version!r} is not an integer")
        if version > FORMAT_VERSION:
            raise FitFileError(
                f"{self.path} was written by a newer pyrater (fit file format version {version}; this pyrater reads "
                f"versions up to {FORMAT_VERSION}): upgrade pyrater to read it"
            )
        digest = h5.attrs.get("pyrater_fit_sha256")  # files of pyrater <= 0.2.0.dev have none
        if digest is not None:
            if isinstance(digest, bytes):
                digest = digest.decode("ascii", "replace")
            if hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() != str(digest):
                self.fail("the settings block does not match its checksum (pyrater_fit_sha256): the file is damaged")
        return block

    # ------------------------------------------------------------ variables
    def group(self, name: str) -> Any:
        import h5py

        link = self.h5.get(name, getlink=True)
        if link is None:
            self.fail(f"group '{name}' is missing", "the fit file is corrupted")
        if not isinstance(link, h5py.HardLink):
            self.fail(f"'{name}' is a link ({type(link).__name__}); fit files hold no links", f"group '{name}'")
        grp = self.h5[name]
        if not isinstance(grp, h5py.Group):
            self.fail("it is not a group", f"group '{name}'")
        return grp

    def dataset(self, group: str, name: str, required: bool = True) -> Any:
        """The h5py dataset ``group/name`` after the structural checks (no data read)."""
        import h5py

        grp = self.group(group)
        where = f"group '{group}', variable '{name}'"
        if not _NAME_RE.match(name):
            self.fail(f"{name!r} is not a variable name", where)
        link = grp.get(name, getlink=True)
        if link is None:
            if not required:
                return None
            self.fail(
                f"variable '{name}' is missing from group '{group}'", f"the fit file is corrupted: group '{group}'"
            )
        if not isinstance(link, h5py.HardLink):
            self.fail(f"it is a link ({type(link).__name__}); fit files hold no links", where)
        ds = grp[name]
        if not isinstance(ds, h5py.Dataset):
            self.fail("it is not a dataset", where)
        plist = ds.id.get_create_plist()
        if ds.is_virtual or plist.get_layout() not in (h5py.h5d.COMPACT, h5py.h5d.CONTIGUOUS, h5py.h5d.CHUNKED):
            self.fail("it is a virtual dataset (data from other files); fit files hold their own data", where)
        if plist.get_external_count():
            self.fail("its data are stored in external files; fit files hold their own data", where)
        for i in range(plist.get_nfilters()):
            code = plist.get_filter(i)[0]
            if code not in _ALLOWED_FILTERS:
                self.fail(
                    f"it needs the HDF5 filter {code}; pyrater reads deflate, shuffle and Fletcher-32 only", where
                )
        for key in ("scale_factor", "add_offset", "_Unsigned", "missing_value", "units", "calendar"):
            if key in ds.attrs:
                self.fail(f"it carries the encoding attribute {key!r}, which pyrater does not write", where)
        return ds

    def dtype_of(self, ds: Any, where: str, kinds: str) -> np.dtype:
        """The dtype to read ``ds`` as (native byte order; ``bool`` for netCDF booleans), checked against ``kinds``."""
        dtype = ds.dtype
        if dtype.kind not in "biuf" or dtype.itemsize > 8 or dtype.fields is not None or dtype.subdtype is not None:
            self.fail(f"its dtype {dtype} is not a plain number type", where)
        marker = ds.attrs.get("dtype")
        if marker is not None:
            if isinstance(marker, bytes):
                marker = marker.decode("ascii", "replace")
            if str(marker) != "bool" or dtype.kind not in "iu":
                self.fail(f"its dtype attribute {marker!r} is not the netCDF boolean marker", where)
            if "b" not in kinds:
                self.fail("it holds booleans where numbers are expected", where)
            return np.dtype(bool)
        if dtype.kind == "f" and "_FillValue" in ds.attrs:
            fill = np.asarray(ds.attrs["_FillValue"])
            if fill.size != 1 or not np.isnan(fill.astype(float)).all():
                self.fail(f"its _FillValue {fill!r} would mask numbers (pyrater writes NaN)", where)
        if dtype.kind not in kinds:
            expected = {"f": "floating point", "iu": "integer", "biuf": "numeric"}.get(kinds, kinds)
            self.fail(f"its dtype {dtype} is not {expected}", where)
        if dtype.itemsize != 8:  # pyrater writes 64-bit numbers only (booleans as 8-bit with the marker above)
            self.fail(f"its dtype {dtype} is not a 64-bit number type, which is what pyrater writes", where)
        return dtype.newbyteorder("=")

    def planned_bytes(self, ds: Any, shape: tuple[int, ...], dtype: np.dtype, where: str) -> int:
        """Checks the stored shape and chunking against ``shape``; returns the bytes reading it takes."""
        if tuple(ds.shape) != tuple(shape):
            self.fail(f"its shape {tuple(ds.shape)} does not match the expected {tuple(shape)}", where)
        nbytes = math.prod(shape) * dtype.itemsize
        stored = ds.id.get_storage_size()
        if nbytes > 2**20 and stored * _MAX_EXPANSION < nbytes:
            self.fail(
                f"it declares {nbytes:,} bytes but stores only {stored:,}, more than compression can expand: "
                "the file is damaged or crafted",
                where,
            )
        if ds.chunks is not None:
            chunk_bytes = math.prod(ds.chunks) * ds.dtype.itemsize
            if chunk_bytes > _MAX_CHUNK_BYTES:
                self.fail(f"its chunks of {chunk_bytes:,} bytes are larger than a fit file writes", where)
            if chunk_bytes < min(_MIN_CHUNK_BYTES, nbytes):
                self.fail(f"its chunks of {chunk_bytes} bytes are too small to read in reasonable time", where)
        return nbytes

    def prepare(
        self,
        group: str,
        name: str,
        shape: tuple[int, ...] | Callable[[tuple[int, ...]], bool],
        kinds: str,
        expected: str = "",
    ) -> tuple[Any, np.dtype, tuple[int, ...]]:
        """Everything checked before ``group/name`` is read: structure, dtype, shape, declared size (reserved).

        Returns the h5py dataset, the dtype to read it as and its shape.
        """
        where = f"group '{group}', variable '{name}'"
        self.part = where
        ds = self.dataset(group, name)
        dtype = self.dtype_of(ds, where, kinds)
        if callable(shape):
            found = tuple(int(n) for n in ds.shape)
            if not shape(found):
                self.fail(f"its shape {found} is not {expected}", where)
            shape = found
        self.reserve(self.planned_bytes(ds, shape, dtype, where), where)
        return ds, dtype, shape

    def read_array(
        self,
        group: str,
        name: str,
        shape: tuple[int, ...] | Callable[[tuple[int, ...]], bool],
        kinds: str,
        check: Callable[[np.ndarray], str | None] | None = None,
        expected: str = "",
    ) -> np.ndarray:
        """Read ``group/name`` in checked blocks.

        ``shape`` is the shape the variable must have, or a function telling
        whether a stored shape is acceptable (``expected`` then says which are).
        """
        where = f"group '{group}', variable '{name}'"
        ds, dtype, shape = self.prepare(group, name, shape, kinds, expected)
        stored = np.dtype(np.int8) if dtype == np.dtype(bool) else dtype
        out = np.empty(shape, dtype=stored)
        if out.size:
            for sel in _blocks(shape, stored.itemsize, ds.chunks):
                view = out[sel]
                ds.read_direct(out, source_sel=sel, dest_sel=sel)
                if dtype == np.dtype(bool) and ((view != 0) & (view != 1)).any():
                    self.fail("its boolean values are not 0 or 1", where)
                if check is not None:
                    problem = check(view)
                    if problem:
                        self.fail(problem, where)
        return out.astype(bool) if dtype == np.dtype(bool) else out

    def defer(
        self,
        group: str,
        name: str,
        shape: tuple[int, ...] | Callable[[tuple[int, ...]], bool],
        kinds: str,
        check: Callable[[np.ndarray], str | None] | None = None,
        expected: str = "",
    ) -> tuple[tuple[int, ...], Callable[[], np.ndarray]]:
        """What :meth:`read_array` checks before reading, now; the read and the value checks, later.

        Returns the variable's shape and a function that reads it (from the
        file as it was at load: a changed or removed file raises FitFileError).
        """
        _, _, fixed = self.prepare(group, name, shape, kinds, expected)
        path, limit, identity = self.path, self.limit_gib, self.identity

        def read() -> np.ndarray:
            return _read_later(path, limit, identity, group, name, fixed, kinds, check)

        return fixed, read

    def reserve(self, n_bytes: int, where: str) -> None:
        """Count ``n_bytes`` about to be allocated; refuse when the running total passes the limit."""
        self.reserved = getattr(self, "reserved", 0) + n_bytes
        if self.reserved > self.limit_gib * GIB:
            total = max(self.reserved, self.declared_total())
            need = math.ceil(total / GIB * 1000 + 1e-9) / 1000
            self.fail(
                f"reading the file would need {'at least ' if total == self.reserved else 'about '}"
                f"{total / GIB:.3g} GiB (its arrays, labels and settings block, as declared), above "
                f"max_memory_gib={self.limit_gib:g} (the limit of pyrater.load). If you trust the file, load it "
                f"with pyrater.fits.fitfile.load_fit(path, max_memory_gib={need:g}) on a machine with that much "
                "memory",
                where,
            )

    def declared_total(self) -> int:
        """What loading would take by the file's declared sizes (nothing read).

        Every variable of the groups the fit is read from, the settings
        block's parsing, 8 bytes a label.
        """
        total = 16 * getattr(self, "json_chars", 0) + getattr(self, "label_bytes", 0)
        groups = ("rating_data", "posterior", "sample_stats", "fit_state", "log_likelihood", "unit_log_likelihood")
        for group in groups:
            grp = self.h5.get(group) if self.h5 is not None else None
            if grp is None or not hasattr(grp, "values"):
                continue
            if group == "log_likelihood" and "unit_log_likelihood" in self.h5:
                continue  # grouped data: pyrater reads the per-unit one
            for ds in grp.values():
                try:
                    itemsize = 64 if h5py_string(ds) else ds.dtype.itemsize
                    total += int(np.prod(ds.shape, dtype=float)) * itemsize
                except Exception:  # not a dataset, or unreadable metadata: counted elsewhere
                    continue
        return total

    def labels_match(self, group: str, coord: str, labels: pd.Index) -> None:
        """The coordinate ``group/coord`` (what ArviZ readers see) must hold ``labels`` (what pyrater uses)."""
        where = f"group '{group}', coordinate '{coord}'"
        self.part = where
        ds = self.dataset(group, coord, required=False)
        if ds is None:
            if group == "rating_data":
                self.fail(f"coordinate '{coord}' is missing", f"group '{group}'")
            return
        if tuple(ds.shape) != (len(labels),):
            self.fail(f"it holds {tuple(ds.shape)} labels where the settings block declares {len(labels)}", where)
        if len(labels) == 0:
            return
        if ds.dtype.kind in "OSU" or h5py_string(ds):
            self.reserve(len(labels) * 64, where)
            values = np.asarray(ds.asstr()[()], dtype=object)
            same = [str(v) for v in values] == [str(v) for v in labels]
        else:
            dtype = self.dtype_of(ds, where, "biuf")
            self.reserve(self.planned_bytes(ds, (len(labels),), dtype, where), where)
            values = ds[()]
            if dtype == np.dtype(bool):
                same = all(type(v) in (bool, np.bool_) for v in labels) and np.array_equal(
                    values.astype(bool), np.asarray(labels, dtype=bool)
                )
            else:
                numeric = all(isinstance(v, (int, float, np.integer, np.floating)) for v in labels) and not any(
                    isinstance(v, (bool, np.bool_)) for v in labels
                )
                same = numeric and np.array_equal(values.astype(float), np.asarray(labels, dtype=float))
        if not same:
            self.fail(
                "its labels differ from those in the settings block (the data's labels): the parts of the file "
                "disagree",
                where,
            )

    # -------------------------------------------------------------- rebuild
    def rebuild(self, block: dict[str, Any]) -> Any:
        self.part = "the settings block: 'method' and 'class'"
        cls = _fit_class(block.get("method"), block.get("class"))
        data = self.rating_data(block.get("data"))
        K, J = data.n_categories, data.n_raters
        self.part = "the settings block: 'model'"
        model = _rebuild_model(block.get("model"), K, J)
        layout = _dict(block.get("layout", {}), "layout")
        fields_json = _dict(block.get("fields", {}), "fields")
        self.part = "the settings block: 'layout'"
        state_shapes = layout.get("state", {})
        if not (
            isinstance(state_shapes, dict)
            and all(
                isinstance(k, str) and _NAME_RE.match(k) and isinstance(v, list) and all(type(n) is int for n in v)
                for k, v in state_shapes.items()
            )
        ):
            self.fail("layout['state'] is not a mapping of variable names to shapes")
        self.state_shapes = {k: tuple(v) for k, v in state_shapes.items()}
        for key in ("draws", "sample_stats", "params"):
            if key in layout and not (
                isinstance(layout[key], list) and all(isinstance(n, str) and _NAME_RE.match(n) for n in layout[key])
            ):
                self.fail(f"layout[{key!r}] is not a list of variable names")
        kwargs: dict[str, Any] = {}
        chains_draws: tuple[int, int] | None = None
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            name = f.name
            if name == "data":
                kwargs[name] = data
            elif name == "model":
                kwargs[name] = model
            elif name == _DRAWS and "draws" in layout:
                kwargs[name], chains_draws = self.draws(layout, data, model)
            elif name == _STATS and "sample_stats" in layout:
                kwargs[name] = self.sample_stats(layout["sample_stats"], chains_draws)
            elif name == _PARAMS and "params" in layout:
                kwargs[name] = self.params(layout["params"], data, model)
            elif name in self.state_shapes or self.has_state(name):
                kwargs[name] = self.state(name, data)
            elif name in fields_json:
                self.part = f"the settings block: 'fields.{name}'"
                value = _from_json(fields_json[name])
                _check_type(cls, f, value)
                if name == "priors":
                    _check_priors(value, model, K, J)
                kwargs[name] = value
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise FitFileError(f"{self.path}: the fit file has no value for {cls.__name__}.{name}")
        if "draws" not in layout and "params" not in layout and {"pi", "theta"} <= names:
            self.mode_posterior(kwargs)  # a mode fit: its ArviZ posterior must be its estimate
        self.part = f"the fit ({cls.__name__})"
        fit = cls(**kwargs)
        self.part = "the settings block: its summary keys"
        _check_summary(block, fit, fields_json)
        if _RB_STATE in self.state_shapes and _RB_CACHE in dir(cls) and _RB_STATE not in names:
            fit.__dict__[_RB_CACHE] = self.state(_RB_STATE, data)  # no pass over the draws on first use
        if "model_choice" in block:
            self.part = "the settings block: 'model_choice'"
            fit.__dict__["_model_choice"] = self.model_choice(block["model_choice"])
        return fit

    def model_choice(self, spec: Any) -> Any:
        """The :class:`~pyrater.fits.choice.ModelChoice` of an "auto" fit, without the candidates' fits."""
        from .choice import ModelChoice

        spec = _dict(spec, "model_choice")
        text = {key: spec.get(key) for key in ("chosen", "reason")}
        for key, value in text.items():
            if not isinstance(value, str):
                self.fail(f"'{key}' is not text")
        table = _dict(spec.get("table"), "model_choice.table")
        index, columns, rows = table.get("index"), table.get("columns"), table.get("data")
        if not (_str_list(index) and _str_list(columns) and isinstance(rows, list)):
            self.fail("'table' needs lists 'index' and 'columns' of text and a list 'data' of rows")
        if len(rows) != len(index) or any(not isinstance(r, list) or len(r) != len(columns) for r in rows):
            self.fail(f"'table' has {len(index)} rows of {len(columns)} columns; its 'data' does not match")
        if any(v is not None and not isinstance(v, (bool, int, float, str)) for r in rows for v in r):
            self.fail("'table' holds a value that is not a number, text, true/false or null")
        frame = pd.DataFrame(rows, index=pd.Index(index), columns=pd.Index(columns), dtype=object)
        for col in frame.columns:  # numbers back to floats (null: NaN), true/false to bool
            values = [v for v in frame[col] if v is not None]
            if values and all(isinstance(v, bool) for v in values):
                frame[col] = frame[col].astype(bool)
            elif values and len(values) == len(frame) and all(type(v) is int for v in values):
                frame[col] = frame[col].astype(np.int64)
            elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                frame[col] = frame[col].astype(float)
        maps = {key: _dict(spec.get(key, {}), f"model_choice.{key}") for key in ("skipped", "prior_scale")}
        if not all(isinstance(v, str) for v in maps["skipped"].values()):
            self.fail("'skipped' must map names to text")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in maps["prior_scale"].values()):
            self.fail("'prior_scale' must map names to numbers")
        return ModelChoice(
            chosen=text["chosen"],
            reason=text["reason"],
            table=frame,
            fits={},
            skipped={str(k): v for k, v in maps["skipped"].items()},
            prior_scale={str(k): float(v) for k, v in maps["prior_scale"].items()},
        )

    def rating_data(self, spec: Any) -> RatingData:
        self.part = "the settings block: 'data'"
        spec = _dict(spec, "data")
        for key in ("unit_labels", "rater_labels", "categories"):
            if key not in spec:
                self.fail(f"'{key}' is missing")
        sizes = {key: _index_length(spec[key]) for key in ("unit_labels", "rater_labels", "categories")}
        self.label_bytes = 8 * sum(sizes.values())
        self.reserve(self.label_bytes, self.part)  # the label indexes (at least 8 bytes each)
        labels = {}
        for key in ("unit_labels", "rater_labels", "categories"):
            self.part = f"the settings block: 'data.{key}'"
            labels[key] = _index_from_json(spec[key])
        source_format = spec.get("source_format")
        if source_format not in ("long", "wide", "grouped"):
            self.fail(f"source_format {source_format!r} is not long, wide or grouped", "the settings block: 'data'")
        columns = _from_json(spec.get("columns") or {})
        if not isinstance(columns, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in columns.items()
        ):
            self.fail("'columns' is not a mapping of roles to column names", "the settings block: 'data'")
        I, J, K = len(labels["unit_labels"]), len(labels["rater_labels"]), len(labels["categories"])
        if K < 2:
            self.fail(f"{K} categories; a fit has at least 2", "the settings block: 'data.categories'")
        self.part = "group 'rating_data'"
        code = self.dataset("rating_data", "unit_code")
        N = code.shape[0] if len(code.shape) == 1 else -1
        if N < 0:
            self.fail(f"unit_code has shape {code.shape}; codes are one-dimensional", "group 'rating_data'")
        unit = self.read_array("rating_data", "unit_code", (N,), "iu", _in_range(0, I, "unit codes", "units"))
        rater = self.read_array("rating_data", "rater_code", (N,), "iu", _in_range(0, J, "rater codes", "raters"))
        rating = self.read_array(
            "rating_data", "rating_code", (N,), "iu", _in_range(0, K, "rating codes", "categories")
        )
        tally = self.read_array("rating_data", "tally", (I,), "iu", _in_range(0, None, "tallies", ""))
        if source_format != "grouped" and I and not (tally == 1).all():
            self.fail("long and wide data have a tally of 1 per item", "group 'rating_data', variable 'tally'")
        for key, coord in (("unit_labels", "unit"), ("rater_labels", "rater"), ("categories", "category")):
            self.labels_match("rating_data", coord, labels[key])
        return RatingData(
            unit=unit,
            rater=rater,
            rating=rating,
            unit_labels=labels["unit_labels"],
            rater_labels=labels["rater_labels"],
            categories=labels["categories"],
            weight=tally,
            source_format=source_format,
            _columns=columns,
        )

    def draws(self, layout: dict[str, Any], data: RatingData, model: Any) -> tuple[Any, tuple[int, int]]:
        """The draws: a dict, or (``lazy``) a :class:`~pyrater.fits._lazy.LazyDraws` whose large entries wait on disk.

        ``pi`` is always read now; lazily, every other variable is checked
        (structure, dtype, shape, declared size against the limit) now and
        read, with its value checks, on first use.
        """
        K, J, I = data.n_categories, data.n_raters, data.n_units
        names = layout["draws"]
        if "pi" not in names or "theta" not in names:
            self.fail("the draws lack pi or theta", "the settings block: 'layout.draws'")
        pi = self.read_array(
            "posterior",
            "pi",
            lambda s: len(s) == 3 and s[0] >= 1 and s[1] >= 1 and s[2] == K,
            "f",
            _simplex,
            f"(chains >= 1, draws >= 1, K) with K = {K}",
        )
        C, S = pi.shape[:2]
        shapes = _parameter_shapes(model, K, J)
        ready: dict[str, np.ndarray] = {"pi": pi}
        deferred: dict[str, tuple[tuple[int, ...], Callable[[], np.ndarray]]] = {}
        take = self.defer if self.lazy else self.read_array

        def put(key: str, *args: Any) -> None:
            value = take(*args)
            if isinstance(value, np.ndarray):
                ready[key] = value
            else:
                deferred[key] = value

        for key in names:
            if key in ("pi", "log_lik"):
                continue
            if key == "theta":
                put(
                    key,
                    "posterior",
                    key,
                    lambda s: s[:2] == (C, S) and s[2:] in ((J, K, K), (K, K)),
                    "f",
                    _simplex,
                    f"(chains, draws, J, K, K) = {(C, S, J, K, K)} or (chains, draws, K, K) = {(C, S, K, K)}",
                )
            elif key in shapes:
                put(key, "posterior", key, (C, S, *shapes[key]), "f", _finite)
            else:  # a parameter this model does not declare: any shape after (chain, draw), finite
                put(
                    key,
                    "posterior",
                    key,
                    lambda s: s[:2] == (C, S),
                    "f",
                    _finite,
                    f"(chains, draws, ...) = ({C}, {S}, ...)",
                )
        if "log_lik" in names:
            where = layout.get("log_lik")
            if where in ("log_likelihood", "unit_log_likelihood"):
                put("log_lik", where, "log_lik", (C, S, I), "f", _not_nan)
            elif isinstance(where, list) and len(where) == 3 and all(type(n) is int and n >= 0 for n in where):
                if math.prod(where) != 0:
                    self.fail(f"an empty log_lik of shape {where} holds values", "the settings block: 'layout'")
                ready["log_lik"] = np.zeros(where)
            else:
                self.fail(f"log_lik is in {where!r}, not a group of the format", "the settings block: 'layout'")
        self.labels_match("posterior", "category", data.categories)
        theta_ndim = ready["theta"].ndim if "theta" in ready else len(deferred["theta"][0])
        if theta_ndim == 5:
            self.labels_match("posterior", "rater", data.rater_labels)
        if deferred:
            return LazyDraws(ready, deferred, list(names), str(self.path)), (C, S)
        return {k: ready[k] for k in names}, (C, S)

    def sample_stats(self, names: list[str], chains_draws: tuple[int, int] | None) -> dict[str, np.ndarray]:
        if not names:
            return {}
        if chains_draws is None:
            self.fail("sample statistics without draws", "the settings block: 'layout'")
        return {key: self.read_array("sample_stats", key, chains_draws, "biuf") for key in names}

    def params(self, names: list[str], data: RatingData, model: Any) -> dict[str, np.ndarray]:
        K, J, I = data.n_categories, data.n_raters, data.n_units
        shapes = _parameter_shapes(model, K, J)
        out: dict[str, np.ndarray] = {}
        for key in names:
            if key == "log_lik":
                out[key] = self.read_array(
                    "fit_state", "params.log_lik", lambda s: s in ((I,), (0,)), "f", _not_nan, f"({I},) or (0,)"
                )
                continue
            rule: tuple[int, ...] | Callable[[tuple[int, ...]], bool]
            if key == "theta":
                rule, text = (
                    (lambda s: s in ((1, 1, J, K, K), (1, 1, K, K))),
                    f"(1, 1, {J}, {K}, {K}) or (1, 1, {K}, {K})",
                )
            elif key == "pi":
                rule, text = (1, 1, K), ""
            elif key in shapes:
                rule, text = (1, 1, *shapes[key]), ""
            else:
                rule, text = (lambda s: s[:2] == (1, 1)), "(1, 1, ...)"
            check = _simplex if key in ("pi", "theta") else _finite
            out[key] = self.read_array("posterior", key, rule, "f", check, text)[0, 0]
        if "pi" not in out or "theta" not in out:
            self.fail("the estimate lacks pi or theta", "the settings block: 'layout.params'")
        self.labels_match("posterior", "category", data.categories)
        return out

    def has_state(self, name: str) -> bool:
        if "fit_state" not in self.h5:
            return False
        return self.group("fit_state").get(name, getlink=True) is not None

    def state(self, name: str, data: RatingData) -> np.ndarray:
        """An array field from ``/fit_state``; the fit's common arrays are checked against the data."""
        K, J, I = data.n_categories, data.n_raters, data.n_units
        declared = getattr(self, "state_shapes", {}).get(name)
        if declared is not None and name in ("known", "pi", "theta", "class_probs", _RB_STATE):
            ds = self.dataset("fit_state", name)
            if tuple(ds.shape) != declared:
                self.fail(
                    f"its shape {tuple(ds.shape)} is not the {declared} the settings block records",
                    f"group 'fit_state', variable '{name}'",
                )
        if name == "known":
            return self.read_array("fit_state", name, (I,), "iu", _in_range(-1, K, "known classes", "categories"))
        if name == "pi":
            return self.read_array("fit_state", name, (K,), "f", _simplex)
        if name == "theta":
            return self.read_array(
                "fit_state", name, lambda s: s in ((J, K, K), (K, K)), "f", _simplex, f"({J}, {K}, {K}) or ({K}, {K})"
            )
        if name in ("class_probs", _RB_STATE):
            return self.read_array("fit_state", name, (I, K), "f", _simplex)
        declared = getattr(self, "state_shapes", {}).get(name)
        if declared is not None:  # the shape the settings block records
            return self.read_array("fit_state", name, declared, "biuf")
        return self.read_array("fit_state", name, lambda s: len(s) <= 32, "biuf", None, "at most 32-dimensional")

    def mode_posterior(self, kwargs: dict[str, Any]) -> None:
        """A mode fit's ArviZ posterior (one draw) must equal the estimate pyrater uses, under the same labels."""
        data = kwargs["data"]
        self.labels_match("posterior", "category", data.categories)
        theta = kwargs.get("theta")
        if isinstance(theta, np.ndarray) and theta.ndim == 3:
            self.labels_match("posterior", "rater", data.rater_labels)
        for key in ("pi", "theta"):
            value = kwargs.get(key)
            if not isinstance(value, np.ndarray):
                continue
            shown = self.read_array("posterior", key, (1, 1, *value.shape), "f")
            if not np.array_equal(shown[0, 0], value, equal_nan=True):
                self.fail(
                    f"it differs from the estimate in group 'fit_state' ({key}): the parts of the file disagree",
                    f"group 'posterior', variable '{key}'",
                )


def h5py_string(ds: Any) -> bool:
    """True when the h5py dataset holds strings."""
    import h5py

    return h5py.check_string_dtype(ds.dtype) is not None


def _blocks(shape: tuple[int, ...], itemsize: int, chunks: tuple[int, ...] | None) -> list[tuple[slice, ...]]:
    """Selections covering an array of ``shape`` in blocks of about :data:`_READ_BLOCK` bytes, chunk-aligned."""
    total = math.prod(shape) * itemsize
    if total <= _READ_BLOCK or not shape:
        return [tuple(slice(0, n) for n in shape)]
    # split the first axis whose whole rows fit in a block; rows of the axes before are taken one at a time
    row = itemsize * math.prod(shape[1:])
    axis = 0
    while axis < len(shape) - 1 and row > _READ_BLOCK:
        axis += 1
        row //= shape[axis]
    step = max(1, _READ_BLOCK // max(row, 1))
    if chunks is not None and chunks[axis] > 0:
        step = max(chunks[axis], step // chunks[axis] * chunks[axis])
    out = []
    for lead in np.ndindex(*shape[:axis]):
        for start in range(0, shape[axis], step):
            sel = [slice(i, i + 1) for i in lead] + [slice(start, min(shape[axis], start + step))]
            out.append(tuple(sel + [slice(0, n) for n in shape[axis + 1 :]]))
    return out


# ----------------------------------------------------------------- checks
def _in_range(low: int, high: int | None, what: str, of: str) -> Callable[[np.ndarray], str | None]:
    def check(block: np.ndarray) -> str | None:
        if block.size == 0:
            return None
        lo, hi = int(block.min()), int(block.max())
        if lo < low or (high is not None and hi >= high):
            span = f"in [{low}, {high})" if high is not None else f">= {low}"
            extra = f" ({high} {of})" if high is not None and of else ""
            return f"{what} must be {span}{extra}; found values from {lo} to {hi}"
        return None

    return check


def _finite(block: np.ndarray) -> str | None:
    if not np.isfinite(block).all():
        return f"it holds {int((~np.isfinite(block)).sum())} non-finite values (NaN or infinite); draws are finite"
    return None


def _not_nan(block: np.ndarray) -> str | None:
    bad = np.isnan(block) | (block == np.inf)
    if bad.any():
        return f"it holds {int(bad.sum())} NaN or +inf values; a log-likelihood is a number or -inf"
    return None


def _simplex(block: np.ndarray) -> str | None:
    """Probabilities along the last axis: finite, in [0, 1], summing to 1."""
    problem = _finite(block)
    if problem:
        return problem
    if block.size and (block.min() < 0 or block.max() > 1 + _SIMPLEX_TOL):
        return f"probabilities must lie in [0, 1]; found values from {block.min():.6g} to {block.max():.6g}"
    sums = block.sum(axis=-1)
    if sums.size and np.abs(sums - 1).max() > _SIMPLEX_TOL:
        return f"probabilities along the last axis must sum to 1; found sums from {sums.min():.6g} to {sums.max():.6g}"
    return None


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"the settings block's '{what}' is a {type(value).__name__}, not an object")
    return value


def _parameter_shapes(model: Any, K: int, J: int) -> dict[str, tuple[int, ...]]:
    """Shapes of the model's own parameters for K and J, as its Stan initial values give them."""
    try:
        init = model.stan_init(np.random.default_rng(0), K, J)
    except Exception:  # a model without Stan hooks: no shapes to check against
        return {}
    return {k: tuple(np.shape(v)) for k, v in init.items() if k not in ("pi", "theta")}


def _rebuild_model(spec: Any, K: int, J: int) -> Any:
    from ..models import get_model

    spec = _dict(spec, "model")
    name = spec.get("name")
    if not isinstance(name, str):
        raise _Bad(f"the settings block's model name {name!r} is not a string")
    try:
        cls = type(get_model(name))
    except (KeyError, ValueError) as exc:
        raise _Bad(f"the model {name!r} is not known to this pyrater ({exc})") from None
    params = _dict(spec.get("params", {}), "model.params")
    allowed = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise _Bad(f"the model {name!r} has no prior arguments {unknown} (it takes {sorted(allowed)})")
    model = cls(**{k: _from_json(v) for k, v in params.items()})
    try:
        model.priors(K, J)
    except ValueError as exc:
        raise _Bad(f"the model's priors do not fit the data's K = {K} and J = {J}: {exc}") from None
    return model


def _check_priors(value: Any, model: Any, K: int, J: int) -> None:
    """The fit's resolved priors: the keys and shapes the model gives for K and J, finite values."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise _Bad(f"the priors are a {type(value).__name__}, not a mapping")
    expected = model.priors(K, J)
    if set(value) != set(expected):
        raise _Bad(f"the priors {sorted(value)} are not the model's {sorted(expected)}")
    for key, arr in value.items():
        arr = np.asarray(arr)
        if arr.shape != np.shape(expected[key]) or arr.dtype.kind not in "iuf" or not np.isfinite(arr).all():
            raise _Bad(
                f"prior {key!r} has shape {arr.shape} (finite numbers expected, of shape {np.shape(expected[key])} "
                f"for K = {K} and J = {J})"
            )


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _check_summary(block: dict[str, Any], fit: Any, fields_json: dict[str, Any]) -> None:
    """The block's summary keys (for readers without pyrater) must agree with the fit that was rebuilt."""
    expected: dict[str, Any] = {"known_items": _known_items(fit)}
    settings = fields_json.get("settings")
    if "settings" in fields_json:
        expected["settings"] = settings if isinstance(settings, dict) else {}
        expected["seed"] = expected["settings"].get("seed")
    if "engine" in fields_json:
        engine = fields_json["engine"]
        expected["engine"] = engine if isinstance(engine, str) else None
    try:
        expected["priors"] = _to_json(fit._priors(), "priors")
    except Exception:  # a fit whose priors cannot be shown: nothing to compare
        pass
    for key, value in expected.items():
        if key in block and _canonical_json(block[key]) != _canonical_json(value):
            raise _Bad(f"'{key}' disagrees with the fit's own fields: the parts of the file disagree")


_TYPE_NAMES: dict[str, tuple[type, ...]] = {
    "float": (int, float),
    "int": (int,),
    "bool": (bool,),
    "str": (str,),
    "dict": (dict,),
    "list": (list,),
    "None": (type(None),),
}


def _check_type(cls: type, f: dataclasses.Field, value: Any) -> None:
    """A JSON field's value must have the type its annotation names (where the annotation is a plain type)."""
    annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
    allowed: tuple[type, ...] = ()
    for part in str(annotation).split("|"):
        types = _TYPE_NAMES.get(part.strip())
        if types is None:
            return  # a type this check does not know: not checked
        allowed += types
    ok = isinstance(value, allowed) and not (isinstance(value, bool) and bool not in allowed)
    if not ok:
        raise _Bad(f"{cls.__name__}.{f.name} is a {type(value).__name__}; {annotation} expected")
