"""Maximum likelihood and MAP estimation by EM for the Dawid-Skene family.

The EM algorithm of Dawid & Skene (1979) alternates two sparse products with
the per-unit count matrix ``C`` of shape ``(I, J*K)`` built once
(:attr:`pyrater.RatingData.counts`):

E-step (the shared kernel, :func:`pyrater.kernel.log_joint`)
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

``w_i`` is the unit weight: 1 for items, the tally for grouped data (one unit
per distinct rating pattern), so the cost of grouped data scales with the
number of patterns.  Long data can be compressed into its distinct count rows
automatically (``compress``); the estimates are the same and the class
probabilities are mapped back to every item.

Two backends compute the iterations (``backend``); they give the same
estimates up to rounding.

numba (the default from 500,000 stored counts on, when numba imports and K <= 8)
    One pass over the count matrix per iteration: the compiled kernel of
    :mod:`pyrater.native._fused` computes each unit's log joint, its log-sum-exp,
    class probabilities and log-likelihood, and scatters ``w_i T[i, k]``
    into the expected counts while the unit's entries are still in cache.
    The M-step maths below (:func:`_m_step_from_counts`) is shared with the
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

import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.special import gammaln, xlog1py, xlogy

from .._stacklevel import user_stacklevel
from ..data import RatingData, as_rating_data
from ..kernel import _clamp_known, log_joint, log_theta_matrix

try:  # the C routine behind ``csr_matrix @ dense``; lets the E-step reuse its output buffer
    from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs
except ImportError:  # pragma: no cover - other scipy layouts fall back to the public product
    _csr_matvecs = None
from ..models import (
    ClassConditionalDawidSkene,
    DawidSkene,
    HierarchicalDawidSkene,
    HomogeneousDawidSkene,
    Model,
    get_model,
)
from ..results import Fit

__all__ = ["em", "EMFit", "EMConvergenceWarning", "soft_majority_vote"]

Method = Literal["ml", "map"]
_METHODS = ("ml", "map")
_INITS = ("auto", "search", "majority", "random")
# parameter changes at or below this are rounding noise (the stopping rule's extrapolation ignores them)
_ROUNDING = 1e-13
#: error-matrix entries below this count as at the boundary (zero) in the convergence warning
_BOUNDARY = 1e-8
# init="search": short runs of this many iterations from diverse starts; the best few are continued
_SEARCH_ITER = 20
_SEARCH_KEEP = 3
# raters whose own ratings serve as starts (those with the most ratings), weighted votes, random starts
_SEARCH_RATERS = 8
_SEARCH_VOTES = 4
_SEARCH_RANDOM = 4
# init="auto" searches below this many stored counts (above, one run from the majority vote)
_SEARCH_MAX_NNZ = 200_000
# "auto" compresses long data when the distinct count rows are at most this share of the units
_AUTO_COMPRESS_SHARE = 0.5
# rows per block when hashing count rows (bounds the temporary memory)
_HASH_BLOCK_NNZ = 1 << 21
_BACKENDS = ("auto", "numba", "scipy")
# backend="auto" uses the fused numba kernel from this many stored counts on (below, loading numba and
# its cached kernels, about 0.25 s once per process, costs more than the iterations save)
_FUSED_MIN_NNZ = 500_000
# the fused kernel pads the class axis to 8 SIMD lanes
_FUSED_MAX_K = 8


class EMConvergenceWarning(UserWarning):
    """EM stopped at ``max_iter`` before the objective and the parameters had settled."""


# --------------------------------------------------------------------------- result


@dataclass(eq=False, repr=False)
class EMFit(Fit):
    """Result of :func:`em`.

    Attributes
    ----------
    data : RatingData
    model : Model
    method : {"em_ml", "em_map"}
    pi : array, shape (K,)
        Estimated prevalence of each true class.
    theta : array, shape (J, K, K)
        Estimated error matrices, ``theta[j, k, l] = P(rater j says l | class k)``.
    class_probs : array, shape (I, K)
        ``P(z_i = k | y_i, pi, theta)`` at the estimate, one row per unit of
        ``data`` (item, or pattern for grouped data); one-hot for known items.
    log_lik : float
        Observed-data log-likelihood ``sum_i w_i log p(y_i)`` at the estimate
        (for items with a known class, ``log p(y_i, z_i)``).
    log_lik_trace : array, shape (n_iter,)
        The objective after each iteration: the log-likelihood for ML, the
        log-posterior ``log_lik + log p(pi, theta)`` (full prior densities,
        up to the constant ``-log p(y)``) for MAP.  EM never decreases it.
    n_iter : int
        Number of iterations (E-steps) of the kept run.
    converged : bool
        True when, before ``max_iter``, the objective changed by at most
        ``tol * max(1, |f|)`` AND the parameters settled: the largest
        absolute change of pi and theta, and the distance to the fixed
        point extrapolated from EM's rate, at most ``param_tol``, and then
        the class probabilities changed by at most ``param_tol`` (see
        :attr:`convergence`).
    convergence : dict
        How convergence was judged: ``rule`` (text), ``tol``, ``param_tol``,
        and at the last iteration ``objective_change`` (relative),
        ``param_change`` (max abs change of pi and theta),
        ``param_distance`` (its extrapolated distance to the fixed point)
        and ``class_change`` (max abs change of the class probabilities, NaN
        when not reached).
    start : str
        How the kept run started (``init``; for ``"search"`` which start won).
    log_posterior : float or None
        Final objective for MAP (``None`` for ML).
    objective : {"log_likelihood", "log_posterior"}
        What :attr:`log_lik_trace` holds.
    priors : dict or None
        Hyperparameters used for MAP (``None`` for ML).
    empty_rows : bool array, shape (J, K)
        Rows ``theta[j, k, :]`` with zero expected count and flat prior, set
        to uniform (see the module notes).
    restart_objectives : array, shape (1 + n_restarts,)
        Final objective of each run: the ``init`` run first, then the random
        restarts.  The kept run is the best.
    best_run : int
        Index of the kept run in :attr:`restart_objectives`.
    n_fitted_units : int
        Number of units EM iterated over (distinct count rows if compressed).
    compressed : bool
        True when long data was compressed into distinct count rows.
    timings : dict
        Seconds spent in ``setup`` (validation, count matrix, compression,
        loading numba when used) and, per run, in ``loop`` (initial class
        probabilities, the EM iterations and, for numba, loading the
        kernel).
    backend : {"numba", "scipy"}
        How the iterations were computed (see :func:`em`).
    known : int array, shape (I,), or None
        Known true class codes the fit conditioned on (-1 = unknown; None
        when ``known`` was not given, and for distributed fits).
    """

    data: RatingData = field(repr=False)
    model: Model
    method: str
    pi: np.ndarray = field(repr=False)
    theta: np.ndarray = field(repr=False)
    class_probs: np.ndarray = field(repr=False)
    log_lik: float
    log_lik_trace: np.ndarray = field(repr=False)
    n_iter: int
    converged: bool
    log_posterior: float | None = None
    objective: str = "log_likelihood"
    priors: dict | None = field(default=None, repr=False)
    empty_rows: np.ndarray | None = field(default=None, repr=False)
    restart_objectives: np.ndarray | None = field(default=None, repr=False)
    best_run: int = 0
    n_fitted_units: int = 0
    compressed: bool = False
    timings: dict = field(default_factory=dict, repr=False)
    backend: str = "scipy"
    convergence: dict = field(default_factory=dict, repr=False)
    start: str = ""
    known: np.ndarray | None = field(default=None, repr=False)

    def _point(self) -> tuple[np.ndarray, np.ndarray]:
        return self.pi, self.theta

    def _class_probs(self) -> np.ndarray:
        return self.class_probs

    def _priors(self) -> dict[str, np.ndarray]:
        # ML uses no prior: show none rather than the model's unused defaults
        return dict(self.priors) if self.priors is not None else {}

    def _summary_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "algorithm": "EM (Dawid & Skene 1979), " + ("posterior mode" if self.priors is not None else "maximum likelihood"),
            "iterations": self.n_iter,
            "converged": self.converged,
        }
        # getattr: fits saved before these fields existed load without them
        if getattr(self, "convergence", None):
            info["convergence rule"] = self.convergence.get("rule", "")
        if getattr(self, "start", ""):
            info["start"] = self.start
        info["log-likelihood"] = round(self.log_lik, 4)
        if self.log_posterior is not None:
            info["log-posterior (unnormalised)"] = round(self.log_posterior, 4)
        if self.restart_objectives is not None and self.restart_objectives.size > 1:
            info["runs (init + restarts)"] = int(self.restart_objectives.size)
            info["kept run"] = self.best_run
        info["units iterated"] = self.n_fitted_units
        info["backend"] = self.backend
        if self.empty_rows is not None and self.empty_rows.any():
            info["uninformed theta rows set uniform"] = int(self.empty_rows.sum())
        return info

    def __repr__(self) -> str:
        return (
            f"EMFit({self.model.title}, method={self.method!r}, n_iter={self.n_iter}, "
            f"converged={self.converged}, log_lik={self.log_lik:.6g}, K={self.pi.size}, J={self.theta.shape[0]})"
        )


# ------------------------------------------------------------------------ helpers


def soft_majority_vote(counts: sp.spmatrix, n_categories: int) -> np.ndarray:
    """Share of each category among each unit's ratings (soft majority vote).

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
        Per-unit count matrix (:attr:`pyrater.RatingData.counts`).
    n_categories : int
        K.

    Returns
    -------
    array, shape (I, K)
        ``T[i, l] = sum_j C[i, j*K + l] / sum_{j, l} C[i, j*K + l]``; a unit
        without ratings gets ``1/K``.
    """
    K = int(n_categories)
    JK = counts.shape[1]
    # (J*K, K) dense indicator of the rating l of column j*K + l: one sparse-dense product
    sel = np.tile(np.eye(K), (JK // K, 1))
    votes = np.asarray(counts @ sel, dtype=float)
    total = votes.sum(axis=1)
    empty = total <= 0
    votes[empty] = 1.0
    total[empty] = K
    votes /= total[:, None]
    return votes


# a shifted row sum s must satisfy |log s| <= _MAX_LOG_SUM for the shifted pass to be kept
_MAX_LOG_SUM = 460.0  # = log(1e200)


def _normalise_rows_in_place(
    lj: np.ndarray, shift: np.ndarray | None = None, pre_shifted: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Turn log joint probabilities (I, K) into class probabilities in place.

    Parameters
    ----------
    lj : array (I, K)
        Overwritten with ``exp(lj - logsumexp(lj))`` (row-wise).
    shift : array (I,), optional
        A guess of each row's log-sum-exp (EM passes the previous iteration's
        per-unit log-likelihood, which moves little between iterations).
        ``exp(lj - shift)`` then needs no row maximum, the slowest part of a
        log-sum-exp over a short trailing axis in numpy.  Without ``shift``
        the exact row maximum is used (taken column by column: K passes).
    pre_shifted : bool
        ``lj`` already holds ``lj - shift[:, None]`` (the E-step folds the
        shift into the sparse product's starting values).

    Returns
    -------
    log_sum : array (I,)
        ``log sum_k exp(lj[i, k])`` of the unshifted values.
    redo : int array
        Rows whose shifted sum ``s`` has ``|log s| > 460`` (the guess was off
        by more than 460 nats, or the sum under- or overflowed): their output
        is not valid and the caller must recompute them exactly.  For the
        rows kept the largest term exceeds ``1e-200 / K``, every term that
        matters is a normal double, and the result equals the max-shifted
        log-sum-exp up to rounding.  Always empty when ``shift`` is None.
    """
    K = lj.shape[1]
    lt = lj.T  # (K, I) view: broadcasting an (I,) vector along it runs long inner loops
    if shift is None:
        c = lj[:, 0].copy()
        for k in range(1, K):
            np.maximum(c, lj[:, k], out=c)
        np.subtract(lt, c, out=lt)
    else:
        c = shift
        if not pre_shifted:
            np.subtract(lt, c, out=lt)
    with np.errstate(over="ignore"):
        np.exp(lj, out=lj)
    # einsum, not a BLAS product with ones: multi-threaded BLAS is slow for these shapes on a busy
    # machine, and numpy's sum over a short trailing axis is slower still
    s = np.einsum("ik->i", lj)
    with np.errstate(divide="ignore"):
        log_s = np.log(s)
    if shift is None:
        redo = np.empty(0, dtype=np.int64)
    else:
        redo = np.flatnonzero(~(np.abs(log_s) <= _MAX_LOG_SUM))
        s[redo] = 1.0
    np.divide(lt, s, out=lt)
    log_s += c
    return log_s, redo


