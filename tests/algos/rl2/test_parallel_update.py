"""RL2-PPO's update split over the env workers equals sb3-contrib's one-process update up to
float rounding (``metabench/algos/rl2/parallel_update.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from metabench.algos.rl2.parallel_update import LossConstants, partial_loss
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from tests.factories import ROOT, assert_split_learns_what_alone_learns, rl2_alone_and_split

CONFIGS = {
    # garage's: linear baseline, entropy added to the rewards, no critic
    "linear-max": {"value_baseline": "linear", "entropy_method": "max", "recurrent_cell": "gru"},
    # sb3-contrib's: learned critic (value loss), entropy in the loss, normalised advantages,
    # a tight gradient clip so that clipping acts on the summed gradient
    "critic-regularized": {
        "value_baseline": "critic",
        "entropy_method": "regularized",
        "normalize_advantage": True,
        "ent_coef": 0.05,
        "max_grad_norm": 0.05,
    },
}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("cpus", [2, 3])
def test_split_update_learns_what_the_one_process_update_learns(name: str, cpus: int) -> None:
    alone, split = rl2_alone_and_split(cpus, hidden_size=16, **CONFIGS[name])
    assert_split_learns_what_alone_learns(alone, split, cpus)


def test_partial_losses_add_up_to_the_whole_batch_loss_and_gradient() -> None:
    """Sums over any split of the trials give the loss and gradient of the whole batch."""
    algo = RL2PPO(
        "metabench/PointGoal-v0",
        config=RL2PPOConfig(meta_batch_size=6, hidden_size=8, value_baseline="critic"),
        seed=1,
    )
    model = algo.model
    model.learn(model.n_steps * model.n_envs, reset_num_timesteps=True)  # fills the buffer
    (data,) = list(model._recurrent_buffer().get(model.batch_size))
    count = int((data.mask > 1e-8).sum())
    constants = LossConstants(0.2, None, 0.01, 0.5, count)
    policy = model._recurrent_policy()

    def loss_and_gradient(groups: list[tuple[int, int]]) -> tuple[float, list[torch.Tensor]]:
        from metabench.algos.rl2.parallel_update import _samples, _sequences

        policy.zero_grad()
        total = 0.0
        for start, stop in groups:
            loss, _ = partial_loss(policy, _samples(_sequences(data, start, stop)), constants)
            loss.backward()
            total += loss.item()
        return total, [p.grad.clone() for p in policy.parameters() if p.grad is not None]

    n_seq = data.lstm_states.pi[0].shape[1]
    whole_loss, whole_gradient = loss_and_gradient([(0, n_seq)])
    split_loss, split_gradient = loss_and_gradient([(0, 2), (2, 3), (3, n_seq)])
    assert split_loss == pytest.approx(whole_loss, rel=1e-5)
    for a, b in zip(whole_gradient, split_gradient, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)

    # the whole-batch loss is sb3-contrib's: mean clipped surrogate, entropy and value terms
    values, log_prob, entropy = policy.evaluate_actions(
        data.observations, data.actions, data.lstm_states, data.episode_starts
    )
    mask = data.mask > 1e-8
    ratio = torch.exp(log_prob - data.old_log_prob)
    surrogate = torch.min(data.advantages * ratio, data.advantages * ratio.clamp(0.8, 1.2))
    expected = (
        -surrogate[mask].mean()
        - 0.01 * entropy[mask].mean()
        + 0.5 * ((data.returns - values.flatten()) ** 2)[mask].mean()
    )
    assert whole_loss == pytest.approx(expected.item(), rel=1e-5)
    algo.venv.close()
    assert np.isfinite(whole_loss)


def test_update_in_workers_needs_step_in_workers() -> None:
    with pytest.raises(ValueError, match="step_in_workers=true"):
        RL2PPOConfig(update_in_workers=True)


def test_update_in_workers_is_recorded_only_when_on() -> None:
    """Runs recorded before the option existed still match their configs and checkpoints."""
    algo = RL2PPO("metabench/PointGoal-v0", config=RL2PPOConfig(meta_batch_size=2), seed=0)
    state = algo.state_dict()
    assert "update_in_workers" not in state["config"]
    again = RL2PPO("metabench/PointGoal-v0", config=RL2PPOConfig(meta_batch_size=2), seed=0)
    again.load_state_dict(state)  # an older checkpoint: no update_in_workers key
    config = RL2PPOConfig(meta_batch_size=2, step_in_workers=True, update_in_workers=True)
    split = RL2PPO("metabench/PointGoal-v0", config=config, seed=0)
    assert split.state_dict()["config"]["update_in_workers"] is True
    with pytest.raises(ValueError, match="different RL2PPOConfig"):
        split.load_state_dict(state)
    for each in (algo, again, split):
        each.venv.close()


@pytest.mark.metaworld
def test_the_ml10_result_command_still_plans_its_recorded_config() -> None:
    """``results/ML10/rl2-ppo-seed0``'s recorded command resolves to its config.json, but for
    the meta-test tasks: that run used 10 (2 per class); Meta-World's protocol, which ML10 has
    used since, takes 200 (40 per test class) and a periodic subset."""
    import json
    import shlex
    from pathlib import Path

    from metabench.harness.run import RunDirectory, RunSettings, resolve

    run = ROOT / "results" / "ML10" / "rl2-ppo-seed0"
    if not (run / "result.json").exists():
        pytest.skip("no ML10 RL2-PPO result in this checkout")
    args = shlex.split(json.loads((run / "result.json").read_text())["command"])

    def value(flag: str) -> str:
        return args[args.index(flag) + 1]

    settings = RunSettings(
        value("--benchmark"),
        value("--algorithm"),
        int(value("--seed")),
        int(value("--steps")),
        Path(value("--out")),
        cpus=int(value("--cpus")),
    )
    _, config = resolve(settings)
    recorded = RunDirectory(run).read_config()  # a version-1 file, read in the current form
    assert recorded is not None
    protocol = {"test_tasks", "periodic_test_tasks", "benchmark_source"}
    resolved, stored = config.to_json(), recorded.to_json()
    assert {k: v for k, v in resolved.items() if k not in protocol} == {
        k: v for k, v in stored.items() if k not in protocol
    }
    assert (len(recorded.test_tasks), len(config.test_tasks)) == (10, 200)
