"""The package's dependencies point one way: the layers of ``[tool.importlinter]`` in
``pyproject.toml`` (highest first), with no import cycles in any package, checked by
import-linter; the module names Python resolves from strings later (Gymnasium entry points,
lazy imports by name, the spec files' entry points), which import-linter cannot see, are checked
here against the same layers; and each package face exports the names it lists."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.factories import ROOT

PACKAGE = ROOT / "metabench"
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LAYERS = [
    [name.strip() for name in re.split(r"[|:]", entry)]
    for contract in CONFIG["contracts"]
    if contract["name"] == "layers"
    for entry in contract["layers"]
][::-1]
"""The layers, lowest first, each a list of module names."""
MODULE_REFERENCE = re.compile(r"^(metabench(?:\.\w+)+)(?::\w*)?$")


def layer(module: str) -> int | None:
    """The index of ``module``'s layer in :data:`LAYERS` (``None``: not in a layer)."""
    for index, names in enumerate(LAYERS):
        if any(module == name or module.startswith(f"{name}.") for name in names):
            return index
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def string_references() -> list[tuple[str, str]]:
    """``(module, referenced module)`` for every string constant of the package that names one
    of its modules (``"metabench.tasks.toy.envs:PointGoalEnv"``); docstrings left out."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = MODULE_REFERENCE.match(node.value)
                if match and id(node) not in docstrings:
                    found.append((module_name(path), match[1]))
    return found


def test_the_import_contracts_hold() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "importlinter.cli", "--config", str(ROOT / "pyproject.toml")],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout[-3000:] + shown.stderr[-2000:]


def test_every_module_of_the_package_has_a_layer() -> None:
    modules = [module_name(path) for path in PACKAGE.rglob("*.py")]
    assert [
        m for m in modules if m not in ("metabench", "metabench._version") and layer(m) is None
    ] == []


def test_every_part_of_the_algorithms_package_has_a_layer() -> None:
    """The ``algorithms`` contract names each algorithm and shared piece; a new one needs a line."""
    (contract,) = [c for c in CONFIG["contracts"] if c["name"] == "algorithms"]
    named = {name.strip() for row in contract["layers"] for name in row.split("|")}
    parts = {
        f"metabench.algos.{path.stem if path.is_file() else path.name}"
        for path in (PACKAGE / "algos").iterdir()
        if path.name != "__init__.py" and (path.suffix == ".py" or (path / "__init__.py").exists())
    }
    assert parts == named


def test_every_module_of_the_harness_is_in_its_contract() -> None:
    """The ``harness`` contract orders each of its modules; a new one needs a line."""
    (contract,) = [c for c in CONFIG["contracts"] if c["name"] == "harness"]
    named = {name.strip() for row in contract["layers"] for name in row.split("|")}
    modules = {
        f"metabench.harness.{path.stem}"
        for path in (PACKAGE / "harness").glob("*.py")
        if path.name != "__init__.py"
    }
    assert modules == named


def test_every_task_family_is_in_the_families_contract() -> None:
    """The ``task families`` contract names each package of ``metabench.tasks``, so that no
    family imports another; a new family needs its name there."""
    (contract,) = [c for c in CONFIG["contracts"] if c["name"] == "task families"]
    named = {name.strip() for name in contract["layers"][0].split("|")}
    packages = {
        f"metabench.tasks.{path.name}"
        for path in (PACKAGE / "tasks").iterdir()
        if (path / "__init__.py").exists()
    }
    assert packages == named


def test_a_module_named_in_a_string_is_in_the_same_layer_or_below() -> None:
    references = string_references()
    assert ("metabench.tasks.halfcheetah", "metabench.tasks.halfcheetah.vector") in references
    upward = [(a, b) for a, b in references if (layer(b) or 0) > (layer(a) or 0)]
    assert upward == []


def test_the_spec_files_name_modules_the_harness_may_load() -> None:
    """``baselines/*.toml`` and ``envs/*.toml`` are read by the harness, which imports what
    their ``entry_point`` and ``config`` name."""
    harness = layer("metabench.harness")
    assert harness is not None
    named = []
    for path in sorted([*ROOT.glob("baselines/*.toml"), *ROOT.glob("envs/*.toml")]):
        text = path.read_text(encoding="utf-8")
        named += [(path.name, m[1]) for m in re.finditer(r'"(metabench(?:\.\w+)+):\w+"', text)]
    assert named
    assert [(f, m) for f, m in named if (layer(m) or 0) > harness] == []


FACES = [
    "metabench.tasks",
    "metabench.wrappers",
    "metabench.vector",
    "metabench.algos",
    "metabench.algos.maml",
    "metabench.algos.rl2",
    "metabench.evaluation",
]


@pytest.mark.parametrize("face", FACES)
def test_a_package_face_exports_its_names_and_imports_no_higher_layer(face: str) -> None:
    """In a fresh interpreter (so that an import cycle would show), every name of the face's
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
    assert [m for m in report["loaded"] if (layer(m) or 0) > own] == []
