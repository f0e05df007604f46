"""SB3-based algorithms leave nothing in the temporary directory when they log nowhere."""

import tempfile

import pytest

from metabench.algos.reference import MultitaskPPO, ReferenceConfig
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig


@pytest.mark.parametrize("make", ["rl2", "reference"])
def test_training_without_tensorboard_creates_no_folders(tmp_path, monkeypatch, make):
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where SB3 would put them
    if make == "rl2":
        algo = RL2PPO("metabench/Bandit-v0", config=RL2PPOConfig(meta_batch_size=2, hidden_size=4))
    else:
        config = ReferenceConfig(n_envs=4, n_epochs=1, hidden_sizes=(4,))
        algo = MultitaskPPO("metabench/PointGoal-v0", config=config, env_kwargs={"horizon": 4})
    for _ in range(2):  # SB3 configured a logger, and made a folder, at every learn()
        stats = algo.train(1)
    assert stats and list(tmp_path.glob("SB3-*")) == []
