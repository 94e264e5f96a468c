"""MACE: each rating is either competent (a copy of the true class) or spam.

On each rating rater ``j`` is competent with probability ``competence[j]``
and then gives the true class; otherwise it spams, answering from its own
distribution ``xi[j]`` (a simplex over the K ratings) whatever the true class
(Hovy, Berg-Kirkpatrick, Vaswani & Hovy 2013, "Learning Whom to Trust with
MACE", NAACL).  So rater ``j``'s error matrix is

    theta[j, k, l] = competence[j] * [k == l] + (1 - competence[j]) * xi[j, l],

a Dawid-Skene matrix with ``K`` free numbers per rater instead of ``K (K - 1)``.
Stan program ``stan/mace.stan``; EM and the Gibbs sampler work on the
Dawid-Skene expected counts (:mod:`pyrater.inference.em.steps`,
:mod:`pyrater.inference.gibbs.kernel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import ModelFamily, interior, numeric_array, resolve_alpha
from .one_coin import positive_scalar
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

__all__ = ["MACE", "simulate_mace", "mace_theta", "mace_parameters"]

#: Beta prior on a competence: Beta(2, 2), one competent and one spam rating (see :class:`MACE`)
DEFAULT_BETA1 = 2.0
DEFAULT_BETA2 = 2.0
#: symmetric Dirichlet prior on a spamming distribution: the paper's (and its code's) 10 per rating
DEFAULT_GAMMA = 10.0


def resolve_gamma(gamma: Any, K: int) -> np.ndarray:
    """The Dirichlet prior on each ``xi[j]``, (K,): 10 per rating when None, a scalar repeated K times."""
    if gamma is None:
        return np.full(K, DEFAULT_GAMMA)
    if np.ndim(gamma) == 0:
        gamma = np.full(K, float(gamma))
    arr = numeric_array("gamma", gamma, [(K,)], f"(K,) = ({K},) or a scalar")
    if np.any(arr <= 0):
        raise ValueError(f"gamma must be > 0; got min {arr.min()!r}")
    return arr


@register
@dataclass(frozen=True)
class MACE(ModelFamily):
    """MACE (Multi-Annotator Competence Estimation): competent copies or spam.

    ``theta[j, k, l] = competence[j] [k == l] + (1 - competence[j]) xi[j, l]``
    with ``competence[j] ~ Beta(beta1, beta2)``, ``xi[j] ~ Dirichlet(gamma)``
    and ``pi ~ Dirichlet(alpha)``.  ``competence[j]`` is the probability that
    rater ``j`` knows the answer on a rating; ``xi[j]`` is what it answers
    when it does not (its spamming distribution).

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi`` (default 3 per class, as
        every pyrater family; the paper fixes ``pi`` uniform).
    beta1, beta2 : scalar, optional
        Beta prior on each competence (default 2 and 2).
    gamma : array (K,) or scalar, optional
        Dirichlet prior on each spamming distribution (default 10 per rating,
        the paper's).

    Notes
    -----
    *Priors.*  On ``xi`` the default is the paper's (and its code's,
    github.com/dirkhovy/MACE) ``Dirichlet(10)``, which pulls the spamming
    distribution of a rater with few ratings towards uniform.  On the
    competence the authors' variational Bayes uses ``Beta(0.5, 0.5)``; its
    density is infinite at 0 and 1, so the posterior mode that
    ``method="em"`` and ``method="optimize"`` compute does not exist under
    it.  The uniform ``Beta(1, 1)`` is no remedy: its mode is the
    maximum-likelihood estimate, which puts raters who never disagree at
    competence exactly 1 and spammers at 0.  EM then crawls towards that
    boundary (thousands of iterations on real crowds), and a held-out item
    that two "perfect" raters disagree on gets probability 0, an elpd of
    minus infinity, so cross-validation and ``fit(data, "auto")`` cannot
    weigh the model.  pyrater's default is ``Beta(2, 2)``: one competent and
    one spam rating added to each rater's counts (Laplace's add-one rule),
    which is also the mode of the uniform prior on the log-odds scale.  Every
    method uses it, and every competence mode lies inside (0, 1).  For the
    paper's prior with the samplers, pass ``MACE(beta1=0.5, beta2=0.5)``
    (``method="gibbs"``, ``"mcmc"`` or ``"pathfinder"``; EM then takes the
    mode on the log-odds scale, ``fit.mode_scale``).

    *Identifiability.*  Unlike Dawid-Skene, the likelihood is not invariant
    under relabelling the true classes (competent raters copy the class, so
    no label switching), but it has flat directions of its own:

    * a rater with ``competence[j]`` near 1 almost never spams, so its
      ``xi[j]`` is informed by the prior only (its posterior stays wide);
    * a rater with ``competence[j]`` near 0 is a spammer: its ratings carry
      no information about the items, and it is reported as such;
    * if every rater's competence is near 0, ``pi`` is unidentified (the
      ratings do not depend on the true classes);
    * a spammer who always gives rating ``l`` looks, on items of class ``l``,
      like a competent rater: competence is only learned from items where
      the raters disagree, so with few raters per item expect wide intervals.

    The error matrices ``theta`` are identified whenever Dawid-Skene's are;
    from them :func:`mace_parameters` recovers ``competence`` and ``xi``.

    Examples
    --------
    >>> import pyrater
    >>> sim = pyrater.simulate("mace", 200, 5, n_categories=3, raters_per_item=3, seed=1)
    >>> fit = pyrater.fit(sim.data, "mace", method="em")
    >>> fit.point_estimate("pi").shape
    (3,)
    """

    alpha: Any = None
    beta1: Any = None
    beta2: Any = None
    gamma: Any = None
    name: ClassVar[str] = "mace"
    title: ClassVar[str] = "MACE"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em", "gibbs")
    conjugate: ClassVar[str | None] = "mace"
    k_params: ClassVar[tuple[str, ...]] = ("pi", "xi", "categories")

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved priors: ``alpha`` (K,), ``beta1`` and ``beta2`` 0-d arrays, ``gamma`` (K,)."""
        return {
            "alpha": resolve_alpha(self.alpha, K),
            "beta1": positive_scalar("beta1", self.beta1, DEFAULT_BETA1),
            "beta2": positive_scalar("beta2", self.beta2, DEFAULT_BETA2),
            "gamma": resolve_gamma(self.gamma, K),
        }

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, np.ndarray]:
        """The prior entries of the Stan program's data block (``beta1``, ``beta2`` reals, ``gamma`` (K,))."""
        return {
            **super().stan_priors(priors, K, J),
            "beta1": np.asarray(priors["beta1"], dtype=float).reshape(()),
            "beta2": np.asarray(priors["beta2"], dtype=float).reshape(()),
            "gamma": np.asarray(priors["gamma"], dtype=float).reshape(K),
        }

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Starting competences 0.5-0.8 (raters mostly competent) and near-uniform ``xi`` (J, K)."""
        return {"competence": rng.uniform(0.5, 0.8, size=J), "xi": rng.dirichlet(np.full(K, 20.0), size=J)}

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Stan parameters at a mode found by EM (``pi`` (K,), ``theta`` (J, K, K))."""
        competence, xi = mace_parameters(theta)
        return {"pi": interior(pi), "competence": np.clip(competence, 1e-6, 1 - 1e-6), "xi": interior(xi)}


