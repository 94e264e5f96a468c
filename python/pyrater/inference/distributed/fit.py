"""``pyrater.fit`` on distributed data: the methods that run on a Dask cluster."""

from __future__ import annotations

from typing import Any

from ...models import Model

__all__ = ["fit_distributed", "DISTRIBUTED_METHODS"]

DISTRIBUTED_METHODS = ("em", "gibbs")


def fit_distributed(
    data: Any,
    model: Model,
    method: str,
    data_format: str,
    *,
    known: Any = None,
    seed: int | None = None,
    chains: int = 4,
    warmup: int = 1000,
    draws: int = 1000,
    thin: int = 1,
    log_lik: bool = True,
    **data_options: Any,
) -> Any:
    """Dispatch :func:`pyrater.fit` for a Dask DataFrame or :class:`DistributedRatingData`.

    ``method="em"``: the posterior mode by distributed EM (as in memory);
    ``method="gibbs"``: the distributed blocked Gibbs sampler (no per-item
    ``log_lik``: ``log_lik`` is ignored).  Stan's methods need the ratings
    in one process and are refused.
    """
    if data_format != "long":
        raise ValueError(f"distributed data are long ratings (data_format='long'), got data_format={data_format!r}")
    if method not in DISTRIBUTED_METHODS:
        raise ValueError(
            f"method={method!r} needs the ratings in memory (Stan); on distributed data use one of "
            f"{DISTRIBUTED_METHODS}, or collect a small data set with ddf.compute()"
        )
    if method == "gibbs":
        from .gibbs import gibbs

        return gibbs(
            data, model, chains=chains, warmup=warmup, draws=draws, thin=thin, seed=seed, known=known, **data_options
        )
    from .em import em

    return em(data, model, method="map", known=known, seed=seed, **data_options)
