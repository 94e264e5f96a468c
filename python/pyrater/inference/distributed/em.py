"""EM over item-partitioned ratings on a Dask cluster.

Given pi and theta, each item's E-step needs only that item's ratings, and
the M-step needs only the summed expected counts (K + J*K*K numbers).  So
one EM iteration here is

1. the parameters go to the workers once (``client.scatter(...,
   broadcast=True)``), not embedded in every task;
2. one task per partition runs the fused kernel of
   :mod:`pyrater.inference.em.kernel` (:func:`~pyrater.inference.em.kernel.em_iteration`)
   over the partition's items and returns its log-likelihood, class totals
   ``n_k`` (K,) and expected counts ``N`` (J*K, K);
3. a tree reduction (fan-in 8) sums them;
4. the M-step (:func:`pyrater.inference.em.steps.m_step_from_counts`, the same one
   the in-memory EM uses) runs on the client.

The iterations, starting values (the soft majority vote), objective,
stopping rule, class relabelling and empty-row handling are those of
:func:`pyrater.em`, so the estimates equal the in-memory ones up to the
order of floating-point sums.  The class probabilities stay on the cluster:
:meth:`DistributedEMFit.class_probabilities` is a lazy Dask DataFrame.

Lost workers: the encoded partitions are persisted futures, so when a
worker dies Dask recomputes the partitions it held from their lineage (the
read, the shuffle, the encoding) and the iteration goes on; the scattered
parameters are replicated on every worker.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import xarray as xr

from ..._stacklevel import user_stacklevel
from ...data._dask import require_dask
from ...data.distributed import (
    Block,
    DistributedRatingData,
    as_distributed,
    tree_reduce,
)
from ...fits.em import EMFit
from ...models import Model, get_model
from ...models.kernels import soft_majority_vote
from .._numba import aligned_zeros
from .._numba import run as run_kernel
from ..em.convergence import (
    METHODS,
    Convergence,
    EMConvergenceWarning,
    check_stopping,
    not_converged_message,
)
from ..em.steps import (
    FUSED_MAX_K,
    Problem,
    clamp_classes,
    class_order,
    e_step,
    estimate_params,
    expected_counts,
    load_fused,
    m_step_from_counts,
    map_prior,
    model_kind,
)

__all__ = ["em", "DistributedEMFit"]

_BACKENDS = ("auto", "numba", "scipy")


# ------------------------------------------------------------------ parameters and kernels


@dataclass(frozen=True)
class Params:
    """Parameters sent to the workers: pi (K,), theta (J, K, K) and, for numba, their padded logs."""

    pi: np.ndarray
    theta: np.ndarray
    log_pi: np.ndarray | None = None  # (KP,)
    LT: np.ndarray | None = None  # (J*K, KP)


def make_params(pi: np.ndarray, theta: np.ndarray, backend: str) -> Params:
    if backend != "numba":
        return Params(pi=pi, theta=theta)
    fused = load_fused()
    J, K, _ = theta.shape
    with np.errstate(divide="ignore"):
        log_pi = fused.pad_log_pi(np.log(pi))
        LT = fused.pad_log_theta(np.log(theta), aligned_zeros((J * K, fused.KP)))
    return Params(pi=pi, theta=theta, log_pi=log_pi, LT=LT)


def _problem(block: Block, J: int, K: int) -> Problem:
    return Problem(counts=block.counts, weight=np.ones(block.n_units), unit_weights=True, known=block.known, J=J, K=K)


def _fused_pass(block: Block, p: Params, T: np.ndarray | None, counts: bool) -> tuple[float, np.ndarray, np.ndarray]:
    """One call of the fused kernel over the block: (log-lik, n_k (KP,), N (J*K, KP))."""
    fused = load_fused()
    c = block.counts
    I, JK = c.shape
    K = p.pi.size
    known = np.empty(0, np.int64) if block.known is None else np.ascontiguousarray(block.known, dtype=np.int64)
    N = aligned_zeros((JK, fused.KP)) if counts else np.empty((0, fused.KP))
    n_k = np.zeros(fused.KP)
    args = (
        c.indptr,
        c.indices,
        np.empty(0) if block.unit_counts else c.data,  # empty: the kernel's unit-count path
        p.LT,
        p.log_pi,
        known,
        np.empty(0),
        0,
        I,
        K,
        np.empty((0, K)) if T is None else T,
        np.empty(0),
        N,
        n_k,
    )
    ll = run_kernel(fused.em_iteration, *args)
    return float(ll), n_k, N


def partition_stats(block: Block, p: Params, backend: str) -> tuple[float, np.ndarray, np.ndarray]:
    """E-step over one partition: ``(log-likelihood, n_k (K,), N_flat (J*K, K))`` at ``p``."""
    J, K, _ = p.theta.shape
    if backend == "numba":
        ll, n_k, N = _fused_pass(block, p, None, counts=True)
        return ll, n_k[:K].copy(), np.ascontiguousarray(N[:, :K])
    prob = _problem(block, J, K)
    T, _, ll = e_step(prob, p.pi, p.theta)
    n_k, N = expected_counts(prob, T, None)
    return ll, n_k, N


def partition_start(block: Block, J: int, K: int, backend: str) -> tuple[float, np.ndarray, np.ndarray]:
    """The first M-step's sums from the soft majority vote (known items one-hot), as in :func:`pyrater.em`."""
    prob = _problem(block, J, K)
    if backend == "numba":
        fused = load_fused()
        c = block.counts
        T0 = run_kernel(fused.vote_shares, c.indptr, c.indices, c.data, np.empty((block.n_units, K)))
        T0 = clamp_classes(T0, block.known)
        N = aligned_zeros((J * K, fused.KP))
        n_k = np.zeros(fused.KP)
        run_kernel(fused.expected_counts, c.indptr, c.indices, c.data, T0, np.empty(0), 0, block.n_units, N, n_k)
        return 0.0, n_k[:K].copy(), np.ascontiguousarray(N[:, :K])
    T0 = clamp_classes(soft_majority_vote(prob.counts, K), block.known)
    n_k, N = expected_counts(prob, T0, None)
    return 0.0, n_k, N


