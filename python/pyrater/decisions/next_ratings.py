"""Which items should be rated again, and by whom?  Active selection by expected information gain.

:func:`next_ratings` ranks (item, rater) pairs by how much a new rating is
expected to reduce the uncertainty about the item's true class under a
fitted model, and picks a batch greedily with fantasised updates, so that a
batch does not spend its budget on the same few items.
"""

from __future__ import annotations

import heapq
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from . import _information as info
from .agreement import _seed_generator, fit_parameters

__all__ = ["next_ratings"]

#: upper bound on n_items * n_raters * K * K doubles held by one block of the first pass
_BLOCK_CELLS = 2**22
#: weight of the other gain (information or error reduction) in the score, as a tie-breaker
TIE = 1e-6
#: pairs scoring at most this are not worth asking
MIN_SCORE = 1e-12


def _codes(index: pd.Index, labels: Sequence[Any], what: str) -> np.ndarray:
    """Codes of ``labels`` in ``index`` (exact match, then as strings); error naming unknown ones."""
    labels = list(labels)
    codes = index.get_indexer(labels)
    if (codes < 0).any():
        as_str = pd.Index([str(x) for x in index])
        retry = as_str.get_indexer([str(x) for x in labels])
        codes = np.where(codes < 0, retry, codes)
    if (codes < 0).any():
        bad = [lab for lab, c in zip(labels, codes) if c < 0]
        raise ValueError(f"{what}: {bad[:5]!r}{' ...' if len(bad) > 5 else ''} not found in the fit's data")
    return codes.astype(np.int64)


def _per_rater(value: Any, rater_labels: pd.Index, what: str) -> np.ndarray | None:
    """A per-rater number from a scalar, dict or Series (missing raters: error)."""
    if value is None:
        return None
    J = len(rater_labels)
    if isinstance(value, (dict, pd.Series)):
        series = pd.Series(value)
        codes = _codes(rater_labels, series.index, what)
        out = np.full(J, np.nan)
        out[codes] = series.to_numpy(dtype=float)
    else:
        out = np.full(J, float(value))
    return out


