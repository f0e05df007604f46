"""A Gymnasium ``VectorEnv`` whose sub-envs are sharded across worker processes.

Gymnasium's ``AsyncVectorEnv`` runs one process per sub-env, and ``SyncVectorEnv`` steps all of
them in the calling process. A MAML meta-batch of Meta-World envs (20 tasks x 10 episodes) wants
neither 200 processes nor one core: :class:`ShardedVectorEnv` splits the sub-envs into
``processes`` contiguous shards, one worker process per shard, and each worker steps its shard in
a plain Python loop. Per step the parent sends every worker its shard's actions first and then
collects the results, so the shards step in parallel.

Every sub-env is the single env its factory builds, stepped exactly as ``SyncVectorEnv`` steps
it: the same seeds (``reset(seed=s)`` gives sub-env ``i`` the seed ``s + i``), the same
``AutoresetMode.NEXT_STEP`` autoreset (a sub-env whose episode ended is reset by the next
``step``, whose action for it is ignored and whose reward is 0), and the same vector ``infos``
(Gymnasium's ``key``/``_key`` layout). So for the same tasks, seeds and actions it returns the
same observations, rewards, ``terminated``/``truncated`` and infos as a ``SyncVectorEnv`` of the
same envs. ``reset(options={"reset_mask": mask})`` resets only the masked sub-envs, as in
``SyncVectorEnv``.

Tasks: ``set_tasks(tasks)`` calls ``set_task(tasks[i])`` on sub-env ``i`` (task envs apply a task
at their next reset, including an autoreset); :func:`make_sharded_task_env` builds the sub-envs
from a registered metabench task id.

Errors: an exception in a sub-env is raised in the parent as :class:`SubEnvError`, naming the
sub-env and chained to the original exception (``__cause__``) with the worker's traceback in the
message. A worker process that dies raises :class:`SubEnvError` naming its sub-envs, and the
vector env closes. After an error the sub-envs' states are whatever they were when it happened:
call ``reset`` before stepping again.

Example::

    >>> import metabench
    >>> envs = make_sharded_task_env("metabench/PointGoal-v0", 5, processes=2, horizon=3)
    >>> envs.set_tasks([{"goal": [0.1 * i, 0.0]} for i in range(5)])
    >>> obs, info = envs.reset(seed=0)
    >>> obs.shape
    (5, 2)
    >>> envs.close()
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import pickle
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, NoReturn

import cloudpickle
import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import (
    batch_space,
    concatenate,
    create_empty_array,
    iterate,
)

from metabench.tasks.base import Task
from metabench.validation import check_count
from metabench.vector.meta_batch import make_task_env
from metabench.workers import WorkerDied, WorkerPool, worker_started

__all__ = ["ShardedVectorEnv", "SubEnvError", "make_sharded_task_env"]

_CLOSE_TIMEOUT = 5.0  # seconds a worker gets to close its envs before it is terminated


class SubEnvError(RuntimeError):
    """A sub-env of a :class:`ShardedVectorEnv` raised, or its worker process died.

    :ivar index: the sub-env that raised (for a dead worker: the first of its shard).
    """

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index


# -- the worker ------------------------------------------------------------------------------------
class _Shard:
    """The sub-envs ``[start, start + len(envs))`` of one worker, stepped one after another."""

    def __init__(self, start: int, info_keys: frozenset[str] | None = None) -> None:
        self.start = start
        self.info_keys = info_keys
        self.current = start  # the sub-env being worked on, for error reports
        self.envs: list[gym.Env[Any, Any]] = []
        self.autoreset = np.zeros(0, dtype=bool)

    def build(self, env_fns: Sequence[Callable[[], gym.Env[Any, Any]]]) -> None:
        for i, fn in enumerate(env_fns):
            self.current = self.start + i
            self.envs.append(fn())
        self.autoreset = np.zeros(len(self.envs), dtype=bool)

    def reset(
        self, seeds: list[int | None], options: dict[str, Any] | None, mask: np.ndarray | None
    ) -> tuple[list[Any], list[dict[str, Any] | None]]:
        observations: list[Any] = []
        infos: list[dict[str, Any] | None] = []
        for j, env in enumerate(self.envs):
            if mask is not None and not mask[j]:
                observations.append(None)
                infos.append(None)
                continue
            self.current = self.start + j
            obs, info = env.reset(seed=seeds[j], options=options)
            self.autoreset[j] = False
            observations.append(obs)
            infos.append(self._kept(info))
        return observations, infos

    def step(
        self, actions: list[Any]
    ) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        n = len(self.envs)
        observations: list[Any] = []
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        infos: list[dict[str, Any]] = []
        for j, (env, action) in enumerate(zip(self.envs, actions, strict=True)):
            self.current = self.start + j
            if self.autoreset[j]:  # NEXT_STEP: reset, ignore the action
                obs, info = env.reset()
            else:
                obs, rewards[j], terminated[j], truncated[j], info = env.step(action)
            observations.append(obs)
            infos.append(self._kept(info))
        self.autoreset = terminated | truncated
        return observations, rewards, terminated, truncated, infos

    def _kept(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` as the parent asked for it: every key, or only ``info_keys``."""
        if self.info_keys is None:
            return info
        return {key: value for key, value in info.items() if key in self.info_keys}

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        results = []
        for j, env in enumerate(self.envs):
            self.current = self.start + j
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return results

    def get_attr(self, name: str) -> list[Any]:
        results = []
        for j, env in enumerate(self.envs):
            self.current = self.start + j
            results.append(env.get_wrapper_attr(name))
        return results

    def set_attr(self, name: str, values: list[Any]) -> None:
        for j, (env, value) in enumerate(zip(self.envs, values, strict=True)):
            self.current = self.start + j
            env.set_wrapper_attr(name, value)

    def set_tasks(self, tasks: list[Task]) -> None:
        for j, (env, task) in enumerate(zip(self.envs, tasks, strict=True)):
            self.current = self.start + j
            env.get_wrapper_attr("set_task")(task)

    def close(self) -> None:
        for j, env in enumerate(self.envs):
            self.current = self.start + j
            env.close()


