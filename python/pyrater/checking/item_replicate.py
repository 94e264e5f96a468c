"""Replicated data sets for fits with per-item parameters (the item-difficulty family).

For posterior draw ``s`` every design item gets a true class and item
parameters (difficulty, discrimination, guessing), and every design row a
rating from ``P(right) = gamma + (1 - gamma) inv_logit(delta (ability - difficulty))``
with the rater's logit sensitivity (positive class) or specificity
(negative class) as ability:

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
from ..models.item_difficulty import item_log_joint
from .replicate import Design, Replicate, categorical

__all__ = ["item_replicates"]


def _theta(logit_sens: np.ndarray, logit_spec: np.ndarray) -> np.ndarray:
    """Error matrices (J, 2, 2) on an item of difficulty 0, discrimination 1 and no guessing."""
    se, sp = expit(logit_sens), expit(logit_spec)
    return np.stack([np.stack([sp, 1 - sp], -1), np.stack([1 - se, se], -1)], axis=1)


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
    for s, p in enumerate(pick):
        b = {k: (None if v is None else v[p : p + 1]) for k, v in params.items()}
        pi = np.exp(b["log_pi"][0])  # type: ignore[index]
        z_obs = np.empty(D, dtype=np.int64)
        if marginal:
            # class and node jointly from their posterior given the unit's ratings (distinct rows)
            nl = fit.node_log_joint(b)[0]  # (G, Q, 2)
            G, Q = nl.shape[:2]
            joint = np.exp(nl - logsumexp(nl, axis=(1, 2), keepdims=True)).reshape(G, 2 * Q)
            row = fit._distinct[1][item_unit[observed]]
            cell = categorical(rng, joint[row])
            z_obs[observed] = cell % 2
            node = np.zeros(D, dtype=np.int64)
            node[observed] = cell // 2
        else:
            lj = condition_on_known(item_log_joint(fit.data.counts, **b), fit.known)[0]  # type: ignore[arg-type]
            post = np.exp(lj - logsumexp(lj, axis=1, keepdims=True))
            z_obs[observed] = categorical(rng, post[item_unit[observed]])
        z_obs[~observed] = categorical(rng, np.broadcast_to(pi, (int((~observed).sum()), 2)))
        if design == "new_items":
            z = categorical(rng, np.broadcast_to(pi, (D, 2)))
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
        sens, spec = b["logit_sens"][0], b["logit_spec"][0]  # type: ignore[index]
        z_row = z[item_of_row]
        ability = np.where(z_row == 1, sens[raters], spec[raters])
        i = item_of_row
        right = guessing[i] + (1 - guessing[i]) * expit(discrimination[i] * (ability - difficulty[i]))
        ratings = np.where(rng.random(i.size) < right, z_row, 1 - z_row)
        yield Replicate(draw=s, pi=pi, theta=_theta(sens, spec), z_observed=z_obs, z=z, ratings=ratings)
