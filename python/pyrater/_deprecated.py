"""Old module paths of pyrater 0.1, kept importable for one release with a DeprecationWarning.

pyrater 0.2 moved its modules into concept folders (``data/``, ``models/``,
``fits/``, ``inference/``, ``checking/``, ``contrib/``).  ``import
pyrater.kernel`` or ``from pyrater.native.em import em`` still work: a
finder on :data:`sys.meta_path` answers the old names with the new modules
(the same module objects, so monkeypatching either name patches both) and
warns once per name.  Old packages whose children moved to different places
(``pyrater.native``, ``pyrater.native.distributed``) are answered with a
small namespace module holding the public names of their successor.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Any

__all__ = ["OLD_MODULES", "install"]

#: old module path -> new module path
OLD_MODULES: dict[str, str] = {
    "pyrater.results": "pyrater.fits.base",
    "pyrater.stanfit": "pyrater.fits",
    "pyrater.pathfinder": "pyrater.fits.pathfinder",
    "pyrater.fitfile": "pyrater.fits.fitfile",
    "pyrater.kernel": "pyrater.models.kernels",
    "pyrater.simulation": "pyrater.models",
    "pyrater.stan_data": "pyrater.inference.stan.data",
    "pyrater.engines": "pyrater.inference.stan.engines",
    "pyrater.engines.base": "pyrater.inference.stan.engines.base",
    "pyrater.engines.cache": "pyrater.inference.stan.engines.cache",
    "pyrater.engines.cmdstanpy_engine": "pyrater.inference.stan.engines.cmdstanpy_engine",
    "pyrater.engines.pystan_engine": "pyrater.inference.stan.engines.pystan_engine",
    "pyrater.native": "pyrater.inference",
    "pyrater.native.em": "pyrater.inference.em.algorithm",
    "pyrater.native._fused": "pyrater.inference.em.kernel",
    "pyrater.native.gibbs": "pyrater.inference.gibbs.sampler",
    "pyrater.native._gibbs_kernel": "pyrater.inference.gibbs.kernel",
    "pyrater.native.priors": "pyrater.inference.gibbs.priors",
    "pyrater.native.results": "pyrater.fits.gibbs",
    "pyrater.native.diagnostics": "pyrater.fits.diagnostics",
    "pyrater.native.distributed": "pyrater.inference.distributed",
    "pyrater.native.distributed.data": "pyrater.data.distributed",
    "pyrater.native.distributed._require": "pyrater.data._dask",
    "pyrater.native.distributed.em": "pyrater.inference.distributed.em",
    "pyrater.native.distributed.gibbs": "pyrater.inference.distributed.gibbs",
    "pyrater.native.distributed.fit": "pyrater.inference.distributed.fit",
    "pyrater.compare": "pyrater.checking.compare",
    "pyrater.predict": "pyrater.checking.predict",
    "pyrater.calibration": "pyrater.checking.calibration",
    "pyrater.evaluate": "pyrater.checking.scoring",
    "pyrater.mixture": "pyrater.contrib.mixture",
    "pyrater.probit": "pyrater.contrib.probit",
    "pyrater.lcm": "pyrater.contrib.lcm",
}
#: old packages moved wholesale: every submodule follows (``pyrater.probit.orthant``, ...)
_MOVED_PACKAGES = ("pyrater.probit", "pyrater.lcm")
#: old packages whose children went to different places: answered by a namespace module
_SPLIT_PACKAGES = ("pyrater.native", "pyrater.native.distributed")
REMOVED_IN = "0.3"


def new_name(old: str) -> str | None:
    """The new module path of an old one, or None when ``old`` is not an old path."""
    if old in OLD_MODULES:
        return OLD_MODULES[old]
    for pkg in _MOVED_PACKAGES:
        if old.startswith(pkg + "."):
            return OLD_MODULES[pkg] + old[len(pkg) :]
    return None


def warn(old: str, new: str, stacklevel: int = 2) -> None:
    warnings.warn(
        f"the module {old} moved to {new} in pyrater 0.2 and the old path will be removed in pyrater "
        f"{REMOVED_IN}: import from {new} (or the names exported by pyrater itself)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers the old module paths with the new modules.

    The import system sets ``__spec__`` of the module a loader returns; the
    new module keeps its own (restored in :meth:`exec_module`), so relative
    imports inside it resolve as before.
    """

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("pyrater.") or new_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=fullname in _SPLIT_PACKAGES)

    def create_module(self, spec: Any) -> types.ModuleType:
        new = new_name(spec.name)
        assert new is not None
        warn(spec.name, new, stacklevel=_import_stacklevel() + 1)
        target = importlib.import_module(new)
        if spec.name not in _SPLIT_PACKAGES:
            self._specs[spec.name] = target.__spec__
            return target
        shim = types.ModuleType(spec.name, f"Deprecated alias of {new} (pyrater 0.1 layout).")
        shim.__dict__.update({k: v for k, v in vars(target).items() if not k.startswith("__")})
        shim.__path__ = []  # a package: its old submodules are answered by this finder
        return shim

    def exec_module(self, module: types.ModuleType) -> None:
        own = self._specs.pop(module.__spec__.name, None) if module.__spec__ is not None else None
        if own is not None:
            module.__spec__ = own


def _import_stacklevel() -> int:
    """Stack level of the user's import statement (outside importlib's frames)."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib") or frame.f_globals.get("__name__") == __name__
    ):
        frame, level = frame.f_back, level + 1
    return level


_FINDER = _Finder()


def install() -> None:
    """Put the finder on :data:`sys.meta_path` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
