"""Rating data partitioned over a Dask cluster: labels found in one pass, items shuffled once.

:class:`DistributedRatingData` is the distributed counterpart of
:class:`pyrater.RatingData` for long data (one row per rating).  Building it

1. reads the three columns once to discover the labels: the raters and the
   categories (declared, or the sorted observed ratings, exactly as
   :meth:`pyrater.RatingData.from_long` does), and checks for missing values
   and ratings outside a declared scale;
2. shuffles the ratings once by item (hash partitioning), so that all the
   ratings of an item sit in one partition;
3. encodes each partition into a :class:`Block`: its item labels (sorted) and
   the sparse per-item count matrix of shape ``(I_p, J*K)`` with the same
   layout as :attr:`pyrater.RatingData.counts`, and persists the blocks in the
   workers' memory.

Nothing of size N (ratings) or I (items) ever reaches the client: only
the rater and category labels and the number of items and ratings.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .._validation import check_int
from ._dask import get_client, is_dask_frame, require_dask
from .ratings import (
    RatingData,
    RatingDataError,
    _category_index,
    _check_clashes,
    _check_roles,
    _encode,
    _factorize,
    _missing_column,
    _r,
    _raise,
    _show,
)
from .rows import unit_counts

if TYPE_CHECKING:  # pragma: no cover
    import dask.dataframe as dd

__all__ = ["DistributedRatingData", "Block"]

# partitions summed per task in the tree reductions
FAN_IN = 8


@dataclass(frozen=True, eq=False)
class Block:
    """The ratings of one partition: whole items only.

    Attributes
    ----------
    items : pandas.Index, length I_p
        Item labels, sorted (as :meth:`pyrater.RatingData.from_long` sorts them).
    counts : scipy.sparse.csr_matrix, shape (I_p, J*K)
        ``counts[i, j*K + l]`` = how often rater ``j`` gave rating ``l`` to item ``i``.
    known : int array, shape (I_p,), or None
        Known class code per item (-1 unknown); None when no class is known.
    n_ratings : int
        Rows of the partition.
    """

    items: pd.Index
    counts: sp.csr_matrix
    known: np.ndarray | None = None
    n_ratings: int = 0

    @property
    def n_units(self) -> int:
        """Number of units (items) in this partition."""
        return len(self.items)

    @cached_property
    def unit_counts(self) -> bool:
        """Whether every stored count is 1 (no rater rated an item twice): the compiled passes then skip the counts."""
        return unit_counts(self.counts)


# ------------------------------------------------------------ partition tasks (run on workers)


def _summarise(part: pd.DataFrame, item: Any, rater: Any, rating: Any) -> dict[str, Any]:
    """Label discovery for one partition: its distinct raters and ratings, missing values, rows."""
    return {
        "n": len(part),
        "missing": np.array([int(part[c].isna().sum()) for c in (item, rater, rating)]),
        "raters": pd.Index(part[rater].dropna().unique()),
        "ratings": pd.Index(part[rating].dropna().unique()),
    }


def _merge_summaries(*parts: dict[str, Any]) -> dict[str, Any]:
    out = dict(parts[0])
    for p in parts[1:]:
        out = {
            "n": out["n"] + p["n"],
            "missing": out["missing"] + p["missing"],
            "raters": out["raters"].append(p["raters"]).unique(),
            "ratings": out["ratings"].append(p["ratings"]).unique(),
        }
    return out


def _encode_partition(
    part: pd.DataFrame, item: Any, rater: Any, rating: Any, rater_labels: pd.Index, categories: pd.Index
) -> Block:
    """One shuffled partition (every rating of its items) -> :class:`Block`."""
    J, K = len(rater_labels), len(categories)
    if len(part) == 0:
        empty = sp.csr_matrix((0, J * K), dtype=np.float64)
        return Block(items=pd.Index([], name=item), counts=empty, n_ratings=0)
    unit, items = _factorize(part[item])
    problems: list[str] = []
    _check_clashes(items, f"column {_r(item)} (item)", problems)
    r = _encode(part[rater], rater_labels)
    y = _encode(part[rating], categories)
    if (r < 0).any():  # pragma: no cover - the labels come from the discovery pass over the same data
        problems.append(
            f"column {_r(rater)} has raters {_show(pd.unique(part[rater].to_numpy()[r < 0]))} not seen before"
        )
    if (y < 0).any():  # pragma: no cover - idem
        problems.append(
            f"column {_r(rating)} has values {_show(pd.unique(part[rating].to_numpy()[y < 0]))} not seen before"
        )
    _raise(problems)
    counts = RatingData.from_codes(unit, r, y, n_categories=K, n_items=len(items), n_raters=J, copy=False).counts
    return Block(items=items.rename(item), counts=counts, n_ratings=len(part))


def _block_info(block: Block) -> tuple[int, int, str]:
    kind = pd.api.types.infer_dtype(block.items, skipna=True)
    return block.n_units, block.n_ratings, "string" if kind == "string" else str(block.items.dtype)


def _item_dtype(info: list[tuple[int, int, str]]) -> Any:
    """One dtype for the item labels of every partition (Dask needs one ``meta``)."""
    kinds = {i[2] for i in info if i[0] > 0}
    if kinds == {"string"}:
        return pd.StringDtype("pyarrow")  # what Dask makes of string columns; Parquet writes it
    if len(kinds) == 1:
        try:
            dtype = np.dtype(kinds.pop())
        except TypeError:
            return object
        return dtype if dtype.kind in "iufMmb" else object
    return object


def _attach_known(block: Block, labels: np.ndarray, codes: np.ndarray) -> tuple[Block, np.ndarray]:
    """The block with its items' known classes, and which of ``labels`` it holds."""
    pos = _encode(labels, block.items) if block.n_units else np.full(labels.size, -1, np.int64)
    hit = pos >= 0
    known = np.full(block.n_units, -1, dtype=np.int64)
    known[pos[hit]] = codes[hit]
    return replace(block, known=known), hit


