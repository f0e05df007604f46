"""The README and the docs pages cannot drift from the code: their Python blocks run, the names
the "What is here" table (``docs/index.md``) lists import from the module beside them, every
``metabench.…`` path they name resolves, every module of the package is on an API reference page,
and the README's links reach an existing file and heading (``make docs`` checks the pages' own
links, with ``mkdocs build --strict``).

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
from tests.factories import ROOT

README = ROOT / "README.md"
BASELINES = ROOT / "baselines"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
"""The README and every page of the docs site."""
TEXTS = {path: path.read_text(encoding="utf-8") for path in PAGES}

MARKERS = {"slow", "mujoco", "metaworld", "skip"}
"""What a ``readme-test`` comment may name."""

BLOCK = re.compile(
    r"(?:^[ ]*<!-- readme-test: (?P<marks>[^>]*?) -->\n)?"
    r"^(?P<indent>[ ]*)```python\n(?P<code>.*?)^(?P=indent)```$",
    re.MULTILINE | re.DOTALL,
)
"""A ```python fence, at the line start or indented inside a list item, with its marker line."""


def python_blocks() -> list[Any]:
    """Every ```python block of the README and the pages as a pytest param (the file and the
    code), with its markers."""
    params = []
    for path, text in TEXTS.items():
        name = path.relative_to(ROOT).as_posix()
        for match in BLOCK.finditer(text):
            names = (match["marks"] or "").split()
            unknown = set(names) - MARKERS
            assert not unknown, f"{name}: unknown readme-test marker(s) {sorted(unknown)}"
            line = text.count("\n", 0, match.start("code")) + 1
            marks = [
                pytest.mark.skip(reason="marked readme-test: skip") if mark == "skip"
                else getattr(pytest.mark, mark)
                for mark in names
            ]  # fmt: skip
            code = textwrap.dedent(match["code"])
            params.append(pytest.param(path, code, id=f"{name}:line{line}", marks=marks))
    return params


BLOCKS = python_blocks()


def test_the_docs_have_python_blocks_to_run() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize(("path", "code"), BLOCKS)
def test_a_docs_python_block_runs(path: Path, code: str) -> None:
    exec(compile(code, str(path), "exec"), {"__name__": "readme"})


def what_is_here() -> list[tuple[list[str], list[str]]]:
    """The rows of the "What is here" table: (names in the piece column, modules beside it)."""
    (text,) = [text for text in TEXTS.values() if "\n## What is here\n" in text]
    section = text.split("## What is here", 1)[1].split("\n#", 1)[0]
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
    samplers = {"SetTaskSampler", "ListTaskSampler", "MetaWorldTaskSampler"}
    assert any(samplers <= set(names) for names, _ in rows)


@pytest.mark.parametrize(
    ("names", "modules"), what_is_here(), ids=lambda value: "+".join(value)[:60]
)
def test_every_name_the_table_lists_imports_from_a_module_beside_it(names, modules) -> None:
    """Every name in the piece column is a public name (``__all__``, where a module has one) of
    a module of the row, a method of a class it names (``train``), an algorithm (a file in
    ``baselines/``: ``maml-trpo``) or a module itself (``metabench.algos.common.trpo``)."""
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
            ), f"What is here: {name} is not a public name of {', '.join(modules)}"


PATHS = sorted(
    {
        path
        for text in TEXTS.values()
        for path in re.findall(r"`(metabench\.[\w.]+(?::[\w<>]+)?)`", text)
    }
    - {ENTRY_POINT_GROUP}
)
"""Every ``metabench.…`` path in backticks, but the entry-point group (a name, no module)."""


@pytest.mark.parametrize("path", PATHS)
def test_every_metabench_path_the_docs_name_resolves(path: str) -> None:
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


def modules() -> list[str]:
    """Every module of the package, but the private ones (``_version``)."""
    package = ROOT / "metabench"
    names = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return names


def test_every_module_is_on_an_api_reference_page() -> None:
    """``docs/api/*.md`` renders each module with a ``::: module`` line; a new module needs one."""
    api = "\n".join(TEXTS[path] for path in PAGES if path.parent.name == "api")
    rendered = set(re.findall(r"^::: ([\w.]+)$", api, re.MULTILINE))
    assert len(modules()) > 50
    assert sorted(set(modules()) - rendered) == []
    assert sorted(rendered - set(modules())) == []


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading (``mkdocs.yml`` sets the same for the site): lower case, no
    punctuation, a hyphen for each space."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_github_anchor() -> None:
    assert github_anchor("A grid of runs") == "a-grid-of-runs"
    assert github_anchor("On a GPU (`--device cuda`)") == "on-a-gpu---device-cuda"
    assert github_anchor("5. PointGoal × MAML-TRPO") == "5-pointgoal--maml-trpo"


LINKS = sorted(set(re.findall(r"\]\(([^)\s]+)\)", TEXTS[README])))
"""The README's Markdown links."""


@pytest.mark.parametrize("link", [link for link in LINKS if "://" not in link])
def test_every_readme_link_reaches_a_file_and_heading(link: str) -> None:
    target, _, anchor = link.partition("#")
    path = (ROOT / target) if target else README
    assert path.exists(), f"README links to {target}, which does not exist"
    if anchor:
        text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
        headings = re.findall(r"^#+ (.+)$", text, re.MULTILINE)  # outside code blocks
        assert anchor in {github_anchor(h) for h in headings}, f"README: no heading #{anchor}"


def test_every_package_path_the_docs_name_exists() -> None:
    """A module moved (the task families' rooms moved five) leaves no page pointing at its old
    file: every ``metabench/...`` file (``.py``, ``.toml``, ...) or folder a page names is
    there."""
    named = {
        match
        for text in TEXTS.values()
        # lower-case parts: a module's path, not a Gymnasium id (metabench/AntDir-v0)
        # and not a file under another folder of that name (~/.cache/metabench/calibration.json)
        for match in re.findall(r"(?<![\w/.])(metabench/[a-z_]+(?:/[a-z_]+)*(?:\.[a-z]+)?)\b", text)
    }
    assert named
    assert sorted(path for path in named if not (ROOT / path).exists()) == []
