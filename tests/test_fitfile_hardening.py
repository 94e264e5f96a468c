"""Fit files from hostile or careless hands (issue 28, items 1 and 7; issue 27, item 6).

``pyrater.load`` reads only what the fit needs, checks every part against the
others and bounds every read; each failure is one ``FitFileError`` naming the
file, the part and the problem.  New files are chunked and checksummed,
compressed where compression pays, and of a predictable size; files written
with the earlier encoding still load exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import warnings
import zlib
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

import pyrater
from pyrater import FitFileError, datasets
from pyrater.fits import MCMCFit, fitfile
from pyrater.fits._lazy import LazyDraws
from pyrater.fits.fitfile import CHUNK_BYTES, load_fit


# ------------------------------------------------------------------ helpers
def same_arrays(a, b) -> None:
    """The loaded fit holds the original's arrays, to the last bit and dtype."""
    assert type(a) is type(b)
    assert a.data.equals(b.data)
    for name in ("draws", "sample_stats", "params"):
        if hasattr(a, name):
            va, vb = getattr(a, name), getattr(b, name)
            assert va.keys() == vb.keys()
            for key in va:
                assert np.asarray(va[key]).dtype == np.asarray(vb[key]).dtype
                np.testing.assert_array_equal(va[key], vb[key])
    for name in ("pi", "theta", "class_probs", "known"):
        if isinstance(getattr(a, name, None), np.ndarray):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def rewrite_block(path: Path, edit, checksum: bool = True) -> None:
    """Edit the JSON settings block in place (recomputing its checksum unless told not to)."""
    with h5py.File(path, "a") as h5:
        block = json.loads(h5.attrs["pyrater_fit"])
        out = edit(block)
        text = json.dumps(block if out is None else out)
        h5.attrs["pyrater_fit"] = text
        if checksum:
            h5.attrs["pyrater_fit_sha256"] = hashlib.sha256(text.encode()).hexdigest()


def replace(path: Path, name: str, data=None, **kwargs) -> None:
    """Replace a variable (keeping its non-dimension attributes)."""
    with h5py.File(path, "a") as h5:
        parent, _, leaf = name.rpartition("/")
        grp = h5[parent]
        attrs = {
            k: v for k, v in grp[leaf].attrs.items() if k not in ("DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME")
        }
        del grp[leaf]
        ds = grp.create_dataset(leaf, data=data, **kwargs)
        for k, v in attrs.items():
            ds.attrs[k] = v


def set_values(path: Path, name: str, change) -> None:
    with h5py.File(path, "a") as h5:
        values = h5[name][()]
        change(values)
        h5[name][...] = values


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def long_data():
    return pyrater.RatingData.from_long(datasets.anesthesia())


