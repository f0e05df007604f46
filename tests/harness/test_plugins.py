"""Third-party algorithms: the example plug-in end to end through both routes (an entry point,
a ``METABENCH_SPECS`` folder), what their runs record, and the plug-in contract's checks at load,
build, train and save time, each a one-line error; errors in user code name where they came
from, and ``--debug`` shows the traceback."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from metabench.cli import main
from metabench.errors import RunError
from metabench.harness.algorithms import clear_spec_caches, get_algorithm
from metabench.harness.run import CHECKPOINT_FORMAT, RunDirectory
from metabench.harness.specfiles import SpecError, tomllib
from tests.factories import ROOT

EXAMPLE = ROOT / "examples" / "my_algorithm"
EXAMPLE_SPEC = EXAMPLE / "my_algorithm" / "random-search.toml"
STEPS_PER_ITERATION = 2 * 200  # two candidates of RandomSearchConfig's steps_per_candidate


def one_error_line(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """Run ``metabench args``; check it exits 1 and ends with one ``metabench: error:`` line on
    stderr (after the progress bar, for errors during training)."""
    capsys.readouterr()
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if "error" in line] == err[-1:], err
    assert err[-1].startswith("metabench: error: "), err
    return err[-1].removeprefix("metabench: error: ")


def train_args(out: Path, algorithm: str = "random-search", steps: int = 2000) -> list[str]:
    return ["train", "--benchmark", "PointGoal", "--algorithm", algorithm,
            "--steps", str(steps), "--out", str(out)]  # fmt: skip


@pytest.fixture
def installed_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The example as ``pip install -e examples/my_algorithm`` leaves it: its package on
    ``sys.path`` and a distribution with the entry points of its ``pyproject.toml``."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    info = tmp_path / "site" / f"my_algorithm-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
            for group, points in project["entry-points"].items()
        )
    )
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    clear_spec_caches()
    yield
    clear_spec_caches()


def test_the_example_runs_end_to_end_through_its_entry_point(installed_example, tmp_path, capsys):
    run = tmp_path / "results" / "rs"
    assert main([*train_args(run, steps=2000 + 399), "--eval-every", "5"]) == 0
    result = json.loads((run / "result.json").read_text())
    assert result["iterations"] == 5  # whole iterations of the budget, never more
    assert result["env_steps"] == 5 * STEPS_PER_ITERATION
    assert set(result["metatrain"]) == {"metatrain/reward_per_step", "metatrain/accepted"}
    config = result["config"]
    assert config["hyperparameters"] == {
        "init_std": 1.0,
        "step_size": 0.05,
        "steps_per_candidate": 200,
    }
    assert config["algorithm_spec"] == {
        "spec_file": str(EXAMPLE_SPEC),
        "spec_sha256": hashlib.sha256(EXAMPLE_SPEC.read_bytes()).hexdigest(),
        "registered_by": "metabench.algorithms entry point random-search = my_algorithm",
        "entry_point": "my_algorithm:IMPLEMENTATION",
        "package": "my-algorithm",
        "package_version": "0.1.0",
    }
    assert json.loads((run / "config.json").read_text()) == config
    # evaluate rebuilds it from its checkpoint: the run's final meta-test, again
    assert main(["evaluate", str(run)]) == 0
    (evaluated,) = (run / "evaluations").glob("evaluate-*.json")
    assert json.loads(evaluated.read_text())["tasks"] == result["metatest"]["tasks"]
    assert main(["table", "--results", str(tmp_path / "results")]) == 0
    with (tmp_path / "results" / "summary.csv").open() as summary:
        rows = [(row["benchmark"], row["algorithm"]) for row in csv.DictReader(summary)]
    assert rows == [("PointGoal", "random-search")]


def test_a_spec_folder_run_records_the_command_that_reproduces_it(
    user_specs, tmp_path, monkeypatch, capsys
):
    user_specs("baselines/random-search.toml", EXAMPLE_SPEC.read_text())
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLE))
    run = tmp_path / "run"
    args = train_args(run, steps=800)
    monkeypatch.setattr(sys, "argv", ["metabench", *args])
    assert main(args) == 0
    first = json.loads((run / "result.json").read_text())
    specs = shlex.quote(str(tmp_path / "specs"))
    assert first["command"] == (
        f"METABENCH_SPECS={specs} PYTHONPATH={shlex.quote(str(EXAMPLE))} "
        f"{shlex.join([sys.executable, '-m', 'metabench', *args])}"
    )
    record = first["config"]["algorithm_spec"]
    assert record["registered_by"] == f"METABENCH_SPECS={tmp_path / 'specs'}"
    assert record["spec_file"] == str(tmp_path / "specs" / "baselines" / "random-search.toml")
    assert (record["package"], record["package_version"]) == (None, None)

    # without the variable, evaluate says what the run was trained with and what to set
    monkeypatch.delenv("METABENCH_SPECS")
    clear_spec_caches()
    line = one_error_line(capsys, ["evaluate", str(run)])
    assert line.startswith(
        f"algorithm 'random-search' of this run is not known: it was trained with "
        f"{record['spec_file']} (sha256 {record['spec_sha256']}), implemented by "
        f"my_algorithm:IMPLEMENTATION; to evaluate it, set METABENCH_SPECS={tmp_path / 'specs'}"
    )

    # in a plain shell with an empty environment, the recorded command runs it again: the same
    # numbers
    for name in ("result.json", "agent.pt"):
        (run / name).unlink()
    shell = subprocess.run(
        ["env", "-i", "bash", "-c", first["command"]], cwd=ROOT, capture_output=True, text=True
    )
    assert shell.returncode == 0, shell.stderr
    again = json.loads((run / "result.json").read_text())
    assert (again["metatest"], again["metatrain"]) == (first["metatest"], first["metatrain"])


def test_a_run_resumes_only_with_the_spec_file_it_started_with(
    user_specs, tmp_path, monkeypatch, capsys
):
    path = user_specs("baselines/random-search.toml", EXAMPLE_SPEC.read_text())
    monkeypatch.syspath_prepend(str(EXAMPLE))
    run = tmp_path / "run"
    assert main(train_args(run, steps=800)) == 0
    (run / "result.json").unlink()  # as if interrupted after its last checkpoint
    path.write_text(EXAMPLE_SPEC.read_text().replace("step_size = 0.05", "step_size = 0.05  # !"))
    clear_spec_caches()
    line = one_error_line(capsys, train_args(run, steps=800))
    assert line == (
        f"{run} was started with other spec files (differs in: algorithm_spec; its "
        f"hyperparameters and tasks are the same): restore the files as they were to resume it, "
        f"or choose another --out"
    )
    path.write_text(EXAMPLE_SPEC.read_text())  # restored: it resumes
    clear_spec_caches()
    assert main(train_args(run, steps=800)) == 0
    # a setting changed is another run
    path.write_text(EXAMPLE_SPEC.read_text().replace("step_size = 0.05", "step_size = 0.07"))
    clear_spec_caches()
    (run / "result.json").unlink()
    line = one_error_line(capsys, train_args(run, steps=800))
    assert line.startswith(f"{run} holds a different run (differs in: algorithm_spec, hyperpa")


def test_metabench_specs_naming_no_spec_folder_is_an_error(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "missing"
    monkeypatch.setenv("METABENCH_SPECS", str(missing))
    clear_spec_caches()
    try:
        line = one_error_line(capsys, ["list"])
        assert line == (
            f"METABENCH_SPECS names {missing}, which is not a folder: create it, or remove it "
            f"from METABENCH_SPECS"
        )
        flat = tmp_path / "flat"  # spec files right in the folder, not in baselines/
        flat.mkdir()
        (flat / "random-search.toml").write_text(EXAMPLE_SPEC.read_text())
        monkeypatch.setenv("METABENCH_SPECS", str(flat))
        line = one_error_line(capsys, ["list"])
        assert "holds neither envs/ nor baselines/: point METABENCH_SPECS at the folder" in line
    finally:
        monkeypatch.delenv("METABENCH_SPECS")
        clear_spec_caches()


PLUGIN = """\
from metabench.algos.implementation import Implementation
from my_algorithm import RandomSearch, RandomSearchConfig


