"""One-coin Dawid-Skene model: one accuracy per rater, whatever the true class.

``theta[j, k, k] = p[j]``, ``theta[j, k, l] = (1 - p[j]) / (K - 1)`` for
``l != k``, ``p[j] ~ Beta(beta1, beta2)``, ``pi ~ Dirichlet(alpha)``.  The
class-conditional model (:mod:`pyrater.models.class_conditional`) with the
accuracy shared across true classes (Karger, Oh & Shah 2011; crowd-kit's
``OneCoinDawidSkene``).  One parameter per rater: the family for raters who
rate little.  Stan program ``stan/one_coin.stan``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import (
    PRIOR_N,
    ModelFamily,
    interior,
    numeric_array,
    resolve_alpha,
)
from .class_conditional import class_conditional_theta
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

__all__ = ["OneCoinDawidSkene", "simulate_one_coin", "one_coin_theta", "default_accuracy_prior"]


def default_accuracy_prior(K: int) -> tuple[float, float]:
    """The default Beta prior ``(beta1, beta2)`` on an accuracy at K categories.

    Mean ``(1 + 1/K) / 2``, halfway between chance (``1/K``) and certainty,
    weight ``beta1 + beta2 = 8`` (the weight of the class-conditional
    model's default): Beta(6, 2) at K = 2, Beta(4.8, 3.2) at K = 5.

    Why not the class-conditional model's mean 0.6 at every K: at K = 2 an
    accuracy of 0.6 is barely above chance, and it is where the accuracies
    of the collapsed mode sit -- every item in one class, each rater's
    "accuracy" its share of ratings of that class (about the class's
    prevalence).  A prior centred there can make that mode the posterior
    mode when the likelihood prefers the mode that labels the items (on the
    snow_temp gold set, 462 items, 76 raters: log posterior -2225.5 for the
    collapsed mode, which labels 56% of the gold items right, against
    -2267.4 for the labelling mode at 94%, whose log-likelihood is 22 nats
    higher).
    """
    K = int(K)
    mean = 0.5 * (1.0 + 1.0 / K)
    return PRIOR_N * mean, PRIOR_N * (1.0 - mean)


def positive_scalar(name: str, value: Any, default: float) -> np.ndarray:
    """``value`` (``default`` when None) as a 0-d float array > 0; errors name ``name``."""
    if value is None:
        return np.array(float(default))
    arr = numeric_array(name, value, [(), (1,)], "() (a scalar)").reshape(())
    if not arr > 0:
        raise ValueError(f"{name} must be > 0; got {float(arr)!r}")
    return arr


@register
@dataclass(frozen=True)
class OneCoinDawidSkene(ModelFamily):
    """One-coin Dawid-Skene: one accuracy per rater, shared by every true class.

    ``theta[j, k, k] = p[j]``, ``theta[j, k, l] = (1 - p[j]) / (K - 1)``
    (``l != k``), ``p[j] ~ Beta(beta1, beta2)``, ``pi ~ Dirichlet(alpha)``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi`` (default 3 per class).
    beta1, beta2 : scalar, optional
        Beta prior on the accuracies (default :func:`default_accuracy_prior`:
        mean ``(1 + 1/K) / 2``, halfway between chance and certainty, weight 8;
        Beta(6, 2) at K = 2, Beta(4.8, 3.2) at K = 5).

    Notes
    -----
    Karger, Oh & Shah (2011), "Iterative learning for reliable crowdsourcing
    systems"; crowd-kit's ``OneCoinDawidSkene``.

    Examples
    --------
    >>> import pyrater
    >>> sim = pyrater.simulate("one_coin", 200, 5, n_categories=3, raters_per_item=3, seed=1)
    >>> fit = pyrater.fit(sim.data, "one_coin", method="em")
    >>> fit.point_estimate("pi").shape
    (3,)
    """

    alpha: Any = None
    beta1: Any = None
    beta2: Any = None
    name: ClassVar[str] = "one_coin"
    title: ClassVar[str] = "One-coin Dawid-Skene"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em", "gibbs")
    conjugate: ClassVar[str | None] = "one_coin"
    k_params: ClassVar[tuple[str, ...]] = ("pi", "categories")

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved prior hyperparameters: ``alpha`` (K,), ``beta1`` and ``beta2`` 0-d arrays."""
        b1, b2 = default_accuracy_prior(K)
        return {
            "alpha": resolve_alpha(self.alpha, K),
            "beta1": positive_scalar("beta1", self.beta1, b1),
            "beta2": positive_scalar("beta2", self.beta2, b2),
        }

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, np.ndarray]:
        """The prior entries of the Stan program's data block (``beta1``, ``beta2`` reals)."""
        return {
            **super().stan_priors(priors, K, J),
            "beta1": np.asarray(priors["beta1"], dtype=float).reshape(()),
            "beta2": np.asarray(priors["beta2"], dtype=float).reshape(()),
        }

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Starting accuracies ``p`` (J,), 0.6-0.85 (raters mostly right)."""
        return {"p": rng.uniform(0.6, 0.85, size=J)}

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Stan parameters at a mode found by EM (``pi`` (K,), ``theta`` (J, K, K))."""
        return {"pi": interior(pi), "p": np.clip(theta[:, 0, 0], 1e-6, 1 - 1e-6)}


