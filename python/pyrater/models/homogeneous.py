"""Homogeneous Dawid-Skene model: one error matrix shared by all raters.

``pi ~ Dirichlet(alpha)``, ``theta[k] ~ Dirichlet(beta[k])``.  Stan program
``stan/homogeneous.stan``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import (
    ModelFamily,
    default_beta,
    diagonal_heavy_rows,
    interior,
    numeric_array,
    positive_array,
    resolve_alpha,
)
from .registry import register
from .simulate import (
    SeedLike,
    Simulation,
    _check_categories,
    _dirichlet_rows,
    _finish,
    _infer_k,
    _pi,
    _simplex,
    _start,
)

__all__ = ["HomogeneousDawidSkene", "simulate_homogeneous"]


@register
@dataclass(frozen=True)
class HomogeneousDawidSkene(ModelFamily):
    """Homogeneous Dawid-Skene: one error matrix shared by all raters.

    ``pi ~ Dirichlet(alpha)``, ``theta[k] ~ Dirichlet(beta[k])``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi``.
    beta : array (K, K), optional
        Dirichlet prior on each row of the shared error matrix.
    """

    alpha: Any = None
    beta: Any = None
    name: ClassVar[str] = "homogeneous"
    title: ClassVar[str] = "Homogeneous Dawid-Skene"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em", "gibbs")
    conjugate: ClassVar[str | None] = "homogeneous"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved prior hyperparameters for K categories and J raters."""
        beta = default_beta(K) if self.beta is None else self.beta
        beta = positive_array("beta", beta, [(K, K)], f"(K, K) = ({K}, {K})")
        return {"alpha": resolve_alpha(self.alpha, K), "beta": beta}

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, np.ndarray]:
        """The prior entries of the Stan program's data block."""
        return {**super().stan_priors(priors, K, J), "beta": np.asarray(priors["beta"], dtype=float).reshape(K, K)}

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Diagonal-heavy starting values of the Stan program's parameters besides ``pi``."""
        return {"theta": diagonal_heavy_rows(rng, (), K)}

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Stan parameters at a mode found by EM (``pi`` (K,), ``theta`` (J, K, K))."""
        return {"pi": interior(pi), "theta": interior(theta[0])}


def simulate_homogeneous(
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    pi: np.ndarray | None = None,
    theta: np.ndarray | None = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    categories: Any = None,
    alpha: np.ndarray | None = None,
    beta: np.ndarray | None = None,
) -> Simulation:
    """Simulate from the homogeneous Dawid-Skene model: one error matrix for all raters.

    Parameters
    ----------
    n_items, n_raters, n_categories, pi, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene`.
    theta : array, shape (K, K), optional
        The shared error matrix.  Default: rows drawn from Dirichlet(``beta[k]``).
    beta : array, shape (K, K), optional
        Dirichlet prior for drawing theta rows (default rater's).

    Returns
    -------
    Simulation
        ``theta`` of shape (J, K, K) with identical slices; ``model="homogeneous"``.
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _infer_k(n_categories, {"pi": pi, "theta": theta, "categories": categories})
    _check_categories(categories, K)
    pi = _pi(rng, pi, K, alpha)
    if theta is None:
        shared = _dirichlet_rows(rng, default_beta(K) if beta is None else np.asarray(beta, dtype=float))
    else:
        shared = _simplex("theta", numeric_array("theta", theta, [(K, K)], f"(K, K) = ({K}, {K})"))
    full = np.broadcast_to(shared, (J, K, K)).copy()
    return _finish(rng, "homogeneous", I, J, pi, full, raters_per_item, repeats, {}, categories)


HomogeneousDawidSkene.simulator = staticmethod(simulate_homogeneous)