def add_stats(*parts: tuple[float, np.ndarray, np.ndarray]) -> tuple[float, np.ndarray, np.ndarray]:
    """Sum of ``(log-lik, n_k, N)`` triples (the tree reduction's step)."""
    ll, n_k, N = parts[0]
    n_k, N = n_k.copy(), N.copy()
    for p in parts[1:]:
        ll += p[0]
        n_k += p[1]
        N += p[2]
    return ll, n_k, N


def _partition_T(block: Block, p: Params, backend: str) -> np.ndarray:
    """Class probabilities (I_p, K) of the partition's items at ``p``."""
    J, K, _ = p.theta.shape
    if backend == "numba":
        T = np.empty((block.n_units, K))
        _fused_pass(block, p, T, counts=False)
        return T
    return e_step(_problem(block, J, K), p.pi, p.theta)[0]


def partition_class_change(block: Block, p: Params, p_prev: Params, backend: str) -> float:
    """Largest absolute change of the partition's class probabilities between ``p_prev`` and ``p``."""
    if block.n_units == 0:
        return 0.0
    return float(np.max(np.abs(_partition_T(block, p, backend) - _partition_T(block, p_prev, backend))))


def _largest(*changes: float) -> float:
    """The tree reduction's step for :func:`partition_class_change`."""
    return max(changes)


def partition_class_probs(
    block: Block, p: Params, backend: str, item_name: Any, columns: list[str], item_dtype: Any
) -> pd.DataFrame:
    """``P(z_i = k | y_i, pi, theta)`` for the partition's items: DataFrame (I_p, K) indexed by item."""
    T = _partition_T(block, p, backend)
    index = pd.Index(block.items, name=item_name)
    if index.dtype != item_dtype:
        index = index.astype(item_dtype)
    return pd.DataFrame(T, index=index, columns=columns)