def _row_hash(counts: sp.csr_matrix, known: np.ndarray | None) -> np.ndarray:
    """64-bit order-independent hash of each row's (column, count) entries and known class."""
    I = counts.shape[0]
    indptr = counts.indptr
    out = np.zeros(I, dtype=np.uint64)
    c1, c2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
    c3, c4 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    s30, s27, s31 = np.uint64(30), np.uint64(27), np.uint64(31)
    # blocks of rows holding about _HASH_BLOCK_NNZ entries (loop over blocks, not items)
    bounds = np.searchsorted(indptr, np.arange(0, counts.nnz + _HASH_BLOCK_NNZ, _HASH_BLOCK_NNZ), side="right") - 1
    bounds = np.unique(np.clip(np.append(bounds, I), 0, I))
    with np.errstate(over="ignore"):
        for r0, r1 in zip(bounds[:-1], bounds[1:]):
            a, b = indptr[r0], indptr[r1]
            h = counts.indices[a:b].astype(np.uint64) * c1
            h ^= counts.data[a:b].astype(np.uint64) * c2
            # splitmix64 finaliser
            h ^= h >> s30
            h *= c3
            h ^= h >> s27
            h *= c4
            h ^= h >> s31
            cs = np.zeros(b - a + 1, dtype=np.uint64)
            np.cumsum(h, out=cs[1:])
            local = indptr[r0 : r1 + 1] - a
            out[r0:r1] = cs[local[1:]] - cs[local[:-1]]
        out += (np.diff(indptr).astype(np.uint64) + np.uint64(1)) * c3
        if known is not None:
            out += (known.astype(np.int64) + 2).astype(np.uint64) * c4
    return out


