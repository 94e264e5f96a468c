"""Simulation of correlated binary annotators (the probit Dawid-Skene model).

Used by the tests, the benchmark and the calibration study.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import ndtri

__all__ = ["equicorrelation", "simulate_labels", "SimulatedStudy", "simulate_study"]


def equicorrelation(J: int, rho: float) -> np.ndarray:
    """J x J correlation matrix with every off-diagonal equal to ``rho``."""
    R = np.full((J, J), float(rho))
    np.fill_diagonal(R, 1.0)
    return R


def simulate_labels(
    z: np.ndarray,
    rates: np.ndarray,
    R: np.ndarray,
    rng: np.random.Generator,
    missing: float = 0.0,
) -> np.ndarray:
    """Labels of items with true classes ``z`` under the probit model.

    Parameters
    ----------
    z : int array, shape (n,)
        True classes, 0 or 1.
    rates : array, shape (2, J)
        ``P(y_j = 1 | z = k)``.
    R : array, shape (2, J, J)
        Latent correlation matrices.
    rng : numpy Generator
    missing : float
        Probability that each label is missing (completely at random).

    Returns
    -------
    float array, shape (n, J): 0/1 with NaN for missing.
    """
    z = np.asarray(z)
    rates = np.asarray(rates, dtype=float)
    n, J = z.size, rates.shape[1]
    y = np.empty((n, J))
    for k in (0, 1):
        rows = np.flatnonzero(z == k)
        e = rng.multivariate_normal(np.zeros(J), R[k], size=rows.size, method="cholesky")
        y[rows] = (e + ndtri(rates[k])[None, :] > 0).astype(float)
    if missing > 0:
        y[rng.random(y.shape) < missing] = np.nan
    return y


@dataclass(frozen=True, eq=False)
class SimulatedStudy:
    """A simulated validation set, test sample and the truth.

    Attributes
    ----------
    validation : DataFrame
        Annotator columns ``a0 .. a{J-1}`` and ``gold``.
    test : DataFrame
        Annotator columns and ``group``.
    sample_counts : Series
        True number of positives among each group's test items.
    population : Series
        Population size of each group.
    population_counts : Series
        True number of positives in each group's population.
    prevalence : Series
        Each group's prevalence (the superpopulation probability).
    """

    validation: pd.DataFrame
    test: pd.DataFrame
    sample_counts: pd.Series
    population: pd.Series
    population_counts: pd.Series
    prevalence: pd.Series


def simulate_study(
    *,
    rates: np.ndarray,
    R: np.ndarray,
    n_validation: int = 500,
    validation_prevalence: float = 0.5,
    n_groups: int = 10,
    items_per_group: int | Sequence[int] = 100,
    population_per_group: int | Sequence[int] = 1000,
    group_prevalence: tuple[float, float] = (4.0, 20.0),
    missing: float = 0.0,
    seed: int | np.random.Generator | None = None,
) -> SimulatedStudy:
    """Simulate a validation set and grouped test samples from finite populations.

    Each group ``g`` has prevalence ``q_g ~ Beta(*group_prevalence)``, a
    population of ``N_g`` items with classes ``z ~ Bernoulli(q_g)``, and a
    test sample of ``n_g`` of them drawn without replacement.  Validation
    items have classes ``Bernoulli(validation_prevalence)``.  Labels follow
    the probit model with ``rates`` (2, J) and correlations ``R`` (2, J, J).
    """
    rng = np.random.default_rng(seed)
    rates = np.asarray(rates, dtype=float)
    J = rates.shape[1]
    cols = [f"a{j}" for j in range(J)]
    n_g = np.broadcast_to(np.asarray(items_per_group, dtype=int), (n_groups,))
    N_g = np.broadcast_to(np.asarray(population_per_group, dtype=int), (n_groups,))
    if np.any(N_g < n_g):
        raise ValueError("population_per_group must be >= items_per_group")
    zv = (rng.random(n_validation) < validation_prevalence).astype(int)
    validation = pd.DataFrame(simulate_labels(zv, rates, R, rng, missing), columns=cols)
    validation["gold"] = zv
    q = rng.beta(*group_prevalence, size=n_groups)
    groups = [f"g{g:03d}" for g in range(n_groups)]
    z_parts, g_parts, pop_counts = [], [], []
    for g in range(n_groups):
        zpop = (rng.random(N_g[g]) < q[g]).astype(int)
        pop_counts.append(int(zpop.sum()))
        z_parts.append(rng.choice(zpop, size=n_g[g], replace=False))
        g_parts.append(np.full(n_g[g], g))
    zt = np.concatenate(z_parts)
    gt = np.concatenate(g_parts)
    test = pd.DataFrame(simulate_labels(zt, rates, R, rng, missing), columns=cols)
    test["group"] = np.asarray(groups, dtype=object)[gt]
    idx = pd.Index(groups, name="group")
    return SimulatedStudy(
        validation=validation,
        test=test,
        sample_counts=pd.Series(np.bincount(gt, weights=zt, minlength=n_groups).astype(int), index=idx, name="count"),
        population=pd.Series(N_g, index=idx, name="population"),
        population_counts=pd.Series(pop_counts, index=idx, name="population_count"),
        prevalence=pd.Series(q, index=idx, name="prevalence"),
    )
