"""pyrater: statistical analysis of repeated categorical ratings.

Infer each item's true class with honest uncertainty, each rater's error
matrix and the prevalence of each class, from ratings in any design.

Main entry points
-----------------
RatingData, as_rating_data
    long / wide / grouped rating tables.
fit
    Bayesian Dawid-Skene-family models in Stan (MCMC or posterior mode), or EM.
em
    Maximum-likelihood / MAP EM in numpy.
simulate
    Simulated data with known truth.
"""

from . import calibration, datasets, evaluate, kernel, lcm, plots, probit
from .calibration import CalibrationResult, calibrate
from .compare import ELPD, compare, loo, waic
from .data import RatingData, RatingDataError, as_rating_data
from .native.em import EMFit, em
from .native.distributed import DistributedRatingData
from .evaluate import majority_vote, score
from .fitting import fit
from .mixture import binomial_mixture_em
from .predict import PPCResult, posterior_predict, posterior_predictive_check
from .models import (
    ClassConditionalDawidSkene,
    DawidSkene,
    HierarchicalDawidSkene,
    HomogeneousDawidSkene,
    get_model,
)
from .fitfile import FitFileError
from .results import Fit, FitSummary, load
from .simulation import (
    Simulation,
    simulate,
    simulate_class_conditional,
    simulate_dawid_skene,
    simulate_hierarchical,
    simulate_homogeneous,
)

__version__ = "0.1.0"

__all__ = [
    "RatingData",
    "RatingDataError",
    "as_rating_data",
    "DawidSkene",
    "HierarchicalDawidSkene",
    "ClassConditionalDawidSkene",
    "HomogeneousDawidSkene",
    "get_model",
    "fit",
    "em",
    "EMFit",
    "DistributedRatingData",
    "Fit",
    "FitSummary",
    "load",
    "FitFileError",
    "binomial_mixture_em",
    "simulate",
    "simulate_dawid_skene",
    "simulate_class_conditional",
    "simulate_hierarchical",
    "simulate_homogeneous",
    "Simulation",
    "kernel",
    "plots",
    "loo",
    "waic",
    "compare",
    "ELPD",
    "posterior_predict",
    "posterior_predictive_check",
    "PPCResult",
    "evaluate",
    "datasets",
    "majority_vote",
    "score",
    "calibrate",
    "CalibrationResult",
    "calibration",
    "lcm",
    "probit",
]
