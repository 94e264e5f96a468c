"""The one module that knows which ArviZ line is installed.

ArviZ 0.x (Python 3.11 and earlier) returns :class:`arviz.InferenceData`;
ArviZ 1.x (Python >= 3.12) returns :class:`xarray.DataTree` and moved its
statistics and plots to ``arviz_stats`` and ``arviz_plots`` with new names
and fields.  The rest of pyrater calls the functions here and never looks at
the version itself:

* :func:`build` -- named ``xarray.Dataset`` groups to the line's posterior
  object (same groups, variables, dims and coordinates on both lines);
* :func:`groups`, :func:`has_group`, :func:`group` -- group access;
* :func:`rhat`, :func:`ess` -- convergence diagnostics of ``(chain, draw, P)``
  arrays (rank-normalised split Rhat; bulk ESS; tail ESS of the 5% and 95%
  quantiles, ArviZ 0.x's default, passed explicitly on both lines);
* :func:`loo` -- PSIS-LOO as a plain :class:`LooArrays` with the same field
  names on both lines;
* :func:`psislw` -- Pareto-smoothed importance weights of one vector of log
  ratios (pyrater's own :mod:`pyrater._psis` on both lines);
* :func:`plot_trace`, :func:`plot_rank` -- a matplotlib Figure on both lines.

ArviZ is imported lazily (it takes about a second to import).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

__all__ = [
    "arviz_version",
    "is_datatree_line",
    "build",
    "groups",
    "has_group",
    "group",
    "rhat",
    "ess",
    "mcse",
    "LooArrays",
    "loo",
    "psislw",
    "plot_trace",
    "plot_rank",
]

#: Quantiles whose ESS is the tail ESS (ArviZ 0.x's default; 1.x needs them given).
TAIL_PROB = (0.05, 0.95)


@functools.cache
def _az():
    from ._quiet import import_arviz  # without ArviZ 0.x's refactor FutureWarning

    return import_arviz()


def arviz_version() -> tuple[int, ...]:
    """The installed ArviZ version as a tuple of integers, e.g. ``(0, 23, 4)``."""
    parts = []
    for piece in _az().__version__.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def is_datatree_line() -> bool:
    """True on ArviZ 1.x (results are ``xarray.DataTree``), False on 0.x (``InferenceData``)."""
    return arviz_version()[0] >= 1


# ------------------------------------------------------------------ building
def build(group_map: Mapping[str, xr.Dataset], attrs: Mapping[str, Any] | None = None):
    """The line's posterior object from named groups.

    Parameters
    ----------
    group_map : dict of str -> xarray.Dataset
        ``posterior``, ``log_likelihood``, ``sample_stats``, ``observed_data``
        (any subset, in that order), each with dims ``chain, draw`` first
        where it holds draws.
    attrs : dict, optional
        Global attributes (the root's on 1.x, the object's on 0.x); they are
        also set on every group, as ArviZ's converters do.

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
    """
    attrs = dict(attrs or {})
    tagged = {}
    for name, ds in group_map.items():
        ds = ds.copy()
        ds.attrs = {**attrs, **ds.attrs}
        tagged[name] = ds
    if is_datatree_line():
        tree = xr.DataTree.from_dict({f"/{name}": ds for name, ds in tagged.items()})
        tree.attrs = attrs
        return tree
    return _az().InferenceData(attrs=attrs, **tagged)


def groups(obj) -> list[str]:
    """Group names (without a leading slash) of an InferenceData or DataTree."""
    if isinstance(obj, xr.DataTree):
        return list(obj.children)
    return list(obj.groups())


def has_group(obj, name: str) -> bool:
    """True when ``obj`` (InferenceData or DataTree) has group ``name``."""
    return name in groups(obj)


def group(obj, name: str) -> xr.Dataset:
    """Group ``name`` of ``obj`` as an ``xarray.Dataset``."""
    if isinstance(obj, xr.DataTree):
        return obj[name].to_dataset()
    return getattr(obj, name)


# --------------------------------------------------------------- diagnostics
def _check_draws(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim != 3:
        raise ValueError(f"expected draws of shape (chain, draw, P); got shape {x.shape}")
    return x


def rhat(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split Rhat of each column of ``x`` (chain, draw, P) -> (P,).

    NaN where it cannot be computed (a single chain, a constant column).
    """
    x = _check_draws(x)
    az = _az()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if is_datatree_line():
            return np.asarray(az.rhat(x, chain_axis=0, draw_axis=1), dtype=float)
        return az.rhat(az.convert_to_dataset({"x": x}))["x"].to_numpy().astype(float)


