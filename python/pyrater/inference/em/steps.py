"""The steps of EM for the Dawid-Skene family, shared by in-memory and distributed EM.

E-step (the shared kernel, :func:`pyrater.models.kernels.log_joint`)
    ``log p(y_i, z_i = k) = log pi_k + (C @ LT)[i, k]``, then ``T[i, k] =
    P(z_i = k | y_i)`` by a log-sum-exp over ``k`` (:func:`e_step`).
M-step
    expected counts ``N = C.T @ (w T)`` and class totals ``n_k``
    (:func:`expected_counts`), then the estimates of the model's family
    from them (:func:`m_step_from_counts`; ML, or MAP with :class:`MapPrior`).
    MACE's M-step is itself an inner EM on these counts (:func:`mace_m_step`).

:class:`Problem` is what EM iterates over: a RatingData compiled once into
its count matrix, unit weights and known classes (possibly compressed to
distinct rows, :mod:`pyrater.inference.em.compress`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.special import digamma, gammaln, logsumexp, xlog1py, xlogy

from ...models import Model
from ...models.kernels import _clamp_known, log_joint, log_theta_matrix
from ...models.mace import mace_parameters, mace_theta

try:  # the C routine behind ``csr_matrix @ dense``; lets the E-step reuse its output buffer
    from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs
except ImportError:  # pragma: no cover - other scipy layouts fall back to the public product
    _csr_matvecs = None

__all__ = [
    "Problem",
    "MapPrior",
    "map_prior",
    "pi_from_counts",
    "model_kind",
    "NumericMStep",
    "e_step",
    "expected_counts",
    "m_step",
    "m_step_from_counts",
    "mace_m_step",
    "estimate_params",
    "clamp_classes",
    "class_order",
    "normalise_rows_in_place",
    "load_fused",
    "FUSED_MAX_K",
]

#: the fused kernel pads the class axis to 8 SIMD lanes
FUSED_MAX_K = 8
#: MACE's M-step: at most this many inner EM steps per outer iteration, stopping at this parameter change
MACE_INNER_MAX = 50
MACE_INNER_TOL = 1e-10


def load_fused() -> Any:
    """The numba kernels of :mod:`pyrater.inference.em.kernel`, or None when numba cannot be imported."""
    try:
        from . import kernel
    except ImportError:
        return None
    return kernel


# a shifted row sum s must satisfy |log s| <= _MAX_LOG_SUM for the shifted pass to be kept
_MAX_LOG_SUM = 460.0  # = log(1e200)


def normalise_rows_in_place(
    lj: np.ndarray, shift: np.ndarray | None = None, pre_shifted: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Turn log joint probabilities (I, K) into class probabilities in place.

    Parameters
    ----------
    lj : array (I, K)
        Overwritten with ``exp(lj - logsumexp(lj))`` (row-wise).
    shift : array (I,), optional
        A guess of each row's log-sum-exp (EM passes the previous iteration's
        per-unit log-likelihood, which moves little between iterations).
        ``exp(lj - shift)`` then needs no row maximum, the slowest part of a
        log-sum-exp over a short trailing axis in numpy.  Without ``shift``
        the exact row maximum is used (taken column by column: K passes).
    pre_shifted : bool
        ``lj`` already holds ``lj - shift[:, None]`` (the E-step folds the
        shift into the sparse product's starting values).

    Returns
    -------
    log_sum : array (I,)
        ``log sum_k exp(lj[i, k])`` of the unshifted values.
    redo : int array
        Rows whose shifted sum ``s`` has ``|log s| > 460`` (the guess was off
        by more than 460 nats, or the sum under- or overflowed): their output
        is not valid and the caller must recompute them exactly.  For the
        rows kept the largest term exceeds ``1e-200 / K``, every term that
        matters is a normal double, and the result equals the max-shifted
        log-sum-exp up to rounding.  Always empty when ``shift`` is None.
    """
    K = lj.shape[1]
    lt = lj.T  # (K, I) view: broadcasting an (I,) vector along it runs long inner loops
    if shift is None:
        c = lj[:, 0].copy()
        for k in range(1, K):
            np.maximum(c, lj[:, k], out=c)
        np.subtract(lt, c, out=lt)
    else:
        c = shift
        if not pre_shifted:
            np.subtract(lt, c, out=lt)
    with np.errstate(over="ignore"):
        np.exp(lj, out=lj)
    # einsum, not a BLAS product with ones: multi-threaded BLAS is slow for these shapes on a busy
    # machine, and numpy's sum over a short trailing axis is slower still
    s = np.einsum("ik->i", lj)
    with np.errstate(divide="ignore"):
        log_s = np.log(s)
    if shift is None:
        redo = np.empty(0, dtype=np.int64)
    else:
        redo = np.flatnonzero(~(np.abs(log_s) <= _MAX_LOG_SUM))
        s[redo] = 1.0
    np.divide(lt, s, out=lt)
    log_s += c
    return log_s, redo


@dataclass
class Problem:
    """What the EM loop works on (possibly compressed units)."""

    counts: sp.csr_matrix  # (I', J*K)
    weight: np.ndarray  # (I',) float
    unit_weights: bool  # all weights are 1
    known: np.ndarray | None  # (I',) codes, -1 unknown
    J: int
    K: int
    fast: bool = True  # reuse E-step buffers through scipy's csr_matvecs

    def __post_init__(self) -> None:
        c = self.counts
        self.fast = bool(
            self.fast and _csr_matvecs is not None and isinstance(c, sp.csr_matrix) and c.dtype == np.float64
        )


