"""MAML-TRPO (Finn et al. 2017) in PyTorch: functional Gaussian policy, vectorised sampler,
linear feature baseline and a TRPO outer loop (:mod:`metabench.algos.trpo`)."""

from metabench.algos.maml.baseline import LinearFeatureBaseline
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
from metabench.algos.maml.sampler import VectorEpisodeSampler, make_maml_vec_env

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
    "VectorEpisodeSampler",
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
