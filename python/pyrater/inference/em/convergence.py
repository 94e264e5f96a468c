"""EM's stopping rule and its convergence warning (in-memory and distributed EM share them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._validation import check_int

__all__ = [
    "Convergence",
    "EMConvergenceWarning",
    "best_run",
    "max_abs_diff",
    "check_stopping",
    "not_converged_message",
    "METHODS",
    "BOUNDARY",
]

#: EM's methods: maximum likelihood and the posterior mode
METHODS = ("ml", "map")
# parameter changes at or below this are rounding noise (the stopping rule's extrapolation ignores them)
_ROUNDING = 1e-13
#: error-matrix entries below this count as at the boundary (zero) in the convergence warning
BOUNDARY = 1e-8


class EMConvergenceWarning(UserWarning):
    """EM stopped at ``max_iter`` before the objective and the parameters had settled."""


def max_abs_diff(x: np.ndarray, y: np.ndarray, out: np.ndarray | None = None) -> float:
    """``max |x - y|`` (0 for empty arrays) with at most one temporary, or none given ``out``.

    ``np.max(np.abs(x - y))`` allocates two temporaries of ``x``'s size; at 1 MB the second
    comes as fresh pages, which cost more than the arithmetic.
    """
    d = np.subtract(x, y, out=out)
    np.abs(d, out=d)
    return float(d.max()) if d.size else 0.0


class Convergence:
    """The stopping rule: the objective AND the parameters have settled.

    Iteration ``t`` counts as converged when

    1. the objective changed by at most ``tol * max(1, |f_t|)``;
    2. the largest absolute change of pi and theta, ``d_t``, and the
       distance to the fixed point extrapolated from EM's linear rate,
       ``d_t * r / (1 - r)`` with ``r`` the largest of the last three
       ratios ``d_s / d_{s-1}`` (infinite when ``r >= 1``), are both at most
       ``param_tol``;
    3. and the class probabilities changed by at most ``param_tol``
       between two iterations that follow a settled one (1 and 2 hold for
       three iterations in a row; the numba path writes the class
       probabilities only then).

    On a flat likelihood EM's steps shrink slowly: the objective then
    changes by less than ``tol`` long before the parameters stop moving,
    which rule 1 alone would take for convergence.
    """

    def __init__(self, tol: float, param_tol: float) -> None:
        self.tol = tol
        self.param_tol = param_tol
        self.prev: tuple[np.ndarray, np.ndarray | None] | None = None
        self.deltas: list[float] = []
        self.param_change = np.nan
        self.param_distance = np.nan
        self.class_change = np.nan
        self.T_prev: np.ndarray | None = None
        # the next iteration must provide its class probabilities (this one was settled)
        self.want_T = False
        self._buf: np.ndarray | None = None  # theta - prev, reused (see _max_change)

    def settled(self, trace: list[float], pi: np.ndarray, theta: np.ndarray, theta_change: float | None = None) -> bool:
        """Rules 1 and 2 at the latest iteration (call once per iteration).

        ``theta_change``: ``max |theta - theta of the previous call|`` when the caller has
        computed it (the fused Dawid-Skene M-step does, on its way); then no copy of theta is
        kept.  A caller that gives it once gives it at every later call.
        """
        if self.prev is not None:
            if theta_change is None:
                prev_theta = self.prev[1]
                assert prev_theta is not None, "theta_change was given at the previous call"
                d_theta = self._max_change(theta, prev_theta)
            else:
                d_theta = theta_change
            d = max(float(np.max(np.abs(pi - self.prev[0]))), d_theta)
            self.deltas.append(d)
            self.param_change = d
            ratios = [b / a if a > 0 else 0.0 for a, b in zip(self.deltas[-4:-1], self.deltas[-3:])]
            r = max(ratios) if ratios else np.inf
            # changes of 1e-13 and below are rounding noise, their ratios meaningless
            self.param_distance = 0.0 if d <= _ROUNDING else (d * r / (1.0 - r) if r < 1 else np.inf)
        self.prev = (pi.copy(), theta.copy() if theta_change is None else None)
        if len(trace) < 2 or not self.deltas:
            self.want_T = False
            return False
        obj_ok = abs(trace[-1] - trace[-2]) <= self.tol * max(1.0, abs(trace[-1]))
        self.want_T = bool(obj_ok and max(self.param_change, self.param_distance) <= self.param_tol)
        return self.want_T

    def _max_change(self, theta: np.ndarray, prev: np.ndarray) -> float:
        """``max |theta - prev|`` in a buffer kept between iterations.

        ``np.max(np.abs(theta - prev))`` allocates two temporaries of theta's size (1 MB at
        J = 5000, K = 5), and fresh pages cost more than the arithmetic: 0.75 ms against 0.06 ms
        per iteration at that size, a tenth of a fused EM iteration at 10^6 ratings.
        """
        if self._buf is None or self._buf.shape != theta.shape:
            self._buf = np.empty(theta.shape)
        return max_abs_diff(theta, prev, self._buf)

    def classes_settled(self, T: np.ndarray) -> bool:
        """Rule 3: compare T with the class probabilities kept at the previous settled iteration."""
        done = False
        if self.T_prev is not None:
            self.class_change = max_abs_diff(T, self.T_prev)
            done = self.class_change <= self.param_tol
        if not done:
            self.T_prev = np.array(T, copy=True)
        return done

    def reset_classes(self) -> None:
        """Forget the class probabilities kept for rule 3 (the run left the settled state)."""
        self.T_prev = None

    def info(self) -> dict[str, float]:
        """The convergence measures at the last iteration."""
        return {
            "param_change": self.param_change,
            "param_distance": self.param_distance,
            "class_change": self.class_change,
        }


def not_converged_message(max_iter: int, detail: str, theta: np.ndarray, kind: object, ml: bool) -> str:
    """The EMConvergenceWarning text: what stopped, and the way out that fits this estimate.

    A maximum-likelihood estimate with error-matrix entries at zero lies on the
    boundary of the parameter space (raters with few ratings): EM creeps
    towards it, so more iterations buy little; the posterior mode stays inside.
    ``theta`` is (J, K, K); the homogeneous model's J copies of its one
    matrix are counted once.
    """
    text = f"EM did not converge in max_iter={max_iter} iterations ({detail}); "
    if kind == "homogeneous":
        theta = theta[:1]
    at_zero = int(np.count_nonzero(theta < BOUNDARY))
    if ml and at_zero:
        return text + (
            f"{at_zero} of {theta.size} error-matrix entries are below {BOUNDARY:g}: the maximum-likelihood "
            "estimate lies on the boundary (raters with few ratings), which EM approaches slowly, so a larger "
            "max_iter changes little; method='map' (with the model's priors) keeps the estimate inside"
        )
    return text + "increase max_iter"


def best_run(runs: list[dict], tol: float, param_tol: float) -> tuple[int, np.ndarray, dict[str, Any], float]:
    """The run (of EM's restarts) with the highest final objective, its convergence record and last change.

    A later run replaces an earlier one only when it is higher by more than ``tol`` relative, so
    ties keep the first start.  Each run is a dict with ``"trace"`` (the objective per iteration)
    and ``"convergence"`` (the stopping rule's last values).

    Returns
    -------
    best : int
        The index of the best run.
    finals : float array (n_runs,)
        Each run's final objective.
    convergence : dict
        The stopping rule in words, ``tol``, ``param_tol``, the last relative objective change
        and the run's own convergence values.
    objective_change : float
        The last relative objective change (NaN after one iteration).
    """
    finals = np.array([run["trace"][-1] for run in runs])
    best = 0
    for r in range(1, len(runs)):
        if finals[r] > finals[best] + tol * max(1.0, abs(finals[best])):
            best = r
    res = runs[best]
    trace = res["trace"]
    obj_change = abs(trace[-1] - trace[-2]) / max(1.0, abs(trace[-1])) if len(trace) > 1 else float("nan")
    convergence = {
        "rule": (
            f"objective change <= {tol:g} x max(1, |objective|) and parameter change and its extrapolated "
            f"distance to the fixed point <= {param_tol:g}, then class probability change <= {param_tol:g}"
        ),
        "tol": tol,
        "param_tol": param_tol,
        "objective_change": obj_change,
        **res["convergence"],
    }
    return best, finals, convergence, obj_change


def check_stopping(max_iter: Any, tol: Any, param_tol: Any) -> tuple[int, float, float]:
    """Validate EM's stopping arguments (in-memory and distributed EM share them)."""
    check_int("max_iter", max_iter, 1)
    checked = []
    for name, value in (("tol", tol), ("param_tol", param_tol)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a non-negative number (np.inf allowed), got {value!r}") from None
        if isinstance(value, (bool, np.bool_)) or not number >= 0:
            raise ValueError(f"{name} must be a non-negative number (np.inf allowed), got {value!r}")
        checked.append(number)
    return int(max_iter), checked[0], checked[1]
