"""Hierarchical Dawid-Skene model (Paun et al. 2018, as in rater): logistic-normal pooling of raters.

``theta[j, k] = softmax(mu[k] + sigma[k] * raw[j, k])``, ``raw ~ N(0, 1)``,
``mu[k, k] ~ N(2, 1)``, ``mu[k, k'] ~ N(0, 1)``, ``sigma ~ half-N(0, 1)``.
Not conjugate: fitted in Stan only (``stan/hierarchical.stan``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import ModelFamily, numeric_array, resolve_alpha
from .registry import register
from .simulate import (
    SeedLike,
    Simulation,
    _check_categories,
    _finish,
    _infer_k,
    _pi,
    _start,
)

__all__ = ["HierarchicalDawidSkene", "simulate_hierarchical"]


@register
@dataclass(frozen=True)
class HierarchicalDawidSkene(ModelFamily):
    """Hierarchical Dawid-Skene (Paun et al. 2018, as in rater).

    ``theta[j, k] = softmax(mu[k] + sigma[k] * raw[j, k])``, ``raw ~ N(0, 1)``,
    ``mu[k, k] ~ N(2, 1)``, ``mu[k, k'] ~ N(0, 1)``, ``sigma ~ half-N(0, 1)``,
    ``pi ~ Dirichlet(alpha)``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi``.
    """

    alpha: Any = None
    name: ClassVar[str] = "hierarchical"
    title: ClassVar[str] = "Hierarchical Dawid-Skene"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved prior hyperparameters for K categories and J raters."""
        return {"alpha": resolve_alpha(self.alpha, K)}

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Diagonal-heavy starting values of the Stan program's parameters besides ``pi``."""
        # softmax(mu + sigma * raw) puts ~0.7 on the diagonal
        return {
            "mu": np.eye(K) * (np.log(0.7 * (K - 1) / 0.3)) + rng.uniform(-0.2, 0.2, size=(K, K)),
            "sigma": rng.uniform(0.3, 0.8, size=(K, K)),
            "gamma_raw": rng.normal(0.0, 0.3, size=(J, K, K)),
        }


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def simulate_hierarchical(
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    pi: np.ndarray | None = None,
    mu: np.ndarray | None = None,
    sigma: np.ndarray | None = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    categories: Any = None,
    alpha: np.ndarray | None = None,
) -> Simulation:
    """Simulate from the hierarchical Dawid-Skene model (Paun et al. 2018).

    ``gamma[j, k, l] = mu[k, l] + sigma[k, l] * raw[j, k, l]`` with
    ``raw ~ N(0, 1)`` and ``theta[j, k] = softmax(gamma[j, k])``.  Every
    entry of ``gamma``, off-diagonal included, varies between raters.

    Parameters
    ----------
    n_items, n_raters, n_categories, pi, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene`.
    mu : array, shape (K, K), optional
        Population mean log-odds.  Default: ``mu[k, k] ~ N(2, 1)``,
        ``mu[k, l] ~ N(0, 1)`` for ``l != k``.
    sigma : array, shape (K, K) or scalar, optional
        Between-rater standard deviations, > 0.  Default: half-N(0, 1) draws.

    Returns
    -------
    Simulation
        ``params = {"mu": (K, K), "sigma": (K, K), "gamma": (J, K, K)}``;
        ``model="hierarchical"``.
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _infer_k(
        n_categories,
        {
            "pi": pi,
            "mu": mu,
            "sigma": sigma if sigma is not None and np.ndim(sigma) else None,
            "categories": categories,
        },
    )
    _check_categories(categories, K)
    pi = _pi(rng, pi, K, alpha)
    if mu is None:
        mu = rng.normal(0.0, 1.0, size=(K, K))
        mu[np.arange(K), np.arange(K)] += 2.0
    else:
        mu = numeric_array("mu", mu, [(K, K)], f"(K, K) = ({K}, {K})")
    if sigma is None:
        sigma = np.abs(rng.normal(0.0, 1.0, size=(K, K)))
    else:
        sigma = numeric_array("sigma", sigma, [(K, K), ()], f"(K, K) = ({K}, {K}) or a scalar")
        if np.any(sigma <= 0):
            raise ValueError(f"sigma must be > 0; min is {sigma.min()!r}")
        sigma = np.broadcast_to(sigma, (K, K)).copy()
    raw = rng.standard_normal((J, K, K))
    gamma = mu[None] + sigma[None] * raw
    theta = _softmax(gamma)
    params = {"mu": mu, "sigma": sigma, "gamma": gamma}
    return _finish(rng, "hierarchical", I, J, pi, theta, raters_per_item, repeats, params, categories)


HierarchicalDawidSkene.simulator = staticmethod(simulate_hierarchical)
