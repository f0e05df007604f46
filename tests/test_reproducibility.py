"""Evaluating cannot change results, and reset(seed=s) determines what follows."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from metabench.cli import main
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.run import RunSettings, make_evaluator
from metabench.harness.schedule import MetaTestSchedule
from metabench.harness.training import evaluate, train
from metabench.records import MetaTestRecord
from metabench.rng import global_rng_state
from tests.factories import make_maml


def comparable(path: Path) -> dict:
    """A result file without what differs between any two runs (wall times, command line)."""
    result = json.loads(path.read_text())
    for key in ("wall_time_s", "command"):
        result.pop(key)
    result["metatrain"] = {
        key: value for key, value in result["metatrain"].items() if "/time_" not in key
    }
    return result


def test_eval_every_does_not_change_the_result_of_rl2(tmp_path, capsys):
    runs = {}
    for every in ("0", "1"):
        out = tmp_path / f"every{every}"
        args = ["train", "--benchmark", "Bandit", "--algorithm", "rl2-ppo", "--steps", "576"]
        assert main([*args, "--eval-every", every, "--out", str(out)]) == 0
        runs[every] = comparable(out / "result.json")
    assert runs["0"]["iterations"] == 3
    assert runs["1"] == runs["0"]
    assert len(list((tmp_path / "every1" / "evaluations").iterdir())) == 3


def test_eval_every_does_not_change_the_result_of_maml(tmp_path, short_point_goal):
    overrides = {"meta_batch_size": 2, "episodes_per_task": 2, "hidden_sizes": [8]}
    results = []
    for every in (0, 1):
        out = tmp_path / f"every{every}"
        run = RunSettings(
            short_point_goal,
            "maml-trpo",
            0,
            320,
            out,
            overrides,
            eval_schedule=MetaTestSchedule(every),
        )
        train(run)
        results.append(comparable(out / "result.json"))
    assert results[0]["iterations"] == 2
    assert results[1] == results[0]


@pytest.mark.parametrize(
    ("benchmark_name", "algorithm", "steps", "overrides"),
    [
        ("Bandit", "rl2-ppo", 192, {}),
        ("short_point_goal", "maml-trpo", 320, {"meta_batch_size": 2, "episodes_per_task": 2}),
        ("Bandit", "nop", 1, {}),
    ],
)
def test_evaluate_gives_the_final_metatest_of_the_run(
    tmp_path, capsys, request, benchmark_name, algorithm, steps, overrides
):
    if benchmark_name == "short_point_goal":  # a fixture: a short PointGoal of the test's own
        benchmark_name = request.getfixturevalue(benchmark_name)
    out = tmp_path / "run"
    final = train(
        RunSettings(
            benchmark_name, algorithm, 0, steps, out, overrides, eval_schedule=MetaTestSchedule(1)
        )
    )
    assert MetaTestRecord.of(evaluate(out)) == final.metatest
    assert "The same numbers as the run's final meta-test" in capsys.readouterr().err
    assert MetaTestRecord.of(evaluate(out)) == final.metatest  # evaluating changes nothing on disk


def states_equal(a: dict, b: dict) -> bool:
    return (
        torch.equal(a["torch"], b["torch"])
        and a["numpy"] == b["numpy"]
        and a["python"] == b["python"]
    )


def test_evaluation_streams_leave_every_training_state_as_it_was():
    spec = get_benchmark("PointGoal")
    tasks = spec.test_tasks(0)[:4]  # a short meta-test: the streams are what is tested
    evaluator = make_evaluator(spec, 0, test_tasks=tasks, exploration_episodes=1, test_episodes=1)
    rl2 = RL2PPO(spec.env_id, config=RL2PPOConfig(meta_batch_size=2, hidden_size=8))
    before = global_rng_state()
    with rl2.evaluation_streams(5):
        first = evaluator.evaluate(rl2)
    assert states_equal(global_rng_state(), before)
    with rl2.evaluation_streams(5):
        assert evaluator.evaluate(rl2) == first
    with rl2.evaluation_streams(6):
        assert evaluator.evaluate(rl2) != first  # a stochastic policy, another stream

    maml = make_maml(
        spec.env_id, meta_batch_size=2, episodes_per_task=2, hidden_sizes=(8,),
        env_kwargs={"horizon": 5},
    )  # fmt: skip
    generator = maml._eval_generator.get_state()
    with maml.evaluation_streams(5):
        evaluator.evaluate(maml)
    assert torch.equal(maml._eval_generator.get_state(), generator)
    maml.close()


@pytest.mark.mujoco
@pytest.mark.parametrize("env_id", ["metabench/HalfCheetahVel-v0", "metabench/HalfCheetahDir-v0"])
def test_reset_with_a_seed_determines_the_episodes_that_follow(env_id):
    import gymnasium as gym

    def episodes(env) -> list[np.ndarray]:
        env.reset(seed=0)
        out = []
        for _ in range(2):
            observations = []
            for _ in range(20):
                obs = env.step(np.full(6, 0.3, dtype=np.float32))[0]
                observations.append(obs)
            out.append(np.array(observations))
            env.reset()
        return out

    used = gym.make(env_id, horizon=20)
    used.reset(seed=123)
    for _ in range(5):
        used.step(used.action_space.sample())
    used.reset()
    fresh = gym.make(env_id, horizon=20)
    for a, b in zip(episodes(used), episodes(fresh), strict=True):
        np.testing.assert_array_equal(a, b)
    assert used.unwrapped.task == fresh.unwrapped.task
    given = {"velocity": 1.5} if "Vel" in env_id else {"direction": -1.0}
    fresh.unwrapped.set_task(given)
    fresh.reset(seed=0)
    assert fresh.unwrapped.task == given  # a task given with set_task is kept


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("metabench/PointGoal-v0", {}),
        ("metabench/Bandit-v0", {}),
        pytest.param("metabench/ML1-v0", {"env_name": "reach-v3"}, marks=pytest.mark.metaworld),
    ],
)
def test_reset_with_a_seed_determines_the_task_of_every_env(env_id, kwargs):
    import gymnasium as gym

    used = gym.make(env_id, **kwargs)
    used.reset(seed=123)
    used.step(used.action_space.sample())
    fresh = gym.make(env_id, **kwargs)
    first_used, first_fresh = used.reset(seed=0)[0], fresh.reset(seed=0)[0]
    np.testing.assert_array_equal(first_used, first_fresh)
    assert repr(used.unwrapped.task) == repr(fresh.unwrapped.task)
    action = fresh.action_space.sample()
    np.testing.assert_array_equal(used.step(action)[0], fresh.step(action)[0])


@pytest.mark.mujoco
def test_seeded_reset_of_the_batched_halfcheetah_redraws_tasks_it_drew():
    import gymnasium as gym

    def make():
        return gym.make_vec(
            "metabench/HalfCheetahVel-v0", num_envs=3, vectorization_mode="vector_entry_point",
            horizon=5,
        )  # fmt: skip

    used, fresh = make(), make()
    used.reset(seed=123)
    used.step(used.action_space.sample())
    first = used.reset(seed=0)[0]
    np.testing.assert_array_equal(first, fresh.reset(seed=0)[0])
    assert used.unwrapped.tasks == fresh.unwrapped.tasks
    given = [{"velocity": 0.5}] * 3
    fresh.unwrapped.set_tasks(given)
    fresh.reset(seed=0)
    assert fresh.unwrapped.tasks == given


def test_evaluate_says_when_a_number_of_the_record_is_not_reproduced(tmp_path, capsys):
    out = tmp_path / "run"
    train(RunSettings("Bandit", "rl2-ppo", 0, 192, out))
    path = out / "result.json"
    record = json.loads(path.read_text())
    for task in record["metatest"]["tasks"]:  # as version 2 recorded it before these existed
        del task["episode_success_steps"], task["episode_returns_to_success"]
    del record["version"], record["metatest_protocol"], record["train_evaluation"]
    record["metatest"]["version"] = 2
    path.write_text(json.dumps(record))
    capsys.readouterr()
    evaluate(out)
    assert "The same numbers as the run's final meta-test" in capsys.readouterr().err
    record["metatest"]["tasks"][3]["episode_returns"][0] += 1.0  # another machine's number
    path.write_text(json.dumps(record))
    evaluate(out)
    err = capsys.readouterr().err
    assert "differ from the final meta-test" in err and "The same numbers" not in err
    assert "records no difference in the code or the machine" in " ".join(err.split())
    # a record from a CPU that differs from this one in AVX-512, and with MKL held to AVX2:
    # the warning names both
    here = record["provenance"]["cpu"]["vector_extensions"]
    other = ["avx", "avx2", "fma"] if "avx512f" in here else ["avx", "avx2", "avx512f", "fma"]
    record["provenance"]["cpu"]["vector_extensions"] = other
    record["provenance"]["cpu"]["kernel_env"] = {"MKL_CBWR": "AVX2"}
    path.write_text(json.dumps(record))
    evaluate(out)
    err = " ".join(capsys.readouterr().err.split())
    assert f"cpu.vector_extensions: {other} ->" in err
    assert "cpu.kernel_env: {'MKL_CBWR': 'AVX2'} ->" in err
