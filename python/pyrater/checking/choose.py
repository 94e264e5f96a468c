"""``pyrater.fit(data, "auto")``: fit the candidate families, compare them, return the best.

Every candidate is fitted by the same method and scored from the ratings
alone (:func:`pyrater.compare`): point fits (EM, Stan's optimiser) by 10-fold
cross-validation over items on one shared split, draws-based fits (Gibbs,
NUTS) by PSIS-LOO.  The rule:

0. by EM, a family named without priors that offers a prior scale
   (Dawid-Skene, :meth:`~pyrater.models.base.ModelFamily.with_prior_scale`)
   is fitted with its default prior's pseudo-counts times each of
   :data:`PRIOR_SCALES` (0.25, 0.5, 1, 2), each fit scored on the same
   10-fold split; the default is kept unless another strength predicts the
   held-out items clearly better (not ``equivalent``: a difference of 4 nats
   or more and more than twice its standard error, paired by item), and the
   kept fit is the family's candidate (``ModelChoice.prior_scale``; the
   reason names a strength other than the default).  How strongly the
   raters' error matrices should be pulled towards the prior is a property
   of the crowd (many or few ratings per rater, errors spread or
   concentrated), which held-out items measure; the choice among four
   strengths is itself fitted to the folds, a small optimism against the
   other candidates (a few nats, below the ``equivalent`` margin);
1. rank the candidates by elpd, the expected log predictive density of a
   new item's ratings;
2. among the candidates whose elpd is within 4 nats of the best one's (a
   difference too small to matter, :data:`~pyrater.checking.compare.SMALL_ELPD_DIFF`;
   Sivula et al. 2020), take the one with the fewest effective parameters
   (``p_loo`` / ``p_kfold``): as predictive, simpler.  A larger difference
   keeps the best, even where it is within twice its standard error
   (``equivalent`` in the table): on small data that margin admits models
   that predict clearly worse on average, and preferring the simplest of
   them picked misspecified models that labelled worse than majority vote;
3. add the vote model, majority vote's predictive counterpart that ignores
   who rated (:mod:`pyrater.checking.vote_model`), as a baseline row; when
   the chosen model does not predict clearly better than it, say so (in the
   reason and as a warning).

With the user's gold items (``gold=``), the labels are judged first: the
candidates whose accuracy on the gold items is not separated from the best
one's (within twice the standard error of the paired difference;
``labels_as_well``) go on to steps 1-2, the others are dropped.

For point fits the table also shows what the ratings say about the labels
(:mod:`pyrater.checking.agreement`): ``agree_cv``, how often the class
inferred from an item's other ratings matches a held-out rating, and
``info_cv``, the information between the two given the rater.  They are
diagnostics, not the rule: the benchmark on real data
(``bench/RESULTS_realdata_auto.md``) shows them mislead where raters share
a leaning, and the guide says why.  ``agree_mv`` is each candidate's
agreement with the full-data majority vote.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._stacklevel import user_stacklevel
from ..data.ratings import RatingData
from ..fits.base import Fit
from ..fits.choice import ModelChoice
from ..models import Model, get_model, model_names
from ..models.base import mode_priors as _mode_priors
from .agreement import held_out_agreement, vote_held_out_agreement
from .compare import BASELINE_NAME, SMALL_ELPD_DIFF, _kfold_on_split, compare, equivalent_to_best
from .vote_model import category_counts

__all__ = ["ModelChoice", "AUTO_METHODS", "default_candidates", "choose_model"]

#: methods ``fit(data, "auto", method=...)`` can fit every candidate by (the default: EM)
AUTO_METHODS = ("em", "gibbs", "mcmc", "optimize")
#: with gold items, a candidate labels as well as the best when its accuracy on them is below the best's by at
#: most this many standard errors of the paired difference
LABEL_SE_MULTIPLE = 2.0
#: differences this small are ties (two candidates with the same labels, e.g. Dawid-Skene and class-conditional
#: at K = 2)
_TIE = 1e-9
#: methods whose fits are posterior modes (scored by K-fold)
_MODE_METHODS = ("em", "optimize")
#: multiples of a family's default prior strength tried by ``method="em"`` (1: the default); see step 0 of the rule
PRIOR_SCALES = (0.25, 0.5, 1.0, 2.0)


def default_candidates(method: str, n_categories: int | None = None, n_ratings: int | None = None) -> list[str]:
    """The families ``pyrater.fit(data, "auto", method=method)`` tries when no candidates are named.

    Every registered family that ``method`` fits, in registration order,
    except where a family leaves the method out
    (:meth:`~pyrater.models.base.ModelFamily.auto_default`): a method whose
    estimate is unreliable for it (the pooled family's joint posterior mode),
    or data it does not suit or that would cost too much (item difficulty by
    EM: binary data of at most 200,000 ratings).  Such a family is a
    candidate when named.

    Parameters
    ----------
    method : str
    n_categories, n_ratings : int, optional
        The data's; without the number of categories a family whose candidacy depends on it is left out.
    """
    return list(_default_candidates(method, n_categories, n_ratings)[0])


def _default_candidates(method: str, n_categories: int | None, n_ratings: int | None) -> tuple[list[str], dict]:
    """:func:`default_candidates` and ``{name: why}`` of the families left out for these data."""
    out, left = [], {}
    for name in model_names():
        why = get_model(name).auto_default(method, n_categories, n_ratings)
        if why == "":
            out.append(name)
        elif why:
            left[name] = why
    return out, left


def _resolve_candidates(
    candidates: Sequence[str | Model] | None, method: str, data: RatingData | None = None
) -> tuple[dict[str, Model], dict[str, str]]:
    """The candidate families, and ``{name: why}`` of default families left out for these data."""
    left: dict[str, str] = {}
    if candidates is None:
        K = None if data is None else data.n_categories
        n = None if data is None else data.n_ratings
        found, left = _default_candidates(method, K, n)
        names: list[str | Model] = list(found)
    elif isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence):
        raise TypeError(f"candidates must be a list of model names or model objects, got {candidates!r}")
    else:
        names = list(candidates)
    out: dict[str, Model] = {}
    for item in names:
        model = get_model(item)  # an unknown name is a ValueError listing the families
        if method not in model.methods:
            raise ValueError(
                f"candidate {model.name!r} cannot be fitted by method={method!r}; its methods are {model.methods}"
            )
        if model.name in out:
            raise ValueError(f"candidate {model.name!r} is given twice")
        out[model.name] = model
    if not out:
        raise ValueError("candidates is empty: name at least one model family")
    return out, left


def _agree_mv(fit: Fit) -> float:
    """Share of rated items whose most probable class is one of their majority-vote classes (ties count)."""
    counts = category_counts(fit.data)  # the fit's own units (a family may expand grouped data to items)
    rated = counts.sum(axis=1) > 0
    if not rated.any():
        return float("nan")
    probs = fit.class_probabilities().to_numpy()
    z = probs.argmax(axis=1)
    top = counts == counts.max(axis=1, keepdims=True)
    hit = top[np.arange(z.size), z]
    w = np.asarray(fit.data.weight, dtype=float)
    return float((w * hit)[rated].sum() / w[rated].sum())


def choose_model(
    data: RatingData,
    candidates: Sequence[str | Model] | None,
    method: str,
    fit_one: Any,
    *,
    has_known: bool,
    seed: int,
    progress: bool,
    gold: np.ndarray | None = None,
) -> tuple[Fit, ModelChoice]:
    """Fit each candidate with ``fit_one(model, method)``, compare, choose (see the module's rule).

    ``gold`` (units,) holds the true class code of the user's gold units
    (-1 elsewhere): accuracy on them, not held-out agreement, then says
    which candidates label as well as the best.

    Returns the chosen fit (with ``model_choice`` set) and the :class:`ModelChoice`.
    """
    models, left = _resolve_candidates(candidates, method, data)
    K, J = data.n_categories, data.n_raters
    fits: dict[str, Fit] = {}
    skipped: dict[str, str] = dict(left)
    for name, model in models.items():
        try:
            if method in _MODE_METHODS:
                model, note = _mode_priors(model, K, J)
                if note:
                    skipped[name] = note
            fits[name] = _fit_named(fit_one, model, method, name)
        except ValueError as exc:  # the family refuses these data (checked before any work)
            skipped[name] = f"not fitted: {exc}"
    if not fits:
        raise ValueError(
            "no candidate could be fitted to these data: " + "; ".join(f"{n}: {why}" for n, why in skipped.items())
        )
    prior_scale: dict[str, float] = {}
    tuning: list[str] = []
    if method == "em":
        for name in list(fits):
            tuned = _tune_prior_scale(models[name], fits[name], fit_one, K, J, seed=seed, progress=progress)
            if tuned is not None:
                fits[name], prior_scale[name], gain = tuned
                if prior_scale[name] != 1.0:
                    tuning.append(
                        f"{name}'s prior strength x{prior_scale[name]:g} of the default "
                        f"(10-fold elpd {gain[0]:+.1f} \u00b1 {gain[1]:.1f} over the default's)"
                    )
    baseline = not has_known
    if len(fits) == 1 and not baseline:
        only = next(iter(fits))
        table = pd.DataFrame({"rank": [0]}, index=pd.Index([only]))
        why = "the only candidate named" if len(models) == 1 else "the only candidate that could be fitted"
        reason = f"{only}: {why} (known items: no majority-vote baseline)"
        chosen = only
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # per-fit LOO warnings: the table's warning column carries them
            for f in fits.values():
                if not f.has_draws:  # scored here so the progress setting holds; compare uses the result
                    _kfold_on_split(f, seed, progress)
            table = compare(fits, seed=seed, baseline=baseline, progress=progress)
        if method in _MODE_METHODS:
            table = _with_held_out_agreement(table, fits)
        if gold is not None:
            table = _with_gold(table, fits, gold)
        table = _with_agreement(table, fits)
        chosen = _pick(table)
        reason = _reason(table, method, chosen)
    if tuning:
        reason += "; " + "; ".join(tuning)
    reason += _convergence_note(fits[chosen])
    table = table.assign(chosen=table.index == chosen)  # the rule is not the rank: see the reason
    choice = ModelChoice(chosen=chosen, reason=reason, table=table, fits=fits, skipped=skipped, prior_scale=prior_scale)
    best = fits[chosen]
    best.__dict__["_model_choice"] = choice
    if BASELINE_NAME in table.index and _baseline_matches(table, chosen):
        warnings.warn(
            f"the chosen model ({chosen}) does not predict the ratings clearly better than majority vote's vote "
            "model; see fit.model_choice.table",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return best, choice


def _convergence_note(fit: Fit) -> str:
    """The reason's note when the chosen fit's chains did not converge (max Rhat above the threshold), else ""."""
    if not fit.has_draws:
        return ""
    from ..fits.draws import RHAT_THRESHOLD

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = fit.mcmc_diagnostics(warn=False)
    rhat = table.attrs.get("max_rhat", float("nan"))
    if not rhat > RHAT_THRESHOLD:
        return ""
    return (
        f"; its chains have not converged (max Rhat {rhat:.3f} at {table['rhat'].idxmax()}): the elpd of a fit "
        "whose chains disagree is not to be trusted, run longer chains before relying on the choice"
    )


def _fit_named(fit_one: Any, model: Model, method: str, label: str) -> Fit:
    """``fit_one(model, method)`` with its warnings issued again, the candidate named in front.

    Among several candidates a bare "MCMC problems" or convergence warning
    does not say which model it concerns.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_one(model, method)
    for w in caught:
        try:
            warnings.warn(f"candidate {label}: {w.message}", w.category, stacklevel=user_stacklevel())
        except TypeError:  # a warning class whose constructor takes other arguments
            warnings.warn(f"candidate {label}: {w.message}", UserWarning, stacklevel=user_stacklevel())
    return fit


def _tune_prior_scale(
    model: Model, fit: Fit, fit_one: Any, K: int, J: int, *, seed: int, progress: bool
) -> tuple[Fit, float, tuple[float, float]] | None:
    """Step 0 of the rule: the family's prior strength, by 10-fold elpd; None if the family offers no scale.

    The family is fitted again with its default prior's pseudo-counts times
    each of :data:`PRIOR_SCALES` and every fit is scored on the comparison's
    10-fold split.  The default is kept unless the best scale predicts the
    held-out items clearly better (:func:`equivalent_to_best`, paired by
    item, as in step 2).  Returns ``(fit, scale, (gain, se))``: the fit kept,
    its scale and its elpd gain over the default's with the standard error
    of the paired difference.
    """
    variants: dict[float, Fit] = {}
    for scale in PRIOR_SCALES:
        if scale == 1.0:
            continue
        scaled = model.with_prior_scale(scale, K)
        if scaled is None:
            return None
        scaled, _ = _mode_priors(scaled, K, J)
        try:
            variants[scale] = _fit_named(fit_one, scaled, "em", f"{model.name} (prior strength x{scale:g})")
        except ValueError:  # refused as the default was not: keep the default
            return fit, 1.0, (0.0, 0.0)
    variants[1.0] = fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # per-fit warnings: the comparison's table carries the kept fit's
        elpd = {s: _kfold_on_split(f, seed, progress).elpd_i.to_numpy() for s, f in variants.items()}
    best = max(sorted(elpd), key=lambda s: float(elpd[s].sum()))
    d = elpd[best] - elpd[1.0]
    gain = float(d.sum())
    if best == 1.0 or not np.isfinite(float(elpd[best].sum())):
        return fit, 1.0, (0.0, 0.0)
    dse = float(np.sqrt(d.size * np.var(d))) if np.all(np.isfinite(d)) else float("inf")
    if np.isfinite(gain) and equivalent_to_best(-gain, dse):
        return fit, 1.0, (0.0, 0.0)
    return variants[best], best, (gain, dse)


def _with_held_out_agreement(table: pd.DataFrame, fits: dict[str, Fit]) -> pd.DataFrame:
    """The table with ``agree_cv``, ``info_cv`` and the standard errors of their paired differences from the best."""
    scores = {
        name: vote_held_out_agreement(next(iter(fits.values())).data)
        if name == BASELINE_NAME
        else held_out_agreement(fits[name])
        for name in table.index
    }
    models = [n for n in table.index if n != BASELINE_NAME]
    out = {}
    for stat, per_item, mean in (("agree", "a_i", "agreement"), ("info", "info_i", "information")):
        best = max(models, key=lambda n: getattr(scores[n], mean))
        ref = getattr(scores[best], per_item).to_numpy()
        dse = []
        for name in table.index:
            d = getattr(scores[name], per_item).to_numpy() - ref
            d = d[np.isfinite(d)]
            scale = d.size if stat == "agree" else scores[best].n_ratings  # a mean over items / over ratings
            dse.append(float(np.sqrt(d.size * np.var(d))) / scale if d.size > 1 else 0.0)
        out[f"{stat}_cv"] = [getattr(scores[n], mean) for n in table.index]
        out[f"{stat}_dse"] = dse
    return table.assign(**out)


def _with_gold(table: pd.DataFrame, fits: dict[str, Fit], gold: np.ndarray) -> pd.DataFrame:
    """The table with ``gold_accuracy``, ``gold_dse`` and ``labels_as_well`` judged on the user's gold units."""
    data = next(iter(fits.values())).data
    scores = {
        name: category_counts(data) if name == BASELINE_NAME else fits[name].class_probabilities().to_numpy()
        for name in table.index
    }
    return gold_columns(table, scores, gold, np.asarray(data.weight, dtype=float))


def gold_columns(
    table: pd.DataFrame, scores: dict[str, np.ndarray], gold: np.ndarray, weight: np.ndarray
) -> pd.DataFrame:
    """``table`` with ``gold_accuracy``, ``gold_dse`` and ``labels_as_well`` from per-unit class scores.

    Parameters
    ----------
    table : DataFrame
        The comparison table (a row per candidate, and the baseline's).
    scores : dict
        ``{row name: (units, K) array}``: class probabilities (the baseline: its vote counts); a unit's
        label is its highest score, ties sharing the credit.
    gold : array, shape (units,)
        True class codes of the gold units, -1 elsewhere.
    weight : array, shape (units,)
        Items per unit.
    """
    units = np.flatnonzero(gold >= 0)
    w = weight[units]
    hits = {}
    for name in table.index:
        score = scores[name][units]
        top = score >= score.max(axis=1, keepdims=True)
        hits[name] = top[np.arange(units.size), gold[units]] / top.sum(axis=1)
    total = w.sum()
    accuracy = {n: float(w @ h / total) for n, h in hits.items()}
    models = [n for n in table.index if n != BASELINE_NAME]
    best = max(models, key=accuracy.__getitem__)
    dse, close = [], []
    for name in table.index:
        d = hits[name] - hits[best]
        mean = float(w @ d / total)
        se = float(np.sqrt(w @ (d - mean) ** 2) / total) if units.size > 1 else 0.0
        dse.append(se)
        close.append(name != BASELINE_NAME and -mean <= LABEL_SE_MULTIPLE * se + _TIE)
    return table.assign(gold_accuracy=[accuracy[n] for n in table.index], gold_dse=dse, labels_as_well=close)


def _with_agreement(table: pd.DataFrame, fits: dict[str, Fit]) -> pd.DataFrame:
    agree = [1.0 if name == BASELINE_NAME else _agree_mv(fits[name]) for name in table.index]
    return table.assign(agree_mv=agree)


def _ic(table: pd.DataFrame) -> str:
    return next(c for c in table.columns if c.startswith("elpd_") and c != "elpd_diff")


def _pick(table: pd.DataFrame) -> str:
    """The module's rule: the candidates that label as well as the best; of them the simplest of the most predictive."""
    models = table.drop(index=BASELINE_NAME, errors="ignore")
    if "labels_as_well" in models.columns:
        models = models[models["labels_as_well"].astype(bool)]
    ic = _ic(models)
    best = str(models[ic].idxmax())
    if "equivalent" not in models.columns:
        return best
    pcol = "p_" + ic.removeprefix("elpd_")
    tied = [n for n in models.index if n == best or _close(table, n, best)]
    return str(min(tied, key=lambda n: (float(models.loc[n, pcol]), -float(models.loc[n, ic]))))


def _close(table: pd.DataFrame, name: str, best: str) -> bool:
    """Whether ``name``'s elpd is within :data:`~pyrater.checking.compare.SMALL_ELPD_DIFF` nats of ``best``'s."""
    ic = _ic(table)
    diff = float(table.loc[name, ic] - table.loc[best, ic])
    return bool(np.isfinite(diff) and -diff < SMALL_ELPD_DIFF)  # -inf: a held-out item impossible under one


#: a candidate as predictive as the chosen one whose labels agree with majority vote on this much larger a share
#: of the items is named in the reason: equally predictive models that label differently
LABELS_DIFFER = 0.1


def _labels_differ(models: pd.DataFrame, ic: str, chosen: str) -> str:
    """The reason's note when a candidate within 4 nats of the best labels far more items as majority vote does."""
    best = str(models[ic].idxmax())
    within = np.array([_close(models, n, best) for n in models.index], dtype=bool)
    close = models[within & models["agree_mv"].notna().to_numpy()]
    if close.empty or not np.isfinite(models.loc[chosen, "agree_mv"]):
        return ""
    other = str(close["agree_mv"].idxmax())
    gap = float(close.loc[other, "agree_mv"] - models.loc[chosen, "agree_mv"])
    if other == chosen or not gap > LABELS_DIFFER:
        return ""
    return (
        f"; the equally predictive candidates label differently: {chosen} gives {models.loc[chosen, 'agree_mv']:.0%} "
        f"of the items a majority-vote class, {other} {close.loc[other, 'agree_mv']:.0%} (gold items would tell "
        "which labels better)"
    )


def _baseline_matches(table: pd.DataFrame, chosen: str) -> bool:
    """Whether the vote model predicts as well as the chosen model (ranked above it, or equivalent to it)."""
    ic = _ic(table)
    names = list(table.index)
    if names.index(BASELINE_NAME) < names.index(chosen):
        return True
    diff = float(table.loc[BASELINE_NAME, ic] - table.loc[chosen, ic])
    dse = float(table.loc[BASELINE_NAME, "dse"]) if names[0] == chosen else 0.0
    return equivalent_to_best(diff, dse)


def _nats(diff: float) -> str:
    """An elpd difference with its sign: one decimal, or one significant digit below 0.05 (not "-0.0")."""
    return f"{diff:+.1f}" if abs(diff) >= 0.05 or not np.isfinite(diff) else f"{diff:+.1g}"


def _reason(table: pd.DataFrame, method: str, chosen: str) -> str:
    ic = _ic(table)
    criterion = "10-fold cross-validated elpd" if method in _MODE_METHODS else "PSIS-LOO elpd"
    models = table.drop(index=BASELINE_NAME, errors="ignore")
    text = f"{chosen}: chosen among {len(models)} candidate(s) fitted by {method}"
    if "gold_accuracy" in models.columns:
        labeller = str(models["gold_accuracy"].idxmax())
        text += f"; accuracy on the gold items {models.loc[chosen, 'gold_accuracy']:.3f}"
        if chosen == labeller:
            others = models.drop(index=chosen)
            if len(others):
                nxt = str(others["gold_accuracy"].idxmax())
                text += f" (best; next {nxt} {models.loc[nxt, 'gold_accuracy']:.3f})"
        else:
            text += f" (best {labeller} {models.loc[labeller, 'gold_accuracy']:.3f})"
        n_as_well = int(models["labels_as_well"].sum())
        if n_as_well > 1:
            text += f", {n_as_well} candidates label them as well: then by {criterion}"
        models = models[models["labels_as_well"].astype(bool)]
    else:
        text += f", by {criterion}"
    best = str(models[ic].idxmax())
    if chosen == best:
        text += f" (elpd {models.loc[chosen, ic]:.1f}"
        rest = [n for n in models.index if n != best]
        text += f"; next {rest[0]} at {_nats(models.loc[rest[0], ic] - models.loc[best, ic])})" if rest else ")"
    else:
        text += (
            f": as predictive as the best, {best} ({_nats(models.loc[chosen, ic] - models.loc[best, ic])}, "
            f"within {SMALL_ELPD_DIFF:g}), with fewer effective parameters"
        )
    if "agree_cv" in table.columns and "gold_accuracy" not in table.columns:
        every = table.drop(index=BASELINE_NAME, errors="ignore")
        top = str(every["agree_cv"].idxmax())
        text += f"; held-out rater agreement {table.loc[chosen, 'agree_cv']:.3f}"
        if top != chosen and table.loc[top, "agree_cv"] > table.loc[chosen, "agree_cv"] + _TIE:
            text += f" ({top} {table.loc[top, 'agree_cv']:.3f}: gold items would tell which labels better)"
    if "agree_mv" in table.columns and "gold_accuracy" not in table.columns:
        text += _labels_differ(models, ic, chosen)
    if BASELINE_NAME in table.index:
        gap = table.loc[chosen, ic] - table.loc[BASELINE_NAME, ic]
        if _baseline_matches(table, chosen):
            text += f"; majority vote's vote model predicts as well ({_nats(gap)}): consider majority vote"
        else:
            text += f"; {_nats(gap)} over majority vote's vote model"
        if "gold_accuracy" in table.columns:
            if table.loc[BASELINE_NAME, "gold_accuracy"] >= table.loc[chosen, "gold_accuracy"]:
                text += (
                    f"; majority vote labels the gold items as accurately "
                    f"({table.loc[BASELINE_NAME, 'gold_accuracy']:.3f}): consider majority vote"
                )
        elif "agree_cv" in table.columns and table.loc[BASELINE_NAME, "agree_cv"] >= table.loc[chosen, "agree_cv"]:
            text += (
                f"; majority vote agrees with held-out ratings as often ({table.loc[BASELINE_NAME, 'agree_cv']:.3f}):"
                " consider majority vote"
            )
    return text