#: alternations of theta given (m, s) and (m, s) given theta in one pooled M-step (each raises the posterior)
POOLED_INNER = 3


@dataclass
class PooledState:
    """The pooled model's population rows ``m`` (K, K) and concentrations ``s`` (K,) at EM's current estimate.

    EM's M-step for the pooled model is conditional (ECM, Meng & Rubin 1993):
    theta given ``(m, s)`` in closed form, then ``(m, s)`` given theta by a
    numerical maximisation; each step raises the log posterior.  The state
    starts at the prior's mode of ``m`` (its mean when some entry is 1) and
    of ``s``, afresh for every EM run (:meth:`MapPrior.fresh`).
    """

    m: np.ndarray
    s: np.ndarray


#: alternations of theta given (m, s, rho) and (m, s, rho) given theta in one community M-step
COMMUNITY_INNER = 3


@dataclass
class CommunityState:
    """The community model's state at EM's current estimate: ``m`` (L, K, K), ``s`` (L, K), ``rho`` (L,).

    EM treats each rater's community as missing data besides the classes:
    the E-step gives the responsibilities ``r[j, l] = P(c_j = l | theta_j, m,
    s, rho)``, the M-step is conditional (ECM): theta given ``(m, s)`` in closed
    form (the expected log prior of ``theta[j, k]`` is Dirichlet-like with
    parameter ``1 + sum_l r[j, l] s[l, k] m[l, k]``), then ``(m[l], s[l])``
    given theta by the pooled model's Newton step with the raters weighted by
    ``r[:, l]``, and ``rho`` in closed form.  The communities start apart
    (typical accuracies from 0.9 down towards chance) so that they can
    separate, afresh for every EM run (:meth:`MapPrior.fresh`).
    """

    m: np.ndarray
    s: np.ndarray
    rho: np.ndarray
    r: np.ndarray | None = None  # (J, L) responsibilities at the last M-step


def community_start(K: int, L: int, shape: float, rate: float) -> CommunityState:
    """EM's starting community state: community l's rows with diagonal ``0.9 - (0.9 - 1/K) l / L``."""
    m = np.empty((L, K, K))
    for l in range(L):
        d = 0.9 - (0.9 - 1.0 / K) * l / L
        m[l] = np.where(np.eye(K, dtype=bool), d, (1.0 - d) / (K - 1))
    return CommunityState(m=m, s=np.full((L, K), max((shape - 1.0) / rate, 1e-3)), rho=np.full(L, 1.0 / L))


def community_log_joint(theta: np.ndarray, st: CommunityState) -> np.ndarray:
    """(J, L): ``log rho[l] + sum_k log Dirichlet(theta[j, k] | 1 + s[l, k] m[l, k])``."""
    a = 1.0 + st.s[..., None] * st.m  # (L, K, K)
    const = (gammaln(a.sum(-1)) - gammaln(a).sum(-1)).sum(-1)  # (L,)
    return np.einsum("lkq,jkq->jl", a - 1.0, np.log(np.maximum(theta, 1e-300))) + const + np.log(st.rho)