@pytest.fixture(scope="module")
def draws_fit(long_data):
    """An MCMCFit of simulated draws (no Stan): every constructor field filled."""
    rng = np.random.default_rng(0)
    C, S, K, J, I = 2, 40, long_data.n_categories, long_data.n_raters, long_data.n_units
    return MCMCFit(
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


@pytest.fixture(scope="module")
def em_fit(long_data):
    return pyrater.em(long_data, method="map", known={long_data.unit_labels[3]: long_data.categories[1]}, seed=1)


@pytest.fixture()
def draws_file(draws_fit, tmp_path):
    return draws_fit.save(tmp_path / "draws.nc")


@pytest.fixture()
def em_file(em_fit, tmp_path):
    return em_fit.save(tmp_path / "em.nc")


# ------------------------------------------------------------------ encoding and size
def test_new_files_are_chunked_checksummed_and_compressed_where_it_pays(long_data, tmp_path):
    """Floats stored as they are (8 bytes each: draws do not compress), integers compressed; every variable
    chunked (at most CHUNK_BYTES, whole draws) and Fletcher-32 checksummed; the size follows the formula."""
    rng = np.random.default_rng(1)
    C, S, K, J, I = 2, 4000, long_data.n_categories, long_data.n_raters, long_data.n_units
    fit = MCMCFit(
        data=long_data,
        model=pyrater.DawidSkene(),
        priors=pyrater.DawidSkene().priors(K, J),
        draws={
            "pi": rng.dirichlet(np.ones(K), size=(C, S)),
            "theta": rng.dirichlet(np.ones(K), size=(C, S, J, K)),
            "log_lik": rng.normal(-5, 0.3, size=(C, S, I)),
        },
        sample_stats={"lp": rng.normal(size=(C, S)), "diverging": np.zeros((C, S), dtype=bool)},
        known=None,
        engine="pystan",
        settings={"chains": C, "draws": S},
    )
    path = fit.save(tmp_path / "draws.nc")
    float_bytes = 0
    with h5py.File(path, "r") as h5:
        for group in ("posterior", "log_likelihood", "sample_stats", "rating_data"):
            for name, ds in h5[group].items():
                if "DIMENSION_LIST" not in ds.attrs:  # a dimension coordinate
                    continue
                assert ds.fletcher32 and ds.chunks is not None, name
                assert np.prod(ds.chunks) * ds.dtype.itemsize <= CHUNK_BYTES
                if ds.dtype.kind == "f":
                    assert ds.compression is None, name
                    float_bytes += ds.size * 8
                else:
                    assert ds.compression == "gzip" and ds.shuffle, name
        theta = h5["posterior/theta"]
        assert theta.chunks[0] == 1 and theta.chunks[2:] == theta.shape[2:]  # runs of whole draws of one chain
    values = sum(np.asarray(v).size for v in fit.draws.values()) + fit.sample_stats["lp"].size
    assert float_bytes == 8 * values  # 12.4 MB
    size = os.path.getsize(path)
    # 8 bytes a stored number, plus the data (a few bytes a rating), labels, the JSON block and HDF5's metadata
    assert float_bytes < size < 1.02 * float_bytes + 200_000
    same_arrays(fit, load_fit(path))


def test_files_of_the_earlier_encoding_load_exactly(draws_fit, em_fit, tmp_path, monkeypatch):
    """Files written before (deflate level 4 on every number, HDF5's own chunks, no checksum of the JSON)."""

    def old_encoding(ds):
        return {
            name: {"fletcher32": True, "zlib": True, "complevel": 4}
            for name, var in ds.data_vars.items()
            if var.dtype.kind in "biuf" and var.size > 0
        }

    monkeypatch.setattr(fitfile, "_encoding", old_encoding)
    for fit in (draws_fit, em_fit):
        path = fit.save(tmp_path / f"old_{fit.method}.nc")
        with h5py.File(path, "a") as h5:
            del h5.attrs["pyrater_fit_sha256"]
            assert h5["posterior/theta"].compression == "gzip"
        same_arrays(fit, load_fit(path))


def test_load_reads_only_the_parts_the_fit_needs(draws_fit, tmp_path):
    """observed_data and the ArviZ-only per-item log-likelihood of grouped data are not read."""
    path = draws_fit.save(tmp_path / "f.nc")
    replace(path, "observed_data/item_obs", None, shape=(10**9,), dtype="i8", chunks=(10**6,))  # 8 GB, unwritten
    same_arrays(draws_fit, load_fit(path))
    grouped = pyrater.RatingData.from_grouped(datasets.caries())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 30 draws: Rhat is not the point here
        fit = pyrater.fit(grouped, method="gibbs", chains=2, draws=30, warmup=30, seed=3, progress=False)
    gpath = fit.save(tmp_path / "g.nc")
    with h5py.File(gpath, "a") as h5:
        assert h5["log_likelihood/log_lik"].shape[-1] == grouped.n_items  # per item, for az.loo on the file
        del h5["log_likelihood"]
    same_arrays(fit, load_fit(gpath))


# ------------------------------------------------------------------ not a regular file
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "fit.nc"
    os.mkfifo(fifo)
    outcome: dict = {}

    def load():
        try:
            pyrater.load(fifo)
        except BaseException as exc:  # recorded for the assertion below
            outcome["error"] = exc

    thread = threading.Thread(target=load, daemon=True)
    start = time.perf_counter()
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "load blocked on a FIFO"
    assert time.perf_counter() - start < 5
    assert isinstance(outcome.get("error"), FitFileError)
    assert "FIFO" in str(outcome["error"]) and str(fifo) in str(outcome["error"])


def test_directories_and_devices_are_refused(tmp_path):
    with pytest.raises(FitFileError, match="is a directory"):
        pyrater.load(tmp_path)
    if os.path.exists("/dev/zero"):
        start = time.perf_counter()
        with pytest.raises(FitFileError, match="is a device, not a regular file"):
            pyrater.load("/dev/zero")
        assert time.perf_counter() - start < 5
    with pytest.raises(FileNotFoundError):
        pyrater.load(tmp_path / "missing.nc")


# ------------------------------------------------------------------ parts checked against each other
def _reverse_categories(block):
    spec = block["data"]["categories"]
    if "values" in spec:
        spec["values"] = spec["values"][::-1]
    else:
        start, stop, step = spec["range"]
        spec["range"] = [stop - step, start - step, -step]


def _repeat_unit_label(block):
    spec = block["data"]["unit_labels"]
    if "range" in spec:
        start, stop, _ = spec["range"]
        block["data"]["unit_labels"] = {
            "name": spec["name"],
            "dtype": "int64",
            "types": ["int"],
            "values": [start] + list(range(start, stop - 1)),
        }
    else:
        spec["values"][1] = spec["values"][0]


DRAWS_EDITS = {
    "categories reversed": (
        lambda p: rewrite_block(p, _reverse_categories),
        r"coordinate 'category'.*labels differ from those in the settings block",
    ),
    "unit labels repeat": (lambda p: rewrite_block(p, _repeat_unit_label), r"'data.unit_labels'.*labels repeat"),
    "alpha of the wrong length": (
        lambda p: rewrite_block(p, lambda b: b["model"]["params"].update(alpha=[1.0, 2.0, 3.0])),
        r"'model'.*priors do not fit the data's K = 4.*alpha",
    ),
    "priors of the wrong shape": (
        lambda p: rewrite_block(
            p, lambda b: b["fields"]["priors"].update(alpha={"__ndarray__": "<f8", "shape": [2], "data": [1.0, 1.0]})
        ),
        r"'fields.priors'.*prior 'alpha' has shape \(2,\)",
    ),
    "NaN in the posterior": (
        lambda p: set_values(p, "posterior/pi", lambda v: v.__setitem__((0, 3, 1), np.nan)),
        r"group 'posterior', variable 'pi'.*non-finite",
    ),
    "theta off the simplex": (
        lambda p: set_values(p, "posterior/theta", lambda v: v.__setitem__((1, 0, 0, 0, 0), 0.999)),
        r"variable 'theta'.*sum to 1",
    ),
    "a rating code outside 0..K-1": (
        lambda p: set_values(p, "rating_data/rating_code", lambda v: v.__setitem__(7, 4)),
        r"variable 'rating_code'.*rating codes must be in \[0, 4\) \(4 categories\)",
    ),
    "a unit code outside the units": (
        lambda p: set_values(p, "rating_data/unit_code", lambda v: v.__setitem__(0, -1)),
        r"variable 'unit_code'.*unit codes must be in \[0, 45\)",
    ),
    "codes stored as floats": (
        lambda p: replace(p, "rating_data/rater_code", np.zeros(315)),
        r"variable 'rater_code'.*dtype float64 is not integer",
    ),
    "draws stored as 32-bit floats": (
        lambda p: replace(p, "posterior/pi", np.full((2, 40, 4), 0.25, dtype=np.float32)),
        r"variable 'pi'.*not a 64-bit number type",
    ),
    "a long table with a tally": (
        lambda p: set_values(p, "rating_data/tally", lambda v: v.__setitem__(2, 3)),
        r"long and wide data have a tally of 1",
    ),
    "sample statistics of another length": (
        lambda p: replace(p, "sample_stats/lp", np.zeros((2, 39))),
        r"variable 'lp'.*shape \(2, 39\) does not match the expected \(2, 40\)",
    ),
    "settings of the wrong type": (
        lambda p: rewrite_block(p, lambda b: b["fields"].update(settings=[1, 2])),
        r"MCMCFit.settings is a list; dict expected",
    ),
    "a summary key that disagrees": (
        lambda p: rewrite_block(p, lambda b: b.update(seed=99)),
        r"'seed' disagrees with the fit's own fields",
    ),
    "JSON nested too deeply": (
        lambda p: _write_raw_block(p, '{"format": "pyrater-fit", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        r"nested too deeply",
    ),
    "JSON nested deeper than the reader follows": (
        lambda p: rewrite_block(p, lambda b: b["fields"].update(settings=_nest(40))),
        r"'fields.settings'.*nested deeper than 32 levels",
    ),
    "the block is a list": (lambda p: rewrite_block(p, lambda b: [b]), r"is not a pyrater fit file"),
    "a class to import from outside pyrater": (
        lambda p: rewrite_block(p, lambda b: b.update(method="evil", **{"class": "os:system"})),
        r"fits by method 'evil' are not known",
    ),
    "a class that is no fit": (
        lambda p: rewrite_block(p, lambda b: b.update(method="evil", **{"class": "pyrater.fits.fitfile:_Reader"})),
        r"is not a dataclass subclass of pyrater.Fit",
    ),
    "layout naming another group's variable": (
        lambda p: rewrite_block(p, lambda b: b["layout"].update(draws=["pi", "theta", "/rating_data/tally"])),
        r"layout\['draws'\] is not a list of variable names",
    ),
    "the JSON block changed without its checksum": (
        lambda p: rewrite_block(p, lambda b: b["fields"].update(elapsed=99.0), checksum=False),
        r"does not match its checksum",
    ),
    "an external link": (
        lambda p: _link(p, "rating_data/tally", h5py.ExternalLink("/etc/hostname", "/")),
        r"variable 'tally'.*it is a link \(ExternalLink\)",
    ),
    "a soft link": (
        lambda p: _link(p, "posterior/pi", h5py.SoftLink("/posterior/theta")),
        r"variable 'pi'.*it is a link \(SoftLink\)",
    ),
    "data in an external file": (
        lambda p: _external(p, "rating_data/tally"),
        r"variable 'tally'.*stored in external files",
    ),
    "an unknown filter": (
        lambda p: _unknown_filter(p, "sample_stats/lp"),
        r"variable 'lp'.*needs (the )?HDF5 filter 32001",
    ),
    "a CF packing attribute": (
        lambda p: _attr(p, "posterior/pi", "scale_factor", 2.0),
        r"variable 'pi'.*encoding attribute 'scale_factor'",
    ),
    "a huge variable with nothing written": (
        lambda p: _grow_unwritten(p),
        r"variable 'pi'.*declares 160,000,000 bytes but stores only 0",
    ),
}


def _nest(depth):
    value: dict = {}
    for _ in range(depth):
        value = {"x": value}
    return value


def _write_raw_block(path, text):
    with h5py.File(path, "a") as h5:
        h5.attrs["pyrater_fit"] = text
        h5.attrs["pyrater_fit_sha256"] = hashlib.sha256(text.encode()).hexdigest()


def _link(path, name, link):
    with h5py.File(path, "a") as h5:
        del h5[name]
        h5[name] = link


def _external(path, name):
    with h5py.File(path, "r") as h5:
        shape, dtype = h5[name].shape, h5[name].dtype
    raw = path.with_suffix(".raw")
    raw.write_bytes(np.ones(shape, dtype=dtype).tobytes())
    replace(path, name, None, shape=shape, dtype=dtype, external=[(str(raw), 0, h5py.h5f.UNLIMITED)])


def _unknown_filter(path, name):
    """A dataset with an optional filter HDF5 does not have (blosc, 32001): written unfiltered, refused on read."""
    with h5py.File(path, "a") as h5:
        values = h5[name][()]
        del h5[name]
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk(values.shape)
        dcpl.set_filter(32001, h5py.h5z.FLAG_OPTIONAL, ())
        space = h5py.h5s.create_simple(values.shape)
        dsid = h5py.h5d.create(h5["sample_stats"].id, b"lp", h5py.h5t.IEEE_F64LE, space, dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(values))


def _attr(path, name, key, value):
    with h5py.File(path, "a") as h5:
        h5[name].attrs[key] = value


def _grow_unwritten(path):
    """Every draw variable declares 2.5 million draws (valid-looking fill values), none written."""
    with h5py.File(path, "r") as h5:
        shapes = {
            f"{g}/{n}": (ds.shape, ds.dtype)
            for g in ("posterior", "sample_stats", "log_likelihood")
            for n, ds in h5[g].items()
            if ds.ndim >= 2
        }
    for name, (shape, dtype) in shapes.items():
        big = (shape[0], 2_500_000, *shape[2:])
        fill = 1.0 / shape[-1] if name.endswith(("pi", "theta")) else 0.0
        replace(
            path, name, None, shape=big, dtype=dtype, chunks=tuple(min(n, 64) for n in big), fillvalue=dtype.type(fill)
        )


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
@pytest.mark.parametrize("case", list(DRAWS_EDITS))
def test_inconsistent_or_hostile_parts_give_one_clear_error(case, lazy, draws_file):
    """Eagerly, load raises; lazily, load or the first use of the draws does (values are checked when read)."""
    edit, pattern = DRAWS_EDITS[case]
    edit(draws_file)
    start = time.perf_counter()
    with pytest.raises(FitFileError, match=pattern) as info:
        fit = pyrater.load(draws_file, lazy=lazy)
        if lazy:
            fit.draws.read_all()
    assert str(draws_file) in str(info.value)
    assert time.perf_counter() - start < 5


EM_EDITS = {
    "a known class outside 0..K-1": (
        lambda p: set_values(p, "fit_state/known", lambda v: v.__setitem__(0, 7)),
        r"variable 'known'.*known classes must be in \[-1, 4\)",
    ),
    "class probabilities off the simplex": (
        lambda p: set_values(p, "fit_state/class_probs", lambda v: v.__setitem__((2, 0), 1.5)),
        r"variable 'class_probs'.*\[0, 1\]",
    ),
    "the ArviZ posterior disagrees with the estimate": (
        lambda p: set_values(p, "posterior/pi", lambda v: v.__setitem__((0, 0, slice(None)), v[0, 0, ::-1])),
        r"group 'posterior', variable 'pi'.*differs from the estimate",
    ),
    "known items that disagree with the known codes": (
        lambda p: rewrite_block(p, lambda b: b.update(known_items={"1": 2})),
        r"'known_items' disagrees",
    ),
    "an array field left out": (
        lambda p: _delete(p, "fit_state/restart_objectives"),
        r"variable 'restart_objectives' is missing",
    ),
    "an integer field holding a float": (
        lambda p: rewrite_block(p, lambda b: b["fields"].update(n_iter=2.5)),
        r"EMFit.n_iter is a float; int expected",
    ),
}


def _delete(path, name):
    with h5py.File(path, "a") as h5:
        del h5[name]


@pytest.mark.parametrize("case", list(EM_EDITS))
def test_inconsistent_mode_fits_give_one_clear_error(case, em_file):
    edit, pattern = EM_EDITS[case]
    edit(em_file)
    with pytest.raises(FitFileError, match=pattern):
        pyrater.load(em_file)


# ------------------------------------------------------------------ bounded memory
def test_the_memory_limit_is_checked_from_declared_sizes_before_reading(draws_fit, draws_file):
    for limit in (1e-6, 1e-4):  # refused at the settings block, at the arrays
        with pytest.raises(FitFileError, match=rf"would need about .* GiB .*, above max_memory_gib={limit:g}") as info:
            load_fit(draws_file, max_memory_gib=limit)
    need = float(str(info.value).split("max_memory_gib=")[-1].split(")")[0])
    same_arrays(draws_fit, load_fit(draws_file, max_memory_gib=need))  # the advice works
    with pytest.raises(ValueError, match="max_memory_gib must be a positive number"):
        load_fit(draws_file, max_memory_gib=0)


def test_load_without_a_limit_allows_the_documented_default(draws_file, monkeypatch):
    """pyrater.load allows DEFAULT_LOAD_GIB (4 GiB), not the 1 GiB of the fitting budgets: a fit of 10^7
    ratings kept under max_memory_gib=4 writes about 1 GiB of draws, and must load back without an option."""
    from pyrater.fits import fitfile

    assert fitfile.DEFAULT_LOAD_GIB == 4.0
    monkeypatch.setattr(fitfile, "DEFAULT_LOAD_GIB", 1e-4)  # the default is what load uses when not told
    with pytest.raises(FitFileError, match="above max_memory_gib=0.0001"):
        pyrater.load(draws_file)
    with pytest.raises(FitFileError, match="above max_memory_gib=0.0001"):
        load_fit(draws_file)


def _peak_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="peak memory is measured through /proc")
def test_a_compressed_bomb_costs_one_block(draws_file):
    """A posterior of 0.5 GB of compressed zeros (a 500 KB file): the first block fails its check, nothing more is read."""
    S, K = 8_000_000, 4
    chunk = (1, 131_072, K)
    zero_chunk = zlib.compress(np.zeros(chunk).tobytes(), 9)
    with h5py.File(draws_file, "a") as h5:
        del h5["posterior/pi"]
        ds = h5["posterior"].create_dataset("pi", shape=(2, S, K), dtype="f8", chunks=chunk, compression="gzip")
        for c in range(2):
            for s in range(0, S, chunk[1]):
                ds.id.write_direct_chunk((c, s, 0), zero_chunk)
    assert os.path.getsize(draws_file) < 2_000_000
    Path("/proc/self/clear_refs").write_text("5")
    before = _peak_rss_kib()
    start = time.perf_counter()
    with pytest.raises(FitFileError, match=r"variable 'pi'.*sum to 1"):
        load_fit(draws_file)
    assert time.perf_counter() - start < 5
    assert (_peak_rss_kib() - before) / 1024 < 120  # MB: one 32 MB block and its check, not 512 MB


# ------------------------------------------------------------------ any exception becomes FitFileError
def test_any_exception_while_reading_becomes_fit_file_error(draws_file, monkeypatch):
    def out_of_memory(self, *args, **kwargs):
        raise MemoryError("Unable to allocate 2.4 GiB")

    monkeypatch.setattr(fitfile._Reader, "read_array", out_of_memory)
    with pytest.raises(FitFileError, match=r"memory ran out while reading it \(Unable to allocate"):
        pyrater.load(draws_file)
    monkeypatch.undo()

    def broken(self, *args, **kwargs):
        raise AttributeError("'NoneType' object has no attribute 'shape'")

    monkeypatch.setattr(fitfile._Reader, "draws", broken)
    with pytest.raises(FitFileError, match=r"AttributeError: 'NoneType' object has no attribute 'shape'"):
        pyrater.load(draws_file)


def test_labels_of_every_type_survive_the_checks(tmp_path):
    """String, integer, float, boolean and mixed labels: coordinates and JSON agree, the fit loads."""
    df = pd.DataFrame(
        {
            "item": [1, 1, "b", "b", 2.5, 2.5, True, True] * 3,
            "rater": ["r1", 7] * 12,
            "rating": ["yes", "no", "no", "no", "yes", "yes", "no", "yes"] * 3,
        }
    )
    df["item"] = [f"{v}{i // 8}" if isinstance(v, str) else v for i, v in enumerate(df["item"])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = pyrater.RatingData.from_long(df.drop_duplicates(subset=["item", "rater"]).reset_index(drop=True))
        fit = pyrater.em(data, method="map")
    back = pyrater.load(fit.save(tmp_path / "labels.nc"))
    same_arrays(fit, back)
    assert [type(v) for v in back.data.unit_labels] == [type(v) for v in data.unit_labels]


def test_a_file_without_log_lik_is_smaller_and_loads_as_a_fit_without_it(draws_fit, tmp_path):
    full = draws_fit.save(tmp_path / "full.nc")
    lean = fitfile.save_fit(draws_fit, tmp_path / "lean.nc", log_lik=False)
    ll_bytes = np.asarray(draws_fit.draws["log_lik"]).nbytes
    assert os.path.getsize(full) - os.path.getsize(lean) >= ll_bytes  # the per-item group goes too
    back = load_fit(lean)
    assert back.draws["log_lik"].shape == (*draws_fit.draws["log_lik"].shape[:2], 0)  # as a fit that kept none
    for key in ("pi", "theta"):
        np.testing.assert_array_equal(back.draws[key], draws_fit.draws[key])
    with h5py.File(lean, "r") as h5:
        assert "log_likelihood" not in h5
    with pytest.raises(ValueError, match="log_lik must be True or False"):
        fitfile.save_fit(draws_fit, tmp_path / "x.nc", log_lik="no")


# ------------------------------------------------------------------ lazy loading
def test_a_lazy_load_reads_the_large_draws_on_first_use_and_gives_the_same_fit(draws_fit, draws_file):
    """pi is read at load, theta and log_lik on first use; the numbers equal the eager load's to the bit."""
    lazy = pyrater.load(draws_file)
    assert isinstance(lazy.draws, LazyDraws)
    assert set(lazy.draws.unread) == {"theta", "log_lik"}
    assert lazy.has_log_lik and lazy.n_chains == 2  # answered from the checked metadata, nothing read
    assert set(lazy.draws.unread) == {"theta", "log_lik"}
    assert lazy.draws.shape("theta") == draws_fit.draws["theta"].shape
    assert "on disk" in repr(lazy.draws)
    eager = pyrater.load(draws_file, lazy=False)
    assert type(eager.draws) is dict
    pd.testing.assert_frame_equal(lazy.summary().parameters, eager.summary().parameters)
    assert lazy.draws.unread == ("log_lik",)  # the summary needed theta, not the log-likelihood
    np.testing.assert_array_equal(lazy.class_probabilities(), eager.class_probabilities())
    same_arrays(draws_fit, lazy)
    assert lazy.draws.unread == ()
    with pytest.raises(ValueError, match="lazy must be True or False"):
        pyrater.load(draws_file, lazy="yes")


def test_a_lazy_fit_pickles_and_copies_as_a_fit_with_its_draws_in_memory(draws_fit, draws_file):
    import copy
    import pickle

    lazy = pyrater.load(draws_file)
    for other in (pickle.loads(pickle.dumps(lazy)), copy.deepcopy(lazy)):
        assert type(other.draws) is dict
        same_arrays(draws_fit, other)


def test_damaged_draws_pass_a_lazy_load_and_fail_on_first_use(draws_file):
    set_values(draws_file, "posterior/theta", lambda v: v.__setitem__((0, 1, 0, 0), 7.0))
    fit = pyrater.load(draws_file)  # structure, shapes and sizes are sound: values are read later
    with pytest.raises(FitFileError, match=r"variable 'theta'.*read on first use, after a lazy load"):
        fit.summary()
    with pytest.raises(FitFileError, match=r"variable 'theta'"):
        pyrater.load(draws_file, lazy=False)


def test_a_lazy_fit_refuses_a_file_changed_or_removed_since_the_load(draws_fit, draws_file, tmp_path):
    fit = pyrater.load(draws_file)
    other = draws_fit.save(tmp_path / "other.nc")
    os.replace(other, draws_file)  # same path, another file (as a new fit.save(path) would leave it)
    with pytest.raises(FitFileError, match="changed since the fit was loaded; load it again"):
        fit.draws["theta"]
    fit = pyrater.load(draws_file)
    fit.draws["theta"]  # read now: kept in memory
    draws_file.unlink()
    np.testing.assert_array_equal(fit.draws["theta"], draws_fit.draws["theta"])
    with pytest.raises(FitFileError, match="can no longer be read.*lazy=False"):
        fit.draws["log_lik"]


def test_a_lazy_load_still_refuses_a_file_over_the_memory_limit_at_once(draws_file):
    """The declared sizes of the deferred arrays count against max_memory_gib at load, before any read."""
    with h5py.File(draws_file, "r") as h5:
        need = sum(h5[f"{g}/{n}"].size * 8 for g, n in (("posterior", "theta"), ("log_likelihood", "log_lik")))
    with pytest.raises(FitFileError, match="above max_memory_gib"):
        load_fit(draws_file, max_memory_gib=need / 2**30 / 2)


def test_a_saved_gibbs_fit_keeps_its_class_probabilities(long_data, tmp_path, monkeypatch):
    """The sampler's Rao-Blackwellised sums are stored: the loaded fit answers class_probabilities()
    to the bit without a pass over the draws (nor reading theta)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 50 draws: high Rhat, beside the point here
        fit = pyrater.fit(long_data, method="gibbs", chains=2, draws=50, warmup=20, seed=3, progress=False)
    expected = fit.class_probabilities()
    back = pyrater.load(fit.save(tmp_path / "gibbs.nc"))
    import pyrater.fits.draws as draws_module

    def no_pass(*args, **kwargs):
        raise AssertionError("the class probabilities were recomputed from the draws")

    monkeypatch.setattr(draws_module, "draws_class_probabilities", no_pass)
    pd.testing.assert_frame_equal(back.class_probabilities(), expected)
    assert "theta" in back.draws.unread
    monkeypatch.undo()
    with h5py.File(tmp_path / "gibbs.nc", "r") as h5:
        assert h5["fit_state/rb_class_probs"].shape == (long_data.n_units, long_data.n_categories)


# ------------------------------------------------------------------ an "auto" fit's model choice
@pytest.fixture(scope="module")
def auto_fit():
    sim = pyrater.simulate("dawid_skene", 100, 5, n_categories=3, raters_per_item=3, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyrater.fit(sim.data, "auto", seed=1, progress=False, candidates=["dawid_skene", "one_coin"])


def test_an_auto_fit_keeps_its_model_choice_but_not_the_candidates_fits(auto_fit, tmp_path):
    back = pyrater.load(auto_fit.save(tmp_path / "auto.nc"))
    saved, choice = back.model_choice, auto_fit.model_choice
    assert (saved.chosen, saved.reason, saved.skipped, saved.prior_scale) == (
        choice.chosen,
        choice.reason,
        choice.skipped,
        choice.prior_scale,
    )
    pd.testing.assert_frame_equal(saved.table, choice.table, check_dtype=False)
    assert saved.table["chosen"].dtype == bool and saved.table["n_bad_k"].dtype == np.int64
    assert saved.fits == {} and choice.reason in str(back.summary())
    assert pyrater.load(pyrater.em(auto_fit.data, seed=1, method="ml").save(tmp_path / "plain.nc")).model_choice is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda mc: mc.update(reason=3), "'reason' is not text"),
        (lambda mc: mc.update(table=[]), "'model_choice.table' is a list, not an object"),
        (lambda mc: mc["table"]["data"].__delitem__(-1), "its 'data' does not match"),
        (lambda mc: mc["table"]["data"][0].__setitem__(1, {"x": 1}), "not a number, text, true/false or null"),
        (lambda mc: mc.update(prior_scale={"dawid_skene": "big"}), "'prior_scale' must map names to numbers"),
    ],
)
def test_a_damaged_model_choice_is_refused_naming_it(auto_fit, tmp_path, edit, message):
    path = auto_fit.save(tmp_path / "auto.nc")
    rewrite_block(path, lambda block: edit(block["model_choice"]))
    with pytest.raises(FitFileError, match="model_choice") as err:
        pyrater.load(path, lazy=False)
    assert message in str(err.value)
