"""Fitting a model's Stan program: NUTS, the posterior mode, Pathfinder.

Each function builds the program's data from a :class:`~pyrater.RatingData`
once (:func:`pyrater.inference.stan.data.stan_data`), runs it on an engine
(cmdstanpy or pystan) and returns the fit of :mod:`pyrater.fits`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..._stacklevel import user_stacklevel
from ..._validation import GIB, check_int, check_memory, memory_limit
from ...data.ratings import RatingData
from ...fits.item_difficulty import fit_class
from ...fits.mcmc import MCMCFit
from ...fits.optimize import OptimizeFit
from ...fits.pathfinder import PathfinderFit
from ...models import Model
from .data import stan_data, stan_inits
from .engines import get_engine

__all__ = [
    "sample",
    "optimize",
    "pathfinder",
    "check_inits",
    "check_draws_memory",
    "compress_stan_data",
    "MAX_ITERATIONS",
]

#: Stan counts iterations in a 32-bit int: warm-up plus draws per chain may not exceed this
MAX_ITERATIONS = 2**31 - 1


def prepare_data(data: RatingData, model: Model, known: np.ndarray | None) -> RatingData:
    """The data as ``model``'s program reads them (item_difficulty: grouped patterns expanded to items).

    Raises
    ------
    ValueError
        Known classes given per pattern of grouped data that has to be expanded.
    """
    model.check_data(data)
    prepared = model.prepare_data(data)
    if prepared is not data and known is not None:
        raise ValueError(
            f"the {model.name} model expands grouped data to items (per-item parameters); known classes cannot be "
            "given per rating pattern: pass the data in long format with item labels"
        )
    return prepared


def compress_stan_data(sdata: dict[str, Any]) -> tuple[dict[str, Any], np.ndarray | None]:
    """The Stan data on their distinct units: each distinct (count row, known class) once, weights summed.

    The rows are found as EM finds them (:func:`pyrater.data.rows.compress_rows`); where its
    hash check fails (a collision), the data are returned as they are, with ``inverse`` None.

    Parameters
    ----------
    sdata : dict
        From :func:`~pyrater.inference.stan.data.stan_data`.

    Returns
    -------
    compressed : dict
        The same layout with ``I`` the number of distinct units.
    inverse : int array (I,) or None
        The compressed unit of every original unit (per-unit ``log_lik`` maps back as ``ll[..., inverse]``).
    """
    import scipy.sparse as sp

    from ...data.rows import compress_rows

    I, JK = int(sdata["I"]), int(sdata["J"]) * int(sdata["K"])
    counts = sp.csr_matrix((sdata["w"], np.asarray(sdata["v"]) - 1, np.asarray(sdata["u"]) - 1), shape=(I, JK))
    rows = compress_rows(counts, np.asarray(sdata["weight"]), np.asarray(sdata["known"]))
    if rows is None:  # pragma: no cover - a 64-bit hash collision: Stan reads every unit
        return sdata, None
    first, inverse = rows
    sub = counts[first].tocsr()
    sub.sort_indices()
    out = dict(sdata)
    out.update(
        I=int(first.size),
        weight=np.bincount(inverse, weights=np.asarray(sdata["weight"]), minlength=first.size).astype(np.int64),
        nnz=int(sub.nnz),
        w=np.asarray(sub.data, dtype=float),
        v=np.asarray(sub.indices, dtype=np.int64) + 1,
        u=np.asarray(sub.indptr, dtype=np.int64) + 1,
        known=np.asarray(sdata["known"])[first],
    )
    return out, inverse


def _program_data(data: RatingData, model: Model, known: np.ndarray | None, log_lik: bool) -> tuple[dict, Any]:
    """The Stan data of ``model`` and the map of its units back to the data's (None: the same units)."""
    sdata = stan_data(data, model, known=known, log_lik=log_lik)
    if not model.stan_compress:
        return sdata, None
    return compress_stan_data(sdata)


def _unit_values(values: dict[str, np.ndarray], inverse: np.ndarray | None) -> dict[str, np.ndarray]:
    """Stan's outputs with the per-unit ``log_lik`` of compressed units mapped back to every unit."""
    if inverse is None or np.size(values.get("log_lik", [])) == 0:
        return values
    return {**values, "log_lik": np.asarray(values["log_lik"])[..., inverse]}


