"""Discounted returns and GAE on ragged episodes, against a hand loop."""

from __future__ import annotations

import numpy as np
import pytest

from metabench.algos.common.returns import discounted_returns, gae_advantages


def ragged(seed: int, lengths: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Padded rewards and values with NaN in the padding, and the valids mask."""
    rng = np.random.default_rng(seed)
    valids = (np.arange(max(lengths))[None, :] < np.array(lengths)[:, None]).astype(float)
    rewards = np.where(valids > 0, rng.normal(size=valids.shape), np.nan)
    values = np.where(valids > 0, rng.normal(size=valids.shape), np.nan)
    return rewards, values, valids


@pytest.mark.parametrize(("discount", "gae_lambda"), [(0.99, 1.0), (0.9, 0.95), (0.5, 0.0)])
def test_gae_and_returns_match_a_hand_loop(discount: float, gae_lambda: float) -> None:
    lengths = [5, 1, 3]
    rewards, values, valids = ragged(0, lengths)
    advantages = gae_advantages(rewards, values, valids, discount, gae_lambda)
    returns = discounted_returns(rewards, valids, discount)
    for i, length in enumerate(lengths):
        for t in range(max(lengths)):
            if t >= length:
                assert advantages[i, t] == 0.0 and returns[i, t] == 0.0
                continue
            expected_adv = 0.0
            expected_ret = 0.0
            for k in range(t, length):
                next_value = values[i, k + 1] if k + 1 < length else 0.0  # 0 after the last step
                delta = rewards[i, k] + discount * next_value - values[i, k]
                expected_adv += (discount * gae_lambda) ** (k - t) * delta
                expected_ret += discount ** (k - t) * rewards[i, k]
            assert advantages[i, t] == pytest.approx(expected_adv, rel=1e-12, abs=1e-12)
            assert returns[i, t] == pytest.approx(expected_ret, rel=1e-12, abs=1e-12)
    if gae_lambda == 1.0:  # GAE(1) is the discounted return minus the baseline
        np.testing.assert_allclose(advantages, (returns - np.nan_to_num(values)) * valids)


def test_gae_rejects_mismatched_shapes_and_bad_factors() -> None:
    rewards, values, valids = ragged(1, [2, 3])
    with pytest.raises(ValueError, match="values has shape"):
        gae_advantages(rewards, values[:, :2], valids, 0.9, 0.9)
    with pytest.raises(ValueError, match="gae_lambda"):
        gae_advantages(rewards, values, valids, 0.9, 1.5)
