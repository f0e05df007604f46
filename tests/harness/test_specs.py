"""Benchmark and algorithm specs as TOML (``envs/``, ``baselines/``): the shipped files, specs of
your own through ``METABENCH_SPECS``, errors naming file and line, and the specs in a wheel."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from metabench.algos.maml import MAMLConfig
from metabench.cli import main
from metabench.harness.algorithms import clear_spec_caches, get_algorithm, load_algorithms
from metabench.harness.benchmarks import get_benchmark, load_benchmarks
from metabench.harness.grid import plan
from metabench.harness.specfiles import SpecError, find_line
from metabench.tasks.metaworld.split import MetaWorldSplit
from tests.factories import ROOT

BANDIT5 = """\
    description = "five arms"
    source = "a test"
    env_id = "metabench/Bandit-v0"
    episodes_per_trial = 5

    [tasks]
    n_arms = 5

    [split]
    kind = "seed"
    test_tasks = 4

    [evaluation]
    exploration_episodes = 2
    test_episodes = 3
"""


LIST = 'kind = "list"\nn_tasks = 3'
"""BANDIT5's split made a list of 3 tasks."""


def test_every_shipped_file_is_one_benchmark_or_algorithm():
    assert set(load_benchmarks()) == {p.stem for p in (ROOT / "envs").glob("*.toml")}
    assert set(load_algorithms()) == {p.stem for p in (ROOT / "baselines").glob("*.toml")}
    assert {"HalfCheetahVel", "HalfCheetahDir", "ML10", "ML45", "ML1-reach"} <= set(
        load_benchmarks()
    )
    assert {"nop", "cem", "cmaes", "rl2-ppo", "maml-trpo"} <= set(load_algorithms())


def test_the_shipped_specs_say_what_the_published_settings_are():
    vel = get_benchmark("HalfCheetahVel")
    assert vel.env_kwargs == {"velocity_range": [0.0, 2.0], "horizon": 100}
    assert (vel.episodes_per_trial, vel.exploration_episodes, vel.test_episodes) == (4, 10, 3)
    push = get_benchmark("ML1-push")
    assert push.split == MetaWorldSplit(benchmark="ML1")
    assert push.train_env_kwargs(3) == {
        "env_name": "push-v3",
        "horizon": 500,
        "split": "train",
        "seed": 3,
    }
    assert push.test_env_kwargs_for(3) == {**push.train_env_kwargs(3), "split": "test"}
    rl2 = get_algorithm("rl2-ppo")
    assert rl2.hyperparameters(vel, {})["ent_coef"] == 0.02  # garage's HalfCheetahVel example
    # a glob table ("ML1-*") applies to every ML1 benchmark, with its source recorded
    assert rl2.hyperparameters(push, {})["hidden_size"] == 256
    assert any("Meta-World+" in source for source in rl2.sources("ML1-push"))
    assert rl2.hyperparameters(push, {})["meta_batch_size"] == 10  # ML1-* after ML*
    maml = get_algorithm("maml-trpo")
    assert maml.profile("paper", "HalfCheetahVel").steps == 500 * 2 * 40 * 20 * 100
    # later matching tables win: ML* sets 2e7, then ML1-* sets 2e6
    assert maml.profile("paper", "ML10").steps == 20_000_000
    assert maml.profile("paper", "ML1-push").steps == 2_000_000
    assert maml.profile("quick", "HalfCheetahVel").overrides == {
        "meta_batch_size": 10,
        "episodes_per_task": 5,
    }


def test_meta_world_specs_meta_test_as_meta_world_plus_does():
    """Final meta-test: Meta-World+'s goals (ML10: the first 40 of each test class, ML45: 45,
    ML1: all 50); meta-tests during training: one Meta-World+ round of them."""
    expected = {"ML10": (40, 20), "ML45": (45, 45), "ML1-reach": (None, 10), "ML1-push": (None, 10)}
    for name, (goals, periodic) in expected.items():
        spec = get_benchmark(name)
        assert (spec.n_test_tasks, spec.split.values.get("test_goals_per_class")) == (
            "all",
            goals,
        ), name
        assert spec.n_periodic_test_tasks == periodic, name
        assert (spec.exploration_episodes, spec.test_episodes) == (10, 3)
        assert "metalearning_evaluation" in spec.source and "Meta-World+" in spec.source
    for name in ("HalfCheetahVel", "HalfCheetahDir", "PointGoal", "Bandit"):  # unchanged
        spec = get_benchmark(name)
        assert isinstance(spec.n_test_tasks, int) and spec.n_periodic_test_tasks is None


