"""Item-difficulty rating model (Han, Adiguzel & Carpenter 2024): ratings of heterogeneous items.

For item ``i`` of true class ``z_i`` (code 1 positive, code 0 negative) and rater ``j``::

    P(y_ij = 1 | z_i = 1) = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_sens[j] - difficulty[i]))
    P(y_ij = 0 | z_i = 0) = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_spec[j] - difficulty[i]))

with per-item difficulty, discrimination ``delta_i`` (2PL) and guessing
``gamma_i`` (3PL: right by luck with probability ``gamma_i``, either class),
per-rater sensitivity and specificity on the logit scale.  Parameterisation
and priors follow the authors' Stan programs
(github.com/bob-carpenter/crowdsource-computo): ``logit_sens ~ N(1, 2)``,
``logit_spec ~ N(2, 2)``, ``difficulty ~ N(0, 1)``, ``delta ~ lognormal(0,
0.25)``, ``pi ~ Dirichlet(2, 2)``; guessing ``~ Beta(1, 9)`` here.  Stan
program ``stan/item_difficulty.stan``.  EM (``method="em"``,
:func:`pyrater.em`) runs the family's own generalised EM
(:mod:`pyrater.inference.em.item_difficulty`).

With K >= 3 categories the model is GLAD's multi-class form (Whitehill et
al. 2009) with the same item parameters: rater ``j`` has an accuracy
``logit_accuracy[j, k]`` per true class ``k`` and errs evenly over the other
``K - 1`` categories::

    r = gamma_i + (1 - gamma_i) * inv_logit(delta_i * (logit_accuracy[j, k] - difficulty[i]))
    P(y_ij = k | z_i = k) = r,   P(y_ij = l | z_i = k) = (1 - r) / (K - 1)  (l != k)

At K = 2 this is the binary model, ``logit_accuracy = (logit_spec,
logit_sens)``; the binary family keeps its own names, priors and
non-adversarial constraint.  For K >= 3, ``logit_accuracy[j, k] ~
N(accuracy_prior[k])`` (default ``N(1.5, 2)``), and a non-adversarial rater
is above chance (1 / K) on every class: ``logit_accuracy > -log(K - 1)``.

Per-item parameters make the rating-pattern compression of grouped data
invalid: grouped data is expanded to one unit per item before fitting
(:meth:`ItemDifficulty.prepare_data`).  ``item_effects="marginal"``
integrates the item parameters out by quadrature instead
(:mod:`pyrater.models.item_marginal`, ``stan/item_difficulty_marginal.stan``),
which restores the compression.  The numpy log joint
(:func:`item_log_joint_k`, any K; :func:`item_log_joint` its binary form)
serves the class probabilities, ``log_lik`` and posterior prediction of the fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from scipy.special import log_expit

from ..data.ratings import RatingData
from .base import ModelFamily, numeric_array, positive_array, resolve_alpha
from .registry import register
from .simulate import SeedLike, Simulation, _check_categories, _design, _pi, _start

__all__ = [
    "ItemDifficulty",
    "simulate_item_difficulty",
    "item_log_joint",
    "item_log_joint_k",
    "ability_of",
    "accuracy_theta",
    "expand_to_items",
    "ITEM_PARAMETERS",
]

#: How the item parameters enter: sampled per item, or integrated out by quadrature.
ITEM_EFFECTS = ("per_item", "marginal")
#: ``pyrater.fit(data, "auto")`` by EM tries the family on binary data up to this many ratings
AUTO_EM_MAX_RATINGS = 200_000
#: Per-item parameters of the Stan program, as written in its draws.
ITEM_PARAMETERS = ("difficulty", "discrimination", "guessing")
#: Default priors: the authors' (normal(1, 2) and normal(2, 2) on the logit sensitivity / specificity,
#: normal(0, 1) on the difficulty, lognormal(0, 0.25) on the discrimination, beta(2, 2) on the prevalence);
#: Beta(1, 9) on the guessing (mean 0.1, mode 0)
DEFAULT_PRIORS: dict[str, Any] = {
    "alpha": 2.0,
    "sens_prior": (1.0, 2.0),
    "spec_prior": (2.0, 2.0),
    "difficulty_scale": 1.0,
    "discrimination_scale": 0.25,
    "guessing_prior": (1.0, 9.0),
}


#: K >= 3: the normal prior on every class's logit accuracy, (location, scale)
DEFAULT_ACCURACY_PRIOR = (1.5, 2.0)
#: K >= 3: the simulator's default logit accuracies, N(location, scale) per rater and class
SIMULATED_ACCURACY = (1.75, 0.5)


def _check_k(K: int) -> None:
    if K < 2:
        raise ValueError(f"the item_difficulty model needs K >= 2 categories; got K = {K}")


def chance_logit(K: int) -> float:
    """``logit(1 / K) = -log(K - 1)``: the non-adversarial bound on a logit accuracy at K >= 3 (0 at K = 2)."""
    return -float(np.log(K - 1))


@register
@dataclass(frozen=True)
class ItemDifficulty(ModelFamily):
    """Item-difficulty model of Han, Adiguzel & Carpenter (2024).

    Binary ratings:
    ``P(y=1 | z=1) = gamma_i + (1 - gamma_i) inv_logit(delta_i (logit_sens_j - difficulty_i))``,
    ``P(y=0 | z=0) = gamma_i + (1 - gamma_i) inv_logit(delta_i (logit_spec_j - difficulty_i))``.
    Category code 1 (the second category) is the positive class.  K >= 3
    categories: ``P(y=k | z=k) = gamma_i + (1 - gamma_i) inv_logit(delta_i
    (logit_accuracy_jk - difficulty_i))``, the rest spread evenly over the
    other categories (GLAD's multi-class form; see the module docstring).

    Parameters
    ----------
    discrimination : bool
        Per-item discrimination ``delta_i`` (2PL); False fixes it at 1.
    guessing : bool
        Per-item guessing ``gamma_i`` (3PL); False fixes it at 0.
        ``discrimination=False, guessing=False`` is the 1PL model.
    non_adversarial : bool
        Constrain ``logit_sens[j] + logit_spec[j] > 0`` (sensitivity plus
        specificity above 1 on an item of difficulty 0); at K >= 3, every
        ``logit_accuracy[j, k] > -log(K - 1)`` (above chance on every class).
        False allows adversarial raters (and label switching).
    alpha : array (K,) or scalar, optional
        Dirichlet prior on the prevalence ``pi`` (default 2 for every class).
    sens_prior, spec_prior : (location, scale), optional
        K = 2: normal priors on the logit sensitivity and specificity (default (1, 2) and (2, 2)).
    accuracy_prior : array (2,) or (K, 2), optional
        K >= 3: normal prior (location, scale) on each class's logit accuracy,
        one row for every class or one per class (default (1.5, 2)).
    difficulty_scale : float, optional
        ``difficulty ~ N(0, difficulty_scale)`` (default 1).
    discrimination_scale : float, optional
        ``discrimination ~ lognormal(0, discrimination_scale)`` (default 0.25).
    guessing_prior : (a, b), optional
        Beta prior on the guessing parameters (default (1, 9)).
    item_effects : {"per_item", "marginal"}
        ``"per_item"`` (default): the item parameters are sampled, one set per
        item (``stan/item_difficulty.stan``; grouped data expanded to items).
        ``"marginal"``: they are integrated out of each item's likelihood by a
        fixed quadrature over their priors (:mod:`pyrater.models.item_marginal`,
        ``stan/item_difficulty_marginal.stan``): the same model, with only
        ``pi`` and the rater parameters left to sample, and items with the same
        ratings sharing one likelihood term (grouped data fit as patterns, long
        data compressed to their distinct rows), which makes it fast.

    Examples
    --------
    >>> from pyrater.models import ItemDifficulty
    >>> ItemDifficulty(discrimination=False, guessing=False).variant
    '1PL'
    """

    discrimination: bool = True
    guessing: bool = True
    non_adversarial: bool = True
    alpha: Any = None
    sens_prior: Any = None
    spec_prior: Any = None
    accuracy_prior: Any = None
    difficulty_scale: Any = None
    discrimination_scale: Any = None
    guessing_prior: Any = None
    item_effects: str = "per_item"
    name: ClassVar[str] = "item_difficulty"
    title: ClassVar[str] = "Item difficulty (Han-Adiguzel-Carpenter)"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em")
    #: ``pyrater.fit(data, "auto")`` by these methods tries it when no candidates are named; by EM, see
    #: :meth:`auto_default` (binary data up to :data:`AUTO_EM_MAX_RATINGS` ratings)
    auto_methods: ClassVar[tuple[str, ...] | None] = ("mcmc", "optimize", "pathfinder")
    conjugate: ClassVar[str | None] = None
    item_level: ClassVar[bool] = True
    stan_variants: ClassVar[tuple[str, ...]] = ("item_difficulty_marginal",)

    def __post_init__(self) -> None:
        for key in ("discrimination", "guessing", "non_adversarial"):
            if not isinstance(getattr(self, key), (bool, np.bool_)):
                raise ValueError(f"{key} must be True or False; got {getattr(self, key)!r}")
        if self.item_effects not in ITEM_EFFECTS:
            raise ValueError(f"item_effects must be one of {ITEM_EFFECTS}; got {self.item_effects!r}")
        if self.item_effects == "marginal":  # EM fits the per-item parameters: the marginal variant is Stan's
            object.__setattr__(self, "methods", tuple(m for m in type(self).methods if m != "em"))

    def auto_default(self, method: str, n_categories: int | None = None, n_ratings: int | None = None) -> str | None:
        """By EM, ``fit(data, "auto")`` tries the family on binary data of at most :data:`AUTO_EM_MAX_RATINGS` ratings.

        Binary data are the model of Han, Adiguzel & Carpenter: on the ten
        binary gold sets it predicts held-out items better than Dawid-Skene on
        nine (six against Dawid-Skene with its prior strength tuned) and labels at least as well on average
        (``bench/RESULTS_realdata_item_difficulty.md``).  At K >= 3 its
        GLAD-type form spreads a rater's errors evenly over the other
        categories and labels worse where they are not (relevance grades,
        content ratings): there it is a candidate only when named.  Its EM,
        scored by 10-fold cross-validation, costs about seven Dawid-Skene fits,
        hence the size limit (name it in ``candidates`` to compare it on more).
        """
        if method != "em" or self.marginal:
            return super().auto_default(method, n_categories, n_ratings)
        if n_categories != 2:  # K >= 3, or not known (default_candidates without data)
            return None
        if n_ratings is not None and n_ratings > AUTO_EM_MAX_RATINGS:
            return (
                f"not tried by default above {AUTO_EM_MAX_RATINGS:,} ratings by EM (with 10-fold scoring it costs "
                "about seven Dawid-Skene fits); name it in candidates to compare it"
            )
        return ""

    @property
    def marginal(self) -> bool:
        """True when the item parameters are integrated out (``item_effects="marginal"``)."""
        return self.item_effects == "marginal"

    @property
    def stan_program(self) -> str:
        """``"item_difficulty_marginal"`` for the marginal variant, else ``"item_difficulty"``."""
        return "item_difficulty_marginal" if self.marginal else self.name

    @property
    def pattern_units(self) -> bool:
        """The marginal variant reads rating patterns (the item parameters are integrated out)."""
        return self.marginal

    @property
    def stan_compress(self) -> bool:
        """The marginal variant's Stan fits run on the distinct rows (a costly quadrature per unit)."""
        return self.marginal

    def stan_unit_data(self, data: RatingData) -> dict[str, Any]:
        """The marginal variant's quadrature rule (:func:`~pyrater.models.item_marginal.rule_for`) as Stan data."""
        if not self.marginal:
            return {}
        from .item_marginal import rule_for

        rule = rule_for(self, data.counts, data.n_categories)
        return {
            "Q": rule.n_nodes,
            "node_difficulty": rule.difficulty,
            "node_discrimination": rule.discrimination,
            "node_guessing": rule.guessing,
            "node_log_weight": rule.log_weight,
        }

    @property
    def variant(self) -> str:
        """``"1PL"``, ``"2PL"`` or ``"3PL"`` (``"1PL+guessing"`` for guessing without discrimination)."""
        if self.discrimination:
            return "3PL" if self.guessing else "2PL"
        return "1PL+guessing" if self.guessing else "1PL"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved prior hyperparameters; ``ValueError`` for K < 2 or a bad prior.

        K = 2: ``alpha``, ``sens_prior``, ``spec_prior`` and the item priors;
        K >= 3: ``alpha``, ``accuracy_prior`` (K, 2) and the item priors.
        """
        _check_k(K)
        value = {k: (DEFAULT_PRIORS[k] if getattr(self, k) is None else getattr(self, k)) for k in DEFAULT_PRIORS}
        out = {"alpha": resolve_alpha(value["alpha"], K)}
        if K == 2:
            if self.accuracy_prior is not None:
                raise ValueError(
                    "accuracy_prior is the prior of K >= 3 categories; for binary data give sens_prior and spec_prior"
                )
            for key in ("sens_prior", "spec_prior"):
                arr = numeric_array(key, value[key], [(2,)], "(2,): the normal prior's (location, scale)")
                if arr[1] <= 0:
                    raise ValueError(f"{key} must have a scale (second entry) > 0; got {arr[1]!r}")
                out[key] = arr
        else:
            for key in ("sens_prior", "spec_prior"):
                if getattr(self, key) is not None:
                    raise ValueError(
                        f"{key} is the binary model's prior; with K = {K} categories give accuracy_prior "
                        "(the normal prior on each class's logit accuracy)"
                    )
            given = DEFAULT_ACCURACY_PRIOR if self.accuracy_prior is None else self.accuracy_prior
            arr = numeric_array(
                "accuracy_prior", given, [(2,), (K, 2)], f"(2,) or ({K}, 2): (location, scale) per class"
            )
            arr = np.broadcast_to(arr, (K, 2)).copy()
            if np.any(arr[:, 1] <= 0):
                raise ValueError(f"accuracy_prior must have scales (second column) > 0; got {arr[:, 1]!r}")
            out["accuracy_prior"] = arr
        for key in ("difficulty_scale", "discrimination_scale"):
            out[key] = positive_array(key, value[key], [()], "() (a positive scalar)")
        out["guessing_prior"] = positive_array("guessing_prior", value["guessing_prior"], [(2,)], "(2,): (a, b)")
        return out

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, Any]:
        """The prior and variant entries of the Stan program's data block.

        The program reads ``sens_prior`` / ``spec_prior`` at K = 2 and
        ``accuracy_prior`` (K, 2) at K >= 3; the entries it does not read
        are given their defaults (and an empty (0, 2) ``accuracy_prior``).
        """
        fill = {
            "sens_prior": np.asarray(DEFAULT_PRIORS["sens_prior"], dtype=float),
            "spec_prior": np.asarray(DEFAULT_PRIORS["spec_prior"], dtype=float),
            "accuracy_prior": np.zeros((0, 2)),
        }
        return {
            **fill,
            **{k: np.asarray(v, dtype=float) for k, v in priors.items()},
            "difficulty_scale": float(priors["difficulty_scale"]),
            "discrimination_scale": float(priors["discrimination_scale"]),
            "has_discrimination": int(self.discrimination),
            "has_guessing": int(self.guessing),
            "non_adversarial": int(self.non_adversarial),
        }

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, Any]:
        """Starting values of the rater parameters: raters mostly right (logit 1 to 2)."""
        _check_k(K)
        if K > 2:
            return {"logit_accuracy": rng.uniform(1.0, 2.0, size=(J, K))}
        return {"logit_sens": rng.uniform(1.0, 2.0, size=J), "logit_spec": rng.uniform(1.0, 2.0, size=J)}

    @classmethod
    def from_stan_data(cls, data: dict[str, Any]) -> ItemDifficulty:
        """The variant a Stan data dict selects (its switches; default priors)."""
        return cls(
            discrimination=bool(data["has_discrimination"]),
            guessing=bool(data["has_guessing"]),
            non_adversarial=bool(data["non_adversarial"]),
            item_effects="marginal" if "node_log_weight" in data else "per_item",
        )

    def stan_item_init(self, rng: np.random.Generator, I: int) -> dict[str, np.ndarray]:
        """Starting values of the per-item parameters: near-average items, little guessing (none if marginal)."""
        if self.marginal:
            return {}
        out = {"difficulty": rng.normal(0.0, 0.1, size=I)}
        if self.discrimination:
            out["discrimination"] = np.exp(rng.normal(0.0, 0.1, size=I))
        if self.guessing:
            out["guessing"] = rng.uniform(0.02, 0.1, size=I)
        return out

    def prepare_data(self, data: RatingData) -> RatingData:
        """The data with one unit per item: grouped rating patterns are expanded (per-item parameters).

        The marginal variant keeps the data as they are (patterns share one likelihood term).
        """
        _check_k(data.n_categories)
        return data if self.marginal else expand_to_items(data)


def expand_to_items(data: RatingData) -> RatingData:
    """``data`` itself when its units are items, else its patterns expanded to items ``1 .. n_items``."""
    if not data.is_grouped:
        return data
    return RatingData.from_long(data.to_long(), *data.long_columns, categories=list(data.categories))


def _cells(counts: sp.csr_matrix, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Item, rater, rating code and count of every nonzero (item, rater, rating) cell of ``counts``."""
    c = counts.tocsr()
    item = np.repeat(np.arange(c.shape[0]), np.diff(c.indptr))
    return item, c.indices // K, c.indices % K, np.asarray(c.data, dtype=float)


def item_log_joint(
    counts: sp.csr_matrix,
    log_pi: np.ndarray,
    logit_sens: np.ndarray,
    logit_spec: np.ndarray,
    difficulty: np.ndarray,
    discrimination: np.ndarray | None = None,
    guessing: np.ndarray | None = None,
) -> np.ndarray:
    """``log p(y_i, z_i = k)`` for every draw, item and class of binary data (numpy, log space).

    :func:`item_log_joint_k` at K = 2 with ``ability = (logit_spec, logit_sens)``.

    Parameters
    ----------
    counts : sparse (I, 2 J)
        :attr:`RatingData.counts` of item-level data.
    log_pi : array (S, 2)
    logit_sens, logit_spec : arrays (S, J)
    difficulty : array (S, I)
    discrimination, guessing : arrays (S, I), optional
        Default 1 and 0.

    Returns
    -------
    array, shape (S, I, 2)
    """
    ability = np.stack([logit_spec, logit_sens], -1)
    return item_log_joint_k(counts, 2, log_pi, ability, difficulty, discrimination, guessing)


def accuracy_theta(ability: np.ndarray) -> np.ndarray:
    """Error matrices ``(..., J, K, K)`` on an item of difficulty 0 (discrimination 1, no guessing).

    Row ``k``: ``inv_logit(ability[..., j, k])`` on the diagonal, the rest
    spread evenly over the other ``K - 1`` categories (at K = 2: specificity
    and sensitivity rows).
    """
    ability = np.asarray(ability, dtype=float)
    K = ability.shape[-1]
    right = 1.0 / (1.0 + np.exp(-ability))
    eye = np.eye(K, dtype=bool)
    return np.where(eye, right[..., :, None], ((1.0 - right) / (K - 1))[..., :, None])


def ability_of(values: Any, K: int) -> np.ndarray:
    """Each rater's logit accuracy per true class, ``(..., J, K)``, from a fit's or simulation's parameters.

    At K = 2 it is ``(logit_spec, logit_sens)`` stacked on the last axis (the
    binary model's names); at K >= 3 the ``logit_accuracy`` entry itself.
    """
    if K > 2:
        return np.asarray(values["logit_accuracy"], dtype=float)
    return np.stack([np.asarray(values["logit_spec"], dtype=float), np.asarray(values["logit_sens"], dtype=float)], -1)


def item_log_joint_k(
    counts: sp.csr_matrix,
    K: int,
    log_pi: np.ndarray,
    ability: np.ndarray,
    difficulty: np.ndarray,
    discrimination: np.ndarray | None = None,
    guessing: np.ndarray | None = None,
) -> np.ndarray:
    """``log p(y_i, z_i = k)`` for every draw, item and class, any K (numpy, log space).

    For class ``k`` a rating is right when it is ``k``, with probability
    ``r = gamma + (1 - gamma) inv_logit(delta (ability[j, k] - difficulty))``,
    and each wrong category has ``(1 - r) / (K - 1)``.  At K = 2 it is the
    binary model with ``ability = (logit_spec, logit_sens)`` (:func:`item_log_joint`).

    Parameters
    ----------
    counts : sparse (I, K J)
        :attr:`RatingData.counts` of item-level data.
    K : int
    log_pi : array (S, K)
    ability : array (S, J, K)
        Logit accuracy of each rater on each true class.
    difficulty : array (S, I)
    discrimination, guessing : arrays (S, I), optional
        Default 1 and 0.

    Returns
    -------
    array, shape (S, I, K)
    """
    item, rater, rating, w = _cells(counts, K)
    I = counts.shape[0]
    A = sp.csr_matrix((w, (item, np.arange(item.size))), shape=(I, item.size))
    log_spread = np.log(K - 1.0)
    log1m_g = None if guessing is None else np.log1p(-guessing[:, item])
    out = np.empty((log_pi.shape[0], I, K))
    for k in range(K):
        eta = ability[:, rater, k] - difficulty[:, item]
        if discrimination is not None:
            eta = eta * discrimination[:, item]
        right = rating == k
        miss = log_expit(-eta) if log1m_g is None else log1m_g + log_expit(-eta)  # log P(wrong at all)
        with np.errstate(divide="ignore"):
            hit = log_expit(eta) if log1m_g is None else np.log(-np.expm1(miss))
        lp = np.where(right, hit, miss - log_spread)
        out[:, :, k] = (A @ lp.T).T + log_pi[:, [k]]
    return out


def simulate_item_difficulty(
    n_items: int,
    n_raters: int,
    n_categories: int | None = 2,
    pi: np.ndarray | None = None,
    logit_sens: np.ndarray | None = None,
    logit_spec: np.ndarray | None = None,
    difficulty: np.ndarray | None = None,
    discrimination: np.ndarray | None = None,
    guessing: np.ndarray | None = None,
    raters_per_item: int | None = None,
    logit_accuracy: np.ndarray | None = None,
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    categories: Any = None,
    alpha: np.ndarray | None = None,
    sens_prior: Any = None,
    spec_prior: Any = None,
    accuracy_prior: Any = None,
    difficulty_scale: Any = None,
    discrimination_scale: Any = None,
    guessing_prior: Any = None,
) -> Simulation:
    """Simulate ratings from the item-difficulty model (Han, Adiguzel & Carpenter 2024; K >= 3: GLAD's form).

    Parameters
    ----------
    n_items, n_raters, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene`.
    n_categories : int
        K >= 2 (default 2).
    pi : array (K,), optional
        Prevalence (default Dirichlet(alpha)).
    logit_sens, logit_spec : arrays (J,), optional
        K = 2: rater sensitivity / specificity on the logit scale (default
        ``N(1.5, 0.5)`` and ``N(2, 0.5)``: good raters, whatever the priors).
    logit_accuracy : array (J, K), optional
        K >= 3: each rater's accuracy on each true class, logit scale
        (default ``N(1.75, 0.5)``); a wrong rating is any other category,
        evenly.
    difficulty : array (I,), optional
        Default ``N(0, difficulty_scale)``.
    discrimination : array (I,), optional
        > 0; default ``lognormal(0, discrimination_scale)``.
    guessing : array (I,), optional
        In [0, 1); default ``Beta(guessing_prior)``.
    sens_prior, spec_prior, accuracy_prior, difficulty_scale, discrimination_scale, guessing_prior
        Model priors (so a model object can drive the draws; the rater priors are not used).

    Returns
    -------
    Simulation
        ``theta`` holds each rater's error matrix on an item of difficulty 0
        (discrimination 1, no guessing); ``params`` holds ``logit_accuracy``
        (J, K) (at K = 2 also ``logit_sens`` and ``logit_spec`` (J,), its
        columns 1 and 0), ``difficulty``, ``discrimination``, ``guessing`` (I,).
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = 2 if n_categories is None else int(n_categories)
    _check_k(K)
    _check_categories(categories, K)
    if K == 2 and logit_accuracy is not None:
        raise ValueError("logit_accuracy is for K >= 3 categories; for binary data give logit_sens and logit_spec")
    if K > 2 and (logit_sens is not None or logit_spec is not None):
        raise ValueError(f"logit_sens / logit_spec are the binary model's; with K = {K} give logit_accuracy (J, K)")
    pi = _pi(rng, pi, K, alpha)

    def given(name: str, value: Any, size: int, draw: Any) -> np.ndarray:
        if value is None:
            return draw()
        return numeric_array(name, value, [(size,)], f"({size},)")

    if K == 2:
        sens = given("logit_sens", logit_sens, J, lambda: rng.normal(1.5, 0.5, size=J))
        spec = given("logit_spec", logit_spec, J, lambda: rng.normal(2.0, 0.5, size=J))
        acc = np.stack([spec, sens], -1)
    elif logit_accuracy is None:
        acc = rng.normal(*SIMULATED_ACCURACY, size=(J, K))
    else:
        acc = numeric_array("logit_accuracy", logit_accuracy, [(J, K)], f"({J}, {K})")
    d_scale = float(DEFAULT_PRIORS["difficulty_scale"] if difficulty_scale is None else difficulty_scale)
    s_scale = float(DEFAULT_PRIORS["discrimination_scale"] if discrimination_scale is None else discrimination_scale)
    beta = given("difficulty", difficulty, I, lambda: rng.normal(0.0, d_scale, size=I))
    delta = given("discrimination", discrimination, I, lambda: rng.lognormal(0.0, s_scale, size=I))
    if np.any(delta <= 0):
        raise ValueError("discrimination must be > 0")
    g_prior = np.asarray(DEFAULT_PRIORS["guessing_prior"] if guessing_prior is None else guessing_prior, dtype=float)
    gamma = given("guessing", guessing, I, lambda: rng.beta(g_prior[0], g_prior[1], size=I))
    if np.any((gamma < 0) | (gamma >= 1)):
        raise ValueError("guessing must lie in [0, 1)")
    repeats_ = int(repeats)
    z = rng.choice(K, size=I, p=pi).astype(np.int64)
    item, rater = _design(rng, I, J, raters_per_item, repeats_)
    if K == 2:
        p_pos = gamma[item] + (1 - gamma[item]) / (1 + np.exp(-delta[item] * (sens[rater] - beta[item])))
        p_neg = gamma[item] + (1 - gamma[item]) / (1 + np.exp(-delta[item] * (spec[rater] - beta[item])))
        p_one = np.where(z[item] == 1, p_pos, 1 - p_neg)
        rating = (rng.random(item.size) < p_one).astype(np.int64)
    else:  # right with probability r, else one of the other K - 1 categories, evenly
        zi = z[item]
        r = gamma[item] + (1 - gamma[item]) / (1 + np.exp(-delta[item] * (acc[rater, zi] - beta[item])))
        right = rng.random(item.size) < r
        other = (zi + rng.integers(1, K, size=item.size)) % K
        rating = np.where(right, zi, other).astype(np.int64)
    data = RatingData.from_codes(item, rater, rating, n_categories=K, n_items=I, n_raters=J, categories=categories)
    params = {
        **({"logit_sens": sens, "logit_spec": spec} if K == 2 else {}),
        "logit_accuracy": acc,
        "difficulty": beta,
        "discrimination": delta,
        "guessing": gamma,
    }
    theta = accuracy_theta(acc)
    return Simulation(data=data, z=z, pi=pi, theta=theta, model="item_difficulty", params=params)


ItemDifficulty.simulator = staticmethod(simulate_item_difficulty)