def one_coin_theta(p: np.ndarray, K: int) -> np.ndarray:
    """Error matrices of the one-coin model.

    Parameters
    ----------
    p : array, shape (J,)
        ``p[j] = P(rater j is right)``, whatever the true class.
    K : int
        Number of categories (>= 2).

    Returns
    -------
    array, shape (J, K, K)
        ``theta[j, k, k] = p[j]``, ``theta[j, k, l] = (1 - p[j]) / (K - 1)``.
    """
    p = np.asarray(p, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p must have shape (J,); got shape {p.shape}")
    if int(K) != K or K < 2:
        raise ValueError(f"K must be an integer >= 2; got {K!r}")
    # the class-conditional matrices with one accuracy for every true class
    return class_conditional_theta(np.repeat(p[:, None], int(K), axis=1))


def simulate_one_coin(
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
    beta1: float | None = None,
    beta2: float | None = None,
) -> Simulation:
    """Simulate from the one-coin Dawid-Skene model.

    Rater ``j`` is right with probability ``p[j]``, whatever the item's true
    class, and otherwise picks one of the other K - 1 categories uniformly.

    Parameters
    ----------
    n_items, n_raters, n_categories, pi, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene` (``n_categories`` is needed unless
        ``pi`` or ``categories`` fixes K: ``p`` does not).
    p : array, shape (J,), or scalar, optional
        Accuracies in [0, 1]; a scalar is used for every rater.
        Default: ``p[j] ~ Beta(beta1, beta2)``.
    beta1, beta2 : float, optional
        Beta prior for drawing ``p`` (default: the model's, :func:`default_accuracy_prior`).

    Returns
    -------
    Simulation
        ``params = {"p": (J,) array}``; ``model="one_coin"``.

    Examples
    --------
    >>> from pyrater.models import simulate_one_coin
    >>> sim = simulate_one_coin(100, 4, n_categories=3, p=[0.9, 0.8, 0.7, 0.6], seed=0)
    >>> sim.theta.shape, float(sim.theta[0, 2, 2])
    ((4, 3, 3), 0.9)
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _infer_k(n_categories, {"pi": pi, "categories": categories})
    _check_categories(categories, K)
    d1, d2 = default_accuracy_prior(K)
    b1 = positive_scalar("beta1", beta1, d1)
    b2 = positive_scalar("beta2", beta2, d2)
    if p is not None:
        p = numeric_array("p", p, [(J,), ()], f"(J,) = ({J},) or a scalar")
        if np.any((p < 0) | (p > 1)):
            raise ValueError(f"p must hold probabilities in [0, 1]; got values from {p.min():g} to {p.max():g}")
    pi = _pi(rng, pi, K, alpha)
    p = rng.beta(np.full(J, float(b1)), np.full(J, float(b2))) if p is None else np.broadcast_to(p, (J,)).copy()
    theta = one_coin_theta(p, K)
    return _finish(rng, "one_coin", I, J, pi, theta, raters_per_item, repeats, {"p": p}, categories)


OneCoinDawidSkene.simulator = staticmethod(simulate_one_coin)
