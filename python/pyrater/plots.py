"""Plots of a fit: raters, class probabilities, prevalence, posterior predictive checks, traces and ranks.

The public namespace ``pyrater.plots``; the functions live in :mod:`pyrater.checking.plots`.
"""

from __future__ import annotations

from .checking.plots import (
    plot_class_probabilities,
    plot_ppc,
    plot_prevalence,
    plot_rank,
    plot_rater_accuracy,
    plot_raters,
    plot_sbc,
    plot_trace,
)

__all__ = [
    "plot_raters",
    "plot_rater_accuracy",
    "plot_class_probabilities",
    "plot_prevalence",
    "plot_ppc",
    "plot_trace",
    "plot_rank",
    "plot_sbc",
]
