"""Pure numpy kernels of the latent-graph latent class model (no pandas).

Every update of the coordinate ascent lives here as a function of plain
arrays, so tests can check each one against an exact answer.  The
derivations are in ``docs/lcm_derivation.md``; the notation is

* ``q`` (n1, K): q(L_ik = 1) for the n1 cases;
* ``m_theta, v_theta`` (K,): mean and variance of the Gaussian q(theta_k);
* ``m_rho, v_rho``: mean and variance of the Gaussian q(rho);
* ``d`` (K, K): E[D_kk'], symmetric with zero diagonal;
* ``mu, s2`` (n1, K): mean and variance of the neighbour count
  N_ik = sum_k' D_kk' L_ik' under Q.

``f(x) = log(1 + exp(x))`` (softplus); its derivatives are the logistic
``s = expit(x)``, ``s' = s(1 - s)``, ``s'' = s'(1 - 2 s)`` and
``s''' = s'(1 - 6 s + 6 s^2)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
from scipy.special import digamma, expit

__all__ = [
    "softplus",
    "beta_elog",
    "neighbour_moments",
    "expected_softplus",
    "theta_objective",
    "rho_objective",
    "newton_max",
    "update_theta",
    "update_rho",
    "edge_logodds",
    "bronze_logodds",
    "update_q",
    "mean_field_residual",
    "pseudo_elbo",
]

NeighbourVariance = Literal["exact", "poisson"]


def softplus(x: np.ndarray) -> np.ndarray:
    """``log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))``, stable for any x."""
    x = np.asarray(x, dtype=float)
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _sderivs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    s = expit(x)
    s1 = s * (1.0 - s)
    return s, s1, s1 * (1.0 - 2.0 * s), s1 * (1.0 - 6.0 * s + 6.0 * s * s)


def beta_elog(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """E[log p] and E[log(1 - p)] for p ~ Beta(a, b)."""
    ab = digamma(np.asarray(a) + np.asarray(b))
    return digamma(a) - ab, digamma(b) - ab


def neighbour_moments(
    q: np.ndarray, d: np.ndarray, variance: NeighbourVariance = "exact"
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of N_ik = sum_k' D_kk' L_ik' under the mean-field Q.

    Under Q the terms are independent Bernoulli(p_ikk') with
    ``p_ikk' = E[D_kk'] q_ik'``, so ``E N = sum p`` and
    ``Var N = sum p (1 - p)`` ("exact"); the Poisson approximation of the
    specification uses ``Var N = E N`` ("poisson").

    Returns ``mu, s2``, each (n1, K).
    """
    mu = q @ d  # d symmetric: mu_ik = sum_k' q_ik' d_k'k
    if variance == "poisson":
        return mu, mu.copy()
    s2 = mu - (q * q) @ (d * d)
    return mu, np.maximum(s2, 0.0)


