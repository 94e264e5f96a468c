"""Bootstrap of per-group positive counts under the probit Dawid-Skene model.

The model
---------
An item of true class ``z = k`` has latent scores ``y* ~ N(mu_k, R_k)``
and annotator ``j`` says ``y_j = 1[y*_j > 0]``, with
``mu_k[j] = Phi^-1(P(y_j = 1 | z = k))`` and ``R_k`` a correlation matrix,
so each annotator's confusion rates are reproduced exactly and ``R_k``
carries the dependence between annotators.  ``P(y | z = k)`` is a
multivariate normal orthant probability over the annotators present
(:mod:`pyrater.contrib.probit.orthant`), and by Bayes' rule with prevalence ``pi``

    log-odds P(z = 1 | y) = log pi - log(1 - pi) + log P(y | 1) - log P(y | 0).

With ``R = I`` this is exactly the naive-Bayes (classic) Dawid-Skene
posterior.

The bootstrap (replicate ``b = 1..B``)
--------------------------------------
1. resample the validation items within each gold class and re-estimate
   rates and correlations (``resample_validation``);
2. draw ``pi ~ Beta(a, b)`` (``pi="prior"``, default ``Beta(2, 10)``), or
   hold it fixed (``pi=<float>``), or estimate it from the (resampled) test
   labels by maximum likelihood (``pi="estimate"``).  The prior is never
   updated by the data: use ``"prior"`` only when it states real knowledge
   of the test population's prevalence, else ``"estimate"`` (recommended);
   a :class:`PriorConflictWarning` says when the test labels contradict the
   prior;
3. resample the test items within each group (``resample_test``);
4. compute ``p_i = P(z_i = 1 | y_i)`` for every test item;
5. draw ``z_i ~ Bernoulli(p_i)`` (``sample_z``; when off, ``sum_i p_i`` is
   reported: expected-value summation);
6. sum per group.

Everything is done per distinct label pattern, never per item: the orthant
probabilities are computed once per pattern and replicate, test resampling
draws multinomial counts ``c_gq`` of each pattern ``q`` in each group ``g``,
and the sum of Bernoulli draws over the ``c_gq`` items sharing ``p_q`` is
drawn as ``Binomial(c_gq, p_q)`` -- the same distribution as item-level
resampling and Bernoulli draws.

Variance decomposition
----------------------
Per group, with ``E_b = sum_q c_gq p_q`` and ``V_b = sum_q c_gq p_q (1 - p_q)``
in replicate ``b``, the law of total variance gives

    Var(count) = mean_b V_b  +  var_b E_b
               = realisation  +  epistemic,

the first the Bernoulli noise of which items are positive given the
probabilities, the second the uncertainty of the probabilities themselves
(validation, prevalence and test sampling).
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats
from scipy.special import expit

from ..._quiet import import_tqdm
from ..._stacklevel import user_stacklevel
from ._data import read_population, read_test, read_validation
from .estimation import (
    CORRELATION_METHODS,
    CorrelationMethod,
    ProbitParameters,
    estimate_batch,
    estimate_parameters,
    validation_patterns,
)
from .orthant import encode_patterns, orthant_log_prob, sobol_points

tqdm = import_tqdm()

__all__ = [
    "ProbitDawidSkene",
    "GroupCounts",
    "BootstrapSettings",
    "DEFAULT_PROB",
    "estimate_prevalence",
    "PriorConflict",
    "PriorConflictWarning",
    "prior_conflict",
]

DEFAULT_PROB = 0.9
PiOption = Literal["prior", "estimate"] | float


def class_posterior(log_p1: np.ndarray, log_p0: np.ndarray, pi: float) -> np.ndarray:
    """``P(z = 1 | y)`` from the log class-conditional probabilities, in log-odds form."""
    with np.errstate(divide="ignore"):
        log_odds = np.log(pi) - np.log1p(-pi) + log_p1 - log_p0
    return expit(log_odds)


def estimate_prevalence(log_p1: np.ndarray, log_p0: np.ndarray, counts: np.ndarray, n_iter: int = 60) -> float:
    """Maximum-likelihood prevalence from pattern counts.

    Maximises ``sum_q c_q log(pi P(y_q | 1) + (1 - pi) P(y_q | 0))``, concave
    in ``pi``: the derivative ``sum_q c_q (r_q - 1) / (1 + pi (r_q - 1))``
    with ``r_q = P(y_q | 1) / P(y_q | 0)`` decreases in ``pi``, and its root
    is found by bisection on [0, 1] (0 or 1 when the derivative keeps its sign).
    """
    counts = np.asarray(counts, dtype=float)
    keep = counts > 0
    rm1 = np.expm1(np.clip(log_p1[keep] - log_p0[keep], -700, 700))
    c = counts[keep]

    def grad(pi: float) -> float:
        return float(np.sum(c * rm1 / (1.0 + pi * rm1)))

    if grad(0.0) <= 0:
        return 0.0
    if grad(1.0) >= 0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        if grad(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


class PriorConflictWarning(UserWarning):
    """The test labels contradict the prevalence prior of ``pi="prior"``."""


@dataclass(frozen=True)
class PriorConflict:
    """Result of :func:`prior_conflict`.

    Attributes
    ----------
    pi_hat : float
        Maximum-likelihood prevalence of the test labels.
    shift : array, shape (G,)
        Per group, ``|m_prior - m_data| / sd_prior``: how far the prior
        moves the centre of the group's count from what the data imply, in
        standard deviations of the count under the prior.
    coverage : array, shape (G,)
        The coverage a central ``prob`` normal interval has when off centre
        by ``shift`` standard deviations.
    conflict : bool
        The median group's coverage is below ``min_coverage``.
    """

    pi_hat: float
    shift: np.ndarray
    coverage: np.ndarray
    conflict: bool


def prior_conflict(
    log_p1: np.ndarray,
    log_p0: np.ndarray,
    cell: np.ndarray,
    pi_prior: tuple[float, float] = (2.0, 10.0),
    prob: float = DEFAULT_PROB,
    min_coverage: float = 0.8,
    n_nodes: int = 200,
) -> PriorConflict:
    """Test whether the labels contradict the Beta prior of ``pi="prior"`` enough to bias the counts.

    Per group ``g`` with ``c_gq`` test items of pattern ``q`` and
    ``p_q(pi) = P(z = 1 | y_q, pi)``:

    * the data's centre ``m_data = sum_q c_gq p_q(pi_hat)``, at the
      maximum-likelihood prevalence of all test labels;
    * under the prior, the mean ``m_prior = E[sum_q c_gq p_q(pi)]`` and
      variance ``E[sum_q c_gq p_q (1 - p_q)] + Var[sum_q c_gq p_q(pi)]``
      over ``pi ~ Beta(a, b)`` (law of total variance; quadrature at
      ``n_nodes`` prior quantiles): what the bootstrap's counts follow,
      validation and test resampling aside;
    * ``shift = |m_prior - m_data| / sd``, and the coverage of a central
      ``prob`` normal interval off centre by that much:
      ``Phi(z - shift) - Phi(-z - shift)``, ``z = Phi^-1((1 + prob) / 2)``.

    A conflict is declared when the median group's coverage falls below
    ``min_coverage`` (0.8 for nominal 0.9): the prior, never updated by the
    data, then decides the counts more than the labels do.

    Parameters
    ----------
    log_p1, log_p0 : arrays, shape (Q,)
        ``log P(y_q | z = 1)`` and ``log P(y_q | z = 0)`` per test pattern.
    cell : array, shape (G, Q)
        Test items per group and pattern.
    pi_prior : (a, b)
    prob : float
        Interval probability (default 0.9).
    min_coverage : float
        Coverage below which the prior is reported (default 0.8).
    n_nodes : int
        Quadrature nodes over the prior.
    """
    cell = np.atleast_2d(np.asarray(cell, dtype=float))
    pi_hat = estimate_prevalence(log_p1, log_p0, cell.sum(axis=0))
    nodes = stats.beta.ppf((np.arange(n_nodes) + 0.5) / n_nodes, *pi_prior)
    p = np.stack([class_posterior(log_p1, log_p0, float(x)) for x in nodes])  # (nodes, Q)
    mean_b = p @ cell.T  # (nodes, G)
    var_b = (p * (1.0 - p)) @ cell.T
    m_prior = mean_b.mean(axis=0)
    sd = np.sqrt(var_b.mean(axis=0) + mean_b.var(axis=0))
    m_data = cell @ class_posterior(log_p1, log_p0, pi_hat)
    shift = np.divide(np.abs(m_prior - m_data), sd, out=np.zeros_like(sd), where=sd > 0)
    z = stats.norm.ppf((1 + prob) / 2)
    coverage = stats.norm.cdf(z - shift) - stats.norm.cdf(-z - shift)
    return PriorConflict(pi_hat, shift, coverage, bool(np.median(coverage) < min_coverage))


@dataclass(frozen=True)
class BootstrapSettings:
    """What a bootstrap did: the switches of steps 1-5 and their settings."""

    n_boot: int
    correlation: str
    resample_validation: bool
    pi: str | float
    pi_prior: tuple[float, float]
    resample_test: bool
    sample_z: bool
    n_qmc: int
    seed: Any

    def __str__(self) -> str:
        pi = {"prior": f"Beta{self.pi_prior} draws", "estimate": "estimated from test labels"}.get(
            self.pi if isinstance(self.pi, str) else "", f"fixed at {self.pi}"
        )
        return (
            f"B={self.n_boot}, correlation={self.correlation}, "
            f"validation resampling {'on' if self.resample_validation else 'off'}, pi {pi}, "
            f"test resampling {'on' if self.resample_test else 'off'}, "
            f"{'z drawn' if self.sample_z else 'expected-value summation'}"
        )


def _quantiles(draws: pd.DataFrame, q: Sequence[float]) -> pd.DataFrame:
    out = draws.quantile(list(q), axis=0).T
    out.columns = [f"q{100 * x:g}" for x in q]
    return out


@dataclass(frozen=True, eq=False)
class GroupCounts:
    """Bootstrap distribution of the number of positive items per group.

    All tables are indexed by the user's group labels; bootstrap tables have
    one row per replicate (index ``replicate``) and one column per group.

    Attributes
    ----------
    counts : DataFrame, (B, G)
        Bootstrap draws of the number of positive test items per group
        (integers when ``z`` is drawn, ``sum p`` otherwise).
    expected : DataFrame, (B, G)
        ``E_b = sum_i p_i`` over the (resampled) items of each group.
    realisation : DataFrame, (B, G)
        ``V_b = sum_i p_i (1 - p_i)``.
    pi : Series, (B,)
        Prevalence used in each replicate.
    n_items : Series, (G,)
        Test items per group.
    population : Series or None, (G,)
        Population sizes when given.
    settings : BootstrapSettings
    parameters : ProbitParameters
        Point estimates from the full validation set.
    prob : float
        Default interval probability (0.9).
    """

    counts: pd.DataFrame
    expected: pd.DataFrame
    realisation: pd.DataFrame
    pi: pd.Series
    n_items: pd.Series
    population: pd.Series | None
    settings: BootstrapSettings
    parameters: ProbitParameters
    prob: float = DEFAULT_PROB

    # ------------------------------------------------------------- draws
    @property
    def groups(self) -> pd.Index:
        """The group labels."""
        return self.counts.columns

    @property
    def proportions(self) -> pd.DataFrame:
        """Bootstrap draws of the proportion of positives, ``count / n_g``, (B, G)."""
        return self.counts / self.n_items

    @property
    def totals(self) -> pd.DataFrame:
        """Bootstrap draws of the population total ``N_g * count / n_g``, (B, G).

        The expansion estimator of each group's number of positives in its
        population.  No finite-population correction is applied (the test
        resampling treats each group's sample as drawn with replacement), so
        intervals are conservative when ``n_g / N_g`` is not small.
        """
        if self.population is None:
            raise ValueError("population sizes were not given; pass population={group: size, ...} to bootstrap()")
        return self.counts * (self.population / self.n_items)

    def distribution(self, group: Hashable) -> pd.Series:
        """Bootstrap distribution of one group's count: value -> relative frequency."""
        if group not in self.groups:
            raise KeyError(f"unknown group {group!r}; groups are {list(self.groups)[:10]}")
        return self.counts[group].value_counts(normalize=True).sort_index().rename("frequency")

    # ----------------------------------------------------------- summaries
    def variance_decomposition(self) -> pd.DataFrame:
        """Per group: the count variance and its two parts.

        ``variance`` of the count draws, ``realisation`` (mean over
        replicates of ``sum p (1 - p)``), ``epistemic`` (variance over
        replicates of ``sum p``) and their sum ``total``.

        ``total`` and ``variance`` agree within Monte Carlo error when ``z`` is
        drawn (law of total variance); without drawing ``z`` the count
        variance is the epistemic part alone.
        """
        real = self.realisation.mean(axis=0)
        epi = self.expected.var(axis=0, ddof=1)
        return pd.DataFrame(
            {
                "variance": self.counts.var(axis=0, ddof=1),
                "realisation": real,
                "epistemic": epi,
                "total": real + epi,
            }
        )

    def percentiles(self, q: Sequence[float] = (0.05, 0.25, 0.5, 0.75, 0.95), which: str = "count") -> pd.DataFrame:
        """Percentiles of the draws per group; ``which`` in count, proportion, total."""
        return _quantiles(self._draws(which), q)

    def _draws(self, which: str) -> pd.DataFrame:
        if which == "count":
            return self.counts
        if which == "proportion":
            return self.proportions
        if which == "total":
            return self.totals
        raise ValueError(f"which must be 'count', 'proportion' or 'total', got {which!r}")

    def interval(self, prob: float | None = None, which: str = "count") -> pd.DataFrame:
        """Central (percentile) bootstrap intervals, columns ``lower``, ``upper``.

        Quantiles interpolate linearly between order statistics (pandas'
        default), so bounds of integer counts can be fractional.
        """
        prob = self.prob if prob is None else prob
        if not 0 < prob < 1:
            raise ValueError(f"prob must be in (0, 1), got {prob!r}")
        q = _quantiles(self._draws(which), [(1 - prob) / 2, (1 + prob) / 2])
        q.columns = ["lower", "upper"]
        return q

    def summary(self, prob: float | None = None) -> pd.DataFrame:
        """One row per group: the count, the proportion and the population total.

        The population total is there when population sizes were given.  Each
        has its mean, sd, median and central ``prob`` interval; the variance
        decomposition follows.
        """
        prob = self.prob if prob is None else prob
        cols: dict[str, pd.Series] = {"n_items": self.n_items}
        kinds = ["count", "proportion"] + (["total"] if self.population is not None else [])
        for which in kinds:
            d = self._draws(which)
            iv = self.interval(prob, which)
            cols[f"{which}_mean"] = d.mean(axis=0)
            cols[f"{which}_sd"] = d.std(axis=0, ddof=1)
            cols[f"{which}_median"] = d.median(axis=0)
            cols[f"{which}_lower"] = iv["lower"]
            cols[f"{which}_upper"] = iv["upper"]
        if self.population is not None:
            cols["population"] = self.population
        vd = self.variance_decomposition()
        cols["var_realisation"] = vd["realisation"]
        cols["var_epistemic"] = vd["epistemic"]
        out = pd.DataFrame(cols)
        out.index.name = self.groups.name
        return out

    def plot(self, groups: Sequence[Hashable] | None = None, **kwargs: Any):
        """Per-group count distributions; see :func:`pyrater.contrib.probit.plots.plot_group_counts`."""
        from .plots import plot_group_counts

        return plot_group_counts(self, groups=groups, **kwargs)

    def __repr__(self) -> str:
        return f"GroupCounts({len(self.groups)} groups, {self.n_items.sum()} test items; {self.settings})"


@dataclass(frozen=True)
class _Prepared:
    """Validated inputs reduced to patterns (internal)."""

    vpats: list
    vcounts: list
    tpats: np.ndarray
    cell: np.ndarray  # (G, Q) items per group and test pattern
    n_g: np.ndarray
    groups: pd.Index
    population: np.ndarray | None
    parameters: ProbitParameters


def _resample_and_sum(
    ll: np.ndarray,
    prep: _Prepared,
    n_boot: int,
    *,
    pi: Any,
    pi_prior: tuple[float, float],
    resample_test: bool,
    sample_z: bool,
    rng: np.random.Generator,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Steps 2-6 given the per-replicate class log-likelihoods ``ll`` (B, Q, 2).

    Returns counts, expected (sum p), realisation (sum p (1 - p)), each (B, G),
    and the prevalences (B,).
    """
    G = prep.cell.shape[0]
    freq = prep.cell / prep.n_g[:, None]
    counts = np.empty((n_boot, G))
    expected = np.empty((n_boot, G))
    realisation = np.empty((n_boot, G))
    pis = np.empty(n_boot)
    for b in tqdm(range(n_boot), disable=not progress, desc="bootstrap (steps 2-6)", leave=False):
        llb = ll[b]
        # step 3: test resampling within groups (multinomial over patterns)
        c = rng.multinomial(prep.n_g, freq) if resample_test else prep.cell
        # step 2: prevalence
        if isinstance(pi, str) and pi == "prior":
            pi_b = rng.beta(*pi_prior)
        elif isinstance(pi, str) and pi == "estimate":
            pi_b = estimate_prevalence(llb[:, 1], llb[:, 0], c.sum(axis=0))
        else:
            pi_b = float(pi)
        # step 4: posterior per pattern
        p = class_posterior(llb[:, 1], llb[:, 0], pi_b)
        # steps 5-6: Binomial(c_gq, p_q) is the sum of c_gq Bernoulli(p_q) draws
        expected[b] = c @ p
        realisation[b] = c @ (p * (1.0 - p))
        counts[b] = rng.binomial(c, p).sum(axis=1) if sample_z else expected[b]
        pis[b] = pi_b
    return counts, expected, realisation, pis


@dataclass(frozen=True)
class ProbitDawidSkene:
    """Probit Dawid-Skene model for correlated binary annotators.

    Parameters
    ----------
    correlation : {"tetrachoric", "signed_probit", "independent"}
        Estimator of the latent correlations ``R_k`` (see
        :mod:`pyrater.contrib.probit.estimation`).  ``"tetrachoric"`` (default) is
        consistent; ``"signed_probit"`` is the original specification
        (empirical covariance of ``sign(y - 0.5) Phi^-1(rate)`` plus
        ``lambda I``, rescaled) and is biased; ``"independent"`` sets
        ``R = I``, the classic Dawid-Skene model.
    pseudo_count : float
        ``a`` in the rates ``(n1 + a) / (n + 2 a)`` (default 0.5).
    shrinkage : float in [0, 1]
        ``lambda`` (default 0.02): tetrachoric ``R`` becomes
        ``(1 - lambda) R + lambda I``; for the signed-probit estimator it is
        the ridge added to the score covariance.
    n_qmc : int
        Sobol points per orthant probability (default 1024; a power of two).
    rho_max : float
        Bound on tetrachoric correlations (default 0.999).

    Examples
    --------
    >>> from pyrater.contrib.probit import ProbitDawidSkene, simulate_study, equicorrelation
    >>> import numpy as np
    >>> sim = simulate_study(rates=np.array([[0.1] * 4, [0.8] * 4]),
    ...                      R=np.stack([equicorrelation(4, 0.3), equicorrelation(4, 0.5)]), seed=1)
    >>> fit = ProbitDawidSkene().bootstrap(sim.validation, sim.test, n_boot=100, seed=2, progress=False)
    >>> fit.summary().columns[:3].tolist()
    ['n_items', 'count_mean', 'count_sd']
    """

    correlation: CorrelationMethod = "tetrachoric"
    pseudo_count: float = 0.5
    shrinkage: float = 0.02
    n_qmc: int = 1024
    rho_max: float = 0.999

    def __post_init__(self) -> None:
        if self.correlation not in CORRELATION_METHODS:
            raise ValueError(f"correlation must be one of {CORRELATION_METHODS}, got {self.correlation!r}")
        if not (np.isfinite(self.pseudo_count) and self.pseudo_count >= 0):
            raise ValueError(f"pseudo_count must be >= 0, got {self.pseudo_count!r}")
        if not 0 <= self.shrinkage <= 1:
            raise ValueError(f"shrinkage must be in [0, 1], got {self.shrinkage!r}")
        if int(self.n_qmc) < 2:
            raise ValueError(f"n_qmc must be >= 2, got {self.n_qmc!r}")
        if not 0 < self.rho_max < 1:
            raise ValueError(f"rho_max must be in (0, 1), got {self.rho_max!r}")

    # ---------------------------------------------------------- estimation
    def estimate(
        self, validation: pd.DataFrame, *, annotators: Sequence[Hashable] | None = None, gold: Hashable = "gold"
    ) -> ProbitParameters:
        """Point estimates of rates and correlations from the validation table."""
        return estimate_parameters(
            validation,
            annotators=annotators,
            gold=gold,
            correlation=self.correlation,
            pseudo_count=self.pseudo_count,
            shrinkage=self.shrinkage,
            rho_max=self.rho_max,
        )

    def class_log_likelihood(
        self, patterns: np.ndarray, mu: np.ndarray, R: np.ndarray, points: np.ndarray | None = None, rng: Any = None
    ) -> np.ndarray:
        """``log P(y_q | z = k)``, array (P, 2), for patterns (P, J) given mu (2, J), R (2, J, J)."""
        if points is None:
            points = sobol_points(self.n_qmc, max(patterns.shape[1] - 1, 1), rng)
        return np.column_stack([orthant_log_prob(patterns, mu[k], R[k], points=points) for k in (0, 1)])

    def posterior(
        self,
        test: pd.DataFrame,
        parameters: ProbitParameters,
        *,
        pi: float = 2.0 / 12.0,
        group: Hashable | None = "group",
        seed: int | np.random.Generator | None = None,
    ) -> pd.Series:
        """``P(z_i = 1 | y_i)`` for every test item, given point estimates and ``pi``.

        Parameters
        ----------
        test : DataFrame
            Annotator columns of ``parameters.annotators``; a column named
            ``group`` (default ``"group"``) is ignored if present.
        parameters : ProbitParameters
        pi : float
            Prevalence (default 1/6, the mean of Beta(2, 10)).
        seed : seed of the Sobol scrambling.

        Returns
        -------
        Series indexed like ``test``.
        """
        if not 0 <= pi <= 1:
            raise ValueError(f"pi must be in [0, 1], got {pi!r}")
        if not isinstance(test, pd.DataFrame):
            raise TypeError(f"test must be a pandas DataFrame, got {type(test).__name__}")
        frame = test.loc[:, [c for c in test.columns if c != group]]
        t = read_test(frame.assign(__group__=0), parameters.annotators, "__group__")
        pats, inv, _ = encode_patterns(t.labels)
        ll = self.class_log_likelihood(pats, parameters.mu, parameters.R, rng=np.random.default_rng(seed))
        p = class_posterior(ll[:, 1], ll[:, 0], pi)
        return pd.Series(p[inv], index=test.index, name="p_positive")

    # ----------------------------------------------------------- bootstrap
    def bootstrap(
        self,
        validation: pd.DataFrame,
        test: pd.DataFrame,
        *,
        n_boot: int = 1000,
        annotators: Sequence[Hashable] | None = None,
        gold: Hashable = "gold",
        group: Hashable = "group",
        population: Mapping[Hashable, float] | pd.Series | None = None,
        pi: PiOption = "prior",
        pi_prior: tuple[float, float] = (2.0, 10.0),
        resample_validation: bool = True,
        resample_test: bool = True,
        sample_z: bool = True,
        prob: float = DEFAULT_PROB,
        seed: int | np.random.Generator | None = None,
        progress: bool | None = None,
    ) -> GroupCounts:
        """Bootstrap distribution of the number of positives per group.

        Parameters
        ----------
        validation : DataFrame
            Annotator columns (0/1, NaN missing) and the ``gold`` column.
        test : DataFrame
            The same annotator columns and the ``group`` column.
        n_boot : int
            Number of replicates B.
        annotators : sequence, optional
            Annotator columns; default every validation column but ``gold``.
        gold, group : column labels
        population : mapping or Series, optional
            Population size per group, for population totals.
        pi : "prior", "estimate" or float
            Step 2: draw ``pi ~ Beta(*pi_prior)``; estimate it by maximum
            likelihood from the test labels in each replicate; or fix it.
            ``"prior"`` (the default, as in the original method) is right
            only when ``pi_prior`` states real knowledge of the test
            population's prevalence: the prior is never updated, so a
            prevalence far from it biases the counts (interval coverage
            0.72 at prevalence 0.4 under Beta(2, 10)).  **Recommended:**
            ``pi="estimate"`` unless you have such knowledge.  With
            ``"prior"``, a :class:`PriorConflictWarning` is issued when the
            test labels contradict the prior (:func:`prior_conflict`: the
            prior moves the median group's count so far from what the labels
            imply that a 90% interval would cover less than 80%).
        pi_prior : (a, b)
            Beta prior of ``pi`` (default (2, 10)).
        resample_validation, resample_test, sample_z : bool
            Switch steps 1, 3 and 5 on or off.
        prob : float
            Default interval probability of the result (0.9).
        seed : int or Generator
            All randomness (resampling, pi, z, Sobol scrambling) comes from
            ``np.random.default_rng(seed)``.
        progress : bool, optional
            tqdm progress bar; default on when ``n_boot >= 2000``.

        Returns
        -------
        GroupCounts
        """
        n_boot = int(n_boot)
        if n_boot < 2:
            raise ValueError(f"n_boot must be >= 2, got {n_boot!r}")
        if isinstance(pi, str):
            if pi not in ("prior", "estimate"):
                raise ValueError(f"pi must be 'prior', 'estimate' or a number in [0, 1], got {pi!r}")
        else:
            try:
                pi = float(pi)
            except (TypeError, ValueError):
                raise ValueError(f"pi must be 'prior', 'estimate' or a number in [0, 1], got {pi!r}") from None
            if not 0 <= pi <= 1:
                raise ValueError(f"pi must be in [0, 1], got {pi!r}")
        a_pi, b_pi = (float(x) for x in pi_prior)
        if not (a_pi > 0 and b_pi > 0):
            raise ValueError(f"pi_prior must be two positive numbers, got {pi_prior!r}")
        if not 0 < prob < 1:
            raise ValueError(f"prob must be in (0, 1), got {prob!r}")
        rng = np.random.default_rng(seed)
        prep = self._prepare(validation, test, annotators, gold, group, population)
        if isinstance(pi, str) and pi == "prior":
            self._check_prior(prep, (a_pi, b_pi))
        show = progress if progress is not None else n_boot >= 2000
        ll = self._replicate_log_likelihoods(prep, n_boot, resample_validation, rng, progress=show)
        counts, expected, realisation, pis = _resample_and_sum(
            ll, prep, n_boot, pi=pi, pi_prior=(a_pi, b_pi), resample_test=resample_test, sample_z=sample_z, rng=rng
        )
        return self._result(
            prep,
            counts,
            expected,
            realisation,
            pis,
            settings=BootstrapSettings(
                n_boot=n_boot,
                correlation=self.correlation,
                resample_validation=bool(resample_validation),
                pi=pi,
                pi_prior=(a_pi, b_pi),
                resample_test=bool(resample_test),
                sample_z=bool(sample_z),
                n_qmc=int(self.n_qmc),
                seed=seed if not isinstance(seed, np.random.Generator) else "Generator",
            ),
            prob=prob,
        )

    # ------------------------------------------------------------ internals
    def _prepare(
        self,
        validation: pd.DataFrame,
        test: pd.DataFrame,
        annotators: Sequence[Hashable] | None,
        gold: Hashable,
        group: Hashable,
        population: Mapping[Hashable, float] | pd.Series | None,
    ) -> _Prepared:
        """Validate the inputs and reduce them to distinct patterns."""
        v = read_validation(validation, annotators, gold)
        t = read_test(test, v.annotators, group)
        G = len(t.groups)
        n_g = np.bincount(t.group_codes, minlength=G)
        pop = read_population(population, t.groups, n_g)
        vpats, vcounts = validation_patterns(v.labels, v.gold)
        point_rates, point_mu, point_R = estimate_batch(vpats, [c[None, :] for c in vcounts], **self._estimation_kw())
        tpats, tinv, _ = encode_patterns(t.labels)
        Q = tpats.shape[0]
        cell = np.bincount(t.group_codes * Q + tinv, minlength=G * Q).reshape(G, Q)
        aidx = pd.Index(v.annotators, name="annotator")
        params = ProbitParameters(
            annotators=list(v.annotators),
            rates=pd.DataFrame(point_rates[0].T, index=aidx, columns=pd.Index([0, 1], name="class")),
            mu=point_mu[0],
            R=point_R[0],
            correlation_method=self.correlation,
            n_items=pd.Series([int(c.sum()) for c in vcounts], index=pd.Index([0, 1], name="class"), name="n_items"),
        )
        return _Prepared(
            vpats=vpats,
            vcounts=vcounts,
            tpats=tpats,
            cell=cell,
            n_g=n_g,
            groups=t.groups,
            population=pop,
            parameters=params,
        )

    def _check_prior(self, prep: _Prepared, pi_prior: tuple[float, float]) -> PriorConflict:
        """Warn (:class:`PriorConflictWarning`) when the test labels contradict the prevalence prior.

        Uses the point estimates and its own fixed Sobol scrambling, so the
        bootstrap's random stream is untouched.
        """
        J = len(prep.parameters.annotators)
        points = sobol_points(self.n_qmc, max(J - 1, 1), np.random.default_rng(0))
        ll = self.class_log_likelihood(prep.tpats, prep.parameters.mu, prep.parameters.R, points)
        check = prior_conflict(ll[:, 1], ll[:, 0], prep.cell, pi_prior)
        if check.conflict:
            a, b = pi_prior
            warnings.warn(
                f"the test labels contradict the prevalence prior pi ~ Beta({a:g}, {b:g}) of pi='prior': their "
                f"maximum-likelihood prevalence is {check.pi_hat:.3f} (prior mean {a / (a + b):.3f}), and the "
                f"never-updated prior moves the median group's count {np.median(check.shift):.2f} standard "
                f"deviations from what the labels imply, so a 90% interval would cover only about "
                f"{np.median(check.coverage):.2f}.  Use pi='estimate' (recommended unless the prior states real "
                "knowledge of the test population's prevalence), or a prior centred on it (pi_prior=(a, b))",
                PriorConflictWarning,
                stacklevel=user_stacklevel(),
            )
        return check

    def _estimation_kw(self) -> dict[str, Any]:
        return dict(
            correlation=self.correlation, pseudo_count=self.pseudo_count, shrinkage=self.shrinkage, rho_max=self.rho_max
        )

    def _replicate_log_likelihoods(
        self,
        prep: _Prepared,
        n_boot: int,
        resample_validation: bool,
        rng: np.random.Generator,
        progress: bool = False,
    ) -> np.ndarray:
        """Steps 1 and the orthant part of 4: ``log P(y_q | z = k)`` per replicate, (B, Q, 2).

        Without validation resampling the point estimate is used and the
        probabilities are computed once (the result is a broadcast view).
        """
        J = len(prep.parameters.annotators)
        points = sobol_points(self.n_qmc, max(J - 1, 1), rng)
        if not resample_validation:
            ll = self.class_log_likelihood(prep.tpats, prep.parameters.mu, prep.parameters.R, points)
            return np.broadcast_to(ll, (n_boot, *ll.shape))
        weights = [rng.multinomial(c.sum(), c / c.sum(), size=n_boot) for c in prep.vcounts]
        _, mu_b, R_b = estimate_batch(prep.vpats, weights, **self._estimation_kw())
        return np.stack(
            [
                self.class_log_likelihood(prep.tpats, mu_b[b], R_b[b], points)
                for b in tqdm(range(n_boot), disable=not progress, desc="bootstrap", leave=False)
            ]
        )

    def _result(
        self,
        prep: _Prepared,
        counts: np.ndarray,
        expected: np.ndarray,
        realisation: np.ndarray,
        pis: np.ndarray,
        settings: BootstrapSettings,
        prob: float,
    ) -> GroupCounts:
        """Wrap the (B, G) arrays into a :class:`GroupCounts` keyed by the user's groups."""
        n_boot = counts.shape[0]
        rep = pd.RangeIndex(n_boot, name="replicate")
        cols = prep.groups

        def frame(a: np.ndarray) -> pd.DataFrame:
            return pd.DataFrame(a, index=rep, columns=cols)

        return GroupCounts(
            counts=frame(counts.astype(np.int64) if settings.sample_z else counts),
            expected=frame(expected),
            realisation=frame(realisation),
            pi=pd.Series(pis, index=rep, name="pi"),
            n_items=pd.Series(prep.n_g, index=cols, name="n_items"),
            population=None if prep.population is None else pd.Series(prep.population, index=cols, name="population"),
            settings=settings,
            parameters=prep.parameters,
            prob=prob,
        )
