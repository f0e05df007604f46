"""Trial-aware vector envs: one task per sub-env, a fresh meta-batch of tasks every trial.

:func:`make_meta_vec_env` builds ``num_envs`` sub-envs ``RL2Env(Trial(task_env))`` (or just
``Trial(task_env)``) as an SB3 ``VecEnv`` or a Gymnasium ``VectorEnv``, in-process or across worker
processes. The vector env sees a whole trial as one episode, so a recurrent policy's state resets
only at trial starts.

Tasks are resampled per trial without any traffic between processes: for its ``k``-th trial
every sub-env draws the same meta-batch from a generator derived from ``(seed, k)`` and takes the
task at its own index (:class:`MetaBatchSlot`). Tasks within a meta-batch are therefore distinct
whenever the sampler draws without replacement, and the task sequence is fixed by ``seed``.
``sample_meta_batch`` draws from a separate stream of the same seed, so explicit batches never
repeat the per-trial ones.
``set_tasks`` pins explicit tasks (MAML and the evaluator need that); ``set_tasks(None)`` returns
to per-trial sampling. Pinned tasks take effect at the next trial reset.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv, VectorWrapper
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper

from metabench.rng import META_BATCH_SLOTS, META_BATCH_TASKS
from metabench.tasks.base import SetTaskSampler, Task, TaskSampler, check_n_tasks
from metabench.validation import check_count
from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv
from metabench.wrappers import RL2Env, Trial

VectorBackend = Literal["sb3", "gymnasium"]
"""Which library's vector env :func:`make_meta_vec_env` builds."""


class MetaBatchSlot(TaskSampler):
    """One sub-env's share of per-trial meta-batches that all sub-envs agree on.

    The ``k``-th call takes meta-batch ``k`` of ``batch_size`` tasks from ``base``
    (:meth:`~metabench.tasks.base.TaskSampler.sample_batch`, with a generator derived from
    ``(seed, k)``) and returns the task at index ``slot``: every sub-env computes the same batch
    independently, so no process has to hand tasks to another.
    """

    def __init__(self, base: TaskSampler, batch_size: int, slot: int, seed: int) -> None:
        if not 0 <= slot < batch_size:
            raise ValueError(f"slot must be in [0, {batch_size}), got {slot}")
        self.base = base
        self.batch_size = batch_size
        self.slot = slot
        self.seed = seed
        self.trials = 0

    def sample(self, n: int, rng: np.random.Generator) -> list[Task]:
        """Return this slot's task of the next meta-batch; ``rng`` is not used (see class doc)."""
        if n != 1:
            raise ValueError(f"MetaBatchSlot gives one task per call, asked for {n}")
        trial = self.trials
        self.trials += 1
        batch_rng = META_BATCH_SLOTS.generator(self.seed, trial)
        return [self.base.sample_batch(trial, self.batch_size, batch_rng)[self.slot]]

    def state_dict(self) -> dict[str, Any]:
        """The index of the current trial (-1 before the first)."""
        return {"current_trial": self.trials - 1}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next draw repeat the current trial's task: a run resumed from a checkpoint
        restarts the trial it was in."""
        self.trials = max(int(state["current_trial"]), 0)


def make_task_env(env: str | Callable[[], gym.Env[Any, Any]], env_kwargs: dict[str, Any]) -> Any:
    """Instantiate a task env from a registered task id or a factory, without make()'s wrappers."""
    if callable(env):
        return env(**env_kwargs)
    spec = gym.spec(env)
    if "task_entry_point" in spec.kwargs:  # an RL2 id: its kwargs name the task env it wraps
        raise ValueError(
            f"{env!r} is already an RL2 env: pass the task id (e.g. 'metabench/HalfCheetahVel-v0')"
            f" and rl2=True instead"
        )
    assert isinstance(spec.entry_point, str)
    return load_env_creator(spec.entry_point)(**{**spec.kwargs, **env_kwargs})


def _make_sub_env(
    env: str | Callable[[], gym.Env[Any, Any]],
    env_kwargs: dict[str, Any],
    sampler: TaskSampler | None,
    slot: int,
    num_envs: int,
    task_seed: int,
    episodes_per_trial: int,
    rl2: bool,
    reward_scale: float,
    zero_at_episode_start: bool,
    wrapper: Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]] | None,
) -> gym.Env[Any, Any]:
    task_env = make_task_env(env, env_kwargs)
    base = sampler if sampler is not None else SetTaskSampler(task_env.sample_tasks)
    slot_sampler = MetaBatchSlot(base, num_envs, slot, task_seed)
    wrapped: gym.Env[Any, Any] = Trial(task_env, episodes_per_trial, sampler=slot_sampler)
    if rl2:
        wrapped = RL2Env(
            wrapped, reward_scale=reward_scale, zero_at_episode_start=zero_at_episode_start
        )
    return wrapped if wrapper is None else wrapper(wrapped)


