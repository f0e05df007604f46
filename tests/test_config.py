"""Hyperparameters: one typed config per algorithm, values read strictly wherever they are set."""

import json
import math
from dataclasses import FrozenInstanceError

import pytest

from metabench.algos.cem import CEMConfig
from metabench.algos.cmaes import CMAESConfig
from metabench.algos.maml.config import MAMLConfig
from metabench.algos.nop import NOPConfig
from metabench.algos.reference import ReferenceConfig
from metabench.algos.rl2.rl2_ppo import RL2PPOConfig
from metabench.analysis.resultfile import read_result
from metabench.cli import hyperparameter, main
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.run import RunDirectory, RunSettings, build_algorithm, resolve
from metabench.validation import ConfigError, Layer, config_fields, resolve_config
from tests.factories import ROOT

CONFIGS = [RL2PPOConfig, MAMLConfig, NOPConfig, CEMConfig, CMAESConfig, ReferenceConfig]


@pytest.mark.parametrize("config", CONFIGS)
def test_every_field_has_a_type_a_default_and_documentation(config):
    for field in config_fields(config):
        assert field.doc, f"{config.__name__}.{field.name} has no documentation"
        assert field.type_name
    instance = config()
    with pytest.raises(FrozenInstanceError):
        instance.__setattr__(config_fields(config)[0].name, None)


def test_defaults_are_unchanged():
    """The defaults every committed result was produced with."""
    assert RL2PPOConfig() == RL2PPOConfig(
        meta_batch_size=10, episodes_per_trial=4, hidden_size=64, discount=0.99,
        gae_lambda=0.95, clip_range=0.2, n_epochs=10, batch_size=None, learning_rate=1e-3,
        ent_coef=0.02, vf_coef=0.5, max_grad_norm=0.5, normalize_advantage=False,
        reward_scale=1.0, deterministic_eval=False, step_in_workers=False,
    )  # fmt: skip
    assert MAMLConfig() == MAMLConfig(
        meta_batch_size=40, episodes_per_task=20, inner_lr=0.1, num_grad_updates=1,
        first_order=False, discount=0.99, gae_lambda=1.0, max_kl=0.01, cg_iters=10,
        cg_damping=1e-5, ls_steps=15, ls_ratio=0.8, hidden_sizes=(100, 100), init_std=1.0,
    )  # fmt: skip
    assert NOPConfig().action == "zero"
    assert CEMConfig() == CEMConfig(10, 0.2, 1.0, 1.0, 10.0)
    assert CMAESConfig() == CMAESConfig(None, 1.0)


@pytest.mark.parametrize(
    ("text", "value"),
    [("False", False), ("false", False), ("FALSE", False), ("True", True), ("true", True)],
)
def test_booleans_from_the_command_line_are_parsed_strictly(text, value):
    config = resolve_config(MAMLConfig, [Layer({"first_order": text}, "--set")])
    assert config.first_order is value


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"first_order": "no"}, "--set: first_order must be true or false, got 'no'"),
        ({"first_order": 1}, "--set: first_order must be true or false, got 1"),
        ({"cg_iters": 2.7}, "--set: cg_iters must be a positive integer, got 2.7"),
        ({"cg_iters": "2.7"}, "--set: cg_iters must be a positive integer, got '2.7'"),
        ({"cg_iters": True}, "cg_iters must be a positive integer, got True"),
        ({"inner_lr": "abc"}, "--set: inner_lr must be a positive number, got 'abc'"),
        ({"inner_lr": math.nan}, "inner_lr must be a positive number, got nan"),
        ({"max_kl": math.inf}, "max_kl must be a positive number, got inf"),
        ({"hidden_sizes": 5}, "--set: hidden_sizes must be a list of integers in [1, 4096], got 5"),
        ({"hidden_sizes": [64, 0]}, "hidden_sizes must be a list of integers in [1, 4096]"),
        ({"ls_ratio": 1.0}, "ls_ratio must be a finite number in (0, 1), got 1.0"),
    ],
)
def test_bad_values_name_where_they_were_set(values, message):
    with pytest.raises(ConfigError) as error:
        resolve_config(MAMLConfig, [Layer(values, "--set")])
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"batch_size": 0}, "batch_size must be a positive integer or null, got 0"),
        ({"clip_range": -1}, "clip_range must be a positive number, got -1"),
        ({"ent_coef": math.nan}, "ent_coef must be a non-negative number, got nan"),
        ({"learning_rate": "fast"}, "learning_rate must be a positive number, got 'fast'"),
        ({"normalize_advantage": "False "}, None),
        ({"step_in_workers": "yes"}, "step_in_workers must be true or false, got 'yes'"),
        ({"batch_size": "null"}, None),
    ],
)
def test_rl2_values(values, message):
    if message is None:
        config = resolve_config(RL2PPOConfig, [Layer(values, "--set")])
        assert config.normalize_advantage is False and config.batch_size is None
        return
    with pytest.raises(ConfigError, match="^--set: " + message.replace("(", r"\(")):
        resolve_config(RL2PPOConfig, [Layer(values, "--set")])