def _first(pair: tuple[Block, np.ndarray]) -> Block:
    return pair[0]


def _second(pair: tuple[Block, np.ndarray]) -> np.ndarray:
    return pair[1]


def _any(*hits: np.ndarray) -> np.ndarray:
    return np.logical_or.reduce(hits)


# ------------------------------------------------------------------------------- client side


def tree_reduce(client: Any, futures: list, func: Any, key: str | None = None) -> Any:
    """Reduce futures with ``func(*group)`` in a tree of fan-in :data:`FAN_IN`; returns the future."""
    level = 0
    while len(futures) > 1:
        groups = [futures[i : i + FAN_IN] for i in range(0, len(futures), FAN_IN)]
        keys = None if key is None else [f"{key}-sum{level}-{g}" for g in range(len(groups))]
        futures = [
            client.submit(func, *g, pure=False, **({} if keys is None else {"key": keys[n]}))
            for n, g in enumerate(groups)
        ]
        level += 1
    return futures[0]


@dataclass(frozen=True, eq=False)
class DistributedRatingData:
    """Long rating data partitioned by item over a Dask cluster.

    Build with :meth:`from_dask` or :meth:`from_parquet`; pass it (or a Dask
    DataFrame) to :func:`pyrater.em` or :func:`pyrater.fit`.  The encoded
    partitions live in the workers' memory as long as this object does.

    Attributes
    ----------
    rater_labels : pandas.Index, length J
    categories : pandas.Index, length K
    n_items : int
        I: distinct items (summed over partitions; items never span partitions).
    n_ratings : int
        N: rows (ratings).
    n_partitions : int
    columns : dict
        The user's column names for ``item``, ``rater``, ``rating``.
    timings : dict
        Seconds: ``discover`` (the label pass), ``shuffle`` (shuffle, encode
        and persist: the one-off cost before the first iteration).
    client : dask.distributed.Client
    """

    blocks: list = field(repr=False)
    rater_labels: pd.Index
    categories: pd.Index
    n_items: int
    n_ratings: int
    columns: dict
    item_dtype: Any = field(default=object, repr=False)
    timings: dict = field(default_factory=dict, repr=False)
    client: Any = field(default=None, repr=False)

    source_format = "long"
    is_grouped = False

    # ---------------------------------------------------------------- sizes
    @property
    def n_units(self) -> int:
        """I: number of items."""
        return self.n_items

    @property
    def n_raters(self) -> int:
        """J: number of raters."""
        return len(self.rater_labels)

    @property
    def n_categories(self) -> int:
        """K: number of categories."""
        return len(self.categories)

    @property
    def n_partitions(self) -> int:
        """Number of partitions."""
        return len(self.blocks)

    def __repr__(self) -> str:
        return (
            f"DistributedRatingData({self.n_items} items, {self.n_raters} raters, {self.n_categories} categories "
            f"{list(self.categories)}, {self.n_ratings} ratings, {self.n_partitions} partitions)"
        )

    def __getstate__(self) -> dict:
        # the partitions live on the cluster: a pickled copy keeps the labels and sizes only
        state = dict(self.__dict__)
        state["blocks"] = None
        state["client"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def _require_blocks(self) -> list:
        if self.blocks is None:
            raise RuntimeError(
                "this DistributedRatingData was unpickled: its partitions stayed on the cluster they were built "
                "on; rebuild it with DistributedRatingData.from_dask or from_parquet"
            )
        return self.blocks

    # ------------------------------------------------------------ builders
    @classmethod
    def from_parquet(
        cls,
        path: str | Sequence[str],
        item: str = "item",
        rater: str = "rater",
        rating: str = "rating",
        categories: Sequence[Any] | None = None,
        npartitions: int | None = None,
        client: Any = None,
        **read_parquet_options: Any,
    ) -> DistributedRatingData:
        """Read long ratings from Parquet (a file, folder or glob) on the cluster.

        Only the three columns are read (``dask.dataframe.read_parquet``;
        ``read_parquet_options`` are passed on, e.g. ``storage_options``).
        See :meth:`from_dask` for the other parameters.

        Examples
        --------
        >>> data = pyrater.DistributedRatingData.from_parquet("ratings/*.parquet", item="task",
        ...                                                   rater="worker", rating="label")  # doctest: +SKIP
        """
        _, dd, _ = require_dask()
        for name, value in (("item", item), ("rater", rater), ("rating", rating)):
            if not isinstance(value, str):
                raise ValueError(f"{name} must be a column name (str) for Parquet data, got {value!r}")
        get_client(client)  # fail before touching the files when no cluster is running
        ddf = dd.read_parquet(path, columns=list(dict.fromkeys([item, rater, rating])), **read_parquet_options)
        return cls.from_dask(
            ddf, item=item, rater=rater, rating=rating, categories=categories, npartitions=npartitions, client=client
        )

    @classmethod
    def from_dask(
        cls,
        ddf: dd.DataFrame,
        item: Any = "item",
        rater: Any = "rater",
        rating: Any = "rating",
        categories: Sequence[Any] | None = None,
        npartitions: int | None = None,
        shuffle_method: str | None = None,
        client: Any = None,
    ) -> DistributedRatingData:
        """Partition a long Dask DataFrame by item on the cluster and encode it.

        Parameters
        ----------
        ddf : dask.dataframe.DataFrame
            One row per rating; any partitioning (an item's ratings may be
            spread over partitions).  Not modified.
        item, rater, rating : column names
        categories : sequence, optional
            The full, ordered category scale.  Default: the categories of a
            categorical rating column with known categories, else the sorted
            observed ratings.
        npartitions : int, optional
            Partitions after the shuffle (default: those of ``ddf``).  Each
            EM iteration runs one task per partition.
        shuffle_method : {"p2p", "tasks"}, optional
            Dask's shuffle (default: Dask's choice, ``"p2p"`` on a
            distributed cluster).
        client : dask.distributed.Client, optional
            Default: the running default client.  pyrater never starts a
            cluster itself.

        Returns
        -------
        DistributedRatingData
            With the encoded partitions persisted on the workers.

        Raises
        ------
        RatingDataError
            Missing columns, missing values, ratings outside the declared
            scale, fewer than 2 categories, labels differing only in type.
        """
        dask, dd, _ = require_dask()
        if not isinstance(ddf, dd.DataFrame):
            raise ValueError(f"ddf must be a dask.dataframe.DataFrame, got {type(ddf).__name__}")
        if npartitions is not None:
            check_int("npartitions", npartitions, 1)
        if shuffle_method not in (None, "p2p", "tasks", "disk"):
            raise ValueError(f"shuffle_method must be None, 'p2p', 'tasks' or 'disk', got {shuffle_method!r}")
        client = get_client(client)
        cols = {"item": item, "rater": rater, "rating": rating}
        problems: list[str] = []
        _check_roles(cols, problems)
        _raise(problems)
        missing = [_missing_column(name, role, ddf) for role, name in cols.items() if name not in ddf.columns]
        _raise(missing)
        if len(set(map(str, ddf.columns))) != len(ddf.columns):
            _raise([f"duplicated column names: {_show(ddf.columns[ddf.columns.duplicated()])}"])
        ddf = ddf[[item, rater, rating]]

        # ---- 1. label discovery: one pass over the three columns, a tree of small merges
        t0 = time.perf_counter()
        parts = ddf.to_delayed()
        summaries = [dask.delayed(_summarise, pure=True)(p, item, rater, rating) for p in parts]
        while len(summaries) > 1:
            summaries = [
                dask.delayed(_merge_summaries, pure=True)(*summaries[i : i + FAN_IN])
                for i in range(0, len(summaries), FAN_IN)
            ]
        summary = client.compute(summaries[0]).result()
        t_discover = time.perf_counter() - t0

        if summary["n"] == 0:
            _raise(["the table is empty (no rows)"])
        for (role, name), n_missing in zip(cols.items(), summary["missing"]):
            if n_missing:
                advice = (
                    "long data has one row per given rating: drop the rows without one"
                    if role == "rating"
                    else f"every rating needs its {role}"
                )
                problems.append(f"column {_r(name)} ({role}) has {int(n_missing)} missing values (NaN); {advice}")
        rating_dtype = ddf[rating].dtype
        if categories is None and isinstance(rating_dtype, pd.CategoricalDtype):
            if dd.utils.has_known_categories(ddf[rating]):
                categories = rating_dtype.categories
        observed = summary["ratings"].to_numpy(dtype=object)
        cats = _category_index(observed, categories, problems, what=f"column {_r(rating)}")
        if len(cats):
            outside = observed[_encode(observed, cats) < 0]
            if outside.size:
                problems.append(
                    f"column {_r(rating)} has values {_show(outside)} not among the categories {_show(cats)}"
                )
        _, rater_labels = _factorize(summary["raters"].to_numpy(dtype=object))
        _check_clashes(rater_labels, f"column {_r(rater)} (rater)", problems)
        _raise(problems)
        rater_labels = rater_labels.rename(rater)
        cats = cats.rename(rating)

        # ---- 2. one shuffle by item, 3. encode each partition, persist the blocks on the workers
        t1 = time.perf_counter()
        shuffled = ddf.shuffle(on=item, npartitions=npartitions or ddf.npartitions, shuffle_method=shuffle_method)
        encode = dask.delayed(_encode_partition, pure=True)
        blocks_delayed = [encode(p, item, rater, rating, rater_labels, cats) for p in shuffled.to_delayed()]
        blocks = client.compute(blocks_delayed)
        info = client.gather(client.map(_block_info, blocks, pure=False))
        t_shuffle = time.perf_counter() - t1

        n_items = int(sum(i[0] for i in info))
        n_ratings = int(sum(i[1] for i in info))
        item_dtype = _item_dtype(info)
        return cls(
            blocks=blocks,
            rater_labels=rater_labels,
            categories=cats,
            n_items=n_items,
            n_ratings=n_ratings,
            columns=dict(cols),
            item_dtype=item_dtype,
            timings={"discover": t_discover, "shuffle": t_shuffle},
            client=client,
        )

    # ------------------------------------------------------------ known classes
    def blocks_with_known(self, known: dict | pd.Series | None) -> list:
        """Futures of the blocks with the known classes of their items attached.

        Parameters
        ----------
        known : dict or Series, optional
            ``{item label: category label}``.  Item labels match exactly,
            else type-blind (``"7"`` finds item ``7``), as in memory.

        Raises
        ------
        RatingDataError
            Items given twice or not found in the data, unknown categories.
        """
        blocks = self._require_blocks()
        if known is None:
            return blocks
        series = pd.Series(known) if not isinstance(known, pd.Series) else known
        if series.index.has_duplicates:
            raise RatingDataError(
                f"known classes given twice for items {_show(series.index[series.index.duplicated()])}"
            )
        values = np.asarray(series.to_numpy(), dtype=object)
        codes = _encode(values, self.categories)
        if (codes < 0).any():
            raise RatingDataError(
                f"known class {_show(pd.unique(values[codes < 0]))} not among the categories {_show(self.categories)}"
            )
        labels = np.asarray(list(series.index), dtype=object)
        client = self.client
        lab_f, codes_f = client.scatter([labels, codes], broadcast=True, hash=False)
        pairs = client.map(_attach_known, blocks, labels=lab_f, codes=codes_f, pure=False)
        hit = tree_reduce(client, client.map(_second, pairs, pure=False), _any).result()
        if not hit.all():
            raise RatingDataError(f"known-class item {_show(labels[~hit])} not found in the data")
        return client.map(_first, pairs, pure=False)


def as_distributed(data: Any, client: Any = None, **data_options: Any) -> tuple[DistributedRatingData, Any]:
    """The distributed data a fit runs on, and its client.

    A Dask DataFrame is partitioned by item (:meth:`DistributedRatingData.from_dask`
    with ``data_options``: column names, categories, ...); a
    :class:`DistributedRatingData` is used as it is (``data_options`` are refused).
    The client is ``client``, else the data's, else the current one.
    """
    if is_dask_frame(data):
        data = DistributedRatingData.from_dask(data, client=client, **data_options)
    elif not isinstance(data, DistributedRatingData):
        raise ValueError(f"data must be a DistributedRatingData or a dask DataFrame, got {type(data).__name__}")
    elif data_options:
        raise ValueError(
            f"column options {sorted(data_options)} apply to a Dask DataFrame, not to DistributedRatingData"
        )
    return data, get_client(client if client is not None else data.client)
