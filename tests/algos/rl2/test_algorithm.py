"""RL2-PPO: trial-shaped rollouts, exact resume, the meta-test policies, and (slow) learning."""

import dataclasses
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch as th

import metabench  # noqa: F401 - registers the ids
from metabench.algos.common.baseline import LinearFeatureBaseline
from metabench.algos.common.sb3 import UnclippedActions
from metabench.algos.nop import NOP
from metabench.algos.rl2 import WholeSequenceGruPolicy, WholeSequenceLstmPolicy
from metabench.algos.rl2.recurrent_ppo import (
    RL2RecurrentPPO,
    linear_baseline_advantages,
    trial_batch,
)
from metabench.algos.rl2.rl2_ppo import RL2PPO, RL2PPOConfig
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.run import make_evaluator
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.wrappers import RL2Env, Trial
from tests.factories import policy_parameters, straight_and_resumed

LEARNING_ITERATIONS = 100  # 19,200 env steps; six seeds tried here were optimal after 50
SMALL = RL2PPOConfig(meta_batch_size=4, episodes_per_trial=2, hidden_size=8, n_epochs=2)


def test_one_iteration_is_one_trial_per_sub_env():
    algo = RL2PPO("metabench/PointGoal-v0", config=SMALL, env_kwargs={"horizon": 3})
    assert algo.trial_length == 6 and algo.steps_per_iteration == 24
    algo.train(2)
    assert algo.env_steps == 48 == algo.model.num_timesteps
    # after training the buffer is flattened env-major: (n_envs * n_steps, 1)
    starts = algo.model.rollout_buffer.episode_starts.reshape(4, 6)
    np.testing.assert_array_equal(starts[:, 0], 1.0)  # the hidden state resets at trial starts only
    np.testing.assert_array_equal(starts[:, 1:], 0.0)


def test_meta_train_stats_cover_each_episode_of_the_trial():
    algo = RL2PPO("metabench/Bandit-v0", config=SMALL)
    stats = algo.train(1)
    assert set(stats) == {
        "metatrain/return_episode_1",
        "metatrain/return_episode_2",
        "metatrain/average_return",
        "metatrain/success_rate",
    }
    assert stats["metatrain/average_return"] == pytest.approx(
        (stats["metatrain/return_episode_1"] + stats["metatrain/return_episode_2"]) / 2
    )


GARAGE_OPTIONS = [
    pytest.param({}, id="defaults"),
    pytest.param({"recurrent_cell": "gru"}, id="gru"),
    pytest.param({"value_baseline": "linear"}, id="linear-baseline"),
    pytest.param({"entropy_method": "max"}, id="max-entropy"),
    pytest.param(
        {"recurrent_cell": "gru", "value_baseline": "linear", "entropy_method": "max"},
        id="all-garage",
    ),
]


@pytest.mark.parametrize("options", GARAGE_OPTIONS)
def test_resume_from_state_dict_continues_exactly(options):
    config = dataclasses.replace(SMALL, **options)

    def make():
        return RL2PPO("metabench/Bandit-v0", config=config, seed=3)

    straight, resumed = straight_and_resumed(make)
    assert resumed.iterations == 2 and resumed.model.num_timesteps == straight.model.num_timesteps
    for a, b in zip(policy_parameters(straight), policy_parameters(resumed), strict=True):
        assert torch.equal(a, b)


def test_checkpoint_of_another_config_is_refused():
    state = RL2PPO("metabench/Bandit-v0", config=SMALL).state_dict()
    other = RL2PPO("metabench/Bandit-v0", config=RL2PPOConfig(meta_batch_size=2))
    with pytest.raises(ValueError, match="different RL2PPOConfig"):
        other.load_state_dict(state)


def test_exploration_policy_keeps_its_state_across_episodes():
    config = RL2PPOConfig(deterministic_eval=True, meta_batch_size=2)
    algo = RL2PPO("metabench/PointGoal-v0", config=config)
    env = algo.wrap_env(Trial(gym.make("metabench/PointGoal-v0").unwrapped, 2))
    obs, _ = env.reset(seed=0)
    kept, fresh = algo.get_exploration_policy(), algo.get_exploration_policy()
    for _ in range(5):
        kept.get_action(obs)
    kept.reset()  # an episode start: RL2 keeps its memory
    assert not np.array_equal(kept.get_action(obs), fresh.get_action(obs))
    again = algo.get_exploration_policy()
    np.testing.assert_array_equal(
        again.get_action(obs), algo.get_exploration_policy().get_action(obs)
    )


