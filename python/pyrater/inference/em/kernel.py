"""One fused EM iteration for the Dawid-Skene family, compiled with numba.

:mod:`pyrater.inference.em.algorithm` runs the E-step and the M-step as two sparse products
(scipy's ``csr_matvecs`` / ``csc_matvecs``) plus a handful of passes over an
``(I, K)`` buffer.  The kernel here does the same maths in a single pass over
the CSR counts: for each unit ``i``

1. ``lj[k] = log pi_k + sum_c data[c] * LT[indices[c], k]`` over the unit's
   stored entries ``c`` (``LT[j*K + l, k] = log theta[j, k, l]``, see
   :func:`pyrater.models.kernels.log_theta_matrix`), with ``lj[k] = -inf`` for
   ``k != known[i]`` when the unit's class is known;
2. ``T[i, k] = exp(lj[k] - m) / s`` with ``m = max_k lj[k]`` and
   ``s = sum_k exp(lj[k] - m)``; ``ll_i = m + log s``;
3. the expected counts ``N[indices[c], k] += data[c] * w_i * T[i, k]`` over the
   same entries (still in L1 cache), the class totals
   ``n_k += w_i T[i, k]`` and the objective ``sum_i w_i ll_i``.

The M-step that turns ``N`` and ``n_k`` into ``pi`` and ``theta`` stays in
:mod:`pyrater.inference.em.steps` (:func:`pyrater.inference.em.steps.m_step_from_counts`), shared with the
scipy path; for the Dawid-Skene model :func:`dawid_skene_theta` computes the same error matrices
in one compiled pass over the padded ``N`` (no transposed copy), about half the M-step's time.

Layout and speed
----------------
The class axis is padded to ``KP = 8`` lanes (``K <= 8``): ``LT`` and ``N``
are ``(J*K, 8)`` float64 arrays whose rows are one 64-byte cache line, the
padded lanes of ``log pi`` are ``-inf`` (so their probabilities are exactly
0) and those of ``LT`` are 0.  The per-unit work is written on eight scalar
lanes so that LLVM's SLP vectoriser turns it into 8-wide SIMD; numba switches
that pass off by default, so :func:`compile_for` compiles the kernels with it
switched on for that compilation only; each kernel asks LLVM for 512-bit vectors where the CPU
has them (:func:`pyrater.models._fused.prefer_wide_vectors`: one vector per row, not two
halves).  ``exp`` is the branch-free polynomial
shared with the Gibbs sampler and the post-fit passes
(:func:`pyrater.models._fused.exp_nonpos`) so that it vectorises too.  When all unit weights are 1 and
no per-unit log-likelihood is asked for, ``log`` is not taken per unit but
of the running product of the row sums ``s`` (each in ``[1, 8]``) whenever
it exceeds ``2**900``.  When every stored count is 1 (each rater rates an item once, the
usual crowd design) the caller passes an empty ``data`` and the gather and the scatter skip the
counts' loads and multiplies (:func:`pyrater.models._fused.log_joint_block`).  Results
agree with the scipy path to rounding (about 1e-15 relative; very small class probabilities,
whose logs are large, to about 1e-13); the tests check 1e-10 over whole fits.

The units are processed in blocks of 64: first the log joints of the
block (independent gathers that the CPU overlaps), then the log-sum-exps,
then the scatter of the block's expected counts, with the block's
intermediate values in a small L1-resident buffer.

The iterations that write neither class probabilities nor per-unit log-likelihoods and have no
unit weights (all but the last of a run on data that are not grouped or compressed) run in
``_em_plain``, a copy of the pass without those per-unit branches: about 8% faster at 10^6 ratings.

The kernels take a unit range ``[lo, hi)`` and release the GIL, so callers
can split the units over threads, each with its own ``N`` and ``n_k``.

Call :func:`compile_for` before the first call of :func:`em_iteration`,
:func:`expected_counts` or :func:`vote_shares` with new argument types: a call that compiles them
directly gets no SLP vectorisation (correct, but about 3x slower), and
numba's on-disk cache would keep that version.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...models._fused import PREFETCH_AHEAD, class_probs_row, log_joint_block, prefer_wide_vectors, prefetch_row

__all__ = [
    "KP",
    "em_iteration",
    "dawid_skene_theta",
    "expected_counts",
    "majority_sums",
    "occupied_key_buckets",
    "vote_shares",
    "pad_log_pi",
    "pad_log_theta",
    "mace_inner",
]

#: lanes of the class axis (the kernels support K <= KP)
KP = 8

_u64 = numba.uint64
_BLOCK = 64  # units per block of the fused kernel
_BIG = 2.0**900  # flush the running product of row sums (each <= 8) well before overflow


@numba.njit(inline="always", cache=True, fastmath={"contract"})
def _scatter_block(indptr, indices, data, ones, blo, bhi, X, N):  # pragma: no cover - compiled
    """The M-step's scatter of units ``blo .. bhi - 1``: ``N[c, k] += C[i, c] * X[i - blo, k]`` over their counts.

    ``X`` holds the block's (weighted) class probabilities; with ``ones`` every stored count is 1
    (no loads of the counts).  Called once per block: its loops are written out here, not in a
    per-unit helper, because an array handed to a function costs numba a reference-count
    increment and decrement per call (:mod:`pyrater.models._fused`).  Shared by
    :func:`em_iteration`, :func:`expected_counts` and :func:`majority_sums`.
    """
    nnz = _u64(indices.size)
    for i in range(blo, bhi):
        r = _u64(i - blo)
        t0, t1, t2, t3 = X[r, 0], X[r, 1], X[r, 2], X[r, 3]
        t4, t5, t6, t7 = X[r, 4], X[r, 5], X[r, 6], X[r, 7]
        c = _u64(indptr[_u64(i)])
        b = _u64(indptr[_u64(i) + _u64(1)])
        if ones:
            while c < b:  # unsigned indices: no wraparound checks in the scatter loop
                if c + PREFETCH_AHEAD < nnz:
                    prefetch_row(N, indices[c + PREFETCH_AHEAD])
                col = _u64(indices[c])
                N[col, 0] += t0
                N[col, 1] += t1
                N[col, 2] += t2
                N[col, 3] += t3
                N[col, 4] += t4
                N[col, 5] += t5
                N[col, 6] += t6
                N[col, 7] += t7
                c += _u64(1)
        else:
            while c < b:
                if c + PREFETCH_AHEAD < nnz:
                    prefetch_row(N, indices[c + PREFETCH_AHEAD])
                col = _u64(indices[c])
                v = data[c]
                N[col, 0] += v * t0
                N[col, 1] += v * t1
                N[col, 2] += v * t2
                N[col, 3] += v * t3
                N[col, 4] += v * t4
                N[col, 5] += v * t5
                N[col, 6] += v * t6
                N[col, 7] += v * t7
                c += _u64(1)


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def _em_plain(indptr, indices, data, LT, log_pi, known, lo, hi, N, n_k):  # pragma: no cover - compiled
    """:func:`em_iteration` for the iterations of a fit without unit weights: no ``T``, no ``ll_units``.

    The same numbers as the general kernel, in a function of its own: without the per-unit
    branches for weights and outputs (and the code they bring) the pass is about 8% faster at
    10^6 ratings.  ``N`` (non-empty) and ``n_k`` are overwritten; returns ``sum_i ll_i``.
    """
    prefer_wide_vectors()
    ones = data.size == 0 and indices.size > 0  # every stored count is 1
    N[:] = 0.0
    X = np.empty((_BLOCK, KP))
    M = np.empty(_BLOCK)
    n0 = n1 = n2 = n3 = n4 = n5 = n6 = n7 = 0.0
    total = 0.0
    prod = 1.0
    for blo in range(lo, hi, _BLOCK):
        bhi = min(blo + _BLOCK, hi)
        log_joint_block(indptr, indices, data, ones, LT, log_pi, known, blo, bhi, X, M)
        for i in range(blo, bhi):
            r = _u64(i - blo)
            m = M[r]
            s, t0, t1, t2, t3, t4, t5, t6, t7 = class_probs_row(
                X[r, 0], X[r, 1], X[r, 2], X[r, 3], X[r, 4], X[r, 5], X[r, 6], X[r, 7], m
            )
            total += m
            prod *= s
            if prod > _BIG:
                total += math.log(prod)
                prod = 1.0
            n0 += t0
            n1 += t1
            n2 += t2
            n3 += t3
            n4 += t4
            n5 += t5
            n6 += t6
            n7 += t7
            X[r, 0] = t0
            X[r, 1] = t1
            X[r, 2] = t2
            X[r, 3] = t3
            X[r, 4] = t4
            X[r, 5] = t5
            X[r, 6] = t6
            X[r, 7] = t7
        _scatter_block(indptr, indices, data, ones, blo, bhi, X, N)
    total += math.log(prod)
    n_k[0] = n0
    n_k[1] = n1
    n_k[2] = n2
    n_k[3] = n3
    n_k[4] = n4
    n_k[5] = n5
    n_k[6] = n6
    n_k[7] = n7
    return total


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def em_iteration(
    indptr, indices, data, LT, log_pi, known, weight, lo, hi, K, T, ll_units, N, n_k
):  # pragma: no cover - compiled
    """One fused E-step (and scatter of the M-step's expected counts) over units ``[lo, hi)``.

    Parameters
    ----------
    indptr, indices, data : arrays
        The CSR count matrix (``data`` float64); ``data`` empty means every stored count
        is 1, which skips their loads and multiplies in the gather and the scatter.
    LT : float64 array (J*K, KP)
        ``LT[j*K + l, k] = log theta[j, k, l]``, lanes ``k >= K`` zero
        (:func:`pad_log_theta`).
    log_pi : float64 array (KP,)
        ``log pi``, lanes ``k >= K`` ``-inf`` (:func:`pad_log_pi`).
    known : int64 array (I,) or empty
        Known class per unit, ``-1`` where unknown; empty when none is known.
    weight : float64 array (I,) or empty
        Unit weights; empty means all weights are 1.
    lo, hi : int
        The units to process.
    K : int
        Number of classes (columns of ``T``).
    T : float64 array (I, K) or empty
        Receives the class probabilities of rows ``[lo, hi)``; skipped when empty.
    ll_units : float64 array (I,) or empty
        Receives ``log p(y_i)`` (``log p(y_i, z_i)`` for known units); skipped when empty.
    N : float64 array (J*K, KP) or empty
        Overwritten with ``N[j*K + l, k] = sum_i w_i T[i, k] C[i, j*K + l]`` over
        the units processed; the M-step scatter is skipped when empty.
    n_k : float64 array (KP,)
        Overwritten with the class totals ``sum_i w_i T[i, k]`` (when ``N`` is given).

    Returns
    -------
    float
        ``sum_i w_i ll_i`` over the units processed.
    """
    prefer_wide_vectors()
    ones = data.size == 0 and indices.size > 0  # every stored count is 1
    weighted = weight.size > 0
    write_T = T.size > 0
    write_ll = ll_units.size > 0
    scatter = N.size > 0
    if scatter and not (weighted or write_T or write_ll):  # most iterations of a fit: the lean kernel
        return _em_plain(indptr, indices, data, LT, log_pi, known, lo, hi, N, n_k)
    if scatter:
        N[:] = 0.0
    X = np.empty((_BLOCK, KP))  # per block: lj - m, then w * T (stays in L1 cache)
    M = np.empty(_BLOCK)  # per block: the row maxima m
    n0 = n1 = n2 = n3 = n4 = n5 = n6 = n7 = 0.0
    total = 0.0
    prod = 1.0  # running product of row sums (unit weights): one log per many units
    for blo in range(lo, hi, _BLOCK):
        bhi = min(blo + _BLOCK, hi)
        # 1. log joint of each unit (the units of a block are independent: their gathers overlap)
        log_joint_block(indptr, indices, data, ones, LT, log_pi, known, blo, bhi, X, M)
        # 2. log-sum-exp, class probabilities, objective, class totals
        for i in range(blo, bhi):
            iu = _u64(i)
            r = _u64(i - blo)
            m = M[r]
            s, t0, t1, t2, t3, t4, t5, t6, t7 = class_probs_row(
                X[r, 0], X[r, 1], X[r, 2], X[r, 3], X[r, 4], X[r, 5], X[r, 6], X[r, 7], m
            )
            if write_T:
                T[iu, 0] = t0
                if K > 1:
                    T[iu, 1] = t1
                if K > 2:
                    T[iu, 2] = t2
                if K > 3:
                    T[iu, 3] = t3
                if K > 4:
                    T[iu, 4] = t4
                if K > 5:
                    T[iu, 5] = t5
                if K > 6:
                    T[iu, 6] = t6
                if K > 7:
                    T[iu, 7] = t7
            if weighted or write_ll:
                ll = m + math.log(s)
                if write_ll:
                    ll_units[iu] = ll
                w = weight[iu] if weighted else 1.0
                total += w * ll
            else:
                total += m
                prod *= s
                if prod > _BIG:
                    total += math.log(prod)
                    prod = 1.0
            if scatter:
                if weighted:
                    w = weight[iu]
                    t0 *= w
                    t1 *= w
                    t2 *= w
                    t3 *= w
                    t4 *= w
                    t5 *= w
                    t6 *= w
                    t7 *= w
                n0 += t0
                n1 += t1
                n2 += t2
                n3 += t3
                n4 += t4
                n5 += t5
                n6 += t6
                n7 += t7
                X[r, 0] = t0
                X[r, 1] = t1
                X[r, 2] = t2
                X[r, 3] = t3
                X[r, 4] = t4
                X[r, 5] = t5
                X[r, 6] = t6
                X[r, 7] = t7
        # 3. the M-step's expected counts (the block's entries are still in cache)
        if scatter:
            _scatter_block(indptr, indices, data, ones, blo, bhi, X, N)
    total += math.log(prod)
    n_k[0] = n0
    n_k[1] = n1
    n_k[2] = n2
    n_k[3] = n3
    n_k[4] = n4
    n_k[5] = n5
    n_k[6] = n6
    n_k[7] = n7
    return total


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def expected_counts(indptr, indices, data, T, weight, lo, hi, N, n_k):  # pragma: no cover - compiled
    """The M-step's sums from given class probabilities, over units ``[lo, hi)``.

    ``N[j*K + l, k] = sum_i w_i T[i, k] C[i, j*K + l]`` (lanes ``k >= K``
    stay 0) and ``n_k[k] = sum_i w_i T[i, k]``, both overwritten; the same
    scatter as in :func:`em_iteration`, for the first M-step of a run.
    ``weight`` empty means all weights are 1.
    """
    prefer_wide_vectors()
    K = T.shape[1]
    weighted = weight.size > 0
    N[:] = 0.0
    n_k[:] = 0.0
    X = np.zeros((_BLOCK, KP))  # lanes k >= K stay 0
    for blo in range(lo, hi, _BLOCK):
        bhi = min(blo + _BLOCK, hi)
        for i in range(blo, bhi):
            iu = _u64(i)
            r = _u64(i - blo)
            w = weight[iu] if weighted else 1.0
            for k in range(K):
                t = T[iu, k] * w if weighted else T[iu, k]
                X[r, k] = t
                n_k[k] += t
        _scatter_block(indptr, indices, data, False, blo, bhi, X, N)


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def majority_sums(indptr, indices, data, rating, known, weight, K, N, n_k):  # pragma: no cover - compiled
    """The first M-step's sums from the soft majority vote, without writing the vote.

    The same numbers as :func:`vote_shares` (clamped to the known classes) followed by
    :func:`expected_counts`, in one pass over the counts: per unit the shares
    ``t[k]`` of each rating among its counts (``1/K`` without counts; one-hot for a
    known class), then ``N[j*K + l, k] += w_i t[k] C[i, j*K + l]`` and
    ``n_k[k] += w_i t[k]`` (both overwritten).

    Parameters
    ----------
    indptr, indices, data : arrays
        The CSR count matrix (``data`` float64); ``data`` empty means every stored count is 1
        (no loads of the counts, as in :func:`em_iteration`).
    rating : int64 array (J*K,)
        ``rating[j*K + l] = l``.
    known : int64 array (I,) or empty
    weight : float64 array (I,) or empty (all weights 1)
    K : int
    N : float64 array (J*K, KP); n_k : float64 array (KP,)
    """
    prefer_wide_vectors()
    I = indptr.size - 1
    ones = data.size == 0 and indices.size > 0  # every stored count is 1
    weighted = weight.size > 0
    has_known = known.size > 0
    N[:] = 0.0
    n0 = n1 = n2 = n3 = n4 = n5 = n6 = n7 = 0.0
    uniform = 1.0 / K
    eye = np.eye(KP)
    X = np.empty((_BLOCK, KP))
    for i in range(I):
        iu = _u64(i)
        row = i % _BLOCK  # the unit's row in the block buffer (signed, as the block bounds)
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
        c = _u64(indptr[iu])
        b = _u64(indptr[iu + _u64(1)])
        while c < b:  # the counts of each rating: one eight-lane FMA with a row of the identity (exact)
            v = 1.0 if ones else data[c]
            r = _u64(rating[_u64(indices[c])])
            a0 += v * eye[r, 0]
            a1 += v * eye[r, 1]
            a2 += v * eye[r, 2]
            a3 += v * eye[r, 3]
            a4 += v * eye[r, 4]
            a5 += v * eye[r, 5]
            a6 += v * eye[r, 6]
            a7 += v * eye[r, 7]
            c += _u64(1)
        kk = known[iu] if has_known else -1
        if kk >= 0:  # a known class: one-hot
            a0 = 1.0 if kk == 0 else 0.0
            a1 = 1.0 if kk == 1 else 0.0
            a2 = 1.0 if kk == 2 else 0.0
            a3 = 1.0 if kk == 3 else 0.0
            a4 = 1.0 if kk == 4 else 0.0
            a5 = 1.0 if kk == 5 else 0.0
            a6 = 1.0 if kk == 6 else 0.0
            a7 = 1.0 if kk == 7 else 0.0
        else:
            tot = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
            if tot > 0:  # lanes k >= K hold 0 and stay 0
                a0, a1, a2, a3 = a0 / tot, a1 / tot, a2 / tot, a3 / tot
                a4, a5, a6, a7 = a4 / tot, a5 / tot, a6 / tot, a7 / tot
            else:
                a0 = uniform
                a1 = uniform if K > 1 else 0.0
                a2 = uniform if K > 2 else 0.0
                a3 = uniform if K > 3 else 0.0
                a4 = uniform if K > 4 else 0.0
                a5 = uniform if K > 5 else 0.0
                a6 = uniform if K > 6 else 0.0
                a7 = uniform if K > 7 else 0.0
        if weighted:
            w = weight[iu]
            a0, a1, a2, a3 = a0 * w, a1 * w, a2 * w, a3 * w
            a4, a5, a6, a7 = a4 * w, a5 * w, a6 * w, a7 * w
        n0 += a0
        n1 += a1
        n2 += a2
        n3 += a3
        n4 += a4
        n5 += a5
        n6 += a6
        n7 += a7
        X[row, 0] = a0
        X[row, 1] = a1
        X[row, 2] = a2
        X[row, 3] = a3
        X[row, 4] = a4
        X[row, 5] = a5
        X[row, 6] = a6
        X[row, 7] = a7
        if row == _BLOCK - 1 or i == I - 1:  # the block's expected counts
            _scatter_block(indptr, indices, data, ones, i - row, i + 1, X, N)
    n_k[0] = n0
    n_k[1] = n1
    n_k[2] = n2
    n_k[3] = n3
    n_k[4] = n4
    n_k[5] = n5
    n_k[6] = n6
    n_k[7] = n7


@numba.njit(cache=True, nogil=True)
def occupied_key_buckets(indptr, indices, bits):  # pragma: no cover - compiled
    """:func:`pyrater.inference.em.compress.may_compress`'s count of occupied buckets, in one pass.

    Per row the key ``n ^ (first column * c1) ^ (last column * c2)`` (0 columns for an
    empty row), multiplied by a constant and shifted to ``bits`` bits (all arithmetic
    modulo 2**64, as numpy's uint64); returns the number of distinct buckets hit.
    """
    I = indptr.size - 1
    nnz = indices.size
    c1 = np.uint64(0x9E3779B97F4A7C15)
    c2 = np.uint64(0xC2B2AE3D27D4EB4F)
    mult = np.uint64(0xD6E8FEB86659FD93)
    shift = np.uint64(64 - bits)
    occupied = np.zeros(max(1, (1 << bits) >> 6), dtype=np.uint64)  # one bit per bucket: stays in L2
    one = np.uint64(1)
    six = np.uint64(6)
    low = np.uint64(63)
    count = 0
    for i in range(I):
        a = indptr[i]
        b = indptr[i + 1]
        n = np.uint64(b - a)
        if b > a:
            first = np.uint64(indices[min(a, nnz - 1)])
            last = np.uint64(indices[max(b - 1, 0)])
        else:
            first = np.uint64(0)
            last = np.uint64(0)
        key = n ^ (first * c1) ^ (last * c2)
        bucket = (key * mult) >> shift
        word = bucket >> six
        bit = one << (bucket & low)
        if not occupied[word] & bit:
            occupied[word] |= bit
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def vote_shares(indptr, indices, data, out):  # pragma: no cover - compiled
    """Soft majority vote into ``out`` (I, K), K <= KP: the share of each rating among a unit's counts.

    Same result as :func:`pyrater.inference.em.algorithm.soft_majority_vote` (sums of counts
    are exact); a unit without counts gets ``1/K``.
    """
    I, K = out.shape
    JK = 0
    for c in range(indices.size):
        JK = max(JK, indices[c] + 1)
    rating = np.empty(JK, np.int64)  # column j*K + l -> l: a lookup instead of a division per count
    for col in range(JK):
        rating[col] = col % K
    acc = np.zeros(KP)
    for i in range(I):
        iu = _u64(i)
        for k in range(KP):
            acc[k] = 0.0
        c = _u64(indptr[iu])
        b = _u64(indptr[iu + _u64(1)])
        while c < b:
            acc[rating[_u64(indices[c])]] += data[c]
            c += _u64(1)
        tot = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
        if tot > 0:
            for k in range(K):
                out[iu, k] = acc[k] / tot
        else:
            for k in range(K):
                out[iu, k] = 1.0 / K
    return out


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def dawid_skene_theta(N, add, theta, empty, prev):  # pragma: no cover - compiled
    """The Dawid-Skene M-step's error matrices from the fused pass's expected counts, in one pass.

    ``theta[j, k, l] = (N[j*K + l, k] + add[j, k, l]) / sum_l (...)``, a row without any
    (prior-augmented) count uniform and flagged in ``empty[j, k]``: the numbers of
    :func:`pyrater.inference.em.steps.m_step_from_counts` for ``"dawid_skene"`` (to rounding),
    read straight from the padded layout (no transposed copy of the counts); the row sums
    of a rater are one eight-lane sum over its ``K`` rows.  Each entry is divided by its
    row's total, not multiplied by the total's reciprocal: maximum likelihood can leave a
    row with a subnormal total (its rater's items almost surely of other classes), whose
    reciprocal overflows to infinity (``0 * inf`` is NaN).

    Parameters
    ----------
    N : float64 array (J*K, KP)
        Expected counts, lanes ``k < K`` used (lanes ``k >= K`` hold 0).
    add : float64 array (J*K, KP) or empty
        The MAP pseudo-counts ``beta - 1`` in the layout of ``N`` (lanes ``k >= K`` 0):
        ``add[j*K + l, k] = beta[j, k, l] - 1``; empty for maximum likelihood.
    theta : float64 array (J, K, K), empty : bool array (J, K)
        Outputs.
    prev : float64 array (J, K, K) or empty
        The previous error matrices, or empty.

    Returns
    -------
    float
        ``max |theta - prev|`` over all entries (the stopping rule's change of theta,
        :class:`pyrater.inference.em.convergence.Convergence`, computed here while the new
        matrices are in registers instead of in a second pass over both); NaN when ``prev`` is
        empty.
    """
    prefer_wide_vectors()
    J, K, _ = theta.shape
    has_prev = prev.size > 0
    change = 0.0
    bad = not has_prev
    has_add = add.size > 0
    uniform = 1.0 / K
    tot = np.empty(KP)
    row = np.empty(KP)
    for j in range(J):
        base = j * K
        for k in range(KP):
            tot[k] = 0.0
        for l in range(K):
            for k in range(KP):
                tot[k] += N[base + l, k] + add[base + l, k] if has_add else N[base + l, k]
        for k in range(KP):
            row[k] = tot[k] if tot[k] > 0 else 1.0
        for l in range(K):
            for k in range(K):
                v = N[base + l, k] + add[base + l, k] if has_add else N[base + l, k]
                theta[j, k, l] = v / row[k]
        for k in range(K):
            none = not tot[k] > 0
            empty[j, k] = none
            if none:
                for l in range(K):
                    theta[j, k, l] = uniform
        if has_prev:
            for k in range(K):
                for l in range(K):
                    d = abs(theta[j, k, l] - prev[j, k, l])
                    if d > change:
                        change = d
                    elif d != d:  # NaN wins, as in np.max
                        bad = True
    return np.nan if bad else change


# ------------------------------------------------------------------ helpers (Python)


def pad_log_theta(log_theta: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Write ``LT[j*K + l, k] = log_theta[j, k, l]`` into the lanes ``k < K`` of ``out`` (J*K, KP)."""
    J, K, _ = log_theta.shape
    out[:, :K].reshape(J, K, K)[...] = log_theta.transpose(0, 2, 1)
    return out


def pad_log_pi(log_pi: np.ndarray) -> np.ndarray:
    """``log_pi`` (K,) padded to KP lanes with ``-inf``."""
    out = np.full(KP, -np.inf)
    out[: log_pi.size] = log_pi
    return out


@numba.njit(cache=True, nogil=True)
def mace_inner(d, o_g, den, a1, c, xi, max_inner, tol):  # pragma: no cover - compiled
    """MACE's inner EM (:func:`pyrater.inference.em.steps.mace_m_step`), one rater at a time.

    ``d`` (J, K) diagonal counts, ``o_g`` (J, K) off-diagonal counts plus ``gamma - 1`` (0 for
    ML), ``den`` (J,) the competence's denominator (``inf`` for a rater without ratings under a
    flat prior), ``a1 = beta1 - 1`` (0 for ML); ``c`` (J,) and ``xi`` (J, K) hold the start and
    receive the result.  Each rater iterates until its largest change is at most ``tol`` or for
    ``max_inner`` steps: the same steps as the NumPy loop, which drops converged raters.
    """
    J, K = d.shape
    spam = np.empty(K)
    for j in range(J):
        for _ in range(max(1, max_inner)):
            cj = c[j]
            competent = 0.0
            s_tot = 0.0
            for l in range(K):
                sd = (1.0 - cj) * xi[j, l]
                den_l = cj + sd
                s = d[j, l] * (sd / den_l) if den_l > 0.0 else 0.0
                competent += d[j, l] - s
                spam[l] = o_g[j, l] + s
                s_tot += spam[l]
            c_new = (competent + a1) / den[j]
            change = abs(c_new - cj)
            for l in range(K):
                x = spam[l] / s_tot if s_tot > 0.0 else 1.0 / K
                change = max(change, abs(x - xi[j, l]))
                xi[j, l] = x
            c[j] = c_new
            if change <= tol:
                break
