"""Rank-normalised split-Rhat and bulk/tail ESS for many parameters at once.

The same estimators as :func:`arviz.rhat` (``method="rank"``) and
:func:`arviz.ess` (``method="bulk"`` and ``"tail"``), Vehtari, Gelman,
Simpson, Carpenter & Bürkner (2021), computed for all parameters together
with array operations.  ArviZ evaluates them one parameter at a time in
Python (a few milliseconds each), which takes minutes for the J x K x K
entries of theta with thousands of raters; here the ranks, FFT
autocovariances and Geyer's initial monotone sequence are vectorised over
parameters.  The tests check agreement with ArviZ to rounding.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.fft import irfft, next_fast_len, rfft

__all__ = ["rhat_rank", "ess_bulk", "ess_tail"]


def _split(x: np.ndarray) -> np.ndarray:
    """(P, C, S) -> (P, 2C, S // 2): first and last halves of every chain."""
    half = x.shape[2] // 2
    return np.concatenate([x[:, :, :half], x[:, :, x.shape[2] - half:]], axis=1)


def _z_scale(x: np.ndarray) -> np.ndarray:
    """Rank-normalise each parameter over all its draws: (P, M, N) -> same shape."""
    P = x.shape[0]
    flat = x.reshape(P, -1)
    rank = stats.rankdata(flat, method="average", axis=1)
    size = flat.shape[1]
    return stats.norm.ppf((rank - 0.375) / (size + 0.25)).reshape(x.shape)


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


@_blocked
def ess_tail(draws: np.ndarray, prob: tuple[float, float] = (0.05, 0.95)) -> np.ndarray:
    """Tail effective sample size: the smaller ESS of the 5% and 95% quantile indicators."""
    x = _chains_first(draws)
    P = x.shape[0]
    if x.shape[2] < 4:
        return np.full(P, np.nan)
    q = np.quantile(x.reshape(P, -1), prob, axis=1)  # (2, P)
    lo = _ess(_split((x <= q[0][:, None, None]).astype(float)))
    hi = _ess(_split((x <= q[1][:, None, None]).astype(float)))
    return np.minimum(lo, hi)
