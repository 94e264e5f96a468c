"""A Stan model fitted by posterior-mode optimisation (:func:`pyrater.fit` with ``method="optimize"``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from ..data.ratings import RatingData
from ..models import Model
from .mode import ModeFit

__all__ = ["OptimizeFit"]


@dataclass(eq=False, repr=False)
class OptimizeFit(ModeFit):
    """A Stan model fitted by posterior-mode optimisation.

    Attributes
    ----------
    params : dict of arrays
        Parameters at the best mode found (constrained scale).
    log_density : float
        Log posterior density (without Jacobian) at the mode, up to a constant.
    all_log_densities : array
        The value reached from every initialisation.
    converged : array of bool
        Convergence flag of every initialisation.
    """

    data: RatingData
    model: Model
    priors: dict
    params: dict
    known: np.ndarray | None
    engine: str
    log_density: float = float("nan")
    all_log_densities: np.ndarray = field(default_factory=lambda: np.array([]))
    converged: np.ndarray = field(default_factory=lambda: np.array([], dtype=bool))
    settings: dict = field(default_factory=dict)
    method: str = "optimize"

    def __repr__(self) -> str:  # one line: the parameters and priors are arrays (see summary())
        return (
            f"OptimizeFit({self.model.title}, engine={self.engine!r}, log_density={self.log_density:.6g}, "
            f"items={self.data.n_items}, raters={self.data.n_raters}, K={self.data.n_categories})"
        )

    def _point(self) -> tuple[np.ndarray, np.ndarray]:
        pi = np.asarray(self.params["pi"], dtype=float)
        theta = np.asarray(self.params["theta"], dtype=float)
        if theta.ndim == 2:
            theta = np.broadcast_to(theta, (self.data.n_raters, *theta.shape))
        return pi, theta

    def _own_source(self) -> dict:
        return self.params

    def _priors(self) -> dict[str, np.ndarray]:
        return self.priors

    def _summary_info(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "Stan version": self.settings.get("stan_version"),
            "log posterior at mode": round(float(self.log_density), 4),
            "initialisations": int(np.size(self.all_log_densities)),
            "converged": bool(np.all(self.converged)) if np.size(self.converged) else None,
        }

    def _groups(self) -> dict[str, xr.Dataset]:
        """The mode as a single draw (chain = draw = 1) and the observed data."""
        posterior = {k: np.asarray(v)[None, None] for k, v in self.params.items() if k != "log_lik"}
        return {"posterior": self._dataset(posterior), "observed_data": self._observed_data()}
