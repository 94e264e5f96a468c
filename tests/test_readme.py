"""Every ```python block of README.md runs as written (issue 13, item 16).

Each block runs in a fresh namespace, in a temporary working directory (the
README saves ``fit.nc``), and must not warn: no Rhat or divergence warning
from its MCMC runs, no stray third-party warnings.  The one exception is
PSIS-LOO's Pareto-k warning, a genuine property of the anaesthesia data
that the README's ``loo`` line demonstrates.  A block preceded
by the line ``<!-- readme-test: skip -->`` is not run; use it only for code
that cannot run here (e.g. it needs files the reader supplies).
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

README = Path(__file__).resolve().parents[1] / "README.md"
SKIP = "<!-- readme-test: skip -->"


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line number, code, skipped) of each ```python block."""
    blocks = []
    for m in re.finditer(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text, flags=re.S | re.M):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip().splitlines()
        blocks.append((line, m.group(1), bool(before) and before[-1].strip() == SKIP))
    return blocks


BLOCKS = python_blocks(README.read_text())


def test_the_readme_has_python_blocks_and_no_placeholders():
    assert BLOCKS, "README.md has no ```python block"
    for line, code, _ in BLOCKS:
        assert not re.search(r"\(\s*\.\.\.\s*\)|=\s*\.\.\.|\[\s*\.\.\.\s*\]", code), (
            f"placeholder '...' in block at line {line}"
        )
        compile(code, f"README.md:{line}", "exec")  # valid Python


def test_block_extraction():
    text = "x\n```python\na = 1\n```\n<!-- readme-test: skip -->\n```python\nb = 2\n```\n```bash\nls\n```\n"
    assert python_blocks(text) == [(2, "a = 1\n", False), (6, "b = 2\n", True)]


@pytest.mark.stan
@pytest.mark.parametrize("line, code, skipped", BLOCKS, ids=[f"line{b[0]}" for b in BLOCKS])
def test_readme_block_runs(line, code, skipped, tmp_path, monkeypatch):
    if skipped:
        pytest.skip(f"README block at line {line} is marked {SKIP}")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    if 'if __name__ == "__main__":' in code:
        # a script (e.g. one starting a Dask LocalCluster, whose worker processes re-import the
        # main module): run it as the user would, as a file in a fresh interpreter
        script = tmp_path / "readme_block.py"
        script.write_text(code)
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"README.md:{line} failed:\n{done.stderr[-3000:]}"
        return
    namespace: dict = {"__name__": "__readme__"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a README example must run clean
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            # ... but not pyrater's own: the README uses no deprecated path
            warnings.filterwarnings("error", category=DeprecationWarning, message=r"the module pyrater\.")
            warnings.filterwarnings("ignore", category=PendingDeprecationWarning)  # from dependencies (httpstan)
            # a real diagnostic the README shows: PSIS-LOO on the 45 anaesthesia items has items with k > 0.7
            warnings.filterwarnings("ignore", message=r".*with Pareto k > 0\.7", category=UserWarning)
            exec(compile(code, f"README.md:{line}", "exec"), namespace)
    finally:
        plt.close("all")
