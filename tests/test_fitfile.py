"""Fit files (issue 16): data-only netCDF4 files that round-trip every method, and clear errors.

Every accessor must give the same numbers after ``pyrater.load(fit.save(path))``;
plain ArviZ / xarray must open the file; damaged, foreign, newer and pickle
files give one clear :class:`pyrater.FitFileError`.  With ``PYRATER_OTHER_PYTHON``
(set by ``.ci/run``: the other CI leg's interpreter, ArviZ 0.x <-> 1.x) a file
is exchanged in both directions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import pyrater
from pyrater import FitFileError, _arviz
from pyrater.fits import MCMCFit
from pyrater.fits.fitfile import FORMAT_VERSION, register_fit_class


# ------------------------------------------------------------------ helpers
def assert_same_fit(a, b) -> None:
    """Every accessor of ``b`` gives the numbers of ``a``."""
    assert type(a) is type(b) and a.method == b.method
    assert type(a.model) is type(b.model) and str(a.model) == str(b.model)
    assert a.data.equals(b.data) and a.data.source_format == b.data.source_format
    for labels in ("unit_labels", "rater_labels", "categories"):
        pd.testing.assert_index_equal(getattr(a.data, labels), getattr(b.data, labels), exact=False)
        assert [type(v) for v in getattr(a.data, labels)] == [type(v) for v in getattr(b.data, labels)]
    pd.testing.assert_series_equal(a.point_estimate("pi"), b.point_estimate("pi"))
    xr.testing.assert_identical(a.point_estimate("theta"), b.point_estimate("theta"))
    pd.testing.assert_series_equal(a.point_estimate("z"), b.point_estimate("z"))
    pd.testing.assert_frame_equal(a.class_probabilities(), b.class_probabilities())
    sa, sb = a.summary(), b.summary()
    pd.testing.assert_frame_equal(sa.parameters, sb.parameters)
    pd.testing.assert_frame_equal(sa.classes, sb.classes)
    assert str(sa) == str(sb)
    assert sa.priors.keys() == sb.priors.keys()
    for key in sa.priors:
        np.testing.assert_array_equal(sa.priors[key], sb.priors[key])
    ia, ib = (_arviz.group(f.to_inference_data(), "posterior") for f in (a, b))
    xr.testing.assert_equal(ia, ib)
    if a.has_draws:
        xr.testing.assert_identical(a.posterior_samples("theta"), b.posterior_samples("theta"))
        la, lb = pyrater.loo(a, warn=False), pyrater.loo(b, warn=False)
        assert la.elpd == lb.elpd and la.se == lb.se and la.p == lb.p
        pd.testing.assert_series_equal(la.pareto_k, lb.pareto_k)
        pd.testing.assert_frame_equal(a.mcmc_diagnostics(warn=False), b.mcmc_diagnostics(warn=False))
        assert b.settings == a.settings and b.engine == a.engine and b.elapsed == a.elapsed
        for key, value in a.sample_stats.items():
            np.testing.assert_array_equal(b.sample_stats[key], value)
            assert b.sample_stats[key].dtype == np.asarray(value).dtype
    known_a, known_b = getattr(a, "known", None), getattr(b, "known", None)
    assert (known_a is None) == (known_b is None)
    if known_a is not None:
        np.testing.assert_array_equal(known_a, known_b)


def _quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return pyrater.fit(*args, progress=False, **kwargs)


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def long_data(anesthesia_path):
    return pyrater.RatingData.from_long(pd.read_csv(anesthesia_path))


@pytest.fixture(scope="module")
def grouped_data(caries_path):
    return pyrater.RatingData.from_grouped(pd.read_csv(caries_path))


@pytest.fixture(scope="module")
def mcmc_long(long_data):
    return _quiet_fit(long_data, chains=2, warmup=200, draws=200, seed=4)


@pytest.fixture(scope="module")
def mcmc_grouped(grouped_data):
    return _quiet_fit(grouped_data, chains=2, warmup=200, draws=200, seed=4)


# --------------------------------------------------------------- round trips
@pytest.mark.parametrize("method", ["ml", "map"])
@pytest.mark.parametrize("which", ["long", "grouped"])
def test_em_round_trip(method, which, request, tmp_path):
    data = request.getfixturevalue(f"{which}_data")
    fit = pyrater.em(data, method=method, n_restarts=2, seed=1)
    back = pyrater.load(fit.save(tmp_path / "em.nc"))
    assert_same_fit(fit, back)
    for name in ("pi", "theta", "class_probs", "log_lik_trace", "restart_objectives", "empty_rows"):
        np.testing.assert_array_equal(getattr(back, name), getattr(fit, name))
    assert (back.log_lik, back.n_iter, back.converged, back.log_posterior) == (
        fit.log_lik,
        fit.n_iter,
        fit.converged,
        fit.log_posterior,
    )
    assert back.timings == fit.timings and back.backend == fit.backend


def test_a_suffix_of_another_format_is_warned_about_and_the_file_still_loads(long_data, tmp_path):
    fit = pyrater.em(long_data, method="map", n_restarts=1, seed=1)
    with pytest.warns(UserWarning, match=r"netCDF4/HDF5 fit file, not a pickle as its suffix '\.pkl' suggests"):
        path = fit.save(tmp_path / "fit.pkl")
    assert_same_fit(fit, pyrater.load(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the suggested suffix, or none: no warning
        fit.save(tmp_path / "fit.nc")
        fit.save(tmp_path / "fit")


def test_saving_to_a_folder_or_into_no_folder_is_refused_before_anything_is_written(long_data, tmp_path):
    fit = pyrater.em(long_data, method="map", seed=1)
    with pytest.raises(IsADirectoryError, match=r"is a folder; give a file name for the fit, e\.g\. .*fit\.nc"):
        fit.save(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no folder .*missing.*mkdir\(parents=True\)"):
        fit.save(tmp_path / "missing" / "fit.nc")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no temporary file left behind


def test_em_keeps_its_known_items_through_the_file(long_data, tmp_path):
    data = long_data
    known = {data.unit_labels[2]: data.categories[0], data.unit_labels[5]: data.categories[1]}
    fit = pyrater.em(data, method="map", known=known)
    codes = np.full(data.n_units, -1)
    codes[[2, 5]] = [0, 1]
    np.testing.assert_array_equal(fit.known, codes)
    assert pyrater.em(data, method="map").known is None
    path = fit.save(tmp_path / "em_known.nc")
    back = pyrater.load(path)
    np.testing.assert_array_equal(back.known, fit.known)
    block = json.loads(xr.open_datatree(path, engine="h5netcdf").attrs["pyrater_fit"])
    assert block["known_items"] == {str(k): v for k, v in known.items()}


@pytest.mark.stan
@pytest.mark.parametrize("which", ["long", "grouped"])
def test_optimize_round_trip_with_known_items(which, request, tmp_path):
    data = request.getfixturevalue(f"{which}_data")
    known = {data.unit_labels[2]: data.categories[0]}
    fit = pyrater.fit(data, "class_conditional", method="optimize", known=known, seed=1)
    path = fit.save(tmp_path / "opt.nc")
    back = pyrater.load(path)
    assert_same_fit(fit, back)
    assert back.log_density == fit.log_density
    np.testing.assert_array_equal(back.all_log_densities, fit.all_log_densities)
    np.testing.assert_array_equal(back.converged, fit.converged)
    block = json.loads(xr.open_datatree(path, engine="h5netcdf").attrs["pyrater_fit"])
    assert block["known_items"] == {str(data.unit_labels[2]): data.categories[0]}
    assert block["method"] == "optimize" and block["model"]["name"] == "class_conditional"
    assert block["seed"] == 1 and block["format_version"] == FORMAT_VERSION
    np.testing.assert_array_equal(np.asarray(block["priors"]["beta1"]["data"]), fit.priors["beta1"])


@pytest.mark.stan
@pytest.mark.parametrize("which", ["long", "grouped"])
def test_mcmc_round_trip(which, request, tmp_path):
    fit = request.getfixturevalue(f"mcmc_{which}")
    back = pyrater.load(fit.save(tmp_path / "mcmc.nc"))
    assert_same_fit(fit, back)
    assert back.draws.keys() == fit.draws.keys()
    for key, value in fit.draws.items():
        np.testing.assert_array_equal(back.draws[key], value)


def test_string_and_mixed_labels_and_priors_survive(tmp_path):
    df = pd.DataFrame(
        {
            "item": [1, 1, "b", "b", 3, 3, "d", "d"] * 3,
            "rater": ["r1", "r2"] * 12,
            "rating": ["yes", "no", "no", "no", "yes", "yes", "no", "yes"] * 3,
        }
    )
    df["item"] = [f"{v}{i // 8}" if isinstance(v, str) else v + 10 * (i // 8) for i, v in enumerate(df["item"])]
    data = pyrater.RatingData.from_long(df, categories=["no", "yes"])
    model = pyrater.DawidSkene(alpha=[2.0, 3.0], beta=np.array([[5.0, 1.0], [1.0, 5.0]]))
    fit = pyrater.em(data, model, method="map")
    back = pyrater.load(fit.save(tmp_path / "labels.nc"))
    assert_same_fit(fit, back)
    assert back.model.alpha.tolist() == [2.0, 3.0]


def test_a_new_draws_based_fit_class_round_trips_with_one_registration(mcmc_like, tmp_path):
    """How GibbsFit / a Pathfinder fit plug in: a dataclass of MCMCFit's fields, one line to register."""

    @dataclasses.dataclass(eq=False)
    class ToyGibbsFit(MCMCFit):
        method: str = "toy_gibbs"

    register_fit_class("toy_gibbs", ToyGibbsFit)
    fields = {f.name: getattr(mcmc_like, f.name) for f in dataclasses.fields(MCMCFit) if f.name != "method"}
    fit = ToyGibbsFit(**fields)
    back = pyrater.load(fit.save(tmp_path / "gibbs.nc"))
    assert type(back) is ToyGibbsFit
    assert_same_fit(fit, back)


