"""``pyrater.fit``: one entry point for every model and method, in rater's spirit.

Every argument is checked before any work: an argument that the chosen
method does not use is an error naming the methods that take it, so nothing
a user passes is silently ignored.

Examples
--------
>>> import pyrater
>>> sim = pyrater.simulate("dawid_skene", n_items=200, n_raters=5, n_categories=3, seed=1)
>>> f = pyrater.fit(sim.data, "dawid_skene", method="em", seed=1)
>>> f.point_estimate("pi").round(2).tolist()  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from ._stacklevel import user_stacklevel
from ._validation import check_int, check_memory, memory_limit, resolve_seed
from .data.ratings import DataFormat, RatingData, as_rating_data
from .models import Model, get_model

if TYPE_CHECKING:
    from .checking.sbc import SBCResult
    from .fits.base import Fit

__all__ = ["fit", "sbc", "METHODS", "METHOD_ARGUMENTS"]

METHODS = ("mcmc", "optimize", "em", "gibbs", "pathfinder")
Method = Literal["mcmc", "optimize", "em", "gibbs", "pathfinder"]

#: the method-specific arguments of :func:`fit`, with the methods that use each and its default
METHOD_ARGUMENTS: dict[str, tuple[tuple[str, ...], Any]] = {
    "engine": (("mcmc", "optimize", "pathfinder"), "auto"),
    "chains": (("mcmc", "gibbs", "pathfinder"), 4),
    "warmup": (("mcmc", "gibbs"), 1000),
    "draws": (("mcmc", "gibbs", "pathfinder"), 1000),
    "inits": (("mcmc", "optimize", "pathfinder"), None),
    "n_inits": (("optimize",), 4),
    "log_lik": (("mcmc", "gibbs", "pathfinder"), True),
    "thin": (("gibbs",), 1),
    "pi_moves": (("gibbs",), 0),
    "max_memory_gib": (METHODS, None),
}


def _method_options(method: str, given: dict[str, Any]) -> dict[str, Any]:
    """The method's arguments with defaults filled in; an argument the method does not use is an error."""
    out = {}
    for name, value in given.items():
        users, default = METHOD_ARGUMENTS[name]
        if value is not None and method not in users:
            taken = " and ".join(f"method={m!r}" for m in users)
            raise ValueError(f"{name}={value!r} is not used by method={method!r}; it applies to {taken}")
        if method in users:
            out[name] = default if value is None else value
    return out


def _check_extra_arguments(data: Any, data_format: Any, data_options: dict[str, Any]) -> None:
    """``fit``'s extra keyword arguments must be options of the DataFrame reader: else a clear error, before work."""
    from .inference.distributed import is_distributed

    if not data_options or is_distributed(data):  # Dask data: DistributedRatingData.from_dask checks its options
        return
    import inspect

    from .data.ratings import check_reader_options
    from .inference.em.algorithm import em

    own = [p for p in inspect.signature(fit).parameters if p != "data_options"]
    em_only = [p for p in inspect.signature(em).parameters if p not in own]
    check_reader_options(
        data, data_format, data_options, caller="pyrater.fit", own=own, elsewhere={"pyrater.em": em_only}
    )


