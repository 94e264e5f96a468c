"""Checks of user arguments, one rule each, used by every part of pyrater.

Each check returns the value in canonical form (a Python ``int`` or
``float``) or raises ``ValueError`` naming the argument, what it got and what
it needs, before any work starts.

Memory
------
Every request that sizes an allocation (kept posterior draws, simulated
ratings, posterior predictive replicates, the arrays of a fit file) is
checked by :func:`check_memory` before the work starts, against
``max_memory_gib``: the caller's value, or :data:`DEFAULT_MAX_MEMORY_GIB`
(1 GiB) when it is None.  A request above the limit raises
:class:`MemoryLimitError` (a ``ValueError``) saying what it would need, what
the limit is and how to ask for less.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

import numpy as np

__all__ = [
    "label_repr",
    "labels_repr",
    "MAX_SEED",
    "check_int",
    "check_seed",
    "resolve_seed",
    "check_number",
    "check_probability",
    "check_choice",
    "GIB",
    "DEFAULT_MAX_MEMORY_GIB",
    "MemoryLimitError",
    "memory_limit",
    "check_memory",
]

#: seeds are integers in [0, MAX_SEED): the range every engine accepts (Stan's seeds are 31-bit positive)
MAX_SEED = 2**31
#: bytes in a GiB
GIB = 2.0**30
#: the memory limit of one request when ``max_memory_gib`` is None: the Gibbs sampler's default budget
DEFAULT_MAX_MEMORY_GIB = 1.0


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


class MemoryLimitError(ValueError):
    """A request that would need more memory than ``max_memory_gib`` allows (raised before any work).

    Attributes
    ----------
    what : str
        What the memory is for (``"the kept draws"``, ...).
    needed_gib : float
        What the request would need, in GiB.
    limit_gib : float
        The limit it was checked against, in GiB.
    ask : tuple of str
        The arguments that ask for less, as named in the message (e.g.
        ``("thin", "draws", "data_format")``); the command line maps them to
        its flags.
    """

    def __init__(self, message: str, what: str, needed_gib: float, limit_gib: float, ask: tuple[str, ...]) -> None:
        super().__init__(message)
        self.what = what
        self.needed_gib = needed_gib
        self.limit_gib = limit_gib
        self.ask = ask

    @property
    def suggested_limit_gib(self) -> float:
        """A ``max_memory_gib`` that the request fits in: its need rounded up to a tenth of a GiB."""
        return math.ceil(round(self.needed_gib * 10, 6)) / 10


def memory_limit(max_memory_gib: Any, name: str = "max_memory_gib") -> float:
    """``max_memory_gib`` as a positive float; None gives :data:`DEFAULT_MAX_MEMORY_GIB`."""
    if max_memory_gib is None:
        return DEFAULT_MAX_MEMORY_GIB
    if isinstance(max_memory_gib, (str, bytes)):
        raise ValueError(f"{name} must be a positive number, got {max_memory_gib!r}")
    return check_number(name, max_memory_gib, 0, strict_minimum=True, allow_inf=True)


#: how each argument that asks for less reads in a message (arguments not listed read as themselves)
_ASK_TEXT = {
    "thin": "a larger thin= (keep every thin-th draw)",
    "draws": "fewer draws",
    "chains": "fewer chains",
    "data_format": "the grouped format (data_format='grouped': one unit per distinct rating pattern)",
    "log_lik": "log_lik=False (no per-unit log-likelihood: no LOO/WAIC)",
    "n_items": "fewer n_items",
    "n_raters": "fewer n_raters",
    "raters_per_item": "fewer raters_per_item",
    "repeats": "fewer repeats",
    "design": "a smaller design",
}


def check_memory(
    what: str,
    n_bytes: float,
    max_memory_gib: Any = None,
    ask: tuple[str, ...] = ("thin", "draws", "data_format"),
    detail: str = "",
) -> None:
    """Refuse a request whose ``n_bytes`` exceed ``max_memory_gib`` (None: :data:`DEFAULT_MAX_MEMORY_GIB`).

    Parameters
    ----------
    what : str
        What the memory is for, e.g. ``"the kept draws of pi and theta"``.
    n_bytes : float
        What the request would allocate (float: the product of huge requests may exceed int64).
    max_memory_gib : float or None
        The limit in GiB (``inf`` switches the check off).
    ask : tuple of str
        The arguments that ask for less, in the order to suggest them (see
        :class:`MemoryLimitError`); ``max_memory_gib`` is always suggested last.
    detail : str
        How ``n_bytes`` was counted (e.g. ``"4 chains x 10^9 draws x 25 numbers x 8 bytes"``).

    Raises
    ------
    MemoryLimitError
        ``"<what> would need X GiB (<detail>); the limit is max_memory_gib=Y. Ask for less: ...,
        or pass max_memory_gib >= X"``, before any work.
    """
    limit = memory_limit(max_memory_gib)
    if not n_bytes > limit * GIB:  # NaN-safe: a NaN need is not refused here
        return
    needed = float(n_bytes) / GIB
    err = MemoryLimitError("", what, needed, limit, tuple(ask))
    options = [_ASK_TEXT.get(a, a) for a in ask]
    text = (
        f"{what} would need {_gib_text(needed)} GiB"
        + (f" ({detail})" if detail else "")
        + f"; the limit is max_memory_gib={limit:g}. Ask for less: "
        + ", ".join(options)
        + ("," if options else "")
        + f" or pass max_memory_gib={err.suggested_limit_gib:g} if the machine has that much memory to spare"
    )
    err.args = (text,)
    raise err


def _gib_text(gib: float) -> str:
    """GiB with two decimals, three significant digits below 0.01 (never "0.00"), scientific notation when huge."""
    if gib >= 1e6:
        return f"{gib:.2e}"
    return f"{gib:.2f}" if gib >= 0.01 or gib == 0 else f"{gib:.3g}"


def label_repr(value: Any) -> str:
    """Repr of a label for a message; numpy scalars (``np.int64(3)`` under numpy 2) shown as plain values."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def labels_repr(values: Iterable[Any], limit: int = 8) -> str:
    """The first ``limit`` labels for a message, comma-separated (:func:`label_repr`), and how many more."""
    values = list(values)
    text = ", ".join(label_repr(v) for v in values[:limit])
    if len(values) > limit:
        text += f", ... ({len(values) - limit} more)"
    return text
