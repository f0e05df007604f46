"""Meta-RL algorithms behind one interface (:mod:`metabench.algos.base`).

RL2-PPO and RL2-TRPO (:mod:`metabench.algos.rl2`, on sb3-contrib's RecurrentPPO), MAML-TRPO,
MAML-PPO and MAML-VPG (:mod:`metabench.algos.maml`, PyTorch, one MAML with a choice of inner loss
and outer optimiser; TRPO steps from the reusable :mod:`metabench.algos.common.trpo`), PEARL
(:mod:`metabench.algos.pearl`, on Stable-Baselines3's SAC networks), the
per-task policy-search baselines CEM and CMA-ES, NOP, and the PPO references
(:mod:`metabench.algos.reference`) live in their own modules, each exporting the
:class:`~metabench.algos.implementation.Implementation` that a ``baselines/*.toml`` file's
``entry_point`` names; :mod:`metabench.harness.algorithms` reads those files. Nothing here
imports the harness. This package's own names are the interface every algorithm implements.
"""

from metabench.algos.base import MetaRLAlgorithm, Policy, PolicyBatch, PolicyList
from metabench.algos.benchmark import Benchmark
from metabench.algos.implementation import Implementation

__all__ = ["Benchmark", "Implementation", "MetaRLAlgorithm", "Policy", "PolicyBatch", "PolicyList"]
