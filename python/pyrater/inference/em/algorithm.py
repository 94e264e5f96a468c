"""Maximum likelihood and MAP estimation by EM for the Dawid-Skene family.

The EM algorithm of Dawid & Skene (1979) alternates two sparse products with
the per-unit count matrix ``C`` of shape ``(I, J*K)`` built once
(:attr:`pyrater.RatingData.counts`):

E-step (the shared kernel, :func:`pyrater.models.kernels.log_joint`)
    ``log p(y_i, z_i = k) = log pi_k + (C @ LT)[i, k]`` with
    ``LT[j*K + l, k] = log theta[j, k, l]``, then
    ``T[i, k] = P(z_i = k | y_i)`` by a log-sum-exp over ``k``.
M-step
    expected counts ``N[j, k, l] = sum_i w_i T[i, k] C[i, j*K + l]``, i.e.
    ``C.T @ (w[:, None] * T)`` reshaped, and class totals
    ``n_k = sum_i w_i T[i, k]``; then

    * ML, full model:  ``pi_k = n_k / sum(n)``, ``theta[j, k, l] = N[j, k, l] / sum_l N[j, k, l]``
    * MAP, full model: ``pi_k ∝ n_k + alpha_k - 1``,
      ``theta[j, k, l] ∝ N[j, k, l] + beta[j, k, l] - 1``
    * homogeneous: one matrix, ``theta[k, l] ∝ sum_j N[j, k, l] (+ beta[k, l] - 1)``
    * class-conditional: ``theta[j, k, k] = p[j, k]``,
      ``theta[j, k, l] = (1 - p[j, k]) / (K - 1)`` for ``l != k``, with
      ``p[j, k] = (N[j, k, k] + beta1_k - 1) / (sum_l N[j, k, l] + beta1_k + beta2_k - 2)``
      (ML: drop the prior terms).
    * one-coin: ``theta[j, k, k] = p[j]``, off-diagonal ``(1 - p[j]) / (K - 1)``, with
      ``p[j] = (sum_k N[j, k, k] + beta1 - 1) / (sum_{k, l} N[j, k, l] + beta1 + beta2 - 2)``
      (ML: drop the prior terms).
    * MACE: ``theta[j, k, l] = c[j] [k == l] + (1 - c[j]) xi[j, l]``; ``c`` and ``xi`` from the same
      counts by an inner EM over which diagonal ratings are spam, started from the current
      estimate (:func:`pyrater.inference.em.steps.mace_m_step`): a generalised EM step.
    * pooled (MAP only): ``theta[j, k, l] ∝ N[j, k, l] + s[k] m[k, l]`` (the
      Dirichlet(1 + s m) prior), then the population rows ``m`` and
      concentrations ``s`` maximised given theta (a conditional M-step, ECM;
      :func:`pyrater.inference.em.steps.pooled_hyper_mode`).

``w_i`` is the unit weight: 1 for items, the tally for grouped data (one unit
per distinct rating pattern), so the cost of grouped data scales with the
number of patterns.  Long data can be compressed into its distinct count rows
automatically (``compress``); the estimates are the same and the class
probabilities are mapped back to every item.

Two backends compute the iterations (``backend``); they give the same
estimates up to rounding.

numba (the default from 500,000 stored counts on, when numba imports and K <= 8)
    One pass over the count matrix per iteration: the compiled kernel of
    :mod:`pyrater.inference.em.kernel` computes each unit's log joint, its log-sum-exp,
    class probabilities and log-likelihood, and scatters ``w_i T[i, k]``
    into the expected counts while the unit's entries are still in cache.
    The M-step maths (:func:`pyrater.inference.em.steps.m_step_from_counts`) is shared with the
    scipy path; the class probabilities are written only at the final
    estimate.  Below the size threshold, loading numba and the cached
    kernels (about 0.25 s once per process; compiling them the first time
    on a machine, about 2.5 s) would cost more than it saves.
scipy (the fallback and the reference)
    Every sum over items is a sparse product or a column reduction; there
    is no Python loop over ratings or items (loops run over the K
    categories only).  One iteration costs two passes over the sparse
    counts (scipy's ``csr_matvecs`` for the E-step, ``csc_matvecs`` on the
    free transpose view for the M-step, whose output is only (J*K, K)) and
    about five passes over one (I, K) float64 buffer that is reused across
    iterations: no per-iteration allocation.  The log-sum-exp of the E-step
    is shifted by the previous iteration's per-unit log-likelihood instead
    of the row maximum (rows where that guess is far off are recomputed
    exactly), and that shift is folded into the starting values of the
    sparse product.

Everything is float64.

Rows with no information
------------------------
Under ML, when rater ``j`` has zero expected count for true class ``k``
(``sum_l N[j, k, l] = 0``, e.g. the rater never rated an item that can be of
class ``k``) the likelihood does not depend on ``theta[j, k, :]`` and the ML
estimate of that row is not defined.  We set it to the uniform row ``1/K``
(for the class-conditional model ``p[j, k] = 1/K``), which keeps every
quantity finite, and flag the row in :attr:`EMFit.empty_rows`.  The same
happens under MAP when the row's hyperparameters are all 1.

Reference
---------
A. P. Dawid and A. M. Skene (1979). Maximum likelihood estimation of observer
error-rates using the EM algorithm. *Journal of the Royal Statistical
Society, Series C (Applied Statistics)* 28(1), 20-28.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..._quiet import progress_bar
from ..._stacklevel import user_stacklevel
from ..._validation import check_int
from ...data.ratings import RatingData, as_rating_data
from ...data.rows import unit_counts
from ...fits.em import EMFit
from ...models import Model, get_model
from ...models.base import PSEUDO_COUNTS, mode_priors
from ...models.kernels import class_log_posterior, soft_majority_vote
from .._numba import aligned_zeros, compile_for
from .._numba import run as run_kernel
from .compress import AUTO_COMPRESS_SHARE, compress_rows, may_compress
from .convergence import (
    METHODS,
    Convergence,
    EMConvergenceWarning,
    best_run,
    check_stopping,
    not_converged_message,
)
from .squarem import ACCELERATED_KINDS, squarem
from .start import SEARCH_MAX_NNZ, check_init, search, search_starts
from .steps import (
    FUSED_MAX_K,
    MapPrior,
    NumericMStep,
    Problem,
    clamp_classes,
    class_order,
    e_step,
    estimate_params,
    load_fused,
    m_step,
    m_step_from_counts,
    map_prior,
    model_kind,
    pi_from_counts,
)

__all__ = ["em", "EMFit", "EMConvergenceWarning"]

Method = Literal["ml", "map"]
_BACKENDS = ("auto", "numba", "scipy")
# backend="auto" uses the fused numba kernel from this many stored counts on (below, loading numba and
# its cached kernels, about 0.25 s once per process, costs more than the iterations save)
_FUSED_MIN_NNZ = 500_000


def _run(
    prob: Problem,
    T: np.ndarray,
    kind: str | NumericMStep,
    prior: MapPrior | None,
    tol: float,
    max_iter: int,
    param_tol: float = 1e-6,
    bar: Any = None,
    accelerate: bool = False,
) -> dict[str, Any]:
    """One EM run from class probabilities T (modified); stops by :class:`Convergence`.

    ``bar`` (a tqdm bar or None) advances once per iteration.  With
    ``accelerate``, SQUAREM cycles (:mod:`pyrater.inference.em.squarem`)
    come first and plain EM iterations finish the run by the same stopping rule.
    """
    wT = None if prob.unit_weights else np.empty_like(T)
    prior = None if prior is None else prior.fresh()  # the pooled model's (m, s) start afresh in every run
    trace: list[float] = []
    converged = False
    conv = Convergence(tol, param_tol)
    pi, theta, empty = m_step(prob, T, kind, prior, wT)
    # the M-step has consumed T: its memory receives every E-step (no per-iteration allocation)
    buf = np.ascontiguousarray(T) if prob.fast else None
    ll = np.nan
    ll_units = None
    done, sq_info = 0, {}  # E-steps of the SQUAREM phase and what it did
    if accelerate and max_iter > 1:
        shift: dict[str, Any] = {"ll_units": None}

        def evaluate(pi_: np.ndarray, theta_: np.ndarray) -> tuple[float, np.ndarray]:
            T_, ll_units_, ll_ = e_step(prob, pi_, theta_, out=buf, shift=shift["ll_units"])
            # a jump that gave a rating probability 0 leaves no usable shift for the next E-step
            shift["ll_units"] = ll_units_ if np.isfinite(ll_) else None
            return (ll_ if prior is None else ll_ + prior.log_density(pi_, theta_)), T_

        def update(T_: np.ndarray, theta_prev: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any]:
            return m_step(prob, T_, kind, prior, wT, theta_prev)

        pi, theta, empty, sq = squarem(
            evaluate, update, pi, theta, empty, max_iter - 1, tol, param_tol, trace, bar, str(kind)
        )
        ll_units, done, sq_info = shift["ll_units"], sq.evaluations, sq.info()
    kept = len(trace)
    for it in range(max_iter - done):
        if bar is not None:
            bar.update()
        T, ll_units, ll = e_step(prob, pi, theta, out=buf, shift=ll_units)
        obj = ll if prior is None else ll + prior.log_density(pi, theta)
        trace.append(obj)
        # the same schedule as _run_fused, whose class probabilities exist only when asked for: a
        # snapshot at an iteration that follows a settled one, the comparison at the next
        want_T = conv.want_T
        if conv.settled(trace, pi, theta):
            if want_T and conv.classes_settled(T):
                converged = True
                break
        else:
            conv.reset_classes()
        if it + 1 < max_iter - done:
            pi, theta, empty = m_step(prob, T, kind, prior, wT, theta)
    sq_info["e_steps"] = done + len(trace) - kept
    return _run_result(pi, theta, empty, T, ll, trace, converged, conv, prior, sq_info, kind)


def _run_result(
    pi: np.ndarray,
    theta: np.ndarray,
    empty: Any,
    T: np.ndarray,
    ll: float,
    trace: list[float],
    converged: bool,
    conv: Convergence,
    prior: MapPrior | None = None,
    accel_info: dict[str, Any] | None = None,
    kind: str | NumericMStep | None = None,
) -> dict[str, Any]:
    """What one EM run returns (both backends): estimates, class probabilities, objective trace, convergence.

    A family with its own M-step also leaves its parameters (``"numeric_x"``): a run continued
    later (the start search) resumes from them, not from another run's.
    """
    return {
        "numeric_x": kind.x.copy() if isinstance(kind, NumericMStep) else None,
        "model_params": estimate_params(kind, theta, prior),
        "pi": pi,
        "theta": theta,
        "empty": empty,
        "T": T,
        "log_lik": ll,
        "trace": np.asarray(trace),
        "converged": converged,
        "convergence": {**conv.info(), **(accel_info or {})},
    }


def _choose_backend(backend: str, prob: Problem) -> Any:
    """The :mod:`pyrater.inference.em.kernel` module when the fused numba path is used, else None."""
    usable = prob.fast and 2 <= prob.K <= FUSED_MAX_K
    if backend == "scipy" or (backend == "auto" and (not usable or prob.counts.nnz < _FUSED_MIN_NNZ)):
        return None
    fused = load_fused()
    if backend == "numba":
        if fused is None:
            raise ImportError("backend='numba' needs numba (pip install numba); use backend='scipy' or 'auto'")
        if not usable:
            raise ValueError(
                f"backend='numba' supports 2 to {FUSED_MAX_K} categories on a float64 CSR count matrix "
                f"(here K = {prob.K}); use backend='scipy' or 'auto'"
            )
    return fused


class _FusedKernel:
    """One fused EM pass (:func:`pyrater.inference.em.kernel.em_iteration`) over a problem, with reused buffers.

    The units are split into ``n_threads`` contiguous ranges of about equal
    numbers of stored counts; each range runs in its own thread (the kernel
    releases the GIL) with its own expected-count matrix, summed afterwards.
    When every stored count is 1 the pass gets an empty ``data`` array (its
    faster path, see :func:`pyrater.inference.em.kernel.em_iteration`);
    ``kind`` is the M-step's (:meth:`m_step`).
    """

    def __init__(self, fused: Any, prob: Problem, n_threads: int, kind: str | NumericMStep) -> None:
        c = prob.counts
        I, JK = c.shape
        KP = fused.KP
        self.fused = fused
        self.K = prob.K
        self.csr = (c.indptr, c.indices, c.data)
        # the fused pass's counts: empty when every stored count is 1 (its faster path), decided once per fit
        self.em_csr = (c.indptr, c.indices, np.empty(0)) if unit_counts(c) else self.csr
        self.known = np.empty(0, np.int64) if prob.known is None else np.ascontiguousarray(prob.known, dtype=np.int64)
        self.weight = np.empty(0) if prob.unit_weights else np.ascontiguousarray(prob.weight, dtype=np.float64)
        self.LT = aligned_zeros((JK, KP))  # padded lanes stay 0
        n = max(1, min(int(n_threads), I))
        # unit ranges with about nnz / n stored counts each
        cuts = np.searchsorted(c.indptr, np.linspace(0, c.nnz, n + 1)[1:-1], side="left")
        self.bounds = [int(b) for b in np.concatenate([[0], cuts, [I]])]
        self.N = [aligned_zeros((JK, KP)) for _ in range(n)]
        self.n_k = [np.zeros(KP) for _ in range(n)]
        self.no_T = np.empty((0, prob.K))
        self.no_ll = np.empty(0)
        self.no_N = np.empty((0, KP))
        self.no_theta = np.empty((0, 0, 0))
        compile_for(fused.em_iteration, *self._args(0, np.zeros(KP), self.no_T, self.N[0]))
        self.J = prob.J
        self.kind = kind
        self._add: tuple[MapPrior, np.ndarray] | None = None  # (prior, its pseudo-counts in the padded layout)
        if kind == "dawid_skene":
            theta, empty = np.empty((prob.J, prob.K, prob.K)), np.empty((prob.J, prob.K), dtype=bool)
            compile_for(fused.dawid_skene_theta, self.N[0], self.no_N, theta, empty, self.no_theta)

    def m_step_sums(self, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``n_k`` (K,) and the expected counts (J*K, K) (a view) from class probabilities ``T``."""
        f, K = self.fused, self.K
        I = self.bounds[-1]
        run_kernel(f.expected_counts, *self.csr, T, self.weight, 0, I, self.N[0], self.n_k[0])
        return self.n_k[0][:K].copy(), self.N[0][:, :K]

    def majority_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """``n_k`` (K,) and the expected counts (J*K, K) (a view) from the soft majority vote, in one pass.

        The numbers of :meth:`m_step_sums` of the (clamped) vote shares, without
        writing the (I, K) shares.
        """
        f, K = self.fused, self.K
        JK = self.LT.shape[0]
        rating = np.arange(JK, dtype=np.int64) % K
        run_kernel(f.majority_sums, *self.em_csr, rating, self.known, self.weight, K, self.N[0], self.n_k[0])
        return self.n_k[0][:K].copy(), self.N[0][:, :K]

    def m_step(
        self, sums: tuple[np.ndarray, np.ndarray], prior: MapPrior | None, theta_prev: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`m_step_from_counts` of ``sums`` (``n_k`` and a view of this kernel's first count table).

        The Dawid-Skene model's error matrices come from one compiled pass over the padded
        table (:func:`pyrater.inference.em.kernel.dawid_skene_theta`, the same numbers to
        rounding); the other kinds go through :func:`m_step_from_counts`.
        """
        return self.step(sums, prior, theta_prev)[:3]

    def step(
        self, sums: tuple[np.ndarray, np.ndarray], prior: MapPrior | None, theta_prev: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float | None]:
        """:meth:`m_step` and ``max |theta - theta_prev|`` (None when not computed on the way).

        The Dawid-Skene model's pass computes the change of the error matrices while it
        writes them, so that the stopping rule needs no second pass over both
        (:meth:`Convergence.settled`'s ``theta_change``).
        """
        n_k, N_flat = sums
        if self.kind != "dawid_skene" or not np.may_share_memory(N_flat, self.N[0]):
            return (*m_step_from_counts(n_k, N_flat, self.J, self.K, self.kind, prior, theta_prev), None)
        pi = pi_from_counts(n_k, prior)
        theta = np.empty((self.J, self.K, self.K))
        empty = np.empty((self.J, self.K), dtype=bool)
        prev = self.no_theta if theta_prev is None else theta_prev
        change = self.fused.dawid_skene_theta(self.N[0], self._pseudo_counts(prior), theta, empty, prev)
        return pi, theta, empty, (None if theta_prev is None else change)

    def _pseudo_counts(self, prior: MapPrior | None) -> np.ndarray:
        """``beta - 1`` of a Dawid-Skene MAP prior in the padded layout of the count table (empty for ML)."""
        if prior is None:
            return self.no_N
        if self._add is None or self._add[0] is not prior:
            assert prior.beta is not None
            J, K = self.J, self.K
            add = aligned_zeros((J * K, self.fused.KP))
            add[:, :K] = np.broadcast_to(prior.beta - 1.0, (J, K, K)).transpose(0, 2, 1).reshape(J * K, K)
            self._add = (prior, add)
        return self._add[1]

    def _args(self, t: int, log_pi: np.ndarray, T: np.ndarray, N: np.ndarray) -> tuple:
        return (
            *self.em_csr,
            self.LT,
            log_pi,
            self.known,
            self.weight,
            self.bounds[t],
            self.bounds[t + 1],
            self.K,
            T,
            self.no_ll,
            N,
            self.n_k[t],
        )

    def __call__(
        self, pi: np.ndarray, theta: np.ndarray, executor: Any, T: np.ndarray | None = None, counts: bool = True
    ) -> tuple[float, np.ndarray | None, np.ndarray | None]:
        """E-step at (pi, theta) and, when ``counts``, the M-step's expected counts.

        Returns ``(log_lik, n_k (K,), N_flat (J*K, K) view)``; writes the class
        probabilities into ``T`` (I, K) when given.
        """
        with np.errstate(divide="ignore"):
            log_pi = self.fused.pad_log_pi(np.log(pi))
            self.fused.pad_log_theta(np.log(theta), self.LT)  # a contiguous (SIMD) log, then one strided copy
        T_out = self.no_T if T is None else T
        n = len(self.N)
        calls = [self._args(t, log_pi, T_out, self.N[t] if counts else self.no_N) for t in range(n)]
        kernel = self.fused.em_iteration
        if n == 1:
            parts = [kernel(*calls[0])]
        else:
            parts = [f.result() for f in [executor.submit(kernel, *a) for a in calls]]
        ll = float(sum(parts))
        if not counts:
            return ll, None, None
        N, n_k = self.N[0], self.n_k[0]
        for t in range(1, n):
            N += self.N[t]
            n_k += self.n_k[t]
        K = self.K
        return ll, n_k[:K].copy(), N[:, :K]


def _run_fused(
    prob: Problem,
    T: np.ndarray,
    kind: str | NumericMStep,
    prior: MapPrior | None,
    tol: float,
    max_iter: int,
    fused: Any,
    n_threads: int,
    param_tol: float = 1e-6,
    bar: Any = None,
    majority_start: bool = False,
    accelerate: bool = False,
) -> dict[str, Any]:
    """:func:`_run` with each iteration one pass of the fused numba kernel.

    With ``majority_start`` the run starts from the soft majority vote: the
    first M-step's sums come from one pass over the counts
    (:meth:`_FusedKernel.majority_sums`) and ``T`` is only the (I, K) buffer
    that receives the final class probabilities (its values are not read).

    Same iterations, objective and stopping rule as :func:`_run`; the first
    M-step (from the initial class probabilities) takes its sums from
    :func:`pyrater.inference.em.kernel.expected_counts`.  The
    class probabilities are written, into the memory of ``T``, only when the
    stopping rule needs them (once the objective and the parameters have
    settled, :class:`Convergence` rule 3) and by the pass of iteration
    ``max_iter``; so the run ends with the class probabilities at its estimate.
    """
    kern = _FusedKernel(fused, prob, n_threads, kind)
    prior = None if prior is None else prior.fresh()  # the pooled model's (m, s) start afresh in every run
    T = np.ascontiguousarray(T, dtype=np.float64)
    sums = kern.majority_sums() if majority_start else kern.m_step_sums(T)
    pi, theta, empty = kern.m_step(sums, prior)
    trace: list[float] = []
    converged = False
    conv = Convergence(tol, param_tol)
    ll = np.nan
    done, sq_info = 0, {}  # E-steps of the SQUAREM phase and what it did
    with ThreadPoolExecutor(max_workers=len(kern.N)) if len(kern.N) > 1 else nullcontext() as ex:
        if accelerate and max_iter > 1:

            def evaluate(pi_: np.ndarray, theta_: np.ndarray) -> tuple[float, tuple[Any, Any]]:
                ll_, n_k_, N_ = kern(pi_, theta_, ex)
                return (ll_ if prior is None else ll_ + prior.log_density(pi_, theta_)), (n_k_, N_)

            def update(sums: tuple[Any, Any], theta_prev: np.ndarray) -> tuple[np.ndarray, np.ndarray, Any]:
                return kern.m_step(sums, prior, theta_prev)

            pi, theta, empty, sq = squarem(
                evaluate, update, pi, theta, empty, max_iter - 1, tol, param_tol, trace, bar, str(kind)
            )
            done, sq_info = sq.evaluations, sq.info()
        kept = len(trace)
        change = None  # max |theta - previous theta| when the M-step computed it
        for it in range(max_iter - done):
            if bar is not None:
                bar.update()
            last = it + 1 >= max_iter - done
            # the last iteration is the final estimate: its pass writes the class probabilities
            # the class probabilities are written only while the stopping rule needs them (rule 3)
            want_T = conv.want_T
            ll, n_k, N_flat = kern(pi, theta, ex, T=T if (last or want_T) else None, counts=not last)
            obj = ll if prior is None else ll + prior.log_density(pi, theta)
            trace.append(obj)
            if conv.settled(trace, pi, theta, theta_change=change):
                if want_T and conv.classes_settled(T):
                    converged = True
                    break
            else:
                conv.reset_classes()
            if not last:
                assert n_k is not None and N_flat is not None  # this pass ran with counts=True
                pi, theta, empty, change = kern.step((n_k, N_flat), prior, theta)
        # stopped by convergence the T of the last pass is the estimate's; a run stopped at max_iter
        # wrote it in its last pass too
    sq_info["e_steps"] = done + len(trace) - kept
    return _run_result(pi, theta, empty, T, ll, trace, converged, conv, prior, sq_info, kind)


# ----------------------------------------------------------------------------- em


def em(
    data: RatingData | pd.DataFrame,
    model: str | Model = "dawid_skene",
    method: Method = "map",
    known: dict | pd.Series | None = None,
    init: str | np.ndarray = "auto",
    n_restarts: int = 0,
    tol: float = 1e-8,
    max_iter: int = 5000,
    seed: int | np.random.Generator | None = None,
    data_format: Literal["long", "wide", "grouped"] = "long",
    compress: bool | Literal["auto"] = "auto",
    backend: Literal["auto", "numba", "scipy"] = "auto",
    n_threads: int = 1,
    param_tol: float = 1e-6,
    progress: bool = False,
    mode_scale: Literal["auto", "simplex", "log_odds"] = "auto",
    acceleration: Literal["auto", "squarem", "none"] = "auto",
) -> EMFit:
    """Fit a Dawid-Skene-family model by EM (Dawid & Skene 1979): ML or MAP.

    Parameters
    ----------
    data : RatingData or DataFrame
        Ratings in any design; repeated ratings of an item by a rater are
        allowed.  A DataFrame is read with ``data_format``.  A Dask
        DataFrame (long, default column names) or a
        :class:`pyrater.DistributedRatingData` is fitted on the Dask
        cluster without collecting the ratings
        (:class:`pyrater.DistributedRatingData`).
    model : str or model object
        ``"dawid_skene"`` (a full error matrix per rater), ``"class_conditional"``
        (``theta[j, k, k] = p[j, k]``, off-diagonal ``(1 - p[j, k]) / (K - 1)``),
        ``"homogeneous"`` (one matrix for all raters), ``"one_coin"`` (one
        accuracy ``p[j]`` per rater, off-diagonal ``(1 - p[j]) / (K - 1)``), ``"mace"`` (competent
        copies or spam, :class:`pyrater.MACE`), ``"pooled"`` (raters' rows around learned population
        rows; MAP only), or a model object from
        :mod:`pyrater.models` carrying its priors.  The hierarchical model is
        not supported by EM.  ``"item_difficulty"`` (binary, per-item
        parameters) is fitted by its own generalised EM
        (:mod:`pyrater.inference.em.item_difficulty`: block-Newton M-steps,
        SQUAREM; ``method="ml"`` keeps the item parameters' priors); it takes
        ``compress``, ``n_threads`` and ``mode_scale`` at their defaults only.
    method : {"map", "ml"}
        The posterior mode under the model's priors (``"map"``, the default:
        Dirichlet on pi and on each error-matrix row; Beta(beta1_k, beta2_k)
        on ``p[j, k]`` for the class-conditional model, Beta(beta1, beta2) on
        ``p[j]`` for the one-coin model; Beta on the competences and Dirichlet
        on the spamming distributions for MACE), or maximum likelihood
        (``"ml"``; not for the pooled and community models, whose population
        parameters have no estimate apart from their priors).  On which scale
        the mode is taken: ``mode_scale``.  With all hyperparameters equal to
        1, MAP on the simplex equals ML.  The default is the posterior mode,
        as for ``pyrater.fit(data, model, method="em")`` and the command
        line's ``--method em``: it is as accurate as maximum likelihood on
        the gold-labelled sets of ``bench/RESULTS_realdata.md``, never makes a
        class impossible on the strength of one rating, and converges where
        maximum likelihood creeps towards the boundary of the parameter space
        (on trec_relevance maximum likelihood stops at ``max_iter``, about 30
        times slower; ``bench/RESULTS_defaults.md``).  Before pyrater 0.2 the
        default was ``"ml"``.
    known : dict or Series, optional
        ``{item label: category label}`` for items whose true class is known;
        their class probabilities are clamped to one-hot during EM
        (semi-supervised EM).
    init : {"auto", "search", "majority", "random"} or array (I, K)
        Initial class probabilities.  ``"majority"``: the soft majority vote
        (share of each category among the unit's ratings); ``"random"``: a
        Dirichlet(1, ..., 1) draw; or your own array (rows are normalised;
        the array is not modified).  EM starts with an M-step from these
        probabilities.  ``"search"``: short runs (20 iterations) from
        diverse starts -- the soft and the hard majority vote, the own
        ratings of each of the (up to 8) raters with the most ratings
        (majority vote where they did not rate), 4 votes with random
        Gamma(1) rater weights and 4 sharp Dirichlet(0.3) draws -- then the
        3 best are run to convergence and the best kept (the "short runs"
        strategy of Biernacki, Celeux & Govaert 2003).  EM finds a local
        mode; the likelihood and posterior of these models often have
        several (on the anaesthesia data the majority-vote start ends at a
        log posterior of -110.64, the search at -108.30, the mode Stan's
        optimiser finds).  ``"auto"`` (default): ``"search"`` when the
        (compressed) count matrix holds fewer than 200,000 counts, else
        ``"majority"``.  ``EMFit.start`` says which start won.  The
        search's random starts come from ``seed`` (a fixed seed when
        ``seed`` is None, so that the default fit is reproducible).
    n_restarts : int
        Extra runs from random initial class probabilities (Dirichlet(1) per
        unit).  The run with the highest final objective is kept; the
        ``init`` run is kept unless a restart beats it by more than
        ``tol * max(1, |objective|)`` (so label-switched copies of the same
        optimum do not replace it).
    tol : float
        Objective part of the stopping rule: ``|f_t - f_{t-1}| <= tol *
        max(1, |f_t|)`` for the objective ``f`` (log-likelihood for ML,
        log-posterior for MAP).
    max_iter : int
        Maximum number of iterations (E-steps) per run.  A run that stops
        there warns with :class:`pyrater.EMConvergenceWarning`.
    param_tol : float
        Parameter part of the stopping rule (both parts must hold): the
        largest absolute change of pi and theta in the last iteration, and
        the remaining distance extrapolated from EM's linear rate
        (``d_t r / (1 - r)``, ``r`` the ratio of successive changes), must
        be at most ``param_tol``, and then so must the change of the class
        probabilities.  On a flat likelihood surface the objective can
        change by less than ``tol`` per iteration while the estimates are
        still far from the optimum: a rule on the objective alone stops
        there.  ``param_tol=np.inf`` gives the objective-only rule.
    seed : int or numpy Generator, optional
        Seed of :func:`numpy.random.default_rng` for random inits/restarts.
    data_format : {"long", "wide", "grouped"}
        Format of a DataFrame ``data``.
    compress : bool or "auto"
        Iterate over the distinct count rows of the data (each with the
        number of items sharing it as weight) and map class probabilities
        back to every item.  ``"auto"`` compresses non-grouped data when the
        distinct rows are at most half the items.  Estimates are identical
        either way.
    backend : {"auto", "numba", "scipy"}
        How an iteration is computed.  ``"numba"``: one fused pass over the
        count matrix per iteration (a compiled numba kernel; needs numba and
        at most 8 categories), about 2x faster than ``"scipy"``, the two
        sparse products of the module notes.  ``"auto"`` uses numba when it
        can be imported, K <= 8 and the (possibly compressed) count matrix
        holds at least 500,000 counts.  Below that, loading numba and its
        cached kernels (about 0.25 s once per process; compiling them the
        very first time takes a few seconds) would cost more than it
        saves.  Both give the same estimates up to rounding (about 1e-15
        relative per iteration).  Where the objective is flat (maximum
        likelihood on sparse crowds, with estimates on the boundary) SQUAREM's
        jumps amplify those rounding differences, so the two may stop at
        slightly different points (a simulated crowd of 800 raters with about
        11 ratings each: log-likelihoods 1 nat apart after 3,000 E-steps);
        plain EM (``acceleration="none"``) keeps them together.
    progress : bool
        A progress bar over the iterations (tqdm; shown when EM runs for
        more than 2 s).
    n_threads : int
        Threads for the numba backend (the units are split into that many
        ranges, each with its own expected-count matrix).  Default 1.  The
        result depends on it only through the order of floating-point sums.
    acceleration : {"auto", "squarem", "none"}
        ``"squarem"``: SQUAREM (Varadhan & Roland 2008; scheme S3 on the log
        scale of pi and theta, :mod:`pyrater.inference.em.squarem`) jumps
        along EM's path, keeping a jump only when it does not lower the
        objective (else plain EM steps), then plain EM iterations finish
        the run by the same stopping rule: the same fixed point, far fewer
        iterations where EM is slow (maximum likelihood on
        trec_relevance: see ``bench/RESULTS_defaults.md``).  ``"none"``:
        plain EM.  ``"auto"`` (default): SQUAREM for the Dawid-Skene,
        homogeneous, class-conditional and one-coin models, plain EM for
        the others (MACE, pooled and the families with a numerical M-step,
        whose M-step is not a function of pi and theta alone).  Both
        backends; ``n_iter`` and ``log_lik_trace`` count the kept points,
        ``convergence["e_steps"]`` every E-step.
    mode_scale : {"auto", "simplex", "log_odds"}
        ``method="map"``: the scale of the posterior mode.  ``"simplex"``:
        the mode of the density of the probabilities themselves, which
        exists only when every Dirichlet/Beta pseudo-count is >= 1 (below 1
        the density is unbounded at the edge of the simplex; a
        :class:`ValueError` says so).  ``"log_odds"``: the mode on the
        unconstrained log-odds (softmax) scale, Stan's ``jacobian=True``
        mode, which exists for every positive pseudo-count: the simplex mode
        under every pseudo-count + 1 (:func:`pyrater.models.base.mode_priors`).
        ``"auto"`` (default): ``"simplex"`` when every pseudo-count is >= 1,
        else ``"log_odds"`` -- so MAP with rater's default priors works at
        every K (the default off-diagonal ``beta``, ``3.2 / (K - 1)``, is
        below 1 for K >= 5).  ``EMFit.mode_scale`` and ``summary()`` say
        which was used; ``log_posterior`` is then the log density on that
        scale, up to a constant.

    Returns
    -------
    EMFit
        ``pi`` (K,), ``theta`` (J, K, K), ``class_probs`` (I, K),
        ``log_lik``, ``log_lik_trace``, ``n_iter``, ``converged``, ...

    Notes
    -----
    Iteration ``t`` is an M-step followed by an E-step; the E-step computes
    the objective at the new estimate, so ``log_lik_trace[t]`` is the
    objective at the estimate returned if EM stopped at ``t``, and the
    class probabilities are those at the returned estimate.  EM never
    decreases the objective, with or without known items.  The
    log-likelihood of an item with known class is ``log p(y_i, z_i)``.

    Examples
    --------
    >>> import pandas as pd
    >>> from pyrater import em
    >>> df = pd.DataFrame({"item": [1, 1, 2, 2, 3, 3], "rater": ["a", "b"] * 3,
    ...                    "rating": [1, 1, 2, 2, 1, 2]})
    >>> fit = em(df, model="class_conditional")
    >>> fit.class_probabilities().shape
    (3, 2)
    """
    from ..distributed import is_distributed

    family = get_model(model)
    if family.item_level:  # per-item parameters: the family's own generalised EM
        if is_distributed(data):
            raise ValueError(
                f"the {family.title} model has per-item parameters and is fitted by in-memory EM only; "
                "collect the ratings into a RatingData or pandas DataFrame first"
            )
        from .item_difficulty import em_item_difficulty

        return em_item_difficulty(
            data,
            family,  # type: ignore[arg-type]
            method,
            known=known,
            init=init,
            n_restarts=n_restarts,
            tol=tol,
            max_iter=max_iter,
            seed=seed,
            data_format=data_format,
            progress=progress,
            compress=compress,
            backend=backend,
            n_threads=n_threads,
            param_tol=param_tol,
            mode_scale=mode_scale,
            acceleration=acceleration,
        )
    if is_distributed(data):  # a Dask DataFrame or DistributedRatingData: EM on the cluster
        from ..distributed.em import em as distributed_em

        if data_format != "long" or n_threads != 1:
            raise ValueError(
                f"distributed data are long ratings (data_format='long', got {data_format!r}) iterated per "
                f"partition by the Dask workers' threads (n_threads=1, got {n_threads!r})"
            )
        return distributed_em(
            data,
            model,
            method,
            known=known,
            init=init,
            n_restarts=n_restarts,
            tol=tol,
            max_iter=max_iter,
            seed=seed,
            backend=backend,
            param_tol=param_tol,
        )
    t0 = time.perf_counter()
    # ---- validate the arguments before any heavy work
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    model_obj = get_model(model)
    kind: str | NumericMStep = model_kind(model_obj, numeric=True)
    check_int("n_restarts", n_restarts, 0)
    max_iter, tol, param_tol = check_stopping(max_iter, tol, param_tol)
    if compress not in (True, False, "auto"):
        raise ValueError(f"compress must be True, False or 'auto', got {compress!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    check_int("n_threads", n_threads, 1)
    rng = np.random.default_rng(seed)

    data = as_rating_data(data, data_format)
    model_obj.check_data(data)
    I, J, K = data.n_units, data.n_raters, data.n_categories
    if data.n_ratings == 0 or data.weight.sum() <= 0:
        raise ValueError("the data hold no rated items (all tallies are zero)")
    init_checked = check_init(init, I, K)
    if acceleration not in ("auto", "squarem", "none"):
        raise ValueError(f"acceleration must be 'auto', 'squarem' or 'none', got {acceleration!r}")
    if acceleration == "squarem" and kind not in ACCELERATED_KINDS:
        raise ValueError(
            f"acceleration='squarem' is available for the {', '.join(ACCELERATED_KINDS)} models; "
            f"the {model_obj.title} model is fitted by plain EM (acceleration='auto' or 'none')"
        )
    accelerate = acceleration != "none" and kind in ACCELERATED_KINDS
    if mode_scale not in ("auto", "simplex", "log_odds"):
        raise ValueError(f"mode_scale must be 'auto', 'simplex' or 'log_odds', got {mode_scale!r}")
    prior, prior_values = (None, None)
    scale_used: str | None = None
    mode_model = model_obj
    if method == "map":
        mode_model, note = (model_obj, None) if mode_scale == "simplex" else mode_priors(model_obj, K, J)
        if mode_scale == "log_odds" and note is None:  # every pseudo-count >= 1: the log-odds mode still adds 1
            shifted = {
                k: np.asarray(v, dtype=float) + 1.0 for k, v in model_obj.priors(K, J).items() if k in PSEUDO_COUNTS
            }
            mode_model = dataclasses.replace(model_obj, **shifted)
        scale_used = "simplex" if mode_model is model_obj else "log_odds"
        prior, prior_values = map_prior(mode_model, K, J)
        if scale_used == "log_odds":
            prior_values = model_obj.priors(K, J)  # the fit reports the model's own priors (and the scale)
    elif kind in ("pooled", "community"):
        what = "population rows m and concentrations s" if kind == "pooled" else "communities (m, s, rho)"
        raise ValueError(
            f"method='ml' is not available for the {kind} model: its {what} "
            "have no maximum-likelihood estimate apart from their priors; use method='map'"
        )
    if kind == "numeric":  # the family's own M-step (e.g. the ordinal model's Newton steps)
        kind = NumericMStep(model_obj, K, J, None if prior is None else mode_model.priors(K, J))
        if prior is not None:
            prior.numeric = kind
        model_obj.priors(K, J)  # the family's checks of K (ML reads no prior)
    known_codes = data.known_codes(known)

    # ---- the problem EM iterates over (the user's data is never modified)
    counts = data.counts
    weight = data.weight.astype(float)
    known_fit = known_codes
    keep: np.ndarray | None = None
    if np.any(weight <= 0):
        # units of weight 0 (e.g. K-fold's held-out items) add nothing to the objective but would add
        # 0 x (-inf) = NaN where a rating of theirs has probability 0: EM leaves them out (their class
        # probabilities are computed at the estimate, below)
        keep = np.flatnonzero(weight > 0)
        counts, weight = counts[keep], weight[keep]
        known_fit = None if known_codes is None else known_codes[keep]
        if isinstance(init_checked, np.ndarray):
            init_checked = init_checked[keep]
    first: np.ndarray | None = None
    inverse: np.ndarray | None = None  # set together with first
    # the compression check in one compiled pass where the numba kernels will run anyway
    check_kernel = load_fused() if backend != "scipy" and counts.nnz >= _FUSED_MIN_NNZ else None
    if compress is True or (
        compress == "auto" and not data.is_grouped and counts.shape[0] >= 4 and may_compress(counts, check_kernel)
    ):
        comp = compress_rows(counts, weight, known_fit)
        if comp is not None:
            first_c, inv_c = comp
            if compress is True or first_c.size <= AUTO_COMPRESS_SHARE * counts.shape[0]:
                first, inverse = first_c, inv_c
    if first is not None:
        assert inverse is not None
        G = first.size
        w_c = np.bincount(inverse, weights=weight, minlength=G)
        prob = Problem(
            counts=counts[first],
            weight=w_c,
            unit_weights=bool(np.all(w_c == 1.0)),
            known=None if known_fit is None else known_fit[first],
            J=J,
            K=K,
        )
    else:
        prob = Problem(
            counts=counts,
            weight=weight,
            unit_weights=bool(np.all(weight == 1.0)),
            known=known_fit,
            J=J,
            K=K,
        )
    n_fit = prob.counts.shape[0]
    fused = _choose_backend(backend, prob)

    def start(which: str | np.ndarray) -> np.ndarray:
        # a fresh float64 array: the runs overwrite it
        if isinstance(which, np.ndarray):
            T0 = np.array(which, dtype=float)
            if first is not None:  # weighted mean within each group (same first M-step)
                assert inverse is not None
                wsum = np.bincount(inverse, weights=weight, minlength=n_fit)
                T0 = np.stack(
                    [np.bincount(inverse, weights=weight * which[:, k], minlength=n_fit) for k in range(K)], 1
                )
                flat = wsum <= 0
                T0[~flat] /= wsum[~flat, None]
                if flat.any():
                    T0[flat] = which[first[flat]]
        elif which == "majority":  # the scipy path (the fused one takes the vote's sums in one pass, below)
            T0 = soft_majority_vote(prob.counts, K)
        else:
            T0 = rng.dirichlet(np.ones(K), size=n_fit)
        return clamp_classes(T0, prob.known)

    def run_from(T0: np.ndarray, n_iter: int, numeric_x: np.ndarray | None = None) -> dict[str, Any]:
        if numeric_x is not None and isinstance(kind, NumericMStep):  # resume the family's own parameters
            kind.x = numeric_x.copy()
        if fused is None:
            return _run(prob, T0, kind, prior, tol, n_iter, param_tol, bar, accelerate)
        return _run_fused(
            prob, T0, kind, prior, tol, n_iter, fused, int(n_threads), param_tol, bar, accelerate=accelerate
        )

    if isinstance(init_checked, str) and init_checked == "auto":
        init_checked = "search" if prob.counts.nnz < SEARCH_MAX_NNZ else "majority"
    setup = time.perf_counter() - t0
    runs = []
    bar = progress_bar(progress, None, "EM", unit="iteration")
    loop_times = []
    for r in range(1 + n_restarts):
        t1 = time.perf_counter()
        if r == 0 and isinstance(init_checked, str) and init_checked == "search":
            # its own random stream (spawning leaves rng, hence the restarts' starts, unchanged); without
            # a seed a fixed one, so that the default fit is reproducible
            starts = search_starts(
                prob, np.random.default_rng(0) if seed is None else rng.spawn(1)[0], data.rater_labels
            )
            starts = [(name, clamp_classes(T0, prob.known)) for name, T0 in starts]
            runs.append(search(run_from, starts, int(max_iter), max(tol, 1e-10)))
        elif r == 0 and isinstance(init_checked, str) and init_checked == "majority" and fused is not None:
            # the vote's sums in one pass, straight into the first M-step (the numbers of the vote as a start)
            res = _run_fused(
                prob,
                np.empty((n_fit, K)),
                kind,
                prior,
                tol,
                int(max_iter),
                fused,
                int(n_threads),
                param_tol,
                bar,
                majority_start=True,
                accelerate=accelerate,
            )
            res["start"] = "majority"
            runs.append(res)
        else:
            which = init_checked if r == 0 else "random"
            res = run_from(start(which), int(max_iter))
            res["start"] = which if isinstance(which, str) else "user array"
            runs.append(res)
        loop_times.append(time.perf_counter() - t1)
    bar.close()
    best, finals, convergence, obj_change = best_run(runs, tol, param_tol)
    res = runs[best]
    if not res["converged"]:
        warnings.warn(
            not_converged_message(
                max_iter,
                f"last relative objective change {obj_change:.3g}, tol={tol:g}; parameter change "
                f"{convergence['param_change']:.3g}, extrapolated distance {convergence['param_distance']:.3g}, "
                f"param_tol={param_tol:g}",
                res["theta"],
                kind,
                prior is None,
            ),
            EMConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    pi, theta, T, empty = res["pi"], res["theta"], res["T"], res["empty"]
    if prior is None and kind in ("dawid_skene", "homogeneous") and prob.known is None:
        # ML is label-symmetric (no prior, no known classes to anchor the labels)
        order = class_order(pi, theta)
        if np.any(order != np.arange(K)):  # (no copy of the class probabilities when nothing moves)
            pi, theta, T = pi[order], theta[:, order, :], T[:, order]
            empty = None if empty is None else empty[:, order]
    class_probs = T[inverse] if inverse is not None else T
    if keep is not None:  # every unit's class probabilities at the estimate, the left-out ones included
        with np.errstate(divide="ignore"):
            log_post, _ = class_log_posterior(data.counts, np.log(pi), np.log(theta), known=known_codes)
        class_probs = np.exp(log_post)
    ll = res["log_lik"]
    return EMFit(
        data=data,
        model=model_obj,
        method=f"em_{method}",
        pi=pi,
        theta=theta,
        class_probs=class_probs,
        log_lik=float(ll),
        log_lik_trace=res["trace"],
        n_iter=int(res["trace"].size),
        converged=bool(res["converged"]),
        log_posterior=float(res["trace"][-1]) if prior is not None else None,
        objective="log_posterior" if prior is not None else "log_likelihood",
        priors=prior_values,
        empty_rows=empty,
        restart_objectives=finals,
        best_run=best,
        n_fitted_units=n_fit,
        compressed=first is not None,
        timings={"setup": setup, "loop": loop_times},
        backend="scipy" if fused is None else "numba",
        convergence=convergence,
        start=res["start"],
        known=known_codes,
        model_params=res["model_params"],
        mode_scale=scale_used,
    )
