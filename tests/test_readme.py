"""The README cannot drift from the code: its Python blocks run, the names its "What is here"
table lists import from the module beside them, and every ``metabench.…`` path it names resolves.

A block runs in a fresh namespace. An HTML comment alone on the line before its fence gives it
pytest markers (``<!-- readme-test: slow metaworld -->``); ``skip`` leaves it out (for a block
that cannot run in a test, such as hours of training).
"""

from __future__ import annotations

import importlib
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from metabench.harness.specfiles import ENTRY_POINT_GROUP

README = Path(__file__).resolve().parents[1] / "README.md"
BASELINES = README.parent / "baselines"
TEXT = README.read_text(encoding="utf-8")

MARKERS = {"slow", "mujoco", "metaworld", "skip"}
"""What a ``readme-test`` comment may name."""

BLOCK = re.compile(
    r"(?:^[ ]*<!-- readme-test: (?P<marks>[^>]*?) -->\n)?"
    r"^(?P<indent>[ ]*)```python\n(?P<code>.*?)^(?P=indent)```$",
    re.MULTILINE | re.DOTALL,
)
"""A ```python fence, at the line start or indented inside a list item, with its marker line."""


def python_blocks() -> list[Any]:
    """Every ```python block of the README as a pytest param, with its markers."""
    params = []
    for match in BLOCK.finditer(TEXT):
        names = (match["marks"] or "").split()
        unknown = set(names) - MARKERS
        assert not unknown, f"README: unknown readme-test marker(s) {sorted(unknown)}"
        line = TEXT.count("\n", 0, match.start("code")) + 1
        marks = [
            pytest.mark.skip(reason="marked readme-test: skip") if name == "skip"
            else getattr(pytest.mark, name)
            for name in names
        ]  # fmt: skip
        code = textwrap.dedent(match["code"])
        params.append(pytest.param(code, id=f"line{line}", marks=marks))
    return params


BLOCKS = python_blocks()


def test_the_readme_has_python_blocks_to_run() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("code", BLOCKS)
def test_a_readme_python_block_runs(code: str) -> None:
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})


def what_is_here() -> list[tuple[list[str], list[str]]]:
    """The rows of the "What is here" table: (names in the piece column, modules beside it)."""
    section = TEXT.split("## What is here", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split(" | ")
        if len(cells) != 2 or not line.startswith("| ") or "---" in line:
            continue
        piece, where = cells
        modules = re.findall(r"`(metabench[\w.]*)`", where)
        if not modules:
            continue  # the header
        rows.append((re.findall(r"`([\w.-]+)`", piece), modules))
    return rows


def test_the_what_is_here_table_lists_modules() -> None:
    rows = what_is_here()
    assert len(rows) >= 10
    assert ["SetTaskSampler", "ListTaskSampler", "MetaWorldTaskSampler"] in [n for n, _ in rows]


@pytest.mark.parametrize(
    ("names", "modules"), what_is_here(), ids=lambda value: "+".join(value)[:60]
)
def test_every_name_the_table_lists_imports_from_a_module_beside_it(names, modules) -> None:
    """Every name in the piece column is a public name (``__all__``, where a module has one) of
    a module of the row, a method of a class it names (``train``), an algorithm (a file in
    ``baselines/``: ``maml-trpo``) or a module itself (``metabench.algos.trpo``)."""
    imported = [importlib.import_module(module) for module in modules]

    def exported(name: str) -> Any:
        for module in imported:
            public = getattr(module, "__all__", None)
            if hasattr(module, name) and (public is None or name in public):
                return getattr(module, name)
        return None

    classes = [exported(name) for name in names if isinstance(exported(name), type)]
    for name in names:
        if name.startswith("metabench."):
            importlib.import_module(name)
        else:
            assert (
                exported(name) is not None
                or any(hasattr(cls, name) for cls in classes)
                or (BASELINES / f"{name}.toml").is_file()
            ), f"README's What is here: {name} is not a public name of {', '.join(modules)}"


PATHS = sorted(set(re.findall(r"`(metabench\.[\w.]+(?::[\w<>]+)?)`", TEXT)) - {ENTRY_POINT_GROUP})
"""Every ``metabench.…`` path in backticks, but the entry-point group (a name, no module)."""


@pytest.mark.parametrize("path", PATHS)
def test_every_metabench_path_the_readme_names_resolves(path: str) -> None:
    """``metabench.a.b`` (a module, or a module's attribute) and ``metabench.a.b:NAME`` (an
    entry point; ``<NAME>`` stands for any name of the module)."""
    module_path, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError:
        parent, _, attribute = module_path.rpartition(".")
        assert hasattr(importlib.import_module(parent), attribute), path
        return
    if attribute and not attribute.startswith("<"):
        assert hasattr(module, attribute), path
