"""MAML-TRPO (Finn et al. 2017) in PyTorch: functional Gaussian policy, vectorised episode
collector, linear feature baseline and a TRPO outer loop (:mod:`metabench.algos.trpo`)."""

from typing import Any

from metabench.algos.maml.baseline import LinearFeatureBaseline
from metabench.algos.maml.collector import VectorEpisodeCollector, make_maml_vec_env
from metabench.algos.maml.maml import (
    MAML_TRPO,
    MAMLTRPO,
    MAMLIterationStats,
    MAMLTRPOConfig,
    OldOutputs,
    TaskData,
    adapt,
    inner_loss,
    kl,
    meta_loss,
    old_outputs,
    process_episodes,
)
from metabench.algos.maml.policy import (
    BatchedGaussianActor,
    GaussianMLPPolicy,
    GaussianPolicy,
    check_policy_spaces,
)
from metabench.algos.maml.returns import discounted_returns, gae_advantages

__all__ = [
    "MAMLTRPO",
    "MAML_TRPO",
    "BatchedGaussianActor",
    "GaussianMLPPolicy",
    "GaussianPolicy",
    "LinearFeatureBaseline",
    "MAMLIterationStats",
    "MAMLTRPOConfig",
    "OldOutputs",
    "TaskData",
    "VectorEpisodeCollector",
    "adapt",
    "check_policy_spaces",
    "discounted_returns",
    "gae_advantages",
    "inner_loss",
    "kl",
    "make_maml_vec_env",
    "meta_loss",
    "old_outputs",
    "process_episodes",
]


def __getattr__(name: str) -> Any:
    if name == "VectorEpisodeSampler":  # the old name, for one release
        from metabench.algos.maml import sampler

        return getattr(sampler, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
