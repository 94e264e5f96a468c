"""Item-difficulty rating model (Han, Adiguzel & Carpenter 2024): binary ratings of heterogeneous items.

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
program ``stan/item_difficulty.stan``; binary only.  EM (``method="em"``,
:func:`pyrater.em`) runs the family's own generalised EM
(:mod:`pyrater.inference.em.item_difficulty`).

Per-item parameters make the rating-pattern compression of grouped data
invalid: grouped data is expanded to one unit per item before fitting
(:meth:`ItemDifficulty.prepare_data`).  ``item_effects="marginal"``
integrates the item parameters out by quadrature instead
(:mod:`pyrater.models.item_marginal`, ``stan/item_difficulty_marginal.stan``),
which restores the compression.  The numpy log joint
(:func:`item_log_joint`) serves the class probabilities, ``log_lik`` and
posterior prediction of the fits.
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

__all__ = ["ItemDifficulty", "simulate_item_difficulty", "item_log_joint", "expand_to_items", "ITEM_PARAMETERS"]

#: How the item parameters enter: sampled per item, or integrated out by quadrature.
ITEM_EFFECTS = ("per_item", "marginal")
#: Per-item parameters of the Stan program, as written in its draws.
ITEM_PARAMETERS = ("difficulty", "discrimination", "guessing")
#: Default priors: the authors' (normal(1, 2) and normal(2, 2) on the logit sensitivity / specificity,
#: normal(0, 1) on the difficulty, lognormal(0, 0.25) on the discrimination, beta(2, 2) on the prevalence);
#: Beta(1, 9) on the guessing (mean 0.1, mode 0)
DEFAULT_PRIORS: dict[str, Any] = {
    "alpha": (2.0, 2.0),
    "sens_prior": (1.0, 2.0),
    "spec_prior": (2.0, 2.0),
    "difficulty_scale": 1.0,
    "discrimination_scale": 0.25,
    "guessing_prior": (1.0, 9.0),
}


def _binary_only(K: int) -> None:
    if K != 2:
        raise ValueError(
            f"the item_difficulty model is binary only in this version (K = 2 categories); the data have K = {K}"
        )


@register
@dataclass(frozen=True)
class ItemDifficulty(ModelFamily):
    """Item-difficulty model of Han, Adiguzel & Carpenter (2024), binary ratings.

    ``P(y=1 | z=1) = gamma_i + (1 - gamma_i) inv_logit(delta_i (logit_sens_j - difficulty_i))``,
    ``P(y=0 | z=0) = gamma_i + (1 - gamma_i) inv_logit(delta_i (logit_spec_j - difficulty_i))``.
    Category code 1 (the second category) is the positive class.

    Parameters
    ----------
    discrimination : bool
        Per-item discrimination ``delta_i`` (2PL); False fixes it at 1.
    guessing : bool
        Per-item guessing ``gamma_i`` (3PL); False fixes it at 0.
        ``discrimination=False, guessing=False`` is the 1PL model.
    non_adversarial : bool
        Constrain ``logit_sens[j] + logit_spec[j] > 0`` (sensitivity plus
        specificity above 1 on an item of difficulty 0); False allows
        adversarial raters (and label switching).
    alpha : array (2,) or scalar, optional
        Dirichlet prior on the prevalence ``pi`` (default (2, 2)).
    sens_prior, spec_prior : (location, scale), optional
        Normal priors on the logit sensitivity and specificity (default (1, 2) and (2, 2)).
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
    >>> ItemDifficulty(discrimination=False, guessing=False).variant
    '1PL'
    """

    discrimination: bool = True
    guessing: bool = True
    non_adversarial: bool = True
    alpha: Any = None
    sens_prior: Any = None
    spec_prior: Any = None
    difficulty_scale: Any = None
    discrimination_scale: Any = None
    guessing_prior: Any = None
    item_effects: str = "per_item"
    name: ClassVar[str] = "item_difficulty"
    title: ClassVar[str] = "Item difficulty (Han-Adiguzel-Carpenter)"
    methods: ClassVar[tuple[str, ...]] = ("mcmc", "optimize", "pathfinder", "em")
    #: ``pyrater.fit(data, "auto")`` (EM, compared by K-fold) tries it only when named as a candidate
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

        rule = rule_for(self, data.counts)
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
        """Resolved prior hyperparameters; ``ValueError`` for K != 2 or a bad prior."""
        _binary_only(K)
        value = {k: (DEFAULT_PRIORS[k] if getattr(self, k) is None else getattr(self, k)) for k in DEFAULT_PRIORS}
        out = {"alpha": resolve_alpha(value["alpha"], K)}
        for key in ("sens_prior", "spec_prior"):
            arr = numeric_array(key, value[key], [(2,)], "(2,): the normal prior's (location, scale)")
            if arr[1] <= 0:
                raise ValueError(f"{key} must have a scale (second entry) > 0; got {arr[1]!r}")
            out[key] = arr
        for key in ("difficulty_scale", "discrimination_scale"):
            out[key] = positive_array(key, value[key], [()], "() (a positive scalar)")
        out["guessing_prior"] = positive_array("guessing_prior", value["guessing_prior"], [(2,)], "(2,): (a, b)")
        return out

    def stan_priors(self, priors: dict[str, np.ndarray], K: int, J: int) -> dict[str, Any]:
        """The prior and variant entries of the Stan program's data block."""
        return {
            **{k: np.asarray(v, dtype=float) for k, v in priors.items()},
            "difficulty_scale": float(priors["difficulty_scale"]),
            "discrimination_scale": float(priors["discrimination_scale"]),
            "has_discrimination": int(self.discrimination),
            "has_guessing": int(self.guessing),
            "non_adversarial": int(self.non_adversarial),
        }

    def stan_init(self, rng: np.random.Generator, K: int, J: int) -> dict[str, Any]:
        """Starting values of the rater parameters: raters mostly right (logit 1 to 2)."""
        _binary_only(K)
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
        _binary_only(data.n_categories)
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
    """``log p(y_i, z_i = k)`` for every draw, item and class (numpy, log space).

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
    item, rater, rating, w = _cells(counts, 2)
    I = counts.shape[0]
    eta_pos = logit_sens[:, rater] - difficulty[:, item]
    eta_neg = logit_spec[:, rater] - difficulty[:, item]
    if discrimination is not None:
        eta_pos = eta_pos * discrimination[:, item]
        eta_neg = eta_neg * discrimination[:, item]
    y = rating == 1
    sign = np.where(y, 1.0, -1.0)
    if guessing is None:
        lp_pos = log_expit(sign * eta_pos)
        lp_neg = log_expit(-sign * eta_neg)
    else:
        # wrong: log((1 - g)(1 - p)); right: log1m_exp of that
        log1m_g = np.log1p(-guessing[:, item])
        miss_pos = log1m_g + log_expit(-eta_pos)  # log P(y = 0 | positive)
        miss_neg = log1m_g + log_expit(-eta_neg)  # log P(y = 1 | negative)
        with np.errstate(divide="ignore"):
            lp_pos = np.where(y, np.log(-np.expm1(miss_pos)), miss_pos)
            lp_neg = np.where(y, miss_neg, np.log(-np.expm1(miss_neg)))
    # per-item sums of count x log probability: one sparse product per class
    A = sp.csr_matrix((w, (item, np.arange(item.size))), shape=(I, item.size))
    out = np.empty((log_pi.shape[0], I, 2))
    out[:, :, 0] = (A @ lp_neg.T).T + log_pi[:, [0]]
    out[:, :, 1] = (A @ lp_pos.T).T + log_pi[:, [1]]
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
    repeats: int = 1,
    seed: SeedLike = None,
    *,
    categories: Any = None,
    alpha: np.ndarray | None = None,
    sens_prior: Any = None,
    spec_prior: Any = None,
    difficulty_scale: Any = None,
    discrimination_scale: Any = None,
    guessing_prior: Any = None,
) -> Simulation:
    """Simulate binary ratings from the item-difficulty model (Han, Adiguzel & Carpenter 2024).

    Parameters
    ----------
    n_items, n_raters, raters_per_item, repeats, seed, categories, alpha
        As in :func:`simulate_dawid_skene`.
    n_categories : int
        Must be 2 (binary only in this version).
    pi : array (2,), optional
        Prevalence (default Dirichlet(alpha)).
    logit_sens, logit_spec : arrays (J,), optional
        Rater sensitivity / specificity on the logit scale (default
        ``N(1.5, 0.5)`` and ``N(2, 0.5)``: good raters, whatever the priors).
    difficulty : array (I,), optional
        Default ``N(0, difficulty_scale)``.
    discrimination : array (I,), optional
        > 0; default ``lognormal(0, discrimination_scale)``.
    guessing : array (I,), optional
        In [0, 1); default ``Beta(guessing_prior)``.
    sens_prior, spec_prior, difficulty_scale, discrimination_scale, guessing_prior
        Model priors (so a model object can drive the draws; the rater priors are not used).

    Returns
    -------
    Simulation
        ``theta`` holds each rater's error matrix on an item of difficulty 0
        (discrimination 1, no guessing); ``params`` holds ``logit_sens``,
        ``logit_spec`` (J,), ``difficulty``, ``discrimination``, ``guessing`` (I,).
    """
    I, J, rng = _start(n_items, n_raters, raters_per_item, repeats, seed)
    K = 2 if n_categories is None else int(n_categories)
    _binary_only(K)
    _check_categories(categories, K)
    pi = _pi(rng, pi, K, alpha)

    def given(name: str, value: Any, size: int, draw: Any) -> np.ndarray:
        if value is None:
            return draw()
        return numeric_array(name, value, [(size,)], f"({size},)")

    sens = given("logit_sens", logit_sens, J, lambda: rng.normal(1.5, 0.5, size=J))
    spec = given("logit_spec", logit_spec, J, lambda: rng.normal(2.0, 0.5, size=J))
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
    p_pos = gamma[item] + (1 - gamma[item]) / (1 + np.exp(-delta[item] * (sens[rater] - beta[item])))
    p_neg = gamma[item] + (1 - gamma[item]) / (1 + np.exp(-delta[item] * (spec[rater] - beta[item])))
    p_one = np.where(z[item] == 1, p_pos, 1 - p_neg)
    rating = (rng.random(item.size) < p_one).astype(np.int64)
    data = RatingData.from_codes(item, rater, rating, n_categories=K, n_items=I, n_raters=J, categories=categories)
    se, sp_ = 1 / (1 + np.exp(-sens)), 1 / (1 + np.exp(-spec))
    theta = np.stack([np.stack([sp_, 1 - sp_], -1), np.stack([1 - se, se], -1)], axis=1)
    params = {
        "logit_sens": sens,
        "logit_spec": spec,
        "difficulty": beta,
        "discrimination": delta,
        "guessing": gamma,
    }
    return Simulation(data=data, z=z, pi=pi, theta=theta, model="item_difficulty", params=params)


ItemDifficulty.simulator = staticmethod(simulate_item_difficulty)
