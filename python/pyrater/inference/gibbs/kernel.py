"""One chain of the blocked Gibbs sampler, compiled with numba.

The whole chain runs in one call (:func:`run_chain`), which releases the
GIL, so chains run in parallel threads.  Random numbers come from the
chain's own :class:`numpy.random.Generator` (numba draws from its bit
generator directly), so a chain's draws depend on its seed only, never on
thread scheduling.

One sweep (Dawid-Skene family, counts ``C`` in CSR form, unit weights ``w``)
-----------------------------------------------------------------------------
1. For every unit ``i``: ``lj[k] = log pi_k + sum_c C[i, c] LT[c, k]`` with
   ``LT[j*K + l, k] = log theta[j, k, l]`` (one pass over the unit's stored
   counts, on eight SIMD lanes as in :mod:`pyrater.inference.em.kernel` when K <= 8).
   With K <= 8 the units go in blocks of 64, as in the EM kernel: the log joints
   of the block, then their exponentials on eight SIMD lanes with the shared
   branch-free ``exp`` (:func:`pyrater.models._fused.exp_nonpos`), then the
   draws and the scatter; the log of each unit's normaliser is taken only when
   its log-likelihood is written or the units are weighted (otherwise one log
   of a running product of normalisers, as in EM).
   ``w_i = 1``: draw ``z_i`` from ``softmax(lj)``; ``w_i > 1`` (a pattern of
   grouped data): split the tally ``w_i`` over the classes by a multinomial
   draw (conditional binomials).  A known unit keeps its class.
   Then scatter the unit's counts into the class-by-rating counts
   ``N[j*K + l, k] += C[i, j*K + l] * m_ik`` and class totals ``n_k += m_ik``
   (``m_ik`` items of unit ``i`` in class ``k``).  ``log sum_k exp(lj[k])``
   is the unit's marginal log-likelihood under the parameters of the
   previous sweep: it is written as that sweep's ``log_lik`` when that sweep
   was stored (``lj[known]`` for a known unit, as in the Stan programs).
2. ``pi ~ Dirichlet(alpha + n)`` and, by model (``kind``),

   * 0, Dawid-Skene: ``theta[j, k, :] ~ Dirichlet(beta[j, k, :] + N[j, k, :])``;
   * 1, class-conditional: ``p[j, k] ~ Beta(beta1_k + N[j, k, k],
     beta2_k + sum_{l != k} N[j, k, l])``, ``theta[j, k, k] = p[j, k]``,
     ``theta[j, k, l] = (1 - p[j, k]) / (K - 1)``;
   * 2, homogeneous: ``theta[k, :] ~ Dirichlet(beta[k, :] + sum_j N[j, k, :])``;
   * 3, one-coin: ``p[j] ~ Beta(beta1 + sum_k N[j, k, k],
     beta2 + sum_k sum_{l != k} N[j, k, l])``, ``theta[j, k, k] = p[j]``,
     ``theta[j, k, l] = (1 - p[j]) / (K - 1)``;
   * 4, MACE: the spam part of each diagonal count is drawn first,
     ``s[j, l] ~ Binomial(N[j, l, l], r)`` with ``r = (1 - c[j]) xi[j, l] /
     (c[j] + (1 - c[j]) xi[j, l])`` (a rating different from the true class is
     spam for sure), then ``c[j] ~ Beta(beta1 + sum_l (N[j, l, l] - s[j, l]),
     beta2 + spam)`` and ``xi[j] ~ Dirichlet(gamma + spam counts by rating)``;
     ``theta[j, k, l] = c[j] [k == l] + (1 - c[j]) xi[j, l]``.
   * 5, pooled: the Dawid-Skene draw with ``beta[j, k] = 1 + s[k] m[k]``, then
     the population rows ``m[k]`` and concentrations ``s[k]`` given theta by
     slice sampling (:func:`pooled_hyper_step`), which rewrites ``beta``.
   * 6, community: each rater's community ``c_j`` given the counts with theta
     integrated out (Dirichlet-multinomial), then the Dawid-Skene draw with
     ``beta[j, k] = 1 + s[c_j, k] m[c_j, k]``, ``rho`` given the communities,
     each community's ``(m[l], s[l])`` given its members' theta by the pooled
     model's slice sampler, and a relabelling of the communities by the mean
     diagonal of ``m`` (:func:`community_step`).

Dirichlet draws are normalised Gamma draws.

With ``n_pi_moves > 0`` step 1 is split in three (:func:`run_chain`): the
units' rater evidence (:func:`_g_pass`, the log-likelihoods of the previous
draw as above), Metropolis moves on pi given theta with z summed out
(:func:`_pi_moves`), then z given the moved pi from the kept evidence
(:func:`_z_from_evidence`).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...models._fused import exp_nonpos, log_joint_block, prefer_wide_vectors

__all__ = [
    "run_chain",
    "parameter_step",
    "log_theta_matrix",
    "KP",
    "DAWID_SKENE",
    "CLASS_CONDITIONAL",
    "HOMOGENEOUS",
    "ONE_COIN",
    "MACE",
    "POOLED",
    "COMMUNITY",
    "init_state",
    "community_step",
    "pooled_hyper_step",
    "pooled_hyper_log_target",
]

DAWID_SKENE, CLASS_CONDITIONAL, HOMOGENEOUS, ONE_COIN, MACE, POOLED, COMMUNITY = 0, 1, 2, 3, 4, 5, 6
#: slice-sampling updates of every coordinate of the pooled model's (log s[k], alr m[k]) per sweep
POOLED_SLICE_ROUNDS = 3
#: lanes of the class axis in the z step (the kernel supports K <= KP)
KP = 8
#: acceptance rate the marginal pi moves adapt to during warm-up
PI_ACCEPT = 0.3
#: units per block of the z step
_BLOCK = 64
#: flush the running product of normalisers (each in [1, 8]) well before it overflows
_BIG = 2.0**900


@numba.njit(cache=True, nogil=True)
def _dirichlet_into(rng, shape, out):  # pragma: no cover - compiled
    """``out ~ Dirichlet(shape)`` (1-d arrays of equal length) by normalised Gamma draws."""
    tot = 0.0
    for l in range(shape.size):
        g = rng.gamma(shape[l], 1.0)
        out[l] = g
        tot += g
    if tot > 0.0:
        for l in range(shape.size):
            out[l] /= tot
    else:  # every Gamma draw underflowed (all shapes tiny): the mass sits on the largest shape
        best = 0
        for l in range(shape.size):
            out[l] = 0.0
            if shape[l] > shape[best]:
                best = l
        out[best] = 1.0


@numba.njit(cache=True, nogil=True)
def log_theta_matrix(theta, J, K, LT):  # pragma: no cover - compiled
    """``LT[j*K + l, k] = log theta[j, k, l]`` (theta (J, K, K), or (1, K, K) shared by all raters)."""
    prefer_wide_vectors()
    shared = theta.shape[0] == 1
    for j in range(J):
        jj = 0 if shared else j
        for k in range(K):
            for l in range(K):
                x = theta[jj, k, l]
                LT[j * K + l, k] = math.log(x) if x > 0.0 else -np.inf


@numba.njit(cache=True, nogil=True, inline="always")
def _log_joint_rows(indptr, indices, data, LT, log_pi, lo, hi, K, LJ):  # pragma: no cover - compiled
    """``LJ[i - lo, k] = log_pi[k] + sum_c C[i, c] LT[c, k]`` for the units ``lo .. hi - 1`` of a block.

    Called once per block, not per unit: an array handed to a function costs numba a
    reference-count increment and decrement per call (:mod:`pyrater.models._fused`).
    """
    for i in range(lo, hi):
        r = i - lo
        for k in range(K):
            LJ[r, k] = log_pi[k]
        for c in range(indptr[i], indptr[i + 1]):
            col = indices[c]
            v = data[c]
            for k in range(K):
                LJ[r, k] += v * LT[col, k]


@numba.njit(cache=True, nogil=True, inline="always")
def _scatter_rows(indptr, indices, data, lo, hi, Mi, K, N, n_k):  # pragma: no cover - compiled
    """Add the counts of units ``lo .. hi - 1`` to the class-by-rating counts: ``Mi[i - lo, k]`` items in class ``k``.

    Once per block (see :func:`_log_joint_rows`).
    """
    for i in range(lo, hi):
        r = i - lo
        for k in range(K):
            if Mi[r, k] > 0:
                mk = float(Mi[r, k])
                n_k[k] += mk
                for c in range(indptr[i], indptr[i + 1]):
                    N[indices[c], k] += data[c] * mk


_u64 = numba.uint64


@numba.njit(cache=True, nogil=True, inline="always")
def _rotl(x, k):  # pragma: no cover - compiled
    return (x << _u64(k)) | (x >> _u64(64 - k))


@numba.njit(cache=True, nogil=True)
def _uniform_state(rng):  # pragma: no cover - compiled
    """State of a xoshiro256** stream seeded from ``rng`` (four splitmix64 outputs of its integers)."""
    st = np.empty(4, np.uint64)
    for k in range(4):
        z = _u64(rng.integers(0, 2**62)) + _u64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _u64(30))) * _u64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _u64(27))) * _u64(0x94D049BB133111EB)
        st[k] = z ^ (z >> _u64(31))
    return st


@numba.njit(cache=True, nogil=True, inline="always")
def _uniform_scalar(s0, s1, s2, s3):  # pragma: no cover - compiled
    """A uniform double in [0, 1) from the xoshiro256** state ``(s0, s1, s2, s3)``: ``(u, s0, s1, s2, s3)``.

    The z step draws one uniform per item; numba's ``Generator.random`` costs
    about 40 ns a call, this about 1 ns.  The stream is seeded from the chain's
    Generator at the start of every pass, so the draws still depend on the seed only.
    The state is held in scalars: an array handed to a function per item would cost numba a
    reference-count increment and decrement per call (:mod:`pyrater.models._fused`), more
    than the draw itself.
    """
    result = _rotl(s1 * _u64(5), 7) * _u64(9)
    t = s1 << _u64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return (result >> _u64(11)) * (1.0 / 9007199254740992.0), s0, s1, s2, s3


@numba.njit(cache=True, nogil=True, inline="always")
def _draw_block(rng, st, Eb, S, weight, known, blo, bhi, K, m_i, Mi):  # pragma: no cover - compiled
    """The classes of the items of units ``blo .. bhi - 1``: ``Mi[i - blo, k]`` items of unit ``i`` in class ``k``.

    Unit ``i``'s ``w_i`` items fall in class ``k`` with probability ``Eb[i - blo, k] / S[i - blo]``
    (a known class takes them all; weight 0: none); one item by inverse CDF, a tally by
    :func:`_split`.  Once per block, the units in order, so the draws are the stream's in unit order;
    the stream's state is held in scalars meanwhile (:func:`_uniform_scalar`) and written back.
    """
    has_known = known.size > 0
    s0, s1, s2, s3 = st[0], st[1], st[2], st[3]
    for i in range(blo, bhi):
        r = i - blo
        for k in range(K):
            Mi[r, k] = 0
        w = weight[i]
        if w == 0:
            continue
        kk = known[i] if has_known else -1
        if kk >= 0:
            Mi[r, kk] = w
        elif w == 1:  # one item: inverse CDF, as _split draws it
            u, s0, s1, s2, s3 = _uniform_scalar(s0, s1, s2, s3)
            u *= S[r]
            z = K - 1
            acc = 0.0
            for k in range(K - 1):
                acc += Eb[r, k]
                if u < acc:
                    z = k
                    break
            Mi[r, z] = 1
        else:  # a tally (grouped data): rare enough for _split's arrays
            for k in range(K):
                m_i[k] = 0
            _split(rng, Eb[r], S[r], w, K, m_i)
            for k in range(K):
                Mi[r, k] = m_i[k]
    st[0], st[1], st[2], st[3] = s0, s1, s2, s3


@numba.njit(cache=True, nogil=True, inline="always")
def _split(rng, e, s, w, K, m_i):  # pragma: no cover - compiled
    """Put a tally of ``w >= 2`` items over the classes with probabilities ``e / s`` into ``m_i`` (zeroed).

    A multinomial draw by conditional binomials from the chain's Generator; one item is drawn by
    inverse CDF from the uniform stream where the callers hold it (:func:`_draw_block`).
    """
    rem = w  # multinomial split of the pattern's tally by conditional binomials
    rest = s
    for k in range(K - 1):
        if rem == 0:
            break
        p = e[k] / rest if rest > 0.0 else 0.0
        if p >= 1.0:
            m_i[k] = rem
            rem = 0
            break
        if p > 0.0:
            m_i[k] = rng.binomial(rem, p)
            rem -= m_i[k]
        rest -= e[k]
    m_i[K - 1] += rem


@numba.njit(cache=True, nogil=True)
def unit_counts(data):  # pragma: no cover - compiled
    """Whether every stored count is 1 (one rating per item and rater; False without counts)."""
    for c in range(data.size):
        if data[c] != 1.0:
            return False
    return data.size > 0


@numba.njit(cache=True, nogil=True)
def z_pass_rb(
    indptr, indices, data, weight, known, log_pi, LT, K, rng, sample, ll_row, N, n_k, rb, ones
):  # pragma: no cover - compiled
    """Step 1 of a sweep over every unit; returns ``sum_i w_i log p(y_i)`` (previous parameters).

    ``sample`` False: only the log-likelihoods (``ll_row``) are computed;
    ``ll_row`` empty: they are not written.  ``rb`` (I, K), or empty:
    ``rb[i, k] += P(z_i = k | y_i, pi, theta)``, the conditional class
    probabilities the z step computes anyway; summed over the kept draws they
    are the Rao-Blackwellised class probabilities, at the cost of one addition
    per class and unit.  ``ones``: every stored count is 1 (:func:`unit_counts`,
    decided once per chain or partition), so the gather skips the counts
    (:func:`pyrater.models._fused.log_joint_block`).
    """
    prefer_wide_vectors()
    if K <= KP:
        return _z_pass_lanes(indptr, indices, data, weight, known, log_pi, LT, K, rng, sample, ll_row, N, n_k, rb, ones)
    return _z_pass_plain(indptr, indices, data, weight, known, log_pi, LT, K, rng, sample, ll_row, N, n_k, rb)


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
def _z_pass_lanes(
    indptr, indices, data, weight, known, log_pi, LT, K, rng, sample, ll_row, N, n_k, rb, ones
):  # pragma: no cover - compiled
    """:func:`z_pass_rb` for K <= 8: blocks of 64 units, exponentials on eight SIMD lanes."""
    prefer_wide_vectors()
    I = indptr.size - 1
    ninf = -np.inf
    has_known = known.size > 0
    write_ll = ll_row.size > 0
    write_rb = rb.size > 0
    weighted = False
    for i in range(I):
        if weight[i] != 1:
            weighted = True
            break
    X = np.empty((_BLOCK, KP))  # per block: lj - max, then exp(lj - max)
    M = np.empty(_BLOCK)
    Ssum = np.empty(_BLOCK)
    e = np.empty(K)
    m_i = np.zeros(K, np.int64)
    total = 0.0
    prod = 1.0
    st = _uniform_state(rng) if sample else np.zeros(4, np.uint64)
    s0, s1, s2, s3 = st[0], st[1], st[2], st[3]  # the stream's state in scalars (see _uniform_scalar)
    # counts accumulated class-major (rows of one class contiguous: fewer cache lines per scatter)
    Nt = np.zeros((K, N.shape[0])) if sample else np.zeros((K, 0))
    nt_k = np.zeros(K)
    for blo in range(0, I, _BLOCK):
        bhi = min(blo + _BLOCK, I)
        # 1. log joints of the block (independent gathers the CPU overlaps)
        log_joint_block(indptr, indices, data, ones, LT, log_pi, known, blo, bhi, X, M)
        # 2. exponentials on eight lanes, and the normalisers
        for rr in range(bhi - blo):
            r = _u64(rr)
            e0 = exp_nonpos(X[r, 0])
            e1 = exp_nonpos(X[r, 1])
            e2 = exp_nonpos(X[r, 2])
            e3 = exp_nonpos(X[r, 3])
            e4 = exp_nonpos(X[r, 4])
            e5 = exp_nonpos(X[r, 5])
            e6 = exp_nonpos(X[r, 6])
            e7 = exp_nonpos(X[r, 7])
            X[r, 0] = e0
            X[r, 1] = e1
            X[r, 2] = e2
            X[r, 3] = e3
            X[r, 4] = e4
            X[r, 5] = e5
            X[r, 6] = e6
            X[r, 7] = e7
            Ssum[r] = ((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7))
        # 3. log-likelihoods, the class draws and the scatter of the counts
        for i in range(blo, bhi):
            iu = _u64(i)
            r = _u64(i - blo)
            m = M[r]
            s = Ssum[r]
            w = weight[iu]
            if not m > ninf:  # no finite log joint: the unit cannot be placed (as the plain loop)
                ll = ninf
                s = 0.0
                for k in range(K):
                    X[r, k] = 0.0
                if write_ll:
                    ll_row[iu] = ll
                total += w * ll
            elif write_ll or weighted:
                ll = m + math.log(s)
                if write_ll:
                    ll_row[iu] = ll
                total += w * ll
            else:
                total += m
                prod *= s
                if prod > _BIG:
                    total += math.log(prod)
                    prod = 1.0
            if write_rb:  # this unit's class probabilities under the previous parameters
                inv = 1.0 / s if m > ninf else np.nan
                for k in range(K):
                    rb[iu, k] += X[r, k] * inv
            if not sample or w == 0:
                continue
            kk = known[iu] if has_known else -1
            if w == 1 and kk < 0:
                # one item: its class by inverse CDF, branch-free (the count of cumulative sums <= u)
                u, s0, s1, s2, s3 = _uniform_scalar(s0, s1, s2, s3)
                u *= s
                z = 0
                acc = 0.0
                for k in range(K - 1):
                    acc += X[r, k]
                    z += 1 if u >= acc else 0
                zu = _u64(z)
                c = _u64(indptr[iu])
                b = _u64(indptr[iu + _u64(1)])
                while c < b:
                    Nt[zu, _u64(indices[c])] += data[c]
                    c += _u64(1)
                nt_k[z] += 1.0
                continue
            for k in range(K):
                m_i[k] = 0
            if kk >= 0:
                m_i[kk] = w
            else:
                for k in range(K):
                    e[k] = X[r, k]
                _split(rng, e, s, w, K, m_i)
            for k in range(K):
                if m_i[k] > 0:
                    mk = float(m_i[k])
                    nt_k[k] += mk
                    for c in range(indptr[i], indptr[i + 1]):
                        Nt[k, indices[c]] += data[c] * mk
    total += math.log(prod)
    if sample:  # the class-by-rating counts in the caller's layout
        JK = N.shape[0]
        for k in range(K):
            n_k[k] = nt_k[k]
            for col in range(JK):
                N[col, k] = Nt[k, col]
    return total


@numba.njit(cache=True, nogil=True)
def _z_pass_plain(
    indptr, indices, data, weight, known, log_pi, LT, K, rng, sample, ll_row, N, n_k, rb
):  # pragma: no cover - compiled
    """:func:`z_pass_rb` for K > 8: blocks of 64 units, a plain loop over the classes.

    The same draws as one unit at a time: the units are visited in order, their counts added
    in order after each block (:func:`_scatter_rows`).
    """
    prefer_wide_vectors()
    I = indptr.size - 1
    has_known = known.size > 0
    write_ll = ll_row.size > 0
    write_rb = rb.size > 0
    LJ = np.empty((_BLOCK, K))
    Eb = np.empty((_BLOCK, K))  # per block: exp(lj - max), then the class draws' weights
    S = np.empty(_BLOCK)
    Mi = np.zeros((_BLOCK, K), np.int64)
    m_i = np.zeros(K, np.int64)
    total = 0.0
    st = _uniform_state(rng) if sample else np.zeros(4, np.uint64)
    if sample:
        N[:, :] = 0.0
        n_k[:] = 0.0
    for blo in range(0, I, _BLOCK):
        bhi = min(blo + _BLOCK, I)
        _log_joint_rows(indptr, indices, data, LT, log_pi, blo, bhi, K, LJ)
        for i in range(blo, bhi):
            r = i - blo
            w = weight[i]
            kk = known[i] if has_known else -1
            s = 0.0
            if kk >= 0:
                ll = LJ[r, kk]
            else:
                mx = LJ[r, 0]
                for k in range(1, K):
                    if LJ[r, k] > mx:
                        mx = LJ[r, k]
                for k in range(K):
                    Eb[r, k] = math.exp(LJ[r, k] - mx) if LJ[r, k] > -np.inf else 0.0
                    s += Eb[r, k]
                ll = mx + math.log(s)
            S[r] = s
            if write_ll:
                ll_row[i] = ll
            total += w * ll
            if write_rb:
                if kk >= 0:
                    rb[i, kk] += 1.0
                else:
                    inv = 1.0 / s if s > 0.0 else np.nan
                    for k in range(K):
                        rb[i, k] += Eb[r, k] * inv
        if sample:  # the block's classes, then their counts
            _draw_block(rng, st, Eb, S, weight, known, blo, bhi, K, m_i, Mi)
            _scatter_rows(indptr, indices, data, blo, bhi, Mi, K, N, n_k)
    return total


@numba.njit(cache=True, nogil=True)
def _trigamma(a):  # pragma: no cover - compiled
    """psi_1(a) for a > 0: recurrence up to a >= 10, then the asymptotic series (relative error < 1e-10)."""
    r = 0.0
    while a < 10.0:
        r += 1.0 / (a * a)
        a += 1.0
    ia = 1.0 / a
    ia2 = ia * ia
    return r + ia + 0.5 * ia2 + ia * ia2 * (1.0 / 6.0 - ia2 * (1.0 / 30.0 - ia2 * (1.0 / 42.0 - ia2 / 30.0)))


@numba.njit(cache=True, nogil=True)
def _g_pass(indptr, indices, data, weight, known, pi, log_pi, zero_pad, LT, K, E, ll_row, rb):  # pragma: no cover
    """Rater evidence of every unit, kept for the marginal pi move and the z step.

    ``E[i, k] = exp(g_ik - max_k g_ik)`` with ``g_ik = sum_c C[i, c] LT[c, k]``
    for the units whose class is unknown (the rows of known units are not
    written: neither the pi move nor the z step reads them).  Returns
    ``sum_i w_i log p(y_i | pi, theta)`` (``pi``, ``log_pi`` the current pi)
    and writes the per-unit terms to ``ll_row`` unless it is empty; adds the
    class probabilities ``pi_k E[i, k] / sum_k pi_k E[i, k]`` to ``rb`` unless it is empty.
    """
    prefer_wide_vectors()
    I = indptr.size - 1
    has_known = known.size > 0
    write_ll = ll_row.size > 0
    write_rb = rb.size > 0
    LJ = np.empty((_BLOCK, K))
    total = 0.0
    for blo in range(0, I, _BLOCK):
        bhi = min(blo + _BLOCK, I)
        _log_joint_rows(indptr, indices, data, LT, zero_pad, blo, bhi, K, LJ)
        for i in range(blo, bhi):
            r = i - blo
            kk = known[i] if has_known else -1
            if kk >= 0:
                ll = log_pi[kk] + LJ[r, kk]
            else:
                mx = LJ[r, 0]
                for k in range(1, K):
                    if LJ[r, k] > mx:
                        mx = LJ[r, k]
                s = 0.0
                for k in range(K):
                    x = math.exp(LJ[r, k] - mx) if LJ[r, k] > -np.inf else 0.0
                    E[i, k] = x
                    s += x * pi[k]
                ll = mx + math.log(s) if s > 0.0 else -np.inf
                if write_rb:
                    inv = 1.0 / s if s > 0.0 else np.nan
                    for k in range(K):
                        rb[i, k] += E[i, k] * pi[k] * inv
            if write_rb and kk >= 0:
                rb[i, kk] += 1.0
            if write_ll:
                ll_row[i] = ll
            total += weight[i] * ll
    return total


@numba.njit(cache=True, nogil=True)
def _pi_log_target(pi, E, weight, known, a):  # pragma: no cover - compiled
    """``log p(pi | theta, y)`` up to a constant, in additive log-ratio coordinates (z summed out).

    ``sum_k a_k log pi_k + sum_{i unknown} w_i log sum_k pi_k E[i, k]``, with
    ``a = alpha + known-class counts`` (the log-ratio Jacobian cancels the
    ``- 1`` of the Dirichlet prior).
    """
    K = pi.size
    I = E.shape[0]
    has_known = known.size > 0
    t = 0.0
    for k in range(K):
        if a[k] != 0.0:
            t += a[k] * math.log(pi[k]) if pi[k] > 0.0 else -np.inf
    for i in range(I):
        if has_known and known[i] >= 0:
            continue
        w = weight[i]
        if w == 0:
            continue
        s = 0.0
        for k in range(K):
            s += pi[k] * E[i, k]
        t += w * math.log(s) if s > 0.0 else -np.inf
    return t


@numba.njit(cache=True, nogil=True)
def _pi_moves(pi, E, weight, known, a, n_moves, scale, d, rng, prop, stats):  # pragma: no cover - compiled
    """Random-walk Metropolis on ``log(pi_k / pi_K)`` targeting ``p(pi | theta, y)``; updates ``pi`` in place.

    Proposal noise ``scale * (sqrt(d_k) u_k + sqrt(d_K) u_0)`` for ``k < K``
    (``u`` standard normal): the covariance ``scale^2 (diag(d) + d_K 11')``
    of the log-ratios of a Dirichlet with shape ``a`` (``d_k = psi_1(a_k)``).
    ``stats[0] += accepted``, ``stats[1] += proposed``.
    """
    K = pi.size
    cur = _pi_log_target(pi, E, weight, known, a)
    sc = math.sqrt(d[K - 1])
    for _ in range(n_moves):
        u0 = rng.standard_normal()
        mx = 0.0
        for k in range(K - 1):
            x = math.log(pi[k] / pi[K - 1]) + scale * (math.sqrt(d[k]) * rng.standard_normal() + sc * u0)
            prop[k] = x
            if x > mx:
                mx = x
        tot = math.exp(-mx)
        for k in range(K - 1):
            prop[k] = math.exp(prop[k] - mx)
            tot += prop[k]
        prop[K - 1] = math.exp(-mx)
        ok = True
        for k in range(K):
            prop[k] /= tot
            if not prop[k] > 0.0:
                ok = False
        stats[1] += 1.0
        if not ok:
            continue
        new = _pi_log_target(prop, E, weight, known, a)
        if math.log(rng.random()) < new - cur:
            for k in range(K):
                pi[k] = prop[k]
            cur = new
            stats[0] += 1.0


@numba.njit(cache=True, nogil=True)
def _z_from_evidence(indptr, indices, data, weight, known, pi, E, K, rng, N, n_k):  # pragma: no cover - compiled
    """Step 1 of a sweep from kept evidence: ``z_i ~ pi_k E[i, k]`` (tallies split), counts scattered."""
    prefer_wide_vectors()
    I = indptr.size - 1
    has_known = known.size > 0
    Eb = np.zeros((_BLOCK, K))
    S = np.zeros(_BLOCK)
    m_i = np.zeros(K, np.int64)
    Mi = np.zeros((_BLOCK, K), np.int64)
    st = _uniform_state(rng)
    N[:, :] = 0.0
    n_k[:] = 0.0
    for blo in range(0, I, _BLOCK):
        bhi = min(blo + _BLOCK, I)
        for i in range(blo, bhi):
            if has_known and known[i] >= 0:
                continue
            r = i - blo
            s = 0.0
            for k in range(K):
                Eb[r, k] = pi[k] * E[i, k]
                s += Eb[r, k]
            S[r] = s
        _draw_block(rng, st, Eb, S, weight, known, blo, bhi, K, m_i, Mi)
        _scatter_rows(indptr, indices, data, blo, bhi, Mi, K, N, n_k)


@numba.njit(cache=True, nogil=True)
def pooled_hyper_log_target(J, K, T, bm, a_s, b_s, u, eta, m):  # pragma: no cover - compiled
    """Log density of ``(u = log s, eta)`` given the raters' rows, up to a constant; writes ``m = softmax(eta)``.

    ``eta`` (K,) with ``eta[K-1] = 0`` (additive log-ratio of ``m``); ``T[l] = sum_j
    log theta[j, k, l]``; the target is ``sum_j log Dirichlet(theta[j, k] | 1 + s m)
    + log Dirichlet(m | bm) + log Gamma(s | a_s, b_s)`` plus the log Jacobians
    ``sum_l log m_l`` (alr) and ``log s``.
    """
    mx = eta[0]
    for l in range(1, K):
        mx = max(mx, eta[l])
    tot = 0.0
    for l in range(K):
        m[l] = math.exp(eta[l] - mx)
        tot += m[l]
    lse = mx + math.log(tot)
    sv = math.exp(u)
    out = J * math.lgamma(K + sv) + a_s * u - b_s * sv
    for l in range(K):
        m[l] /= tot
        lm = eta[l] - lse
        out += -J * math.lgamma(1.0 + sv * m[l]) + sv * m[l] * T[l] + bm[l] * lm
    return out


@numba.njit(cache=True, nogil=True)
def _slice_coordinate(J, K, T, bm, a_s, b_s, x, c, cur, rng, m):  # pragma: no cover - compiled
    """One stepping-out / shrinkage slice update (Neal 2003) of coordinate ``c`` of ``x = (u, eta[:K-1])``."""
    width = 1.0
    level = cur + math.log(rng.random())
    x0 = x[c]
    left = x0 - width * rng.random()
    right = left + width
    eta = x[1:]
    steps = 64  # at most this many steps out in all, split at random between the sides (Neal 2003, fig. 3)
    n_left = int(steps * rng.random())
    n_right = steps - 1 - n_left
    while n_left > 0:
        x[c] = left
        if pooled_hyper_log_target(J, K, T, bm, a_s, b_s, x[0], eta, m) <= level:
            break
        left -= width
        n_left -= 1
    while n_right > 0:
        x[c] = right
        if pooled_hyper_log_target(J, K, T, bm, a_s, b_s, x[0], eta, m) <= level:
            break
        right += width
        n_right -= 1
    for _ in range(200):  # shrink
        x[c] = left + (right - left) * rng.random()
        new = pooled_hyper_log_target(J, K, T, bm, a_s, b_s, x[0], eta, m)
        if new > level:
            return new
        if x[c] < x0:
            left = x[c]
        else:
            right = x[c]
    x[c] = x0
    return pooled_hyper_log_target(J, K, T, bm, a_s, b_s, x[0], eta, m)


@numba.njit(cache=True, nogil=True)
def pooled_hyper_step(J, K, theta, beta, beta1, beta2, rng, p, n_rounds):  # pragma: no cover - compiled
    """Update the pooled model's ``(m[k], s[k])`` given theta; leaves their conditional invariant.

    The state is read from ``beta[0, k] = 1 + s[k] m[k]`` and written back to
    ``beta[j, k]`` for every rater ``j < J``; ``beta[J, k]`` is the Dirichlet
    prior on ``m[k]``, ``beta1[k]`` and ``beta2[k]`` the Gamma shape and rate of
    ``s[k]``.  Given theta the rows k are independent; each gets ``n_rounds``
    univariate slice updates of ``log s[k]`` and of every free coordinate of
    ``m[k]``'s additive log-ratio.  ``p[k] = m[k]``, ``p[K, k] = s[k]``.
    """
    T = np.empty(K)
    x = np.empty(K + 1)  # (u = log s, eta[0], ..., eta[K-1]) with eta[K-1] = 0 fixed: slice over x[:K]
    m = np.empty(K)
    for k in range(K):
        for l in range(K):
            t = 0.0
            for j in range(J):
                t += math.log(max(theta[j, k, l], 1e-300))
            T[l] = t
        sv = -K
        for l in range(K):
            sv += beta[0, k, l]
        sv = max(sv, 1e-300)
        x[0] = math.log(sv)
        ref = math.log(max((beta[0, k, K - 1] - 1.0) / sv, 1e-300))
        for l in range(K):
            x[1 + l] = math.log(max((beta[0, k, l] - 1.0) / sv, 1e-300)) - ref
        x[K] = 0.0
        bm = beta[J, k]
        cur = pooled_hyper_log_target(J, K, T, bm, beta1[k], beta2[k], x[0], x[1:], m)
        for _ in range(n_rounds):
            for c in range(K):
                cur = _slice_coordinate(J, K, T, bm, beta1[k], beta2[k], x, c, cur, rng, m)
        pooled_hyper_log_target(J, K, T, bm, beta1[k], beta2[k], x[0], x[1:], m)  # m at the final x
        sv = math.exp(x[0])
        for l in range(K):
            p[k, l] = m[l]
            a = 1.0 + sv * m[l]
            for j in range(J):
                beta[j, k, l] = a
        p[K, k] = sv


@numba.njit(cache=True, nogil=True)
def _community_start(J, K, L, beta1, p):  # pragma: no cover - compiled
    """A chain's first community state in ``p``: community l's diagonal from 0.9 down, s at its prior mode, rho even."""
    s0 = max((beta1[0] - 1.0) / beta1[1], 1e-3)
    for l in range(L):
        d = 0.9 - (0.9 - 1.0 / K) * l / L
        for k in range(K):
            for q in range(K):
                p[l * K + k, q] = d if q == k else (1.0 - d) / (K - 1)
            p[L * K + l, k] = s0
        p[L * K + L, l] = 1.0 / L


@numba.njit(cache=True, nogil=True)
def community_step(J, K, N, theta, beta, beta1, beta2, rng, p, shape, row, n_rounds):  # pragma: no cover
    """The community model's parameter step given the class counts: ``c``, theta, ``rho``, ``(m, s)``, relabel.

    A partially collapsed Gibbs step (van Dyk & Park 2008): each rater's
    community is drawn with theta integrated out, ``c_j | z, m, s, rho``
    (Dirichlet-multinomial likelihood of the rater's counts ``N``), then
    ``theta[j] | z, c_j, m, s`` (Dirichlet): together an exact draw of
    ``(c, theta)`` from their conditional, which lets a rater change community
    in one step (given theta alone, ``c_j`` sticks to the community theta was
    drawn around).  Then ``rho | c`` and each community's ``(m[l], s[l])`` given
    its members' theta by the pooled model's slice sampler, and a relabelling
    of the communities by the mean diagonal of ``m`` (largest first), which
    leaves the posterior invariant since the prior treats the communities alike.

    ``N`` (J*K, K): ``N[j*K + q, k]`` ratings q of items of class k by rater j.
    ``L = beta2[0]`` communities; ``beta1 = (s_shape, s_rate, rho_alpha)``;
    ``beta[J, k]`` the Dirichlet prior on every ``m[l, k]``; ``beta[j, k]``
    (j < J) is set to ``1 + s[c_j, k] m[c_j, k]`` for the theta draw.  ``p``
    (L*K + L + 1 + J, max(K, L)) holds the state and what is reported:
    ``m[l, k]`` in row ``l*K + k``, ``s[l]`` in row ``L*K + l``, ``rho`` in row
    ``L*K + L`` and, in row ``L*K + L + 1 + j``, rater j's community
    probabilities ``P(c_j = l | z, m, s, rho)`` (their average over draws is
    the Rao-Blackwellised posterior probability).  An all-zero ``rho`` row (a
    new chain) is replaced by :func:`_community_start`.
    """
    L = int(beta2[0] + 0.5)
    a_s, b_s, a_rho = beta1[0], beta1[1], beta1[2]
    R = L * K + L  # row of rho
    tot = 0.0
    for l in range(L):
        tot += p[R, l]
    if tot <= 0.0:
        _community_start(J, K, L, beta1, p)
    # c_j | z: log rho_l + sum_k log DirMult(N[j, k] | 1 + s[l, k] m[l, k])
    A = np.empty((L, K, K))  # the Dirichlet parameters 1 + s[l, k] m[l, k, q]
    lgA = np.empty((L, K, K))
    for l in range(L):
        for k in range(K):
            for q in range(K):
                A[l, k, q] = 1.0 + p[L * K + l, k] * p[l * K + k, q]
                lgA[l, k, q] = math.lgamma(A[l, k, q])
    c = np.empty(J, np.int64)
    lp = np.empty(L)
    count = np.zeros(L)
    for j in range(J):
        mx = -np.inf
        for l in range(L):
            v = math.log(max(p[R, l], 1e-300))
            for k in range(K):
                n_jk = 0.0
                for q in range(K):
                    x = N[j * K + q, k]
                    if x > 0.0:
                        n_jk += x
                        v += math.lgamma(A[l, k, q] + x) - lgA[l, k, q]
                if n_jk > 0.0:
                    a0 = K + p[L * K + l, k]
                    v += math.lgamma(a0) - math.lgamma(a0 + n_jk)
            lp[l] = v
            mx = max(mx, v)
        tot = 0.0
        for l in range(L):
            lp[l] = math.exp(lp[l] - mx)
            tot += lp[l]
        for l in range(L):
            p[R + 1 + j, l] = lp[l] / tot
        u = rng.random() * tot
        cj = L - 1
        acc = 0.0
        for l in range(L):
            acc += lp[l]
            if u < acc:
                cj = l
                break
        c[j] = cj
        count[cj] += 1.0
    # theta[j] | z, c_j: the Dawid-Skene draw with the community's prior
    for j in range(J):
        l = c[j]
        for k in range(K):
            for q in range(K):
                beta[j, k, q] = A[l, k, q]
                shape[q] = A[l, k, q] + N[j * K + q, k]
            _dirichlet_into(rng, shape, row)
            for q in range(K):
                theta[j, k, q] = row[q]
    logt = np.empty((J, K, K))
    for j in range(J):
        for k in range(K):
            for q in range(K):
                logt[j, k, q] = math.log(max(theta[j, k, q], 1e-300))
    # rho | c
    shp = np.empty(L)
    out = np.empty(L)
    for l in range(L):
        shp[l] = a_rho + count[l]
    _dirichlet_into(rng, shp, out)
    for l in range(L):
        p[R, l] = out[l]
    # (m[l, k], s[l, k]) | the members' rows: the pooled model's slice sampler with n_l raters
    Ts = np.zeros((L, K, K))  # sum over the members of community l of log theta[j]
    for j in range(J):
        l = c[j]
        for k in range(K):
            for q in range(K):
                Ts[l, k, q] += logt[j, k, q]
    T = np.empty(K)
    x = np.empty(K + 1)
    mrow = np.empty(K)
    for l in range(L):
        n_l = int(count[l])
        for k in range(K):
            for q in range(K):
                T[q] = Ts[l, k, q]
            sv = max(p[L * K + l, k], 1e-300)
            x[0] = math.log(sv)
            ref = math.log(max(p[l * K + k, K - 1], 1e-300))
            for q in range(K):
                x[1 + q] = math.log(max(p[l * K + k, q], 1e-300)) - ref
            x[K] = 0.0
            bm = beta[J, k]
            cur = pooled_hyper_log_target(n_l, K, T, bm, a_s, b_s, x[0], x[1:], mrow)
            for _ in range(n_rounds):
                for co in range(K):
                    cur = _slice_coordinate(n_l, K, T, bm, a_s, b_s, x, co, cur, rng, mrow)
            pooled_hyper_log_target(n_l, K, T, bm, a_s, b_s, x[0], x[1:], mrow)
            for q in range(K):
                p[l * K + k, q] = mrow[q]
            p[L * K + l, k] = math.exp(x[0])
    # relabel: communities by the mean diagonal of m, largest first (insertion sort of L labels)
    score = np.empty(L)
    order = np.empty(L, np.int64)
    for l in range(L):
        v = 0.0
        for k in range(K):
            v += p[l * K + k, k]
        score[l] = v
        order[l] = l
    for a in range(1, L):
        b = a
        while b > 0 and score[order[b]] > score[order[b - 1]]:
            tmp = order[b]
            order[b] = order[b - 1]
            order[b - 1] = tmp
            b -= 1
    moved = False
    for l in range(L):
        if order[l] != l:
            moved = True
    if moved:
        old = p[: R + 1 + J].copy()
        rank = np.empty(L, np.int64)
        for l in range(L):
            rank[order[l]] = l
            for k in range(K):
                for q in range(K):
                    p[l * K + k, q] = old[order[l] * K + k, q]
                p[L * K + l, k] = old[L * K + order[l], k]
            p[R, l] = old[R, order[l]]
            for j in range(J):
                p[R + 1 + j, l] = old[R + 1 + j, order[l]]
        for j in range(J):
            c[j] = rank[c[j]]


@numba.njit(cache=True, nogil=True)
def init_state(kind, p):  # pragma: no cover - compiled
    """The per-rater state ``p`` (J, columns) a chain starts from: MACE competence 0.5, xi uniform.

    Only MACE's parameter step reads its previous state (to split the diagonal
    counts into competent and spam ratings); the other kinds overwrite ``p``.
    """
    J, cols = p.shape
    for j in range(J):
        for m in range(cols):
            p[j, m] = 0.0
        if kind == MACE:
            p[j, 0] = 0.5
            for m in range(1, cols):
                p[j, m] = 1.0 / (cols - 1)


@numba.njit(cache=True, nogil=True)
def parameter_step(kind, J, K, N, n_k, alpha, beta, beta1, beta2, rng, pi, theta, p, shape, row):  # pragma: no cover
    """Step 2 of a sweep: pi, theta (and p) from their conditionals given the counts."""
    prefer_wide_vectors()
    for k in range(K):
        shape[k] = alpha[k] + n_k[k]
    _dirichlet_into(rng, shape, pi)
    if kind == COMMUNITY:  # beta (J + 1, K, K): work space for the raters' 1 + s m, then the prior on m
        community_step(J, K, N, theta, beta, beta1, beta2, rng, p, shape, row, POOLED_SLICE_ROUNDS)
    elif kind == DAWID_SKENE or kind == POOLED:
        for j in range(J):
            for k in range(K):
                for l in range(K):
                    shape[l] = beta[j, k, l] + N[j * K + l, k]
                _dirichlet_into(rng, shape, row)
                for l in range(K):
                    theta[j, k, l] = row[l]
        if kind == POOLED:  # beta (J + 1, K, K): the raters' 1 + s m (rewritten), then the prior on m
            pooled_hyper_step(J, K, theta, beta, beta1, beta2, rng, p, POOLED_SLICE_ROUNDS)
    elif kind == HOMOGENEOUS:
        for k in range(K):
            for l in range(K):
                tot = 0.0
                for j in range(J):
                    tot += N[j * K + l, k]
                shape[l] = beta[0, k, l] + tot
            _dirichlet_into(rng, shape, row)
            for l in range(K):
                theta[0, k, l] = row[l]
    elif kind == MACE:  # p (J, K + 1): competence in column 0, xi after it; beta[0, 0] = gamma (K,)
        for j in range(J):
            c = p[j, 0]
            competent = 0.0
            spam = 0.0
            for l in range(K):
                n_d = int(N[j * K + l, l] + 0.5)  # ratings l of items of class l (integer counts given z)
                off = 0.0
                for k in range(K):
                    if k != l:
                        off += N[j * K + l, k]
                sd = (1.0 - c) * p[j, 1 + l]
                r = sd / (c + sd) if sd > 0.0 else 0.0
                s = 0
                if n_d > 0 and r > 0.0:
                    s = n_d if r >= 1.0 else rng.binomial(n_d, r)
                competent += n_d - s
                spam += off + s
                shape[l] = beta[0, 0, l] + off + s
            _dirichlet_into(rng, shape, row)
            a = rng.gamma(beta1[0] + competent, 1.0)
            b = rng.gamma(beta2[0] + spam, 1.0)
            cj = a / (a + b) if a + b > 0.0 else (1.0 if beta1[0] >= beta2[0] else 0.0)
            p[j, 0] = cj
            for l in range(K):
                p[j, 1 + l] = row[l]
            for k in range(K):
                for l in range(K):
                    theta[j, k, l] = (1.0 - cj) * row[l] + (cj if l == k else 0.0)
    elif kind == ONE_COIN:  # beta1, beta2: the scalar prior in entry 0; p (J, 1)
        for j in range(J):
            right = 0.0
            tot = 0.0
            for k in range(K):
                right += N[j * K + k, k]
                for l in range(K):
                    tot += N[j * K + l, k]
            a = rng.gamma(beta1[0] + right, 1.0)
            b = rng.gamma(beta2[0] + (tot - right), 1.0)
            pj = a / (a + b) if a + b > 0.0 else (1.0 if beta1[0] >= beta2[0] else 0.0)
            p[j, 0] = pj
            off = (1.0 - pj) / (K - 1)
            for k in range(K):
                for l in range(K):
                    theta[j, k, l] = pj if l == k else off
    else:  # class-conditional
        for j in range(J):
            for k in range(K):
                right = N[j * K + k, k]
                tot = 0.0
                for l in range(K):
                    tot += N[j * K + l, k]
                a = rng.gamma(beta1[k] + right, 1.0)
                b = rng.gamma(beta2[k] + (tot - right), 1.0)
                pk = a / (a + b) if a + b > 0.0 else (1.0 if beta1[k] >= beta2[k] else 0.0)
                p[j, k] = pk
                off = (1.0 - pk) / (K - 1)
                for l in range(K):
                    theta[j, k, l] = pk if l == k else off


@numba.njit(cache=True, nogil=True)
def run_chain(
    indptr,
    indices,
    data,
    weight,
    known,
    kind,
    K,
    alpha,
    beta,
    beta1,
    beta2,
    N0,
    n0,
    n_warmup,
    n_sweeps,
    thin,
    rng,
    pi_out,
    theta_out,
    p_out,
    ll_out,
    ll_total_out,
    n_pi_moves,
    E,
    mh_out,
    prog,
    rb_out,
):  # pragma: no cover - compiled
    """Run one chain: a parameter step from the starting counts, then the sweeps.

    Parameters
    ----------
    indptr, indices : int arrays
        CSR structure of the count matrix (I, J*K).
    data : float64 array (nnz,)
        The counts.
    weight : int64 array (I,)
        Items per unit (1, or the pattern tally).
    known : int64 array (I,) or empty
        Known class code per unit, -1 unknown.
    kind : int
        :data:`DAWID_SKENE`, :data:`CLASS_CONDITIONAL`, :data:`HOMOGENEOUS`, :data:`ONE_COIN`, :data:`MACE` or
        :data:`POOLED` or :data:`COMMUNITY`.
    K : int
    alpha : float64 (K,)
    beta : float64 (J, K, K) (Dawid-Skene), (1, K, K) (homogeneous; MACE: gamma in ``beta[0, 0]``),
        (J + 1, K, K) (pooled: the raters' ``1 + s m``, a working copy the chain rewrites, then the
        prior on ``m``; community: the same with the raters' communities' ``1 + s m``), or unused
    beta1, beta2 : float64 (K,) (class-conditional; one-coin and MACE: the scalar prior in entry 0;
        pooled: the Gamma shape and rate of ``s``; community: ``beta1 = (s_shape, s_rate, rho_alpha)``,
        ``beta2 = (L,)``), or unused
    N0 : float64 (J*K, K), n0 : float64 (K,)
        Counts of a starting class assignment (overwritten: the working counts).
    n_warmup, n_sweeps, thin : int
        Warm-up sweeps, then ``n_sweeps`` sweeps of which every ``thin``-th is
        kept (``n_sweeps // thin`` draws, the rows of the outputs).
    rng : numpy Generator
        The chain's random stream.
    pi_out : float64 (n_keep, K)
    theta_out : float64 (n_keep, J, K, K), or (n_keep, 1, K, K) for homogeneous
    p_out : float64 (n_keep, J, K) (class-conditional), (n_keep, J, 1) (one-coin),
        (n_keep, J, K + 1) (MACE: competence, then xi), (n_keep, K + 1, K) (pooled: ``m`` then ``s``),
        (n_keep, L*K + L + 1 + J, max(K, L)) (community, see :func:`community_step`) or empty
    ll_out : float64 (n_keep, I) or empty (per-unit log-likelihood of each kept draw)
    ll_total_out : float64 (n_keep,)
        ``sum_i w_i log p(y_i | pi, theta)`` of each kept draw.
    n_pi_moves : int
        Metropolis moves on ``pi`` given ``theta`` with z summed out, per
        sweep, before the z step (0: plain blocked Gibbs).  The proposal's
        shape and scale adapt during warm-up only (towards acceptance
        :data:`PI_ACCEPT`) and are then frozen.
    E : float64 (I, K), or (0, K) when ``n_pi_moves == 0``
        Work space: each unit's rater evidence.
    mh_out : float64 (3,)
        Accepted and proposed pi moves after warm-up, and the final scale.
    prog : int64 (1,)
        Sweeps done so far (written after every sweep; read by the progress bar).
    rb_out : float64 (I, K) or (0, K)
        Sum over the kept draws of the class probabilities ``P(z_i | y_i, pi_s, theta_s)``
        (computed by the z step after each kept draw, and by one last pass), or empty.
    """
    prefer_wide_vectors()
    JK = N0.shape[0]
    J = JK // K
    I = indptr.size - 1
    ones = unit_counts(data)  # every stored count 1: the z step's gather skips the counts
    Jt = theta_out.shape[1]
    pi = np.empty(K)
    theta = np.empty((Jt, K, K))
    has_p = kind == CLASS_CONDITIONAL or kind == ONE_COIN or kind == MACE or kind == POOLED or kind == COMMUNITY
    p = np.empty((p_out.shape[1], p_out.shape[2])) if has_p else np.empty((0, K))
    init_state(kind, p)
    shape = np.empty(K)
    row = np.empty(K)
    log_pi = np.full(max(K, KP), -np.inf)  # lanes k >= K stay -inf
    LT = np.zeros((JK, max(K, KP)))  # lanes k >= K stay 0
    empty_ll = np.empty(0)
    empty_rb = np.empty((0, K))
    rb_out[:, :] = 0.0
    N = N0
    n_k = n0
    parameter_step(kind, J, K, N, n_k, alpha, beta, beta1, beta2, rng, pi, theta, p, shape, row)
    n_total = n_warmup + n_sweeps
    n_keep = pi_out.shape[0]
    prev = -1  # index of the kept draw whose parameters the next z pass uses
    write_ll = ll_out.shape[1] == I and I > 0 and ll_out.shape[0] > 0
    # marginal pi moves: prior plus known-class counts, proposal shape d, c and scale
    zero_pad = np.full(max(K, KP), -np.inf)
    zero_pad[:K] = 0.0
    a_pi = alpha.copy()
    if known.size > 0:
        for i in range(I):
            if known[i] >= 0:
                a_pi[known[i]] += weight[i]
    d = np.empty(K)
    scale = 2.4 / math.sqrt(max(K - 1, 1))
    prop = np.empty(K)
    st = np.zeros(2)
    mh_out[:] = 0.0
    for t in range(n_total):
        for k in range(K):
            log_pi[k] = math.log(pi[k]) if pi[k] > 0.0 else -np.inf
        log_theta_matrix(theta, J, K, LT)
        ll_row = ll_out[prev] if (prev >= 0 and write_ll) else empty_ll
        rb_row = rb_out if prev >= 0 else empty_rb
        if n_pi_moves > 0:
            total = _g_pass(indptr, indices, data, weight, known, pi, log_pi, zero_pad, LT, K, E, ll_row, rb_row)
            if t < max(n_warmup, 1):  # the shape follows the class totals during warm-up, then stays
                for k in range(K):
                    d[k] = _trigamma(alpha[k] + n_k[k])
            st[:] = 0.0
            _pi_moves(pi, E, weight, known, a_pi, n_pi_moves, scale, d, rng, prop, st)
            if t < n_warmup:  # Robbins-Monro on log scale towards the target acceptance
                scale *= math.exp((st[0] / st[1] - PI_ACCEPT) / math.sqrt(t + 1.0))
            else:
                mh_out[0] += st[0]
                mh_out[1] += st[1]
            _z_from_evidence(indptr, indices, data, weight, known, pi, E, K, rng, N, n_k)
        else:
            total = z_pass_rb(
                indptr, indices, data, weight, known, log_pi, LT, K, rng, True, ll_row, N, n_k, rb_row, ones
            )
        if prev >= 0:
            ll_total_out[prev] = total
        parameter_step(kind, J, K, N, n_k, alpha, beta, beta1, beta2, rng, pi, theta, p, shape, row)
        prev = -1
        if t >= n_warmup and (t - n_warmup + 1) % thin == 0 and (t - n_warmup) // thin < n_keep:
            s = (t - n_warmup) // thin
            pi_out[s, :] = pi
            theta_out[s] = theta
            if has_p:
                p_out[s] = p
            prev = s
        prog[0] = t + 1
    if prev >= 0:  # the last kept draw's log-likelihood: one pass without sampling
        for k in range(K):
            log_pi[k] = math.log(pi[k]) if pi[k] > 0.0 else -np.inf
        log_theta_matrix(theta, J, K, LT)
        ll_row = ll_out[prev] if write_ll else empty_ll
        ll_total_out[prev] = z_pass_rb(
            indptr, indices, data, weight, known, log_pi, LT, K, rng, False, ll_row, N, n_k, rb_out, ones
        )
    mh_out[2] = scale