def check_inits(inits: Any, n: int | None) -> list[dict] | None:
    """``inits`` as a list of dicts (one per chain, ``n`` of them when ``n`` is given), or None."""
    if inits is None:
        return None
    if not isinstance(inits, (list, tuple)) or not all(isinstance(x, dict) for x in inits):
        raise ValueError("inits must be a list of dicts, one per chain (or per optimisation start)")
    if n is not None and len(inits) != n:
        raise ValueError(f"inits has {len(inits)} entries for {n} chains")
    return list(inits)


def _values_per_draw(model: Model, K: int, J: int, I: int = 0) -> int:
    """Numbers Stan writes per draw besides ``log_lik``.

    The model's parameters (as its initial values give them, per-item ones
    for I items), pi (K) and theta, its J x K x K error matrices (a
    transformed parameter where it is not a parameter), and its other generated
    quantities (:meth:`~pyrater.models.base.ModelFamily.stan_generated_values`).
    """
    rng = np.random.default_rng(0)
    init = {**model.stan_init(rng, K, J), **model.stan_item_init(rng, I)}
    n = sum(int(np.size(v)) for v in init.values()) + model.stan_generated_values(K, J)
    return n + (0 if "theta" in init else J * K * K) + (0 if "pi" in init else K)


def check_draws_memory(
    data: RatingData,
    model: Model,
    n_draws: int,
    log_lik: bool,
    max_memory_gib: float | None,
    ask: tuple[str, ...] = ("draws", "chains"),
    what: str = "the posterior draws read back from Stan",
) -> bool:
    """Stan's draws in memory against the budget, before Stan runs; returns whether to keep ``log_lik``.

    Parameters
    ----------
    data, model
        What is fitted: its parameters per draw follow from the model's
        initial values for ``K`` and ``J``, and theta (``J*K*K``).
    n_draws : int
        Draws read into memory (chains x draws; Pathfinder: its approximate
        draws, paths x draws).
    log_lik : bool
        Whether the fit would keep the per-unit log-likelihood (``n_draws x
        units`` numbers besides the parameters).
    max_memory_gib : float or None
        The budget (None: the documented default, 1 GiB).

    Returns
    -------
    bool
        ``log_lik``, or False when the parameters fit but not the
        log-likelihood besides them (a warning says so; ``pyrater.loo``
        recomputes it from the draws).

    Raises
    ------
    MemoryLimitError
        The parameters' draws alone exceed the budget (naming fewer draws or
        chains, and a ``max_memory_gib`` that fits).
    """
    limit = memory_limit(max_memory_gib)
    I, J, K = data.n_units, data.n_raters, data.n_categories
    per_draw = _values_per_draw(model, K, J, I)
    param_bytes = 8.0 * n_draws * per_draw
    check_memory(what, param_bytes, limit, ask=ask, detail=f"{n_draws:,} draws x {per_draw:,} numbers x 8 bytes")
    ll_bytes = 8.0 * n_draws * I
    if log_lik and I and param_bytes + ll_bytes > limit * GIB:
        warnings.warn(
            f"log_lik not kept: {n_draws:,} draws x {I:,} units would take {ll_bytes / GIB:.2f} GiB, and with the "
            f"draws of the parameters ({param_bytes / GIB:.2f} GiB) {(param_bytes + ll_bytes) / GIB:.2f} GiB in all, "
            f"above max_memory_gib={limit:g}. pyrater.loo, waic and compare recompute it from the draws; pass "
            f"log_lik=False to silence this, or max_memory_gib >= "
            f"{math.ceil(100 * (param_bytes + ll_bytes) / GIB) / 100:g} to keep it",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        return False
    return log_lik


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
    max_memory_gib: float | None = None,
) -> MCMCFit:
    """NUTS in Stan: an :class:`~pyrater.fits.mcmc.MCMCFit` (warns about sampler problems at once).

    Before Stan runs, ``warmup + draws`` must fit Stan's 32-bit iteration
    count and the draws read back must fit ``max_memory_gib`` (None: the
    documented default, 1 GiB; see :func:`check_draws_memory`), else a
    ``ValueError`` says what to ask for instead.
    """
    data = prepare_data(data, model, known)
    K, J = data.n_categories, data.n_raters
    check_int("draws", draws, 1, MAX_ITERATIONS)
    check_int("warmup", warmup, 0, MAX_ITERATIONS - draws)
    log_lik = check_draws_memory(data, model, chains * draws, log_lik, max_memory_gib)
    eng = get_engine(engine)
    sdata, inverse = _program_data(data, model, known, log_lik)
    inits = inits if inits is not None else stan_inits(model, K, J, chains, seed, n_items=sdata["I"])
    res = eng.sample(
        model.stan_program, sdata, chains=chains, warmup=warmup, draws=draws, seed=seed, inits=inits, progress=progress
    )
    fit = fit_class(model, MCMCFit)(
        data=data,
        model=model,
        priors=model.priors(K, J),
        draws=_present(_unit_values(res.draws, inverse)),
        sample_stats=res.sample_stats,
        known=known,
        engine=res.engine,
        settings={"chains": chains, "warmup": warmup, "draws": draws, "seed": seed, "stan_version": res.stan_version},
        elapsed=res.elapsed,
    )
    fit.mcmc_diagnostics(warn=True)
    return fit


