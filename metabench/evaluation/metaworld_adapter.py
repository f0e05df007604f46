"""Evaluate any :class:`~metabench.algos.base.MetaRLAlgorithm` with Meta-World's own evaluator.

:class:`MetaWorldAgent` implements the ``MetaLearningAgent`` protocol of
``metaworld.evaluation`` (``init``, ``adapt_action``, ``step``, ``adapt``, ``eval_action``,
``reset``) on top of ``get_exploration_policy`` and ``adapt_policy``, with one policy per sub-env
of Meta-World's vector env::

    envs = gym.make_vec("Meta-World/ML10-test", meta_batch_size=5, seed=0)
    agent = MetaWorldAgent(algo, envs)
    success_rate, mean_return, per_class = metaworld.evaluation.metalearning_evaluation(agent, envs)

How Meta-World's calls map onto the interface, per sub-env ``i``:

* ``init()``: ``policies[i] = algo.get_exploration_policy()``;
* ``adapt_action(obs)`` / ``step(timestep)``: ``policies[i]`` acts; the agent records the
  episodes from the time steps it is shown (complete episodes only);
* ``adapt()``: the batch is complete; ``adapted[i] = algo.adapt_policy(policies[i], batch_i)``
  runs when the evaluation starts (so with Meta-World's ``adaptation_steps > 1`` the exploration
  simply goes on, and ``adapt_policy`` is called once, on every episode collected since ``init``);
* ``reset(mask)`` / ``eval_action(obs)``: ``adapted[i]`` acts.

``Policy.reset()`` is called before the first action of every episode.

Limits, all from what the protocol shows an agent:

* The agent sees the vector env's observations as they are; ``algo.wrap_env`` is *not* applied,
  because Meta-World's evaluation episodes give the agent no rewards to build RL2's observation
  from. An RL2 policy needs eval envs that add the previous action, reward and done flag
  themselves: ``gym.make_vec(..., recurrent_info_in_obs=True)`` (Meta-World's
  ``RNNBasedMetaRLWrapper``: ``[obs, action, reward / 10, done]``, the layout of
  :class:`~metabench.wrappers.RL2Env` with ``reward_scale=0.1``). That wrapper zeroes the
  previous action, reward and done flag at every episode start, as ``RL2Env`` does with
  ``zero_at_episode_start=True`` (``rl2-ppo-metaworld``'s setting); an RL2 policy trained
  without it saw the ending step there instead.
* The observation after an episode's last step is never shown (the vector env resets the sub-env
  in the same step), so ``last_observations`` of the batch repeat each episode's last observed
  observation, and ``env_infos`` is empty.
* Meta-World's evaluator keys success by env *name*: for ML1 every sub-env has the same name and
  its numbers mix the tasks (see :mod:`metabench.evaluation.results`, which keys by task).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.data import EpisodeBatch, EpisodeRecorder

if TYPE_CHECKING:
    from metaworld.evaluation import Timestep

__all__ = ["MetaWorldAgent"]


class MetaWorldAgent:
    """A ``metaworld.evaluation.MetaLearningAgent`` driving a :class:`MetaRLAlgorithm`.

    :param algo: the algorithm to evaluate.
    :param envs: the vector env that will be passed to ``metalearning_evaluation`` (only its
        number of sub-envs and autoreset mode are read). It must reset sub-envs in the step that
        ends their episode (``autoreset_mode="SameStep"``, Meta-World's default), or the agent
        would record the reset step as part of an episode.

    :attr:`n_inits` and :attr:`n_adaptations` count ``init`` calls and adaptations (each one
    calls ``adapt_policy`` once per sub-env); :attr:`batches` holds the last batches adapted to.
    """

    def __init__(self, algo: MetaRLAlgorithm, envs: gym.vector.VectorEnv[Any, Any, Any]) -> None:
        if not isinstance(algo, MetaRLAlgorithm):
            raise ValueError(f"algo must be a MetaRLAlgorithm, got {type(algo).__name__}")
        mode = envs.metadata.get("autoreset_mode")
        if mode is not None and mode != gym.vector.AutoresetMode.SAME_STEP:
            raise ValueError(
                f"the vector env resets sub-envs with autoreset_mode={mode!s}; Meta-World's "
                f"evaluation and this agent need AutoresetMode.SAME_STEP (the default of "
                f"gym.make_vec('Meta-World/...')): pass autoreset_mode='SameStep'"
            )
        self.algo = algo
        self.num_envs = int(envs.num_envs)
        self.n_inits = 0
        self.n_adaptations = 0
        self.batches: list[EpisodeBatch] = []
        self._policies: list[Policy] = []
        self._adapted: list[Policy] | None = None
        self._adapt_requested = False
        self._start = np.ones(self.num_envs, dtype=bool)  # next action starts an episode
        self._paths: list[EpisodeRecorder] = []
        self._episodes: list[list[dict[str, Any]]] = []

    # -- MetaLearningAgent ---------------------------------------------------------------------
    def init(self) -> None:
        """Start a new meta-test round: fresh exploration policies for every sub-env."""
        self.n_inits += 1
        self._policies = [self.algo.get_exploration_policy() for _ in range(self.num_envs)]
        self._adapted = None
        self._adapt_requested = False
        self._start[:] = True
        self._paths = [EpisodeRecorder() for _ in range(self.num_envs)]
        self._episodes = [[] for _ in range(self.num_envs)]

    def adapt_action(self, observations: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions of the exploration policies; no auxiliary outputs."""
        if not self._policies:
            raise RuntimeError("adapt_action() called before init()")
        if self._adapted is not None:
            raise RuntimeError(
                "adapt_action() called after the evaluation started; call init() to start over"
            )
        self._adapt_requested = False  # Meta-World's adaptation_steps > 1: exploration goes on
        return self._act(self._policies, observations), {}

    def step(self, timestep: Timestep) -> None:
        """Record one vector step of exploration (observation, action, reward, episode ends)."""
        if not self._policies:
            raise RuntimeError("step() called before init()")
        observations = np.asarray(timestep.observation)
        actions = np.asarray(timestep.action)
        rewards = np.asarray(timestep.reward, dtype=np.float64).reshape(self.num_envs)
        terminated = np.asarray(timestep.terminated, dtype=bool).reshape(self.num_envs)
        truncated = np.asarray(timestep.truncated, dtype=bool).reshape(self.num_envs)
        for i, path in enumerate(self._paths):
            ended = bool(terminated[i] or truncated[i])
            path.record(
                observations[i], actions[i], rewards[i], ended=ended, terminated=bool(terminated[i])
            )
            if ended:
                self._episodes[i].append(path.path())
                self._paths[i] = EpisodeRecorder()
                self._start[i] = True

    def adapt(self) -> None:
        """End the exploration; ``adapt_policy`` runs when the evaluation starts."""
        if not self._policies:
            raise RuntimeError("adapt() called before init()")
        # Meta-World resets the vector env after adapting: episodes in progress are cut.
        self._paths = [EpisodeRecorder() for _ in range(self.num_envs)]
        self._start[:] = True
        self._adapt_requested = True

    def eval_action(self, observations: np.ndarray) -> np.ndarray:
        """Actions of the adapted policies."""
        return self._act(self._adapted_policies(), observations)

    def reset(self, env_mask: np.ndarray) -> None:
        """Sub-envs in ``env_mask`` start a new episode at their next action."""
        mask = np.asarray(env_mask, dtype=bool).reshape(self.num_envs)
        if self._adapted is None and not self._adapt_requested:  # still exploring
            for i in np.flatnonzero(mask):
                self._paths[i] = EpisodeRecorder()
        else:
            self._adapted_policies()
        self._start |= mask

    # -- internals -----------------------------------------------------------------------------
    def _act(self, policies: list[Policy], observations: np.ndarray) -> np.ndarray:
        observations = np.asarray(observations)
        if observations.shape[0] != self.num_envs:
            raise ValueError(
                f"observations have shape {observations.shape}, expected one row per sub-env "
                f"({self.num_envs}): build the agent with the vector env it is evaluated on"
            )
        actions = []
        for i, policy in enumerate(policies):
            if self._start[i]:
                policy.reset()
                self._start[i] = False
            actions.append(np.asarray(policy.get_action(observations[i])))
        return np.stack(actions)

    def _adapted_policies(self) -> list[Policy]:
        if self._adapted is None:
            if not self._adapt_requested:
                raise RuntimeError(
                    "evaluation started before adapt(): call init(), explore with "
                    "adapt_action()/step(), then adapt()"
                )
            empty = [i for i, episodes in enumerate(self._episodes) if not episodes]
            if empty:
                raise RuntimeError(
                    f"sub-envs {empty} finished no exploration episode before adapt(); "
                    f"adapt_policy needs at least one complete episode per sub-env"
                )
            self.batches = [EpisodeBatch.from_list(episodes) for episodes in self._episodes]
            self._adapted = [
                self.algo.adapt_policy(policy, batch)
                for policy, batch in zip(self._policies, self.batches, strict=True)
            ]
            self.n_adaptations += 1
            self._start[:] = True
        return self._adapted
