"""Probit Dawid-Skene for correlated binary annotators, with bootstrap group counts.

J annotators give 0/1 labels (NaN = missing); a validation set has gold
labels; test items belong to groups.  Given the true class ``k`` the latent
scores are ``y* ~ N(mu_k, R_k)`` and ``y_j = 1[y*_j > 0]``, with
``mu_k[j] = Phi^-1(P(y_j = 1 | z = k))`` and ``R_k`` a correlation matrix.
``P(y | z = k)`` is a multivariate normal orthant probability (quasi-Monte
Carlo; exact when ``R = I``), and ``P(z = 1 | y)`` follows by Bayes' rule.

Main entry point: :class:`ProbitDawidSkene` and its :meth:`~ProbitDawidSkene.bootstrap`,
returning :class:`GroupCounts` (per-group distributions of the number of
positives, proportions and population totals, with the variance split into
realisation and epistemic parts).

Modules
-------
orthant      orthant probabilities (Genz / Sobol QMC, closed form for R = I)
estimation   rates, tetrachoric and signed-probit correlations
bootstrap    the model, the bootstrap and its result
plots        per-group distribution plot
simulate     simulated correlated annotators (tests, benchmark, calibration)
calibration  the coverage study
"""

from .bootstrap import (
    DEFAULT_PROB,
    BootstrapSettings,
    GroupCounts,
    PriorConflict,
    PriorConflictWarning,
    ProbitDawidSkene,
    estimate_prevalence,
    prior_conflict,
)
from .calibration import calibration_study, coverage_table
from .estimation import (
    CORRELATION_METHODS,
    ProbitParameters,
    confusion_rates,
    estimate_parameters,
    nearest_correlation,
    signed_probit_correlation,
    tetrachoric,
)
from .orthant import bvn_cdf, encode_patterns, orthant_log_prob, sobol_points
from .plots import plot_group_counts
from .simulate import SimulatedStudy, equicorrelation, simulate_labels, simulate_study

__all__ = [
    "ProbitDawidSkene",
    "GroupCounts",
    "BootstrapSettings",
    "ProbitParameters",
    "DEFAULT_PROB",
    "CORRELATION_METHODS",
    "estimate_parameters",
    "estimate_prevalence",
    "prior_conflict",
    "PriorConflict",
    "PriorConflictWarning",
    "confusion_rates",
    "tetrachoric",
    "signed_probit_correlation",
    "nearest_correlation",
    "orthant_log_prob",
    "bvn_cdf",
    "encode_patterns",
    "sobol_points",
    "plot_group_counts",
    "simulate_study",
    "simulate_labels",
    "equicorrelation",
    "SimulatedStudy",
    "calibration_study",
    "coverage_table",
]
