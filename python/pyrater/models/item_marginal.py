"""The item-difficulty model with its item parameters integrated out by quadrature.

The priors of the item parameters of :class:`~pyrater.models.ItemDifficulty`
have fixed scales, so the item parameters can be integrated out of each
item's likelihood exactly, item by item::

    p(y_i | z_i = k, raters) = E_{beta, delta, gamma ~ prior}[ prod_j p(y_ij | z_i = k, beta, delta, gamma, rater j) ]

and items with the same ratings share one marginal likelihood (grouped data
fit without expansion; long data are compressed to their distinct rows).
The expectation is a fixed tensor-product quadrature (:func:`quadrature_rule`):

* difficulty ``beta ~ N(0, difficulty_scale)``: the trapezoidal rule on
  ``x = beta / difficulty_scale`` (equally spaced nodes on [-7, 7] with the
  normal density as weights).  The likelihood is a product of logistic
  functions of ``beta``, analytic in a strip around the real axis, where the
  trapezoidal rule converges geometrically in the spacing; on caries it
  reaches the accuracy of Gauss-Hermite with fewer nodes (29 against 41 for
  ~2e-7 in each pattern's log-likelihood; bench/RESULTS_item_difficulty_marginal.md);
* discrimination ``log delta ~ N(0, discrimination_scale)``: Gauss-Hermite on
  ``log delta``;
* guessing ``gamma ~ Beta(a, b)``: Gauss-Jacobi in ``gamma`` (weight
  ``gamma^(a-1) (1-gamma)^(b-1)``).  Given ``beta`` and ``delta`` the
  likelihood of a unit with ``n`` ratings is a polynomial of degree ``n`` in
  ``gamma``, so ``ceil((n + 1) / 2)`` nodes integrate it exactly.

:func:`marginal_log_joint` is the numpy twin of the Stan program
``stan/item_difficulty_marginal.stan`` (class probabilities, ``log_lik`` and
posterior prediction of the fits); :func:`node_posterior` gives the posterior
weights of the nodes given a unit's ratings (the "same items" replication).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import log_expit, logsumexp, roots_hermitenorm, roots_jacobi

__all__ = [
    "QuadratureRule",
    "quadrature_rule",
    "rule_for",
    "marginal_log_joint",
    "marginal_log_joint_k",
    "node_log_lik",
    "node_log_lik_k",
    "N_DIFFICULTY",
    "N_DISCRIMINATION",
    "MAX_GUESSING",
]

#: trapezoidal nodes on the standardised difficulty, over [-DIFFICULTY_RANGE, DIFFICULTY_RANGE]
#: (chosen by the accuracy study in bench/RESULTS_item_difficulty_marginal.md)
N_DIFFICULTY = 29
DIFFICULTY_RANGE = 7.0
#: Gauss-Hermite nodes on the log discrimination
N_DISCRIMINATION = 9
#: at most this many Gauss-Jacobi nodes on the guessing (exact for units of up to 2 * MAX_GUESSING - 1 ratings)
MAX_GUESSING = 12


@dataclass(frozen=True)
class QuadratureRule:
    """A tensor-product rule over (difficulty, discrimination, guessing), flattened to Q nodes.

    Attributes
    ----------
    difficulty, discrimination, guessing : arrays (Q,)
        The item parameters at every node (discrimination 1 / guessing 0 where
        the variant fixes them).
    log_weight : array (Q,)
        Log weights, ``logsumexp(log_weight) == 0`` (the prior's mass at each node).
    sizes : (int, int, int)
        Nodes per axis (difficulty, discrimination, guessing).
    """

    difficulty: np.ndarray
    discrimination: np.ndarray
    guessing: np.ndarray
    log_weight: np.ndarray
    sizes: tuple[int, int, int]

    @property
    def n_nodes(self) -> int:
        """Number of nodes Q."""
        return int(self.log_weight.size)


def _normal_rule(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal nodes and log weights (probabilists' Gauss-Hermite), weights summing to 1."""
    x, w = roots_hermitenorm(n)
    return x, np.log(w) - np.log(w.sum())


def _trapezoid_normal_rule(n: int, half_width: float = DIFFICULTY_RANGE) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal nodes and log weights of the trapezoidal rule on [-half_width, half_width] (weights sum to 1)."""
    x = np.linspace(-half_width, half_width, n)
    lw = -0.5 * x**2
    return x, lw - logsumexp(lw)


def _beta_rule(n: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Jacobi nodes in (0, 1) and log weights of the Beta(a, b) distribution."""
    x, w = roots_jacobi(n, b - 1.0, a - 1.0)  # weight (1 - x)^(b - 1) (1 + x)^(a - 1) on [-1, 1]
    return (1.0 + x) / 2.0, np.log(w) - np.log(w.sum())


def guessing_nodes_for(max_ratings: int) -> int:
    """Gauss-Jacobi nodes that integrate a unit of ``max_ratings`` ratings exactly (at most MAX_GUESSING)."""
    return int(min(MAX_GUESSING, max(1, math.ceil((max_ratings + 1) / 2))))


def quadrature_rule(
    priors: dict[str, Any],
    discrimination: bool = True,
    guessing: bool = True,
    max_ratings: int = 1,
    sizes: tuple[int, int, int] | None = None,
) -> QuadratureRule:
    """The tensor-product rule of the item-parameter prior.

    Parameters
    ----------
    priors : dict
        Resolved priors of :meth:`ItemDifficulty.priors` (``difficulty_scale``,
        ``discrimination_scale``, ``guessing_prior``).
    discrimination, guessing : bool
        The variant: a fixed parameter gets one node (1, resp. 0).
    max_ratings : int
        Most ratings of one unit: sets the Gauss-Jacobi nodes (exact up to MAX_GUESSING).
    sizes : (int, int, int), optional
        Nodes per axis, overriding the defaults (accuracy studies).

    Returns
    -------
    QuadratureRule
    """
    if sizes is None:
        sizes = (N_DIFFICULTY, N_DISCRIMINATION, guessing_nodes_for(max_ratings))
    n_d, n_s, n_g = (int(s) for s in sizes)
    if not discrimination:
        n_s = 1
    if not guessing:
        n_g = 1
    xd, lwd = _trapezoid_normal_rule(n_d) if n_d > 1 else (np.zeros(1), np.zeros(1))
    if discrimination:
        xs, lws = _normal_rule(n_s)
        delta = np.exp(float(priors["discrimination_scale"]) * xs)
    else:
        delta, lws = np.ones(1), np.zeros(1)
    if guessing:
        a, b = (float(v) for v in np.asarray(priors["guessing_prior"], dtype=float))
        gamma, lwg = _beta_rule(n_g, a, b)
    else:
        gamma, lwg = np.zeros(1), np.zeros(1)
    beta = float(priors["difficulty_scale"]) * xd
    # flattened in the order (difficulty slowest, guessing fastest)
    D, S, G = (a.ravel() for a in np.meshgrid(np.arange(n_d), np.arange(n_s), np.arange(n_g), indexing="ij"))
    return QuadratureRule(
        difficulty=beta[D],
        discrimination=delta[S],
        guessing=gamma[G],
        log_weight=lwd[D] + lws[S] + lwg[G],
        sizes=(n_d, n_s, n_g),
    )


def rule_for(model: Any, counts: sp.spmatrix) -> QuadratureRule:
    """The rule the fits of ``model`` (an :class:`~pyrater.models.ItemDifficulty`) use on a count matrix.

    The guessing axis gets enough Gauss-Jacobi nodes to be exact for the unit with the most ratings.
    """
    J = counts.shape[1] // 2
    n = np.asarray(counts.sum(axis=1)).ravel()
    return quadrature_rule(
        model.priors(2, J),
        discrimination=bool(model.discrimination),
        guessing=bool(model.guessing),
        max_ratings=int(n.max()) if n.size else 1,
    )


def node_log_lik(
    counts: sp.csr_matrix, logit_sens: np.ndarray, logit_spec: np.ndarray, rule: QuadratureRule
) -> np.ndarray:
    """``log p(y_u | z_u = k, node q, raters)`` for binary data: :func:`node_log_lik_k` of (logit_spec, logit_sens).

    Parameters
    ----------
    counts : sparse (U, 2 J)
        Count matrix of the units (:attr:`RatingData.counts`).
    logit_sens, logit_spec : arrays (S, J)
    rule : QuadratureRule

    Returns
    -------
    array, shape (S, U, Q, 2)
        Class 0 negative, 1 positive.
    """
    return node_log_lik_k(counts, np.stack([logit_spec, logit_sens], -1), rule)


def node_log_lik_k(counts: sp.csr_matrix, ability: np.ndarray, rule: QuadratureRule) -> np.ndarray:
    """``log p(y_u | z_u = k, node q, raters)`` for every draw, unit, node and class, any K.

    For class ``k`` a rating ``k`` is right, with probability ``r = gamma +
    (1 - gamma) inv_logit(delta (ability[j, k] - difficulty))`` at the node's
    item parameters, and every other category has ``(1 - r) / (K - 1)``.

    Parameters
    ----------
    counts : sparse (U, K J)
        Count matrix of the units (:attr:`RatingData.counts`).
    ability : array (S, J, K)
        Logit accuracy of each rater on each true class (K = 2: logit_spec, logit_sens).
    rule : QuadratureRule

    Returns
    -------
    array, shape (S, U, Q, K)
    """
    S, J, K = ability.shape
    beta, delta, gamma = rule.difficulty, rule.discrimination, rule.guessing
    log1m_g = np.log1p(-gamma)
    log_spread = np.log(K - 1.0)
    out = np.empty((S, counts.shape[0], rule.n_nodes, K))
    C = counts.tocsr()
    dense = C.toarray() if C.shape[0] <= 4096 else None
    for k in range(K):
        eta = delta[None, :, None] * (ability[:, None, :, k] - beta[None, :, None])  # (S, Q, J)
        wrong = log1m_g[None, :, None] + log_expit(-eta)  # log P(not right)
        with np.errstate(divide="ignore"):
            right = np.log(-np.expm1(wrong))
        # rating code k is right for class k; each other code gets an even share of the rest
        cells = np.repeat((wrong - log_spread)[..., None], K, axis=-1)  # (S, Q, J, K)
        cells[..., k] = right
        lp = cells.reshape(S, rule.n_nodes, K * J)  # columns (j, l) as in the count matrix
        out[..., k] = np.einsum("uc,sqc->suq", dense, lp) if dense is not None else _sparse_sum(C, lp)
    return out


def _sparse_sum(C: sp.csr_matrix, lp: np.ndarray) -> np.ndarray:
    """``C @ lp[s].T`` for every draw s: (S, U, Q)."""
    return np.stack([(C @ lp[s].T) for s in range(lp.shape[0])])


def marginal_log_joint(
    counts: sp.csr_matrix, log_pi: np.ndarray, logit_sens: np.ndarray, logit_spec: np.ndarray, rule: QuadratureRule
) -> np.ndarray:
    """``log p(y_u, z_u = k | pi, raters)`` for binary data, the item parameters integrated out; shape (S, U, 2).

    Arguments as :func:`node_log_lik`, with ``log_pi`` (S, 2).
    """
    return marginal_log_joint_k(counts, log_pi, np.stack([logit_spec, logit_sens], -1), rule)


def marginal_log_joint_k(
    counts: sp.csr_matrix, log_pi: np.ndarray, ability: np.ndarray, rule: QuadratureRule
) -> np.ndarray:
    """``log p(y_u, z_u = k | pi, raters)``, the item parameters integrated out; shape (S, U, K).

    Arguments as :func:`node_log_lik_k`, with ``log_pi`` (S, K).
    """
    nl = node_log_lik_k(counts, ability, rule)
    return logsumexp(nl + rule.log_weight[None, None, :, None], axis=2) + log_pi[:, None, :]
