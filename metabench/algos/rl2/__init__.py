"""RL² (recurrent policy trained across trials) building blocks for sb3-contrib's RecurrentPPO."""

from metabench.algos.rl2.policy import WholeSequenceGruPolicy, WholeSequenceLstmPolicy

__all__ = ["WholeSequenceGruPolicy", "WholeSequenceLstmPolicy"]
