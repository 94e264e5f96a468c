"""Full Bayesian posterior at crowd scale: the blocked Gibbs sampler.

Given the true classes z, the Dawid-Skene, class-conditional, one-coin and
homogeneous models are conjugate (MACE given also which ratings are spam, drawn
first by a binomial split of each diagonal count; the pooled model given z and its
population rows and concentrations, which a slice-sampling step updates given theta), so the sampler alternates

* ``z_i | pi, theta, y``: a categorical draw per item from
  ``log pi_k + sum_{j, l} C[i, j*K + l] log theta[j, k, l]`` (grouped data:
  the tally of each rating pattern is split over the classes by a
  multinomial draw, never one z per pattern); items whose class is known
  keep it;
* ``pi | z ~ Dirichlet(alpha + class counts)``;
* ``theta[j, k, :] | z ~ Dirichlet(beta[j, k, :] + rating counts)``
  (class-conditional: ``p[j, k] ~ Beta(beta1_k + right, beta2_k + wrong)``;
  one-coin: ``p[j] ~ Beta(beta1 + right, beta2 + wrong)`` over all classes;
  MACE: ``competence[j] ~ Beta(beta1 + competent, beta2 + spam)``,
  ``xi[j] ~ Dirichlet(gamma + spam ratings by label)``;
  homogeneous: counts pooled over raters),

with exactly the priors of the Stan programs.  A sweep costs one pass over
the stored (unit, rater, rating) counts and needs no gradients
(:mod:`pyrater.inference.gibbs.kernel`, compiled with numba).  The result is a
:class:`~pyrater.fits.gibbs.GibbsFit`, an MCMC fit like Stan's.

Chains and seeds
----------------
``seed`` feeds a :class:`numpy.random.SeedSequence` that spawns one stream per
chain, so the same seed gives the same draws whatever the number of threads.
Chains run in parallel threads (the compiled chain releases the GIL), up to
``n_threads`` (default: the number of cores, at most the number of chains).
Each chain starts from a class assignment drawn from the items' rating
shares (the soft majority vote, :func:`pyrater.inference.em.algorithm.soft_majority_vote`):
different for every chain, all around the majority-vote solution, and on the
labelling in which class k goes with rating k.

Marginal pi moves
-----------------
Data augmentation mixes slowly when many items sit between two classes:
given z, ``pi`` is pinned to the class counts, and z moves little per
sweep (``bench/RESULTS_gibbs.md``: on trec_relevance the bulk ESS of the
two middle grades' ``pi`` is 40 of 4,000 draws).  With ``pi_moves=m > 0``
each sweep first computes every unit's rater evidence
``E[i, k] = exp(sum_c C[i, c] log theta[c, k])`` (scaled per unit), then makes
``m`` random-walk Metropolis moves on ``log(pi_k / pi_K)`` targeting
``p(pi | theta, y)`` with z summed out (each costs ``O(units x K)``, not a
pass over the ratings), and then draws z from ``pi_k E[i, k]``; the
conjugate draws of ``pi`` and ``theta`` given z follow as before.  This is
a valid blocked scheme (``(pi, z)`` given ``theta`` by composition).  The
proposal has the covariance shape of a Dirichlet's log-ratios at the
current class counts, scaled towards acceptance 0.3; shape and scale adapt
during warm-up only and are frozen for the kept draws
(``fit.settings["pi_acceptance"]``, ``["pi_scale"]``).  The price is a
second pass over the counts (the z step no longer shares the evidence
pass) and ``8 * units * K`` bytes per chain.  Measured on trec_relevance:
see ``bench/RESULTS_gibbs.md``.  The moves do not help where ``theta`` is
the slowest quantity; the tie between ``theta`` and z remains.

Class probabilities
-------------------
The z step of the sweep after a kept draw computes every unit's conditional
class probabilities ``P(z_i | y_i, pi_s, theta_s)`` anyway; the sampler adds
them up (one ``(units, K)`` array per chain, counted in ``max_memory_gib``;
without room for it, :meth:`~pyrater.fits.DrawsFit.class_probabilities`
computes the same average after the fit with the shared compiled pass).  So
the Rao-Blackwellised class probabilities cost nothing after the fit.

Log-likelihood
--------------
The per-unit ``log_lik`` of a kept draw, ``log p(y_i | pi, theta)`` (the
marginal over z by log-sum-exp; ``log p(y_i, z_i)`` for a known item, as in
the Stan programs), is the log-sum-exp that the next sweep's z step computes
anyway, so it costs nothing extra (one more pass for the last draw).

Memory rule
-----------
Kept draws take ``8 * chains * (draws // thin) * (K + P)`` bytes with
``P = J*K*K`` (Dawid-Skene), ``K*K`` (homogeneous), ``J*K*K + J*K``
(class-conditional), ``J*K*K + J`` (one-coin), ``J*K*K + J*(K + 1)`` (MACE),
``J*K*K + K*K + K`` (pooled) or ``J*K*K + (L*K + L + 1 + J) * max(K, L)`` (community),
plus ``8 * chains * (draws // thin) * units`` for
``log_lik``.  The parameter draws must fit in ``max_memory_gib`` (default
1 GiB; otherwise a ValueError says which ``thin`` fits), together with the
``8 * chains * units * K`` bytes of evidence that ``pi_moves > 0`` keeps;
``log_lik`` is kept only when it fits in what is left (otherwise a warning says so, stating the
total against the budget: LOO and WAIC then recompute it from the draws, chunk by chunk, at the
cost of one pass over the counts per draw, and LOO subsamples items when the whole log-likelihood
would not fit the budget, see :func:`pyrater.loo`).  The working memory of
the sampler itself is the count matrix plus ``O(J*K*K)`` per chain (and the
evidence, with ``pi_moves``), so the data and these draws are the whole footprint: e.g. 10^7 ratings, 2,000
raters, K = 5, 4 chains x 1,000 draws with ``thin=4`` keep 400 MB of theta.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import pandas as pd

from ..._quiet import progress_bar
from ..._stacklevel import user_stacklevel
from ..._validation import check_int, resolve_seed
from ...data.ratings import DataFormat, RatingData, as_rating_data
from ...fits.gibbs import GibbsFit
from .priors import conjugate_prior, log_prior_density

__all__ = ["gibbs", "check_run", "start_counts", "GIBBS_ENGINE"]

GIBBS_ENGINE = "pyrater-gibbs"
_GIB = 2.0**30


def _gib(nbytes: float) -> str:
    """Bytes as GiB with three significant digits (``0.000447``, ``0.6``, ``6.4``): comparable with the budget."""
    return f"{nbytes / 2.0**30:.3g}"


def _gib_up(nbytes: float) -> str:
    """Bytes as GiB rounded *up* to three significant digits: a budget that holds them."""
    value = nbytes / 2.0**30
    if value <= 0:
        return "0"
    step = 10.0 ** (math.floor(math.log10(value)) - 2)
    return f"{math.ceil(value / step - 1e-9) * step:.3g}"


def check_run(chains: Any, warmup: Any, draws: Any, thin: Any, seed: Any) -> tuple[int, int, int, int, int]:
    """The chain settings of both Gibbs samplers, checked; a seed drawn when None (recorded in the fit)."""
    chains = check_int("chains", chains, 1)
    warmup = check_int("warmup", warmup, 0)
    draws = check_int("draws", draws, 1)
    thin = check_int("thin", thin, 1)
    if thin > draws:
        raise ValueError(f"thin must be <= draws ({draws}) so that at least one draw is kept, got {thin}")
    return chains, warmup, draws, thin, resolve_seed(seed)


def _kernel():
    try:
        from . import kernel
    except ImportError as exc:  # pragma: no cover - numba is a dependency
        raise ImportError("method='gibbs' needs numba (pip install numba)") from exc
    return kernel


def start_counts(data: RatingData, known: np.ndarray | None, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Counts (J*K, K) and class totals (K,) of a class assignment drawn from the rating shares."""
    from ...models.kernels import soft_majority_vote

    K = data.n_categories
    shares = soft_majority_vote(data.counts, K)
    shares /= shares.sum(axis=1, keepdims=True)
    Z = rng.multinomial(np.asarray(data.weight, dtype=np.int64), shares).astype(np.float64)  # (I, K) items per class
    if known is not None:
        rows = np.flatnonzero(known >= 0)
        Z[rows] = 0.0
        Z[rows, known[rows]] = data.weight[rows]
    N0 = np.ascontiguousarray(data.counts.T @ Z, dtype=np.float64)  # (J*K, K)
    return N0, Z.sum(axis=0)


