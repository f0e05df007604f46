"""Episode data: a batch of whole episodes stored as flat arrays plus their lengths.

Samplers hand episodes to algorithms, and algorithms want them in different layouts: flat over
all time steps for losses, padded ``(N, max_length, ...)`` for recurrent policies and advantage
estimation, one episode at a time for logging. :class:`EpisodeBatch` keeps one flat copy and the
episode lengths, and derives the other layouts on demand, so the layouts can never disagree.
The design follows garage's ``EpisodeBatch``; the code is metabench's own.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["EpisodeBatch", "EpisodeRecorder", "StepType"]

_STEP_TYPE_DTYPE = np.int8
"""Storage dtype of ``EpisodeBatch.step_types``: four values, so one byte is enough."""


class StepType(enum.IntEnum):
    """Where a time step sits in its episode.

    ``TERMINAL`` and ``TIMEOUT`` separate a real end of the episode (no value after it) from a
    cut by the time limit (the value after it should be bootstrapped).
    """

    FIRST = 0
    MID = 1
    TERMINAL = 2
    TIMEOUT = 3

    @classmethod
    def get_step_type(cls, step_cnt: int, max_episode_length: int | None, done: bool) -> StepType:
        """Return the type of the ``step_cnt``-th step (counting from 1) of an episode.

        A ``done`` step is ``TERMINAL`` even on the last allowed step: the episode really ended,
        so nothing may be bootstrapped past it. (garage returns ``TIMEOUT`` when both hold.)

        :param step_cnt: steps taken since ``reset``, including this one.
        :param max_episode_length: the time limit, or ``None`` for no limit.
        :param done: whether the env ended the episode on this step.
        :raises ValueError: if ``step_cnt < 1`` (usually a missing ``reset``) or the limit is < 1.
        """
        if step_cnt < 1:
            raise ValueError(
                f"step_cnt must be >= 1, got {step_cnt}: count steps from 1 and call reset() first"
            )
        if max_episode_length is not None and max_episode_length < 1:
            raise ValueError(f"max_episode_length must be >= 1 or None, got {max_episode_length}")
        if done:
            return cls.TERMINAL
        if max_episode_length is not None and step_cnt >= max_episode_length:
            return cls.TIMEOUT
        if step_cnt == 1:
            return cls.FIRST
        return cls.MID


def _check_leading(name: str, array: np.ndarray, expected: int, what: str) -> None:
    """Raise ``ValueError`` unless ``array`` has at least one dim and ``expected`` rows."""
    if array.ndim == 0 or array.shape[0] != expected:
        raise ValueError(
            f"{name} has shape {array.shape}, expected leading dimension {expected} ({what})"
        )


def _as_info_dict(name: str, infos: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Copy an info mapping into a plain ``dict`` of arrays, so later edits to it do not leak in."""
    if not isinstance(infos, Mapping):
        raise ValueError(f"{name} must be a mapping of str to arrays, got {type(infos).__name__}")
    return {key: np.asarray(value) for key, value in infos.items()}


def _check_same_keys(name: str, dicts: Sequence[Mapping[str, Any]], where: str) -> None:
    """Raise ``ValueError`` naming the first of ``dicts`` whose keys differ from the first's."""
    keys = set(dicts[0])
    for i, other in enumerate(dicts[1:], start=1):
        if set(other) != keys:
            raise ValueError(
                f"{name} keys differ: {where}[0] has {sorted(keys)}, {where}[{i}] has "
                f"{sorted(other)}; every episode must record the same infos"
            )


