"""Posterior predictive checks: statistics of the observed ratings against replicated data.

:func:`posterior_predictive_check` draws one set of replicated data sets
(:mod:`pyrater.checking.replicate`) and computes every statistic asked for on
each replicate as it is drawn: a vector statistic (a histogram, shares per
category) costs one pass, not one per component.  Statistics and
discrepancies are described in :mod:`pyrater.checking.statistics`.

p-values
--------
Per component, with ``T_rep`` the replicated and ``T_obs`` the observed
value (for a discrepancy, both at the same posterior draw)::

    p_upper = P(T_rep >= T_obs)        (p_value, as in earlier versions)
    p_lower = P(T_rep <= T_obs)
    p_two_sided = min(1, 2 * min(p_upper, p_lower))

Ties count in both tails (no mid-p correction): for a discrete statistic the
two one-sided values add to ``1 + P(T_rep = T_obs)`` and the two-sided value
is conservative -- it errs towards "no misfit".  Estimated from ``draws``
replicates, a p-value of 0 means "below ``1 / draws``".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validation import check_int, check_memory, check_probability
from ..fits.base import Fit
from ..models.kernels import log_joint
from .replicate import Design, check_design, observed_design, replicates
from .statistics import DrawParameters, Ratings, Statistic, as_statistic

__all__ = ["posterior_predictive_check", "PPCResult", "PPCResults", "tail_probabilities", "DEFAULT_PROBS"]

#: central intervals of the replicated values reported by default: 90% (5%-95%) and 98% (1%-99%)
DEFAULT_PROBS = (0.90, 0.98)


def tail_probabilities(replicated: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Upper, lower and two-sided posterior predictive p-values per component.

    Parameters
    ----------
    replicated : array, shape (draws, dim)
    observed : array, shape (dim,) or (draws, dim)
        The observed value (per draw for a discrepancy).

    Returns
    -------
    p_upper, p_lower, p_two_sided : arrays, shape (dim,)
        ``P(T_rep >= T_obs)``, ``P(T_rep <= T_obs)`` and
        ``min(1, 2 * min(p_upper, p_lower))`` (ties in both tails).
    """
    upper = np.mean(replicated >= observed, axis=0)
    lower = np.mean(replicated <= observed, axis=0)
    return upper, lower, np.minimum(1.0, 2.0 * np.minimum(upper, lower))


def _pct(q: float) -> str:
    return f"{round(100 * q, 6):g}%"