@pytest.fixture(scope="module")
def mcmc_like(long_data):
    """An MCMCFit built from simulated draws (no Stan): every constructor field filled."""
    rng = np.random.default_rng(0)
    C, S, K, J, I = 2, 50, long_data.n_categories, long_data.n_raters, long_data.n_units
    draws = {
        "pi": rng.dirichlet(np.ones(K) * 20, size=(C, S)),
        "theta": rng.dirichlet(np.ones(K) * 5, size=(C, S, J, K)),
        "log_lik": rng.normal(-5, 0.3, size=(C, S, I)),
    }
    stats = {
        "diverging": np.zeros((C, S), dtype=bool),
        "tree_depth": np.full((C, S), 3, dtype=np.int64),
        "lp": rng.normal(size=(C, S)),
    }
    return MCMCFit(
        data=long_data,
        model=pyrater.DawidSkene(),
        priors=pyrater.DawidSkene().priors(K, J),
        draws=draws,
        sample_stats=stats,
        known=None,
        engine="pystan",
        settings={"chains": C, "warmup": 10, "draws": S, "seed": 7},
        elapsed=1.25,
    )


# --------------------------------------------------------- plain ArviZ reads
@pytest.mark.stan
def test_file_opens_in_plain_arviz_and_xarray(mcmc_long, tmp_path):
    import arviz as az

    path = mcmc_long.save(tmp_path / "fit.nc")
    idata = az.from_netcdf(path)  # InferenceData on ArviZ 0.x, DataTree on 1.x
    assert {"posterior", "log_likelihood", "sample_stats", "observed_data"} <= set(_arviz.groups(idata))
    np.testing.assert_array_equal(_arviz.group(idata, "posterior")["pi"].values, mcmc_long.draws["pi"])
    assert _arviz.loo(idata).elpd == pytest.approx(pyrater.loo(mcmc_long, warn=False).elpd, rel=1e-12)
    tree = xr.open_datatree(path, engine="h5netcdf")
    ratings = tree["rating_data"].to_dataset()
    cats = list(ratings["category"].values)
    assert cats == list(mcmc_long.data.categories)
    assert ratings["rating_code"].size == mcmc_long.data.n_ratings
    assert json.loads(tree.attrs["pyrater_fit"])["format"] == "pyrater-fit"


