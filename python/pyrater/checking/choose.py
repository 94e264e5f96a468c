"""``pyrater.fit(data, "auto")``: fit the candidate families, compare them, return the best.

The data choose among the model families by the expected log predictive
density of a new item's ratings (:func:`pyrater.compare`): every candidate is
fitted by the same method, point fits (EM, Stan's optimiser) are scored by
10-fold cross-validation over items on one shared split, draws-based fits
(Gibbs, NUTS) by PSIS-LOO.  The rule:

1. rank the candidates by elpd;
2. among the candidates whose elpd is not separated from the best one's
   (``equivalent`` in the table: a difference below 4 or below twice its
   standard error), take the one with the fewest effective parameters
   (``p_loo`` / ``p_kfold``): equally predictive, simpler;
3. add the vote model, majority vote's predictive counterpart that ignores
   who rated (:mod:`pyrater.checking.vote_model`), as a baseline row; when
   the chosen model does not predict clearly better than it, say so (in the
   reason and as a warning): modelling the raters then buys nothing the data
   can show, and majority vote may serve as well.

The most predictive model is not always the one that labels the most items
right (a model can predict the ratings better by learning each rater's
biases); elpd is what the ratings alone can measure, and the table shows the
candidates' agreement with majority vote (``agree_mv``) beside it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._stacklevel import user_stacklevel
from ..data.ratings import RatingData
from ..fits.base import Fit
from ..models import Model, get_model, model_names
from ..models.base import mode_priors as _mode_priors
from .compare import BASELINE_NAME, compare, equivalent_to_best
from .vote_model import category_counts

__all__ = ["ModelChoice", "AUTO_METHODS", "default_candidates", "choose_model"]

#: methods ``fit(data, "auto", method=...)`` can fit every candidate by (the default: EM)
AUTO_METHODS = ("em", "gibbs", "mcmc", "optimize")
#: methods whose fits are posterior modes (scored by K-fold)
_MODE_METHODS = ("em", "optimize")


@dataclass(frozen=True)
class ModelChoice:
    """How ``pyrater.fit(data, "auto")`` chose its model; ``fit.model_choice``.

    Attributes
    ----------
    chosen : str
        The chosen family's name (the fit returned).
    reason : str
        One line: the rule that chose it and the numbers behind it (also in
        ``fit.summary()``).
    table : DataFrame
        :func:`pyrater.compare`'s table over the candidates and the
        majority-vote baseline (when there is one), with a column
        ``agree_mv``: the share of items whose most probable class is a
        majority-vote class.
    fits : dict
        ``{name: fit}`` of every candidate fitted.
    skipped : dict
        ``{name: why}`` of candidates that could not be fitted to these data
        (say, a family for ordered scales on two categories), and of priors
        changed so that a mode exists.
    """

    chosen: str
    reason: str
    table: pd.DataFrame
    fits: dict[str, Fit] = field(repr=False)
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            text = f"{self.reason}\n{self.table.round(3).to_string()}"
        if self.skipped:
            text += "\n" + "\n".join(f"  {name}: {why}" for name, why in self.skipped.items())
        return text


def default_candidates(method: str) -> list[str]:
    """Every registered family that ``method`` fits, in registration order.

    A family may leave out a method whose estimate is unreliable for it
    (``auto_methods``; the pooled family's joint posterior mode): it is then
    a candidate only when named.
    """
    out = []
    for name in model_names():
        model = get_model(name)
        allowed = model.methods if model.auto_methods is None else model.auto_methods
        if method in model.methods and method in allowed:
            out.append(name)
    return out


def _resolve_candidates(candidates: Sequence[str | Model] | None, method: str) -> dict[str, Model]:
    if candidates is None:
        names: list[str | Model] = list(default_candidates(method))
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
    return out


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
) -> tuple[Fit, ModelChoice]:
    """Fit each candidate with ``fit_one(model, method)``, compare, choose (see the module's rule).

    Returns the chosen fit (with ``model_choice`` set) and the :class:`ModelChoice`.
    """
    models = _resolve_candidates(candidates, method)
    K, J = data.n_categories, data.n_raters
    fits: dict[str, Fit] = {}
    skipped: dict[str, str] = {}
    for name, model in models.items():
        try:
            if method in _MODE_METHODS:
                model, note = _mode_priors(model, K, J)
                if note:
                    skipped[name] = note
            fits[name] = fit_one(model, method)
        except ValueError as exc:  # the family refuses these data (checked before any work)
            skipped[name] = f"not fitted: {exc}"
    if not fits:
        raise ValueError(
            "no candidate could be fitted to these data: " + "; ".join(f"{n}: {why}" for n, why in skipped.items())
        )
    baseline = not has_known
    if len(fits) == 1 and not baseline:
        only = next(iter(fits))
        table = pd.DataFrame({"rank": [0]}, index=pd.Index([only]))
        reason = f"{only}: the only candidate that could be fitted (known items: no majority-vote baseline)"
    else:
        from .kfold import DEFAULT_FOLDS, kfold

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # per-fit LOO warnings: the table's warning column carries them
            for f in fits.values():
                if not f.has_draws:  # scored here so the progress setting holds; compare uses the result
                    kfold(f, DEFAULT_FOLDS, seed=seed, progress=progress)
            table = compare(fits, seed=seed, baseline=baseline, progress=progress)
        table = _with_agreement(table, fits)
        reason = _reason(table, method)
    chosen = _pick(table)
    choice = ModelChoice(chosen=chosen, reason=reason, table=table, fits=fits, skipped=skipped)
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


def _with_agreement(table: pd.DataFrame, fits: dict[str, Fit]) -> pd.DataFrame:
    agree = [1.0 if name == BASELINE_NAME else _agree_mv(fits[name]) for name in table.index]
    return table.assign(agree_mv=agree)


def _ic(table: pd.DataFrame) -> str:
    return next(c for c in table.columns if c.startswith("elpd_") and c != "elpd_diff")


def _pick(table: pd.DataFrame) -> str:
    """The simplest model (smallest p) among the candidates equivalent to the best candidate."""
    models = table.drop(index=BASELINE_NAME, errors="ignore")
    ic = _ic(models)
    best = models[ic].idxmax()
    if "equivalent" not in models.columns:
        return str(best)
    ref = float(models.loc[best, ic])
    pcol = "p_" + ic.removeprefix("elpd_")
    tied = [n for n in models.index if n == best or _close(ref, models, n, best)]
    return str(min(tied, key=lambda n: (float(models.loc[n, pcol]), -float(models.loc[n, ic]))))


def _close(ref: float, models: pd.DataFrame, name: str, best: str) -> bool:
    """Whether ``name`` is equivalent to the best candidate (the rule of the table, against the best candidate)."""
    ic = _ic(models)
    diff = float(models.loc[name, ic]) - ref
    # the table's dse is against its top row; when the baseline is not on top that row is the best candidate
    dse = float(models.loc[name, "dse"]) if models.index[0] == best else 0.0
    return equivalent_to_best(diff, dse)


def _baseline_matches(table: pd.DataFrame, chosen: str) -> bool:
    """Whether the vote model predicts as well as the chosen model (ranked above it, or equivalent to it)."""
    ic = _ic(table)
    names = list(table.index)
    if names.index(BASELINE_NAME) < names.index(chosen):
        return True
    diff = float(table.loc[BASELINE_NAME, ic] - table.loc[chosen, ic])
    dse = float(table.loc[BASELINE_NAME, "dse"]) if names[0] == chosen else 0.0
    return equivalent_to_best(diff, dse)


def _reason(table: pd.DataFrame, method: str) -> str:
    ic = _ic(table)
    criterion = "10-fold cross-validated elpd" if method in _MODE_METHODS else "PSIS-LOO elpd"
    models = table.drop(index=BASELINE_NAME, errors="ignore")
    chosen = _pick(table)
    best = str(models[ic].idxmax())
    text = f"{chosen}: chosen by {criterion} among {len(models)} candidate(s) fitted by {method}"
    if chosen == best:
        text += f" (elpd {models.loc[chosen, ic]:.1f})"
        rest = [n for n in models.index if n != best]
        if rest:
            nxt = rest[0]
            text += f"; next {nxt} at {models.loc[nxt, ic] - models.loc[best, ic]:+.1f}"
    else:
        text += (
            f": as predictive as the best, {best} ({models.loc[chosen, ic] - models.loc[best, ic]:+.1f}), "
            f"with fewer effective parameters"
        )
    if BASELINE_NAME in table.index:
        gap = table.loc[chosen, ic] - table.loc[BASELINE_NAME, ic]
        if _baseline_matches(table, chosen):
            text += f"; majority vote's vote model predicts as well ({gap:+.1f}): consider majority vote"
        else:
            text += f"; {gap:+.1f} over majority vote's vote model"
    return text
