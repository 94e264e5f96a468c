"""EM (and the Gibbs sampler) over rating data partitioned on a Dask cluster.

Importable without Dask: the classes here import it when used and say which
extra to install (``pip install "pyrater[dask]"``) when it is missing.

:class:`DistributedRatingData`
    Long ratings shuffled by item and encoded on the workers
    (:meth:`~DistributedRatingData.from_dask`, :meth:`~DistributedRatingData.from_parquet`).
:func:`pyrater.em` and :func:`pyrater.fit`
    Accept a Dask DataFrame or a :class:`DistributedRatingData` and run here.
"""

from __future__ import annotations

from typing import Any

from ...data._dask import INSTALL_HINT, is_dask_frame, require_dask
from ...data.distributed import Block, DistributedRatingData

__all__ = ["DistributedRatingData", "Block", "is_distributed", "require_dask", "INSTALL_HINT"]


def is_distributed(data: Any) -> bool:
    """True for a Dask DataFrame or a :class:`DistributedRatingData` (dispatch to this package)."""
    return isinstance(data, DistributedRatingData) or is_dask_frame(data)