def _check_action_rows(actions: Any, num_envs: int) -> None:
    """Refuse a batch of actions with a row count other than the number of sub-envs (SB3's
    ``DummyVecEnv`` would step the first ``num_envs`` rows and drop the rest unseen)."""
    rows = np.shape(actions)[:1]
    if rows != (num_envs,):
        raise ValueError(
            f"got actions of shape {np.shape(actions)} for {num_envs} sub-envs: pass one action "
            f"per sub-env, an array of {num_envs} rows"
        )


class _MetaBatchControl:
    """The task controls shared by the SB3 and the Gymnasium meta-batch vector envs."""

    sampler: TaskSampler | None
    _rng: np.random.Generator
    _sample_tasks: Callable[[int, np.random.Generator], list[Task]]

    def _pin(self, tasks: Sequence[Task | None]) -> None:
        raise NotImplementedError

    def set_tasks(self, tasks: Sequence[Task] | None) -> None:
        """Pin one task per sub-env (in order) from the next trial on; ``None`` unpins them all."""
        num_envs: int = self.num_envs  # type: ignore[attr-defined]
        if tasks is None:
            self._pin([None] * num_envs)
            return
        if len(tasks) != num_envs:
            raise ValueError(
                f"set_tasks needs one task per sub-env: got {len(tasks)} tasks for "
                f"{num_envs} sub-envs"
            )
        self._pin(list(tasks))

    def _sampler_states(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _load_sampler_states(self, states: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """The task schedule's state, for checkpoints: this env's generator and every
        sub-env's position in the per-trial meta-batch sequence."""
        return {"rng": self._rng.bit_generator.state, "samplers": self._sampler_states()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the next trial reset repeats the current trial's tasks."""
        self._rng.bit_generator.state = state["rng"]
        self._load_sampler_states(list(state["samplers"]))

    def sample_meta_batch(self) -> list[Task]:
        """Draw a new meta-batch with this vector env's own generator, pin it and return it."""
        sample = self.sampler.sample if self.sampler is not None else self._sample_tasks
        tasks = list(sample(self.num_envs, self._rng))  # type: ignore[attr-defined]
        self.set_tasks(tasks)
        return tasks


class MetaBatchVecEnv(VecEnvWrapper, _MetaBatchControl):
    """SB3 ``VecEnv`` of trial sub-envs with meta-batch task controls (see module doc)."""

    def __init__(self, venv: VecEnv, sampler: TaskSampler | None, seed: int) -> None:
        super().__init__(venv)
        self.sampler = sampler
        self._rng = META_BATCH_TASKS.generator(seed)

    def _sample_tasks(self, n: int, rng: np.random.Generator) -> list[Task]:
        return list(self.venv.env_method("sample_tasks", n, rng, indices=[0])[0])

    def _pin(self, tasks: Sequence[Task | None]) -> None:
        for i, task in enumerate(tasks):
            self.venv.env_method("set_task", task, indices=[i])

    @property
    def tasks(self) -> list[Task]:
        """The task of each sub-env's current trial."""
        return list(self.venv.get_attr("task"))

    def _sampler_states(self) -> list[dict[str, Any]]:
        return list(self.venv.get_attr("sampler_state"))

    def _load_sampler_states(self, states: list[dict[str, Any]]) -> None:
        for i, state in enumerate(states):
            self.venv.env_method("load_sampler_state", state, indices=[i])

    def reset(self) -> Any:
        return self.venv.reset()

    def step_async(self, actions: np.ndarray) -> None:
        _check_action_rows(actions, self.num_envs)
        self.venv.step_async(actions)

    def step_wait(self) -> Any:
        return self.venv.step_wait()


class MetaBatchVectorEnv(VectorWrapper, _MetaBatchControl):
    """Gymnasium ``VectorEnv`` of trial sub-envs with meta-batch task controls (see module doc)."""

    def __init__(
        self, env: SyncVectorEnv | AsyncVectorEnv, sampler: TaskSampler | None, seed: int
    ) -> None:
        super().__init__(env)
        self._vec = env
        self.sampler = sampler
        self._rng = META_BATCH_TASKS.generator(seed)

    def _sample_tasks(self, n: int, rng: np.random.Generator) -> list[Task]:
        return list(self._vec.call("sample_tasks", n, rng)[0])

    def _pin(self, tasks: Sequence[Task | None]) -> None:
        self._vec.set_attr("pinned_task", list(tasks))

    @property
    def tasks(self) -> list[Task]:
        """The task of each sub-env's current trial."""
        return list(self._vec.get_attr("task"))

    def _sampler_states(self) -> list[dict[str, Any]]:
        return list(self._vec.get_attr("sampler_state"))

    def _load_sampler_states(self, states: list[dict[str, Any]]) -> None:
        self._vec.set_attr("sampler_state", states)

    def step(self, actions: Any) -> Any:
        _check_action_rows(actions, self.num_envs)
        return self.env.step(actions)


def make_meta_vec_env(
    env: str | Callable[..., gym.Env[Any, Any]],
    num_envs: int,
    *,
    episodes_per_trial: int = 1,
    sampler: TaskSampler | None = None,
    rl2: bool = True,
    reward_scale: float = 1.0,
    zero_at_episode_start: bool = False,
    seed: int = 0,
    backend: VectorBackend = "sb3",
    processes: int | None = 1,
    env_kwargs: dict[str, Any] | None = None,
    wrapper: Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]] | None = None,
) -> MetaBatchVecEnv | MetaBatchVectorEnv:
    """Build a trial-aware vector env for a meta-batch of ``num_envs`` tasks.

    :param env: a task env id (``"metabench/HalfCheetahVel-v0"``) or a factory returning a task env.
    :param num_envs: meta-batch size: one task per sub-env.
    :param episodes_per_trial: inner episodes per trial (RL2's ``n_episodes_per_trial``).
    :param sampler: where tasks come from; ``None`` uses the task env's ``sample_tasks``. Its
        ``check_batch_size(num_envs)`` is called first, so an impossible split fails here.
    :param rl2: wrap each sub-env in :class:`~metabench.wrappers.RL2Env`, with ``reward_scale``
        and ``zero_at_episode_start``.
    :param seed: seeds the sub-envs (``seed + i``) and fixes the per-trial task sequence.
    :param backend: ``"sb3"`` (a Stable-Baselines3 ``VecEnv``) or ``"gymnasium"``.
    :param processes: the processes that step the sub-envs, this one included (``None``: one
        per core). ``1`` steps every sub-env here. With ``backend="sb3"``, more step them in
        that many interleaved shards, one stepped by this process and one by each worker
        process (:class:`~metabench.vector.sharded_sb3.ShardedSubprocVecEnv`, the same results
        as in-process); ``"gymnasium"`` steps them here or one process each
        (``processes=num_envs``: ``AsyncVectorEnv``).
    :param wrapper: applied last to each sub-env (e.g. an action rescaling); must be picklable
        when ``processes`` is not 1.

    Example::

        >>> import metabench
        >>> venv = make_meta_vec_env("metabench/PointGoal-v0", 4, episodes_per_trial=2)
        >>> venv.reset().shape  # 2 position + 2 action + reward + done
        (4, 6)
    """
    check_n_tasks(num_envs)
    if backend not in ("sb3", "gymnasium"):
        raise ValueError(f"backend must be 'sb3' or 'gymnasium', got {backend!r}")
    if processes is not None:
        check_count("processes", processes, hint="or None for one per core")
    if backend == "gymnasium" and processes not in (1, num_envs):
        raise ValueError(
            f"backend='gymnasium' steps the sub-envs in this process (processes=1) or one process "
            f"each (processes={num_envs}), not processes={processes!r}: backend='sb3' shards them"
        )
    if sampler is not None:
        sampler.check_batch_size(num_envs)
    fns: list[Callable[[], gym.Env[Any, Any]]] = [
        functools.partial(
            _make_sub_env,
            env,
            dict(env_kwargs or {}),
            sampler,
            slot,
            num_envs,
            seed,
            episodes_per_trial,
            rl2,
            reward_scale,
            zero_at_episode_start,
            wrapper,
        )
        for slot in range(num_envs)
    ]
    if backend == "sb3":
        venv: VecEnv = DummyVecEnv(fns) if processes == 1 else ShardedSubprocVecEnv(fns, processes)
        venv.seed(seed)
        return MetaBatchVecEnv(venv, sampler, seed)
    vector_env = SyncVectorEnv(fns) if processes == 1 else AsyncVectorEnv(fns)
    return MetaBatchVectorEnv(vector_env, sampler, seed)


def make_task_vec_env(
    env: str | Callable[..., gym.Env[Any, Any]],
    num_envs: int,
    *,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
) -> MetaBatchVectorEnv:
    """``num_envs`` plain task envs stepped in this process, as a Gymnasium vector env whose
    caller pins every sub-env's task (``set_tasks``): MAML's episode batches.

    One inner episode per trial and no RL2 wrapper, so a sub-env's episode is the task env's
    own episode. No task sampler is handed down: it would be checked against ``num_envs``
    distinct tasks, and a batch of episodes repeats each task.

    :param env: a task env id or a factory.
    :param num_envs: the sub-envs.
    :param seed: seeds the sub-envs (``seed + i``).
    :param env_kwargs: passed to the task env.
    """
    vec_env = make_meta_vec_env(
        env,
        num_envs,
        episodes_per_trial=1,
        sampler=None,
        rl2=False,
        seed=seed,
        backend="gymnasium",
        env_kwargs=env_kwargs,
    )
    assert isinstance(vec_env, MetaBatchVectorEnv)
    return vec_env


__all__ = [
    "MetaBatchSlot",
    "MetaBatchVecEnv",
    "MetaBatchVectorEnv",
    "ShardedSubprocVecEnv",
    "VectorBackend",
    "make_meta_vec_env",
    "make_task_vec_env",
]
