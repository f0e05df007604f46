"""Shared fixtures: metabench registers its Gymnasium ids on import.

The speed checks (``-m benchmark``) can also save their ratios as a baseline and compare later
runs against it: ``--save-ratios FILE`` / ``--compare-ratios FILE`` (see ``docs/speed.md``).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import metabench  # noqa: F401 - registers the metabench/* ids
from metabench.atomic import atomic_write_json
from metabench.harness.timing import RATIO_TOLERANCE, ratio_regressions

_SAVED: dict[str, float] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("metabench speed ratios")
    group.addoption(
        "--save-ratios",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the ratios the speed checks measure to FILE (a baseline)",
    )
    group.addoption("--compare-ratios", type=Path, default=None, metavar="FILE",
                    help=f"fail a speed check whose ratio is more than {RATIO_TOLERANCE:.0%} "
                    "worse than in FILE")  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``gpu`` tests where torch sees no CUDA GPU (CI, most laptops)."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture
def record_ratio(request: pytest.FixtureRequest) -> Callable[[str, float, bool], None]:
    """Record a measured ratio; against a ``--compare-ratios`` baseline, fail on a regression."""
    compare: Path | None = request.config.getoption("--compare-ratios")
    baseline = json.loads(compare.read_text()) if compare is not None else {}

    def record(name: str, value: float, higher_is_better: bool) -> None:
        _SAVED[name] = value
        problems = ratio_regressions({name: (value, higher_is_better)}, baseline)
        if problems:
            pytest.fail(problems[0])

    return record


def pytest_sessionfinish(session: pytest.Session) -> None:
    path: Path | None = session.config.getoption("--save-ratios")
    if path is not None and _SAVED:  # update the ratios measured, keep the others
        saved = json.loads(path.read_text()) if path.exists() else {}
        atomic_write_json(path, dict(sorted({**saved, **_SAVED}.items())))


@pytest.fixture
def user_specs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, str], Path]]:
    """A folder of extra specs (``METABENCH_SPECS``), read instead of the cached ones; returns
    a writer of files into it."""
    from metabench.harness.algorithms import clear_spec_caches

    for kind in ("envs", "baselines"):
        (tmp_path / "specs" / kind).mkdir(parents=True)
    monkeypatch.setenv("METABENCH_SPECS", str(tmp_path / "specs"))
    clear_spec_caches()

    def write(relative: str, text: str) -> Path:
        path = tmp_path / "specs" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    yield write
    monkeypatch.delenv("METABENCH_SPECS", raising=False)
    clear_spec_caches()


SHORT_POINT_GOAL = """\
description = "PointGoal at test size: horizon 20, one exploration and one test episode"
source = "PointGoal's protocol before it followed the MAML paper's (envs/PointGoal.toml)"
env_id = "metabench/PointGoal-v0"
horizon = 20
episodes_per_trial = 2
reports_success = true

[tasks]
goal_range = [-0.5, 0.5]

[split]
kind = "seed"
test_tasks = 20

[evaluation]
exploration_episodes = 1
test_episodes = 1
"""
"""A cheap benchmark with continuous actions for runs through the harness: PointGoal's
meta-test (20 tasks x 40 episodes x 100 steps) is too long for fast tests."""


@pytest.fixture
def short_point_goal(user_specs: Callable[[str, str], Path]) -> str:
    """The name of :data:`SHORT_POINT_GOAL`, readable as a benchmark for the test."""
    user_specs("envs/PointGoalShort.toml", SHORT_POINT_GOAL)
    return "PointGoalShort"
