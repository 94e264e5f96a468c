"""Rank-normalised split-Rhat and bulk/tail ESS for many parameters at once.

The same estimators as :func:`arviz.rhat` (``method="rank"``) and
:func:`arviz.ess` (``method="bulk"`` and ``"tail"``), Vehtari, Gelman,
Simpson, Carpenter & Bürkner (2021), computed for all parameters together.
ArviZ evaluates them one parameter at a time in Python (a few milliseconds
each), which takes minutes for the J x K x K entries of theta with thousands
of raters.  The tests check agreement with ArviZ to rounding.

One pass, one sort
------------------
:func:`draws_statistics` (and :func:`rank_diagnostics`, its diagnostics
columns) sorts each parameter's draws once (numpy's argsort, in threads over
blocks of parameters) and derives everything else from that order in one
compiled pass (:func:`_stats_rows`):

* the average ranks of the split chains (ties averaged as
  :func:`scipy.stats.rankdata`) and their normal scores, looked up in a table
  of ``ndtri((r - 3/8) / (n + 1/4))`` (ranks are multiples of 1/2);
* the median, and the ranks of the *folded* draws ``|x - median|`` by merging
  the two sorted halves outwards from the median (no second sort);
* the posterior mean and quantiles (numpy's linear interpolation), which give
  the tail-ESS indicators and the summary's interval bounds;
* the effective sample sizes by Geyer's initial monotone sequence from
  autocovariances summed directly, lag by lag, until the sequence stops (a
  few lags for a well-mixing parameter).  A parameter whose sequence runs
  past :data:`MAX_DIRECT_LAG` lags falls back to the FFT autocovariance of
  :func:`ess_bulk` / :func:`ess_tail` (the same numbers up to rounding).

The FFT-based functions :func:`rhat_rank`, :func:`ess_bulk`, :func:`ess_tail`
and :func:`split_rhat` remain for single statistics.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
from scipy.fft import irfft, next_fast_len, rfft
from scipy.special import ndtri

__all__ = [
    "rhat_rank",
    "ess_bulk",
    "ess_tail",
    "ess_mean",
    "rank_diagnostics",
    "draws_statistics",
    "split_rhat",
    "MAX_DIRECT_LAG",
]

#: lags of Geyer's sequence summed directly before a parameter falls back to the FFT autocovariance
MAX_DIRECT_LAG = 64


@numba.njit(cache=True, nogil=True)
def _ranks_from_order(x, order, out):  # pragma: no cover - compiled
    """Row-wise ranks 1..n of ``x`` (R, n) given its row-wise argsort, ties averaged; NaN rows -> NaN."""
    R, n = x.shape
    for r in range(R):
        row = x[r]
        o = order[r]
        if np.isnan(row[o[n - 1]]):  # argsort puts NaN last
            out[r, :] = np.nan
            continue
        i = 0
        while i < n:
            v = row[o[i]]
            j = i
            while j + 1 < n and row[o[j + 1]] == v:
                j += 1
            avg = 0.5 * (i + j) + 1.0
            for t in range(i, j + 1):
                out[r, o[t]] = avg
            i = j + 1


def _average_ranks(x: np.ndarray, out: np.ndarray) -> None:
    """Ranks as :func:`scipy.stats.rankdata` (``method="average"``) along the rows of ``x`` (R, n)."""
    if x.shape[1]:
        _ranks_from_order(x, np.argsort(x, axis=1), out)  # numpy's sort is several times numba's


def _threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _split(x: np.ndarray) -> np.ndarray:
    """(P, C, S) -> (P, 2C, S // 2): first and last halves of every chain."""
    half = x.shape[2] // 2
    return np.concatenate([x[:, :, :half], x[:, :, x.shape[2] - half :]], axis=1)


def _z_scale(x: np.ndarray, n_threads: int | None = None) -> np.ndarray:
    """Rank-normalise each parameter over all its draws: (P, M, N) -> same shape."""
    P = x.shape[0]
    flat = np.ascontiguousarray(x.reshape(P, -1), dtype=float)
    rank = np.empty_like(flat)
    n_threads = _threads() if n_threads is None else n_threads
    if n_threads == 1 or P < 2 * n_threads:
        _average_ranks(flat, rank)
    else:
        edges = np.linspace(0, P, n_threads + 1).astype(int)
        with ThreadPoolExecutor(n_threads) as ex:
            list(
                ex.map(
                    lambda a: _average_ranks(flat[edges[a] : edges[a + 1]], rank[edges[a] : edges[a + 1]]),
                    range(n_threads),
                )
            )
    size = flat.shape[1]
    rank -= 0.375
    rank /= size + 0.25
    return ndtri(rank, out=rank).reshape(x.shape)


def _rhat(x: np.ndarray) -> np.ndarray:
    """Classic Rhat per parameter of (P, M, N) arrays."""
    N = x.shape[2]
    chain_mean = x.mean(axis=2)
    within = x.var(axis=2, ddof=1).mean(axis=1)
    between = N * chain_mean.var(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + N - 1) / N)


