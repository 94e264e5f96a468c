"""The ```python blocks of the documentation pages run as written (issue 24).

The guide pages whose examples are cheap are executed by the Sphinx build itself
(myst-nb ``{code-cell}`` blocks, ``nb_execution_raise_on_error``); the pages whose
examples fit Stan models or start a Dask cluster show plain ```python blocks, which
the build does not run.  This test runs those: the blocks of one page in order, in
one namespace (a page reads as one session), in a temporary working directory, and
they must not warn (as tests/test_readme.py).

A block whose code contains ``if __name__ == "__main__":`` (e.g. one that starts a
Dask ``LocalCluster``, whose worker processes re-import the main module) runs as a
script in a fresh interpreter.  A block preceded by ``<!-- docs-test: skip -->`` is
not run; ``<!-- docs-test: needs cmdstanpy -->`` skips it when no CmdStan
installation is found; ``<!-- docs-test: warns -->`` lets it warn (for an example
that shows a diagnostic warning on purpose).  Markers combine: ``needs cmdstanpy, warns``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

DOCS = Path(__file__).resolve().parents[1] / "docs"
MARKER = re.compile(r"<!--\s*docs-test:\s*([a-z ,]+?)\s*-->")
KNOWN_MARKERS = {"skip", "needs cmdstanpy", "warns"}


def python_blocks(text: str) -> list[tuple[int, str, frozenset[str]]]:
    """(line number, code, markers) of each ```python block of a Markdown page."""
    blocks = []
    for m in re.finditer(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```[ \t]*$", text, flags=re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        indent = len(m.group(1))
        code = "\n".join(row[indent:] for row in m.group(2).splitlines()) + "\n"
        before = text[: m.start()].rstrip().splitlines()
        marker = MARKER.fullmatch(before[-1].strip()) if before else None
        markers = frozenset(part.strip() for part in marker.group(1).split(",")) if marker else frozenset()
        assert markers <= KNOWN_MARKERS, f"line {line}: unknown docs-test marker {sorted(markers - KNOWN_MARKERS)}"
        blocks.append((line, code, markers))
    return blocks


PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and python_blocks(p.read_text()))


def test_block_extraction():
    text = (
        "x\n```python\na = 1\n```\n<!-- docs-test: skip -->\n```python\nb = 2\n```\n"
        "- item\n\n  ```python\n  c = 3\n  ```\n```bash\nls\n```\n"
        "<!-- docs-test: needs cmdstanpy, warns -->\n```python\nd = 4\n```\n"
    )
    assert python_blocks(text) == [
        (2, "a = 1\n", frozenset()),
        (6, "b = 2\n", frozenset({"skip"})),
        (11, "c = 3\n", frozenset()),
        (18, "d = 4\n", frozenset({"needs cmdstanpy", "warns"})),
    ]


def test_pages_have_no_placeholders():
    assert PAGES, "no documentation page with a ```python block"
    for page in PAGES:
        for line, code, _ in python_blocks(page.read_text()):
            where = f"{page.relative_to(DOCS)}:{line}"
            assert not re.search(r"\(\s*\.\.\.\s*\)|=\s*\.\.\.|\[\s*\.\.\.\s*\]", code), f"placeholder '...' at {where}"
            compile(code, where, "exec")


def _cmdstan_found() -> bool:
    try:
        import cmdstanpy

        cmdstanpy.cmdstan_path()
    except Exception:
        return False
    return True


@pytest.mark.stan
@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_blocks_run(page: Path, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for line, code, markers in python_blocks(page.read_text()):
        where = f"{page.relative_to(DOCS)}:{line}"
        if "skip" in markers or ("needs cmdstanpy" in markers and not _cmdstan_found()):
            continue
        ran += 1
        if 'if __name__ == "__main__":' in code:
            script = tmp_path / f"block_{line}.py"
            script.write_text(code)
            done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"{where} failed:\n{done.stderr[-3000:]}"
            continue
        try:
            with warnings.catch_warnings():
                # a documented example must run clean, unless it shows a warning on purpose
                warnings.simplefilter("default" if "warns" in markers else "error")
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                warnings.filterwarnings("ignore", category=PendingDeprecationWarning)  # from dependencies (httpstan)
                exec(compile(code, where, "exec"), namespace)
        finally:
            plt.close("all")
    if not ran:
        pytest.skip(f"every block of {page.name} is marked to skip here")
