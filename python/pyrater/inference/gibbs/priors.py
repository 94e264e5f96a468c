"""The conjugate priors of the Dawid-Skene family, as the native samplers use them.

The priors are exactly those of the Stan programs (resolved by the model
object, :meth:`pyrater.models.DawidSkene.priors` and friends):
``pi ~ Dirichlet(alpha)``; Dawid-Skene ``theta[j, k] ~ Dirichlet(beta[j, k])``;
homogeneous ``theta[k] ~ Dirichlet(beta[k])``; class-conditional
``p[j, k] ~ Beta(beta1_k, beta2_k)``; one-coin ``p[j] ~ Beta(beta1, beta2)``; MACE
``competence[j] ~ Beta(beta1, beta2)``, ``xi[j] ~ Dirichlet(gamma)``.  All are conjugate given the true
classes (MACE given also which ratings are spam), which is what the Gibbs sampler uses.  Pooled:
``theta[j, k] ~ Dirichlet(1 + s[k] m[k])``, ``m[k] ~ Dirichlet(beta[k])``, ``s[k] ~ Gamma(s_shape, s_rate)``:
conjugate given the true classes and ``(m, s)``, which the sampler updates given theta by slice sampling.
Community: the pooled prior per community, ``theta[j, k] | c_j = l ~ Dirichlet(1 + s[l, k] m[l, k])``,
``c_j ~ Categorical(rho)``, ``rho ~ Dirichlet(rho_alpha)``: conjugate given z and the communities, which
the sampler draws given theta.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp, xlog1py, xlogy

from ...models import Model, get_model
from . import kernel as _kern

__all__ = ["ConjugatePrior", "conjugate_prior", "log_prior_density"]


@dataclass(frozen=True)
class ConjugatePrior:
    """Resolved hyperparameters and the kernel's code of the model.

    Attributes
    ----------
    kind : {"dawid_skene", "class_conditional", "homogeneous", "one_coin", "mace", "pooled", "community"}
    alpha : array (K,)
    beta : array (J, K, K) (Dawid-Skene), (K, K) (homogeneous; pooled: the prior on ``m``) or None
    beta1, beta2 : arrays (K,) (class-conditional), 0-d arrays (one-coin, MACE; pooled: the Gamma
        shape and rate of ``s``) or None
    values : dict
        The model's resolved priors (what a fit reports).
    n_raters : int
        J (the pooled kernel's working prior has a row per rater).
    n_communities : int
        L (community model; 0 otherwise).  The community model's ``beta1`` is
        ``s_shape``, ``beta2`` ``s_rate`` and ``rho_alpha`` its Dirichlet prior on ``rho``.
    """

    kind: str
    alpha: np.ndarray
    beta: np.ndarray | None
    beta1: np.ndarray | None
    beta2: np.ndarray | None
    values: dict
    n_raters: int = 0
    gamma: np.ndarray | None = None  # (K,) MACE: Dirichlet prior on each spamming distribution
    n_communities: int = 0
    rho_alpha: float = 0.0

    @property
    def code(self) -> int:
        """The Gibbs kernel's code of this conjugate structure."""
        return {
            "dawid_skene": _kern.DAWID_SKENE,
            "class_conditional": _kern.CLASS_CONDITIONAL,
            "homogeneous": _kern.HOMOGENEOUS,
            "one_coin": _kern.ONE_COIN,
            "mace": _kern.MACE,
            "pooled": _kern.POOLED,
            "community": _kern.COMMUNITY,
        }[self.kind]

    def p_columns(self, K: int) -> int:
        """Columns of the parameters ``p`` the kernel keeps per row (class-conditional K, one-coin 1, MACE K + 1).

        MACE keeps the competence in column 0 and xi after it; the pooled model's kernel keeps ``m``
        and ``s`` there (K columns, see :meth:`p_rows`); the other kinds keep none (0).
        """
        if self.kind == "community":
            return max(K, self.n_communities)
        return {"class_conditional": K, "one_coin": 1, "mace": K + 1, "pooled": K}.get(self.kind, 0)

    def p_rows(self, J: int, K: int) -> int:
        """Rows of the kernel's ``p``: J (a row per rater), K + 1 for the pooled model (``m``, then ``s``)."""
        if self.kind == "community":  # m (L*K rows), s (L), rho (1), community probabilities (J)
            L = self.n_communities
            return L * K + L + 1 + J
        return K + 1 if self.kind == "pooled" else J

    def reported(self, p: np.ndarray) -> dict[str, np.ndarray]:
        """The kernel's per-rater draws (..., J, columns) by the names and shapes a fit reports.

        ``p`` (..., J, K) (class-conditional) or (..., J) (one-coin); MACE
        ``competence`` (..., J) and ``xi`` (..., J, K); pooled (from its (..., K + 1, K)) ``m``
        (..., K, K) and ``s`` (..., K).
        """
        if self.kind == "pooled":
            K = p.shape[-1]
            return {"m": p[..., :K, :], "s": p[..., K, :]}
        if self.kind == "community":
            L = self.n_communities
            K = (p.shape[-2] - 1 - self.n_raters - L) // L
            lead = p.shape[:-2]
            R = L * K + L
            return {
                "m": p[..., : L * K, :K].reshape(*lead, L, K, K),
                "s": p[..., L * K : R, :K],
                "rho": p[..., R, :L],
                "community_prob": p[..., R + 1 :, :L],
            }
        if self.kind == "mace":
            return {"competence": p[..., 0], "xi": p[..., 1:]}
        return {"p": p[..., 0] if self.kind == "one_coin" else p}

    def kernel_arrays(self, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``alpha``, ``beta`` as (J, K, K) or (1, K, K), ``beta1``, ``beta2`` (float64, C-contiguous)."""
        f = lambda x: np.ascontiguousarray(x, dtype=np.float64)  # noqa: E731
        empty_beta = np.zeros((0, K, K))
        if self.kind == "dawid_skene":
            beta = f(self.beta)
        elif self.kind in ("pooled", "community"):  # raters: 1 + s m at mean m, mode s; then m's prior
            assert self.beta is not None and self.beta1 is not None and self.beta2 is not None
            bm = np.asarray(self.beta, dtype=float)
            m0 = bm / bm.sum(-1, keepdims=True)
            s0 = (float(self.beta1) - 1.0) / float(self.beta2)
            beta = f(np.concatenate([np.broadcast_to(1.0 + s0 * m0, (self.n_raters, K, K)), bm[None]]))
            if self.kind == "community":  # s's Gamma and rho's Dirichlet, and L
                b1 = f(np.array([float(self.beta1), float(self.beta2), self.rho_alpha]))
                return f(self.alpha), beta, b1, f(np.array([float(self.n_communities)]))
        elif self.kind == "homogeneous":
            beta = f(self.beta)[None]
        elif self.kind == "mace":  # the kernel reads gamma from beta[0, 0]
            assert self.gamma is not None
            # a writable copy: the kernel's parameter step is compiled once for every kind, and the
            # pooled kind writes to beta (a read-only broadcast view would not type there)
            beta = np.array(np.broadcast_to(self.gamma, (1, 1, K)), dtype=np.float64)
        else:
            beta = empty_beta
        if self.beta1 is None or self.beta2 is None:
            b1, b2 = np.zeros(K), np.zeros(K)
        else:  # (K,); a one-coin model's scalar prior repeated (the kernel reads entry 0)
            b1 = f(np.broadcast_to(self.beta1, (K,)))
            b2 = f(np.broadcast_to(self.beta2, (K,)))
        if not beta.flags.writeable:  # e.g. a prior broadcast to (1, K, K): the kernel types beta as writable
            beta = beta.copy()
        return f(self.alpha), beta, b1, b2


def conjugate_prior(model: str | Model, K: int, J: int, method: str = "gibbs") -> ConjugatePrior:
    """The conjugate prior of ``model`` for K categories and J raters.

    Raises
    ------
    ValueError
        For the hierarchical model (its logistic-normal prior on theta is not
        conjugate): the message names ``method="mcmc"``.
    """
    model = get_model(model)
    kind = model.conjugate
    if kind is None:
        raise ValueError(
            f"method={method!r} needs conditionally conjugate priors; the {model.title} model's priors are not "
            f"conjugate. Fit it with one of its methods {model.methods} (e.g. method='mcmc', NUTS in Stan), or use "
            "model='dawid_skene', 'class_conditional', 'homogeneous', 'one_coin', 'mace' or 'pooled'"
        )
    pri = model.priors(K, J)
    if kind == "pooled":
        return ConjugatePrior(kind, pri["alpha"], pri["beta"], pri["s_shape"], pri["s_rate"], pri, n_raters=J)
    if kind == "community":
        return ConjugatePrior(
            kind,
            pri["alpha"],
            pri["beta"],
            pri["s_shape"],
            pri["s_rate"],
            pri,
            n_raters=J,
            n_communities=int(pri["n_communities"]),
            rho_alpha=float(pri["rho_alpha"]),
        )
    if kind == "mace":
        return ConjugatePrior(kind, pri["alpha"], None, pri["beta1"], pri["beta2"], pri, gamma=pri["gamma"])
    if kind in ("class_conditional", "one_coin"):
        return ConjugatePrior(kind, pri["alpha"], None, pri["beta1"], pri["beta2"], pri)
    return ConjugatePrior(kind, pri["alpha"], pri["beta"], None, None, pri)


def _log_dirichlet_rows(x: np.ndarray, a: np.ndarray, draw_axes: int) -> np.ndarray:
    """Sum over rows of Dirichlet log densities, one value per draw (leading ``draw_axes`` axes)."""
    const = float(np.sum(gammaln(a.sum(-1)) - gammaln(a).sum(-1)))
    kern = xlogy(np.broadcast_to(a - 1, x.shape), x)
    return const + kern.reshape(*x.shape[:draw_axes], -1).sum(-1)


def log_prior_density(
    prior: ConjugatePrior, pi: np.ndarray, theta: np.ndarray, p: np.ndarray | None = None, max_block: int = 2**22
) -> np.ndarray:
    """Log prior density of draws, with every normalising constant (as the Stan programs).

    Computed in blocks of draws of at most ``max_block`` values each, so the
    temporaries stay small whatever the number of draws (no copy of the draws).

    Parameters
    ----------
    prior : ConjugatePrior
    pi : array (..., K)
    theta : array (..., J, K, K), or (..., K, K) for the homogeneous model
    p : array (..., J, K), class-conditional accuracies, or (..., J), one-coin accuracies
        (or the kernel's (..., J, 1)), or MACE's (..., J, K + 1): competence, then xi
    max_block : int
        Values of theta (or p) per block.

    Returns
    -------
    array of the leading (draw) shape of ``pi``.
    """
    n = pi.ndim - 1
    lead = pi.shape[:n]
    flat_pi = pi.reshape(-1, pi.shape[-1])
    S = flat_pi.shape[0]
    # the families with hyperparameters: p is the kernel's state (pooled: (..., K + 1, K) of m and s;
    # community: (..., L*K + L + 1 + J, max(K, L)) of m, s, rho and the communities)
    hyper = {"pooled": (_log_prior_pooled, "m and s"), "community": (_log_prior_community, "m, s and rho")}
    if prior.kind in hyper:
        density, needs = hyper[prior.kind]
        assert p is not None, f"the {prior.kind} model's prior density needs {needs}"
        per = int(np.prod(theta.shape[n:]))
        th = theta.reshape(S, *theta.shape[n:])
        hy = p.reshape(S, *p.shape[n:])
        step = max(1, max_block // max(1, per))
        out = np.empty(S)
        for a in range(0, S, step):
            out[a : a + step] = density(prior, flat_pi[a : a + step], th[a : a + step], hy[a : a + step])
        return out.reshape(lead)
    if prior.kind in ("dawid_skene", "homogeneous"):
        per = int(np.prod(theta.shape[n:]))
        other = theta.reshape(S, *theta.shape[n:])
    else:
        assert p is not None, "the accuracy models' prior density needs the accuracies p"
        per = int(np.prod(p.shape[n:]))
        other = p.reshape(S, *p.shape[n:])
    step = max(1, max_block // max(1, per))
    out = np.empty(S)
    for a in range(0, S, step):
        out[a : a + step] = _log_prior_block(prior, flat_pi[a : a + step], other[a : a + step])
    return out.reshape(lead)


def _log_prior_block(prior: ConjugatePrior, pi: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Log prior density of a block of draws: pi (n, K) and theta (n, ...) or p (n, J, K) or (n, J)."""
    lp = _log_dirichlet_rows(pi, prior.alpha, 1)
    if prior.kind in ("dawid_skene", "homogeneous"):
        assert prior.beta is not None  # set for these kinds by conjugate_prior
        return lp + _log_dirichlet_rows(other, prior.beta, 1)
    if prior.kind == "mace":  # other (n, J, K + 1): competence[j] ~ Beta(beta1, beta2), xi[j] ~ Dirichlet(gamma)
        assert prior.gamma is not None and prior.beta1 is not None and prior.beta2 is not None
        J = other.shape[1]
        c1, c2 = float(prior.beta1), float(prior.beta2)
        c, xi = other[..., 0], other[..., 1:]
        lp = lp + J * float(gammaln(c1 + c2) - gammaln(c1) - gammaln(c2))
        lp = lp + (xlogy(c1 - 1, c) + xlog1py(c2 - 1, -c)).sum(-1)
        g = prior.gamma
        lp = lp + J * float(gammaln(g.sum()) - gammaln(g).sum())
        return lp + xlogy(np.broadcast_to(g - 1, xi.shape), xi).reshape(other.shape[0], -1).sum(-1)
    b1, b2 = prior.beta1, prior.beta2
    assert b1 is not None and b2 is not None  # set for the accuracy kinds by conjugate_prior
    b1, b2 = np.asarray(b1), np.asarray(b2)
    n_rows = other[0].size // max(1, b1.size)  # J: the priors (K,) or () repeat once per rater
    const = -n_rows * float(np.sum(gammaln(b1) + gammaln(b2) - gammaln(b1 + b2)))
    kern = xlogy(b1 - 1, other) + xlog1py(b2 - 1, -other)
    return lp + const + kern.reshape(other.shape[0], -1).sum(-1)


def _log_prior_pooled(prior: ConjugatePrior, pi: np.ndarray, theta: np.ndarray, hyper: np.ndarray) -> np.ndarray:
    """Log prior density of a block of pooled draws: pi (n, K), theta (n, J, K, K), m and s in hyper (n, K + 1, K)."""
    assert prior.beta is not None and prior.beta1 is not None and prior.beta2 is not None
    K = pi.shape[-1]
    m, s = hyper[:, :K, :], hyper[:, K, :]
    J = theta.shape[1]
    a = 1.0 + s[:, :, None] * m  # (n, K, K)
    lp = _log_dirichlet_rows(pi, prior.alpha, 1)
    const = J * (gammaln(a.sum(-1)) - gammaln(a).sum(-1)).sum(-1)  # (n,)
    lp = lp + const + np.einsum("nkl,njkl->n", a - 1.0, np.log(theta))
    lp = lp + _log_dirichlet_rows(m, np.asarray(prior.beta, dtype=float), 1)
    shape, rate = float(prior.beta1), float(prior.beta2)
    lp = lp + (K * (shape * np.log(rate) - gammaln(shape)) + ((shape - 1.0) * np.log(s) - rate * s).sum(-1))
    return lp


def _log_prior_community(prior: ConjugatePrior, pi: np.ndarray, theta: np.ndarray, state: np.ndarray) -> np.ndarray:
    """Log prior density of a block of community draws, the communities summed out.

    pi (n, K), theta (n, J, K, K), the kernel's state (n, L*K + L + 1 + J, max(K, L)):
    ``log p(pi) + sum_j log sum_l rho_l prod_k Dirichlet(theta[j, k] | 1 + s[l, k] m[l, k])
    + log p(m) + log p(s) + log p(rho)``.
    """
    assert prior.beta is not None and prior.beta1 is not None and prior.beta2 is not None
    par = prior.reported(state)
    m, s, rho = par["m"], par["s"], par["rho"]  # (n, L, K, K), (n, L, K), (n, L)
    K = pi.shape[-1]
    L = prior.n_communities
    a = 1.0 + s[..., None] * m  # (n, L, K, K)
    const = (gammaln(a.sum(-1)) - gammaln(a).sum(-1)).sum(-1)  # (n, L)
    per = np.einsum("nlkq,njkq->njl", a - 1.0, np.log(theta)) + const[:, None, :] + np.log(rho)[:, None, :]
    lp = _log_dirichlet_rows(pi, prior.alpha, 1) + logsumexp(per, axis=-1).sum(-1)
    lp = lp + _log_dirichlet_rows(
        m.reshape(m.shape[0], L * K, K), np.tile(np.asarray(prior.beta, dtype=float), (L, 1)), 1
    )
    lp = lp + _log_dirichlet_rows(rho, np.full(L, prior.rho_alpha), 1)
    shape, rate = float(prior.beta1), float(prior.beta2)
    lp = lp + (L * K * (shape * np.log(rate) - gammaln(shape)) + ((shape - 1.0) * np.log(s) - rate * s).sum((-1, -2)))
    return lp
