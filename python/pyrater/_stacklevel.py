"""Warnings that point at the user's line, not at pyrater's internals."""

from __future__ import annotations

import inspect
import os

__all__ = ["user_stacklevel"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def user_stacklevel() -> int:
    """``stacklevel`` for :func:`warnings.warn` naming the first caller outside pyrater.

    Counts the frames from here up to the first one whose file lies outside
    the package (pandas' ``find_stack_level`` does the same), so a warning
    raised deep in a fit names the user's ``pyrater.fit(...)`` line, however
    the call got there.
    """
    frame = inspect.currentframe()
    n = 0
    try:
        while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep):
            frame = frame.f_back
            n += 1
    finally:
        del frame
    return max(n, 1)
