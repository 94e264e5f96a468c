"""SQUAREM for the item-difficulty EM: jumps along the path of the generalised EM map, kept only uphill.

SQUAREM (Varadhan & Roland 2008, scheme S3) extrapolates from two EM steps
``x1 = F(x0)``, ``x2 = F(x1)``: with ``r = x1 - x0``, ``v = x2 - 2 x1 + x0``
and ``alpha = -max(1, |r| / |v|)`` it proposes
``x0 - 2 alpha r + alpha^2 v``, retried halfway back towards ``x2`` when it
does not go uphill (at most :data:`BACKTRACKS` times).  Here ``x`` holds every parameter on an
unconstrained-ish scale (``log(pi[k] / pi[0])`` for ``k >= 1``, the rater
abilities, the difficulties, ``log`` discrimination; guessing on its own
scale, projected to ``[0, 1)``).  A jump is kept only when its objective is at least that of
``x2`` and it keeps the non-adversarial constraint, else the cycle ends at
``x2``: the objective never falls.  EM's linear rate is slow where the
class probabilities carry little information (about 0.8 per iteration on
simulated crowd data); SQUAREM cuts the number of E-steps several-fold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import softmax

from .item_steps import GUESS_MAX, ItemState

__all__ = ["to_vector", "from_vector", "squarem_cycle", "BACKTRACKS"]

#: a rejected jump is retried this many times, each halfway back towards x2
BACKTRACKS = 2


def to_vector(st: ItemState) -> np.ndarray:
    """The parameters as one vector on the scale SQUAREM extrapolates on."""
    # K = 2: logit_sens, then logit_spec (the binary EM's order); K >= 3: the abilities class by class
    raters = [st.logit_sens, st.logit_spec] if st.n_categories == 2 else [st.ability.ravel()]
    parts = [np.log(st.pi[1:]) - np.log(st.pi[:1]), *raters, st.difficulty]
    if st.discrimination is not None:
        parts.append(np.log(st.discrimination))
    if st.guessing is not None:
        parts.append(st.guessing)
    return np.concatenate(parts)


def from_vector(x: np.ndarray, like: ItemState) -> ItemState:
    """The state of vector ``x`` (shapes from ``like``); guessing projected to ``[0, 1)``."""
    (K, J), I = like.ability.shape, like.difficulty.size
    if K == 2:
        p1 = 1.0 / (1.0 + np.exp(-x[0]))
        pi = np.array([1.0 - p1, p1])
        ability = np.stack([x[1 + J : 1 + 2 * J], x[1 : 1 + J]])  # (logit_spec, logit_sens)
    else:
        pi = softmax(np.concatenate([[0.0], x[: K - 1]]))
        ability = x[K - 1 : K - 1 + K * J].reshape(K, J).copy()
    at = K - 1 + K * J
    st = ItemState(pi=pi, ability=ability, difficulty=x[at : at + I].copy())
    at += I
    if like.discrimination is not None:
        st.discrimination = np.exp(x[at : at + I])
        at += I
    if like.guessing is not None:
        st.guessing = np.clip(x[at : at + I], 0.0, GUESS_MAX)
    return st


def squarem_cycle(
    x0: ItemState,
    e0: Any,
    step: Callable[[ItemState, Any], tuple[ItemState, float, Any]],
    evaluate: Callable[[ItemState], tuple[float, Any]],
    feasible: Callable[[ItemState], bool],
) -> tuple[list[tuple[ItemState, float, Any]], bool]:
    """One SQUAREM cycle from ``x0`` (with its E-step ``e0``).

    Parameters
    ----------
    step : callable
        ``step(x, e) -> (F(x), objective at F(x), its E-step)``: one generalised
        EM step from ``x`` and its E-step ``e``.
    evaluate : callable
        ``evaluate(x) -> (objective at x, its E-step)``.
    feasible : callable
        Whether a jump keeps the model's constraints.

    Returns
    -------
    points, jumped
        The accepted states in order, each with its objective and E-step
        (the last is where the next cycle starts), and whether the jump was kept.
    """
    x1, obj1, e1 = step(x0, e0)
    x2, obj2, e2 = step(x1, e1)
    points = [(x1, obj1, e1), (x2, obj2, e2)]
    v0, v1, v2 = to_vector(x0), to_vector(x1), to_vector(x2)
    r = v1 - v0
    v = v2 - 2.0 * v1 + v0
    nr, nv = float(np.linalg.norm(r)), float(np.linalg.norm(v))
    if not (nv > 0 and np.isfinite(nr) and np.isfinite(nv)):
        return points, False
    alpha = -max(1.0, nr / nv)
    for _ in range(BACKTRACKS + 1):
        if alpha >= -1.0:  # the jump is x2 itself
            break
        xj = from_vector(v0 - 2.0 * alpha * r + alpha**2 * v, x2)
        if feasible(xj):
            objj, ej = evaluate(xj)
            if np.isfinite(objj) and objj >= obj2:
                points.append((xj, objj, ej))
                return points, True
        alpha = (alpha - 1.0) / 2.0  # halfway back towards x2
    return points, False