def test_a_config_built_in_python_is_checked_too():
    with pytest.raises(ConfigError, match="RL2PPOConfig: clip_range must be a positive number"):
        RL2PPOConfig(clip_range=-1)
    assert MAMLConfig(hidden_sizes=[8]).hidden_sizes == (8,)
    with pytest.raises(ConfigError, match="action must be one of 'zero', 'random'"):
        NOPConfig(action="sideways")  # type: ignore[arg-type]


def test_set_false_gives_false_in_config_and_algorithm(tmp_path):
    overrides = {"first_order": "False", "meta_batch_size": 2, "episodes_per_task": 2}
    settings = RunSettings(
        "PointGoal", "maml-trpo", 0, 320, tmp_path, {**overrides, "hidden_sizes": [8]}
    )
    spec, config = resolve(settings)
    assert config.hyperparameters["first_order"] is False
    assert config.hyperparameters["hidden_sizes"] == [8]
    algo = build_algorithm(spec, config, None)
    try:
        assert algo.config.first_order is False  # type: ignore[attr-defined]
    finally:
        algo.close()  # type: ignore[attr-defined]
    settings.hyperparameters = {"normalize_advantage": "False"}
    settings.algorithm = "rl2-ppo"
    assert resolve(settings)[1].hyperparameters["normalize_advantage"] is False


@pytest.mark.parametrize(
    ("algo", "setting", "message"),
    [
        ("maml-trpo", "first_order=maybe", "--set: first_order must be true or false"),
        ("maml-trpo", "cg_iters=2.7", "--set: cg_iters must be a positive integer, got 2.7"),
        ("maml-trpo", "inner_lr=abc", "--set: inner_lr must be a positive number, got 'abc'"),
        ("maml-trpo", "hidden_sizes=5", "--set: hidden_sizes must be a list of integers"),
        ("rl2-ppo", "batch_size=0", "--set: batch_size must be a positive integer or null"),
        ("rl2-ppo", "clip_range=-1", "--set: clip_range must be a positive number, got -1"),
        ("rl2-ppo", "ent_coef=NaN", "--set: ent_coef must be a non-negative number, got nan"),
        ("rl2-ppo", "learning_rate=fast", "--set: learning_rate must be a positive number"),
        ("rl2-ppo", "normalize_advantage=1", "--set: normalize_advantage must be true or false"),
        ("nop", "action=sideways", "--set: action must be one of 'zero', 'random'"),
    ],
)
def test_cli_set_errors_are_one_line(algo, setting, message, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--benchmark", "PointGoal", "--algorithm", algo, "--set", setting]
    assert main([*args, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("metabench: error: ")
    assert message in err[0]
    assert not out.exists()


MAML_SPEC = """\
    description = "maml with a bad value"
    entry_point = "metabench.algos.maml:MAML_IMPLEMENTATION"
    source = "a test"

    [benchmarks.PointGoal]
    source = "here"
    meta_batch_size = 2
    {line}

    [profiles.quick]
    source = "none"
    steps = 320
    set = {{ {profile} }}
"""


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # a TOML string is a string, not text to read as the field's type (docs/specs.md)
        ('first_order = "False"', "first_order must be true or false, got 'False'"),
        (
            'episodes_per_task = "8"',
            "episodes_per_task must be an integer in [1, 1000000], got '8'",
        ),
        ("first_order = false", None),
        ('first_order = "maybe"', "first_order must be true or false, got 'maybe'"),
        ("cg_iters = 2.7", "cg_iters must be a positive integer, got 2.7"),
        ('inner_lr = "abc"', "inner_lr must be a positive number, got 'abc'"),
        ("hidden_sizes = 5", "hidden_sizes must be a list of integers in [1, 4096], got 5"),
        ("ls_ratio = nan", "ls_ratio must be a finite number in (0, 1), got nan"),
    ],
)
def test_bad_values_in_a_baseline_file_name_file_and_line(user_specs, line, message, capsys):
    path = user_specs("baselines/mymaml.toml", MAML_SPEC.format(line=line, profile=""))
    args = ["train", "--benchmark", "PointGoal", "--algorithm", "mymaml", "--out", "/nonexistent/x"]
    spec = get_benchmark("PointGoal")
    if message is None:
        assert get_algorithm("mymaml").hyperparameters(spec, {})["first_order"] is False
        return
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"metabench: error: {path}:8: {message}"]


