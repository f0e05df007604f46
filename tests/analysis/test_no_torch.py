"""Reading results loads no torch: the analysis modules (which load no algorithm either), and
``metabench table`` and ``plot`` from the command line, run in a fresh interpreter that never
imports it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.factories import ROOT, make_result


def not_loaded(*modules: str) -> str:
    """A line of Python that fails, naming them, if any of ``modules`` was imported."""
    return f"\nloaded = {set(modules)!r} & set(sys.modules); assert not loaded, loaded"


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter from the repository root."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_the_analysis_modules_import_without_torch() -> None:
    modules = [
        f"metabench.{package}.{path.stem}"
        for package in ("analysis", "records")
        for path in sorted((ROOT / "metabench" / package).glob("*.py"))
        if path.stem != "__init__"
    ]
    assert "metabench.analysis.tables" in modules and "metabench.analysis.plots" in modules
    shown = run_python(f"import sys, {', '.join(modules)}" + not_loaded("torch", "metabench.algos"))
    assert shown.returncode == 0, shown.stderr[-2000:]


def test_table_and_plot_commands_run_without_torch(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for seed, returns in enumerate([[1.0, 2.0, 3.0], [2.0, 3.0, 5.0]]):
        folder = results / "Bandit" / f"nop-seed{seed}"
        folder.mkdir(parents=True)
        result = make_result("Bandit", "nop", seed, [returns, returns])
        (folder / "result.json").write_text(json.dumps(result.to_json()))
    out = tmp_path / "out"
    commands = [
        ["table", "--results", str(results), "--out", str(out / "table")],
        ["plot", "--results", str(results), "--out", str(out / "plot")],
    ]
    code = "import sys; from metabench.cli import main\n" + "".join(
        f"assert main({command!r}) == 0, {command!r}\n" for command in commands
    )
    shown = run_python(code + not_loaded("torch"))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert (out / "table" / "README.md").read_text().count("nop") > 0
    # --out means one thing to both: the folder whose plots/ holds the PNGs
    plotted = sorted(path.name for path in (out / "plot" / "plots").glob("*.png"))
    assert plotted
    assert plotted == sorted(path.name for path in (out / "table" / "plots").glob("*.png"))
