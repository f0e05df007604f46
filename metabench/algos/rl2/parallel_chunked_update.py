"""Meta-World+'s chunked RL2 update (:mod:`metabench.algos.rl2.chunked_update`) with each
chunk's passes split over the env worker processes.

The chunked update takes 240 gradient steps per ML10 iteration, each through one 250-step chunk
of all 20 trials, in the training process while the env worker waits: 63 % of an iteration of
``rl2-ppo-metaworld`` (``docs/speed.md``). Each step's loss is a mean over the chunk's steps of
every trial. Written as sums over a group of trials divided by the whole chunk's step count, the
groups' losses add up to it, so each process runs the policy over its own trials (carrying their
recurrent state from chunk to chunk itself) and the training process adds the workers'
gradients to its own before clipping and the optimizer step, as
:mod:`metabench.algos.rl2.parallel_update` does for the whole-trial update. The result is
:func:`~metabench.algos.rl2.chunked_update.chunked_train`'s up to the order of float additions,
not bit for bit (``tests/algos/rl2/test_parallel_chunked_update.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch as th
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

from metabench.algos.rl2.chunked_update import State, chunk_pass, chunk_starts, chunked_stats
from metabench.algos.rl2.parallel_update import (
    add_gradients,
    gradients_of,
    policy_build,
    policy_with_parameters,
)
from metabench.algos.rl2.update_context import UpdateContext, UpdateStats

if TYPE_CHECKING:
    from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv

__all__ = ["ChunkConstants", "group_chunk_loss", "parallel_chunked_train"]

SUMS = ("policy", "entropy", "kl", "clipped")
"""The sums over a group's steps of one chunk that :func:`group_chunk_loss` returns."""

Group = dict[str, Any]
"""A group of trials, env-major ``(n_trials, T, ...)``: ``observations``, ``actions``,
``starts``, ``old_log_prob``, ``advantages``, and ``initial``, the recurrent state ``(h, c)``
before the first step."""


@dataclass(frozen=True)
class ChunkConstants:
    """What a chunk's loss needs besides the data."""

    chunk_length: int
    carry_at: int
    """Steps of a chunk before the next one starts (``chunk_length - overlap``)."""
    clip_range: float
    ent_coef: float
    count: int
    """Steps of one chunk over every trial: each group's sums are divided by it."""


def group_chunk_loss(
    policy: RecurrentActorCriticPolicy,
    group: Group,
    start: int,
    state: State,
    constants: ChunkConstants,
) -> tuple[th.Tensor, dict[str, float], State]:
    """One group's share of the chunk starting at ``start``: its loss (the clipped surrogate and
    the entropy term, each summed over the group's steps and divided by ``constants.count``),
    its sums for the logs, and its state where the next chunk starts."""
    part = slice(start, start + constants.chunk_length)
    log_prob, entropy, next_state = chunk_pass(
        policy,
        group["observations"][:, part],
        group["actions"][:, part],
        group["starts"][:, part],
        state,
        constants.carry_at,
    )
    advantages = group["advantages"][:, part].reshape(-1)
    log_ratio = log_prob - group["old_log_prob"][:, part].reshape(-1)
    ratio = th.exp(log_ratio)
    clipped = th.clamp(ratio, 1 - constants.clip_range, 1 + constants.clip_range)
    policy_sum = -th.sum(th.min(advantages * ratio, advantages * clipped))
    entropy_sum = -th.sum(entropy if entropy is not None else -log_prob)
    loss = (policy_sum + constants.ent_coef * entropy_sum) / constants.count
    with th.no_grad():
        kl_sum = th.sum((ratio - 1) - log_ratio)
        clipped_sum = th.sum((th.abs(ratio - 1) > constants.clip_range).float())
    sums = [policy_sum, entropy_sum, kl_sum, clipped_sum]
    return loss, {k: float(v.item()) for k, v in zip(SUMS, sums, strict=True)}, next_state


def _tensors(arrays: dict[str, Any]) -> Group:
    group: Group = {k: th.as_tensor(v) for k, v in arrays.items() if k != "initial"}
    group["initial"] = tuple(th.as_tensor(s) for s in arrays["initial"])
    return group


def worker_load(state: dict[str, Any], build: tuple[Any, ...], arrays: dict[str, Any]) -> None:
    """In a worker process: keep this iteration's group of trials (numpy arrays, as
    :func:`parallel_chunked_train` sends them) for the chunk steps that follow."""
    state["chunk_group"], state["chunk_build"] = _tensors(arrays), build