def ess(x: np.ndarray, method: str = "bulk") -> np.ndarray:
    """Bulk or tail effective sample size of each column of ``x`` (chain, draw, P) -> (P,).

    The tail ESS is the smaller ESS of the 5% and 95% quantiles.
    """
    if method not in ("bulk", "tail"):
        raise ValueError(f"method must be 'bulk' or 'tail', got {method!r}")
    x = _check_draws(x)
    az = _az()
    prob = TAIL_PROB if method == "tail" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if is_datatree_line():
            return np.asarray(az.ess(x, method=method, prob=prob, chain_axis=0, draw_axis=1), dtype=float)
        return az.ess(az.convert_to_dataset({"x": x}), method=method, prob=prob)["x"].to_numpy().astype(float)


def mcse(x: np.ndarray, method: str = "mean", prob: float | None = None) -> np.ndarray:
    """Monte Carlo standard error of each column of ``x`` (chain, draw, P) -> (P,).

    ``method="mean"`` for the posterior mean, ``"quantile"`` with ``prob`` for
    a quantile (ArviZ's estimators, the same numbers on both lines).
    """
    if method not in ("mean", "quantile"):
        raise ValueError(f"method must be 'mean' or 'quantile', got {method!r}")
    x = _check_draws(x)
    az = _az()
    kwargs = {"method": method} if prob is None else {"method": method, "prob": prob}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if is_datatree_line():
            return np.asarray(az.mcse(x, chain_axis=0, draw_axis=1, **kwargs), dtype=float)
        return az.mcse(az.convert_to_dataset({"x": x}), **kwargs)["x"].to_numpy().astype(float)


# ----------------------------------------------------------------------- LOO
@dataclass(frozen=True)
class LooArrays:
    """PSIS-LOO of one log-likelihood variable, the same fields on both lines.

    Attributes
    ----------
    elpd, se, p : float
        Expected log pointwise predictive density (higher is better), its
        standard error and the effective number of parameters.
    elpd_i, pareto_k : array, shape (N,)
        Pointwise values, in the order of the observation dim.
    n_samples, n_data_points : int
    warning : bool
        ArviZ's warning flag (some Pareto k above ``good_k``).
    good_k : float
        ArviZ's Pareto k threshold for the sample size.
    """

    elpd: float
    se: float
    p: float
    elpd_i: np.ndarray
    pareto_k: np.ndarray
    n_samples: int
    n_data_points: int
    warning: bool
    good_k: float


def loo(obj, var_name: str = "log_lik") -> LooArrays:
    """PSIS-LOO (``az.loo(..., pointwise=True)``) of ``obj``'s log-likelihood ``var_name``.

    ArviZ's own LOO on each line, so that :func:`pyrater.compare` equals
    ``az.compare``.  The lines differ in one detail: the Pareto tail is
    ``ceil(3 sqrt(S / r_eff))`` draws on 0.x and ``floor(...)`` on 1.x, which
    moves Pareto k by a few hundredths and elpd_i by about 1e-4 (the same
    PSIS as :func:`pyrater._psis.psislw` of ``-log_lik`` otherwise; tested).
    """
    az = _az()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto distribution")
        warnings.filterwarnings("ignore", message=".*[Pp]areto.*", category=UserWarning)
        res = az.loo(obj, pointwise=True, var_name=var_name)
    if is_datatree_line():
        fields = {
            "elpd": res.elpd,
            "se": res.se,
            "p": res.p,
            "elpd_i": res.elpd_i,
            "pareto_k": res.pareto_k,
            "n_samples": res.n_samples,
            "n_data_points": res.n_data_points,
            "warning": res.warning,
            "good_k": res.good_k,
        }
    else:  # ArviZ 0.x: a pandas Series with the ic's name in its fields
        fields = {
            "elpd": res["elpd_loo"],
            "se": res["se"],
            "p": res["p_loo"],
            "elpd_i": res["loo_i"],
            "pareto_k": res["pareto_k"],
            "n_samples": res["n_samples"],
            "n_data_points": res["n_data_points"],
            "warning": res["warning"],
            "good_k": res.get("good_k", 0.7),
        }
    return LooArrays(
        elpd=float(fields["elpd"]),
        se=float(fields["se"]),
        p=float(fields["p"]),
        elpd_i=np.asarray(fields["elpd_i"], dtype=float).ravel(),
        pareto_k=np.asarray(fields["pareto_k"], dtype=float).ravel(),
        n_samples=int(fields["n_samples"]),
        n_data_points=int(fields["n_data_points"]),
        warning=bool(fields["warning"]),
        good_k=float(fields["good_k"]),
    )


# --------------------------------------------------------------------- plots
def _figure_of(result):
    """The matplotlib Figure behind an ArviZ plot result (axes array or PlotCollection)."""
    viz = getattr(result, "viz", None)
    if viz is not None:  # ArviZ 1.x PlotCollection
        fig = viz["figure"]
        return fig.item() if hasattr(fig, "item") else fig
    return np.asarray(result).flat[0].figure


