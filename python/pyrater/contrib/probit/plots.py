"""Plots of the bootstrap distributions of per-group counts."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .bootstrap import GroupCounts

__all__ = ["plot_group_counts"]


def plot_group_counts(
    result: GroupCounts,
    groups: Sequence[Hashable] | None = None,
    *,
    which: str = "count",
    prob: float | None = None,
    truth: Any = None,
    max_groups: int = 40,
    ax: Any = None,
):
    """Per-group bootstrap distributions as horizontal violins with intervals.

    Parameters
    ----------
    result : GroupCounts
    groups : sequence, optional
        Groups to show (default: all, up to ``max_groups``, in result order).
    which : {"count", "proportion", "total"}
    prob : float, optional
        Interval probability (default ``result.prob``, 0.9); the central
        interval is drawn as a thick line, the median as a dot.
    truth : mapping or Series, optional
        Known values per group (e.g. in simulations), drawn as crosses.
    max_groups : int
        Upper bound on the number of groups drawn when ``groups`` is None.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
    """
    import matplotlib.pyplot as plt
    import pandas as pd

    draws = result._draws(which)
    if groups is None:
        groups = list(draws.columns[:max_groups])
    else:
        unknown = [g for g in groups if g not in draws.columns]
        if unknown:
            raise KeyError(f"unknown group(s) {unknown[:5]}; groups are {list(draws.columns)[:10]}")
        groups = list(groups)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * len(groups) + 1.2))
    iv = result.interval(prob, which).loc[groups]
    med = draws[groups].median(axis=0)
    pos = np.arange(len(groups))
    data = [draws[g].to_numpy(dtype=float) for g in groups]
    spread = np.array([np.ptp(d) > 0 for d in data], dtype=bool)  # a KDE needs spread
    if spread.any():
        try:  # matplotlib >= 3.10
            parts = ax.violinplot(
                [d for d, s in zip(data, spread) if s],
                positions=pos[spread],
                orientation="horizontal",
                showextrema=False,
                widths=0.8,
            )
        except TypeError:
            parts = ax.violinplot(
                [d for d, s in zip(data, spread) if s], positions=pos[spread], vert=False, showextrema=False, widths=0.8
            )
        for body in parts["bodies"]:
            body.set_alpha(0.35)
    ax.hlines(pos, iv["lower"], iv["upper"], color="C0", lw=3, label=f"{100 * (prob or result.prob):g}% interval")
    ax.plot(med.to_numpy(), pos, "o", color="C0", ms=4, label="median")
    if truth is not None:
        tr = pd.Series(truth).reindex(groups).to_numpy(dtype=float)
        ax.plot(tr, pos, "x", color="C3", ms=7, label="truth")
    ax.set_yticks(pos)
    ax.set_yticklabels([str(g) for g in groups])
    ax.invert_yaxis()
    ax.set_xlabel(
        {"count": "number of positive items", "proportion": "proportion positive", "total": "population total"}[which]
    )
    ax.set_ylabel(str(draws.columns.name or "group"))
    ax.legend(loc="best", fontsize="small")
    return ax
