"""sb3-contrib's ``RecurrentPPO`` with garage's RL2 value baseline and maximum-entropy options.

garage's RL2-PPO (``garage/tf/algos/rl2.py``, ``_rl2npo.py``, ``npo.py``) computes its advantages
differently from sb3-contrib's ``RecurrentPPO``; :class:`RL2RecurrentPPO` can do either:

* ``value_baseline="critic"`` (sb3-contrib): a learned value function, trained with the PPO loss,
  GAE from its values, bootstrapped at time-limit ends.
* ``value_baseline="linear"`` (garage): no learned critic. Before each update a
  :class:`~metabench.algos.common.baseline.LinearFeatureBaseline` is fitted on the iteration's
  trials (each trial one path, so its time feature counts steps from the trial start) to their
  discounted returns, and GAE runs over each trial on its predictions with the value after the
  trial's last step taken as 0 (garage's ``compute_advantages`` pads the baselines with zeros:
  the trial end is terminal). ``RL2NPO.optimize_policy`` fits *before* predicting, so the
  advantages use the baseline fitted on the same data.
* ``entropy_method="regularized"`` (sb3-contrib, garage's other method): ``-ent_coef * mean H``
  in the loss.
* ``entropy_method="max"`` (garage's RL2 examples): ``ent_coef * H(pi(.|s_t))`` added to every
  step's reward before the returns and advantages are computed, and no entropy term in the loss
  (garage's ``stop_entropy_gradient=True``, which its ``'max'`` method requires).

With both at their first values the class is ``RecurrentPPO`` unchanged: nothing is recomputed
and no random number is drawn, so results are bit-identical.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.buffers import RecurrentRolloutBuffer
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import explained_variance, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv
from torch import nn

from metabench.algos.common.baseline import LinearFeatureBaseline
from metabench.algos.common.returns import discounted_returns, gae_advantages
from metabench.algos.rl2.chunked_update import check_chunk_settings, chunk_starts, chunked_train
from metabench.algos.rl2.parallel_chunked_update import parallel_chunked_train
from metabench.algos.rl2.parallel_update import parallel_train
from metabench.algos.rl2.update_context import UpdateContext, UpdateStats
from metabench.data import EpisodeBatch, StepType
from metabench.threads import torch_threads
from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv

__all__ = [
    "ENTROPY_METHODS",
    "LINEAR_BASELINE_FITS",
    "VALUE_BASELINES",
    "RL2RecurrentPPO",
    "linear_baseline_advantages",
    "trial_batch",
]

VALUE_BASELINES = ("critic", "linear")
"""``critic``: sb3-contrib's learned value function; ``linear``: garage's linear feature
baseline fitted over each whole trial."""

LINEAR_BASELINE_FITS = ("batch", "trial")
"""``batch``: one fit of the linear baseline on all trials of the iteration (garage); ``trial``:
one fit per trial (Meta-World+ at its paper commit)."""

ENTROPY_METHODS = ("regularized", "max")
"""``regularized``: entropy bonus in the loss; ``max``: entropy added to every step's reward."""


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """Raise ``ValueError`` naming the valid ``choices`` unless ``value`` is one of them."""
    if value not in choices:
        valid = ", ".join(repr(choice) for choice in choices)
        raise ValueError(f"{name} must be one of {valid}; got {value!r}")


def trial_batch(observations: np.ndarray, actions: np.ndarray, rewards: np.ndarray) -> EpisodeBatch:
    """The trials of a rollout buffer as an :class:`EpisodeBatch`, one trial per episode.

    :param observations: ``(T, n_envs, *obs_shape)``, one whole trial per sub-env (the buffer's
        layout before training flattens it).
    :param actions: ``(T, n_envs, *act_shape)``.
    :param rewards: ``(T, n_envs)``.
    :return: ``n_envs`` episodes of ``T`` steps, sub-env by sub-env; each trial ends
        ``TERMINAL`` (garage treats the trial end as terminal). ``last_observations`` repeats
        each trial's last observation (nothing here reads it).
    """
    length, n_envs = rewards.shape
    env_major = np.swapaxes(observations, 0, 1)
    step_types = np.full(length, StepType.MID, dtype=np.int8)
    step_types[0] = StepType.FIRST
    step_types[-1] = StepType.TERMINAL
    return EpisodeBatch(
        observations=env_major.reshape(n_envs * length, *observations.shape[2:]),
        last_observations=env_major[:, -1],
        actions=np.swapaxes(actions, 0, 1).reshape(n_envs * length, *actions.shape[2:]),
        rewards=np.swapaxes(rewards, 0, 1).reshape(-1),
        step_types=np.tile(step_types, n_envs),
        lengths=np.full(n_envs, length, dtype=np.int64),
    )


