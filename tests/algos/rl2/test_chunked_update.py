"""RL2-PPO's chunked update with truncated backpropagation (Meta-World+'s RL2,
``metabench/algos/rl2/chunked_update.py``)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch
from sb3_contrib.common.recurrent import buffers
from sb3_contrib.common.recurrent.type_aliases import RNNStates

from metabench.algos.rl2.chunked_update import chunk_pass, chunk_starts
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from tests.factories import policy_parameters

TRIAL = 80  # PointGoal: 4 episodes of 20 steps per trial
LINEAR_GRU = {"value_baseline": "linear", "recurrent_cell": "gru", "hidden_size": 16}


def make(**options: Any) -> RL2PPO:
    config = RL2PPOConfig(meta_batch_size=3, **{**LINEAR_GRU, **options})
    return RL2PPO("metabench/PointGoal-v0", config=config, seed=3)


def filled(**options: Any) -> RL2PPO:
    """An algorithm whose rollout buffer holds one iteration (after one update)."""
    algo = make(**options)
    algo.train(1)
    return algo


@pytest.mark.parametrize(
    ("length", "chunk", "overlap", "expected"),
    [
        (10, 4, 1, [0, 3, 6]),  # the last chunk ends exactly at the trial's end
        (11, 4, 1, [0, 3, 6]),  # a chunk from 9 would end at 13: the last 4 steps are dropped
        (8, 8, 0, [0]),
        (7, 8, 0, []),
        (12, 4, 0, [0, 4, 8]),
    ],
)
def test_chunks_start_every_stride_and_only_whole_chunks_are_kept(
    length: int, chunk: int, overlap: int, expected: list[int]
) -> None:
    assert chunk_starts(length, chunk, overlap) == expected


def test_meta_world_plus_ml10_setting_gives_24_chunks_per_trial() -> None:
    starts = chunk_starts(5000, 250, 50)
    assert len(starts) == 24 and starts[0] == 0 and np.all(np.diff(starts) == 200)
    assert starts[-1] + 250 == 4850  # the last 150 steps of each trial are not trained on


def test_one_chunk_over_the_whole_trial_is_sb3_contribs_update(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With one chunk covering the trial, the chunked update is RecurrentPPO's full-batch one.

    sb3-contrib's buffer cuts the sequences at a random index in every epoch ("to shuffle a
    bit"), so one trial goes through in two parts, the second from the state stored during the
    rollout; the cut is put at 0 here to compare with whole trials."""
    monkeypatch.setattr(buffers.np.random, "randint", lambda *args, **kwargs: 0)
    whole = make(n_epochs=3)  # each built right before it trains: both draw the same numbers
    before = policy_parameters(whole)
    whole.train(2)
    chunked = make(n_epochs=3, chunk_length=TRIAL, chunk_overlap=0)
    chunked.train(2)
    moved = False
    after = zip(before, policy_parameters(whole), policy_parameters(chunked), strict=True)
    for start, a, b in after:
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
        moved |= not torch.equal(a, start)
    assert moved, "the updates changed nothing: the comparison would prove nothing"
    assert chunked.model._n_updates == whole.model._n_updates == 6


def test_one_gradient_step_per_chunk_per_epoch() -> None:
    algo = make(n_epochs=2, chunk_length=30, chunk_overlap=10)  # chunks at 0, 20, 40
    optimizer = algo.model.policy.optimizer
    steps = []
    original = optimizer.step

    def counted(*args: Any, **kwargs: Any) -> Any:
        steps.append(1)
        return original(*args, **kwargs)

    optimizer.step = counted  # type: ignore[method-assign]
    algo.train(2)
    assert len(steps) == 2 * 2 * 3


def test_chunk_pass_is_one_recurrent_pass_and_carries_the_state_at_the_next_start() -> None:
    algo = filled(chunk_length=TRIAL, chunk_overlap=0)  # leaves the buffer unflattened
    model = algo.model
    policy = model._recurrent_policy()
    buffer = model._recurrent_buffer()
    observations = torch.as_tensor(np.swapaxes(buffer.observations, 0, 1))[:, 10:40]
    actions = torch.as_tensor(np.swapaxes(buffer.actions, 0, 1))[:, 10:40]
    starts = torch.zeros(observations.shape[:2])
    generator = torch.Generator().manual_seed(0)
    h = torch.randn(1, 3, 16, generator=generator)
    state = (h, torch.zeros_like(h))
    log_prob, entropy, carried = chunk_pass(policy, observations, actions, starts, state, 20)
    # the reference: sb3-contrib's evaluate_actions over the whole chunk, sequence-major
    flat_obs = observations.reshape(3 * 30, -1)
    flat_actions = actions.reshape(3 * 30, -1)
    states = RNNStates(state, state)
    _, reference, reference_entropy = policy.evaluate_actions(
        flat_obs, flat_actions, states, starts.reshape(-1)
    )
    torch.testing.assert_close(log_prob, reference, rtol=1e-5, atol=1e-5)
    assert entropy is not None and reference_entropy is not None
    torch.testing.assert_close(entropy, reference_entropy)
    # the carried state: the GRU stepped by hand over the chunk's first 20 steps
    gru = policy.lstm_actor
    hidden = h[0]
    with torch.no_grad():
        features = policy.extract_features(flat_obs).reshape(3, 30, -1)
        for t in range(20):
            hidden = torch.gru_cell(
                features[:, t],
                hidden,
                gru.weight_ih_l0,
                gru.weight_hh_l0,
                gru.bias_ih_l0,
                gru.bias_hh_l0,
            )
    torch.testing.assert_close(carried[0][0], hidden, rtol=1e-5, atol=1e-6)
    assert not carried[0].requires_grad, "backpropagation must stop at the chunk start"


def test_steps_after_the_last_whole_chunk_do_not_change_the_update() -> None:
    """Meta-World+ trains only on whole chunks: with chunks at 0, 20, 40 (length 30) the
    advantages of steps 70-79 are unused, while those inside a chunk are used."""
    algo = filled(chunk_length=30, chunk_overlap=10)
    model = algo.model
    policy_state = copy.deepcopy(model.policy.state_dict())
    optimizer_state = copy.deepcopy(model.policy.optimizer.state_dict())
    advantages = model.rollout_buffer.advantages.copy()

    def update(changed: slice | None) -> list[torch.Tensor]:
        model.policy.load_state_dict(policy_state)
        # a copy each time: Adam counts its steps in place in the tensors it was given
        model.policy.optimizer.load_state_dict(copy.deepcopy(optimizer_state))
        model.rollout_buffer.advantages = advantages.copy()
        if changed is not None:
            model.rollout_buffer.advantages[changed] += 5.0
        model.train()  # chunk_length=30, chunk_overlap=10: chunked_train
        return policy_parameters(algo)

    reference = update(None)
    for a, b in zip(reference, update(slice(70, 80)), strict=True):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(reference, update(slice(60, 70)), strict=True))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"value_baseline": "critic", "chunk_length": 30}, "value_baseline='linear'"),
        ({"chunk_length": 30, "chunk_overlap": 30}, "smaller than chunk_length"),
    ],
)
def test_impossible_chunk_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RL2PPOConfig(**{**LINEAR_GRU, **options})


def test_chunks_longer_than_the_trial_are_refused() -> None:
    with pytest.raises(ValueError, match=f"at most {TRIAL}"):
        make(chunk_length=TRIAL + 1)
