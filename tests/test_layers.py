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


LAYERS = [
    ("metabench.tasks",),
    ("metabench.wrappers",),
    ("metabench.vector", "metabench.data"),
    ("metabench.algos",),
    ("metabench.evaluation", "metabench.evaluation.batched"),
    ("metabench.harness",),
    ("metabench.cli",),
]
"""``docs``' Boundaries, lowest first: a package face imports from its layer and those below."""

FACES = [
    "metabench.tasks",
    "metabench.wrappers",
    "metabench.vector",
    "metabench.algos",
    "metabench.algos.maml",
    "metabench.algos.rl2",
]


def layer(module: str) -> int | None:
    """The index of ``module``'s layer in :data:`LAYERS` (``None``: a utility module)."""
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(f"{p}.") for p in prefixes):
            return index
    return None


@pytest.mark.parametrize("face", FACES)
def test_a_package_face_exports_its_names_and_imports_no_higher_layer(face):
    """In a fresh interpreter (so an import cycle would show), every name of the face's
    ``__all__`` resolves, those imported on first use included, and what the face imports
    beyond ``import metabench`` stays in its layer or below."""
    probe = (
        "import importlib, json, sys\n"
        "import metabench\n"
        "before = set(sys.modules)\n"
        f"face = importlib.import_module({face!r})\n"
        "loaded = sorted(m for m in set(sys.modules) - before if m.startswith('metabench'))\n"
        "missing = [name for name in face.__all__ if not hasattr(face, name)]\n"
        "print(json.dumps({'loaded': loaded, 'missing': missing, 'all': face.__all__}))\n"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["all"] and report["missing"] == []
    own = layer(face)
    assert own is not None
    higher = [m for m in report["loaded"] if (layer(m) or 0) > own]
    assert higher == [], f"{face} imports {higher}"