def expected_softplus(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Second-order approximation ``E f(X) ~ f(m) + f''(m) v / 2`` for E X = m, Var X = v."""
    m = np.asarray(m, dtype=float)
    e = np.exp(-np.abs(m))
    out = np.log1p(e)
    out += np.maximum(m, 0.0)
    r = 1.0 / (1.0 + e)  # f''(m) = s(1 - s) = e r^2 for either sign of m
    r *= r
    r *= e
    r *= v
    r *= 0.5
    out += r
    return out


# ------------------------------------------------------------------ theta
def theta_objective(
    theta: np.ndarray,
    q: np.ndarray,
    mu: np.ndarray,
    s2: np.ndarray,
    m_rho: float,
    v_rho: float,
    prior_mean: np.ndarray,
    prior_sd: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Approximate log q*(theta_k) up to a constant, its gradient and curvature, all (K,).

    ``h_k(t) = t S_k - sum_i [f(x_ik) + f''(x_ik) tau_ik / 2] - (t - mu0_k)^2 / (2 sd0_k^2)``
    with ``S_k = sum_i q_ik``, ``x_ik = t + E[rho] mu_ik`` and
    ``tau_ik = Var(rho N_ik) = v_rho (s2 + mu^2) + E[rho]^2 s2``.  The
    curvature is ``-h''`` with the data part clipped at 0.
    """
    S = q.sum(axis=0)
    tau = v_rho * (s2 + mu * mu) + m_rho * m_rho * s2
    x = theta[None, :] + m_rho * mu
    s, s1, s2_, s3 = _sderivs(x)
    h = theta * S - (softplus(x) + 0.5 * s1 * tau).sum(axis=0) - 0.5 * ((theta - prior_mean) / prior_sd) ** 2
    g = S - (s + 0.5 * s2_ * tau).sum(axis=0) - (theta - prior_mean) / prior_sd**2
    c = np.maximum((s1 + 0.5 * s3 * tau).sum(axis=0), 0.0) + 1.0 / prior_sd**2
    return h, g, c


def newton_max(
    fun: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    x0: np.ndarray,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """Maximise a separable objective by Newton steps with step halving.

    ``fun(x)`` returns (value, gradient, curvature > 0), each of the shape of
    ``x``; coordinates are independent problems solved together.
    Returns the maximiser and the curvature there.
    """
    x = np.array(x0, dtype=float)
    h, g, c = fun(x)
    for _ in range(max_iter):
        step = g / c
        if np.all(np.abs(step) < tol):
            break
        t = np.ones_like(x)
        for _ in range(30):
            xn = x + t * step
            hn, gn, cn = fun(xn)
            bad = ~(hn >= h - 1e-12 * np.abs(h))
            if not bad.any():
                break
            t = np.where(bad, 0.5 * t, t)
        x, h, g, c = xn, hn, gn, cn
    return x, c


def update_theta(q, mu, s2, m_rho, v_rho, m_theta, prior_mean, prior_sd) -> tuple[np.ndarray, np.ndarray]:
    """Laplace update of q(theta_k) = N(mode of h_k, 1 / curvature); returns (mean, var), (K,)."""
    mode, c = newton_max(lambda t: theta_objective(t, q, mu, s2, m_rho, v_rho, prior_mean, prior_sd), m_theta)
    return mode, 1.0 / c


# -------------------------------------------------------------------- rho
def rho_objective(
    rho: np.ndarray,
    q: np.ndarray,
    mu: np.ndarray,
    s2: np.ndarray,
    m_theta: np.ndarray,
    v_theta: np.ndarray,
    prior_mean: float,
    prior_sd: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Approximate log q*(rho) up to a constant, its gradient and curvature (arrays of shape (1,)).

    ``g(r) = r A - sum_ik [f(x_ik) + f''(x_ik) w_ik / 2] - (r - mu0)^2 / (2 sd0^2)``
    with ``A = sum_ik q_ik mu_ik``, ``x_ik = E[theta_k] + r mu_ik`` and
    ``w_ik = Var(theta_k + r N_ik) = v_theta_k + r^2 s2_ik``.
    """
    r = float(np.asarray(rho).ravel()[0])
    A = float((q * mu).sum())
    x = m_theta[None, :] + r * mu
    w = v_theta[None, :] + r * r * s2
    s, s1, s2_, s3 = _sderivs(x)
    h = r * A - float((softplus(x) + 0.5 * s1 * w).sum()) - 0.5 * ((r - prior_mean) / prior_sd) ** 2
    g = A - float((mu * s + 0.5 * mu * s2_ * w + s1 * r * s2).sum()) - (r - prior_mean) / prior_sd**2
    c = float((mu * mu * s1 + 0.5 * mu * mu * s3 * w + 2.0 * mu * s2_ * r * s2 + s1 * s2).sum())
    c = max(c, 0.0) + 1.0 / prior_sd**2
    return np.array([h]), np.array([g]), np.array([c])


def update_rho(q, mu, s2, m_theta, v_theta, m_rho, prior_mean, prior_sd) -> tuple[float, float]:
    """Laplace update of q(rho); returns (mean, var)."""
    mode, c = newton_max(
        lambda r: rho_objective(r, q, mu, s2, m_theta, v_theta, prior_mean, prior_sd), np.array([m_rho])
    )
    return float(mode[0]), float(1.0 / c[0])


# ---------------------------------------------------------------------- D
def edge_logodds(
    q: np.ndarray,
    d: np.ndarray,
    m_theta: np.ndarray,
    v_theta: np.ndarray,
    m_rho: float,
    v_rho: float,
    elogit_pi: float,
    variance: NeighbourVariance = "exact",
) -> np.ndarray:
    """Log-odds of q(D_kk' = 1), (K, K) symmetric with zero diagonal.

    ``logit q(D_kk') = E[logit pi_d] + 2 E[rho] sum_i q_ik q_ik' - Delta_kk' - Delta_k'k`` with
    ``Delta_kk' = sum_i (E[f(theta_k + rho N_ik) | D_kk' = 1] - E[f(theta_k + rho N_ik) | D_kk' = 0])``.
    Given D_kk' = c the count is ``c L_ik' + N'`` with ``N' = N_ik^(-k')`` (the
    other neighbours); conditioning exactly on ``L_ik' ~ Bernoulli(q_ik')``,
    ``Delta_kk' = sum_i q_ik' (E f(theta_k + rho (N' + 1)) - E f(theta_k + rho N'))``,
    each expectation by the second-order expansion with the moments of N'.
    """
    K = q.shape[1]
    mu, s2 = neighbour_moments(q, d, variance)
    p = d[None, :, :] * q[:, None, :]  # [i, k, k'] = E[D_kk'] q_ik'
    mean0 = mu[:, :, None] - p
    var0 = s2[:, :, None] - (p if variance == "poisson" else p * (1.0 - p))
    np.maximum(var0, 0.0, out=var0)
    x0 = m_theta[None, :, None] + m_rho * mean0
    # Var(theta_k + rho N) = v_theta + v_rho (Var N + E[N]^2) + E[rho]^2 Var N
    w0 = (v_theta[None, :, None] + (v_rho + m_rho * m_rho) * var0) + v_rho * mean0 * mean0
    w1 = w0 + v_rho * (2.0 * mean0 + 1.0)
    diff = expected_softplus(x0 + m_rho, w1)
    diff -= expected_softplus(x0, w0)
    delta = np.einsum("ikl,il->kl", diff, q)
    out = elogit_pi + 2.0 * m_rho * (q.T @ q) - delta - delta.T
    out = 0.5 * (out + out.T)  # exactly symmetric despite rounding
    out[np.diag_indices(K)] = -np.inf
    return out


# ---------------------------------------------------------------------- L
def bronze_logodds(
    Mc: np.ndarray, ss_measured: np.ndarray, ss_value: np.ndarray, elog: dict[str, np.ndarray]
) -> np.ndarray:
    """Measurement part of logit q(L_ik = 1) for cases, (n1, K).

    ``M (E log g - E log d) + (1 - M)(E log(1-g) - E log(1-d)) + [SS measured, SS = 0] E log(1 - eta)``;
    a positive silver standard forces q = 1 and is handled by :func:`update_q`.
    ``elog`` has keys ``lg, l1g, ld, l1d, l1e`` ((K,) arrays).
    """
    out = Mc * (elog["lg"] - elog["ld"]) + (1.0 - Mc) * (elog["l1g"] - elog["l1d"])
    neg = ss_measured & (ss_value == 0)
    return out + np.where(neg, elog["l1e"][None, :], 0.0)


def update_q(
    q: np.ndarray, base: np.ndarray, m_theta: np.ndarray, m_rho: float, d: np.ndarray, ss_pos: np.ndarray
) -> np.ndarray:
    """One sweep of the mean-field q(L) update over the targets (Gauss-Seidel), in place.

    ``logit q_ik = base_ik + E[theta_k] + E[rho] sum_k' q_ik' E[D_kk']``; q = 1
    where the silver standard is positive.  Vectorised over cases.
    """
    K = q.shape[1]
    for k in range(K):
        eta = base[:, k] + m_theta[k] + m_rho * (q @ d[:, k])
        q[:, k] = np.where(ss_pos[:, k], 1.0, expit(eta))
    return q


def mean_field_residual(q, base, m_theta, m_rho, d, ss_pos) -> float:
    """Max |q - expit(mean-field log-odds)| over cases and targets (0 at a fixed point)."""
    eta = base + m_theta[None, :] + m_rho * (q @ d)
    target = np.where(ss_pos, 1.0, expit(eta))
    return float(np.max(np.abs(q - target)))


# ------------------------------------------------------------------ score
def _beta_kl(a, b, a0, b0):
    """KL(Beta(a, b) || Beta(a0, b0)), elementwise."""
    from scipy.special import betaln

    return (
        betaln(a0, b0)
        - betaln(a, b)
        + (a - a0) * digamma(a)
        + (b - b0) * digamma(b)
        + (a0 - a + b0 - b) * digamma(a + b)
    )


def _normal_kl(m, v, m0, s0):
    """KL(N(m, v) || N(m0, s0^2)), elementwise."""
    return 0.5 * (v / s0**2 + (m - m0) ** 2 / s0**2 - 1.0 - np.log(v / s0**2))


def _bern_entropy(p):
    p = np.clip(p, 1e-300, 1.0)
    p1 = np.clip(1.0 - p, 1e-300, 1.0)
    return -(p * np.log(p) + p1 * np.log(p1))


def pseudo_elbo(
    q,
    Mc,
    M0,
    ss_meas,
    ss_val,
    ab: dict,
    m_theta,
    v_theta,
    m_rho,
    v_rho,
    d,
    pi_ab,
    priors,
    graph: bool,
    variance: NeighbourVariance = "exact",
) -> float:
    """ELBO-style objective with the pseudo-likelihood in place of the Ising density.

    ``E_Q[log p(M, SS | L, gamma, delta, eta)] + E_Q[log PL(L | theta, rho, D)] + H(q(L))
    - KL(q(gamma, delta, eta) || prior) - KL(q(theta) || prior) - KL(q(rho) || prior)
    - E_Q[KL(q(D) || Bernoulli(pi_d))] - KL(q(pi_d) || prior)``, where
    ``E log PL = sum_ik [q_ik (E theta_k + E rho mu_ik') - E f(theta_k + rho N_ik)]`` uses the
    same second-order expansion as the updates (``mu_ik'`` = E[N_ik | L_ik = 1] = mu_ik).
    Used to rank restarts; the updates are not exact ascent on it.
    ``ab`` has the Beta parameter arrays ``gamma, delta, eta`` ((K, 2) each).
    """
    lg, l1g = beta_elog(ab["gamma"][:, 0], ab["gamma"][:, 1])
    ld, l1d = beta_elog(ab["delta"][:, 0], ab["delta"][:, 1])
    le, l1e = beta_elog(ab["eta"][:, 0], ab["eta"][:, 1])
    like = (q * (Mc * lg + (1 - Mc) * l1g) + (1 - q) * (Mc * ld + (1 - Mc) * l1d)).sum()
    like += (M0 * ld + (1 - M0) * l1d).sum()
    like += (ss_meas * q * (ss_val * le + (1 - ss_val) * l1e)).sum()
    mu, s2 = neighbour_moments(q, d, variance)
    tau = v_theta[None, :] + v_rho * (s2 + mu * mu) + m_rho * m_rho * s2
    pl = (q * (m_theta[None, :] + m_rho * mu)).sum() - expected_softplus(m_theta[None, :] + m_rho * mu, tau).sum()
    score = like + pl + _bern_entropy(q).sum()
    for name in ("gamma", "delta", "eta"):
        a0, b0 = getattr(priors, name)
        score -= _beta_kl(ab[name][:, 0], ab[name][:, 1], a0, b0).sum()
    score -= _normal_kl(m_theta, v_theta, priors.theta[0], priors.theta[1]).sum()
    if graph:
        score -= float(_normal_kl(m_rho, v_rho, priors.rho[0], priors.rho[1]))
        K = d.shape[0]
        p = d[np.triu_indices(K, 1)]
        la, lb = beta_elog(pi_ab[0], pi_ab[1])
        score += (p * la + (1 - p) * lb).sum() + _bern_entropy(p).sum()
        score -= float(_beta_kl(pi_ab[0], pi_ab[1], *priors.pi_d))
    return float(score)