@dataclass(frozen=True)
class PPCResult:
    """Result of a posterior predictive check of one statistic.

    Attributes
    ----------
    statistic : str
        Name of the statistic.
    observed : float or array
        Its observed value: a float for a scalar statistic, shape (dim,) for
        a vector one; for a discrepancy, per draw: shape (draws,) or
        (draws, dim).
    simulated : array, shape (draws,) or (draws, dim)
        Its values on the replicated data sets (scalar or vector).
    p_value : float or array, shape (dim,)
        ``P(T_rep >= T_obs)`` (the upper tail, as in earlier versions).
    p_lower : float or array, shape (dim,)
        ``P(T_rep <= T_obs)``.
    p_two_sided : float or array, shape (dim,)
        ``min(1, 2 * min(p_value, p_lower))``; ties count in both tails (see
        :mod:`pyrater.checking.ppc`).
    components : Index, length dim
        Labels of the components (a scalar statistic: one, ``[statistic]``).
    probs : tuple of float
        Probabilities of the central intervals reported (e.g. 0.98: the 1%
        and 99% quantiles).
    design : {"same_items", "new_items"}
        How the replicates were drawn.
    discrepancy : bool
        True for a discrepancy ``T(y, params)``.
    plug_in : bool
        True for a point fit (the estimate stands in for every draw).
    """

    statistic: str
    observed: Any
    simulated: np.ndarray = field(repr=False)
    p_value: Any
    p_lower: Any = None
    p_two_sided: Any = None
    components: pd.Index | None = field(default=None, repr=False)
    probs: tuple[float, ...] = DEFAULT_PROBS
    design: str = "same_items"
    discrepancy: bool = False
    plug_in: bool = False

    def __post_init__(self) -> None:
        upper, lower, two = tail_probabilities(self.replicated, self._observed_2d)
        unpack = (lambda a: float(a[0])) if self.is_scalar else (lambda a: a)
        if self.p_lower is None:
            object.__setattr__(self, "p_lower", unpack(lower))
        if self.p_two_sided is None:
            object.__setattr__(self, "p_two_sided", unpack(two))
        if self.components is None:
            comps = pd.Index([self.statistic]) if self.is_scalar else pd.RangeIndex(self.replicated.shape[1])
            object.__setattr__(self, "components", comps)

    # ------------------------------------------------------------------ shapes
    @property
    def is_scalar(self) -> bool:
        """True for a scalar statistic."""
        return np.ndim(self.simulated) == 1

    @property
    def draws(self) -> int:
        """Number of replicated data sets."""
        return int(np.shape(self.simulated)[0])

    @property
    def replicated(self) -> np.ndarray:
        """The replicated values as an array of shape (draws, dim) (dim = 1 for a scalar)."""
        sims = np.asarray(self.simulated, dtype=float)
        return sims[:, None] if sims.ndim == 1 else sims

    @property
    def _observed_2d(self) -> np.ndarray:
        """Observed values, shape (1, dim) or, for a discrepancy, (draws, dim)."""
        obs = np.asarray(self.observed, dtype=float)
        if self.discrepancy:
            return obs[:, None] if obs.ndim == 1 else obs
        return obs.reshape(1, -1)

    # ------------------------------------------------------------------ intervals
    def _prob(self, prob: float | None) -> float:
        return max(self.probs) if prob is None else check_probability("prob", prob)

    def interval(self, prob: float | None = None) -> np.ndarray:
        """Central interval of the replicated values per component.

        For a statistic, the ``(1 - prob) / 2`` and ``(1 + prob) / 2``
        quantiles of ``T_rep``; for a discrepancy, of ``T_rep - T_obs`` (the
        realised difference, drawn together).

        Parameters
        ----------
        prob : float, optional
            Default: the widest of :attr:`probs`.

        Returns
        -------
        array, shape (dim, 2)
            Lower and upper bounds.
        """
        p = self._prob(prob)
        values = self.replicated - self._observed_2d if self.discrepancy else self.replicated
        return np.quantile(values, [(1 - p) / 2, (1 + p) / 2], axis=0).T

    def covers(self, prob: float | None = None) -> np.ndarray:
        """Whether the central ``prob`` interval covers the observed value, per component.

        For a discrepancy: whether the interval of ``T_rep - T_obs`` covers 0.

        Returns
        -------
        bool array, shape (dim,)
        """
        bounds = self.interval(prob)
        target = np.zeros(bounds.shape[0]) if self.discrepancy else self._observed_2d[0]
        return (bounds[:, 0] <= target) & (target <= bounds[:, 1])

    @property
    def covered(self) -> bool:
        """True when the widest interval of :attr:`probs` covers the observed value in every component."""
        return bool(self.covers().all())

    # ------------------------------------------------------------------ views
    def to_frame(self) -> pd.DataFrame:
        """One row per component: observed, replicated mean and sd, p-values, intervals, coverage.

        Columns ``observed`` (for a discrepancy, its mean over draws),
        ``replicated_mean``, ``replicated_sd``, ``p_upper``, ``p_lower``,
        ``p_two_sided``, then per interval probability ``p`` the bounds
        (``q5%``, ``q95%``, ...; for a discrepancy of ``T_rep - T_obs``) and
        ``covered_<p>``.
        """
        upper, lower, two = tail_probabilities(self.replicated, self._observed_2d)
        rep = self.replicated
        out = pd.DataFrame(
            {
                "observed": self._observed_2d.mean(axis=0),
                "replicated_mean": rep.mean(axis=0),
                "replicated_sd": rep.std(axis=0, ddof=1) if rep.shape[0] > 1 else np.full(rep.shape[1], np.nan),
                "p_upper": upper,
                "p_lower": lower,
                "p_two_sided": two,
            },
            index=self.components,
        )
        for p in sorted(self.probs):
            bounds = self.interval(p)
            out[f"q{_pct((1 - p) / 2)}"] = bounds[:, 0]
            out[f"q{_pct((1 + p) / 2)}"] = bounds[:, 1]
            out[f"covered_{_pct(p)}"] = self.covers(p)
        out.index.name = out.index.name or "component"
        return out

    def summary(self) -> str:
        """A few lines: what was checked, and the components outside the widest interval."""
        kind = "discrepancy" if self.discrepancy else "statistic"
        p = max(self.probs)
        head = (
            f"Posterior predictive check of {kind} {self.statistic!r} ({self.design}, {self.draws} replicates"
            + (", plug-in" if self.plug_in else "")
            + ")"
        )
        outside = ~self.covers(p)
        two = np.atleast_1d(self.p_two_sided)
        if self.is_scalar:
            obs = float(self._observed_2d.mean())
            line = f"  observed {obs:.4g}, p (upper) = {float(self.p_value):.3f}, p (two-sided) = {two[0]:.3f}"
            return head + "\n" + line + ("" if not outside[0] else f"; outside the central {p:.0%} interval")
        bad = [str(c) for c in np.asarray(self.components)[outside]]
        shown = ", ".join(bad[:12]) + (", ..." if len(bad) > 12 else "")
        line = (
            f"  {outside.size} components; smallest two-sided p = {two.min():.3f}; "
            f"outside the central {p:.0%} interval: {len(bad)} ({shown})"
        )
        table = self.to_frame()[["observed", "replicated_mean", "p_two_sided", f"covered_{_pct(p)}"]]
        return head + "\n" + line + "\n" + table.round(3).to_string()

    def __repr__(self) -> str:
        return f"<PPCResult\n{self.summary()}>"

    def plot(self, ax=None, **kwargs: Any):
        """Observed against replicated (see :func:`pyrater.plots.plot_ppc`; ``kwargs`` go to it)."""
        from .plots import plot_ppc

        return plot_ppc(self, ax=ax, **kwargs)


