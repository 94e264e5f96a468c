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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import xarray as xr

from .._validation import label_repr
from ..data.ratings import RatingData
from ..models import Model

__all__ = ["Fit", "FitSummary", "DEFAULT_PROB", "load", "SUMMARY_MAX_ROWS"]

DEFAULT_PROB = 0.9
Which = Literal["pi", "theta", "z"]
#: entries of a fit's parameters that are not the model's own (:meth:`Fit.model_parameters`)
_NOT_OWN = ("pi", "theta", "log_lik")

#: Named dims of the model parameters in the ArviZ groups (after ``chain, draw``).
VAR_DIMS: dict[str, tuple[str, ...]] = {
    "pi": ("category",),
    "theta": ("rater", "category", "rating"),
    "p": ("rater", "category"),
    "mu": ("category", "rating"),
    "sigma": ("category", "rating"),
    "m": ("category", "rating"),
    "s": ("category",),
    "gamma_raw": ("rater", "category", "rating"),
    "shift": ("rater",),
    "log_scale": ("rater",),
    "lapse": ("rater",),
    "competence": ("rater",),
    "xi": ("rater", "rating"),
    "log_lik": ("item",),
    "rho": ("community",),
    "community_prob": ("rater", "community"),
    "logit_accuracy": ("rater", "category"),
}


def var_dims(name: str, shape: tuple[int, ...]) -> tuple[str, ...]:
    """Dims of parameter ``name`` with (non-sample) ``shape``; ``name_dim_i`` for unknown ones.

    The homogeneous model's theta (one matrix for all raters) is ``(category, rating)``;
    the one-coin model's ``p`` (one accuracy per rater) is ``(rater,)``.
    """
    dims = VAR_DIMS.get(name)
    if name == "theta" and len(shape) == 2:
        dims = ("category", "rating")
    if name == "p" and len(shape) == 1:
        dims = ("rater",)
    if name == "m" and len(shape) == 3:  # the community model's: one matrix per community
        dims = ("community", "category", "rating")
    if name == "s" and len(shape) == 2:
        dims = ("community", "category")
    if dims is None or len(dims) != len(shape):
        dims = tuple(f"{name}_dim_{i}" for i in range(len(shape)))
    return dims


def parameter_names(data: RatingData) -> tuple[list[str], list[str]]:
    """Flat names ``pi[k]`` (K,) and ``theta[rater, k, l]`` (J*K*K,) with user labels."""
    cats = [str(c) for c in data.categories]
    pi_names = [f"pi[{c}]" for c in cats]
    theta_names = [f"theta[{r}, {k}, {l}]" for r in data.rater_labels for k in cats for l in cats]
    return pi_names, theta_names


#: ``print(summary)`` lists every row of a table up to this many rows, else a bounded view
SUMMARY_MAX_ROWS = 40
#: rows of the bounded view: the parameters with the largest Rhat (or widest intervals), the least certain items
SUMMARY_SHOW_ROWS = 10