@dataclass
class MapPrior:
    """MAP hyperparameters (all >= 1) and the log prior density.

    For the pooled model ``beta`` is the Dirichlet prior on the population
    rows ``m`` (K, K), ``beta1``/``beta2`` the Gamma shape and rate of ``s``,
    and ``pooled`` the current ``(m, s)`` (mutable: the M-step updates it).
    """

    kind: str
    alpha: np.ndarray  # (K,)
    beta: np.ndarray | None = None  # (J, K, K) full, (K, K) homogeneous, (K, K) pooled (prior on m)
    beta1: np.ndarray | None = None  # (K,) class-conditional, () one-coin and MACE, () pooled (shape of s)
    beta2: np.ndarray | None = None
    numeric: NumericMStep | None = None  # the family's own M-step (kind "numeric"): its parameters' prior
    gamma: np.ndarray | None = None  # (K,) MACE: Dirichlet prior on each spamming distribution
    pooled: PooledState | None = None
    pooled_update: str = "mode"
    community: CommunityState | None = None
    rho_alpha: float = 0.0  # community: symmetric Dirichlet prior on rho
    n_communities: int = 0
    # per fixed pseudo-count array (by field name): the array, its rows' normalising constants and a - 1
    _fixed: dict = dataclasses.field(init=False, default_factory=dict, repr=False, compare=False)

    def fresh(self) -> MapPrior:
        """A copy with the pooled or community state at its start (the prior itself for the other kinds)."""
        if self.kind == "community":
            shape, rate = float(self.beta1), float(self.beta2)  # type: ignore[arg-type]
            return dataclasses.replace(
                self, community=community_start(self.alpha.size, self.n_communities, shape, rate)
            )
        if self.kind != "pooled":
            return self
        assert self.beta is not None and self.beta1 is not None and self.beta2 is not None
        K = self.alpha.size
        m0 = self.beta - 1.0
        tot = m0.sum(-1, keepdims=True)
        m0 = np.where(tot > 0, m0 / np.where(tot > 0, tot, 1.0), 1.0 / K)
        m0 = 0.5 * m0 + 0.5 * self.beta / self.beta.sum(-1, keepdims=True)  # inside the simplex
        s0 = np.full(K, (float(self.beta1) - 1.0) / float(self.beta2))
        return dataclasses.replace(self, pooled=PooledState(m=m0, s=s0))

    def model_params(self) -> dict[str, np.ndarray] | None:
        """The model's own parameters at the estimate besides pi and theta (pooled: ``m`` and ``s``), or None.

        A family with its own numerical M-step reports its parameters through its ``em_params`` hook.
        Community: ``m`` (L, K, K), ``s`` (L, K), ``rho`` (L,) and ``community_prob`` (J, L) (the
        responsibilities at the estimate), the communities sorted by the mean diagonal of ``m``.
        """
        if self.numeric is not None:
            return self.numeric.model.em_params(self.numeric.x.copy())
        if self.community is not None:
            from ...models.community import sort_communities

            st = self.community
            out = {"m": st.m.copy(), "s": st.s.copy(), "rho": st.rho.copy()}
            if st.r is not None:
                out["community_prob"] = st.r.copy()
            return sort_communities(out)
        if self.pooled is None:
            return None
        return {"m": self.pooled.m.copy(), "s": self.pooled.s.copy()}

    def log_density(self, pi: np.ndarray, theta: np.ndarray) -> float:
        """Log prior density of ``pi`` (K,) and ``theta`` (J, K, K), every normalising constant included.

        Pooled: of ``theta`` given the current ``(m, s)``, plus the priors of ``m`` and ``s``.
        """
        lp = self._log_dirichlet_fixed(pi, "alpha")
        if self.kind == "community":  # theta's mixture prior, the communities summed out, and (m, s, rho)'s
            assert self.community is not None and self.beta is not None
            st = self.community
            L = st.rho.size
            lp += float(np.sum(logsumexp(community_log_joint(theta, st), axis=1)))
            lp += self._log_dirichlet_fixed(st.m, "beta")
            lp += _log_dirichlet(st.rho[None, :], np.full((1, L), self.rho_alpha))
            shape, rate = float(self.beta1), float(self.beta2)  # type: ignore[arg-type]
            s = st.s
            lp += float(np.sum(shape * np.log(rate) - gammaln(shape) + (shape - 1.0) * np.log(s) - rate * s))
        elif self.kind == "pooled":
            assert self.pooled is not None and self.beta is not None
            m, s = self.pooled.m, self.pooled.s
            a = 1.0 + s[:, None] * m
            J = theta.shape[0]
            lp += _log_dirichlet(theta, np.broadcast_to(a, (J, *a.shape)))
            lp += self._log_dirichlet_fixed(m, "beta")
            shape, rate = float(self.beta1), float(self.beta2)  # type: ignore[arg-type]
            lp += float(np.sum(shape * np.log(rate) - gammaln(shape) + (shape - 1.0) * np.log(s) - rate * s))
        elif self.kind == "dawid_skene":
            assert self.beta is not None  # set for this kind by map_prior
            lp += self._log_dirichlet_fixed(theta, "beta")
        elif self.kind == "homogeneous":
            assert self.beta is not None
            lp += self._log_dirichlet_fixed(theta[0], "beta")
        elif self.kind == "numeric":  # the prior of the family's parameters at its last M-step (theta's source)
            assert self.numeric is not None
            lp += self.numeric.log_prior()
        elif self.kind == "mace":  # competence[j] ~ Beta(beta1, beta2), xi[j] ~ Dirichlet(gamma)
            assert self.beta1 is not None and self.beta2 is not None and self.gamma is not None
            c, xi = mace_parameters(theta, self.gamma)
            c1, c2 = float(self.beta1), float(self.beta2)
            lp += float(np.sum(gammaln(c1 + c2) - gammaln(c1) - gammaln(c2) + xlogy(c1 - 1, c) + xlog1py(c2 - 1, -c)))
            lp += self._log_dirichlet_fixed(xi, "gamma")
        else:
            assert self.beta1 is not None and self.beta2 is not None  # set for the accuracy kinds
            K = pi.size
            if self.kind == "one_coin":  # one accuracy per rater: p (J, 1) against scalar (1, 1) priors
                p = theta[:, :1, 0]
                b1, b2 = np.reshape(self.beta1, (1, 1)), np.reshape(self.beta2, (1, 1))
            else:
                p = theta[:, np.arange(K), np.arange(K)]
                b1, b2 = self.beta1[None, :], self.beta2[None, :]
            lp += float(np.sum(gammaln(b1 + b2) - gammaln(b1) - gammaln(b2) + xlogy(b1 - 1, p) + xlog1py(b2 - 1, -p)))
        return float(lp)

    def _log_dirichlet_fixed(self, x: np.ndarray, name: str) -> float:
        """:func:`_log_dirichlet` of ``x`` under this prior's fixed pseudo-counts ``name`` (broadcast over x's rows).

        EM evaluates the log prior at every iteration; the rows' normalising
        constants (``gammaln``, the costly part) and ``a - 1`` of a fixed
        prior are computed once, the first time.
        """
        a = getattr(self, name)
        kept = self._fixed.get(name)
        if kept is None or kept[0] is not a:
            kept = (a, gammaln(a.sum(-1)) - gammaln(a).sum(-1), a - 1.0)
            self._fixed[name] = kept
        _, norm, a1 = kept
        rows = math.prod(np.broadcast_shapes(x.shape, a.shape)[:-1])
        return float(np.sum(norm) * (rows / max(norm.size, 1)) + np.sum(xlogy(a1, x)))