def fit(
    data: RatingData | pd.DataFrame,
    model: str | Model = "dawid_skene",
    method: Method | None = None,
    data_format: DataFormat = "long",
    *,
    candidates: Sequence[str | Model] | None = None,
    known: dict | pd.Series | None = None,
    gold: dict | pd.Series | None = None,
    seed: int | None = None,
    progress: bool = True,
    engine: str | None = None,
    chains: int | None = None,
    warmup: int | None = None,
    draws: int | None = None,
    inits: list[dict] | None = None,
    n_inits: int | None = None,
    log_lik: bool | None = None,
    thin: int | None = None,
    pi_moves: int | None = None,
    max_memory_gib: float | None = None,
    **data_options: Any,
) -> Fit:
    """Fit a rating model by any method.

    Parameters
    ----------
    data : RatingData or DataFrame
        Ratings; a DataFrame is read in ``data_format``.  A Dask DataFrame
        (long; column names in ``data_options``) or a
        :class:`pyrater.DistributedRatingData` is fitted on the Dask cluster
        (``method="em"`` or ``"gibbs"``; see :class:`pyrater.DistributedRatingData`).
    model : str or model object
        ``"dawid_skene"``, ``"hierarchical"``, ``"class_conditional"``,
        ``"homogeneous"``, ``"one_coin"``, ``"mace"``, ``"pooled"``,
        ``"community"``, ``"item_difficulty"``, ``"ordinal"`` (the list:
        ``pyrater.models.model_names()``), or e.g. ``DawidSkene(alpha=..., beta=...)`` to set
        priors.  Each family lists the methods that fit it
        (``pyrater.get_model(name).methods``).  ``"auto"``: let the data
        choose: every family ``method`` fits (or the ``candidates``) is
        fitted, the fits are compared by :func:`pyrater.compare` (K-fold
        for EM and optimize, PSIS-LOO for the samplers) beside majority
        vote's vote model, and the best is returned, the simplest among
        equally predictive ones; ``fit.model_choice`` holds the table and
        the reason, which ``summary()`` shows (see
        :mod:`pyrater.checking.choose`).  By EM, Dawid-Skene's prior
        strength is tuned first (its default prior times 0.25 to 2, the
        default kept unless another predicts held-out items clearly
        better; ``fit.model_choice.prior_scale``).
    method : {"mcmc", "optimize", "em", "gibbs", "pathfinder"}, optional
        Default ``"mcmc"``, and ``"em"`` for ``model="auto"`` (which takes
        ``"em"``, ``"gibbs"``, ``"mcmc"`` or ``"optimize"``).
        ``"mcmc"``: NUTS in Stan; ``"gibbs"``: the blocked Gibbs sampler in
        numba (Dawid-Skene, class-conditional, homogeneous, one-coin, MACE,
        pooled and community models, same priors as Stan, one pass over the
        counts per draw: for large data); ``"optimize"``:
        posterior mode in Stan (L-BFGS from ``n_inits`` starts, best kept);
        ``"em"``: posterior mode by EM with the model's priors (see
        :func:`pyrater.em` for maximum likelihood); ``"pathfinder"``: Stan's
        Pathfinder variational approximation (cmdstanpy engine only;
        ``chains`` paths, ``draws`` PSIS-resampled draws; a fit's
        ``pathfinder_diagnostics()`` says how well it approximates).  On the simplex a mode
        needs every Dirichlet/Beta hyperparameter >= 1 (rater's default
        off-diagonal ``beta`` is ``3.2 / (K - 1)``, below 1 for K >= 5):
        there ``"optimize"`` warns and ``"em"`` takes the mode on the
        log-odds scale, every pseudo-count + 1 (``fit.mode_scale``; see
        :func:`pyrater.em` ``mode_scale``).  The hierarchical model's mode is of
        limited use: ``softmax(gamma)`` is unchanged by adding a constant to
        a row and the non-centred posterior has a funnel, so ``sigma`` may
        run towards 0 at the mode; prefer MCMC for it.  ``"optimize"`` and
        ``"em"`` seek the same mode but can end at different ones: the
        posterior of these models often has several local modes, each route
        climbs from its own starts (Stan: ``n_inits`` diagonal-heavy inits;
        EM: a search over majority-vote, per-rater, weighted-vote and random
        starts, see :func:`pyrater.em` ``init``), and a route keeps the best
        mode it reached.  Compare their log posteriors (``log_density`` of
        an optimize fit, ``log_posterior`` of an EM fit; both the full log
        density up to ``log p(y)``): the higher is the better mode.  On the
        anaesthesia data both reach -108.30; EM from the majority vote alone
        stops at -110.64.
    data_format : {"long", "wide", "grouped"}
        Format of a DataFrame ``data``.
    candidates : list of str or model objects, optional
        ``model="auto"`` only: the families to choose among (default: every
        registered family that ``method`` fits, as
        :func:`pyrater.checking.choose.default_candidates` lists them for the
        data: by EM the item-difficulty family joins on binary data of at
        most 200,000 ratings; the pooled and community families, whose
        joint modes over-shrink, join by the samplers; the families left out
        and why: ``fit.model_choice.skipped``).  For the posterior-mode
        methods a candidate with a Dirichlet or Beta pseudo-count below 1
        (Dawid-Skene's default for K >= 5), whose mode does not exist, is
        fitted at its mode on the log-odds scale: every pseudo-count + 1
        (said in ``fit.model_choice.skipped``).
    gold : dict or Series, optional
        ``model="auto"`` only: ``{item label: true category label}`` for
        items whose class you know and want the choice judged on.  The
        candidates are fitted without them (unlike ``known``), and only
        the ones that label them as accurately as the best (paired
        difference within twice its standard error) go on to the elpd
        rule (:mod:`pyrater.checking.choose`).
    known : dict or Series, optional
        ``{item label: true category label}`` for items whose class is
        known; the fit conditions on them.  Every method.
    seed : int, optional
        Random seed, an integer in ``[0, 2**31)``; drawn and recorded in the
        fit when not given.  Every method.
    progress : bool
        Progress bars (tqdm) for steps that take more than a moment.  Every method.
    engine : {"auto", "cmdstanpy", "pystan"}
        Stan methods (``"mcmc"``, ``"optimize"``, ``"pathfinder"``).
        ``"auto"`` (default) uses cmdstanpy when a working CmdStan
        installation is found, else pystan.  The fit records the engine and
        Stan version.
    chains, warmup, draws : int
        Sampler settings (defaults 4, 1000, 1000; draws per chain after
        warm-up): ``"mcmc"`` and ``"gibbs"``; ``"pathfinder"`` takes
        ``chains`` (paths) and ``draws`` (resampled draws).
    inits : list of dict, optional
        Stan methods: initial values, one dict per chain (or per optimisation
        start).  Default: diagonal-heavy values that break label switching.
    n_inits : int
        ``"optimize"``: random optimisation starts (default 4).  Without
        ``inits``, one more start at the EM posterior mode is added for the
        families EM fits, so the optimiser reaches the best mode either route finds.
    log_lik : bool
        Samplers: keep the per-item log-likelihood (needed for LOO/WAIC;
        default True).
    thin : int
        ``"gibbs"``: keep every ``thin``-th of the ``draws`` sweeps (memory;
        see the memory rule of the Gibbs sampler in the user guide).
    pi_moves : int
        ``"gibbs"``: Metropolis moves on ``pi`` with the true classes summed
        out, per sweep (default 0, plain blocked Gibbs).  Try 3 when
        ``mcmc_diagnostics()`` shows ``pi`` mixing slowly.
    max_memory_gib : float
        Every method: the memory budget in GiB (default 1; ``float("inf")``
        switches the checks off).  What would exceed it is refused before any
        work, with a message stating what it would take and what to ask for
        less: the Gibbs sampler's kept draws (see its memory rule), Stan's
        draws read back from CmdStan (about ``8 x chains x draws`` bytes per
        parameter, and per item with ``log_lik``), EM's per-item arrays.
        Where only the per-item log-likelihood does not fit, the samplers
        drop it with a warning saying so (``pyrater.loo`` recomputes it from
        the draws).  The fit records the budget: ``pyrater.loo`` uses it to
        choose exact or subsampling LOO.
    **data_options
        Passed to the DataFrame reader (column names, ``categories``, ``tally``).

    Returns
    -------
    MCMCFit, GibbsFit, OptimizeFit, EMFit or PathfinderFit
        All answer ``summary``, ``point_estimate``, ``class_probabilities``,
        ``posterior_interval``, ``posterior_samples``, ``mcmc_diagnostics``
        (or say clearly why not).

    Raises
    ------
    ValueError
        Before any work: an unknown method or model, a method that cannot fit
        the model, an argument the method does not use, or a bad value.
    """
    _check_extra_arguments(data, data_format, data_options)
    if isinstance(model, str) and model == "auto":
        return _fit_auto(
            data,
            method,
            data_format,
            candidates=candidates,
            known=known,
            gold=gold,
            seed=seed,
            progress=progress,
            options={
                "engine": engine,
                "chains": chains,
                "warmup": warmup,
                "draws": draws,
                "inits": inits,
                "n_inits": n_inits,
                "log_lik": log_lik,
                "thin": thin,
                "pi_moves": pi_moves,
                "max_memory_gib": max_memory_gib,
            },
            data_options=data_options,
        )
    if candidates is not None:
        raise ValueError("candidates is used by model='auto' only")
    if gold is not None:
        raise ValueError(
            "gold is used by model='auto' only (to judge its choice); to condition a fit on known classes, pass known="
        )
    if method is None:
        method = "mcmc"
    if method not in METHODS:
        hint = ""
        if str(method).lower().replace("_", "-") in ("em-ml", "ml", "mle"):
            hint = (
                " (maximum likelihood by EM: pyrater.em(data, model, method='ml'); method='em' is the posterior mode)"
            )
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}{hint}")
    model = get_model(model)
    if method not in model.methods:
        raise ValueError(
            f"the {model.title} model cannot be fitted by method={method!r}; fit it with "
            + " or ".join(f"method={m!r}" for m in model.methods)
        )
    opts = _method_options(
        method,
        {
            "engine": engine,
            "chains": chains,
            "warmup": warmup,
            "draws": draws,
            "inits": inits,
            "n_inits": n_inits,
            "log_lik": log_lik,
            "thin": thin,
            "pi_moves": pi_moves,
            "max_memory_gib": max_memory_gib,
        },
    )
    for name, minimum in (("chains", 1), ("warmup", 0), ("draws", 1), ("n_inits", 1), ("thin", 1), ("pi_moves", 0)):
        if name in opts:
            opts[name] = check_int(name, opts[name], minimum)
    opts["max_memory_gib"] = memory_limit(opts["max_memory_gib"])
    seed = resolve_seed(seed)
    from .inference.distributed import is_distributed

    if is_distributed(data):  # a Dask DataFrame or DistributedRatingData: fitted on the cluster
        if opts.get("pi_moves"):
            raise ValueError("pi_moves is not available for distributed data (the in-memory Gibbs sampler only)")
        from .inference.distributed.fit import fit_distributed

        if method == "gibbs":  # the kept draws come back to this process
            _check_distributed_gibbs_memory(data, model, opts)
        return fit_distributed(
            data,
            model,
            method,
            data_format,
            known=known,
            seed=seed,
            **{k: v for k, v in opts.items() if k in ("chains", "warmup", "draws", "thin")},
            **data_options,
        )
    data = as_rating_data(data, data_format, **data_options)
    known_codes = data.known_codes(known)

    limit = opts.pop("max_memory_gib")
    if method == "em":
        from .inference.em.algorithm import em

        _check_em_memory(data, limit)
        return em(data, model, method="map", known=known, seed=seed, progress=progress)
    if method == "gibbs":
        from .inference.gibbs.sampler import gibbs

        return gibbs(data, model, known=known, seed=seed, progress=progress, max_memory_gib=limit, **opts)

    from .inference.stan import run

    fit: Fit
    if method == "mcmc":
        fit = run.sample(
            data,
            model,
            known_codes,
            seed=seed,
            progress=progress,
            max_memory_gib=limit,
            **{**opts, "inits": run.check_inits(opts["inits"], opts["chains"])},
        )
    elif method == "pathfinder":
        fit = run.pathfinder(
            data,
            model,
            known_codes,
            seed=seed,
            max_memory_gib=limit,
            **{**opts, "inits": run.check_inits(opts["inits"], opts["chains"])},
        )
    else:
        _check_em_memory(data, limit)  # the optimiser's extra start is EM's mode
        fit = run.optimize(
            data,
            model,
            known_codes,
            seed=seed,
            known_labels=known,
            **{**opts, "inits": run.check_inits(opts["inits"], None)},
        )
    # the budget and the progress setting travel with the fit: the post-fit steps (LOO) use them
    fit.settings["max_memory_gib"] = limit
    fit.settings["progress"] = bool(progress)
    return fit


