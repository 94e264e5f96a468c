"""K-fold cross-validation over items: the expected log predictive density of a point fit.

A point fit (EM, Stan's optimiser) has no posterior draws, so PSIS-LOO does
not apply.  :func:`kfold` estimates the same quantity, the expected log
predictive density of the ratings of a new item, by K-fold cross-validation
with items as the unit (as R's ``loo::kfold``):

1. the items are shuffled (``seed``) and split into ``k`` folds of nearly
   equal size (the items of a rating pattern of grouped data are split like
   any others);
2. for each fold the fit is repeated, same model, method and settings, on
   the other folds' items (the held-out items get weight 0, so raters, labels
   and categories stay as they are);
3. each held-out item's ``elpd_i = log p(y_i | estimate without its fold)``,
   summed over the item's classes (``log p(y_i, z_i)`` for an item whose
   class is known).  Under the item-difficulty family a new item's own
   parameters are unknown: its predictive density integrates them out over
   their prior (the quadrature of :mod:`pyrater.models.item_marginal`), at
   the fold's estimate of ``pi`` and the rater parameters.

``elpd`` is the sum of ``elpd_i``, ``se = sqrt(N var(elpd_i))`` and
``p = lpd - elpd``, with ``lpd`` the log predictive density of every item at
the full-data estimate (R's ``p_kfold``).  The estimate is on the scale of
PSIS-LOO's ``elpd_loo``, so :func:`pyrater.compare` ranks point fits and
draws-based fits in one table; ``k`` refits cost ``k`` times the fit.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from .._quiet import progress_bar
from .._stacklevel import user_stacklevel
from .._validation import check_int, check_seed
from ..data.ratings import RatingData
from ..fits.base import Fit
from ..fits.em import EMFit
from ..fits.item_difficulty import ItemLevelMixin, condition_on_known
from ..fits.optimize import OptimizeFit
from ..models.item_marginal import marginal_log_joint_k
from ..models.kernels import class_log_posterior

__all__ = ["kfold", "DEFAULT_FOLDS", "fold_of_items"]

#: folds of :func:`kfold` by default
DEFAULT_FOLDS = 10


def fold_of_items(n_items: int, k: int, seed: int) -> np.ndarray:
    """Fold (0 .. k-1) of each of ``n_items`` items: a seeded shuffle cut into ``k`` near-equal parts."""
    order = np.random.default_rng(seed).permutation(n_items)
    fold = np.empty(n_items, dtype=np.int64)
    fold[order] = np.arange(n_items) % k
    return fold


def _check_input(fit: Any, k: int) -> None:
    if not isinstance(fit, Fit):
        raise TypeError(f"kfold needs a pyrater fit, got {type(fit).__name__}")
    if not isinstance(fit, (EMFit, OptimizeFit)):
        raise NotImplementedError(
            f"kfold refits point fits (method='em' or 'optimize'); this is a {fit.method} fit"
            + ("; use pyrater.loo, which needs no refits" if fit.has_draws else "")
        )
    if not hasattr(fit.data, "counts") or getattr(fit, "blocks", None) is not None:
        raise NotImplementedError(
            "kfold needs the ratings in memory; this fit was made on distributed data: collect a sample of items "
            "into a RatingData and refit it in memory"
        )
    if fit.data.n_items < k:
        raise ValueError(f"k={k} folds need at least {k} items; the data hold {fit.data.n_items}")


def _training_data(data: RatingData, held_out: np.ndarray) -> RatingData:
    """The data with ``held_out[u]`` of unit u's items removed (weights reduced; units, raters, labels kept)."""
    return RatingData.from_codes(
        data.unit,
        data.rater,
        data.rating,
        n_categories=data.n_categories,
        n_items=data.n_units,
        n_raters=data.n_raters,
        weight=np.asarray(data.weight, dtype=np.int64) - held_out,
        categories=list(data.categories),
        copy=False,
    )


def _training_items(data: RatingData, held_out: np.ndarray) -> tuple[RatingData, np.ndarray]:
    """Item-level ``data`` without its held-out items: every rater kept, the other items renumbered.

    For families with per-item parameters, whose fits need one unit per item
    (a unit of weight 0 would be expanded away, and with it a rater whose
    every item is held out).  Returns the data and each unit's new code (-1
    when held out).
    """
    kept = held_out == 0
    code = np.where(kept, np.cumsum(kept) - 1, -1)
    rows = kept[data.unit]
    train = RatingData.from_codes(
        code[data.unit[rows]],
        data.rater[rows],
        data.rating[rows],
        n_categories=data.n_categories,
        n_items=int(kept.sum()),
        n_raters=data.n_raters,
        categories=list(data.categories),
    )
    return train, code


def _known_labels(fit: Any, code: np.ndarray | None = None) -> dict | None:
    """The fit's known classes as ``{unit label of the training data: category label}`` (units are 1 .. I there).

    ``code`` maps the fit's units to the training data's (-1: held out); default the same units.
    """
    known = fit.known
    if known is None or not np.any(known >= 0):
        return None
    cats = fit.data.categories
    units = np.arange(known.size) if code is None else code
    return {int(units[u]) + 1: cats[int(c)] for u, c in enumerate(known) if c >= 0 and units[u] >= 0}