@dataclass(frozen=True)
class PPCResults(Mapping[str, PPCResult]):
    """Results of a check of several statistics on one set of replicates: a mapping name -> :class:`PPCResult`.

    Attributes
    ----------
    results : dict of str to PPCResult
    design : {"same_items", "new_items"}
    draws : int
    """

    results: dict[str, PPCResult]
    design: str
    draws: int

    def __getitem__(self, name: str) -> PPCResult:
        return self.results[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def to_frame(self) -> pd.DataFrame:
        """The statistics' :meth:`PPCResult.to_frame` stacked, indexed by (statistic, component)."""
        frames = []
        for name, res in self.results.items():
            frame = res.to_frame()
            frame.index = pd.MultiIndex.from_arrays(
                [np.repeat(name, len(frame)), frame.index.astype(object)], names=["statistic", "component"]
            )
            frames.append(frame)
        return pd.concat(frames)

    @property
    def covered(self) -> bool:
        """True when every statistic's widest interval covers its observed value in every component."""
        return all(r.covered for r in self.results.values())

    def summary(self) -> str:
        """Every statistic's summary."""
        return "\n".join(r.summary() for r in self.results.values())

    def __repr__(self) -> str:
        return f"<PPCResults\n{self.summary()}>"

    def plot(self, ncols: int = 2, **kwargs: Any):
        """One panel per statistic (see :func:`pyrater.plots.plot_ppc`; ``kwargs`` go to it); returns the Figure."""
        import matplotlib.pyplot as plt

        from .plots import plot_ppc

        n = len(self.results)
        ncols = max(1, min(ncols, n))
        nrows = int(np.ceil(n / ncols))
        fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 3.4 * nrows), squeeze=False)
        for ax, res in zip(axes.flat, self.results.values()):
            plot_ppc(res, ax=ax, **kwargs)
        for ax in list(axes.flat)[n:]:
            ax.remove()
        fig.tight_layout()
        return fig


# ---------------------------------------------------------------------- the check
def _collect(statistics: Any, name: str | None) -> tuple[list[Statistic], bool]:
    """The statistics as a list of :class:`Statistic` with distinct names, and whether one was given."""
    if callable(statistics):
        return [as_statistic(statistics, name)], True
    if name is not None:
        raise ValueError("name= labels a single statistic; name several by passing a dict {name: statistic}")
    if isinstance(statistics, Mapping):
        stats = [as_statistic(fn, str(key)) for key, fn in statistics.items()]
    elif isinstance(statistics, Sequence) and not isinstance(statistics, str):
        stats = [as_statistic(fn) for fn in statistics]
    else:
        raise TypeError(
            "statistics must be a callable, a dict of name -> callable or a list of callables, "
            f"got {type(statistics).__name__}"
        )
    if not stats:
        raise ValueError("no statistics given")
    names = [s.name for s in stats]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"statistics must have distinct names; {repeated} repeat (pass a dict to name them)")
    return stats, False


