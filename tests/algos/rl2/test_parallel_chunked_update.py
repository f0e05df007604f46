"""The chunked RL2 update split over the env workers equals the one-process chunked update up to
float rounding (``metabench/algos/rl2/parallel_chunked_update.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from metabench.algos.rl2.chunked_update import chunk_pass
from metabench.algos.rl2.parallel_chunked_update import ChunkConstants, group_chunk_loss
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from tests.factories import assert_split_learns_what_alone_learns, rl2_alone_and_split

# rl2-ppo-metaworld's network and update on PointGoal (trials of 4 x 20 steps), small
PARITY = {
    "value_baseline": "linear", "linear_baseline_fit": "trial", "recurrent_cell": "gru",
    "hidden_size": 16, "encoder_sizes": [8, 8], "policy_head": "tanh", "weight_init": "xavier",
    "gru_recurrent_bias": "candidate", "zero_at_episode_start": True,
    "entropy_method": "regularized", "ent_coef": 0.05, "max_grad_norm": 0.05,
    "chunk_length": 30, "chunk_overlap": 10,
}  # fmt: skip


@pytest.mark.parametrize("normalize_advantage", [False, True])
@pytest.mark.parametrize("cpus", [2, 3])
def test_split_chunked_update_learns_what_the_one_process_update_learns(
    cpus: int, normalize_advantage: bool
) -> None:
    alone, split = rl2_alone_and_split(cpus, **PARITY, normalize_advantage=normalize_advantage)
    assert_split_learns_what_alone_learns(alone, split, cpus)


def test_group_losses_add_up_to_the_chunk_loss_and_gradient_and_carry_each_groups_state() -> None:
    """For any split of the trials, the groups' losses and gradients add up to those of the
    chunk's mean loss over every trial (chunked_train's, written out here), and each group's
    carried state is its rows of the whole batch's."""
    algo = RL2PPO(
        "metabench/PointGoal-v0", config=RL2PPOConfig(meta_batch_size=6, **PARITY), seed=1
    )
    algo.train(1)  # fills the rollout buffer
    model = algo.model
    policy, buffer = model._recurrent_policy(), model._recurrent_buffer()

    def env_major(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.swapaxes(array, 0, 1))

    batch = {
        "observations": env_major(buffer.observations),
        "actions": env_major(buffer.actions),
        "starts": env_major(buffer.episode_starts),
        "old_log_prob": env_major(buffer.log_probs),
        "advantages": env_major(buffer.advantages),
        "initial": (torch.as_tensor(buffer.hidden_states_pi[0]),
                    torch.as_tensor(buffer.cell_states_pi[0])),
    }  # fmt: skip
    clip_range, ent_coef, start, length, carry_at = 0.2, 0.05, 20, 30, 20
    part = slice(start, start + length)

    def whole() -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        log_prob, entropy, state = chunk_pass(
            policy, batch["observations"][:, part], batch["actions"][:, part],
            batch["starts"][:, part], batch["initial"], carry_at,
        )  # fmt: skip
        advantages = batch["advantages"][:, part].reshape(-1)
        ratio = torch.exp(log_prob - batch["old_log_prob"][:, part].reshape(-1))
        surrogate = torch.min(advantages * ratio, advantages * ratio.clamp(0.8, 1.2))
        assert entropy is not None
        return -surrogate.mean() - ent_coef * entropy.mean(), state

    policy.zero_grad()
    loss, state = whole()
    loss.backward()
    expected = [p.grad.clone() for p in policy.parameters() if p.grad is not None]

    constants = ChunkConstants(length, carry_at, clip_range, ent_coef, 6 * length)
    for groups in ([(0, 6)], [(0, 2), (2, 6)], [(0, 1), (1, 3), (3, 6)]):
        policy.zero_grad()
        total = torch.zeros(())
        for first, last in groups:
            rows = {k: v[first:last] for k, v in batch.items() if k != "initial"}
            rows["initial"] = tuple(s[:, first:last] for s in batch["initial"])
            group_loss, _, carried = group_chunk_loss(
                policy, rows, start, rows["initial"], constants
            )
            group_loss.backward()
            total = total + group_loss.detach()
            for got, want in zip(carried, state, strict=True):
                torch.testing.assert_close(got, want[:, first:last], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(total, loss.detach(), rtol=1e-5, atol=1e-7)
        got = [p.grad for p in policy.parameters() if p.grad is not None]
        assert len(got) == len(expected)
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
