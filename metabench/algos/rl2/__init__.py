"""RL² (Duan et al. 2016): a recurrent policy trained across trials, on sb3-contrib's RecurrentPPO.

One module per role:

- ``base``: :class:`RL2`, the meta-RL algorithm whatever updates its policy (the trial-aware
  vector env, one trial per sub-env per iteration, checkpoints) and the options every RL2 config
  shares;
- ``meta_test``: its meta-test policies (:class:`RL2ExplorationPolicy`,
  :class:`RL2AdaptedPolicy`, :class:`RL2PolicyBatch`);
- ``rl2_ppo`` and ``rl2_trpo``: :class:`RL2PPO` and :class:`RL2TRPO`, their configs, and
  ``RL2_PPO`` and ``RL2_TRPO``, what the baseline files' ``entry_point`` names;
- ``recurrent_ppo`` and ``recurrent_trpo``: the models that update the policy,
  :class:`RL2RecurrentPPO` (RecurrentPPO trained a whole sequence at a time, with garage's linear
  feature baseline and max-entropy rewards) and :class:`RL2RecurrentTRPO` (one trust-region step
  per iteration);
- ``policy``: the whole-sequence recurrent policies (:class:`WholeSequenceLstmPolicy`,
  :class:`WholeSequenceGruPolicy`);
- ``update_context``, ``chunked_update``, ``parallel_update``: the update strategies.
"""

from metabench.algos.rl2.base import RL2
from metabench.algos.rl2.meta_test import RL2AdaptedPolicy, RL2ExplorationPolicy, RL2PolicyBatch
from metabench.algos.rl2.policy import TanhEncoder, WholeSequenceGruPolicy, WholeSequenceLstmPolicy
from metabench.algos.rl2.recurrent_ppo import RL2RecurrentPPO
from metabench.algos.rl2.recurrent_trpo import RL2RecurrentTRPO
from metabench.algos.rl2.rl2_ppo import RL2_PPO, RL2PPO, RL2PPOConfig
from metabench.algos.rl2.rl2_trpo import RL2_TRPO, RL2TRPO, RL2TRPOConfig

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