def _error_payload(index: int, error: BaseException) -> tuple[int, BaseException | None, str]:
    """What the parent needs to re-raise ``error``: the original if it pickles, and its text."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        pickle.loads(pickle.dumps(error))
        original: BaseException | None = error
    except Exception:
        original = None
    return index, original, text


def _worker(
    conn: Connection,
    parent_ends: Sequence[Connection],
    env_fns: bytes,
    start: int,
    info_keys: frozenset[str] | None,
) -> None:
    """Build a shard and serve the parent's commands until ``close`` (or the parent is gone)."""
    worker_started(parent_ends)
    shard = _Shard(start, info_keys)
    try:
        shard.build(pickle.loads(env_fns))
        first = shard.envs[0]
        conn.send(("ok", (first.observation_space, first.action_space, first.metadata)))
        while True:
            command, data = conn.recv()
            try:
                if command == "step":
                    conn.send(("ok", shard.step(data)))
                elif command == "reset":
                    conn.send(("ok", shard.reset(*data)))
                elif command == "set_tasks":
                    shard.set_tasks(data)
                    conn.send(("ok", None))
                elif command == "call":
                    conn.send(("ok", shard.call(*data)))
                elif command == "get_attr":
                    conn.send(("ok", shard.get_attr(data)))
                elif command == "set_attr":
                    shard.set_attr(*data)
                    conn.send(("ok", None))
                elif command == "close":
                    shard.close()
                    conn.send(("ok", None))
                    return
                else:
                    raise ValueError(f"unknown command {command!r}")
            except Exception as error:
                conn.send(("error", _error_payload(shard.current, error)))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass  # the parent went away
    except Exception as error:  # building the shard failed
        with contextlib.suppress(Exception):
            conn.send(("error", _error_payload(shard.current, error)))
    finally:
        with contextlib.suppress(Exception):
            shard.close()
        conn.close()


