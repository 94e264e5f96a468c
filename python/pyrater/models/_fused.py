"""Compiled passes over the stored counts, shared by EM, the Gibbs sampler and every draws-based fit.

Everything here is numba, loaded only when first needed (:mod:`pyrater.models.kernels`
imports it lazily).  Three pieces:

* :func:`exp_nonpos`, a branch-free ``exp`` for arguments ``<= 0`` that LLVM's SLP
  vectoriser turns into SIMD code (degree-13 Taylor polynomial on ``|r| <= log(2)/2``
  after Cody-Waite range reduction, Estrin's scheme, about 2 ulp).  The EM kernel
  (:mod:`pyrater.inference.em.kernel`), the Gibbs sampler's z step
  (:mod:`pyrater.inference.gibbs.kernel`) and :func:`draws_pass` use it.
* :func:`draws_pass`, one fused pass over a range of units for a chunk of posterior
  draws: per unit and draw the log joint ``lj[k] = log pi_k + sum_c C[i, c] LT[c, k]``
  on eight SIMD lanes, its log-sum-exp, and from them the running sum of the class
  probabilities ``P(z_i = k | y_i, pi_s, theta_s)`` (the Rao-Blackwellised class
  probabilities) and/or the per-unit log-likelihood ``log p(y_i | pi_s, theta_s)``
  (for LOO and WAIC), written straight into a units-by-draws layout.  Loops are tiled
  (units in tiles that stay in the L2 cache while every draw of the chunk passes over
  them; 64 units per inner block, whose gathers the CPU overlaps), so a chunk of draws
  costs about one pass of the sampler's z step per draw.
* :func:`psis_loo_rows`, Pareto-smoothed importance sampling LOO of many units at once
  (the algorithm of :func:`pyrater._psis.psislw`, applied to ``-log_lik``), one unit's
  draws per row.

:func:`compile_for` compiles a kernel for its argument types with the SLP vectoriser
switched on (numba leaves it off by default); :mod:`pyrater.inference._numba` re-exports it.

The gathers of table rows (``LT[indices[c]]``) are random accesses into tables of ``J*K`` rows
of 64 bytes, larger than the L2 cache at crowd scale (1.6 MB at J = 5000, K = 5); the gather
loop prefetches the row ``PREFETCH_AHEAD`` stored counts ahead (:func:`prefetch_row`, LLVM's
``llvm.prefetch``), and so does the EM kernel's scatter into its count table.  Measured in
``bench/RESULTS_em.md``: 1.5-1.9x faster EM iterations at 10^6 ratings on a loaded machine.

Per-unit code takes and returns scalars only (:func:`finish_row`, :func:`class_probs_row`); the
functions that take arrays (:func:`log_joint_block`, the EM kernel's scatter) are called once per
block of 64 units, and per-unit loops index 2-D arrays directly instead of taking row views.  An
array handed to a numba function, inlined (``inline="always"``) or not, or a view taken of it, costs a
reference-count increment and decrement (atomic operations, external calls LLVM cannot remove):
per unit they made the gather 6x and the EM iteration 2.8x slower on an Intel Xeon host
(``bench/RESULTS_em.md``, 2026-12-06).

Each kernel starts with :func:`prefer_wide_vectors`, so that on CPUs with AVX-512 a row's eight
lanes are one 512-bit vector (LLVM's tuning would split them in two): the same numbers, about 13%
faster EM passes on an Intel Xeon host (``bench/RESULTS_em.md``, 2026-12-07).
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
from contextlib import contextmanager

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core import config as _numba_config
from numba.extending import intrinsic

__all__ = [
    "KP",
    "exp_nonpos",
    "class_probs_row",
    "draws_pass",
    "psis_loo_rows",
    "compile_for",
    "run",
    "log_tables",
    "prefer_wide_vectors",
]

#: lanes of the class axis (the kernels support K <= KP)
KP = 8

_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238  # log(2) split in two (Cody-Waite): n * _LN2_HI is exact for |n| < 2**11
_LN2_LO = 1.9082149292705877e-10
_EXP_CUT = -745.2  # exp(x) rounds to 0 below about -745.13
_BLOCK = 64  # units per inner block
_u64 = numba.uint64
PREFETCH_AHEAD = _u64(32)  # stored counts ahead whose table rows are prefetched


# ---------------------------------------------------------------- compilation
_compile_lock = threading.Lock()


@contextmanager
def _slp_vectorize():
    """Switch on LLVM's SLP vectoriser for the compilations inside the block only."""
    with _compile_lock:
        old = _numba_config.SLP_VECTORIZE
        _numba_config.SLP_VECTORIZE = 1
        try:
            yield
        finally:
            _numba_config.SLP_VECTORIZE = old


