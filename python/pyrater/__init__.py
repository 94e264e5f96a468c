"""pyrater: statistical analysis of repeated categorical ratings.

Infer each item's true class with honest uncertainty, each rater's error
matrix and the prevalence of each class, from ratings in any design.

Main entry points
-----------------
RatingData, as_rating_data
    long / wide / grouped rating tables.
fit
    Every model and method: Stan (MCMC, optimisation, Pathfinder), EM, Gibbs.
em
    Maximum-likelihood / MAP EM.
simulate
    Simulated data with known truth.
loo, kfold, waic, compare, posterior_predictive_check, calibrate, score
    Checking, comparing and calibrating fits.
sbc
    Simulation-based calibration of a model and its sampler.

The package is organised by concept (see ARCHITECTURE.md): ``data`` ->
``models`` -> ``fits`` -> ``inference`` -> ``checking`` -> :func:`fit` and the
command line.  Names are imported on first use, so ``import pyrater`` (and
``pyrater --help``) stays fast.
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

from . import _deprecated
from ._version import __version__

_deprecated.install()

#: public name -> module that defines it
_PUBLIC: dict[str, str] = {
    # data
    "RatingData": "pyrater.data.ratings",
    "RatingDataError": "pyrater.data.ratings",
    "as_rating_data": "pyrater.data.ratings",
    "UnratedItemsWarning": "pyrater.data.ratings",
    "DistributedRatingData": "pyrater.data.distributed",
    # models
    "DawidSkene": "pyrater.models",
    "HierarchicalDawidSkene": "pyrater.models",
    "ClassConditionalDawidSkene": "pyrater.models",
    "HomogeneousDawidSkene": "pyrater.models",
    "ItemDifficulty": "pyrater.models",
    "OneCoinDawidSkene": "pyrater.models",
    "Ordinal": "pyrater.models",
    "MACE": "pyrater.models",
    "PooledDawidSkene": "pyrater.models",
    "CommunityDawidSkene": "pyrater.models",
    "get_model": "pyrater.models",
    "simulate": "pyrater.models",
    "simulate_dawid_skene": "pyrater.models",
    "simulate_class_conditional": "pyrater.models",
    "simulate_hierarchical": "pyrater.models",
    "simulate_homogeneous": "pyrater.models",
    "simulate_item_difficulty": "pyrater.models",
    "simulate_one_coin": "pyrater.models",
    "simulate_ordinal": "pyrater.models",
    "simulate_mace": "pyrater.models",
    "simulate_pooled": "pyrater.models",
    "simulate_community": "pyrater.models",
    "Simulation": "pyrater.models",
    # fits
    "Fit": "pyrater.fits.base",
    "FitSummary": "pyrater.fits.base",
    "load": "pyrater.fits.base",
    "FitFileError": "pyrater.fits.fitfile",
    "EMFit": "pyrater.fits.em",
    # inference
    "fit": "pyrater.fitting",
    "em": "pyrater.inference.em.algorithm",
    "EMConvergenceWarning": "pyrater.inference.em.convergence",
    # checking
    "loo": "pyrater.checking.compare",
    "kfold": "pyrater.checking.kfold",
    "waic": "pyrater.checking.compare",
    "compare": "pyrater.checking.compare",
    "ELPD": "pyrater.checking.compare",
    "posterior_predict": "pyrater.checking.predict",
    "posterior_predictive_check": "pyrater.checking.predict",
    "PPCResult": "pyrater.checking.predict",
    "PPCResults": "pyrater.checking.predict",
    "calibrate": "pyrater.checking.calibration",
    "CalibrationResult": "pyrater.checking.calibration",
    "majority_vote": "pyrater.checking.scoring",
    "score": "pyrater.checking.scoring",
    "sbc": "pyrater.fitting",
    "SBCResult": "pyrater.checking.sbc",
    # decisions
    "agreement": "pyrater.decisions",
    "AgreementResult": "pyrater.decisions",
    "model_agreement": "pyrater.decisions",
    "ModelAgreement": "pyrater.decisions",
    "next_ratings": "pyrater.decisions",
    # contrib
    "binomial_mixture_em": "pyrater.contrib.mixture",
}
#: public submodules reachable as attributes
_SUBMODULES = ("data", "models", "fits", "inference", "checking", "decisions", "contrib", "plots", "datasets")
#: attributes of pyrater 0.1 that now live elsewhere (deprecated)
_OLD_ATTRIBUTES = {
    "kernel": "pyrater.kernel",
    "calibration": "pyrater.calibration",
    "evaluate": "pyrater.evaluate",
    "lcm": "pyrater.lcm",
    "probit": "pyrater.probit",
}

__all__ = [
    "AgreementResult",
    "CalibrationResult",
    "ClassConditionalDawidSkene",
    "DawidSkene",
    "DistributedRatingData",
    "ELPD",
    "EMConvergenceWarning",
    "EMFit",
    "Fit",
    "FitFileError",
    "FitSummary",
    "HierarchicalDawidSkene",
    "HomogeneousDawidSkene",
    "ItemDifficulty",
    "MACE",
    "ModelAgreement",
    "OneCoinDawidSkene",
    "Ordinal",
    "PooledDawidSkene",
    "CommunityDawidSkene",
    "PPCResult",
    "PPCResults",
    "RatingData",
    "RatingDataError",
    "SBCResult",
    "Simulation",
    "UnratedItemsWarning",
    "__version__",
    "agreement",
    "as_rating_data",
    "binomial_mixture_em",
    "calibrate",
    "checking",
    "compare",
    "contrib",
    "data",
    "datasets",
    "decisions",
    "em",
    "fit",
    "fits",
    "get_model",
    "inference",
    "kfold",
    "load",
    "loo",
    "majority_vote",
    "model_agreement",
    "models",
    "next_ratings",
    "plots",
    "posterior_predict",
    "posterior_predictive_check",
    "sbc",
    "score",
    "simulate",
    "simulate_class_conditional",
    "simulate_dawid_skene",
    "simulate_hierarchical",
    "simulate_homogeneous",
    "simulate_item_difficulty",
    "simulate_mace",
    "simulate_one_coin",
    "simulate_ordinal",
    "simulate_pooled",
    "simulate_community",
    "waic",
]


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"pyrater.{name}")
    elif name in _OLD_ATTRIBUTES:  # a deprecated path: warns on every use
        old = _OLD_ATTRIBUTES[name]
        new = _deprecated.new_name(old)
        assert new is not None  # every old attribute is an old module path
        _deprecated.warn(old, new, stacklevel=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module(new)
    else:
        raise AttributeError(f"module 'pyrater' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC, *_SUBMODULES})


class _Package(types.ModuleType):
    """The ``pyrater`` module, guarding its public names against old module paths.

    ``pyrater.compare`` is a function and was also a module in 0.1: importing the old module
    path ``pyrater.compare`` (answered by :mod:`pyrater._deprecated` with
    ``pyrater.checking.compare``) makes the import system bind the module to the package
    attribute, which would shadow the function for every later caller.  A module whose real
    name is not ``pyrater.<name>`` is therefore not bound over a public name.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PUBLIC and isinstance(value, types.ModuleType) and value.__name__ != f"pyrater.{name}":
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from . import checking, contrib, data, datasets, decisions, fits, inference, models, plots
    from .checking.calibration import CalibrationResult, calibrate
    from .checking.compare import ELPD, compare, loo, waic
    from .checking.kfold import kfold
    from .checking.predict import (
        PPCResult,
        PPCResults,
        posterior_predict,
        posterior_predictive_check,
    )
    from .checking.sbc import SBCResult
    from .checking.scoring import majority_vote, score
    from .contrib.mixture import binomial_mixture_em
    from .data.distributed import DistributedRatingData
    from .data.ratings import RatingData, RatingDataError, UnratedItemsWarning, as_rating_data
    from .decisions import AgreementResult, ModelAgreement, agreement, model_agreement, next_ratings
    from .fits.base import Fit, FitSummary, load
    from .fits.em import EMFit
    from .fits.fitfile import FitFileError
    from .fitting import fit, sbc
    from .inference.em.algorithm import em
    from .inference.em.convergence import EMConvergenceWarning
    from .models import (
        MACE,
        ClassConditionalDawidSkene,
        CommunityDawidSkene,
        DawidSkene,
        HierarchicalDawidSkene,
        HomogeneousDawidSkene,
        ItemDifficulty,
        OneCoinDawidSkene,
        Ordinal,
        PooledDawidSkene,
        Simulation,
        get_model,
        simulate,
        simulate_class_conditional,
        simulate_community,
        simulate_dawid_skene,
        simulate_hierarchical,
        simulate_homogeneous,
        simulate_item_difficulty,
        simulate_mace,
        simulate_one_coin,
        simulate_ordinal,
        simulate_pooled,
    )
