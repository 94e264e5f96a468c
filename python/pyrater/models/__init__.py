"""Model families: specification, priors, simulators and the likelihood kernels every method shares.

One module per family (:mod:`~pyrater.models.dawid_skene`,
:mod:`~pyrater.models.class_conditional`, :mod:`~pyrater.models.homogeneous`,
:mod:`~pyrater.models.one_coin`, :mod:`~pyrater.models.mace`, :mod:`~pyrater.models.ordinal`,
:mod:`~pyrater.models.pooled`, :mod:`~pyrater.models.community`, :mod:`~pyrater.models.hierarchical`,
:mod:`~pyrater.models.item_difficulty`), each registering its class;
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
from .item_difficulty import ItemDifficulty, simulate_item_difficulty
from .one_coin import OneCoinDawidSkene, one_coin_theta, simulate_one_coin
from .ordinal import Ordinal, ordinal_parameters, ordinal_theta, simulate_ordinal
from .mace import MACE, mace_parameters, mace_theta, simulate_mace
from .pooled import PooledDawidSkene, simulate_pooled
from .community import CommunityDawidSkene, simulate_community

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
    "ItemDifficulty",
    "OneCoinDawidSkene",
    "Ordinal",
    "MACE",
    "PooledDawidSkene",
    "CommunityDawidSkene",
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
    "simulate_item_difficulty",
    "simulate_one_coin",
    "simulate_mace",
    "simulate_pooled",
    "simulate_community",
    "class_conditional_theta",
    "one_coin_theta",
    "mace_theta",
    "mace_parameters",
    "simulate_ordinal",
    "ordinal_theta",
    "ordinal_parameters",
]
