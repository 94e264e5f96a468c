"""Plots of a latent-graph LCM fit: the estimated graph and each target's TPR/FPR."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .model import LCMResult

__all__ = ["plot_graph", "plot_rates"]


def plot_graph(result: LCMResult, ax=None, threshold: float = 0.0, cmap: str = "viridis"):
    """Draw targets on a circle joined by edges whose width and colour show E[D_kk'].

    Parameters
    ----------
    result : LCMResult
    ax : matplotlib Axes, optional
    threshold : float
        Edges with probability below this are not drawn.
    cmap : str
        Colour map for the edge probabilities.

    Returns
    -------
    matplotlib Axes
    """
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4))
    P = result.edge_prob_array
    names = list(result.targets)
    K = len(names)
    ang = np.pi / 2 - 2 * np.pi * np.arange(K) / K
    xy = np.column_stack([np.cos(ang), np.sin(ang)])
    cm = plt.get_cmap(cmap)
    norm = Normalize(0, 1)
    i, j = np.triu_indices(K, 1)
    order = np.argsort(P[i, j])
    for a, b in zip(i[order], j[order]):
        p = P[a, b]
        if p < threshold:
            continue
        ax.plot(xy[[a, b], 0], xy[[a, b], 1], color=cm(norm(p)), lw=0.5 + 5 * p, alpha=0.3 + 0.7 * p, zorder=1)
    ax.scatter(xy[:, 0], xy[:, 1], s=500, color="white", edgecolor="black", zorder=2)
    for k, name in enumerate(names):
        ax.annotate(str(name), xy[k], ha="center", va="center", fontsize=8, zorder=3)
    ax.figure.colorbar(ScalarMappable(norm=norm, cmap=cm), ax=ax, label="edge probability E[D]")
    rho = result.rho_summary()
    ax.set_title(f"estimated graph (E[rho] = {rho['mean']:.2f})")
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def plot_rates(result: LCMResult, ax=None, prob: float = 0.9, truth=None):
    """Posterior mean and central ``prob`` interval of TPR (gamma) and FPR (delta) per target.

    Parameters
    ----------
    result : LCMResult
    ax : matplotlib Axes, optional
    prob : float
        Interval probability (default 0.9).
    truth : LCMParams, optional
        True values to overlay as crosses (for simulations).

    Returns
    -------
    matplotlib Axes
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    s = result.summary(prob)
    x = np.arange(len(s))
    for off, name, label, colour in ((-0.12, "gamma", "TPR (gamma)", "C0"), (0.12, "delta", "FPR (delta)", "C3")):
        m = s[f"{name}_mean"].to_numpy()
        err = np.vstack([m - s[f"{name}_lo"].to_numpy(), s[f"{name}_hi"].to_numpy() - m])
        ax.errorbar(x + off, m, yerr=err, fmt="o", color=colour, capsize=3, label=label)
        if truth is not None:
            ax.scatter(
                x + off,
                getattr(truth, name),
                marker="x",
                color="black",
                zorder=3,
                label="truth" if name == "gamma" else None,
            )
    ax.set_xticks(x, [str(t) for t in s.index])
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"rate ({int(round(prob * 100))}% interval)")
    ax.set_xlabel("target")
    ax.legend(fontsize=8, loc="center right")
    return ax