# ------------------------------------------------------------------- errors
@pytest.fixture()
def em_file(long_data, tmp_path):
    fit = pyrater.em(long_data, method="map")
    return fit, fit.save(tmp_path / "em.nc")


def test_foreign_files_are_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("item,rater,rating\n1,1,1\n")
    with pytest.raises(FitFileError, match="not a pyrater fit file.*not a netCDF4/HDF5"):
        pyrater.load(text)
    plain = tmp_path / "plain.nc"
    xr.Dataset({"x": ("i", np.arange(3.0))}).to_netcdf(plain, engine="h5netcdf")
    with pytest.raises(FitFileError, match="not a pyrater fit file.*no 'pyrater_fit' attribute"):
        pyrater.load(plain)
    assert issubclass(FitFileError, ValueError)
    with pytest.raises(FileNotFoundError):
        pyrater.load(tmp_path / "missing.nc")


def test_truncated_and_corrupted_files_are_refused(em_file, tmp_path):
    import h5py

    _, path = em_file
    raw = path.read_bytes()
    truncated = tmp_path / "truncated.nc"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(FitFileError, match="truncated or corrupted"):
        pyrater.load(truncated)
    truncated.write_bytes(raw[:5])
    with pytest.raises(FitFileError, match="holds only 5 bytes: a fit file cut short"):
        pyrater.load(truncated)
    text = tmp_path / "text.txt"  # a short file of something else is not called a truncated fit
    text.write_bytes(b"hello\n")
    with pytest.raises(FitFileError, match="holds only 6 bytes: not a pyrater fit file"):
        pyrater.load(text)
    text.write_bytes(b"")
    with pytest.raises(FitFileError, match="is empty: not a fit file"):
        pyrater.load(text)

    # flip bytes inside the stored class probabilities: the Fletcher-32 checksum catches it
    with h5py.File(path, "r") as h5:
        info = h5["fit_state/class_probs"].id.get_chunk_info(0)
    damaged = bytearray(raw)
    for k in range(8):
        damaged[info.byte_offset + 10 + k] ^= 0xFF
    bad = tmp_path / "damaged.nc"
    bad.write_bytes(bytes(damaged))
    with pytest.raises(FitFileError, match="truncated or corrupted"):
        pyrater.load(bad)