def _log_dirichlet(x: np.ndarray, a: np.ndarray) -> float:
    """Sum of Dirichlet log densities of the rows (last axis) of ``x``."""
    return float(np.sum(gammaln(a.sum(-1)) - gammaln(a).sum(-1) + xlogy(a - 1, x).sum(-1)))


def _check_at_least_one(name: str, value: np.ndarray, model: Model) -> None:
    if np.any(value < 1):
        hint = ""
        if name == "beta" and value.shape[-1] >= 5:
            hint = (
                f" (rater's default off-diagonal beta is 3.2 / (K - 1) = {3.2 / (value.shape[-1] - 1):.3g} "
                "for K = {K}; e.g. pass beta=np.maximum(pyrater.models.default_beta(K), 1))"
            ).replace("{K}", str(value.shape[-1]))
        raise ValueError(
            f"MAP by EM needs every hyperparameter >= 1 (below 1 the posterior density is unbounded at "
            f"the boundary and has no mode); {model.title} has {name} with minimum {float(np.min(value)):g}{hint}. "
            "Use method='ml', or priors with all hyperparameters >= 1"
        )


def class_order(pi: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Order of the latent classes that makes class k go with rating k.

    The Dawid-Skene and homogeneous likelihoods are unchanged by permuting
    the latent classes (the true-class axis of theta with pi), so which
    permutation EM returns depends on its start: a random restart can win
    with the classes permuted.  The permutation kept maximises the expected
    agreement ``sum_k pi_k sum_j theta[j, k, perm(k)]`` (Hungarian method);
    it is the identity when the classes already line up with the ratings.
    New class ``c`` is old class ``order[c]``.
    """
    agreement = pi[:, None] * theta.sum(axis=0)  # (K classes, K ratings)
    _, rating_of_class = linear_sum_assignment(agreement, maximize=True)
    return np.argsort(rating_of_class)


def map_prior(model: Model, K: int, J: int) -> tuple[MapPrior, dict]:
    """The posterior-mode hyperparameters of ``model`` (each checked >= 1) and its resolved priors."""
    kind = model_kind(model, numeric=True)
    pri = model.priors(K, J)
    _check_at_least_one("alpha", pri["alpha"], model)
    if kind == "pooled":  # the Dirichlet(1 + s m) of the raters' rows needs no check (all above 1)
        _check_at_least_one("beta", pri["beta"], model)
        update = str(getattr(model, "em_update", None) or "mode")
        prior = MapPrior(kind, pri["alpha"], beta=pri["beta"], beta1=pri["s_shape"], beta2=pri["s_rate"])
        return dataclasses.replace(prior, pooled_update=update).fresh(), pri
    if kind == "community":
        _check_at_least_one("beta", pri["beta"], model)
        _check_at_least_one("rho_alpha", pri["rho_alpha"], model)
        prior = MapPrior(
            kind,
            pri["alpha"],
            beta=pri["beta"],
            beta1=pri["s_shape"],
            beta2=pri["s_rate"],
            rho_alpha=float(pri["rho_alpha"]),
            n_communities=int(pri["n_communities"]),
            pooled_update=str(getattr(model, "em_update", None) or "mode"),
        )
        return prior.fresh(), pri
    if kind == "numeric":
        return MapPrior(kind, pri["alpha"]), pri
    if kind in ("class_conditional", "one_coin", "mace"):
        _check_at_least_one("beta1", pri["beta1"], model)
        _check_at_least_one("beta2", pri["beta2"], model)
        if kind == "mace":
            _check_at_least_one("gamma", pri["gamma"], model)
        return MapPrior(kind, pri["alpha"], beta1=pri["beta1"], beta2=pri["beta2"], gamma=pri.get("gamma")), pri
    _check_at_least_one("beta", pri["beta"], model)
    return MapPrior(kind, pri["alpha"], beta=pri["beta"]), pri


def estimate_params(kind: Any, theta: np.ndarray, prior: MapPrior | None) -> dict[str, np.ndarray] | None:
    """The model's own parameters at an EM estimate besides pi and theta, named as in its Stan program.

    The pooled, community and numerical families report theirs through
    :meth:`MapPrior.model_params` (posterior modes only).  The families whose
    error matrices are functions of a few numbers per rater give those, ML or
    MAP: one-coin ``p`` (J,), class-conditional ``p`` (J, K) (the diagonals),
    MACE ``competence`` (J,) and ``xi`` (J, K) (:func:`~pyrater.models.mace.mace_parameters`).
    None for Dawid-Skene and the homogeneous model (theta is all there is).
    """
    own = None if prior is None else prior.model_params()
    if own is not None:
        return own
    if kind == "one_coin":
        return {"p": theta[:, 0, 0].copy()}
    if kind == "class_conditional":
        return {"p": np.diagonal(theta, axis1=1, axis2=2).copy()}
    if kind == "mace":
        competence, xi = mace_parameters(theta, None if prior is None else prior.gamma)
        return {"competence": competence, "xi": xi}
    return None


def model_kind(model: Model, numeric: bool = False) -> str:
    """The conjugate structure EM uses for ``model`` (:attr:`pyrater.models.ModelFamily.conjugate`).

    With ``numeric``, a family without one that lists ``"em"`` among its
    methods gives ``"numeric"``: its M-step is its own numerical maximisation
    (:class:`NumericMStep`; in-memory EM only).
    """
    if model.conjugate is None and numeric and "em" in model.methods:
        return "numeric"
    if model.conjugate is None and "em" in model.methods:
        raise ValueError(
            f"the {model.title} model's M-step is a numerical maximisation, run by in-memory EM only; fit "
            "in-memory data (a RatingData or pandas DataFrame) with pyrater.em or pyrater.fit(..., method='em')"
        )
    if model.conjugate is None:
        from ...models import get_model, model_names

        by_em = [repr(n) for n in model_names() if "em" in get_model(n).methods]
        raise ValueError(
            f"the {model.title} model is not supported by EM; fit it with one of its methods {model.methods} "
            f"(e.g. pyrater.fit(..., method='mcmc')), or use one of the models EM fits: {', '.join(by_em)}"
        )
    return model.conjugate


class NumericMStep:
    """The M-step of a family without a closed form, by its own hooks (``em_m_step`` ...).

    Holds the family's current parameters ``x`` (each M-step starts from the
    last one); passed where EM passes its ``kind``.
    """

    def __init__(self, model: Model, K: int, J: int, priors: dict | None) -> None:
        self.model, self.K, self.J = model, K, J
        self.priors = priors  # None: maximum likelihood
        self.x = np.asarray(model.em_start(K, J), dtype=float)

    def __call__(self, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Theta (J, K, K) and the empty-row mask (J, K) from expected counts ``N`` (J, k, l)."""
        self.x = self.model.em_m_step(self.x, np.ascontiguousarray(N), self.priors)
        theta = self.model.em_theta(self.x, self.K)
        empty = np.zeros((self.J, self.K), dtype=bool)
        if self.priors is None:  # raters without any expected count: parameters left at their start
            empty[np.einsum("jkl->j", N) <= 0] = True
        return theta, empty

    def log_prior(self) -> float:
        """Log prior density of the current parameters."""
        assert self.priors is not None
        return self.model.em_log_prior(self.x, self.priors)


