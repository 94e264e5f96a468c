"""Compressing long data into its distinct count rows (each with the number of items sharing it as weight).

EM's estimates do not change; the class probabilities are mapped back to
every item.  Rows are hashed (64-bit, order-independent) and then checked
exactly, so a hash collision can only cost the compression, never a wrong fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["may_compress", "compress_rows", "AUTO_COMPRESS_SHARE"]

#: "auto" compresses long data when the distinct count rows are at most this share of the units
AUTO_COMPRESS_SHARE = 0.5
# rows per block when hashing count rows (bounds the temporary memory)
_HASH_BLOCK_NNZ = 1 << 21


def _row_hash(counts: sp.csr_matrix, known: np.ndarray | None) -> np.ndarray:
    """64-bit order-independent hash of each row's (column, count) entries and known class."""
    I = counts.shape[0]
    indptr = counts.indptr
    out = np.zeros(I, dtype=np.uint64)
    c1, c2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
    c3, c4 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    s30, s27, s31 = np.uint64(30), np.uint64(27), np.uint64(31)
    # blocks of rows holding about _HASH_BLOCK_NNZ entries (loop over blocks, not items)
    bounds = np.searchsorted(indptr, np.arange(0, counts.nnz + _HASH_BLOCK_NNZ, _HASH_BLOCK_NNZ), side="right") - 1
    bounds = np.unique(np.clip(np.append(bounds, I), 0, I))
    with np.errstate(over="ignore"):
        for r0, r1 in zip(bounds[:-1], bounds[1:]):
            a, b = indptr[r0], indptr[r1]
            h = counts.indices[a:b].astype(np.uint64) * c1
            h ^= counts.data[a:b].astype(np.uint64) * c2
            # splitmix64 finaliser
            h ^= h >> s30
            h *= c3
            h ^= h >> s27
            h *= c4
            h ^= h >> s31
            cs = np.zeros(b - a + 1, dtype=np.uint64)
            np.cumsum(h, out=cs[1:])
            local = indptr[r0 : r1 + 1] - a
            out[r0:r1] = cs[local[1:]] - cs[local[:-1]]
        out += (np.diff(indptr).astype(np.uint64) + np.uint64(1)) * c3
        if known is not None:
            out += (known.astype(np.int64) + 2).astype(np.uint64) * c4
    return out


def _same_rows(counts: sp.csr_matrix, rows: np.ndarray, reps: np.ndarray) -> bool:
    """True when ``counts[rows[t]] == counts[reps[t]]`` for every t (exact check)."""
    indptr = counts.indptr
    n = np.diff(indptr)
    if not np.array_equal(n[rows], n[reps]):
        return False
    a = counts[rows]
    b = counts[reps]
    a.sort_indices()
    b.sort_indices()
    return bool(np.array_equal(a.indices, b.indices) and np.array_equal(a.data, b.data))


def may_compress(counts: sp.csr_matrix, kernel: Any = None) -> bool:
    """Cheap necessary condition for "auto" compression to pay off.

    Rows with different (number of entries, first column, last column) differ,
    so the number of distinct such keys is a lower bound on the number of
    distinct rows; when it exceeds the share that "auto" accepts, the full
    row hashing is skipped.  ``kernel`` (the module
    :mod:`pyrater.inference.em.kernel`, when numba is used) counts the same
    buckets in one compiled pass.
    """
    I, JK = counts.shape
    if not counts.has_sorted_indices:
        return True
    indptr = counts.indptr
    n = np.diff(indptr)
    key = n.astype(np.uint64)
    if counts.nnz == 0:
        return True
    bits = int(min(26, max(10, np.ceil(np.log2(8 * max(I, 1))))))
    if kernel is not None:
        from .._numba import run as run_kernel

        occupied_count = run_kernel(kernel.occupied_key_buckets, indptr, counts.indices, bits)
        return int(occupied_count) <= AUTO_COMPRESS_SHARE * I
    c1, c2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
    # first and last column of each row (0 for empty rows, whose key stays 0); no boolean-mask indexing
    first_col = counts.indices[np.minimum(indptr[:-1], counts.nnz - 1)].astype(np.uint64)
    last_col = counts.indices[np.maximum(indptr[1:] - 1, 0)].astype(np.uint64)
    empty = n == 0
    if empty.any():
        first_col[empty] = 0
        last_col[empty] = 0
    with np.errstate(over="ignore"):
        first_col *= c1
        last_col *= c2
        key ^= first_col
        key ^= last_col
        # distinct keys >= occupied buckets of a bitmap with >= 8 I buckets (multiplicative hashing);
        # a bitmap is much cheaper than counting distinct keys exactly (a hash table or a sort)
        key *= np.uint64(0xD6E8FEB86659FD93)
        key >>= np.uint64(64 - bits)
    occupied = np.zeros(1 << bits, dtype=bool)
    occupied[key] = True
    return int(np.count_nonzero(occupied)) <= AUTO_COMPRESS_SHARE * I


def compress_rows(
    counts: sp.csr_matrix, weight: np.ndarray, known: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Distinct count rows (with the same known class): representatives and inverse.

    Returns ``(first, inverse)`` with ``counts[first[inverse]] == counts`` row
    for row, or ``None`` when a hash collision made the exact check fail.
    """
    keys = _row_hash(counts, known)
    inverse, uniq = pd.factorize(keys)
    inverse = inverse.astype(np.int64)
    G = len(uniq)
    # pandas numbers the groups in order of first appearance
    new = np.empty(inverse.size, dtype=bool)
    new[:1] = True
    np.greater(inverse[1:], np.maximum.accumulate(inverse)[:-1], out=new[1:])
    first = np.flatnonzero(new)
    if first.size != G:  # pragma: no cover - pandas guarantees order of appearance
        return None
    dup = np.flatnonzero(first[inverse] != np.arange(counts.shape[0]))
    if dup.size:
        reps = first[inverse[dup]]
        if known is not None and not np.array_equal(known[dup], known[reps]):
            return None
        if not _same_rows(counts, dup, reps):
            return None
    return first, inverse
