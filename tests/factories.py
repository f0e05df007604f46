"""What several test modules build: tiny settings of every algorithm, and the policy's weights.

Test modules import these (``from tests.factories import build_tiny``); fixtures stay in the
``conftest.py`` files.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from metabench.algos.base import MetaRLAlgorithm
from metabench.algos.maml import MAML, MAMLConfig
from metabench.algos.pearl import PEARL
from metabench.algos.run_envs import RunEnvs
from metabench.data import EpisodeBatch, EpisodeRecorder, StepType
from metabench.evaluation import TaskResult
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark
from metabench.records import MetaTestRecord, Protocol, RunConfig, RunResult
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.vector import make_meta_vec_env
from metabench.wrappers import EPISODE_END, Trial

ROOT = Path(__file__).resolve().parents[1]
"""The repository's root (``results/``, ``envs/``, the README)."""

PEARL_ON_POINTGOAL: dict[str, Any] = {
    "n_train_tasks": 3,
    "latent_size": 2,
    "hidden_sizes": (16, 16),
    "encoder_hidden_sizes": (16,),
    "meta_batch_size": 2,
    "num_initial_steps": 20,
    "num_tasks_sample": 2,
    "num_steps_prior": 20,
    "num_extra_rl_steps_posterior": 20,
    "num_train_steps_per_itr": 3,
    "batch_size": 8,
    "embedding_batch_size": 6,
}
"""PEARL's tiny settings on PointGoal (episodes of 20 steps): one episode per phase, a few
gradient steps."""


def explore_pointgoal(
    algo: PEARL, goal: list[float], episodes: int, horizon: int = 20
) -> tuple[EpisodeBatch, list[np.ndarray], list[tuple[torch.Tensor, torch.Tensor]]]:
    """``episodes`` exploration episodes of one PointGoal task through PEARL's ``wrap_env``, as
    the sequential meta-test runs and records them: the batch, the actions, and the policy's
    belief (mean, variance) at each episode's first step."""
    env = algo.wrap_env(Trial(PointGoalEnv(horizon=horizon), episodes_per_trial=episodes))
    obs, _ = env.reset(seed=0, options={"task": {"goal": goal}})
    policy = algo.get_exploration_policy()
    recorded, actions, beliefs = [], [], []
    for _ in range(episodes):
        policy.reset()
        recorder = EpisodeRecorder()
        while True:
            action = policy.get_action(obs)
            if not recorder.rewards:
                rows = policy.policies  # type: ignore[attr-defined]
                beliefs.append((rows.means[0].clone(), rows.variances[0].clone()))
            actions.append(action)
            after, reward, terminated, truncated, info = env.step(action)
            ended = bool(terminated or truncated or info.get(EPISODE_END))
            recorder.record(obs, action, float(reward), ended=ended, terminated=False)
            obs = after
            if ended:
                recorder.last_observation = after
                break
        recorded.append(recorder.path())
    return EpisodeBatch.from_list(recorded), actions, beliefs


TINY: dict[str, dict[str, Any]] = {
    "rl2-ppo": {"meta_batch_size": 2, "hidden_size": 8, "n_epochs": 1},
    "rl2-trpo": {"meta_batch_size": 2, "hidden_size": 8},
    "maml-trpo": {"meta_batch_size": 2, "episodes_per_task": 2, "hidden_sizes": [8]},
    "maml-ppo": {"meta_batch_size": 2, "episodes_per_task": 2, "hidden_sizes": [8]},
    "maml-vpg": {"meta_batch_size": 2, "episodes_per_task": 2, "hidden_sizes": [8]},
    "pearl": {
        "n_train_tasks": 2,
        "num_initial_steps": 100,
        "num_tasks_sample": 1,
        "num_steps_prior": 100,
        "num_extra_rl_steps_posterior": 100,
        "num_train_steps_per_itr": 2,
        "hidden_sizes": [8],
        "encoder_hidden_sizes": [8],
        "batch_size": 8,
        "embedding_batch_size": 8,
    },
    "nop": {},
    "cem": {},
    "cmaes": {},
    "oracle": {"n_envs": 2, "hidden_sizes": [8], "n_epochs": 1},
    "multitask": {"n_envs": 2, "hidden_sizes": [8], "n_epochs": 1},
}
"""Every registered algorithm's settings for an iteration of a second or less."""


def build_tiny(name: str, benchmark: str, seed: int = 0) -> MetaRLAlgorithm:
    """Algorithm ``name`` with its :data:`TINY` settings on ``benchmark``, built as the harness
    builds it."""
    spec = get_benchmark(benchmark)
    entry = get_algorithm(name)
    return entry.build(RunEnvs(spec, seed), entry.hyperparameters(spec, TINY[name]), None)


def policy_parameters(algo: Any) -> list[torch.Tensor]:
    """Copies of the policy's weights: SB3-based algorithms' ``model.policy``, the others'
    ``policy``; none for the gradient-free baselines."""
    module = algo.model.policy if hasattr(algo, "model") else getattr(algo, "policy", None)
    return [] if module is None else [p.detach().clone() for p in module.parameters()]


def episode_batch(seed: int, lengths: list[int], obs_dim: int = 3) -> EpisodeBatch:
    """Random episodes, some observations beyond the baseline's clip range of 10."""
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    return EpisodeBatch(
        observations=rng.normal(scale=6.0, size=(n, obs_dim)),
        last_observations=rng.normal(size=(len(lengths), obs_dim)),
        actions=rng.normal(size=(n, 2)),
        rewards=rng.normal(size=n),
        step_types=np.full(n, StepType.MID),
        lengths=np.array(lengths),
    )