def _fit_auto(
    data: Any,
    method: str | None,
    data_format: DataFormat,
    *,
    candidates: Sequence[str | Model] | None,
    known: Any,
    gold: Any,
    seed: int | None,
    progress: bool,
    options: dict[str, Any],
    data_options: dict[str, Any],
) -> Fit:
    """``fit(data, "auto", ...)``: every argument checked, then :func:`pyrater.checking.choose.choose_model`."""
    from .checking.choose import AUTO_METHODS, _resolve_candidates, choose_model
    from .inference.distributed import is_distributed

    defaulted = method is None
    method = "em" if method is None else method
    if method not in AUTO_METHODS:
        raise ValueError(f"model='auto' fits its candidates by one of {AUTO_METHODS}; got method={method!r}")
    if options.get("log_lik") is False:
        raise ValueError("model='auto' compares its candidates by their log-likelihood: log_lik=False is refused")
    try:
        _method_options(method, options)  # an argument the method does not use is an error, before any fit
    except ValueError as err:
        if not defaulted:
            raise
        raise ValueError(
            f"{err} (model='auto' fits its candidates by method='em' unless method= is given, e.g. method='gibbs')"
        ) from None
    _resolve_candidates(candidates, method)  # an unknown or unfit candidate, before any fit
    if is_distributed(data):
        raise NotImplementedError(
            "model='auto' needs the ratings in memory (K-fold and LOO refit and rescore items); fit a sample of "
            "items collected into a RatingData, or name the model"
        )
    data = as_rating_data(data, data_format, **data_options)
    data.known_codes(known)  # bad known items: an error now
    gold_codes = data.known_codes(gold, what="gold")  # bad gold items too
    if gold_codes is not None and not np.any(gold_codes >= 0):
        raise ValueError("gold is empty: give {item label: true category label} for at least one item")
    _check_enough_items(data, method, has_known=known is not None and len(known) > 0)
    seed = resolve_seed(seed)
    given = {k: v for k, v in options.items() if v is not None}
    given.update(_auto_log_lik(data, method, candidates, given))

    def fit_one(model: Model, how: Method) -> Fit:
        return fit(data, model, how, known=known, seed=seed, progress=False, **given)

    best, _ = choose_model(
        data,
        candidates,
        method,
        fit_one,
        has_known=known is not None and len(known) > 0,
        gold=gold_codes,
        seed=seed,
        progress=progress,
    )
    return best


