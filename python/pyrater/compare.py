"""Model comparison by PSIS-LOO and WAIC on the per-item log-likelihood.

Items are the unit of leave-one-out: all ratings of an item share its true
class, so the Stan programs write ``log_lik[item]`` (for grouped data each
pattern's value is repeated for each of its items).  The computations are
ArviZ's (``az.loo``, ``az.waic``, ``az.compare``); this module adds the
checks a user needs: draws are required, fits must share the same data, and
Pareto-k problems are reported.
"""

from __future__ import annotations

import warnings
from typing import Mapping

import numpy as np
import pandas as pd

from .results import Fit

__all__ = ["loo", "waic", "compare", "PARETO_K_THRESHOLD"]

PARETO_K_THRESHOLD = 0.7


def _idata(fit: Fit):
    if not fit.has_draws:
        raise NotImplementedError(
            f"LOO and WAIC need posterior draws; this is a {fit.method} fit. Refit with method='mcmc'."
        )
    idata = fit.to_inference_data()
    if "log_likelihood" not in idata.groups():
        raise ValueError("the fit has no per-item log-likelihood; refit with log_lik=True")
    return idata


def loo(fit: Fit, warn: bool = True):
    """PSIS-LOO expected log predictive density, items as the unit.

    Returns ArviZ's ELPDData (``elpd_loo``, ``se``, ``p_loo``, pointwise
    ``loo_i`` and ``pareto_k``), with ``n_bad_k`` added: the number of items
    with Pareto k > 0.7, for which the PSIS estimate is unreliable (a warning
    names them).
    """
    from ._quiet import import_arviz

    az = import_arviz()

    idata = _idata(fit)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto distribution")
        res = az.loo(idata, pointwise=True)
    k = np.asarray(res.pareto_k)
    bad = np.flatnonzero(k > PARETO_K_THRESHOLD)
    res["n_bad_k"] = int(bad.size)
    if warn and bad.size:
        items = np.asarray(idata.log_likelihood["log_lik"].coords["item"].values)[bad]
        warnings.warn(
            f"{bad.size} item(s) with Pareto k > {PARETO_K_THRESHOLD}: {list(items[:10])}; "
            "the PSIS-LOO estimate is unreliable for them (consider K-fold cross-validation)",
            UserWarning,
            stacklevel=2,
        )
    return res


def waic(fit: Fit):
    """WAIC (widely applicable information criterion) on the per-item log-likelihood."""
    from ._quiet import import_arviz

    az = import_arviz()

    idata = _idata(fit)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="For one or more samples the posterior variance")
        return az.waic(idata, pointwise=True)


def _same_data(a: Fit, b: Fit) -> bool:
    ka = getattr(a, "known", None)
    kb = getattr(b, "known", None)
    same_known = (ka is None and kb is None) or (
        ka is not None and kb is not None and np.array_equal(np.asarray(ka), np.asarray(kb))
    )
    return a.data.equals(b.data) and same_known


def compare(fits: Mapping[str, Fit], ic: str = "loo") -> pd.DataFrame:
    """Rank fits by expected log predictive density (ArviZ's ``compare``).

    Parameters
    ----------
    fits : dict
        ``{name: fit}``, MCMC fits of the same data.
    ic : {"loo", "waic"}

    Returns
    -------
    DataFrame
        One row per model, best first: ``rank``, ``elpd_<ic>``, ``p_<ic>``,
        ``elpd_diff`` and its standard error ``dse`` relative to the best,
        ``weight``, ``se``, ``warning``.
    """
    from ._quiet import import_arviz

    az = import_arviz()

    if ic not in ("loo", "waic"):
        raise ValueError(f"ic must be 'loo' or 'waic', got {ic!r}")
    if len(fits) < 2:
        raise ValueError("compare needs at least two fits")
    names = list(fits)
    first = fits[names[0]]
    for name in names[1:]:
        if not _same_data(first, fits[name]):
            raise ValueError(
                f"fits {names[0]!r} and {name!r} were made on different data (or different known items); "
                "LOO comparisons are only meaningful on the same data"
            )
    idatas = {name: _idata(f) for name, f in fits.items()}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto distribution")
        warnings.filterwarnings("ignore", message="For one or more samples the posterior variance")
        table = az.compare(idatas, ic=ic)
    return table
