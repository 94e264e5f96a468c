"""Imports of optional-display dependencies without their first-use noise.

Two third-party messages reach users on a first use although nothing is
wrong with their work: ArviZ 0.x's daily ``FutureWarning`` ("ArviZ is
undergoing a major refactor", on import) and tqdm's "IProgress not found"
(``tqdm.auto`` in Jupyter without ipywidgets, where it falls back to a text
bar).  pyrater imports both through here, silencing exactly those two
messages for the duration of the import; every other warning passes.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

__all__ = ["import_arviz", "import_tqdm", "progress_bar", "PROGRESS_DELAY"]


def import_arviz() -> ModuleType:
    """``import arviz``, without ArviZ 0.x's daily refactor FutureWarning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning)
        import arviz

    return arviz


def import_tqdm() -> Any:
    """``tqdm.auto.tqdm``, without the "IProgress not found" warning (text bar fallback)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*IProgress not found")
        from tqdm.auto import tqdm

    return tqdm


#: seconds a step must run before its progress bar appears (quick steps print nothing)
PROGRESS_DELAY = 2.0


def progress_bar(show: bool, total: int | None, desc: str, unit: str = "it") -> Any:
    """A tqdm bar for a step of ``total`` units, shown only when ``show`` and the step runs > 2 s.

    Without a total tqdm prints the count and the unit side by side: a space
    keeps them apart ("EM: 115 iterations"; tqdm adds no plural).
    """
    tqdm = import_tqdm()
    if total is None:
        unit = f" {unit.strip()}s"
    return tqdm(total=total, desc=desc, unit=unit, disable=not show, delay=PROGRESS_DELAY, leave=False)