def test_adapted_policy_starts_every_test_episode_from_the_explored_state():
    """garage's RL2AdaptedPolicy: each test episode acts from the hidden state exploration
    ended with, not from where the previous test episode left it."""
    config = RL2PPOConfig(deterministic_eval=True, meta_batch_size=2)
    algo = RL2PPO("metabench/PointGoal-v0", config=config)
    env = algo.wrap_env(Trial(gym.make("metabench/PointGoal-v0").unwrapped, 2))
    obs, _ = env.reset(seed=0)
    explored, reference = algo.get_exploration_policy(), algo.get_exploration_policy()
    for _ in range(5):
        explored.get_action(obs)
        reference.get_action(obs)
    adapted = algo.adapt_policy(explored, None)  # type: ignore[arg-type]
    adapted.reset()
    first = [adapted.get_action(obs) for _ in range(3)]
    adapted.reset()
    again = [adapted.get_action(obs) for _ in range(3)]
    expected = [reference.get_action(obs) for _ in range(3)]
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, expected)
    assert not np.array_equal(first[0], first[2])  # the state moves within an episode


def test_wrap_env_adds_rl2_observation_and_rescales_small_action_boxes():
    algo = RL2PPO(
        "metabench/PointGoal-v0", config=RL2PPOConfig(reward_scale=0.5, meta_batch_size=2)
    )
    with warnings.catch_warnings():  # PointGoal's float64 Box, rescaled without a warning
        warnings.simplefilter("error")
        env = algo.wrap_env(Trial(gym.make("metabench/PointGoal-v0").unwrapped, 2))
    assert isinstance(env, gym.wrappers.RescaleAction)
    assert isinstance(env.env, RL2Env) and env.env.reward_scale == 0.5
    np.testing.assert_array_equal(env.action_space.high, [1.0, 1.0])
    env.reset(seed=0)
    obs = env.step(np.array([1.0, -1.0], dtype=np.float32))[0]
    np.testing.assert_allclose(obs[:2], [0.1, -0.1])  # the task env moved by max_step


@pytest.mark.parametrize("clip_actions", [True, False])
def test_clip_actions_decides_whether_the_raw_gaussian_sample_reaches_the_task_env(
    monkeypatch, clip_actions
):
    received: list[np.ndarray] = []
    step = PointGoalEnv.step

    def spy(self, action):
        received.append(np.array(action, dtype=np.float64))
        return step(self, action)

    monkeypatch.setattr(PointGoalEnv, "step", spy)
    config = dataclasses.replace(SMALL, clip_actions=clip_actions, log_std_init=1.0)
    algo = RL2PPO("metabench/PointGoal-v0", config=config, env_kwargs={"horizon": 5}, seed=0)
    algo.train(1)
    training = np.abs(np.array(received))
    received.clear()
    env = algo.wrap_env(Trial(gym.make("metabench/PointGoal-v0", horizon=5).unwrapped, 2))
    assert isinstance(env, UnclippedActions) != clip_actions
    policy = algo.get_exploration_policy()
    policy.reset()
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        obs = env.step(policy.get_action(obs))[0]
        # the previous action in the RL2 observation is the one the task env received
        np.testing.assert_allclose(obs[2:4], received[-1], rtol=1e-6)
    meta_test = np.abs(np.array(received))
    max_step = 0.1  # PointGoal's action bound; the policy's std is e, so samples pass it
    for actions in (training, meta_test):
        if clip_actions:
            assert actions.max() <= max_step + 1e-12
        else:
            assert actions.max() > 3 * max_step


