"""The fit result API shared by every method (EM, Stan MCMC, Stan optimisation).

Every result answers the same accessors with the user's labels:

* :meth:`Fit.point_estimate` -- ``"pi"`` (Series over categories), ``"theta"``
  (DataArray with dims ``rater, category, rating``) or ``"z"`` (Series of
  the most probable class per item);
* :meth:`Fit.class_probabilities` -- DataFrame, items x categories;
* :meth:`Fit.posterior_samples` and :meth:`Fit.posterior_interval` -- for
  fits with draws; point-estimate fits raise :class:`NotImplementedError`
  with the reason.

Dims are named ``item`` (``pattern`` for grouped data), ``rater``,
``category`` (the true class) and ``rating`` (the observed label), so
``theta[rater, category, rating] = P(rating | category)``.
Intervals default to 90% (rater's convention; ArviZ's default is 89%).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
import xarray as xr

from .data import RatingData
from .models import Model

__all__ = ["Fit", "DEFAULT_PROB"]

DEFAULT_PROB = 0.9
Which = Literal["pi", "theta", "z"]


class Fit:
    """Base class of all fit results.

    Subclasses set ``data``, ``model`` and ``method`` and implement
    :meth:`_point` (point estimates of pi (K,) and theta (J, K, K)) and
    :meth:`_class_probs` (array (I, K)); fits with draws also implement
    :meth:`_draws`.
    """

    data: RatingData
    model: Model
    method: str

    # ---------------------------------------------------------- to implement
    def _point(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _class_probs(self) -> np.ndarray:
        raise NotImplementedError

    def _draws(self) -> tuple[np.ndarray, np.ndarray]:
        """pi draws (S, K) and theta draws (S, J, K, K)."""
        raise NotImplementedError(
            f"a {self.method} fit holds a point estimate, not posterior draws; refit with method='mcmc'"
        )

    @property
    def has_draws(self) -> bool:
        """True for fits with posterior draws (MCMC)."""
        return False

    # --------------------------------------------------------------- labels
    @property
    def _unit_dim(self) -> str:
        return "pattern" if self.data.is_grouped else "item"

    def _label(self, arr: np.ndarray, which: str, sample_dim: str | None = None):
        d = self.data
        cats = list(d.categories)
        if which == "pi":
            if sample_dim is None:
                return pd.Series(arr, index=pd.Index(cats, name="category"), name="pi")
            return xr.DataArray(arr, dims=(sample_dim, "category"), coords={"category": cats}, name="pi")
        dims = ("rater", "category", "rating")
        coords = {"rater": list(d.rater_labels), "category": cats, "rating": cats}
        if sample_dim is not None:
            dims = (sample_dim, *dims)
        return xr.DataArray(arr, dims=dims, coords=coords, name="theta")

    # ------------------------------------------------------------ accessors
    def point_estimate(self, which: Which = "pi"):
        """Point estimate: posterior means for MCMC, the mode for optimisation/EM.

        Parameters
        ----------
        which : {"pi", "theta", "z"}

        Returns
        -------
        pandas.Series (pi: over categories; z: most probable class per item)
        or xarray.DataArray (theta: dims rater, category, rating).
        """
        if which == "z":
            probs = self._class_probs()
            z = self.data.categories.to_numpy()[np.argmax(probs, axis=1)]
            return pd.Series(z, index=self.data.unit_labels.rename(self._unit_dim), name="z")
        if which not in ("pi", "theta"):
            raise ValueError(f"which must be 'pi', 'theta' or 'z', got {which!r}")
        pi, theta = self._point()
        return self._label(pi if which == "pi" else theta, which)

    def class_probabilities(self) -> pd.DataFrame:
        """P(z_i = k | data): DataFrame of shape (items, categories).

        Rao-Blackwellised for MCMC (average over draws of the conditional
        probabilities given pi and theta); conditional on the estimate for
        optimisation and EM.  For grouped data, one row per pattern.
        """
        return pd.DataFrame(
            self._class_probs(),
            index=self.data.unit_labels.rename(self._unit_dim),
            columns=pd.Index(list(self.data.categories), name="category"),
        )

    def posterior_samples(self, which: Literal["pi", "theta"] = "pi") -> xr.DataArray:
        """Posterior draws with a leading ``draw`` dim (chains concatenated)."""
        if which not in ("pi", "theta"):
            raise ValueError(f"which must be 'pi' or 'theta', got {which!r}")
        pi, theta = self._draws()
        return self._label(pi if which == "pi" else theta, which, sample_dim="draw")

    def posterior_interval(self, prob: float = DEFAULT_PROB, which: Literal["pi", "theta"] = "pi") -> xr.DataArray:
        """Central posterior intervals with probability ``prob``.

        Returns a DataArray with a leading ``bound`` dim (``lower``, ``upper``).
        """
        if not 0 < prob < 1:
            raise ValueError(f"prob must be in (0, 1), got {prob!r}")
        draws = self.posterior_samples(which)
        q = draws.quantile([(1 - prob) / 2, (1 + prob) / 2], dim="draw")
        return q.rename(quantile="bound").assign_coords(bound=["lower", "upper"])