def _same_rows(counts: sp.csr_matrix, rows: np.ndarray, reps: np.ndarray) -> bool:
    """True when ``counts[rows[t]] == counts[reps[t]]`` for every t (exact check)."""
    indptr = counts.indptr
    n = np.diff(indptr)
    if not np.array_equal(n[rows], n[reps]):
        return False
    a = counts[rows]
    b = counts[reps]
    a.sort_indices()
    b.sort_indices()
    return bool(np.array_equal(a.indices, b.indices) and np.array_equal(a.data, b.data))


def _may_compress(counts: sp.csr_matrix) -> bool:
    """Cheap necessary condition for "auto" compression to pay off.

    Rows with different (number of entries, first column, last column) differ,
    so the number of distinct such keys is a lower bound on the number of
    distinct rows; when it exceeds the share that "auto" accepts, the full
    row hashing is skipped.
    """
    I, JK = counts.shape
    if not counts.has_sorted_indices:
        return True
    indptr = counts.indptr
    n = np.diff(indptr)
    key = n.astype(np.uint64)
    if counts.nnz == 0:
        return True
    c1, c2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
    # first and last column of each row (0 for empty rows, whose key stays 0); no boolean-mask indexing
    first_col = counts.indices[np.minimum(indptr[:-1], counts.nnz - 1)].astype(np.uint64)
    last_col = counts.indices[np.maximum(indptr[1:] - 1, 0)].astype(np.uint64)
    empty = n == 0
    if empty.any():
        first_col[empty] = 0
        last_col[empty] = 0
    with np.errstate(over="ignore"):
        first_col *= c1
        last_col *= c2
        key ^= first_col
        key ^= last_col
        # distinct keys >= occupied buckets of a bitmap with >= 8 I buckets (multiplicative hashing);
        # a bitmap is much cheaper than counting distinct keys exactly (a hash table or a sort)
        bits = int(min(26, max(10, np.ceil(np.log2(8 * max(I, 1))))))
        key *= np.uint64(0xD6E8FEB86659FD93)
        key >>= np.uint64(64 - bits)
    occupied = np.zeros(1 << bits, dtype=bool)
    occupied[key] = True
    return int(np.count_nonzero(occupied)) <= _AUTO_COMPRESS_SHARE * I