def gibbs(
    data: RatingData | pd.DataFrame,
    model: Any = "dawid_skene",
    *,
    chains: int = 4,
    warmup: int = 1000,
    draws: int = 1000,
    thin: int = 1,
    seed: int | None = None,
    known: dict | pd.Series | None = None,
    log_lik: bool = True,
    n_threads: int | None = None,
    max_memory_gib: float = 1.0,
    pi_moves: int = 0,
    progress: bool = True,
    data_format: DataFormat = "long",
    **data_options: Any,
) -> GibbsFit:
    """Sample the posterior of a Dawid-Skene-family model by blocked Gibbs.

    Parameters
    ----------
    data : RatingData or DataFrame
        Ratings in any design (long, wide or grouped; repeated ratings allowed).
    model : str or model object
        ``"dawid_skene"``, ``"class_conditional"``, ``"homogeneous"``,
        ``"one_coin"``, ``"mace"``, ``"pooled"``, ``"community"`` or a model object carrying priors.
        ``"hierarchical"`` is refused (use
        ``method="mcmc"``).
    chains : int
        Independent chains, each with its own random stream.
    warmup : int
        Sweeps discarded at the start of each chain.
    draws : int
        Sweeps after warm-up per chain; every ``thin``-th is kept
        (``draws // thin`` kept draws per chain).
    thin : int
        Keep every ``thin``-th sweep (see the memory rule in the module notes).
    seed : int, optional
        Seed of the chains' streams (:class:`numpy.random.SeedSequence`);
        drawn when not given and recorded in ``fit.settings``.
    known : dict or Series, optional
        ``{item label: true category label}``; those items keep their class.
    log_lik : bool
        Keep the per-unit log-likelihood of every kept draw (for LOO/WAIC).
    n_threads : int, optional
        Chains run in parallel; default ``min(chains, os.cpu_count())``.
    max_memory_gib : float
        Budget for the kept draws (see the module notes); recorded in the
        fit, where the post-fit steps (LOO's choice between exact and
        subsampling) use it too.
    pi_moves : int
        Random-walk Metropolis moves on ``pi`` given ``theta`` with z summed
        out, per sweep, before the z step (default 0: plain blocked Gibbs).
        See "Marginal pi moves" in the module notes; the ``8 * chains * units * K``
        bytes of evidence they keep count towards ``max_memory_gib``.
    progress : bool
        A progress bar over the sweeps of all chains (tqdm; shown when
        sampling takes more than 2 s), and for the post-fit steps of the fit
        (class probabilities, diagnostics, LOO).
    data_format, **data_options
        How to read a DataFrame ``data``.

    Returns
    -------
    GibbsFit
        An MCMC fit: ``summary``, ``point_estimate`` (posterior means),
        ``posterior_interval``, ``posterior_samples``, Rao-Blackwellised
        ``class_probabilities``, ``mcmc_diagnostics`` (with a label-switching
        check), ``to_inference_data``, ``pyrater.loo``/``waic``/``compare``,
        ``posterior_predict``, plots, ``save``.

    Examples
    --------
    >>> import pyrater
    >>> sim = pyrater.simulate("dawid_skene", n_items=200, n_raters=5, n_categories=3, seed=1)
    >>> f = pyrater.fit(sim.data, "dawid_skene", method="gibbs", draws=500, warmup=200, seed=1)  # doctest: +SKIP
    >>> f.posterior_interval(0.9, "pi")  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    chains, warmup, draws, thin, seed = check_run(chains, warmup, draws, thin, seed)
    pi_moves = check_int("pi_moves", pi_moves, 0)
    if n_threads is None:
        n_threads = min(chains, os.cpu_count() or 1)
    n_threads = check_int("n_threads", n_threads, 1)
    try:
        budget = float(max_memory_gib) * _GIB
    except (TypeError, ValueError):
        raise ValueError(f"max_memory_gib must be a positive number, got {max_memory_gib!r}") from None
    if not budget > 0:
        raise ValueError(f"max_memory_gib must be a positive number, got {max_memory_gib!r}")
    data = as_rating_data(data, data_format, **data_options)
    I, J, K = data.n_units, data.n_raters, data.n_categories
    prior = conjugate_prior(model, K, J)
    from ...models import get_model

    model_obj = get_model(model)
    known_codes = data.known_codes(known)
    if data.n_ratings == 0 or data.weight.sum() <= 0:
        raise ValueError("the data hold no rated items (all tallies are zero)")
    model_obj.check_data(data)

    # ---- memory rule, before any sampling
    S = draws // thin
    Jt = 1 if prior.kind == "homogeneous" else J
    Kp = prior.p_columns(K)  # parameters kept per row (class-conditional K, one-coin 1, MACE K + 1; pooled m and s)
    Jp = prior.p_rows(J, K)  # rows: J, or K + 1 for the pooled model
    per_draw = K + Jt * K * K + Jp * Kp
    param_bytes = 8.0 * chains * S * per_draw
    if param_bytes > budget:
        need = math.ceil(draws * param_bytes / S / budget) if S else draws
        raise ValueError(
            f"the kept draws of pi and theta would take {_gib(param_bytes)} GiB "
            f"({chains} chains x {S} draws x {per_draw} numbers), above max_memory_gib={max_memory_gib}; "
            f"pass thin >= {need}, fewer draws, or a larger max_memory_gib"
        )
    evidence_bytes = 8.0 * chains * I * K if pi_moves else 0.0  # the pi moves' work space, one (I, K) per chain
    if evidence_bytes and param_bytes + evidence_bytes > budget:
        raise ValueError(
            f"pi_moves keeps every unit's rater evidence per chain ({_gib(evidence_bytes)} GiB for {chains} "
            f"chains x {I} units x {K} classes); with the kept draws ({_gib(param_bytes)} GiB) that is above "
            f"max_memory_gib={max_memory_gib}: pass pi_moves=0, fewer chains, a larger thin or a larger max_memory_gib"
        )
    # the Rao-Blackwellised class probabilities, summed while sampling (one (units, K) array per chain),
    # when they fit besides the draws; otherwise class_probabilities() computes them after the fit
    rb_bytes = 8.0 * chains * I * K
    keep_rb = param_bytes + evidence_bytes + rb_bytes <= budget
    keep_ll = bool(log_lik)
    ll_bytes = 8.0 * chains * S * I
    if keep_ll and param_bytes + evidence_bytes + (rb_bytes if keep_rb else 0.0) + ll_bytes > budget:
        kept = param_bytes + evidence_bytes + (rb_bytes if keep_rb else 0.0)
        warnings.warn(
            f"log_lik not kept: {chains} chains x {S} draws x {I} units would take {_gib(ll_bytes)} GiB, "
            f"and with the kept draws ({_gib(kept)} GiB) {_gib(kept + ll_bytes)} GiB in all, above "
            f"max_memory_gib={max_memory_gib}. Nothing is lost: pyrater.loo, waic and compare recompute it from "
            "the draws in item chunks (subsampling LOO when it does not fit the budget); pass log_lik=False to "
            f"silence this, or max_memory_gib >= {_gib_up(kept + ll_bytes)} to keep it",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        keep_ll = False

    kern = _kernel()
    counts = data.counts
    indptr = np.ascontiguousarray(counts.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(counts.indices)  # int32 as scipy stores it: less to read per sweep
    cdata = np.ascontiguousarray(counts.data, dtype=np.float64)
    weight = np.ascontiguousarray(data.weight, dtype=np.int64)
    known_arr = np.empty(0, np.int64) if known_codes is None else np.ascontiguousarray(known_codes, dtype=np.int64)
    alpha, beta, beta1, beta2 = prior.kernel_arrays(K)

    pi_d = np.empty((chains, S, K))
    theta_d = np.empty((chains, S, Jt, K, K))
    p_d = np.empty((chains, S, Jp, Kp)) if Kp else np.empty((chains, 0, J, K))
    ll_d = np.empty((chains, S, I)) if keep_ll else np.empty((chains, 0, 0))
    ll_tot = np.empty((chains, S))
    evidence = [np.empty((I if pi_moves else 0, K)) for _ in range(chains)]
    mh = np.zeros((chains, 3))
    prog = np.zeros((chains, 1), dtype=np.int64)  # sweeps done per chain, written by the compiled chains
    rb = [np.empty((I if keep_rb else 0, K)) for _ in range(chains)]
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(chains)]
    starts = [start_counts(data, known_codes, rng) for rng in rngs]
    betas = [beta.copy() for _ in range(chains)]  # a chain may rewrite its prior (the pooled model's 1 + s m)
    setup = time.perf_counter() - t0

    def run(c: int) -> None:
        N0, n0 = starts[c]
        kern.run_chain(
            indptr,
            indices,
            cdata,
            weight,
            known_arr,
            prior.code,
            K,
            alpha,
            betas[c],
            beta1,
            beta2,
            N0,
            n0,
            warmup,
            draws,
            thin,
            rngs[c],
            pi_d[c],
            theta_d[c],
            p_d[c],
            ll_d[c],
            ll_tot[c],
            pi_moves,
            evidence[c],
            mh[c],
            prog[c],
            rb[c],
        )

    # compile (or load from numba's cache) once, with LLVM's SLP vectoriser on for the eight-lane loop
    from .._numba import compile_for

    compile_for(
        kern.run_chain,
        indptr,
        indices,
        cdata,
        weight,
        known_arr,
        prior.code,
        K,
        alpha,
        beta,
        beta1,
        beta2,
        starts[0][0],
        starts[0][1],
        warmup,
        draws,
        thin,
        rngs[0],
        pi_d[0],
        theta_d[0],
        p_d[0],
        ll_d[0],
        ll_tot[0],
        pi_moves,
        evidence[0],
        mh[0],
        prog[0],
        rb[0],
    )
    t1 = time.perf_counter()
    with progress_bar(progress, chains * (warmup + draws), "Gibbs sweeps", unit="sweep") as bar:
        # the chains run in worker threads (each one compiled call that releases the GIL); this thread
        # reads their sweep counters for the bar
        with ThreadPoolExecutor(max_workers=n_threads) as ex:
            futures = [ex.submit(run, c) for c in range(chains)]
            while not all(fut.done() for fut in futures):
                wait(futures, timeout=0.25, return_when=FIRST_EXCEPTION)
                bar.update(int(prog.sum()) - bar.n)
            for fut in futures:
                fut.result()
        bar.update(int(prog.sum()) - bar.n)
    elapsed = time.perf_counter() - t1

    out: dict[str, np.ndarray] = {"pi": pi_d}
    theta_out = theta_d[:, :, 0] if prior.kind == "homogeneous" else theta_d
    out["theta"] = theta_out
    if Kp:  # the model's own parameters: p (class-conditional, one-coin), competence and xi (MACE), m and s (pooled)
        out.update(prior.reported(p_d))
    if keep_ll:
        out["log_lik"] = ll_d
    lp = ll_tot + log_prior_density(prior, pi_d, theta_out, p_d if Kp else None)
    fit = GibbsFit(
        data=data,
        model=model_obj,
        priors=prior.values,
        draws=out,
        sample_stats={"lp": lp},
        known=known_codes,
        engine=GIBBS_ENGINE,
        settings={
            "chains": chains,
            "warmup": warmup,
            "draws": draws,
            "thin": thin,
            "seed": int(seed),
            "n_threads": n_threads,
            "setup_s": setup,
            "pi_moves": pi_moves,
            "max_memory_gib": float(max_memory_gib),
            "progress": bool(progress),
            **(
                {
                    "pi_acceptance": [float(a / p) if p else float("nan") for a, p in mh[:, :2]],
                    "pi_scale": [float(x) for x in mh[:, 2]],
                }
                if pi_moves
                else {}
            ),
        },
        elapsed=elapsed,
    )
    if keep_rb:  # the class probabilities were summed by the z steps: class_probabilities() costs nothing
        total_rb = rb[0]
        for extra in rb[1:]:
            total_rb += extra
        total_rb /= chains * S
        fit.__dict__["_rb_probs"] = total_rb
    fit._fit_time_check()
    return fit
