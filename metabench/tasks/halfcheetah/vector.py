"""HalfCheetahVel/Dir as one Gymnasium ``VectorEnv``: ``num_envs`` cheetahs stepped together.

MAML's episode collector steps hundreds of cheetahs (40 tasks x 20 episodes) with one batched
policy call per step; stepping them one Python ``Env`` at a time costs more than the physics.
This env keeps every cheetah's state in one array and advances them all on every core, computing
observations and rewards with array operations. Per sub-env it behaves like
:class:`~metabench.tasks.halfcheetah.HalfCheetahVelEnv` /
:class:`~metabench.tasks.halfcheetah.HalfCheetahDirEnv` of the same ``protocol`` (garage's,
oyster's or VariBAD's): same model, actions cast to the action space's float32 and passed through
the protocol's action path, frame skip, the 20-float observation (with the torso position MuJoCo
computed at the start of the last substep, as the single env reports it; float32 under oyster's
and VariBAD's protocols), reward, reset noise and task distribution.

Two physics backends:

``"exact"`` (default)
    Bit-for-bit the single env's trajectories. Each cheetah's integration state (time, qpos,
    qvel, the constraint solver's warm start ``qacc_warmstart``, ctrl) is a row of an array in
    shared memory; a worker loads a row into its ``MjData`` (``mj_setState``), steps it
    (``mj_step``, frame skip 5) and saves it back, so the warm start carries from step to step
    as in the single env's ``MjData``. ``processes - 1`` forked worker processes and the calling
    process share the rows out in chunks, first come first served. Processes, not threads:
    ``mj_step`` releases the GIL, but a GIL hand-over every 20 us cheetah step cost up to a
    third of the speed on a busy machine (measured). Without ``fork`` (Windows) everything
    runs in the calling process.
``"rollout"``
    One ``mujoco.rollout`` call per env step for all cheetahs (5 substeps) on a persistent
    thread pool. ``rollout`` starts every trajectory with a zero solver warm start and cannot
    return the final one, so each env step's constraint solve starts from a different guess
    than the single env's: results differ at solver-tolerance level, and HalfCheetah's contact
    dynamics amplify that to O(1) within ~100 steps. The trajectory is bit-for-bit the single
    env's with ``data.qacc_warmstart[:] = 0`` before every step: an equally valid sample of the
    same task, not the same sample. About 5-10% faster than ``"exact"``
    (``scripts/bench_sampler.py``).

Episodes: all sub-envs share the horizon and truncate together (nothing terminates a cheetah);
there is no autoreset (``metadata["autoreset_mode"]`` is ``AutoresetMode.DISABLED``): stepping
after the horizon raises :class:`~metabench.errors.StepBeforeResetError` and ``reset()`` resets
all sub-envs.

Example::

    >>> import gymnasium as gym
    >>> import metabench
    >>> envs = gym.make_vec("metabench/HalfCheetahVel-v0", num_envs=4, processes=1)
    >>> envs.set_tasks([{"velocity": v} for v in (0.5, 1.0, 1.5, 2.0)])
    >>> obs, info = envs.reset(seed=0)
    >>> obs.shape
    (4, 20)
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import multiprocessing
import os
import traceback
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Literal, NoReturn

import mujoco
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from mujoco import rollout as mj_rollout

from metabench.errors import InvalidActionError, InvalidTaskError, StepBeforeResetError
from metabench.tasks.base import Task
from metabench.tasks.halfcheetah.envs import (
    CTRL_COST_WEIGHT,
    HalfCheetahDirEnv,
    HalfCheetahProtocol,
    HalfCheetahTaskEnv,
    HalfCheetahVelEnv,
)
from metabench.validation import check_count
from metabench.workers import WorkerDied, WorkerPool, worker_started

PhysicsBackend = Literal["exact", "rollout"]
"""How :class:`HalfCheetahVectorEnv` steps the physics (see the module doc)."""

_S = mujoco.mjtState
_STATE_SPEC = (
    int(_S.mjSTATE_TIME)
    | int(_S.mjSTATE_QPOS)
    | int(_S.mjSTATE_QVEL)
    | int(_S.mjSTATE_ACT)
    | int(_S.mjSTATE_WARMSTART)
    | int(_S.mjSTATE_CTRL)
)
"""What a cheetah's row of the state array holds: everything ``mj_step`` reads from ``MjData``."""
_PHYSICS_SPEC = (
    int(_S.mjSTATE_TIME) | int(_S.mjSTATE_QPOS) | int(_S.mjSTATE_QVEL) | int(_S.mjSTATE_ACT)
)

