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
one_coin
    ``theta[j, k, k] = p[j]`` and ``theta[j, k, l] = (1 - p[j]) / (K - 1)``.
mace
    ``theta[j, k, l] = competence[j] [k == l] + (1 - competence[j]) xi[j, l]``.
hierarchical
    ``theta[j, k] = softmax(mu[k] + sigma[k] * raw[j, k])`` with
    ``raw ~ N(0, 1)``: every entry, diagonal and off-diagonal, varies by rater.

Parameters left as ``None`` are drawn from the model's prior (rater's
defaults, see :mod:`pyrater.models`), which favours raters who are more
often right than wrong.

Size
----
Before anything is drawn, the memory the simulation needs is checked against
``max_memory_gib`` (the documented default of ``pyrater._validation``, 1 GiB,
unless :func:`simulate` is given another): about ``8 x (3 N + 2 I)`` bytes
for ``N = I x R x repeats`` ratings (three code arrays, the classes) plus
``32 x J x K x K`` for the error matrices and their draws.  A larger request
raises a ``ValueError`` saying what it would take and what to ask for less.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import _is_int, check_int, check_memory
from ..data.ratings import RatingData
from .base import Model, default_alpha, numeric_array

__all__ = ["Simulation", "simulate", "SeedLike"]

SeedLike = int | np.random.Generator | np.random.SeedSequence | None

# ratings drawn per block when sampling the observed categories; bounds the
# temporary memory to a few times 8 * _BLOCK bytes whatever N is
_BLOCK = 1 << 21
# below this many item x rater cells, incomplete designs permute each row
# (argpartition of random keys); above it, Floyd's algorithm over positions
_PERMUTE_LIMIT = 4 * 10**6
# the memory limit of the running simulate() call (None: the documented default)
_LIMIT: ContextVar[float | None] = ContextVar("pyrater_simulate_limit", default=None)
# the design (I, J, N) checked by _start, completed with K by _check_categories (every simulator calls both)
_PENDING: ContextVar[tuple[int, int, int] | None] = ContextVar("pyrater_simulate_design", default=None)


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
        ``"class_conditional"``, ``"one_coin"``, ``"mace"`` or ``"hierarchical"``.
    params : dict
        Model-specific truth: ``p`` (J, K) for the class-conditional model,
        ``p`` (J,) for the one-coin model, ``competence`` (J,) and ``xi``
        (J, K) for MACE; ``mu`` (K, K), ``sigma`` (K, K) and ``gamma`` (J, K, K) for the
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
    def theta_labelled(self) -> pd.DataFrame:
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
    return check_int(name, value, minimum)


def _simplex(name: str, arr: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """Check ``arr`` is a probability vector along its last axis; renormalise rounding."""
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative (probabilities); min is {arr.min()!r}")
    sums = np.asarray(arr.sum(axis=-1))
    bad = np.abs(sums - 1) > tol
    if np.any(bad):
        first = tuple(int(v) for v in np.argwhere(bad)[0])
        loc = f" at index {first}" if first else ""
        raise ValueError(f"{name} must sum to 1 along its last axis; got a sum of {float(sums[first])!r}{loc}")
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
        raise ValueError(f"give n_categories (or one of {', '.join(candidates)}) to fix the number of categories")
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
        item,
        rater,
        rating,
        n_categories=K,
        n_items=n_items,
        n_raters=n_raters,
        categories=categories,
        copy=False,
    )
    return Simulation(data=data, z=z, pi=pi, theta=theta, model=model, params=params)


def _simulation_bytes(I: int, J: int, N: int, K: int) -> float:
    """Memory a simulation takes: three int64 codes per rating, the classes, the error matrices and their draws."""
    return 8.0 * (3 * N + 2 * I) + 32.0 * J * K * K


def _check_size(I: int, J: int, N: int, K: int, k_known: bool = True) -> None:
    """Refuse a simulation over the memory limit (``simulate``'s ``max_memory_gib``, else the default)."""
    ask = ("n_items", "raters_per_item", "repeats") if 3 * N + 2 * I >= 4 * J * K * K else ("n_raters",)
    check_memory(
        f"simulating {N:,} ratings of {I:,} items by {J:,} raters with K {'=' if k_known else '>='} {K}",
        _simulation_bytes(I, J, N, K),
        _LIMIT.get(),
        ask=ask,
        detail=f"about 8 x (3 x {N:,} ratings + 2 x {I:,} items) + 32 x {J:,} x {K} x {K} bytes",
    )


