"""SQUAREM: squared extrapolation of the EM map (Varadhan & Roland 2008), kept monotone.

EM converges linearly, and slowly where the information is small: on
trec_relevance maximum-likelihood EM takes thousands of iterations while the
error matrices of raters with few ratings creep towards the boundary.
SQUAREM treats EM as a fixed-point map ``F`` and, from three successive
points ``x0``, ``x1 = F(x0)``, ``x2 = F(x1)``, jumps to

    ``x' = x0 - 2 a r + a^2 v``,  ``r = x1 - x0``,  ``v = x2 - 2 x1 + x0``,
    ``a = -||r|| / ||v||`` (their scheme S3), ``a <= -1``

(``a = -1`` gives ``x' = x2``, two plain EM steps).  The parameters are
extrapolated on the log scale, ``x = (log pi, log theta)``, and mapped back
by a softmax over each probability vector: every proposal is a valid set of
probabilities, a rate creeping geometrically towards 0 is a straight line
there, and the structure of the Dawid-Skene family's constrained models
(equal off-diagonal entries of the class-conditional and one-coin models,
one matrix shared by every rater in the homogeneous model) is kept, because
equal entries stay equal under the same linear combination (up to rounding,
which :func:`restore_structure` removes).

Monotonicity.  A proposal is kept only when its objective (log-likelihood,
or log posterior for MAP) is at least that of the cycle's start ``x0`` (the
rule of the SQUAREM R package); otherwise the plain point ``x2`` is taken,
which EM guarantees is no worse, and the largest step length allowed
shrinks fourfold.  The next cycle starts
with a plain EM step from the kept point.  The objective trace records the
start of every cycle, so it never decreases, as with plain EM.  The largest step length allowed starts
at 1 and grows fourfold each time a step of that length is kept (the
``step.max`` rule of the SQUAREM R package), up to :data:`STEP_MAX`.

Stopping.  SQUAREM hands over to plain EM, whose stopping rule
(:class:`pyrater.inference.em.convergence.Convergence`) decides convergence,
once the plain EM steps inside a cycle have settled by that rule's first two
parts: objective change ``<= tol * max(1, |f|)``, the step ``d1 = max |x1 -
x0|`` on the probability scale and the distance to the fixed point, the
larger of ``d2 r / (1 - r)`` (``r = d2 / d1``, the local rate) and
``d1 ||r|| / ||v||`` on the probability scale (about ``1 / (1 - rate)`` along
EM's slowest direction), both ``<= param_tol``.
The estimate returned is therefore a fixed point of plain EM by the same
rule as without acceleration.

Reference
---------
R. Varadhan and C. Roland (2008). Simple and globally convergent methods for
accelerating the convergence of any EM algorithm. *Scandinavian Journal of
Statistics* 35(2), 335-353.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from .convergence import max_abs_diff

__all__ = ["ACCELERATED_KINDS", "STEP_MAX", "SquaremStats", "restore_structure", "squarem"]

#: the conjugate structures whose M-step is a function of the class probabilities alone and whose
#: parameters keep their structure under log-scale extrapolation
ACCELERATED_KINDS = ("dawid_skene", "homogeneous", "class_conditional", "one_coin")
_STEP_GROWTH = 4.0
#: the largest step length ever allowed: ``a^2`` multiplies the rounding error of the log-scale points
STEP_MAX = 4.0**5

Params = tuple[np.ndarray, np.ndarray]  # pi (K,), theta (J, K, K)


@dataclass
class SquaremStats:
    """What the SQUAREM phase did: E-steps (objective evaluations), cycles, kept jumps and fallbacks."""

    evaluations: int = 0
    cycles: int = 0
    accepted: int = 0
    fallbacks: int = 0

    def info(self) -> dict[str, Any]:
        """A summary for :attr:`pyrater.EMFit.convergence`."""
        return {
            "squarem_evaluations": self.evaluations,
            "squarem_cycles": self.cycles,
            "squarem_jumps_kept": self.accepted,
            "squarem_fallbacks": self.fallbacks,
        }


def _sq(x: np.ndarray) -> float:
    """Sum of squares; einsum, not a BLAS product (multi-threaded BLAS is slow here on a busy machine)."""
    return float(np.einsum("i,i->", x, x))


def _log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p)


def _softmax(x: np.ndarray) -> np.ndarray:
    """Probability vectors (last axis) from log-scale values; -inf gives exactly 0."""
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def _extrapolate(p0: Params, p1: Params, p2: Params, alpha: float) -> Params:
    """``x0 - 2 a r + a^2 v`` on the log scale, entry by entry; entries at 0 in any point keep ``x2``'s value."""
    out = []
    for a, b, c in zip(p0, p1, p2):
        x0, x1, x2 = _log(a), _log(b), _log(c)
        with np.errstate(invalid="ignore"):
            x = x0 - 2.0 * alpha * (x1 - x0) + alpha * alpha * (x2 - 2.0 * x1 + x0)
        finite = np.isfinite(x0) & np.isfinite(x1) & np.isfinite(x2)
        out.append(_softmax(np.where(finite, x, x2)))
    return out[0], out[1]


