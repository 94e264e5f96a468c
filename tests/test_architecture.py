"""The package's layout rules (ARCHITECTURE.md), checked on the source.

* Each concept folder imports only from the folders below it:
  ``data`` -> ``models`` -> ``fits`` -> ``inference`` -> ``checking`` ->
  ``decisions`` -> the top (``fit``, the CLI); ``contrib`` sits beside
  ``checking`` and nothing in the core imports it.  The private modules at the
  top (``_validation``, ``_arviz``, ...) are below everything.
* No import circles between modules (module-level imports).
* The old module paths of pyrater 0.1 still import, with a DeprecationWarning.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pyrater
from pyrater._deprecated import OLD_MODULES

PKG = Path(pyrater.__file__).resolve().parent

#: layer of each top-level part of the package (higher may import lower, never the reverse)
LAYERS = {
    "_arviz": 0,
    "_psis": 0,
    "_quiet": 0,
    "_stacklevel": 0,
    "_validation": 0,
    "_version": 0,
    "data": 1,
    "models": 2,
    "fits": 3,
    "inference": 4,
    "checking": 5,
    "contrib": 5.5,
    "decisions": 6,
    "fitting": 7,
    "datasets": 7,
    "plots": 7,
    "cli": 8,
    "_deprecated": 8,
    "__init__": 9,
    "__main__": 9,  # python -m pyrater: the command line
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["pyrater", *parts])] = path
    return out


def _imports(name: str, path: Path, module_level_only: bool) -> set[str]:
    """Absolute names of the pyrater modules (or packages) that ``name`` imports."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    nodes = tree.body if module_level_only else list(ast.walk(tree))
    if module_level_only:  # also imports inside if/try at module level, not in functions or TYPE_CHECKING
        nodes = [
            n
            for top in tree.body
            if not (isinstance(top, ast.If) and "TYPE_CHECKING" in ast.unparse(top.test))
            for n in ([top] if not isinstance(top, (ast.If, ast.Try)) else list(ast.walk(top)))
        ]
    out = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            if mod.startswith("pyrater"):
                out.add(mod)
                for alias in node.names:  # "from . import x" may import a module
                    out.add(f"{mod}.{alias.name}")
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("pyrater"))
    return out


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


MODULES = _modules()


def test_every_part_has_a_layer():
    assert {_part(m) for m in MODULES} <= set(LAYERS), {_part(m) for m in MODULES} - set(LAYERS)


def test_folders_import_only_from_below():
    bad = []
    for name, path in MODULES.items():
        if _part(name) in ("_deprecated", "__init__"):
            continue
        for target in _imports(name, path, module_level_only=False):
            if target not in MODULES or target == "pyrater":  # "from .. import x" yields the package too
                continue
            a, b = _part(name), _part(target)
            if a != b and (LAYERS[b] > LAYERS[a] or (LAYERS[b] == LAYERS[a] and LAYERS[a] > 0)):
                bad.append(f"{name} imports {target}")
            if b == "contrib" and a not in ("contrib", "cli", "__init__"):
                bad.append(f"{name} imports {target} (contrib is not part of the core)")
    assert not bad, "\n".join(bad)


def test_no_import_circles():
    graph = {
        name: {t for t in _imports(name, path, module_level_only=True) if t in MODULES and t != name}
        for name, path in MODULES.items()
    }
    # a package's __init__ importing its own submodules is not a circle with them
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    seen, stack, cycles = set(), [], []

    def visit(node: str) -> None:
        if node in stack:
            cycles.append(stack[stack.index(node) :] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for nxt in sorted(graph[node]):
            visit(nxt)
        stack.pop()

    for node in sorted(graph):
        visit(node)
    assert not cycles, cycles


def test_old_module_paths_import_with_a_deprecation_warning():
    code = (  # one fresh process: each old path warns once, when it is first imported (itself or as a parent)
        "import importlib, warnings\n"
        "from pyrater._deprecated import OLD_MODULES\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always', DeprecationWarning)\n"
        "    for old in sorted(OLD_MODULES):\n"
        "        importlib.import_module(old)\n"
        "print('\\n'.join(str(w.message) for w in caught if w.category is DeprecationWarning))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for old, new in OLD_MODULES.items():
        assert f"the module {old} moved to {new} " in out, (old, out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old, new in OLD_MODULES.items():
            if old not in ("pyrater.native", "pyrater.native.distributed"):  # split packages: a namespace
                assert importlib.import_module(old) is importlib.import_module(new)


def test_an_old_module_path_does_not_shadow_the_public_function_of_its_name():
    # pyrater.compare is a function and was a module in 0.1: importing the old module path must
    # leave the function in place for every later caller (the README's compare() after it)
    code = (
        "import warnings, pyrater\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import pyrater.compare\n"
        "from pyrater.compare import compare\n"
        "assert callable(pyrater.compare) and pyrater.compare is compare, pyrater.compare\n"
        "import pyrater.plots, pyrater.checking.compare as module\n"
        "assert pyrater.plots.__name__ == 'pyrater.plots' and module.compare is compare\n"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)


def test_old_names_stay_reachable():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from pyrater.kernel import class_log_posterior
        from pyrater.native.em import em as old_em
        from pyrater.stanfit import MCMCFit
    assert old_em is pyrater.em and MCMCFit is pyrater.fits.MCMCFit
    assert class_log_posterior is pyrater.models.kernels.class_log_posterior
    code = (  # a fresh process: an earlier import of pyrater.probit sets the attribute without __getattr__
        "import warnings, pyrater, pyrater.contrib.probit as new\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    assert pyrater.probit.ProbitDawidSkene is new.ProbitDawidSkene\n"
        "print(caught[0].category.__name__, caught[0].message)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("DeprecationWarning the module pyrater.probit moved to pyrater.contrib.probit"), out


def test_public_names_resolve_and_import_is_lazy():
    code = (
        "import sys, pyrater; print(sorted(m for m in ('xarray', 'numba', 'arviz', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out  # import pyrater loads none of the heavy libraries
    for name in pyrater.__all__:
        assert getattr(pyrater, name) is not None