def test_missing_group_and_newer_version_are_refused(em_file, tmp_path):
    import h5py

    fit, path = em_file
    with h5py.File(path, "a") as h5:
        block = json.loads(h5.attrs["pyrater_fit"])
        block["format_version"] = FORMAT_VERSION + 1
        h5.attrs["pyrater_fit"] = json.dumps(block)
    with pytest.raises(FitFileError, match=f"newer pyrater.*version {FORMAT_VERSION + 1}.*upgrade"):
        pyrater.load(path)
    fresh = fit.save(tmp_path / "fresh.nc")
    with h5py.File(fresh, "a") as h5:
        del h5["rating_data"]
    with pytest.raises(FitFileError, match="group 'rating_data' is missing"):
        pyrater.load(fresh)
    other = fit.save(tmp_path / "other.nc")
    with h5py.File(other, "a") as h5:
        h5.attrs["pyrater_fit"] = "{not json"
    with pytest.raises(FitFileError, match="settings block is corrupted"):
        pyrater.load(other)


def test_pickle_of_version_0_1_is_refused_unless_allowed(em_file, tmp_path):
    fit, _ = em_file
    old = tmp_path / "fit.pkl"
    with old.open("wb") as fh:  # exactly what pyrater 0.1's fit.save wrote
        pickle.dump({"format": 1, "fit": fit}, fh, protocol=pickle.HIGHEST_PROTOCOL)
    with pytest.raises(FitFileError, match=r"pickle.*pyrater 0\.1.*allow_pickle=True\)\.save"):
        pyrater.load(old)
    with pytest.warns(UserWarning, match="runs any code"):
        back = pyrater.load(old, allow_pickle=True)
    assert_same_fit(fit, pyrater.load(back.save(tmp_path / "resaved.nc")))
    junk = tmp_path / "junk.pkl"
    junk.write_bytes(b"\x80\x04K\x01.")
    with pytest.warns(UserWarning), pytest.raises(FitFileError, match="not a pyrater 0.1 fit"):
        pyrater.load(junk, allow_pickle=True)