@pytest.mark.parametrize("zero", [True, False])
def test_zero_at_episode_start_reaches_training_and_the_meta_test(zero):
    """The policy's observation at the first step of the second inner episode: zeros after the
    position with the option (Meta-World+'s and garage's input), the ending step without it."""
    horizon = 3
    config = dataclasses.replace(SMALL, zero_at_episode_start=zero)
    algo = RL2PPO("metabench/PointGoal-v0", config=config, env_kwargs={"horizon": horizon})
    assert ("zero_at_episode_start" in algo.state_dict()["config"]) == zero  # recorded when on
    algo.venv.reset()
    action = np.full((config.meta_batch_size, 2), 0.05, dtype=np.float32)
    for _ in range(horizon):
        training = algo.venv.step(action)[0]
    env = algo.wrap_env(Trial(PointGoalEnv(horizon=horizon), config.episodes_per_trial))
    env.reset(seed=0)
    for _ in range(horizon):
        meta_test = env.step(action[0])[0]
    for obs in (*training, meta_test):
        np.testing.assert_array_equal(obs[:2], [0.0, 0.0])  # the next episode's start
        if zero:
            np.testing.assert_array_equal(obs[2:], np.zeros(4))
        else:
            # the env's action: SB3's [-1, 1] scaled to PointGoal's max step of 0.1
            np.testing.assert_allclose(obs[2:4], [0.005, 0.005], rtol=1e-6)
            assert obs[5] == 1.0
    algo.venv.close()


@pytest.mark.parametrize("bad", [{"meta_batch_size": 0}, {"discount": 1.5}, {"learning_rate": 0}])
def test_bad_config_raises(bad):
    with pytest.raises(ValueError):
        RL2PPOConfig(**bad)


@pytest.mark.parametrize(
    ("field", "valid"),
    [
        ("value_baseline", "'critic', 'linear'"),
        ("recurrent_cell", "'lstm', 'gru'"),
        ("entropy_method", "'regularized', 'max'"),
    ],
)
def test_unknown_component_names_the_valid_choices(field, valid):
    with pytest.raises(ValueError, match=f"{field} must be one of {valid}, got 'garage'"):
        RL2PPOConfig(**{field: "garage"})


def test_max_entropy_refuses_normalised_advantages():
    with pytest.raises(ValueError, match="normalize_advantage=False"):
        RL2PPOConfig(entropy_method="max", normalize_advantage=True)


def test_policy_class_must_build_the_configured_cell():
    with pytest.raises(ValueError, match="'gru' cell"):
        RL2PPO(
            "metabench/Bandit-v0",
            config=dataclasses.replace(SMALL, recurrent_cell="gru"),
            policy_class=WholeSequenceLstmPolicy,
        )


def test_component_fields_are_recorded_with_the_hyperparameters():
    """The harness records the resolved hyperparameters (``dataclasses.asdict`` of the config),
    so the components appear in every result's config and checkpoint."""
    values = get_algorithm("rl2-ppo").hyperparameters(get_benchmark("Bandit"), {})
    assert values["value_baseline"] == "critic"
    assert values["recurrent_cell"] == "lstm"
    assert values["entropy_method"] == "regularized"
    config = dataclasses.replace(SMALL, recurrent_cell="gru", value_baseline="linear")
    state = RL2PPO("metabench/Bandit-v0", config=config).state_dict()
    assert state["config"]["recurrent_cell"] == "gru"
    assert state["config"]["value_baseline"] == "linear"


def test_gru_cell_is_used_for_rollouts_and_training():
    config = dataclasses.replace(SMALL, recurrent_cell="gru")
    algo = RL2PPO("metabench/PointGoal-v0", config=config, env_kwargs={"horizon": 3})
    policy = algo.model.policy
    assert isinstance(policy, WholeSequenceGruPolicy)
    assert isinstance(policy.lstm_actor, th.nn.GRU) and policy.lstm_actor.hidden_size == 8
    before = policy_parameters(algo)
    algo.train(1)
    assert any(not torch.equal(a, b) for a, b in zip(before, policy_parameters(algo), strict=True))
    np.testing.assert_array_equal(algo.model.rollout_buffer.cell_states_pi, 0.0)  # c unused


