"""Model families: specification, priors, simulators and the likelihood kernels every method shares.

One module per family (:mod:`~pyrater.models.dawid_skene`,
:mod:`~pyrater.models.class_conditional`, :mod:`~pyrater.models.homogeneous`,
:mod:`~pyrater.models.one_coin`, :mod:`~pyrater.models.pooled`,
:mod:`~pyrater.models.hierarchical`), each registering its class;
:func:`get_model` finds a family by name.  The likelihood kernels shared by
every method are in :mod:`pyrater.models.kernels`.  Imports only from
:mod:`pyrater.data`.
"""

from __future__ import annotations

from .base import (
    PRIOR_N,
    PRIOR_P,
    Model,
    ModelFamily,
    default_alpha,
    default_beta,
    numeric_array,
)

# isort: off
# the families register in this order (MODEL_NAMES, the CLI's choices)
from .dawid_skene import DawidSkene, simulate_dawid_skene
from .hierarchical import HierarchicalDawidSkene, simulate_hierarchical
from .class_conditional import ClassConditionalDawidSkene, class_conditional_theta, simulate_class_conditional
from .homogeneous import HomogeneousDawidSkene, simulate_homogeneous
from .one_coin import OneCoinDawidSkene, one_coin_theta, simulate_one_coin
from .pooled import PooledDawidSkene, simulate_pooled

# isort: on
from .registry import get_model, model_names
from .simulate import Simulation, simulate

#: Names of the model families, for :func:`pyrater.fit` and :func:`get_model`.
MODEL_NAMES: tuple[str, ...] = model_names()

__all__ = [
    "DawidSkene",
    "HierarchicalDawidSkene",
    "ClassConditionalDawidSkene",
    "HomogeneousDawidSkene",
    "OneCoinDawidSkene",
    "PooledDawidSkene",
    "Model",
    "ModelFamily",
    "get_model",
    "MODEL_NAMES",
    "default_alpha",
    "default_beta",
    "numeric_array",
    "PRIOR_N",
    "PRIOR_P",
    "Simulation",
    "simulate",
    "simulate_dawid_skene",
    "simulate_class_conditional",
    "simulate_hierarchical",
    "simulate_homogeneous",
    "simulate_one_coin",
    "simulate_pooled",
    "class_conditional_theta",
    "one_coin_theta",
]
