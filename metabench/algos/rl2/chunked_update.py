"""RL2-PPO's update in overlapping chunks with truncated backpropagation (Meta-World+'s RL2).

sb3-contrib's ``RecurrentPPO`` with RL2's whole-trial batch takes one gradient step per epoch: on
ML10, 10 steps per iteration, each through 5,000 recurrent steps. Meta-World+'s RL2
(``metaworld_algorithms/rl/algorithms/rl2.py``, ``update`` with ``chunk_len=250`` in
``examples/meta_learning/rl2_ml10.py``, ``overlap=50``; chunks from ``to_overlapping_chunks`` in
``rl/algorithms/utils.py``) cuts each iteration's trials into chunks of ``chunk_length`` steps
that start every ``chunk_length - overlap`` steps, keeps only the chunks that fit whole (so up to
``chunk_length - overlap`` steps at a trial's end are not trained on), and in every epoch takes
one gradient step per chunk, in time order. Each chunk starts from the recurrent state its
predecessor's pass (before that chunk's step) reached at the next chunk's first step, detached:
the gradient is truncated at chunk starts. The first chunk of each epoch starts from the trial's
initial state. On ML10 that is 24 chunks, 240 gradient steps per iteration instead of 10.

Only the linear value baseline is supported (Meta-World+'s setting): the loss has no value
term.
"""

from __future__ import annotations

import numpy as np
import torch as th
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

from metabench.algos.rl2.update_context import UpdateContext, UpdateStats

__all__ = ["check_chunk_settings", "chunk_starts", "chunked_stats", "chunked_train"]

State = tuple[th.Tensor, th.Tensor]


def check_chunk_settings(chunk_length: int, overlap: int, value_baseline: str) -> None:
    """Raise ``ValueError`` naming the fix for settings the chunked update cannot run with."""
    if value_baseline != "linear":
        raise ValueError(
            "chunk_length needs value_baseline='linear' (the chunked update trains no critic): "
            "set value_baseline to 'linear' or chunk_length to null"
        )
    if not 0 <= overlap < chunk_length:
        raise ValueError(
            f"chunk_overlap ({overlap}) must be at least 0 and smaller than chunk_length "
            f"({chunk_length})"
        )


def chunk_starts(length: int, chunk_length: int, overlap: int) -> list[int]:
    """First steps of the chunks of a ``length``-step trial: every ``chunk_length - overlap``
    steps, whole chunks only (Meta-World+'s ``to_overlapping_chunks``).

    >>> chunk_starts(5000, 250, 50)[-3:], len(chunk_starts(5000, 250, 50))
    ([4200, 4400, 4600], 24)
    """
    stride = chunk_length - overlap
    return [start for start in range(0, length - overlap, stride) if start + chunk_length <= length]


def _sequence_pass(
    policy: RecurrentActorCriticPolicy,
    observations: th.Tensor,
    starts: th.Tensor,
    state: State,
) -> tuple[th.Tensor, State]:
    """The actor's recurrent output over ``observations`` ``(n_seq, T, *obs)`` from ``state``,
    as ``(n_seq * T, hidden)`` sequence-major, and the state after the last step."""
    n_seq, length = observations.shape[:2]
    flat = observations.reshape(n_seq * length, *observations.shape[2:])
    features = policy.extract_features(flat)
    pi_features = features[0] if isinstance(features, tuple) else features  # (pi, vf) if not shared
    output, final = policy._process_sequence(
        pi_features, state, starts.reshape(-1), policy.lstm_actor
    )
    return output, final  # type: ignore[return-value]


