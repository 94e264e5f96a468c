"""Simulation-based calibration (SBC) of a model and the method that fits it.

SBC (Talts, Betancourt, Simpson, Vehtari & Gelman 2018, "Validating Bayesian
inference algorithms with simulation-based calibration") checks that a
sampler draws from the posterior its model defines.  Repeat ``n_sims`` times:

1. draw parameters from the prior and data from the model
   (:func:`pyrater.simulate` with the model object, whose priors drive the
   draws);
2. fit the simulated data with the same model by the method under test and
   keep ``L = n_draws`` posterior draws (thinned by ``thin`` to weaken their
   autocorrelation);
3. for each scalar quantity, record the rank of the true value among the
   ``L`` draws, ``#{draws < truth}``, an integer in ``0 .. L``.

If the method samples the posterior exactly, each quantity's rank is
uniform on ``0 .. L`` (the data-averaged posterior is the prior).  A
histogram that is U-shaped says the posterior is too narrow, a hump says
too wide, a slope says biased; :meth:`SBCResult.uniformity` tests each
quantity with Pearson's chi-square over ``bins`` equal bins of ranks and
:meth:`SBCResult.passed` applies a Bonferroni correction over the
quantities (valid whatever their dependence).

Quantities
----------
By default every parameter with a known truth that the fit draws: ``pi``,
the diagonal of ``theta`` (each rater's probability of rating each class
correctly), and the family's own parameters with the same name in the
simulation (one-coin ``p``, MACE ``competence`` and ``xi``, pooled ``m`` and
``s``, hierarchical ``mu`` and ``sigma``, ordinal ``shift`` and
``log_scale``, item-difficulty's rater and item parameters).  Quantities are
named as in the fit's summaries, with 1-based indices: ``pi[1]``,
``theta[2, 1, 1]``.

A parameter that is a function of the others is still worth ranking (the
truth and the draws go through the same function); ranks of ``pi[1]`` and
``pi[2]`` at ``K = 2`` mirror each other.

Small data keep each replicate fast (tens of milliseconds by Gibbs, under a
second by NUTS on 40 items); 100 replicates detect gross errors (a wrong
conditional, a prior in the sampler that differs from the simulator's), 1,000
subtle ones.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from ..models.base import Model
from ..models.registry import get_model

__all__ = ["SBCResult", "run_sbc", "sbc_ranks"]

#: methods that return posterior draws, hence can be checked by SBC
SBC_METHODS = ("gibbs", "mcmc", "pathfinder")
#: the fit arguments sbc sets itself
_RESERVED = ("chains", "draws", "log_lik", "seed", "progress", "thin", "warmup", "engine", "method", "model")


@dataclass(frozen=True)
class SBCResult:
    """The ranks of a simulation-based calibration run.

    Attributes
    ----------
    model : str
        The family checked.
    method : str
        The method checked.
    ranks : DataFrame, shape (n_sims, n_quantities)
        ``ranks.loc[r, q]``: the number of the ``n_draws`` posterior draws of
        quantity ``q`` below its true value in replicate ``r`` (``0 .. n_draws``).
    n_draws : int
        Posterior draws per replicate that the ranks count (``L``).
    problems : Series, shape (n_sims,)
        The number of warnings each replicate's fit raised (sampler problems:
        divergences, Rhat, label switching), kept apart so that the run stays readable.
    settings : dict
        The arguments of the run (design, seed, thinning), to reproduce it.
    """

    model: str
    method: str
    ranks: pd.DataFrame
    n_draws: int
    problems: pd.Series
    settings: dict = field(default_factory=dict)

    @property
    def n_sims(self) -> int:
        """Number of replicates."""
        return int(self.ranks.shape[0])

    def _check_bins(self, bins: int | None) -> int:
        n_values = self.n_draws + 1
        if bins is None:
            bins = max(b for b in range(1, 21) if n_values % b == 0 and self.n_sims / b >= 5)
        if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool) or bins < 2 or n_values % bins:
            divisors = [b for b in range(2, n_values + 1) if n_values % b == 0][:8]
            raise ValueError(
                f"bins={bins!r}: expected an integer >= 2 that divides the {n_values} possible ranks "
                f"(n_draws + 1), such as {divisors}"
            )
        return int(bins)

    def counts(self, bins: int | None = None) -> pd.DataFrame:
        """Rank histogram of each quantity: DataFrame (bins, n_quantities) of counts.

        ``bins`` must divide ``n_draws + 1`` so that every bin holds the same number
        of rank values (default: the most, up to 20, with at least 5 replicates per bin).
        """
        b = self._check_bins(bins)
        width = (self.n_draws + 1) // b
        idx = self.ranks.to_numpy() // width
        out = np.stack([np.bincount(idx[:, q], minlength=b) for q in range(idx.shape[1])], axis=1)
        return pd.DataFrame(out, columns=self.ranks.columns, index=pd.RangeIndex(b, name="bin"))

    def uniformity(self, bins: int | None = None) -> pd.DataFrame:
        """Pearson's chi-square test of uniform ranks, one row per quantity.

        Columns: ``chi2``, ``dof`` (``bins - 1``), ``p_value`` and
        ``p_bonferroni`` (``min(1, p_value x n_quantities)``), sorted by ``p_value``.
        """
        c = self.counts(bins)
        stat, p = stats.chisquare(c.to_numpy(), axis=0)
        n_q = c.shape[1]
        table = pd.DataFrame(
            {
                "chi2": stat,
                "dof": c.shape[0] - 1,
                "p_value": p,
                "p_bonferroni": np.minimum(1.0, p * n_q),
            },
            index=pd.Index(c.columns, name="quantity"),
        )
        return table.sort_values("p_value")

    def passed(self, alpha: float = 0.01, bins: int | None = None) -> bool:
        """Whether no quantity's ranks depart from uniform at family-wise level ``alpha`` (Bonferroni)."""
        if not 0 < alpha < 1:
            raise ValueError(f"alpha={alpha!r}: expected a level in (0, 1)")
        return bool(self.uniformity(bins)["p_bonferroni"].min() > alpha)

    def plot(self, quantities: Sequence[str] | None = None, bins: int | None = None, max_panels: int = 12):
        """Rank histograms with the 99% band of a uniform histogram; see :func:`pyrater.plots.plot_sbc`."""
        from .plots import plot_sbc

        return plot_sbc(self, quantities=quantities, bins=bins, max_panels=max_panels)

    def __repr__(self) -> str:
        worst = self.uniformity().iloc[0]
        return (
            f"SBCResult(model={self.model!r}, method={self.method!r}, n_sims={self.n_sims}, "
            f"n_draws={self.n_draws}, quantities={self.ranks.shape[1]}, "
            f"smallest p={worst['p_value']:.3g} at {worst.name}, passed={self.passed()})"
        )


