"""MAML-TRPO's inner and outer step against Meta-World+'s own ``MAMLTRPO``, on the same data from
the same parameters: the update `baselines/maml-trpo.toml`'s Meta-World settings stand for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from metabench.algos.maml import TaskData, process_episodes
from metabench.data import EpisodeBatch, StepType
from metabench.tasks.base import ListTaskSampler
from tests.factories import make_maml

REFERENCE = Path(__file__).parents[2] / "data" / "metaworld_plus_maml_update.npz"
"""One iteration's update of Meta-World+'s own MAML-TRPO, computed with its code:
metaworld-algorithms at a2abf6a3bb1e (``rl/algorithms/mamltrpo.py``), the config of
``examples/meta_learning/maml_trpo_ml1.py`` narrowed to 16 units, with its ``MAMLTRPOConfig``
meta-batch set to the env's 3 tasks (the example as written leaves it at 20 against 10 envs,
and JAX refuses the mismatch), seed 0. For 3 tasks of 2 episodes of 60 steps (more steps than
the baseline's 82 features, so that it does not fit the returns exactly; 39-dim
observations N(0, 1), rewards U(0, 10)): the ``train/*`` rollout sampled from the meta-policy,
its ``advantages`` (W's per-task linear baseline, GAE with lambda 1, centred and divided by their
variance), the adapted parameters ``adapted/*`` (W's inner step: SGD 0.1 on the loss averaged
over all tasks), the ``valid/*`` rollout sampled from them, and the meta-parameters before
(``param/*``) and after (``updated/*``) W's TRPO step (KL 0.01, 10 CG iterations, backtracking
0.8), with its logged ``log/*``."""

# metabench's parameter names -> Meta-World+'s (Flax kernels are (in, out), PyTorch's (out, in))
TO_FLAX = {"log_std": "log_std"}
for _index, _layer in enumerate((0, 2, 4)):
    TO_FLAX[f"mean_net.{_layer}.weight"] = f"VanillaNetwork_0/MLP_0/layer_{_index}/kernel"
    TO_FLAX[f"mean_net.{_layer}.bias"] = f"VanillaNetwork_0/MLP_0/layer_{_index}/bias"


class _BoxEnv(gym.Env[np.ndarray, np.ndarray]):
    """ML1's spaces (39-dim observation, 4-dim action); never stepped here."""

    observation_space = spaces.Box(-np.inf, np.inf, shape=(39,), dtype=np.float32)
    action_space = spaces.Box(-1.0, 1.0, shape=(4,), dtype=np.float32)

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[int]:
        return list(range(n))

    def set_task(self, task: Any) -> None:
        pass


def as_metabench(reference: Any, prefix: str, name: str, task: int | None = None) -> np.ndarray:
    value = reference[f"{prefix}/{TO_FLAX[name]}"]
    value = value if task is None else value[task]
    return value.T if name.endswith("weight") else value


def test_advantages_are_metaworld_plus_own() -> None:
    """process_episodes with W's setting (GAE lambda 1, the advantages divided by their variance)
    gives each task's advantages as W's compute_advantages does (its linear baseline per task
    over the task's episodes, the value after each episode's last step 0)."""
    ref = np.load(REFERENCE, allow_pickle=False)
    steps, tasks, obs_dim = ref["train/observations"].shape
    starts = np.flatnonzero(ref["train/dones"][:, 0, 0])
    lengths = np.diff(np.append(starts, steps))
    step_types = np.full(steps, StepType.MID)
    step_types[starts] = StepType.FIRST
    step_types[np.append(starts[1:], steps) - 1] = StepType.TERMINAL
    for task in range(tasks):
        episodes = EpisodeBatch(
            observations=ref["train/observations"][:, task].astype(np.float64),
            last_observations=np.zeros((len(lengths), obs_dim)),
            actions=ref["train/actions"][:, task].astype(np.float64),
            rewards=ref["train/rewards"][:, task, 0].astype(np.float64),
            step_types=step_types,
            lengths=lengths,
        )
        data = process_episodes(episodes, 0.99, 1.0, scale="variance")
        expected = ref["train/advantages"][:, task, 0]
        np.testing.assert_allclose(data.advantages.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_inner_and_outer_step_are_metaworld_plus_own() -> None:
    """metabench's MAML with W's setting (inner lr 0.1 / 3 tasks, advantages given) adapts each
    task's parameters where W's inner step takes them, and its TRPO step ends where W's does, with
    W's loss, KL and step size."""
    ref = np.load(REFERENCE, allow_pickle=False)
    tasks = ref["train/observations"].shape[1]
    algo = make_maml(
        _BoxEnv, ListTaskSampler(list(range(tasks))), meta_batch_size=tasks, episodes_per_task=2,
        hidden_sizes=(16, 16), inner_lr=0.1 / tasks, gae_lambda=1.0, max_kl=0.01,
        advantage_scale="variance", weight_init="xavier",
    )  # fmt: skip
    params = dict(algo.policy.named_parameters())
    with torch.no_grad():
        for name, tensor in params.items():
            tensor.copy_(torch.as_tensor(as_metabench(ref, "param", name)))

    def data(split: str, task: int) -> TaskData:
        return TaskData(
            observations=torch.as_tensor(ref[f"{split}/observations"][:, task]),
            actions=torch.as_tensor(ref[f"{split}/actions"][:, task]),
            advantages=torch.as_tensor(ref[f"{split}/advantages"][:, task, 0]),
        )

    train = [data("train", task) for task in range(tasks)]
    valid = [data("valid", task) for task in range(tasks)]
    for task in range(tasks):
        adapted = algo.adapt(algo.policy.params(), train[task], create_graph=False)
        for name, tensor in adapted.items():
            expected = as_metabench(ref, "adapted/ensemble", name, task)
            move = np.abs(expected - as_metabench(ref, "param", name)).max()
            np.testing.assert_allclose(tensor.detach().numpy(), expected, rtol=0, atol=1e-3 * move)
    step = algo.trpo_optimize(train, valid)
    assert step.accepted
    assert step.loss_after == pytest.approx(float(ref["log/loss_after"]), rel=1e-4)
    assert step.kl == pytest.approx(float(ref["log/kl_after"]), rel=1e-4)
    # W counts the step sizes it tried (0.8^0, 0.8^1, ...) and stops after the accepted one
    assert step.n_backtracks == int(ref["log/backtrack_steps"]) - 1
    for name, tensor in params.items():
        expected = as_metabench(ref, "updated", name)
        move = np.abs(expected - as_metabench(ref, "param", name)).max()
        np.testing.assert_allclose(tensor.detach().numpy(), expected, rtol=0, atol=1e-3 * move)
    algo.close()