def _check_enough_items(data: RatingData, method: str, *, has_known: bool) -> None:
    """Refuse, before any fit, data with too few items for "auto"'s K-fold scores.

    Point fits are scored by 10-fold cross-validation over items, and so is
    majority vote's vote model (the baseline row, added unless items are
    known): both need at least 10 items.
    """
    from .checking.choose import _MODE_METHODS
    from .checking.kfold import DEFAULT_FOLDS

    if data.n_items >= DEFAULT_FOLDS or (method not in _MODE_METHODS and has_known):
        return
    scored = (
        f"with method={method!r} scores its candidates (and majority vote's vote model)"
        if method in _MODE_METHODS
        else "scores majority vote's vote model, the baseline beside its candidates,"
    )
    raise ValueError(
        f"model='auto' {scored} by {DEFAULT_FOLDS}-fold cross-validation over items, which needs at least "
        f"{DEFAULT_FOLDS} items; the data hold {data.n_items}: name a model instead, e.g. model='dawid_skene'"
    )


def _auto_log_lik(data: RatingData, method: str, candidates: Any, given: dict[str, Any]) -> dict[str, Any]:
    """``{"log_lik": False}`` when the candidates' per-item log-likelihoods together exceed the memory budget.

    A sampler keeps ``chains x draws x units`` doubles of log-likelihood per
    fit, and ``fit(data, "auto")`` holds every candidate until they are
    compared; each fit alone checks only its own.  When the candidates
    together would pass ``max_memory_gib``, none keeps it (a warning says so):
    :func:`pyrater.loo` and :func:`pyrater.compare` recompute it from the draws
    in item chunks, and so does ``loo`` on the chosen fit later.
    """
    from ._validation import GIB, _gib_text
    from .checking.choose import _resolve_candidates

    if method not in ("mcmc", "gibbs") or given.get("log_lik") is False:
        return {}
    n = len(_resolve_candidates(candidates, method, data)[0])
    chains = int(given.get("chains", METHOD_ARGUMENTS["chains"][1]))
    draws = int(given.get("draws", METHOD_ARGUMENTS["draws"][1])) // int(given.get("thin", 1))
    each = 8.0 * chains * draws * data.n_units / GIB
    budget = memory_limit(given.get("max_memory_gib"))
    if n < 2 or n * each <= budget:
        return {}
    warnings.warn(
        f"model='auto': the {n} candidates' per-item log-likelihood is not kept ({n} x {_gib_text(each)} GiB = "
        f"{_gib_text(n * each)} GiB while they are compared, above max_memory_gib={budget:g}); nothing is lost: "
        "pyrater.loo and compare recompute it from the draws in item chunks. Pass a larger max_memory_gib to keep it",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return {"log_lik": False}


def sbc(
    model: str | Model,
    method: Literal["gibbs", "mcmc", "pathfinder"] = "gibbs",
    *,
    n_sims: int = 100,
    n_items: int = 40,
    n_raters: int = 5,
    n_categories: int | None = None,
    raters_per_item: int | None = None,
    n_draws: int = 99,
    thin: int | None = None,
    warmup: int | None = None,
    quantities: Sequence[str] | None = None,
    fit_model: str | Model | None = None,
    engine: str | None = None,
    seed: int = 0,
    progress: bool = True,
    **fit_options: Any,
) -> SBCResult:
    """Simulation-based calibration of ``model`` fitted by ``method``.

    Parameters
    ----------
    model : str or model object
        The family, with its priors (a model object sets them); data and true
        parameters are drawn from it.
    method : {"gibbs", "mcmc", "pathfinder"}
        A method that returns posterior draws and fits ``model``.  Pathfinder is an
        approximation: SBC shows how far it is from the posterior.
    n_sims : int
        Replicates (each a simulation and a fit); at least 20.
    n_items, n_raters, n_categories, raters_per_item
        The simulated design (default 40 items, 5 raters rating every item,
        ``K = 2``, or 3 for families that need ``K >= 3``).
    n_draws : int
        Posterior draws ranked per replicate (``L``; ranks run over ``0 .. L``);
        ``L + 1`` should have many divisors for the histograms (99, 199, 999).
    thin : int, optional
        Keep every ``thin``-th draw (default 4 for Gibbs, 1 for NUTS and
        Pathfinder): the fit runs ``n_draws x thin`` draws on one chain.
        Autocorrelated draws make rank histograms uneven even for an exact
        sampler; thin until the effective sample size is near ``n_draws``.
    warmup : int, optional
        Warm-up iterations of each fit (default 200 for Gibbs, 300 for NUTS).
    quantities : sequence of str, optional
        The parameters to rank, by name (``"pi"``, ``"theta"``, ``"p"``, ...);
        default every parameter with a true value (see the module notes).
    fit_model : str or model object, optional
        Fit with this model instead (default ``model``): SBC of a fit whose
        prior differs from the one that generated the data, which it should fail.
    engine : str, optional
        The Stan engine for ``"mcmc"`` and ``"pathfinder"``.
    seed : int
        Seeds every simulation and fit (replicate ``r`` uses the ``r``-th
        child of ``numpy.random.SeedSequence(seed)``), so a run is reproducible
        and a failing replicate can be rerun alone.
    progress : bool
        A progress bar over the replicates.
    **fit_options
        Passed to :func:`pyrater.fit` (e.g. ``pi_moves``); ``chains``,
        ``draws``, ``seed`` and the others set here are refused.

    Returns
    -------
    SBCResult

    Examples
    --------
    >>> import pyrater
    >>> result = pyrater.sbc("one_coin", "gibbs", n_sims=50, progress=False)  # doctest: +SKIP
    >>> result.passed()  # doctest: +SKIP
    True
    """
    from .checking.sbc import run_sbc

    return run_sbc(
        model,
        method,
        fit,
        n_sims=n_sims,
        n_items=n_items,
        n_raters=n_raters,
        n_categories=n_categories,
        raters_per_item=raters_per_item,
        n_draws=n_draws,
        thin=thin,
        warmup=warmup,
        quantities=quantities,
        fit_model=fit_model,
        engine=engine,
        seed=seed,
        progress=progress,
        **fit_options,
    )


def _check_distributed_gibbs_memory(data: Any, model: Model, opts: dict[str, Any]) -> None:
    """The kept draws of the distributed Gibbs sampler (held by this process), against the budget."""
    J, K = getattr(data, "n_raters", None), getattr(data, "n_categories", None)
    if not (isinstance(J, int) and isinstance(K, int)):  # a Dask DataFrame: sizes known after partitioning
        return
    kept = opts["chains"] * (opts["draws"] // opts["thin"])
    per_draw = K + (K * K if model.conjugate == "homogeneous" else J * K * K)
    check_memory(
        "the kept draws of pi and theta",
        8.0 * kept * per_draw,
        opts["max_memory_gib"],
        ask=("thin", "draws", "chains"),
        detail=f"{kept:,} kept draws x {per_draw:,} numbers x 8 bytes",
    )


def _check_em_memory(data: RatingData, limit: float) -> None:
    """EM holds a few (units x K) arrays (class probabilities, log joints, work space) besides the data."""
    I, K = data.n_units, data.n_categories
    check_memory(
        "EM's per-unit arrays (class probabilities and work space)",
        8.0 * 4 * I * max(K, 8),
        limit,
        ask=("data_format",),
        detail=f"about 4 arrays of {I:,} units x {max(K, 8)} numbers x 8 bytes",
    )
