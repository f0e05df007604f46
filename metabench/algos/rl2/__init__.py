"""RL² (Duan et al. 2016): a recurrent policy trained across trials, on sb3-contrib's RecurrentPPO.

:class:`RL2` is the meta-RL algorithm; :class:`RL2PPO` and :class:`RL2TRPO` choose its inner
algorithm, :class:`RL2RecurrentPPO` (RecurrentPPO trained a whole sequence at a time, with
garage's linear feature baseline and max-entropy rewards) or :class:`RL2RecurrentTRPO` (one
trust-region step per iteration), over the whole-sequence policies :class:`WholeSequenceLstmPolicy`
and :class:`WholeSequenceGruPolicy`. ``RL2_PPO`` and ``RL2_TRPO`` are what the baseline files'
``entry_point`` names.
"""

from metabench.algos.rl2.algorithm import (
    RL2,
    RL2_PPO,
    RL2PPO,
    RL2AdaptedPolicy,
    RL2ExplorationPolicy,
    RL2PolicyBatch,
    RL2PPOConfig,
)
from metabench.algos.rl2.policy import TanhEncoder, WholeSequenceGruPolicy, WholeSequenceLstmPolicy
from metabench.algos.rl2.ppo import RL2RecurrentPPO
from metabench.algos.rl2.trpo import RL2RecurrentTRPO
from metabench.algos.rl2.trpo_algorithm import RL2_TRPO, RL2TRPO, RL2TRPOConfig

__all__ = [
    "RL2",
    "RL2PPO",
    "RL2TRPO",
    "RL2_PPO",
    "RL2_TRPO",
    "RL2AdaptedPolicy",
    "RL2ExplorationPolicy",
    "RL2PPOConfig",
    "RL2PolicyBatch",
    "RL2RecurrentPPO",
    "RL2RecurrentTRPO",
    "RL2TRPOConfig",
    "TanhEncoder",
    "WholeSequenceGruPolicy",
    "WholeSequenceLstmPolicy",
]
