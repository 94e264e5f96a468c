"""Distinct count rows of the data: each with the units that share it.

Used wherever units with the same ratings (and the same known class) may be
computed once: EM's compression of long data, Stan's distinct units for the
marginal item-difficulty model, and that model's fits.  Rows are hashed
(64-bit, order-independent) and then checked exactly, so a hash collision can
only cost the compression, never a wrong result.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

__all__ = ["compress_rows", "unit_counts"]


def unit_counts(counts: sp.spmatrix) -> bool:
    """Whether every stored count of a count matrix is 1 (no rater rated an item twice; False without counts).

    The compiled passes over the counts then skip their loads and multiplies
    (:func:`pyrater.models._fused.log_joint_block`); callers decide it once per fit.
    """
    data = counts.data
    return bool(data.size) and bool(np.all(data == 1.0))


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