@dataclasses.dataclass(frozen=True, eq=False)
class EpisodeBatch:
    """A batch of ``N`` complete episodes, time steps of all episodes concatenated (``N•T``).

    Arrays are validated once here, so every consumer can trust the shapes. They are stored as
    given (``np.asarray``, no copy), except ``lengths`` (``int64``) and ``step_types`` (``int8``).
    Padded views zero-fill; use :attr:`valids` to tell real steps from padding.

    :param observations: ``(N•T, *obs_shape)``, the observation each action was taken in.
    :param last_observations: ``(N, *obs_shape)``, the observation after each episode's last step.
    :param actions: ``(N•T, *act_shape)``.
    :param rewards: ``(N•T,)``; NaN and inf are allowed (they are data, not a shape error).
    :param step_types: ``(N•T,)`` of :class:`StepType` values.
    :param lengths: ``(N,)`` positive ints, the number of steps of each episode.
    :param env_infos: per-step env infos, each ``(N•T, ...)``.
    :param agent_infos: per-step agent infos (e.g. log-probs), each ``(N•T, ...)``.
    :param episode_infos: per-episode infos (e.g. the task parameter), each ``(N, ...)``.

    Example, two episodes of lengths 2 and 1:

    >>> import numpy as np
    >>> batch = EpisodeBatch(
    ...     observations=np.array([[0.0], [1.0], [10.0]]),
    ...     last_observations=np.array([[2.0], [11.0]]),
    ...     actions=np.zeros((3, 1)),
    ...     rewards=np.array([1.0, 2.0, 5.0]),
    ...     step_types=np.array([StepType.FIRST, StepType.TIMEOUT, StepType.TERMINAL]),
    ...     lengths=np.array([2, 1]),
    ...     episode_infos={"goal_velocity": np.array([0.5, 1.5])},
    ... )
    >>> batch.n_episodes, batch.n_steps
    (2, 3)
    >>> batch.episode_returns().tolist()
    [3.0, 5.0]
    >>> batch.padded_rewards.tolist()
    [[1.0, 2.0], [5.0, 0.0]]
    >>> batch.next_observations[:, 0].tolist()
    [1.0, 2.0, 11.0]
    >>> [episode.n_steps for episode in batch.split()]
    [2, 1]
    """

    observations: np.ndarray
    last_observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    step_types: np.ndarray
    lengths: np.ndarray
    env_infos: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    agent_infos: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    episode_infos: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        """Convert the fields to arrays and check every shape against ``lengths``."""
        lengths = np.asarray(self.lengths)
        if (
            lengths.ndim != 1
            or lengths.size == 0
            or not np.issubdtype(lengths.dtype, np.integer)
            or (lengths < 1).any()
        ):
            raise ValueError(
                f"lengths must be a non-empty 1-D array of positive ints, got shape "
                f"{lengths.shape}, dtype {lengths.dtype}, values {lengths.tolist()}"
            )
        lengths = lengths.astype(np.int64, copy=False)
        n_episodes = len(lengths)
        n_steps = int(lengths.sum())
        steps_what = f"lengths.sum(), the total number of steps of {n_episodes} episodes"
        episodes_what = "len(lengths), the number of episodes"

        observations = np.asarray(self.observations)
        last_observations = np.asarray(self.last_observations)
        actions = np.asarray(self.actions)
        rewards = np.asarray(self.rewards)
        _check_leading("observations", observations, n_steps, steps_what)
        _check_leading("last_observations", last_observations, n_episodes, episodes_what)
        if last_observations.shape[1:] != observations.shape[1:]:
            raise ValueError(
                f"last_observations has shape {last_observations.shape}, expected "
                f"{(n_episodes, *observations.shape[1:])}: one observation per episode, of the "
                f"same shape {observations.shape[1:]} as in observations"
            )
        _check_leading("actions", actions, n_steps, steps_what)
        if rewards.shape != (n_steps,):
            raise ValueError(
                f"rewards has shape {rewards.shape}, expected ({n_steps},): one scalar per step"
            )
        step_types = self._checked_step_types(self.step_types, n_steps)

        env_infos = _as_info_dict("env_infos", self.env_infos)
        agent_infos = _as_info_dict("agent_infos", self.agent_infos)
        episode_infos = _as_info_dict("episode_infos", self.episode_infos)
        for key, value in env_infos.items():
            _check_leading(f"env_infos[{key!r}]", value, n_steps, steps_what)
        for key, value in agent_infos.items():
            _check_leading(f"agent_infos[{key!r}]", value, n_steps, steps_what)
        for key, value in episode_infos.items():
            _check_leading(f"episode_infos[{key!r}]", value, n_episodes, episodes_what)

        converted: dict[str, object] = {
            "observations": observations,
            "last_observations": last_observations,
            "actions": actions,
            "rewards": rewards,
            "step_types": step_types,
            "lengths": lengths,
            "env_infos": env_infos,
            "agent_infos": agent_infos,
            "episode_infos": episode_infos,
        }
        for name, field_value in converted.items():  # frozen: bypass the generated __setattr__
            object.__setattr__(self, name, field_value)

    @staticmethod
    def _checked_step_types(step_types: Any, n_steps: int) -> np.ndarray:
        """Return ``step_types`` as ``int8``, or raise if it is not ``n_steps`` valid values."""
        array = np.asarray(step_types)
        if array.dtype == object:  # e.g. an object array of StepType members
            try:
                array = array.astype(np.int64)
            except (TypeError, ValueError) as error:
                raise ValueError(f"step_types must hold StepType values: {error}") from error
        if array.shape != (n_steps,):
            raise ValueError(
                f"step_types has shape {array.shape}, expected ({n_steps},): one StepType per step"
            )
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"step_types has dtype {array.dtype}, expected ints (StepType values)")
        valid = [int(member) for member in StepType]
        bad = ~np.isin(array, valid)
        if bad.any():
            raise ValueError(
                f"step_types has invalid values {np.unique(array[bad]).tolist()} at indices "
                f"{np.flatnonzero(bad)[:10].tolist()}, expected StepType values {valid}"
            )
        return array.astype(_STEP_TYPE_DTYPE, copy=False)

    # -- sizes and indices ---------------------------------------------------------------------
    @property
    def n_episodes(self) -> int:
        """Number of episodes ``N``."""
        return len(self.lengths)

    @property
    def n_steps(self) -> int:
        """Total number of time steps over all episodes (``N•T``)."""
        return int(self.lengths.sum())

    @property
    def _starts(self) -> np.ndarray:
        """Flat index of each episode's first step, ``(N,)``."""
        return np.cumsum(self.lengths) - self.lengths

    def _step_index(self) -> tuple[np.ndarray, np.ndarray]:
        """Episode index and time index within the episode of every flat step, both ``(N•T,)``."""
        episode = np.repeat(np.arange(self.n_episodes), self.lengths)
        time = np.arange(self.n_steps) - np.repeat(self._starts, self.lengths)
        return episode, time

    def _split_flat(self, array: np.ndarray) -> list[np.ndarray]:
        """Cut a flat ``(N•T, ...)`` array into per-episode views."""
        return np.split(array, np.cumsum(self.lengths)[:-1])

    # -- splitting and joining -----------------------------------------------------------------
    def split(self) -> list[EpisodeBatch]:
        """One single-episode batch per episode, in order (views, not copies)."""
        batches = []
        for i, (start, length) in enumerate(zip(self._starts, self.lengths, strict=True)):
            steps = slice(int(start), int(start + length))
            batches.append(
                EpisodeBatch(
                    observations=self.observations[steps],
                    last_observations=self.last_observations[i : i + 1],
                    actions=self.actions[steps],
                    rewards=self.rewards[steps],
                    step_types=self.step_types[steps],
                    lengths=self.lengths[i : i + 1],
                    env_infos={k: v[steps] for k, v in self.env_infos.items()},
                    agent_infos={k: v[steps] for k, v in self.agent_infos.items()},
                    episode_infos={k: v[i : i + 1] for k, v in self.episode_infos.items()},
                )
            )
        return batches

    @classmethod
    def concatenate(cls, *batches: EpisodeBatch) -> EpisodeBatch:
        """Join batches into one, episodes in argument order; the inverse of :meth:`split`.

        :raises ValueError: if no batch is given, or the batches disagree on info keys or on
            the per-step shapes of observations, actions or infos.
        """
        if not batches:
            raise ValueError("concatenate needs at least one EpisodeBatch, got none")
        first = batches[0]
        for name in ("observations", "actions"):
            for i, batch in enumerate(batches[1:], start=1):
                a, b = getattr(first, name), getattr(batch, name)
                if a.shape[1:] != b.shape[1:]:
                    raise ValueError(
                        f"{name} per-step shape differs: batches[0] has {a.shape[1:]}, "
                        f"batches[{i}] has {b.shape[1:]}"
                    )
        for name in ("env_infos", "agent_infos", "episode_infos"):
            dicts = [getattr(batch, name) for batch in batches]
            _check_same_keys(name, dicts, "batches")
            for key, value in dicts[0].items():
                for i, other in enumerate(dicts[1:], start=1):
                    if other[key].shape[1:] != value.shape[1:]:
                        raise ValueError(
                            f"{name}[{key!r}] per-row shape differs: batches[0] has "
                            f"{value.shape[1:]}, batches[{i}] has {other[key].shape[1:]}"
                        )

        def join(name: str) -> np.ndarray:
            return np.concatenate([getattr(batch, name) for batch in batches])

        def join_infos(name: str) -> dict[str, np.ndarray]:
            return {
                key: np.concatenate([getattr(batch, name)[key] for batch in batches])
                for key in getattr(first, name)
            }

        return cls(
            observations=join("observations"),
            last_observations=join("last_observations"),
            actions=join("actions"),
            rewards=join("rewards"),
            step_types=join("step_types"),
            lengths=join("lengths"),
            env_infos=join_infos("env_infos"),
            agent_infos=join_infos("agent_infos"),
            episode_infos=join_infos("episode_infos"),
        )

    def to_list(self) -> list[dict[str, Any]]:
        """One dict per episode, the layout of a rollout: see :meth:`from_list`.

        Keys: ``observations``, ``next_observations``, ``actions``, ``rewards``, ``step_types``
        (each ``(T, ...)``), ``env_infos`` and ``agent_infos`` (dicts of ``(T, ...)``) and
        ``episode_infos`` (dict of one episode's values, without the episode dim).
        """
        per_step = {
            "observations": self._split_flat(self.observations),
            "next_observations": self._split_flat(self.next_observations),
            "actions": self._split_flat(self.actions),
            "rewards": self._split_flat(self.rewards),
            "step_types": self._split_flat(self.step_types),
        }
        env_infos = {k: self._split_flat(v) for k, v in self.env_infos.items()}
        agent_infos = {k: self._split_flat(v) for k, v in self.agent_infos.items()}
        episodes: list[dict[str, Any]] = []
        for i in range(self.n_episodes):
            episode: dict[str, Any] = {name: arrays[i] for name, arrays in per_step.items()}
            episode["env_infos"] = {k: v[i] for k, v in env_infos.items()}
            episode["agent_infos"] = {k: v[i] for k, v in agent_infos.items()}
            episode["episode_infos"] = {k: v[i] for k, v in self.episode_infos.items()}
            episodes.append(episode)
        return episodes

    @classmethod
    def from_list(cls, paths: Iterable[Mapping[str, Any]]) -> EpisodeBatch:
        """Build a batch from per-episode dicts, such as :meth:`to_list` returns.

        Each path needs ``observations``, ``actions``, ``rewards`` and ``step_types``; ``T`` is
        ``len(rewards)``. ``env_infos``, ``agent_infos`` and ``episode_infos`` are optional but
        must have the same keys in every path; ``episode_infos`` values carry no episode dim.

        The last observation is taken, in this order, from ``observations`` of length ``T + 1``
        (a raw rollout), from ``next_observations[-1]`` if ``observations`` has length ``T``,
        or else, leniently, by repeating ``observations[-1]``: that last guess is only right
        for consumers that never read the observation after a terminal step.

        :raises ValueError: if there are no paths, a key is missing, or a path's arrays do not
            all have ``T`` steps.
        """
        paths = list(paths)
        if not paths:
            raise ValueError("from_list needs at least one path, got none")
        for name in ("env_infos", "agent_infos", "episode_infos"):
            _check_same_keys(name, [path.get(name, {}) for path in paths], "paths")

        observations, last_observations = [], []
        for i, path in enumerate(paths):
            missing = [
                k for k in ("observations", "actions", "rewards", "step_types") if k not in path
            ]
            if missing:
                raise ValueError(f"paths[{i}] is missing {missing}")
            rewards = np.asarray(path["rewards"])
            if rewards.ndim != 1 or rewards.size == 0:
                raise ValueError(
                    f"paths[{i}]['rewards'] has shape {rewards.shape}, expected (T,) with T >= 1"
                )
            length = len(rewards)
            obs = np.asarray(path["observations"])
            rows = obs.shape[0] if obs.ndim else -1
            if rows == length + 1:
                observations.append(obs[:-1])
                last_observations.append(obs[-1])
            elif rows == length:
                observations.append(obs)
                if "next_observations" in path:
                    next_obs = np.asarray(path["next_observations"])
                    _check_leading(f"paths[{i}]['next_observations']", next_obs, length, "T")
                    last_observations.append(next_obs[-1])
                else:
                    last_observations.append(obs[-1])
            else:
                raise ValueError(
                    f"paths[{i}]['observations'] has shape {obs.shape}, expected leading "
                    f"dimension {length} or {length + 1} (T = len(rewards) = {length})"
                )
            for name in ("actions", "step_types"):
                _check_leading(f"paths[{i}][{name!r}]", np.asarray(path[name]), length, "T")
            for name in ("env_infos", "agent_infos"):
                for key, value in path.get(name, {}).items():
                    where = f"paths[{i}][{name!r}][{key!r}]"
                    _check_leading(where, np.asarray(value), length, "T")

        def join(name: str) -> np.ndarray:
            return np.concatenate([np.asarray(path[name]) for path in paths])

        def join_infos(name: str, stack: bool = False) -> dict[str, np.ndarray]:
            combine = np.stack if stack else np.concatenate
            return {
                key: combine([np.asarray(path[name][key]) for path in paths])
                for key in paths[0].get(name, {})
            }

        return cls(
            observations=np.concatenate(observations),
            last_observations=np.stack(last_observations),
            actions=join("actions"),
            rewards=join("rewards"),
            step_types=join("step_types"),
            lengths=np.array([len(obs) for obs in observations], dtype=np.int64),
            env_infos=join_infos("env_infos"),
            agent_infos=join_infos("agent_infos"),
            episode_infos=join_infos("episode_infos", stack=True),
        )

    # -- derived per-step arrays ---------------------------------------------------------------
    @property
    def next_observations(self) -> np.ndarray:
        """``(N•T, *obs_shape)``: the observation after each step.

        Within an episode that is the next row of ``observations``; after an episode's last step
        it is that episode's row of ``last_observations``.
        """
        dtype = np.result_type(self.observations, self.last_observations)
        result = np.empty(self.observations.shape, dtype=dtype)
        result[:-1] = self.observations[1:]
        result[np.cumsum(self.lengths) - 1] = self.last_observations
        return result

    @property
    def terminals(self) -> np.ndarray:
        """``(N•T,)`` bool: True where the episode really ended (not where it timed out)."""
        return self.step_types == StepType.TERMINAL

    def episode_returns(self, discount: float = 1.0) -> np.ndarray:
        """``(N,)`` float64: each episode's ``sum_t discount**t * reward_t`` (t from 0).

        :param discount: in ``[0, 1]``; ``1.0`` gives the undiscounted return used for logging.
        """
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        episode, time = self._step_index()
        weighted = self.rewards * np.power(float(discount), time)
        return np.bincount(episode, weights=weighted, minlength=self.n_episodes)

    @property
    def observations_list(self) -> list[np.ndarray]:
        """Per-episode observations, ``(T_i, *obs_shape)`` views."""
        return self._split_flat(self.observations)

    @property
    def actions_list(self) -> list[np.ndarray]:
        """Per-episode actions, ``(T_i, *act_shape)`` views."""
        return self._split_flat(self.actions)

    # -- padded views --------------------------------------------------------------------------
    def padded(self, array: np.ndarray, max_length: int | None = None) -> np.ndarray:
        """Lay a flat ``(N•T, ...)`` array out as ``(N, max_length, ...)``, zero after each end.

        For recurrent policies and per-episode advantage estimation, which want a time axis.

        :param array: any array with one row per step of this batch, in this batch's order.
        :param max_length: width of the time axis; defaults to ``lengths.max()``. It may be
            larger (e.g. the horizon, for fixed shapes) but not smaller.
        """
        array = np.asarray(array)
        _check_leading("array", array, self.n_steps, "lengths.sum(), the total number of steps")
        longest = int(self.lengths.max())
        if max_length is None:
            max_length = longest
        elif max_length < longest:
            raise ValueError(
                f"max_length {max_length} is shorter than the longest episode ({longest}); "
                f"padding to it would drop steps"
            )
        episode, time = self._step_index()
        result = np.zeros((self.n_episodes, max_length, *array.shape[1:]), dtype=array.dtype)
        result[episode, time] = array
        return result

    @property
    def valids(self) -> np.ndarray:
        """``(N, lengths.max())`` float: 1.0 at real steps, 0.0 at padding (a loss mask)."""
        time = np.arange(int(self.lengths.max()))
        return (time[None, :] < self.lengths[:, None]).astype(np.float64)

    @property
    def padded_observations(self) -> np.ndarray:
        """``observations`` as ``(N, max_length, *obs_shape)``."""
        return self.padded(self.observations)

    @property
    def padded_next_observations(self) -> np.ndarray:
        """``next_observations`` as ``(N, max_length, *obs_shape)``."""
        return self.padded(self.next_observations)

    @property
    def padded_actions(self) -> np.ndarray:
        """``actions`` as ``(N, max_length, *act_shape)``."""
        return self.padded(self.actions)

    @property
    def padded_rewards(self) -> np.ndarray:
        """``rewards`` as ``(N, max_length)``."""
        return self.padded(self.rewards)

    @property
    def padded_step_types(self) -> np.ndarray:
        """``step_types`` as ``(N, max_length)``; padding reads as 0 (``FIRST``): mask it."""
        return self.padded(self.step_types)

    @property
    def padded_env_infos(self) -> dict[str, np.ndarray]:
        """Each env info as ``(N, max_length, ...)``."""
        return {key: self.padded(value) for key, value in self.env_infos.items()}

    @property
    def padded_agent_infos(self) -> dict[str, np.ndarray]:
        """Each agent info as ``(N, max_length, ...)``."""
        return {key: self.padded(value) for key, value in self.agent_infos.items()}


