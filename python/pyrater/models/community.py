"""Community Dawid-Skene model: raters in latent communities that share a typical error matrix.

Community-based Bayesian classifier combination (CBCC; Venanzi, Guiver,
Kazai, Kohli & Shokouhi 2014, "Community-based Bayesian aggregation models
for crowdsourcing", WWW '14): each rater ``j`` belongs to one of ``L``
communities, ``c[j] ~ Categorical(rho)``; community ``l`` has a typical
error matrix ``m[l]`` and each member's own matrix deviates from it:

``theta[j, k] | c[j] = l ~ Dirichlet(1 + s[l, k] m[l, k])``, ``m[l, k] ~ Dirichlet(beta[k])``,
``s[l, k] ~ Gamma(s_shape, s_rate)``, ``rho ~ Dirichlet(rho_alpha)``, ``pi ~ Dirichlet(alpha)``.

It is a mixture of the pooled model's priors (:mod:`pyrater.models.pooled`),
one per community; with ``L = 1`` it is the pooled model.  Venanzi et al.
draw each member's matrix from a Gaussian around the community's in
log-odds space; the Dirichlet here keeps every conditional conjugate, so
Gibbs and EM run at crowd scale.

Marginalisation
---------------
``theta[j]`` is a continuous parameter, so the community enters only its
prior: ``p(theta[j]) = sum_l rho[l] prod_k Dirichlet(theta[j, k] | 1 + s[l, k]
m[l, k])``.  The Stan program sums ``c`` out with ``log_sum_exp`` (no discrete
parameter); EM treats ``c`` as missing data (responsibilities in the E-step);
Gibbs draws it with theta integrated out (given the classes), then theta
given it.  Every method reports the posterior probability that rater ``j`` is
in community ``l``, ``community_prob`` (J, L): Rao-Blackwellised over the
draws (NUTS: the mean of ``P(c_j = l | theta, m, s, rho)``; Gibbs: of
``P(c_j = l | z, m, s, rho)``; both estimate ``P(c_j = l | y)``), at the
estimate (EM: the responsibilities).

Labels of the communities
-------------------------
The model is unchanged when the communities are relabelled.  Every method
reports them sorted by the mean diagonal of ``m[l]`` (the community's
typical accuracy), largest first: the Gibbs sampler relabels its state
after every sweep (the posterior is invariant under relabelling, so the
chain's stationary law is unchanged), the Stan program returns the sorted
``m``, ``s``, ``rho`` and ``community_prob`` in generated quantities (its
unsorted parameters are ``m_raw``, ``s_raw``, ``rho_raw``), EM sorts its
estimate.  The classes are identified as in the other families, by the
diagonal-heavy prior on ``m``.

Priors and why
--------------
``m``, ``s`` as the pooled model's (``beta`` rater's diagonal-heavy prior
with entries raised to 1; ``s ~ Gamma(2, 0.1)``); ``rho ~ Dirichlet(2)``:
every community has prior mass, and with ``rho_alpha >= 1`` the posterior
mode (EM, ``optimize``) exists.  ``n_communities = 3`` by default: room for
the three kinds of rater crowdsourcing studies describe (diligent, sloppy,
spammers) at small cost; a community the data do not need gets a small ``rho``
or duplicates another, which costs little predictive accuracy.  To let the
data choose L, fit ``L = 1, 2, ...`` and rank them with :func:`pyrater.compare`
(see the models guide).

The joint posterior mode (EM, ``optimize``) shrinks each rater towards their
community's ``m`` harder than the full posterior, as the pooled model's (see
there): "auto" tries this family by its samplers only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._stacklevel import user_stacklevel
from .base import (
    ModelFamily,
    default_beta,
    diagonal_heavy_rows,
    interior,
    numeric_array,
    positive_array,
    resolve_alpha,
)
from .pooled import DEFAULT_S_RATE, DEFAULT_S_SHAPE, _positive_scalar, pooled_row_prior
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

__all__ = ["CommunityDawidSkene", "simulate_community", "sort_communities", "DEFAULT_N_COMMUNITIES"]

#: default number of communities L
DEFAULT_N_COMMUNITIES = 3
#: default symmetric Dirichlet prior on the community sizes rho
DEFAULT_RHO_ALPHA = 2.0


def _n_communities(value: Any) -> int:
    if value is None:
        return DEFAULT_N_COMMUNITIES
    arr = np.asarray(value)
    integral = arr.dtype.kind in "iu" or (arr.dtype.kind == "f" and arr.shape == () and float(arr).is_integer())
    if arr.shape != () or not integral or int(arr) < 1:
        raise ValueError(f"n_communities must be an integer >= 1; got {value!r}")
    return int(arr)


def community_order(m: np.ndarray) -> np.ndarray:
    """Order of the communities (last-but-two axis of ``m`` (..., L, K, K)): mean diagonal, largest first."""
    diag = np.diagonal(np.asarray(m), axis1=-2, axis2=-1).mean(-1)  # (..., L)
    return np.argsort(-diag, axis=-1, kind="stable")


def sort_communities(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``m`` (..., L, K, K), ``s`` (..., L, K), ``rho`` (..., L), ``community_prob`` (..., J, L) relabelled.

    The communities are sorted by the mean diagonal of ``m`` (largest first),
    separately for every leading index (draw).  Keys absent are skipped; a
    ``community`` (..., J) of labels is renumbered.  Returns new arrays.
    """
    m = np.asarray(params["m"])
    order = community_order(m)  # (..., L)
    out = dict(params)
    out["m"] = np.take_along_axis(m, order[..., None, None], axis=-3)
    if "s" in params:
        out["s"] = np.take_along_axis(np.asarray(params["s"]), order[..., None], axis=-2)
    if "rho" in params:
        out["rho"] = np.take_along_axis(np.asarray(params["rho"]), order, axis=-1)
    if "community_prob" in params:
        out["community_prob"] = np.take_along_axis(np.asarray(params["community_prob"]), order[..., None, :], axis=-1)
    if "community" in params:
        rank = np.argsort(order, axis=-1)  # new label of old label l
        out["community"] = np.take_along_axis(rank, np.asarray(params["community"]), axis=-1)
    return out