def worker_chunk_gradient(
    state: dict[str, Any],
    parameters: dict[str, np.ndarray],
    start: int,
    first: bool,
    constants: ChunkConstants,
) -> tuple[dict[str, np.ndarray | None], dict[str, float]]:
    """In a worker process: the gradient of its group's :func:`group_chunk_loss` at
    ``parameters``, from the group's initial state on an epoch's ``first`` chunk and from where
    its previous chunk left it otherwise, and the group's sums."""
    policy, named = policy_with_parameters(state, state["chunk_build"], parameters)
    group = state["chunk_group"]
    carry = group["initial"] if first else state["chunk_carry"]
    loss, sums, state["chunk_carry"] = group_chunk_loss(policy, group, start, carry, constants)
    loss.backward()
    return gradients_of(named, parameters), sums


def parallel_chunked_train(
    context: UpdateContext,
    chunk_length: int,
    overlap: int,
    venv: ShardedSubprocVecEnv,
    constructor: dict[str, Any],
) -> UpdateStats:
    """:func:`~metabench.algos.rl2.chunked_update.chunked_train` with each chunk's passes split
    by trials between this process and the workers of ``venv`` (see the module doc), which
    rebuild the policy from ``constructor``."""
    policy, buffer = context.policy, context.buffer
    n_steps = buffer.rewards.shape[0]
    chunks = chunk_starts(n_steps, chunk_length, overlap)
    advantages = th.as_tensor(np.swapaxes(buffer.advantages, 0, 1))
    if context.normalize_advantage:  # over the whole iteration, as chunked_train does
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    arrays = {
        "observations": np.swapaxes(buffer.observations, 0, 1),
        "actions": np.swapaxes(buffer.actions, 0, 1),
        "starts": np.swapaxes(buffer.episode_starts, 0, 1),
        "old_log_prob": np.swapaxes(buffer.log_probs, 0, 1),
        "advantages": advantages.numpy(),
    }
    initial = (buffer.hidden_states_pi[0], buffer.cell_states_pi[0])  # (layers, trials, hidden)
    n_trials = arrays["observations"].shape[0]
    bounds = np.linspace(0, n_trials, venv.processes + 1).round().astype(int)

    def group(first: int, last: int) -> dict[str, Any]:
        return {
            **{k: np.ascontiguousarray(v[first:last]) for k, v in arrays.items()},
            "initial": tuple(np.ascontiguousarray(s[:, first:last]) for s in initial),
        }

    build = policy_build(policy, constructor)
    workers = range(venv.processes - 1)
    for w in workers:
        venv.run_async(w, worker_load, build, group(bounds[w + 1], bounds[w + 2]))
    for w in workers:
        venv.run_wait(w)
    local = _tensors(group(0, bounds[1]))
    constants = ChunkConstants(
        chunk_length, chunk_length - overlap, context.clip_range, context.ent_coef,
        n_trials * chunk_length,
    )  # fmt: skip
    trainable = {name: p for name, p in policy.named_parameters() if p.requires_grad}
    logs: dict[str, list[float]] = {"entropy": [], "policy": [], "clipped": []}
    approx_kl = loss_value = float("nan")
    for _ in range(context.n_epochs):
        carry: State = local["initial"]
        kls = []
        for index, start in enumerate(chunks):
            parameters = {name: p.detach().numpy().copy() for name, p in trainable.items()}
            for w in workers:
                venv.run_async(w, worker_chunk_gradient, parameters, start, index == 0, constants)
            policy.optimizer.zero_grad()
            loss, sums, carry = group_chunk_loss(policy, local, start, carry, constants)
            loss.backward()
            for w in workers:
                gradients, worker_sums = venv.run_wait(w)
                add_gradients(trainable, gradients)
                sums = {key: sums[key] + worker_sums[key] for key in SUMS}
            count = constants.count
            kls.append(sums["kl"] / count)
            logs["clipped"].append(sums["clipped"] / count)
            logs["policy"].append(sums["policy"] / count)
            logs["entropy"].append(sums["entropy"] / count)
            loss_value = (sums["policy"] + context.ent_coef * sums["entropy"]) / count
            th.nn.utils.clip_grad_norm_(policy.parameters(), context.max_grad_norm)
            policy.optimizer.step()
        approx_kl = float(np.mean(kls))
    return chunked_stats(context.n_epochs, logs, approx_kl, loss_value)
