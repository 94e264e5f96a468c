"""Replicated data sets for fits with per-item parameters (the item-difficulty family).

For posterior draw ``s`` every design item gets a true class and item
parameters (difficulty, discrimination, guessing), and every design row a
rating from ``P(right) = gamma + (1 - gamma) inv_logit(delta (ability - difficulty))``
with the rater's logit sensitivity (positive class) or specificity
(negative class) as ability (K >= 3: its logit accuracy on the item's class;
a wrong rating is one of the other categories, evenly):

* ``"same_items"``: an observed item keeps its parameters of draw ``s`` and
  its class is drawn from its posterior ``P(z_i | y_i, draw s)``;
* ``"new_items"``: every item is new: class from ``pi_s``, parameters from
  their population distribution (the priors: ``difficulty ~ N(0, scale)``,
  ``discrimination ~ lognormal(0, scale)``, ``guessing ~ Beta(a, b)``).

Items of a user design that are not in the data are new items in either
design.  The marginal variant (item parameters integrated out) has no
item-parameter draws: under ``"same_items"`` an observed item draws its class
and item parameters jointly from their posterior given its ratings and draw
``s``, on the quadrature nodes (whose posterior weights approximate it).
Called by :func:`pyrater.checking.replicate.replicates`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from scipy.special import expit, logsumexp

from ..fits.item_difficulty import ItemLevelMixin, condition_on_known
from ..models.item_difficulty import accuracy_theta, item_log_joint_k
from .replicate import Design, Replicate, categorical

__all__ = ["item_replicates"]


def _item_values(
    drawn: np.ndarray | None, kept: np.ndarray, units: np.ndarray, default: float, fresh: Callable[[int], np.ndarray]
) -> np.ndarray:
    """One parameter per design item (D,): the draw's value for kept items, ``fresh(n)`` for the n others.

    ``drawn`` (1, I) is None for a parameter the variant fixes at ``default``.
    """
    values = np.full(kept.size, default)
    if drawn is not None:
        values[kept] = drawn[0, units]
        values[~kept] = fresh(int((~kept).sum()))
    return values


def item_replicates(
    fit: ItemLevelMixin,
    item_unit: np.ndarray,
    item_of_row: np.ndarray,
    raters: np.ndarray,
    draws: int,
    rng: np.random.Generator,
    design: Design = "same_items",
) -> Iterator[Replicate]:
    """Yield ``draws`` replicated data sets of a design (arguments as :func:`~pyrater.checking.replicate.replicates`).

    Draws are spread evenly over the posterior draws (a mode fit repeats its
    estimate); ``rng`` is consumed in a fixed order, so a seed fixes every replicate.
    """
    params = fit._params()
    log_pi_all = np.asarray(params["log_pi"])
    pick = np.linspace(0, log_pi_all.shape[0] - 1, draws).round().astype(int)
    priors = fit._priors()
    d_scale = float(priors["difficulty_scale"])
    s_scale = float(priors["discrimination_scale"])
    g_a, g_b = (float(v) for v in priors["guessing_prior"])
    observed = item_unit >= 0
    D = item_unit.size
    marginal = fit.marginal
    K = fit.data.n_categories
    for s, p in enumerate(pick):
        b = {k: (None if v is None else v[p : p + 1]) for k, v in params.items()}
        pi = np.exp(b["log_pi"][0])  # type: ignore[index]
        z_obs = np.empty(D, dtype=np.int64)
        if marginal:
            # class and node jointly from their posterior given the unit's ratings (distinct rows)
            nl = fit.node_log_joint(b)[0]  # (G, Q, K)
            G, Q = nl.shape[:2]
            joint = np.exp(nl - logsumexp(nl, axis=(1, 2), keepdims=True)).reshape(G, K * Q)
            row = fit._distinct[1][item_unit[observed]]
            cell = categorical(rng, joint[row])
            z_obs[observed] = cell % K
            node = np.zeros(D, dtype=np.int64)
            node[observed] = cell // K
        else:
            lj = item_log_joint_k(fit.data.counts, K, **b)  # type: ignore[arg-type]
            lj = condition_on_known(lj, fit.known)[0]
            post = np.exp(lj - logsumexp(lj, axis=1, keepdims=True))
            z_obs[observed] = categorical(rng, post[item_unit[observed]])
        z_obs[~observed] = categorical(rng, np.broadcast_to(pi, (int((~observed).sum()), K)))
        if design == "new_items":
            z = categorical(rng, np.broadcast_to(pi, (D, K)))
            kept = np.zeros(D, dtype=bool)
        else:
            z = z_obs
            kept = observed
        units = item_unit[kept]
        if marginal:
            rule = fit._rule
            b = {
                **b,
                "difficulty": rule.difficulty[None, node],
                "discrimination": rule.discrimination[None, node] if rule.sizes[1] > 1 else None,
                "guessing": rule.guessing[None, node] if rule.sizes[2] > 1 else None,
            }
            units = np.flatnonzero(kept)  # the node values are indexed by design item
        difficulty = _item_values(b["difficulty"], kept, units, 0.0, lambda n: rng.normal(0.0, d_scale, size=n))
        discrimination = _item_values(
            b["discrimination"], kept, units, 1.0, lambda n: rng.lognormal(0.0, s_scale, size=n)
        )
        guessing = _item_values(b["guessing"], kept, units, 0.0, lambda n: rng.beta(g_a, g_b, size=n))
        acc = b["ability"][0]  # type: ignore[index]
        z_row = z[item_of_row]
        ability = acc[raters, z_row]
        i = item_of_row
        right = guessing[i] + (1 - guessing[i]) * expit(discrimination[i] * (ability - difficulty[i]))
        hit = rng.random(i.size) < right
        if K == 2:
            ratings = np.where(hit, z_row, 1 - z_row)
        else:  # a wrong rating is one of the other K - 1 categories, evenly
            ratings = np.where(hit, z_row, (z_row + rng.integers(1, K, size=i.size)) % K)
        yield Replicate(draw=s, pi=pi, theta=accuracy_theta(acc), z_observed=z_obs, z=z, ratings=ratings)