class Mine(RandomSearch):
{body}

IMPLEMENTATION = Implementation(Mine, RandomSearchConfig)
"""

BARE = """\
from metabench.algos.base import MetaRLAlgorithm
from metabench.algos.implementation import Implementation
from my_algorithm import RandomSearchConfig


class Bare(MetaRLAlgorithm):
    def __init__(self, env):
        pass


IMPLEMENTATION = Implementation(Bare, RandomSearchConfig)
"""

Plugin = Callable[..., Path]


@pytest.fixture
def plugin(user_specs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Plugin:
    """Writes a module of the example's RandomSearch changed by ``body`` (or the whole module
    ``code``) and the spec file ``mine.toml`` naming it; returns the module's file."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    module = f"plugin_{tmp_path.name}"  # one module per test: imports are cached

    def write(body: str = "    pass", code: str | None = None, attribute: str = "IMPLEMENTATION"):
        path = tmp_path / "code" / f"{module}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(code if code is not None else PLUGIN.format(body=body))
        spec = EXAMPLE_SPEC.read_text().replace(
            "my_algorithm:IMPLEMENTATION", f"{module}:{attribute}"
        )
        user_specs("baselines/mine.toml", spec)
        return path

    return write


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_an_algorithm_without_steps_per_iteration_is_refused_before_anything_is_written(
    plugin, tmp_path, capsys
):
    plugin(code=PLUGIN.format(body="    pass").replace(
        "RandomSearch):", "RandomSearch):\n    def __init__(self, *args):\n"
        "        super().__init__(*args)\n        del self.steps_per_iteration\n"))  # fmt: skip
    out = tmp_path / "run"
    line = one_error_line(capsys, train_args(out, "mine"))
    assert line.endswith(
        "Mine does not set steps_per_iteration, so --steps cannot say how many train() "
        "iterations to run: set it to the environment steps one iteration takes (0 if Mine does "
        "not meta-train)"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("code", "attribute", "message"),
    [
        ("raise ValueError('bad at import')\n", "IMPLEMENTATION",
         "cannot be loaded: ValueError: bad at import ("),
        ("import not_installed_anywhere\n", "IMPLEMENTATION",
         "cannot be loaded: ModuleNotFoundError: No module named 'not_installed_anywhere' ("),
        ("IMPLEMENTATION = 3\n", "IMPLEMENTATION", "names 3 (int), not a metabench.algos.impl"),
        ("X = 1\n", "IMPLEMENTATION", "cannot be loaded: module plugin_"),
        (PLUGIN.format(body="    pass").replace("(Mine, Random", "(int, Random"),
         "IMPLEMENTATION", "its algorithm is <class 'int'>, not a subclass of "
         "metabench.algos.base.MetaRLAlgorithm: pass your algorithm's class"),
        (PLUGIN.format(body="    pass").replace("Mine, RandomSearchConfig", "Mine, dict"),
         "IMPLEMENTATION", "its config is <class 'dict'>, not a dataclass"),
        (BARE, "IMPLEMENTATION", "Bare is built as __init__(env, sampler, config, *, seed, "
         "env_kwargs, log_dir, device), which Bare.__init__(env) does not take (it lacks seed, "
         "env_kwargs, log_dir, device): give the constructor those arguments, or override "
         "from_benchmark"),
        (PLUGIN.format(body="    @classmethod\n    def from_benchmark(cls, envs, config, *, "
         "log_dir):\n        pass\n"), "IMPLEMENTATION", "Mine is built as from_benchmark(envs, "
         "config, *, log_dir, device), which Mine.from_benchmark(envs, config, *, log_dir) does "
         "not take (it lacks device): give it those arguments (**kwargs takes the ones it does "
         "not use)"),
        (PLUGIN.format(body="    pass").replace("from my_algorithm import", "import dataclasses"
         "\n@dataclasses.dataclass\nclass Loose:\n    x: int = 1\nfrom my_algorithm import")
         .replace("Mine, RandomSearchConfig", "Mine, Loose"), "IMPLEMENTATION",
         "its config Loose is not frozen: declare it @dataclasses.dataclass(frozen=True)"),
        (PLUGIN.format(body="    pass").replace("from my_algorithm import", "import dataclasses"
         "\n@dataclasses.dataclass(frozen=True)\nclass Plain:\n    x: int = 1\n"
         "from my_algorithm import").replace("Mine, RandomSearchConfig", "Mine, Plain"),
         "IMPLEMENTATION", "Plain.x is a plain dataclass field: declare it with "
         "metabench.validation.option(default, doc"),
        (PLUGIN.format(body="    pass").replace("RandomSearchConfig)\n", "RandomSearchConfig, "
         "lambda: {})\n"), "IMPLEMENTATION", "its benchmark_defaults takes () but is called as "
         "benchmark_defaults(spec): give it those arguments"),
        (PLUGIN.format(body="    @classmethod\n    def from_benchmark(cls, envs, config, **kw):\n"
         "        return 'an algorithm'\n"), "IMPLEMENTATION",
         "its from_benchmark returned a str, not a metabench.algos.base.MetaRLAlgorithm"),
    ],
)  # fmt: skip
def test_an_implementation_that_breaks_the_contract_is_one_line_naming_the_spec_file(
    plugin, tmp_path, capsys, code, attribute, message
):
    plugin(code=code, attribute=attribute)
    line = one_error_line(capsys, train_args(tmp_path / "run", "mine"))
    assert line.startswith(f"{tmp_path / 'specs' / 'baselines' / 'mine.toml'}: entry_point ")
    assert message in line
    assert not (tmp_path / "run").exists()