@pytest.mark.parametrize("algorithm", sorted(load_algorithms()))
def test_every_algorithm_resolves_on_every_benchmark_and_profile(algorithm):
    entry = get_algorithm(algorithm)
    for name in load_benchmarks():
        spec = get_benchmark(name)
        for profile in ("quick", "paper", "reduced"):
            settings = entry.profile(profile, name)
            if algorithm in ("cem", "cmaes") and spec.exploration_episodes < 2:
                # a generation needs two exploration episodes: refused, naming the fix
                with pytest.raises(ValueError, match="the search would never update"):
                    entry.hyperparameters(spec, settings.overrides)
                continue
            values = entry.hyperparameters(spec, settings.overrides)
            assert settings.steps >= 1 and settings.sources
            assert all(values[key] == value for key, value in settings.overrides.items())


def test_maml_on_halfcheetah_gets_garage_action_normalisation_and_rl2_does_not():
    """The published MAML setups normalise actions (scale 10); garage's RL2 examples do not."""
    maml, rl2 = get_algorithm("maml-trpo"), get_algorithm("rl2-ppo")
    for name in ("HalfCheetahVel", "HalfCheetahDir"):
        spec = get_benchmark(name)
        assert maml.env_kwargs(spec) == {"action_scale": 10.0}
        assert rl2.env_kwargs(spec) == {}
    assert maml.env_kwargs(get_benchmark("ML10")) == {}


def test_an_env_setting_of_a_baseline_is_recorded_and_reaches_both_envs(user_specs, tmp_path):
    user_specs(
        "baselines/scaled.toml",
        """        description = "zero actions on a scaled cheetah"
        entry_point = "metabench.algos.nop:NOP_IMPLEMENTATION"
        source = "a test"
        [benchmarks.HalfCheetahVel]
        source = "garage's normalize"
        env = { action_scale = 4.0 }
        [profiles.quick]
        source = "no training"
        steps = 1
        """,
    )
    from metabench.harness.run import RunSettings, benchmark_for, resolve

    spec, config = resolve(RunSettings("HalfCheetahVel", "scaled", 0, 1, tmp_path / "run"))
    assert config.env_kwargs["action_scale"] == 4.0
    assert config.hyperparameters == {"action": "zero"}  # env is not a hyperparameter
    assert spec.make_test_env(0).action_space.high.tolist() == [4.0] * 6
    assert benchmark_for("HalfCheetahVel", "scaled") == spec


def test_an_env_setting_the_task_env_does_not_take_is_an_error(user_specs, tmp_path):
    path = user_specs(
        "baselines/bad.toml",
        """        description = "d"
        entry_point = "metabench.algos.nop:NOP_IMPLEMENTATION"
        source = "a test"
        [benchmarks.PointGoal]
        source = "s"
        env = { action_scale = 4.0 }
        [profiles.quick]
        source = "no training"
        steps = 1
        """,
    )
    args = ["train", "--benchmark", "PointGoal", "--algorithm", "bad", "--out", str(tmp_path / "r")]
    with pytest.raises(SpecError, match=f"{path}.*env.action_scale is not an argument of"):
        get_algorithm("bad").env_kwargs(get_benchmark("PointGoal"))
    assert main(args) != 0


