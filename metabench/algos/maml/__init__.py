"""MAML (Finn et al. 2017) in PyTorch: functional Gaussian policy, vectorised episode collector,
linear feature baseline, a VPG, PPO or TRPO loss, and a TRPO (:mod:`metabench.algos.common.trpo`) or
Adam outer loop: garage's MAML-TRPO, MAML-PPO and MAML-VPG."""

from metabench.algos.maml.collector import VectorEpisodeCollector
from metabench.algos.maml.config import MAMLConfig
from metabench.algos.maml.functional import (
    OldOutputs,
    TaskData,
    adapt,
    inner_loss,
    kl,
    meta_loss,
    old_outputs,
    process_episodes,
)
from metabench.algos.maml.losses import POLICY_GRADIENT_LOSSES, policy_gradient_loss
from metabench.algos.maml.maml import MAML, MAML_IMPLEMENTATION, MAMLIterationStats
from metabench.algos.maml.outer import AdamStep, adam_step
from metabench.algos.maml.policy import (
    BatchedGaussianActor,
    GaussianMLPPolicy,
    GaussianPolicy,
    check_policy_spaces,
)

__all__ = [
    "MAML",
    "MAML_IMPLEMENTATION",
    "POLICY_GRADIENT_LOSSES",
    "AdamStep",
    "BatchedGaussianActor",
    "GaussianMLPPolicy",
    "GaussianPolicy",
    "MAMLConfig",
    "MAMLIterationStats",
    "OldOutputs",
    "TaskData",
    "VectorEpisodeCollector",
    "adam_step",
    "adapt",
    "check_policy_spaces",
    "inner_loss",
    "kl",
    "meta_loss",
    "old_outputs",
    "policy_gradient_loss",
    "process_episodes",
]
