"""Compiling the numba kernels of EM and the Gibbs sampler, with LLVM's SLP vectoriser.

The kernels (:mod:`pyrater.inference.em.kernel`, :mod:`pyrater.inference.gibbs.kernel`)
are written on eight scalar lanes of the class axis for LLVM's SLP vectoriser,
which numba leaves off by default; :func:`compile_for` compiles a kernel for
the types of its arguments with it switched on (the one helper of
:mod:`pyrater.models._fused`, which the post-fit passes below ``inference/`` use too).
"""

from __future__ import annotations

import numpy as np

from ..models import _fused

__all__ = ["aligned_zeros", "compile_for", "run"]


def aligned_zeros(shape: tuple[int, ...]) -> np.ndarray:
    """C-contiguous float64 zeros whose data starts on a 64-byte boundary (one cache line)."""
    n = int(np.prod(shape))
    raw = np.zeros(n + 8)
    off = (-raw.ctypes.data % 64) // 8
    return raw[off : off + n].reshape(shape)


# one compile helper for every kernel (EM, Gibbs, the post-fit passes): it lives with the shared kernels
compile_for = _fused.compile_for
run = _fused.run
