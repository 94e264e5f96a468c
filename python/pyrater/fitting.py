"""``pyrater.fit``: one entry point for every model and method, in rater's spirit.

Examples
--------
>>> import pyrater
>>> sim = pyrater.simulate("dawid_skene", n_items=200, n_raters=5, n_categories=3, seed=1)
>>> f = pyrater.fit(sim.data, "dawid_skene", method="optimize", seed=1)  # doctest: +SKIP
>>> f.point_estimate("pi")  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import pandas as pd

from .data import DataFormat, RatingData, as_rating_data
from .models import Model, get_model
from .results import Fit

__all__ = ["fit", "METHODS"]

METHODS = ("mcmc", "optimize", "em", "gibbs")
Method = Literal["mcmc", "optimize", "em", "gibbs"]


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _resolve_seed(seed: int | None) -> int:
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**31 - 1))
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**31:
        raise ValueError(f"seed must be an integer in [0, 2**31), got {seed!r}")
    return int(seed)


def _warn_small_beta(model: Model, priors: dict[str, np.ndarray]) -> None:
    """Posterior modes can sit on the boundary when a Dirichlet/Beta parameter is < 1."""
    small = []
    if "beta" in priors:
        beta = priors["beta"]
        K = beta.shape[-1]
        off = ~np.eye(K, dtype=bool)
        if np.any(beta[..., off] < 1):
            small.append(f"off-diagonal beta (min {beta[..., off].min():.3g})")
    for key in ("beta1", "beta2"):
        if key in priors and np.any(priors[key] < 1):
            small.append(f"{key} (min {priors[key].min():.3g})")
    if small:
        warnings.warn(
            f"{', '.join(small)} below 1: the posterior density is unbounded at the simplex boundary, so the "
            "mode may be degenerate (some error probabilities exactly 0). Use values >= 1 for optimisation, "
            "or method='mcmc'.",
            UserWarning,
            stacklevel=3,
        )


def fit(
    data: RatingData | pd.DataFrame,
    model: str | Model = "dawid_skene",
    method: Method = "mcmc",
    data_format: DataFormat = "long",
    *,
    known: dict | pd.Series | None = None,
    engine: str = "auto",
    chains: int = 4,
    warmup: int = 1000,
    draws: int = 1000,
    seed: int | None = None,
    inits: list[dict] | None = None,
    n_inits: int = 4,
    progress: bool = True,
    log_lik: bool = True,
    thin: int = 1,
    **data_options: Any,
) -> Fit:
    """Fit a Dawid-Skene-family model to rating data.

    Parameters
    ----------
    data : RatingData or DataFrame
        Ratings; a DataFrame is read in ``data_format``.  A Dask DataFrame
        (long; column names in ``data_options``) or a
        :class:`pyrater.DistributedRatingData` is fitted on the Dask cluster
        (``method="em"`` or ``"gibbs"``; see :mod:`pyrater.native.distributed`).
    model : str or model object
        ``"dawid_skene"``, ``"hierarchical"``, ``"class_conditional"``,
        ``"homogeneous"``, or e.g. ``DawidSkene(alpha=..., beta=...)`` to set
        priors.
    method : {"mcmc", "optimize", "em", "gibbs"}
        ``"mcmc"``: NUTS in Stan; ``"gibbs"``: the blocked Gibbs sampler
        in numba (:func:`pyrater.native.gibbs.gibbs`; Dawid-Skene,
        class-conditional and homogeneous models, same priors as Stan,
        one pass over the counts per draw: for large data); ``"optimize"``: posterior mode in Stan
        (L-BFGS from ``n_inits`` starts, best kept); ``"em"``: posterior mode
        by the numpy EM with the model's priors (see :func:`pyrater.em` for
        maximum likelihood).  Modes need every Dirichlet/Beta hyperparameter
        >= 1 (rater's default off-diagonal ``beta`` is ``3.2 / (K - 1)``,
        below 1 for K >= 5: ``"optimize"`` warns, ``"em"`` refuses).  The
        hierarchical model's mode is of limited use: ``softmax(gamma)`` is
        unchanged by adding a constant to a row and the non-centred
        posterior has a funnel, so ``sigma`` may run towards 0 at the mode;
        prefer MCMC for it.
    data_format : {"long", "wide", "grouped"}
        Format of a DataFrame ``data``.
    known : dict or Series, optional
        ``{item label: true category label}`` for items whose class is
        known; the fit conditions on them.
    engine : {"auto", "cmdstanpy", "pystan"}
        ``"auto"`` uses cmdstanpy when a CmdStan installation is found, else
        pystan.
    chains, warmup, draws : int
        MCMC settings (draws per chain after warmup).
    seed : int, optional
        Random seed (drawn and recorded in the fit when not given).
    inits : list of dict, optional
        Initial values, one dict per chain (or per optimisation start).
        Default: diagonal-heavy values that break label switching.
    n_inits : int
        Optimisation starts.
    progress : bool
        Show sampler progress.
    log_lik : bool
        Write the per-item log-likelihood (needed for LOO/WAIC).
    thin : int
        ``method="gibbs"`` only: keep every ``thin``-th of the ``draws``
        sweeps (memory; see :mod:`pyrater.native.gibbs`).
    **data_options
        Passed to the DataFrame reader (column names, ``categories``, ``tally``).

    Returns
    -------
    MCMCFit, GibbsFit, OptimizeFit or EMFit
        All answer ``summary``, ``point_estimate``, ``class_probabilities``,
        ``posterior_interval``, ``posterior_samples``, ``mcmc_diagnostics``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if method != "gibbs" and thin != 1:
        raise ValueError(f"thin is used by method='gibbs' only; got thin={thin!r} with method={method!r}")
    model = get_model(model)
    from .native.distributed import is_distributed

    if is_distributed(data):  # a Dask DataFrame or DistributedRatingData: fitted on the cluster
        from .native.distributed.fit import fit_distributed

        return fit_distributed(data, model, method, data_format, known=known, seed=seed, chains=chains,
                               warmup=warmup, draws=draws, thin=thin, log_lik=log_lik, **data_options)
    data = as_rating_data(data, data_format, **data_options)
    K, J = data.n_categories, data.n_raters
    priors = model.priors(K, J)
    known_codes = data.known_codes(known)
    seed = _resolve_seed(seed)

    if method == "em":
        from .native.em import em

        return em(data, model, method="map", known=known, seed=seed)

    chains = _positive_int("chains", chains)
    warmup = _positive_int("warmup", warmup, minimum=0)
    draws = _positive_int("draws", draws)
    thin = _positive_int("thin", thin)
    if method == "gibbs":
        if inits is not None:
            raise ValueError("inits are not used by method='gibbs' (chains start around the majority vote)")
        from .native.gibbs import gibbs

        return gibbs(data, model, chains=chains, warmup=warmup, draws=draws, thin=thin, seed=seed, known=known,
                     log_lik=log_lik)
    n_inits = _positive_int("n_inits", n_inits)
    if inits is not None:
        if not isinstance(inits, (list, tuple)) or not all(isinstance(x, dict) for x in inits):
            raise ValueError("inits must be a list of dicts, one per chain (or per optimisation start)")
        if method == "mcmc" and len(inits) != chains:
            raise ValueError(f"inits has {len(inits)} entries for {chains} chains")

    from .engines import get_engine
    from .stan_data import stan_data, stan_inits
    from .stanfit import MCMCFit, OptimizeFit

    eng = get_engine(engine)
    sdata = stan_data(data, model, known=known_codes, log_lik=log_lik)
    if method == "mcmc":
        inits = list(inits) if inits is not None else stan_inits(model, K, J, chains, seed)
        res = eng.sample(
            model.name, sdata, chains=chains, warmup=warmup, draws=draws, seed=seed, inits=inits, progress=progress
        )
        result = MCMCFit(
            data=data,
            model=model,
            priors=priors,
            draws=res.draws,
            sample_stats=res.sample_stats,
            known=known_codes,
            engine=res.engine,
            settings={"chains": chains, "warmup": warmup, "draws": draws, "seed": seed},
            elapsed=res.elapsed,
        )
        result.mcmc_diagnostics(warn=True)
        return result

    _warn_small_beta(model, priors)
    if inits is None:
        inits = stan_inits(model, K, J, n_inits, seed)
    res = eng.optimize(model.name, sdata, seed=seed, inits=list(inits), n_inits=len(inits))
    return OptimizeFit(
        data=data,
        model=model,
        priors=priors,
        params=res.params,
        known=known_codes,
        engine=res.engine,
        log_density=float(res.log_density),
        all_log_densities=np.asarray(res.all_log_densities),
        converged=np.asarray(res.converged, dtype=bool),
        settings={"n_inits": len(inits), "seed": seed},
    )
