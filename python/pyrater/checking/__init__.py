"""After the fit: posterior prediction and checks, LOO/WAIC and comparison, calibration, scoring, plots.

The statistics for :func:`pyrater.posterior_predictive_check` are importable from here:
:class:`Statistic`, :class:`Discrepancy` and the ready-made :func:`vote_histogram`,
:func:`category_shares` and :func:`pair_agreement` (see :mod:`pyrater.checking.statistics`).
"""

from .statistics import (
    Discrepancy,
    DrawParameters,
    Ratings,
    Statistic,
    category_shares,
    pair_agreement,
    vote_histogram,
)

__all__ = [
    "Discrepancy",
    "DrawParameters",
    "Ratings",
    "Statistic",
    "category_shares",
    "pair_agreement",
    "vote_histogram",
]
