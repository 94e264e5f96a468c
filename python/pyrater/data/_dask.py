"""The optional Dask dependency: one import point, one error message naming the extra."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

__all__ = ["require_dask", "is_dask_frame", "get_client", "INSTALL_HINT"]

INSTALL_HINT = 'pip install "pyrater[dask]"  (dask[dataframe], distributed and pyarrow)'


def require_dask() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``(dask, dask.dataframe, distributed)``, or an ImportError naming the ``dask`` extra."""
    try:
        import dask
        import dask.dataframe as dd
        import distributed
    except ImportError as err:
        raise ImportError(
            f"distributed fits on partitioned data need Dask ({err}); install it with {INSTALL_HINT}"
        ) from err
    return dask, dd, distributed


def is_dask_frame(data: Any) -> bool:
    """True when ``data`` is a ``dask.dataframe.DataFrame`` (without importing dask)."""
    dd = sys.modules.get("dask.dataframe")
    return dd is not None and isinstance(data, dd.DataFrame)


def get_client(client: Any = None) -> Any:
    """The given client, else the default ``dask.distributed`` client; never starts a cluster.

    Raises
    ------
    ValueError
        When no client is running, saying how to start one.
    """
    _, _, distributed = require_dask()
    if client is not None:
        if not isinstance(client, distributed.Client):
            raise ValueError(f"client must be a dask.distributed.Client, got {type(client).__name__}")
        return client
    try:
        return distributed.default_client()
    except ValueError:
        raise ValueError(
            "no dask.distributed client is running, and pyrater does not start a cluster on its own; "
            "connect to your cluster first (from dask.distributed import Client; client = Client(address)), "
            "or on one machine: client = Client(LocalCluster(n_workers=2)); or pass client=..."
        ) from None
