"""PEARL (Rakelly et al. 2019): off-policy meta-RL with a probabilistic task variable.

A soft actor-critic whose networks read ``[observation, z]``, and an encoder that infers
``q(z | c)`` from a context ``c`` of transitions of one task (:mod:`.encoder`). Each iteration
follows oyster's ``MetaRLAlgorithm.train`` (``rlkit/core/rl_algorithm.py``, the code of the
paper's numbers; garage's ``torch/algos/pearl.py`` is a port of it):

1. before the first iteration, ``num_initial_steps`` per training task with ``z`` from the prior;
2. for ``num_tasks_sample`` tasks drawn with replacement: empty the task's encoder buffer, then
   collect ``num_steps_prior`` steps with ``z`` from the prior and ``num_steps_posterior`` with
   ``z`` from the posterior (both into the RL and encoder buffers), and
   ``num_extra_rl_steps_posterior`` with ``z`` from the posterior into the RL buffer only. A
   posterior phase starts from the prior and infers the posterior after each episode from
   ``embedding_batch_size`` transitions of the encoder buffer; ``z`` is redrawn every episode;
3. ``num_train_steps_per_itr`` gradient steps, each on ``meta_batch_size`` tasks drawn with
   replacement: a context from each task's encoder buffer, a batch from its RL buffer.

Every draw comes from the algorithm's own generators (NumPy for tasks, buffer rows and env
seeds; torch, on the CPU, for ``z`` and actions), which a checkpoint keeps with the networks,
the optimisers and the buffers: a resumed run continues bit for bit. Checkpoint size:
:mod:`.buffers`.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.utils import polyak_update

from metabench.algos.base import MetaRLAlgorithm, Policy, PolicyBatch
from metabench.algos.common.sb3 import rescale_actions
from metabench.algos.implementation import Implementation
from metabench.algos.pearl.buffers import TaskReplayBuffer, Transitions
from metabench.algos.pearl.config import PEARLConfig
from metabench.algos.pearl.encoder import (
    ContextEncoder,
    context_width,
    kl_from_prior,
    sample_latent,
)
from metabench.algos.pearl.losses import policy_loss, q_loss, q_target, v_loss
from metabench.algos.pearl.networks import (
    make_actor,
    make_critic,
    make_value_function,
    sample_actions,
)
from metabench.algos.pearl.policy import ExplorationPolicies, RewardInObservation, SinglePolicy
from metabench.data import EpisodeBatch
from metabench.devices import resolve_device, to_cpu
from metabench.registration import make_task_env
from metabench.rng import (
    ALGORITHM_EVALUATION_TORCH,
    ALGORITHM_NUMPY,
    ALGORITHM_TORCH,
    PEARL_TRAIN_TASKS,
)
from metabench.tasks.base import ListTaskSampler, SetTaskSampler, Task, TaskSampler
from metabench.threads import torch_threads
from metabench.validation import ConfigError, recorded_config

__all__ = ["PEARL", "PEARL_IMPLEMENTATION", "pearl_env"]

TaskIndices = Sequence[int] | np.ndarray
"""Indices into the training tasks (a list, or an array of ints)."""
NETWORKS = ("encoder", "policy", "critic", "value", "value_target")
OPTIMIZERS = ("encoder", "policy", "critic", "value")
AGENT_NETWORKS = ("encoder", "policy")
"""The networks a meta-test uses: the critics and value networks only train the policy."""
TRAINING_NETWORKS = tuple(name for name in NETWORKS if name not in AGENT_NETWORKS)
AGENT_LEAVES_OUT = ("optimizers", "rl_buffers", "encoder_buffers")


def pearl_env(env: gym.Env[Any, Any], next_observation: bool = False) -> gym.Env[Any, Any]:
    """What PEARL's meta-test policies observe: actions presented as [-1, 1] (the squashed
    Gaussian's range) and each step's reward appended to the observation, with the observation
    it reached where the context holds it
    (:class:`~metabench.algos.pearl.policy.RewardInObservation`)."""
    return RewardInObservation(rescale_actions(env), next_observation)


def critic_reward(info: dict[str, Any], key: str) -> float:
    """``info[key]``, the reward the critic trains on (``config.critic_reward``); a
    :class:`ConfigError` naming the keys the env gives where it has none."""
    if key not in info:
        raise ConfigError(
            f"critic_reward={key!r}: the task env's step info has no {key!r} (it has: "
            f"{', '.join(sorted(info)) or 'nothing'}); set critic_reward to one of them, or to "
            f"'' to train the critic on the env's reward"
        )
    return float(info[key])


def episodes_for(steps: int, horizon: int) -> int:
    """Episodes a phase of ``steps`` env steps collects when every episode runs to
    ``horizon``: whole episodes until at least ``steps`` (oyster's ``collect_data``)."""
    return math.ceil(steps / horizon)


class PEARL(MetaRLAlgorithm):
    """PEARL on a task env (see the module doc).

    :param env: a task env id or a task env factory; its action space must be a bounded Box.
    :param sampler: where the ``n_train_tasks`` training tasks are drawn from (once);
        ``None``: the task env's own distribution. A :class:`ListTaskSampler` with replacement
        of exactly ``n_train_tasks`` tasks (a ``[split] kind = "list"`` benchmark's, oyster's
        protocol) gives them all, in its order, as oyster trains on ``tasks[:n_train_tasks]``
        (a draw would repeat some and leave others out).
    :param config: hyperparameters (``None``: :class:`PEARLConfig`'s defaults).
    :param seed: seeds the training tasks, the networks and every draw.
    :param env_kwargs: passed to the task env.
    :param log_dir: unused (PEARL logs through the harness).
    :param device: where the networks train and act (``"auto"``, ``"cpu"``, ``"cuda"``); the
        buffers and the random draws stay on the CPU.

    Example::

        >>> from metabench.tasks.toy.envs import PointGoalEnv
        >>> config = PEARLConfig(n_train_tasks=2, num_initial_steps=20, num_tasks_sample=1,
        ...                      num_steps_prior=20, num_extra_rl_steps_posterior=20)
        >>> algo = PEARL(PointGoalEnv, config=config)
        >>> algo.steps_per_iteration  # one task, one prior and one posterior episode of 20 steps
        40
    """

    uses_device = True

    def __init__(
        self,
        env: str | Callable[..., gym.Env[Any, Any]],
        sampler: TaskSampler | None = None,
        config: PEARLConfig | None = None,
        *,
        seed: int = 0,
        env_kwargs: dict[str, Any] | None = None,
        log_dir: str | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.config = config = config or PEARLConfig()
        self.device = resolve_device(device)
        env_kwargs = dict(env_kwargs or {})
        task_env: Any = make_task_env(env, **env_kwargs)
        self.env = rescale_actions(task_env)
        observation_space, action_space = self.env.observation_space, self.env.action_space
        if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(f"PEARL needs a flat Box observation, got {observation_space}")
        if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
            raise ValueError(
                f"PEARL's policy is a squashed Gaussian: it needs a bounded Box action space, "
                f"got {action_space}"
            )
        horizon = getattr(task_env, "horizon", None)
        if not isinstance(horizon, int) or horizon < 1:
            raise ValueError(f"PEARL needs a task env with a horizon, got {horizon!r}")
        self.horizon = horizon
        self.obs_dim = int(observation_space.shape[0])
        self.action_dim = int(action_space.shape[0])

        self._rng = ALGORITHM_NUMPY.generator(seed)
        self._generator = torch.Generator().manual_seed(ALGORITHM_TORCH.seed(seed))
        self._eval_generator = torch.Generator().manual_seed(ALGORITHM_EVALUATION_TORCH.seed(seed))
        if sampler is None:
            sampler = SetTaskSampler(task_env.sample_tasks)
        if (
            isinstance(sampler, ListTaskSampler)
            and sampler.replace
            and len(sampler.tasks) == config.n_train_tasks
        ):
            self.train_tasks: list[Task] = list(sampler.tasks)
        else:
            self.train_tasks = sampler.sample(
                config.n_train_tasks, PEARL_TRAIN_TASKS.generator(seed)
            )

        with torch.random.fork_rng(devices=[]):  # seeded init without touching global state
            torch.manual_seed(int(seed))
            self.encoder = ContextEncoder(
                context_width(self.obs_dim, self.action_dim, config.use_next_obs_in_context),
                config.latent_size,
                config.encoder_hidden_sizes,
            ).to(self.device)
            sizes = (self.obs_dim, config.latent_size)
            self.policy = make_actor(*sizes, self.action_dim, config.hidden_sizes).to(self.device)
            self.critic = make_critic(*sizes, self.action_dim, config.hidden_sizes).to(self.device)
            self.value = make_value_function(*sizes, config.hidden_sizes).to(self.device)
        self.value_target = copy.deepcopy(self.value)
        self.value_target.requires_grad_(False)
        self.optimizers = {
            "encoder": torch.optim.Adam(self.encoder.parameters(), lr=config.context_lr),
            "policy": torch.optim.Adam(self.policy.parameters(), lr=config.policy_lr),
            # one Adam over both Q-functions: the same steps as oyster's one per Q-function
            "critic": torch.optim.Adam(self.critic.parameters(), lr=config.qf_lr),
            "value": torch.optim.Adam(self.value.parameters(), lr=config.vf_lr),
        }

        n_tasks = config.n_train_tasks
        self.rl_buffers = [
            TaskReplayBuffer(config.replay_buffer_size, self.obs_dim, action_space)
            for _ in range(n_tasks)
        ]
        self.encoder_buffers = [
            TaskReplayBuffer(self.encoder_buffer_capacity, self.obs_dim, action_space)
            for _ in range(n_tasks)
        ]
        per_task = sum(
            episodes_for(steps, horizon)
            for steps in (
                config.num_steps_prior,
                config.num_steps_posterior,
                config.num_extra_rl_steps_posterior,
            )
        )
        self.steps_per_iteration = config.num_tasks_sample * per_task * horizon
        self.initial_steps = n_tasks * episodes_for(config.num_initial_steps, horizon) * horizon
        """Env steps of the initial collection, before the first iteration's own (not in
        ``steps_per_iteration``, so not bought by ``--steps``; every recorded count has them)."""
        self.iterations = 0
        self.env_steps = 0
        """Env steps of meta-training so far, the initial collection included."""

    @property
    def env_steps_taken(self) -> int | None:
        """:attr:`env_steps`: each phase collects whole episodes until it has its step count,
        where ``steps_per_iteration`` counts those episodes at the horizon."""
        return self.env_steps

    @property
    def encoder_buffer_capacity(self) -> int:
        """The most one collection round puts in a task's encoder buffer: the phases collect
        whole episodes until they reach their step count, so each overshoots by less than an
        episode."""
        config, horizon = self.config, self.horizon
        prior, posterior = config.num_steps_prior, config.num_steps_posterior
        phases = (prior > 0) + (posterior > 0)
        largest = max(config.num_initial_steps + horizon, prior + posterior + phases * horizon)
        return min(config.replay_buffer_size, largest)

    # -- data collection -------------------------------------------------------------------------
    def _prior_sample(self) -> torch.Tensor:
        prior = torch.zeros(1, self.config.latent_size, device=self.device)
        return sample_latent(prior, torch.ones_like(prior), self._generator)

    def _run_episode(
        self, task: Task, z: torch.Tensor
    ) -> tuple[Transitions, np.ndarray, float, bool]:
        """One episode of ``task`` with actions sampled at ``z`` ``(1, latent_size)``; its
        transitions, the rewards its critic trains on (the transitions' own, or with
        ``config.critic_reward`` each step's ``info[critic_reward]``), its return and whether
        any step succeeded."""
        seed = int(self._rng.integers(2**31 - 1))
        observation, _ = self.env.reset(seed=seed, options={"task": task})
        steps: list[tuple[np.ndarray, np.ndarray, float, np.ndarray, bool]] = []
        critic_key = self.config.critic_reward
        critic_rewards: list[float] = []
        success = False
        while True:
            state = np.asarray(observation, dtype=np.float32)
            with torch.no_grad():
                inputs = torch.cat([torch.as_tensor(state[None], device=self.device), z], dim=1)
                action = sample_actions(self.policy, inputs, self._generator).actions[0]
            action_array = action.cpu().numpy()
            observation, reward, terminated, truncated, info = self.env.step(action_array)
            success = success or bool(info.get("success", False))
            if critic_key:
                critic_rewards.append(float(critic_reward(info, critic_key)))
            next_state = np.asarray(observation, dtype=np.float32)
            steps.append((state, action_array, float(reward), next_state, bool(terminated)))
            if terminated or truncated:
                break
        states, actions, rewards, next_states, dones = zip(*steps, strict=True)
        batch = Transitions(
            np.stack(states),
            np.stack(actions),
            np.asarray(rewards, dtype=np.float32),
            np.stack(next_states),
            np.asarray(dones, dtype=np.float32),
        )
        critic = np.asarray(critic_rewards, dtype=np.float32) if critic_key else batch.rewards
        return batch, critic, float(np.sum(rewards)), success

    def _collect(
        self, task_index: int, n_steps: int, posterior: bool, to_encoder: bool, record: _Record
    ) -> None:
        """Whole episodes of training task ``task_index`` until at least ``n_steps`` steps; ``z``
        from the prior, or (``posterior``) from the posterior of the task's encoder buffer after
        the first episode (oyster's ``collect_data``)."""
        task = self.train_tasks[task_index]
        z = self._prior_sample()
        collected = 0
        from_posterior = False
        while collected < n_steps:
            batch, critic_rewards, episode_return, success = self._run_episode(task, z)
            record.episode(episode_return, success, from_posterior)
            observations, actions, _, next_observations, dones = batch
            self.rl_buffers[task_index].add_transitions(
                Transitions(observations, actions, critic_rewards, next_observations, dones)
            )
            if to_encoder:
                self.encoder_buffers[task_index].add_transitions(batch)
            collected += len(batch)
            self.env_steps += len(batch)
            if posterior:
                with torch.no_grad():
                    mean, variance = self.encoder(self._context([task_index]))
                z = sample_latent(mean, variance, self._generator)
                from_posterior = True
            else:
                z = self._prior_sample()

    def _context(self, task_indices: TaskIndices) -> torch.Tensor:
        """``embedding_batch_size`` transitions ``[observation, action, reward]`` (and the next
        observation with ``use_next_obs_in_context``) of each task's encoder buffer,
        ``(tasks, embedding_batch_size, width)``."""
        rows = []
        for index in task_indices:
            batch = self.encoder_buffers[index].sample_transitions(
                self.config.embedding_batch_size, self._rng
            )
            parts = [batch.observations, batch.actions, batch.rewards[:, None]]
            if self.config.use_next_obs_in_context:
                parts.append(batch.next_observations)
            rows.append(np.concatenate(parts, axis=1))
        return torch.as_tensor(np.stack(rows), device=self.device)

    def _rl_batch(self, task_indices: TaskIndices) -> Transitions:
        """``batch_size`` transitions of each task's RL buffer, tasks one after another."""
        batches = [
            self.rl_buffers[index].sample_transitions(self.config.batch_size, self._rng)
            for index in task_indices
        ]
        return Transitions(*(np.concatenate(parts) for parts in zip(*batches, strict=True)))

    # -- training --------------------------------------------------------------------------------
    def train(self, n_iterations: int) -> dict[str, float]:
        """``n_iterations`` iterations of collection and gradient steps (module doc); numbers of
        the last one."""
        if n_iterations < 1:
            raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
        stats: dict[str, float] = {}
        with torch_threads(self.config.update_threads):
            for _ in range(n_iterations):
                stats = self._iteration()
        return stats

    def _iteration(self) -> dict[str, float]:
        config = self.config
        record = _Record()
        if self.iterations == 0:  # not in this iteration's numbers
            for index in range(config.n_train_tasks):
                self._collect(index, config.num_initial_steps, False, True, _Record())
        for _ in range(config.num_tasks_sample):
            index = int(self._rng.integers(config.n_train_tasks))
            self.encoder_buffers[index].clear()
            if config.num_steps_prior > 0:
                self._collect(index, config.num_steps_prior, False, True, record)
            if config.num_steps_posterior > 0:
                self._collect(index, config.num_steps_posterior, True, True, record)
            if config.num_extra_rl_steps_posterior > 0:
                self._collect(index, config.num_extra_rl_steps_posterior, True, False, record)
        losses: dict[str, float] = {}
        for step in range(config.num_train_steps_per_itr):
            indices = self._rng.integers(config.n_train_tasks, size=config.meta_batch_size)
            losses = self.gradient_step(indices, record=step == config.num_train_steps_per_itr - 1)
        self.iterations += 1
        return {
            **record.summary(),
            **{f"metatrain/{name}": value for name, value in losses.items()},
            "metatrain/env_steps": float(self.env_steps),
        }

    def gradient_step(self, task_indices: TaskIndices, record: bool = False) -> dict[str, float]:
        """One update of the encoder, both Q-functions, V (and its target) and the policy on
        the tasks ``task_indices`` (oyster's ``_take_step``); the losses if ``record``."""
        config, device = self.config, self.device
        context = self._context(task_indices)
        batch = self._rl_batch(task_indices)
        observations, actions, rewards, next_observations, dones = (
            torch.as_tensor(array, device=device) for array in batch
        )
        rewards, dones = rewards[:, None], dones[:, None]

        means, variances = self.encoder(context)
        z = sample_latent(means, variances, self._generator)
        task_z = z.repeat_interleave(config.batch_size, dim=0)
        inputs = torch.cat([observations, task_z.detach()], dim=1)
        new = sample_actions(self.policy, inputs, self._generator)

        # the encoder learns from the KL term and the Q-functions' loss only
        q_values = self.critic(torch.cat([observations, task_z], dim=1), actions)
        values = self.value(inputs)
        with torch.no_grad():
            next_values = self.value_target(torch.cat([next_observations, task_z], dim=1))
        self.optimizers["encoder"].zero_grad()
        kl = kl_from_prior(means, variances)
        (config.kl_lambda * kl).backward(retain_graph=True)
        self.optimizers["critic"].zero_grad()
        target = q_target(rewards, dones, next_values, config.reward_scale, config.discount)
        critic_loss = q_loss(q_values, target)
        critic_loss.backward()
        self.optimizers["critic"].step()
        self.optimizers["encoder"].step()

        # V and the policy against the Q-functions just updated, as oyster
        min_q = torch.min(*self.critic(inputs, new.actions))
        value_loss = v_loss(values, min_q, new.log_prob)
        self.optimizers["value"].zero_grad()
        value_loss.backward()
        self.optimizers["value"].step()
        polyak_update(
            self.value.parameters(), self.value_target.parameters(), config.soft_target_tau
        )

        actor_loss = policy_loss(
            new.log_prob,
            min_q,
            new.mean,
            new.log_std,
            config.policy_mean_reg_weight,
            config.policy_std_reg_weight,
        )
        self.optimizers["policy"].zero_grad()
        # the policy's gradients only: the Q-functions' own would be thrown away at their next
        # zero_grad (oyster's backward computes them), a tenth of the step's matrix products
        actor_loss.backward(inputs=list(self.policy.parameters()))
        self.optimizers["policy"].step()
        if not record:
            return {}
        return {
            "qf_loss": float(critic_loss.detach()),
            "vf_loss": float(value_loss.detach()),
            "policy_loss": float(actor_loss.detach()),
            "kl_divergence": float(kl.detach()),
            "z_variance": float(variances.detach().mean()),
        }

    # -- meta-test -------------------------------------------------------------------------------
    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        return self.env_wrapper()(env)

    def env_wrapper(self) -> Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]:
        return functools.partial(pearl_env, next_observation=self.config.use_next_obs_in_context)

    def get_exploration_policies(self, n: int) -> PolicyBatch:
        """``n`` rows exploring with posterior sampling (:mod:`.policy`)."""
        return ExplorationPolicies(
            self.policy,
            self.encoder,
            self.obs_dim,
            n,
            self._eval_generator,
            self.config.deterministic_eval,
            self.config.exploration_prior_episodes,
            self.config.use_next_obs_in_context,
        )

    def get_exploration_policy(self) -> Policy:
        policies = self.get_exploration_policies(1)
        assert isinstance(policies, ExplorationPolicies)
        return SinglePolicy(policies)

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        """The policy with ``z`` drawn from the posterior of ``exploration_episodes`` alone
        (not of the replay buffers, garage PR #1374's bug), afresh in every test episode."""
        if not isinstance(exploration_policy, SinglePolicy) or not isinstance(
            exploration_policy.policies, ExplorationPolicies
        ):
            raise TypeError("adapt_policy needs the policy returned by get_exploration_policy()")
        return SinglePolicy(exploration_policy.policies.adapted([exploration_episodes]))

    def adapt_policies(
        self, exploration_policies: PolicyBatch, exploration_episodes: Sequence[EpisodeBatch]
    ) -> PolicyBatch:
        """As :meth:`adapt_policy`, each row on its own task's episodes."""
        if not isinstance(exploration_policies, ExplorationPolicies):
            raise TypeError("adapt_policies needs the batch returned by get_exploration_policies()")
        return exploration_policies.adapted(list(exploration_episodes))

    # meta-test draws (action noise; PEARL: z too) from ``_eval_generator``, seeded per meta-test
    evaluation_streams = MetaRLAlgorithm._eval_generator_streams

    # -- checkpoints -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks, optimisers, buffers, counters and every random state (CPU tensors and
        plain values), for an exact resume. Its size is mostly the buffers' (:mod:`.buffers`)."""
        networks = {name: getattr(self, name).state_dict() for name in NETWORKS}
        optimizers = {name: self.optimizers[name].state_dict() for name in OPTIMIZERS}
        return {
            "config": recorded_config(self.config),
            "iterations": self.iterations,
            "env_steps": self.env_steps,
            "networks": to_cpu(copy.deepcopy(networks)),
            "optimizers": to_cpu(copy.deepcopy(optimizers)),
            "rl_buffers": [buffer.state_dict() for buffer in self.rl_buffers],
            "encoder_buffers": [buffer.state_dict() for buffer in self.encoder_buffers],
            "numpy_rng": self._rng.bit_generator.state,
            "torch_rng": self._generator.get_state(),
            "eval_torch_rng": self._eval_generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        :raises ValueError: a checkpoint of another configuration.
        """
        self.load_agent_state(state)
        for name in TRAINING_NETWORKS:
            getattr(self, name).load_state_dict(state["networks"][name])
        for name in OPTIMIZERS:
            self.optimizers[name].load_state_dict(state["optimizers"][name])
        for buffers, key in (
            (self.rl_buffers, "rl_buffers"),
            (self.encoder_buffers, "encoder_buffers"),
        ):
            for buffer, saved in zip(buffers, state[key], strict=True):
                buffer.load_state_dict(saved)

    def agent_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The encoder and the policy (:data:`AGENT_NETWORKS`), the counters and the random
        states: no critics, optimisers or buffers, which hold most of a checkpoint."""
        kept = {key: value for key, value in state.items() if key not in AGENT_LEAVES_OUT}
        return {**kept, "networks": {name: state["networks"][name] for name in AGENT_NETWORKS}}

    def load_agent_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`agent_state` (or that part of a whole :meth:`state_dict`).

        :raises ValueError: a checkpoint of another configuration.
        """
        if state.get("config") != recorded_config(self.config):
            raise ValueError("checkpoint was written with a different PEARLConfig")
        for name in AGENT_NETWORKS:
            getattr(self, name).load_state_dict(state["networks"][name])
        self.iterations = int(state["iterations"])
        self.env_steps = int(state["env_steps"])
        self._rng.bit_generator.state = state["numpy_rng"]
        self._generator.set_state(state["torch_rng"])
        self._eval_generator.set_state(state["eval_torch_rng"])


class _Record:
    """Returns and successes of one iteration's training episodes, by where ``z`` came from:
    the prior (the prior phase, and the first episode of each posterior phase) or a posterior."""

    def __init__(self) -> None:
        self.returns: dict[bool, list[float]] = {False: [], True: []}
        self.successes: list[bool] = []

    def episode(self, episode_return: float, success: bool, from_posterior: bool) -> None:
        self.returns[from_posterior].append(episode_return)
        self.successes.append(success)

    def summary(self) -> dict[str, float]:
        every = self.returns[False] + self.returns[True]
        stats = {
            "metatrain/average_return": float(np.mean(every)) if every else math.nan,
            "metatrain/success_rate": float(np.mean(self.successes)) if every else math.nan,
        }
        for from_posterior, name in ((False, "prior"), (True, "posterior")):
            values = self.returns[from_posterior]
            if values:  # none from a posterior when each posterior phase is one episode long
                stats[f"metatrain/{name}_return"] = float(np.mean(values))
        return stats


# -- the entry point of baselines/pearl.toml -------------------------------------------------------
PEARL_IMPLEMENTATION = Implementation(PEARL, PEARLConfig)
"""PEARL on a benchmark: ``entry_point = "metabench.algos.pearl:PEARL_IMPLEMENTATION"``."""
