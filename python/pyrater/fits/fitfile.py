"""Fit files: one data-only netCDF4 (HDF5) file per fit, readable without pyrater.

``fit.save(path)`` writes, and :func:`load` reads back, every fit class (EM,
optimisation, MCMC and any other draws-based fit) without pickle: a file holds
numbers, text and one JSON block, never code.

Layout (format ``"pyrater-fit"``, version :data:`FORMAT_VERSION`)
--------------------------------------------------------------------
Root attributes
    ``pyrater_fit``: the JSON settings block (below); ``format``,
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
    The ratings in long form (``item_obs``, ``rater_obs``, ``rating_obs``).
``/rating_data``
    The rating data exactly: 0-based codes ``unit_code``, ``rater_code``,
    ``rating_code`` per rating (dim ``rating_index``) into the ``unit``,
    ``rater`` and ``category`` coordinates, and ``tally[unit]`` (1 per item for
    long data, the pattern tally for grouped data: the grouped table in long form).
``/unit_log_likelihood``
    Grouped draws-based fits only: ``log_lik[chain, draw, unit]`` per pattern.
``/fit_state``
    The fit's other array attributes (EM's ``class_probs``, ``log_lik_trace``,
    ...; the optimiser's ``converged``), one variable each.

The JSON block holds ``format``, ``format_version``, ``method``, ``class``,
``model`` (name and prior arguments), ``priors`` (resolved hyperparameters as
arrays), ``engine``, ``seed``, ``settings``, ``known_items``
(``{item: category}``), ``versions`` (pyrater, Python, numpy, pandas, xarray,
ArviZ, Stan engine), ``data`` (the exact label values and their types) and
``fields`` (the fit's remaining attributes).  Arrays inside the JSON block are
``{"__ndarray__": dtype, "shape": [...], "data": [...]}``; non-finite floats
are written as Python's ``json`` writes them (``NaN``, ``Infinity``).

Every numeric variable carries an HDF5 Fletcher-32 checksum, so a damaged
file is detected when read.

New fit classes
---------------
:func:`load` finds the class of a file by its ``method`` in a small registry
(:func:`register_fit_class`), else by the class path recorded in the file,
imported only from inside the ``pyrater`` package.  A fit class must be a
dataclass whose fields are ``data``, ``model``, ``draws`` / ``sample_stats``
(dicts of ``(chain, draw, ...)`` arrays) or ``params`` (dict of arrays), and
otherwise arrays or JSON-able values: then it round-trips with no code here
(at most a one-line ``register_fit_class(method, Class)``).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pickle
import platform
import warnings
from collections.abc import Hashable
from pathlib import Path
from typing import Any, Final, cast

import numpy as np
import pandas as pd
import xarray as xr

from .._stacklevel import user_stacklevel
from ..data.ratings import RatingData

__all__ = ["FitFileError", "FORMAT_NAME", "FORMAT_VERSION", "save_fit", "load_fit", "register_fit_class"]

FORMAT_NAME = "pyrater-fit"
FORMAT_VERSION = 1
_ENGINE: Final = "h5netcdf"
_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

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
    """A file that :func:`pyrater.load` cannot turn into a fit, with the reason."""


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


def _fit_class(method: str, class_path: str | None) -> type:
    from .base import Fit

    target = _FIT_CLASSES.get(method)
    if target is None and class_path and class_path.split(":")[0].split(".")[0] == "pyrater":
        target = class_path  # a pyrater class not (yet) in the registry: import it from inside pyrater only
    if target is None:
        raise FitFileError(
            f"fits by method {method!r} are not known to this pyrater (known: {sorted(_FIT_CLASSES)}); "
            "upgrade pyrater, or register the class with pyrater.fits.fitfile.register_fit_class"
        )
    try:
        cls = _import_class(target) if isinstance(target, str) else target
    except (ImportError, AttributeError) as exc:
        raise FitFileError(f"the fit class {target!r} for method {method!r} cannot be imported: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Fit) and dataclasses.is_dataclass(cls)):
        raise FitFileError(f"{target!r} is not a dataclass subclass of pyrater.Fit")
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


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return np.asarray(value["data"], dtype=np.dtype(value["__ndarray__"])).reshape(value["shape"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
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


def _index_from_json(spec: dict[str, Any]) -> pd.Index:
    name = spec.get("name")
    if "range" in spec:
        return pd.RangeIndex(*spec["range"], name=name)
    values = spec["values"]
    if len(spec.get("types", [])) > 1:
        cast = {"bool": bool, "int": int, "float": float, "str": str}
        return pd.Index([cast[t](v) for t, v in values], dtype=object, name=name)
    try:
        return pd.Index(values, dtype=spec.get("dtype"), name=name)
    except (TypeError, ValueError):
        return pd.Index(values, name=name)


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


def save_fit(fit: Any, path: str | Path) -> Path:
    """Write ``fit`` to ``path`` (see the module docstring); returns the path."""
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
    if "posterior" not in groups:  # EM and other point fits: the estimate as one draw, for ArviZ readers
        groups["posterior"] = fit._groups()["posterior"]
    groups["observed_data"] = fit._observed_data()
    rating_ds, data_spec = _data_groups(data)
    groups["rating_data"] = rating_ds
    if state:
        groups["fit_state"] = xr.Dataset({k: v for k, v in state.items()})
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
    attrs = {
        "pyrater_fit": json.dumps(block),
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "inference_library": "pyrater",
        "model": fit.model.name,
        "method": method,
    }
    tree = xr.DataTree.from_dict({f"/{name}": _storable_dataset(ds) for name, ds in groups.items()})
    tree.attrs = attrs
    encoding = {}
    for name, ds in groups.items():
        encoding[f"/{name}"] = {
            var: {"fletcher32": True, "zlib": True, "complevel": 4}
            for var in ds.data_vars
            if ds[var].dtype.kind in "biuf" and ds[var].size > 0
        }
    tmp = path.with_name(path.name + ".tmp")
    try:
        tree.to_netcdf(tmp, engine=_ENGINE, encoding=encoding)
        tmp.replace(path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


# --------------------------------------------------------------------- load
def _read_pickle(path: Path, allow_pickle: bool):
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
    with path.open("rb") as fh:
        obj = pickle.load(fh)
    fit = obj.get("fit") if isinstance(obj, dict) else None
    if not isinstance(fit, Fit):
        raise FitFileError(f"{path} is a pickle but not a pyrater 0.1 fit file")
    return fit


def _open(path: Path) -> xr.DataTree:
    try:
        tree = xr.open_datatree(path, engine=_ENGINE)
        try:
            tree.load()
        finally:
            tree.close()
    except Exception as exc:  # h5py/netCDF raise OSError, ValueError, KeyError, RuntimeError ...
        raise FitFileError(
            f"{path} cannot be read as a fit file: it is truncated or corrupted ({type(exc).__name__}: {exc})"
        ) from None
    return tree


def _block(tree: xr.DataTree, path: Path) -> dict[str, Any]:
    text = tree.attrs.get("pyrater_fit")
    if text is None:
        raise FitFileError(
            f"{path} is a netCDF/HDF5 file but not a pyrater fit file (no 'pyrater_fit' attribute); "
            "open it with xarray.open_datatree or arviz instead"
        )
    try:
        block = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise FitFileError(f"{path}: the pyrater_fit settings block is corrupted ({exc})") from None
    if not isinstance(block, dict) or block.get("format") != FORMAT_NAME:
        raise FitFileError(f"{path} is not a pyrater fit file (format {block.get('format')!r})")
    version = block.get("format_version")
    if not isinstance(version, int):
        raise FitFileError(f"{path}: the fit file's format version {version!r} is not an integer")
    if version > FORMAT_VERSION:
        raise FitFileError(
            f"{path} was written by a newer pyrater (fit file format version {version}; this pyrater reads "
            f"versions up to {FORMAT_VERSION}): upgrade pyrater to read it"
        )
    return block


def _group(tree: xr.DataTree, name: str, path: Path) -> xr.Dataset:
    if name not in tree.children:
        raise FitFileError(f"{path}: the fit file is corrupted: group '{name}' is missing")
    return tree[name].to_dataset()


def _var(ds: xr.Dataset, name: str, group: str, path: Path) -> np.ndarray:
    if name not in ds.data_vars:
        raise FitFileError(f"{path}: the fit file is corrupted: variable '{name}' is missing from group '{group}'")
    return np.asarray(ds[name].values)


def _rebuild_data(tree: xr.DataTree, spec: dict[str, Any], path: Path) -> RatingData:
    ds = _group(tree, "rating_data", path)
    return RatingData(
        unit=_var(ds, "unit_code", "rating_data", path),
        rater=_var(ds, "rater_code", "rating_data", path),
        rating=_var(ds, "rating_code", "rating_data", path),
        unit_labels=_index_from_json(spec["unit_labels"]),
        rater_labels=_index_from_json(spec["rater_labels"]),
        categories=_index_from_json(spec["categories"]),
        weight=_var(ds, "tally", "rating_data", path),
        source_format=spec["source_format"],
        _columns=_from_json(spec.get("columns") or {}),
    )


def _rebuild_model(spec: dict[str, Any]):
    from ..models import get_model

    cls = type(get_model(spec["name"]))
    return cls(**{k: _from_json(v) for k, v in spec.get("params", {}).items()})


def load_fit(path: str | Path, allow_pickle: bool = False):
    """Read a fit written by ``fit.save(path)``.

    Parameters
    ----------
    path : str or Path
    allow_pickle : bool
        Also read the pickle files of pyrater 0.1.  **Only for files you
        trust**: reading a pickle runs whatever code it carries.  Re-save such
        a fit at once with ``fit.save(...)`` to get a safe file.

    Returns
    -------
    Fit
        The same class as was saved, answering every accessor with the same
        numbers.

    Raises
    ------
    FitFileError
        The file is not a pyrater fit file, is truncated or corrupted, comes
        from a newer format version, or is a 0.1 pickle (without
        ``allow_pickle=True``).
    FileNotFoundError
        No file at ``path``.
    """
    path = Path(path)
    with path.open("rb") as fh:
        head = fh.read(8)
    if head[:1] == b"\x80":  # pickle protocol >= 2
        return _read_pickle(path, allow_pickle)
    if len(head) < len(_HDF5_SIGNATURE):
        raise FitFileError(f"{path} is empty or truncated ({len(head)} bytes): not a readable fit file")
    if head != _HDF5_SIGNATURE:
        raise FitFileError(f"{path} is not a pyrater fit file (not a netCDF4/HDF5 file)")
    tree = _open(path)
    block = _block(tree, path)
    try:
        return _rebuild(tree, block, path)
    except FitFileError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise FitFileError(f"{path}: the fit file is corrupted or inconsistent ({type(exc).__name__}: {exc})") from None


def _rebuild(tree: xr.DataTree, block: dict[str, Any], path: Path):
    cls = _fit_class(block["method"], block.get("class"))
    data = _rebuild_data(tree, block["data"], path)
    layout = block.get("layout", {})
    fields_json = block.get("fields", {})
    state = tree["fit_state"].to_dataset() if "fit_state" in tree.children else xr.Dataset()
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        name = f.name
        if name == "data":
            kwargs[name] = data
        elif name == "model":
            kwargs[name] = _rebuild_model(block["model"])
        elif name == _DRAWS and "draws" in layout:
            post = _group(tree, "posterior", path)
            draws = {}
            for key in layout["draws"]:
                if key != "log_lik":
                    draws[key] = _var(post, key, "posterior", path)
                elif isinstance(layout.get("log_lik"), str):
                    draws[key] = _var(_group(tree, layout["log_lik"], path), "log_lik", layout["log_lik"], path)
                else:
                    draws[key] = np.zeros(layout.get("log_lik", [0, 0, 0]))
            kwargs[name] = draws
        elif name == _STATS and "sample_stats" in layout:
            stats = _group(tree, "sample_stats", path) if layout["sample_stats"] else xr.Dataset()
            kwargs[name] = {key: _var(stats, key, "sample_stats", path) for key in layout["sample_stats"]}
        elif name == _PARAMS and "params" in layout:
            post = _group(tree, "posterior", path)
            params = {}
            for key in layout["params"]:
                if key == "log_lik":
                    params[key] = _var(state, "params.log_lik", "fit_state", path)
                else:
                    params[key] = _var(post, key, "posterior", path)[0, 0]
            kwargs[name] = params
        elif name in state.data_vars:
            kwargs[name] = np.asarray(state[name].values)
        elif name in fields_json:
            kwargs[name] = _from_json(fields_json[name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise FitFileError(f"{path}: the fit file has no value for {cls.__name__}.{name}")
    return cls(**kwargs)
