"""Task families are found, not listed: a package of ``metabench.tasks`` with a ``FAMILY`` is
one, and two families may not claim one name."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import gymnasium as gym
import pytest

from metabench.tasks import family as family_module
from metabench.tasks.family import TaskFamily, split_kinds, task_envs, task_families
from metabench.tasks.splits import Split

DECLARATION = """\
from metabench.tasks.family import TaskEnvDeclaration, TaskFamily

FAMILY = TaskFamily(envs={{{name!r}: TaskEnvDeclaration("x:Y", 2)}}, splits={splits!r})
"""


@pytest.fixture
def folder_of_families(tmp_path, monkeypatch):
    """A package of families of one's own, searched instead of ``metabench.tasks``."""
    root = tmp_path / "families_of_mine"
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(family_module, "TASKS_FOLDER", root)
    monkeypatch.setattr(family_module, "TASKS_PACKAGE", root.name)
    task_families.cache_clear()

    def add(package: str, name: str, splits: dict[str, str] | None = None) -> Path:
        (root / package).mkdir()
        (root / package / "__init__.py").write_text(
            DECLARATION.format(name=name, splits=splits or {})
        )
        importlib.invalidate_caches()
        return root / package

    yield add
    task_families.cache_clear()
    for module in [m for m in sys.modules if m.startswith(root.name)]:
        del sys.modules[module]


def test_a_new_folder_with_a_declaration_is_a_family(folder_of_families):
    folder_of_families("walkers", "Walker", {"fixed": "x:FixedSplit"})
    folder_of_families("plain", "Plain")
    (Path(family_module.TASKS_FOLDER) / "helpers").mkdir()
    (Path(family_module.TASKS_FOLDER) / "helpers" / "__init__.py").write_text("")
    assert list(task_families()) == ["plain", "walkers"]  # a package without FAMILY is none
    assert sorted(task_envs()) == ["Plain", "Walker"]
    assert split_kinds() == {"fixed": "x:FixedSplit"}


def test_two_families_declaring_one_name_is_an_error_naming_both(folder_of_families):
    folder_of_families("first", "Cheetah")
    folder_of_families("second", "Cheetah")
    with pytest.raises(ValueError, match="task families first and second both declare 'Cheetah'"):
        task_families()


def test_a_family_may_not_take_a_built_in_kind_of_split(folder_of_families):
    folder_of_families("listing", "Lister", {"list": "x:MyList"})
    with pytest.raises(ValueError, match="listing declares the built-in split kind 'list'"):
        task_families()


def test_the_shipped_families_declare_what_registration_and_the_reader_use():
    families = task_families()
    assert {"halfcheetah", "metaworld", "toy"} <= set(families)
    assert all(isinstance(f, TaskFamily) for f in families.values())
    for name, declared in task_envs().items():
        spec = gym.spec(f"metabench/{name}-v0")
        assert (spec.entry_point, spec.vector_entry_point) == (
            declared.entry_point,
            declared.vector_entry_point,
        )
    assert set(split_kinds()) == {"metaworld"}
    assert issubclass(family_module.load_split_class("metaworld"), Split)
    with pytest.raises(KeyError):
        family_module.load_split_class("no-such-kind")