def restore_structure(kind: str, theta: np.ndarray) -> np.ndarray:
    """Re-impose the constrained model's structure on extrapolated error matrices (J, K, K), in place.

    Equal entries stay equal under the extrapolation up to rounding, which a
    long step multiplies by ``a^2``; EM never lowers the objective only from
    a point of the model.  Homogeneous: the raters' mean matrix for every
    rater; class-conditional: ``p[j, k] = theta[j, k, k]`` and the
    off-diagonal ``(1 - p[j, k]) / (K - 1)``; one-coin: ``p[j]`` the mean
    diagonal entry.  Dawid-Skene: unchanged.
    """
    K = theta.shape[-1]
    idx = np.arange(K)
    if kind == "homogeneous":
        theta[...] = theta.mean(axis=0, keepdims=True)
    elif kind in ("class_conditional", "one_coin"):
        p = theta[:, idx, idx]  # (J, K)
        if kind == "one_coin":
            p = np.repeat(p.mean(axis=1, keepdims=True), K, axis=1)
        theta[...] = ((1.0 - p) / (K - 1))[:, :, None]
        theta[:, idx, idx] = p
    return theta


def _step_length(p0: Params, p1: Params, p2: Params) -> float:
    """Varadhan & Roland's S3 step length ``-||r|| / ||v||`` on the log scale (finite entries only)."""
    rr = vv = 0.0
    for a, b, c in zip(p0, p1, p2):
        x0, x1, x2 = _log(a), _log(b), _log(c)
        finite = np.isfinite(x0) & np.isfinite(x1) & np.isfinite(x2)
        x0, x1, x2 = x0[finite], x1[finite], x2[finite]
        r = x1 - x0
        v = x2 - 2.0 * x1 + x0
        rr += _sq(r)
        vv += _sq(v)
    if vv <= 0.0 or rr <= 0.0:
        return -1.0
    return -float(np.sqrt(rr / vv))


def _rate_length(p0: Params, p1: Params, p2: Params) -> float:
    """``||r|| / ||v||`` on the probability scale: about ``1 / (1 - rate)`` along EM's slowest direction.

    On this scale entries creeping towards 0 weigh nothing (on the log scale they dominate).
    """
    rr = vv = 0.0
    for a, b, c in zip(p0, p1, p2):
        r = (b - a).ravel()
        v = (c - 2.0 * b + a).ravel()
        rr += _sq(r)
        vv += _sq(v)
    return float(np.sqrt(rr / vv)) if vv > 0.0 else (0.0 if rr == 0.0 else np.inf)


def _change(a: Params, b: Params) -> float:
    """Largest absolute change of pi and theta (probability scale), as in the stopping rule."""
    return max(max_abs_diff(a[0], b[0]), max_abs_diff(a[1], b[1]))


