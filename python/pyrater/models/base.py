"""The model-family base class, prior helpers and rater's default priors.

A model object carries its priors and nothing else; fitting is done by
:func:`pyrater.fit` or :func:`pyrater.em`.  Priors left as ``None`` take
rater's defaults, resolved once the number of categories K and raters J are
known (:meth:`ModelFamily.priors`).  Each family declares what the methods
need from it (the hooks below), so no method dispatches on the family's class.

Default priors (Pullin, Gurrin & Vukcevic 2023)
-----------------------------------------------
``alpha_k = 3``; ``beta[k, k] = N p`` and ``beta[k, k'] = N (1 - p) / (K - 1)``
with ``N = 8`` and ``p = 0.6``; for the class-conditional model
``beta1_k = N p`` and ``beta2_k = N (1 - p)``, and for the one-coin model
the same two numbers as scalars.  These favour raters who are
more often right than wrong, which also breaks label switching.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._stacklevel import user_stacklevel

__all__ = [
    "ModelFamily",
    "Model",
    "default_alpha",
    "default_beta",
    "numeric_array",
    "mode_priors",
    "PRIOR_N",
    "PRIOR_P",
    "PSEUDO_COUNTS",
]

PRIOR_N = 8.0
PRIOR_P = 0.6


def default_alpha(K: int) -> np.ndarray:
    """Rater's default Dirichlet prior on pi: ``alpha_k = 3``, shape (K,)."""
    return np.full(K, 3.0)


def default_beta(K: int, n: float = PRIOR_N, p: float = PRIOR_P) -> np.ndarray:
    """Rater's default Dirichlet prior on each error-matrix row, shape (K, K)."""
    beta = np.full((K, K), n * (1 - p) / (K - 1))
    np.fill_diagonal(beta, n * p)
    return beta


#: the Dirichlet and Beta pseudo-counts among the families' priors (a posterior mode needs them >= 1)
PSEUDO_COUNTS = ("alpha", "beta", "beta1", "beta2", "gamma", "rho_alpha")


def mode_priors(model: Any, K: int, J: int) -> tuple[Any, str | None]:
    """For a posterior mode: the model as it is, or its mode on the log-odds scale when a pseudo-count is below 1.

    Below 1 a Dirichlet or Beta density is unbounded at the edge of the
    simplex and the posterior has no mode there (rater's default
    off-diagonal ``beta``, ``3.2 / (K - 1)``, is below 1 for K >= 5).  On
    the unconstrained (log-odds, softmax) scale, where Stan optimises with
    ``jacobian=True``, the mode exists for every positive pseudo-count:
    the Jacobian of the softmax multiplies the density by the product of
    the probabilities, so that mode is the simplex mode under every
    pseudo-count plus 1 (every probability stays positive).

    Parameters
    ----------
    model : model object
        A family from :mod:`pyrater.models` with its priors.
    K, J : int
        Categories and raters.

    Returns
    -------
    model : model object
        ``model`` itself when every pseudo-count is >= 1, else a copy of it
        with every pseudo-count + 1 (whose simplex mode is ``model``'s
        log-odds mode).
    note : str or None
        None, or a sentence saying which pseudo-counts were below 1 and that
        the mode is on the log-odds scale.
    """
    priors = model.priors(K, J)
    counts = {k: v for k, v in priors.items() if k in PSEUDO_COUNTS and np.size(v)}
    low = {k: float(np.min(v)) for k, v in counts.items() if np.min(v) < 1}
    if not low:
        return model, None
    shifted = {k: np.asarray(v, dtype=float) + (1.0 if k in counts else 0.0) for k, v in priors.items()}
    what = ", ".join(f"{k} (min {v:.3g})" for k, v in low.items())
    return dataclasses.replace(model, **shifted), (
        f"pseudo-counts below 1 ({what}): fitted at its posterior mode on the log-odds scale (every "
        "Dirichlet/Beta pseudo-count + 1)"
    )


def numeric_array(name: str, value: Any, shapes: list[tuple[int, ...]], shape_text: str) -> np.ndarray:
    """``value`` as a finite float array (a copy) of one of ``shapes``; errors name ``name``."""
    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array of shape {shape_text}; got {value!r}") from None
    if arr.shape not in shapes:
        raise ValueError(f"{name} must have shape {shape_text}; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; it contains NaN or infinity")
    return arr


def positive_array(name: str, value: Any, shapes: list[tuple[int, ...]], shape_text: str) -> np.ndarray:
    """:func:`numeric_array` with every entry > 0."""
    arr = numeric_array(name, value, shapes, shape_text)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0; got min {arr.min()!r}")
    return arr


def resolve_alpha(alpha: Any, K: int) -> np.ndarray:
    """The Dirichlet prior on pi, (K,): rater's default when None, a scalar repeated K times."""
    if alpha is None:
        return default_alpha(K)
    if np.ndim(alpha) == 0:
        alpha = np.full(K, float(alpha))
    return positive_array("alpha", alpha, [(K,)], f"(K,) = ({K},)")


