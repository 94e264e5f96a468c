"""Rating data: what every model and method reads.

:class:`RatingData` (long, wide and grouped tables, label checks, conversions)
and :class:`DistributedRatingData` (long ratings partitioned by item on a Dask
cluster).  Nothing here imports from the other folders of pyrater.
"""

from __future__ import annotations

from .distributed import DistributedRatingData
from .ratings import (
    DataFormat,
    RatingData,
    RatingDataError,
    ScaleOrderWarning,
    UnratedItemsWarning,
    as_rating_data,
)

__all__ = [
    "RatingData",
    "RatingDataError",
    "UnratedItemsWarning",
    "ScaleOrderWarning",
    "as_rating_data",
    "DataFormat",
    "DistributedRatingData",
]
