"""Plots of fitted models (matplotlib; every function returns the Figure).

* :func:`plot_raters` -- one heatmap per rater of the error matrix theta
  (with many raters, :func:`plot_rater_accuracy` instead).
* :func:`plot_rater_accuracy` -- every rater's accuracy and diagonal of theta, sorted, one panel.
* :func:`plot_class_probabilities` -- stacked bars of class probabilities.
* :func:`plot_prevalence` -- pi with credible intervals.
* :func:`plot_ppc` -- a posterior predictive check: observed against replicated values
  (a histogram for a scalar statistic, intervals per component for a vector one).
* :func:`plot_trace`, :func:`plot_rank` -- MCMC diagnostics through ArviZ.
* :func:`plot_sbc` -- rank histograms of a simulation-based calibration run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from ..fits.base import DEFAULT_PROB, Fit

__all__ = [
    "plot_raters",
    "plot_rater_accuracy",
    "plot_class_probabilities",
    "plot_prevalence",
    "plot_ppc",
    "plot_trace",
    "plot_rank",
    "plot_sbc",
]


# plot_raters draws at most this many heatmaps; with more raters it summarises
MAX_RATER_PANELS = 24


def plot_raters(
    fit: Fit,
    raters: Sequence[Any] | None = None,
    ncols: int = 4,
    cmap: str = "Blues",
    max_panels: int = MAX_RATER_PANELS,
):
    """One heatmap per rater of the error matrix (posterior means, or the estimate).

    Rows are the true category, columns the rating; every cell shows its
    value; all panels share the colour scale [0, 1].  With more than
    ``max_panels`` raters (and ``raters`` not given) the heatmaps would make
    a figure tens of thousands of pixels tall: the figure is then
    :func:`plot_rater_accuracy`, one panel summarising every rater; pass
    ``raters=`` to draw the heatmaps of chosen raters (in pages of at most
    ``max_panels``).

    Parameters
    ----------
    fit : Fit
    raters : sequence of rater labels, optional
        Default: all raters.
    ncols : int
        Panels per row.
    max_panels : int
        Most heatmaps in one figure.

    Returns
    -------
    matplotlib.figure.Figure
    """
    theta = fit.point_estimate("theta")
    if raters is None and theta.sizes["rater"] > max_panels:
        return plot_rater_accuracy(fit)
    labels = list(theta.coords["rater"].values) if raters is None else list(raters)
    if len(labels) > max_panels:
        raise ValueError(
            f"{len(labels)} raters asked for, at most max_panels={max_panels} heatmaps fit in one figure; "
            "draw them in pages (raters=labels[i:i + max_panels]) or use plot_rater_accuracy"
        )
    unknown = [r for r in labels if r not in set(theta.coords["rater"].values)]
    if unknown:
        raise ValueError(f"raters {unknown} not in the fitted data")
    cats = [str(c) for c in theta.coords["category"].values]
    K = len(cats)
    n = len(labels)
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    size = 0.6 * K + 1.4
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(size * ncols + 1.5, size * nrows + 0.6), squeeze=False, layout="constrained"
    )
    image = None
    for index, (ax, rater) in enumerate(zip(axes.flat, labels)):
        values = theta.sel(rater=rater).to_numpy()
        image = ax.imshow(values, vmin=0.0, vmax=1.0, cmap=cmap)
        for k in range(K):
            for l in range(K):
                ax.text(
                    l,
                    k,
                    f"{values[k, l]:.2f}",
                    ha="center",
                    va="center",
                    color="white" if values[k, l] > 0.6 else "black",
                    fontsize=8,
                )
        ax.set_xticks(range(K), cats)
        ax.set_yticks(range(K), cats)
        ax.set_title(f"rater {rater}")
        if index >= n - ncols:  # bottom panel of its column
            ax.set_xlabel("rating")
        if index % ncols == 0:
            ax.set_ylabel("true category")
    for ax in list(axes.flat)[n:]:
        ax.remove()
    assert image is not None  # n >= 1: subplots() refused zero rows above
    fig.colorbar(image, ax=[a for a in axes.flat][:n], shrink=0.8, label="P(rating | true category)")
    fig.suptitle(f"Error matrices ({fit.model.title}, {fit.method})")
    return fig


def plot_rater_accuracy(fit: Fit, prob: float = DEFAULT_PROB, ax=None):
    """Every rater's accuracy and the diagonal of its error matrix, raters sorted by accuracy.

    Accuracy is ``sum_k pi_k theta[j, k, k]``, the chance that the rater
    gives the true class of a random item; for fits with draws it is the
    posterior mean with its central ``prob`` interval (shaded).  Small
    markers show ``theta[j, k, k]`` per true class.  The figure has a
    fixed size whatever the number of raters.

    Returns
    -------
    matplotlib.figure.Figure
    """
    pi = fit.point_estimate("pi").to_numpy()
    theta = fit.point_estimate("theta")
    cats = [str(c) for c in theta.coords["category"].values]
    raters = [str(r) for r in theta.coords["rater"].values]
    values = theta.to_numpy()
    K, J = len(cats), len(raters)
    diag = values[:, np.arange(K), np.arange(K)]  # (J, K)
    accuracy = diag @ pi
    order = np.argsort(accuracy, kind="stable")
    x = np.arange(J)
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
    else:
        fig = ax.figure
    for k, cat in enumerate(cats):
        ax.plot(x, diag[order, k], ".", ms=3, alpha=0.6, label=f"theta[{cat}, {cat}]")
    if fit.has_draws:
        pi_s, theta_s = fit._draws()
        acc = np.einsum("sjk,sk->sj", theta_s[:, :, np.arange(K), np.arange(K)], pi_s)[:, order]
        lo, hi = np.quantile(acc, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
        ax.fill_between(x, lo, hi, color="0.6", alpha=0.4, lw=0, label=f"{100 * prob:g}% interval")
    ax.plot(x, accuracy[order], "-", color="k", lw=1.5, label="accuracy")
    ax.set_ylim(0, 1)
    ax.set_xlim(-0.5, J - 0.5)
    ax.set_xlabel(f"rater, sorted by accuracy ({J} raters)")
    ax.set_ylabel("probability")
    if J <= 40:
        ax.set_xticks(x, [raters[j] for j in order], rotation=90, fontsize=7)
    ax.legend(loc="lower right", fontsize=8, ncol=2)
    ax.set_title(f"Rater accuracy sum_k pi_k theta[k, k] ({fit.model.title}, {fit.method})")
    return fig


def plot_class_probabilities(fit: Fit, items: Sequence[Any] | None = None, n: int = 20, ax=None):
    """Stacked bars of P(z_i = k) for chosen items (default: the ``n`` least certain).

    Uncertainty is the entropy of the class probabilities; the title says
    which items are shown.

    Returns
    -------
    matplotlib.figure.Figure
    """
    probs = fit.class_probabilities()
    if items is None:
        p = probs.to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.nansum(np.where(p > 0, p * np.log(p), 0.0), axis=1)
        order = np.argsort(-entropy, kind="stable")[:n]
        probs = probs.iloc[order]
    else:
        missing = [i for i in items if i not in probs.index]
        if missing:
            raise ValueError(f"items {missing[:8]} not in the fitted data")
        probs = probs.loc[list(items)]
    if ax is None:
        fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * len(probs) + 1.5), 3.5))
    else:
        fig = ax.figure
    x = np.arange(len(probs))
    bottom = np.zeros(len(probs))
    for cat in probs.columns:
        ax.bar(x, probs[cat].to_numpy(), bottom=bottom, label=str(cat))
        bottom += probs[cat].to_numpy()
    ax.set_xticks(x, [str(i) for i in probs.index], rotation=90)
    ax.set_ylim(0, 1)
    ax.set_xlabel(probs.index.name or "item")
    ax.set_ylabel("class probability")
    ax.legend(title="category", bbox_to_anchor=(1.01, 1), loc="upper left")
    if items is None:
        shown = f"the {len(probs)} least certain" if len(probs) < len(fit.class_probabilities()) else "all"
        ax.set_title(f"Class probabilities of {shown} {probs.index.name or 'item'}s (highest entropy first)")
    else:
        ax.set_title(f"Class probabilities of {len(probs)} chosen {probs.index.name or 'item'}s")
    fig.tight_layout()
    return fig


def plot_prevalence(fit: Fit, prob: float = DEFAULT_PROB, ax=None):
    """Prevalence pi: posterior means with central ``prob`` intervals (or the estimate).

    Returns
    -------
    matplotlib.figure.Figure
    """
    pi = fit.point_estimate("pi")
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.0 * len(pi) + 2, 3.2))
    else:
        fig = ax.figure
    x = np.arange(len(pi))
    if fit.has_draws:
        iv = fit.posterior_interval(prob, "pi")
        lower = pi.to_numpy() - iv.sel(bound="lower").to_numpy()
        upper = iv.sel(bound="upper").to_numpy() - pi.to_numpy()
        ax.errorbar(
            x, pi.to_numpy(), yerr=[lower, upper], fmt="o", capsize=4, label=f"posterior mean, {100 * prob:g}% interval"
        )
    else:
        ax.plot(x, pi.to_numpy(), "o", label=f"estimate ({fit.method})")
    ax.set_xticks(x, [str(c) for c in pi.index])
    ax.set_xlabel("category")
    ax.set_ylabel("prevalence")
    ax.set_ylim(0, max(1e-3, float(ax.get_ylim()[1])))
    ax.legend()
    ax.set_title("Prevalence")
    fig.tight_layout()
    return fig


def plot_ppc(result, ax=None, bins: int = 30, yscale: str | None = None):
    """Observed against replicated values of a posterior predictive check.

    * a scalar statistic: histogram of the replicated values, the observed
      value as a vertical line;
    * a scalar discrepancy: replicated against observed value per draw, with
      the line ``T_rep = T_obs`` (points above it count towards ``p_value``);
    * a vector statistic (e.g. :func:`~pyrater.checking.vote_histogram`):
      per component the central intervals of the replicated values (thick:
      the narrowest of ``result.probs``, thin: the widest), their median
      (grey tick) and the observed value (red point; hollow where outside the
      widest interval); for a vector discrepancy, the same of ``T_rep - T_obs``
      against 0.

    Parameters
    ----------
    result : PPCResult
        From :func:`pyrater.posterior_predictive_check`.
    ax : matplotlib Axes, optional
    bins : int
        Histogram bins (scalar statistics).
    yscale : str, optional
        Scale of the y axis of a vector statistic (e.g. ``"log"`` for counts
        spanning orders of magnitude, such as a vote histogram).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if ax is None:
        width = 5.0 if result.is_scalar else max(6.0, 0.45 * len(result.components) + 2)
        fig, ax = plt.subplots(figsize=(width, 3.2 if result.is_scalar else 3.4))
    else:
        fig = ax.figure
    if not result.is_scalar:
        _plot_ppc_intervals(result, ax)
        if yscale is not None:
            ax.set_yscale(yscale)
    elif result.discrepancy:
        obs = np.asarray(result.observed, dtype=float)
        ax.scatter(obs, result.simulated, s=8, color="0.4", alpha=0.6, label="draws")
        lo = float(min(obs.min(), np.min(result.simulated)))
        hi = float(max(obs.max(), np.max(result.simulated)))
        ax.plot([lo, hi], [lo, hi], color="C3", lw=1.5, label="replicated = observed")
        ax.set_xlabel(f"{result.statistic} (observed data)")
        ax.set_ylabel(f"{result.statistic} (replicated)")
        ax.set_title(f"Posterior predictive check (p = {result.p_value:.2f})")
        ax.legend()
    else:
        ax.hist(result.simulated, bins=bins, color="0.7", edgecolor="white", label="replicated data")
        ax.axvline(result.observed, color="C3", lw=2, label=f"observed = {result.observed:.3g}")
        ax.set_xlabel(result.statistic)
        ax.set_ylabel("count")
        ax.set_title(f"Posterior predictive check (p = {result.p_value:.2f})")
        ax.legend()
    fig.tight_layout()
    return fig


