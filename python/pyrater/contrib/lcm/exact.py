"""Exact computations by enumerating the 2^K latent states (K <= 12), and a rank AUC.

* :func:`exact_posterior` -- ``P(L_ik = 1 | M_i, SS_i, params)`` for every
  case, the exact answer that the mean-field q(L) approximates;
* :func:`log_partition` -- ``log Z(theta, rho, D)`` of the Ising prior;
* :func:`ising_log_prob` / :func:`pseudo_log_lik` -- exact and pseudo
  log-likelihood of fully observed latent states (for checking the
  pseudo-likelihood approximation used for theta and rho);
* :func:`auc` -- area under the ROC curve via Mann-Whitney ranks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy.special import log_expit, logsumexp
from scipy.stats import rankdata

from .data import as_lcm_data
from .model import LCMParams

__all__ = [
    "MAX_EXACT_K",
    "all_states",
    "log_partition",
    "ising_log_prob",
    "pseudo_log_lik",
    "exact_posterior",
    "exact_posterior_array",
    "auc",
]

MAX_EXACT_K = 12


def all_states(K: int) -> np.ndarray:
    """All 2^K binary states, shape (2^K, K), as float."""
    if not 1 <= K <= MAX_EXACT_K + 4:
        raise ValueError(f"enumeration needs 1 <= K <= {MAX_EXACT_K + 4}; got K={K}")
    idx = np.arange(2**K)[:, None]
    return ((idx >> np.arange(K)[None, :]) & 1).astype(float)


def _energy(states: np.ndarray, theta: np.ndarray, rho: float, D: np.ndarray) -> np.ndarray:
    """Theta' L + rho sum_{k<k'} D_kk' L_k L_k' for each state, each edge counted once."""
    pair = 0.5 * np.einsum("sk,kl,sl->s", states, np.asarray(D, float), states)
    return states @ np.asarray(theta, float) + rho * pair


def log_partition(theta: Any, rho: float, D: Any) -> float:
    """``log Z = log sum_L exp(theta' L + rho sum_{k<k'} D_kk' L_k L_k')`` over the 2^K states."""
    theta = np.asarray(theta, float)
    return float(logsumexp(_energy(all_states(theta.size), theta, rho, D)))


def ising_log_prob(L: Any, theta: Any, rho: float, D: Any) -> np.ndarray:
    """Exact ``log p(L_i | theta, rho, D)`` for rows of L (n, K)."""
    L = np.atleast_2d(np.asarray(L, float))
    return _energy(L, theta, rho, D) - log_partition(theta, rho, D)


def pseudo_log_lik(L: Any, theta: Any, rho: float, D: Any) -> np.ndarray:
    """``sum_k log p(L_ik | L_i,-k)`` for rows of L (n, K): the pseudo-likelihood.

    ``p(L_ik = 1 | rest) = expit(theta_k + rho sum_k' D_kk' L_ik')``.
    """
    L = np.atleast_2d(np.asarray(L, float))
    u = np.asarray(theta, float)[None, :] + rho * (L @ np.asarray(D, float))
    return (L * log_expit(u) + (1 - L) * log_expit(-u)).sum(axis=1)


def exact_posterior_array(Mc: np.ndarray, ss: np.ndarray, params: LCMParams, chunk: int = 4096) -> np.ndarray:
    """Exact marginals ``P(L_ik = 1 | data_i, params)`` for case arrays.

    Parameters
    ----------
    Mc : array (n1, K) of 0/1
    ss : array (n1, K) of 0/1/NaN (silver standard)
    params : LCMParams

    Returns
    -------
    array (n1, K)

    Notes
    -----
    ``log p(L, M_i, SS_i) = energy(L) + sum_k L_k a_ik + const_i`` with
    ``a_ik`` the log-likelihood ratio of target k's measurements; states with
    ``L_k = 0`` where ``SS_ik = 1`` have probability 0.  Normalised per case
    by log-sum-exp over the 2^K states; work is chunked over cases.
    """
    K = params.K
    if K > MAX_EXACT_K:
        raise ValueError(f"exact enumeration is limited to K <= {MAX_EXACT_K}; got K={K}")
    g, dl, e = params.gamma, params.delta, params.eta
    meas = np.isfinite(ss)
    pos = meas & (np.nan_to_num(ss) == 1)
    neg = meas & (np.nan_to_num(ss) == 0)
    a = Mc * (np.log(g) - np.log(dl)) + (1 - Mc) * (np.log1p(-g) - np.log1p(-dl))
    a = a + np.where(pos, np.log(e), 0.0) + np.where(neg, np.log1p(-e), 0.0)
    states = all_states(K)
    prior = _energy(states, params.theta, params.rho, params.D)
    out = np.empty_like(a)
    for start in range(0, a.shape[0], chunk):
        sl = slice(start, start + chunk)
        lw = a[sl] @ states.T + prior[None, :]
        impossible = pos[sl].astype(float) @ (1 - states).T > 0
        lw = np.where(impossible, -np.inf, lw)
        w = np.exp(lw - logsumexp(lw, axis=1, keepdims=True))
        out[sl] = w @ states
    out[pos] = 1.0  # exact: no state with L_k = 0 has weight (removes rounding)
    return out


def exact_posterior(M: Any, case: Any, silver: Any = None, *, params: LCMParams, targets: Any = None) -> pd.DataFrame:
    """Exact ``P(L_ik = 1 | M_i, SS_i, params)`` for every case, cases x targets.

    Inputs as for :meth:`pyrater.contrib.lcm.LatentGraphLCM.fit`; ``params`` is a
    point value (e.g. the truth, or ``result.point_estimate()``).
    """
    data = as_lcm_data(M, case, silver, targets=targets)
    if params.K != data.n_targets:
        raise ValueError(f"params have K={params.K} targets but the data have {data.n_targets}")
    arr = exact_posterior_array(np.asarray(data.M[data.case]), data.silver[data.case], params)
    return pd.DataFrame(arr, index=data.case_labels, columns=data.targets)


def auc(truth: Any, score: Any) -> float:
    """Area under the ROC curve by the Mann-Whitney rank statistic (ties count 1/2).

    ``AUC = (sum of ranks of positives - n1 (n1 + 1) / 2) / (n1 n0)``.
    Arrays of any shape are flattened.
    """
    y = np.asarray(truth).ravel().astype(bool)
    s = np.asarray(score, float).ravel()
    if y.size != s.size:
        raise ValueError(f"truth and score must have the same size; got {y.size} and {s.size}")
    n1 = int(y.sum())
    n0 = y.size - n1
    if n1 == 0 or n0 == 0:
        raise ValueError("AUC needs both positives and negatives in truth")
    r = rankdata(s)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