def diagonal_heavy_rows(rng: np.random.Generator, shape: tuple[int, ...], K: int) -> np.ndarray:
    """Random error-matrix rows (..., K, K) with 0.6-0.85 on the diagonal (starting values)."""
    diag = rng.uniform(0.6, 0.85, size=shape + (K,))
    off = rng.dirichlet(np.full(K - 1, 20.0), size=shape + (K,))  # (..., K, K-1)
    rows = np.empty(shape + (K, K))
    eye = np.eye(K, dtype=bool)
    rows[..., eye] = diag
    rows[..., ~eye] = (off * (1.0 - diag)[..., None]).reshape(shape + (K * (K - 1),))
    return rows / rows.sum(axis=-1, keepdims=True)


def interior(rows: Any) -> np.ndarray:
    """Probability rows (last axis) moved off the simplex boundary (Stan needs starts inside it)."""
    rows = np.clip(np.asarray(rows, dtype=float), 1e-6, None)
    return rows / rows.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class ModelFamily:
    """Base class of the model families: priors, and what each method needs from a family.

    Class attributes
    ----------------
    name : str
        The name for :func:`pyrater.fit` and :func:`pyrater.get_model`;
        also the name of the family's Stan program (``stan/<name>.stan``).
    title : str
        Readable name.
    methods : tuple of str
        The values of ``pyrater.fit(method=...)`` that fit this family.
    conjugate : str or None
        The conjugate structure EM and the Gibbs sampler use
        (``"dawid_skene"``, ``"homogeneous"``, ``"class_conditional"``, ``"one_coin"``), or
        None when the family has no closed-form conditional updates.
    simulator : callable
        ``simulator(n_items, n_raters, n_categories, ..., seed=...)``, a
        :class:`~pyrater.Simulation` from the family (set by its module).
    item_level : bool
        The family has per-item parameters (item_difficulty).
    k_params : tuple of str
        The simulator's arguments whose last axis has length K (what
        :func:`pyrater.simulate` reads K from when ``n_categories`` is not given).
    mode_free_priors : tuple of str
        Priors exempt from the rule that a posterior mode needs every
        hyperparameter >= 1 (e.g. a Gamma rate: any positive value keeps the mode).
    auto_methods : tuple of str or None
        The methods by which ``pyrater.fit(data, "auto")`` tries the family
        when no candidates are named (None: all of ``methods``); a family
        whose estimate by some method is unreliable leaves it out.  A family
        whose default candidacy depends on the data overrides
        :meth:`auto_default` instead.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder")
    conjugate: ClassVar[str | None] = None
    simulator: ClassVar[Callable[..., Any]]
    #: True for a family with per-item parameters (item_difficulty): no per-rater error matrices give its
    #: likelihood, and grouped data is expanded to items (:meth:`prepare_data`)
    item_level: ClassVar[bool] = False
    k_params: ClassVar[tuple[str, ...]] = ("pi", "theta", "p", "mu", "categories")
    mode_free_priors: ClassVar[tuple[str, ...]] = ()
    auto_methods: ClassVar[tuple[str, ...] | None] = None
    #: why a method the family has but :attr:`auto_methods` leaves out is not tried (``{method}`` is filled
    #: in; shown in ``fit.model_choice.skipped``); empty: not said
    auto_left_out: ClassVar[str] = ""
    #: Names of further Stan programs (``stan/<name>.stan``) that fit variants of the family
    #: (item_difficulty: ``item_difficulty_marginal``); a model object picks its own with :attr:`stan_program`
    stan_variants: ClassVar[tuple[str, ...]] = ()

    def auto_default(self, method: str, n_categories: int | None = None, n_ratings: int | None = None) -> str | None:
        """Whether ``pyrater.fit(data, "auto", method=method)`` tries the family when no candidates are named.

        Parameters
        ----------
        method : str
            The method auto fits its candidates by.
        n_categories, n_ratings : int, optional
            The data's number of categories and of ratings (None: not known,
            e.g. :func:`pyrater.checking.choose.default_candidates` without data).

        Returns
        -------
        str or None
            ``""``: a default candidate; None: not one (the method is not in
            :attr:`auto_methods` and the family gives no :attr:`auto_left_out`);
            any other text: not one for this method or these data, and why
            (shown in ``fit.model_choice.skipped``).
        """
        if method not in self.methods:
            return None
        if self.auto_methods is None or method in self.auto_methods:
            return ""
        return self.auto_left_out.format(method=method) or None

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved prior hyperparameters for K categories and J raters."""
        raise NotImplementedError

    # ------------------------------------------------------------- Stan hooks
    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, np.ndarray]:
        """The prior entries of the Stan program's data block (float arrays)."""
        return {"alpha": np.asarray(priors["alpha"], dtype=float)}

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, np.ndarray]:
        """Diagonal-heavy starting values of the Stan program's parameters besides ``pi``."""
        raise NotImplementedError

    @classmethod
    def from_stan_data(cls, data: dict[str, Any]) -> ModelFamily:
        """The model whose program variant a Stan data dict selects (default: the default model)."""
        return cls()

    def stan_generated_values(self, K: int, J: int) -> int:
        """Numbers the Stan program writes per draw in generated quantities besides ``log_lik`` (default 0)."""
        return 0

    @property
    def stan_program(self) -> str:
        """The Stan program that fits this model object (default: the family's, ``stan/<name>.stan``)."""
        return self.name

    def stan_unit_data(self, data: Any) -> dict[str, Any]:
        """Entries of the Stan data that depend on the data themselves, besides the layout (default none)."""
        return {}

    @property
    def pattern_units(self) -> bool:
        """Whether units with the same ratings may share one likelihood term in Stan (default: True).

        Every Dawid-Skene-type family reads grouped data as patterns with tallies; a family with per-item
        parameters does not (item_difficulty, but its marginal variant does).
        """
        return not self.item_level

    @property
    def stan_compress(self) -> bool:
        """Whether the Stan fits run on the distinct rows of the data (default: False).

        Where True (the marginal item-difficulty model, whose likelihood per unit is costly), Stan reads
        each distinct row of the count matrix once, weighted by the units that share it, and its per-unit
        ``log_lik`` is mapped back to every unit (:func:`pyrater.inference.stan.run.compress_stan_data`).
        """
        return False

    def stan_item_init(self, rng: np.random.Generator, I: int) -> dict[str, np.ndarray]:
        """Starting values of per-item parameters for I items (none for the Dawid-Skene-type families)."""
        return {}

    def prepare_data(self, data: Any) -> Any:
        """The data as the family's Stan program reads them (default: unchanged; see item_difficulty)."""
        return data

    def check_data(self, data: Any) -> None:
        """Warn about what ``data`` cannot tell the family, before a fit by any method.

        Every family learns the raters' errors from ratings of the same item
        that agree or disagree: when no item has two ratings the error
        matrices and the classes follow the priors alone, which is said.  The
        ordinal family also reads the categories as an ordered scale and warns
        when that order is only the alphabetical sort of text labels
        (:meth:`pyrater.RatingData.check_scale_order`).
        """
        # more rating rows than units: some unit has two (no pass over the ratings)
        if (
            data.n_ratings
            and data.unit.size <= data.n_units
            and np.bincount(data.unit, minlength=data.n_units).max() < 2
        ):
            warnings.warn(
                f"no item has more than one rating ({data.n_ratings_total} ratings of {data.n_items} items by "
                f"{data.n_raters} rater{'s' if data.n_raters != 1 else ''}): the data cannot show how the raters "
                "err, so the error matrices and the classes follow the priors; each item needs two or more "
                "ratings (by different raters, or repeated) for a rating model to learn from",
                UserWarning,
                stacklevel=user_stacklevel(),
            )

    def with_prior_scale(self, scale: float, K: int) -> ModelFamily | None:
        """The family with its default error-matrix prior's pseudo-counts times ``scale``, or None.

        ``pyrater.fit(data, "auto")`` (method ``"em"``) tries a few prior
        strengths of a family that offers them and keeps another than the
        default only where it predicts held-out items clearly better
        (:mod:`pyrater.checking.choose`).  None (the default): the family
        offers no such scale, or the user set the prior.
        """
        return None

    def mode_start(self, pi: np.ndarray, theta: np.ndarray) -> dict[str, np.ndarray] | None:
        """Stan parameters at a mode found by EM (``pi`` (K,), ``theta`` (J, K, K)), or None."""
        return None

    # ------------------------------------------------- EM hooks of a family without a conjugate M-step
    # (``conjugate`` None and "em" in ``methods``: :func:`pyrater.em` maximises over a flat vector x
    # of the family's rater parameters; see :class:`pyrater.models.Ordinal`)
    def em_start(self, K: int, J: int) -> np.ndarray:
        """EM's starting parameters x (a flat float array)."""
        raise NotImplementedError

    def em_m_step(self, x: np.ndarray, N: np.ndarray, priors: dict | None) -> np.ndarray:
        """New x maximising ``sum N[j, k, l] log theta[j, k, l]`` (+ log prior; None: ML), from ``x``."""
        raise NotImplementedError

    def em_theta(self, x: np.ndarray, K: int) -> np.ndarray:
        """Error matrices (J, K, K) of parameters x."""
        raise NotImplementedError

    def em_log_prior(self, x: np.ndarray, priors: dict) -> float:
        """Log prior density of x (every constant included)."""
        raise NotImplementedError

    def canonical_params(self, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A simulation's own parameters (``Simulation.params``) in the labelling the fits report.

        Families whose fits relabel exchangeable components (the community model sorts its
        communities) put a simulation's truth in the same order, so that truth and estimates
        compare (simulation-based calibration, recovery checks).  Default: unchanged.
        """
        return params

    def em_params(self, x: np.ndarray) -> dict[str, np.ndarray] | None:
        """The family's own parameters at x, named as in its Stan program, for EM fits (default none)."""
        return None

    def __str__(self) -> str:
        fields = ", ".join(
            f"{k}={'default' if v is None else np.array2string(np.asarray(v), precision=3)}"
            for k, v in self.__dict__.items()
        )
        return f"{self.title}({fields})"


#: Annotation for any model object.
Model = ModelFamily
