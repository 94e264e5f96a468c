"""Class-conditional Dawid-Skene model: one accuracy per rater and true class.

``theta[j, k, k] = p[j, k]``, ``theta[j, k, k'] = (1 - p[j, k]) / (K - 1)``,
``p[j, k] ~ Beta(beta1[k], beta2[k])``.  Stan program ``stan/class_conditional.stan``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import (
    PRIOR_N,
    PRIOR_P,
    ModelFamily,
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
    _finish,
    _infer_k,
    _pi,
    _start,
)

__all__ = ["ClassConditionalDawidSkene", "simulate_class_conditional", "class_conditional_theta"]


@register
@dataclass(frozen=True)
class ClassConditionalDawidSkene(ModelFamily):
    """Class-conditional Dawid-Skene: one accuracy per rater and true class.

    ``theta[j, k, k] = p[j, k]``, ``theta[j, k, k'] = (1 - p[j, k]) / (K - 1)``,
    ``p[j, k] ~ Beta(beta1[k], beta2[k])``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi``.
    beta1, beta2 : array (K,) or scalar, optional
        Beta prior on the accuracies (default 4.8 and 3.2: mean 0.6).
    """

    alpha: Any = None
    beta1: Any = None
    beta2: Any = None
    name: ClassVar[str] = "class_conditional"
    title: ClassVar[str] = "Class-conditional Dawid-Skene"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em", "gibbs")
    conjugate: ClassVar[str | None] = "class_conditional"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved prior hyperparameters for K categories and J raters."""
        out = {"alpha": resolve_alpha(self.alpha, K)}
        for key, default in (("beta1", PRIOR_N * PRIOR_P), ("beta2", PRIOR_N * (1 - PRIOR_P))):
            value = getattr(self, key)
            value = np.full(K, default) if value is None else value
            if np.ndim(value) == 0:
                value = np.full(K, float(value))
            out[key] = positive_array(key, value, [(K,)], f"(K,) = ({K},)")
        return out

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, np.ndarray]:
        """The prior entries of the Stan program's data block."""
        return {
            **super().stan_priors(priors, K, J),
            "beta1": np.asarray(priors["beta1"], dtype=float),
            "beta2": np.asarray(priors["beta2"], dtype=float),
        }

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Diagonal-heavy starting values of the Stan program's parameters besides ``pi``."""
        return {"p": rng.uniform(0.6, 0.85, size=(J, K))}

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Stan parameters at a mode found by EM (``pi`` (K,), ``theta`` (J, K, K))."""
        return {"pi": interior(pi), "p": np.clip(np.einsum("jkk->jk", theta), 1e-6, 1 - 1e-6)}


def class_conditional_theta(p: np.ndarray) -> np.ndarray:
    """Error matrices of the class-conditional model.

    Parameters
    ----------
    p : array, shape (J, K)
        ``p[j, k] = P(rater j is right | true class k)``.

    Returns
    -------
    array, shape (J, K, K)
        ``theta[j, k, k] = p[j, k]``, ``theta[j, k, l] = (1 - p[j, k]) / (K - 1)``.
    """
    p = np.asarray(p, dtype=float)
    J, K = p.shape
    theta = np.broadcast_to(((1 - p) / (K - 1))[:, :, None], (J, K, K)).copy()
    idx = np.arange(K)
    theta[:, idx, idx] = p
    return theta


def simulate_class_conditional(
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    pi: np.ndarray | None = None,
    p: np.ndarray | None = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    categories: Any = None,
    alpha: np.ndarray | None = None,
    beta1: np.ndarray | None = None,
    beta2: np.ndarray | None = None,
) -> Simulation:
    """Simulate from the class-conditional Dawid-Skene model.

    Rater ``j`` is right about an item of class ``k`` with probability
    ``p[j, k]`` and otherwise picks one of the other K - 1 categories
    uniformly.

    Parameters
    ----------
    n_items, n_raters, n_categories, pi, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene`.
    p : array, shape (J, K) or (K,), optional
        Accuracies in [0, 1]; a (K,) vector is used for every rater.
        Default: ``p[j, k] ~ Beta(beta1[k], beta2[k])``.
    beta1, beta2 : array, shape (K,), optional
        Beta prior for drawing ``p`` (default rater's: 4.8 and 3.2).

    Returns
    -------
    Simulation
        ``params = {"p": (J, K) array}``; ``model="class_conditional"``.
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _infer_k(n_categories, {"pi": pi, "p": p, "categories": categories})
    _check_categories(categories, K)
    pi = _pi(rng, pi, K, alpha)
    if p is None:
        b1 = np.full(K, 4.8) if beta1 is None else np.broadcast_to(np.asarray(beta1, dtype=float), (K,))
        b2 = np.full(K, 3.2) if beta2 is None else np.broadcast_to(np.asarray(beta2, dtype=float), (K,))
        p = rng.beta(np.broadcast_to(b1, (J, K)), np.broadcast_to(b2, (J, K)))
    else:
        p = numeric_array("p", p, [(J, K), (K,)], f"(J, K) = ({J}, {K}) or (K,) = ({K},)")
        if np.any((p < 0) | (p > 1)):
            raise ValueError(f"p must hold probabilities in [0, 1]; got values from {p.min():g} to {p.max():g}")
        p = np.broadcast_to(p, (J, K)).copy()
    theta = class_conditional_theta(p)
    return _finish(rng, "class_conditional", I, J, pi, theta, raters_per_item, repeats, {"p": p}, categories)


ClassConditionalDawidSkene.simulator = staticmethod(simulate_class_conditional)
