"""No third-party noise on first use (issue 13, item 18).

Each check runs in a fresh interpreter: ArviZ 0.x warns once a day (a stamp
file in the user cache, redirected to a temp dir here) and tqdm.auto warns
"IProgress not found" in a Jupyter kernel without ipywidgets (faked here).
Each test also runs the unguarded import to show that the noise is real.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]

# a Jupyter kernel without ipywidgets, as tqdm.autonotebook detects it
FAKE_KERNEL = """
import sys, types
class ZMQInteractiveShell:
    config = {"IPKernelApp": {}}
ipython = types.ModuleType("IPython")
ipython.get_ipython = lambda: ZMQInteractiveShell()
sys.modules["IPython"] = ipython
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
sys.modules["ipywidgets"] = None
"""


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONWARNINGS="default")
    env["PYTHONPATH"] = str(REPO / "python") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )


def test_import_prints_nothing_even_in_a_kernel_without_ipywidgets(tmp_path):
    res = _run(FAKE_KERNEL + "import pyrater\n", tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    # the same environment does make tqdm.auto complain when imported directly
    raw = _run(FAKE_KERNEL + "import tqdm.auto\n", tmp_path)
    assert "IProgress not found" in raw.stderr


def test_arviz_is_imported_without_its_refactor_warning(tmp_path):
    res = _run(
        "import pyrater\nfrom pyrater._quiet import import_arviz\naz = import_arviz()\nprint(az.__name__)\n", tmp_path
    )
    assert res.returncode == 0 and res.stdout.strip() == "arviz" and res.stderr == "", res.stderr
    import arviz

    if arviz.__version__.startswith("0."):  # ArviZ 0.x warns on import once a day; 1.x does not
        fresh = tmp_path / "fresh"
        fresh.mkdir()
        assert "ArviZ is undergoing a major refactor" in _run("import arviz\n", fresh).stderr


def test_cli_warnings_are_one_line_without_source(tmp_path, capsys):
    from pyrater.cli import main

    path = tmp_path / "wide.csv"
    pd.DataFrame({"r1": [1, 2, np.nan, 1, 2, 1], "r2": [1, 2, np.nan, 2, 2, 1], "r3": [1, 1, np.nan, 1, 2, 2]}).to_csv(
        path, index=False
    )
    code = main(["fit", str(path), "--format", "wide", "--method", "em", "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [line for line in err.splitlines() if "no rating" in line]
    assert len(lines) == 1 and lines[0].startswith("pyrater: warning: 1 item has no rating"), err
    assert "warnings.warn" not in err and "UnratedItemsWarning" not in err