def linear_baseline_advantages(
    trials: EpisodeBatch,
    baseline: LinearFeatureBaseline,
    discount: float,
    gae_lambda: float,
    fit: str = "batch",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit ``baseline`` on ``trials`` and return GAE advantages from its predictions (garage).

    :param trials: whole trials, one per episode, of equal length (:func:`trial_batch`).
    :param baseline: refitted here to the discounted returns of ``trials``.
    :param fit: one of :data:`LINEAR_BASELINE_FITS`: ``"batch"`` fits once on all trials
        (garage), ``"trial"`` fits each trial on its own and predicts it with its own fit
        (Meta-World+'s ``LinearFeatureBaseline._fit_baseline`` at its paper commit).
    :return: ``(advantages, returns, values)``, each ``(N, T)`` float64: the advantages, the
        discounted returns the baseline was fitted to, and its predictions after the fit.
    """
    check_choice("fit", fit, LINEAR_BASELINE_FITS)
    valids = trials.valids
    returns = discounted_returns(trials.padded_rewards, valids, discount)
    if fit == "batch":
        baseline.fit(trials, returns[valids > 0])
        values = trials.padded(baseline.predict(trials))
    else:
        values = np.zeros_like(returns)
        for i, trial in enumerate(trials.split()):
            baseline.fit(trial, returns[i, : trial.n_steps])
            values[i, : trial.n_steps] = baseline.predict(trial)
    advantages = gae_advantages(trials.padded_rewards, values, valids, discount, gae_lambda)
    return advantages, returns, values


class RL2RecurrentPPO(RecurrentPPO):
    """``RecurrentPPO`` whose advantages can come from garage's RL2 components.

    Takes ``RecurrentPPO``'s arguments plus:

    :param value_baseline: one of :data:`VALUE_BASELINES`. With ``"linear"`` the policy's value
        head is set to zero and frozen (pass ``enable_critic_lstm=False`` in ``policy_kwargs``
        to skip the critic's recurrent pass too), so the value loss trains nothing and the
        time-limit bootstrap in ``collect_rollouts`` adds exactly ``gamma * 0`` to the rewards;
        ``vf_coef`` should be 0. The buffer's ``values`` and ``returns`` then hold the linear
        baseline's predictions and the discounted returns it was fitted to (so SB3's logged
        explained variance is garage's ``ExplainedVariance``; its ``train/value_loss`` then
        compares the returns with the zero head and means nothing).
    :param entropy_method: one of :data:`ENTROPY_METHODS`. With ``"max"``, pass ``ent_coef=0``
        (no entropy in the loss) and the coefficient as ``policy_ent_coeff``.
    :param policy_ent_coeff: garage's ``policy_ent_coeff``: the weight of the entropy added to
        the rewards with ``entropy_method="max"``; unused otherwise.
    :param chunk_length: ``None`` (sb3-contrib's update), or the length of the overlapping
        chunks Meta-World+'s RL2 update takes one gradient step on each, with truncated
        backpropagation (:mod:`~metabench.algos.rl2.chunked_update`); needs
        ``value_baseline="linear"``.
    :param chunk_overlap: steps each chunk shares with the next one.
    :param linear_baseline_fit: one of :data:`LINEAR_BASELINE_FITS`, with
        ``value_baseline="linear"``: one fit on all trials, or one per trial.

    With ``"max"`` the entropy of every step is computed once per iteration with the policy that
    collected the rollouts. garage evaluates it inside its loss graph, i.e. with the policy being
    optimised (its gradient stopped), so its later epochs see the slightly changed entropy. With
    a state-independent std that shifts every advantage by at most ``ent_coef * dH / (1 - gamma
    * lambda)``; Adam moves each log-std by roughly ``learning_rate`` per step at most, so on
    HalfCheetah (6 action dims, 10 full-batch steps at 1e-3) ``dH <= ~0.06`` and the shift is
    about 0.02 at most.

    ``"linear"`` needs exactly one whole trial per sub-env per iteration (``n_steps`` = trial
    length, trials starting at the first step), which is how ``RL2PPO`` collects; anything else
    raises ``ValueError``.
    """

    def __init__(
        self,
        *args: Any,
        value_baseline: str = "critic",
        entropy_method: str = "regularized",
        policy_ent_coeff: float = 0.0,
        chunk_length: int | None = None,
        chunk_overlap: int = 0,
        linear_baseline_fit: str = "batch",
        **kwargs: Any,
    ) -> None:
        check_choice("value_baseline", value_baseline, VALUE_BASELINES)
        check_choice("linear_baseline_fit", linear_baseline_fit, LINEAR_BASELINE_FITS)
        self.linear_baseline_fit = linear_baseline_fit
        check_choice("entropy_method", entropy_method, ENTROPY_METHODS)
        if chunk_length is not None:
            check_chunk_settings(chunk_length, chunk_overlap, value_baseline)
        self.chunk_length = chunk_length
        self.chunk_overlap = chunk_overlap
        # set before RecurrentPPO.__init__, which calls _setup_model
        self.value_baseline = value_baseline
        self.entropy_method = entropy_method
        self.policy_ent_coeff = float(policy_ent_coeff)
        self.linear_baseline = LinearFeatureBaseline() if value_baseline == "linear" else None
        self.rollout_threads: int | None = None
        """torch threads while collecting rollouts (``None``: as set); the update uses all."""
        self.update_venv: ShardedSubprocVecEnv | None = None
        """Whose worker processes share the full-batch update's passes (``None``: this process
        alone; :mod:`~metabench.algos.rl2.parallel_update`)."""
        super().__init__(*args, **kwargs)
        if chunk_length is not None and not chunk_starts(self.n_steps, chunk_length, chunk_overlap):
            raise ValueError(
                f"chunk_length {chunk_length} is longer than a trial ({self.n_steps} steps): set "
                f"it to at most {self.n_steps}, or to null for whole-trial updates"
            )

    def _setup_model(self) -> None:
        super()._setup_model()
        if self.value_baseline == "linear":
            # No learned critic: the value head outputs exactly 0 and nothing trains it.
            policy = self._recurrent_policy()
            critic_parts: list[nn.Module] = [policy.value_net]
            if policy.critic is not None:
                critic_parts.append(policy.critic)
            if policy.lstm_critic is not None:
                critic_parts.append(policy.lstm_critic)
            with th.no_grad():
                for parameter in policy.value_net.parameters():
                    parameter.zero_()
            for part in critic_parts:
                part.requires_grad_(False)

    def train(self) -> None:
        """sb3-contrib's update, its passes split over ``update_venv``'s processes, or the
        chunked update (``chunk_length``)."""
        buffer = self.rollout_buffer
        venv = self.update_venv
        if venv is not None and venv.processes == 1:
            venv = None
        if self.chunk_length is None and (
            venv is None
            or (self.batch_size or 0) < buffer.buffer_size * buffer.n_envs
            or type(buffer) is not RecurrentRolloutBuffer
        ):
            super().train()
            return
        context = self.update_context()
        if self.chunk_length is None:
            assert venv is not None  # the return above leaves only the split whole-trial update
            stats = parallel_train(context, venv, self.policy_constructor())
        elif venv is not None:
            stats = parallel_chunked_train(
                context, self.chunk_length, self.chunk_overlap, venv, self.policy_constructor()
            )
        else:
            stats = chunked_train(context, self.chunk_length, self.chunk_overlap)
        self._n_updates += stats.epochs
        self._record_update(stats, context)

    def policy_constructor(self) -> dict[str, Any]:
        """What ``RecurrentPPO._setup_model`` builds the policy with, but the learning rate
        schedule: how the split updates' worker processes build their copies."""
        return {
            "observation_space": self.observation_space,
            "action_space": self.action_space,
            "use_sde": self.use_sde,
            **self.policy_kwargs,
        }

    def update_context(self) -> UpdateContext:
        """Set this update's learning rate and evaluate the clip ranges, as
        ``RecurrentPPO.train`` does first, for a strategy of :meth:`train`."""
        policy = self._recurrent_policy()
        policy.set_training_mode(True)
        self._update_learning_rate(policy.optimizer)
        progress = self._current_progress_remaining
        assert callable(self.clip_range)
        clip_range_vf = None
        if self.clip_range_vf is not None and self.chunk_length is None:  # no critic when chunked
            assert callable(self.clip_range_vf)
            clip_range_vf = float(self.clip_range_vf(progress))
        return UpdateContext(
            policy=policy,
            buffer=self._recurrent_buffer(),
            device=self.device,
            n_epochs=self.n_epochs,
            batch_size=self.batch_size,
            clip_range=float(self.clip_range(progress)),
            clip_range_vf=clip_range_vf,
            ent_coef=float(self.ent_coef),
            vf_coef=float(self.vf_coef),
            max_grad_norm=float(self.max_grad_norm),
            normalize_advantage=self.normalize_advantage,
            target_kl=self.target_kl,
        )

    def _record_update(self, stats: UpdateStats, context: UpdateContext) -> None:
        """Log an update's numbers under the keys ``RecurrentPPO.train`` logs them."""
        buffer = self.rollout_buffer
        self.logger.record("train/entropy_loss", stats.entropy)
        self.logger.record("train/policy_gradient_loss", stats.policy)
        self.logger.record("train/value_loss", stats.value)
        self.logger.record("train/approx_kl", stats.approx_kl)
        self.logger.record("train/clip_fraction", stats.clip_fraction)
        self.logger.record("train/loss", stats.loss)
        self.logger.record(
            "train/explained_variance",
            explained_variance(buffer.values.flatten(), buffer.returns.flatten()),
        )
        if hasattr(context.policy, "log_std"):
            self.logger.record("train/std", th.exp(context.policy.log_std).mean().item())
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", context.clip_range)
        if context.clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", context.clip_range_vf)

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        """``RecurrentPPO.collect_rollouts``, then the configured advantages replace its own."""
        with torch_threads(self.rollout_threads):
            complete = super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps)
        if not complete or (
            self.value_baseline == "critic" and self.entropy_method == "regularized"
        ):
            return complete
        if self.entropy_method == "max":
            rollout_buffer.rewards += self.policy_ent_coeff * self._rollout_entropies()
        if self.value_baseline == "linear":
            self._linear_baseline_advantages()
        else:
            # Same call as at the end of collect_rollouts, now on the augmented rewards.
            assert self._last_lstm_states is not None and self._last_obs is not None
            with th.no_grad():
                last_values = self.policy.predict_values(
                    obs_as_tensor(self._last_obs, self.device),
                    self._last_lstm_states.vf,
                    th.tensor(self._last_episode_starts, dtype=th.float32, device=self.device),
                )
            rollout_buffer.compute_returns_and_advantage(
                last_values=last_values,
                dones=np.asarray(self._last_episode_starts),
            )
        return complete

    def _rollout_entropies(self) -> np.ndarray:
        """``(n_steps, n_envs)`` entropy of the policy at every step of the rollout buffer.

        One pass of the actor over each sub-env's whole rollout, from the recurrent state the
        buffer stored before its first step, resetting at the stored episode starts.
        """
        n_steps, n_envs = self._recurrent_buffer().rewards.shape
        observations, starts, (states, _) = self._trial_inputs()
        with th.no_grad():
            distribution, _ = self._recurrent_policy().get_distribution(
                observations, states, starts
            )
            entropy = distribution.entropy()
        assert entropy is not None
        return entropy.cpu().numpy().reshape(n_envs, n_steps).T

    def _trial_inputs(
        self,
    ) -> tuple[
        th.Tensor, th.Tensor, tuple[tuple[th.Tensor, th.Tensor], tuple[th.Tensor, th.Tensor]]
    ]:
        """The rollout buffer (before training flattens it) as input to whole-sequence passes.

        :return: observations ``(n_envs * n_steps, *obs_shape)`` sub-env after sub-env, their
            episode-start flags ``(n_envs * n_steps,)``, and the actor's and the critic's
            recurrent states ``(h, c)`` before each sub-env's first step.
        """
        buffer = self._recurrent_buffer()
        n_steps, n_envs = buffer.rewards.shape
        observations = np.swapaxes(buffer.observations, 0, 1).reshape(
            n_envs * n_steps, *buffer.observations.shape[2:]
        )
        starts = np.swapaxes(buffer.episode_starts, 0, 1).reshape(-1)
        pi = (
            th.as_tensor(buffer.hidden_states_pi[0], device=self.device),
            th.as_tensor(buffer.cell_states_pi[0], device=self.device),
        )
        vf = (
            th.as_tensor(buffer.hidden_states_vf[0], device=self.device),
            th.as_tensor(buffer.cell_states_vf[0], device=self.device),
        )
        return (
            th.as_tensor(observations, device=self.device),
            th.as_tensor(starts, dtype=th.float32, device=self.device),
            (pi, vf),
        )

    def _recurrent_policy(self) -> RecurrentActorCriticPolicy:
        assert isinstance(self.policy, RecurrentActorCriticPolicy)
        return self.policy

    def _recurrent_buffer(self) -> RecurrentRolloutBuffer:
        assert isinstance(self.rollout_buffer, RecurrentRolloutBuffer)
        return self.rollout_buffer

    def _linear_baseline_advantages(self) -> None:
        """Replace the buffer's advantages, returns and values with the linear baseline's."""
        buffer = self.rollout_buffer
        starts = buffer.episode_starts
        if not (np.all(starts[0] == 1.0) and np.all(starts[1:] == 0.0)) or not np.all(
            self._last_episode_starts
        ):
            raise ValueError(
                "value_baseline='linear' needs one whole trial per sub-env per iteration: set "
                "n_steps to the trial length and start collecting at a trial start"
            )
        assert self.linear_baseline is not None
        trials = trial_batch(buffer.observations, buffer.actions, buffer.rewards)
        advantages, returns, values = linear_baseline_advantages(
            trials, self.linear_baseline, self.gamma, self.gae_lambda, self.linear_baseline_fit
        )
        buffer.advantages = advantages.T.astype(np.float32)
        buffer.returns = returns.T.astype(np.float32)
        buffer.values = values.T.astype(np.float32)