def next_ratings(
    fit: Any,
    budget: int | float,
    raters: Sequence[Any] | None = None,
    *,
    items: Sequence[Any] | None = None,
    candidates: pd.DataFrame | None = None,
    allow_repeats: bool = False,
    max_per_item: int | None = None,
    max_per_rater: int | dict | pd.Series | None = None,
    cost: dict | pd.Series | None = None,
    objective: Literal["information", "error"] = "information",
    rater_uncertainty: Literal["auto", "draws", "dirichlet", "none"] = "auto",
    n_draws: int = 32,
    max_outcomes: int = 2048,
    seed: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """Choose the next ratings to collect: a batch of (item, rater) pairs by expected information gain.

    For item ``i`` and rater ``j`` the value of a new rating is the expected
    reduction of the entropy of the item's true class, the mutual
    information ``I(z_i; y_ij)`` between class and rating under the fitted
    model.  It is large when the item is uncertain *and* the rater's error
    matrix separates the classes the item is torn between, so the choice of
    rater matters as much as the choice of item.  The gain is
    Rao-Blackwellised over ``n_draws`` draws of the parameters (the fit's
    posterior draws, or for point-estimate fits draws from each rater's
    conjugate posterior, see ``rater_uncertainty``): the joint of class and
    rating is averaged over the draws' conditional class probabilities and
    error matrices, so that uncertainty about the raters counts too and a
    rater seen a handful of times is not trusted like one seen thousands of
    times.

    The batch is chosen greedily: each step takes the pair with the largest
    gain (per unit of cost), then recomputes the gains of that item's other
    raters as conditional information ``I(z_i; y_ij | planned ratings)``
    with the planned ratings' outcomes fantasised (enumerated, or sampled
    when there are more than ``max_outcomes`` outcome combinations).  Gains
    shrink as an item collects planned ratings, so a batch spreads over the
    items instead of repeating the same one.  Items' gains are treated as
    independent and the raters' parameters as fixed within a batch: refit
    after the batch is collected.

    Parameters
    ----------
    fit : pyrater fit
        Any fit with ``class_probabilities()`` and an error matrix per rater
        (``point_estimate("theta")``, dims rater x category x rating, or
        ``posterior_samples("theta")`` for fits with draws).  Item-level
        data only (expand grouped data to items first).
    budget : int or float
        Number of ratings to choose (with ``cost``: total cost to spend).
    raters : sequence, optional
        Raters who may be asked (default: every rater of the fit).
    items : sequence, optional
        Items that may be rated (default: every item).
    candidates : DataFrame, optional
        Explicit allowed pairs, columns ``item`` and ``rater`` (e.g. the
        ratings that can still be requested); combined with ``raters`` and
        ``items``.
    allow_repeats : bool
        Allow asking a rater about an item they already rated (default
        False; the model treats repeats as independent, which real repeats
        rarely are).
    max_per_item : int, optional
        At most this many new ratings per item in the batch.
    max_per_rater : int, dict or Series, optional
        Workload cap per rater in the batch.
    cost : dict or Series, optional
        Cost of one rating per rater (e.g. experts cost more); the greedy
        choice then maximises gain per unit cost and ``budget`` is a cost.
    objective : {"information", "error"}
        What a rating is worth.  ``"information"`` (default): the expected
        information gain about the item's class.  ``"error"``: the expected
        reduction of the item's misclassification probability,
        ``E[max_k P(z_i = k | y)] - max_k P(z_i = k)``, the value of the
        rating when the loss is the share of items misclassified (accuracy).
        It is myopic: a single rating that cannot change an item's most
        probable class is worth 0 however uncertain the item, and such pairs
        are then ranked by information gain.  Information gain rewards
        learning about every class, so it also improves calibration and the
        estimates of the raters; for accuracy alone with one kind of rater
        the error objective chooses like "least confident" items.
    rater_uncertainty : {"auto", "draws", "dirichlet", "none"}
        How uncertainty about the raters' error matrices enters the gains.
        ``"draws"``: the fit's posterior draws (fits with draws).
        ``"dirichlet"``: for point-estimate fits, ``n_draws`` error matrices
        drawn from each rater's conjugate posterior given the fit's class
        probabilities, ``Dirichlet(1 + expected confusion counts)``
        (:func:`dirichlet_rater_draws`), so that a rater with few ratings is
        not trusted as if their estimated matrix were exact.  ``"none"``:
        the point estimate (posterior means for fits with draws) as if it
        were exact.  ``"auto"`` (default): ``"draws"`` when the fit has
        draws, else ``"dirichlet"``.
    n_draws : int
        Draws to average over (default 32): a random subset of the fit's
        posterior draws, or the number of Dirichlet draws.
    max_outcomes : int
        Largest number of fantasised outcome combinations enumerated per item.
    seed : int or numpy Generator, optional
        For the draws and sampled outcomes (None: fixed seed 0).

    Returns
    -------
    DataFrame
        One row per chosen rating in the order chosen: ``rank`` (1 = first),
        ``item``, ``rater``, ``info_gain`` (expected information gain in
        bits) and ``error_reduction`` (expected fall of the misclassification
        probability), both given the ratings chosen before it for the same
        item; ``item_entropy`` (bits) and ``item_error`` (``1 - max_k
        P(z_i = k)``) of the item now; ``cost``; ``cumulative_gain`` (running
        sum of the objective's gain).  ``df.attrs`` records the objective,
        the draws used and how many items were scored.

    Notes
    -----
    Work: the first gains of every (item, rater) pair cost
    ``O(I * J * K^2 * S)`` in blocks of matrix products, but items whose
    class entropy (or error probability: an upper bound on any gain) is
    below the best gains already found are skipped exactly (without
    ``max_per_rater`` and with equal costs), so a small batch out of 10^5
    items looks at few of them.  The greedy steps then cost
    ``O(budget * J * K^(m+2) * S)`` with ``m`` ratings planned per item.
    With ``rater_uncertainty="none"`` the class probabilities are the fit's
    own (``class_probabilities()``); otherwise the per-draw posteriors are
    pyrater's Dawid-Skene kernel ``log pi_k + counts @ log theta`` for each
    draw, so for a model whose class posterior is not of that form only the
    fit's effective theta enters.

    References
    ----------
    Lindley, D. V. (1956). On a measure of the information provided by an
    experiment. *Ann. Math. Statist.* 27, 986-1005.
    Krause, A. & Guestrin, C. (2005). Near-optimal nonmyopic value of
    information in graphical models. *UAI*.
    Houlsby, N., Huszar, F., Ghahramani, Z. & Lengyel, M. (2011). Bayesian
    active learning for classification and preference learning. arXiv:1112.5745.

    Examples
    --------
    >>> import pyrater
    >>> sim = pyrater.simulate("dawid_skene", 300, 6, n_categories=3, raters_per_item=2, seed=1)
    >>> fit = pyrater.em(sim.data, method="map")
    >>> plan = pyrater.next_ratings(fit, budget=50)
    >>> len(plan), list(plan.columns[:4])
    (50, ['rank', 'item', 'rater', 'info_gain'])
    """
    from .._validation import check_choice, check_int, check_number  # internal: the package's argument rules

    # ---- arguments, before any work
    if not hasattr(fit, "class_probabilities") or not hasattr(fit, "data"):
        raise TypeError(f"fit must be a pyrater fit (with class_probabilities and data), got {type(fit).__name__}")
    d = fit.data
    if d.is_grouped:
        raise ValueError(
            "next_ratings needs item-level data, but the fit's data are grouped rating patterns; "
            "refit on the expanded items: pyrater.RatingData.from_long(data.to_long())"
        )
    budget = check_number("budget", budget, minimum=0, strict_minimum=True)
    if cost is None and budget != int(budget):
        raise ValueError(f"budget must be a whole number of ratings without cost, got {budget!r}")
    check_choice("objective", objective, ("information", "error"))
    check_choice("rater_uncertainty", rater_uncertainty, ("auto", "draws", "dirichlet", "none"))
    n_draws = check_int("n_draws", n_draws, minimum=1)
    max_outcomes = check_int("max_outcomes", max_outcomes, minimum=1)
    if max_per_item is not None:
        max_per_item = check_int("max_per_item", max_per_item, minimum=1)
    if not isinstance(allow_repeats, (bool, np.bool_)):
        raise ValueError(f"allow_repeats must be True or False, got {allow_repeats!r}")
    I, J, K = d.n_units, d.n_raters, d.n_categories
    rater_ok = np.ones(J, dtype=bool)
    if raters is not None:
        raters = [raters] if isinstance(raters, str) else list(raters)
        if not raters:
            raise ValueError("raters is empty")
        rater_ok[:] = False
        rater_ok[_codes(d.rater_labels, raters, "raters")] = True
    item_ok = np.ones(I, dtype=bool)
    if items is not None:
        items = list(items)
        item_ok[:] = False
        item_ok[_codes(d.unit_labels, items, "items")] = True
    cost_j = _per_rater(cost, d.rater_labels, "cost")
    if cost_j is None:
        cost_j = np.ones(J)
    else:
        bad = rater_ok & ~(np.isfinite(cost_j) & (cost_j > 0))
        if bad.any():
            raise ValueError(
                "cost must be a positive number for every rater that may be asked; "
                f"missing or invalid for {list(d.rater_labels[bad])[:5]}"
            )
    cap_j: np.ndarray | None = None
    if max_per_rater is not None:
        caps = _per_rater(max_per_rater, d.rater_labels, "max_per_rater")
        caps = np.where(np.isnan(caps), np.inf, caps) if caps is not None else np.full(J, np.inf)
        cap_j = caps
        if np.any(caps < 0) or np.any((caps != np.floor(caps)) & np.isfinite(caps)):
            raise ValueError(f"max_per_rater must hold non-negative whole numbers, got {max_per_rater!r}")
    pair_ok = None  # sparse (I, J) of explicitly allowed pairs
    if candidates is not None:
        if not isinstance(candidates, pd.DataFrame) or not {"item", "rater"} <= set(candidates.columns):
            raise ValueError("candidates must be a DataFrame with columns 'item' and 'rater'")
        import scipy.sparse as sp

        ci = _codes(d.unit_labels, candidates["item"], "candidates item")
        cj = _codes(d.rater_labels, candidates["rater"], "candidates rater")
        pair_ok = sp.csr_matrix((np.ones(ci.size, dtype=bool), (ci, cj)), shape=(I, J))
        pair_ok.sum_duplicates()
    rng = _seed_generator(seed)

    # ---- parameters and per-draw class posteriors
    pi_s, theta_s, has_draws = fit_parameters(fit, n_draws if n_draws > 1 else 1, rng)
    mode = rater_uncertainty
    if mode == "auto":
        mode = "draws" if has_draws else "dirichlet"
    if mode == "draws" and not has_draws:
        raise ValueError(
            f"rater_uncertainty='draws' needs a fit with posterior draws; this {getattr(fit, 'method', '')} fit "
            "holds a point estimate (use 'dirichlet' or 'none')"
        )
    if mode in ("dirichlet", "none") and has_draws:
        pi_s, theta_s = pi_s.mean(axis=0, keepdims=True), theta_s.mean(axis=0, keepdims=True)
    if mode == "none":
        qbar = np.asarray(fit.class_probabilities(), dtype=float)
        if qbar.shape != (I, K):
            raise ValueError(f"the fit's class_probabilities() must have shape ({I}, {K}), got {qbar.shape}")

        def posteriors(rows: np.ndarray) -> np.ndarray:  # (n, 1, K)
            return qbar[rows][:, None, :]
    else:
        if mode == "dirichlet":
            q_fit = np.asarray(fit.class_probabilities(), dtype=float)
            theta_s = dirichlet_rater_draws(d.counts, q_fit, theta_s[0], n_draws, rng)
            pi_s = np.broadcast_to(pi_s[0], (n_draws, K)).copy()
        known = getattr(fit, "known", None)
        with np.errstate(divide="ignore"):
            log_pi, log_theta = np.log(pi_s), np.log(theta_s)
        draws = DrawPosteriors(d.counts, log_pi, log_theta, known)

        def posteriors(rows: np.ndarray) -> np.ndarray:  # (n, S, K)
            return draws(rows)

        qbar = np.zeros((I, K))
        for start in range(0, I, 65536):
            rows = np.arange(start, min(I, start + 65536))
            qbar[rows] = posteriors(rows).mean(axis=1)
    S = theta_s.shape[0]
    h_item = info.entropy(qbar)  # nats, (I,)

    # ---- which pairs are allowed
    rated = d.counts.tocsr()
    rater_of = np.flatnonzero(rater_ok)

    def allowed(rows: np.ndarray) -> np.ndarray:
        """(n, J_allowed) mask of candidate pairs for these items."""
        mask = np.broadcast_to(item_ok[rows][:, None], (rows.size, rater_of.size)).copy()
        if not allow_repeats:
            sub = rated[rows]
            per_rater = np.asarray((sub @ _rater_sum(J, K)).todense()) > 0  # (n, J)
            mask &= ~per_rater[:, rater_of]
        if pair_ok is not None:
            mask &= pair_ok[rows][:, rater_of].toarray()
        if cap_j is not None:
            mask &= (cap_j[rater_of] > 0)[None, :]
        return mask

    # ---- first pass: each item's best pair, skipping items that cannot make the batch
    # score = objective gain per cost, plus the other gain (per cost) times TIE as a tie-breaker
    # (so that the error objective still ranks pairs whose single rating cannot flip the top class)
    primary_is_info = objective == "information"
    item_err = 1.0 - qbar.max(axis=1)
    bound = (h_item if primary_is_info else item_err) + TIE * (np.log(K) if not primary_is_info else 1.0)
    n_pick_max = int(np.floor(budget / cost_j[rater_ok].min()))
    exact_pruning = cap_j is None and np.allclose(cost_j[rater_ok], cost_j[rater_ok][0])
    useful = item_ok & (h_item > 0)
    order = np.argsort(-bound, kind="stable")
    order = order[useful[order]]
    theta_allowed = np.ascontiguousarray(theta_s[:, rater_of])
    block = max(1, int(_BLOCK_CELLS // max(1, rater_of.size * K * K * S)))
    top: list[float] = []  # min-heap of the n_pick_max best per-item scores so far
    q_store: dict[int, np.ndarray] = {}
    heap: list[tuple[float, int, int, int, float, float]] = []  # (-score, item, version, rater, info, err)

    def score(mi: np.ndarray, err: np.ndarray, c: np.ndarray) -> np.ndarray:
        main, other = (mi, err) if primary_is_info else (err, mi)
        return (main + TIE * other) / c

    for start in range(0, order.size, block):
        rows = order[start : start + block]
        if exact_pruning and len(top) >= n_pick_max and bound[rows[0]] / cost_j[rater_ok][0] < top[0]:
            break  # the bound of every later item is below the batch's worst pick
        q = posteriors(rows)
        mi, err = info.initial_gains(q, theta_allowed, both=True)
        mask = allowed(rows)
        sc = np.where(mask, score(mi, err, cost_j[rater_of][None, :]), -np.inf)
        jbest = np.argmax(sc, axis=1)
        sbest = sc[np.arange(rows.size), jbest]
        for loc, i in enumerate(rows):
            if not np.isfinite(sbest[loc]) or sbest[loc] <= MIN_SCORE:
                continue
            q_store[int(i)] = q[loc]
            jb = jbest[loc]
            heap.append((-float(sbest[loc]), int(i), 0, int(rater_of[jb]), float(mi[loc, jb]), float(err[loc, jb])))
            if len(top) < n_pick_max:
                heapq.heappush(top, float(sbest[loc]))
            elif sbest[loc] > top[0]:
                heapq.heapreplace(top, float(sbest[loc]))
    heapq.heapify(heap)

    # ---- greedy batch with fantasised updates
    pending: dict[int, list[int]] = {}
    version: dict[int, int] = {}
    used = np.zeros(J)
    spent = 0.0
    picks: list[tuple[int, int, float, float, float]] = []
    mask_cache: dict[int, np.ndarray] = {}

    rated_indptr, rated_indices = rated.indptr, rated.indices
    allowed_rater = np.zeros(J, dtype=bool)
    allowed_rater[rater_of] = True
    if cap_j is not None:
        allowed_rater &= cap_j > 0

    def candidates_of(i: int) -> np.ndarray:
        """Rater codes that may still rate item ``i`` in this batch."""
        if i not in mask_cache:
            ok = allowed_rater.copy()
            if not allow_repeats:
                ok[rated_indices[rated_indptr[i] : rated_indptr[i + 1]] // K] = False
            if pair_ok is not None:
                row = np.zeros(J, dtype=bool)
                row[pair_ok.indices[pair_ok.indptr[i] : pair_ok.indptr[i + 1]]] = True
                ok &= row
            mask_cache[i] = np.flatnonzero(ok)
        c = mask_cache[i]
        plan = pending.get(i)
        if plan:
            c = c[~np.isin(c, plan)]
        if cap_j is not None:
            c = c[used[c] < cap_j[c]]
        return c[cost_j[c] <= budget - spent + 1e-9]

    def best_for(i: int) -> tuple[float, int, float, float]:
        c = candidates_of(i)
        if c.size == 0:
            return -np.inf, -1, 0.0, 0.0
        plan = pending.get(i, [])
        mi, err = info.conditional_gains(q_store[i], theta_s[:, plan], theta_s[:, c], max_outcomes, rng, both=True)
        sc = score(mi, err, cost_j[c])
        b = int(np.argmax(sc))
        return float(sc[b]), int(c[b]), float(mi[b]), float(err[b])

    def still_open(j: int) -> bool:
        if cap_j is not None and used[j] >= cap_j[j]:
            return False
        return cost_j[j] <= budget - spent + 1e-9

    while heap and spent < budget - 1e-9:
        _, i, ver, j, mi_j, err_j = heapq.heappop(heap)
        if version.get(i, 0) != ver:
            continue
        if not still_open(j):
            # its best rater is full or too dear now: the item's next best, back into the queue
            s_new, j, mi_j, err_j = best_for(i)
            version[i] = ver + 1
            if j >= 0 and s_new > MIN_SCORE:
                heapq.heappush(heap, (-s_new, i, ver + 1, j, mi_j, err_j))
            continue
        picks.append((i, j, mi_j, err_j, float(cost_j[j])))
        pending.setdefault(i, []).append(j)
        used[j] += 1
        spent += cost_j[j]
        version[i] = ver + 1
        if max_per_item is not None and len(pending[i]) >= max_per_item:
            continue
        s_next, j2, mi2, err2 = best_for(i)
        if j2 >= 0 and s_next > MIN_SCORE:
            heapq.heappush(heap, (-s_next, i, ver + 1, j2, mi2, err2))
    if cost is None and len(picks) < int(budget):
        hint = (
            "; a rater is not asked again about an item they rated (allow_repeats=True allows it), "
            "so a complete design leaves no pair to ask"
            if not allow_repeats
            else ""
        )
        warnings.warn(
            f"only {len(picks)} of the {int(budget)} requested ratings have a positive expected gain "
            f"among the allowed (item, rater) pairs{hint}",
            RuntimeWarning,
            stacklevel=2,
        )
    it = np.array([p[0] for p in picks], dtype=np.int64)
    jt = np.array([p[1] for p in picks], dtype=np.int64)
    out = pd.DataFrame(
        {
            "rank": np.arange(1, len(picks) + 1),
            "item": d.unit_labels[it] if len(picks) else pd.Index([], dtype=object),
            "rater": d.rater_labels[jt] if len(picks) else pd.Index([], dtype=object),
            "info_gain": np.array([p[2] for p in picks]) / info.LN2,
            "error_reduction": np.array([p[3] for p in picks]),
            "item_entropy": h_item[it] / info.LN2,
            "item_error": item_err[it],
            "cost": np.array([p[4] for p in picks]),
        }
    )
    out["cumulative_gain"] = out["info_gain" if primary_is_info else "error_reduction"].cumsum()
    out.attrs["objective"] = objective
    out.attrs["rater_uncertainty"] = mode
    out.attrs["n_draws"] = int(S) if mode != "none" else 0
    out.attrs["items_scored"] = len(q_store)
    return out


def dirichlet_rater_draws(
    counts: Any, q: np.ndarray, theta_hat: np.ndarray, n_draws: int, rng: np.random.Generator
) -> np.ndarray:
    """Draws of every rater's error matrix from its conjugate posterior given the fit's class probabilities.

    Row ``k`` of rater ``j`` is drawn from ``Dirichlet(1 + n[j, k, :])`` with
    ``n[j, k, l] = sum_i q[i, k] * counts[i, j*K + l]`` the expected number
    of items of true class ``k`` that rater ``j`` put in category ``l``: the
    update the Gibbs sampler makes given the classes, with the classes
    replaced by their probabilities.  A rater with a handful of ratings thus
    gets a wide distribution and one with thousands a narrow one.  When the
    fit gives every rater the same error matrix (the homogeneous model) the
    counts are pooled and every draw shares one matrix.

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
    q : array, shape (I, K)
    theta_hat : array, shape (J, K, K)
        The fit's estimate (only its structure is used: shared or per rater).
    n_draws : int
    rng : numpy Generator

    Returns
    -------
    array, shape (n_draws, J, K, K)
    """
    J, K, _ = theta_hat.shape
    n = np.asarray(counts.T @ q).reshape(J, K, K).transpose(0, 2, 1)  # (J, k true, l rated)
    shared = J > 1 and np.allclose(theta_hat, theta_hat[:1], rtol=0, atol=1e-12)
    if shared:
        a = np.broadcast_to(1.0 + n.sum(axis=0), (n_draws, K, K))
        g = rng.gamma(a)
        return np.broadcast_to((g / g.sum(axis=-1, keepdims=True))[:, None], (n_draws, J, K, K)).copy()
    g = rng.gamma(np.broadcast_to(1.0 + n, (n_draws, J, K, K)))
    return g / g.sum(axis=-1, keepdims=True)


class DrawPosteriors:
    """Per-draw class posteriors ``P(z_i = k | y_i, pi_s, theta_s)`` of chosen rows, all draws at once.

    The DS log joint ``log pi_k + counts @ LT`` (:mod:`pyrater.models.kernels`)
    for every draw in one sparse product, against the draws' ``(J*K, K)``
    matrices side by side.

    Parameters
    ----------
    counts : sparse matrix, shape (I, J*K)
    log_pi : array, shape (S, K)
    log_theta : array, shape (S, J, K, K)
    known : int array, shape (I,), optional
        Known class codes (-1 = unknown): their posteriors are point masses.
    """

    def __init__(self, counts, log_pi: np.ndarray, log_theta: np.ndarray, known: np.ndarray | None = None) -> None:
        from ..models.kernels import log_theta_matrix  # internal: the kernel's layout of log theta

        self.counts = counts.tocsr()
        self.log_pi = np.asarray(log_pi, dtype=float)
        self.K = self.log_pi.shape[1]
        self.LT = np.concatenate([log_theta_matrix(lt) for lt in np.asarray(log_theta, dtype=float)], axis=1)
        self.known = None if known is None else np.asarray(known)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """Posteriors of units ``rows``, shape (len(rows), S, K)."""
        K = self.K
        lj = np.asarray(self.counts[rows] @ self.LT).reshape(rows.size, -1, K) + self.log_pi[None]
        if self.known is not None:
            kn = self.known[rows]
            hit = np.flatnonzero(kn >= 0)
            if hit.size:
                keep = np.zeros((hit.size, K), dtype=bool)
                keep[np.arange(hit.size), kn[hit]] = True
                lj[hit] = np.where(keep[:, None, :], lj[hit], -np.inf)
        lj -= lj.max(axis=2, keepdims=True)
        np.exp(lj, out=lj)
        lj /= lj.sum(axis=2, keepdims=True)
        return lj


_RATER_SUM: dict[tuple[int, int], Any] = {}


def _rater_sum(J: int, K: int):
    """Sparse (J*K, J) matrix summing a count row's K ratings of each rater."""
    key = (J, K)
    if key not in _RATER_SUM:
        import scipy.sparse as sp

        _RATER_SUM.clear()
        _RATER_SUM[key] = sp.csr_matrix(
            (np.ones(J * K), (np.arange(J * K), np.repeat(np.arange(J), K))), shape=(J * K, J)
        )
    return _RATER_SUM[key]