def test_bad_value_in_a_profile_names_its_line(user_specs, tmp_path, capsys):
    path = user_specs("baselines/mymaml.toml", MAML_SPEC.format(line="", profile="cg_iters = 0"))
    args = [
        "bench",
        "--benchmarks",
        "PointGoal",
        "--algorithms",
        "mymaml",
        "--results",
        str(tmp_path),
    ]
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"metabench: error: {path}:13: cg_iters must be a positive integer, got 0"]


def test_committed_results_resolve_to_their_recorded_configuration():
    root = ROOT / "results"
    files = sorted(root.rglob("result.json"))
    if not files:
        pytest.skip("no committed results")
    for path in files:
        result = read_result(path)  # whatever version it is in
        config = result.config
        assert RunDirectory(path.parent).read_config() == config, path  # config.json, read
        protocol = config.protocol
        metatest = result.metatest
        assert (metatest.exploration_episodes, metatest.test_episodes) == (
            protocol.exploration_episodes,
            protocol.test_episodes,
        ), path
        entry = get_algorithm(config.algorithm)
        spec = get_benchmark(config.benchmark)
        overrides = {}
        assert result.command is not None, path
        words = result.command.split()
        for index, word in enumerate(words):
            if word == "--set":
                key, value = hyperparameter(words[index + 1])  # as the CLI reads it
                overrides[key] = value
        resolved = json.loads(json.dumps(entry.hyperparameters(spec, overrides)))
        defaults = json.loads(json.dumps(entry.implementation.defaults(spec)))
        # an option added after the run, at a default that keeps the old behaviour
        added = {k for k in set(resolved) - set(config.hyperparameters) if k in defaults}
        assert {k: resolved[k] for k in added} == {k: defaults[k] for k in added}, path
        assert {k: v for k, v in resolved.items() if k not in added} == config.hyperparameters, path
        assert entry.sources(spec.name) == config.hyperparameter_sources, path


def test_list_shows_every_hyperparameter_with_its_type_and_default(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    rows = {
        tuple(cell.strip() for cell in line.split("│")[1:5])
        for line in out.splitlines()
        if line.count("│") >= 6
    }
    assert ("maml-trpo", "first_order", "true or false", "false") in rows
    assert ("maml-trpo", "hidden_sizes", "a list of integers in [1, 4096]", "[100, 100]") in rows
    assert ("rl2-ppo", "batch_size", "a positive integer or null", "null") in rows
    assert ("rl2-ppo", "discount", "a finite number in [0, 1]", "0.99") in rows
    assert ("nop", "action", "one of 'zero', 'random'", "zero") in rows


def test_single_argument_checks_refuse_bools_strings_and_non_finite_numbers():
    from metabench.validation import check_count, check_number

    assert check_count("n", 3) == 3
    for bad, message in [(True, "n must be a positive integer, got True"), (0, "got 0"),
                         (2.0, "got 2.0"), ("3", "got '3'")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            check_count("n", bad)
    with pytest.raises(ValueError, match="n must be an integer >= 2, got 1: two at least"):
        check_count("n", 1, 2, "two at least")
    assert check_number("x", 0, low=0.0) == 0.0
    for bad in (math.nan, math.inf, "1.0", False, -1.0):
        with pytest.raises(ValueError, match="x must be a non-negative number"):
            check_number("x", bad, low=0.0)


def test_recorded_config_leaves_out_later_options_at_their_default() -> None:
    from dataclasses import dataclass

    from metabench.validation import option, recorded_config

    @dataclass(frozen=True)
    class Config:
        rate: float = option(0.1, "a rate")
        fast: bool = option(False, "added later", recorded_at_default=False)

    assert recorded_config(Config()) == {"rate": 0.1}
    assert recorded_config(Config(fast=True)) == {"rate": 0.1, "fast": True}
    assert Config(**recorded_config(Config())) == Config()


def test_a_list_option_added_at_its_default_is_not_recorded():
    from metabench.algos.rl2.rl2_ppo import RL2PPOConfig
    from metabench.validation import recorded_config

    assert "encoder_sizes" not in recorded_config(RL2PPOConfig())
    assert recorded_config(RL2PPOConfig(encoder_sizes=(4,)))["encoder_sizes"] == [4]
