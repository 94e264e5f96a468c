"""pyrater: statistical analysis of repeated categorical ratings."""

from .data import RatingData, RatingDataError, as_rating_data
from .models import (
    ClassConditionalDawidSkene,
    DawidSkene,
    HierarchicalDawidSkene,
    HomogeneousDawidSkene,
    get_model,
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
]