def test_a_benchmark_and_an_algorithm_of_your_own_run_through_the_cli(user_specs, tmp_path):
    user_specs("envs/Bandit5.toml", BANDIT5)
    user_specs(
        "baselines/random.toml",
        """\
        description = "random actions"
        entry_point = "metabench.algos.nop:NOP_IMPLEMENTATION"
        source = "a test"
        [benchmarks."Bandit*"]
        source = "random on bandits"
        action = "random"
        [profiles.quick]
        source = "no training"
        steps = 1
        """,
    )
    out = tmp_path / "run"
    args = ["train", "--benchmark", "Bandit5", "--algorithm", "random", "--steps", "1", "--out"]
    assert main([*args, str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    config = result["config"]
    assert config["env_kwargs"] == {"n_arms": 5}
    assert config["hyperparameters"] == {"action": "random"}
    assert config["hyperparameter_sources"] == ["a test", "random on bandits"]
    assert len(config["test_tasks"]) == 4
    assert [len(task["episode_returns"]) for task in result["metatest"]["tasks"]] == [5] * 4
    assert plan(["Bandit5"], ["random"], [0], "quick", tmp_path)[0].steps == 1


def test_two_files_with_one_name_are_an_error(user_specs):
    path = user_specs("envs/Bandit.toml", BANDIT5)
    with pytest.raises(SpecError, match=f"{path}: envs spec 'Bandit' is also defined in .*envs"):
        load_benchmarks()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("episodes_per_trial = 5", "episodes_per_trail = 5"), r":4: unknown key 'episodes_per_tr"),
        (("kind = \"seed\"", "kind = \"random\""), r":10: split kind 'random' is unknown"),
        (("test_tasks = 4", "test_tasks = \"four\""), r':11: test_tasks must be a positive i'),
        (("test_tasks = 4", "test_tasks = 0"), r":11: test_tasks must be at least 1"),
        (("test_tasks = 4", "test_tasks = \"all\""), r':11: test_tasks = "all" needs kind = "me'),
        (("test_tasks = 4", "test_goals_per_class = 4"), r":11: test_goals_per_class is for kin"),
        (("test_episodes = 3", "test_episodes = 3\nperiodic_test_tasks = 0"), r":16: periodic_te"),
        (("[evaluation]\n", "[evaluation]\nrepeat = 2\n"), r":14: unknown key 'repeat' in \[e"),
        (("n_arms = 5", "n_arms = = 5"), r"Bandit5.toml: malformed TOML: .*\(at line 7, column"),
        (("kind = \"seed\"", "kind = \"metaworld\""), r':10: \[split\] kind = "metaworld" needs'),
        (("kind = \"seed\"", "kind = \"list\""), r':10: \[split\] kind = "list" needs n_tasks'),
        (("kind = \"seed\"", f"{LIST}\ntrain_tasks = 2"), r":13: test_tasks must be at most n_ta"),
        (("kind = \"seed\"", f"{LIST}\ntrain_tasks = 0"), r":12: train_tasks must be at least 1"),
        (("test_tasks = 4", "test_tasks = 4\nn_tasks = 9"), r':12: n_tasks is for kind = "list'),
    ],
)  # fmt: skip
def test_a_bad_benchmark_file_names_file_line_and_fix(user_specs, change, message):
    user_specs("envs/Bandit5.toml", BANDIT5.replace(*change))
    with pytest.raises(SpecError, match=message):
        load_benchmarks()


def test_a_bad_number_of_test_tasks_is_one_line_naming_the_fix(user_specs):
    four = 'test_tasks must be a positive integer or "all" (every test task of a finite split)'
    everything = 'test_tasks = "all" needs kind = "metaworld" (a finite test split): give a number'
    for value, message in [('"four"', f"{four}, got 'four'"), ('"all"', everything)]:
        text = BANDIT5.replace("test_tasks = 4", f"test_tasks = {value}")
        path = user_specs("envs/Bandit5.toml", text)
        with pytest.raises(SpecError) as error:
            load_benchmarks()
        assert str(error.value) == f"{path}:11: {message}"
        clear_spec_caches()


