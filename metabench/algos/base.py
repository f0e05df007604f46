"""The one interface every meta-RL algorithm implements (garage's ``MetaRLAlgorithm``).

The meta-test evaluator talks only to this interface, so a user's own algorithm plugs in the
same way as the built-in ones::

    class MyAlgo(MetaRLAlgorithm):
        steps_per_iteration = 2000  # environment steps of one train() iteration
        def train(self, n_iterations: int) -> dict[str, float]: ...
        def get_exploration_policy(self) -> Policy: ...
        def adapt_policy(self, exploration_policy, exploration_episodes) -> Policy: ...

The evaluator runs, per test task: episodes with ``get_exploration_policy()``, then
``adapt_policy(policy, those_episodes)``, then episodes with the adapted policy. What the policy
observes is the task env passed through :meth:`MetaRLAlgorithm.wrap_env` (RL2 adds its
``RL2Env``; MAML sees the task env as it is).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Self

import gymnasium as gym
import numpy as np

from metabench.algos.run_envs import RunEnvs
from metabench.data import EpisodeBatch
from metabench.rng import isolated_global_rng


class Policy(abc.ABC):
    """Acts in one env, one step at a time."""

    def reset(self) -> None:  # noqa: B027 - stateless policies need nothing here
        """Called at the start of every episode. Recurrent policies that must keep their
        state across the episodes of a trial (RL2) leave it alone."""

    @abc.abstractmethod
    def get_action(self, observation: np.ndarray) -> np.ndarray:
        """Return the action for ``observation``."""


class PolicyBatch(abc.ABC):
    """Acts in ``n`` envs at once, one task per env: the batched meta-test's policy.

    Rows are envs. Only the rows passed to :meth:`get_actions` act (the others' envs are not
    stepped), so a recurrent row keeps its state until its env steps again.
    """

    def reset(self, rows: np.ndarray) -> None:  # noqa: B027 - stateless policies need nothing
        """An episode starts in the envs of ``rows`` (indices), as :meth:`Policy.reset`."""

    @abc.abstractmethod
    def get_actions(self, observations: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Actions ``(len(rows), *action_shape)`` for the observations ``(len(rows), ...)`` of
        the envs ``rows``."""