def _plot_ppc_intervals(result, ax) -> None:
    """Interval plot of a vector statistic (see :func:`plot_ppc`)."""
    x = np.arange(len(result.components))
    wide, narrow = max(result.probs), min(result.probs)
    w_bounds, n_bounds = result.interval(wide), result.interval(narrow)
    if result.discrepancy:
        values = result.replicated - result._observed_2d
        target = np.zeros(x.size)
        ylabel = f"{result.statistic}: replicated - observed"
    else:
        values = result.replicated
        target = np.asarray(result.observed, dtype=float)
        ylabel = result.statistic
    ax.vlines(x, w_bounds[:, 0], w_bounds[:, 1], color="0.6", lw=1.5, label=f"replicated, central {wide:.0%}")
    if narrow < wide:
        ax.vlines(x, n_bounds[:, 0], n_bounds[:, 1], color="0.35", lw=5, label=f"replicated, central {narrow:.0%}")
    ax.scatter(x, np.median(values, axis=0), marker="_", s=120, color="0.15", zorder=3, label="replicated median")
    inside = result.covers(wide)
    point = "observed" if not result.discrepancy else "0 (no discrepancy)"
    ax.scatter(x[inside], target[inside], color="C3", s=28, zorder=4, label=point)
    if (~inside).any():
        ax.scatter(
            x[~inside],
            target[~inside],
            facecolors="none",
            edgecolors="C3",
            s=48,
            lw=1.5,
            zorder=4,
            label=f"{point}, outside {wide:.0%}",
        )
    ax.set_xticks(x, [str(c) for c in result.components])
    ax.set_xlabel(str(result.components.name or "component"))
    ax.set_ylabel(ylabel)
    n_out = int((~inside).sum())
    ax.set_title(f"{result.design}: {n_out} of {x.size} outside the {wide:.0%} interval")
    ax.legend(fontsize="small")