def compile_for(kernel, *args) -> None:
    """Compile (or load from numba's on-disk cache) ``kernel`` for the types of these arguments.

    Call it once with the arguments of later calls of the kernel; compiling through here
    vectorises the eight-lane loops (see :func:`_slp_vectorize`).
    """
    sig = tuple(numba.typeof(a) for a in args)
    if sig in kernel.overloads:
        return
    if not _on_disk(kernel):
        _say_compiling()
    with _slp_vectorize():
        kernel.compile(sig)


def _on_disk(kernel) -> bool:
    """Whether numba's on-disk cache holds compiled code of ``kernel`` (True when that cannot be told)."""
    try:
        return os.path.exists(kernel._cache._cache_file._index_path)
    except AttributeError:  # another numba's internals, or no cache: say nothing
        return True


@functools.cache
def _say_compiling() -> None:
    """Tell the user, once per process, why the first fit by a compiled method waits (no progress bar yet)."""
    print(
        "pyrater: compiling the numba kernels (the first run of a method on this machine or after an upgrade: up "
        "to about a minute; kept in numba's cache for later runs)",
        file=sys.stderr,
        flush=True,
    )


def run(kernel, *args):
    """``kernel(*args)`` after :func:`compile_for` (for one-off calls)."""
    compile_for(kernel, *args)
    return kernel(*args)


# ------------------------------------------------------------------------ exp
@intrinsic
def _bits_to_float(typingctx, x):
    """Reinterpret the bits of an int64 as a float64 (LLVM ``bitcast``)."""
    if not isinstance(x, types.Integer) or x.bitwidth != 64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(x), codegen