def _argmax_labels(frame: pd.DataFrame, categories: np.ndarray) -> pd.Series:
    z = categories[np.argmax(frame.to_numpy(), axis=1)] if len(frame) else categories[:0]
    return pd.Series(z, index=frame.index, name="z")


def choose_backend(backend: str, K: int) -> Literal["numba", "scipy"]:
    """``"numba"`` (the fused kernel: numba importable, K <= 8) or ``"scipy"``."""
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    usable = 2 <= K <= FUSED_MAX_K
    if backend == "scipy":
        return "scipy"
    fused = load_fused()
    if backend == "numba":
        if fused is None:
            raise ImportError("backend='numba' needs numba (pip install numba); use backend='scipy' or 'auto'")
        if not usable:
            raise ValueError(f"backend='numba' supports 2 to {FUSED_MAX_K} categories (here K = {K}); use 'auto'")
        return "numba"
    return "numba" if fused is not None and usable else "scipy"


class Iteration:
    """One map over the partitions and a tree reduction, with the parameters scattered once."""

    def __init__(self, client: Any, blocks: list, backend: str, name: str) -> None:
        self.client, self.blocks, self.backend, self.name = client, blocks, backend, name
        self.count = 0
        self.params: Any = None  # the scattered parameters of the last E-step

    def keys(self, what: str) -> tuple[list[str], str]:
        self.count += 1
        tag = f"{self.name}-{what}-{self.count}"
        return [f"{tag}-part{b}" for b in range(len(self.blocks))], tag

    def start(self, J: int, K: int) -> tuple[float, np.ndarray, np.ndarray]:
        keys, tag = self.keys("start")
        parts = self.client.map(partition_start, self.blocks, J=J, K=K, backend=self.backend, key=keys)
        return tree_reduce(self.client, parts, add_stats, key=tag).result()

    def __call__(self, pi: np.ndarray, theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        self.params = self.client.scatter(make_params(pi, theta, self.backend), broadcast=True, hash=False)
        keys, tag = self.keys("estep")
        parts = self.client.map(partition_stats, self.blocks, p=self.params, backend=self.backend, key=keys)
        return tree_reduce(self.client, parts, add_stats, key=tag).result()

    def class_change(self, params_prev: Any) -> float:
        """Largest change of any item's class probabilities between ``params_prev`` and the last E-step's."""
        keys, tag = self.keys("classchange")
        parts = self.client.map(
            partition_class_change, self.blocks, p=self.params, p_prev=params_prev, backend=self.backend, key=keys
        )
        return tree_reduce(self.client, parts, _largest, key=tag).result()


# ------------------------------------------------------------------------------- result


class DistributedClasses:
    """Per-item results of a distributed fit, kept on the cluster (shared by EM and Gibbs fits).

    The class needs ``data`` (:class:`DistributedRatingData`), ``blocks``
    (futures of the partitions, known classes attached) and
    :meth:`_class_probability_task`: the partition task and its arguments.
    """

    data: Any
    blocks: list | None

    def _class_probability_task(self) -> tuple[Callable, tuple]:
        raise NotImplementedError

    def _coords(self) -> dict[str, list[Any]]:
        # the items stay on the cluster: no item coordinate
        d = self.data
        return {"category": list(d.categories), "rating": list(d.categories), "rater": list(d.rater_labels)}

    def _observed_data(self) -> xr.Dataset:
        return xr.Dataset()  # the ratings stay on the cluster

    def _groups(self) -> dict[str, xr.Dataset]:
        """ArviZ groups without the per-item ones (``observed_data``, ``log_likelihood``): those stay on the cluster."""
        groups = super()._groups()  # type: ignore[misc]
        return {name: ds for name, ds in groups.items() if name not in ("observed_data", "log_likelihood")}

    def save(self, path: Any) -> Any:
        """Refused: a fit file holds the ratings, and these stay on the cluster.

        Keep what is in memory (``fit.pi``, ``fit.theta``, ``fit.point_estimate``,
        the draws of a Gibbs fit: ``fit.to_inference_data().to_netcdf(path)``)
        and write the per-item results with
        ``fit.class_probabilities().to_parquet(path)``.
        """
        raise NotImplementedError(
            f"a distributed fit cannot be saved as a pyrater fit file: its {self.data.n_ratings} ratings stay on "
            "the Dask cluster. Write fit.class_probabilities().to_parquet(path) for the items, and "
            "fit.to_inference_data().to_netcdf(path) for the estimates or draws"
        )

    def _class_probs(self) -> np.ndarray:
        raise NotImplementedError(
            "the class probabilities of a distributed fit stay on the cluster: use fit.class_probabilities() "
            "(a Dask DataFrame; .compute() collects it, .to_parquet(path) writes it)"
        )

    def class_probabilities(self) -> Any:  # a Dask DataFrame
        """Class probabilities as a lazy Dask DataFrame (items x categories).

        Indexed by item (index named after the item column); one float column
        per category, named ``str(category)`` (Parquet needs string column
        names).  Nothing runs until it is computed or written.
        """
        dask, dd, _ = require_dask()
        if self.blocks is None:
            raise RuntimeError(
                "this fit was loaded from disk: its items stayed on the cluster; write the class probabilities "
                "with fit.class_probabilities().to_parquet(path) before saving, or refit"
            )
        data: DistributedRatingData = self.data
        columns = [str(c) for c in data.categories]
        item_name = data.columns["item"]
        func, args = self._class_probability_task()
        task = dask.delayed(func, pure=True)
        parts = [task(b, *args, item_name, columns, data.item_dtype) for b in self.blocks]
        meta = pd.DataFrame(
            {c: pd.Series(dtype=float) for c in columns}, index=pd.Index([], dtype=data.item_dtype, name=item_name)
        )
        return dd.from_delayed(parts, meta=meta, verify_meta=False)

    def point_estimate(self, which: str = "pi"):
        """As :meth:`pyrater.Fit.point_estimate`; ``"z"`` is a lazy Dask Series indexed by item."""
        if which != "z":
            return super().point_estimate(which)  # type: ignore[misc]
        probs = self.class_probabilities()
        cats = self.data.categories.to_numpy()
        meta = pd.Series(cats[:0], index=probs._meta.index, name="z")
        return probs.map_partitions(_argmax_labels, cats, meta=meta)

    def _summary_classes(self, n_items: int = 10) -> pd.DataFrame:
        """The first ``n_items`` items' classes (the full table stays on the cluster)."""
        head = self.class_probabilities().head(n_items, npartitions=-1)
        head.columns = pd.Index(list(self.data.categories), name="category")
        classes = head.copy()
        classes.insert(0, "z", self.data.categories.to_numpy()[np.argmax(head.to_numpy(), axis=1)])
        return classes

    def _distributed_info(self) -> dict[str, Any]:
        return {"items": self.data.n_items, "partitions": self.data.n_partitions}


@dataclass(eq=False, repr=False)
class DistributedEMFit(DistributedClasses, EMFit):
    """Result of :func:`pyrater.em` on distributed data.

    Same attributes and accessors as :class:`pyrater.EMFit` (``pi``,
    ``theta``, ``log_lik``, ``log_lik_trace``, ``point_estimate``,
    ``summary``, ...), in memory on the client, except the per-item
    results, which stay on the cluster:

    * :meth:`class_probabilities` returns a lazy ``dask.dataframe.DataFrame``
      indexed by item, one column per category named ``str(category)``:
      ``fit.class_probabilities().to_parquet(path)``;
    * ``point_estimate("z")`` returns a lazy ``dask.dataframe.Series``;
    * ``summary()`` lists the first 10 items' classes.

    ``class_probs`` is None; ``timings`` has ``setup`` (validation, known
    classes), ``start`` (the first M-step's sums) and ``iterations`` (seconds
    per iteration).  :meth:`save` is refused (the ratings stay on the
    cluster); see its docstring for what to write instead.
    """

    blocks: list | None = field(default=None, repr=False)
    final_params: Any = field(default=None, repr=False)
    backend_used: str = "numba"

    def _class_probability_task(self) -> tuple[Callable, tuple]:
        return partition_class_probs, (self.final_params, self.backend_used)

    def _summary_info(self) -> dict[str, Any]:
        info = super()._summary_info()
        info.pop("units iterated", None)
        info.update(self._distributed_info())
        return info

    def __repr__(self) -> str:
        return "Distributed" + EMFit.__repr__(self)


# ---------------------------------------------------------------------------------- em


def em(
    data: DistributedRatingData | Any,
    model: str | Model = "dawid_skene",
    method: Literal["ml", "map"] = "map",
    known: dict | pd.Series | None = None,
    init: str | np.ndarray = "majority",
    n_restarts: int = 0,
    tol: float = 1e-8,
    max_iter: int = 1000,
    seed: Any = None,
    backend: Literal["auto", "numba", "scipy"] = "auto",
    client: Any = None,
    callback: Callable[[int, float], Any] | None = None,
    param_tol: float = 1e-6,
    **data_options: Any,
) -> DistributedEMFit:
    """EM (ML or MAP) over long ratings partitioned on a Dask cluster.

    :func:`pyrater.em` calls this for a Dask DataFrame or a
    :class:`DistributedRatingData`; the arguments mean the same.

    Parameters
    ----------
    data : DistributedRatingData or dask.dataframe.DataFrame
        A Dask DataFrame is partitioned by item first
        (:meth:`DistributedRatingData.from_dask` with ``data_options``:
        ``item``, ``rater``, ``rating``, ``categories``, ``npartitions``).
    model, method, known, tol, max_iter, param_tol
        As in :func:`pyrater.em`, with the same stopping rule
        (:class:`pyrater.inference.em.algorithm._Convergence`); the change of the class
        probabilities (rule 3) is computed on the workers.
    init : {"majority", "auto"}
        The soft majority vote (``"auto"``, the in-memory default, means the
        majority start at the sizes where distributed data arise).  Other starts and
        ``n_restarts`` need per-item random or user arrays and are not
        supported on distributed data.
    seed
        Unused (EM from the majority vote is deterministic); accepted for
        the same signature.
    backend : {"auto", "numba", "scipy"}
        Per-partition kernel: the fused numba kernel (K <= 8) or the scipy
        sparse products.
    client : dask.distributed.Client, optional
        Default: the running default client (none is ever started here).
    callback : callable, optional
        ``callback(iteration, objective)`` after each E-step, on the client.

    Returns
    -------
    DistributedEMFit
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    model_obj = get_model(model)
    kind = model_kind(model_obj)
    if isinstance(init, str) and init == "auto":  # in-memory EM's default: the majority start at scale
        init = "majority"
    if not (isinstance(init, str) and init == "majority"):
        raise ValueError(
            "distributed EM starts from the soft majority vote (init='majority'); random or user-given starts "
            f"are not supported on distributed data, got init={init!r}"
        )
    if n_restarts != 0:
        raise ValueError(f"distributed EM supports no random restarts (n_restarts=0), got n_restarts={n_restarts!r}")
    max_iter, tol, param_tol = check_stopping(max_iter, tol, param_tol)
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable, got {callback!r}")
    data, client = as_distributed(data, client, **data_options)
    J, K = data.n_raters, data.n_categories
    backend = choose_backend(backend, K)
    prior, prior_values = (None, None)
    if method == "map":
        prior, prior_values = map_prior(model_obj, K, J)
    elif kind in ("pooled", "community"):
        what = "population rows m and concentrations s" if kind == "pooled" else "communities (m, s, rho)"
        raise ValueError(
            f"method='ml' is not available for the {kind} model: its {what} "
            "have no maximum-likelihood estimate apart from their priors; use method='map'"
        )
    blocks = data.blocks_with_known(known)
    setup = time.perf_counter() - t0

    # ---- the loop of pyrater.em (_run_fused): M-step from the start, then E-step + M-step per iteration
    run = Iteration(client, blocks, backend, name=f"pyrater-em-{id(data):x}-{time.time_ns():x}")
    t1 = time.perf_counter()
    _, n_k, N_flat = run.start(J, K)
    pi, theta, empty = m_step_from_counts(n_k, N_flat, J, K, kind, prior)
    t_start = time.perf_counter() - t1
    trace: list[float] = []
    iter_times: list[float] = []
    converged = False
    # the stopping rule of pyrater.em (_Convergence); for rule 3 the class probabilities stay on the
    # cluster and the workers compare those at the previous settled iteration's parameters with the latest
    conv = Convergence(tol, float(param_tol))
    settled_params = None
    ll = np.nan
    for it in range(max_iter):
        t2 = time.perf_counter()
        want_T = conv.want_T
        ll, n_k, N_flat = run(pi, theta)
        obj = ll if prior is None else ll + prior.log_density(pi, theta)
        trace.append(obj)
        if callback is not None:
            callback(it, obj)
        if conv.settled(trace, pi, theta):
            if want_T:
                if settled_params is not None:
                    conv.class_change = run.class_change(settled_params)
                    if conv.class_change <= conv.param_tol:
                        converged = True
                        iter_times.append(time.perf_counter() - t2)
                        break
                settled_params = run.params
        else:
            settled_params = None
        if it + 1 < max_iter:
            pi, theta, empty = m_step_from_counts(n_k, N_flat, J, K, kind, prior, theta)
        iter_times.append(time.perf_counter() - t2)
    trace_arr = np.asarray(trace)
    obj_change = abs(trace_arr[-1] - trace_arr[-2]) / max(1.0, abs(trace_arr[-1])) if trace_arr.size > 1 else np.nan
    convergence = {
        "rule": (
            f"objective change <= {tol:g} x max(1, |objective|) and parameter change and its extrapolated "
            f"distance to the fixed point <= {param_tol:g}, then class probability change <= {param_tol:g}"
        ),
        "tol": tol,
        "param_tol": float(param_tol),
        "objective_change": obj_change,
        **conv.info(),
    }
    if not converged:
        warnings.warn(
            not_converged_message(
                max_iter,
                f"last change {abs(trace_arr[-1] - trace_arr[-2]) if trace_arr.size > 1 else float('nan'):.3g}, "
                f"tol={tol:g}",
                theta,
                kind,
                prior is None,
            ),
            EMConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    if prior is None and kind in ("dawid_skene", "homogeneous") and known is None:
        order = class_order(pi, theta)  # as in memory: class k goes with rating k
        pi, theta = pi[order], theta[:, order, :]
        empty = None if empty is None else empty[:, order]
    final = client.scatter(make_params(pi, theta, backend), broadcast=True, hash=False)
    return DistributedEMFit(
        data=data,  # type: ignore[arg-type]
        model=model_obj,
        method=f"em_{method}",
        pi=pi,
        theta=theta,
        class_probs=None,  # type: ignore[arg-type]
        log_lik=float(ll),
        log_lik_trace=trace_arr,
        n_iter=int(trace_arr.size),
        converged=bool(converged),
        log_posterior=float(trace_arr[-1]) if prior is not None else None,
        objective="log_posterior" if prior is not None else "log_likelihood",
        priors=prior_values,
        empty_rows=empty,
        restart_objectives=trace_arr[-1:].copy(),
        best_run=0,
        n_fitted_units=data.n_items,
        compressed=False,
        timings={"setup": setup, "start": t_start, "iterations": iter_times},
        backend=f"dask+{backend}",
        convergence=convergence,
        start="majority",
        model_params=estimate_params(kind, theta, prior),
        blocks=blocks,
        final_params=final,
        backend_used=backend,
    )