def _refit(fit: Any, held_out: np.ndarray, seed: int) -> Fit:
    """The fit repeated without the held-out items (``held_out[u]`` of unit u's; same model, method and settings)."""
    if isinstance(fit, ItemLevelMixin) and not fit.marginal:
        train, code = _training_items(fit.data, held_out)
        known = _known_labels(fit, code)
        fit_known = None if fit.known is None else np.asarray(fit.known)[code >= 0]
    else:
        train = _training_data(fit.data, held_out)
        known = _known_labels(fit)
        fit_known = None if fit.known is None else np.asarray(fit.known)
    res: Fit
    if isinstance(fit, EMFit):
        from ..inference.em.algorithm import EMConvergenceWarning, em

        conv = fit.convergence or {}
        restarts = 0 if fit.restart_objectives is None else max(0, len(fit.restart_objectives) - 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EMConvergenceWarning)  # reported once, by the full fit
            res = em(
                train,
                model=fit.model,
                method="map" if fit.method == "em_map" else "ml",
                known=known,
                n_restarts=restarts,
                tol=float(conv.get("tol", 1e-8)),
                param_tol=float(conv.get("param_tol", 1e-6)),
                seed=seed,
                backend="numba" if fit.backend == "numba" else "scipy" if fit.backend == "scipy" else "auto",
            )
    else:
        from ..inference.stan.run import optimize

        res = optimize(
            train,
            fit.model,
            fit_known,
            engine=fit.engine,
            seed=seed,
            inits=None,
            n_inits=int(fit.settings.get("n_inits", 4)),
            known_labels=known,
        )
    return res


def _unit_log_lik(fit: Any, point: Fit, units: np.ndarray) -> np.ndarray:
    """``log p(y_u | estimate)`` of the given units of ``fit.data`` (``log p(y_u, z_u)`` for a known unit).

    ``point`` is ``fit`` or one of its refits.  Item-level families: the
    unit's item parameters integrated out over their prior, at ``point``'s
    ``pi`` and rater parameters.
    """
    known = None if fit.known is None else np.asarray(fit.known)[units]
    counts = fit.data.counts[units]
    if isinstance(point, ItemLevelMixin):
        p = point._params()
        # the rule of the data (cached on the fit): held-out and training items share it
        lj = condition_on_known(marginal_log_joint_k(counts, p["log_pi"], p["ability"], fit._rule), known)[0]
        with np.errstate(invalid="ignore"):
            return logsumexp(lj, axis=1)
    pi, theta = point._point()
    with np.errstate(divide="ignore"):
        lp, lt = np.log(pi), np.log(theta)
    _, ll = class_log_posterior(counts, lp, lt, known=known)
    return ll


def kfold(fit: Fit, k: int = DEFAULT_FOLDS, *, seed: int | None = None, progress: bool | None = None):
    """Expected log predictive density of a point fit by K-fold cross-validation over items.

    Parameters
    ----------
    fit : EMFit or OptimizeFit
        A point fit (``method="em"`` or ``"optimize"``), refitted ``k`` times
        with its own model, method and settings.
    k : int
        Number of folds (default 10; at most the number of items).
    seed : int, optional
        Seed of the split into folds and of the refits (default 0: the same
        folds every time, so fits of one data set are compared on one split).
    progress : bool, optional
        A progress bar over the folds (default: on).

    Returns
    -------
    ELPD
        ``kind="loo"``, ``method="kfold"``: ``elpd``, ``se``, ``p`` and
        ``elpd_i`` (per item) on the scale of PSIS-LOO's, so
        :func:`pyrater.compare` ranks it beside draws-based fits; no Pareto k.

    Examples
    --------
    >>> e = pyrater.em(data, method="map")          # doctest: +SKIP
    >>> pyrater.kfold(e, k=10, seed=1).elpd          # doctest: +SKIP
    """
    from .compare import ELPD

    k = check_int("k", k, 2)
    checked = check_seed(seed)
    seed = 0 if checked is None else checked
    _check_input(fit, k)
    data = fit.data
    weight = np.asarray(data.weight, dtype=np.int64)
    n_items = int(weight.sum())
    unit_of_item = data.unit_of_item
    fold = fold_of_items(n_items, k, seed)
    elpd_i = np.empty(n_items)
    params = []
    show = True if progress is None else bool(progress)
    with progress_bar(show, k, "k-fold", unit="fold") as bar:
        for f in range(k):
            out = np.flatnonzero(fold == f)
            held = np.bincount(unit_of_item[out], minlength=data.n_units)
            refit = _refit(fit, held, seed + f)
            params.append(refit._point())
            units = np.unique(unit_of_item[out])
            ll = _unit_log_lik(fit, refit, units)
            elpd_i[out] = ll[np.searchsorted(units, unit_of_item[out])]
            bar.update()
    lpd = float(np.sum(_unit_log_lik(fit, fit, np.arange(data.n_units)) * weight))
    elpd = float(elpd_i.sum())
    if not np.isfinite(elpd):
        warnings.warn(
            "some held-out item has log predictive density -inf under the fit without its fold (a rating its "
            "rater never gave in training has probability 0 under maximum likelihood); use method='map'",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
    result = ELPD(
        kind="loo",
        elpd=elpd,
        se=float(np.sqrt(n_items * np.var(elpd_i))),
        p=lpd - elpd,
        elpd_i=pd.Series(elpd_i, index=data.item_index, name="elpd_kfold"),
        pareto_k=None,
        n_bad_k=0,
        warning=False,
        n_samples=1,
        n_data_points=n_items,
        method="kfold",
        n_subsample=n_items,
    )
    fit.__dict__["_kfold_result"] = result  # pyrater.compare uses it
    # the refits' estimates on this split: held-out rater agreement (pyrater.checking.agreement) reuses them
    fit.__dict__["_kfold_params"] = {"k": k, "seed": seed, "fold": fold, "params": params}
    return result