@dataclass(frozen=True)
class FitSummary:
    """What :meth:`Fit.summary` returns; ``print()`` it for a readable report.

    Printing shows a bounded view, like pandas' repr of a long frame: every
    row of a short table, and of a long one the rows worth a look first
    (pi; the parameters with the largest Rhat, or the widest intervals when
    there is no Rhat; the items whose class is least certain), with a line
    saying how many rows are left out.  The full tables are the attributes
    :attr:`parameters` and :attr:`classes`.

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

    def parameters_view(self, n: int = SUMMARY_SHOW_ROWS) -> pd.DataFrame:
        """The parameters a reader should see first: all rows of a short table, else pi and the ``n`` most doubtful.

        Most doubtful: the largest Rhat when the table has one, else the widest
        interval, else (a point estimate) the first rows.
        """
        table = self.parameters
        if len(table) <= SUMMARY_MAX_ROWS:
            return table
        is_pi = table.index.str.startswith("pi[")
        rest = table[~is_pi]
        if "rhat" in rest.columns and rest["rhat"].notna().any():
            pick = rest.sort_values("rhat", ascending=False, na_position="last").head(n)
        elif rest.shape[1] >= 3 and "mean" in rest.columns:
            width = rest.iloc[:, 2] - rest.iloc[:, 1]
            pick = rest.loc[width.sort_values(ascending=False).index[:n]]
        else:
            pick = rest.head(n)
        return pd.concat([table[is_pi], pick])

    def classes_view(self, n: int = SUMMARY_SHOW_ROWS) -> pd.DataFrame:
        """All items of a short table, else the ``n`` whose most probable class is least certain."""
        table = self.classes
        if len(table) <= SUMMARY_MAX_ROWS // 2:
            return table
        probs = table.drop(columns="z", errors="ignore").to_numpy(dtype=float)
        top = np.nanmax(probs, axis=1) if probs.size else np.zeros(len(table))
        order = np.argsort(top, kind="stable")[:n]
        return table.iloc[order]

    def __str__(self) -> str:
        return self.to_string()

    def to_string(self, full: bool = False) -> str:
        """The report as text: bounded tables (as ``print(summary)``), or every row with ``full=True``.

        Parameters
        ----------
        full : bool, default False
            Print every parameter and every item instead of pi, the most doubtful
            parameters and the least certain items (what a file report wants).
        """
        lines = [f"{self.model} fitted by {self.method}"]
        for key, value in self.info.items():
            lines.append(f"  {key}: {value}")
        lines.append("Priors:")
        for key, value in self.priors.items():
            arr = np.asarray(value)
            text = (
                np.array2string(arr, precision=3, threshold=12)
                if arr.size <= 16
                else (f"array of shape {arr.shape}, range [{arr.min():.3g}, {arr.max():.3g}]")
            )
            lines.append(f"  {key}: {text}")
        if full:
            params, classes = self.parameters, self.classes
        else:
            params, classes = self.parameters_view(), self.classes_view()
        max_rows = None if full else SUMMARY_MAX_ROWS + 20
        with pd.option_context("display.max_rows", max_rows, "display.width", 120):
            lines += ["Parameters:", params.round(3).to_string()]
            if len(params) < len(self.parameters):
                what = (
                    "largest Rhat"
                    if "rhat" in params.columns and params["rhat"].notna().any()
                    else "widest intervals"
                    if "mean" in params.columns
                    else "first rows"
                )
                lines.append(
                    f"  ... pi and the {len(params) - int(params.index.str.startswith('pi[').sum())} parameters "
                    f"with the {what} of {len(self.parameters):,}; all: summary.parameters"
                )
            lines += ["Classes:", classes.round(3).to_string()]
            if len(classes) < len(self.classes):
                lines.append(
                    f"  ... the {len(classes)} least certain of {len(self.classes):,} items; all: summary.classes"
                )
        return "\n".join(lines)

    def _repr_html_(self) -> str:  # pragma: no cover - notebook display
        return "<pre>" + str(self).replace("&", "&amp;").replace("<", "&lt;") + "</pre>"


class Fit:
    """Base class of every fit: the accessors every method answers, with the data's own labels.

    Attributes
    ----------
    data : RatingData
        The data the model was fitted to.
    model : model object
        The model family, with its priors.
    method : str
        How it was fitted (``"mcmc"``, ``"gibbs"``, ``"pathfinder"``, ``"optimize"``,
        ``"em_ml"``, ``"em_map"``).
    """

    # A subclass implements _point() -> (pi (K,), theta (J, K, K)) and _class_probs() -> (I, K);
    # fits with draws also _draws() -> (pi (S, K), theta (S, J, K, K)).

    data: RatingData
    model: Model
    method: str

    # ---------------------------------------------------------- to implement
    def _point(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _class_probs(self) -> np.ndarray:
        raise NotImplementedError

    def _draws(self) -> tuple[np.ndarray, np.ndarray]:
        """Pi draws (S, K) and theta draws (S, J, K, K)."""
        raise NotImplementedError(self._no_draws("posterior draws"))

    def _no_draws(self, what: str) -> str:
        """Why a point fit has no ``what``, and the samplers that fit its family."""
        samplers = [m for m in ("gibbs", "mcmc") if m in getattr(self.model, "methods", ("mcmc",))] or ["mcmc"]
        return (
            f"this {self.method} fit holds a point estimate, not {what}; refit with pyrater.fit(..., "
            + " or ".join(f"method={m!r}" for m in samplers)
            + ")"
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
        dims: tuple[str, ...] = ("rater", "category", "rating")
        coords = {"rater": list(d.rater_labels), "category": cats, "rating": cats}
        if sample_dim is not None:
            dims = (sample_dim, *dims)
        return xr.DataArray(arr, dims=dims, coords=coords, name="theta")

    # ------------------------------------------------------------ accessors
    def point_estimate(self, which: Which | str = "pi"):
        """Point estimate: posterior means for MCMC, the mode for optimisation/EM.

        Parameters
        ----------
        which : {"pi", "theta", "z"} or str
            Or one of the model's own parameters (:meth:`model_parameters`):
            MACE's ``"competence"`` and ``"xi"``, the one-coin model's ``"p"``,
            the pooled model's ``"m"`` and ``"s"``, ...

        Returns
        -------
        pandas.Series (pi: over categories; z: most probable class per item)
        or xarray.DataArray (theta: dims rater, category, rating; a model's own
        parameter: its dims, e.g. ``competence`` over rater).
        """
        if which == "z":
            probs = self._class_probs()
            z = self.data.categories.to_numpy()[np.argmax(probs, axis=1)]
            return pd.Series(z, index=self.data.unit_labels.rename(self._unit_dim), name="z")
        if which in ("pi", "theta"):
            pi, theta = self._point()
            return self._label(pi if which == "pi" else theta, which)
        own = self.model_parameters()
        if isinstance(which, str) and which in own:
            return self._dataset({which: np.asarray(self._own_value(which), dtype=float)}, sample_dims=())[which]
        also = f", or one of this model's own: {', '.join(repr(n) for n in own)}" if own else ""
        raise ValueError(f"which must be 'pi', 'theta' or 'z'{also}; got {which!r}")

    def model_parameters(self) -> list[str]:
        """The model's own parameters besides pi and theta, as :meth:`point_estimate` takes them.

        E.g. ``["competence", "xi"]`` for MACE, ``["p"]`` for the one-coin
        model, ``[]`` for Dawid-Skene; named as in the family's Stan program.
        """
        return [n for n in self._own_source() if n not in _NOT_OWN and not n.endswith("_raw")]

    def _own_source(self) -> Mapping[str, Any]:
        """Where the model's own parameters are: the estimates, or the draws (keys read, values on demand)."""
        return {}

    def _own_value(self, name: str) -> np.ndarray:
        """The point estimate of the model's own parameter ``name`` (the fit's mode, or posterior mean)."""
        return np.asarray(self._own_source()[name], dtype=float)

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

    # ----------------------------------------------------------- arviz
    def _coords(self) -> dict[str, list[Any]]:
        """The user's labels for the named dims of the ArviZ groups."""
        d = self.data
        items = list(range(1, d.n_items + 1)) if d.is_grouped else list(d.unit_labels)
        return {
            "category": list(d.categories),
            "rating": list(d.categories),
            "rater": list(d.rater_labels),
            "item": items,
        }

    def _dataset(self, arrays: dict[str, np.ndarray], sample_dims: tuple[str, ...] = ("chain", "draw")) -> xr.Dataset:
        """A Dataset of ``arrays`` (each ``(chain, draw, *shape)``) with named dims and label coords."""
        coords = self._coords()
        variables: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
        used: dict[str, list[Any] | np.ndarray] = {}
        for name, value in arrays.items():
            value = np.asarray(value)
            dims = (*sample_dims, *var_dims(name, value.shape[len(sample_dims) :]))
            variables[name] = (dims, value)
            for dim, size in zip(dims, value.shape):
                if dim in coords:
                    used[dim] = coords[dim]
                elif dim in ("chain", "draw"):
                    used[dim] = np.arange(size)
        return xr.Dataset(variables, coords=used)

    def _observed_data(self) -> xr.Dataset:
        """The ratings in long form (grouped data expanded to items), one entry per rating."""
        obs = self.data.to_long()
        return xr.Dataset(
            {
                "item_obs": ("rating_index", np.asarray(obs.iloc[:, 0].astype(object))),
                "rater_obs": ("rating_index", np.asarray(obs.iloc[:, 1].astype(object))),
                "rating_obs": ("rating_index", np.asarray(obs.iloc[:, 2].astype(object))),
            }
        )

    def _groups(self) -> dict[str, xr.Dataset]:
        """ArviZ groups as plain Datasets: ``posterior`` (the estimate as one draw) and ``observed_data``.

        Fits with draws override this (adding ``log_likelihood`` and ``sample_stats``).
        """
        pi, theta = self._point()
        return {
            "posterior": self._dataset({"pi": np.asarray(pi)[None, None], "theta": np.asarray(theta)[None, None]}),
            "observed_data": self._observed_data(),
        }

    def _attrs(self) -> dict[str, Any]:
        attrs = {"inference_library": "pyrater", "model": self.model.name, "method": self.method}
        engine = getattr(self, "engine", None)
        if engine is not None:
            attrs["engine"] = str(engine)
        stan_version = (getattr(self, "settings", None) or {}).get("stan_version")
        if stan_version:
            attrs["stan_version"] = str(stan_version)
        return attrs

    def to_inference_data(self):
        """The fit in ArviZ's format, with named dims and the user's labels as coordinates.

        Returns ``arviz.InferenceData`` under ArviZ 0.x (Python 3.11) and
        ``xarray.DataTree`` under ArviZ 1.x (Python >= 3.12): the same
        groups, variables, dims and coordinates on both, so ``idata.posterior["pi"]``
        and ``az.loo(idata)`` / ``az.summary(idata)`` work on either line.

        Notes
        -----
        The groups:

        posterior
            ``pi[chain, draw, category]``, ``theta[chain, draw, rater, category, rating]``
            (``theta[chain, draw, category, rating]`` for the homogeneous model) and
            model-specific parameters (``p[rater, category]``; ``mu``, ``sigma``
            ``[category, rating]``).  Fits without draws (EM, optimisation) hold
            their point estimate as a single draw (``chain = draw = 1``): useful
            for uniform downstream code, but LOO, WAIC, Rhat and ESS need MCMC.
        log_likelihood
            Fits with draws: ``log_lik[chain, draw, item]``; for grouped data one
            column per item (each pattern's value repeated by its tally), so LOO
            treats items as the unit.
        sample_stats
            MCMC: ``diverging``, ``tree_depth``, ``lp``, ... per draw.
        observed_data
            The ratings in long form: ``item_obs``, ``rater_obs``,
            ``rating_obs`` over ``rating_index``.
        """
        from .. import _arviz

        return _arviz.build(self._groups(), self._attrs())

    def mcmc_diagnostics(self, warn: bool = True) -> pd.DataFrame:
        """Rhat and ESS per parameter: only for fits with MCMC draws.

        Raises
        ------
        NotImplementedError
            For point-estimate fits (EM, optimisation), naming the samplers that fit the family.
        """
        raise NotImplementedError(self._no_draws("MCMC draws, so it has no Rhat or ESS to report"))

    # ---------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        """Save the fit to one data-only file (netCDF4/HDF5, no pickle); returns the path.

        Load it back with :func:`pyrater.load` (same class, same numbers from
        every accessor).  The file holds ArviZ's groups (``posterior``;
        ``log_likelihood`` and ``sample_stats`` for MCMC; ``observed_data``),
        the rating data (group ``rating_data``: codes, labels and tallies) and
        a JSON settings block (root attribute ``pyrater_fit``: model, priors,
        method, engine, seed, known items, settings, versions, format name and
        version, with its SHA-256 beside it); the layout is described in
        :mod:`pyrater.fits.fitfile`.

        Every number is stored in checksummed chunks of whole draws; integers
        are compressed, floating-point draws stored as they are, so the file
        takes about 8 bytes per kept number (``8 x chains x draws x (K +
        J*K*K)`` for Dawid-Skene, plus ``8 x chains x draws x items`` when the
        fit keeps ``log_lik``) and a few bytes per rating.  The file is
        written under a temporary name and moved into place when complete.
        (``pyrater.fits.fitfile.save_fit(fit, path, log_lik=False)`` leaves
        the per-item log-likelihood out.)

        It opens without pyrater:

        * ArviZ 0.x: ``az.from_netcdf(path)`` (an ``InferenceData``; the
          pyrater groups appear as extra groups);
        * ArviZ 1.x / xarray: ``xarray.open_datatree(path)`` or
          ``az.from_netcdf(path)`` (a ``DataTree``);
        * any netCDF4/HDF5 reader (``h5py``, ``netCDF4``, R's ``ncdf4``).

        ``az.loo(az.from_netcdf(path))`` works on an MCMC fit's file.  Labels
        must be strings or numbers.  Suggested suffix: ``.nc``.
        """
        from .fitfile import save_fit

        return save_fit(self, path)

    # -------------------------------------------------------------- summary
    def _summary_info(self) -> dict[str, Any]:
        return {}

    @property
    def model_choice(self) -> Any:
        """How ``pyrater.fit(data, "auto")`` chose this fit's model, else None.

        A :class:`pyrater.fits.choice.ModelChoice` (also importable from
        :mod:`pyrater.checking.choose`): the chosen family,
        the one-line reason (shown by :meth:`summary`), the comparison table
        and every candidate's fit.  A fit file keeps all of it but the
        candidates' fits: after :func:`pyrater.load`, ``fits`` is empty.
        """
        return self.__dict__.get("_model_choice")

    def _priors(self) -> dict[str, np.ndarray]:
        return self.model.priors(self.data.n_categories, self.data.n_raters)

    def _diagnostics_table(self) -> pd.DataFrame | None:
        return None

    def _interval_table(self, prob: float) -> pd.DataFrame:
        """Fits with draws: mean and central ``prob`` interval per parameter (see :class:`DrawsFit`)."""
        raise NotImplementedError

    def summary(self, prob: float = DEFAULT_PROB) -> FitSummary:
        """Model, priors and method; a table of pi and theta; classes per item.

        For fits with draws the table has the posterior mean, the central
        ``prob`` interval, ``rhat`` and ``ess_bulk``; otherwise the point
        estimate.  ``print()`` shows a bounded view (pi, the parameters with
        the largest Rhat, the least certain items); the full tables are
        ``summary.parameters`` and ``summary.classes``.

        At crowd scale every part is a compiled pass with bounded memory: the
        class probabilities one fused pass over the counts per draw, the means,
        intervals, Rhat and ESS one sort per parameter; both are cached on the
        fit, so a second ``summary()`` (or ``mcmc_diagnostics()``,
        ``class_probabilities()``) costs nothing.

        ``info["classes without items"]`` names any class the fit puts less
        than half an item in although raters give its category in at least
        1% of their ratings: every such rating is then explained as an error.
        That can be right (a "can't tell" answer no item deserves) or a sign
        that the model cannot tell the classes apart; compare the families
        (``pyrater.compare``) before trusting it.
        """
        if not 0 < prob < 1:
            raise ValueError(f"prob must be in (0, 1), got {prob!r}")
        if self.has_draws:
            n_rows = sum(len(names) for names in parameter_names(self.data))
            table = self._interval_table(prob).iloc[:n_rows]  # pi and theta (the model's own parameters follow)
            diag = self._diagnostics_table()
            if diag is not None:
                rhat, ess = (diag[c].to_numpy()[:n_rows] for c in ("rhat", "ess_bulk"))
                table = table.assign(rhat=rhat, ess_bulk=ess)
        else:
            pi_names, theta_names = parameter_names(self.data)
            index = pd.Index(pi_names + theta_names, name="parameter")
            pi, theta = self._point()
            table = pd.DataFrame({"estimate": np.concatenate([pi, theta.ravel()])}, index=index)
        info = self._summary_info()
        empty = _classes_without_items(table.iloc[: self.data.n_categories, 0].to_numpy(dtype=float), self.data)
        if empty:
            info["classes without items"] = empty
        if self.model_choice is not None:
            info["model choice"] = self.model_choice.reason
        return FitSummary(
            model=self.model.title,
            priors=self._priors(),
            method=self.method,
            info=info,
            parameters=table,
            classes=self._summary_classes(),
        )

    def _summary_classes(self) -> pd.DataFrame:
        """The summary's per-item table: most probable class ``z`` and the class probabilities."""
        probs = self.class_probabilities()
        classes = probs.copy()
        classes.insert(0, "z", self.point_estimate("z"))
        return classes


#: a category raters give in at least this share of their ratings is worth a class's note when no item is in it
EMPTY_CLASS_MIN_SHARE = 0.01


def _classes_without_items(pi: np.ndarray, data: RatingData) -> str:
    """The summary's note on classes the fit puts (almost) no item in although raters use their category.

    A class whose prevalence times the number of items is below one half holds
    no item at the estimate; when raters give that category in at least
    :data:`EMPTY_CLASS_MIN_SHARE` of their ratings, the fit explains every one
    of those ratings as an error.  That may be right (a "can't tell" answer no
    item deserves) or a sign that the model cannot tell the classes apart
    (an estimate at the edge of the simplex): worth a look either way.
    Returns "" when there is none, and for data on a Dask cluster (no pass
    over the partitions for a note).

    Parameters
    ----------
    pi : array, shape (K,)
        The fit's point estimate (or posterior mean) of the prevalence.
    data : RatingData
        The fitted data (unit weights count items).
    """
    if not isinstance(data, RatingData):  # DistributedRatingData: the counts live in the cluster's partitions
        return ""
    share = data.rating_counts().to_numpy(dtype=float)
    total = share.sum()
    if total <= 0:
        return ""
    share = share / total
    n_items = float(np.sum(data.weight))
    empty = np.flatnonzero((pi * n_items < 0.5) & (share >= EMPTY_CLASS_MIN_SHARE))
    if empty.size == 0:
        return ""
    shown = ", ".join(
        f"{label_repr(data.categories[k])} (pi {pi[k]:.2g}; {100 * share[k]:.0f}% of the ratings)" for k in empty
    )
    return f"{shown}: every rating of {'it' if empty.size == 1 else 'them'} is explained as an error"


def load(path: str | Path, allow_pickle: bool = False, *, lazy: bool = True) -> Fit:
    """Load a fit saved with ``fit.save(path)``.

    Reads only the parts the fit needs and checks every part against the
    others before using it (labels, codes, draws, priors, settings; see
    :mod:`pyrater.fits.fitfile` and the repository's ``SECURITY.md``); the
    memory the file's arrays would take is checked from their declared sizes
    before anything is read (at most 4 GiB: for a larger file you trust, use
    ``pyrater.fits.fitfile.load_fit(path, max_memory_gib=...)``).

    Parameters
    ----------
    path : str or Path
        A regular file (a FIFO, device or directory is refused without blocking).
    allow_pickle : bool
        Also read a pickle written by pyrater 0.1.  **Warning**: reading a
        pickle runs whatever code the file carries; use only on files you
        trust, and re-save the fit at once (``fit.save("fit.nc")``).
    lazy : bool
        Read the large per-draw arrays (``theta``, ``log_lik``) when the fit
        first uses them (default: loading a fit of 10^6 ratings takes a
        fraction of a second), or all at once (``False``).  Their structure,
        shapes and sizes are checked at load either way, their values when
        read; a lazily loaded fit raises ``FitFileError`` on first use if
        they are damaged, or if the file has changed or gone since.

    Returns
    -------
    Fit
        The class that was saved, answering every accessor with the same numbers.

    Raises
    ------
    pyrater.FitFileError
        (a ``ValueError``) naming the file, the part and the problem: not a
        pyrater fit file or not a regular file, truncated, corrupted or
        inconsistent, larger than the memory limit, written by a newer format
        version, or a 0.1 pickle without ``allow_pickle=True``.  Any other
        exception while reading becomes one too.
    FileNotFoundError, PermissionError
        No file at ``path``, or no permission to read it.
    """
    from .fitfile import load_fit

    return load_fit(path, allow_pickle=allow_pickle, lazy=lazy)