def _mcmc_idata(fit: Fit):
    if not fit.has_draws:
        raise NotImplementedError(f"trace and rank plots need MCMC draws; this is a {fit.method} fit")
    return fit.to_inference_data()


def plot_trace(fit: Fit, var_names: Sequence[str] = ("pi",), **kwargs):
    """Trace plots (draws per chain and their marginal densities) through ArviZ.

    Uses ``az.plot_trace`` on ArviZ 0.x and ``az.plot_trace_dist`` on ArviZ
    1.x; ``kwargs`` go to that function.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .. import _arviz

    return _arviz.plot_trace(_mcmc_idata(fit), var_names, **kwargs)


def plot_rank(fit: Fit, var_names: Sequence[str] = ("pi",), **kwargs):
    """Rank plots through ArviZ (``az.plot_rank`` on either line; ``kwargs`` go to it).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from .. import _arviz

    return _arviz.plot_rank(_mcmc_idata(fit), var_names, **kwargs)


def plot_sbc(result, quantities: Sequence[str] | None = None, bins: int | None = None, max_panels: int = 12):
    """Rank histograms of a simulation-based calibration run (Talts et al. 2018, figure 1).

    One panel per quantity, the least uniform first (smallest chi-square p-value),
    with the band that holds a bin's count with probability 0.99 when the ranks are
    uniform (binomial quantiles, shaded grey) and the expected count (line).

    Parameters
    ----------
    result : SBCResult
        From :func:`pyrater.sbc`.
    quantities : sequence of str, optional
        Which quantities to draw (default: the ``max_panels`` least uniform).
    bins : int, optional
        As in :meth:`SBCResult.counts`.
    max_panels : int
        At most this many panels.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from scipy import stats

    counts = result.counts(bins)
    if quantities is None:
        quantities = list(result.uniformity(bins).index[:max_panels])
    else:
        quantities = [quantities] if isinstance(quantities, str) else list(quantities)
        unknown = sorted(set(quantities) - set(counts.columns))
        if unknown:
            raise ValueError(f"quantities {unknown} are not in this SBC run; it ranked {list(counts.columns)[:10]} ...")
    n = len(quantities)
    ncol = min(4, n)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.0 * ncol, 2.4 * nrow), squeeze=False, sharey=True)
    b = counts.shape[0]
    lo, hi = stats.binom.ppf([0.005, 0.995], result.n_sims, 1.0 / b)
    expected = result.n_sims / b
    for ax, q in zip(axes.flat, quantities):
        ax.axhspan(lo, hi, color="0.88", zorder=0)
        ax.axhline(expected, color="0.5", lw=1, zorder=1)
        ax.bar(np.arange(b), counts[q].to_numpy(), width=1.0, color="C0", edgecolor="white", zorder=2)
        ax.set_title(q, fontsize=9)
        ax.set_xticks([])
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("replicates")
    fig.suptitle(f"SBC ranks: {result.model} by {result.method} ({result.n_sims} replicates, {result.n_draws} draws)")
    fig.tight_layout()
    return fig
