"""Simulate rating data from the Dawid-Skene family, with the truth kept.

Every simulator is seeded through ``np.random.default_rng(seed)`` (no global
state) and fully vectorised: there is no Python loop over items or ratings,
so 10^7 ratings simulate in a few seconds.

Design
------
complete (``raters_per_item=None``)
    every rater rates every item ``repeats`` times.
incomplete (``raters_per_item=R``)
    each item is rated by ``R`` distinct raters drawn uniformly at random,
    each ``repeats`` times.

Generative model
----------------
``z_i ~ Categorical(pi)`` and each rating of item ``i`` by rater ``j`` is
drawn from ``Categorical(theta[j, z_i])``, with
``theta[j, k, l] = P(rater j says l | true class k)``.  The models differ in
how ``theta`` is structured:

dawid_skene
    a free K x K error matrix per rater.
homogeneous
    one K x K error matrix shared by all raters.
class_conditional
    ``theta[j, k, k] = p[j, k]`` and ``theta[j, k, l] = (1 - p[j, k]) / (K - 1)``.
hierarchical
    ``theta[j, k] = softmax(mu[k] + sigma[k] * raw[j, k])`` with
    ``raw ~ N(0, 1)``: every entry, diagonal and off-diagonal, varies by rater.

Parameters left as ``None`` are drawn from the model's prior (rater's
defaults, see :mod:`pyrater.models`), which favours raters who are more
often right than wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .data import RatingData
from .models import Model, default_alpha, default_beta, get_model, numeric_array

__all__ = [
    "Simulation",
    "simulate",
    "simulate_dawid_skene",
    "simulate_homogeneous",
    "simulate_class_conditional",
    "simulate_hierarchical",
    "class_conditional_theta",
]

SeedLike = int | np.random.Generator | np.random.SeedSequence | None

# ratings drawn per block when sampling the observed categories; bounds the
# temporary memory to a few times 8 * _BLOCK bytes whatever N is
_BLOCK = 1 << 21
# below this many item x rater cells, incomplete designs permute each row
# (argpartition of random keys); above it, Floyd's algorithm over positions
_PERMUTE_LIMIT = 4 * 10**6


@dataclass(frozen=True, eq=False)
class Simulation:
    """Simulated ratings together with the parameters that generated them.

    Attributes
    ----------
    data : RatingData
        The simulated ratings (items ``1 .. I``, raters ``1 .. J``,
        categories ``1 .. K`` unless labels were given).
    z : int array, shape (I,)
        True class code of each item, aligned with ``data.unit_labels``.
    pi : array, shape (K,)
        Class prevalences.
    theta : array, shape (J, K, K)
        ``theta[j, k, l] = P(rater j says l | true class k)``.
    model : str
        Model name: ``"dawid_skene"``, ``"homogeneous"``,
        ``"class_conditional"`` or ``"hierarchical"``.
    params : dict
        Model-specific truth: ``p`` (J, K) for the class-conditional model;
        ``mu`` (K, K), ``sigma`` (K, K) and ``gamma`` (J, K, K) for the
        hierarchical model; empty otherwise.
    """

    data: RatingData
    z: np.ndarray
    pi: np.ndarray
    theta: np.ndarray
    model: str
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("z", "pi", "theta"):
            arr = np.asarray(getattr(self, name)).view()
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def truth(self) -> pd.Series:
        """True class of each item with user labels: Series indexed by item label."""
        return pd.Series(
            self.data.categories.take(self.z),
            index=self.data.unit_labels,
            name="true_class",
        )

    @property
    def theta_labelled(self) -> "pd.DataFrame":
        """``theta`` as a long DataFrame indexed by (rater, category, rating) labels."""
        d = self.data
        index = pd.MultiIndex.from_product(
            [d.rater_labels, d.categories.rename("category"), d.categories.rename("rating")]
        )
        return pd.Series(self.theta.reshape(-1), index=index, name="theta").to_frame()

    def __repr__(self) -> str:
        return f"Simulation(model={self.model!r}, {self.data!r})"


# ---------------------------------------------------------------- validation
def _as_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}; got {value}")
    return int(value)


def _simplex(name: str, arr: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """Check ``arr`` is a probability vector along its last axis; renormalise rounding."""
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative (probabilities); min is {arr.min()!r}")
    sums = np.asarray(arr.sum(axis=-1))
    bad = np.abs(sums - 1) > tol
    if np.any(bad):
        first = tuple(int(v) for v in np.argwhere(bad)[0])
        loc = f" at index {first}" if first else ""
        raise ValueError(
            f"{name} must sum to 1 along its last axis; got a sum of {float(sums[first])!r}{loc}"
        )
    return arr / sums[..., None]


def _infer_k(n_categories: int | None, candidates: dict[str, Any]) -> int:
    """K from ``n_categories`` or the first given parameter's last axis; check agreement."""
    found = {}
    for name, value in candidates.items():
        if value is not None:
            shape = np.shape(value)
            if len(shape) >= 1:
                found[name] = shape[-1]
    if n_categories is not None:
        K = _as_int("n_categories", n_categories, 2)
    elif found:
        K = next(iter(found.values()))
        if K < 2:
            raise ValueError(f"at least 2 categories are needed; {next(iter(found))} has last axis of length {K}")
    else:
        raise ValueError(
            f"give n_categories (or one of {', '.join(candidates)}) to fix the number of categories"
        )
    return K