@intrinsic
def prefetch_row(typingctx, ary, row):
    """Prefetch the start of row ``row`` of a C-contiguous 2-D array (LLVM ``llvm.prefetch``, read, high locality)."""
    if not isinstance(ary, types.Array) or ary.ndim != 2 or not isinstance(row, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        aryty, rowty = sig.args
        a = context.make_array(aryty)(context, builder, args[0])
        ncol = builder.extract_value(a.shape, 1)
        r = context.cast(builder, args[1], rowty, types.intp)
        ptr = builder.gep(a.data, [builder.mul(r, ncol)])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.none(ary, row), codegen


@intrinsic
def prefer_wide_vectors(typingctx):
    """Let LLVM use 512-bit vectors in the compiled function that calls this, where the CPU has them.

    Sets the function's LLVM attribute ``"prefer-vector-width"="512"``: on CPUs with AVX-512
    LLVM otherwise keeps to 256-bit vectors (its tuning for Intel server cores), and the eight
    float64 lanes of a row run as two halves.  A per-function attribute, not numba's global
    target options, so nothing outside these kernels changes; no effect on CPUs without
    AVX-512.  Lane-wise arithmetic and the explicit summation order are the same, so the
    results are bit for bit those of the 256-bit code (checked on EM, the Gibbs sampler and the
    draws pass); at 10^6 ratings an EM iteration is about 13% faster on an Intel Xeon
    (``bench/RESULTS_em.md``).  Call it first in each kernel whose loops should widen
    (helpers inlined with ``inline="always"`` are part of their caller), and in each kernel that
    calls one (``z_pass_rb``, ``run_chain``): LLVM may inline the callee, and its vectors then
    take the caller's width.
    """

    def codegen(context, builder, sig, args):
        try:  # llvmlite checks attribute names against a fixed list: add the string attribute past it
            set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        except (AttributeError, TypeError):  # another llvmlite's internals: keep LLVM's default width
            pass
        return context.get_dummy_value()

    return types.none(), codegen


@numba.njit(inline="always", cache=True)
def exp_nonpos(x):  # pragma: no cover - compiled
    """``exp(x)`` for ``x <= 0`` (``-inf`` gives 0), branch-free so that it vectorises."""
    xc = x if x > _EXP_CUT else 0.0  # below the cut (padded lanes: -inf) a normal number, result 0 below
    n = math.floor(xc * _LOG2E + 0.5)
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    # Taylor coefficients 1/i!, i = 0..13, evaluated by Estrin's scheme (a short dependency chain)
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    q0 = 1.0 + r
    q1 = 0.5 + r * (1.0 / 6.0)
    q2 = 1.0 / 24.0 + r * (1.0 / 120.0)
    q3 = 1.0 / 720.0 + r * (1.0 / 5040.0)
    q4 = 1.0 / 40320.0 + r * (1.0 / 362880.0)
    q5 = 1.0 / 3628800.0 + r * (1.0 / 39916800.0)
    q6 = 1.0 / 479001600.0 + r * (1.0 / 6227020800.0)
    u0 = (q0 + r2 * q1) + r4 * (q2 + r2 * q3)
    u1 = (q4 + r2 * q5) + r4 * q6
    p = u0 + r8 * u1
    ni = np.int64(n)
    h = ni >> 1  # 2**n as 2**h * 2**(n - h): both halves normal down to n = -1076
    s1 = _bits_to_float((h + 1023) << 52)
    s2 = _bits_to_float((ni - h + 1023) << 52)
    y = p * s1 * s2
    return y if x > _EXP_CUT else 0.0


@numba.njit(inline="always", cache=True, fastmath={"contract"})
def class_probs_row(x0, x1, x2, x3, x4, x5, x6, x7, m):  # pragma: no cover - compiled
    """``(s, t_0 .. t_7)``: the row sum ``s = sum_k exp(x_k)`` and ``t_k = exp(x_k) / s``.

    ``x_k`` is a unit's log joint minus its maximum ``m`` (a row of the block buffer ``X``);
    ``s`` is NaN when ``m`` is not finite (no finite log joint), as in the scipy path.  One
    division, eight multiplies.  Scalars in, scalars out (see :func:`finish_row`).
    """
    e0 = exp_nonpos(x0)
    e1 = exp_nonpos(x1)
    e2 = exp_nonpos(x2)
    e3 = exp_nonpos(x3)
    e4 = exp_nonpos(x4)
    e5 = exp_nonpos(x5)
    e6 = exp_nonpos(x6)
    e7 = exp_nonpos(x7)
    s = ((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7))
    if not m > -np.inf:
        s = np.nan
    q = 1.0 / s
    return s, e0 * q, e1 * q, e2 * q, e3 * q, e4 * q, e5 * q, e6 * q, e7 * q


@numba.njit(inline="always", cache=True)
def finish_row(kk, a0, a1, a2, a3, a4, a5, a6, a7):  # pragma: no cover - compiled
    """``(m, a_0 - m, .., a_7 - m)`` with ``m = max_k a_k``, after a known class ``kk >= 0`` keeps its own lane.

    ``kk = -1``: the class is not known.  The per-unit helpers take and return scalars only:
    an array handed to a function, inlined or not, costs numba a reference-count increment and
    decrement per call (atomic operations; see the module docstring).
    """
    ninf = -np.inf
    if kk >= 0:
        a0 = a0 if kk == 0 else ninf
        a1 = a1 if kk == 1 else ninf
        a2 = a2 if kk == 2 else ninf
        a3 = a3 if kk == 3 else ninf
        a4 = a4 if kk == 4 else ninf
        a5 = a5 if kk == 5 else ninf
        a6 = a6 if kk == 6 else ninf
        a7 = a7 if kk == 7 else ninf
    m = max(max(max(a0, a1), max(a2, a3)), max(max(a4, a5), max(a6, a7)))
    return m, a0 - m, a1 - m, a2 - m, a3 - m, a4 - m, a5 - m, a6 - m, a7 - m


@numba.njit(inline="always", cache=True)
def log_joint_block(indptr, indices, data, ones, LT, log_pi, known, blo, bhi, X, M):  # pragma: no cover - compiled
    """The log joints of units ``blo .. bhi - 1`` on eight lanes, each row minus its maximum.

    For unit ``i`` (row ``r = i - blo``) and lane ``k``: ``log pi[k] + sum_c data[c] * LT[indices[c], k]``
    over the unit's stored counts ``c``; a unit with ``known[i] >= 0`` keeps only that lane (the others
    ``-inf``).  Writes ``M[r]`` (the row maximum) and ``X[r, k]`` (the log joint minus ``M[r]``).  The units
    of a block are independent, so their gathers overlap; EM, the Gibbs sampler and the post-fit pass
    share this first stage of their fused kernels (each then exponentiates the block its own way).

    With ``ones`` every stored count is 1 (one rating per item and rater): plain sums of table rows,
    no loads of the counts and no multiplies (about a sixth of an EM iteration at 10^6 ratings).
    The choice is made per unit outside the gather loop, so that each loop keeps its vectorised form.

    Parameters
    ----------
    indptr, indices, data : arrays
        The CSR count matrix (``data`` float64; not read with ``ones``).
    ones : bool
        Every stored count is 1 (callers decide it once per pass).
    LT : float64 array (J*K, KP)
        ``LT[j*K + l, k] = log theta[j, k, l]`` (lanes ``k >= K`` zero).
    log_pi : float64 array (KP,)
        ``log pi`` (lanes ``k >= K`` ``-inf``).
    known : int64 array (I,) or empty
        Known class per unit (-1 unknown); empty when no unit is known.
    blo, bhi : int
        The units of the block (at most ``X.shape[0]``).
    X : float64 array (block, KP), M : float64 array (block,)
        Outputs.
    """
    has_known = known.size > 0
    nnz = _u64(indices.size)
    for i in range(blo, bhi):
        iu = _u64(i)
        r = _u64(i - blo)
        a0 = log_pi[0]
        a1 = log_pi[1]
        a2 = log_pi[2]
        a3 = log_pi[3]
        a4 = log_pi[4]
        a5 = log_pi[5]
        a6 = log_pi[6]
        a7 = log_pi[7]
        c = _u64(indptr[iu])
        b = _u64(indptr[iu + _u64(1)])
        if ones:
            while c < b:
                if c + PREFETCH_AHEAD < nnz:
                    prefetch_row(LT, indices[c + PREFETCH_AHEAD])
                col = _u64(indices[c])
                a0 += LT[col, 0]
                a1 += LT[col, 1]
                a2 += LT[col, 2]
                a3 += LT[col, 3]
                a4 += LT[col, 4]
                a5 += LT[col, 5]
                a6 += LT[col, 6]
                a7 += LT[col, 7]
                c += _u64(1)
        else:
            while c < b:  # unsigned indices: no wraparound checks in the gather loop
                if c + PREFETCH_AHEAD < nnz:
                    prefetch_row(LT, indices[c + PREFETCH_AHEAD])
                col = _u64(indices[c])
                v = data[c]
                a0 += v * LT[col, 0]
                a1 += v * LT[col, 1]
                a2 += v * LT[col, 2]
                a3 += v * LT[col, 3]
                a4 += v * LT[col, 4]
                a5 += v * LT[col, 5]
                a6 += v * LT[col, 6]
                a7 += v * LT[col, 7]
                c += _u64(1)
        kk = known[iu] if has_known else -1
        m, x0, x1, x2, x3, x4, x5, x6, x7 = finish_row(kk, a0, a1, a2, a3, a4, a5, a6, a7)
        M[r] = m
        X[r, 0] = x0
        X[r, 1] = x1
        X[r, 2] = x2
        X[r, 3] = x3
        X[r, 4] = x4
        X[r, 5] = x5
        X[r, 6] = x6
        X[r, 7] = x7


# ------------------------------------------------------------- log tables (numpy)
def log_tables(pi: np.ndarray, theta: np.ndarray, J: int, LT: np.ndarray, LP: np.ndarray) -> None:
    """Fill the padded log tables of a chunk of draws.

    Parameters
    ----------
    pi : array (n, K)
    theta : array (n, Jt, K, K), ``Jt`` = J or 1 (one matrix shared by all raters)
    J : int
    LT : float64 array (n, J*K, KP), written: ``LT[s, j*K + l, k] = log theta[s, j, k, l]``,
        lanes ``k >= K`` zero.
    LP : float64 array (n, KP), written: ``log pi`` with lanes ``k >= K`` at ``-inf``.
    """
    n, K = pi.shape
    with np.errstate(divide="ignore"):
        lt = np.log(theta)  # (n, Jt, K, K): numpy's vectorised log
        LP[:, :K] = np.log(pi)
    LP[:, K:] = -np.inf
    LT[:, :, K:] = 0.0
    view = LT.reshape(n, J, K, KP)[:, :, :, :K]  # view[s, j, l, k] = LT[s, j*K + l, k]
    view[...] = np.swapaxes(lt, 2, 3)  # broadcasts a shared (Jt = 1) matrix over the raters


# --------------------------------------------------------------- the fused pass
@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def draws_pass(indptr, indices, data, known, LT, LP, lo, hi, tile, acc, ll, ll_lo, ll_s0):  # pragma: no cover
    """Class probabilities and log-likelihoods of units ``[lo, hi)`` under a chunk of draws.

    Parameters
    ----------
    indptr, indices, data : arrays
        The CSR count matrix (``data`` float64); ``data`` empty means every stored count is 1.
    known : int64 array (I,) or empty
        Known class per unit (-1 unknown).
    LT : float64 array (n, J*K, KP)
        Per draw, ``LT[s, j*K + l, k] = log theta_s[j, k, l]`` (lanes ``k >= K`` zero).
    LP : float64 array (n, KP)
        Per draw, ``log pi_s`` (lanes ``k >= K`` ``-inf``).
    lo, hi : int
        The units to process.
    tile : int
        Units per tile (every draw of the chunk passes over a tile before the next).
    acc : float64 array (I, KP) or empty
        ``acc[i, k] += P(z_i = k | y_i, pi_s, theta_s)`` summed over the draws of the chunk.
    ll : float64 array (m, S) or empty
        ``ll[i - ll_lo, ll_s0 + s] = log p(y_i | pi_s, theta_s)`` (``log p(y_i, z_i)`` for a
        known unit, as the Stan programs write it).
    ll_lo, ll_s0 : int
        Row and column offsets into ``ll``.
    """
    prefer_wide_vectors()
    n = LT.shape[0]
    write_acc = acc.size > 0
    write_ll = ll.size > 0
    ones = data.size == 0 and indices.size > 0  # every stored count 1 (see log_joint_block)
    X = np.empty((_BLOCK, KP))
    M = np.empty(_BLOCK)
    for tlo in range(lo, hi, tile):
        thi = min(tlo + tile, hi)
        for s in range(n):
            LTs = LT[s]
            for blo in range(tlo, thi, _BLOCK):
                bhi = min(blo + _BLOCK, thi)
                log_joint_block(indptr, indices, data, ones, LTs, LP[s], known, blo, bhi, X, M)
                for i in range(blo, bhi):
                    iu = _u64(i)
                    r = _u64(i - blo)
                    m = M[r]
                    tot, t0, t1, t2, t3, t4, t5, t6, t7 = class_probs_row(
                        X[r, 0], X[r, 1], X[r, 2], X[r, 3], X[r, 4], X[r, 5], X[r, 6], X[r, 7], m
                    )
                    if write_acc:
                        acc[iu, 0] += t0
                        acc[iu, 1] += t1
                        acc[iu, 2] += t2
                        acc[iu, 3] += t3
                        acc[iu, 4] += t4
                        acc[iu, 5] += t5
                        acc[iu, 6] += t6
                        acc[iu, 7] += t7
                    if write_ll:
                        ll[_u64(i - ll_lo), _u64(ll_s0 + s)] = m + math.log(tot)


# ------------------------------------------------------------------------ PSIS
@numba.njit(cache=True, nogil=True)
def _gpdfit(x):  # pragma: no cover - compiled
    """Zhang & Stephens (2009) generalised Pareto fit with the prior on k, as :func:`pyrater._psis.gpdfit`."""
    n = x.size
    n_grid = 30 + int(math.sqrt(n))
    fq = x[int(n / 4 + 0.5) - 1]
    if not fq > x[0]:
        return np.nan, np.nan
    theta = np.empty(n_grid)
    loglik = np.empty(n_grid)
    for g in range(n_grid):
        th = 1.0 / x[n - 1] + (1.0 - math.sqrt(n_grid / (g + 1 - 0.5))) / (3.0 * fq)
        theta[g] = th
        acc = 0.0
        for t in range(n):
            acc += math.log1p(-th * x[t])
        k = acc / n
        loglik[g] = n * (math.log(-th / k) - k - 1.0)
    mx = loglik.max()
    tot = 0.0
    for g in range(n_grid):
        tot += math.exp(loglik[g] - mx)
    lse = mx + math.log(tot)
    wsum = 0.0
    tsum = 0.0
    eps10 = 10.0 * np.finfo(np.float64).eps
    for g in range(n_grid):
        w = math.exp(loglik[g] - lse)
        if w >= eps10:
            wsum += w
            tsum += theta[g] * w
    theta_hat = tsum / wsum
    acc = 0.0
    for t in range(n):
        acc += math.log1p(-theta_hat * x[t])
    k = acc / n
    sigma = -k / theta_hat
    k = (n * k + 10.0 * 0.5) / (n + 10.0)
    return k, sigma


@numba.njit(cache=True, nogil=True)
def _logsumexp(v):  # pragma: no cover - compiled
    m = -np.inf
    for t in range(v.size):
        if v[t] > m:
            m = v[t]
    if not m > -np.inf:
        return m
    tot = 0.0
    for t in range(v.size):
        tot += exp_nonpos(v[t] - m)
    return m + math.log(tot)


@numba.njit(cache=True, nogil=True)
def psis_loo_rows(ll, lo, hi, tail_len, elpd, pareto_k, lppd):  # pragma: no cover - compiled
    """PSIS-LOO of rows ``[lo, hi)`` of ``ll`` (units, S): ``elpd_i``, Pareto k and ``lppd_i``.

    For each row (one unit's log-likelihood over the S draws) the log importance
    ratios ``-ll`` are Pareto-smoothed as :func:`pyrater._psis.psislw` does with
    ``tail_length=tail_len`` (the ``tail_len`` largest ratios above the next largest
    as cutoff, at least ``log`` of the smallest normal double; fewer than 5 tail
    draws above it or a degenerate fit: no smoothing, k = inf), truncated at the
    largest raw ratio and normalised; then ``elpd_i = logsumexp(lw + ll)`` and
    ``lppd_i = logsumexp(ll) - log S``.
    """
    S = ll.shape[1]
    x = np.empty(S)
    lw = np.empty(S)
    tiny_log = math.log(np.finfo(np.float64).tiny)
    for i in range(lo, hi):
        row = ll[i]
        mx = -np.inf
        for t in range(S):
            x[t] = -row[t]
            if x[t] > mx:
                mx = x[t]
        for t in range(S):
            x[t] -= mx
        k = np.inf
        if tail_len < S:
            part = np.partition(x, S - tail_len - 1)
            cutoff = max(part[S - tail_len - 1], tiny_log)
            n_tail = 0
            for t in range(S):
                if x[t] > cutoff:
                    n_tail += 1
            if n_tail >= 5:
                idx = np.empty(n_tail, np.int64)
                q = 0
                for t in range(S):
                    if x[t] > cutoff:
                        idx[q] = t
                        q += 1
                vals = np.empty(n_tail)
                for q in range(n_tail):
                    vals[q] = x[idx[q]]
                order = np.argsort(vals)
                exp_cut = math.exp(cutoff)
                exc = np.empty(n_tail)
                for q in range(n_tail):
                    exc[q] = math.exp(vals[order[q]]) - exp_cut
                kf, sigma = _gpdfit(exc)
                if np.isfinite(kf) and np.isfinite(sigma) and sigma > 0:
                    k = kf
                    for q in range(n_tail):
                        p = (q + 0.5) / n_tail
                        if abs(k) < np.finfo(np.float64).eps:
                            qv = -sigma * math.log1p(-p)
                        else:
                            qv = sigma * math.expm1(-k * math.log1p(-p)) / k
                        x[idx[order[q]]] = math.log(qv + exp_cut)
        for t in range(S):
            if x[t] > 0.0:
                x[t] = 0.0
        norm = _logsumexp(x)
        for t in range(S):
            lw[t] = x[t] - norm + row[t]
        elpd[i] = _logsumexp(lw)
        pareto_k[i] = k
        lppd[i] = _logsumexp(row) - math.log(S)
