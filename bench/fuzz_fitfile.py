"""Fuzz ``pyrater.load``: damaged and hostile fit files either load as the original fit or raise FitFileError.

Saves a few reference fits (EM on long data; Gibbs on long and on grouped
data; an MCMC fit built from simulated draws, so no Stan is needed), then
loads mutated copies of their files, one mutation per case:

* truncation at a random length; random bit flips (1-16 bits) anywhere;
* structural edits through h5py: groups swapped or removed, variables removed,
  renamed or replaced by ones of another dtype or shape, variables of huge
  declared size (unwritten chunks, or consistent fill values), links to other
  files, external raw storage, encoding attributes;
* the JSON settings block: huge or deeply nested values, values of the wrong
  type, labels repeated or reordered, categories reversed, priors of the
  wrong shape, unknown classes and models, damage without its checksum.

Every case must end in one of two ways, within ``--time-limit`` seconds and
``--memory-limit-mb`` of peak resident memory above what the process held
before it: ``load`` returns a fit equal to the original (same class, labels,
data and arrays to the last bit: the mutation hit a part the fit does not
use) or raises :class:`pyrater.FitFileError`.  Anything else (another
exception, a different fit, a hang, a crash of the HDF5 library) is a
failure.  Loads use ``max_memory_gib=0.25`` so that a hostile size is
refused rather than allocated.

Run::

    python bench/fuzz_fitfile.py --cases 2000 --seed 1            # the bench budget (RESULTS_fuzz_fitfile.md)
    python bench/fuzz_fitfile.py --cases 60 --seed 1 --json out.json   # what tests/test_fuzz_fitfile.py runs

Each case is written to ``<workdir>/current.json`` before it runs, so a crash
of the process (a segfault in libhdf5) names the case that caused it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

LOAD_GIB = 0.25


# ------------------------------------------------------------------ reference fits
def reference_fits(folder: Path) -> dict[str, tuple[Path, Any]]:
    """A few small fits of different classes and layouts, saved in ``folder``."""
    import pyrater
    from pyrater import datasets
    from pyrater.fits import MCMCFit

    warnings.simplefilter("ignore")
    folder.mkdir(parents=True, exist_ok=True)
    long_data = pyrater.RatingData.from_long(datasets.anesthesia())
    grouped = pyrater.RatingData.from_grouped(datasets.caries())
    fits: dict[str, Any] = {
        "em": pyrater.em(long_data, method="map", known={long_data.unit_labels[3]: long_data.categories[1]}, seed=1),
        "gibbs": pyrater.fit(
            long_data, "class_conditional", method="gibbs", chains=2, draws=40, warmup=40, seed=2, progress=False
        ),
        "gibbs_grouped": pyrater.fit(grouped, method="gibbs", chains=2, draws=30, warmup=30, seed=3, progress=False),
    }
    rng = np.random.default_rng(0)
    C, S, K, J, I = 2, 30, long_data.n_categories, long_data.n_raters, long_data.n_units
    fits["mcmc_like"] = MCMCFit(
        data=long_data,
        model=pyrater.DawidSkene(),
        priors=pyrater.DawidSkene().priors(K, J),
        draws={
            "pi": rng.dirichlet(np.ones(K) * 20, size=(C, S)),
            "theta": rng.dirichlet(np.ones(K) * 5, size=(C, S, J, K)),
            "log_lik": rng.normal(-5, 0.3, size=(C, S, I)),
        },
        sample_stats={
            "diverging": np.zeros((C, S), dtype=bool),
            "tree_depth": np.full((C, S), 3, dtype=np.int64),
            "lp": rng.normal(size=(C, S)),
        },
        known=None,
        engine="pystan",
        settings={"chains": C, "warmup": 10, "draws": S, "seed": 7},
        elapsed=1.25,
    )
    return {name: (fit.save(folder / f"{name}.nc"), fit) for name, fit in fits.items()}


# ------------------------------------------------------------------ equality
def _same_value(a: Any, b: Any) -> bool:
    from pyrater.data.ratings import RatingData

    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, RatingData):
        if not (isinstance(b, RatingData) and a.equals(b) and a.source_format == b.source_format):
            return False
        for name in ("unit_labels", "rater_labels", "categories"):
            la, lb = getattr(a, name), getattr(b, name)
            if not (la.equals(lb) and [type(v) for v in la] == [type(v) for v in lb]):
                return False
        return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("unit", "rater", "rating", "weight"))
    if isinstance(a, Mapping):  # a lazily loaded fit's draws are a read-only Mapping, read here on first use
        return isinstance(b, Mapping) and set(a) == set(b) and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(
            _same_value(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    numbers = (int, float, np.integer, np.floating)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, (bool, np.bool_)):
        # JSON keeps values, not numpy scalar types: np.float64(x) comes back as x
        return not isinstance(b, (bool, np.bool_)) and (a == b or (np.isnan(a) and np.isnan(b)))
    return type(a) is type(b) and a == b


def same_fit(a: Any, b: Any) -> bool:
    """Same class, data, labels and every field to the last bit."""
    return type(a) is type(b) and all(
        _same_value(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a) if f.init
    )


# ------------------------------------------------------------------ mutations
def _rewrite_block(path: Path, edit: Callable[[dict], Any], checksum: bool = True) -> None:
    import h5py

    with h5py.File(path, "a") as h5:
        block = json.loads(h5.attrs["pyrater_fit"])
        result = edit(block)
        text = json.dumps(block if result is None else result)
        h5.attrs["pyrater_fit"] = text
        if checksum:
            h5.attrs["pyrater_fit_sha256"] = hashlib.sha256(text.encode()).hexdigest()


def _variables(path: Path) -> list[str]:
    import h5py

    names: list[str] = []
    with h5py.File(path, "r") as h5:
        h5.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
    return names


def m_truncate(rng, path):
    raw = path.read_bytes()
    cut = int(rng.integers(0, len(raw)))
    path.write_bytes(raw[:cut])
    return f"truncated to {cut} of {len(raw)} bytes"


def m_bitflip(rng, path):
    raw = bytearray(path.read_bytes())
    n = int(rng.integers(1, 17))
    spots = rng.integers(0, len(raw), size=n)
    for pos in spots:
        raw[pos] ^= 1 << int(rng.integers(0, 8))
    path.write_bytes(bytes(raw))
    return f"{n} bit flips at {sorted(int(p) for p in spots)[:4]}..."


def m_swap_groups(rng, path):
    import h5py

    with h5py.File(path, "a") as h5:
        groups = list(h5.keys())
        a, b = rng.choice(groups, size=2, replace=False)
        h5.move(a, "_tmp")
        h5.move(b, a)
        h5.move("_tmp", b)
    return f"groups {a} and {b} swapped"


def m_drop(rng, path):
    import h5py

    names = _variables(path)
    with h5py.File(path, "a") as h5:
        target = str(rng.choice(names + list(h5.keys())))
        del h5[target]
    return f"removed {target}"


def m_rename(rng, path):
    import h5py

    names = _variables(path)
    with h5py.File(path, "a") as h5:
        a = str(rng.choice(names))
        h5.move(a, a + "_x")
    return f"renamed {a}"


def _replace(path: Path, name: str, data: Any = None, **kwargs: Any) -> None:
    import h5py

    with h5py.File(path, "a") as h5:
        parent, _, leaf = name.rpartition("/")
        grp = h5[parent] if parent else h5
        attrs = dict(grp[leaf].attrs) if leaf in grp else {}
        del grp[leaf]
        ds = grp.create_dataset(leaf, data=data, **kwargs)
        for k, v in attrs.items():
            if k not in ("DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME"):
                try:
                    ds.attrs[k] = v
                except Exception:
                    pass


def m_wrong_dtype(rng, path):
    import h5py

    names = _variables(path)
    name = str(rng.choice(names))
    with h5py.File(path, "r") as h5:
        values = h5[name][()]
    choice = int(rng.integers(0, 4))
    if choice == 0:
        new = np.asarray(values).astype(np.float32) if np.asarray(values).dtype.kind != "O" else np.zeros(3)
    elif choice == 1:
        new = np.round(np.asarray(values, dtype=float)) if np.asarray(values).dtype.kind in "biuf" else np.ones(2)
        new = new.astype(np.int16)
    elif choice == 2:
        new = np.asarray([str(v) for v in np.ravel(values)], dtype=object)
        new = new.astype(h5py.string_dtype()) if new.size else np.asarray(["x"], dtype=h5py.string_dtype())
    else:
        new = np.asarray(values, dtype=float).astype(">f8") if np.asarray(values).dtype.kind in "biuf" else values
    _replace(path, name, new)
    return f"{name} rewritten as {np.asarray(new).dtype}"


def m_wrong_shape(rng, path):
    import h5py

    names = [n for n in _variables(path)]
    name = str(rng.choice(names))
    with h5py.File(path, "r") as h5:
        values = np.asarray(h5[name][()])
    if values.dtype.kind not in "biuf" or values.size == 0:
        return m_drop(rng, path)
    flat = values.ravel()
    kind = int(rng.integers(0, 3))
    new = flat[:-1] if kind == 0 and flat.size > 1 else (np.concatenate([flat, flat[:1]]) if kind == 1 else flat)
    _replace(path, name, new)
    return f"{name} reshaped from {values.shape} to {new.shape}"


def m_huge(rng, path):
    """A variable of huge declared size with no data written (HDF5 gives its fill value)."""
    import h5py

    names = [n for n in _variables(path) if not n.endswith(("/chain", "/draw"))]
    name = str(rng.choice(names))
    with h5py.File(path, "r") as h5:
        ds = h5[name]
        shape, dtype = ds.shape, ds.dtype
    if dtype.kind not in "biuf" or not shape:
        shape, dtype = (10,), np.dtype(float)
    big = tuple(n * int(rng.choice([1000, 10**5, 10**7])) if i == (len(shape) > 1) else n for i, n in enumerate(shape))
    fill = float(rng.choice([0.0, 0.25, 1.0]))
    chunks = tuple(min(n, 64) for n in big)
    _replace(path, name, None, shape=big, dtype=dtype, chunks=chunks, fillvalue=dtype.type(fill), compression="gzip")
    return f"{name} declared as {big} (unwritten, fill {fill})"


def m_consistent_bomb(rng, path):
    """Every (chain, draw) variable grown to the same huge number of draws, filled with valid-looking values."""
    import h5py

    factor = int(rng.choice([100, 10**4, 10**6]))
    with h5py.File(path, "r") as h5:
        targets = {}
        for group in ("posterior", "sample_stats", "log_likelihood", "unit_log_likelihood"):
            if group in h5:
                for name, ds in h5[group].items():
                    if ds.ndim >= 2 and name not in ("chain", "draw"):
                        targets[f"{group}/{name}"] = (ds.shape, ds.dtype, ds.shape[-1])
    if not targets:
        return m_huge(rng, path)
    for name, (shape, dtype, last) in targets.items():
        big = (shape[0], shape[1] * factor, *shape[2:])
        fill = 1.0 / last if name.endswith(("pi", "theta")) else (-1.0 if "log_lik" in name else 0.0)
        chunks = tuple(min(n, 32) for n in big)
        _replace(path, name, None, shape=big, dtype=dtype, chunks=chunks, fillvalue=dtype.type(fill))
    return f"{len(targets)} draw variables grown {factor}-fold with fill values"


def m_external_link(rng, path):
    import h5py

    names = _variables(path)
    name = str(rng.choice(names))
    with h5py.File(path, "a") as h5:
        del h5[name]
        if rng.random() < 0.5:
            h5[name] = h5py.ExternalLink("/etc/hostname", "/")
            how = "an external link"
        else:
            h5[name] = h5py.SoftLink("/rating_data/tally")
            how = "a soft link"
    return f"{name} replaced by {how}"


def m_external_storage(rng, path):
    names = [n for n in _variables(path) if n.startswith(("rating_data/", "posterior/"))]
    name = str(rng.choice(names))
    import h5py

    with h5py.File(path, "r") as h5:
        shape, dtype = h5[name].shape, h5[name].dtype
    if dtype.kind not in "biuf":
        return m_drop(rng, path)
    target = path.with_suffix(".raw")
    target.write_bytes(b"\0" * (int(np.prod(shape)) * dtype.itemsize))
    _replace(path, name, None, shape=shape, dtype=dtype, external=[(str(target), 0, h5py.h5f.UNLIMITED)])
    return f"{name} stored in an external file"


def m_encoding_attr(rng, path):
    import h5py

    names = [n for n in _variables(path) if not n.endswith(("chain", "draw"))]
    name = str(rng.choice(names))
    key = str(rng.choice(["scale_factor", "add_offset", "_FillValue", "dtype", "units"]))
    with h5py.File(path, "a") as h5:
        h5[name].attrs[key] = {"dtype": "bool", "units": "days since 2000-01-01"}.get(key, 0.5)
    return f"{name} given the attribute {key}"


def m_json_deep(rng, path):
    depth = int(rng.choice([200, 5000, 100_000]))
    text_holder = {"x": None}
    for _ in range(depth):
        text_holder = {"x": text_holder}

    def edit(block):
        key = str(rng.choice(["fields", "settings", "layout", "data", "model"]))
        block[key] = text_holder
        return block

    try:
        _rewrite_block(path, edit)
    except RecursionError:  # json.dumps cannot write it: write the text by hand
        import h5py

        with h5py.File(path, "a") as h5:
            block = json.loads(h5.attrs["pyrater_fit"])
            text = json.dumps(block)[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"
            h5.attrs["pyrater_fit"] = text
            h5.attrs["pyrater_fit_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    return f"JSON nested {depth} deep"


def m_json_huge(rng, path):
    n = int(rng.choice([10**5, 10**6, 5 * 10**6]))

    def edit(block):
        where = str(rng.choice(["settings", "versions", "unit_labels"]))
        if where == "unit_labels":
            block["data"]["unit_labels"] = {"name": "item", "range": [0, n * 1000, 1]}
        else:
            block[where] = {"pad": [1.5] * n}
        return block

    _rewrite_block(path, edit)
    return f"JSON with a {n:,}-long value"


def m_json_types(rng, path):
    choices = [
        ("block is a list", lambda b: [b]),
        ("format_version a string", lambda b: b.update(format_version="1")),
        ("method unknown, class os:system", lambda b: b.update(method="evil", **{"class": "os:system"})),
        ("class outside pyrater.fits", lambda b: b.update(method="evil", **{"class": "pyrater.cli:main"})),
        ("class of the wrong kind", lambda b: b.update(method="evil", **{"class": "pyrater.fits.fitfile:_Reader"})),
        ("model unknown", lambda b: b["model"].update(name="nope")),
        ("model params wrong", lambda b: b["model"].update(params={"alpha": "x"})),
        ("alpha of the wrong length", lambda b: b["model"]["params"].update(alpha=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
        ("data is a list", lambda b: b.update(data=[1, 2])),
        ("labels repeat", lambda b: _repeat_labels(b)),
        ("categories reversed", lambda b: _reverse(b, "categories")),
        ("raters reversed", lambda b: _reverse(b, "rater_labels")),
        ("labels of a bad type", lambda b: b["data"]["categories"].update(values=[{"a": 1}, [2]], types=["str"])),
        ("label dtype odd", lambda b: b["data"]["categories"].update(dtype="datetime64[ns]")),
        ("layout not a list", lambda b: b.update(layout={"draws": "pi"})),
        ("layout path escape", lambda b: b.update(layout={**b.get("layout", {}), "draws": ["/rating_data/tally"]})),
        ("settings a list", lambda b: b["fields"].update(settings=[1])),
        ("elapsed text", lambda b: b["fields"].update(elapsed="slow")),
        ("n_iter float", lambda b: b["fields"].update(n_iter=2.5)),
        ("priors of the wrong shape", lambda b: _bad_priors(b)),
        (
            "ndarray with object dtype",
            lambda b: b["fields"].update(timings={"__ndarray__": "|O", "shape": [1], "data": [1]}),
        ),
        (
            "ndarray shape lies",
            lambda b: b["fields"].update(timings={"__ndarray__": "<f8", "shape": [10**6], "data": [1]}),
        ),
        ("known items disagree", lambda b: b.update(known_items={"nope": 1})),
        ("source format unknown", lambda b: b["data"].update(source_format="pickle")),
    ]
    label, edit = choices[int(rng.integers(0, len(choices)))]
    _rewrite_block(path, edit)
    return label


def _repeat_labels(block):
    spec = block["data"]["unit_labels"]
    if "values" in spec and len(spec["values"]) > 1:
        spec["values"][1] = spec["values"][0]
    else:
        block["data"]["rater_labels"]["values"] = [1] * len(block["data"]["rater_labels"].get("values", [1, 1]))


def _reverse(block, key):
    spec = block["data"][key]
    if "values" in spec:
        spec["values"] = spec["values"][::-1]
    else:
        start, stop, step = spec["range"]
        spec["range"] = [stop - step, start - step, -step]


def _bad_priors(block):
    if isinstance(block["fields"].get("priors"), dict):
        for value in block["fields"]["priors"].values():
            if isinstance(value, dict) and "shape" in value:
                value["shape"] = [len(value["data"])]
    else:
        block["model"]["params"]["beta"] = {"__ndarray__": "<f8", "shape": [2], "data": [1.0, 2.0]}


def m_json_nochecksum(rng, path):
    """The settings block changed without updating its checksum (as a bit flip in it would)."""

    def edit(block):
        block["seed"] = 12345
        block.setdefault("settings", {})["seed"] = 12345
        block["fields"].setdefault("settings", {})
        if isinstance(block["fields"]["settings"], dict):
            block["fields"]["settings"]["seed"] = 12345

    _rewrite_block(path, edit, checksum=False)
    return "settings changed, checksum not"


def m_values(rng, path):
    """Values that are each well formed but wrong: NaN draws, codes out of range, negative tallies, known > K."""
    import h5py

    with h5py.File(path, "r") as h5:
        constrained = (
            "posterior/pi",
            "posterior/theta",
            "rating_data/rating_code",
            "rating_data/unit_code",
            "rating_data/rater_code",
            "rating_data/tally",
            "fit_state/known",
            "fit_state/class_probs",
            "fit_state/pi",
        )
        present = [n for n in constrained if n in h5]
    name = str(rng.choice(present))
    with h5py.File(path, "a") as h5:
        ds = h5[name]
        values = ds[()]
        flat = values.reshape(-1)
        i = int(rng.integers(0, flat.size))
        if values.dtype.kind == "f":
            flat[i] = rng.choice([np.nan, np.inf, -0.5, 2.0])
        elif name.endswith("tally"):  # any count >= 0 is a valid tally: only a negative one is wrong
            flat[i] = -5
        else:
            flat[i] = rng.choice([-5, 10**6])
        ds[...] = values
    return f"a wrong value in {name}"


MUTATIONS: dict[str, Callable[[Any, Path], str]] = {
    "truncate": m_truncate,
    "bitflip": m_bitflip,
    "swap_groups": m_swap_groups,
    "drop": m_drop,
    "rename": m_rename,
    "wrong_dtype": m_wrong_dtype,
    "wrong_shape": m_wrong_shape,
    "huge": m_huge,
    "consistent_bomb": m_consistent_bomb,
    "external_link": m_external_link,
    "external_storage": m_external_storage,
    "encoding_attr": m_encoding_attr,
    "json_deep": m_json_deep,
    "json_huge": m_json_huge,
    "json_types": m_json_types,
    "json_nochecksum": m_json_nochecksum,
    "values": m_values,
}


# ------------------------------------------------------------------ memory
def _status_kib(key: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


# ------------------------------------------------------------------ driver
def run(cases: int, seed: int, workdir: Path, time_limit: float, memory_limit_mb: float) -> dict[str, Any]:
    """Run ``cases`` mutations; returns the summary (see the module docstring)."""
    from pyrater import FitFileError
    from pyrater.fits.fitfile import load_fit

    workdir.mkdir(parents=True, exist_ok=True)
    refs = reference_fits(workdir / "ref")
    names = sorted(refs)
    mutation_names = list(MUTATIONS)
    rng = np.random.default_rng(seed)
    results = []
    can_measure = _reset_peak()
    for case in range(cases):
        ref = names[int(rng.integers(0, len(names)))]
        mutation = (
            mutation_names[case % len(mutation_names)]
            if case < len(mutation_names)
            else str(rng.choice(mutation_names))
        )
        path = workdir / "case.nc"
        shutil.copyfile(refs[ref][0], path)
        info: dict[str, Any] = {"case": case, "fit": ref, "mutation": mutation}
        (workdir / "current.json").write_text(json.dumps(info))
        try:
            info["detail"] = MUTATIONS[mutation](np.random.default_rng([seed, case]), path)
        except Exception as exc:  # the mutation itself could not be made: not a finding about load
            info.update(outcome="skipped", detail=f"mutation failed: {type(exc).__name__}: {exc}")
            results.append(info)
            continue
        before = _status_kib("VmRSS")
        _reset_peak()
        start = time.perf_counter()
        try:
            fit = load_fit(path, max_memory_gib=LOAD_GIB)
            info["outcome"] = "equal" if same_fit(fit, refs[ref][1]) else "DIFFERENT"
            del fit
        except FitFileError as exc:
            info["outcome"] = "refused"
            info["message"] = str(exc)[:300]
        except Exception as exc:  # every other outcome is a finding
            info["outcome"] = "OTHER"
            info["message"] = f"{type(exc).__name__}: {exc}"[:500]
            info["traceback"] = traceback.format_exc()[-2000:]
        info["seconds"] = round(time.perf_counter() - start, 4)
        peak = _status_kib("VmHWM")
        info["peak_mb"] = round((peak - before) / 1024, 1) if can_measure and peak >= 0 and before >= 0 else None
        results.append(info)
    (workdir / "current.json").unlink(missing_ok=True)
    bad = [
        r
        for r in results
        if r["outcome"] in ("DIFFERENT", "OTHER")
        or r.get("seconds", 0) > time_limit
        or (r.get("peak_mb") is not None and r["peak_mb"] > memory_limit_mb)
    ]
    by_mutation: dict[str, dict[str, int]] = {}
    for r in results:
        by_mutation.setdefault(r["mutation"], {}).setdefault(r["outcome"], 0)
        by_mutation[r["mutation"]][r["outcome"]] += 1
    timed = [r["seconds"] for r in results if "seconds" in r]
    peaks = [r["peak_mb"] for r in results if r.get("peak_mb") is not None]
    return {
        "cases": cases,
        "seed": seed,
        "time_limit": time_limit,
        "memory_limit_mb": memory_limit_mb,
        "outcomes": {k: sum(1 for r in results if r["outcome"] == k) for k in sorted({r["outcome"] for r in results})},
        "by_mutation": by_mutation,
        "max_seconds": max(timed) if timed else None,
        "max_peak_mb": max(peaks) if peaks else None,
        "failures": bad,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds a load may take")
    parser.add_argument("--memory-limit-mb", type=float, default=400.0, help="peak memory a load may add")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--json", default=None, help="write the summary here")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="pyrater-fuzz-"))
    start = time.perf_counter()
    summary = run(args.cases, args.seed, workdir, args.time_limit, args.memory_limit_mb)
    summary["total_seconds"] = round(time.perf_counter() - start, 1)
    text = json.dumps(summary, indent=1, default=str)
    if args.json:
        Path(args.json).write_text(text)
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}, indent=1, default=str))
    for failure in summary["failures"][:20]:
        print("FAILURE", json.dumps(failure, default=str)[:1500])
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
