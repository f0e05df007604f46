"""Algorithms by name, each built for a benchmark with the hyperparameters recorded in a run.

Every hyperparameter a run uses ends up in the run's ``config.json``, with the source it came
from; ``overrides`` (from the command line) replace single fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from metabench.algos.base import MetaRLAlgorithm
from metabench.harness.benchmarks import BenchmarkSpec

Builder = Callable[[BenchmarkSpec, int, dict[str, Any], "str | None"], MetaRLAlgorithm]


@dataclass(frozen=True)
class AlgorithmEntry:
    """An algorithm the CLI and the harness can build."""

    name: str
    description: str
    hyperparameters: Callable[[BenchmarkSpec, dict[str, Any]], dict[str, Any]]
    build: Builder


# -- RL2-PPO ---------------------------------------------------------------------------------------
RL2_PRESETS: dict[str, dict[str, Any]] = {
    # garage RL2-PPO HalfCheetahVel example (../shared/REFERENCE.md)
    "HalfCheetahVel": {"meta_batch_size": 10, "hidden_size": 64, "ent_coef": 0.02},
    "HalfCheetahDir": {"meta_batch_size": 10, "hidden_size": 64, "ent_coef": 0.02},
    # Meta-World paper appendix: meta-batch 10 (ML10) / 25 (ML45), GRU 256, lr 5e-4, entropy 5e-6
    "ML10": {"meta_batch_size": 10, "hidden_size": 256, "learning_rate": 5e-4,
             "ent_coef": 5e-6, "reward_scale": 0.1},
    "ML45": {"meta_batch_size": 45, "hidden_size": 256, "learning_rate": 5e-4,
             "ent_coef": 5e-6, "reward_scale": 0.1},
    "ML1-reach": {"meta_batch_size": 25, "hidden_size": 256, "learning_rate": 5e-4,
                  "ent_coef": 5e-6, "reward_scale": 0.1},
    # metabench toys: the bandit is RL2's learning check (tests/algos/test_rl2_algorithm.py)
    "Bandit": {"meta_batch_size": 64, "hidden_size": 32, "learning_rate": 3e-3,
               "ent_coef": 0.01, "normalize_advantage": True, "n_epochs": 10},
    "PointGoal": {"meta_batch_size": 16, "hidden_size": 64, "learning_rate": 1e-3,
                  "ent_coef": 0.0, "normalize_advantage": True},
}  # fmt: skip
"""Per-benchmark RL2-PPO settings over :class:`~metabench.algos.rl2.RL2PPOConfig`'s defaults.
ML45 uses meta-batch 45 rather than the paper's 25 so that each batch holds one task per class."""


