"""Dawid-Skene model (Dawid & Skene 1979): one full K x K error matrix per rater.

``pi ~ Dirichlet(alpha)``, ``theta[j, k] ~ Dirichlet(beta[j, k])``, ``z_i ~
Categorical(pi)``, each rating of item ``i`` by rater ``j`` ~
``Categorical(theta[j, z_i])``.  Stan program ``stan/dawid_skene.stan``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from .._validation import check_number
from .base import (
    PRIOR_N,
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

__all__ = ["DawidSkene", "simulate_dawid_skene"]


@register
@dataclass(frozen=True)
class DawidSkene(ModelFamily):
    """Dawid-Skene model: one full K x K error matrix per rater.

    ``pi ~ Dirichlet(alpha)``, ``theta[j, k] ~ Dirichlet(beta[j, k])``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi`` (default 3 for every class).
    beta : array (K, K) for every rater, or (J, K, K) per rater, optional
        Dirichlet prior on each error-matrix row (default rater's
        diagonal-heavy prior, see :mod:`pyrater.models.base`).
    """

    alpha: Any = None
    beta: Any = None
    name: ClassVar[str] = "dawid_skene"
    title: ClassVar[str] = "Dawid-Skene"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em", "gibbs")
    conjugate: ClassVar[str | None] = "dawid_skene"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved prior hyperparameters for K categories and J raters."""
        beta = default_beta(K) if self.beta is None else self.beta
        beta = positive_array("beta", beta, [(K, K), (J, K, K)], f"(K, K) = ({K}, {K}) or (J, K, K) = ({J}, {K}, {K})")
        if beta.ndim == 2:
            beta = np.broadcast_to(beta, (J, K, K)).copy()
        return {"alpha": resolve_alpha(self.alpha, K), "beta": beta}

    def with_prior_scale(self, scale: float, K: int) -> DawidSkene | None:
        """Dawid-Skene with rater's default ``beta`` times ``scale`` (None when ``beta`` was set).

        ``scale`` multiplies the prior's strength (rater's ``N = 8`` pseudo-counts per row) and keeps
        its shape (0.6 of the weight on the diagonal); ``alpha`` is unchanged.
        """
        if self.beta is not None:
            return None
        return replace(self, beta=default_beta(K, n=PRIOR_N * check_number("scale", scale, 0, strict_minimum=True)))

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, np.ndarray]:
        """The prior entries of the Stan program's data block."""
        return {**super().stan_priors(priors, K, J), "beta": np.asarray(priors["beta"], dtype=float).reshape(J, K, K)}

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Diagonal-heavy starting values of the Stan program's parameters besides ``pi``."""
        return {"theta": diagonal_heavy_rows(rng, (J,), K)}

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Stan parameters at a mode found by EM (``pi`` (K,), ``theta`` (J, K, K))."""
        return {"pi": interior(pi), "theta": interior(theta)}


def simulate_dawid_skene(
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
    """Simulate from the Dawid-Skene model: a free error matrix per rater.

    Parameters
    ----------
    n_items : int
        I, number of items.
    n_raters : int
        J, number of raters.
    n_categories : int, optional
        K.  Inferred from ``pi`` or ``theta`` when not given.
    pi : array, shape (K,), optional
        Class prevalences.  Default: a draw from Dirichlet(``alpha``).
    theta : array, shape (J, K, K) or (K, K), optional
        Error matrices, ``theta[j, k, l] = P(rater j says l | true class k)``;
        a (K, K) matrix is used for every rater.  Default: each row
        ``theta[j, k]`` drawn from Dirichlet(``beta[k]``).
    raters_per_item : int, optional
        R distinct random raters per item; default every rater (complete design).
    repeats : int
        Ratings each chosen rater gives each item (default 1).
    seed : int, Generator or None
        Passed to ``np.random.default_rng``.
    categories : sequence, length K, optional
        Category labels (default ``1 .. K``).
    alpha : array, shape (K,), optional
        Dirichlet prior for drawing ``pi`` (default rater's, all 3).
    beta : array, shape (K, K) or (J, K, K), optional
        Dirichlet prior for drawing theta rows (default rater's
        diagonal-heavy prior: ``8 * 0.6`` on the diagonal).

    Returns
    -------
    Simulation
        With ``model="dawid_skene"`` and empty ``params``.

    Examples
    --------
    >>> from pyrater.models import simulate_dawid_skene
    >>> sim = simulate_dawid_skene(200, 5, n_categories=3, seed=1)
    >>> sim.data.n_ratings
    1000
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _infer_k(n_categories, {"pi": pi, "theta": theta, "categories": categories})
    _check_categories(categories, K)
    pi = _pi(rng, pi, K, alpha)
    if theta is None:
        b = default_beta(K) if beta is None else np.asarray(beta, dtype=float)
        theta = _dirichlet_rows(rng, np.broadcast_to(b, (J, K, K)))
    else:
        theta = numeric_array(
            "theta", theta, [(J, K, K), (K, K)], f"(J, K, K) = ({J}, {K}, {K}) or (K, K) = ({K}, {K})"
        )
        theta = np.broadcast_to(_simplex("theta", theta), (J, K, K)).copy()
    return _finish(rng, "dawid_skene", I, J, pi, theta, raters_per_item, repeats, {}, categories)


DawidSkene.simulator = staticmethod(simulate_dawid_skene)
