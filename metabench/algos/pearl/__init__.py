"""PEARL (Rakelly et al. 2019) in PyTorch on Stable-Baselines3's SAC pieces: the context encoder
with its information bottleneck, per-task RL and encoder buffers, a soft actor-critic with a
V-function on ``[observation, z]``, and posterior-sampling meta-test policies; garage's and
oyster's PEARL."""

from metabench.algos.pearl.algorithm import PEARL, PEARL_IMPLEMENTATION, pearl_env
from metabench.algos.pearl.buffers import TaskReplayBuffer, Transitions, bytes_per_transition
from metabench.algos.pearl.config import PEARLConfig
from metabench.algos.pearl.encoder import (
    ContextEncoder,
    context_width,
    kl_from_prior,
    product_of_gaussians,
    sample_latent,
)
from metabench.algos.pearl.losses import policy_loss, q_loss, q_target, v_loss
from metabench.algos.pearl.policy import (
    AdaptedPolicies,
    ExplorationPolicies,
    RewardInObservation,
    SinglePolicy,
    episode_context,
)

__all__ = [
    "PEARL",
    "PEARL_IMPLEMENTATION",
    "AdaptedPolicies",
    "ContextEncoder",
    "ExplorationPolicies",
    "PEARLConfig",
    "RewardInObservation",
    "SinglePolicy",
    "TaskReplayBuffer",
    "Transitions",
    "bytes_per_transition",
    "context_width",
    "episode_context",
    "kl_from_prior",
    "pearl_env",
    "policy_loss",
    "product_of_gaussians",
    "q_loss",
    "q_target",
    "sample_latent",
    "v_loss",
]
