"""Fitting a model's Stan program: NUTS, the posterior mode, Pathfinder.

Each function builds the program's data from a :class:`~pyrater.RatingData`
once (:func:`pyrater.inference.stan.data.stan_data`), runs it on an engine
(cmdstanpy or pystan) and returns the fit of :mod:`pyrater.fits`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..._stacklevel import user_stacklevel
from ...data.ratings import RatingData
from ...fits.mcmc import MCMCFit
from ...fits.optimize import OptimizeFit
from ...fits.pathfinder import PathfinderFit
from ...models import Model
from .data import stan_data, stan_inits
from .engines import get_engine

__all__ = ["sample", "optimize", "pathfinder", "check_inits"]


def check_inits(inits: Any, n: int | None) -> list[dict] | None:
    """``inits`` as a list of dicts (one per chain, ``n`` of them when ``n`` is given), or None."""
    if inits is None:
        return None
    if not isinstance(inits, (list, tuple)) or not all(isinstance(x, dict) for x in inits):
        raise ValueError("inits must be a list of dicts, one per chain (or per optimisation start)")
    if n is not None and len(inits) != n:
        raise ValueError(f"inits has {len(inits)} entries for {n} chains")
    return list(inits)


def sample(
    data: RatingData,
    model: Model,
    known: np.ndarray | None,
    *,
    engine: str,
    chains: int,
    warmup: int,
    draws: int,
    seed: int,
    inits: list[dict] | None,
    progress: bool,
    log_lik: bool,
) -> MCMCFit:
    """NUTS in Stan: an :class:`~pyrater.fits.mcmc.MCMCFit` (warns about sampler problems at once)."""
    K, J = data.n_categories, data.n_raters
    eng = get_engine(engine)
    sdata = stan_data(data, model, known=known, log_lik=log_lik)
    inits = inits if inits is not None else stan_inits(model, K, J, chains, seed)
    res = eng.sample(
        model.name, sdata, chains=chains, warmup=warmup, draws=draws, seed=seed, inits=inits, progress=progress
    )
    fit = MCMCFit(
        data=data,
        model=model,
        priors=model.priors(K, J),
        draws=res.draws,
        sample_stats=res.sample_stats,
        known=known,
        engine=res.engine,
        settings={"chains": chains, "warmup": warmup, "draws": draws, "seed": seed, "stan_version": res.stan_version},
        elapsed=res.elapsed,
    )
    fit.mcmc_diagnostics(warn=True)
    return fit


def pathfinder(
    data: RatingData,
    model: Model,
    known: np.ndarray | None,
    *,
    engine: str,
    chains: int,
    draws: int,
    seed: int,
    inits: list[dict] | None,
    log_lik: bool,
) -> PathfinderFit:
    """Stan's Pathfinder (cmdstanpy only): ``chains`` paths, ``draws`` PSIS-resampled draws."""
    eng = get_engine(engine)
    if eng.name != "cmdstanpy":
        raise ValueError(
            f"method='pathfinder' needs the cmdstanpy engine (Stan's Pathfinder runs in CmdStan); the "
            f"{eng.name!r} engine was chosen{' because no working CmdStan was found' if engine == 'auto' else ''}. "
            "Install CmdStan (`python -m cmdstanpy.install_cmdstan`) and use engine='cmdstanpy', or use "
            "method='mcmc'"
        )
    sdata = stan_data(data, model, known=known, log_lik=log_lik)
    res = eng.pathfinder(model.name, sdata, draws=draws, num_paths=chains, seed=seed, inits=inits)
    idx = res.resampled
    return PathfinderFit(
        data=data,
        model=model,
        priors=model.priors(data.n_categories, data.n_raters),
        draws=res.draws,
        sample_stats={"lp": res.lp[idx][None], "lp_approx": res.lp_approx[idx][None]},
        known=known,
        engine=res.engine,
        settings={"num_paths": res.num_paths, "draws": res.n_draws, "seed": res.seed, "stan_version": res.stan_version},
        elapsed=res.elapsed,
        pareto_k=res.pareto_k,
        lp=res.lp,
        lp_approx=res.lp_approx,
        log_weights=res.log_weights,
    )


def optimize(
    data: RatingData,
    model: Model,
    known: np.ndarray | None,
    *,
    engine: str,
    seed: int,
    inits: list[dict] | None,
    n_inits: int,
    known_labels: Any = None,
) -> OptimizeFit:
    """The posterior mode by Stan's L-BFGS from ``n_inits`` diagonal-heavy starts plus EM's mode; best kept.

    ``known_labels`` (the user's ``known`` mapping) seeds the EM start.
    """
    K, J = data.n_categories, data.n_raters
    priors = model.priors(K, J)
    _warn_small_beta(priors)
    eng = get_engine(engine)
    sdata = stan_data(data, model, known=known, log_lik=False)
    if inits is None:
        inits = stan_inits(model, K, J, n_inits, seed)
        start = _em_start(data, model, known_labels, seed)
        if start is not None:
            inits.append(start)
    res = eng.optimize(model.name, sdata, seed=seed, inits=list(inits), n_inits=len(inits))
    return OptimizeFit(
        data=data,
        model=model,
        priors=priors,
        params=res.params,
        known=known,
        engine=res.engine,
        log_density=float(res.log_density),
        all_log_densities=np.asarray(res.all_log_densities),
        converged=np.asarray(res.converged, dtype=bool),
        settings={"n_inits": len(inits), "seed": seed, "stan_version": res.stan_version},
    )


def _warn_small_beta(priors: dict[str, np.ndarray]) -> None:
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
    from ..em.algorithm import em

    if "em" not in model.methods:
        return None
    try:
        ref = em(data, model, method="map", known=known, n_restarts=5, seed=seed)
    except (ValueError, NotImplementedError, FloatingPointError):  # e.g. priors below 1: no EM mode
        return None
    return model.mode_start(ref.pi, ref.theta)
