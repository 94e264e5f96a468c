"""From posteriors to decisions: agreement statistics, and which item to rate next.

:func:`agreement`
    Percent agreement, Cohen's and Fleiss' kappa, Krippendorff's alpha and
    Gwet's AC1/AC2 from the ratings, with standard errors and intervals.
:func:`model_agreement`
    Each rater's accuracy and the chance-corrected agreement implied by a
    fit's ``pi`` and ``theta``, with posterior intervals.
:func:`next_ratings`
    Which (item, rater) pairs to rate next: a batch chosen greedily by
    expected information gain about the items' true classes.
"""

from __future__ import annotations

from .agreement import STATISTICS, AgreementResult, ModelAgreement, agreement, model_agreement
from .next_ratings import next_ratings

__all__ = ["agreement", "AgreementResult", "model_agreement", "ModelAgreement", "next_ratings", "STATISTICS"]