@register
@dataclass(frozen=True)
class CommunityDawidSkene(ModelFamily):
    """Community Dawid-Skene (CBCC): raters in L latent communities, each rater deviating from its community.

    ``c[j] ~ Categorical(rho)``, ``theta[j, k] | c[j] = l ~ Dirichlet(1 + s[l, k] m[l, k])``,
    ``m[l, k] ~ Dirichlet(beta[k])``, ``s[l, k] ~ Gamma(s_shape, s_rate)``,
    ``rho ~ Dirichlet(rho_alpha)``, ``pi ~ Dirichlet(alpha)``.  ``m[l]`` is the
    community's typical (modal) error matrix, ``s[l, k]`` how tightly its
    members follow row k.  After Venanzi et al. (2014), "Community-based
    Bayesian aggregation models for crowdsourcing", WWW '14, with Dirichlet
    (conjugate) deviations of the members.

    Parameters
    ----------
    n_communities : int, optional
        L, the number of communities (default 3; see the module notes, and the
        models guide for letting the data choose L with :func:`pyrater.compare`).
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi`` (default 3 per class).
    beta : array (K, K), optional
        Dirichlet prior on each community's row ``m[l, k]`` (default as the
        pooled model's: rater's diagonal-heavy prior with entries >= 1).
    s_shape, s_rate : scalar, optional
        Gamma prior on each concentration ``s[l, k]`` (default 2 and 0.1).
    rho_alpha : scalar, optional
        Symmetric Dirichlet prior on the community sizes ``rho`` (default 2;
        at least 1 for the posterior mode to exist).
    em_update : {"mode", "expected"}, optional
        How EM updates ``(m, s)``, as in :class:`pyrater.PooledDawidSkene`: ``"mode"``
        (default) maximises their density given the current theta, so EM finds
        the joint posterior mode (Stan's ``optimize``), which shrinks the raters
        towards their community's rows; ``"expected"`` maximises its expectation
        under each rater's Dirichlet posterior given the expected counts (the
        variational Bayes update of the hyperparameters; not the joint mode).

    Notes
    -----
    Communities are reported sorted by the mean diagonal of ``m`` (most
    accurate first); ``community_prob`` (J, L) is each rater's posterior
    probability of each community.  See :mod:`pyrater.models.community`.

    Examples
    --------
    >>> import pyrater
    >>> sim = pyrater.simulate("community", 200, 8, n_categories=3, raters_per_item=3, seed=1)
    >>> fit = pyrater.fit(sim.data, "community", method="em")
    >>> fit.model_params["community_prob"].shape
    (8, 3)
    """

    n_communities: Any = None
    alpha: Any = None
    beta: Any = None
    s_shape: Any = None
    s_rate: Any = None
    rho_alpha: Any = None
    em_update: Any = None
    name: ClassVar[str] = "community"
    title: ClassVar[str] = "Community Dawid-Skene"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em", "gibbs")
    conjugate: ClassVar[str | None] = "community"
    k_params: ClassVar[tuple[str, ...]] = ("pi", "m", "categories")
    mode_free_priors: ClassVar[tuple[str, ...]] = ("s_rate", "n_communities")
    #: as the pooled model: the joint mode (EM, optimize) over-shrinks raters towards their community's rows
    auto_methods: ClassVar[tuple[str, ...] | None] = ("gibbs", "mcmc", "pathfinder")
    auto_left_out: ClassVar[str] = (
        "not tried by method='{method}': the joint posterior mode over-shrinks the raters towards the community's "
        "rows; name it in candidates to compare it, or let auto fit by method='gibbs'"
    )

    def __post_init__(self) -> None:
        _n_communities(self.n_communities)
        if self.em_update not in (None, "mode", "expected"):
            raise ValueError(f"em_update must be 'mode' or 'expected'; got {self.em_update!r}")

    @property
    def L(self) -> int:
        """The number of communities."""
        return _n_communities(self.n_communities)

    def check_data(self, data: Any) -> None:
        """The base checks, and a warning when there are more communities than raters (some must stay empty)."""
        super().check_data(data)
        J = data.n_raters
        if self.L > J:
            given = "" if self.n_communities is not None else " (the default)"
            warnings.warn(
                f"n_communities={self.L}{given} is more than the {J} rater{'s' if J != 1 else ''}: at least "
                f"{self.L - J} communit{'ies' if self.L - J != 1 else 'y'} will hold no rater, which costs time and "
                f"tells nothing; give n_communities <= {J}",
                UserWarning,
                stacklevel=user_stacklevel(),
            )

    def canonical_params(self, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A simulation's ``m``, ``s``, ``rho`` and ``community`` with the communities sorted as fits report them."""
        return sort_communities(params) if "m" in params else params

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved priors: ``alpha`` (K,), ``beta`` (K, K), ``s_shape``, ``s_rate``, ``rho_alpha`` 0-d arrays.

        ``n_communities`` (a 0-d int array) is included, so that every method
        reads L from the same place.
        """
        beta = np.maximum(default_beta(K), 1.0) if self.beta is None else self.beta
        beta = positive_array("beta", beta, [(K, K)], f"(K, K) = ({K}, {K})")
        return {
            "alpha": resolve_alpha(self.alpha, K),
            "beta": beta,
            "s_shape": _positive_scalar("s_shape", self.s_shape, DEFAULT_S_SHAPE, 1.0),
            "s_rate": _positive_scalar("s_rate", self.s_rate, DEFAULT_S_RATE),
            "rho_alpha": _positive_scalar("rho_alpha", self.rho_alpha, DEFAULT_RHO_ALPHA),
            "n_communities": np.array(self.L),
        }

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, Any]:
        """The Stan data entries: ``L``, ``beta`` (K, K), ``s_shape``, ``s_rate``, ``rho_alpha``."""
        return {
            **super().stan_priors(priors, K, J),
            "L": int(priors["n_communities"]),
            "beta": np.asarray(priors["beta"], dtype=float).reshape(K, K),
            "s_shape": np.asarray(priors["s_shape"], dtype=float).reshape(()),
            "s_rate": np.asarray(priors["s_rate"], dtype=float).reshape(()),
            "rho_alpha": np.asarray(priors["rho_alpha"], dtype=float).reshape(()),
        }

    @classmethod
    def from_stan_data(cls, data: dict[str, Any]) -> CommunityDawidSkene:
        """The model with the data's number of communities ``L``."""
        return cls(n_communities=int(data["L"]))

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Diagonal-heavy ``m_raw`` (L, K, K) and ``theta`` (J, K, K); ``s_raw`` (L, K) 5-20; ``rho_raw`` even."""
        L = self.L
        rho = rng.dirichlet(np.full(L, 50.0))
        return {
            "rho_raw": rho / rho.sum(),
            "m_raw": diagonal_heavy_rows(rng, (L,), K),
            "s_raw": rng.uniform(5.0, 20.0, size=(L, K)),
            "theta": diagonal_heavy_rows(rng, (J,), K),
        }

    def stan_generated_values(self, K: int, J: int) -> int:
        """The sorted ``m``, ``s``, ``rho`` and ``community_prob`` (J, L) the program writes per draw."""
        L = self.L
        return L * K * K + L * K + L + J * L

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Stan parameters at a mode found by EM: ``theta``, and every community at the raters' mean rows."""
        K, L = pi.size, self.L
        return {
            "pi": interior(pi),
            "theta": interior(theta),
            "rho_raw": np.full(L, 1.0 / L),
            "m_raw": np.broadcast_to(interior(np.mean(theta, axis=0)), (L, K, K)).copy(),
            "s_raw": np.full((L, K), DEFAULT_S_SHAPE / DEFAULT_S_RATE),
        }


def simulate_community(
    n_items: int,
    n_raters: int,
    n_categories: int | None = None,
    pi: np.ndarray | None = None,
    m: np.ndarray | None = None,
    s: np.ndarray | None = None,
    rho: np.ndarray | None = None,
    community: np.ndarray | None = None,
    raters_per_item: int | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    n_communities: int | None = None,
    categories: Any = None,
    alpha: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    s_shape: float | None = None,
    s_rate: float | None = None,
    rho_alpha: float | None = None,
) -> Simulation:
    """Simulate from the community Dawid-Skene model.

    ``c[j] ~ Categorical(rho)``, ``theta[j, k] ~ Dirichlet(1 + s[c[j], k] m[c[j], k])``.

    Parameters
    ----------
    n_items, n_raters, n_categories, pi, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene`.
    m : array, shape (L, K, K), optional
        Each community's typical rows (probability vectors).  Default:
        ``m[l, k] ~ Dirichlet(beta[k])``.
    s : array, shape (L, K), (L,) or scalar, optional
        Concentrations > 0.  Default: ``s[l, k] ~ Gamma(s_shape, s_rate)``.
    rho : array, shape (L,), optional
        Community sizes.  Default: ``rho ~ Dirichlet(rho_alpha)``.
    community : int array, shape (J,), optional
        Each rater's community 0..L-1.  Default: drawn from ``rho``.
    n_communities : int, optional
        L when none of ``m``, ``s``, ``rho`` gives it (default 3).
    beta, s_shape, s_rate, rho_alpha
        Priors for drawing what is not given (defaults of :class:`CommunityDawidSkene`).

    Returns
    -------
    Simulation
        ``params = {"m": (L, K, K), "s": (L, K), "rho": (L,), "community": (J,)}``;
        ``model="community"``.  The communities are as given or drawn (not sorted).

    Examples
    --------
    >>> from pyrater.models import simulate_community
    >>> sim = simulate_community(100, 6, n_categories=2, n_communities=2, s=50.0, seed=0)
    >>> sim.params["m"].shape, sim.params["community"].shape
    ((2, 2, 2), (6,))
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = _infer_k(n_categories, {"pi": pi, "m": m, "categories": categories})
    _check_categories(categories, K)
    L = _n_communities_from(n_communities, m, s, rho)
    pri = CommunityDawidSkene(
        n_communities=L, alpha=alpha, beta=beta, s_shape=s_shape, s_rate=s_rate, rho_alpha=rho_alpha
    ).priors(K, J)
    if m is not None:
        m = numeric_array("m", m, [(L, K, K)], f"(L, K, K) = ({L}, {K}, {K})")
        m = _simplex("m", m.reshape(L * K, K)).reshape(L, K, K)
    if s is not None:
        s = numeric_array("s", s, [(L, K), (L,), ()], f"(L, K) = ({L}, {K}), (L,) or a scalar")
        if np.any(s <= 0):
            raise ValueError(f"s must be > 0; got min {float(np.min(s))!r}")
        s = np.broadcast_to(s[..., None] if s.ndim == 1 else s, (L, K)).copy()
    if rho is not None:
        rho = _simplex("rho", numeric_array("rho", rho, [(L,)], f"(L,) = ({L},)"))
    if community is not None:
        c = np.asarray(community)
        if c.shape != (J,) or c.dtype.kind not in "iu" or np.any((c < 0) | (c >= L)):
            raise ValueError(f"community must be an integer array of shape (J,) = ({J},) with values 0..{L - 1}")
        community = c.astype(np.int64)
    pi = _pi(rng, pi, K, alpha)
    if rho is None:
        rho = rng.dirichlet(np.full(L, float(pri["rho_alpha"])))
    if m is None:
        m = np.stack([np.stack([rng.dirichlet(b) for b in pri["beta"]]) for _ in range(L)])
    if s is None:
        s = rng.gamma(float(pri["s_shape"]), 1.0 / float(pri["s_rate"]), size=(L, K))
    if community is None:
        community = rng.choice(L, size=J, p=rho).astype(np.int64)
    a = pooled_row_prior(m, s)  # (L, K, K)
    theta = np.stack([np.stack([rng.dirichlet(a[community[j], k]) for k in range(K)]) for j in range(J)])
    params = {"m": m, "s": s, "rho": rho, "community": community}
    return _finish(rng, "community", I, J, pi, theta, raters_per_item, repeats, params, categories)


def _n_communities_from(n_communities: Any, m: Any, s: Any, rho: Any) -> int:
    """L from ``n_communities`` or the leading axis of ``m``, ``s`` or ``rho`` (they must agree)."""
    sizes = {}
    if m is not None and np.ndim(m) == 3:
        sizes["m"] = np.shape(m)[0]
    if s is not None and np.ndim(s) >= 1:
        sizes["s"] = np.shape(s)[0]
    if rho is not None and np.ndim(rho) == 1:
        sizes["rho"] = np.shape(rho)[0]
    if n_communities is not None:
        sizes["n_communities"] = _n_communities(n_communities)
    if len(set(sizes.values())) > 1:
        raise ValueError(f"the number of communities L differs between {sizes}")
    return next(iter(sizes.values())) if sizes else DEFAULT_N_COMMUNITIES


CommunityDawidSkene.simulator = staticmethod(simulate_community)
