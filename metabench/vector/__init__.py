"""Vector envs of task envs.

- :mod:`~metabench.vector.meta_batch`: :func:`make_meta_vec_env`, trial-aware vector envs (SB3 or
  Gymnasium) with one task per sub-env and a fresh meta-batch every trial;
- :mod:`~metabench.vector.sharded`: many task envs stepped per worker process;
- :mod:`~metabench.vector.sharded_sb3`: the same as an SB3 ``VecEnv``;
- :mod:`~metabench.tasks.halfcheetah.vector`: HalfCheetahVel/Dir as one vector env, every cheetah
  stepped together;
- :mod:`~metabench.workers`: the worker processes under both sharded envs.
"""

from metabench.vector.meta_batch import (
    MetaBatchSlot,
    MetaBatchVecEnv,
    MetaBatchVectorEnv,
    VectorBackend,
    make_meta_vec_env,
)

__all__ = [
    "MetaBatchSlot",
    "MetaBatchVecEnv",
    "MetaBatchVectorEnv",
    "VectorBackend",
    "make_meta_vec_env",
]
