"""What several algorithms share, below all of them.

- :mod:`~metabench.algos.common.trpo`: TRPO's natural-gradient step (MAML-TRPO, RL2-TRPO);
- :mod:`~metabench.algos.common.baseline`: the linear feature baseline (MAML, RL2 on Meta-World);
- :mod:`~metabench.algos.common.returns`: discounted returns and GAE;
- :mod:`~metabench.algos.common.sb3`: the pieces of the SB3-based algorithms (RL2, references).
"""
