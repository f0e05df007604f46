"""metabench: meta-reinforcement-learning benchmarks on Gymnasium, MuJoCo, Meta-World and PyTorch.

Importing the package registers the Gymnasium ids ``metabench/<Task>-v0`` and
``metabench/RL2-<Task>-v0`` (see :mod:`metabench.registration`).
"""

from metabench._version import __version__
from metabench.registration import register_envs

register_envs()

__all__ = ["__version__", "register_envs"]
