"""Sphinx configuration of the pyrater documentation site.

Build (as CI does, warnings are errors)::

    python -m pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html

Environment switches (all optional):

``PYRATER_DOCS_EXECUTE``
    myst-nb execution mode of the user-guide pages, ``force`` by default
    (every code cell runs on every build that reads the page); ``off``
    renders them without running anything, for quick edits of the prose.
``PYRATER_DOCS_EXECUTE_NOTEBOOKS=1``
    Also re-execute the notebooks of ``notebooks/`` (default: rendered from
    their stored outputs; the test suite executes them, and three of them fit
    Stan models for minutes).
``PYRATER_DOCS_INTERSPHINX=1``
    Link types to the numpy, pandas, xarray, ArviZ, ... documentation.  Needs
    internet at build time (intersphinx downloads the inventories), so it is
    off by default: an unreachable inventory is a warning, hence an error
    under ``-W``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent

import pyrater  # noqa: E402  (the installed package: pip install -e ".[docs]")

# -- project -----------------------------------------------------------------

project = "pyrater"
author = "the pyrater developers"
copyright = "the pyrater developers"
release = pyrater.__version__
version = ".".join(release.split(".")[:2])

# -- extensions ----------------------------------------------------------------

extensions = [
    "myst_nb",  # Markdown pages (MyST), executed code cells, the notebooks
    "numpydoc",  # numpy-style docstrings
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "jupyter_execute"]

# -- notebooks of notebooks/ -----------------------------------------------------
# The notebooks live at the repository root (the tests execute them there); Sphinx
# only reads files below docs/, so each build copies them into docs/examples/
# (git-ignored).  examples/index.md lists them in its order; a notebook it does not list
# is appended to its toctree at build time (_list_all_notebooks).

EXAMPLES = DOCS / "examples"
for old in EXAMPLES.glob("*.ipynb"):
    if not (ROOT / "notebooks" / old.name).exists():
        old.unlink()
for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
    notebook = json.loads(nb.read_text(encoding="utf-8"))
    # the stored outputs are shown as they are, warnings included (the guide pages instead
    # treat any stderr output as an error, see nb_output_stderr)
    notebook.setdefault("metadata", {})["mystnb"] = {"output_stderr": "show"}
    text = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
    target = EXAMPLES / nb.name
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")

# -- benchmark tables ------------------------------------------------------------------
# benchmarks/RESULTS.md (the landing page) includes bench/RESULTS.md; every other
# bench/RESULTS_*.md gets a page written here (git-ignored) that includes it under the same
# name, so the links between the results files resolve and a new results file appears in
# the site by itself (benchmarks/RESULTS.md lists them with a glob).

BENCHMARKS = DOCS / "benchmarks"
for old in BENCHMARKS.glob("RESULTS_*.md"):
    if not (ROOT / "bench" / old.name).exists():
        old.unlink()
for results in sorted((ROOT / "bench").glob("RESULTS_*.md")):
    page = BENCHMARKS / results.name
    text = f"```{{include}} ../../bench/{results.name}\n```\n"
    if not page.exists() or page.read_text(encoding="utf-8") != text:
        page.write_text(text, encoding="utf-8")

# -- pages that include files of the repository root ------------------------------------
# changelog.md includes CHANGELOG.md, architecture.md ARCHITECTURE.md.  While such a file does
# not exist, its page is left out of the build and its toctree entry is dropped
# (_drop_missing_pages below), so the build passes before and after it is added.

OPTIONAL_PAGES = {"changelog": "CHANGELOG.md", "architecture": "ARCHITECTURE.md"}
MISSING_PAGES = {page for page, source in OPTIONAL_PAGES.items() if not (ROOT / source).is_file()}
exclude_patterns.extend(f"{page}.md" for page in sorted(MISSING_PAGES))

# -- MyST and myst-nb ------------------------------------------------------------------

myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "amsmath"]  # notebooks use $...$ maths
myst_heading_anchors = 3

nb_execution_mode = os.environ.get("PYRATER_DOCS_EXECUTE", "force")
# notebooks/ carry their outputs and are executed by tests/test_notebooks.py;
# re-running their Stan fits here would cost minutes per build for no new check
nb_execution_excludepatterns = [] if os.environ.get("PYRATER_DOCS_EXECUTE_NOTEBOOKS") == "1" else ["examples/*.ipynb"]
nb_execution_timeout = 600  # seconds per cell (a first Gibbs fit compiles numba kernels, ~30 s)
nb_execution_raise_on_error = True  # a failing example fails the build, with its traceback
nb_execution_show_tb = True
nb_merge_streams = True
# an example that writes to stderr (an unexpected warning) is a build warning, hence an
# error under -W; a cell that shows a warning on purpose sets output_stderr: show
nb_output_stderr = "warn"
nb_execution_in_temp = True  # examples that write files (fit.save, CSVs) leave nothing in docs/

# the executed pages' kernels inherit this process's environment: put the `pyrater` console
# script of the environment that builds the docs first on the PATH (the CLI page runs it)
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

# -- autodoc, autosummary, numpydoc ---------------------------------------------------

autosummary_generate = True  # writes api/generated/*.rst (git-ignored) on each build
autosummary_generate_overwrite = True
autodoc_typehints = "none"  # types are in the numpydoc "Parameters" sections
autodoc_member_order = "groupwise"
add_module_names = False

numpydoc_show_class_members = False  # the class template lists the members itself
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"  # link only the names below (and numpydoc's defaults), not every word of a type
numpydoc_xref_aliases = {
    "RatingData": "pyrater.RatingData",
    "DistributedRatingData": "pyrater.DistributedRatingData",
    "Fit": "pyrater.Fit",
    "EMFit": "pyrater.EMFit",
    "FitSummary": "pyrater.FitSummary",
    "ELPD": "pyrater.ELPD",
    "PPCResult": "pyrater.PPCResult",
    "CalibrationResult": "pyrater.CalibrationResult",
    "Simulation": "pyrater.Simulation",
    "DataFrame": "pandas.DataFrame",
    "Series": "pandas.Series",
    "Index": "pandas.Index",
    "Generator": "numpy.random.Generator",
    "ndarray": "numpy.ndarray",
    "DataArray": "xarray.DataArray",
    "Dataset": "xarray.Dataset",
    "DataTree": "xarray.DataTree",
    "InferenceData": "arviz.InferenceData",
    "Axes": "matplotlib.axes.Axes",
    "Path": "pathlib.Path",
}
numpydoc_validation_checks: set[str] = set()  # ruff's numpy docstring rules check style; the build checks rendering

# -- intersphinx ---------------------------------------------------------------------------

intersphinx_mapping: dict[str, tuple[str, None]] = {}
if os.environ.get("PYRATER_DOCS_INTERSPHINX") == "1":
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "scipy": ("https://docs.scipy.org/doc/scipy", None),
        "pandas": ("https://pandas.pydata.org/docs", None),
        "xarray": ("https://docs.xarray.dev/en/stable", None),
        "arviz": ("https://python.arviz.org/en/stable", None),
        "matplotlib": ("https://matplotlib.org/stable", None),
        "dask": ("https://docs.dask.org/en/stable", None),
        "distributed": ("https://distributed.dask.org/en/stable", None),
        "cmdstanpy": ("https://mc-stan.org/cmdstanpy", None),
    }

if not intersphinx_mapping:
    # numpydoc's default links point into the Python and NumPy inventories: without them
    # a :ref:/:term: link warns and a :class: link shows as "python:float".  Plain names instead.
    from numpydoc.xref import DEFAULT_LINKS

    for _word, _target in DEFAULT_LINKS.items():
        if "python:" in _target or "numpy:" in _target:
            numpydoc_xref_aliases.setdefault(_word, _word)

# -- HTML ------------------------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"pyrater {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_sidebars = {"index": [], "getting_started": [], "changelog": []}
html_show_sourcelink = False

# notebooks/lcm_graph.ipynb goes from "#" to "###" headings, fine in Jupyter, a MyST warning here
suppress_warnings = ["myst.header"]


# -- hooks --------------------------------------------------------------------------------------


def _drop_missing_pages(app, docname: str, source: list[str]) -> None:
    """Remove the toctree entries of the optional pages whose source file does not exist."""
    if MISSING_PAGES and docname in (root_doc, "development"):
        source[0] = "\n".join(line for line in source[0].splitlines() if line.strip() not in MISSING_PAGES)


def _list_all_notebooks(app, docname: str, source: list[str]) -> None:
    """Append the notebooks that examples/index.md does not list to the end of its toctree."""
    if docname != "examples/index":
        return
    text = source[0]
    start = text.index("```{toctree}")
    end = text.index("```", start + 3)
    listed = {line.strip() for line in text[start:end].splitlines()}
    missing = [nb.stem for nb in sorted(EXAMPLES.glob("*.ipynb")) if nb.stem not in listed]
    source[0] = text[:end] + "".join(f"{name}\n" for name in missing) + text[end:]


# Classes that pyrater builds and returns (fits, summaries, data containers): their dataclass
# constructor is not how a user gets one, so their pages show no constructor signature.
# Classes a user constructs (the model families, contrib estimators) keep theirs.
RESULT_CLASSES = {
    "pyrater.RatingData",
    "pyrater.DistributedRatingData",
    "pyrater.Fit",
    "pyrater.EMFit",
    "pyrater.FitSummary",
    "pyrater.ELPD",
    "pyrater.PPCResult",
    "pyrater.CalibrationResult",
    "pyrater.Simulation",
}


def _hide_constructor(app, what, name, obj, options, signature, return_annotation):
    if what == "class" and name in RESULT_CLASSES:
        return "", None
    return None


def setup(app) -> None:
    """Sphinx extension hook: the build-time edits of this site."""
    app.connect("source-read", _drop_missing_pages)
    app.connect("source-read", _list_all_notebooks)
    app.connect("autodoc-process-signature", _hide_constructor)