def _normalise(num: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normalise the last axis; zero rows become uniform.  Returns (probs, empty mask)."""
    # einsum, not num.sum(axis=-1): numpy's sum over a short trailing axis is several times slower
    tot = np.einsum("...k->...", num)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / tot[..., None]
    fill = ~(tot > 0)
    if fill.any():
        out[fill] = 1.0 / num.shape[-1]
    return out, tot <= 0


def expected_counts(prob: Problem, T: np.ndarray, wT: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Class totals ``n_k = sum_i w_i T[i, k]`` (K,) and expected counts ``C.T @ (w T)`` (J*K, K)."""
    if prob.unit_weights:
        src = T
    else:
        assert wT is not None  # callers pass a buffer unless every weight is 1
        np.multiply(T, prob.weight[:, None], out=wT)
        src = wT
    # class totals sum_i w_i T[i, k]; einsum (see normalise_rows_in_place), not T.sum(axis=0)
    n_k = np.einsum("ik->k", src)
    # N_flat[j*K + l, k] = sum_i C[i, j*K + l] w_i T[i, k]; C.T is CSC: a scatter into a small output
    return n_k, np.asarray(prob.counts.T @ src)


def pi_from_counts(n_k: np.ndarray, prior: MapPrior | None) -> np.ndarray:
    """The M-step's prevalence (K,) from the class totals ``n_k`` (K,): normalised, MAP pseudo-counts added."""
    if prior is not None:
        n_k = n_k + (prior.alpha - 1.0)
    return _normalise(n_k)[0]


def m_step_from_counts(
    n_k: np.ndarray,
    N_flat: np.ndarray,
    J: int,
    K: int,
    kind: str | NumericMStep,
    prior: MapPrior | None,
    theta_prev: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pi (K,), theta (J, K, K) and the empty-row mask (J, K) from expected counts.

    Parameters
    ----------
    n_k : array (K,)
        Class totals ``sum_i w_i T[i, k]``.
    N_flat : array (J*K, K)
        ``N_flat[j*K + l, k] = sum_i w_i T[i, k] C[i, j*K + l]`` (a view is fine;
        it is not modified).
    J, K : int
    kind : {"dawid_skene", "homogeneous", "class_conditional", "one_coin", "mace", "pooled"} or NumericMStep
    prior : MapPrior or None
        MAP hyperparameters; None for ML.
    theta_prev : array (J, K, K), optional
        The current error matrices: MACE's M-step (an inner EM, see
        :func:`mace_m_step`) starts from them, which makes every outer
        iteration a generalised EM step.  Unused by the other kinds.
    """
    N = np.reshape(N_flat, (J, K, K)).transpose(0, 2, 1)  # (J, k, l)
    pi = pi_from_counts(n_k, prior)
    if isinstance(kind, NumericMStep):
        theta, empty = kind(N)
    elif kind == "pooled":  # ECM: theta given (m, s) (Dirichlet(1 + s m): add s m), then (m, s) given theta
        if prior is None or prior.pooled is None:
            raise ValueError("the pooled model's EM is a posterior mode (method='map'): its m and s need their priors")
        st = prior.pooled
        for _ in range(POOLED_INNER):  # a few alternations: theta and (m, s) are strongly coupled
            theta, empty = _normalise(np.ascontiguousarray(N + st.s[None, :, None] * st.m[None]))
            target = theta
            if prior.pooled_update == "expected":  # E[log theta[j, k]] under Dirichlet(N[j, k] + 1 + s m)
                post = N + 1.0 + st.s[None, :, None] * st.m[None]
                target = np.exp(digamma(post) - digamma(post.sum(-1, keepdims=True)))
            st.m, st.s = pooled_hyper_mode(target, st.m, st.s, prior.beta, float(prior.beta1), float(prior.beta2))  # type: ignore[arg-type]
        theta, empty = _normalise(np.ascontiguousarray(N + st.s[None, :, None] * st.m[None]))
    elif kind == "community":
        if prior is None or prior.community is None:
            raise ValueError(
                "the community model's EM is a posterior mode (method='map'): its m, s and rho need their priors"
            )
        theta, empty = community_m_step(N, prior, theta_prev)
    elif kind == "dawid_skene":
        if prior is not None:
            assert prior.beta is not None  # a prior of this kind (map_prior)
            N = N + (prior.beta - 1.0)
        theta, empty = _normalise(np.ascontiguousarray(N))
    elif kind == "homogeneous":
        N0 = N.sum(axis=0)
        if prior is not None:
            assert prior.beta is not None
            N0 = N0 + (prior.beta - 1.0)
        theta0, empty0 = _normalise(N0)
        theta = np.broadcast_to(theta0, (J, K, K)).copy()
        empty = np.broadcast_to(empty0, (J, K)).copy()
    elif kind == "one_coin":  # p_j = (right_j + beta1 - 1) / (all_j + beta1 + beta2 - 2)
        right = np.einsum("jkk->j", N)
        tot = np.einsum("jkl->j", N)
        if prior is not None:
            assert prior.beta1 is not None and prior.beta2 is not None
            right = right + (float(prior.beta1) - 1.0)
            tot = tot + (float(prior.beta1) + float(prior.beta2) - 2.0)
        none = tot <= 0
        p = np.divide(right, tot, out=np.full_like(right, 1.0 / K), where=~none)
        theta = np.repeat(np.repeat(((1.0 - p) / (K - 1))[:, None, None], K, axis=1), K, axis=2)
        theta[:, np.arange(K), np.arange(K)] = p[:, None]
        empty = np.repeat(none[:, None], K, axis=1)
    elif kind == "mace":
        start = None if theta_prev is None else mace_parameters(theta_prev, None if prior is None else prior.gamma)
        c, xi, none = mace_m_step(N, prior, start)
        theta = mace_theta(c, xi)
        empty = np.repeat(none[:, None], K, axis=1)
    else:  # class-conditional
        diag = N[:, np.arange(K), np.arange(K)]  # (J, K)
        tot = N.sum(axis=2)
        if prior is not None:
            assert prior.beta1 is not None and prior.beta2 is not None
            diag = diag + (prior.beta1 - 1.0)[None, :]
            tot = tot + (prior.beta1 + prior.beta2 - 2.0)[None, :]
        empty = tot <= 0
        p = np.divide(diag, tot, out=np.full_like(diag, 1.0 / K), where=~empty)
        theta = np.repeat(((1.0 - p) / (K - 1))[:, :, None], K, axis=2)
        theta[:, np.arange(K), np.arange(K)] = p
    return pi, theta, empty


def mace_m_step(
    N: np.ndarray,
    prior: MapPrior | None,
    start: tuple[np.ndarray, np.ndarray] | None = None,
    max_inner: int = MACE_INNER_MAX,
    tol: float = MACE_INNER_TOL,
    use_numba: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MACE's M-step from the Dawid-Skene expected counts: an inner EM over the spam indicators.

    A rating that differs from the true class is spam for sure; a rating
    ``l`` of an item of class ``l`` is spam with probability
    ``r_l = (1 - c) xi_l / (c + (1 - c) xi_l)``.  So with ``d_l = N[j, l, l]``
    and ``o_l = sum_{k != l} N[j, k, l]`` the expected complete-data counts
    are ``spam_l = o_l + r_l d_l`` and ``competent = sum_l (1 - r_l) d_l``,
    and the inner update is

        c  = (competent + beta1 - 1) / (sum_l (d_l + o_l) + beta1 + beta2 - 2)
        xi = (spam + gamma - 1) / (sum_l spam_l + sum_l gamma_l - K)

    (ML: no prior terms).  Each inner step increases the expected
    complete-data objective of the outer EM (it is itself an EM step for that
    objective), so started from the current parameters any number of inner
    steps makes the outer iteration a generalised EM step: the outer objective
    never decreases.  The inner loop runs to ``tol`` (largest parameter
    change) or ``max_inner`` steps, vectorised over raters.

    Parameters
    ----------
    N : array (J, K, K)
        Expected counts ``N[j, k, l]`` (true class k, rating l).
    prior : MapPrior or None
        MAP hyperparameters (``beta1``, ``beta2``, ``gamma``); None for ML.
    start : (competence (J,), xi (J, K)), optional
        Where the inner EM starts (the current parameters); default 0.5 and uniform.
    max_inner, tol : int, float
        Inner steps at most, and the parameter change at which a rater stops.
    use_numba : bool
        The compiled loop (:func:`pyrater.inference.em.kernel.mace_inner`) when numba
        imports; otherwise, or with False, the same steps in NumPy.

    Returns
    -------
    competence : array (J,)
    xi : array (J, K)
    empty : bool array (J,)
        Raters without ratings.  Under a prior with a mode (``beta1 + beta2 > 2``)
        they sit at it (competence ``(beta1 - 1) / (beta1 + beta2 - 2)``, xi the
        Dirichlet(``gamma``) mode, uniform where it has none); otherwise their
        matrices are uniform (competence 0, xi uniform: no estimate).
    """
    J, K, _ = N.shape
    idx = np.arange(K)
    d = np.ascontiguousarray(N[:, idx, idx])  # (J, K) ratings l of items of class l
    o = np.einsum("jkl->jl", N) - d  # (J, K) ratings l of other classes: spam for sure
    tot = d.sum(axis=1) + o.sum(axis=1)
    a1 = a2 = 0.0
    g = np.zeros(K)
    if prior is not None:
        assert prior.beta1 is not None and prior.beta2 is not None and prior.gamma is not None
        a1, a2, g = float(prior.beta1) - 1.0, float(prior.beta2) - 1.0, prior.gamma - 1.0
    empty = tot <= 0
    if start is None:
        c, xi = np.full(J, 0.5), np.full((J, K), 1.0 / K)
    else:
        c, xi = np.array(start[0], dtype=float), np.array(start[1], dtype=float)
    c_den = tot + (a1 + a2)
    c_den[c_den <= 0] = np.inf  # no ratings and a flat prior: competence 0 (then fixed below)
    kernel = load_fused() if use_numba else None
    if kernel is not None:  # one compiled loop per rater
        from ...models._fused import run  # numba imports (load_fused said so)

        o_g = np.ascontiguousarray(o + g)
        run(kernel.mace_inner, np.ascontiguousarray(d), o_g, c_den, float(a1), c, xi, int(max_inner), float(tol))
    else:
        _mace_inner_numpy(d, o + g, c_den, a1, c, xi, max_inner, tol)
    # a rater without ratings: under a prior with a mode the inner steps put it there (a competence of 0
    # would have log prior -inf under Beta(beta1 > 1, .)); with no prior or a flat one it has no estimate
    blank = empty if prior is None or a1 + a2 <= 0 else np.zeros_like(empty)
    c[blank] = 0.0
    xi[blank] = 1.0 / K
    return c, xi, empty


def _mace_inner_numpy(
    d: np.ndarray,
    o_g: np.ndarray,
    c_den: np.ndarray,
    a1: float,
    c: np.ndarray,
    xi: np.ndarray,
    max_inner: int,
    tol: float,
) -> None:
    """The inner EM of :func:`mace_m_step` in NumPy (``c``, ``xi`` updated in place), vectorised over raters.

    The raters still moving stay in the loop: a converged rater's parameters stop changing,
    exactly as in the compiled loop :func:`pyrater.inference.em.kernel.mace_inner`.
    """
    K = d.shape[1]
    active = np.arange(d.shape[0])
    d_a, o_a, den_a = d, o_g, c_den
    for _ in range(max(1, max_inner)):
        c_a, xi_a = c[active], xi[active]
        sd = (1.0 - c_a)[:, None] * xi_a  # (1 - c) xi_l: the spam share of a rating l
        den = c_a[:, None] + sd
        s = d_a * np.divide(sd, den, out=np.zeros_like(sd), where=den > 0)  # expected spam among the diagonal
        spam = o_a + s
        c_new = (np.einsum("jl->j", d_a - s) + a1) / den_a
        s_tot = np.einsum("jl->j", spam)[:, None]
        xi_new = np.divide(spam, s_tot, out=np.full_like(spam, 1.0 / K), where=s_tot > 0)
        moved = np.maximum(np.abs(c_new - c_a), np.max(np.abs(xi_new - xi_a), axis=1)) > tol
        c[active], xi[active] = c_new, xi_new
        if not moved.any():
            break
        if not moved.all():
            active, d_a, o_a, den_a = active[moved], d_a[moved], o_a[moved], den_a[moved]


def m_step(
    prob: Problem,
    T: np.ndarray,
    kind: str | NumericMStep,
    prior: MapPrior | None,
    wT: np.ndarray | None,
    theta_prev: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pi (K,), theta (J, K, K) and the empty-row mask (J, K) from class probabilities T."""
    n_k, N_flat = expected_counts(prob, T, wT)
    return m_step_from_counts(n_k, N_flat, prob.J, prob.K, kind, prior, theta_prev)


def _log_joint_into(
    counts: sp.csr_matrix,
    log_pi: np.ndarray,
    log_theta: np.ndarray,
    out: np.ndarray,
    shift: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`pyrater.models.kernels.log_joint` written into a reused buffer ``out`` (I, K).

    Same maths and the same C routine as ``counts @ log_theta_matrix(log_theta) + log_pi``
    (scipy's ``csr_matvecs``, which accumulates into its output): the buffer
    starts as ``log_pi`` in every row (minus ``shift[i]`` when given), so
    there is no zeroing pass, no separate shifting pass, and no fresh
    allocation (with its page faults) per iteration.
    """
    I, JK = counts.shape
    K = out.shape[1]
    if shift is None:
        out[...] = log_pi
    else:
        np.subtract(log_pi[:, None], shift[None, :], out=out.T)
    _csr_matvecs(I, JK, K, counts.indptr, counts.indices, counts.data, log_theta_matrix(log_theta).ravel(), out.ravel())
    return out


def e_step(
    prob: Problem,
    pi: np.ndarray,
    theta: np.ndarray,
    out: np.ndarray | None = None,
    shift: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """E-step via the shared kernel: class probabilities, per-unit and total log-likelihood.

    Parameters
    ----------
    out : array (I', K), optional
        C-contiguous float buffer that receives the class probabilities (the
        fast path); otherwise :func:`pyrater.models.kernels.log_joint` allocates it.
    shift : array (I',), optional
        The previous per-unit log-likelihoods, used as log-sum-exp shifts
        (see :func:`normalise_rows_in_place`); rows where that guess is too
        far off are recomputed exactly with the kernel.

    Returns
    -------
    T : array (I', K)
    ll_units : array (I',)
        ``log p(y_i)`` (``log p(y_i, z_i)`` for known units).
    ll : float
        ``sum_i w_i ll_units[i]``.
    """
    with np.errstate(divide="ignore"):
        log_pi, log_theta = np.log(pi), np.log(theta)
    if out is not None and prob.fast:
        lj = _log_joint_into(prob.counts, log_pi, log_theta, out, shift)
        pre_shifted = shift is not None
    else:
        lj = log_joint(prob.counts, log_pi, log_theta)
        pre_shifted = False
    lj = _clamp_known(lj, prob.known)
    ll_units, redo = normalise_rows_in_place(lj, shift, pre_shifted)
    if redo.size:
        sub = _clamp_known(
            log_joint(prob.counts[redo], log_pi, log_theta), None if prob.known is None else prob.known[redo]
        )
        ll_units[redo], _ = normalise_rows_in_place(sub)
        lj[redo] = sub
    ll = float(ll_units.sum()) if prob.unit_weights else float(np.einsum("i,i->", prob.weight, ll_units))
    return lj, ll_units, ll


def clamp_classes(T: np.ndarray, known: np.ndarray | None) -> np.ndarray:
    """Set the rows of units with a known class to one-hot (in place); returns ``T``."""
    if known is not None:
        rows = np.flatnonzero(known >= 0)
        if rows.size:
            T[rows] = 0.0
            T[rows, known[rows]] = 1.0
    return T


def community_m_step(N: np.ndarray, prior: MapPrior, theta_prev: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The community model's conditional M-step: theta (J, K, K) and its empty-row mask; updates the state.

    The responsibilities ``r`` (J, L) of the raters' communities come from the
    current estimate (``theta_prev`` and the state: the E-step of the
    communities; without ``theta_prev``, the first step, ``r = rho``).  Given
    ``r``: alternately theta in closed form and ``(m[l], s[l])`` by a Newton
    step weighted by ``r[:, l]``, then ``rho``; each raises the expected
    complete-data log posterior, so the marginal log posterior never falls.
    """
    from .._numba import run as run_kernel
    from .pooled import hyper_mode_from_sums

    st = prior.community
    assert st is not None and prior.beta is not None
    J = N.shape[0]
    L = st.rho.size
    if theta_prev is None or theta_prev.shape[0] != J:
        r = np.broadcast_to(st.rho, (J, L)).copy()
    else:
        lj = community_log_joint(theta_prev, st)
        r = np.exp(lj - logsumexp(lj, axis=1, keepdims=True))
    st.r = r
    shape, rate = float(prior.beta1), float(prior.beta2)  # type: ignore[arg-type]
    beta = np.ascontiguousarray(prior.beta, dtype=np.float64)
    n = r.sum(0)  # (L,)
    for _ in range(COMMUNITY_INNER):
        extra = np.einsum("jl,lkq->jkq", r, st.s[..., None] * st.m)
        theta, empty = _normalise(np.ascontiguousarray(N + extra))
        if prior.pooled_update == "expected":  # E[log theta[j, k]] under Dirichlet(N[j, k] + 1 + sum_l r s m)
            post = N + 1.0 + extra
            log_target = digamma(post) - digamma(post.sum(-1, keepdims=True))
        else:
            log_target = np.log(np.maximum(theta, 1e-300))
        T = np.einsum("jl,jkq->lkq", r, log_target)  # (L, K, K)
        m, s = st.m.copy(), st.s.copy()
        for l in range(L):
            run_kernel(
                hyper_mode_from_sums, np.ascontiguousarray(T[l]), float(n[l]), m[l], s[l], beta, shape, rate, 100
            )
        st.m, st.s = m, s
    a = prior.rho_alpha - 1.0 + n
    st.rho = a / a.sum()
    theta, empty = _normalise(np.ascontiguousarray(N + np.einsum("jl,lkq->jkq", r, st.s[..., None] * st.m)))
    return theta, empty


def pooled_hyper_mode(
    theta: np.ndarray, m: np.ndarray, s: np.ndarray, beta: np.ndarray, shape: float, rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """The pooled model's ``(m[k], s[k])`` maximising their conditional density given ``theta``, row by row.

    Maximises ``sum_j log Dirichlet(theta[j, k] | 1 + s m) + log Dirichlet(m |
    beta[k]) + log Gamma(s | shape, rate)`` (no Jacobian: the posterior mode on
    the parameters' own scale, as Stan's optimiser) by Newton's method from the
    current ``(m, s)``, never decreasing it (:mod:`pyrater.inference.em.pooled`).
    ``beta >= 1`` keeps ``m`` inside the simplex; ``shape > 1`` and ``rate > 0``
    keep ``s`` finite and positive.
    """
    from .._numba import run as run_kernel
    from .pooled import pooled_hyper_mode_rows

    m_new = np.ascontiguousarray(m, dtype=np.float64).copy()
    s_new = np.ascontiguousarray(s, dtype=np.float64).copy()
    run_kernel(
        pooled_hyper_mode_rows,
        np.ascontiguousarray(theta, dtype=np.float64),
        m_new,
        s_new,
        np.ascontiguousarray(beta, dtype=np.float64),
        float(shape),
        float(rate),
        100,
    )
    return m_new, s_new