def test_periodic_test_tasks_that_do_not_fit_the_test_tasks_stop_the_run_before_it_starts(
    user_specs, tmp_path
):
    from metabench.harness.run import RunSettings, resolve

    text = BANDIT5.replace("test_episodes = 3", "test_episodes = 3\nperiodic_test_tasks = 5")
    path = user_specs("envs/Bandit5.toml", text)
    with pytest.raises(SpecError) as error:
        resolve(RunSettings("Bandit5", "nop", 0, 1, tmp_path / "run"))
    message = "periodic_test_tasks = 5 does not fit: there are 4 test tasks: use at most 4"
    assert str(error.value) == f"{path}:16: {message}"
    assert not (tmp_path / "run").exists()


def test_a_task_argument_the_env_does_not_take_is_an_error_naming_the_valid_ones(user_specs):
    user_specs("envs/Bandit5.toml", BANDIT5.replace("n_arms = 5", "n_armz = 5"))
    with pytest.raises(SpecError, match=r"Bandit5.toml:7: .* takes no argument 'n_armz'.*n_arms"):
        get_benchmark("Bandit5")
    user_specs("envs/Bandit5.toml", BANDIT5.replace("Bandit-v0", "Bandot-v0"))
    clear_spec_caches()
    with pytest.raises(SpecError, match="env_id 'metabench/Bandot-v0' is not a registered env"):
        get_benchmark("Bandit5")