def straight_and_resumed(make: Callable[[], Any]) -> tuple[Any, Any]:
    """Two iterations of ``make()``, and one iteration after another run's first, resumed from
    its checkpoint read as the harness reads it (``weights_only``); the other run goes on
    training after the checkpoint, so a resumed copy that shared its state would differ."""
    straight = make()
    straight.train(2)
    first = make()
    first.train(1)
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    first.train(1)
    resumed = make()
    resumed.load_state_dict(state)
    resumed.train(1)
    return straight, resumed


MAML_ARGUMENTS = ("seed", "env_kwargs", "device", "policy", "vec_env", "max_episode_length")


def make_maml(env: Any, sampler: Any = None, **kwargs: Any) -> MAML:
    """``MAML(env, sampler, MAMLConfig(**fields), **arguments)``, the constructor's keyword
    arguments (:data:`MAML_ARGUMENTS`) and the config's fields given side by side."""
    arguments = {name: kwargs.pop(name) for name in MAML_ARGUMENTS if name in kwargs}
    return MAML(env, sampler, MAMLConfig(**kwargs), **arguments)


def rl2_ppo_on_processes(config: Any, seed: int, processes: int) -> Any:
    """RL2-PPO on PointGoal (the env's defaults), its meta-batch stepped by ``processes``
    processes (:class:`~metabench.algos.run_envs.RunEnvs` gives it the run's cores where
    ``config.step_in_workers``)."""
    from metabench.algos.rl2.rl2_ppo import RL2PPO

    settings = RL2PPO.meta_batch_settings(config, None, seed)
    venv = make_meta_vec_env(
        "metabench/PointGoal-v0", config.meta_batch_size, seed=seed, processes=processes, **settings
    )
    return RL2PPO("metabench/PointGoal-v0", config=config, seed=seed, venv=venv)


def rl2_alone_and_split(cpus: int, **options: Any) -> tuple[Any, Any]:
    """RL2-PPO on PointGoal after two iterations, its update in one process and split over the
    env workers (``update_in_workers``) of ``cpus`` processes, same seed and settings."""
    from metabench.algos.rl2.rl2_ppo import RL2PPOConfig

    runs = []
    for split in (False, True):
        config = RL2PPOConfig(
            meta_batch_size=5, step_in_workers=True, update_in_workers=split, **options
        )
        algo = rl2_ppo_on_processes(config, seed=5, processes=cpus)
        algo.train(2)
        algo.venv.close()
        runs.append(algo)
    return runs[0], runs[1]


def assert_split_learns_what_alone_learns(alone: Any, split: Any, cpus: int) -> None:
    """The split update ran on ``cpus`` processes and left the parameters where the
    one-process update did, to float rounding, after moving them."""
    from metabench.algos.rl2.rl2_ppo import RL2PPO

    assert split.model.update_venv is not None and split.model.update_venv.processes == cpus
    assert alone.model.update_venv is None
    moved = False
    for before, a, b in zip(
        policy_parameters(RL2PPO("metabench/PointGoal-v0", config=alone.config, seed=5)),
        policy_parameters(alone),
        policy_parameters(split),
        strict=True,
    ):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
        moved |= not torch.equal(a, before)
    assert moved, "the updates changed nothing: the comparison would prove nothing"
    assert split.model._n_updates == alone.model._n_updates == 2 * alone.config.n_epochs


def make_result(
    benchmark: str,
    algorithm: str,
    seed: int,
    task_returns: list[list[float]],
    *,
    exploration_episodes: int = 2,
    successes: list[list[bool]] | None = None,
    tasks: list[Any] | None = None,
    env_steps: int = 1000,
    wall_time_s: float = 60.0,
    metatrain: dict[str, float] | None = None,
    metaworld_envs_per_class: int | None = None,
) -> RunResult:
    """A result shaped like ``metabench train`` writes it, with the given episode returns (one
    list per task: exploration episodes, then test episodes). With ``metaworld_envs_per_class``
    (and ``successes``) its meta-test records Meta-World's count: each successful episode's
    first success at its third step."""
    task_results = [
        TaskResult(
            task_index=i,
            task=tasks[i] if tasks else {"goal": float(i)},
            exploration_episodes=exploration_episodes,
            episode_returns=list(returns),
            episode_lengths=[10] * len(returns),
            episode_successes=None if successes is None else list(successes[i]),
            episode_success_steps=(
                [3 if ok else None for ok in successes[i]]
                if successes is not None and metaworld_envs_per_class is not None
                else None
            ),
            episode_returns_to_success=(
                list(returns) if metaworld_envs_per_class is not None else None
            ),
        )
        for i, returns in enumerate(task_returns)
    ]
    test_episodes = len(task_returns[0]) - exploration_episodes
    metatest = MetaTestRecord(
        algorithm=algorithm,
        env="fake",
        exploration_episodes=exploration_episodes,
        test_episodes=test_episodes,
        seed=seed,
        tasks=tuple(task_results),
        metaworld_envs_per_class=metaworld_envs_per_class,
    )
    config = RunConfig(
        benchmark=benchmark,
        benchmark_source="a test",
        env_id=f"metabench/{benchmark}-v0",
        env_kwargs={},
        algorithm=algorithm,
        hyperparameters={},
        hyperparameter_sources=[],
        seed=seed,
        env_steps_budget=1000,  # one budget: runs of other budgets are not pooled
        protocol=Protocol(exploration_episodes, test_episodes),
        test_tasks=tuple(t.task for t in task_results),
    )
    return RunResult(
        config=config,
        command=None,
        provenance={},
        iterations=1,
        env_steps=env_steps,
        wall_time_s=wall_time_s,
        metatrain=metatrain or {},
        metatest=metatest,
    )