def _values(stat: Statistic, value: Any, where: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """``value`` as a float array of shape () or (dim,), or a ValueError naming the statistic."""
    what = "discrepancy" if stat.takes_parameters else "statistic"
    if value is None:
        raise ValueError(f"{what} {stat.name!r} returned None on {where}; it must return a number or a 1-d array")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{what} {stat.name!r} returned a non-numeric {type(value).__name__} on {where}; "
            "it must return a number or a 1-d array of numbers"
        ) from None
    if arr.ndim > 1 or (arr.ndim == 1 and arr.size == 0):
        raise ValueError(
            f"{what} {stat.name!r} returned shape {arr.shape} on {where}; "
            "it must return a number or a non-empty 1-d array"
        )
    if shape is not None and arr.shape != shape:
        raise ValueError(
            f"{what} {stat.name!r} returned shape {arr.shape} on {where} but {shape} on the observed data; "
            "a vector statistic must have the same length for every data set"
        )
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(np.atleast_1d(arr)))
        raise ValueError(
            f"{what} {stat.name!r} returned NaN or infinite values on {where} (components {bad[:8].tolist()})"
        )
    return arr


def _point_parameters(fit: Fit, item_unit: np.ndarray) -> DrawParameters:
    """The estimate, with each item's most probable class: where discrepancies are tried before any drawing."""
    pi, theta = fit._point()
    with np.errstate(divide="ignore"):
        lj = log_joint(fit.data.counts, np.log(pi), np.log(theta))
    unit_class = np.argmax(lj, axis=1)
    z = np.where(item_unit >= 0, unit_class[np.maximum(item_unit, 0)], int(np.argmax(pi)))
    return DrawParameters(pi=np.asarray(pi), theta=np.asarray(theta), z=z)