def squarem(
    evaluate: Callable[[np.ndarray, np.ndarray], tuple[float, Any]],
    update: Callable[[Any, np.ndarray], tuple[np.ndarray, np.ndarray, Any]],
    pi: np.ndarray,
    theta: np.ndarray,
    empty: Any,
    max_evaluations: int,
    tol: float,
    param_tol: float,
    trace: list[float],
    bar: Any = None,
    kind: str = "dawid_skene",
) -> tuple[np.ndarray, np.ndarray, Any, SquaremStats]:
    """Run SQUAREM cycles from ``(pi, theta)`` until plain EM's steps settle; return the next plain EM point.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(pi, theta) -> (objective, state)``: the E-step at a point
        (its objective, and whatever the M-step needs, e.g. the class
        probabilities or the expected counts).  ``state`` may live in a
        buffer that the next call overwrites: it is passed to ``update``
        before ``evaluate`` is called again.
    update : callable
        ``update(state, theta) -> (pi, theta, empty)``: the M-step.
    pi : array (K,)
    theta : array (J, K, K)
        The starting point (not yet evaluated).
    empty : object
        The M-step's empty-row mask at the start (returned unchanged if no step is taken).
    max_evaluations : int
        E-steps at most (every evaluation, kept or not, counts).
    tol, param_tol : float
        EM's stopping tolerances (see the module notes).
    trace : list of float
        The objective at the start of every cycle is appended (never decreasing).
    bar : tqdm bar or None
        Advanced once per E-step.
    kind : str
        The model's conjugate structure (:data:`ACCELERATED_KINDS`): each
        proposal is put back into it (:func:`restore_structure`).

    Returns
    -------
    pi, theta, empty
        The plain EM step from the last kept point: where plain EM goes on.
    stats : SquaremStats
    """
    stats = SquaremStats()
    step_max = 1.0

    def ev(p: Params, proposal: bool = False) -> tuple[float, Any]:
        stats.evaluations += 1
        if bar is not None:
            bar.update()
        # a proposal may give some unit probability 0 under every class (objective -inf, then rejected)
        with np.errstate(invalid="ignore", divide="ignore") if proposal else nullcontext():
            obj, state = evaluate(p[0], p[1])
        return (obj if np.isfinite(obj) else -np.inf), state

    p0: Params = (pi, theta)
    obj0, st0 = ev(p0)
    trace.append(obj0)
    while True:
        # x1 = F(x0), its objective; x2 = F(x1)
        pi1, theta1, empty1 = update(st0, p0[1])
        p1: Params = (pi1, theta1)
        if stats.evaluations + 2 > max_evaluations:  # no room for a cycle: plain EM goes on from x1
            return pi1, theta1, empty1, stats
        obj1, st1 = ev(p1)
        pi2, theta2, empty2 = update(st1, theta1)
        p2: Params = (pi2, theta2)
        stats.cycles += 1
        d1, d2 = _change(p0, p1), _change(p1, p2)
        r = d2 / d1 if d1 > 0 else 0.0
        wanted = _step_length(p0, p1, p2)
        # the distance to the fixed point, from the rate of this cycle's two steps and from the step
        # length on the probability scale (about 1 / (1 - rate) along EM's slowest direction)
        distance = max(d2 * r / (1.0 - r) if r < 1.0 else np.inf, d1 * _rate_length(p0, p1, p2))
        if abs(obj1 - obj0) <= tol * max(1.0, abs(obj1)) and max(d1, distance) <= param_tol:
            trace.append(obj1)
            return pi2, theta2, empty2, stats  # settled: plain EM confirms and stops by its own rule
        alpha = max(min(wanted, -1.0), -step_max)
        kept = False
        if alpha < -1.0 and stats.evaluations + 1 <= max_evaluations:
            pj = _extrapolate(p0, p1, p2, alpha)
            pj = (pj[0], restore_structure(kind, pj[1]))
            objj, stj = ev(pj, proposal=True)
            kept = objj >= obj0
        if kept:
            stats.accepted += 1
            if alpha <= -step_max:  # the longest step allowed was wanted and kept: allow longer
                step_max = min(STEP_MAX, step_max * _STEP_GROWTH)
            p0, obj0, st0 = pj, objj, stj
        else:  # the plain point x2, which EM guarantees is no worse than x1 (hence x0)
            if alpha < -1.0:  # a jump was rejected: shorter ones next
                stats.fallbacks += 1
                step_max = max(1.0, step_max / _STEP_GROWTH)
            elif wanted <= -step_max:  # the longest step allowed (a = -1) was wanted: allow longer
                step_max = min(STEP_MAX, step_max * _STEP_GROWTH)
            if stats.evaluations + 1 > max_evaluations:
                return pi2, theta2, empty2, stats
            p0 = p2
            obj0, st0 = ev(p0)
        trace.append(obj0)
