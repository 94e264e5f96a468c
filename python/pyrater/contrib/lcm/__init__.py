"""Latent class model with a latent dependence graph (bronze and silver standard).

Mean-field variational inference in numpy/scipy for multi-label latent truth
measured by imperfect tests (e.g. which of K pathogens a case carries), with
an Ising prior over a latent graph.  See :mod:`pyrater.contrib.lcm.model` for the
model and ``docs/lcm_derivation.md`` for the derivation of every update.

Public names
------------
:class:`LatentGraphLCM`, :class:`LCMPriors`, :class:`LCMParams`,
:class:`LCMResult`, :func:`as_lcm_data`, :class:`LCMData`,
:class:`LCMDataError`, :func:`simulate_lcm`, :func:`pyrater.contrib.lcm.default_truth`,
:func:`exact_posterior`, :func:`log_partition`, :func:`auc`,
:func:`plot_graph`, :func:`plot_rates`.
"""

from .data import LCMData, LCMDataError, as_lcm_data
from .exact import auc, exact_posterior, log_partition
from .model import DEFAULT_PROB, LatentGraphLCM, LCMParams, LCMPriors, LCMResult
from .plots import plot_graph, plot_rates
from .simulate import SimulatedLCM, default_truth, simulate_lcm

__all__ = [
    "LatentGraphLCM",
    "LCMPriors",
    "LCMParams",
    "LCMResult",
    "LCMData",
    "LCMDataError",
    "as_lcm_data",
    "simulate_lcm",
    "SimulatedLCM",
    "default_truth",
    "exact_posterior",
    "log_partition",
    "auc",
    "plot_graph",
    "plot_rates",
    "DEFAULT_PROB",
]
