"""A Stan model fitted by NUTS (:func:`pyrater.fit` with ``method="mcmc"``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .draws import DrawsFit

__all__ = ["MCMCFit", "MAX_TREE_DEPTH"]

#: Stan's default maximum tree depth of NUTS.
MAX_TREE_DEPTH = 10


@dataclass(eq=False, repr=False)
class MCMCFit(DrawsFit):
    """A Stan model fitted by NUTS.

    The fields of :class:`~pyrater.fits.draws.DrawsFit`; ``sample_stats``
    holds NUTS's ``diverging``, ``tree_depth``, ``lp``, ... per draw, and
    ``engine`` is ``"pystan"`` or ``"cmdstanpy"``; ``settings`` holds chains,
    warmup, draws, seed and the Stan version.
    """

    method: str = "mcmc"

    def _summary_info(self) -> dict[str, Any]:
        info = super()._summary_info()
        info = {"engine": info.pop("engine"), "Stan version": self.settings.get("stan_version"), **info}
        info["divergences"] = int(np.asarray(self.sample_stats.get("diverging", 0)).sum())
        info["sampling time (s)"] = info.pop("sampling time (s)")
        return info

    def _sampler_problems(self, table: pd.DataFrame) -> list[str]:
        n_div = int(np.asarray(self.sample_stats.get("diverging", np.zeros(1))).sum())
        depth = np.asarray(self.sample_stats.get("tree_depth", np.zeros(1)))
        table.attrs["divergences"] = n_div
        table.attrs["max_tree_depth_hits"] = int((depth >= MAX_TREE_DEPTH).sum())
        problems = []
        if n_div:
            problems.append(f"{n_div} divergent transitions after warmup")
        if table.attrs["max_tree_depth_hits"]:
            problems.append(
                f"{table.attrs['max_tree_depth_hits']} transitions hit the maximum tree depth ({MAX_TREE_DEPTH})"
            )
        return problems
