"""The record knows the code: a third-party algorithm's results and evaluation files record the
sha256 of its module files, and ``evaluate`` names an edit of that code as the cause when a
run's numbers are not reproduced."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from metabench.cli import main
from metabench.harness.algorithms import load_implementation
from tests.factories import ROOT

EXAMPLE = ROOT / "examples" / "my_algorithm"


def package_digest(folder: Path) -> str:
    """sha256 over each ``.py`` file of the package in ``folder``: its name, then its bytes."""
    digest = hashlib.sha256()
    for file in sorted(folder.rglob("*.py")):
        digest.update(file.relative_to(folder.parent).as_posix().encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()


@pytest.fixture
def copied_example(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Imports of ``my_algorithm`` from a copy stay in this test: the other tests import the
    example from its own folder."""
    for name in [name for name in sys.modules if name.split(".")[0] == "my_algorithm"]:
        monkeypatch.delitem(sys.modules, name)
    load_implementation.cache_clear()
    yield
    for name in [name for name in sys.modules if name.split(".")[0] == "my_algorithm"]:
        del sys.modules[name]
    load_implementation.cache_clear()


def test_an_edited_plugin_is_named_as_the_cause_of_other_numbers(
    copied_example: None,
    user_specs: Callable[[str, str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plugin = tmp_path / "plugin"
    shutil.copytree(EXAMPLE / "my_algorithm", plugin / "my_algorithm")
    module = plugin / "my_algorithm" / "__init__.py"
    user_specs(
        "baselines/random-search.toml", (plugin / "my_algorithm" / "random-search.toml").read_text()
    )
    monkeypatch.syspath_prepend(str(plugin))
    monkeypatch.setenv("PYTHONPATH", str(plugin))
    run = tmp_path / "run"
    args = ["train", "--benchmark", "PointGoal", "--algorithm", "random-search", "--steps", "800",
            "--out", str(run)]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["metabench", *args])
    assert main(args) == 0
    result = json.loads((run / "result.json").read_text())
    code = result["provenance"]["algorithm_code"]
    assert code["module"] == "my_algorithm" and code["files"] == 1
    assert code["sha256"] == package_digest(plugin / "my_algorithm")
    periodic = [json.loads(p.read_text()) for p in (run / "evaluations").glob("iteration-*.json")]
    assert all(p["provenance"]["algorithm_code"] == code for p in periodic)

    # the policy's actions halved: the same agent now meta-tests to other numbers
    source = module.read_text()
    assert source.count("action = self.weights @ features") == 1
    module.write_text(source.replace("self.weights @ features", "0.5 * (self.weights @ features)"))
    capsys.readouterr()
    evaluated = subprocess.run(
        [sys.executable, "-m", "metabench", "evaluate", str(run), "--out", str(tmp_path / "e")],
        env={**os.environ}, capture_output=True, text=True,
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    edited = package_digest(plugin / "my_algorithm")
    message = " ".join(evaluated.stderr.split())
    assert "these numbers differ from the final meta-test" in message
    assert (
        f"the code differs (algorithm module files' sha256: '{code['sha256']}' -> '{edited}')"
        in message
    )
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "e").glob("evaluate-*.json")]
    assert record["provenance"]["algorithm_code"]["sha256"] == edited
    assert record["run"] == str(run) and record["metatest_protocol"]
    # its command carries what a plain shell needs to find the plug-in, as the run's does
    words = shlex.split(record["command"])
    assert f"PYTHONPATH={plugin}" in words and words[0].startswith("METABENCH_SPECS=")
    assert words[words.index(sys.executable) :][1:4] == ["-m", "metabench", "evaluate"]
    assert not list((run / "evaluations").glob("evaluate-*.json"))  # the run's folder untouched