def chunk_pass(
    policy: RecurrentActorCriticPolicy,
    observations: th.Tensor,
    actions: th.Tensor,
    starts: th.Tensor,
    state: State,
    carry_at: int,
) -> tuple[th.Tensor, th.Tensor | None, State]:
    """Log-probabilities and entropies of ``actions`` over one chunk, and the state after its
    first ``carry_at`` steps (where the next chunk starts), detached.

    :param observations: ``(n_seq, chunk_length, *obs_shape)``; ``actions`` likewise.
    :param starts: ``(n_seq, chunk_length)`` episode-start flags.
    :param state: the recurrent ``(h, c)`` before the chunk's first step.
    :return: ``log_prob`` and ``entropy`` ``(n_seq * chunk_length,)`` sequence-major, and the
        next chunk's initial state.
    """
    n_seq, length = observations.shape[:2]
    first, carry = _sequence_pass(policy, observations[:, :carry_at], starts[:, :carry_at], state)
    outputs = [first.reshape(n_seq, carry_at, -1)]
    if carry_at < length:
        rest, _ = _sequence_pass(policy, observations[:, carry_at:], starts[:, carry_at:], carry)
        outputs.append(rest.reshape(n_seq, length - carry_at, -1))
    latent = th.cat(outputs, dim=1).reshape(n_seq * length, -1)
    distribution = policy._get_action_dist_from_latent(policy.mlp_extractor.forward_actor(latent))
    log_prob = distribution.log_prob(actions.reshape(n_seq * length, *actions.shape[2:]))
    next_state = (carry[0].detach(), carry[1].detach())
    return log_prob, distribution.entropy(), next_state


def chunked_train(context: UpdateContext, chunk_length: int, overlap: int) -> UpdateStats:
    """``RecurrentPPO.train`` as Meta-World+'s RL2 does it: one clipped-surrogate step per chunk
    per epoch (see the module doc); reports sb3-contrib's numbers (``value`` is 0: no critic)."""
    policy, buffer, clip_range = context.policy, context.buffer, context.clip_range
    n_steps = buffer.rewards.shape[0]
    chunks = chunk_starts(n_steps, chunk_length, overlap)  # not empty: RL2RecurrentPPO checks

    def env_major(array: np.ndarray) -> th.Tensor:  # (T, n_envs, ...) -> (n_envs, T, ...)
        return th.as_tensor(np.swapaxes(array, 0, 1), device=context.device)

    observations = env_major(buffer.observations)
    actions = env_major(buffer.actions)
    starts = env_major(buffer.episode_starts)
    old_log_prob = env_major(buffer.log_probs)
    advantages = env_major(buffer.advantages)
    if context.normalize_advantage:  # over the whole iteration, as Meta-World+ does
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    initial = (
        th.as_tensor(buffer.hidden_states_pi[0], device=context.device),
        th.as_tensor(buffer.cell_states_pi[0], device=context.device),
    )
    logs: dict[str, list[float]] = {"entropy": [], "policy": [], "clipped": []}
    approx_kl = loss_value = float("nan")
    for _ in range(context.n_epochs):
        state = initial
        kls = []
        for start in chunks:
            part = slice(start, start + chunk_length)
            log_prob, entropy, state = chunk_pass(
                policy,
                observations[:, part],
                actions[:, part],
                starts[:, part],
                state,
                carry_at=chunk_length - overlap,
            )
            chunk_advantages = advantages[:, part].reshape(-1)
            log_ratio = log_prob - old_log_prob[:, part].reshape(-1)
            ratio = th.exp(log_ratio)
            clipped = th.clamp(ratio, 1 - clip_range, 1 + clip_range)
            policy_loss = -th.mean(th.min(chunk_advantages * ratio, chunk_advantages * clipped))
            entropy_loss = -th.mean(entropy if entropy is not None else -log_prob)
            loss = policy_loss + context.ent_coef * entropy_loss
            with th.no_grad():
                kls.append(float(th.mean((ratio - 1) - log_ratio)))
                logs["clipped"].append(float(th.mean((th.abs(ratio - 1) > clip_range).float())))
            logs["policy"].append(policy_loss.item())
            logs["entropy"].append(entropy_loss.item())
            loss_value = loss.item()
            policy.optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), context.max_grad_norm)
            policy.optimizer.step()
        approx_kl = float(np.mean(kls))  # of the last epoch, as sb3-contrib logs it
    return chunked_stats(context.n_epochs, logs, approx_kl, loss_value)


def chunked_stats(
    epochs: int, logs: dict[str, list[float]], approx_kl: float, loss: float
) -> UpdateStats:
    """sb3-contrib's numbers of a chunked update from each chunk step's ``entropy``, ``policy``
    and ``clipped`` terms, the last epoch's mean KL and the last step's loss (``value`` is 0:
    no critic)."""
    return UpdateStats(
        epochs=epochs,
        entropy=float(np.mean(logs["entropy"])),
        policy=float(np.mean(logs["policy"])),
        value=0.0,
        approx_kl=approx_kl,
        clip_fraction=float(np.mean(logs["clipped"])),
        loss=loss,
    )
