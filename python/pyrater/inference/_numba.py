"""Compiling the numba kernels of EM and the Gibbs sampler, with LLVM's SLP vectoriser.

The kernels (:mod:`pyrater.inference.em.kernel`, :mod:`pyrater.inference.gibbs.kernel`)
are written on eight scalar lanes of the class axis for LLVM's SLP vectoriser,
which numba leaves off by default; :func:`compile_for` compiles a kernel for
the types of its arguments with it switched on.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numba
import numpy as np
from numba.core import config as _numba_config

__all__ = ["aligned_zeros", "compile_for", "run"]


def aligned_zeros(shape: tuple[int, ...]) -> np.ndarray:
    """C-contiguous float64 zeros whose data starts on a 64-byte boundary (one cache line)."""
    n = int(np.prod(shape))
    raw = np.zeros(n + 8)
    off = (-raw.ctypes.data % 64) // 8
    return raw[off : off + n].reshape(shape)


_compile_lock = threading.Lock()


@contextmanager
def _slp_vectorize():
    """Switch on LLVM's SLP vectoriser for the compilations inside the block only.

    numba leaves it off by default (``NUMBA_SLP_VECTORIZE``); the kernels are
    written on eight scalar lanes for it.  The setting is restored on exit.
    """
    with _compile_lock:
        old = _numba_config.SLP_VECTORIZE
        _numba_config.SLP_VECTORIZE = 1
        try:
            yield
        finally:
            _numba_config.SLP_VECTORIZE = old


def compile_for(kernel, *args) -> None:
    """Compile (or load from numba's on-disk cache) ``kernel`` for the types of these arguments.

    Call it once with the arguments of later calls of the kernel; compiling through here
    vectorises them (see :func:`_slp_vectorize`).
    """
    sig = tuple(numba.typeof(a) for a in args)
    if sig in kernel.overloads:
        return
    with _slp_vectorize():
        kernel.compile(sig)


def run(kernel, *args):
    """``kernel(*args)`` after :func:`compile_for` (for one-off calls)."""
    compile_for(kernel, *args)
    return kernel(*args)
