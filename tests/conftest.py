"""Shared fixtures: the data in ../shared (skipped cleanly where absent); the Stan engines.

The anaesthesia and caries data ship with the package (pyrater.datasets) and
are read from there; the large gold-labelled sets need ``PYRATER_SHARED_DATA``
(default ``../shared/data``).
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PYRATER_SHARED_DATA", REPO.parent / "shared" / "data"))


def packaged_file(name: str) -> Path:
    """Path of a data set shipped inside the package (``pyrater/data/_datasets``)."""
    from importlib import resources

    return Path(str(resources.files("pyrater.data").joinpath("_datasets", name)))


PACKAGED = ("anesthesia.csv", "caries.csv")  # shipped with pyrater: no ../shared needed


def shared_file(*parts: str) -> Path:
    """Path to a file under ../shared/data, or skip the test when absent.

    The small classic data sets (anesthesia.csv, caries.csv) come from the
    package itself, so tests needing only them never skip.
    """
    if len(parts) == 1 and parts[0] in PACKAGED:
        return packaged_file(parts[0])
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


def bench_module(name: str):
    """Import ``bench/<name>.py`` as module ``name`` (the scripts import each other by these names)."""
    import importlib.util
    import sys

    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(REPO / "bench" / f"{name}.py"):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


#: Every Stan test runs once per engine (through the ``stan_engine`` fixture).
STAN_ENGINES = ("pystan", "cmdstanpy")
#: ``PYRATER_TEST_ENGINES=pystan`` skips the other half (.ci/run's Python 3.12 leg: its CmdStan is the
#: build the 3.11 leg has already tested; the engine parity tests, which need both, still run).
TEST_ENGINES = tuple(e.strip() for e in os.environ.get("PYRATER_TEST_ENGINES", ",".join(STAN_ENGINES)).split(","))


@pytest.fixture(scope="session", params=STAN_ENGINES)
def stan_engine(request):
    """A Stan engine, once "pystan" and once "cmdstanpy" (tests take it and pass ``engine=stan_engine``).

    The cmdstanpy half skips, with the reason, where no working CmdStan is
    found (``.ci/run`` builds one from ../shared when it can).
    """
    if request.param not in TEST_ENGINES:
        pytest.skip(
            f"PYRATER_TEST_ENGINES={os.environ.get('PYRATER_TEST_ENGINES')}: the {request.param} half is not run"
        )
    if request.param == "pystan":
        pytest.importorskip("stan", reason="pystan is not installed")
    else:
        pytest.importorskip("cmdstanpy", reason="cmdstanpy is not installed")
        from pyrater.inference.stan.engines import cmdstan_available

        if cmdstan_available() is None:
            pytest.skip(
                "no working CmdStan installation (cmdstanpy.cmdstan_path() fails or its build is incomplete): "
                "install one with `python -m cmdstanpy.install_cmdstan`, or let .ci/run build it offline"
            )
    from pyrater.inference.stan.engines import get_engine

    return get_engine(request.param)


@pytest.fixture(scope="session")
def anesthesia_path() -> Path:
    return shared_file("anesthesia.csv")


@pytest.fixture(scope="session")
def caries_path() -> Path:
    return shared_file("caries.csv")


@pytest.fixture(scope="session")
def anesthesia_fit(anesthesia_path, stan_engine):
    """Dawid-Skene MCMC fit of the anaesthesia data (4 x 1000 draws), shared by test modules."""
    import warnings

    import pandas as pd

    from pyrater import fit

    df = pd.read_csv(anesthesia_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no Rhat / divergence warning expected
        return fit(
            df,
            "dawid_skene",
            method="mcmc",
            chains=4,
            warmup=1000,
            draws=1000,
            seed=1,
            progress=False,
            engine=stan_engine,
        )


@pytest.fixture(scope="session")
def anesthesia_cc_fit(anesthesia_path, stan_engine):
    """Class-conditional MCMC fit of the anaesthesia data."""
    import pandas as pd

    from pyrater import fit

    df = pd.read_csv(anesthesia_path)
    return fit(
        df,
        "class_conditional",
        method="mcmc",
        chains=4,
        warmup=1000,
        draws=1000,
        seed=1,
        progress=False,
        engine=stan_engine,
    )