class EpisodeRecorder:
    """One episode as it is collected, a step at a time; :meth:`path` gives it in the form
    :meth:`EpisodeBatch.from_list` takes. The meta-test evaluator and the Meta-World adapter
    record with it. MAML's episode collector records whole vector steps at once instead: for its
    hundreds of sub-envs, a recorder per sub-env costs 17 times as much recording: 0.6 s more per
    batch of 800 HalfCheetah episodes of 200 steps, +12 % on one thread with a policy that costs
    nothing (``scripts/bench_episode_recording.py``).

    Example::

        >>> recorder = EpisodeRecorder()
        >>> recorder.record(np.zeros(2), np.ones(1), 1.0, ended=False, terminated=False)
        >>> recorder.record(np.ones(2), np.ones(1), 0.5, ended=True, terminated=True)
        >>> recorder.last_observation = np.full(2, 2.0)
        >>> batch = EpisodeBatch.from_list([recorder.path()])
        >>> batch.lengths.tolist(), batch.step_types.tolist()
        ([2], [0, 2])
    """

    __slots__ = (
        "actions",
        "last_observation",
        "observations",
        "rewards",
        "step_types",
        "successes",
    )

    def __init__(self) -> None:
        self.observations: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.rewards: list[float] = []
        self.step_types: list[int] = []
        self.successes: list[bool | None] = []
        self.last_observation: np.ndarray | None = None
        """The observation after the last step, when known (else :meth:`path` leaves it out)."""

    def record(
        self,
        observation: Any,
        action: Any,
        reward: float,
        *,
        ended: bool,
        terminated: bool,
        success: bool | None = None,
    ) -> None:
        """Add one step (copies of ``observation`` and ``action``); ``ended``: the episode ended
        on it, by termination if ``terminated``, else by a time limit."""
        self.observations.append(np.array(observation, copy=True))
        self.actions.append(np.array(action, copy=True))
        self.rewards.append(float(reward))
        self.successes.append(success)
        if ended:
            self.step_types.append(StepType.TERMINAL if terminated else StepType.TIMEOUT)
        else:
            self.step_types.append(StepType.get_step_type(len(self.rewards), None, False))

    @property
    def success(self) -> bool | None:
        """Whether any step reported success (``None`` when no step reported it)."""
        reported = [s for s in self.successes if s is not None]
        return any(reported) if reported else None

    def path(self, with_success: bool = False) -> dict[str, Any]:
        """The episode as a path dict; ``with_success`` adds ``env_infos["success"]`` (every
        step must have reported it)."""
        observations = self.observations
        if self.last_observation is not None:
            observations = [*observations, self.last_observation]
        path: dict[str, Any] = {
            "observations": np.stack(observations),
            "actions": np.stack(self.actions),
            "rewards": np.asarray(self.rewards, dtype=np.float64),
            "step_types": np.asarray(self.step_types, dtype=np.int8),
        }
        path["env_infos"] = (
            {"success": np.asarray(self.successes, dtype=bool)} if with_success else {}
        )
        return path