# --------------------------------------------------------------------- truth and ranks
def _label(name: str, index: tuple[int, ...]) -> str:
    return f"{name}[{', '.join(str(i + 1) for i in index)}]" if index else name


def _truth(sim, draws: dict[str, np.ndarray], quantities: Sequence[str] | None, spec: Model) -> dict[str, np.ndarray]:
    """The true value of each quantity the fit draws, keyed by the draws' name.

    ``theta`` becomes its diagonal (``theta[..., k, k]``); ``log_x`` is matched to the
    simulation's ``x``; the family's own parameters are put in the labelling its fits report
    (``spec.canonical_params``).  Returns arrays shaped like one draw of the quantity.
    """
    truth_src: dict[str, np.ndarray] = {"pi": np.asarray(sim.pi), "theta": np.asarray(sim.theta)}
    own = spec.canonical_params({k: np.asarray(v) for k, v in sim.params.items()})
    truth_src.update({k: np.asarray(v) for k, v in own.items()})
    out: dict[str, np.ndarray] = {}
    for name, d in draws.items():
        if name == "log_lik":
            continue
        shape = np.shape(d)[2:]
        if name in truth_src:
            t = truth_src[name]
        elif name.startswith("log_") and name[4:] in truth_src:
            t = np.log(truth_src[name[4:]])
        else:
            continue
        if name == "theta" and t.ndim == 3 and len(shape) == 2:  # one matrix shared by the raters
            t = t[0]
        if t.shape != shape:
            continue
        out[name] = t
    if quantities is not None:
        unknown = sorted(set(quantities) - set(out))
        if unknown:
            raise ValueError(
                f"quantities {unknown} have no true value in the simulation or no draws in the fit; "
                f"this model's are {sorted(out)}"
            )
        out = {k: out[k] for k in quantities}
    return out


def sbc_ranks(
    draws: dict[str, np.ndarray], truth: dict[str, np.ndarray], thin: int, rng: np.random.Generator
) -> dict[str, int]:
    """The rank of each true value among the thinned draws (ties broken at random).

    Parameters
    ----------
    draws : dict of arrays (chains, draws, ...)
    truth : dict of arrays shaped like one draw, keyed as ``draws``
        ``theta`` is taken on its diagonal (its last two axes).
    thin : int
        Keep every ``thin``-th draw of each chain, counted from the last.
    rng : numpy Generator
        For the ties.

    Returns
    -------
    dict
        ``{"pi[1]": rank, "theta[1, 1, 1]": rank, ...}``, each rank in ``0 .. L``.
    """
    out: dict[str, int] = {}
    for name, t in truth.items():
        d = np.asarray(draws[name])
        d = d[:, ::-1][:, ::thin][:, ::-1]  # each chain's last draw kept
        d = d.reshape((-1,) + d.shape[2:])
        if name == "theta":
            d = np.diagonal(d, axis1=-2, axis2=-1)
            t = np.diagonal(t, axis1=-2, axis2=-1)
            index_of = _theta_index
        else:
            index_of = None
        below = (d < t).sum(axis=0)
        ties = (d == t).sum(axis=0)
        extra = rng.integers(0, ties + 1) if np.any(ties) else np.zeros_like(below)
        rank = below + extra
        for idx in np.ndindex(rank.shape):
            label = _label(name, index_of(idx) if index_of else idx)
            out[label] = int(rank[idx])
    return out