def test_no_pickle_in_the_package():
    import pathlib

    root = pathlib.Path(pyrater.__file__).parent
    users = [p.name for p in root.rglob("*.py") if "pickle.dump" in p.read_text()]
    assert users == []


# ------------------------------------------------------- across ArviZ lines
_OTHER_SCRIPT = """
import json, sys, warnings
import pandas as pd
import pyrater
from pyrater import _arviz
src, resaved, em_out, ratings = sys.argv[1:5]
fit = pyrater.load(src)
fit.save(resaved)
pyrater.em(pd.read_csv(ratings), method="map", n_restarts=2, seed=3).save(em_out)
print(json.dumps({
    "arviz": ".".join(map(str, _arviz.arviz_version())),
    "pi": fit.point_estimate("pi").tolist(),
    "elpd": pyrater.loo(fit, warn=False).elpd,
    "probs": fit.class_probabilities().to_numpy().tolist(),
}))
"""


@pytest.mark.stan
def test_fit_files_cross_arviz_lines(mcmc_long, anesthesia_path, tmp_path):
    other = os.environ.get("PYRATER_OTHER_PYTHON")
    if not other:
        pytest.skip("PYRATER_OTHER_PYTHON is not set (.ci/run sets it to the other leg's interpreter)")
    src = mcmc_long.save(tmp_path / "here.nc")
    resaved, em_out = tmp_path / "there.nc", tmp_path / "em_there.nc"
    run = subprocess.run(
        [other, "-c", _OTHER_SCRIPT, str(src), str(resaved), str(em_out), str(anesthesia_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    there = json.loads(run.stdout.strip().splitlines()[-1])
    here_version = ".".join(map(str, _arviz.arviz_version()))
    print(f"exchanged between ArviZ {here_version} ({sys.version.split()[0]}) and ArviZ {there['arviz']}")
    # read there: the same numbers as here
    np.testing.assert_allclose(there["pi"], mcmc_long.point_estimate("pi").to_numpy(), rtol=1e-13)
    np.testing.assert_allclose(there["probs"], mcmc_long.class_probabilities().to_numpy(), rtol=1e-12, atol=1e-15)
    # the two lines' PSIS implementations differ in detail (about 1e-6 relative on this fit)
    assert there["elpd"] == pytest.approx(pyrater.loo(mcmc_long, warn=False).elpd, rel=1e-4)
    # written there, read here: the MCMC fit, and an EM fit computed there
    assert_same_fit(mcmc_long, pyrater.load(resaved))
    em_there = pyrater.load(em_out)
    em_here = pyrater.em(pd.read_csv(anesthesia_path), method="map", n_restarts=2, seed=3)
    np.testing.assert_allclose(em_there.pi, em_here.pi, rtol=1e-9)
    np.testing.assert_allclose(em_there.class_probabilities(), em_here.class_probabilities(), atol=1e-9)
