"""The blocked Gibbs sampler over item-partitioned ratings on a Dask cluster.

The sweep of :mod:`pyrater.inference.gibbs.sampler`, split where its data dependence
splits: given pi and theta every item's class draw needs only that item's
ratings, and the conjugate draws of pi and theta need only the summed counts.
One sweep, for all chains at once:

1. the chains' ``log pi`` and ``log theta`` go to the workers once
   (``client.scatter(..., broadcast=True)``);
2. one task per partition runs the sampler's own z step
   (:func:`pyrater.inference.gibbs.kernel.z_pass_rb`) for each chain over the
   partition's items and returns, per chain, the class totals, the
   class-by-rating counts and the marginal log-likelihood (under the
   previous parameters);
3. a tree reduction sums them;
4. the conjugate draws of pi and theta
   (:func:`pyrater.inference.gibbs.kernel.parameter_step`) run on the client,
   one random stream per chain.

Random streams
--------------
The z draws of chain ``c`` in partition ``p`` at sweep ``t`` come from
``numpy.random.default_rng([seed, c, p, t])``: independent streams that
depend on nothing but these four numbers.  The same seed and partitioning
therefore give the same draws, whatever the workers, their number or the
order the tasks run in, and a partition recomputed after a lost worker
draws the same numbers again.  The chains' parameter draws use
``SeedSequence(seed).spawn(chains)`` on the client; each chain starts from
class assignments drawn from the items' rating shares (the in-memory
sampler's start, per partition).

Differences from the in-memory sampler: the per-item ``log_lik`` is not kept
(it is items x draws; LOO and WAIC need the data in memory), and the
Rao-Blackwellised class probabilities are a lazy Dask DataFrame
(:meth:`DistributedGibbsFit.class_probabilities`).  The posterior is the
same; the draws differ (other streams).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from ..._validation import check_int
from ...data._dask import get_client, is_dask_frame
from ...data.distributed import (
    Block,
    DistributedRatingData,
    as_distributed,
    tree_reduce,
)
from ...fits.gibbs import GibbsFit
from ...models import get_model
from .._numba import compile_for
from ..em.steps import e_step
from ..gibbs import kernel as _kern
from ..gibbs.priors import conjugate_prior, log_prior_density
from ..gibbs.sampler import GIBBS_ENGINE, check_run, start_counts
from .em import DistributedClasses, _fused_pass, _problem, choose_backend, make_params

__all__ = ["gibbs", "DistributedGibbsFit"]


def stream(seed: int, chain: int, partition: int, sweep: int) -> np.random.Generator:
    """The z-step random stream of one chain, partition and sweep (sweep 0: the start)."""
    return np.random.default_rng([seed, chain, partition, sweep])


@dataclass(frozen=True)
class ChainParams:
    """Per chain, in the z step's layout: ``log_pi`` (C, W) and ``LT`` (C, J*K, W), ``W = max(K, KP)``.

    ``LT[c, j*K + l, k] = log theta_c[j, k, l]``; the lanes ``k >= K`` hold
    ``-inf`` in ``log_pi`` and 0 in ``LT``, as in :func:`pyrater.inference.gibbs.kernel.run_chain`.
    """

    log_pi: np.ndarray
    LT: np.ndarray
    K: int


def _chain_params(pi: np.ndarray, theta: np.ndarray, J: int) -> ChainParams:
    """``pi`` (C, K), ``theta`` (C, Jt, K, K) (Jt = 1: shared by the J raters, homogeneous) -> kernel inputs."""
    C, K = pi.shape
    W = max(K, _kern.KP)
    log_pi = np.full((C, W), -np.inf)
    with np.errstate(divide="ignore"):
        log_pi[:, :K] = np.log(pi)
    LT = np.zeros((C, J * K, W))
    for c in range(C):
        _kern.log_theta_matrix(theta[c], J, K, LT[c])
    return ChainParams(log_pi=log_pi, LT=LT, K=K)


def _arrays(block: Block) -> tuple:
    c = block.counts
    known = np.empty(0, np.int64) if block.known is None else np.ascontiguousarray(block.known, dtype=np.int64)
    return c.indptr, c.indices, c.data, np.ones(block.n_units, np.int64), known


def partition_start(block: Block, index: int, K: int, chains: int, seed: int) -> tuple:
    """Per chain: counts (J*K, K) and class totals (K,) of a start drawn from the rating shares."""
    view = SimpleNamespace(n_categories=K, counts=block.counts, weight=np.ones(block.n_units, np.int64))
    JK = block.counts.shape[1]
    N = np.zeros((chains, JK, K))
    n_k = np.zeros((chains, K))
    if block.n_units:
        for c in range(chains):
            N[c], n_k[c] = start_counts(view, block.known, stream(seed, c, index, 0))  # type: ignore[arg-type]
    return np.zeros(chains), n_k, N


def partition_sweep(block: Block, index: int, p: ChainParams, seed: int, sweep: int, sample: bool) -> tuple:
    """The z step of every chain over one partition: ``(log-lik (C,), n_k (C, K), N (C, J*K, K))``."""
    C, K = p.log_pi.shape[0], p.K
    indptr, indices, data, weight, known = _arrays(block)
    N = np.zeros((C, block.counts.shape[1], K))
    n_k = np.zeros((C, K))
    ll = np.zeros(C)
    no_ll = np.empty(0)
    no_rb = np.empty((0, K))
    for c in range(C):
        args = (
            indptr,
            indices,
            data,
            weight,
            known,
            p.log_pi[c],
            p.LT[c],
            K,
            stream(seed, c, index, sweep),
            sample,
            no_ll,
            N[c],
            n_k[c],
            no_rb,
            block.unit_counts,  # every stored count 1: the gather skips the counts (decided once per partition)
        )
        # compiled (or loaded) with LLVM's SLP vectoriser on, as the in-memory sampler's run_chain
        compile_for(_kern.z_pass_rb, *args)
        ll[c] = _kern.z_pass_rb(*args)
    return ll, n_k, N


def add_chain_stats(*parts: tuple) -> tuple:
    ll, n_k, N = (x.copy() for x in parts[0])
    for q in parts[1:]:
        ll += q[0]
        n_k += q[1]
        N += q[2]
    return ll, n_k, N


def partition_rb_probs(
    block: Block,
    draws: tuple[np.ndarray, np.ndarray],
    backend: str,
    item_name: Any,
    columns: list[str],
    item_dtype: Any,
) -> pd.DataFrame:
    """Rao-Blackwellised class probabilities: the mean over draws of ``P(z_i | pi_s, theta_s, y_i)``."""
    pi, theta = draws
    S, K = pi.shape
    J = theta.shape[1]
    acc = np.zeros((block.n_units, K))
    for s in range(S):
        p = make_params(pi[s], theta[s], backend)
        if backend == "numba":
            T = np.empty((block.n_units, K))
            _fused_pass(block, p, T, counts=False)
        else:
            T, _, _ = e_step(_problem(block, J, K), p.pi, p.theta)
        acc += T
    acc /= S
    index = pd.Index(block.items, name=item_name)
    if index.dtype != item_dtype:
        index = index.astype(item_dtype)
    return pd.DataFrame(acc, index=index, columns=columns)


# ------------------------------------------------------------------------------- result


@dataclass(eq=False, repr=False)  # the one-line repr of GibbsFit, not every array
class DistributedGibbsFit(DistributedClasses, GibbsFit):
    """Result of the Gibbs sampler on distributed data: a :class:`~pyrater.fits.gibbs.GibbsFit`.

    Draws of pi and theta (and p), ``summary``, ``point_estimate``,
    ``posterior_interval``, ``posterior_samples``, ``mcmc_diagnostics``
    (with the label-switching check) and ``to_inference_data`` (posterior
    and sample stats) work as for the in-memory sampler.  The
    Rao-Blackwellised :meth:`class_probabilities` and ``point_estimate("z")``
    are lazy Dask objects; there is no per-item ``log_lik`` (LOO and WAIC
    need the data in memory).
    """

    blocks: list | None = field(default=None, repr=False)
    backend_used: str = "numba"
    rb_draws: int = 200
    _draws_future: Any = field(default=None, repr=False)

    def _class_probability_task(self) -> tuple[Callable, tuple]:
        if self._draws_future is None:
            pi, theta = self._draws()
            S = pi.shape[0]
            keep = np.unique(np.linspace(0, S - 1, min(S, self.rb_draws)).round().astype(int))
            client = get_client(self.data.client)
            self._draws_future = client.scatter(
                (pi[keep], np.ascontiguousarray(theta[keep])), broadcast=True, hash=False
            )
        return partition_rb_probs, (self._draws_future, self.backend_used)

    def _summary_info(self) -> dict[str, Any]:
        info = super()._summary_info()
        info.update(self._distributed_info())
        return info


# -------------------------------------------------------------------------------- gibbs


def gibbs(
    data: DistributedRatingData | Any,
    model: Any = "dawid_skene",
    *,
    chains: int = 4,
    warmup: int = 1000,
    draws: int = 1000,
    thin: int = 1,
    seed: int | None = None,
    known: dict | pd.Series | None = None,
    rb_draws: int = 200,
    backend: str = "auto",
    client: Any = None,
    callback: Callable[[int], Any] | None = None,
    **data_options: Any,
) -> DistributedGibbsFit:
    """Sample the posterior by blocked Gibbs over data partitioned on a Dask cluster.

    :func:`pyrater.fit` calls this for ``method="gibbs"`` with a Dask
    DataFrame or a :class:`DistributedRatingData`.

    Parameters
    ----------
    data : DistributedRatingData or dask.dataframe.DataFrame
        A Dask DataFrame is partitioned first (``data_options``: ``item``,
        ``rater``, ``rating``, ``categories``, ``npartitions``).
    model, chains, warmup, draws, thin, seed, known
        As in :func:`pyrater.inference.gibbs.sampler.gibbs`.  The seed and the
        partitioning fix the draws (see the module notes).
    rb_draws : int
        At most this many kept draws (evenly spaced over all chains) enter
        the Rao-Blackwellised class probabilities, one kernel pass per draw
        and partition when they are computed.
    backend : {"auto", "numba", "scipy"}
        Kernel of the class-probability passes (as in distributed EM).
    client : dask.distributed.Client, optional
        Default: the running default client (none is ever started here).
    callback : callable, optional
        ``callback(sweep)`` after each sweep, on the client.

    Returns
    -------
    DistributedGibbsFit
    """
    t0 = time.perf_counter()
    chains, warmup, draws, thin, seed = check_run(chains, warmup, draws, thin, seed)
    rb_draws = check_int("rb_draws", rb_draws, 1)
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable, got {callback!r}")
    model_obj = get_model(model)
    if is_dask_frame(data):
        conjugate_prior(model_obj, 2, 1)  # refuse the hierarchical model before the shuffle
    data, client = as_distributed(data, client, **data_options)
    J, K = data.n_raters, data.n_categories
    prior = conjugate_prior(model_obj, K, J)
    backend = choose_backend(backend, K)
    blocks = data.blocks_with_known(known)
    alpha, beta, beta1, beta2 = prior.kernel_arrays(K)
    Jt = 1 if prior.kind == "homogeneous" else J
    S = draws // thin
    pi_d = np.empty((chains, S, K))
    theta_d = np.empty((chains, S, Jt, K, K))
    Kp = prior.p_columns(K)  # parameters kept per row (class-conditional K, one-coin 1, MACE K + 1; pooled m and s)
    Jp = prior.p_rows(J, K)  # rows: J, or K + 1 for the pooled model
    p_d = np.empty((chains, S, Jp, Kp)) if Kp else np.empty((chains, 0, J, K))
    ll_tot = np.empty((chains, S))
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(chains)]
    pi = np.empty((chains, K))
    theta = np.empty((chains, Jt, K, K))
    p = np.empty((chains, Jp, Kp)) if Kp else np.empty((chains, 0, K))
    for c in range(chains):  # the state MACE's parameter step starts from (the other kinds overwrite it)
        _kern.init_state(prior.code, p[c])
    betas = [beta.copy() for _ in range(chains)]  # a chain may rewrite its prior (the pooled model's 1 + s m)
    shape, row = np.empty(K), np.empty(K)
    tag = f"pyrater-gibbs-{id(data):x}-{time.time_ns():x}"
    index = list(range(len(blocks)))

    def reduce(parts: list, name: str) -> tuple:
        return tree_reduce(client, parts, add_chain_stats, key=name).result()

    def parameter_step(N: np.ndarray, n_k: np.ndarray) -> None:
        for c in range(chains):
            _kern.parameter_step(
                prior.code, J, K, N[c], n_k[c], alpha, betas[c], beta1, beta2, rngs[c], pi[c], theta[c], p[c], shape,
                row,
            )  # fmt: skip

    def sweep(t: int, sample: bool) -> tuple:
        params = client.scatter(_chain_params(pi, theta, J), broadcast=True, hash=False)
        keys = [f"{tag}-sweep{t}-part{b}" for b in index]
        parts = client.map(partition_sweep, blocks, index, p=params, seed=seed, sweep=t, sample=sample, key=keys)
        return reduce(parts, f"{tag}-sweep{t}")

    keys = [f"{tag}-start-part{b}" for b in index]
    _, n_k, N = reduce(
        client.map(partition_start, blocks, index, K=K, chains=chains, seed=seed, key=keys), f"{tag}-start"
    )
    parameter_step(N, n_k)
    setup = time.perf_counter() - t0
    t1 = time.perf_counter()
    prev = -1  # the kept draw whose parameters the next z pass uses (its log-likelihood comes from there)
    for t in range(warmup + draws):
        ll, n_k, N = sweep(t + 1, True)
        if prev >= 0:
            ll_tot[:, prev] = ll
        parameter_step(N, n_k)
        prev = -1
        if t >= warmup and (t - warmup + 1) % thin == 0 and (t - warmup) // thin < S:
            s = (t - warmup) // thin
            pi_d[:, s] = pi
            theta_d[:, s] = theta
            if Kp:
                p_d[:, s] = p
            prev = s
        if callback is not None:
            callback(t)
    if prev >= 0:  # the last kept draw's log-likelihood: one pass without sampling
        ll_tot[:, prev] = sweep(warmup + draws + 1, False)[0]
    elapsed = time.perf_counter() - t1

    out: dict[str, np.ndarray] = {"pi": pi_d}
    theta_out = theta_d[:, :, 0] if prior.kind == "homogeneous" else theta_d
    out["theta"] = theta_out
    if Kp:  # the model's own parameters: p (class-conditional, one-coin), competence and xi (MACE), m and s (pooled)
        out.update(prior.reported(p_d))
    lp = ll_tot + log_prior_density(prior, pi_d, theta_out, p_d if Kp else None)
    fit = DistributedGibbsFit(
        data=data,  # type: ignore[arg-type]
        model=model_obj,
        priors=prior.values,
        draws=out,
        sample_stats={"lp": lp},
        known=None,
        engine=GIBBS_ENGINE + "-dask",
        settings={
            "chains": chains,
            "warmup": warmup,
            "draws": draws,
            "thin": thin,
            "seed": seed,
            "partitions": len(blocks),
            "setup_s": setup,
        },
        elapsed=elapsed,
        blocks=blocks,
        backend_used=backend,
        rb_draws=rb_draws,
    )
    fit._fit_time_check()
    return fit