def _takes(spec: Model, K: int, J: int) -> bool:
    """Whether the family takes ``K`` categories (its priors are refused otherwise)."""
    try:
        spec.priors(K, J)
    except ValueError:
        return False
    return True


def _theta_index(idx: tuple[int, ...]) -> tuple[int, ...]:
    """The diagonal's index ``(..., k)`` as theta's ``(..., k, k)``."""
    return idx + (idx[-1],)


# ------------------------------------------------------------------------------ the run
def run_sbc(
    model: str | Model,
    method: Literal["gibbs", "mcmc", "pathfinder"],
    fit_one: Callable[..., Any],
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
    """The SBC loop behind :func:`pyrater.sbc` (documented there), with the fit function given.

    ``fit_one(data, model, method=..., seed=..., progress=False, log_lik=False, **options)``
    fits one replicate (:func:`pyrater.fit`); the checking layer does not import it.
    """
    from ..fits.draws import DrawsFit
    from ..models.simulate import simulate

    spec = get_model(model)
    fitted = get_model(fit_model) if fit_model is not None else spec
    if method not in SBC_METHODS:
        raise ValueError(f"method={method!r}: SBC needs posterior draws; choose one of {SBC_METHODS}")
    for m, role in ((spec, "model"), (fitted, "fit_model")):
        if method not in type(m).methods:
            raise ValueError(
                f"{role}: the {m.title} model is not fitted by method={method!r}; it takes {type(m).methods}"
            )
    reserved = sorted(set(fit_options) & set(_RESERVED))
    if reserved:
        raise ValueError(f"sbc sets {reserved} itself; pass n_draws, thin, warmup, engine or seed to sbc instead")
    checks = {"n_sims": (n_sims, 20), "n_items": (n_items, 2), "n_raters": (n_raters, 1), "n_draws": (n_draws, 9)}
    for name, (value, low) in checks.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name}={value!r}: expected an integer >= {low}")
    if thin is None:
        thin = 4 if method == "gibbs" else 1
    if warmup is None:
        warmup = 200 if method == "gibbs" else 300
    for name, value, low in (("thin", thin, 1), ("warmup", warmup, 0)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name}={value!r}: expected an integer >= {low}")
    if n_categories is None:  # the smallest K the family takes (2, or 3 for the ordinal model)
        n_categories = next((K for K in (2, 3) if _takes(spec, K, n_raters)), 2)
    if quantities is not None:
        if isinstance(quantities, str):
            quantities = [quantities]
        quantities = list(quantities)

    options: dict[str, Any] = dict(fit_options)
    if method == "pathfinder":
        options.update(draws=n_draws * thin)
    else:
        options.update(chains=1, warmup=warmup, draws=n_draws * thin)
    if engine is not None:
        options["engine"] = engine

    children = np.random.SeedSequence(seed).spawn(n_sims)
    rows: list[dict[str, int]] = []
    problems: list[int] = []
    iterator: Any = range(n_sims)
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, desc=f"SBC {spec.name} by {method}", unit="fit")
    for r in iterator:
        sim_seed, fit_seed, rank_seed = (int(s) for s in children[r].generate_state(3) % (2**31 - 1))
        sim = simulate(
            spec,
            n_items,
            n_raters,
            n_categories=n_categories,
            raters_per_item=raters_per_item,
            seed=sim_seed,
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                f = fit_one(sim.data, fitted, method=method, seed=fit_seed, progress=False, log_lik=False, **options)
            except Exception as exc:  # say which replicate, so that it can be rerun alone
                raise RuntimeError(
                    f"SBC replicate {r} (simulation seed {sim_seed}, fit seed {fit_seed}) failed: {exc}"
                ) from exc
        problems.append(len(caught))
        if not isinstance(f, DrawsFit):  # every SBC method returns draws
            raise TypeError(f"method={method!r} returned a {type(f).__name__}, not a fit with draws")
        draws = {k: np.asarray(v) for k, v in f.draws.items()}
        truth = _truth(sim, draws, quantities, fitted)
        if not truth:
            raise ValueError(f"the {fitted.title} fit draws no parameter with a true value in the simulation")
        ranks = sbc_ranks(draws, truth, thin, np.random.default_rng(rank_seed))
        rows.append(ranks)
        chains, kept_per_chain = draws["pi"].shape[0], len(range(0, draws["pi"].shape[1], thin))
        n_kept = chains * kept_per_chain
        if n_kept != n_draws:
            raise RuntimeError(f"the fit kept {n_kept} draws after thinning, expected {n_draws}")
    ranks_frame = pd.DataFrame(rows, index=pd.RangeIndex(n_sims, name="replicate"))
    settings = {
        "n_sims": n_sims,
        "n_items": n_items,
        "n_raters": n_raters,
        "n_categories": n_categories,
        "raters_per_item": raters_per_item,
        "thin": thin,
        "warmup": warmup,
        "seed": seed,
        "fit_model": fitted.name,
        "engine": engine,
    }
    return SBCResult(
        model=spec.name,
        method=method,
        ranks=ranks_frame,
        n_draws=n_draws,
        problems=pd.Series(problems, index=ranks_frame.index, name="warnings"),
        settings=settings,
    )