def _start(
    n_items: Any, n_raters: Any, raters_per_item: Any, repeats: Any, seed: SeedLike
) -> tuple[int, int, np.random.Generator]:
    """Validate the design arguments (before any drawing) and make the generator.

    The ratings' memory is checked here (with K >= 2); :func:`_check_categories`,
    which every simulator calls once K is known, checks the whole.
    """
    I = _as_int("n_items", n_items, 1)
    J = _as_int("n_raters", n_raters, 1)
    reps = _as_int("repeats", repeats, 1)
    R = J
    if raters_per_item is not None:
        R = _as_int("raters_per_item", raters_per_item, 1)
        if R > J:
            raise ValueError(f"raters_per_item must be at most n_raters = {J}; got {R}")
    N = I * R * reps
    _check_size(I, J, N, 2, k_known=False)
    _PENDING.set((I, J, N))
    return I, J, np.random.default_rng(_check_sim_seed(seed))


def _check_sim_seed(seed: Any) -> int | np.random.Generator | np.random.SeedSequence | np.random.BitGenerator | None:
    """A simulator's seed: None, a non-negative integer, or a numpy Generator, SeedSequence or BitGenerator."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        return seed
    if not _is_int(seed) or seed < 0:
        raise ValueError(
            f"seed must be a non-negative integer, a numpy Generator or SeedSequence, or None; got {seed!r}"
        )
    return int(seed)


def _check_categories(categories: Any, K: int) -> None:
    pending = _PENDING.get()
    if pending is not None:  # the design of the simulator that called _start: now with K
        _PENDING.set(None)
        _check_size(*pending, K)
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


# ----------------------------------------------------------------- dispatcher
def simulate(
    model: str | Model,
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    max_memory_gib: float | None = None,
    **params: Any,
) -> Simulation:
    """Simulate rating data from a model given by name or object.

    Parameters
    ----------
    model : str or model object
        ``"dawid_skene"``, ``"homogeneous"``, ``"class_conditional"``,
        ``"one_coin"``, ``"mace"``, ``"hierarchical"``, or an object from :mod:`pyrater.models`.  A model
        object's priors (``alpha``, ``beta``, ``beta1``, ``beta2``) are used
        to draw the parameters not given.
    n_items, n_raters, n_categories, raters_per_item, repeats, seed
        As in :func:`simulate_dawid_skene`.
    max_memory_gib : float, optional
        The memory the simulation may take (default: the documented 1 GiB);
        a larger request is refused before anything is drawn (see Size in
        this module's notes).
    **params
        Model parameters: ``pi`` and ``theta`` (dawid_skene, homogeneous),
        ``p`` (class_conditional (J, K), one_coin (J,)), ``competence`` and ``xi`` (mace), ``mu`` and
        ``sigma`` (hierarchical), and
        ``categories``.

    Returns
    -------
    Simulation

    Examples
    --------
    >>> from pyrater.models import simulate
    >>> sim = simulate("class_conditional", 100, 4, n_categories=3, raters_per_item=2, seed=0)
    >>> sim.data.n_ratings, sim.params["p"].shape
    (200, (4, 3))
    """
    from .registry import get_model

    spec = get_model(model)
    fn = type(spec).simulator
    allowed = set(fn.__code__.co_varnames[: fn.__code__.co_argcount + fn.__code__.co_kwonlyargcount])
    allowed -= {"n_items", "n_raters", "n_categories", "raters_per_item", "repeats", "seed"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"parameters {unknown} do not apply to the {spec.title} model; it takes {sorted(allowed)}")
    if not isinstance(model, str):
        # a model object: its (possibly user-set) priors drive the draws
        I = _as_int("n_items", n_items, 1)
        J = _as_int("n_raters", n_raters, 1)
        K = _infer_k(n_categories, {k: params.get(k) for k in type(spec).k_params})
        for key, value in spec.priors(K, J).items():
            params.setdefault(key, value)
        n_items, n_raters, n_categories = I, J, K
    token = _LIMIT.set(max_memory_gib)
    try:
        return fn(
            n_items,
            n_raters,
            n_categories,
            raters_per_item=raters_per_item,
            repeats=repeats,
            seed=seed,
            **params,
        )
    finally:
        _LIMIT.reset(token)
