"""Engines: selection, program lookup, compile cache and lock, errors, sampling, optimisation.

Engine-agnostic tests take ``stan_engine`` (tests/conftest.py) and run under pystan and cmdstanpy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

from pyrater import RatingData, get_model
from pyrater.inference.stan.data import ERROR_MATRIX_MODEL_NAMES, STAN_MODEL_NAMES, stan_data, stan_inits
from pyrater.inference.stan.engines import (
    ENGINE_NAMES,
    SAMPLE_STAT_NAMES,
    CmdStanPyEngine,
    OptimizeResult,
    PystanEngine,
    SampleResult,
    StanCompileError,
    StanDataError,
    StanError,
    cmdstan_available,
    get_engine,
    stan_dir,
    stan_file,
)
from pyrater.models.kernels import class_log_posterior

HAS_CMDSTAN = cmdstan_available() is not None
NO_CMDSTAN_REASON = "no CmdStan installation found (cmdstanpy.cmdstan_path() fails); cmdstanpy engine cannot run"

TINY = """
data { int<lower=1> N; vector[N] y; int<lower=0, upper=1> fail; }
parameters { real mu; }
model {
  if (fail) reject("deliberate failure at mu = ", mu);
  y ~ normal(mu, 1);
}
"""


def simulate(K=3, J=5, I=60, seed=0, p_rate=0.7):
    """Incomplete design: each rater rates each item with probability p_rate."""
    rng = np.random.default_rng(seed)
    pi = np.linspace(1, 2, K) / np.linspace(1, 2, K).sum()
    theta = np.full((J, K, K), 0.2 / (K - 1))
    theta[:, np.arange(K), np.arange(K)] = 0.8
    z = rng.choice(K, size=I, p=pi)
    rows = [(i, j, rng.choice(K, p=theta[j, z[i]])) for i in range(I) for j in range(J) if rng.random() < p_rate]
    return RatingData.from_long(pd.DataFrame(rows, columns=["item", "rater", "rating"]), categories=list(range(K)))


@pytest.fixture(scope="module")
def pystan_engine():
    pytest.importorskip("stan", reason="pystan is not installed")
    return get_engine("pystan")


# ---------------------------------------------------------------- selection
def test_unknown_engine_lists_valid_names():
    with pytest.raises(ValueError, match="auto.*cmdstanpy.*pystan"):
        get_engine("stan")
    assert ENGINE_NAMES == ("auto", "cmdstanpy", "pystan")


@pytest.mark.skipif(HAS_CMDSTAN, reason="CmdStan is installed here, so auto picks cmdstanpy")
def test_auto_falls_back_to_pystan_without_cmdstan():
    pytest.importorskip("stan")
    assert isinstance(get_engine("auto"), PystanEngine)
    assert get_engine("auto") is get_engine("pystan")


@pytest.mark.skipif(not HAS_CMDSTAN, reason=NO_CMDSTAN_REASON)
def test_auto_prefers_cmdstanpy():
    assert isinstance(get_engine("auto"), CmdStanPyEngine)


@pytest.mark.skipif(HAS_CMDSTAN, reason="CmdStan is installed here")
def test_cmdstanpy_without_cmdstan_says_what_to_install():
    with pytest.raises(RuntimeError, match="CmdStan installation.*install_cmdstan"):
        CmdStanPyEngine()


def test_missing_backend_packages_raise_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cmdstanpy", None)
    with pytest.raises(ImportError, match="pip install cmdstanpy"):
        CmdStanPyEngine()
    assert cmdstan_available() is None
    monkeypatch.setitem(sys.modules, "stan", None)
    with pytest.raises(ImportError, match="pip install pystan"):
        PystanEngine()


# ------------------------------------------------------------ program files
def test_stan_files_found():
    for name in STAN_MODEL_NAMES:
        assert stan_file(name).is_file()
    with pytest.raises(ValueError, match="dawid_skene"):
        stan_file("bogus")


def test_stan_dir_env_var(monkeypatch, tmp_path):
    shutil.copy(stan_file("dawid_skene"), tmp_path / "dawid_skene.stan")
    monkeypatch.setenv("PYRATER_STAN_DIR", str(tmp_path))
    assert stan_dir() == tmp_path
    assert stan_file("dawid_skene") == tmp_path / "dawid_skene.stan"
    monkeypatch.setenv("PYRATER_STAN_DIR", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="PYRATER_STAN_DIR"):
        stan_dir()


# ------------------------------------------------------ compile cache, errors
@pytest.mark.stan
def test_compile_cache_pystan(pystan_engine):
    import httpstan.cache
    import httpstan.models

    name = pystan_engine.compile_code(TINY)  # compiles once per machine (~30 s), then cached
    folder = httpstan.cache.model_directory(name)
    so = [p for p in folder.iterdir() if p.suffix == ".so"]
    assert len(so) == 1
    mtime = so[0].stat().st_mtime_ns
    fresh = PystanEngine()  # no in-memory state: must find httpstan's cached module
    start = time.perf_counter()
    assert fresh.compile_code(TINY) == name
    assert time.perf_counter() - start < 5
    assert so[0].stat().st_mtime_ns == mtime  # not rebuilt
    # a changed program is a different model (would be compiled anew)
    assert httpstan.models.calculate_model_name(TINY + "\n// changed\n") != name
    # all four programs are cached after their first use (here, on a fresh machine):
    # a new engine loads them all quickly
    for model_name in STAN_MODEL_NAMES:
        pystan_engine.compile(model_name)
    reload = PystanEngine()
    start = time.perf_counter()
    for model_name in STAN_MODEL_NAMES:
        reload.compile(model_name)
    assert time.perf_counter() - start < 20


@pytest.mark.stan
def test_compile_error_carries_stanc_message(stan_engine):
    broken = "parameters { real mu } model { mu ~ normal(0, 1); }"
    with pytest.raises(StanCompileError, match=r"(?s)Syntax error.*line 1") as info:
        stan_engine.compile_code(broken)
    assert isinstance(info.value, StanError) and isinstance(info.value, RuntimeError)
    undeclared = "parameters { real mu; } model { nu ~ normal(0, 1); }"
    with pytest.raises(StanCompileError, match=r"Identifier ['\"]nu['\"] not in scope"):
        stan_engine.compile_code(undeclared)


@pytest.mark.stan
def test_bad_data_carries_stan_message(stan_engine):
    d = stan_data(simulate(I=10), "dawid_skene")
    bad = dict(d, K=1)
    with pytest.raises(StanDataError, match=r"K is 1, but must be greater than or equal to 2"):
        stan_engine.sample("dawid_skene", bad, chains=1, warmup=10, draws=10, seed=1, inits="random")
    missing = {k: v for k, v in d.items() if k != "alpha"}
    # pystan: "variable does not exist ... alpha"; CmdStan's JSON reader: "... variable name=alpha; ..."
    with pytest.raises(StanDataError, match="(variable does not exist|mismatch in number dimensions).*alpha"):
        stan_engine.optimize("dawid_skene", missing, seed=1, inits="random")
    zero_v = "(?s)Stan rejected the data.*v.* is 0, but must be greater than or equal to 1"
    with pytest.raises(StanDataError, match=zero_v):
        stan_engine.sample("dawid_skene", dict(d, v=d["v"] * 0), chains=1, warmup=10, draws=10, seed=1, inits="random")
    small = {"N": 2, "y": np.array([0.1, 0.2]), "fail": 0}
    with pytest.raises(StanDataError, match="mismatch in dimension|dimension"):
        stan_engine.sample_code(TINY, dict(small, N=3), chains=1, warmup=10, draws=10, seed=1)


@pytest.mark.stan
def test_bad_inits_carry_stan_message(stan_engine):
    d = stan_data(simulate(I=10), "dawid_skene")
    init = stan_inits("dawid_skene", d["K"], d["J"], 1, 0)[0]
    init["theta"] = init["theta"] * 2  # rows no longer sum to 1
    with pytest.raises(StanDataError, match="simplex"):
        stan_engine.sample("dawid_skene", d, chains=1, warmup=10, draws=10, seed=1, inits=init)


def test_argument_validation_before_work():
    eng = PystanEngine.__new__(PystanEngine)  # no backend needed to validate arguments
    eng._modules = {}
    d = {"K": 2, "J": 1, "I": 1}
    for kwargs, match in (
        ({"chains": 0}, "chains"),
        ({"draws": 1.5}, "draws"),
        ({"seed": -1}, "seed"),
        ({"warmup": -1}, "warmup"),
    ):
        with pytest.raises(ValueError, match=match):
            eng.sample("dawid_skene", d, **kwargs)
    with pytest.raises(ValueError, match="unknown Stan model"):
        eng.sample("dawid", d)
    with pytest.raises(ValueError, match="inits"):
        eng.sample("dawid_skene", d, inits="diagonal")
    with pytest.raises(ValueError, match="n_inits"):
        eng.optimize("dawid_skene", d, n_inits=0)


@pytest.mark.stan
def test_sampler_failure_carries_stan_message(stan_engine):
    data = {"N": 2, "y": np.array([0.1, 0.2]), "fail": 1}
    with pytest.raises(StanError, match="deliberate failure at mu") as info:
        stan_engine.sample_code(TINY, data, chains=2, warmup=10, draws=10, seed=1, progress=False)
    assert "Initialization failed" in str(info.value)
    ok = stan_engine.sample_code(TINY, dict(data, fail=0), chains=2, warmup=100, draws=100, seed=1, progress=False)
    assert ok.draws["mu"].shape == (2, 100)


# ------------------------------------------------------------------ sampling
@pytest.fixture(scope="module")
def sim_data():
    return simulate(K=3, J=5, I=60, seed=11)


@pytest.fixture(scope="module")
def fits(stan_engine, sim_data):
    """One short run per model, shared by the sampling tests."""
    out = {}
    for name in ERROR_MATRIX_MODEL_NAMES:  # item_difficulty: tests/test_item_difficulty*.py
        out[name] = stan_engine.sample(
            name, stan_data(sim_data, get_model(name)), chains=2, warmup=300, draws=200, seed=123, progress=False
        )
    return out


@pytest.mark.stan
@pytest.mark.parametrize("model_name", ERROR_MATRIX_MODEL_NAMES)
def test_sample_shapes_and_sanity(fits, sim_data, model_name, stan_engine):
    fit = fits[model_name]
    K, J, I = sim_data.n_categories, sim_data.n_raters, sim_data.n_units
    assert isinstance(fit, SampleResult) and fit.engine == stan_engine.name and fit.model_name == model_name
    assert fit.stan_version == stan_engine.stan_version != ""
    assert (fit.n_chains, fit.n_draws) == (2, 200)
    assert fit.draws["pi"].shape == (2, 200, K)
    theta_shape = (2, 200, K, K) if model_name == "homogeneous" else (2, 200, J, K, K)
    assert fit.draws["theta"].shape == theta_shape
    assert fit.draws["log_lik"].shape == (2, 200, I)
    extra = {
        "class_conditional": {"p": (J, K)},
        "one_coin": {"p": (J,)},
        "ordinal": {"shift": (J,), "log_scale": (J,)},
        "mace": {"competence": (J,), "xi": (J, K)},
        "pooled": {"m": (K, K), "s": (K,)},
        "community": {"m": (3, K, K), "s": (3, K), "rho": (3,), "community_prob": (J, 3)},
        "hierarchical": {"mu": (K, K), "sigma": (K, K)},
    }
    for key, shape in extra.get(model_name, {}).items():
        assert fit.draws[key].shape == (2, 200) + shape
    for key in SAMPLE_STAT_NAMES:
        assert fit.sample_stats[key].shape == (2, 200)
    assert fit.sample_stats["diverging"].dtype == bool
    assert fit.sample_stats["tree_depth"].dtype.kind == "i"
    assert np.all(fit.sample_stats["step_size"] > 0)
    assert fit.stan_time.shape == (2, 2) and np.all(fit.stan_time >= 0)
    np.testing.assert_allclose(fit.draws["pi"].sum(-1), 1)
    np.testing.assert_allclose(fit.draws["theta"].sum(-1), 1)
    # no label switching and recovery of the simulated accuracies (0.8)
    diag = np.diagonal(fit.draws["theta"].mean(axis=(0, 1)), axis1=-2, axis2=-1)
    # (the ordinal model cannot switch labels, and on these Dawid-Skene data, errors spread evenly, its
    # middle class shares its errors with two neighbours: accuracy about 0.4 there)
    assert np.all(diag > 0.55) if model_name != "ordinal" else np.all(diag[:, [0, -1]] > 0.55)
    assert abs(np.mean(diag) - 0.8) < 0.12
    # the draws' log_lik is the kernel's at the same draw
    th = fit.draws["theta"][1, 17]
    th = np.broadcast_to(th, (J, K, K)) if th.ndim == 2 else th
    _, ll = class_log_posterior(sim_data.counts, np.log(fit.draws["pi"][1, 17]), np.log(th))
    np.testing.assert_allclose(fit.draws["log_lik"][1, 17], ll, rtol=1e-8)


@pytest.mark.stan
def test_sample_is_reproducible(stan_engine, fits, sim_data):
    again = stan_engine.sample(
        "dawid_skene",
        stan_data(sim_data, get_model("dawid_skene")),
        chains=2,
        warmup=300,
        draws=200,
        seed=123,
        progress=False,
    )
    np.testing.assert_array_equal(again.draws["theta"], fits["dawid_skene"].draws["theta"])
    np.testing.assert_array_equal(again.sample_stats["lp"], fits["dawid_skene"].sample_stats["lp"])


@pytest.mark.stan
def test_sample_random_inits_and_no_log_lik(stan_engine, sim_data):
    d = stan_data(sim_data, "homogeneous", log_lik=False)
    fit = stan_engine.sample("homogeneous", d, chains=1, warmup=100, draws=50, seed=5, inits="random", progress=False)
    assert fit.draws["log_lik"].shape == (1, 50, 0)
    assert fit.seed == 5


# -------------------------------------------------------------- optimisation
def em_map_dawid_skene(data: RatingData, alpha: np.ndarray, beta: np.ndarray, iters: int = 5000):
    """Textbook EM for the Dawid-Skene posterior mode (dense, tiny data only)."""
    K, J = data.n_categories, data.n_raters
    C = data.counts.toarray().reshape(data.n_units, J, K)
    T = C.sum(axis=1) + 1e-3
    T /= T.sum(1, keepdims=True)
    for _ in range(iters):
        N = np.einsum("ik,ijl->jkl", T, C)
        pi = T.sum(0) + alpha - 1
        pi /= pi.sum()
        theta = N + beta - 1
        theta /= theta.sum(-1, keepdims=True)
        lj = np.log(pi) + np.einsum("ijl,jkl->ik", C, np.log(theta))
        T_new = np.exp(lj - logsumexp(lj, axis=1, keepdims=True))
        if np.max(np.abs(T_new - T)) < 1e-13:
            break
        T = T_new
    return pi, theta


@pytest.mark.stan
def test_optimize_finds_the_mode(stan_engine):
    data = simulate(K=3, J=4, I=40, seed=3)
    model = get_model("dawid_skene")
    d = stan_data(data, model)
    opt = stan_engine.optimize("dawid_skene", d, seed=1)
    assert isinstance(opt, OptimizeResult) and opt.engine == stan_engine.name
    assert opt.all_log_densities.shape == (4,) and opt.converged.shape == (4,)
    assert opt.converged[opt.best]
    assert opt.log_density == pytest.approx(np.nanmax(opt.all_log_densities))
    priors = model.priors(data.n_categories, data.n_raters)
    pi, theta = em_map_dawid_skene(data, priors["alpha"], priors["beta"])
    np.testing.assert_allclose(opt.params["pi"], pi, atol=2e-5)
    np.testing.assert_allclose(opt.params["theta"], theta, atol=2e-5)
    # the reported density is the program's density at the mode, without Jacobian
    assert stan_engine.log_prob("dawid_skene", d, opt.params) == pytest.approx(opt.log_density, rel=1e-9)
    _, ll = class_log_posterior(data.counts, np.log(opt.params["pi"]), np.log(opt.params["theta"]))
    np.testing.assert_allclose(opt.params["log_lik"], ll, rtol=1e-9)
    try:
        from pyrater.inference.em.algorithm import em
    except ImportError:
        return
    fit = em(data, model, method="map", tol=1e-12, max_iter=20000)
    np.testing.assert_allclose(opt.params["theta"], fit.theta, atol=5e-5)
    np.testing.assert_allclose(opt.params["pi"], fit.pi, atol=5e-5)


@pytest.mark.stan
def test_optimize_class_conditional_matches_direct_scipy(stan_engine):
    """The mode of a model EM does not reach the same way, against a direct scipy maximisation."""
    data = simulate(K=3, J=3, I=30, seed=8)
    model = get_model("class_conditional")
    d = stan_data(data, model)
    opt = stan_engine.optimize("class_conditional", d, seed=2, n_inits=3)
    K, J = data.n_categories, data.n_raters
    from scipy import stats

    def neg(x):
        pi = softmax(np.append(x[: K - 1], 0.0))
        p = 1 / (1 + np.exp(-x[K - 1 :].reshape(J, K)))
        theta = np.repeat(((1 - p) / (K - 1))[:, :, None], K, axis=2)
        theta[:, np.arange(K), np.arange(K)] = p
        _, ll = class_log_posterior(data.counts, np.log(pi), np.log(theta))
        lp = stats.dirichlet.logpdf(pi, d["alpha"]) + stats.beta.logpdf(p, d["beta1"], d["beta2"]).sum()
        return -(lp + ll.sum())

    x0 = np.concatenate([np.zeros(K - 1), np.full(J * K, 1.0)])
    res = minimize(neg, x0, method="BFGS", options={"gtol": 1e-9})
    assert opt.log_density == pytest.approx(-res.fun, abs=1e-6)
    p_direct = 1 / (1 + np.exp(-res.x[K - 1 :].reshape(J, K)))
    np.testing.assert_allclose(opt.params["p"], p_direct, atol=1e-4)


@pytest.mark.stan
def test_optimize_explicit_inits_list(stan_engine):
    data = simulate(K=2, J=3, I=20, seed=9)
    d = stan_data(data, "homogeneous")
    inits = stan_inits("homogeneous", 2, 3, 2, seed=4)
    opt = stan_engine.optimize("homogeneous", d, inits=inits, n_inits=7)
    assert opt.all_log_densities.shape == (2,)  # the list sets the number of starts
    assert opt.params["theta"].shape == (2, 2)


# ------------------------------------------------------------------ cmdstanpy
@pytest.mark.stan
@pytest.mark.skipif(not HAS_CMDSTAN, reason=NO_CMDSTAN_REASON)
def test_cmdstanpy_compiles_into_the_cache_once():
    from pyrater.inference.stan.engines.cache import cache_dir

    eng = get_engine("cmdstanpy")
    model = eng.compile("dawid_skene")
    exe = Path(model.exe_file)
    # compiled into pyrater's cache, keyed by program and CmdStan version, not next to the .stan files
    assert cache_dir() in exe.parents and exe.is_file() and (exe.parent / ".dawid_skene.built").is_file()
    assert not any(p.suffix in ("", ".exe") and p.is_file() and p.stem == "dawid_skene" for p in stan_dir().iterdir())
    mtime = exe.stat().st_mtime_ns
    start = time.perf_counter()
    again = type(eng)().compile("dawid_skene")  # a fresh engine finds the build: no compile
    assert time.perf_counter() - start < 10
    assert Path(again.exe_file) == exe and exe.stat().st_mtime_ns == mtime


def _fake_cmdstan(root: Path, stansummary: bool, main_o: bool) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "makefile").write_text("CMDSTAN_VERSION := 2.35.0\n")
    stanc = root / "bin" / "stanc"
    stanc.write_text("#!/bin/sh\necho 'stanc3 v2.35.0 (Unix)'\n")
    stanc.chmod(0o755)
    if stansummary:
        (root / "bin" / "stansummary").write_text("")
    if main_o:
        (root / "src" / "cmdstan").mkdir(parents=True)
        (root / "src" / "cmdstan" / "main.o").write_text("")
    return root


def test_cmdstan_available_needs_a_complete_build(monkeypatch, tmp_path):
    pytest.importorskip("cmdstanpy")
    cases = {
        "no_stansummary": (_fake_cmdstan(tmp_path / "a" / "cmdstan-2.35.0", False, True), False),
        "no_main_o": (_fake_cmdstan(tmp_path / "b" / "cmdstan-2.35.0", True, False), False),
        "complete": (_fake_cmdstan(tmp_path / "c" / "cmdstan-2.35.0", True, True), True),
    }
    building = _fake_cmdstan(tmp_path / "d" / "cmdstan-2.35.0", True, True)
    (tmp_path / "d" / "cmdstan-2.35.0.lock").write_text("")  # the offline installer is still running
    cases["offline_build_running"] = (building, False)
    for name, (root, works) in cases.items():
        monkeypatch.setenv("CMDSTAN", str(root))
        assert (cmdstan_available() is not None) == works, name
    monkeypatch.setenv("CMDSTAN", str(tmp_path / "absent"))
    assert cmdstan_available() is None


def test_compile_lock_serialises_processes(tmp_path, monkeypatch):
    """A second process blocks on the same program's lock until the first releases it."""
    from pyrater.inference.stan.engines.cache import compile_lock

    monkeypatch.setenv("PYRATER_CACHE_DIR", str(tmp_path))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pyrater.inference.stan.engines.cache import compile_lock\n"
            "with compile_lock('prog'):\n    print('held', flush=True); time.sleep(2)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert holder.stdout.readline().strip() == "held"
    start = time.perf_counter()
    with compile_lock("prog"):
        waited = time.perf_counter() - start
    holder.wait(timeout=30)
    assert waited > 1.0
    start = time.perf_counter()
    with compile_lock("another_prog"):  # other programs are not blocked
        assert time.perf_counter() - start < 0.5


