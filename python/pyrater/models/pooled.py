"""Pooled Dawid-Skene model: a hierarchical Dirichlet prior on the raters' error matrices.

Each rater's row ``theta[j, k, :]`` is drawn around a population row ``m[k]``
with a concentration ``s[k]`` learned from the data, so a rater with few
ratings borrows strength from the others while a rater with many keeps their
own error matrix:

``theta[j, k] ~ Dirichlet(1 + s[k] m[k])``, ``m[k] ~ Dirichlet(beta[k])``,
``s[k] ~ Gamma(s_shape, s_rate)``, ``pi ~ Dirichlet(alpha)``.

Parameterisation
----------------
``1 + s m`` is the Dirichlet with *mode* ``m[k]`` (the population's typical
row) and concentration ``s[k]``: its mean is ``(1 + s m) / (K + s)``, between
the uniform row (``s -> 0``) and ``m[k]`` (``s -> inf``).  Every Dirichlet
parameter is then above 1, which keeps the joint posterior density bounded:
with ``Dirichlet(s m)`` a parameter below 1 makes the density infinite on the
simplex boundary, so the posterior mode (``method="optimize"``, EM MAP) would
not exist.  Given ``(m, s)`` the model is Dawid-Skene with ``beta[j, k] =
1 + s[k] m[k]`` for every rater: conjugate, so Gibbs and EM run at crowd scale.

Priors and why
--------------
``m[k] ~ Dirichlet(beta[k])`` with rater's diagonal-heavy ``beta`` (weight 8,
0.6 on the diagonal; entries below 1, the off-diagonal for K >= 5, raised to
1 so that the mode of ``m`` is inside the simplex for every K): the population
is more often right than wrong, which breaks label switching as in the other
families.  ``s[k] ~ Gamma(2, 0.1)``
(mean 20, mode 10; 95% of its mass between 2.4 and 56 pseudo-ratings):
weakly informative on the scale of "how many ratings is the population worth
to one rater".  Shape 2 > 1 puts zero density at ``s = 0``; the exponential
tail keeps the posterior mode finite.  The joint mode of
``(theta, m, s)`` (what ``optimize`` and EM find) favours large ``s`` by about
``J (K - 1) / 2 log s`` (every rater's density peaks when its row sits at
``m``) against a finite likelihood penalty: besides the interior mode there is
one near ``s = J (K - 1) / (2 s_rate)`` where every rater's row is ``m`` (the
homogeneous model), which with thousands of raters can be the higher and which
EM can reach.  The mode shrinks harder than the full posterior (Gibbs, NUTS);
at crowd scale use Gibbs.

In Stan the error matrices are sampled in the centred parameterisation (a
Dirichlet has no simple non-centred form); with the default ``s`` prior the
funnel is mild, but sparse data with many raters may show divergences.
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
    _finish,
    _infer_k,
    _pi,
    _simplex,
    _start,
)

__all__ = ["PooledDawidSkene", "simulate_pooled", "pooled_row_prior"]

#: default Gamma(shape, rate) prior on each concentration s[k]
DEFAULT_S_SHAPE = 2.0
DEFAULT_S_RATE = 0.1


def _positive_scalar(name: str, value: Any, default: float, minimum: float = 0.0) -> np.ndarray:
    if value is None:
        return np.array(float(default))
    arr = numeric_array(name, value, [(), (1,)], "() (a scalar)").reshape(())
    if not arr > minimum:
        raise ValueError(f"{name} must be > {minimum:g}; got {float(arr)!r}")
    return arr


def pooled_row_prior(m: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The Dirichlet parameters of the raters' rows: ``1 + s[k] m[k, l]``, shape (K, K)."""
    m = np.asarray(m, dtype=float)
    s = np.asarray(s, dtype=float)
    return 1.0 + s[..., :, None] * m