#: parameters per block of the FFT (bounds the temporary memory to about 64 MiB per block)
_BLOCK_VALUES = 1 << 22


def _ess(x: np.ndarray) -> np.ndarray:
    """Effective sample size per parameter of (P, M, N) arrays, in blocks of parameters."""
    P, M, N = x.shape
    step = max(1, _BLOCK_VALUES // (M * next_fast_len(2 * N)))
    return np.concatenate([_ess_block(x[a : a + step]) for a in range(0, P, step)]) if P else np.empty(0)


def _ess_block(x: np.ndarray) -> np.ndarray:
    """Effective sample size per parameter of (P, M, N) arrays (Geyer's initial monotone sequence)."""
    x = np.asarray(x, dtype=float)
    P, M, N = x.shape
    out = np.full(P, np.nan)
    const = (x.max(axis=(1, 2)) - x.min(axis=(1, 2))) < np.finfo(float).resolution
    out[const] = M * N
    live = np.flatnonzero(~const & ~np.isnan(x).any(axis=(1, 2)))
    if live.size == 0:
        return out
    y = x[live]
    y = y - y.mean(axis=2, keepdims=True)
    m = next_fast_len(2 * N)
    f = rfft(y, n=m, axis=2)
    acov = irfft(f * np.conjugate(f), n=m, axis=2)[:, :, :N] / N  # (P', M, N)
    chain_mean = x[live].mean(axis=2)
    mean_var = acov[:, :, 0].mean(axis=1) * N / (N - 1.0)
    var_plus = mean_var * (N - 1.0) / N
    if M > 1:
        var_plus = var_plus + chain_mean.var(axis=1, ddof=1)
    rho = 1.0 - (mean_var[:, None] - acov.mean(axis=1)) / var_plus[:, None]  # (P', N)
    rho[:, 0] = 1.0
    # pairs Q_m = rho[2m] + rho[2m+1]; ArviZ examines pairs m >= 1 while 2m - 1 < N - 3
    n_pairs = N // 2
    Q = rho[:, 0 : 2 * n_pairs : 2] + rho[:, 1 : 2 * n_pairs : 2]  # (P', n_pairs)
    m_max = max(0, min(n_pairs - 1, int(np.ceil((N - 2) / 2)) - 1))  # last pair examined by the limit
    nonpos = Q[:, : m_max + 1] <= 0
    m_end = np.where(nonpos.any(axis=1), nonpos.argmax(axis=1), m_max)  # first pair with Q <= 0, or the limit
    # initial monotone sequence: running minimum of the pair sums before m_end
    Qmono = np.minimum.accumulate(Q, axis=1)
    idx = np.arange(Q.shape[1])[None, :]
    tau = -1.0 + 2.0 * np.where(idx < m_end[:, None], Qmono, 0.0).sum(axis=1)
    even = rho[np.arange(live.size), 2 * m_end]
    tau += np.where(even > 0, even, 0.0)
    ess = M * N
    tau = np.maximum(tau, 1.0 / np.log10(ess))
    res = ess / tau
    res[np.isnan(rho).any(axis=1)] = np.nan
    out[live] = res
    return out


def _chains_first(draws: np.ndarray) -> np.ndarray:
    """(C, S, P) -> (P, C, S)."""
    return np.ascontiguousarray(np.moveaxis(np.asarray(draws, dtype=float), 2, 0))


def _blocked(fn):
    """Apply ``fn`` (draws (C, S, P') -> (P',)) to blocks of parameters: bounded temporary memory."""

    def wrapper(draws: np.ndarray, *args):
        draws = np.asarray(draws)
        C, S, P = draws.shape
        step = max(1, _BLOCK_VALUES // max(1, 4 * C * S))
        if P <= step:
            return fn(draws, *args)
        return np.concatenate([fn(draws[:, :, a : a + step], *args) for a in range(0, P, step)])

    wrapper.__name__, wrapper.__doc__ = fn.__name__, fn.__doc__
    return wrapper


@_blocked
def split_rhat(draws: np.ndarray) -> np.ndarray:
    """Classic split-Rhat (Gelman et al., BDA3, 11.4) per parameter: no ranks, one pass of means and variances.

    A cheap check for many parameters; :func:`rhat_rank` is the recommended
    (rank-normalised, folded) statistic.

    Parameters
    ----------
    draws : array (chains, draws, P)

    Returns
    -------
    array (P,); NaN with fewer than 4 draws.
    """
    x = _chains_first(draws)
    if x.shape[2] < 4:
        return np.full(x.shape[0], np.nan)
    return _rhat(_split(x))


@_blocked
def rhat_rank(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split-Rhat (max of bulk and folded tail) per parameter.

    Parameters
    ----------
    draws : array (chains, draws, P)

    Returns
    -------
    array (P,); NaN with fewer than 2 chains or 4 draws.
    """
    x = _chains_first(draws)
    P, C, S = x.shape
    if C < 2 or S < 4:
        return np.full(P, np.nan)
    sp_ = _split(x)
    bulk = _rhat(_z_scale(sp_))
    folded = np.abs(sp_ - np.median(sp_.reshape(P, -1), axis=1)[:, None, None])
    tail = _rhat(_z_scale(folded))
    out = np.maximum(bulk, tail)
    out[np.isnan(bulk) | np.isnan(tail)] = np.nan
    return out


@_blocked
def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """Bulk effective sample size per parameter, draws (chains, draws, P) -> (P,)."""
    x = _chains_first(draws)
    if x.shape[2] < 4:
        return np.full(x.shape[0], np.nan)
    return _ess(_z_scale(_split(x)))


def _ess_tail_of(x: np.ndarray, prob: tuple[float, float] = (0.05, 0.95)) -> np.ndarray:
    """Tail ESS of chains-first draws (P, C, S)."""
    P = x.shape[0]
    q = np.quantile(x.reshape(P, -1), prob, axis=1)  # (2, P)
    lo = _ess(_split((x <= q[0][:, None, None]).astype(float)))
    hi = _ess(_split((x <= q[1][:, None, None]).astype(float)))
    return np.minimum(lo, hi)


@_blocked
def ess_tail(draws: np.ndarray, prob: tuple[float, float] = (0.05, 0.95)) -> np.ndarray:
    """Tail effective sample size: the smaller ESS of the 5% and 95% quantile indicators."""
    x = _chains_first(draws)
    if x.shape[2] < 4:
        return np.full(x.shape[0], np.nan)
    return _ess_tail_of(x, prob)


# ------------------------------------------------------------ the one-sort pass
@numba.njit(cache=True, nogil=True)
def _rho(v, cm, C, S, t, mean_var, var_plus):  # pragma: no cover - compiled
    """Autocorrelation at lag ``t`` of the split chains of ``v`` (C x S), as :func:`_ess_block` combines it."""
    half = S // 2
    M = 2 * C
    N = half
    tot = 0.0
    for m in range(M):
        start = (m // 2) * S + (0 if m % 2 == 0 else S - half)
        cmm = cm[m]
        part = 0.0
        for n in range(N - t):
            part += (v[start + n] - cmm) * (v[start + n + t] - cmm)
        tot += part / N
    return 1.0 - (mean_var - tot / M) / var_plus


@numba.njit(inline="always", cache=True)
def _sum_sq_dev(cm, M):  # pragma: no cover - compiled
    """Sum of squared deviations of ``cm[:M]`` (split-chain means) from their mean: the between-chain sum."""
    gm = 0.0
    for m in range(M):
        gm += cm[m]
    gm /= M
    vb = 0.0
    for m in range(M):
        vb += (cm[m] - gm) ** 2
    return vb


@numba.njit(cache=True, nogil=True)
def _geyer_split(v, C, S, max_lag):  # pragma: no cover - compiled
    """ESS of values ``v`` laid out as (C chains, S draws), split chains, by Geyer's initial monotone sequence.

    Returns ``(ess, ok)``; ``ok`` is False when the sequence needs more than ``max_lag``
    lags (the caller then uses the FFT route).  Same rules as :func:`_ess_block`.
    """
    half = S // 2
    M = 2 * C
    N = half
    lo = np.inf
    hi = -np.inf
    for c in range(C):
        for h in range(2):
            start = c * S + (0 if h == 0 else S - half)
            for n in range(N):
                x = v[start + n]
                if np.isnan(x):
                    return np.nan, True
                if x < lo:
                    lo = x
                if x > hi:
                    hi = x
    if hi - lo < 1e-15:  # np.finfo(float).resolution: a constant
        return float(M * N), True
    # chain means and lag-0 autocovariances
    cm = np.empty(M)
    for m in range(M):
        c = m // 2
        start = c * S + (0 if m % 2 == 0 else S - half)
        tot = 0.0
        for n in range(N):
            tot += v[start + n]
        cm[m] = tot / N
    a0 = 0.0
    for m in range(M):
        c = m // 2
        start = c * S + (0 if m % 2 == 0 else S - half)
        tot = 0.0
        for n in range(N):
            y = v[start + n] - cm[m]
            tot += y * y
        a0 += tot / N
    a0 /= M
    mean_var = a0 * N / (N - 1.0)
    var_plus = mean_var * (N - 1.0) / N
    if M > 1:
        var_plus += _sum_sq_dev(cm, M) / (M - 1.0)
    n_pairs = N // 2
    m_max = max(0, min(n_pairs - 1, int(math.ceil((N - 2) / 2)) - 1))

    qmin = np.inf
    qsum = 0.0
    m = 0
    even = 1.0
    while True:
        if 2 * m + 1 > max_lag:
            return np.nan, False
        r_even = 1.0 if m == 0 else _rho(v, cm, C, S, 2 * m, mean_var, var_plus)
        r_odd = _rho(v, cm, C, S, 2 * m + 1, mean_var, var_plus)
        if np.isnan(r_even) or np.isnan(r_odd):
            return np.nan, True
        q = r_even + r_odd
        if q <= 0.0 or m >= m_max:
            even = r_even
            break
        if q < qmin:
            qmin = q
        qsum += qmin
        m += 1
    tau = -1.0 + 2.0 * qsum + (even if even > 0.0 else 0.0)
    ess = float(M * N)
    floor = 1.0 / math.log10(ess)
    if tau < floor:
        tau = floor
    return ess / tau, True


@numba.njit(cache=True, nogil=True)
def _rhat_split(v, C, S):  # pragma: no cover - compiled
    """Classic Rhat of values ``v`` (C chains x S draws) over the split chains, as :func:`_rhat`."""
    half = S // 2
    M = 2 * C
    N = half
    cm = np.empty(M)
    within = 0.0
    for m in range(M):
        c = m // 2
        start = c * S + (0 if m % 2 == 0 else S - half)
        tot = 0.0
        for n in range(N):
            tot += v[start + n]
        mu = tot / N
        cm[m] = mu
        ss = 0.0
        for n in range(N):
            ss += (v[start + n] - mu) ** 2
        within += ss / (N - 1.0)
    within /= M
    between = N * _sum_sq_dev(cm, M) / (M - 1.0)
    if within == 0.0:
        return np.nan if between == 0.0 else np.inf
    return math.sqrt((between / within + N - 1.0) / N)


@numba.njit(cache=True, nogil=True)
def _tie_ranks_into(vals, pos, ztab, z):  # pragma: no cover - compiled
    """Normal scores of the average ranks of sorted ``vals`` written at positions ``pos`` of ``z``."""
    n = vals.size
    i = 0
    while i < n:
        x = vals[i]
        j = i
        while j + 1 < n and vals[j + 1] == x:
            j += 1
        zz = ztab[i + j + 2]  # twice the average rank (i + j) / 2 + 1
        for t in range(i, j + 1):
            z[pos[t]] = zz
        i = j + 1


@numba.njit(cache=True, nogil=True)
def _quantile_sorted(xf, order, q):  # pragma: no cover - compiled
    """Numpy's ``quantile(x, q)`` (linear interpolation) from the argsort ``order`` of ``xf``."""
    n = xf.size
    virtual = (n - 1) * q
    if virtual >= n - 1:
        return xf[order[n - 1]]
    if virtual < 0:
        return xf[order[0]]
    prev = int(math.floor(virtual))
    gamma = virtual - prev
    a = xf[order[prev]]
    b = xf[order[prev + 1]]
    diff = b - a
    if gamma >= 0.5:
        return b - diff * (1.0 - gamma)
    return a + diff * gamma


@numba.njit(cache=True, nogil=True)
def _stats_rows(x, order, ztab, qs, tail_q, max_lag, rank, want_mean_ess, out, fallback):  # pragma: no cover
    """Statistics of every parameter of ``x`` (P, C, S) from its argsort ``order`` (P, C*S).

    ``out`` rows: 0 mean, 1 rank Rhat, 2 bulk ESS, 3 tail ESS, 4 ESS of the raw draws
    ("mean" ESS, for LOO's relative efficiency), 5.. the quantiles ``qs``.
    ``fallback[p, 0..3]``: bulk, tail (5%), tail (95%) and mean ESS need the FFT route.
    ``rank`` False: only the mean, the quantiles and (with ``want_mean_ess``) the mean ESS.
    """
    P, C, S = x.shape
    half = S // 2
    n_full = C * S
    z = np.empty(n_full)
    ind = np.empty(n_full)
    n = 2 * C * half
    sv = np.empty(n)
    si = np.empty(n, np.int64)
    fv = np.empty(n)
    fi = np.empty(n, np.int64)
    for p in range(P):
        xf = x[p].ravel()
        has_nan = False
        tot = 0.0
        for t in range(n_full):
            if np.isnan(xf[t]):
                has_nan = True
            tot += xf[t]
        out[0, p] = tot / n_full
        if has_nan:
            for r in range(1, out.shape[0]):
                out[r, p] = np.nan
            continue
        if order.shape[1] == n_full:
            for qi in range(qs.size):
                out[5 + qi, p] = _quantile_sorted(xf, order[p], qs[qi])
        if want_mean_ess and S >= 4:
            e, ok = _geyer_split(xf, C, S, max_lag)
            out[4, p] = e
            fallback[p, 3] = not ok
        if not rank or S < 4:
            continue
        # sorted split draws (odd S: the middle draw of every chain is not in the split chains)
        q = 0
        op = order[p]
        for t in range(n_full):
            pos = op[t]
            if S % 2 == 1 and pos % S == half:
                continue
            sv[q] = xf[pos]
            si[q] = pos
            q += 1
        _tie_ranks_into(sv, si, ztab, z)
        e, ok = _geyer_split(z, C, S, max_lag)
        out[2, p] = e
        fallback[p, 0] = not ok
        bulk = _rhat_split(z, C, S) if C >= 2 else np.nan
        # folded draws |x - median|, sorted by merging outwards from the median
        med = 0.5 * (sv[n // 2 - 1] + sv[n // 2]) if n % 2 == 0 else sv[n // 2]
        L = 0
        while L < n and sv[L] <= med:
            L += 1
        i = L - 1
        j = L
        for t in range(n):
            if j >= n or (i >= 0 and abs(sv[i] - med) <= abs(sv[j] - med)):
                fv[t] = abs(sv[i] - med)
                fi[t] = si[i]
                i -= 1
            else:
                fv[t] = abs(sv[j] - med)
                fi[t] = si[j]
                j += 1
        _tie_ranks_into(fv, fi, ztab, z)
        tail = _rhat_split(z, C, S) if C >= 2 else np.nan
        if np.isnan(bulk) or np.isnan(tail):
            out[1, p] = np.nan
        else:
            out[1, p] = max(bulk, tail)
        # tail ESS: indicators of the 5% and 95% quantiles of all draws
        ess_t = np.inf
        for side in range(2):
            qv = _quantile_sorted(xf, op, tail_q[side])
            for t in range(n_full):
                ind[t] = 1.0 if xf[t] <= qv else 0.0
            e, ok = _geyer_split(ind, C, S, max_lag)
            fallback[p, 1 + side] = not ok
            if np.isnan(e):
                ess_t = np.nan
            elif e < ess_t:
                ess_t = e
        out[3, p] = ess_t


_ZTABS: dict[int, np.ndarray] = {}


def _ztab(n: int) -> np.ndarray:
    """``ndtri((k / 2 - 3/8) / (n + 1/4))`` for k = 0 .. 2n + 2: normal scores of (half-)integer ranks."""
    tab = _ZTABS.get(n)
    if tab is None:
        k = np.arange(2 * n + 3, dtype=float)
        rank = k / 2.0
        rank -= 0.375
        rank /= n + 0.25
        with np.errstate(invalid="ignore"):
            tab = ndtri(rank)
        _ZTABS[n] = tab
    return tab


_STAT_ROWS = ("mean", "rhat", "ess_bulk", "ess_tail", "ess_mean")
TAIL_PROB = (0.05, 0.95)


def _stats_block(draws: np.ndarray, qs: np.ndarray, rank: bool, mean_ess: bool) -> np.ndarray:
    """(C, S, P') -> (5 + len(qs), P') statistics of one block of parameters."""
    x = _chains_first(draws)
    P, C, S = x.shape
    need_order = rank or qs.size > 0
    order = np.argsort(x.reshape(P, C * S), axis=1) if need_order else np.empty((P, 0), np.int64)
    out = np.full((5 + qs.size, P), np.nan)
    fallback = np.zeros((P, 4), dtype=np.bool_)
    n = 2 * C * (S // 2)
    _stats_rows(x, order, _ztab(max(n, 1)), qs, np.asarray(TAIL_PROB), MAX_DIRECT_LAG, rank, mean_ess, out, fallback)
    del order
    # the few parameters whose Geyer sequence runs long: the FFT route, as the single-statistic functions
    for col, row in ((0, 2), (3, 4)):
        bad = np.flatnonzero(fallback[:, col])
        if bad.size:
            y = x[bad]
            out[row, bad] = _ess(_z_scale(_split(y), n_threads=1)) if col == 0 else _ess(_split(y))
    bad = np.flatnonzero(fallback[:, 1] | fallback[:, 2])
    if bad.size:
        out[3, bad] = _ess_tail_of(x[bad])
    return out


def draws_statistics(
    draws: np.ndarray,
    quantiles: tuple[float, ...] = (),
    *,
    rank: bool = True,
    mean_ess: bool = False,
    n_threads: int | None = None,
    progress: Any = None,
) -> dict[str, np.ndarray]:
    """Posterior mean, quantiles, rank-normalised Rhat and bulk/tail ESS of every parameter, one sort each.

    Parameters
    ----------
    draws : array (chains, draws, P)
        Not modified; read in blocks of parameters (bounded temporary memory).
    quantiles : tuple of float
        Probabilities of the quantiles to return (numpy's linear interpolation).
    rank : bool
        Compute Rhat and the bulk and tail ESS (otherwise only means, quantiles and ``mean_ess``).
    mean_ess : bool
        Also the ESS of the raw draws (ArviZ's ``method="mean"``; LOO's relative efficiency).
    n_threads : int, optional
        Threads over blocks of parameters (default: the cores, at most 4).
    progress : tqdm bar, optional
        Updated by the number of parameters of each block done.

    Returns
    -------
    dict
        ``mean``, ``rhat``, ``ess_bulk``, ``ess_tail``, ``ess_mean`` (NaN where not
        asked for) and ``quantiles`` (array (len(quantiles), P)); Rhat is NaN with
        fewer than 2 chains, all but the mean and quantiles NaN with fewer than 4 draws.
    """
    draws = np.asarray(draws)
    C, S, P = draws.shape
    qs = np.asarray(quantiles, dtype=float).reshape(-1)
    n_threads = _threads() if n_threads is None else max(1, int(n_threads))
    step = max(1, min(_BLOCK_VALUES // max(1, 4 * C * S), -(-P // n_threads)))
    blocks = [(a, min(P, a + step)) for a in range(0, P, step)]

    def one(ab: tuple[int, int]) -> np.ndarray:
        res = _stats_block(draws[:, :, ab[0] : ab[1]], qs, rank, mean_ess)
        if progress is not None:
            progress.update(ab[1] - ab[0])
        return res

    if len(blocks) > 1 and n_threads > 1:  # numpy's argsort and the compiled pass release the GIL
        with ThreadPoolExecutor(n_threads) as ex:
            parts = list(ex.map(one, blocks))
    else:
        parts = [one(b) for b in blocks]
    res = np.concatenate(parts, axis=1) if parts else np.empty((5 + qs.size, 0))
    out = {name: res[r] for r, name in enumerate(_STAT_ROWS)}
    out["quantiles"] = res[5:]
    return out


def rank_diagnostics(draws: np.ndarray) -> dict[str, np.ndarray]:
    """Rank-normalised split-Rhat, bulk ESS and tail ESS per parameter in one pass.

    The same numbers as :func:`rhat_rank`, :func:`ess_bulk` and
    :func:`ess_tail` (ArviZ's estimators), from one sort per parameter
    (:func:`draws_statistics`).

    Parameters
    ----------
    draws : array (chains, draws, P)

    Returns
    -------
    dict
        ``rhat``, ``ess_bulk``, ``ess_tail``: arrays (P,).
    """
    res = draws_statistics(draws)
    return {"rhat": res["rhat"], "ess_bulk": res["ess_bulk"], "ess_tail": res["ess_tail"]}


def ess_mean(draws: np.ndarray) -> np.ndarray:
    """ESS of the raw draws per parameter (ArviZ's ``method="mean"``), draws (chains, draws, P) -> (P,)."""
    return draws_statistics(draws, rank=False, mean_ess=True)["ess_mean"]