_STEP, _FORWARD, _CLOSE = b"s", b"f", b"c"
"""Commands to the worker processes: step rows, ``mj_forward`` rows, exit."""


def _process_rows(
    command: bytes,
    model: mujoco.MjModel,
    data: mujoco.MjData,
    rows: list[np.ndarray],
    xpos_rows: list[np.ndarray],
    torso_xpos: np.ndarray,
    nstep: int,
    start: int,
    stop: int,
) -> None:
    """Step (or ``mj_forward``) rows ``start:stop`` in ``data``; keep the torso position.

    After ``mj_step``, ``data.xpos`` holds the kinematics of the last substep's start state: the
    single env's stale torso position. ``mj_forward`` also sets the warm start, as in
    ``MujocoEnv.set_state``.
    """
    set_state, get_state = mujoco.mj_setState, mujoco.mj_getState
    spec = _STATE_SPEC
    if command == _STEP:
        mj_step = mujoco.mj_step
        for row, xpos_row in zip(rows[start:stop], xpos_rows[start:stop], strict=True):
            set_state(model, data, row, spec)
            mj_step(model, data, nstep)
            get_state(model, data, row, spec)
            xpos_row[:] = torso_xpos
    else:
        for row, xpos_row in zip(rows[start:stop], xpos_rows[start:stop], strict=True):
            set_state(model, data, row, spec)
            mujoco.mj_forward(model, data)
            get_state(model, data, row, spec)
            xpos_row[:] = torso_xpos