# ------------------------------------------------------------- design / draws
def _design(
    rng: np.random.Generator, n_items: int, n_raters: int, raters_per_item: int | None, repeats: int
) -> tuple[np.ndarray, np.ndarray]:
    """Item and rater codes of every rating, item-major.

    Returns
    -------
    item, rater : int64 arrays, shape (N,)
        ``N = I * R * repeats`` with ``R = J`` for the complete design.
    """
    I, J = n_items, n_raters
    if raters_per_item is None:
        R = J
        chosen = None
    else:
        R = _as_int("raters_per_item", raters_per_item, 1)
        if R > J:
            raise ValueError(f"raters_per_item must be at most n_raters = {J}; got {R}")
        chosen = _distinct_raters(rng, I, J, R)
    per_item = R * repeats
    item = np.repeat(np.arange(I, dtype=np.int64), per_item)
    if chosen is None:
        rater = np.tile(np.repeat(np.arange(J, dtype=np.int64), repeats), I)
    else:
        rater = np.repeat(chosen, repeats, axis=1).reshape(-1)
    return item, rater


def _distinct_raters(rng: np.random.Generator, I: int, J: int, R: int) -> np.ndarray:
    """``R`` distinct raters per item, uniformly at random: int64 array (I, R), rows sorted.

    When ``I * J`` is small, take the first ``R`` of a random permutation of
    each row (argpartition of uniform keys).  Otherwise use Floyd's
    algorithm vectorised over items: a loop over the ``R`` positions only,
    each step drawing one rater per item, O(I * R^2) work and O(I * R) memory.
    Both give every R-subset the same probability.
    """
    if R == J:
        return np.broadcast_to(np.arange(J, dtype=np.int64), (I, J)).copy()
    if I * J <= _PERMUTE_LIMIT:
        keys = rng.random((I, J))
        chosen = np.argpartition(keys, R - 1, axis=1)[:, :R].astype(np.int64)
    else:
        chosen = np.empty((I, R), dtype=np.int64)
        for c, t in enumerate(range(J - R, J)):
            x = rng.integers(0, t + 1, size=I, dtype=np.int64)
            if c:
                taken = (chosen[:, :c] == x[:, None]).any(axis=1)
                x[taken] = t
            chosen[:, c] = x
    chosen.sort(axis=1)
    return chosen


def _draw_ratings(
    rng: np.random.Generator, z: np.ndarray, item: np.ndarray, rater: np.ndarray, theta: np.ndarray
) -> np.ndarray:
    """One draw from ``Categorical(theta[rater, z[item]])`` per rating: int64 (N,).

    Inverse-CDF sampling with a loop over blocks of ratings and over the K
    categories only, so temporary memory stays bounded for any N.
    """
    J, K, _ = theta.shape
    cdf = np.cumsum(theta, axis=2)[:, :, : K - 1].reshape(-1)  # (J*K*(K-1),)
    out = np.empty(item.size, dtype=np.int64)
    for start in range(0, item.size, _BLOCK):
        stop = min(item.size, start + _BLOCK)
        base = (rater[start:stop] * K + z[item[start:stop]]) * (K - 1)
        u = rng.random(stop - start)
        r = np.zeros(stop - start, dtype=np.int64)
        for l in range(K - 1):
            r += cdf[base + l] <= u
        out[start:stop] = r
    return out


def _dirichlet_rows(rng: np.random.Generator, beta: np.ndarray) -> np.ndarray:
    """One Dirichlet draw per row of ``beta`` (..., K), vectorised via gammas."""
    g = rng.standard_gamma(beta)
    g = np.maximum(g, np.finfo(float).tiny)
    return g / g.sum(axis=-1, keepdims=True)


def _finish(
    rng: np.random.Generator,
    model: str,
    n_items: int,
    n_raters: int,
    pi: np.ndarray,
    theta: np.ndarray,
    raters_per_item: int | None,
    repeats: int,
    params: dict,
    categories: Any,
) -> Simulation:
    K = pi.size
    repeats = _as_int("repeats", repeats, 1)
    z = rng.choice(K, size=n_items, p=pi).astype(np.int64)
    item, rater = _design(rng, n_items, n_raters, raters_per_item, repeats)
    rating = _draw_ratings(rng, z, item, rater, theta)
    data = RatingData.from_codes(
        item, rater, rating, n_categories=K, n_items=n_items, n_raters=n_raters,
        categories=categories, copy=False,
    )
    return Simulation(data=data, z=z, pi=pi, theta=theta, model=model, params=params)


