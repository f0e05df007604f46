"""Vector envs of task envs.

- :mod:`~metabench.vector.meta_batch`: :func:`make_meta_vec_env`, trial-aware vector envs (SB3 or
  Gymnasium) with one task per sub-env and a fresh meta-batch every trial, and
  :func:`make_task_vec_env`, plain task envs whose tasks the caller pins (MAML's);
- :mod:`~metabench.vector.sharded`: many task envs stepped per worker process;
- :mod:`~metabench.vector.sharded_sb3`: the same as an SB3 ``VecEnv``;
- :mod:`~metabench.tasks.halfcheetah.vector`: HalfCheetahVel/Dir as one vector env, every cheetah
  stepped together;
- :mod:`~metabench.workers`: the worker processes under both sharded envs.

Wherever metabench takes ``processes``, it is one count: the processes that step the envs at
once. The calling process is one of them where it steps a shard (:func:`make_meta_vec_env`,
:class:`~metabench.vector.sharded_sb3.ShardedSubprocVecEnv`, HalfCheetah's vector env, the
batched meta-test), and not where it only waits for the workers
(:class:`~metabench.vector.sharded.ShardedVectorEnv`). Whether to step in worker processes at
all is a true/false option named for it (RL2's ``step_in_workers``, a task family's
``steps_in_workers``). The number of processes never changes the numbers.
"""

from metabench.vector.meta_batch import (
    MetaBatchSlot,
    MetaBatchVecEnv,
    MetaBatchVectorEnv,
    VectorBackend,
    make_meta_vec_env,
    make_task_vec_env,
)

__all__ = [
    "MetaBatchSlot",
    "MetaBatchVecEnv",
    "MetaBatchVectorEnv",
    "VectorBackend",
    "make_meta_vec_env",
    "make_task_vec_env",
]
