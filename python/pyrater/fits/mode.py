"""Mode fits: a point estimate (posterior mode or maximum likelihood) and the class probabilities at it.

:class:`ModeFit` is the base of :class:`~pyrater.fits.optimize.OptimizeFit`
(Stan's optimiser) and :class:`~pyrater.fits.em.EMFit` (EM).  Accessors that
need draws (``posterior_samples``, ``posterior_interval``, Rhat, LOO) raise
with the reason; the estimate is exported to ArviZ as a single draw.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ..models.kernels import class_log_posterior
from .base import Fit
from .draws import safe_log

__all__ = ["ModeFit"]


class ModeFit(Fit):
    """A point-estimate fit; subclasses provide :meth:`_point` and ``known``."""

    known: np.ndarray | None

    @cached_property
    def _probs(self) -> np.ndarray:
        pi, theta = self._point()
        log_post, _ = class_log_posterior(self.data.counts, safe_log(pi), safe_log(theta), known=self.known)
        return np.exp(log_post)

    def _class_probs(self) -> np.ndarray:
        return self._probs
