"""Fuzzing the fit-file reader (issue 28, item 2), with a fixed seed and a small budget.

``bench/fuzz_fitfile.py`` mutates saved fits (truncation, bit flips, swapped
groups, wrong dtypes and shapes, huge declared sizes, links and external
storage, deep, huge or ill-typed JSON) and loads each copy: every case must
give a fit equal to the original or a ``FitFileError``, within bounded time
and memory.  The fuzzer runs in a child process, so that a crash of the HDF5
library would fail this test naming the case instead of ending the test run.
The larger budget and its results: ``bench/RESULTS_fuzz_fitfile.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO, bench_module

CASES = 68  # every mutation four times: the first len(MUTATIONS) cases take one of each in turn


def test_every_mutated_file_loads_equal_or_raises_fit_file_error(tmp_path):
    mutations = list(bench_module("fuzz_fitfile").MUTATIONS)
    out = tmp_path / "summary.json"
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "fuzz_fitfile.py"),
            "--cases",
            str(CASES),
            "--seed",
            "1",
            "--time-limit",
            "10",
            "--memory-limit-mb",
            "400",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    )
    current = tmp_path / "work" / "current.json"
    if run.returncode < 0 or not out.exists():  # the process died: name the case that killed it
        case = current.read_text() if current.exists() else "(before the first case)"
        raise AssertionError(f"the fuzzer died (status {run.returncode}) at {case}:\n{run.stderr[-3000:]}")
    summary = json.loads(out.read_text())
    failures = summary["failures"]
    assert not failures, json.dumps(failures[:5], indent=1)[:4000]
    assert run.returncode == 0
    assert set(summary["outcomes"]) <= {"equal", "refused", "skipped"}
    assert summary["outcomes"].get("skipped", 0) <= CASES // 10  # mutations that could not be made are rare
    assert set(summary["by_mutation"]) == set(mutations)  # every kind of damage was tried
    assert summary["outcomes"]["refused"] >= CASES // 2 and summary["outcomes"].get("equal", 0) >= 1
    assert summary["max_seconds"] <= 10
    if summary["max_peak_mb"] is not None:
        assert summary["max_peak_mb"] <= 400
