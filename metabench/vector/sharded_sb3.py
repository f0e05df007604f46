"""An SB3 ``VecEnv`` whose sub-envs are sharded across worker processes (RL2 on Meta-World).

SB3's ``SubprocVecEnv`` runs one process per sub-env: 20 processes for an ML10 meta-batch on a
2-core machine, each woken for one env step at a time. :class:`ShardedSubprocVecEnv` splits the
sub-envs into ``processes`` shards, each a ``DummyVecEnv``: the first is stepped by the calling
process itself, the others by one worker process each, all at the same time. Shards interleave
(sub-env ``i`` is in shard ``i % processes``): a meta-batch lists its tasks class by class, and
Meta-World's classes differ several-fold in step time, so contiguous shards would leave one
process waiting on the other. Stepping a
shard in the calling process instead of waiting on a worker matters on virtual machines, where
waking a process's idle core costs about as much as a Meta-World step
(``scripts/profile_ml10.py``).

Each shard is stepped, reset and seeded by SB3's own ``DummyVecEnv`` (sub-env ``i`` gets the seed
``seed + i``, autoreset at episode ends with ``info["terminal_observation"]``), so for the same
env factories and actions the results are exactly those of one ``DummyVecEnv`` of all sub-envs,
whatever the number of processes (``tests/vector/test_sharded_sb3.py``).

Example::

    >>> import functools, metabench
    >>> from metabench.tasks.toy.envs import PointGoalEnv
    >>> venv = ShardedSubprocVecEnv([functools.partial(PointGoalEnv, horizon=3)] * 5, processes=2)
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
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from metabench.validation import check_count
from metabench.workers import WorkerPool, worker_started

__all__ = ["ShardedSubprocVecEnv"]


ACCESS = ("get_attr", "set_attr", "env_method", "env_is_wrapped")
"""The sub-env access commands, answered by :func:`_access` in a worker or the calling process."""


def _access(venv: DummyVecEnv, command: str, data: tuple[Any, ...]) -> Any:
    """``venv``'s answer to an access command; ``data`` ends with the shard's local indices."""
    if command == "env_method":
        name, args, kwargs, indices = data
        return venv.env_method(name, *args, indices=indices, **kwargs)
    return getattr(venv, command)(*data)


def _worker(conn: Connection, parent_ends: Sequence[Connection], env_fns: bytes) -> None:
    """Serve one shard, a ``DummyVecEnv``, until ``close`` (or the parent is gone)."""
    worker_started(parent_ends)
    venv: DummyVecEnv | None = None
    state: dict[str, Any] = {}  # kept between "run" commands
    try:
        venv = DummyVecEnv(cloudpickle.loads(env_fns))
        conn.send((venv.observation_space, venv.action_space))
        while True:
            command, data = conn.recv()
            if command == "run":
                function, args = data
                conn.send(function(state, *args))
            elif command == "step":
                conn.send(venv.step(data))
            elif command == "reset":
                seeds, options = data
                venv._seeds, venv._options = seeds, options
                conn.send((venv.reset(), venv.reset_infos))
            elif command in ACCESS:
                conn.send(_access(venv, command, data))
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
    """``len(env_fns)`` sub-envs in ``processes`` interleaved shards, each a ``DummyVecEnv``: the
    first in the calling process, the others in one worker process each (see the module doc).

    :param env_fns: one factory per sub-env (sent to the workers with cloudpickle).
    :param processes: processes that step sub-envs, the calling one included; default
        ``os.cpu_count()``, capped at the number of sub-envs.
    :param context: the multiprocessing start method; default ``"fork"`` where available.

    An exception in a sub-env of the first shard is raised as it is; one in a worker's sub-env
    ends the worker, and the call raises :class:`~metabench.workers.WorkerDied` naming
    it (the traceback is on stderr).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        processes: int | None = None,
        *,
        context: str | None = None,
    ) -> None:
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("ShardedSubprocVecEnv needs at least one env factory")
        processes = check_count(
            "processes", os.cpu_count() or 1 if processes is None else processes
        )
        n = len(env_fns)
        processes = min(processes, n)
        self.shards = [list(range(p, n, processes)) for p in range(processes)]
        """The sub-envs of each shard (``i % processes``); the first is stepped here."""
        self._order = np.concatenate(self.shards)
        self._unshard = np.argsort(self._order)  # shard-major results -> sub-env order
        if context is None:
            context = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        self._pool = WorkerPool(
            _worker,
            [(cloudpickle.dumps([env_fns[i] for i in shard]),) for shard in self.shards[1:]],
            [f"ShardedSubprocVecEnv-{p}" for p in range(1, processes)],
            context=context,
        )
        self.closed = False
        self._local = DummyVecEnv([env_fns[i] for i in self.shards[0]])
        for w in range(len(self._pool)):
            self._pool.recv(w)
        super().__init__(n, self._local.observation_space, self._local.action_space)
        self._actions: np.ndarray | None = None

    # -- stepping --------------------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        for w, shard in enumerate(self.shards[1:]):
            seeds = [self._seeds[i] for i in shard]
            self._pool.send(w, ("reset", (seeds, [self._options[i] for i in shard])))
        local = self.shards[0]
        self._local._seeds = [self._seeds[i] for i in local]
        self._local._options = [self._options[i] for i in local]
        replies = [(self._local.reset(), self._local.reset_infos)]
        replies += [self._pool.recv(w) for w in range(len(self._pool))]
        self.reset_infos = self._in_order([info for _, infos in replies for info in infos])
        self._reset_seeds()
        self._reset_options()
        return self._stacked([obs for obs, _ in replies])

    def step_async(self, actions: np.ndarray) -> None:
        for w, shard in enumerate(self.shards[1:]):
            self._pool.send(w, ("step", actions[shard]))
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        assert self._actions is not None
        try:
            replies = [self._local.step(self._actions[self.shards[0]])]  # while workers step
        finally:  # a sub-env here that raises: the workers' replies are still read
            replies_of_workers = [self._pool.recv(w) for w in range(len(self._pool))]
        replies += replies_of_workers
        return (
            self._stacked([obs for obs, *_ in replies]),
            np.concatenate([reply[1] for reply in replies])[self._unshard],
            np.concatenate([reply[2] for reply in replies])[self._unshard],
            self._in_order([info for reply in replies for info in reply[3]]),
        )

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._pool.close(("close", None), wait_reply=True)
        self._local.close()

    def _stacked(self, parts: list[Any]) -> Any:
        """The shards' observations as one batch in sub-env order (arrays or dicts of them)."""
        if isinstance(parts[0], dict):
            return {
                key: np.concatenate([part[key] for part in parts])[self._unshard]
                for key in parts[0]
            }
        return np.concatenate(parts)[self._unshard]

    def _in_order(self, shard_major: list[Any]) -> list[Any]:
        return [shard_major[j] for j in self._unshard]

    # -- other work for the workers ---------------------------------------------------------------
    @property
    def processes(self) -> int:
        """The processes that step sub-envs, the calling one included (one per shard); the
        others are the workers ``0`` to ``processes - 2`` of :meth:`run_async`."""
        return len(self.shards)

    def run_async(self, worker: int, function: Callable[..., Any], *args: Any) -> None:
        """Start ``function(state, *args)`` in worker ``worker`` and return at once.

        ``function`` must be picklable (a module-level function); ``state`` is a dict the worker
        keeps between calls (e.g. a model built once). :meth:`run_wait` returns the result.
        Used to spread non-env work, such as the RL2 update, over the cores the workers step on.
        """
        self._pool.send(worker, ("run", (function, args)))

    def run_wait(self, worker: int) -> Any:
        """The result of the last :meth:`run_async` in worker ``worker``."""
        return self._pool.recv(worker)

    # -- sub-env access --------------------------------------------------------------------------
    def _ask(self, command: str, indices: VecEnvIndices, *data: Any) -> list[Any]:
        """The answers to ``command`` for the sub-envs ``indices``, in that order; the workers
        are asked first, so they work while this process does."""
        wanted = list(self._get_indices(indices))
        where = {i: (p, shard.index(i)) for p, shard in enumerate(self.shards) for i in shard}
        asked: dict[int, list[int]] = {}  # shard -> its local indices, in the order wanted
        for i in wanted:
            shard, local_index = where[i]
            asked.setdefault(shard, []).append(local_index)
        for shard, local_indices in asked.items():
            if shard > 0:
                self._pool.send(shard - 1, (command, (*data, local_indices)))
        answers: dict[int, list[Any]] = {}
        for shard, local_indices in asked.items():
            if shard == 0:
                answer = _access(self._local, command, (*data, local_indices))
            else:
                answer = self._pool.recv(shard - 1)
            answers[shard] = [None] * len(local_indices) if answer is None else list(answer)
        return [answers[where[i][0]].pop(0) for i in wanted]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._ask("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._ask("set_attr", indices, attr_name, value)

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