def _start(
    n_items: Any, n_raters: Any, raters_per_item: Any, repeats: Any, seed: SeedLike
) -> tuple[int, int, np.random.Generator]:
    """Validate the design arguments (before any drawing) and make the generator."""
    I = _as_int("n_items", n_items, 1)
    J = _as_int("n_raters", n_raters, 1)
    _as_int("repeats", repeats, 1)
    if raters_per_item is not None:
        R = _as_int("raters_per_item", raters_per_item, 1)
        if R > J:
            raise ValueError(f"raters_per_item must be at most n_raters = {J}; got {R}")
    return I, J, np.random.default_rng(seed)


def _check_categories(categories: Any, K: int) -> None:
    if categories is None:
        return
    if isinstance(categories, (str, bytes)) or np.ndim(categories) != 1:
        raise ValueError(f"categories must be a sequence of K labels; got {categories!r}")
    if len(categories) != K:
        raise ValueError(f"categories must have K = {K} labels; got {len(categories)}")
    if len(set(categories)) != K:
        raise ValueError(f"categories must be distinct; got {list(categories)!r}")


def _pi(rng: np.random.Generator, pi: Any, K: int, alpha: np.ndarray | None) -> np.ndarray:
    if pi is None:
        return _dirichlet_rows(rng, default_alpha(K) if alpha is None else alpha)
    return _simplex("pi", numeric_array("pi", pi, [(K,)], f"(K,) = ({K},)"))


# ----------------------------------------------------------------- simulators
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
        theta = numeric_array("theta", theta, [(J, K, K), (K, K)], f"(J, K, K) = ({J}, {K}, {K}) or (K, K) = ({K}, {K})")
        theta = np.broadcast_to(_simplex("theta", theta), (J, K, K)).copy()
    return _finish(rng, "dawid_skene", I, J, pi, theta, raters_per_item, repeats, {}, categories)


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
            raise ValueError(f"p must hold probabilities in [0, 1]; got values from {p.min()!r} to {p.max()!r}")
        p = np.broadcast_to(p, (J, K)).copy()
    theta = class_conditional_theta(p)
    return _finish(rng, "class_conditional", I, J, pi, theta, raters_per_item, repeats, {"p": p}, categories)


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
        {"pi": pi, "mu": mu, "sigma": sigma if np.ndim(sigma) else None, "categories": categories},
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


# ----------------------------------------------------------------- dispatcher
_SIMULATORS = {
    "dawid_skene": simulate_dawid_skene,
    "homogeneous": simulate_homogeneous,
    "class_conditional": simulate_class_conditional,
    "hierarchical": simulate_hierarchical,
}


def simulate(
    model: "str | Model",
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    **params: Any,
) -> Simulation:
    """Simulate rating data from a model given by name or object.

    Parameters
    ----------
    model : str or model object
        ``"dawid_skene"``, ``"homogeneous"``, ``"class_conditional"``,
        ``"hierarchical"``, or an object from :mod:`pyrater.models`.  A model
        object's priors (``alpha``, ``beta``, ``beta1``, ``beta2``) are used
        to draw the parameters not given.
    n_items, n_raters, n_categories, raters_per_item, repeats, seed
        As in :func:`simulate_dawid_skene`.
    **params
        Model parameters: ``pi`` and ``theta`` (dawid_skene, homogeneous),
        ``p`` (class_conditional), ``mu`` and ``sigma`` (hierarchical), and
        ``categories``.

    Returns
    -------
    Simulation

    Examples
    --------
    >>> sim = simulate("class_conditional", 100, 4, n_categories=3, raters_per_item=2, seed=0)
    >>> sim.data.n_ratings, sim.params["p"].shape
    (200, (4, 3))
    """
    spec = get_model(model)
    fn = _SIMULATORS[spec.name]
    allowed = set(fn.__code__.co_varnames[: fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount])
    allowed -= {"n_items", "n_raters", "n_categories", "raters_per_item", "repeats", "seed"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(
            f"parameters {unknown} do not apply to the {spec.title} model; it takes {sorted(allowed)}"
        )
    if not isinstance(model, str):
        # a model object: its (possibly user-set) priors drive the draws
        I = _as_int("n_items", n_items, 1)
        J = _as_int("n_raters", n_raters, 1)
        K = _infer_k(n_categories, {k: params.get(k) for k in ("pi", "theta", "p", "mu", "categories")})
        for key, value in spec.priors(K, J).items():
            params.setdefault(key, value)
        n_items, n_raters, n_categories = I, J, K
    return fn(
        n_items, n_raters, n_categories,
        raters_per_item=raters_per_item, repeats=repeats, seed=seed, **params,
    )
