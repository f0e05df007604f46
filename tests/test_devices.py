"""``--device``: where the networks act and train.

The CPU tests run everywhere; the ``gpu`` ones need a CUDA GPU and are skipped without one. They
check that a GPU run computes what the CPU run does (the action noise comes from the same CPU
generators, so only the GPU's rounding differs) and that checkpoints move between the devices.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import torch

from metabench.algos.maml.policy import detached_params
from metabench.algos.reference import OraclePPO, ReferenceConfig
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from metabench.cli import main
from metabench.devices import DeviceError, resolve_device, to_cpu
from metabench.harness.algorithms import get_algorithm
from metabench.harness.run import RunSettings, plan_run
from metabench.harness.training import train
from metabench.rng import global_rng_state, set_global_rng_state
from tests.factories import make_maml

SMALL_MAML = {
    "meta_batch_size": 2,
    "episodes_per_task": 2,
    "hidden_sizes": (16,),
    "env_kwargs": {"horizon": 5},
}
SMALL_RL2 = RL2PPOConfig(
    meta_batch_size=2,
    episodes_per_trial=2,
    hidden_size=8,
    n_epochs=2,
    recurrent_cell="gru",
    value_baseline="linear",
)
CUDA_ONLY = pytest.mark.gpu


def flat(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().cpu().flatten() for p in module.parameters()])


def all_cpu(value: object) -> bool:
    if isinstance(value, torch.Tensor):
        return value.device.type == "cpu"
    if isinstance(value, dict):
        return all(all_cpu(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return all(all_cpu(item) for item in value)
    return True


# -- everywhere ---------------------------------------------------------------------------------
def test_auto_takes_a_gpu_only_where_torch_sees_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


@pytest.mark.parametrize("name", ["tpu", "gpu", "cuda:x", ""])
def test_a_name_that_is_no_device_is_refused_with_the_choices(name):
    with pytest.raises(DeviceError, match="'auto', 'cpu', 'cuda' or 'cuda:N'"):
        resolve_device(name)


def test_cuda_without_a_gpu_names_the_fix(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="use --device cpu, or auto"):
        resolve_device("cuda")


def test_train_refuses_a_device_that_is_not_here(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    args = ["train", "--benchmark", "PointGoal", "--algorithm", "nop", "--device", "cuda"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    assert "torch sees no CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_to_cpu_keeps_cpu_tensors_and_the_structure():
    tensor = torch.ones(3)
    state = {"a": tensor, "b": [tensor, (tensor, 1)], "c": "x"}
    moved = to_cpu(state)
    assert moved["a"] is tensor and moved["b"][1][0] is tensor
    assert moved == {"a": tensor, "b": [tensor, (tensor, 1)], "c": "x"}


def test_a_cpu_run_records_no_device_and_only_networks_take_one(tmp_path):
    """A CPU run records the CPU, as its config.json always meant where it named no device;
    NOP, CEM and CMA-ES have no network to place."""
    settings = RunSettings("PointGoal", "maml-trpo", 0, 1, tmp_path / "run", device="cpu")
    assert plan_run(settings).config.device == "cpu"
    assert get_algorithm("maml-trpo").takes_device and get_algorithm("rl2-ppo").takes_device
    assert get_algorithm("oracle").takes_device
    assert not any(get_algorithm(name).takes_device for name in ("nop", "cem", "cmaes"))


def test_a_run_trained_on_a_gpu_meta_tests_on_the_cpu_when_asked(monkeypatch, tmp_path, capsys):
    """A run whose config.json records a GPU, read where there is none: without ``--device`` the
    error names the fix; with ``--device cpu`` it meta-tests, and the evaluation file records
    the CPU. This run really trained on the CPU, so the CPU meta-test must give its recorded
    final meta-test exactly: the checkpoint and its random streams load as they were saved."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "run"
    train(RunSettings("Bandit", "rl2-ppo", 0, 192, out))
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "device": "cuda"}))
    capsys.readouterr()
    assert main(["evaluate", str(out)]) == 1
    err = capsys.readouterr().err
    assert "trained on 'cuda', which this machine lacks" in err and "--device cpu" in err
    assert not list((out / "evaluations").glob("evaluate-*.json"))

    assert main(["evaluate", str(out), "--device", "cpu"]) == 0
    assert "The run trained on cuda, this meta-test ran on cpu" in capsys.readouterr().err
    (record_path,) = (out / "evaluations").glob("evaluate-*.json")
    record = json.loads(record_path.read_text())
    assert record["device"] == "cpu"
    final = json.loads((out / "result.json").read_text())["metatest"]
    assert {key: record[key] for key in final} == final