@register
@dataclass(frozen=True)
class PooledDawidSkene(ModelFamily):
    """Pooled (hierarchical Dirichlet) Dawid-Skene: raters' error matrices drawn around a population's.

    ``theta[j, k] ~ Dirichlet(1 + s[k] m[k])``, ``m[k] ~ Dirichlet(beta[k])``,
    ``s[k] ~ Gamma(s_shape, s_rate)``, ``pi ~ Dirichlet(alpha)``.  ``m[k]`` is
    the population's (modal) row k, ``s[k]`` how tightly the raters follow it;
    both are learned, so raters with few ratings borrow strength from the rest.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi`` (default 3 per class).
    beta : array (K, K), optional
        Dirichlet prior on each population row ``m[k]`` (default rater's
        diagonal-heavy prior, weight 8 with 0.6 on the diagonal, its entries
        raised to at least 1 so that the posterior mode exists for every K).
    s_shape, s_rate : scalar, optional
        Gamma prior on each concentration ``s[k]`` (default 2 and 0.1: mean
        20, mode 10; ``s_shape`` must be > 1 so that the mode is not at 0).
    em_update : {"mode", "expected"}, optional
        How EM updates ``(m, s)``.  ``"mode"`` (default): maximise their
        density given the current theta, so EM finds the joint posterior mode
        (Stan's ``optimize``); at crowd scale that mode can collapse towards
        ``theta[j] = m`` (see the module notes).  ``"expected"``: maximise the
        expectation of that density under each rater's Dirichlet posterior
        ``Dirichlet(N[j, k] + 1 + s m)`` given the expected counts (the
        variational Bayes update of the hyperparameters): the raters'
        uncertainty enters, ``s`` stays finite where the data say so; the
        estimate is then not the joint mode.  Used by EM only.

    Notes
    -----
    See :mod:`pyrater.models.pooled` for the parameterisation (the ``1 +``
    keeps the posterior mode finite) and the choice of priors.  The Bayesian
    classifier combination of Kim & Ghahramani (2012) with a learned
    population; Venanzi et al. (2014) add communities.

    Examples
    --------
    >>> import pyrater
    >>> sim = pyrater.simulate("pooled", 200, 8, n_categories=3, raters_per_item=3, seed=1)
    >>> fit = pyrater.fit(sim.data, "pooled", method="em")
    >>> fit.point_estimate("pi").shape
    (3,)
    """

    alpha: Any = None
    beta: Any = None
    s_shape: Any = None
    s_rate: Any = None
    em_update: Any = None
    name: ClassVar[str] = "pooled"
    title: ClassVar[str] = "Pooled Dawid-Skene"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em", "gibbs")
    conjugate: ClassVar[str | None] = "pooled"
    k_params: ClassVar[tuple[str, ...]] = ("pi", "m", "categories")
    mode_free_priors: ClassVar[tuple[str, ...]] = ("s_rate",)  # s_shape > 1 is checked by priors()
    #: "auto" tries it by its samplers only: the joint posterior mode (EM, optimize) over-shrinks the raters
    #: towards the population rows as raters grow numerous (see the class docstring)
    auto_methods: ClassVar[tuple[str, ...] | None] = ("gibbs", "mcmc", "pathfinder")
    auto_left_out: ClassVar[str] = (
        "not tried by method='{method}': the joint posterior mode over-shrinks the raters towards the population "
        "rows; name it in candidates to compare it, or let auto fit by method='gibbs'"
    )

    def __post_init__(self) -> None:
        if self.em_update not in (None, "mode", "expected"):
            raise ValueError(f"em_update must be 'mode' or 'expected'; got {self.em_update!r}")

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved priors: ``alpha`` (K,), ``beta`` (K, K), ``s_shape`` and ``s_rate`` 0-d arrays."""
        beta = np.maximum(default_beta(K), 1.0) if self.beta is None else self.beta
        beta = positive_array("beta", beta, [(K, K)], f"(K, K) = ({K}, {K})")
        return {
            "alpha": resolve_alpha(self.alpha, K),
            "beta": beta,
            "s_shape": _positive_scalar("s_shape", self.s_shape, DEFAULT_S_SHAPE, 1.0),
            "s_rate": _positive_scalar("s_rate", self.s_rate, DEFAULT_S_RATE),
        }

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, np.ndarray]:
        """The prior entries of the Stan program's data block (``beta`` (K, K), ``s_shape``, ``s_rate``)."""
        return {
            **super().stan_priors(priors, K, J),
            "beta": np.asarray(priors["beta"], dtype=float).reshape(K, K),
            "s_shape": np.asarray(priors["s_shape"], dtype=float).reshape(()),
            "s_rate": np.asarray(priors["s_rate"], dtype=float).reshape(()),
        }

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Diagonal-heavy population rows ``m`` (K, K) and raters' rows ``theta``; ``s`` (K,) 5-20."""
        return {
            "m": diagonal_heavy_rows(rng, (), K),
            "s": rng.uniform(5.0, 20.0, size=K),
            "theta": diagonal_heavy_rows(rng, (J,), K),
        }

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Stan parameters at a mode found by EM: ``theta`` and its raters' mean row as ``m``."""
        K = pi.size
        return {
            "pi": interior(pi),
            "theta": interior(theta),
            "m": interior(np.mean(theta, axis=0)),
            "s": np.full(K, DEFAULT_S_SHAPE / DEFAULT_S_RATE),
        }


