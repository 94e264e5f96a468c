"""How ``pyrater.fit(data, "auto")`` chose a fit's model: the record on the fit, saved in its fit file.

:mod:`pyrater.checking.choose` makes it; it lives here, beside the fits, so
that :mod:`pyrater.fits.fitfile` can restore it without reaching up into
the checking layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .base import Fit

__all__ = ["ModelChoice"]


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
        majority-vote baseline (when there is one), with the columns
        ``agree_cv`` and ``info_cv`` (held-out rater agreement and
        information, point fits; diagnostics), ``agree_dse`` and
        ``info_dse`` (standard errors of their paired differences from the
        best candidate's), with ``gold=`` ``gold_accuracy``, ``gold_dse``
        and ``labels_as_well``, ``agree_mv`` (the share of items whose
        most probable class is a majority-vote class) and ``chosen`` (True
        on the chosen row: the simplest of the candidates as predictive as
        the best, which need not be the top-ranked one; see ``reason``).
    fits : dict
        ``{name: fit}`` of every candidate fitted.
    skipped : dict
        ``{name: why}`` of candidates that could not be fitted to these data
        (say, a family for ordered scales on two categories), of default
        families left out for these data (item difficulty by EM above its
        size limit), and of priors changed so that a mode exists.
    prior_scale : dict
        ``{name: scale}`` for the candidates whose prior strength was tuned
        (``method="em"``, a family named without priors that offers it:
        Dawid-Skene): the multiple of the default prior's pseudo-counts kept,
        1.0 where the default held (step 0 of the rule).
    """

    chosen: str
    reason: str
    table: pd.DataFrame
    fits: dict[str, Fit] = field(repr=False)
    skipped: dict[str, str] = field(default_factory=dict)
    prior_scale: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            text = f"{self.reason}\n{self.table.round(3).to_string()}"
        if self.skipped:
            text += "\n" + "\n".join(f"  {name}: {why}" for name, why in self.skipped.items())
        return text
