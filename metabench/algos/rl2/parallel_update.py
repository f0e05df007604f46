"""RecurrentPPO's full-batch update with its forward and backward passes split over processes.

On ML10 an RL2-PPO update is ten passes of a GRU-256 over 5,000 sequential steps of 20 trials,
about half of an iteration on one core, while the env worker process that shares the machine
waits. A recurrent pass cannot be split along time, but it can along trials: each process runs
the policy over its own trials and differentiates its part of the loss, written as sums over its
steps divided by the whole batch's step count, and the training process adds the workers'
gradients to its own before clipping and the optimizer step. The loss is the sum of the parts,
so the gradient is ``RecurrentPPO.train``'s up to the order of float additions: not bit for
bit, but the parameters after two iterations agree with the one-process update's to 1e-4
relative (``tests/algos/rl2/test_parallel_update.py``). A GRU-256 pass over 10 trials takes
about 0.6 of one over 20 on one core, so the update runs about 1.36x faster on 2 cores
(``docs/speed.md``).

Only the full-batch case (``batch_size`` = the whole rollout, RL2's setting) is split; anything
else runs sb3-contrib's own update.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RecurrentRolloutBufferSamples, RNNStates

from metabench.algos.rl2.update_context import UpdateContext, UpdateStats

if TYPE_CHECKING:
    from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv

__all__ = [
    "LossConstants", "add_gradients", "gradients_of", "parallel_train", "partial_loss",
    "policy_build", "policy_with_parameters",
]  # fmt: skip

STATS = ("policy", "value", "entropy", "kl", "clipped")
"""The sums over a group's valid steps that :func:`partial_loss` returns besides the loss."""


@dataclass(frozen=True)
class LossConstants:
    """What the loss needs besides the data: PPO's coefficients and the batch's step count."""

    clip_range: float
    clip_range_vf: float | None
    ent_coef: float
    vf_coef: float
    count: int
    """Valid steps in the whole batch: every group's sums are divided by it."""


def partial_loss(
    policy: RecurrentActorCriticPolicy,
    data: RecurrentRolloutBufferSamples,
    constants: LossConstants,
) -> tuple[th.Tensor, dict[str, float]]:
    """One group's share of ``RecurrentPPO.train``'s loss, and its sums for the logs.

    The same terms as sb3-contrib's (clipped surrogate, optionally clipped value loss, entropy
    or ``-log_prob``), each summed over the group's valid steps instead of averaged, the total
    divided by ``constants.count``. ``data.advantages`` must already be normalised if the run
    normalises them (over the whole batch, as sb3-contrib does).
    """
    mask = data.mask > 1e-8
    values, log_prob, entropy = policy.evaluate_actions(
        data.observations, data.actions, data.lstm_states, data.episode_starts
    )
    values = values.flatten()
    ratio = th.exp(log_prob - data.old_log_prob)
    surrogate = th.min(
        data.advantages * ratio,
        data.advantages * th.clamp(ratio, 1 - constants.clip_range, 1 + constants.clip_range),
    )
    policy_sum = -th.sum(surrogate[mask])
    if constants.clip_range_vf is None:
        values_pred = values
    else:
        values_pred = data.old_values + th.clamp(
            values - data.old_values, -constants.clip_range_vf, constants.clip_range_vf
        )
    value_sum = th.sum(((data.returns - values_pred) ** 2)[mask])
    entropy_sum = -th.sum(-log_prob[mask]) if entropy is None else -th.sum(entropy[mask])
    loss = (
        policy_sum + constants.ent_coef * entropy_sum + constants.vf_coef * value_sum
    ) / constants.count
    with th.no_grad():
        log_ratio = log_prob - data.old_log_prob
        kl_sum = th.sum(((th.exp(log_ratio) - 1) - log_ratio)[mask])
        clipped = th.sum((th.abs(ratio - 1) > constants.clip_range).float()[mask])
    sums = [policy_sum, value_sum, entropy_sum, kl_sum, clipped]
    return loss, {name: float(value.item()) for name, value in zip(STATS, sums, strict=True)}