# -- the vector env --------------------------------------------------------------------------------
class ShardedVectorEnv(VectorEnv[Any, Any, Any]):
    """``len(env_fns)`` sub-envs in ``processes`` processes, each stepping a contiguous shard.

    See the module doc for the semantics (those of ``SyncVectorEnv`` with
    ``AutoresetMode.NEXT_STEP``).

    :param env_fns: one factory per sub-env; all sub-envs must share their spaces. Factories are
        sent with cloudpickle (only needed without ``fork``).
    :param processes: worker processes; default ``os.cpu_count()``, capped at the number of
        sub-envs. Shards are contiguous and differ in size by at most one.
    :param context: the multiprocessing start method; default ``"fork"`` where available, else
        ``"spawn"``.
    :param info_keys: the ``info`` keys the workers send back (``None``: all). A collector that
        reads no infos passes ``()``: Meta-World's seven per step and sub-env are most of the
        traffic between the processes.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}  # noqa: RUF012

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env[Any, Any]]],
        processes: int | None = None,
        *,
        context: str | None = None,
        info_keys: Sequence[str] | None = None,
    ) -> None:
        self.closed = True  # until the workers are up: __del__ and close() have nothing to do
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("ShardedVectorEnv needs at least one env factory")
        if processes is None:
            processes = os.cpu_count() or 1
        processes = check_count("processes", processes, hint="pass None for every core")
        self.num_envs = len(env_fns)
        processes = min(processes, self.num_envs)
        sizes = [
            self.num_envs // processes + (w < self.num_envs % processes) for w in range(processes)
        ]
        bounds = np.cumsum([0, *sizes])
        self.shards: list[tuple[int, int]] = [
            (int(bounds[w]), int(bounds[w + 1])) for w in range(processes)
        ]
        """The ``(start, stop)`` sub-env range of each worker."""
        if context is None:
            methods = multiprocessing.get_all_start_methods()
            context = "fork" if "fork" in methods else "spawn"
        self._pool = WorkerPool(
            _worker,
            [
                (
                    cloudpickle.dumps(env_fns[start:stop]),
                    start,
                    None if info_keys is None else frozenset(info_keys),
                )
                for start, stop in self.shards
            ],
            [f"ShardedVectorEnv-{start}-{stop - 1}" for start, stop in self.shards],
            context=context,
        )
        self.processes = self._pool.processes
        """The worker processes, one per shard."""
        self.closed = False

        try:
            shard_specs = self._receive_all()
        except BaseException:
            self.close(terminate=True)
            raise
        self.single_observation_space, self.single_action_space, sub_metadata = shard_specs[0]
        for (start, _), (obs_space, action_space, _) in zip(self.shards, shard_specs, strict=True):
            if obs_space != self.single_observation_space or (
                action_space != self.single_action_space
            ):
                self.close()
                raise ValueError(
                    f"sub-env {start} has other spaces than sub-env 0 "
                    f"({obs_space}, {action_space} vs {self.single_observation_space}, "
                    f"{self.single_action_space}): all sub-envs must share their spaces"
                )
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**sub_metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = None
        self._env_obs: list[Any] = [None] * self.num_envs

    # -- Gymnasium API -----------------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-env (sub-env ``i`` with ``seed + i``), or those of
        ``options["reset_mask"]``."""
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(
                    f"got {len(seeds)} seeds for {self.num_envs} sub-envs: pass one per sub-env"
                )
        mask: np.ndarray | None = None
        if options is not None and "reset_mask" in options:
            options = dict(options)
            mask = options.pop("reset_mask")
            if (
                not isinstance(mask, np.ndarray)
                or mask.dtype != np.bool_
                or mask.shape != (self.num_envs,)
                or not mask.any()
            ):
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({self.num_envs},) "
                    f"with at least one True, got {mask!r}"
                )
        self._send_all(
            "reset",
            [
                (seeds[start:stop], options, None if mask is None else mask[start:stop])
                for start, stop in self.shards
            ],
        )
        infos: dict[str, Any] = {}
        for (start, _), (observations, env_infos) in zip(
            self.shards, self._receive_all(), strict=True
        ):
            for j, (obs, info) in enumerate(zip(observations, env_infos, strict=True)):
                if info is not None:
                    self._env_obs[start + j] = obs
                    infos = self._add_info(infos, info, start + j)
        return self._observations(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-env (autoresetting those whose episode ended at the last step)."""
        per_env = list(iterate(self.action_space, actions))
        if len(per_env) != self.num_envs:
            raise ValueError(f"got {len(per_env)} actions for {self.num_envs} sub-envs")
        self._send_all("step", [per_env[start:stop] for start, stop in self.shards])
        results = self._receive_all()
        infos: dict[str, Any] = {}
        for (start, _), (observations, _, _, _, env_infos) in zip(
            self.shards, results, strict=True
        ):
            self._env_obs[start : start + len(observations)] = observations
            for j, info in enumerate(env_infos):
                infos = self._add_info(infos, info, start + j)
        rewards = np.concatenate([result[1] for result in results])
        terminated = np.concatenate([result[2] for result in results])
        truncated = np.concatenate([result[3] for result in results])
        return self._observations(), rewards, terminated, truncated, infos

    def close_extras(self, terminate: bool = False, **kwargs: Any) -> None:
        """Stop the workers: ask them to close their envs, terminate those that do not."""
        self._pool.close(
            ("close", None), wait_reply=True, timeout=_CLOSE_TIMEOUT, terminate=terminate
        )

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            with contextlib.suppress(Exception):
                self.close(terminate=True)

    # -- tasks and sub-env access ------------------------------------------------------------------
    def set_tasks(self, tasks: Sequence[Task] | None) -> None:
        """Call ``set_task(tasks[i])`` on sub-env ``i``: its next reset (or autoreset) runs it.

        ``None`` changes nothing: a task env cannot forget its task, so every sub-env keeps its
        current one (a sub-env that never had one draws it at its first reset).
        """
        if tasks is None:
            return
        tasks = list(tasks)
        if len(tasks) != self.num_envs:
            raise ValueError(
                f"set_tasks needs one task per sub-env: got {len(tasks)} tasks for "
                f"{self.num_envs} sub-envs"
            )
        self._send_all("set_tasks", [tasks[start:stop] for start, stop in self.shards])
        self._receive_all()

    @property
    def tasks(self) -> list[Task]:
        """Every sub-env's ``task`` (the current one, or the one its next reset switches to)."""
        return list(self.get_attr("task"))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every sub-env (or read it, if not callable)."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Start :meth:`call` in the workers and return at once; :meth:`call_wait` collects
        the results (the caller works meanwhile)."""
        self._send_all("call", [(name, args, kwargs)] * len(self.shards))

    def call_wait(self) -> tuple[Any, ...]:
        """The results of the last :meth:`call_async`, sub-env by sub-env."""
        return tuple(result for shard in self._receive_all() for result in shard)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every sub-env."""
        self._send_all("get_attr", [name] * len(self.shards))
        return tuple(result for shard in self._receive_all() for result in shard)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` of sub-env ``i`` to ``values[i]`` (or of all to ``values``)."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"got {len(values)} values for {self.num_envs} sub-envs")
        self._send_all("set_attr", [(name, list(values[a:b])) for a, b in self.shards])
        self._receive_all()

    # -- plumbing ----------------------------------------------------------------------------------
    def _observations(self) -> Any:
        out: Any = create_empty_array(self.single_observation_space, self.num_envs, fn=np.zeros)
        return concatenate(self.single_observation_space, self._env_obs, out)

    def _send_all(self, command: str, payloads: Sequence[Any]) -> None:
        if self.closed:
            raise RuntimeError("the ShardedVectorEnv is closed")
        try:
            for w, payload in enumerate(payloads):
                self._pool.send(w, (command, payload))
        except WorkerDied as died:
            self._worker_died(died)

    def _receive_all(self) -> list[Any]:
        """Every worker's reply, in shard order; then the first error, if any, is raised."""
        results: list[Any] = []
        error: tuple[int, BaseException | None, str] | None = None
        for w in range(len(self._pool)):
            try:
                status, payload = self._pool.recv(w)
            except WorkerDied as died:
                self._worker_died(died)
            if status == "error" and error is None:
                error = payload
            results.append(payload)
        if error is not None:
            index, original, text = error
            raise SubEnvError(
                f"sub-env {index} raised {type(original).__name__ if original else 'an error'}"
                f": {original}\n\nTraceback in its worker process:\n{text}",
                index,
            ) from original
        return results

    def _worker_died(self, died: WorkerDied) -> NoReturn:
        start, stop = self.shards[died.index]
        self.close(terminate=True)
        raise SubEnvError(
            f"the worker process of sub-envs {start}..{stop - 1} died (exit code "
            f"{died.exitcode}); the vector env is closed",
            start,
        ) from None


def make_sharded_task_env(
    env_id: str,
    num_envs: int,
    processes: int | None = None,
    *,
    info_keys: Sequence[str] | None = None,
    **env_kwargs: Any,
) -> ShardedVectorEnv:
    """A :class:`ShardedVectorEnv` of ``num_envs`` task envs of a registered metabench task id.

    Sub-envs are the bare task envs (no ``gymnasium.make`` wrappers), as
    :func:`~metabench.vector.meta_batch.make_meta_vec_env` builds them.

    :param env_id: a task env id, e.g. ``"metabench/ML10-v0"`` (not an ``RL2-`` id).
    :param num_envs: sub-envs.
    :param processes: worker processes (see :class:`ShardedVectorEnv`).
    :param info_keys: the ``info`` keys sent back (see :class:`ShardedVectorEnv`).
    :param env_kwargs: passed to every task env, over the id's registered kwargs.
    """
    check_count("num_envs", num_envs)
    gym.spec(env_id)  # fail here on an unknown id, not in the workers
    fn = functools.partial(make_task_env, env_id, dict(env_kwargs))
    return ShardedVectorEnv([fn] * int(num_envs), processes, info_keys=info_keys)
