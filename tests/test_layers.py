"""The package's dependencies point one way (``docs``' Boundaries): nothing under
``metabench.algos`` imports the harness, which reads the spec files and runs the algorithms."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

ALGORITHM_MODULES = [
    "metabench.algos",
    "metabench.algos.implementation",
    "metabench.algos.rl2.algorithm",
    "metabench.algos.maml",
    "metabench.algos.nop",
    "metabench.algos.cem",
    "metabench.algos.cmaes",
    "metabench.algos.reference",
    "metabench.algos.metaworld_adapter",
]


def imported_after(module: str) -> list[str]:
    """The ``metabench`` modules a fresh interpreter holds after ``import module``."""
    probe = (
        f"import importlib, json, sys\nimportlib.import_module({module!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('metabench'))))\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    modules: list[str] = json.loads(shown.stdout)
    return modules


@pytest.mark.parametrize("module", ALGORITHM_MODULES)
def test_an_algorithm_module_does_not_import_the_harness(module):
    modules = imported_after(module)
    assert module in modules
    assert not [name for name in modules if name.startswith("metabench.harness")]
