"""Simulate data from the latent-graph latent class model.

Latent states of cases are drawn exactly from the Ising prior by enumerating
its 2^K states (K <= 16); controls have L = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from .exact import _energy, all_states
from .model import LCMParams

__all__ = ["SimulatedLCM", "default_truth", "simulate_lcm"]


@dataclass(frozen=True, eq=False)
class SimulatedLCM:
    """Simulated data and the truth behind it.

    Attributes
    ----------
    M : DataFrame (n, K)
        Bronze standard, 0/1; columns are the target names.
    case : Series (n,)
        1 for cases, 0 for controls.
    silver : DataFrame (n, K)
        Silver standard, 0/1 where measured, NaN elsewhere.
    L : DataFrame (n, K)
        True latent states (0 for controls).
    params : LCMParams
        The parameters used.
    """

    M: pd.DataFrame
    case: pd.Series
    silver: pd.DataFrame
    L: pd.DataFrame
    params: LCMParams

    @property
    def L_cases(self) -> pd.DataFrame:
        """True latent states of the cases only."""
        return self.L[self.case.to_numpy() == 1]


def default_truth(K: int = 5, rho: float = 2.5) -> LCMParams:
    """A reference truth: TPR 0.75..0.95, FPR 0.20..0.05, eta 0.6..0.8.

    theta from -1.0 to -2.0, and a graph of disjoint edges (0,1), (2,3), ...
    with coupling ``rho``.
    """
    D = np.zeros((K, K))
    for k in range(0, K - 1, 2):
        D[k, k + 1] = D[k + 1, k] = 1.0
    return LCMParams(
        gamma=np.linspace(0.75, 0.95, K),
        delta=np.linspace(0.20, 0.05, K),
        eta=np.linspace(0.6, 0.8, K),
        theta=np.linspace(-1.0, -2.0, K),
        rho=rho,
        D=D,
    )


def simulate_lcm(
    n_cases: int = 500,
    n_controls: int = 500,
    K: int = 5,
    params: LCMParams | None = None,
    silver_fraction: float = 0.25,
    seed: int | np.random.Generator | None = None,
    targets: list | None = None,
) -> SimulatedLCM:
    """Draw cases and controls from the model.

    Parameters
    ----------
    n_cases, n_controls : int
    K : int
        Number of targets (ignored when ``params`` is given).
    params : LCMParams, optional
        Defaults to :func:`pyrater.contrib.lcm.default_truth` (K).
    silver_fraction : float
        Fraction of cases (chosen at random) with the silver standard
        measured on every target; NaN elsewhere and for all controls.
    seed : int or Generator, optional
    targets : list, optional
        Target names (default ``"T1" .. "TK"``).

    Returns
    -------
    SimulatedLCM
    """
    if params is None:
        params = default_truth(K)
    K = params.K
    if K > 16:
        raise ValueError(f"simulate_lcm draws from the Ising prior by enumeration: K <= 16; got K={K}")
    if n_cases < 0 or n_controls < 0:
        raise ValueError("n_cases and n_controls must be >= 0")
    if not 0 <= silver_fraction <= 1:
        raise ValueError(f"silver_fraction must lie in [0, 1]; got {silver_fraction!r}")
    rng = np.random.default_rng(seed)
    names = [f"T{k + 1}" for k in range(K)] if targets is None else list(targets)
    states = all_states(K)
    logp = _energy(states, params.theta, params.rho, params.D)
    p = np.exp(logp - logsumexp(logp))
    Lc = states[rng.choice(states.shape[0], size=n_cases, p=p)]
    n = n_cases + n_controls
    L = np.vstack([Lc, np.zeros((n_controls, K))])
    prob = np.where(L == 1, params.gamma[None, :], params.delta[None, :])
    M = (rng.random((n, K)) < prob).astype(float)
    measured = np.zeros(n, bool)
    measured[rng.choice(n_cases, size=int(round(silver_fraction * n_cases)), replace=False)] = True
    ss = (rng.random((n, K)) < params.eta[None, :] * L).astype(float)
    ss[~measured] = np.nan
    idx = pd.RangeIndex(n, name="subject")
    cols = pd.Index(names, name="target")
    case = pd.Series(np.r_[np.ones(n_cases, int), np.zeros(n_controls, int)], index=idx, name="case")
    return SimulatedLCM(
        M=pd.DataFrame(M.astype(int), index=idx, columns=cols),
        case=case,
        silver=pd.DataFrame(ss, index=idx, columns=cols),
        L=pd.DataFrame(L.astype(int), index=idx, columns=cols),
        params=params,
    )
