"""EM on a Dask cluster equals the in-memory EM; labels, known items, Parquet, errors, a lost worker.

One LocalCluster (2 worker processes, 1 thread each) serves the module and is
always closed.  Fits use small simulated data and, where the point is the
equality of two routes, a fixed number of iterations (both routes stop at
``max_iter``), which keeps the module fast.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

import pyrater  # noqa: E402
from pyrater import DistributedRatingData, RatingDataError  # noqa: E402
from pyrater.inference.distributed.em import DistributedEMFit  # noqa: E402
from pyrater.inference.distributed.em import em as distributed_em  # noqa: E402
from pyrater.inference.em.algorithm import EMConvergenceWarning  # noqa: E402

TOL = 1e-10


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def _long(model: str, n_items: int = 240, n_categories: int = 3, seed: int = 1) -> pd.DataFrame:
    """Simulated long ratings with string labels, rows shuffled so items spread over partitions."""
    sim = pyrater.simulate(model, n_items=n_items, n_raters=5, n_categories=n_categories, seed=seed)
    df = sim.data.to_long()
    out = pd.DataFrame(
        {
            "task": "t" + df["item"].astype(str),
            "worker": "w" + df["rater"].astype(str),
            "label": np.asarray(["abcdefgh"[int(v) - 1] for v in df["rating"]], dtype=object),
        }
    )
    return out.sample(frac=1.0, random_state=seed).reset_index(drop=True)


COLS = {"item": "task", "rater": "worker", "rating": "label"}


def _in_memory(df: pd.DataFrame, **kw) -> pyrater.EMFit:
    """In-memory EM from the same start as distributed EM (the soft majority vote), without SQUAREM.

    Distributed EM runs plain EM iterations; in memory SQUAREM (the default) would reach the same
    fixed point by other iterates, which these iteration-by-iteration comparisons cannot follow.
    """
    kw.setdefault("init", "majority")
    kw.setdefault("acceleration", "none")
    kw.setdefault("method", "ml")
    data = pyrater.RatingData.from_long(df, **COLS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        return pyrater.em(data, **kw)


def _distributed(data, **kw) -> DistributedEMFit:
    kw.setdefault("method", "ml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        return pyrater.em(data, **kw)


def _assert_same_fit(dist: DistributedEMFit, mem: pyrater.EMFit) -> None:
    assert dist.n_iter == mem.n_iter
    assert dist.converged == mem.converged
    np.testing.assert_allclose(dist.pi, mem.pi, rtol=0, atol=TOL)
    np.testing.assert_allclose(dist.theta, mem.theta, rtol=0, atol=TOL)
    np.testing.assert_allclose(dist.log_lik_trace, mem.log_lik_trace, rtol=TOL, atol=0)
    assert list(dist.data.rater_labels) == list(mem.data.rater_labels)
    assert list(dist.data.categories) == list(mem.data.categories)
    probs = dist.class_probabilities().compute()
    ref = mem.class_probabilities()
    assert len(probs) == len(ref) and probs.index.is_unique
    assert list(probs.columns) == [str(c) for c in ref.columns]
    np.testing.assert_allclose(probs.loc[ref.index].to_numpy(), ref.to_numpy(), rtol=0, atol=TOL)
    # the family's own per-rater parameters (one-coin p, MACE competence and xi, ...) as in memory
    assert (dist.model_params is None) == (mem.model_params is None)
    for key, value in (mem.model_params or {}).items():
        np.testing.assert_allclose(dist.model_params[key], value, rtol=0, atol=TOL)


@pytest.mark.parametrize(
    "model,partitions_in,partitions_out",
    [
        ("dawid_skene", 1, None),
        ("dawid_skene", 5, 3),
        ("class_conditional", 3, 7),
        ("homogeneous", 4, 2),
        ("one_coin", 2, 3),
        ("mace", 3, 2),
    ],
)
def test_em_equals_in_memory_for_any_partitioning(client, model, partitions_in, partitions_out):
    df = _long(model)
    ddf = dd.from_pandas(df, npartitions=partitions_in, sort=False)
    data = DistributedRatingData.from_dask(ddf, **COLS, npartitions=partitions_out)
    assert data.n_partitions == (partitions_out or partitions_in)
    assert (data.n_items, data.n_ratings, data.n_raters) == (240, len(df), 5)
    dist = _distributed(data, model=model, max_iter=15)
    mem = _in_memory(df, model=model, max_iter=15)
    assert dist.backend == "dask+numba"
    _assert_same_fit(dist, mem)


def test_pooled_em_map_equals_in_memory(client):
    df = _long("pooled")
    data = DistributedRatingData.from_dask(dd.from_pandas(df, npartitions=3, sort=False), **COLS)
    dist = _distributed(data, model="pooled", method="map", max_iter=15)
    mem = _in_memory(df, model="pooled", method="map", max_iter=15)
    # the same iterations; the Newton step on (m, s) amplifies rounding differences to ~1e-9
    assert dist.n_iter == mem.n_iter
    np.testing.assert_allclose(dist.pi, mem.pi, atol=1e-7)
    np.testing.assert_allclose(dist.theta, mem.theta, atol=1e-7)
    np.testing.assert_allclose(dist.log_lik_trace, mem.log_lik_trace, rtol=1e-9)
    for key in ("m", "s"):
        np.testing.assert_allclose(dist.model_params[key], mem.model_params[key], rtol=1e-6)


def test_community_em_map_equals_in_memory(client):
    df = _long("community")
    data = DistributedRatingData.from_dask(dd.from_pandas(df, npartitions=3, sort=False), **COLS)
    dist = _distributed(data, model="community", method="map", max_iter=15)
    mem = _in_memory(df, model="community", method="map", max_iter=15)
    assert dist.n_iter == mem.n_iter
    np.testing.assert_allclose(dist.pi, mem.pi, atol=1e-7)
    np.testing.assert_allclose(dist.theta, mem.theta, atol=1e-7)
    np.testing.assert_allclose(dist.log_lik_trace, mem.log_lik_trace, rtol=1e-9)
    # the community rows: the weighted Newton steps on (m, s) amplify the rounding differences of the
    # distributed sums (pi and theta agree to 1e-7, these to ~1e-5 on some hosts, 1.6e-4 on a Zen 4 one)
    for key in ("m", "s", "rho", "community_prob"):
        np.testing.assert_allclose(dist.model_params[key], mem.model_params[key], rtol=5e-4, atol=1e-7)


def test_items_spread_over_input_partitions_are_gathered(client):
    df = _long("dawid_skene")
    ddf = dd.from_pandas(df, npartitions=6, sort=False)
    # the input really spreads items: some item has ratings in more than one input partition
    where = pd.concat([p.assign(part=i) for i, p in enumerate(ddf.partitions[i].compute() for i in range(6))])
    assert where.groupby("task")["part"].nunique().max() > 1
    data = DistributedRatingData.from_dask(ddf, **COLS, npartitions=4)
    items = [client.submit(lambda b: list(b.items), blk).result() for blk in data.blocks]
    flat = [i for part in items for i in part]
    assert len(flat) == len(set(flat)) == df["task"].nunique()


def test_em_to_convergence_with_known_items_and_map(client):
    df = _long("dawid_skene", seed=1)  # MAP converges in about 30 iterations here
    known = {"t5": "a", "t17": "c", "t40": "b", "t41": "a"}
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    # 10 partitions: two levels of the reduction trees (fan-in 8)
    dist = distributed_em(ddf, known=known, method="map", npartitions=10, **COLS)
    assert dist.data.n_partitions == 10
    mem = _in_memory(df, known=known, method="map")
    assert dist.converged and mem.converged
    _assert_same_fit(dist, mem)
    probs = dist.class_probabilities().compute()
    assert probs.loc["t17", "c"] == 1.0 and probs.loc["t5", "a"] == 1.0
    z = dist.point_estimate("z").compute()
    assert z["t40"] == "b"
    assert (z == mem.point_estimate("z").loc[z.index]).all()
    # calibrating: the fit is refused with what to pass instead; the collected probabilities calibrate as the
    # in-memory fit's do (items not known to either fit)
    gold = pd.Series(np.asarray(["a", "b", "c"])[np.arange(60) % 3], index=[f"t{i}" for i in range(100, 160)])
    with pytest.raises(TypeError, match=r"Dask DataFrame .*calibrate\(fit.class_probabilities\(\).compute\(\), gold\)"):
        pyrater.calibrate(dist, gold)
    got = pyrater.calibrate(probs, gold.rename(index=str), seed=2).probabilities.loc[mem.data.unit_labels]
    ref = pyrater.calibrate(mem, gold, seed=2).probabilities
    np.testing.assert_allclose(got.to_numpy(), ref.to_numpy(), rtol=0, atol=1e-6)


def test_fit_method_em_on_a_dask_frame_equals_in_memory(client):
    df = _long("class_conditional", seed=4)
    ddf = dd.from_pandas(df, npartitions=2, sort=False)
    dist = pyrater.fit(ddf, "class_conditional", method="em", **COLS)
    # the same start (the soft majority vote); in memory, small data start from a search of starts
    mem = pyrater.em(
        pyrater.RatingData.from_long(df, **COLS),
        "class_conditional",
        method="map",
        init="majority",
        acceleration="none",
    )
    assert dist.method == mem.method == "em_map"
    _assert_same_fit(dist, mem)
    with pytest.raises(ValueError, match="needs the ratings in memory"):
        pyrater.fit(ddf, "dawid_skene", method="mcmc", **COLS)


def test_parquet_round_trip_with_declared_categories(client, tmp_path):
    df = _long("dawid_skene", seed=5)
    folder = tmp_path / "ratings"
    dd.from_pandas(df, npartitions=3, sort=False).to_parquet(folder)
    cats = ["a", "b", "c", "z"]  # "z" never occurs: K = 4
    data = DistributedRatingData.from_parquet(str(folder), **COLS, categories=cats)
    assert list(data.categories) == cats and data.n_ratings == len(df)
    dist = _distributed(data, max_iter=15)
    mem = _in_memory(df.assign(label=pd.Categorical(df["label"], categories=cats)), max_iter=15)
    _assert_same_fit(dist, mem)
    out = tmp_path / "probs"
    dist.class_probabilities().to_parquet(out)
    back = pd.read_parquet(out)
    assert back.index.name == "task" and list(back.columns) == cats
    np.testing.assert_allclose(
        back.loc[mem.class_probabilities().index].to_numpy(), mem.class_probabilities().to_numpy(), atol=TOL
    )


def test_integer_labels_and_summary_and_save(client, tmp_path):
    sim = pyrater.simulate("dawid_skene", n_items=150, n_raters=4, n_categories=2, seed=7)
    df = sim.data.to_long()
    df["rating"] = df["rating"].astype(int)
    dist = _distributed(dd.from_pandas(df, npartitions=2), max_iter=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        mem = pyrater.em(df, max_iter=10, init="majority", acceleration="none", method="ml")
    np.testing.assert_allclose(dist.theta, mem.theta, atol=TOL)
    pd.testing.assert_series_equal(dist.point_estimate("pi"), mem.point_estimate("pi"), atol=TOL)
    probs = dist.class_probabilities().compute()
    assert probs.index.dtype == np.int64 and probs.index.name == "item"
    summ = dist.summary()
    assert summ.info["partitions"] == 2 and summ.info["items"] == 150
    assert len(summ.classes) == 10 and list(summ.classes.columns) == ["z", 1, 2]
    with pytest.raises(NotImplementedError, match="to_parquet"):  # the ratings stay on the cluster
        dist.save(tmp_path / "fit.nc")
    assert not (tmp_path / "fit.nc").exists()
    idata = dist.to_inference_data()  # the estimates go to ArviZ's format instead
    np.testing.assert_array_equal(idata.posterior["pi"].values[0, 0], dist.pi)


def test_bad_input_is_refused_before_the_shuffle(client):
    df = _long("dawid_skene", n_items=30)
    with pytest.raises(RatingDataError, match="rater column 'rater' not found"):
        DistributedRatingData.from_dask(dd.from_pandas(df, npartitions=2), item="task", rating="label")
    bad = df.copy()
    bad.loc[3, "label"] = None
    with pytest.raises(RatingDataError, match=r"column 'label' \(rating\) has 1 missing values"):
        DistributedRatingData.from_dask(dd.from_pandas(bad, npartitions=2), **COLS)
    with pytest.raises(RatingDataError, match=r"values 'c' not among the categories 'a', 'b'"):
        DistributedRatingData.from_dask(dd.from_pandas(df, npartitions=2), **COLS, categories=["a", "b"])
    data = DistributedRatingData.from_dask(dd.from_pandas(df, npartitions=2), **COLS)
    with pytest.raises(RatingDataError, match="known-class item 'nope' not found"):
        distributed_em(data, known={"t1": "a", "nope": "b"}, method="ml")
    with pytest.raises(RatingDataError, match="known class 'q' not among"):
        distributed_em(data, known={"t1": "q"}, method="ml")
    with pytest.raises(ValueError, match="init='majority'"):
        pyrater.em(data, init="random", method="ml")
    with pytest.raises(ValueError, match="n_restarts=0"):
        pyrater.em(data, n_restarts=2, method="ml")
    with pytest.raises(ValueError, match="pi_moves is not available for distributed data"):
        pyrater.fit(data, method="gibbs", pi_moves=3)
    with pytest.raises(ValueError, match="data_format='long'"):
        pyrater.em(data, data_format="wide", method="ml")


def test_no_client_is_an_error_naming_what_to_do(client, monkeypatch):
    df = _long("dawid_skene", n_items=20)
    ddf = dd.from_pandas(df, npartitions=2)

    def no_client(c=None):
        raise ValueError("No clients found")

    import distributed as distributed_package  # what pyrater imports (dask.distributed re-exports it)

    monkeypatch.setattr(distributed_package, "default_client", no_client)
    with pytest.raises(ValueError, match=r"does not start a cluster.*Client\(LocalCluster"):
        distributed_em(ddf, **COLS)


def test_missing_dask_names_the_extra(monkeypatch):
    from pyrater.data._dask import require_dask

    for name in ("dask", "dask.dataframe", "distributed"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    with pytest.raises(ImportError, match=r'pip install "pyrater\[dask\]"'):
        require_dask()
    with pytest.raises(ImportError, match=r"pyrater\[dask\]"):
        DistributedRatingData.from_parquet("ratings/*.parquet")


def test_import_pyrater_without_dask():
    code = (
        "import sys\n"
        "for m in ('dask', 'dask.dataframe', 'distributed', 'pyarrow'):\n"
        "    sys.modules[m] = None\n"
        "import pyrater\n"
        "fit = pyrater.em(pyrater.simulate('dawid_skene', n_items=30, n_raters=3, n_categories=2, seed=1).data)\n"
        "try:\n"
        "    pyrater.DistributedRatingData.from_parquet('x')\n"
        "except ImportError as e:\n"
        "    print('IMPORT-ERROR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    assert "IMPORT-ERROR" in out.stdout and 'pip install "pyrater[dask]"' in out.stdout


def test_a_worker_killed_mid_fit_is_recovered(client):
    df = _long("dawid_skene", seed=11)
    data = DistributedRatingData.from_dask(dd.from_pandas(df, npartitions=4, sort=False), **COLS)
    killed = []

    def kill_one_worker(iteration: int, objective: float) -> None:
        if iteration != 3:
            return
        holders = client.who_has(data.blocks)
        addr = sorted({a for where in holders.values() for a in where})[0]
        pid = client.run(os.getpid, workers=[addr])[addr]
        os.kill(pid, signal.SIGKILL)
        start = time.time()
        while addr in client.scheduler_info()["workers"] and time.time() - start < 60:
            time.sleep(0.05)
        killed.append(addr)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EMConvergenceWarning)
        dist = distributed_em(data, max_iter=12, callback=kill_one_worker, method="ml")
    assert killed and killed[0] not in client.scheduler_info()["workers"]
    mem = _in_memory(df, max_iter=12)
    _assert_same_fit(dist, mem)
    client.wait_for_workers(2, timeout=60)


# ------------------------------------------------------------------------------------ Gibbs


def _gibbs_data(seed: int = 1, n_items: int = 200, partitions: int = 2) -> tuple[pd.DataFrame, DistributedRatingData]:
    df = _long("dawid_skene", n_items=n_items, seed=seed)
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    return df, DistributedRatingData.from_dask(ddf, **COLS, npartitions=partitions)


@pytest.mark.slow  # about a minute on a loaded 2-core machine: 180 sweeps of scheduler round trips
def test_gibbs_on_the_cluster_gives_the_in_memory_posterior(client):
    df, data = _gibbs_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains: Rhat warnings
        dist = pyrater.fit(data, "dawid_skene", method="gibbs", chains=2, warmup=30, draws=150, seed=5)
        mem = pyrater.fit(df, "dawid_skene", method="gibbs", chains=2, warmup=200, draws=1000, seed=1, **COLS)
    assert dist.has_draws and dist.draws["pi"].shape == (2, 150, 3)
    assert repr(dist).startswith("DistributedGibbsFit(Dawid-Skene, engine=")  # GibbsFit's one line, not the arrays
    assert "chains=2, draws=150" in repr(dist) and "\n" not in repr(dist) and len(repr(dist)) < 200
    assert not dist.label_switching
    # posterior means agree within Monte Carlo error (z-score from both fits' ESS)
    d_tab, m_tab = dist.mcmc_diagnostics(warn=False), mem.mcmc_diagnostics(warn=False)
    d_pi, d_theta = dist._draws()
    m_pi, m_theta = mem._draws()
    d_flat = np.concatenate([d_pi, d_theta.reshape(len(d_theta), -1)], axis=1)
    m_flat = np.concatenate([m_pi, m_theta.reshape(len(m_theta), -1)], axis=1)
    se = np.sqrt(d_flat.var(axis=0) / d_tab["ess_bulk"].to_numpy() + m_flat.var(axis=0) / m_tab["ess_bulk"].to_numpy())
    z = (d_flat.mean(axis=0) - m_flat.mean(axis=0)) / se
    assert np.max(np.abs(z)) < 4.5, d_tab.index[np.argmax(np.abs(z))]
    # Rao-Blackwellised class probabilities (a Dask DataFrame) agree with the in-memory ones
    probs = dist.class_probabilities().compute()
    ref = mem.class_probabilities()
    diff = np.abs(probs.loc[ref.index].to_numpy() - ref.to_numpy())
    assert diff.mean() < 0.01 and diff.max() < 0.1  # 300 draws here: Monte Carlo error of a few 0.01 at most
    summ = dist.summary()
    assert summ.info["partitions"] == 2 and "rhat" in summ.parameters.columns
    idata = dist.to_inference_data()
    assert set(idata.posterior["theta"].dims) >= {"rater", "category", "rating"}


def _z_scores(dist, mem) -> np.ndarray:
    """Differences of posterior means of pi and theta over their Monte Carlo standard errors (both fits' ESS)."""
    d_tab, m_tab = dist.mcmc_diagnostics(warn=False), mem.mcmc_diagnostics(warn=False)
    flats = []
    for f in (dist, mem):
        pi, theta = f._draws()
        flats.append(np.concatenate([pi, theta.reshape(len(theta), -1)], axis=1))
    n = flats[0].shape[1]  # the tables list pi and theta first, then the model's own parameters (p)
    se = np.sqrt(
        flats[0].var(axis=0) / d_tab["ess_bulk"].to_numpy()[:n]
        + flats[1].var(axis=0) / m_tab["ess_bulk"].to_numpy()[:n]
    )
    return (flats[0].mean(axis=0) - flats[1].mean(axis=0)) / se


@pytest.mark.slow  # 300 sweeps of scheduler round trips (the homogeneous chains need ~100 sweeps of warm-up here)
@pytest.mark.parametrize("model", ["class_conditional", "homogeneous", "one_coin", "mace", "pooled", "community"])
def test_gibbs_on_the_cluster_other_models(client, model):
    df = _long(model, n_items=150, seed=6)
    data = DistributedRatingData.from_dask(dd.from_pandas(df, npartitions=2, sort=False), **COLS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        dist = pyrater.fit(data, model, method="gibbs", chains=2, warmup=100, draws=200, seed=2)
        mem = pyrater.fit(df, model, method="gibbs", chains=2, warmup=200, draws=1000, seed=1, **COLS)
    assert dist.draws["theta"].shape[2:] == mem.draws["theta"].shape[2:]
    z = _z_scores(dist, mem)
    assert np.nanmax(np.abs(z)) < 4.5


def test_gibbs_draws_depend_on_seed_and_partitioning_only(client):
    df, data = _gibbs_data(seed=2, n_items=80)
    known = {"t5": "a"}
    kw = dict(chains=2, warmup=3, draws=8, known=known)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        a = pyrater.fit(data, method="gibbs", seed=7, **kw)
        # the same partitioning built again (another shuffle run) gives the same draws
        _, again = _gibbs_data(seed=2, n_items=80)
        b = pyrater.fit(again, method="gibbs", seed=7, **kw)
        c = pyrater.fit(data, method="gibbs", seed=8, **kw)
    np.testing.assert_array_equal(a.draws["pi"], b.draws["pi"])
    np.testing.assert_array_equal(a.draws["theta"], b.draws["theta"])
    assert not np.array_equal(a.draws["pi"], c.draws["pi"])
    assert not np.array_equal(a.draws["pi"][0], a.draws["pi"][1])  # chains have their own streams
    assert a.class_probabilities().compute().loc["t5", "a"] == 1.0
    with pytest.raises(ValueError, match="method='mcmc'"):
        pyrater.fit(data, "hierarchical", method="gibbs", chains=1, warmup=1, draws=2)


def test_a_worker_killed_mid_gibbs_gives_the_same_draws(client):
    df, data = _gibbs_data(seed=3, n_items=80)

    def kill(sweep: int) -> None:
        if sweep == 4:
            holders = client.who_has(data.blocks)
            addr = sorted({a for where in holders.values() for a in where})[0]
            os.kill(client.run(os.getpid, workers=[addr])[addr], signal.SIGKILL)
            start = time.time()
            while addr in client.scheduler_info()["workers"] and time.time() - start < 60:
                time.sleep(0.05)

    from pyrater.inference.distributed.gibbs import gibbs as distributed_gibbs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        calm = distributed_gibbs(data, chains=2, warmup=2, draws=8, seed=11)
        hit = distributed_gibbs(data, chains=2, warmup=2, draws=8, seed=11, callback=kill)
    np.testing.assert_array_equal(calm.draws["theta"], hit.draws["theta"])
    np.testing.assert_array_equal(calm.sample_stats["lp"], hit.sample_stats["lp"])
    client.wait_for_workers(2, timeout=60)
