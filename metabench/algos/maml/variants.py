"""garage's MAML-TRPO, MAML-PPO and MAML-VPG as the
:class:`~metabench.algos.implementation.Implementation` entry points of
``baselines/maml-{trpo,ppo,vpg}.toml``: each variant's defaults, and the builder that gives MAML
the benchmark's vector env (sharded Meta-World workers, batched HalfCheetah)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from metabench.algos.base import MetaRLAlgorithm
from metabench.algos.implementation import Benchmark, Implementation
from metabench.algos.maml.config import MAMLConfig
from metabench.algos.maml.maml import MAML
from metabench.validation import config_dict

GARAGE_VARIANTS: dict[str, dict[str, Any]] = {
    "trpo": {},
    "ppo": {"inner_loss": "ppo", "outer_loss": "ppo", "outer_optimizer": "adam"},
    "vpg": {"inner_loss": "vpg", "outer_loss": "vpg", "outer_optimizer": "adam"},
}
"""What makes :class:`MAMLConfig` garage's ``MAMLTRPO``, ``MAMLPPO`` or ``MAMLVPG``: the inner
algorithm's loss (garage uses it for the inner step and the meta-loss; MAML-TRPO keeps
pytorch-maml-rl's likelihood-ratio meta-loss) and the meta-optimiser."""


def _defaults_of(variant: str) -> Callable[[Benchmark], dict[str, Any]]:
    def defaults(spec: Benchmark) -> dict[str, Any]:
        return config_dict(MAMLConfig(**GARAGE_VARIANTS[variant]))

    defaults.__name__ = f"maml_{variant}_defaults"
    return defaults


def _build_maml(
    spec: Benchmark,
    seed: int,
    hyperparameters: dict[str, Any],
    log_dir: str | None,
    cpus: int | None = None,
    device: str = "cpu",
) -> MetaRLAlgorithm:
    config = MAMLConfig(**hyperparameters)
    env_kwargs = spec.train_env_kwargs(seed)
    num_envs = config.meta_batch_size * config.episodes_per_task
    vec_env: gym.vector.VectorEnv[Any, Any, Any] | None = None
    if spec.metaworld is not None:
        # Meta-World: the sub-envs sharded across worker processes, one per core (at most
        # `cpus`), each stepping its shard in a loop (the same results as in-process)
        from metabench.vector.sharded import make_sharded_task_env

        # (the collector reads no infos: the workers send none)
        vec_env = make_sharded_task_env(
            spec.env_id, num_envs, n_workers=cpus, info_keys=(), **env_kwargs
        )
    elif gym.spec(spec.env_id).vector_entry_point is not None:
        # a batched vector env (HalfCheetah: all cheetahs stepped as one) instead of one
        # Python env per episode; the collector talks to both through the same API
        # (stepped on at most `cpus` processes, the calling one included: same results)
        kwargs: dict[str, Any] = {**env_kwargs, **({} if cpus is None else {"nthread": cpus})}
        vec_env = gym.make_vec(
            spec.env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
        )
    try:
        return MAML(
            spec.env_id,
            spec.train_sampler(seed),
            config,
            seed=seed,
            env_kwargs=env_kwargs,
            vec_env=vec_env,
            device=device,
        )
    except BaseException:
        if vec_env is not None:  # do not leak its worker processes
            vec_env.close()
        raise


_CONFIG = "metabench.algos.maml.config:MAMLConfig"

MAML_TRPO = Implementation(_defaults_of("trpo"), _build_maml, config=_CONFIG)
"""MAML-TRPO on a benchmark: ``entry_point = "metabench.algos.maml:MAML_TRPO"``."""

MAML_PPO = Implementation(_defaults_of("ppo"), _build_maml, config=_CONFIG)
"""MAML-PPO (PPO's clipped loss inside and out, Adam outer step):
``entry_point = "metabench.algos.maml:MAML_PPO"``."""

MAML_VPG = Implementation(_defaults_of("vpg"), _build_maml, config=_CONFIG)
"""MAML-VPG (the vanilla policy gradient inside and out, Adam outer step):
``entry_point = "metabench.algos.maml:MAML_VPG"``."""