def _sequences(data: RecurrentRolloutBufferSamples, start: int, stop: int) -> Any:
    """Padded sequences ``start:stop`` of a training batch, as numpy arrays (for a pipe)."""
    n_seq = data.lstm_states.pi[0].shape[1]
    length = data.observations.shape[0] // n_seq
    rows = slice(start * length, stop * length)

    def states(pair: tuple[th.Tensor, ...]) -> tuple[np.ndarray, ...]:
        return tuple(state[:, start:stop].numpy() for state in pair)

    return {
        "observations": data.observations[rows].numpy(),
        "actions": data.actions[rows].numpy(),
        "old_values": data.old_values[rows].numpy(),
        "old_log_prob": data.old_log_prob[rows].numpy(),
        "advantages": data.advantages[rows].numpy(),
        "returns": data.returns[rows].numpy(),
        "lstm_states": (states(data.lstm_states.pi), states(data.lstm_states.vf)),
        "episode_starts": data.episode_starts[rows].numpy(),
        "mask": data.mask[rows].numpy(),
    }


def _samples(arrays: dict[str, Any]) -> RecurrentRolloutBufferSamples:
    """The inverse of :func:`_sequences`."""
    pi, vf = arrays["lstm_states"]
    tensors = {name: th.as_tensor(value) for name, value in arrays.items() if name != "lstm_states"}
    return RecurrentRolloutBufferSamples(
        lstm_states=RNNStates(
            tuple(th.as_tensor(s) for s in pi),
            tuple(th.as_tensor(s) for s in vf),
        ),
        **tensors,
    )


def worker_gradient(
    state: dict[str, Any],
    build: tuple[str, type[RecurrentActorCriticPolicy], dict[str, Any]],
    parameters: dict[str, np.ndarray],
    arrays: dict[str, Any],
    constants: LossConstants,
) -> tuple[dict[str, np.ndarray | None], dict[str, float]]:
    """In a worker process: the gradient of its group's :func:`partial_loss` at ``parameters``.

    :param state: the worker's own dict; holds the policy built from ``build`` (a key naming
        the training run's policy, its class and constructor parameters) until the key changes.
    :param parameters: the trainable parameters by name; only these get gradients.
    :return: the gradient of each of ``parameters`` (``None`` where the loss does not reach it)
        and the group's sums.
    """
    policy, named = policy_with_parameters(state, build, parameters)
    loss, sums = partial_loss(policy, _samples(arrays), constants)
    loss.backward()
    return gradients_of(named, parameters), sums


def policy_with_parameters(
    state: dict[str, Any],
    build: tuple[str, type[RecurrentActorCriticPolicy], dict[str, Any]],
    parameters: dict[str, np.ndarray],
) -> tuple[RecurrentActorCriticPolicy, dict[str, th.nn.Parameter]]:
    """In a worker process: the training run's policy (built from ``build`` once per run and
    kept in the worker's ``state``) in training mode, set to ``parameters`` with no gradients
    yet, only those requiring one; and its parameters by name."""
    th.set_num_threads(1)
    key, policy_class, constructor = build
    if state.get("policy_key") != key:
        state["policy"], state["policy_key"] = policy_class(**constructor), key
    policy: RecurrentActorCriticPolicy = state["policy"]
    policy.set_training_mode(True)
    named = dict(policy.named_parameters())
    with th.no_grad():
        for name, parameter in named.items():
            parameter.requires_grad_(name in parameters)
            if name in parameters:
                parameter.copy_(th.as_tensor(parameters[name]))
            parameter.grad = None
    return policy, named


def add_gradients(
    trainable: dict[str, th.nn.Parameter], gradients: dict[str, np.ndarray | None]
) -> None:
    """Add a worker's :func:`gradients_of` to the training process's own."""
    for name, parameter in trainable.items():
        if gradients[name] is None:
            continue
        gradient = th.as_tensor(gradients[name])
        if parameter.grad is None:
            parameter.grad = gradient.clone()
        else:
            parameter.grad += gradient


