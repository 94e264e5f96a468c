"""Compressing long data into its distinct count rows (each with the number of items sharing it as weight).

EM's estimates do not change; the class probabilities are mapped back to
every item.  The distinct rows themselves are found by
:func:`pyrater.data.rows.compress_rows` (hashed, then checked exactly, so a
hash collision can only cost the compression, never a wrong fit); this module
decides when compressing pays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ...data.rows import compress_rows

__all__ = ["may_compress", "compress_rows", "AUTO_COMPRESS_SHARE"]

#: "auto" compresses long data when the distinct count rows are at most this share of the units
AUTO_COMPRESS_SHARE = 0.5


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