# -- on a GPU -------------------------------------------------------------------------------------
@CUDA_ONLY
def test_maml_on_the_gpu_samples_and_adapts_as_on_the_cpu():
    """Same seed, same noise (drawn on the CPU): two iterations of MAML-PPO (Adam outer steps)
    on the GPU end where the CPU's do, up to float32 rounding."""
    runs = {}
    variant = {"outer_optimizer": "adam", "inner_loss": "ppo", "outer_loss": "ppo"}
    for device in ("cpu", "cuda"):
        algo = make_maml("metabench/PointGoal-v0", seed=3, device=device, **SMALL_MAML, **variant)
        stats = algo.train(2)
        runs[device] = (flat(algo.policy), stats)
        algo.close()
    torch.testing.assert_close(runs["cuda"][0], runs["cpu"][0], rtol=1e-4, atol=1e-5)
    for key in ("metatrain/pre_update_return", "metatrain/post_update_return"):
        assert runs["cuda"][1][key] == pytest.approx(runs["cpu"][1][key], rel=1e-4)


@CUDA_ONLY
def test_maml_trpo_outer_step_on_the_gpu_is_the_cpu_step():
    """One batch, collected once, and the TRPO outer step taken from the same meta-parameters
    on each device: the same step up to float32 rounding. The damping is raised to 0.1 here:
    with the default 1e-5 this small batch's KL Hessian is nearly singular, and conjugate
    gradient magnifies any rounding in the directions the loss and KL hardly see (float32 and
    float64 steps on the CPU point 16 degrees apart; with 0.1 they agree to 2e-5). At ML10's
    size the default damping is well posed: the two devices' parameters after the step differ
    by 3e-7 relative (scripts/maml_outer_step_device.py on an H100)."""
    kwargs = {**SMALL_MAML, "meta_batch_size": 4, "episodes_per_task": 10, "cg_damping": 0.1}
    kwargs["env_kwargs"] = {"horizon": 20}
    cpu = make_maml("metabench/PointGoal-v0", seed=5, device="cpu", **kwargs)
    gpu = make_maml("metabench/PointGoal-v0", seed=5, device="cuda", **kwargs)
    tasks = cpu.task_sampler.sample(cpu.config.meta_batch_size, cpu._rng)
    meta = detached_params(cpu.policy.params())
    train_episodes = cpu.collect(tasks, [meta] * len(tasks))
    adapted = [detached_params(cpu.adapt(meta, cpu.process(e), False)) for e in train_episodes]
    valid_episodes = cpu.collect(tasks, adapted)
    steps = {}
    for algo in (cpu, gpu):
        train = [algo.process(episodes) for episodes in train_episodes]
        valid = [algo.process(episodes) for episodes in valid_episodes]
        steps[algo.device.type] = algo.meta_optimize(train, valid)
        algo.close()
    assert steps["cuda"].accepted and steps["cpu"].accepted
    assert steps["cuda"].step_fraction == steps["cpu"].step_fraction
    torch.testing.assert_close(flat(gpu.policy), flat(cpu.policy), rtol=1e-3, atol=1e-4)
    assert steps["cuda"].loss_after == pytest.approx(steps["cpu"].loss_after, rel=1e-4)