def gaussian_entropy(algo: RL2PPO) -> float:
    """Entropy of the state-independent diagonal Gaussian policy, from its log-std alone."""
    log_std = algo.model.policy.log_std.detach().numpy().astype(np.float64)
    return float(np.sum(log_std + 0.5 * np.log(2.0 * np.pi * np.e)))


def skip_updates(algo: RL2PPO) -> None:
    """Collect rollouts without training, leaving the buffer in its (n_steps, n_envs) layout."""
    algo.model.train = lambda: None  # type: ignore[method-assign]


@pytest.mark.parametrize("entropy_method", ["regularized", "max"])
def test_linear_baseline_advantages_equal_an_independent_computation(entropy_method):
    """garage's RL2 advantages: a linear feature baseline fitted over each whole trial (time
    counted from the trial start) to the discounted returns, GAE from its predictions with the
    value after the trial's last step 0; with ``max`` the entropy is added to every reward."""
    config = dataclasses.replace(
        SMALL, value_baseline="linear", entropy_method=entropy_method, discount=0.9, gae_lambda=0.8
    )
    algo = RL2PPO("metabench/PointGoal-v0", config=config, seed=5, env_kwargs={"horizon": 10})
    skip_updates(algo)
    stats = algo.train(1)
    buffer = algo.model.rollout_buffer
    length, n_trials = buffer.rewards.shape
    assert (length, n_trials) == (20, 4)
    observations = np.swapaxes(buffer.observations, 0, 1).astype(np.float64)  # (N, T, obs)
    rewards = buffer.rewards.T.astype(np.float64)
    if entropy_method == "max":
        # the buffer holds the augmented rewards; the raw ones are the env's
        bonus = 0.02 * gaussian_entropy(algo)
        assert bonus > 0.02
        raw = rewards - bonus
    else:
        raw = rewards
    # the env's own episode returns: no value was bootstrapped into the rewards
    episode_returns = raw.reshape(n_trials, 2, 10).sum(axis=2).mean(axis=0)
    np.testing.assert_allclose(
        episode_returns,
        [stats["metatrain/return_episode_1"], stats["metatrain/return_episode_2"]],
        rtol=1e-5,
    )

    # features: obs clipped to +-10, its square, t/100 and its powers, 1; t from the trial start
    t = np.broadcast_to(np.arange(length)[None, :, None] / 100.0, (n_trials, length, 1))
    clipped = np.clip(observations, -10, 10)
    features = np.concatenate(
        [clipped, clipped**2, t, t**2, t**3, np.ones_like(t)], axis=2
    ).reshape(n_trials * length, -1)
    returns = np.zeros_like(rewards)
    running = np.zeros(n_trials)
    for step in reversed(range(length)):
        running = rewards[:, step] + 0.9 * running
        returns[:, step] = running
    # ridge least squares (reg 1e-5) as an ordinary least-squares problem on stacked rows
    reg = 1e-5
    n_features = features.shape[1]
    stacked = np.vstack([features, np.sqrt(reg) * np.eye(n_features)])
    targets = np.concatenate([returns.ravel(), np.zeros(n_features)])
    coeffs = np.linalg.lstsq(stacked, targets, rcond=None)[0]
    baseline = algo.model.linear_baseline
    assert baseline is not None and baseline.fitted_reg_coeff == reg
    values = (features @ coeffs).reshape(n_trials, length)
    np.testing.assert_allclose(features @ baseline.coeffs, values.ravel(), rtol=1e-6, atol=1e-8)

    advantages = np.zeros_like(rewards)
    running = np.zeros(n_trials)
    for step in reversed(range(length)):
        next_value = values[:, step + 1] if step + 1 < length else 0.0
        delta = rewards[:, step] + 0.9 * next_value - values[:, step]
        running = delta + 0.9 * 0.8 * running
        advantages[:, step] = running
    np.testing.assert_allclose(buffer.advantages.T, advantages, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(buffer.values.T, values, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(buffer.returns.T, returns, rtol=1e-5, atol=1e-5)


def test_linear_baseline_fitted_per_trial_equals_one_ridge_fit_per_trial():
    """Meta-World+'s RL2 baseline (``linear_baseline_fit="trial"``): each trial's values come
    from a ridge fit on that trial alone, not from one fit on all trials of the iteration."""
    config = dataclasses.replace(
        SMALL, value_baseline="linear", linear_baseline_fit="trial", discount=0.9, gae_lambda=0.8
    )
    algo = RL2PPO("metabench/PointGoal-v0", config=config, seed=3, env_kwargs={"horizon": 10})
    skip_updates(algo)
    algo.train(1)
    buffer = algo.model.rollout_buffer
    length, n_trials = buffer.rewards.shape
    observations = np.clip(np.swapaxes(buffer.observations, 0, 1).astype(np.float64), -10, 10)
    rewards = buffer.rewards.T.astype(np.float64)
    t = np.arange(length)[:, None] / 100.0
    returns = np.zeros_like(rewards)
    running = np.zeros(n_trials)
    for step in reversed(range(length)):
        running = rewards[:, step] + 0.9 * running
        returns[:, step] = running

    def ridge_values(obs: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Ridge least squares (reg 1e-5) as ordinary least squares on stacked rows."""
        times = np.broadcast_to(t, (*obs.shape[:-1], 1)).reshape(-1, 1)
        flat = obs.reshape(-1, obs.shape[-1])
        features = np.hstack([flat, flat**2, times, times**2, times**3, np.ones_like(times)])
        n_features = features.shape[1]
        stacked = np.vstack([features, np.sqrt(1e-5) * np.eye(n_features)])
        padded = np.concatenate([targets.ravel(), np.zeros(n_features)])
        coeffs = np.linalg.lstsq(stacked, padded, rcond=None)[0]
        return (features @ coeffs).reshape(targets.shape)

    per_trial = np.stack([ridge_values(observations[i], returns[i]) for i in range(n_trials)])
    np.testing.assert_allclose(buffer.values.T, per_trial, rtol=1e-5, atol=1e-5)
    # and not what one fit on all trials gives
    joint = ridge_values(observations, returns)
    assert np.abs(per_trial - joint).max() > 1e-3
    advantages = np.zeros_like(rewards)
    running = np.zeros(n_trials)
    for step in reversed(range(length)):
        next_value = per_trial[:, step + 1] if step + 1 < length else 0.0
        running = rewards[:, step] + 0.9 * next_value - per_trial[:, step] + 0.72 * running
        advantages[:, step] = running
    np.testing.assert_allclose(buffer.advantages.T, advantages, rtol=1e-5, atol=1e-5)


METAWORLD_PLUS_ADVANTAGES = Path(__file__).parents[2] / "data" / "metaworld_plus_rl2_advantages.npz"
"""Meta-World+'s own RL2 advantages, computed with its code: metaworld-algorithms at a2abf6a3bb1e,
``RL2.compute_advantages`` (per-task linear baseline over the whole trial, GAE; gamma 0.99,
lambda 0.95, no normalisation), numpy on the CPU, on 2 random trials of 120 steps with an inner
episode starting at step 60 (``(T, trials, ...)``: ``observations``, ``rewards``, and its
baseline ``values`` and GAE ``advantages``; its ``returns`` are the GAE returns, advantages plus
values)."""


def test_linear_baseline_fitted_per_trial_gives_metaworld_plus_own_advantages():
    ref = np.load(METAWORLD_PLUS_ADVANTAGES, allow_pickle=False)
    rewards = ref["rewards"]
    trials = trial_batch(ref["observations"], np.zeros((*rewards.shape, 1)), rewards)
    advantages, _, values = linear_baseline_advantages(
        trials, LinearFeatureBaseline(), 0.99, 0.95, "trial"
    )
    # Meta-World+ computes in float32: tolerances relative to the largest value
    np.testing.assert_allclose(values, ref["values"].T, atol=1e-5 * np.abs(ref["values"]).max())
    scale = np.abs(ref["advantages"]).max()
    np.testing.assert_allclose(advantages, ref["advantages"].T, atol=1e-5 * scale)


def test_linear_baseline_fit_per_trial_needs_the_linear_baseline():
    with pytest.raises(ValueError, match="value_baseline='linear'"):
        dataclasses.replace(SMALL, linear_baseline_fit="trial")


def test_linear_baseline_trains_no_critic():
    config = dataclasses.replace(SMALL, value_baseline="linear")
    algo = RL2PPO("metabench/PointGoal-v0", config=config, env_kwargs={"horizon": 3})
    policy = algo.model.policy
    assert policy.lstm_critic is None  # no critic recurrent pass
    assert algo.model.vf_coef == 0.0
    critic = {name for name, p in policy.named_parameters() if not p.requires_grad}
    assert critic == {"critic.weight", "critic.bias", "value_net.weight", "value_net.bias"}
    before = dict(policy.named_parameters())
    before = {name: p.detach().clone() for name, p in before.items()}
    algo.train(2)
    for name, p in policy.named_parameters():
        if name in critic:
            th.testing.assert_close(p, before[name], rtol=0, atol=0)
        else:
            assert not th.equal(p, before[name]), name
    th.testing.assert_close(policy.value_net.weight, th.zeros_like(policy.value_net.weight))


def test_linear_baseline_refuses_rollouts_that_are_not_whole_trials():
    """Outside RL2PPO, a rollout that cuts trials (CartPole episodes end anywhere) is refused
    rather than fitted with time features counted from the wrong step."""
    model = RL2RecurrentPPO(
        WholeSequenceLstmPolicy,
        "CartPole-v1",
        n_steps=64,
        batch_size=64,
        seed=0,
        device="cpu",
        vf_coef=0.0,
        value_baseline="linear",
        policy_kwargs={"lstm_hidden_size": 8, "enable_critic_lstm": False},
    )
    with pytest.raises(ValueError, match="one whole trial per sub-env"):
        model.learn(64)


def test_max_entropy_adds_the_entropy_to_every_reward_and_leaves_the_loss():
    """Same seed, same rollouts: with the critic, ``max`` changes each advantage by exactly
    ``ent_coef * H * sum_k (gamma * lambda)**k`` over the rest of the trial (the critic's values
    and bootstrap are the same), and the loss has no entropy term."""
    runs = {}
    for method in ("regularized", "max"):
        config = dataclasses.replace(SMALL, entropy_method=method)
        algo = RL2PPO("metabench/PointGoal-v0", config=config, seed=2, env_kwargs={"horizon": 5})
        skip_updates(algo)
        algo.train(1)
        runs[method] = algo
    regularized, maximum = runs["regularized"], runs["max"]
    assert regularized.model.ent_coef == 0.02 and maximum.model.ent_coef == 0.0
    assert maximum.model.policy_ent_coeff == 0.02
    bonus = 0.02 * gaussian_entropy(maximum)
    old, new = regularized.model.rollout_buffer, maximum.model.rollout_buffer
    np.testing.assert_array_equal(new.observations, old.observations)
    np.testing.assert_allclose(new.rewards - old.rewards, bonus, rtol=1e-5)
    length = old.rewards.shape[0]
    decay = 0.99 * 0.95
    remaining = np.array([sum(decay**k for k in range(length - t)) for t in range(length)])
    np.testing.assert_allclose(
        new.advantages - old.advantages,
        np.broadcast_to(bonus * remaining[:, None], old.advantages.shape),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.slow
def test_rl2_learns_to_search_the_bandit_and_remember_the_arm():
    """Three deterministic arms, one pull per episode, three episodes per trial: finding the
    paying arm for sure takes remembering which arms failed. Optimal: 1/3, 2/3, 1."""
    spec = get_benchmark("Bandit")
    algo = RL2PPO(
        spec.env_id,
        config=RL2PPOConfig(**get_algorithm("rl2-ppo").hyperparameters(spec, {})),
        seed=0,
        env_kwargs=spec.train_env_kwargs(0),
    )
    evaluator = make_evaluator(spec, seed=0)
    before = evaluator.evaluate(algo)
    algo.train(LEARNING_ITERATIONS)
    after = evaluator.evaluate(algo)
    nop = evaluator.evaluate(NOP(gym.make(spec.env_id).action_space))
    first, second, third = after.return_per_episode
    assert third >= 0.9 and second >= first + 0.2, after.return_per_episode
    assert after.test_return >= nop.test_return + 0.3
    assert after.test_return >= before.test_return + 0.3