@contextlib.contextmanager
def _quiet_legacy_plots():
    """ArviZ 0.x's plots call matplotlib APIs deprecated in matplotlib 3.11: not the user's concern."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"arviz\.")
        yield


def psislw(log_ratios: np.ndarray, r_eff: float = 1.0) -> tuple[np.ndarray, float]:
    """Pareto-smoothed log importance weights, normalised, and the Pareto k.

    The same numbers on both ArviZ lines: :func:`pyrater._psis.psislw`, the
    reference algorithm of Vehtari et al. (2024), equal to ArviZ 0.x's
    ``az.psislw`` to rounding.  ArviZ 1.x's ``arviz_stats`` ``psislw`` is not
    called: it takes the *negated* log ratios (the log-likelihood, for LOO)
    and a tail length one shorter (``floor`` for ``ceil``), see
    :mod:`pyrater._psis`.

    Parameters
    ----------
    log_ratios : array, shape (S,)
        Log importance ratios (target minus proposal log density).
    r_eff : float
        Relative efficiency of the draws (1 for independent draws).

    Returns
    -------
    log_weights : array, shape (S,)
        Smoothed log weights, normalised so that they log-sum-exp to 0.
    k : float
        Estimated Pareto shape of the ratios' tail.
    """
    from ._psis import psislw as _psislw

    return _psislw(log_ratios, r_eff=r_eff)


def plot_trace(obj, var_names: Sequence[str], **kwargs):
    """Trace plot (trace and marginal per variable) -> matplotlib Figure.

    ``az.plot_trace`` on ArviZ 0.x, ``az.plot_trace_dist`` (matplotlib
    backend) on 1.x; ``kwargs`` go to that function.
    """
    az = _az()
    if is_datatree_line():
        kwargs.setdefault("backend", "matplotlib")
        fig = _figure_of(az.plot_trace_dist(obj, var_names=list(var_names), **kwargs))
        _trace_legend(fig, obj, list(var_names))
    else:
        # the compact trace colours the components (pi's categories) and draws each chain in its own line
        # style: ArviZ's own legends name both (a legend of colours called chains mislabelled the categories)
        kwargs.setdefault("legend", True)
        with _quiet_legacy_plots():
            fig = _figure_of(az.plot_trace(obj, var_names=list(var_names), **kwargs))
    return fig


def plot_rank(obj, var_names: Sequence[str], **kwargs):
    """Rank plot per variable -> matplotlib Figure (``az.plot_rank`` on both lines)."""
    az = _az()
    if is_datatree_line():
        kwargs.setdefault("backend", "matplotlib")
        fig = _figure_of(az.plot_rank(obj, var_names=list(var_names), **kwargs))
    else:
        with _quiet_legacy_plots():
            fig = _figure_of(az.plot_rank(obj, var_names=list(var_names), **kwargs))
    fig.set_layout_engine("constrained")  # ArviZ's titles ("pi\ncategory = ...") are clipped otherwise
    return fig


def _trace_legend(fig, obj, var_names: list[str]) -> None:
    """Legends for ArviZ 1.x's trace plot, which draws none: chains by line style, components by colour.

    As in ArviZ 0.x's compact trace, each component of a variable (pi's
    categories) has its colour and each chain its line style; the line
    styles are named by chain, and the colours by the component's labels
    when one variable is plotted and the colours match its components.
    """
    from matplotlib.lines import Line2D

    post = group(obj, "posterior")
    n_chains = int(post.sizes["chain"])
    for ax in fig.axes:  # a trace panel: one line per component and chain
        lines = [line for line in ax.get_lines() if len(line.get_xdata()) > 1]
        colours = list(dict.fromkeys(line.get_color() for line in lines))
        styles = list(dict.fromkeys(line.get_linestyle() for line in lines))
        if not lines or len(styles) != n_chains:
            continue
        handles = [Line2D([], [], color="0.3", linestyle=ls, label=f"chain {i}") for i, ls in enumerate(styles)]
        if len(var_names) == 1 and var_names[0] in post:
            var = post[var_names[0]]
            dims = [d for d in var.dims if d not in ("chain", "draw")]
            labels = [", ".join(str(v) for v in combo) for combo in itertools.product(*(var[d].values for d in dims))]
            if len(labels) == len(colours):
                handles += [Line2D([], [], color=c, label=f"{var_names[0]}[{lab}]") for c, lab in zip(colours, labels)]
        fig.legend(
            handles=handles,
            loc="outside upper right" if fig.get_layout_engine() else "upper right",
            ncols=min(len(handles), 4),
            fontsize="small",
            frameon=False,
        )
        return