def test_an_entry_point_whose_module_is_not_found_says_how_to_make_it_importable(
    user_specs, tmp_path, capsys
):
    text = EXAMPLE_SPEC.read_text().replace("my_algorithm:", "no_such_module:")
    path = user_specs("baselines/mine.toml", text)
    line = one_error_line(capsys, train_args(tmp_path / "run", "mine"))
    assert line == (
        f"{path}: entry_point 'no_such_module:IMPLEMENTATION' cannot be loaded: no module named "
        f"'no_such_module': install the package that holds it, or add the folder that holds it "
        f"to PYTHONPATH"
    )


def test_a_file_name_that_cannot_be_an_algorithm_name_is_an_error(user_specs, capsys):
    path = user_specs("baselines/my algo.toml", EXAMPLE_SPEC.read_text())
    line = one_error_line(capsys, ["list"])
    assert line.startswith(f"{path}: 'my algo' cannot be a name")


def test_a_state_dict_a_checkpoint_cannot_read_back_is_refused_when_saved(plugin, tmp_path, capsys):
    plugin("    def state_dict(self):\n        return {'search': {'weights': self.weights}}\n")
    out = tmp_path / "run"
    line = one_error_line(capsys, train_args(out, "mine", steps=800))
    assert line.startswith(
        "Mine.state_dict()['search']['weights'] is a numpy.ndarray, which a checkpoint cannot "
        "hold: checkpoints hold only tensors and plain values"
    )
    assert not (out / "checkpoint.pt").exists()