def _compress(
    counts: sp.csr_matrix, weight: np.ndarray, known: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Distinct count rows (with the same known class): representatives and inverse.

    Returns ``(first, inverse)`` with ``counts[first[inverse]] == counts`` row
    for row, or ``None`` when a hash collision made the exact check fail.
    """
    keys = _row_hash(counts, known)
    inverse, uniq = pd.factorize(keys)
    inverse = inverse.astype(np.int64)
    G = len(uniq)
    # pandas numbers the groups in order of first appearance
    new = np.empty(inverse.size, dtype=bool)
    new[:1] = True
    np.greater(inverse[1:], np.maximum.accumulate(inverse)[:-1], out=new[1:])
    first = np.flatnonzero(new)
    if first.size != G:  # pragma: no cover - pandas guarantees order of appearance
        return None
    dup = np.flatnonzero(first[inverse] != np.arange(counts.shape[0]))
    if dup.size:
        reps = first[inverse[dup]]
        if known is not None and not np.array_equal(known[dup], known[reps]):
            return None
        if not _same_rows(counts, dup, reps):
            return None
    return first, inverse


@dataclass
class _Problem:
    """What the EM loop works on (possibly compressed units)."""

    counts: sp.csr_matrix  # (I', J*K)
    weight: np.ndarray  # (I',) float
    unit_weights: bool  # all weights are 1
    known: np.ndarray | None  # (I',) codes, -1 unknown
    J: int
    K: int
    fast: bool = True  # reuse E-step buffers through scipy's csr_matvecs

    def __post_init__(self) -> None:
        c = self.counts
        self.fast = bool(self.fast and _csr_matvecs is not None and isinstance(c, sp.csr_matrix) and c.dtype == np.float64)


@dataclass
class _Prior:
    """MAP hyperparameters (all >= 1) and the log prior density."""

    kind: str
    alpha: np.ndarray  # (K,)
    beta: np.ndarray | None = None  # (J, K, K) full, (K, K) homogeneous
    beta1: np.ndarray | None = None  # (K,) class-conditional
    beta2: np.ndarray | None = None

    def log_density(self, pi: np.ndarray, theta: np.ndarray) -> float:
        lp = _log_dirichlet(pi[None, :], self.alpha[None, :])
        if self.kind == "dawid_skene":
            lp += _log_dirichlet(theta, self.beta)
        elif self.kind == "homogeneous":
            lp += _log_dirichlet(theta[0], self.beta)
        else:
            K = pi.size
            p = theta[:, np.arange(K), np.arange(K)]
            b1, b2 = self.beta1[None, :], self.beta2[None, :]
            lp += float(
                np.sum(gammaln(b1 + b2) - gammaln(b1) - gammaln(b2) + xlogy(b1 - 1, p) + xlog1py(b2 - 1, -p))
            )
        return float(lp)


def _log_dirichlet(x: np.ndarray, a: np.ndarray) -> float:
    """Sum of Dirichlet log densities of the rows (last axis) of ``x``."""
    return float(np.sum(gammaln(a.sum(-1)) - gammaln(a).sum(-1) + xlogy(a - 1, x).sum(-1)))


def _check_at_least_one(name: str, value: np.ndarray, model: Model) -> None:
    if np.any(value < 1):
        hint = ""
        if name == "beta" and value.shape[-1] >= 5:
            hint = (
                f" (rater's default off-diagonal beta is 3.2 / (K - 1) = {3.2 / (value.shape[-1] - 1):.3g} "
                "for K = {K}; e.g. pass beta=np.maximum(pyrater.models.default_beta(K), 1))"
            ).replace("{K}", str(value.shape[-1]))
        raise ValueError(
            f"MAP by EM needs every hyperparameter >= 1 (below 1 the posterior density is unbounded at "
            f"the boundary and has no mode); {model.title} has {name} with minimum {float(np.min(value)):g}{hint}. "
            "Use method='ml', or priors with all hyperparameters >= 1"
        )


def _class_order(pi: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Order of the latent classes that makes class k go with rating k.

    The Dawid-Skene and homogeneous likelihoods are unchanged by permuting
    the latent classes (the true-class axis of theta with pi), so which
    permutation EM returns depends on its start: a random restart can win
    with the classes permuted.  The permutation kept maximises the expected
    agreement ``sum_k pi_k sum_j theta[j, k, perm(k)]`` (Hungarian method);
    it is the identity when the classes already line up with the ratings.
    New class ``c`` is old class ``order[c]``.
    """
    agreement = pi[:, None] * theta.sum(axis=0)  # (K classes, K ratings)
    _, rating_of_class = linear_sum_assignment(agreement, maximize=True)
    return np.argsort(rating_of_class)


def _make_prior(model: Model, K: int, J: int) -> tuple[_Prior, dict]:
    pri = model.priors(K, J)
    _check_at_least_one("alpha", pri["alpha"], model)
    if isinstance(model, DawidSkene):
        _check_at_least_one("beta", pri["beta"], model)
        return _Prior("dawid_skene", pri["alpha"], beta=pri["beta"]), pri
    if isinstance(model, HomogeneousDawidSkene):
        _check_at_least_one("beta", pri["beta"], model)
        return _Prior("homogeneous", pri["alpha"], beta=pri["beta"]), pri
    _check_at_least_one("beta1", pri["beta1"], model)
    _check_at_least_one("beta2", pri["beta2"], model)
    return _Prior("class_conditional", pri["alpha"], beta1=pri["beta1"], beta2=pri["beta2"]), pri


def _kind(model: Model) -> str:
    if isinstance(model, HierarchicalDawidSkene):
        raise ValueError(
            "the hierarchical Dawid-Skene model has no closed-form M-step and is not supported by EM; "
            "fit it with Stan (method='mcmc' or 'optimize'), or use model='dawid_skene', "
            "'class_conditional' or 'homogeneous' with EM"
        )
    if isinstance(model, DawidSkene):
        return "dawid_skene"
    if isinstance(model, HomogeneousDawidSkene):
        return "homogeneous"
    if isinstance(model, ClassConditionalDawidSkene):
        return "class_conditional"
    raise ValueError(f"EM does not support the model {model!r}")


def _normalise(num: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normalise the last axis; zero rows become uniform.  Returns (probs, empty mask)."""
    # einsum, not num.sum(axis=-1): numpy's sum over a short trailing axis is several times slower
    tot = np.einsum("...k->...", num)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / tot[..., None]
    fill = ~(tot > 0)
    if fill.any():
        out[fill] = 1.0 / num.shape[-1]
    return out, tot <= 0


def _expected_counts(prob: _Problem, T: np.ndarray, wT: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Class totals ``n_k = sum_i w_i T[i, k]`` (K,) and expected counts ``C.T @ (w T)`` (J*K, K)."""
    if prob.unit_weights:
        src = T
    else:
        np.multiply(T, prob.weight[:, None], out=wT)
        src = wT
    # class totals sum_i w_i T[i, k]; einsum (see _normalise_rows_in_place), not T.sum(axis=0)
    n_k = np.einsum("ik->k", src)
    # N_flat[j*K + l, k] = sum_i C[i, j*K + l] w_i T[i, k]; C.T is CSC: a scatter into a small output
    return n_k, np.asarray(prob.counts.T @ src)


def _m_step_from_counts(
    n_k: np.ndarray, N_flat: np.ndarray, J: int, K: int, kind: str, prior: _Prior | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pi (K,), theta (J, K, K) and the empty-row mask (J, K) from expected counts.

    Parameters
    ----------
    n_k : array (K,)
        Class totals ``sum_i w_i T[i, k]``.
    N_flat : array (J*K, K)
        ``N_flat[j*K + l, k] = sum_i w_i T[i, k] C[i, j*K + l]`` (a view is fine;
        it is not modified).
    J, K : int
    kind : {"dawid_skene", "homogeneous", "class_conditional"}
    prior : _Prior or None
        MAP hyperparameters; None for ML.
    """
    N = np.reshape(N_flat, (J, K, K)).transpose(0, 2, 1)  # (J, k, l)
    if prior is not None:
        n_k = n_k + (prior.alpha - 1.0)
    pi, _ = _normalise(n_k)
    if kind == "dawid_skene":
        if prior is not None:
            N = N + (prior.beta - 1.0)
        theta, empty = _normalise(np.ascontiguousarray(N))
    elif kind == "homogeneous":
        N0 = N.sum(axis=0)
        if prior is not None:
            N0 = N0 + (prior.beta - 1.0)
        theta0, empty0 = _normalise(N0)
        theta = np.broadcast_to(theta0, (J, K, K)).copy()
        empty = np.broadcast_to(empty0, (J, K)).copy()
    else:  # class-conditional
        diag = N[:, np.arange(K), np.arange(K)]  # (J, K)
        tot = N.sum(axis=2)
        if prior is not None:
            diag = diag + (prior.beta1 - 1.0)[None, :]
            tot = tot + (prior.beta1 + prior.beta2 - 2.0)[None, :]
        empty = tot <= 0
        p = np.divide(diag, tot, out=np.full_like(diag, 1.0 / K), where=~empty)
        theta = np.repeat(((1.0 - p) / (K - 1))[:, :, None], K, axis=2)
        theta[:, np.arange(K), np.arange(K)] = p
    return pi, theta, empty


def _m_step(
    prob: _Problem, T: np.ndarray, kind: str, prior: _Prior | None, wT: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """pi (K,), theta (J, K, K) and the empty-row mask (J, K) from class probabilities T."""
    n_k, N_flat = _expected_counts(prob, T, wT)
    return _m_step_from_counts(n_k, N_flat, prob.J, prob.K, kind, prior)


def _log_joint_into(
    counts: sp.csr_matrix,
    log_pi: np.ndarray,
    log_theta: np.ndarray,
    out: np.ndarray,
    shift: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`pyrater.kernel.log_joint` written into a reused buffer ``out`` (I, K).

    Same maths and the same C routine as ``counts @ log_theta_matrix(log_theta) + log_pi``
    (scipy's ``csr_matvecs``, which accumulates into its output): the buffer
    starts as ``log_pi`` in every row (minus ``shift[i]`` when given), so
    there is no zeroing pass, no separate shifting pass, and no fresh
    allocation (with its page faults) per iteration.
    """
    I, JK = counts.shape
    K = out.shape[1]
    if shift is None:
        out[...] = log_pi
    else:
        np.subtract(log_pi[:, None], shift[None, :], out=out.T)
    _csr_matvecs(I, JK, K, counts.indptr, counts.indices, counts.data, log_theta_matrix(log_theta).ravel(), out.ravel())
    return out


def _e_step(
    prob: _Problem,
    pi: np.ndarray,
    theta: np.ndarray,
    out: np.ndarray | None = None,
    shift: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """E-step via the shared kernel: class probabilities, per-unit and total log-likelihood.

    Parameters
    ----------
    out : array (I', K), optional
        C-contiguous float buffer that receives the class probabilities (the
        fast path); otherwise :func:`pyrater.kernel.log_joint` allocates it.
    shift : array (I',), optional
        The previous per-unit log-likelihoods, used as log-sum-exp shifts
        (see :func:`_normalise_rows_in_place`); rows where that guess is too
        far off are recomputed exactly with the kernel.

    Returns
    -------
    T : array (I', K)
    ll_units : array (I',)
        ``log p(y_i)`` (``log p(y_i, z_i)`` for known units).
    ll : float
        ``sum_i w_i ll_units[i]``.
    """
    with np.errstate(divide="ignore"):
        log_pi, log_theta = np.log(pi), np.log(theta)
    if out is not None and prob.fast:
        lj = _log_joint_into(prob.counts, log_pi, log_theta, out, shift)
        pre_shifted = shift is not None
    else:
        lj = log_joint(prob.counts, log_pi, log_theta)
        pre_shifted = False
    lj = _clamp_known(lj, prob.known)
    ll_units, redo = _normalise_rows_in_place(lj, shift, pre_shifted)
    if redo.size:
        sub = _clamp_known(log_joint(prob.counts[redo], log_pi, log_theta), None if prob.known is None else prob.known[redo])
        ll_units[redo], _ = _normalise_rows_in_place(sub)
        lj[redo] = sub
    ll = float(ll_units.sum()) if prob.unit_weights else float(np.einsum("i,i->", prob.weight, ll_units))
    return lj, ll_units, ll


def _clamp_T(T: np.ndarray, known: np.ndarray | None) -> np.ndarray:
    if known is not None:
        rows = np.flatnonzero(known >= 0)
        if rows.size:
            T[rows] = 0.0
            T[rows, known[rows]] = 1.0
    return T


class _Convergence:
    """The stopping rule: the objective AND the parameters have settled.

    Iteration ``t`` counts as converged when

    1. the objective changed by at most ``tol * max(1, |f_t|)``;
    2. the largest absolute change of pi and theta, ``d_t``, and the
       distance to the fixed point extrapolated from EM's linear rate,
       ``d_t * r / (1 - r)`` with ``r`` the largest of the last three
       ratios ``d_s / d_{s-1}`` (infinite when ``r >= 1``), are both at most
       ``param_tol``;
    3. and the class probabilities changed by at most ``param_tol``
       between two iterations that follow a settled one (1 and 2 hold for
       three iterations in a row; the numba path writes the class
       probabilities only then).

    On a flat likelihood EM's steps shrink slowly: the objective then
    changes by less than ``tol`` long before the parameters stop moving,
    which rule 1 alone would take for convergence.
    """

    def __init__(self, tol: float, param_tol: float) -> None:
        self.tol = tol
        self.param_tol = param_tol
        self.prev: tuple[np.ndarray, np.ndarray] | None = None
        self.deltas: list[float] = []
        self.param_change = np.nan
        self.param_distance = np.nan
        self.class_change = np.nan
        self.T_prev: np.ndarray | None = None
        # the next iteration must provide its class probabilities (this one was settled)
        self.want_T = False

    def settled(self, trace: list[float], pi: np.ndarray, theta: np.ndarray) -> bool:
        """Rules 1 and 2 at the latest iteration (call once per iteration)."""
        if self.prev is not None:
            d = max(float(np.max(np.abs(pi - self.prev[0]))), float(np.max(np.abs(theta - self.prev[1]))))
            self.deltas.append(d)
            self.param_change = d
            ratios = [b / a if a > 0 else 0.0 for a, b in zip(self.deltas[-4:-1], self.deltas[-3:])]
            r = max(ratios) if ratios else np.inf
            # changes of 1e-13 and below are rounding noise, their ratios meaningless
            self.param_distance = 0.0 if d <= _ROUNDING else (d * r / (1.0 - r) if r < 1 else np.inf)
        self.prev = (pi.copy(), theta.copy())
        if len(trace) < 2 or not self.deltas:
            self.want_T = False
            return False
        obj_ok = abs(trace[-1] - trace[-2]) <= self.tol * max(1.0, abs(trace[-1]))
        self.want_T = bool(obj_ok and max(self.param_change, self.param_distance) <= self.param_tol)
        return self.want_T

    def classes_settled(self, T: np.ndarray) -> bool:
        """Rule 3: compare T with the class probabilities kept at the previous settled iteration."""
        done = False
        if self.T_prev is not None:
            self.class_change = float(np.max(np.abs(T - self.T_prev))) if T.size else 0.0
            done = self.class_change <= self.param_tol
        if not done:
            self.T_prev = np.array(T, copy=True)
        return done

    def reset_classes(self) -> None:
        self.T_prev = None

    def info(self) -> dict[str, float]:
        return {
            "param_change": self.param_change,
            "param_distance": self.param_distance,
            "class_change": self.class_change,
        }


def _run(
    prob: _Problem,
    T: np.ndarray,
    kind: str,
    prior: _Prior | None,
    tol: float,
    max_iter: int,
    param_tol: float = 1e-6,
) -> dict[str, Any]:
    """One EM run from class probabilities T (modified); stops by :class:`_Convergence`."""
    wT = None if prob.unit_weights else np.empty_like(T)
    trace: list[float] = []
    converged = False
    conv = _Convergence(tol, param_tol)
    pi, theta, empty = _m_step(prob, T, kind, prior, wT)
    # the M-step has consumed T: its memory receives every E-step (no per-iteration allocation)
    buf = np.ascontiguousarray(T) if prob.fast else None
    ll = np.nan
    ll_units = None
    for it in range(max_iter):
        T, ll_units, ll = _e_step(prob, pi, theta, out=buf, shift=ll_units)
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
        if it + 1 < max_iter:
            pi, theta, empty = _m_step(prob, T, kind, prior, wT)
    return _run_result(pi, theta, empty, T, ll, trace, converged, conv)


def _run_result(pi: np.ndarray, theta: np.ndarray, empty: Any, T: np.ndarray, ll: float, trace: list[float],
                converged: bool, conv: _Convergence) -> dict[str, Any]:
    """What one EM run returns (both backends): estimates, class probabilities, objective trace, convergence."""
    return {
        "pi": pi,
        "theta": theta,
        "empty": empty,
        "T": T,
        "log_lik": ll,
        "trace": np.asarray(trace),
        "converged": converged,
        "convergence": conv.info(),
    }


def _load_fused() -> Any:
    """The numba kernels of :mod:`pyrater.native._fused`, or None when numba cannot be imported."""
    try:
        from . import _fused
    except ImportError:
        return None
    return _fused


def _choose_backend(backend: str, prob: _Problem) -> Any:
    """The :mod:`pyrater.native._fused` module when the fused numba path is used, else None."""
    usable = prob.fast and 2 <= prob.K <= _FUSED_MAX_K
    if backend == "scipy" or (backend == "auto" and (not usable or prob.counts.nnz < _FUSED_MIN_NNZ)):
        return None
    fused = _load_fused()
    if backend == "numba":
        if fused is None:
            raise ImportError("backend='numba' needs numba (pip install numba); use backend='scipy' or 'auto'")
        if not usable:
            raise ValueError(
                f"backend='numba' supports 2 to {_FUSED_MAX_K} categories on a float64 CSR count matrix "
                f"(here K = {prob.K}); use backend='scipy' or 'auto'"
            )
    return fused


class _FusedKernel:
    """One fused EM pass (:func:`pyrater.native._fused.em_iteration`) over a problem, with reused buffers.

    The units are split into ``n_threads`` contiguous ranges of about equal
    numbers of stored counts; each range runs in its own thread (the kernel
    releases the GIL) with its own expected-count matrix, summed afterwards.
    """

    def __init__(self, fused: Any, prob: _Problem, n_threads: int) -> None:
        c = prob.counts
        I, JK = c.shape
        KP = fused.KP
        self.fused = fused
        self.K = prob.K
        self.csr = (c.indptr, c.indices, c.data)
        self.known = np.empty(0, np.int64) if prob.known is None else np.ascontiguousarray(prob.known, dtype=np.int64)
        self.weight = np.empty(0) if prob.unit_weights else np.ascontiguousarray(prob.weight, dtype=np.float64)
        self.LT = fused.aligned_zeros((JK, KP))  # padded lanes stay 0
        n = max(1, min(int(n_threads), I))
        # unit ranges with about nnz / n stored counts each
        cuts = np.searchsorted(c.indptr, np.linspace(0, c.nnz, n + 1)[1:-1], side="left")
        self.bounds = [int(b) for b in np.concatenate([[0], cuts, [I]])]
        self.N = [fused.aligned_zeros((JK, KP)) for _ in range(n)]
        self.n_k = [np.zeros(KP) for _ in range(n)]
        self.no_T = np.empty((0, prob.K))
        self.no_ll = np.empty(0)
        self.no_N = np.empty((0, KP))
        fused.compile_for(fused.em_iteration, *self._args(0, np.zeros(KP), self.no_T, self.N[0]))

    def m_step_sums(self, T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``n_k`` (K,) and the expected counts (J*K, K) (a view) from class probabilities ``T``."""
        f, K = self.fused, self.K
        I = self.bounds[-1]
        f.run(f.expected_counts, *self.csr, T, self.weight, 0, I, self.N[0], self.n_k[0])
        return self.n_k[0][:K].copy(), self.N[0][:, :K]

    def _args(self, t: int, log_pi: np.ndarray, T: np.ndarray, N: np.ndarray) -> tuple:
        return (*self.csr, self.LT, log_pi, self.known, self.weight, self.bounds[t], self.bounds[t + 1],
                self.K, T, self.no_ll, N, self.n_k[t])

    def __call__(
        self, pi: np.ndarray, theta: np.ndarray, executor: Any, T: np.ndarray | None = None, counts: bool = True
    ) -> tuple[float, np.ndarray | None, np.ndarray | None]:
        """E-step at (pi, theta) and, when ``counts``, the M-step's expected counts.

        Returns ``(log_lik, n_k (K,), N_flat (J*K, K) view)``; writes the class
        probabilities into ``T`` (I, K) when given.
        """
        with np.errstate(divide="ignore"):
            log_pi = self.fused.pad_log_pi(np.log(pi))
            self.fused.pad_log_theta(np.log(theta), self.LT)
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
    prob: _Problem,
    T: np.ndarray,
    kind: str,
    prior: _Prior | None,
    tol: float,
    max_iter: int,
    fused: Any,
    n_threads: int,
    param_tol: float = 1e-6,
) -> dict[str, Any]:
    """:func:`_run` with each iteration one pass of the fused numba kernel.

    Same iterations, objective and stopping rule as :func:`_run`; the first
    M-step (from the initial class probabilities) takes its sums from
    :func:`pyrater.native._fused.expected_counts`.  The
    class probabilities are written, into the memory of ``T``, only when the
    stopping rule needs them (once the objective and the parameters have
    settled, :class:`_Convergence` rule 3) and by the pass of iteration
    ``max_iter``; so the run ends with the class probabilities at its estimate.
    """
    kern = _FusedKernel(fused, prob, n_threads)
    T = np.ascontiguousarray(T, dtype=np.float64)
    pi, theta, empty = _m_step_from_counts(*kern.m_step_sums(T), prob.J, prob.K, kind, prior)
    trace: list[float] = []
    converged = False
    conv = _Convergence(tol, param_tol)
    ll = np.nan
    with ThreadPoolExecutor(max_workers=len(kern.N)) if len(kern.N) > 1 else nullcontext() as ex:
        for it in range(max_iter):
            last = it + 1 >= max_iter
            # the last iteration is the final estimate: its pass writes the class probabilities
            # the class probabilities are written only while the stopping rule needs them (rule 3)
            want_T = conv.want_T
            ll, n_k, N_flat = kern(pi, theta, ex, T=T if (last or want_T) else None, counts=not last)
            obj = ll if prior is None else ll + prior.log_density(pi, theta)
            trace.append(obj)
            if conv.settled(trace, pi, theta):
                if want_T and conv.classes_settled(T):
                    converged = True
                    break
            else:
                conv.reset_classes()
            if not last:
                pi, theta, empty = _m_step_from_counts(n_k, N_flat, prob.J, prob.K, kind, prior)
        # stopped by convergence the T of the last pass is the estimate's; a run stopped at max_iter
        # wrote it in its last pass too
    return _run_result(pi, theta, empty, T, ll, trace, converged, conv)


def _check_init(init: Any, I: int, K: int) -> np.ndarray | str:
    if isinstance(init, str):
        if init not in _INITS:
            raise ValueError(f"init must be one of {_INITS} or an (I, K) array of class probabilities; got {init!r}")
        return init
    try:
        arr = np.array(init, dtype=float)  # a copy: the user's array is never modified
    except (TypeError, ValueError):
        raise ValueError(f"init must be one of {_INITS} or an (I, K) array of class probabilities") from None
    if arr.shape != (I, K):
        raise ValueError(f"init array must have shape (I, K) = ({I}, {K}); got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("init array must hold finite, non-negative class probabilities")
    tot = arr.sum(axis=1)
    if np.any(tot <= 0):
        raise ValueError(f"init array rows {np.flatnonzero(tot <= 0)[:8].tolist()} are all zero")
    arr /= tot[:, None]
    return arr


def _search_starts(prob: _Problem, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Diverse initial class probabilities (I', K) for ``init="search"``, each with a name.

    The soft and the hard majority vote; each of the raters with the most
    ratings on its own (the majority vote where it did not rate); votes
    with random Gamma(1) rater weights; sharp Dirichlet(0.3) draws.  Every
    start but the random ones is mixed with 1% uniform so that no class
    starts empty.
    """
    K, J = prob.K, prob.J
    counts = prob.counts
    n_fit = counts.shape[0]
    uniform = np.full((n_fit, K), 1.0 / K)
    soft = soft_majority_vote(counts, K)
    mix = lambda T: 0.99 * T + 0.01 * uniform  # noqa: E731
    starts = [("majority", soft.copy())]
    hard = (soft >= soft.max(axis=1, keepdims=True) - 1e-12).astype(float)
    starts.append(("hard majority", mix(hard / hard.sum(axis=1, keepdims=True))))
    # ratings per rater (weighted by the unit weights)
    per_rater = np.asarray(counts.T @ prob.weight).reshape(J, K).sum(axis=1)
    for j in np.argsort(-per_rater, kind="stable")[: min(_SEARCH_RATERS, J)]:
        own = np.asarray(counts[:, j * K : (j + 1) * K].todense(), dtype=float)
        tot = own.sum(axis=1)
        T = soft.copy()
        rated = tot > 0
        T[rated] = own[rated] / tot[rated, None]
        starts.append((f"rater {int(j)}'s ratings", mix(T)))
    sel = np.tile(np.eye(K), (J, 1))
    for v in range(_SEARCH_VOTES):
        w = rng.gamma(1.0, size=J)
        votes = np.asarray(counts @ (sel * np.repeat(w, K)[:, None]), dtype=float)
        tot = votes.sum(axis=1)
        T = soft.copy()
        ok = tot > 0
        T[ok] = votes[ok] / tot[ok, None]
        starts.append((f"weighted vote {v + 1}", mix(T)))
    for v in range(_SEARCH_RANDOM):
        starts.append((f"random {v + 1}", rng.dirichlet(np.full(K, 0.3), size=n_fit)))
    return starts


def _first_best(values: list[float], candidates: list[int], margin: float) -> int:
    """The first of ``candidates`` whose value is within ``margin * max(1, |best|)`` of the best.

    Runs that reach one optimum (or label-switched copies of it) tie up to
    rounding; taking the first in start order keeps the choice the same
    whichever backend computed them.
    """
    top = max(values[r] for r in candidates)
    return next(r for r in candidates if values[r] >= top - margin * max(1.0, abs(top)))


def _search(
    run_from: Any, starts: list[tuple[str, np.ndarray]], max_iter: int, margin: float = 1e-10
) -> dict[str, Any]:
    """Short runs from every start, the best :data:`_SEARCH_KEEP` continued to convergence; the best kept."""
    short = min(_SEARCH_ITER, max_iter)
    results = []
    for name, T0 in starts:
        res = run_from(T0, short)
        res["start"] = name
        results.append(res)
    values = [float(res["trace"][-1]) for res in results]
    left = list(range(len(results)))
    order = []
    while left and len(order) < _SEARCH_KEEP:
        order.append(_first_best(values, left, margin))
        left.remove(order[-1])
    finals = []
    for r in order:
        res = results[r]
        if not res["converged"] and max_iter > short:
            # _run starts with an M-step from the class probabilities at the short run's estimate:
            # exactly the iteration that would have come next
            more = run_from(res["T"], max_iter - short)
            more["trace"] = np.concatenate([res["trace"], more["trace"]])
            more["start"] = res["start"]
            res = more
        finals.append(res)
    res = finals[_first_best([float(f["trace"][-1]) for f in finals], list(range(len(finals))), margin)]
    res["start"] = f"search: best of {len(starts)} starts ({short}-iteration runs, {len(finals)} continued): {res['start']}"
    return res


# ----------------------------------------------------------------------------- em


def _not_converged_message(max_iter: int, detail: str, theta: np.ndarray, kind: str, ml: bool) -> str:
    """The EMConvergenceWarning text: what stopped, and the way out that fits this estimate.

    A maximum-likelihood estimate with error-matrix entries at zero lies on the
    boundary of the parameter space (raters with few ratings): EM creeps
    towards it, so more iterations buy little; the posterior mode stays inside.
    ``theta`` is (J, K, K); the homogeneous model's J copies of its one
    matrix are counted once.
    """
    text = f"EM did not converge in max_iter={max_iter} iterations ({detail}); "
    if kind == "homogeneous":
        theta = theta[:1]
    at_zero = int(np.count_nonzero(theta < _BOUNDARY))
    if ml and at_zero:
        return text + (
            f"{at_zero} of {theta.size} error-matrix entries are below {_BOUNDARY:g}: the maximum-likelihood "
            "estimate lies on the boundary (raters with few ratings), which EM approaches slowly, so a larger "
            "max_iter changes little; method='map' (with the model's priors) keeps the estimate inside"
        )
    return text + "increase max_iter"


def _check_stopping(max_iter: Any, tol: Any, param_tol: Any) -> tuple[int, float, float]:
    """Validate EM's stopping arguments (in-memory and distributed EM share them)."""
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
    checked = []
    for name, value in (("tol", tol), ("param_tol", param_tol)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a non-negative number (np.inf allowed), got {value!r}") from None
        if isinstance(value, (bool, np.bool_)) or not number >= 0:
            raise ValueError(f"{name} must be a non-negative number (np.inf allowed), got {value!r}")
        checked.append(number)
    return int(max_iter), checked[0], checked[1]


def em(
    data: "RatingData | pd.DataFrame",
    model: "str | Model" = "dawid_skene",
    method: Method = "ml",
    known: "dict | pd.Series | None" = None,
    init: "str | np.ndarray" = "auto",
    n_restarts: int = 0,
    tol: float = 1e-8,
    max_iter: int = 5000,
    seed: "int | np.random.Generator | None" = None,
    data_format: Literal["long", "wide", "grouped"] = "long",
    compress: "bool | Literal['auto']" = "auto",
    backend: Literal["auto", "numba", "scipy"] = "auto",
    n_threads: int = 1,
    param_tol: float = 1e-6,
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
        (:func:`pyrater.native.distributed.em.em`).
    model : str or model object
        ``"dawid_skene"`` (a full error matrix per rater), ``"class_conditional"``
        (``theta[j, k, k] = p[j, k]``, off-diagonal ``(1 - p[j, k]) / (K - 1)``),
        ``"homogeneous"`` (one matrix for all raters), or a model object from
        :mod:`pyrater.models` carrying its priors.  The hierarchical model is
        not supported by EM.
    method : {"ml", "map"}
        Maximum likelihood, or the posterior mode under the model's priors
        (Dirichlet on pi and on each error-matrix row; Beta(beta1_k, beta2_k)
        on ``p[j, k]`` for the class-conditional model).  MAP requires every
        hyperparameter to be >= 1 (otherwise the mode may not exist) and
        raises :class:`ValueError` if not.  With all hyperparameters equal to
        1, MAP equals ML.
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
        ``"majority"``.  :attr:`EMFit.start` says which start won.  The
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
        there warns with :class:`EMConvergenceWarning`.
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
        count matrix per iteration (:mod:`pyrater.native._fused`; needs numba and
        at most 8 categories), about 2x faster than ``"scipy"``, the two
        sparse products of the module notes.  ``"auto"`` uses numba when it
        can be imported, K <= 8 and the (possibly compressed) count matrix
        holds at least 500,000 counts.  Below that, loading numba and its
        cached kernels (about 0.25 s once per process; compiling them the
        very first time takes a few seconds) would cost more than it
        saves.  Both give the same estimates up to rounding (about 1e-15
        relative).
    n_threads : int
        Threads for the numba backend (the units are split into that many
        ranges, each with its own expected-count matrix).  Default 1.  The
        result depends on it only through the order of floating-point sums.

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
    from .distributed import is_distributed

    if is_distributed(data):  # a Dask DataFrame or DistributedRatingData: EM on the cluster
        from .distributed.em import em as distributed_em

        if data_format != "long" or n_threads != 1:
            raise ValueError(
                f"distributed data are long ratings (data_format='long', got {data_format!r}) iterated per "
                f"partition by the Dask workers' threads (n_threads=1, got {n_threads!r})"
            )
        return distributed_em(data, model, method, known=known, init=init, n_restarts=n_restarts, tol=tol,
                              max_iter=max_iter, seed=seed, backend=backend, param_tol=param_tol)
    t0 = time.perf_counter()
    # ---- validate the arguments before any heavy work
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    model_obj = get_model(model)
    kind = _kind(model_obj)
    if isinstance(n_restarts, bool) or not isinstance(n_restarts, (int, np.integer)) or n_restarts < 0:
        raise ValueError(f"n_restarts must be a non-negative integer, got {n_restarts!r}")
    max_iter, tol, param_tol = _check_stopping(max_iter, tol, param_tol)
    if compress not in (True, False, "auto"):
        raise ValueError(f"compress must be True, False or 'auto', got {compress!r}")
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)) or n_threads < 1:
        raise ValueError(f"n_threads must be a positive integer, got {n_threads!r}")
    rng = np.random.default_rng(seed)

    data = as_rating_data(data, data_format)
    I, J, K = data.n_units, data.n_raters, data.n_categories
    if data.n_ratings == 0 or data.weight.sum() <= 0:
        raise ValueError("the data hold no rated items (all tallies are zero)")
    init_checked = _check_init(init, I, K)
    prior, prior_values = (None, None)
    if method == "map":
        prior, prior_values = _make_prior(model_obj, K, J)
    known_codes = data.known_codes(known)

    # ---- the problem EM iterates over (the user's data is never modified)
    counts = data.counts
    weight = data.weight.astype(float)
    first = inverse = None
    if compress is True or (compress == "auto" and not data.is_grouped and I >= 4 and _may_compress(counts)):
        comp = _compress(counts, weight, known_codes)
        if comp is not None:
            first_c, inv_c = comp
            if compress is True or first_c.size <= _AUTO_COMPRESS_SHARE * I:
                first, inverse = first_c, inv_c
    if first is not None:
        G = first.size
        w_c = np.bincount(inverse, weights=weight, minlength=G)
        prob = _Problem(
            counts=counts[first],
            weight=w_c,
            unit_weights=bool(np.all(w_c == 1.0)),
            known=None if known_codes is None else known_codes[first],
            J=J,
            K=K,
        )
    else:
        prob = _Problem(
            counts=counts,
            weight=weight,
            unit_weights=bool(np.all(weight == 1.0)),
            known=known_codes,
            J=J,
            K=K,
        )
    n_fit = prob.counts.shape[0]
    fused = _choose_backend(backend, prob)

    def start(which: "str | np.ndarray") -> np.ndarray:
        # a fresh float64 array: the runs overwrite it
        if isinstance(which, np.ndarray):
            T0 = np.array(which, dtype=float)
            if first is not None:  # weighted mean within each group (same first M-step)
                wsum = np.bincount(inverse, weights=weight, minlength=n_fit)
                T0 = np.stack([np.bincount(inverse, weights=weight * which[:, k], minlength=n_fit) for k in range(K)], 1)
                flat = wsum <= 0
                T0[~flat] /= wsum[~flat, None]
                if flat.any():
                    T0[flat] = which[first[flat]]
        elif which == "majority":
            if fused is None:
                T0 = soft_majority_vote(prob.counts, K)
            else:  # the same shares in one pass
                c = prob.counts
                T0 = fused.run(fused.vote_shares, c.indptr, c.indices, c.data, np.empty((n_fit, K)))
        else:
            T0 = rng.dirichlet(np.ones(K), size=n_fit)
        return _clamp_T(T0, prob.known)

    def run_from(T0: np.ndarray, n_iter: int) -> dict[str, Any]:
        if fused is None:
            return _run(prob, T0, kind, prior, tol, n_iter, param_tol)
        return _run_fused(prob, T0, kind, prior, tol, n_iter, fused, int(n_threads), param_tol)

    if isinstance(init_checked, str) and init_checked == "auto":
        init_checked = "search" if prob.counts.nnz < _SEARCH_MAX_NNZ else "majority"
    setup = time.perf_counter() - t0
    runs = []
    loop_times = []
    for r in range(1 + n_restarts):
        t1 = time.perf_counter()
        if r == 0 and isinstance(init_checked, str) and init_checked == "search":
            # its own random stream (spawning leaves rng, hence the restarts' starts, unchanged); without
            # a seed a fixed one, so that the default fit is reproducible
            starts = _search_starts(prob, np.random.default_rng(0) if seed is None else rng.spawn(1)[0])
            starts = [(name, _clamp_T(T0, prob.known)) for name, T0 in starts]
            runs.append(_search(run_from, starts, int(max_iter), max(tol, 1e-10)))
        else:
            which = init_checked if r == 0 else "random"
            res = run_from(start(which), int(max_iter))
            res["start"] = which if isinstance(which, str) else "user array"
            runs.append(res)
        loop_times.append(time.perf_counter() - t1)
    finals = np.array([run["trace"][-1] for run in runs])
    best = 0
    for r in range(1, len(runs)):
        if finals[r] > finals[best] + tol * max(1.0, abs(finals[best])):
            best = r
    res = runs[best]
    trace = res["trace"]
    obj_change = abs(trace[-1] - trace[-2]) / max(1.0, abs(trace[-1])) if len(trace) > 1 else float("nan")
    convergence = {
        "rule": (
            f"objective change <= {tol:g} x max(1, |objective|) and parameter change and its extrapolated "
            f"distance to the fixed point <= {param_tol:g}, then class probability change <= {param_tol:g}"
        ),
        "tol": tol,
        "param_tol": param_tol,
        "objective_change": obj_change,
        **res["convergence"],
    }
    if not res["converged"]:
        warnings.warn(
            _not_converged_message(
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
        order = _class_order(pi, theta)
        pi, theta, T = pi[order], theta[:, order, :], T[:, order]
        empty = None if empty is None else empty[:, order]
    class_probs = T[inverse] if inverse is not None else T
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
    )