def posterior_predictive_check(
    fit: Fit,
    statistics: Callable[..., Any] | Mapping[str, Callable[..., Any]] | Sequence[Callable[..., Any]],
    draws: int = 200,
    seed: int | None = None,
    name: str | None = None,
    *,
    design: Design = "same_items",
    probs: Sequence[float] = DEFAULT_PROBS,
    max_memory_gib: float | None = None,
) -> PPCResult | PPCResults:
    """Posterior predictive check of one or several statistics, on one set of replicates.

    Parameters
    ----------
    fit : Fit
        Any fitted model (for optimisation and EM fits, a plug-in check at the estimate).
    statistics : callable, dict of str to callable, or list of callables
        Each a statistic ``T(y)`` or a :class:`~pyrater.checking.Discrepancy`
        ``T(y, params)``, returning a number or a 1-d array (the same length
        for every data set).  A plain function takes the long DataFrame
        (item, rater, rating columns as in the fitted data); a
        :class:`~pyrater.checking.Statistic` says which form it
        takes; the ready-made ones (:func:`~pyrater.checking.vote_histogram`,
        :func:`~pyrater.checking.category_shares`,
        :func:`~pyrater.checking.pair_agreement`) take numpy codes.
        Every statistic is computed on the same replicates.
    draws : int
        Number of replicated data sets (posterior draws spread evenly over the chains).
    seed : int, optional
        Fixes the replicates (the same seed and design give the same replicates
        whatever the statistics).
    name : str, optional
        Name of a single statistic (default: its name); name several with a dict.
    design : {"same_items", "new_items"}
        ``"same_items"`` (default): each observed item's class is drawn from
        its posterior given the data and the item re-rated -- the same items
        again.  The classes are inferred from the very ratings being checked
        (the data are used twice), so for statistics the class posteriors can
        absorb the p-values are pulled towards 1/2 (conservative); misfit of
        the ratings given the classes still shows.  ``"new_items"``: each item's class is drawn from
        ``pi`` of the draw and rated by the same raters, the same number of
        times -- new items in the observed design, as in Han, Adıgüzel and
        Carpenter (2024).  It checks the marginal distribution of rating
        patterns, where a model with too simple a class structure (e.g.
        items of varying difficulty fitted by Dawid--Skene) shows its misfit.
    probs : sequence of float
        Probabilities of the central intervals reported (default 0.90 and
        0.98: the 5%-95% and 1%-99% quantiles of the replicated values).
    max_memory_gib : float, optional
        The memory the replicated values may take (default: the documented
        1 GiB), checked before any drawing.

    Returns
    -------
    PPCResult
        For a single statistic (the form of earlier versions: ``observed``,
        ``simulated``, ``p_value`` = ``P(T_rep >= T_obs)``, plus the lower
        and two-sided p-values, intervals, :meth:`~PPCResult.to_frame`).
    PPCResults
        For a dict or list: a mapping name -> :class:`PPCResult` with
        ``to_frame()``, ``summary()`` and ``plot()``.

    Raises
    ------
    ValueError
        For an unknown design, ``draws < 1``, or a statistic that returns
        something other than finite numbers of one shape (named, found on
        the observed data before any drawing where possible).

    Examples
    --------
    The histogram of positive votes per caries item, new items drawn from pi::

        from pyrater.checking import vote_histogram
        check = posterior_predictive_check(fit, vote_histogram(2), design="new_items", seed=1)
        check.covered, check.to_frame()
    """
    stats, single = _collect(statistics, name)
    design = check_design(design)
    draws = check_int("draws", draws, 1)
    probs = tuple(sorted({check_probability("probs", p) for p in np.atleast_1d(np.asarray(probs, dtype=object))}))
    data = fit.data
    item_unit, item_of_row, raters, _, obs_codes, item_labels = observed_design(fit)
    observed = Ratings(
        item_of_row, raters, obs_codes, item_labels, data.rater_labels, data.categories, data.long_columns
    )
    observed_frame = data.to_long() if any(s.data == "frame" for s in stats) else None

    def form(stat: Statistic, ratings: Ratings, frame: pd.DataFrame | None) -> Any:
        return ratings if stat.data == "ratings" else frame

    # every statistic once on the observed data (a discrepancy at the estimate): shapes and types, before drawing
    point = _point_parameters(fit, item_unit) if any(s.takes_parameters for s in stats) else None
    shapes: dict[str, tuple[int, ...]] = {}
    observed_values: dict[str, np.ndarray] = {}
    components: dict[str, pd.Index] = {}
    for stat in stats:
        raw = stat(form(stat, observed, observed_frame), point)
        where = "the observed data" + (" at the estimate" if stat.takes_parameters else "")
        value = _values(stat, raw, where)
        shapes[stat.name], observed_values[stat.name] = value.shape, value
        labels = stat.labels(observed)
        if labels is None:
            labels = pd.Index(raw.index) if isinstance(raw, pd.Series) and value.ndim == 1 else None
        if labels is None:
            labels = pd.Index([stat.name]) if value.ndim == 0 else pd.RangeIndex(value.size)
        if len(labels) != max(value.size, 1):
            raise ValueError(f"statistic {stat.name!r} has {len(labels)} component labels for {value.size} values")
        components[stat.name] = labels
    width = sum(max(int(np.prod(s)), 1) * (2 if st.takes_parameters else 1) for st, s in zip(stats, shapes.values()))
    per_draw = 8 * (width + data.n_categories + data.n_raters * data.n_categories**2)
    check_memory(
        f"{draws:,} replicates of {len(stats)} statistic(s)",
        float(draws) * per_draw + 64.0 * item_of_row.size,
        max_memory_gib,
        ask=("draws",),
        detail=f"{draws:,} draws x {per_draw:,} bytes",
    )

    simulated = {s.name: np.empty((draws, *shapes[s.name])) for s in stats}
    observed_draws = {s.name: np.empty((draws, *shapes[s.name])) for s in stats if s.takes_parameters}
    rng = np.random.default_rng(seed)
    for rep in replicates(fit, item_unit, item_of_row, raters, draws, rng, design):
        ratings = observed.with_ratings(rep.ratings)
        frame = ratings.frame() if observed_frame is not None else None
        params = DrawParameters(pi=rep.pi, theta=rep.theta, z=rep.z)
        for stat in stats:
            shape = shapes[stat.name]
            where = f"replicate {rep.draw}"
            simulated[stat.name][rep.draw] = _values(stat, stat(form(stat, ratings, frame), params), where, shape)
            if stat.takes_parameters:
                obs_params = DrawParameters(pi=rep.pi, theta=rep.theta, z=rep.z_observed)
                raw = stat(form(stat, observed, observed_frame), obs_params)
                observed_draws[stat.name][rep.draw] = _values(stat, raw, f"the observed data at draw {rep.draw}", shape)

    results = {}
    for stat in stats:
        obs = observed_draws[stat.name] if stat.takes_parameters else observed_values[stat.name]
        sims = simulated[stat.name]
        obs_2d = obs.reshape(draws, -1) if stat.takes_parameters else obs.reshape(1, -1)
        upper, lower, two = tail_probabilities(sims.reshape(draws, -1), obs_2d)
        scalar = sims.ndim == 1
        results[stat.name] = PPCResult(
            statistic=stat.name,
            observed=float(obs) if scalar and not stat.takes_parameters else obs,
            simulated=sims,
            p_value=float(upper[0]) if scalar else upper,
            p_lower=float(lower[0]) if scalar else lower,
            p_two_sided=float(two[0]) if scalar else two,
            components=components[stat.name],
            probs=probs,
            design=design,
            discrepancy=stat.takes_parameters,
            plug_in=not fit.has_draws,
        )
    if single:
        return results[stats[0].name]
    return PPCResults(results=results, design=design, draws=draws)