def test_a_checkpoint_holding_other_objects_says_what_they_are_when_loaded(tmp_path):
    run = RunDirectory(tmp_path)
    state = {"format": CHECKPOINT_FORMAT, "algorithm": {"weights": np.zeros(2)}}
    torch.save(state, run.checkpoint_path)  # as an earlier metabench saved any state_dict()
    with pytest.raises(RunError) as raised:
        run.load_checkpoint()
    assert re.fullmatch(
        rf"checkpoint {re.escape(str(run.checkpoint_path))} holds objects other than tensors and "
        r"plain values \(numpy\.[\w.]+\), so it was not loaded: it was written by an older "
        r"metabench, by an algorithm whose state_dict\(\) held such objects, or is not a "
        r"metabench checkpoint; delete it to restart the run from the beginning",
        str(raised.value),
    )


def test_train_statistics_that_are_not_numbers_name_the_key(plugin, tmp_path, capsys):
    plugin("    def train(self, n):\n        super().train(n)\n"
           "        return {'metatrain/level': 'high'}\n")  # fmt: skip
    line = one_error_line(capsys, train_args(tmp_path / "run", "mine"))
    assert line == (
        "Mine.train() returned 'metatrain/level': 'high' (str), which is not a number: return "
        "numbers only"
    )


def test_a_nan_statistic_is_stored_as_null_with_a_warning_naming_it(plugin, tmp_path, capsys):
    plugin("    def train(self, n):\n        stats = super().train(n)\n"
           "        return {**stats, 'metatrain/loss': float('nan')}\n")  # fmt: skip
    out = tmp_path / "run"
    assert main(train_args(out, "mine", steps=1200)) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [
        "metabench: warning: Mine.train() returned metatrain/loss = nan at iteration 1; "
        "result.json stores it as null"
    ]
    metatrain = json.loads((out / "result.json").read_text())["metatrain"]
    assert metatrain["metatrain/loss"] is None and metatrain["metatrain/accepted"] in (0.0, 1.0)