def policy_build(
    policy: RecurrentActorCriticPolicy, constructor: dict[str, Any]
) -> tuple[str, type[RecurrentActorCriticPolicy], dict[str, Any]]:
    """What a worker rebuilds ``policy`` from: a key naming this training run's policy, its
    class, and ``constructor`` (the learning rate schedule is not needed there)."""
    return (
        f"{os.getpid()}-{id(policy)}",
        type(policy),
        {**constructor, "lr_schedule": _unused_schedule},
    )


def _unused_schedule(_: float) -> float:
    return 0.0


def gradients_of(
    named: dict[str, th.nn.Parameter], names: Iterable[str]
) -> dict[str, np.ndarray | None]:
    """In a worker process: the gradients of the parameters ``names`` as numpy arrays, for the
    pipe (``None`` where the loss does not reach a parameter)."""
    grads = {name: named[name].grad for name in names}
    return {name: None if grad is None else grad.numpy() for name, grad in grads.items()}


def parallel_train(
    context: UpdateContext, venv: ShardedSubprocVecEnv, constructor: dict[str, Any]
) -> UpdateStats:
    """``RecurrentPPO.train`` for a full batch, its passes split between this process and the
    workers of ``venv`` (see the module doc), which rebuild the policy from ``constructor`` (the
    keyword arguments its class was built with; the learning rate schedule is not needed)."""
    policy, clip_range, clip_range_vf = context.policy, context.clip_range, context.clip_range_vf
    trainable = {name: p for name, p in policy.named_parameters() if p.requires_grad}
    build = policy_build(policy, constructor)
    logs: dict[str, list[float]] = {"entropy": [], "policy": [], "value": [], "clipped": []}
    approx_kl = loss_value = float("nan")  # of the last epoch, as sb3-contrib logs them
    epochs = 0
    for _ in range(context.n_epochs):
        (data,) = list(context.buffer.get(context.batch_size))  # the whole batch
        mask = data.mask > 1e-8
        if context.normalize_advantage:
            advantages = data.advantages
            normalized = (advantages - advantages[mask].mean()) / (advantages[mask].std() + 1e-8)
            data = data._replace(advantages=normalized)
        constants = LossConstants(
            clip_range, clip_range_vf, context.ent_coef, context.vf_coef, int(mask.sum())
        )
        n_seq = data.lstm_states.pi[0].shape[1]
        bounds = np.linspace(0, n_seq, venv.processes + 1).round().astype(int)
        parameters = {name: p.detach().numpy().copy() for name, p in trainable.items()}
        for w in range(venv.processes - 1):
            arrays = _sequences(data, bounds[w + 1], bounds[w + 2])
            venv.run_async(w, worker_gradient, build, parameters, arrays, constants)
        local = _samples(_sequences(data, 0, bounds[1]))
        policy.optimizer.zero_grad()
        loss, sums = partial_loss(policy, local, constants)
        loss.backward()
        for w in range(venv.processes - 1):
            gradients, worker_sums = venv.run_wait(w)
            add_gradients(trainable, gradients)
            sums = {key: sums[key] + worker_sums[key] for key in STATS}
        count = constants.count
        logs["policy"].append(sums["policy"] / count)
        logs["value"].append(sums["value"] / count)
        logs["entropy"].append(sums["entropy"] / count)
        logs["clipped"].append(sums["clipped"] / count)
        approx_kl = sums["kl"] / count
        loss_value = (
            sums["policy"] + context.ent_coef * sums["entropy"] + context.vf_coef * sums["value"]
        ) / count
        epochs += 1  # counted for the stopped epoch too, as sb3-contrib does
        if context.target_kl is not None and approx_kl > 1.5 * context.target_kl:
            break  # sb3-contrib stops before this step
        th.nn.utils.clip_grad_norm_(policy.parameters(), context.max_grad_norm)
        policy.optimizer.step()
    return UpdateStats(
        epochs=epochs,
        entropy=float(np.mean(logs["entropy"])),
        policy=float(np.mean(logs["policy"])),
        value=float(np.mean(logs["value"])),
        approx_kl=approx_kl,
        clip_fraction=float(np.mean(logs["clipped"])),
        loss=loss_value,
    )
