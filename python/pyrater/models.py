"""Model specifications: the Dawid-Skene family and their priors.

A model object carries its priors and nothing else; fitting is done by
:func:`pyrater.fit` (Stan) or :func:`pyrater.em` (numpy).  Priors left as
``None`` take rater's defaults, resolved once the number of categories K and
raters J are known (:meth:`priors`).

Default priors (Pullin, Gurrin & Vukcevic 2023)
-----------------------------------------------
``alpha_k = 3``; ``beta[k, k] = N p`` and ``beta[k, k'] = N (1 - p) / (K - 1)``
with ``N = 8`` and ``p = 0.6``; for the class-conditional model
``beta1_k = N p`` and ``beta2_k = N (1 - p)``.  These favour raters who are
more often right than wrong, which also breaks label switching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Union

import numpy as np

__all__ = [
    "DawidSkene",
    "HierarchicalDawidSkene",
    "ClassConditionalDawidSkene",
    "HomogeneousDawidSkene",
    "Model",
    "get_model",
    "MODEL_NAMES",
    "default_alpha",
    "default_beta",
]

PRIOR_N = 8.0
PRIOR_P = 0.6


def default_alpha(K: int) -> np.ndarray:
    """rater's default Dirichlet prior on pi: ``alpha_k = 3``, shape (K,)."""
    return np.full(K, 3.0)


def default_beta(K: int, n: float = PRIOR_N, p: float = PRIOR_P) -> np.ndarray:
    """rater's default Dirichlet prior on each error-matrix row, shape (K, K)."""
    beta = np.full((K, K), n * (1 - p) / (K - 1))
    np.fill_diagonal(beta, n * p)
    return beta


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


def _positive(name: str, value: Any, shapes: list[tuple[int, ...]], shape_text: str) -> np.ndarray:
    arr = numeric_array(name, value, shapes, shape_text)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be > 0; got min {arr.min()!r}")
    return arr


def _alpha(alpha: Any, K: int) -> np.ndarray:
    if alpha is None:
        return default_alpha(K)
    if np.ndim(alpha) == 0:
        alpha = np.full(K, float(alpha))
    return _positive("alpha", alpha, [(K,)], f"(K,) = ({K},)")


@dataclass(frozen=True)
class _Base:
    name: ClassVar[str]
    title: ClassVar[str]

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        """Resolved prior hyperparameters for K categories and J raters."""
        raise NotImplementedError

    def theta_prior_rows(self, K: int, J: int) -> np.ndarray:
        """Dirichlet-equivalent pseudo-counts on each error-matrix row, (J, K, K).

        Used by the EM's MAP step; raises for models without such a prior.
        """
        raise NotImplementedError(f"{self.title} has no Dirichlet prior on theta rows")

    def __str__(self) -> str:
        fields = ", ".join(
            f"{k}={'default' if v is None else np.array2string(np.asarray(v), precision=3)}"
            for k, v in self.__dict__.items()
        )
        return f"{self.title}({fields})"


@dataclass(frozen=True)
class DawidSkene(_Base):
    """Dawid-Skene model: one full K x K error matrix per rater.

    ``pi ~ Dirichlet(alpha)``, ``theta[j, k] ~ Dirichlet(beta[j, k])``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
    beta : array (K, K) for every rater, or (J, K, K) per rater, optional
    """

    alpha: Any = None
    beta: Any = None
    name: ClassVar[str] = "dawid_skene"
    title: ClassVar[str] = "Dawid-Skene"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        beta = default_beta(K) if self.beta is None else self.beta
        beta = _positive("beta", beta, [(K, K), (J, K, K)], f"(K, K) = ({K}, {K}) or (J, K, K) = ({J}, {K}, {K})")
        if beta.ndim == 2:
            beta = np.broadcast_to(beta, (J, K, K)).copy()
        return {"alpha": _alpha(self.alpha, K), "beta": beta}

    def theta_prior_rows(self, K: int, J: int) -> np.ndarray:
        return self.priors(K, J)["beta"]


@dataclass(frozen=True)
class HomogeneousDawidSkene(_Base):
    """Homogeneous Dawid-Skene: one error matrix shared by all raters.

    ``pi ~ Dirichlet(alpha)``, ``theta[k] ~ Dirichlet(beta[k])``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
    beta : array (K, K), optional
    """

    alpha: Any = None
    beta: Any = None
    name: ClassVar[str] = "homogeneous"
    title: ClassVar[str] = "Homogeneous Dawid-Skene"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        beta = default_beta(K) if self.beta is None else self.beta
        beta = _positive("beta", beta, [(K, K)], f"(K, K) = ({K}, {K})")
        return {"alpha": _alpha(self.alpha, K), "beta": beta}

    def theta_prior_rows(self, K: int, J: int) -> np.ndarray:
        return np.broadcast_to(self.priors(K, J)["beta"], (J, K, K)).copy()


@dataclass(frozen=True)
class ClassConditionalDawidSkene(_Base):
    """Class-conditional Dawid-Skene: one accuracy per rater and true class.

    ``theta[j, k, k] = p[j, k]``, ``theta[j, k, k'] = (1 - p[j, k]) / (K - 1)``,
    ``p[j, k] ~ Beta(beta1[k], beta2[k])``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
    beta1, beta2 : array (K,) or scalar, optional
    """

    alpha: Any = None
    beta1: Any = None
    beta2: Any = None
    name: ClassVar[str] = "class_conditional"
    title: ClassVar[str] = "Class-conditional Dawid-Skene"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        out = {"alpha": _alpha(self.alpha, K)}
        for key, default in (("beta1", PRIOR_N * PRIOR_P), ("beta2", PRIOR_N * (1 - PRIOR_P))):
            value = getattr(self, key)
            value = np.full(K, default) if value is None else value
            if np.ndim(value) == 0:
                value = np.full(K, float(value))
            out[key] = _positive(key, value, [(K,)], f"(K,) = ({K},)")
        return out


@dataclass(frozen=True)
class HierarchicalDawidSkene(_Base):
    """Hierarchical Dawid-Skene (Paun et al. 2018, as in rater).

    ``theta[j, k] = softmax(mu[k] + sigma[k] * raw[j, k])``, ``raw ~ N(0, 1)``,
    ``mu[k, k] ~ N(2, 1)``, ``mu[k, k'] ~ N(0, 1)``, ``sigma ~ half-N(0, 1)``,
    ``pi ~ Dirichlet(alpha)``.

    Parameters
    ----------
    alpha : array (K,) or scalar, optional
    """

    alpha: Any = None
    name: ClassVar[str] = "hierarchical"
    title: ClassVar[str] = "Hierarchical Dawid-Skene"

    def priors(self, K: int, J: int) -> dict[str, np.ndarray]:
        return {"alpha": _alpha(self.alpha, K)}


Model = Union[DawidSkene, HierarchicalDawidSkene, ClassConditionalDawidSkene, HomogeneousDawidSkene]

_MODELS: dict[str, type] = {
    cls.name: cls
    for cls in (DawidSkene, HierarchicalDawidSkene, ClassConditionalDawidSkene, HomogeneousDawidSkene)
}
MODEL_NAMES: tuple[str, ...] = tuple(_MODELS)


def get_model(model: "str | Model") -> Model:
    """A model object from a name (``"dawid_skene"``, ``"hierarchical"``,
    ``"class_conditional"``, ``"homogeneous"``) or a model object."""
    if isinstance(model, _Base):
        return model
    if isinstance(model, str) and model in _MODELS:
        return _MODELS[model]()
    raise ValueError(f"unknown model {model!r}; choose one of {MODEL_NAMES} or pass a model object")
