"""Checks of user arguments, one rule each, used by every part of pyrater.

Each check returns the value in canonical form (a Python ``int`` or
``float``) or raises ``ValueError`` naming the argument, what it got and what
it needs, before any work starts.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

__all__ = [
    "MAX_SEED",
    "check_int",
    "check_seed",
    "resolve_seed",
    "check_number",
    "check_probability",
    "check_choice",
    "GIB",
]

#: seeds are integers in [0, MAX_SEED): the range every engine accepts (Stan's seeds are 31-bit positive)
MAX_SEED = 2**31
#: bytes in a GiB
GIB = 2.0**30


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an ``int``; it must be an integer (not a bool or a float) within the bounds.

    Raises
    ------
    ValueError
        Naming ``name``, the value and the bounds.
    """
    if not _is_int(value):
        raise ValueError(f"{name} must be an integer{_bounds_text(minimum, maximum)}, got {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{_bounds_text(minimum, maximum)}, got {value!r}")
    return int(value)


def _bounds_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def check_seed(seed: Any) -> int | None:
    """A seed given by the user: None, or an integer in ``[0, 2**31)`` (every method and engine takes that range)."""
    if seed is None:
        return None
    if not _is_int(seed) or not 0 <= seed < MAX_SEED:
        raise ValueError(f"seed must be an integer in [0, 2**31) or None, got {seed!r}")
    return int(seed)


def resolve_seed(seed: Any) -> int:
    """:func:`check_seed`, or a fresh seed from the operating system when ``seed`` is None.

    Fits record the seed they used, so a fit without a seed can be repeated.
    """
    checked = check_seed(seed)
    if checked is not None:
        return checked
    # SeedSequence() without entropy draws an int from the OS; numpy's stubs type it int | Sequence[int] | None
    entropy = cast(int, np.random.SeedSequence().entropy)
    return int(entropy % (MAX_SEED - 1))


def check_number(
    name: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    strict_minimum: bool = False,
    allow_inf: bool = False,
) -> float:
    """``value`` as a ``float``: a real number (not a bool) within the bounds.

    ``strict_minimum`` excludes the minimum itself; ``allow_inf`` admits ``+inf``.
    """
    text = "a positive number" if (minimum == 0 and strict_minimum) else "a number"
    if minimum is not None and not (minimum == 0 and strict_minimum):
        text += f" {'>' if strict_minimum else '>='} {minimum:g}"
    if maximum is not None:
        text += f" <= {maximum:g}"
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be {text}, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {text}, got {value!r}") from None
    if math.isnan(number) or (math.isinf(number) and not (allow_inf and number > 0)):
        raise ValueError(f"{name} must be {text}, got {value!r}")
    if minimum is not None and (number < minimum or (strict_minimum and number == minimum)):
        raise ValueError(f"{name} must be {text}, got {value!r}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name} must be {text}, got {value!r}")
    return number


def check_probability(name: str, value: Any, *, open_interval: bool = True) -> float:
    """A probability: in ``(0, 1)`` (or ``[0, 1]`` with ``open_interval=False``)."""
    interval = "(0, 1)" if open_interval else "[0, 1]"
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}") from None
    ok = 0 < number < 1 if open_interval else 0 <= number <= 1
    if isinstance(value, (bool, np.bool_)) or not ok:
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
    return number


def check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> Any:
    """``value`` if it is one of ``choices``; else an error listing them."""
    try:
        ok = value in choices
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value
