"""Meta-RL algorithms behind one interface (:mod:`metabench.algos.base`).

RL2-PPO (:mod:`metabench.algos.rl2`, on sb3-contrib's RecurrentPPO), MAML-TRPO
(:mod:`metabench.algos.maml`, PyTorch, with the reusable :mod:`metabench.algos.trpo`), the
per-task policy-search baselines CEM and CMA-ES, and NOP. :mod:`metabench.algos.registry` builds
them by name for a benchmark.
"""