CONCURRENT = """
import sys
from pyrater.inference.stan.engines import get_engine
code = open(sys.argv[2]).read()
eng = get_engine(sys.argv[1])
fit = eng.sample_code(code, {"N": 2, "y": [0.1, 0.2], "fail": 0}, chains=1, warmup=50, draws=20, seed=1,
                      progress=False)
print("mean", float(fit.draws["mu"].mean()))
"""


@pytest.mark.stan
@pytest.mark.slow
def test_two_processes_compile_the_same_program_at_once(stan_engine, tmp_path):
    """Two processes compile one new program concurrently: both succeed, one compiles (and says so
    on one line), the other waits and reuses the build, and the cache holds one good build."""
    program = tmp_path / "tiny.stan"
    program.write_text(TINY + f"\n// {tmp_path.name} {time.time_ns()}\n")  # new to every cache
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "PYRATER_CACHE_DIR": str(tmp_path / "cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }  # isolates httpstan's cache too
    cmd = [sys.executable, "-c", CONCURRENT, stan_engine.name, str(program)]
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    means = [float(out.split("mean")[1]) for out, _ in outs]
    assert means[0] == means[1]  # the same build, the same draws
    notices = [line for _, err in outs for line in err.splitlines() if line.startswith("compiling ")]
    assert len(notices) == 1 and "once, ~30-60 s; cached in" in notices[0]
    if stan_engine.name == "cmdstanpy":  # programs without a model name are built as "model"
        builds = [p.parent for p in (tmp_path / "cache").rglob("model.stan")]
        assert len(builds) == 1 and (builds[0] / "model").is_file() and (builds[0] / ".model.built").is_file()
        assert str(builds[0]) in notices[0]
    else:
        sos = list((tmp_path / "xdg").rglob("*.so"))
        assert len(sos) == 1 and str(sos[0].parent) in notices[0]
    # a third process loads the build silently
    third = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert third.returncode == 0 and "compiling " not in third.stderr


@pytest.mark.stan
def test_no_compile_notice_for_a_cached_program(stan_engine, capsys):
    stan_engine.compile("homogeneous")
    capsys.readouterr()
    type(stan_engine)().compile("homogeneous")
    assert "compiling" not in capsys.readouterr().err


@pytest.mark.stan
@pytest.mark.skipif(not HAS_CMDSTAN, reason=NO_CMDSTAN_REASON)
def test_cmdstanpy_errors_carry_stan_message(tmp_path, monkeypatch):
    monkeypatch.setenv("PYRATER_CACHE_DIR", str(tmp_path))
    eng = get_engine("cmdstanpy")
    with pytest.raises(StanCompileError, match="(?i)syntax error|parsing error|error"):
        eng.compile_code("parameters { real mu } model { }", "broken")
    d = stan_data(simulate(I=10), "dawid_skene")
    with pytest.raises(StanError, match="K"):
        eng.sample("dawid_skene", dict(d, K=1), chains=1, warmup=10, draws=10, seed=1, inits="random", progress=False)


@pytest.mark.stan
def test_sample_inside_running_event_loop(pystan_engine):
    """Jupyter runs an event loop; sampling and optimising must still work there."""
    import asyncio

    d = stan_data(simulate(K=2, J=3, I=15, seed=1), "class_conditional")

    async def inside():
        fit = pystan_engine.sample("class_conditional", d, chains=2, warmup=50, draws=20, seed=3, progress=False)
        opt = pystan_engine.optimize("class_conditional", d, seed=3, n_inits=1)
        return fit, opt

    fit, opt = asyncio.run(inside())
    assert fit.draws["p"].shape == (2, 20, 3, 2)
    assert opt.params["p"].shape == (3, 2)


@pytest.mark.stan
def test_progress_bar_is_shown(pystan_engine, capsys):
    d = stan_data(simulate(K=2, J=3, I=15, seed=2), "homogeneous")
    pystan_engine.sample("homogeneous", d, chains=2, warmup=100, draws=100, seed=1, progress=True)
    assert "Sampling 2 chains" in capsys.readouterr().err
    pystan_engine.sample("homogeneous", d, chains=2, warmup=100, draws=100, seed=1, progress=False)
    assert "Sampling" not in capsys.readouterr().err


@pytest.mark.stan
@pytest.mark.skipif(not HAS_CMDSTAN, reason="CmdStan is not installed")
def test_cmdstanpy_optimize_started_at_the_mode_is_quiet():
    # pyrater's L-BFGS starts include the EM mode; on bluebirds L-BFGS cannot improve on it and stops
    # at once ("Line search failed"). cmdstanpy logs that as CmdStan's whole console output, an
    # "error: code '1'" line and "Invalid estimate" on every access; pyrater records each start's
    # convergence itself and keeps the log clean
    import logging

    import pyrater
    from conftest import shared_file

    ratings = pd.read_csv(shared_file("bluebirds", "ratings.csv"))
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Collect(logging.WARNING)
    cmd_logger = logging.getLogger("cmdstanpy")  # cmdstanpy's own handler; it does not propagate
    cmd_logger.addHandler(handler)
    try:
        fit = pyrater.fit(ratings, "dawid_skene", method="optimize", engine="cmdstanpy", seed=1)
    finally:
        cmd_logger.removeHandler(handler)
    assert np.isfinite(fit.log_density)
    assert [m[:80] for m in seen if "Line search" in m or "failed to converge" in m or "code '1'" in m] == []
    assert len(cmd_logger.filters) == 0  # the filter is removed after the call