def mace_theta(competence: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """Error matrices of MACE.

    Parameters
    ----------
    competence : array, shape (..., J)
        ``P(rater j knows the answer)`` on a rating.
    xi : array, shape (..., J, K)
        Each rater's spamming distribution.

    Returns
    -------
    array, shape (..., J, K, K)
        ``theta[j, k, l] = competence[j] [k == l] + (1 - competence[j]) xi[j, l]``.
    """
    c = np.asarray(competence, dtype=float)
    xi = np.asarray(xi, dtype=float)
    if xi.ndim < 2 or xi.shape[:-1] != c.shape:
        raise ValueError(f"xi must have shape competence.shape + (K,); got {xi.shape} for competence {c.shape}")
    K = xi.shape[-1]
    theta = np.repeat(((1.0 - c)[..., None] * xi)[..., None, :], K, axis=-2)
    idx = np.arange(K)
    theta[..., idx, idx] += c[..., None]
    return theta


def mace_parameters(theta: np.ndarray, gamma: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``competence`` (..., J) and ``xi`` (..., J, K) from MACE error matrices (..., J, K, K).

    ``competence[j] = theta[j, k, k] - theta[j, k', k]`` (``k' != k``, averaged
    over the pairs), ``xi[j, l] = theta[j, k, l] / (1 - competence[j])``
    (``k != l``, averaged).  Where ``competence[j]`` is 1, ``xi[j]`` is not
    determined by ``theta``: it is the mode of the Dirichlet(``gamma``) prior
    (uniform when ``gamma`` is None or has a coordinate below 1).
    """
    theta = np.asarray(theta, dtype=float)
    K = theta.shape[-1]
    idx = np.arange(K)
    diag = theta[..., idx, idx]  # (..., J, K): c + (1 - c) xi_l
    # column sums are c + K (1 - c) xi_l, so the mean off-diagonal entry of column l is (1 - c) xi_l
    col_off = (np.einsum("...kl->...l", theta) - diag) / (K - 1)
    c = np.clip(np.einsum("...l->...", diag - col_off) / K, 0.0, 1.0)
    spam = np.clip(col_off, 0.0, None)
    tot = np.einsum("...l->...", spam)[..., None]
    if gamma is not None and np.all(np.asarray(gamma) >= 1) and np.sum(np.asarray(gamma) - 1) > 0:
        g = np.asarray(gamma, dtype=float) - 1.0
        fallback = g / g.sum()
    else:
        fallback = np.full(K, 1.0 / K)
    with np.errstate(divide="ignore", invalid="ignore"):
        xi = np.where(tot > 1e-300, spam / tot, fallback)
    return c, xi


def simulate_mace(
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    pi: np.ndarray | None = None,
    competence: np.ndarray | None = None,
    xi: np.ndarray | None = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    categories: Any = None,
    alpha: np.ndarray | None = None,
    beta1: float | None = None,
    beta2: float | None = None,
    gamma: np.ndarray | None = None,
) -> Simulation:
    """Simulate from MACE.

    On each rating rater ``j`` is competent with probability
    ``competence[j]`` and gives the true class; otherwise it answers from
    ``xi[j]``.

    Parameters
    ----------
    n_items, n_raters, n_categories, pi, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene`.
    competence : array, shape (J,), or scalar, optional
        Competences in [0, 1]; a scalar is used for every rater.
        Default: ``competence[j] ~ Beta(beta1, beta2)``.
    xi : array, shape (J, K) or (K,), optional
        Spamming distributions (a (K,) row is used for every rater).
        Default: ``xi[j] ~ Dirichlet(gamma)``.
    beta1, beta2 : float, optional
        Beta prior for drawing the competences (default 2 and 2, the model's).
    gamma : array (K,) or scalar, optional
        Dirichlet prior for drawing ``xi`` (default 10 per rating).

    Returns
    -------
    Simulation
        ``params = {"competence": (J,), "xi": (J, K)}``; ``model="mace"``.

    Examples
    --------
    >>> from pyrater.models import simulate_mace
    >>> sim = simulate_mace(100, 2, n_categories=2, competence=[0.9, 0.0], xi=[0.5, 0.5], seed=0)
    >>> sim.theta[1].tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _infer_k(n_categories, {"pi": pi, "xi": xi, "categories": categories})
    _check_categories(categories, K)
    b1 = positive_scalar("beta1", beta1, DEFAULT_BETA1)
    b2 = positive_scalar("beta2", beta2, DEFAULT_BETA2)
    g = resolve_gamma(gamma, K)
    if competence is not None:
        competence = numeric_array("competence", competence, [(J,), ()], f"(J,) = ({J},) or a scalar")
        if np.any((competence < 0) | (competence > 1)):
            raise ValueError(
                f"competence must hold probabilities in [0, 1]; got values from {competence.min():g} "
                f"to {competence.max():g}"
            )
    if xi is not None:
        xi = numeric_array("xi", xi, [(J, K), (K,)], f"(J, K) = ({J}, {K}) or (K,)")
        if np.any(xi < 0) or not np.allclose(xi.sum(axis=-1), 1.0, atol=1e-8):
            raise ValueError("xi must hold probability rows: entries >= 0 summing to 1 over the last axis")
    pi = _pi(rng, pi, K, alpha)
    if competence is None:
        competence = rng.beta(np.full(J, float(b1)), np.full(J, float(b2)))
    else:
        competence = np.broadcast_to(competence, (J,)).copy()
    xi = rng.dirichlet(g, size=J) if xi is None else np.broadcast_to(xi, (J, K)).copy()
    theta = mace_theta(competence, xi)
    return _finish(
        rng, "mace", I, J, pi, theta, raters_per_item, repeats, {"competence": competence, "xi": xi}, categories
    )


MACE.simulator = staticmethod(simulate_mace)
