"""RL2's recurrent policy updated by TRPO instead of PPO (garage's ``RL2TRPO``).

:class:`RL2RecurrentTRPO` keeps everything of
:class:`~metabench.algos.rl2.recurrent_ppo.RL2RecurrentPPO` up to the advantages (one whole
trial per sub-env per iteration, garage's linear baseline or a learned critic, the ``"max"``
entropy bonus) and replaces PPO's epochs with one
:func:`~metabench.algos.common.trpo.trpo_step` on the whole batch: conjugate gradient on the exact
Hessian-vector product of the mean ``KL(old || new)``, then a backtracking line search that
accepts a fraction only if the true KL is at most ``max_kl`` and the surrogate improved.

Every evaluation runs the recurrent policy over each trial from its first step (the state reset
there), so the loss and KL at a line-search point are those of that point's policy, with no
stale hidden state from the rollout. sb3-contrib's ``TRPO`` is not recurrent, so none of it is
reused; the optimiser is metabench's own, shared with MAML-TRPO.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import Distribution, kl_divergence
from torch.nn import functional

from metabench.algos.common.trpo import (
    TRPOStep,
    flat_grad,
    hessian_vector_product,
    line_search_objectives,
    trpo_step,
)
from metabench.algos.rl2.recurrent_ppo import RL2RecurrentPPO

__all__ = ["CRITIC_PREFIXES", "RL2RecurrentTRPO"]

CRITIC_PREFIXES = ("lstm_critic.", "critic.", "value_net.", "mlp_extractor.value_net.")
"""Parameter names of the critic in sb3-contrib's recurrent policy: TRPO leaves them alone."""

ADVANTAGE_EPS = 1e-8
"""Added to the advantage std when normalising (garage's ``center_adv``)."""


class RL2RecurrentTRPO(RL2RecurrentPPO):
    """``RL2RecurrentPPO`` whose update is one TRPO step of the actor.

    Takes ``RL2RecurrentPPO``'s arguments plus the TRPO ones below. Of PPO's own, ``n_epochs``
    counts the critic's full-batch Adam steps after the TRPO step (``value_baseline="critic"``
    only), ``learning_rate`` and ``max_grad_norm`` are theirs; ``clip_range`` and
    ``batch_size`` are unused.

    :param max_kl: the trust region, a bound on the mean ``KL(old || new)`` per step.
    :param cg_iters: conjugate-gradient iterations.
    :param cg_damping: damping added to the Fisher-vector products.
    :param ls_steps: line-search fractions tried.
    :param ls_ratio: line-search shrink factor.
    """

    def __init__(
        self,
        *args: Any,
        max_kl: float = 0.01,
        cg_iters: int = 10,
        cg_damping: float = 1e-5,
        ls_steps: int = 15,
        ls_ratio: float = 0.8,
        **kwargs: Any,
    ) -> None:
        self.max_kl = max_kl
        self.cg_iters = cg_iters
        self.cg_damping = cg_damping
        self.ls_steps = ls_steps
        self.ls_ratio = ls_ratio
        self.last_step: TRPOStep | None = None
        super().__init__(*args, **kwargs)

    def actor_parameters(self) -> list[th.Tensor]:
        """The parameters TRPO updates: all trainable ones but the critic's."""
        return [
            parameter
            for name, parameter in self.policy.named_parameters()
            if parameter.requires_grad and not name.startswith(CRITIC_PREFIXES)
        ]

    def train(self) -> None:
        """One TRPO step of the actor on the iteration's trials (then the critic, if any)."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        observations, starts, states = self._trial_inputs()
        buffer = self._recurrent_buffer()
        actions = th.as_tensor(_env_major(buffer.actions), device=self.device)
        if isinstance(self.action_space, spaces.Discrete):
            actions = actions.long().flatten()
        advantages = th.as_tensor(_env_major(buffer.advantages), device=self.device).flatten()
        if self.normalize_advantage:
            advantages = (advantages - advantages.mean()) / (advantages.std() + ADVANTAGE_EPS)
        policy = self._recurrent_policy()

        def distribution() -> Distribution:
            dist, _ = policy.get_distribution(observations, states[0], starts)
            return dist

        with th.no_grad():
            # a copy: the policy's one distribution object is refilled at every call
            old = copy.copy(distribution())
            old_log_prob = old.log_prob(actions)

        def loss_and_kl() -> tuple[th.Tensor, th.Tensor]:
            new = distribution()
            ratio = th.exp(new.log_prob(actions) - old_log_prob)
            loss = -(ratio * advantages).mean()
            if self.ent_coef:
                entropy = new.entropy()
                assert entropy is not None
                loss = loss - self.ent_coef * entropy.mean()
            return loss, kl_divergence(old, new).mean()

        params = self.actor_parameters()
        loss, kl = loss_and_kl()
        gradient = flat_grad(loss, params, retain_graph=True)
        hvp = hessian_vector_product(lambda: kl, params, self.cg_damping)

        def loss_and_kl_without_graph() -> tuple[th.Tensor, th.Tensor]:
            with th.no_grad():
                return loss_and_kl()

        loss_fn, kl_fn = line_search_objectives(params, loss_and_kl_without_graph)
        step = trpo_step(
            params,
            gradient,
            hvp,
            loss_fn,
            kl_fn,
            max_kl=self.max_kl,
            cg_iters=self.cg_iters,
            ls_steps=self.ls_steps,
            ls_ratio=self.ls_ratio,
            loss_before=float(loss.item()),
        )
        self.last_step = step
        if self.value_baseline == "critic":
            self._train_critic(observations, starts, states[1])
        self._n_updates += 1
        for key, value in dataclasses.asdict(step).items():
            if not isinstance(value, str):
                self.logger.record(f"train/trpo_{key}", float(value))

    def _train_critic(
        self,
        observations: th.Tensor,
        starts: th.Tensor,
        states: tuple[th.Tensor, th.Tensor],
    ) -> None:
        """``n_epochs`` full-batch Adam steps of the critic on the returns (sb3-contrib's TRPO
        trains its critic after the policy step, too)."""
        buffer = self._recurrent_buffer()
        returns = th.as_tensor(_env_major(buffer.returns), device=self.device).flatten()
        policy = self._recurrent_policy()
        for _ in range(self.n_epochs):
            values = policy.predict_values(observations, states, starts).flatten()
            value_loss = functional.mse_loss(returns, values)
            policy.optimizer.zero_grad()
            value_loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), self.max_grad_norm)
            policy.optimizer.step()
            self.logger.record("train/value_loss", value_loss.item())


def _env_major(array: np.ndarray) -> np.ndarray:
    """``(n_steps, n_envs, *shape)`` -> ``(n_envs * n_steps, *shape)``, trial after trial."""
    return np.swapaxes(array, 0, 1).reshape(-1, *array.shape[2:])