def test_an_error_in_user_code_names_the_method_file_and_line(plugin, tmp_path, capsys):
    path = plugin(
        "    def adapt_policy(self, exploration_policy, exploration_episodes):\n"
        "        return self._fit(exploration_episodes)\n\n"
        "    def _fit(self, episodes):\n        raise ValueError('boom in adapt')\n"
    )
    args = train_args(tmp_path / "run", "mine", steps=400)
    line = one_error_line(capsys, args)
    where = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    assert line == (
        f"error in adapt_policy ({where}:{line_of(path, 'boom in adapt')}): ValueError: boom in "
        f"adapt (metabench --debug ... shows the traceback)"
    )
    with pytest.raises(ValueError, match="boom in adapt") as raised:
        main(["--debug", *args])
    assert raised.traceback[-1].name == "_fit"  # the whole traceback, down to the user's line


def test_an_error_in_metabench_itself_keeps_its_traceback(capsys, monkeypatch, tmp_path):
    """Only errors that say what to change are one line; a bug shows where it is."""
    from metabench.harness import training

    def broken(*args, **kwargs):
        raise TypeError("a bug")

    monkeypatch.setattr(training, "train", broken)
    with pytest.raises(TypeError, match="a bug"):
        main(train_args(tmp_path / "run", "nop"))


def test_the_entry_point_must_name_a_package_holding_its_spec_file(
    installed_example, tmp_path, capsys
):
    info = next((tmp_path / "site").glob("*.dist-info"))
    points = info / "entry_points.txt"
    for value, message in [
        ("my_algorithm:IMPLEMENTATION", "names the package that holds random-search.toml, not "
         "an attribute: write random-search = my_algorithm"),
        ("metabench.algos", "package metabench.algos holds no random-search.toml"),
        ("no_such_package", "package no_such_package cannot be imported (ModuleNotFoundError"),
        ("shlex", "shlex is a module, not a package: name the package (a folder with "
         "__init__.py) that holds random-search.toml"),
    ]:  # fmt: skip
        points.write_text(f"[metabench.algorithms]\nrandom-search = {value}\n")
        clear_spec_caches()
        line = one_error_line(capsys, ["list"])
        assert line.startswith(
            f"metabench.algorithms entry point random-search = {value} (of my-algorithm 0.1.0): "
        )
        assert message in line


def test_an_entry_point_named_like_a_shipped_algorithm_is_an_error(
    installed_example, tmp_path, monkeypatch
):
    package = tmp_path / "code" / "another_nop"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "nop.toml").write_text(EXAMPLE_SPEC.read_text())
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    info = next((tmp_path / "site").glob("*.dist-info"))
    (info / "entry_points.txt").write_text("[metabench.algorithms]\nnop = another_nop\n")
    clear_spec_caches()
    with pytest.raises(SpecError, match=f"{package / 'nop.toml'}: baselines spec 'nop' is also "
                       f"defined in {ROOT / 'baselines' / 'nop.toml'}: rename one"):  # fmt: skip
        get_algorithm("nop")