class _Rows:
    """The cheetahs' state rows, in memory shared with the worker processes that step them."""

    CHUNKS_PER_WORKER = 8

    def __init__(
        self, model: mujoco.MjModel, num_rows: int, n_state: int, processes: int, nstep: int
    ) -> None:
        self._buffer = mmap.mmap(-1, num_rows * (n_state + 3) * 8)  # shared, zero-filled
        self.state = np.ndarray((num_rows, n_state), dtype=np.float64, buffer=self._buffer)
        self.xpos = np.ndarray(
            (num_rows, 3), dtype=np.float64, buffer=self._buffer, offset=num_rows * n_state * 8
        )
        self._model = model
        self._data = mujoco.MjData(model)
        self._nstep = nstep
        self._torso_id = model.body("torso").id
        self._rows = list(self.state)
        self._xpos_rows = list(self.xpos)

        processes = max(1, min(processes, num_rows))
        if "fork" not in multiprocessing.get_all_start_methods():
            processes = 1
        nchunks = 1 if processes == 1 else min(num_rows, processes * self.CHUNKS_PER_WORKER)
        bounds = [round(k * num_rows / nchunks) for k in range(nchunks + 1)]
        self._chunks = list(itertools.pairwise(bounds))
        self.closed = False
        self._pool: WorkerPool | None = None
        if processes == 1:
            return
        self._counter = multiprocessing.get_context("fork").Value("l", 0)
        # forked: the workers step MuJoCo and NumPy on their own data and take no other lock
        self._pool = WorkerPool(
            self._serve, [()] * (processes - 1), ["halfcheetah-vec"] * (processes - 1)
        )

    @property
    def _processes(self) -> list[Any]:
        """The worker processes (none once closed)."""
        return [] if self._pool is None else self._pool.processes

    def run(self, command: bytes) -> None:
        """Step (``_STEP``) or ``mj_forward`` (``_FORWARD``) every row, on every worker."""
        if self.closed:
            raise RuntimeError("the HalfCheetahVectorEnv is closed: make a new one")
        pool = self._pool
        if pool is None:
            self._drain(command, self._data, shared=False)
            return
        self._counter.value = 0  # the workers are idle: no lock needed
        try:
            for w in range(len(pool)):
                pool.send_bytes(w, command)
        except WorkerDied as died:
            self._fail(f"the worker process died (exit code {died.exitcode})")
        try:
            self._drain(command, self._data, shared=True)
        finally:
            errors = []
            for w in range(len(pool)):
                try:
                    reply = pool.recv_bytes(w)
                except WorkerDied as died:
                    reply = f"the worker process died (exit code {died.exitcode})".encode()
                if reply:
                    errors.append(reply.decode())
            if errors:
                self._fail(errors[0])

    def _fail(self, reason: str) -> NoReturn:
        self.close()
        raise RuntimeError(f"a HalfCheetahVectorEnv worker failed, the env is closed: {reason}")

    def _drain(self, command: bytes, data: mujoco.MjData, shared: bool) -> None:
        """Process all chunks, or (``shared``) take chunks from the shared counter until none is
        left."""
        torso_xpos = data.xpos[self._torso_id]
        order = iter(self._next_chunk, None) if shared else iter(range(len(self._chunks)))
        for k in order:
            start, stop = self._chunks[k]
            _process_rows(
                command,
                self._model,
                data,
                self._rows,
                self._xpos_rows,
                torso_xpos,
                self._nstep,
                start,
                stop,
            )

    def _next_chunk(self) -> int | None:
        with self._counter.get_lock():
            k = self._counter.value
            self._counter.value = k + 1
        return k if k < len(self._chunks) else None

    def _serve(self, conn: Connection, parent_ends: list[Connection]) -> None:
        """A worker process: run commands on its own ``MjData`` until told to exit (or until the
        parent is gone: :func:`~metabench.workers.worker_started`)."""
        worker_started(parent_ends)
        self._data = mujoco.MjData(self._model)
        try:
            while (command := conn.recv_bytes()) != _CLOSE:
                try:
                    self._drain(command, self._data, shared=True)
                    conn.send_bytes(b"")
                except Exception:
                    conn.send_bytes(traceback.format_exc().encode())
        except (EOFError, OSError):  # the parent is gone
            pass

    def close(self) -> None:
        """Stop the worker processes (idempotent)."""
        self.closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(_CLOSE, raw=True, timeout=2.0)