@CUDA_ONLY
@pytest.mark.parametrize(("saved_on", "loaded_on"), [("cuda", "cpu"), ("cpu", "cuda")])
def test_maml_checkpoint_moves_between_devices(saved_on, loaded_on):
    kwargs = {**SMALL_MAML, "outer_optimizer": "adam", "seed": 1}
    first = make_maml("metabench/PointGoal-v0", device=saved_on, **kwargs)
    first.train(1)
    state = first.state_dict()
    assert all_cpu(state)
    second = make_maml("metabench/PointGoal-v0", device=loaded_on, **kwargs)
    second.load_state_dict(state)
    assert second.policy.log_std.device.type == loaded_on
    torch.testing.assert_close(flat(second.policy), flat(first.policy), rtol=0, atol=0)
    first.train(1)
    second.train(1)  # the Adam moments came along: the next step is the same up to rounding
    torch.testing.assert_close(flat(second.policy), flat(first.policy), rtol=1e-4, atol=1e-5)


@CUDA_ONLY
@pytest.mark.parametrize(("saved_on", "loaded_on"), [("cuda", "cpu"), ("cpu", "cuda")])
def test_rl2_checkpoint_moves_between_devices(saved_on, loaded_on):
    first = RL2PPO("metabench/PointGoal-v0", config=SMALL_RL2, seed=2, device=saved_on)
    assert first.model.device.type == saved_on
    first.train(1)
    state = first.state_dict()
    assert all_cpu({k: v for k, v in state.items() if k != "cuda_rng"})
    second = RL2PPO("metabench/PointGoal-v0", config=SMALL_RL2, seed=2, device=loaded_on)
    second.load_state_dict(state)
    assert second.iterations == 1
    torch.testing.assert_close(flat(second.model.policy), flat(first.model.policy), rtol=0, atol=0)
    stats = second.train(1)  # and trains on from there
    assert all(value == value for value in stats.values())  # no NaN


@CUDA_ONLY
@pytest.mark.parametrize("chunked", [False, True])
def test_rl2_update_on_the_gpu_takes_the_cpu_step(chunked):
    """SB3 samples on the model's device, so a GPU run sees other trials than a CPU run; the
    update itself is compared here: one collected iteration, updated on each device from the
    same weights."""
    config = SMALL_RL2
    if chunked:
        config = dataclasses.replace(config, chunk_length=6, chunk_overlap=2, encoder_sizes=(8,))
    cpu = RL2PPO("metabench/PointGoal-v0", config=config, seed=4, device="cpu")
    gpu = RL2PPO("metabench/PointGoal-v0", config=config, seed=4, device="cuda")
    gpu.model.policy.load_state_dict(cpu.model.policy.state_dict())
    update = cpu.model.train
    cpu.model.train = lambda: None  # type: ignore[method-assign]
    cpu.train(1)  # collect one iteration, no update
    cpu.model.train = update  # type: ignore[method-assign]
    buffer = copy.deepcopy(cpu.model.rollout_buffer)
    buffer.device = gpu.model.device
    gpu.model.rollout_buffer = buffer
    gpu.model._current_progress_remaining = cpu.model._current_progress_remaining
    before = flat(cpu.model.policy)
    generators = global_rng_state()  # sb3-contrib cuts the trials at a random step
    cpu.model.train()
    set_global_rng_state(generators)
    gpu.model.train()
    moved = (flat(cpu.model.policy) - before).abs().max()
    assert moved > 1e-4  # the update did something
    torch.testing.assert_close(flat(gpu.model.policy), flat(cpu.model.policy), rtol=1e-3, atol=1e-5)


@CUDA_ONLY
def test_reference_ppo_trains_on_the_gpu():
    algo = OraclePPO("metabench/PointGoal-v0", config=ReferenceConfig(n_envs=2), device="cuda")
    assert algo.model.device.type == "cuda"
    algo.train(1)
    assert torch.isfinite(flat(algo.model.policy)).all()


@CUDA_ONLY
def test_a_gpu_run_records_its_device(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--benchmark", "PointGoal", "--algorithm", "maml-trpo", "--steps", "800"]
    args += ["--set", "meta_batch_size=2", "--set", "episodes_per_task=2"]
    assert main([*args, "--device", "cuda", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    result = json.loads((out / "result.json").read_text())
    assert config["device"] == "cuda"
    assert result["provenance"]["gpu"]["name"].startswith("cuda: ")
