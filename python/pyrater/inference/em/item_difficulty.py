"""EM for the item-difficulty family (Han, Adiguzel & Carpenter 2024): a generalised EM at crowd scale.

In the spirit of GLAD (Whitehill et al. 2009), which fits per-item difficulty
and per-rater ability by EM with gradient M-steps, this fits every variant of
:class:`pyrater.ItemDifficulty` (1PL, 2PL, 3PL; non-adversarial or not), for
K = 2 categories (rater logits ``logit_spec``, ``logit_sens``) and K >= 3
(GLAD's multi-class form: one ``logit_accuracy[j, k]`` per rater and true
class, wrong ratings spread evenly over the other K - 1 categories):

E-step
    ``P(z_i | y_i)`` from the per-item log joint, in log space
    (:func:`pyrater.inference.em.item_steps.e_step`, one :func:`numpy.bincount`
    per class over the cells' log probabilities).
M-step
    the expected complete-data log posterior is maximised in blocks: ``pi``
    in closed form, then one safeguarded Newton step on every rater ability
    (``logit_spec``, ``logit_sens`` at K = 2; each ``logit_accuracy[j, k]``,
    fitted to the cells weighted for class ``k``, at K >= 3), then one on
    every item's (difficulty, discrimination, guessing), each vectorised over raters / items with
    analytic gradients and Hessians and accepted per unit only where that
    unit's term does not fall (:mod:`pyrater.inference.em.item_steps`), then
    one closed-form step moving every difficulty and rater logit by the same
    amount (the likelihood does not see it; the priors fix it).  The first
    M-step, from the starting class probabilities, runs ``FIRST_CYCLES`` such
    cycles.  The passes over the cells are compiled by numba
    (:mod:`pyrater.inference.em.item_kernel`; ``backend="scipy"`` runs the
    numpy reference).
Acceleration
    SQUAREM cycles (:mod:`pyrater.inference.em.item_squarem`) jump along the
    path of this map, keeping a jump only uphill; plain iterations finish the
    run by the stopping rule of :class:`pyrater.inference.em.convergence.Convergence`.

Every M-step raises (or keeps) the expected complete-data objective, so the
observed-data objective never falls (a generalised EM, Dempster, Laird &
Rubin 1977); ``log_lik_trace`` records it.  One iteration costs a few passes
over the (item, rater, rating) cells: about linear in the number of ratings.

Objectives
----------
``method="map"``
    the log posterior density of the parameters themselves (no Jacobian), every
    constant included: the density Stan's optimiser maximises on
    ``stan/item_difficulty.stan`` (``pyrater.fit(..., method="optimize")``), so
    both find the same modes.
``method="ml"``
    maximum likelihood in ``pi`` and the rater logits, with the item parameters
    kept at their mode under their priors (a penalised likelihood).  Without
    those priors the likelihood has no maximum: an item every rater rated alike
    drives its difficulty to minus infinity (every rater right, whichever its
    class), and its discrimination and guessing have no finite estimate
    either.  The rater logits of a rater who agrees with the classes on every
    rating grow large, as under Dawid–Skene's maximum likelihood.

The non-adversarial constraint (K = 2: ``logit_sens + logit_spec > 0``;
K >= 3: every ``logit_accuracy[j, k] > -log(K - 1)``, accuracy above chance)
is kept strictly: the start is moved onto it and every rater step stops short
of its boundary, so a mode on the boundary is approached from inside, as
Stan's optimiser does on its unconstrained scale.  Under MAP the rater prior
is the normal prior truncated to the constraint, its normalising constant
included (a constant: the objective is Stan's log density).  At K = 2 the
constraint also fixes the labelling (sensitivity plus specificity above 1:
the classes are not swapped): a start (the soft majority vote by default, a
random restart, your own array) whose raters come out adversarial on the
whole (``logit_sens + logit_spec`` below 0 on average over the ratings) is the
mirror image of a non-adversarial one, and its classes are swapped before EM
begins (unless known classes anchor the labels).  At K >= 3 a start is
projected onto the constraint as it is (a relabelling of K classes has no
single mirror image).

References
----------
J. Whitehill, P. Ruvolo, T. Wu, J. Bergsma and J. Movellan (2009). Whose vote
should count more: optimal integration of labels from labelers of unknown
expertise. *NIPS 22*.

J. Han, Y. Adıgüzel and B. Carpenter (2024). Crowdsourcing with difficulty: a
Bayesian rating model for heterogeneous items. arXiv:2405.19521.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Literal

import numpy as np

from ..._quiet import progress_bar
from ..._stacklevel import user_stacklevel
from ..._validation import check_int
from ...data.ratings import RatingData, as_rating_data
from ...fits.item_difficulty import ItemDifficultyEMFit
from ...models.item_difficulty import ItemDifficulty, accuracy_theta, expand_to_items
from ...models.kernels import soft_majority_vote
from .convergence import METHODS, Convergence, EMConvergenceWarning, best_run, check_stopping
from .item_squarem import squarem_cycle
from .item_steps import (
    Cells,
    ItemPriors,
    ItemState,
    cells_of,
    class_log_probs,
    e_step,
    item_step,
    log_prior,
    pi_step,
    rater_step,
    shift_step,
    state_from_classes,
)
from .start import check_init
from .steps import clamp_classes

__all__ = ["em_item_difficulty", "item_priors", "FIRST_CYCLES"]

#: rater/item block cycles of the first M-step (from the starting class probabilities)
FIRST_CYCLES = 5
#: the ``pyrater.em`` arguments this EM takes at their defaults only, with those defaults
_FIXED = {
    "compress": ("auto", False),
    "n_threads": (1,),
    "mode_scale": ("auto", "simplex"),
}


def _load_kernel(required: bool) -> Any:
    """:mod:`pyrater.inference.em.item_kernel`, or None when numba does not import (an error if ``required``)."""
    try:
        from . import item_kernel
    except ImportError:
        if required:
            raise ImportError(
                "backend='numba' needs numba (pip install numba); use backend='scipy' or 'auto'"
            ) from None
        return None
    return item_kernel


def item_priors(model: ItemDifficulty, method: str, J: int, K: int = 2) -> ItemPriors:
    """The priors EM uses for ``method`` ("map": all; "ml": the item parameters' only), K categories.

    Raises
    ------
    ValueError
        MAP with a prior whose density has no mode: a Dirichlet or Beta
        pseudo-count below 1 (unbounded at the edge).
    """
    pri = model.priors(K, J)
    if method == "map":
        if np.any(pri["alpha"] < 1):
            raise ValueError(
                f"method='map' needs alpha >= 1 (got {pri['alpha'].tolist()}): below 1 the Dirichlet density of pi "
                "is unbounded at the edge of the simplex and has no mode"
            )
    if model.guessing and np.any(pri["guessing_prior"] < 1):
        raise ValueError(
            f"EM needs guessing_prior >= 1 (got {pri['guessing_prior'].tolist()}): below 1 the Beta density of the "
            "guessing parameters is unbounded at 0 or 1 and has no mode"
        )
    rater = method == "map"
    binary = K == 2
    return ItemPriors(
        alpha=pri["alpha"] if rater else None,
        sens_prior=pri["sens_prior"] if rater and binary else None,
        spec_prior=pri["spec_prior"] if rater and binary else None,
        difficulty_scale=float(pri["difficulty_scale"]),
        discrimination_scale=float(pri["discrimination_scale"]),
        guessing_prior=pri["guessing_prior"],
        non_adversarial=bool(model.non_adversarial),
        accuracy_prior=np.asarray(pri["accuracy_prior"], dtype=float) if rater and not binary else None,
        n_categories=K,
    )


def _m_step(
    cells: Cells, st: ItemState, T: np.ndarray, weight: np.ndarray, lp: list[np.ndarray], pr: ItemPriors, cycles: int
) -> None:
    """Pi in closed form, then ``cycles`` rater and item Newton blocks (``st`` and ``lp`` updated in place)."""
    st.pi = pi_step(T, weight, pr.alpha)
    wT = T * weight[:, None]
    omega = np.empty((cells.n_categories, cells.item.size))  # (K, nnz): each cell's weight for each class
    for k in range(cells.n_categories):
        omega[k] = cells.count * wT[cells.item, k]
    for _ in range(cycles):
        rater_step(cells, st, omega, lp, pr)
        item_step(cells, st, omega, lp, pr)
        shift_step(st, pr)


def _adversarial_start(cells: Cells, T0: np.ndarray, weight: np.ndarray, model: ItemDifficulty, pr: ItemPriors) -> bool:
    """K = 2: True when the raters' start logits (before projection) have ``logit_sens + logit_spec < 0`` on average."""
    if cells.n_categories != 2:
        return False
    st = state_from_classes(cells, T0, weight, model, pr, project=False)
    n = np.bincount(cells.rater, weights=cells.count, minlength=cells.n_raters)
    return bool(n @ (st.logit_sens + st.logit_spec) < 0)


def _objective(ll: np.ndarray, weight: np.ndarray, st: ItemState, pr: ItemPriors) -> tuple[float, float]:
    """(log-likelihood, objective): the objective adds the log prior EM uses."""
    total = float(weight @ ll)
    return total, total + log_prior(st, pr)


def _run(
    cells: Cells,
    weight: np.ndarray,
    known: np.ndarray | None,
    T0: np.ndarray,
    model: ItemDifficulty,
    pr: ItemPriors,
    tol: float,
    param_tol: float,
    max_iter: int,
    bar: Any,
    accelerate: bool = True,
) -> dict[str, Any]:
    """One EM run from class probabilities ``T0``: the estimate, its class probabilities and the trace.

    With ``accelerate``, SQUAREM cycles (:mod:`pyrater.inference.em.item_squarem`)
    come first, until one changes the objective by at most ``tol`` (relative)
    and no parameter by more than ``param_tol``; plain iterations finish the
    run by the stopping rule.  ``max_iter`` bounds the kept iterations (``n_iter``); the
    rejected SQUAREM jumps are E-steps too (``convergence["e_steps"]``).
    """
    if pr.non_adversarial and known is None and _adversarial_start(cells, T0, weight, model, pr):
        # the labelling convention of the constraint: a start whose raters are adversarial on the whole is
        # the mirror image of one whose raters are not (swap the classes), not a start to press against it
        T0 = np.ascontiguousarray(T0[:, ::-1])
    st = state_from_classes(cells, T0, weight, model, pr)
    K = cells.n_categories
    lp = [class_log_probs(cells, st, k) for k in range(K)]
    _m_step(cells, st, T0, weight, lp, pr, FIRST_CYCLES)

    e_steps = [0]

    def evaluate(x: ItemState, lp_x: list[np.ndarray] | None = None) -> tuple[float, Any]:
        e_steps[0] += 1
        if lp_x is None:
            lp_x = [class_log_probs(cells, x, k) for k in range(K)]
        T_x, ll_x = e_step(cells, lp_x, x.pi, known)
        ll_total_x, obj_x = _objective(ll_x, weight, x, pr)
        if bar is not None:
            bar.update()
        return obj_x, (T_x, ll_total_x, lp_x)

    def em_step(x: ItemState, e: Any) -> tuple[ItemState, float, Any]:
        x_new, lp_new = x.copy(), [lp_k.copy() for lp_k in e[2]]
        _m_step(cells, x_new, e[0], weight, lp_new, pr, 1)
        obj_new, e_new = evaluate(x_new, lp_new)
        return x_new, obj_new, e_new

    def feasible(x: ItemState) -> bool:
        if not pr.non_adversarial:
            return True
        if K == 2:
            return bool(np.all(x.logit_sens + x.logit_spec > 0))
        return bool(np.all(x.ability > pr.lower))

    obj, e = evaluate(st, lp)
    trace: list[float] = [obj]
    n_jumps = n_cycles = 0
    if accelerate:
        while len(trace) + 3 <= max_iter:
            points, jumped = squarem_cycle(st, e, em_step, evaluate, feasible)
            n_cycles += 1
            n_jumps += jumped
            trace += [p[1] for p in points]
            before, flat = obj, st.flat()
            st, obj, e = points[-1]
            moved = float(np.max(np.abs(st.flat() - flat)))
            if obj - before <= tol * max(1.0, abs(obj)) and moved <= param_tol:
                break
    conv = Convergence(tol, param_tol)
    conv.settled(trace, st.pi, st.flat())
    converged = False
    while len(trace) < max_iter:
        st, obj, e = em_step(st, e)
        trace.append(obj)
        if conv.settled(trace, st.pi, st.flat()):
            if conv.want_T and conv.classes_settled(e[0]):
                converged = True
                break
        else:
            conv.reset_classes()
    return {
        "state": st,
        "T": e[0],
        "log_lik": e[1],
        "trace": np.asarray(trace),
        "converged": converged,
        "convergence": {**conv.info(), "squarem_cycles": n_cycles, "squarem_jumps": n_jumps, "e_steps": e_steps[0]},
    }


def em_item_difficulty(
    data: RatingData | Any,
    model: ItemDifficulty,
    method: str = "map",
    known: Any = None,
    init: str | np.ndarray = "auto",
    n_restarts: int = 0,
    tol: float = 1e-8,
    max_iter: int = 5000,
    seed: int | np.random.Generator | None = None,
    data_format: Literal["long", "wide", "grouped"] = "long",
    progress: bool = False,
    backend: str = "auto",
    acceleration: str = "auto",
    **fixed: Any,
) -> ItemDifficultyEMFit:
    """Fit an item-difficulty model by generalised EM (:func:`pyrater.em` calls this for the family).

    Parameters
    ----------
    data : RatingData or DataFrame
        Ratings in K >= 2 categories; grouped data is expanded to one unit per
        item (every item has its own parameters), as the Stan methods do.
    model : ItemDifficulty
    method : {"map", "ml"}
        The posterior mode (Stan's ``optimize`` density), or maximum
        likelihood in pi and the raters with the item parameters at their
        penalised mode (see the module notes: the plain likelihood has no
        maximum in the item parameters).
    known : dict or Series, optional
        ``{item label: category label}``; those items' class probabilities
        are clamped.  Not with grouped data (the items of a pattern have no
        labels of their own).
    init : {"auto", "majority", "random"} or array (I, K)
        Starting class probabilities (``"auto"``: the soft majority vote;
        an array has one row per item of the expanded data).
    n_restarts : int
        Extra runs from Dirichlet(1, ..., 1) class probabilities; the best final
        objective is kept.
    tol, param_tol, max_iter
        The stopping rule of :func:`pyrater.em` (objective, then every
        parameter, then the class probabilities).
    seed : int or Generator, optional
        For the random restarts.
    data_format : {"long", "wide", "grouped"}
        Format of a DataFrame ``data``.
    progress : bool
        A progress bar over the iterations.
    backend : {"auto", "numba", "scipy"}
        The passes over the cells compiled by numba
        (:mod:`pyrater.inference.em.item_kernel`; ``"auto"``, when numba
        imports), or in numpy (``"scipy"``, the reference): the same
        iterations up to rounding.
    acceleration : {"auto", "squarem", "none"}
        SQUAREM cycles first (``"auto"``, ``"squarem"``;
        :mod:`pyrater.inference.em.item_squarem`), then plain iterations to
        the stopping rule; or plain EM throughout (``"none"``).  The same
        fixed point.
    **fixed
        ``compress``, ``n_threads``, ``mode_scale`` and ``param_tol`` of
        :func:`pyrater.em`; the first three only at values that mean plain
        in-memory EM (a clear ``ValueError`` otherwise).

    Returns
    -------
    ItemDifficultyEMFit
        ``model_params`` holds ``logit_sens``, ``logit_spec`` (J,) at K = 2,
        ``logit_accuracy`` (J, K) at K >= 3, and ``difficulty`` (and
        ``discrimination``, ``guessing`` where the variant has them) (I,);
        ``theta`` (J, K, K) the error matrices on an item of difficulty 0,
        discrimination 1 and no guessing.
    """
    t0 = time.perf_counter()
    if getattr(model, "item_effects", "per_item") != "per_item":
        raise ValueError(
            f"EM fits the item-difficulty model with per-item parameters only; item_effects={model.item_effects!r} "
            "(the item parameters integrated out by quadrature) runs in Stan: method='mcmc', 'optimize' or "
            "'pathfinder'"
        )
    param_tol = fixed.pop("param_tol", 1e-6)
    for name, value in fixed.items():
        if name not in _FIXED:
            raise TypeError(f"em_item_difficulty() got an unexpected keyword argument {name!r}")
        if not any(value is v or (type(value) is type(v) and value == v) for v in _FIXED[name]):
            raise ValueError(
                f"{name}={value!r} is not available for the {model.title} model, fitted by its own numpy EM "
                f"(per-item parameters: no pattern compression, one thread, the mode on the parameters' own scale); "
                f"leave {name} at {_FIXED[name][0]!r}"
            )
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if backend not in ("auto", "numba", "scipy"):
        raise ValueError(f"backend must be one of ('auto', 'numba', 'scipy'), got {backend!r}")
    kernel = None if backend == "scipy" else _load_kernel(backend == "numba")
    if acceleration not in ("auto", "squarem", "none"):
        raise ValueError(f"acceleration must be 'auto', 'squarem' or 'none', got {acceleration!r}")
    check_int("n_restarts", n_restarts, 0)
    max_iter, tol, param_tol = check_stopping(max_iter, tol, param_tol)
    rng = np.random.default_rng(seed)
    data = as_rating_data(data, data_format)
    K = int(data.n_categories)
    model.priors(K, data.n_raters)  # the family's own errors for K and its priors, before any work
    if data.n_ratings == 0 or data.weight.sum() <= 0:
        raise ValueError("the data hold no rated items (all tallies are zero)")
    if data.is_grouped and known is not None:
        raise ValueError(
            f"the {model.name} model expands grouped data to items (per-item parameters); known classes cannot be "
            "given per rating pattern: pass the data in long format with item labels"
        )
    items = model.prepare_data(data)
    if items is data:
        items = expand_to_items(data)
    I, J = items.n_units, items.n_raters
    pr = item_priors(model, method, J, K)
    if isinstance(init, str) and init == "search":
        raise ValueError(
            f"init='search' is not available for the {model.title} model; use 'auto', 'majority', 'random' "
            "or an (I, K) array, with n_restarts for more starts"
        )
    init_checked = check_init(init, I, K)
    known_codes = items.known_codes(known)
    weight = np.asarray(items.weight, dtype=float)
    cells = cells_of(items.counts, kernel, K)
    setup = time.perf_counter() - t0

    runs: list[dict[str, Any]] = []
    loop_times: list[float] = []
    bar = progress_bar(progress, None, "EM", unit="iteration")
    for r in range(1 + n_restarts):
        t1 = time.perf_counter()
        which = init_checked if r == 0 else "random"
        if isinstance(which, np.ndarray):
            T0, name = which.copy(), "user array"
        elif which in ("auto", "majority"):
            T0, name = soft_majority_vote(items.counts, K), "majority"
        else:
            T0, name = rng.dirichlet(np.ones(K), size=I), "random"
        T0 = clamp_classes(T0, known_codes)
        res = _run(cells, weight, known_codes, T0, model, pr, tol, param_tol, max_iter, bar, acceleration != "none")
        res["start"] = name
        runs.append(res)
        loop_times.append(time.perf_counter() - t1)
    bar.close()
    best, finals, convergence, obj_change = best_run(runs, tol, param_tol)
    res = runs[best]
    trace = res["trace"]
    if not res["converged"]:
        warnings.warn(
            f"EM did not converge in max_iter={max_iter} iterations (last relative objective change "
            f"{obj_change:.3g}, tol={tol:g}; parameter change {convergence['param_change']:.3g}, "
            f"param_tol={param_tol:g}); increase max_iter",
            EMConvergenceWarning,
            stacklevel=user_stacklevel(),
        )
    st: ItemState = res["state"]
    theta = _theta(st)
    # ML: a rater without ratings has no estimate (its logits stay at the start), as Dawid-Skene's empty rows
    empty = np.zeros((J, K), dtype=bool)
    if method == "ml":
        empty[np.bincount(cells.rater, weights=cells.count, minlength=J) <= 0] = True
    all_priors = model.priors(K, J)
    used = all_priors if method == "map" else {k: all_priors[k] for k in _ITEM_PRIORS}
    return ItemDifficultyEMFit(
        data=items,
        model=model,
        method=f"em_{method}",
        pi=st.pi,
        theta=theta,
        class_probs=res["T"],
        log_lik=float(res["log_lik"]),
        log_lik_trace=trace,
        n_iter=int(trace.size),
        converged=bool(res["converged"]),
        log_posterior=float(trace[-1]) if method == "map" else None,
        objective="log_posterior" if method == "map" else "penalised_log_likelihood",
        priors=used,
        empty_rows=empty,
        restart_objectives=finals,
        best_run=best,
        n_fitted_units=I,
        compressed=False,
        timings={"setup": setup, "loop": loop_times},
        backend="scipy" if kernel is None else "numba",
        convergence=convergence,
        start=res["start"],
        known=known_codes,
        model_params=st.named(),
        mode_scale="simplex" if method == "map" else None,
    )


def _theta(st: ItemState) -> np.ndarray:
    """The rater error matrices (J, K, K) on an item of difficulty 0, discrimination 1, no guessing.

    ``theta[j, k, k] = inv_logit(a[j, k])`` and ``theta[j, k, l] = (1 -
    inv_logit(a[j, k])) / (K - 1)``; at K = 2 rows (specificity, sensitivity).
    """
    K = st.n_categories
    if K == 2:
        se, sp_ = 1.0 / (1.0 + np.exp(-st.logit_sens)), 1.0 / (1.0 + np.exp(-st.logit_spec))
        return np.stack([np.stack([sp_, 1 - sp_], -1), np.stack([1 - se, se], -1)], axis=1)
    return accuracy_theta(st.ability.T)


#: the priors maximum likelihood keeps (the item parameters')
_ITEM_PRIORS = ("difficulty_scale", "discrimination_scale", "guessing_prior")
