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

import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import xarray as xr

from .data import RatingData
from .models import Model

__all__ = ["Fit", "FitSummary", "DEFAULT_PROB", "load"]

DEFAULT_PROB = 0.9
_SAVE_FORMAT = 1
Which = Literal["pi", "theta", "z"]


def parameter_names(data: RatingData) -> tuple[list[str], list[str]]:
    """Flat names ``pi[k]`` (K,) and ``theta[rater, k, l]`` (J*K*K,) with user labels."""
    cats = [str(c) for c in data.categories]
    pi_names = [f"pi[{c}]" for c in cats]
    theta_names = [f"theta[{r}, {k}, {l}]" for r in data.rater_labels for k in cats for l in cats]
    return pi_names, theta_names


@dataclass(frozen=True)
class FitSummary:
    """What :meth:`Fit.summary` returns; ``print()`` it for a readable report.

    Attributes
    ----------
    model : str
        Model title.
    priors : dict
        Resolved prior hyperparameters.
    method : str
    info : dict
        Method details (engine, chains, draws, run time, convergence, ...).
    parameters : DataFrame
        One row per parameter (pi, then theta[rater, category, rating]):
        ``mean`` (or ``estimate``), interval bounds, and for MCMC ``rhat``
        and ``ess_bulk``.
    classes : DataFrame
        Per item: the most probable class ``z`` and the class probabilities.
    """

    model: str
    priors: dict
    method: str
    info: dict
    parameters: pd.DataFrame
    classes: pd.DataFrame

    def __str__(self) -> str:
        lines = [f"{self.model} fitted by {self.method}"]
        for key, value in self.info.items():
            lines.append(f"  {key}: {value}")
        lines.append("Priors:")
        for key, value in self.priors.items():
            arr = np.asarray(value)
            text = np.array2string(arr, precision=3, threshold=12) if arr.size <= 16 else (
                f"array of shape {arr.shape}, range [{arr.min():.3g}, {arr.max():.3g}]"
            )
            lines.append(f"  {key}: {text}")
        with pd.option_context("display.max_rows", 40, "display.width", 120):
            lines += ["Parameters:", self.parameters.round(3).to_string()]
            lines += ["Classes:", self.classes.round(3).to_string()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:  # pragma: no cover - notebook display
        return "<pre>" + str(self).replace("&", "&amp;").replace("<", "&lt;") + "</pre>"


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

    # ---------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        """Save the fit (data, estimates or draws, settings) to ``path`` (pickle).

        Load it back with :func:`pyrater.load`.  As with any pickle, only
        load files you trust.
        """
        path = Path(path)
        with path.open("wb") as fh:
            pickle.dump({"format": _SAVE_FORMAT, "fit": self}, fh, protocol=pickle.HIGHEST_PROTOCOL)
        return path

    # -------------------------------------------------------------- summary
    def _summary_info(self) -> dict[str, Any]:
        return {}

    def _priors(self) -> dict[str, np.ndarray]:
        return self.model.priors(self.data.n_categories, self.data.n_raters)

    def _diagnostics_table(self) -> pd.DataFrame | None:
        return None

    def summary(self, prob: float = DEFAULT_PROB) -> FitSummary:
        """Model, priors and method; a table of pi and theta; classes per item.

        For fits with draws the table has the posterior mean, the central
        ``prob`` interval, ``rhat`` and ``ess_bulk``; otherwise the point
        estimate.
        """
        pi_names, theta_names = parameter_names(self.data)
        index = pd.Index(pi_names + theta_names, name="parameter")
        if self.has_draws:
            pi, theta = self._draws()
            flat = np.concatenate([pi, theta.reshape(theta.shape[0], -1)], axis=1)
            lo, hi = (1 - prob) / 2, (1 + prob) / 2
            table = pd.DataFrame(
                {
                    "mean": flat.mean(axis=0),
                    f"{100 * lo:g}%": np.quantile(flat, lo, axis=0),
                    f"{100 * hi:g}%": np.quantile(flat, hi, axis=0),
                },
                index=index,
            )
            diag = self._diagnostics_table()
            if diag is not None:
                table = table.join(diag[["rhat", "ess_bulk"]])
        else:
            pi, theta = self._point()
            table = pd.DataFrame({"estimate": np.concatenate([pi, theta.ravel()])}, index=index)
        return FitSummary(
            model=self.model.title,
            priors=self._priors(),
            method=self.method,
            info=self._summary_info(),
            parameters=table,
            classes=self._summary_classes(),
        )

    def _summary_classes(self) -> pd.DataFrame:
        """The summary's per-item table: most probable class ``z`` and the class probabilities."""
        probs = self.class_probabilities()
        classes = probs.copy()
        classes.insert(0, "z", self.point_estimate("z"))
        return classes


def load(path: str | Path) -> Fit:
    """Load a fit saved with ``fit.save(path)``.  Only load files you trust (pickle)."""
    with Path(path).open("rb") as fh:
        obj = pickle.load(fh)
    if not isinstance(obj, dict) or obj.get("format") != _SAVE_FORMAT or not isinstance(obj.get("fit"), Fit):
        raise ValueError(f"{path} is not a pyrater fit file (format {_SAVE_FORMAT})")
    return obj["fit"]