def simulate_pooled(
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    pi: np.ndarray | None = None,
    m: np.ndarray | None = None,
    s: np.ndarray | None = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    categories: Any = None,
    alpha: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    s_shape: float | None = None,
    s_rate: float | None = None,
) -> Simulation:
    """Simulate from the pooled Dawid-Skene model.

    ``theta[j, k] ~ Dirichlet(1 + s[k] m[k])`` for every rater.

    Parameters
    ----------
    n_items, n_raters, n_categories, pi, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene`.
    m : array, shape (K, K), optional
        Population rows (each a probability vector, the mode of the raters'
        rows).  Default: ``m[k] ~ Dirichlet(beta[k])``.
    s : array, shape (K,), or scalar, optional
        Concentrations > 0.  Default: ``s[k] ~ Gamma(s_shape, s_rate)``.
    beta, s_shape, s_rate
        Priors for drawing ``m`` and ``s`` (defaults of :class:`PooledDawidSkene`).

    Returns
    -------
    Simulation
        ``params = {"m": (K, K), "s": (K,)}``; ``model="pooled"``.

    Examples
    --------
    >>> from pyrater.models import simulate_pooled
    >>> sim = simulate_pooled(100, 6, n_categories=2, s=50.0, seed=0)
    >>> sim.params["m"].shape, sim.theta.shape
    ((2, 2), (6, 2, 2))
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _infer_k(n_categories, {"pi": pi, "m": m, "categories": categories})
    _check_categories(categories, K)
    pri = PooledDawidSkene(alpha=alpha, beta=beta, s_shape=s_shape, s_rate=s_rate).priors(K, J)
    if m is not None:
        m = _simplex("m", numeric_array("m", m, [(K, K)], f"(K, K) = ({K}, {K})"))
    if s is not None:
        s = numeric_array("s", s, [(K,), ()], f"(K,) = ({K},) or a scalar")
        if np.any(s <= 0):
            raise ValueError(f"s must be > 0; got min {float(np.min(s))!r}")
        s = np.broadcast_to(s, (K,)).copy()
    pi = _pi(rng, pi, K, alpha)
    if m is None:
        m = np.stack([rng.dirichlet(b) for b in pri["beta"]])
    if s is None:
        s = rng.gamma(float(pri["s_shape"]), 1.0 / float(pri["s_rate"]), size=K)
    a = pooled_row_prior(m, s)
    theta = np.stack([np.stack([rng.dirichlet(a[k]) for k in range(K)]) for _ in range(J)])
    return _finish(rng, "pooled", I, J, pi, theta, raters_per_item, repeats, {"m": m, "s": s}, categories)


PooledDawidSkene.simulator = staticmethod(simulate_pooled)
