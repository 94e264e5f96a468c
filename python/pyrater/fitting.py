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

from ._stacklevel import user_stacklevel
from .data import DataFormat, RatingData, as_rating_data
from .models import Model, get_model
from .results import Fit

__all__ = ["fit", "METHODS"]

METHODS = ("mcmc", "optimize", "em", "gibbs", "pathfinder")
Method = Literal["mcmc", "optimize", "em", "gibbs", "pathfinder"]


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
            stacklevel=user_stacklevel(),
        )


def _em_start(data: RatingData, model: Model, known: Any, seed: int) -> dict[str, np.ndarray] | None:
    """An optimiser start at the EM posterior mode (best of 6 EM runs), or None where EM cannot run.

    The posterior is multimodal; starting L-BFGS both from random diagonal-heavy
    values and from EM's best mode lets the optimiser land on the best mode
    either route finds, whatever the Stan version.
    """
    from .native.em import em
    from .models import ClassConditionalDawidSkene, DawidSkene, HomogeneousDawidSkene

    if not isinstance(model, (DawidSkene, HomogeneousDawidSkene, ClassConditionalDawidSkene)):
        return None
    try:
        ref = em(data, model, method="map", known=known, n_restarts=5, seed=seed)
    except (ValueError, NotImplementedError, FloatingPointError):  # e.g. priors below 1: no EM mode
        return None

    def interior(rows: np.ndarray) -> np.ndarray:  # Stan needs starts inside the simplex
        rows = np.clip(np.asarray(rows, dtype=float), 1e-6, None)
        return rows / rows.sum(axis=-1, keepdims=True)

    start = {"pi": interior(ref.pi)}
    if isinstance(model, DawidSkene):
        start["theta"] = interior(ref.theta)
    elif isinstance(model, HomogeneousDawidSkene):
        start["theta"] = interior(ref.theta[0])
    else:
        start["p"] = np.clip(np.einsum("jkk->jk", ref.theta), 1e-6, 1 - 1e-6)
    return start


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
    pi_moves: int = 0,
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
        maximum likelihood); ``"pathfinder"``: Stan's Pathfinder variational
        approximation (cmdstanpy engine only; ``chains`` paths, ``draws``
        PSIS-resampled draws; see :class:`pyrater.pathfinder.PathfinderFit`).
        Modes need every Dirichlet/Beta hyperparameter
        >= 1 (rater's default off-diagonal ``beta`` is ``3.2 / (K - 1)``,
        below 1 for K >= 5: ``"optimize"`` warns, ``"em"`` refuses).  The
        hierarchical model's mode is of limited use: ``softmax(gamma)`` is
        unchanged by adding a constant to a row and the non-centred
        posterior has a funnel, so ``sigma`` may run towards 0 at the mode;
        prefer MCMC for it.  ``"optimize"`` and ``"em"`` seek the same
        mode but can end at different ones: the posterior of these models
        often has several local modes (label-switched and genuinely
        different ones), each route climbs from its own starts (Stan:
        ``n_inits`` diagonal-heavy inits; EM: a search over majority-vote,
        per-rater, weighted-vote and random starts, see :func:`pyrater.em`
        ``init``), and a route keeps the best mode it reached.  Compare
        their log posteriors (``log_density`` of an optimize fit,
        ``log_posterior`` of an EM fit; both the full log density up to
        ``log p(y)``): the higher is the better mode.  On the anaesthesia
        data both reach -108.30; EM from the majority vote alone stops at
        -110.64.
    data_format : {"long", "wide", "grouped"}
        Format of a DataFrame ``data``.
    known : dict or Series, optional
        ``{item label: true category label}`` for items whose class is
        known; the fit conditions on them.
    engine : {"auto", "cmdstanpy", "pystan"}
        ``"auto"`` uses cmdstanpy when a working CmdStan installation is
        found, else pystan.  The fit records the engine and Stan version.
    chains, warmup, draws : int
        MCMC settings (draws per chain after warmup).
    seed : int, optional
        Random seed (drawn and recorded in the fit when not given).
    inits : list of dict, optional
        Initial values, one dict per chain (or per optimisation start).
        Default: diagonal-heavy values that break label switching.
    n_inits : int
        Random optimisation starts.  Without ``inits``, one more start at the
        EM posterior mode is added for the models EM fits (all but the
        hierarchical one), so the optimiser reaches the best mode that either
        route finds.
    progress : bool
        Show sampler progress.
    log_lik : bool
        Write the per-item log-likelihood (needed for LOO/WAIC).
    thin : int
        ``method="gibbs"`` only: keep every ``thin``-th of the ``draws``
        sweeps (memory; see :mod:`pyrater.native.gibbs`).
    pi_moves : int
        ``method="gibbs"`` only: Metropolis moves on ``pi`` with the true
        classes summed out, per sweep (default 0, plain blocked Gibbs).
        Try 3 when ``mcmc_diagnostics()`` shows ``pi`` mixing slowly (many
        items between two classes); see :mod:`pyrater.native.gibbs`.
    **data_options
        Passed to the DataFrame reader (column names, ``categories``, ``tally``).

    Returns
    -------
    MCMCFit, GibbsFit, OptimizeFit, EMFit or PathfinderFit
        All answer ``summary``, ``point_estimate``, ``class_probabilities``,
        ``posterior_interval``, ``posterior_samples``, ``mcmc_diagnostics``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    if method != "gibbs" and thin != 1:
        raise ValueError(f"thin is used by method='gibbs' only; got thin={thin!r} with method={method!r}")
    if method != "gibbs" and pi_moves != 0:
        raise ValueError(f"pi_moves is used by method='gibbs' only; got pi_moves={pi_moves!r} with method={method!r}")
    model = get_model(model)
    from .native.distributed import is_distributed

    if is_distributed(data):  # a Dask DataFrame or DistributedRatingData: fitted on the cluster
        if pi_moves != 0:
            raise ValueError("pi_moves is not available for distributed data (the in-memory Gibbs sampler only)")
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
                     log_lik=log_lik, pi_moves=pi_moves)
    n_inits = _positive_int("n_inits", n_inits)
    if inits is not None:
        if not isinstance(inits, (list, tuple)) or not all(isinstance(x, dict) for x in inits):
            raise ValueError("inits must be a list of dicts, one per chain (or per optimisation start)")
        if method in ("mcmc", "pathfinder") and len(inits) != chains:
            raise ValueError(f"inits has {len(inits)} entries for {chains} chains")

    from .engines import get_engine
    from .stan_data import stan_data, stan_inits
    from .stanfit import MCMCFit, OptimizeFit

    eng = get_engine(engine)
    if method == "pathfinder" and eng.name != "cmdstanpy":
        raise ValueError(
            f"method='pathfinder' needs the cmdstanpy engine (Stan's Pathfinder runs in CmdStan); the "
            f"{eng.name!r} engine was chosen{' because no working CmdStan was found' if engine == 'auto' else ''}. "
            "Install CmdStan (`python -m cmdstanpy.install_cmdstan`) and use engine='cmdstanpy', or use "
            "method='mcmc'"
        )
    sdata = stan_data(data, model, known=known_codes, log_lik=log_lik)
    if method == "pathfinder":
        from .pathfinder import PathfinderFit

        res = eng.pathfinder(model.name, sdata, draws=draws, num_paths=chains, seed=seed,
                             inits=list(inits) if inits is not None else None)
        return PathfinderFit.from_result(res, data=data, model=model, priors=priors, known=known_codes)
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
            settings={"chains": chains, "warmup": warmup, "draws": draws, "seed": seed,
                      "stan_version": res.stan_version},
            elapsed=res.elapsed,
        )
        result.mcmc_diagnostics(warn=True)
        return result

    _warn_small_beta(model, priors)
    if inits is None:
        inits = stan_inits(model, K, J, n_inits, seed)
        start = _em_start(data, model, known, seed)
        if start is not None:
            inits.append(start)
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
        settings={"n_inits": len(inits), "seed": seed, "stan_version": res.stan_version},
    )
