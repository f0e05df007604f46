"""Per-task policy search from scratch: what :class:`~metabench.algos.cem.CEM` and
:class:`~metabench.algos.cmaes.CMAES` share.

These baselines do no meta-learning. At meta-test time the exploration episodes of a task are
spent on a black-box search over the parameters ``θ`` of a deterministic linear policy
(:class:`LinearPolicy`); the adapted policy is the search's result. They answer "what does the
same episode budget buy without meta-training?".

How the search sees rewards
    A :class:`~metabench.algos.base.Policy` only gets observations, yet generation ``g + 1`` of a
    search depends on the returns of generation ``g``. So :meth:`PolicySearch.wrap_env` puts an
    :class:`~metabench.wrappers.RL2Env` around the task env: each observation carries
    ``[obs, previous action, reward, done]``. The exploration policy (:class:`SearchPolicy`)
    plays candidate ``k`` of the current population in its ``k``-th episode, adds each observed
    reward to the return of the candidate that earned it, and tells the search a generation's
    returns as soon as the last of them is known; the linear policy itself only sees ``obs``.
    The reward of the very last exploration step only reaches the adapted policy's first
    observation, so :meth:`PolicySearch.adapt_policy` takes that episode's return from the
    exploration :class:`~metabench.data.EpisodeBatch` (and checks that the returns the policy
    observed agree with the batch), finishes the search and returns :class:`LinearPolicy` with
    the result.

Budget
    With ``exploration_episodes`` exploration episodes and a population of ``n_samples``, the
    search runs ``exploration_episodes // n_samples`` generations. Episodes of an unfinished last
    generation are played but not learned from (a warning says so): choose
    ``exploration_episodes`` a multiple of ``n_samples``.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Callable
from typing import Any, Self

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.benchmark import Benchmark
from metabench.algos.run_envs import RunEnvs
from metabench.data import EpisodeBatch
from metabench.validation import check_count, check_number, config_dict
from metabench.wrappers import RL2Env

__all__ = [
    "LinearPolicy",
    "PolicySearch",
    "Search",
    "SearchPolicy",
    "check_generation",
    "check_spaces",
    "population_defaults",
]


def check_spaces(
    name: str, action_space: Any, observation_space: Any
) -> tuple[spaces.Box, spaces.Box]:
    """The two spaces, checked: a Box action space and a flat Box observation space."""
    if not isinstance(action_space, spaces.Box):
        raise ValueError(
            f"{name} searches a linear policy with continuous actions and needs a Box action "
            f"space (env.action_space), got {action_space!r}; use NOP or RL2 for discrete actions"
        )
    if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
        raise ValueError(
            f"{name} needs a flat Box observation space (env.observation_space), got "
            f"{observation_space!r}; wrap the env in gymnasium.wrappers.FlattenObservation first"
        )
    return action_space, observation_space


def check_positive(name: str, value: Any, allow_zero: bool = False) -> float:
    """``value`` as a finite float ``> 0`` (``>= 0`` with ``allow_zero``), else ``ValueError``."""
    return check_number(name, value, low=0.0, low_open=not allow_zero)


class LinearPolicy(Policy):
    """The deterministic policy ``a = clip(W @ obs + b, low, high)`` that the searches tune.

    :param params: ``θ = [W.ravel(), b]``, ``W`` of shape ``(act_size, obs_dim)`` in row-major
        order, ``b`` of shape ``(act_size,)`` (``act_size``: the number of action entries; the
        action is reshaped to the action space's shape).
    :param observation_space: the task env's flat Box observation space. Longer observations
        (those of :meth:`PolicySearch.wrap_env`) are cut to their first ``obs_dim`` entries.
    :param action_space: the task env's Box action space.
    """

    def __init__(
        self, params: np.ndarray, observation_space: spaces.Box, action_space: spaces.Box
    ) -> None:
        self.obs_dim = int(observation_space.shape[0])
        self.act_size = int(np.prod(action_space.shape))
        params = np.array(params, dtype=np.float64)
        if params.shape != (n_params(observation_space, action_space),):
            raise ValueError(
                f"a linear policy of {self.obs_dim} observations and {self.act_size} actions has "
                f"{n_params(observation_space, action_space)} parameters, got shape {params.shape}"
            )
        self.params = params
        self.action_space = action_space
        cut = self.act_size * self.obs_dim
        self._weights = params[:cut].reshape(self.act_size, self.obs_dim)
        self._bias = params[cut:]

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        obs = np.asarray(observation, dtype=np.float64)[: self.obs_dim]
        action = self._weights @ obs + self._bias
        action = action.reshape(self.action_space.shape)
        return np.clip(action, self.action_space.low, self.action_space.high).astype(
            self.action_space.dtype
        )


def n_params(observation_space: spaces.Box, action_space: spaces.Box) -> int:
    """Length of ``θ`` of a :class:`LinearPolicy`: ``act_size * (obs_dim + 1)``."""
    return int(np.prod(action_space.shape)) * (int(observation_space.shape[0]) + 1)


class Search(abc.ABC):
    """A black-box maximiser of episode returns, one population at a time."""

    n_samples: int
    """Candidates per generation."""

    @abc.abstractmethod
    def ask(self) -> np.ndarray:
        """The candidates of the next generation, shape ``(n_samples, n_params)``."""

    @abc.abstractmethod
    def tell(self, candidates: np.ndarray, returns: np.ndarray) -> None:
        """Update the search from the episode return of each candidate of :meth:`ask`."""

    @abc.abstractmethod
    def result(self) -> np.ndarray:
        """The parameters the adapted policy uses."""


class SearchPolicy(Policy):
    """The exploration policy: plays one candidate per episode and runs the search as it goes.

    It must act on the observations of :meth:`PolicySearch.wrap_env` (``[obs, previous action,
    reward, done]``) of one trial. Records, in episode order:

    * :attr:`played`: the parameters of the candidate that played each episode;
    * :attr:`returns`: each finished episode's return (the sum of the rewards observed);
    * :attr:`told`: ``(candidates, returns)`` of each generation given to the search.
    """

    def __init__(
        self, search: Search, observation_space: spaces.Box, action_space: spaces.Box
    ) -> None:
        self.search = search
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_size = (
            int(observation_space.shape[0]) + int(np.prod(action_space.shape)) + 2
        )  # what RL2Env makes of it
        self.played: list[np.ndarray] = []
        self.returns: list[float] = []
        self.told: list[tuple[np.ndarray, np.ndarray]] = []
        self.finished = False
        self._population: np.ndarray | None = None
        self._actor: LinearPolicy | None = None
        self._running = 0.0
        self._reset_called = False

    @property
    def n_episodes(self) -> int:
        """Episodes started so far."""
        return len(self.played)

    def reset(self) -> None:
        self._reset_called = True

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        if self.finished:
            raise RuntimeError("this exploration policy was adapted already; use the adapted one")
        obs = np.asarray(observation)
        if obs.shape != (self.obs_size,):
            raise ValueError(
                f"the exploration policy of a policy search reads rewards from its observations "
                f"and expects shape ({self.obs_size},), got {obs.shape}: act in "
                f"algo.wrap_env(env), not in the task env"
            )
        reward, done = float(obs[-2]), bool(obs[-1])
        if self._actor is not None:
            self._running += reward  # earned by the current candidate's previous action
        new_episode = self._actor is None or self._reset_called
        if done != (new_episode and self._actor is not None):
            raise RuntimeError(
                "episode ends seen in the observations and reset() calls disagree: call reset() "
                "at the start of every episode, and use one exploration policy for one trial"
            )
        if new_episode:
            if self._actor is not None:
                self._end_episode(self._running)
            self._start_episode()
        self._reset_called = False
        assert self._actor is not None
        return self._actor.get_action(obs)

    def _start_episode(self) -> None:
        n = self.search.n_samples
        index = self.n_episodes % n
        if index == 0:
            self._population = np.asarray(self.search.ask(), dtype=np.float64)
        assert self._population is not None
        params = self._population[index].copy()
        self.played.append(params)
        self._actor = LinearPolicy(params, self.observation_space, self.action_space)
        self._running = 0.0

    def _end_episode(self, episode_return: float) -> None:
        self.returns.append(float(episode_return))
        n = self.search.n_samples
        if len(self.returns) % n == 0:
            candidates = np.stack(self.played[-n:])
            returns = np.asarray(self.returns[-n:], dtype=np.float64)
            self.search.tell(candidates, returns)
            self.told.append((candidates, returns))

    def finish(self, episodes: EpisodeBatch) -> np.ndarray:
        """End the search with the exploration ``episodes`` and return its result.

        The last episode's return comes from ``episodes``; the others must agree with it.
        """
        if self.finished:
            raise RuntimeError("this exploration policy was adapted already")
        if not isinstance(episodes, EpisodeBatch) or episodes.n_episodes != self.n_episodes:
            got = episodes.n_episodes if isinstance(episodes, EpisodeBatch) else episodes
            raise ValueError(
                f"adapt_policy needs the EpisodeBatch of the {self.n_episodes} episodes this "
                f"exploration policy played, got {got!r}"
            )
        batch_returns = episodes.episode_returns()
        observed = np.asarray(self.returns, dtype=np.float64)
        # float32 observations round each reward; allow for that, relative to the reward sizes
        sizes = np.abs(episodes.padded_rewards).sum(axis=1)[: len(observed)]
        if not np.all(np.abs(observed - batch_returns[: len(observed)]) <= 1e-6 * (1 + sizes)):
            raise ValueError(
                "the exploration episodes do not have the returns this exploration policy "
                "observed: pass the episodes it played, in order"
            )
        if self._actor is not None:
            self._end_episode(float(batch_returns[-1]))
        self.finished = True
        left = self.n_episodes % self.search.n_samples
        if left:
            warnings.warn(
                f"{left} exploration episodes of an unfinished generation were not learned from: "
                f"use a number of exploration episodes that is a multiple of n_samples "
                f"({self.search.n_samples})",
                stacklevel=3,
            )
        return self.search.result()


class PolicySearch(MetaRLAlgorithm):
    """A search from scratch on every test task; nothing is meta-trained.

    Subclasses set :attr:`n_samples` and build their :class:`Search` in :meth:`make_search`.
    """

    steps_per_iteration = 0

    def __init__(self, action_space: Any, observation_space: Any, seed: int | None = None) -> None:
        name = type(self).__name__
        self.action_space, self.observation_space = check_spaces(
            name, action_space, observation_space
        )
        if seed is not None:
            check_count("seed", seed, 0, "pass a non-negative integer, or None for fresh entropy")
        self.seed = seed
        self.n_params = n_params(self.observation_space, self.action_space)
        self.n_iterations = 0
        self._rng = np.random.default_rng(seed)

    @classmethod
    def from_benchmark(
        cls, envs: RunEnvs, config: Any, *, log_dir: str | None = None, device: str = "cpu"
    ) -> Self:
        """The search on the meta-test env's spaces, its config's fields as keywords (the rest is
        unused)."""
        env = envs.test_env()
        try:
            return cls(
                env.action_space, env.observation_space, seed=envs.seed, **config_dict(config)
            )
        finally:
            env.close()

    @abc.abstractmethod
    def make_search(self, rng: np.random.Generator) -> Search:
        """A new search for one task, drawing its randomness from ``rng`` only."""

    def train(self, n_iterations: int) -> dict[str, float]:
        """Nothing to meta-train; only count ``n_iterations``. Returns ``{}``."""
        check_count("n_iterations", n_iterations, 0, "pass how many iterations to run")
        self.n_iterations += int(n_iterations)
        return {}

    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        """``RL2Env(env)``: the exploration policy reads rewards and episode ends from it."""
        if (
            not isinstance(env.observation_space, spaces.Box)
            or env.observation_space.shape != self.observation_space.shape
            or not isinstance(env.action_space, spaces.Box)
            or env.action_space.shape != self.action_space.shape
        ):
            raise ValueError(
                f"{type(self).__name__} was built for observations {self.observation_space} and "
                f"actions {self.action_space}, but the env has {env.observation_space} and "
                f"{env.action_space}: build it from this env's spaces"
            )
        return RL2Env(env)

    # exploration policies draw from self._rng: seeded per meta-test, restored afterwards
    evaluation_streams = MetaRLAlgorithm._own_generator_streams

    @property
    def deterministic_test(self) -> bool:
        """The search's result is a deterministic linear policy."""
        return True

    def get_exploration_policy(self) -> SearchPolicy:
        """A new search, seeded from this algorithm's generator, as a policy."""
        rng = np.random.default_rng(self._rng.integers(2**63))
        return SearchPolicy(self.make_search(rng), self.observation_space, self.action_space)

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> LinearPolicy:
        """Finish the search of ``exploration_policy`` and return its result as a policy."""
        if not isinstance(exploration_policy, SearchPolicy):
            raise ValueError(
                f"adapt_policy needs the policy of get_exploration_policy(), got "
                f"{type(exploration_policy).__name__}"
            )
        params = exploration_policy.finish(exploration_episodes)
        return LinearPolicy(params, self.observation_space, self.action_space)


# -- what CEM's and CMA-ES's entry points share ----------------------------------------------------
def population_defaults(spec: Benchmark) -> dict[str, Any]:
    """The default population on a benchmark: candidates per generation that fit its
    exploration episodes (all of them in one generation when there are few, else two
    generations)."""
    episodes = spec.exploration_episodes
    return {"n_samples": max(2, episodes if episodes < 4 else episodes // 2)}


def check_generation(name: str) -> Callable[[Benchmark, Any], None]:
    """A check that one generation of ``name``'s search fits the benchmark's exploration
    episodes: with fewer, the search never updates and scores exactly as NOP does."""

    def check(spec: Benchmark, config: Any) -> None:
        n_samples, episodes = config.n_samples, spec.exploration_episodes
        if n_samples is not None and n_samples > episodes:
            fix = (
                f"set n_samples to at most {episodes} (--set n_samples={episodes})"
                if episodes >= 2
                else f"raise [evaluation] exploration_episodes to at least 2 in {spec.path}, or "
                f"use another algorithm"
            )
            raise ValueError(
                f"{name} on {spec.name}: one generation of n_samples={n_samples} candidates "
                f"needs {n_samples} exploration episodes but the benchmark gives {episodes}, so "
                f"the search would never update (it would score as NOP): {fix}"
            )

    return check