NOP_SPEC = """\
    description = "zero actions"
    entry_point = "metabench.algos.nop:NOP_IMPLEMENTATION"
    source = "a test"
    [benchmarks.Bandit]
    source = "here"
    action = "zero"
    [profiles.quick]
    source = "none"
    steps = 1
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("source = \"a test\"", "sauce = \"a test\""), r"zero.toml:3: unknown key 'sauce'"),
        (("[benchmarks.Bandit]", "[benchmarks.Bdt]"), r"zero.toml:4: \[benchmarks.Bdt\] match"),
        (("steps = 1", "steps = 0"), r"zero.toml:9: steps must be at least 1"),
        (("steps = 1", "stepz = 1"), r"zero.toml:9: unknown key 'stepz' in \[profiles.quick\]"),
        (("source = \"here\"\n", ""), r"\[benchmarks.Bandit\] needs source"),
        (("_IMPLEMENTATION\"", "E\""), r"entry_point 'metabench.algos.nop:NOPE' cannot be loaded"),
    ],
)  # fmt: skip
def test_a_bad_baseline_file_names_file_line_and_fix(user_specs, change, message):
    user_specs("baselines/zero.toml", NOP_SPEC.replace(*change))
    with pytest.raises(SpecError, match=message):
        get_algorithm("zero").implementation  # noqa: B018 - loading is what fails


def test_an_unknown_hyperparameter_in_a_baseline_file_stops_the_grid_before_it_runs(
    user_specs, tmp_path
):
    user_specs("baselines/zero.toml", NOP_SPEC.replace("action = ", "actoin = "))
    message = r"zero.toml:6: unknown hyperparameter\(s\) actoin of zero"
    with pytest.raises(ValueError, match=message):
        plan(["Bandit"], ["zero"], [0], "quick", tmp_path / "grid")
    assert not (tmp_path / "grid").exists()


def test_the_cli_reports_a_malformed_spec_in_one_line(user_specs, capsys):
    path = user_specs("envs/Broken.toml", 'description = "x\n')
    assert main(["bench", "--help"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"metabench: error: {path}: malformed TOML") and "line 1" in err
    assert "\n" not in err


def test_find_line_points_at_the_key_inside_its_table():
    text = 'a = 1\n[t]\na = 2\n[u."x-*"]\nb = 3\n'
    assert (find_line(text, "a"), find_line(text, "a", "t"), find_line(text, "x-*", "u")) == (
        1,
        3,
        4,
    )
    assert find_line(text, "b", "u.x-*") == 5 and find_line(text, "zzz") is None


@pytest.mark.slow
def test_a_built_wheel_carries_the_specs(tmp_path):
    """Build a wheel from a copy of the tree, install it into a folder, and import it with the
    site machinery off, so that neither the clone nor the editable install can be what loads."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("metabench", "envs", "baselines"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist")]
    subprocess.run([*build, str(source)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("metabench-*.whl")
    target = tmp_path / "site"
    install = [*pip, "install", "--no-deps", "--target", str(target), str(wheel)]
    subprocess.run(install, check=True, capture_output=True)
    probe = (
        "import metabench, json\n"
        "from metabench.harness.specfiles import spec_dirs\n"
        "from metabench.harness.algorithms import load_algorithms\n"
        "from metabench.harness.benchmarks import get_benchmark\n"
        "print(json.dumps([metabench.__file__, str(spec_dirs('envs')[0]), "
        "sorted(load_algorithms()), get_benchmark('HalfCheetahVel').env_kwargs]))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(target), sysconfig.get_paths()["purelib"]]),
    }
    env.pop("METABENCH_SPECS", None)
    shown = subprocess.run(
        [sys.executable, "-S", "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    package, envs, algorithms, vel = json.loads(shown.stdout)
    assert package.startswith(str(target)) and envs == str(target / "metabench/specs/envs")
    assert algorithms == sorted(p.stem for p in (ROOT / "baselines").glob("*.toml"))
    assert vel == {"velocity_range": [0.0, 2.0], "horizon": 100}


def test_list_shows_every_benchmark_and_algorithm_with_its_description(user_specs, capsys):
    user_specs("envs/Bandit5.toml", BANDIT5)
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name, spec in load_benchmarks().items():
        assert name in out and spec.env_id in out
    lines = out.splitlines()
    (index,) = [i for i, line in enumerate(lines) if "Bandit5" in line]
    assert [cell.strip() for cell in lines[index].split("│")[1:-1]] == [
        "Bandit5", "5", "2 explore + 3 test", "4", "metabench/Bandit-v0",
    ]  # fmt: skip
    assert lines[index + 1].split("│")[-2].strip() == "five arms"
    for name in load_algorithms():
        assert f"│ {name} " in out
    assert "quick 400,000, paper 80,000,000" in out  # maml-trpo's profiles
    words = " ".join(out.split())  # the titles' brackets are text, not markup rich drops
    assert "or [benchmarks.*] in baselines/*.toml" in words and "the file's [defaults])" in words


def test_list_shows_a_baseline_files_defaults_over_its_configs(capsys):
    """maml-ppo.toml's [defaults] make MAML MAML-PPO: `list` shows them as its defaults, and
    maml-trpo (no [defaults]) shows MAMLConfig's own."""
    assert main(["list"]) == 0
    defaults = {}
    for line in capsys.readouterr().out.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if len(cells) == 5 and cells[1] in ("inner_loss", "outer_optimizer"):
            defaults[cells[0], cells[1]] = cells[3]
    assert defaults["maml-ppo", "inner_loss"] == "ppo"
    assert defaults["maml-ppo", "outer_optimizer"] == "adam"
    assert defaults["maml-trpo", "inner_loss"] == MAMLConfig().inner_loss == "vpg"
    assert defaults["maml-trpo", "outer_optimizer"] == MAMLConfig().outer_optimizer == "trpo"


def test_every_shipped_baseline_names_an_implementation_in_its_algorithm_module():
    for name, entry in load_algorithms().items():
        assert entry.implementation.algorithm.__module__.startswith(entry.module), name


def test_train_steps_set_trains_budget_per_benchmark_where_steps_is_not_given(
    user_specs, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no calibration to read
    user_specs(
        "baselines/zero.toml", NOP_SPEC + '    [train_steps]\n    "Ban*" = 7\n    Bandit = 5\n'
    )
    entry = get_algorithm("zero")
    assert entry.default_steps("Bandit") == 5  # every match applies, the later wins
    assert entry.default_steps("PointGoal") == 1_000_000  # none: train's own default
    out = tmp_path / "run"
    args = ["train", "--benchmark", "Bandit", "--algorithm", "zero", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", ["metabench", *args])
    assert main(args) == 0
    assert json.loads((out / "config.json").read_text())["env_steps_budget"] == 5
    # the record names the budget the default gave, which a later default cannot change
    command = json.loads((out / "result.json").read_text())["command"]
    assert shlex.split(command)[-2:] == ["--steps", "5"]
    assert main(["train", "--benchmark", "Bandit", "--algorithm", "zero", "--steps", "3",
                 "--out", str(tmp_path / "given")]) == 0  # fmt: skip
    assert json.loads((tmp_path / "given" / "config.json").read_text())["env_steps_budget"] == 3


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("Zzz = 5", r"zero.toml:\d+: \[train_steps\] Zzz matches no benchmark; benchmarks: "),
        ("Bandt = 5", r"Bandt matches no benchmark \(did you mean 'Bandit'\?\); benchmarks: "),
        ("Bandit = 0", r"\[train_steps\] Bandit must be a positive integer \(env steps\), got 0"),
        ('Bandit = "many"', r"Bandit must be a positive integer \(env steps\), got 'many'"),
        ("Bandit = true", r"Bandit must be a positive integer \(env steps\), got True"),
    ],
)
def test_a_bad_train_steps_table_names_file_line_and_fix(user_specs, table, message):
    user_specs("baselines/zero.toml", NOP_SPEC + f"    [train_steps]\n    {table}\n")
    with pytest.raises(SpecError, match=message):
        get_algorithm("zero")


@pytest.mark.parametrize("toy", ["Bandit", "PointGoal"])
def test_the_toys_default_budgets_take_minutes_not_days(toy, tmp_path):
    """``metabench train --benchmark PointGoal --algorithm pearl`` planned 500 iterations of
    about 520 s (measured on 2 cores): 73 h for a toy. On Bandit, 1e6 steps were 5,208
    iterations of RL2 (33,333 for its variants, 50,000 for the PPO references). Without
    ``--steps``, every algorithm that runs on a toy now makes at most 500 iterations, and
    PEARL on PointGoal trains for a quarter of an hour at most at that measured pace."""
    from metabench.harness.costs import CellTimes, cell_cost
    from metabench.harness.run import RunSettings, build_algorithm, plan_run

    ran = []
    for name, entry in sorted(load_algorithms().items()):
        steps = entry.default_steps(toy)
        try:
            run = plan_run(RunSettings(toy, name, 0, steps, tmp_path / name))
            algo = build_algorithm(run.spec, run.config, None)
        except ValueError:  # for continuous actions only (Bandit's are discrete)
            continue
        per_iteration, close = algo.steps_per_iteration, getattr(algo, "close", None)
        if close is not None:
            close()
        ran.append(name)
        assert (steps // per_iteration if per_iteration else 0) <= 500, (name, steps)
        if (toy, name) == ("PointGoal", "pearl"):
            measured = CellTimes(0.0, 520.0, per_iteration, 0.0, 0.0, 1.0, 0.0)
            assert cell_cost(measured, steps, []).train_s <= 15 * 60
    assert {"nop", "rl2-ppo", "multitask"} <= set(ran)
    assert toy == "Bandit" or "pearl" in ran


def test_no_shipped_description_repeats_its_algorithms_name():
    """``metabench list`` prints ``name: description``: a description that starts with the name
    printed it twice ("multitask: multitask: ...")."""
    for name, entry in load_algorithms().items():
        first = entry.description.split(":")[0].strip().lower()
        assert first != name.lower(), (name, entry.description)


def test_a_baseline_without_settings_for_a_benchmark_says_so_in_one_line():
    pearl = get_algorithm("pearl")
    tables = [pattern for pattern, _ in pearl.benchmarks]
    assert "Bandit" not in tables and "HalfCheetahVel" in tables
    note = pearl.untuned_note("Bandit")
    assert note is not None and "\n" not in note
    assert note.endswith("add a [benchmarks.Bandit] table with the published settings to tune it")
    assert all(pattern in note for pattern in tables)
    assert pearl.untuned_note("HalfCheetahVel") is None
    assert get_algorithm("rl2-ppo").untuned_note("ML1-push") is None  # a glob table matches
    assert get_algorithm("nop").untuned_note("Bandit") is None  # no per-benchmark settings at all


def test_training_a_baseline_on_a_benchmark_it_has_no_settings_for_prints_the_note(tmp_path):
    from rich.console import Console

    from metabench.errors import RunError
    from metabench.harness.run import RunSettings
    from metabench.harness.training import train

    console = Console(record=True, width=400, file=io.StringIO())
    settings = RunSettings("Bandit", "rl2-ppo-tuned", 0, 1, tmp_path / "run")
    with pytest.raises(RunError, match="less than one iteration"):  # stops after the note
        train(settings, console=console)
    assert "note: rl2-ppo-tuned has no settings for Bandit" in console.export_text()


def test_the_benchmarks_page_lists_every_shipped_benchmark():
    page = (Path(__file__).parents[2] / "docs" / "benchmarks.md").read_text()
    shipped = {path.stem for path in (Path(__file__).parents[2] / "envs").glob("*.toml")}
    assert shipped and [name for name in sorted(shipped) if f"`{name}`" not in page] == []


def test_list_shows_only_the_names_given_and_their_text_as_written(capsys):
    assert main(["list", "pearl", "HalfCheetahVel-oyster"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│ ")}
    assert {"pearl", "HalfCheetahVel-oyster"} <= rows and "maml-trpo" not in rows
    assert "SAC on [observation, z]" in out  # a description's brackets are not markup
    assert "meta_batch_size" in out and "inner_lr" not in out  # PEARL's hyperparameters only
    with pytest.raises(SystemExit):
        main(["list", "perl"])
    assert "no benchmark or algorithm is called 'perl' (did you mean 'pearl'?)" in (
        capsys.readouterr().err
    )


CLASSIC = sorted(
    name for name in load_benchmarks() if name.endswith(("-oyster", "-varibad"))
)  # the classic suite's benchmarks, named by protocol


@pytest.mark.mujoco
@pytest.mark.parametrize("name", CLASSIC)
def test_every_classic_benchmark_gives_its_tasks_and_envs_take_them(name):
    """Each benchmark of the classic suite draws its held-out tasks (the last of its fixed list
    under oyster's protocol, its test count), and its test and train envs take them."""
    spec = get_benchmark(name)
    tasks = spec.test_tasks(0)
    assert isinstance(spec.n_test_tasks, int) and len(tasks) == spec.n_test_tasks
    env = spec.make_test_env(0)
    for task in tasks[:3]:
        _, info = env.reset(seed=0, options={"task": task})
        assert info["task"] == task
        assert env.step(env.action_space.sample())[0].shape == env.observation_space.shape
    sampler = spec.train_sampler(0)
    if name.endswith("-oyster"):  # the first tasks of the same list
        assert sampler is not None and spec.split.kind == "list"
        listed = sampler.tasks  # type: ignore[attr-defined]
        assert len(listed) == spec.split.values["train_tasks"]
        if spec.split.values["n_tasks"] == spec.split.values["train_tasks"]:
            assert listed[-len(tasks) :] == tasks  # oyster's Dir tasks: trained and tested on
    else:
        assert sampler is None and spec.split.kind == "seed"  # a task per trial
    assert spec.test_tasks(0) == tasks  # the same seed, the same tasks


def test_the_benchmarks_page_says_which_baselines_carry_published_settings():
    """docs/benchmarks.md's table of the classic suite: a cell says "none published" exactly
    where the baseline file has no [benchmarks.*] table matching the benchmark (a cell that
    names some benchmarks of its row holds for those only)."""
    page = (Path(__file__).parents[2] / "docs" / "benchmarks.md").read_text()
    header = "| benchmark | `pearl` | `maml-trpo` | `rl2-ppo` |"
    rows = page.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    algorithms = ("pearl", "maml-trpo", "rl2-ppo")
    checked = set()
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        names = re.findall(r"`([\w-]+)`", cells[0])
        for algorithm, cell in zip(algorithms, cells[1:], strict=True):
            only = re.findall(r"`([\w-]+)`:", cell)  # "`PointRobot-oyster`: ..." holds for it
            for name in names:
                published = cell != "none published" and (not only or name in only)
                assert bool(get_algorithm(algorithm).settings_for(name)) == published, (
                    name,
                    algorithm,
                )
                checked.add(name)
    assert checked == set(CLASSIC)