def _present(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Stan's outputs without the parameters a program switched off (size 0).

    E.g. the ordinal model's ``lapse`` without lapses; ``log_lik`` is kept as it is (its size says
    whether it was written).
    """
    return {k: v for k, v in values.items() if k == "log_lik" or np.size(v) > 0}


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
    max_memory_gib: float | None = None,
) -> PathfinderFit:
    """Stan's Pathfinder (cmdstanpy only): ``chains`` paths, ``draws`` PSIS-resampled draws.

    The ``chains x draws`` approximate draws read back (before resampling)
    must fit ``max_memory_gib`` (see :func:`check_draws_memory`).
    """
    check_int("draws", draws, 1, MAX_ITERATIONS)
    data = prepare_data(data, model, known)
    log_lik = check_draws_memory(
        data,
        model,
        chains * draws,
        log_lik,
        max_memory_gib,
        what="Pathfinder's approximate draws read back from Stan (paths x draws, before resampling)",
    )
    sdata, inverse = _program_data(data, model, known, log_lik)  # bad priors: an error whatever the engine
    eng = get_engine(engine)
    if eng.name != "cmdstanpy":
        raise ValueError(
            f"method='pathfinder' needs the cmdstanpy engine (Stan's Pathfinder runs in CmdStan); the "
            f"{eng.name!r} engine was chosen{' because no working CmdStan was found' if engine == 'auto' else ''}. "
            "Install CmdStan (`python -m cmdstanpy.install_cmdstan`) and use engine='cmdstanpy', or use "
            "method='mcmc'"
        )
    res = eng.pathfinder(model.stan_program, sdata, draws=draws, num_paths=chains, seed=seed, inits=inits)
    idx = res.resampled
    return fit_class(model, PathfinderFit)(
        data=data,
        model=model,
        priors=model.priors(data.n_categories, data.n_raters),
        draws=_present(_unit_values(res.draws, inverse)),
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
    data = prepare_data(data, model, known)
    K, J = data.n_categories, data.n_raters
    priors = model.priors(K, J)
    _warn_small_beta(priors)
    eng = get_engine(engine)
    sdata, _ = _program_data(data, model, known, False)
    if inits is None:
        inits = stan_inits(model, K, J, n_inits, seed, n_items=sdata["I"])
        start = _em_start(data, model, known_labels, seed)
        if start is not None:
            inits.append(start)
    res = eng.optimize(model.stan_program, sdata, seed=seed, inits=list(inits), n_inits=len(inits))
    return fit_class(model, OptimizeFit)(
        data=data,
        model=model,
        priors=priors,
        params=_present(res.params),
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

    if "em" not in model.methods or model.item_level:  # no (pi, theta) start for per-item parameters
        return None
    try:
        with warnings.catch_warnings():  # a start: its data warnings are the fit's own (said once), not EM's
            warnings.simplefilter("ignore")
            ref = em(data, model, method="map", known=known, n_restarts=5, seed=seed)
    except (ValueError, NotImplementedError, FloatingPointError):  # e.g. priors below 1: no EM mode
        return None
    return model.mode_start(ref.pi, ref.theta)