class HalfCheetahVectorEnv(VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """``num_envs`` HalfCheetah task envs stepped together (see the module doc).

    Use :class:`HalfCheetahVelVectorEnv` or :class:`HalfCheetahDirVectorEnv`; this base class
    takes the single env whose model, spaces, horizon and task protocol every sub-env copies.

    :param task_env: a single task env; it is only a template and is never stepped.
    :param num_envs: number of cheetahs.
    :param processes: the processes that step them, the calling one included (``"exact"``),
        or ``mujoco.rollout``'s threads (``"rollout"``); ``None`` uses every core
        (``os.cpu_count()``).
    :param backend: ``"exact"`` (bit-identical to the single env) or ``"rollout"``
        (``mujoco.rollout``; see the module doc for how it differs).
    """

    def __init__(
        self,
        task_env: HalfCheetahTaskEnv,
        num_envs: int,
        *,
        processes: int | None = None,
        backend: PhysicsBackend = "exact",
    ) -> None:
        check_count("num_envs", num_envs)
        if processes is None:
            processes = os.cpu_count() or 1
        processes = check_count("processes", processes, hint="pass None for every core")
        if backend not in ("exact", "rollout"):
            raise ValueError(f"backend must be 'exact' or 'rollout', got {backend!r}")

        self.metadata = {"autoreset_mode": AutoresetMode.DISABLED, "render_modes": []}
        self._template = task_env
        self.num_envs = int(num_envs)
        self.processes = processes
        self.backend: PhysicsBackend = backend
        self.horizon: int = task_env.horizon
        self.single_observation_space = task_env.observation_space
        self.single_action_space = task_env.action_space
        self._action_scaling = task_env.action_scaling
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        model = task_env.model
        self.model = model
        self._frame_skip = int(task_env.frame_skip)
        self._dt = float(task_env.dt)
        self._reset_noise_scale = float(task_env._reset_noise_scale)
        self._init_qpos = task_env.init_qpos.copy()
        self._init_qvel = task_env.init_qvel.copy()
        self._task_key = task_env.task_key
        self._task_reward = task_env._task_reward

        # Column layout of the state array (mj_getState order: time, qpos, qvel, act, warmstart,
        # ctrl). Its first columns are exactly mujoco.rollout's mjSTATE_FULLPHYSICS state.
        nq, nv = model.nq, model.nv
        self._qpos_cols = slice(1, 1 + nq)
        self._qvel_cols = slice(1 + nq, 1 + nq + nv)
        self._x_col = 1  # qpos[0], the torso's x position
        self._obs_cols = slice(2, 1 + nq + nv)  # qpos[1:], qvel: adjacent columns
        n_state = mujoco.mj_stateSize(model, _STATE_SPEC)
        n_physics = mujoco.mj_stateSize(model, _PHYSICS_SPEC)  # then nv warm start columns
        self._ctrl_cols = slice(n_physics + nv, n_state)
        self._rows = _Rows(
            model, self.num_envs, n_state, processes if backend == "exact" else 1, self._frame_skip
        )
        self._state = self._rows.state
        self._xpos = self._rows.xpos
        self._rollout: _RolloutStepper | None = None
        if backend == "rollout":
            if mujoco.mj_stateSize(model, int(_S.mjSTATE_FULLPHYSICS)) != n_physics:
                raise ValueError(
                    "the rollout backend needs a model without mocap, userdata, plugins"
                )
            self._rollout = _RolloutStepper(
                task_env.fullpath, self.num_envs, processes, self._frame_skip, n_physics, model.nu
            )

        self._tasks: list[dict[str, float]] | None = None
        self._tasks_drawn = False
        """Whether the env drew :attr:`tasks` itself (a seeded reset draws them again)."""
        self._task_values = np.zeros(self.num_envs)
        self._steps = 0
        self._active = False

    # -- task protocol -------------------------------------------------------------------------
    @property
    def tasks(self) -> list[Task] | None:
        """The task of each sub-env, in order (``None`` until the first ``reset``/``set_tasks``)."""
        return None if self._tasks is None else [dict(task) for task in self._tasks]

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Task]:
        """Draw ``n`` tasks from the task distribution (``rng`` defaults to ``np_random``)."""
        return self._template.sample_tasks(n, self.np_random if rng is None else rng)

    def set_tasks(self, tasks: Sequence[Task] | None) -> None:
        """Give sub-env ``i`` the task ``tasks[i]``; rewards use them from the next step on.

        ``None`` forgets the tasks: the next ``reset`` draws a fresh batch with ``np_random``.
        Raises :class:`InvalidTaskError` (naming the sub-env) if a task is not valid for the
        single env, ``ValueError`` if there is not exactly one task per sub-env.
        """
        self._tasks_drawn = False
        if tasks is None:
            self._tasks = None
            return
        validated = self._validated(tasks)
        self._tasks = validated
        self._task_values = np.array([task[self._task_key] for task in validated])

    def sample_meta_batch(self) -> list[Task]:
        """Draw one task per sub-env with this env's ``np_random``, set them and return them."""
        tasks = self.sample_tasks(self.num_envs)
        self.set_tasks(tasks)
        return tasks

    def _validated(self, tasks: Sequence[Task]) -> list[dict[str, float]]:
        if isinstance(tasks, (str, bytes)) or not isinstance(tasks, Sequence):
            raise InvalidTaskError(
                f"tasks must be a sequence of one task per sub-env, got {type(tasks).__name__}"
            )
        if len(tasks) != self.num_envs:
            raise ValueError(
                f"set_tasks needs one task per sub-env: got {len(tasks)} tasks for "
                f"{self.num_envs} sub-envs"
            )
        validated = []
        for i, task in enumerate(tasks):
            try:
                validated.append(self._template._validated(task))
            except InvalidTaskError as error:
                raise InvalidTaskError(f"tasks[{i}]: {error}") from None
        return validated

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-env: uniform +-0.1 noise on qpos, 0.1 * N(0, 1) on qvel.

        ``options={"tasks": [...]}`` sets the tasks first (as :meth:`set_tasks`). Without tasks
        set, a batch is drawn from ``np_random``.
        """
        options = dict(options or {})
        tasks = options.pop("tasks", None)
        if "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"), dtype=bool)
            if mask.shape != (self.num_envs,) or not mask.all():
                raise ValueError(
                    "all sub-envs share the horizon and are reset together: reset_mask must be "
                    "all True (or left out)"
                )
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}; supported: 'tasks'")
        validated = None if tasks is None else self._validated(tasks)
        super().reset(seed=seed)
        rng = self.np_random
        scale = self._reset_noise_scale
        shape = (self.num_envs, self.model.nq)
        qpos = self._init_qpos + rng.uniform(low=-scale, high=scale, size=shape)
        qvel = self._init_qvel + scale * rng.standard_normal((self.num_envs, self.model.nv))
        self._set_states(qpos, qvel)
        if validated is not None:
            self.set_tasks(validated)
        elif self._tasks is None or (seed is not None and self._tasks_drawn):
            # tasks this env drew itself are drawn again on a seeded reset, so that
            # reset(seed=s) determines what follows (tasks given with set_tasks are kept)
            self.set_tasks(self.sample_tasks(self.num_envs))
            self._tasks_drawn = True
        self._steps = 0
        self._active = True
        mask = np.ones(self.num_envs, dtype=bool)
        info = {
            "x_position": self._state[:, self._x_col].copy(),
            "_x_position": mask,
            "task": {self._task_key: self._task_values.copy(), f"_{self._task_key}": mask},
            "_task": mask,
        }
        return self._observations(), info

    def set_states(self, qpos: Any, qvel: Any) -> np.ndarray:
        """Put every cheetah in state ``qpos`` (N, 9), ``qvel`` (N, 9); return the observations.

        As ``reset`` would have, had its noise drawn these values: ``mj_resetData`` (time, ctrl
        and the solver's warm start cleared), then ``MujocoEnv.set_state`` (``mj_forward``). The
        single-env equivalent is ``mujoco.mj_resetData(env.model, env.data);
        env.set_state(qpos, qvel)``. Tasks and the episode's step count are kept. A hook for
        tests and for starting episodes from chosen states, after ``reset``.
        """
        shape = (self.num_envs, self.model.nq)
        qpos = np.asarray(qpos, dtype=np.float64)
        qvel = np.asarray(qvel, dtype=np.float64)
        if qpos.shape != shape or qvel.shape != (self.num_envs, self.model.nv):
            raise ValueError(
                f"qpos and qvel must have shapes {shape} and {(self.num_envs, self.model.nv)}, "
                f"got {qpos.shape} and {qvel.shape}"
            )
        self._set_states(qpos, qvel)
        return self._observations()

    def get_states(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of every cheetah's ``qpos`` (N, 9) and ``qvel`` (N, 9)."""
        return self._state[:, self._qpos_cols].copy(), self._state[:, self._qvel_cols].copy()

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every cheetah with its row of ``actions`` (shape ``(num_envs, 6)``)."""
        if not self._active:
            raise StepBeforeResetError(
                "step() called before reset() or after the horizon ended the episodes: "
                "call reset() first"
            )
        actions = self._check_actions(actions)
        if self._action_scaling is not None:
            actions = self._action_scaling(actions)
        state = self._state
        x_before = state[:, self._x_col].copy()
        state[:, self._ctrl_cols] = actions
        if self._rollout is not None:
            self._rollout.step(state, self._xpos)
        else:
            self._rows.run(_STEP)
        x_after = state[:, self._x_col].copy()
        x_velocity = (x_after - x_before) / self._dt
        task_reward = self._task_reward(x_velocity, self._task_values)  # type: ignore[arg-type]
        actions64 = actions.astype(np.float64)
        # Row sums in order, as the single env's np.dot of 6 floats: the same bits.
        ctrl_cost = CTRL_COST_WEIGHT * (actions64 * actions64).sum(axis=1)
        rewards = task_reward - ctrl_cost
        self._steps += 1
        done = self._steps >= self.horizon
        if done:
            self._active = False
        mask = np.ones(self.num_envs, dtype=bool)
        info = {
            "x_position": x_after,
            "_x_position": mask,
            "x_velocity": x_velocity,
            "_x_velocity": mask,
            "reward_task": task_reward,
            "_reward_task": mask,
            "reward_ctrl": -ctrl_cost,
            "_reward_ctrl": mask,
        }
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.full(self.num_envs, done)
        return self._observations(), rewards, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        """Stop the worker processes and the rollout thread pool."""
        self._rows.close()
        if self._rollout is not None:
            self._rollout.close()
        self._template.close()

    def __del__(self) -> None:
        if "_rows" in self.__dict__:  # fully constructed
            with contextlib.suppress(Exception):  # nobody to report to at garbage collection
                self.close()

    # -- internals -----------------------------------------------------------------------------
    def _check_actions(self, actions: Any) -> np.ndarray:
        space = self.single_action_space
        array = np.asarray(actions, dtype=space.dtype)
        expected = (self.num_envs, *space.shape)  # type: ignore[misc]
        if array.shape != expected:
            raise InvalidActionError(
                f"actions have shape {array.shape}, expected {expected}: pass one action per "
                f"sub-env, stacked along the first axis"
            )
        if not np.isfinite(array).all():
            bad = np.flatnonzero(~np.isfinite(array).all(axis=1))
            raise InvalidActionError(
                f"actions of sub-envs {bad.tolist()[:10]} contain NaN or inf: check the policy "
                f"output before stepping"
            )
        return array

    def _observations(self) -> np.ndarray:
        obs = np.concatenate((self._state[:, self._obs_cols], self._xpos), axis=1)
        # the protocol's dtype (float32 for oyster's and VariBAD's): no copy for garage's float64
        return obs.astype(self.single_observation_space.dtype, copy=False)

    def _set_states(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """``mj_resetData`` (zero time, warm start, ctrl), set qpos and qvel, ``mj_forward``."""
        self._state[:] = 0.0
        self._state[:, self._qpos_cols] = qpos
        self._state[:, self._qvel_cols] = qvel
        self._rows.run(_FORWARD)


class _RolloutStepper:
    """One env step of every cheetah as a single ``mujoco.rollout`` call.

    The model gets a ``framepos`` sensor on the torso body: MuJoCo evaluates sensors in the
    ``mj_forward`` at the start of each substep, so the last substep's reading is exactly the
    stale ``data.xpos`` the single env observes. Sensors do not change the dynamics.
    """

    def __init__(
        self, xml_path: str, num_envs: int, threads: int, nstep: int, n_physics: int, nu: int
    ) -> None:
        spec = mujoco.MjSpec.from_file(xml_path)
        spec.add_sensor(
            type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
            objtype=mujoco.mjtObj.mjOBJ_XBODY,
            objname="torso",
        )
        self.model = spec.compile()
        threads = max(1, min(threads, num_envs))
        self._models = [self.model] * num_envs
        self._datas = [mujoco.MjData(self.model) for _ in range(threads)]
        self._pool: mj_rollout.Rollout | None = mj_rollout.Rollout(
            nthread=threads if threads > 1 else 0
        )
        self._nstep = nstep
        self._n_physics = n_physics
        self._initial = np.empty((num_envs, n_physics))
        self._control = np.empty((num_envs, nstep, nu))
        self._states = np.empty((num_envs, nstep, n_physics))
        self._sensors = np.empty((num_envs, nstep, self.model.nsensordata))

    def step(self, state: np.ndarray, xpos: np.ndarray) -> None:
        """Advance ``state`` (rows laid out as in :class:`HalfCheetahVectorEnv`) in place."""
        assert self._pool is not None, "the vector env is closed"
        n = self._n_physics
        self._initial[:] = state[:, :n]
        self._control[:] = state[:, None, -self._control.shape[2] :]
        self._pool.rollout(
            self._models,
            self._datas,
            self._initial,
            self._control,
            control_spec=int(_S.mjSTATE_CTRL),
            skip_checks=True,  # shapes and dtypes are fixed above
            nstep=self._nstep,
            state=self._states,
            sensordata=self._sensors,
        )
        state[:, :n] = self._states[:, -1]
        xpos[:] = self._sensors[:, -1, :3]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


class HalfCheetahVelVectorEnv(HalfCheetahVectorEnv):
    """``num_envs`` :class:`~metabench.tasks.halfcheetah.HalfCheetahVelEnv` stepped together.

    :param num_envs: number of cheetahs (a MAML meta-batch: tasks x episodes per task).
    :param velocity_range: goal velocities of :meth:`sample_tasks`, as the single env's
        (``None``: the protocol's).
    :param horizon: episode length, shared by all sub-envs.
    :param action_scale: the single env's action normalisation, applied to every row.
    :param processes: processes (``"exact"``) or threads (``"rollout"``) to use (``None``: all
        cores).
    :param backend: ``"exact"`` or ``"rollout"`` (see the module doc).
    :param protocol: whose variant, as the single env's.
    """

    def __init__(
        self,
        num_envs: int,
        velocity_range: tuple[float, float] | None = None,
        horizon: int = 200,
        action_scale: float | None = None,
        *,
        processes: int | None = None,
        backend: PhysicsBackend = "exact",
        protocol: HalfCheetahProtocol = "garage",
    ) -> None:
        super().__init__(
            HalfCheetahVelEnv(
                velocity_range=velocity_range,
                horizon=horizon,
                action_scale=action_scale,
                protocol=protocol,
            ),
            num_envs,
            processes=processes,
            backend=backend,
        )
        self.velocity_range = self._template.velocity_range  # type: ignore[attr-defined]


class HalfCheetahDirVectorEnv(HalfCheetahVectorEnv):
    """``num_envs`` :class:`~metabench.tasks.halfcheetah.HalfCheetahDirEnv` stepped together.

    :param horizon: episode length, shared by all sub-envs (100 as the single env).
    :param action_scale: the single env's action normalisation, applied to every row.
    :param protocol: whose variant, as the single env's.
    """

    def __init__(
        self,
        num_envs: int,
        horizon: int = 100,
        action_scale: float | None = None,
        *,
        processes: int | None = None,
        backend: PhysicsBackend = "exact",
        protocol: HalfCheetahProtocol = "garage",
    ) -> None:
        super().__init__(
            HalfCheetahDirEnv(horizon=horizon, action_scale=action_scale, protocol=protocol),
            num_envs,
            processes=processes,
            backend=backend,
        )


__all__ = [
    "HalfCheetahDirVectorEnv",
    "HalfCheetahVectorEnv",
    "HalfCheetahVelVectorEnv",
    "PhysicsBackend",
]
