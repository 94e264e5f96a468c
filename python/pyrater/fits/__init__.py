"""Fit results: one :class:`Fit` base with the accessors every method answers.

Draws-based fits (:class:`DrawsFit`): :class:`MCMCFit` (NUTS), :class:`GibbsFit`
and :class:`PathfinderFit`.  Mode fits (:class:`ModeFit`): :class:`OptimizeFit`
(Stan's optimiser) and :class:`EMFit`.  :func:`load` and ``Fit.save`` read and
write fit files (:mod:`pyrater.fits.fitfile`).  Imports from
:mod:`pyrater.data` and :mod:`pyrater.models` only.
"""

from __future__ import annotations

from .base import DEFAULT_PROB, Fit, FitSummary, load
from .draws import DrawsFit
from .em import EMFit
from .fitfile import FitFileError
from .gibbs import GibbsFit
from .mcmc import MCMCFit
from .mode import ModeFit
from .optimize import OptimizeFit
from .pathfinder import PathfinderFit

__all__ = [
    "Fit",
    "FitSummary",
    "DrawsFit",
    "ModeFit",
    "MCMCFit",
    "GibbsFit",
    "PathfinderFit",
    "OptimizeFit",
    "EMFit",
    "load",
    "FitFileError",
    "DEFAULT_PROB",
]
