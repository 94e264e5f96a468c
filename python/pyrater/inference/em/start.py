"""Where EM starts: user arrays, the majority vote, and the search over diverse starts (``init="search"``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._validation import label_repr
from ...models.kernels import soft_majority_vote
from .steps import Problem

__all__ = ["INITS", "check_init", "search_starts", "search", "SEARCH_MAX_NNZ"]

INITS = ("auto", "search", "majority", "random")
# init="search": short runs of this many iterations from diverse starts; the best few are continued
_SEARCH_ITER = 20
_SEARCH_KEEP = 3
# raters whose own ratings serve as starts (those with the most ratings), weighted votes, random starts
_SEARCH_RATERS = 8
_SEARCH_VOTES = 4
_SEARCH_RANDOM = 4
#: init="auto" searches below this many stored counts (above, one run from the majority vote)
SEARCH_MAX_NNZ = 200_000


def check_init(init: Any, I: int, K: int) -> np.ndarray | str:
    """``init`` checked: a name from :data:`INITS`, or a copy of an (I, K) array with rows normalised."""
    if isinstance(init, str):
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS} or an (I, K) array of class probabilities; got {init!r}")
        return init
    try:
        arr = np.array(init, dtype=float)  # a copy: the user's array is never modified
    except (TypeError, ValueError):
        raise ValueError(f"init must be one of {INITS} or an (I, K) array of class probabilities") from None
    if arr.shape != (I, K):
        raise ValueError(f"init array must have shape (I, K) = ({I}, {K}); got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("init array must hold finite, non-negative class probabilities")
    tot = arr.sum(axis=1)
    if np.any(tot <= 0):
        raise ValueError(f"init array rows {np.flatnonzero(tot <= 0)[:8].tolist()} are all zero")
    arr /= tot[:, None]
    return arr


def search_starts(prob: Problem, rng: np.random.Generator, rater_labels: Any = None) -> list[tuple[str, np.ndarray]]:
    """Diverse initial class probabilities (I', K) for ``init="search"``, each with a name.

    The soft and the hard majority vote; each of the raters with the most
    ratings on its own (the majority vote where it did not rate); votes
    with random Gamma(1) rater weights; sharp Dirichlet(0.3) draws.  Every
    start but the random ones is mixed with 1% uniform so that no class
    starts empty.  ``rater_labels`` (length J) names the raters' starts by
    the user's labels (default: their codes).
    """
    K, J = prob.K, prob.J
    counts = prob.counts
    n_fit = counts.shape[0]
    uniform = np.full((n_fit, K), 1.0 / K)
    soft = soft_majority_vote(counts, K)
    mix = lambda T: 0.99 * T + 0.01 * uniform  # noqa: E731
    starts = [("majority", soft.copy())]
    hard = (soft >= soft.max(axis=1, keepdims=True) - 1e-12).astype(float)
    starts.append(("hard majority", mix(hard / hard.sum(axis=1, keepdims=True))))
    # ratings per rater (weighted by the unit weights)
    per_rater = np.asarray(counts.T @ prob.weight).reshape(J, K).sum(axis=1)
    for j in np.argsort(-per_rater, kind="stable")[: min(_SEARCH_RATERS, J)]:
        own = np.asarray(counts[:, j * K : (j + 1) * K].todense(), dtype=float)
        tot = own.sum(axis=1)
        T = soft.copy()
        rated = tot > 0
        T[rated] = own[rated] / tot[rated, None]
        label = rater_labels[j] if rater_labels is not None else int(j)
        starts.append((f"rater {label_repr(label)}'s ratings", mix(T)))
    sel = np.tile(np.eye(K), (J, 1))
    for v in range(_SEARCH_VOTES):
        w = rng.gamma(1.0, size=J)
        votes = np.asarray(counts @ (sel * np.repeat(w, K)[:, None]), dtype=float)
        tot = votes.sum(axis=1)
        T = soft.copy()
        ok = tot > 0
        T[ok] = votes[ok] / tot[ok, None]
        starts.append((f"weighted vote {v + 1}", mix(T)))
    for v in range(_SEARCH_RANDOM):
        starts.append((f"random {v + 1}", rng.dirichlet(np.full(K, 0.3), size=n_fit)))
    return starts


def _first_best(values: list[float], candidates: list[int], margin: float) -> int:
    """The first of ``candidates`` whose value is within ``margin * max(1, |best|)`` of the best.

    Runs that reach one optimum (or label-switched copies of it) tie up to
    rounding; taking the first in start order keeps the choice the same
    whichever backend computed them.  A value that is NaN counts as ``-inf``;
    when no candidate has a value above ``-inf``, the first is returned.
    """
    finite = {r: (-np.inf if np.isnan(values[r]) else values[r]) for r in candidates}
    top = max(finite.values())
    if top == -np.inf:
        return candidates[0]
    return next(r for r in candidates if finite[r] >= top - margin * max(1.0, abs(top)))


def search(run_from: Any, starts: list[tuple[str, np.ndarray]], max_iter: int, margin: float = 1e-10) -> dict[str, Any]:
    """Short runs from every start, the best :data:`_SEARCH_KEEP` continued to convergence; the best kept."""
    short = min(_SEARCH_ITER, max_iter)
    results = []
    for name, T0 in starts:
        res = run_from(T0, short)
        res["start"] = name
        results.append(res)
    values = [float(res["trace"][-1]) for res in results]
    left = list(range(len(results)))
    order: list[int] = []
    while left and len(order) < _SEARCH_KEEP:
        order.append(_first_best(values, left, margin))
        left.remove(order[-1])
    finals = []
    for r in order:
        res = results[r]
        if not res["converged"] and max_iter > short:
            # _run starts with an M-step from the class probabilities at the short run's estimate:
            # exactly the iteration that would have come next (a family with its own M-step resumes
            # from the short run's parameters, as that iteration would have)
            more = run_from(res["T"], max_iter - short, res.get("numeric_x"))
            more["trace"] = np.concatenate([res["trace"], more["trace"]])
            more["start"] = res["start"]
            res = more
        finals.append(res)
    res = finals[_first_best([float(f["trace"][-1]) for f in finals], list(range(len(finals))), margin)]
    res["start"] = (
        f"search: best of {len(starts)} starts ({short}-iteration runs, {len(finals)} continued): {res['start']}"
    )
    return res