def _rl2_hyperparameters(spec: BenchmarkSpec, overrides: dict[str, Any]) -> dict[str, Any]:
    from metabench.algos.rl2.algorithm import RL2PPOConfig

    values = {"episodes_per_trial": spec.episodes_per_trial, **RL2_PRESETS.get(spec.name, {})}
    values.update(overrides)
    known = {f.name for f in dataclasses.fields(RL2PPOConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"unknown RL2-PPO hyperparameter(s) {unknown}; valid: {', '.join(sorted(known))}"
        )
    return dataclasses.asdict(RL2PPOConfig(**values))


def _build_rl2(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.rl2.algorithm import RL2PPO, RL2PPOConfig

    return RL2PPO(
        spec.env_id,
        sampler=spec.train_sampler(seed),
        config=RL2PPOConfig(**hyperparameters),
        seed=seed,
        env_kwargs=spec.train_env_kwargs(seed),
        tensorboard_log=log_dir,
    )


# -- MAML-TRPO -------------------------------------------------------------------------------------
MAML_PRESETS: dict[str, dict[str, Any]] = {
    # garage MAML-TRPO HalfCheetahVel benchmark against ProMP (../shared/REFERENCE.md); the
    # benchmark's horizon (100) applies to every algorithm
    "HalfCheetahVel": {"meta_batch_size": 40, "episodes_per_task": 20, "inner_lr": 0.1,
                       "hidden_sizes": [100, 100], "gae_lambda": 1.0, "max_kl": 0.01},
    "HalfCheetahDir": {"meta_batch_size": 40, "episodes_per_task": 20, "inner_lr": 0.1,
                       "hidden_sizes": [100, 100], "gae_lambda": 1.0, "max_kl": 0.01},
    # Meta-World paper appendix: meta-batch 20 / 20 / 45, 10 / 10 / 20 episodes per task,
    # 128-128 tanh, inner lr 1e-4, max KL 0.01
    "ML1-reach": {"meta_batch_size": 20, "episodes_per_task": 10, "inner_lr": 1e-4,
                  "hidden_sizes": [128, 128]},
    "ML10": {"meta_batch_size": 20, "episodes_per_task": 10, "inner_lr": 1e-4,
             "hidden_sizes": [128, 128]},
    "ML45": {"meta_batch_size": 45, "episodes_per_task": 20, "inner_lr": 1e-4,
             "hidden_sizes": [128, 128]},
    # metabench toy: the learning check of tests/algos/test_maml.py
    "PointGoal": {"meta_batch_size": 20, "episodes_per_task": 10, "hidden_sizes": [32, 32]},
}  # fmt: skip
MAML_HYPERPARAMETERS = (
    "meta_batch_size", "episodes_per_task", "inner_lr", "num_grad_updates", "first_order",
    "discount", "gae_lambda", "max_kl", "cg_iters", "cg_damping", "ls_steps", "ls_ratio",
    "hidden_sizes", "init_std",
)  # fmt: skip


def _maml_hyperparameters(spec: BenchmarkSpec, overrides: dict[str, Any]) -> dict[str, Any]:
    import inspect

    from metabench.algos.maml import MAMLTRPO

    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(MAMLTRPO).parameters.items()
        if name in MAML_HYPERPARAMETERS
    }
    values = {**defaults, **MAML_PRESETS.get(spec.name, {}), **overrides}
    unknown = sorted(set(values) - set(MAML_HYPERPARAMETERS))
    if unknown:
        raise ValueError(
            f"unknown MAML-TRPO hyperparameter(s) {unknown}; "
            f"valid: {', '.join(MAML_HYPERPARAMETERS)}"
        )
    values["hidden_sizes"] = list(values["hidden_sizes"])
    return values


def _build_maml(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.maml import MAMLTRPO

    values = dict(hyperparameters)
    values["hidden_sizes"] = tuple(values["hidden_sizes"])
    env_kwargs = spec.train_env_kwargs(seed)
    num_envs = values["meta_batch_size"] * values["episodes_per_task"]
    vec_env: gym.vector.VectorEnv[Any, Any, Any] | None = None
    if spec.metaworld is not None:
        # Meta-World: the sub-envs sharded across worker processes, one per core, each
        # stepping its shard in a loop (the same envs and results as stepping them in-process)
        from metabench.vector.sharded import make_sharded_task_env

        vec_env = make_sharded_task_env(spec.env_id, num_envs, **env_kwargs)
    elif gym.spec(spec.env_id).vector_entry_point is not None:
        # a batched vector env (HalfCheetah: all cheetahs stepped as one) instead of one
        # Python env per episode; the sampler talks to both through the same API
        vec_env = gym.make_vec(
            spec.env_id,
            num_envs=values["meta_batch_size"] * values["episodes_per_task"],
            vectorization_mode="vector_entry_point",
            **env_kwargs,
        )
    try:
        return MAMLTRPO(
            spec.env_id,
            spec.train_sampler(seed),
            seed=seed,
            env_kwargs=env_kwargs,
            vec_env=vec_env,
            **values,
        )
    except BaseException:
        if vec_env is not None:  # do not leak its worker processes
            vec_env.close()
        raise


# -- NOP -------------------------------------------------------------------------------------------
def _nop_hyperparameters(spec: BenchmarkSpec, overrides: dict[str, Any]) -> dict[str, Any]:
    values = {"action": "zero", **overrides}
    if set(values) != {"action"} or values["action"] not in ("zero", "random"):
        raise ValueError(f"NOP takes only action='zero' or 'random', got {overrides}")
    return values


def _build_nop(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.nop import NOP

    env = spec.make_test_env(seed)
    return NOP(env.action_space, action=hyperparameters["action"], seed=seed)


# -- CEM and CMA-ES: per-test-task policy search, no meta-learning ---------------------------------
def _search_population(spec: BenchmarkSpec) -> int:
    """Candidates per generation that fit the benchmark's exploration episodes: all of them in
    one generation when there are few, else two generations."""
    episodes = spec.n_exploration_eps
    return max(2, episodes if episodes < 4 else episodes // 2)


def _search_hyperparameters(
    names: tuple[str, ...], defaults: dict[str, Any]
) -> Callable[[BenchmarkSpec, dict[str, Any]], dict[str, Any]]:
    def resolve(spec: BenchmarkSpec, overrides: dict[str, Any]) -> dict[str, Any]:
        values = {"n_samples": _search_population(spec), **defaults, **overrides}
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"unknown hyperparameter(s) {unknown}; valid: {', '.join(names)}")
        return values

    return resolve


def _build_cem(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.cem import CEM

    env = spec.make_test_env(seed)
    return CEM(env.action_space, env.observation_space, seed=seed, **hyperparameters)


def _build_cmaes(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.cmaes import CMAES

    env = spec.make_test_env(seed)
    return CMAES(env.action_space, env.observation_space, seed=seed, **hyperparameters)


ALGORITHMS: dict[str, AlgorithmEntry] = {
    entry.name: entry
    for entry in [
        AlgorithmEntry(
            "rl2-ppo",
            "RL2 with PPO (sb3-contrib RecurrentPPO, whole-sequence LSTM training)",
            _rl2_hyperparameters,
            _build_rl2,
        ),
        AlgorithmEntry(
            "maml-trpo",
            "MAML with a policy-gradient inner step and a TRPO outer step (PyTorch)",
            _maml_hyperparameters,
            _build_maml,
        ),
        AlgorithmEntry(
            "cem",
            "cross-entropy method: policy search from scratch on each test task (no meta-learning)",
            _search_hyperparameters(
                ("n_samples", "best_frac", "init_std", "extra_std", "extra_decay_time"),
                {"best_frac": 0.2, "init_std": 1.0, "extra_std": 1.0, "extra_decay_time": 10.0},
            ),
            _build_cem,
        ),
        AlgorithmEntry(
            "cmaes",
            "CMA-ES (the cma library): policy search from scratch on each test task",
            _search_hyperparameters(("n_samples", "sigma0"), {"sigma0": 1.0}),
            _build_cmaes,
        ),
        AlgorithmEntry(
            "nop",
            "no optimisation: zero (or random) actions, the floor of every table",
            _nop_hyperparameters,
            _build_nop,
        ),
    ]
}


def get_algorithm(name: str) -> AlgorithmEntry:
    """The algorithm called ``name``, or a ``KeyError`` listing the valid names."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise KeyError(
            f"unknown algorithm {name!r}; choose one of: {', '.join(sorted(ALGORITHMS))}"
        ) from None
