"""An SB3 ``VecEnv`` whose sub-envs are sharded across worker processes (RL2 on Meta-World).

SB3's ``SubprocVecEnv`` runs one process per sub-env: 20 processes for an ML10 meta-batch on a
2-core machine, each woken for one env step at a time. :class:`ShardedSubprocVecEnv` runs
``n_workers`` processes instead, each holding a ``DummyVecEnv`` of a contiguous shard of the
sub-envs, so every worker steps its shard in a loop while the others step theirs.

Each shard is stepped, reset and seeded by SB3's own ``DummyVecEnv`` (sub-env ``i`` gets the seed
``seed + i``, autoreset at episode ends with ``info["terminal_observation"]``), so for the same
env factories and actions the results are exactly those of one ``DummyVecEnv`` of all sub-envs,
whatever the number of workers (``tests/test_vector_sharded_sb3.py``).

Example::

    >>> import functools, metabench
    >>> from metabench.tasks.toy import PointGoalEnv
    >>> venv = ShardedSubprocVecEnv([functools.partial(PointGoalEnv, horizon=3)] * 5, n_workers=2)
    >>> venv.seed(0)
    [0, 1, 2, 3, 4]
    >>> venv.reset().shape
    (5, 2)
    >>> venv.close()
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from metabench.validation import check_count
from metabench.vector.workers import WorkerPool, worker_started

__all__ = ["ShardedSubprocVecEnv"]


def _worker(conn: Connection, parent_ends: Sequence[Connection], env_fns: bytes) -> None:
    """Serve one shard, a ``DummyVecEnv``, until ``close`` (or the parent is gone)."""
    worker_started(parent_ends)
    venv: DummyVecEnv | None = None
    try:
        venv = DummyVecEnv(cloudpickle.loads(env_fns))
        conn.send((venv.observation_space, venv.action_space))
        while True:
            command, data = conn.recv()
            if command == "step":
                conn.send(venv.step(data))
            elif command == "reset":
                seeds, options = data
                venv._seeds, venv._options = seeds, options
                conn.send((venv.reset(), venv.reset_infos))
            elif command == "get_attr":
                conn.send(venv.get_attr(*data))
            elif command == "set_attr":
                venv.set_attr(*data)
                conn.send(None)
            elif command == "env_method":
                name, args, kwargs, indices = data
                conn.send(venv.env_method(name, *args, indices=indices, **kwargs))
            elif command == "env_is_wrapped":
                conn.send(venv.env_is_wrapped(*data))
            elif command == "close":
                venv.close()
                conn.send(None)
                return
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass  # the parent went away
    finally:
        if venv is not None:
            with contextlib.suppress(Exception):
                venv.close()
        conn.close()


class ShardedSubprocVecEnv(VecEnv):
    """``len(env_fns)`` sub-envs in ``n_workers`` processes, each a ``DummyVecEnv`` of a
    contiguous shard (see the module doc).

    :param env_fns: one factory per sub-env (sent with cloudpickle).
    :param n_workers: worker processes; default ``os.cpu_count()``, capped at the number of
        sub-envs. Shards differ in size by at most one.
    :param context: the multiprocessing start method; default ``"fork"`` where available.

    An exception in a sub-env ends its worker: the next call raises
    :class:`~metabench.vector.workers.WorkerDied` naming it, with the traceback on stderr.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        n_workers: int | None = None,
        *,
        context: str | None = None,
    ) -> None:
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("ShardedSubprocVecEnv needs at least one env factory")
        n_workers = check_count(
            "n_workers", os.cpu_count() or 1 if n_workers is None else n_workers
        )
        n = len(env_fns)
        n_workers = min(n_workers, n)
        bounds = np.cumsum([0] + [n // n_workers + (w < n % n_workers) for w in range(n_workers)])
        self.shards = [(int(bounds[w]), int(bounds[w + 1])) for w in range(n_workers)]
        """The ``(start, stop)`` sub-env range of each worker."""
        if context is None:
            context = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        self._pool = WorkerPool(
            _worker,
            [(cloudpickle.dumps(env_fns[start:stop]),) for start, stop in self.shards],
            [f"ShardedSubprocVecEnv-{start}-{stop - 1}" for start, stop in self.shards],
            context=context,
        )
        self.closed = False
        observation_space, action_space = self._pool.recv(0)
        for w in range(1, n_workers):
            self._pool.recv(w)
        super().__init__(n, observation_space, action_space)
        self._actions: np.ndarray | None = None

    # -- stepping --------------------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        for w, (start, stop) in enumerate(self.shards):
            self._pool.send(w, ("reset", (self._seeds[start:stop], self._options[start:stop])))
        replies = [self._pool.recv(w) for w in range(len(self.shards))]
        self.reset_infos = [info for _, infos in replies for info in infos]
        self._reset_seeds()
        self._reset_options()
        return _concatenate([obs for obs, _ in replies])

    def step_async(self, actions: np.ndarray) -> None:
        for w, (start, stop) in enumerate(self.shards):
            self._pool.send(w, ("step", actions[start:stop]))

    def step_wait(self) -> VecEnvStepReturn:
        replies = [self._pool.recv(w) for w in range(len(self.shards))]
        return (
            _concatenate([obs for obs, *_ in replies]),
            np.concatenate([reply[1] for reply in replies]),
            np.concatenate([reply[2] for reply in replies]),
            [info for reply in replies for info in reply[3]],
        )

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._pool.close(("close", None), wait_reply=True)

    # -- sub-env access --------------------------------------------------------------------------
    def _per_worker(self, indices: VecEnvIndices) -> Iterable[tuple[int, list[int]]]:
        """``(worker, its local indices)`` for the sub-envs ``indices``, in sub-env order."""
        for w, (start, stop) in enumerate(self.shards):
            local = [i - start for i in self._get_indices(indices) if start <= i < stop]
            if local:
                yield w, local

    def _ask(self, command: str, indices: VecEnvIndices, *data: Any) -> list[Any]:
        asked = list(self._per_worker(indices))
        for w, local in asked:
            self._pool.send(w, (command, (*data, local)))
        return [result for w, _ in asked for result in self._pool.recv(w)]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._ask("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        asked = list(self._per_worker(indices))
        for w, local in asked:
            self._pool.send(w, ("set_attr", (attr_name, value, local)))
        for w, _ in asked:
            self._pool.recv(w)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **kwargs: Any
    ) -> list[Any]:
        return self._ask("env_method", indices, method_name, method_args, kwargs)

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]], indices: VecEnvIndices = None
    ) -> list[bool]:
        return self._ask("env_is_wrapped", indices, wrapper_class)

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            with contextlib.suppress(Exception):
                self._pool.close(terminate=True)


def _concatenate(parts: list[Any]) -> Any:
    """The shards' observations as one batch (arrays, or dicts of arrays)."""
    if isinstance(parts[0], dict):
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}
    return np.concatenate(parts)
