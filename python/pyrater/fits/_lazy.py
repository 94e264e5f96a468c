"""Draws read on first use: the mapping a lazily loaded fit holds as ``fit.draws``.

:func:`pyrater.load` checks a fit file's structure, shapes, dtypes and
declared sizes at once, but reads the large per-draw arrays (``theta``,
``log_lik`` and the model's own parameters) only when the fit first needs
them.  :class:`LazyDraws` is that ``draws`` mapping: each entry is read (and
checked, by the reader the loader hands over) on first access and kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping

import numpy as np

__all__ = ["LazyDraws", "draw_shape"]


class LazyDraws(Mapping[str, np.ndarray]):
    """A read-only mapping of draws whose large entries are read on first access.

    Parameters
    ----------
    ready : dict of str to array
        Entries already in memory (``pi`` at least).
    deferred : dict of str to (shape, reader)
        Entries still on disk: their shape (known from the file's checked
        metadata) and a function that reads and checks the array.
    order : list of str
        The key order (that of the saved fit).
    source : str
        Where the deferred entries come from (for the repr and messages).
    """

    def __init__(
        self,
        ready: dict[str, np.ndarray],
        deferred: dict[str, tuple[tuple[int, ...], Callable[[], np.ndarray]]],
        order: list[str],
        source: str,
    ) -> None:
        if set(ready) & set(deferred) or set(ready) | set(deferred) != set(order):
            raise ValueError("the keys of ready and deferred must split order")
        self._ready = dict(ready)
        self._deferred = dict(deferred)
        self._order = list(order)
        self._source = source
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> np.ndarray:
        value = self._ready.get(key)
        if value is not None:
            return value
        if key not in self._deferred:
            raise KeyError(key)
        with self._lock:
            if key not in self._ready:
                _, read = self._deferred[key]
                self._ready[key] = read()
                del self._deferred[key]
        return self._ready[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, key: object) -> bool:
        return key in self._order

    def shape(self, key: str) -> tuple[int, ...]:
        """Shape of entry ``key`` without reading it."""
        if key in self._ready:
            return tuple(self._ready[key].shape)
        if key not in self._deferred:
            raise KeyError(key)
        return self._deferred[key][0]

    @property
    def unread(self) -> tuple[str, ...]:
        """Keys not read from the file yet."""
        return tuple(k for k in self._order if k in self._deferred)

    def read_all(self) -> LazyDraws:
        """Read (and check) every entry now; returns self."""
        for key in self._order:
            self[key]
        return self

    def __reduce__(self) -> tuple:
        """Pickling and deep copies read every entry and give a plain dict (the file is not needed after)."""
        return (dict, ({key: self[key] for key in self._order},))

    def __repr__(self) -> str:
        parts = []
        for key in self._order:
            shape = self.shape(key)
            parts.append(f"{key!r}: {shape}" + (" (on disk)" if key in self._deferred else ""))
        return f"LazyDraws({{{', '.join(parts)}}}, source={self._source!r})"


def draw_shape(draws: Mapping[str, np.ndarray], key: str) -> tuple[int, ...] | None:
    """Shape of ``draws[key]`` without reading a lazily loaded entry; None when absent."""
    if key not in draws:
        return None
    if isinstance(draws, LazyDraws):
        return draws.shape(key)
    return tuple(np.shape(draws[key]))