class PolicyList(PolicyBatch):
    """A :class:`PolicyBatch` of separate :class:`Policy` objects, one per row: what every
    algorithm's batched meta-test does unless it batches its forward passes itself."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        self.policies = list(policies)

    def reset(self, rows: np.ndarray) -> None:
        for row in rows:
            self.policies[row].reset()

    def get_actions(self, observations: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.stack(
            [
                np.asarray(self.policies[row].get_action(obs))
                for row, obs in zip(rows, observations, strict=True)
            ]
        )


def _unchanged(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
    return env


class MetaRLAlgorithm(abc.ABC):
    """Meta-train with :meth:`train`; meta-test with exploration, adaptation and evaluation."""

    steps_per_iteration: int
    """Environment steps one :meth:`train` iteration takes (0: the algorithm does not
    meta-train). Every algorithm sets it (a class attribute, or in ``__init__``): the harness
    turns a budget of environment steps into iterations with it, and refuses an algorithm that
    does not say."""

    initial_steps: int = 0
    """Environment steps taken once, before the first iteration (PEARL's initial collection).
    ``--steps`` buys iterations only, so these come on top of it; every step count a run
    records (``result.json``, the periodic meta-tests, TensorBoard) includes them, so that
    runs of different algorithms compare at the environment steps they really took."""

    @property
    def env_steps_taken(self) -> int | None:
        """The environment steps stepped so far, the initial collection included, for an
        algorithm whose episodes can end before the horizon where its budget counts each at the
        horizon (MAML's fixed episode counts, PEARL's whole episodes): the budget buys
        iterations, this says what they cost. ``None`` (the default): exactly
        ``initial_steps + iterations * steps_per_iteration``, or not counted (an agent saved
        before it was)."""
        return None

    uses_device: ClassVar[bool] = False
    """Whether :meth:`from_benchmark` puts networks on ``device`` (the torch algorithms); the
    others run on the CPU whatever ``--device`` says, and their runs record the CPU."""

    @classmethod
    def from_benchmark(
        cls, envs: RunEnvs, config: Any, *, log_dir: str | None = None, device: str = "cpu"
    ) -> Self:
        """The algorithm on a benchmark, as the harness builds it: every algorithm is built
        through this one signature.

        :param envs: the run's environments (:class:`~metabench.algos.run_envs.RunEnvs`): the
            benchmark, the run's seed, and the one place that builds the envs to step, on the
            run's cores (worker processes never change the numbers).
        :param config: the algorithm's config object (its :class:`Implementation`'s
            ``config``), resolved and recorded by the harness.
        :param log_dir: the run's TensorBoard folder (``None``: no logging).
        :param device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (:mod:`metabench.devices`); used
            where :attr:`uses_device`.

        The default calls the constructor that the torch algorithms share,
        ``cls(env, sampler, config, *, seed, env_kwargs, log_dir, device)``, on the benchmark's
        train env and task sampler, every env in this process; an algorithm that steps its
        envs otherwise (RL2, MAML) or is built otherwise overrides it.
        """
        return cls.on_train_envs(envs, config, envs.train_sampler(), log_dir=log_dir, device=device)

    @classmethod
    def on_train_envs(
        cls,
        envs: RunEnvs,
        config: Any,
        sampler: Any,
        *,
        log_dir: str | None,
        device: str,
        **vector_envs: Any,
    ) -> Self:
        """The torch algorithms' shared constructor on the run's train env and ``sampler``, with
        ``vector_envs``, the vector envs ``envs`` built for it (keywords of the constructor:
        RL2's ``venv``, MAML's ``vec_env``), closed if it fails: their worker processes would
        outlive it."""
        try:
            return cls(  # type: ignore[call-arg]
                envs.env_id,
                sampler,
                config,
                seed=envs.seed,
                env_kwargs=envs.train_env_kwargs(),
                log_dir=log_dir,
                device=device,
                **vector_envs,
            )
        except BaseException:
            for vector_env in vector_envs.values():
                vector_env.close()
            raise

    @abc.abstractmethod
    def train(self, n_iterations: int) -> dict[str, float]:
        """Run ``n_iterations`` meta-training iterations (continuing where the last call ended).

        :returns: numbers of the last iteration, each keyed ``metatrain/<name>``; the harness
            logs them to TensorBoard and records the last ones as ``result.json``'s
            ``metatrain``. An algorithm that does not meta-train returns ``{}``. Keys of the
            built-in algorithms: ``metatrain/average_return``, ``metatrain/success_rate`` and
            ``metatrain/return_episode_<k>`` (RL2-PPO and RL2-TRPO: over the episodes of the
            trials; RL2-TRPO adds its last step's ``metatrain/trpo_*``);
            ``metatrain/pre_update_return``, ``metatrain/post_update_return``,
            ``metatrain/trpo_*`` (``metatrain/adam_*`` with an Adam outer step),
            ``metatrain/time_*`` and ``metatrain/env_steps`` (MAML-TRPO, MAML-PPO, MAML-VPG);
            ``metatrain/average_return``, ``metatrain/success_rate``, ``metatrain/prior_return``
            and ``metatrain/posterior_return`` (training episodes by where z came from),
            ``metatrain/qf_loss``, ``vf_loss``, ``policy_loss``, ``kl_divergence``,
            ``z_variance`` and ``metatrain/env_steps`` (PEARL, its initial collection included).
        """

    @abc.abstractmethod
    def get_exploration_policy(self) -> Policy:
        """A fresh policy for collecting the exploration episodes of one task."""

    @abc.abstractmethod
    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        """A policy adapted to the task that ``exploration_episodes`` came from.

        ``exploration_policy`` produced those episodes; it may be reused (RL2 keeps its hidden
        state) and must not be used by the caller afterwards.
        """

    @property
    def deterministic_test(self) -> bool | None:
        """Whether the adapted policy acts with its action distribution's mode in the test
        episodes; recorded with every result, since it changes the numbers (Meta-World+'s
        evaluation takes the mode, garage's samples). ``None``: the algorithm does not say.

        The default reads the ``deterministic_eval`` (every meta-test episode) and
        ``deterministic_test`` (test episodes only) options of a ``config`` attribute, where
        the algorithm has them; algorithms without them override this.
        """
        config = getattr(self, "config", None)
        options = ("deterministic_eval", "deterministic_test")
        known = [bool(getattr(config, name)) for name in options if hasattr(config, name)]
        return any(known) if known else None

    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        """The env this algorithm's policies observe, built around a task env."""
        return env

    def env_wrapper(self) -> Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]:
        """:meth:`wrap_env` as a function that is pickled into worker processes (the batched
        meta-test builds its envs there). The default sends :meth:`wrap_env` itself, and the
        algorithm with it; algorithms that hold models or vector envs return a small function
        of their settings instead."""
        if type(self).wrap_env is MetaRLAlgorithm.wrap_env:
            return _unchanged
        return self.wrap_env

    # -- the batched meta-test -------------------------------------------------------------------
    def get_exploration_policies(self, n: int) -> PolicyBatch:
        """Exploration policies for ``n`` tasks at once (:meth:`get_exploration_policy` each,
        unless an algorithm batches them)."""
        return PolicyList([self.get_exploration_policy() for _ in range(n)])

    def adapt_policies(
        self, exploration_policies: PolicyBatch, exploration_episodes: Sequence[EpisodeBatch]
    ) -> PolicyBatch:
        """Each row adapted to its task's ``exploration_episodes`` (:meth:`adapt_policy` each,
        unless an algorithm batches them); ``exploration_policies`` came from
        :meth:`get_exploration_policies`."""
        if not isinstance(exploration_policies, PolicyList):
            raise TypeError(
                f"adapt_policies needs the PolicyList of get_exploration_policies(), got "
                f"{type(exploration_policies).__name__}"
            )
        return PolicyList(
            [
                self.adapt_policy(policy, episodes)
                for policy, episodes in zip(
                    exploration_policies.policies, exploration_episodes, strict=True
                )
            ]
        )

    @contextmanager
    def evaluation_streams(self, seed: int) -> Iterator[None]:
        """Inside the block, meta-test policies draw their randomness from streams seeded with
        ``seed``; afterwards every random state training uses is as it was before the block.

        A meta-test during training (``--eval-every``) runs inside it, so it cannot change what
        training does next. The default isolates torch's, NumPy's and Python's global
        generators; an algorithm with generators of its own for meta-test extends it.
        """
        with isolated_global_rng(seed):
            yield

    @contextmanager
    def _own_generator_streams(self, seed: int) -> Iterator[None]:
        """:meth:`evaluation_streams` for an algorithm whose meta-test policies draw from its own
        generator ``self._rng``: that generator is seeded from ``seed`` inside the block and
        restored afterwards, with the global ones."""
        saved = self._rng  # type: ignore[has-type]
        try:
            self._rng = np.random.default_rng(seed)
            with MetaRLAlgorithm.evaluation_streams(self, seed):
                yield
        finally:
            self._rng = saved

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps to continue training; algorithms that train override it."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - nothing to restore
        """Restore what :meth:`state_dict` returned."""

    def agent_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The part of a :meth:`state_dict` that meta-testing needs: the trained agent that a
        finished run keeps (``agent.pt``), a fraction of a checkpoint's size. Algorithms leave
        out what only training reads (optimiser state, replay buffers, critics) and keep their
        random states, which the run's final meta-test drew from. The default keeps it all."""
        return state

    def load_agent_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`agent_state` kept: the algorithm then meta-tests exactly as it
        would from the whole :meth:`state_dict`, but cannot go on training."""
        self.load_state_dict(state)

    @contextmanager
    def _eval_generator_streams(self, seed: int) -> Iterator[None]:
        """:meth:`evaluation_streams` for an algorithm whose meta-test draws come from its own
        torch generator ``self._eval_generator``: seeded from ``seed`` inside the block and
        restored afterwards, with the global ones."""
        generator = self._eval_generator  # type: ignore[attr-defined]
        saved = generator.get_state()
        try:
            generator.manual_seed(seed)
            with MetaRLAlgorithm.evaluation_streams(self, seed):
                yield
        finally:
            generator.set_state(saved)
