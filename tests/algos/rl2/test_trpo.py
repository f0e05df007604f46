"""RL2-TRPO: the TRPO step on whole trials against independent computations, exact resume, and
(slow) learning on the Bandit toy."""

import copy
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch as th
from stable_baselines3.common.distributions import kl_divergence

import metabench  # noqa: F401 - registers the ids
from metabench.algos.nop import NOP
from metabench.algos.rl2.recurrent_trpo import CRITIC_PREFIXES, RL2RecurrentTRPO
from metabench.algos.rl2.rl2_trpo import RL2TRPO, RL2TRPOConfig
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark
from metabench.harness.run import make_evaluator
from tests.factories import policy_parameters, straight_and_resumed

SMALL = RL2TRPOConfig(meta_batch_size=4, episodes_per_trial=2, hidden_size=8)
LEARNING_ITERATIONS = 100  # 28,800 env steps; seeds 0, 1, 2 were optimal after about 30


def trial_distribution(algo: RL2TRPO, state: dict) -> tuple:
    """The policy with ``state`` over the last iteration's trials, each from its first step."""
    model = algo.model
    model.policy.load_state_dict(state)
    observations, starts, (states, _) = model._trial_inputs()
    with th.no_grad():
        distribution, _ = model.policy.get_distribution(observations, states, starts)
    return copy.copy(distribution)


@pytest.mark.parametrize("env_id", ["metabench/PointGoal-v0", "metabench/Bandit-v0"])
def test_one_step_stays_in_the_trust_region_and_improves_the_surrogate(env_id):
    algo = RL2TRPO(
        env_id, config=SMALL, seed=1, env_kwargs={"horizon": 3} if "Point" in env_id else None
    )
    before = copy.deepcopy(algo.model.policy.state_dict())
    stats = algo.train(1)
    after = copy.deepcopy(algo.model.policy.state_dict())
    record = algo.model.last_step
    assert record is not None and record.accepted, record
    assert stats["metatrain/trpo_kl"] == record.kl <= SMALL.max_kl

    # independently: both policies over the collected trials, step by step as collected
    buffer = algo.model.rollout_buffer
    old = trial_distribution(algo, before)
    new = trial_distribution(algo, after)
    actions = th.as_tensor(np.swapaxes(buffer.actions, 0, 1).reshape(-1, *buffer.actions.shape[2:]))
    if isinstance(algo.model.action_space, gym.spaces.Discrete):
        actions = actions.long().flatten()
    # the whole-trial pass gives the log-likelihoods the rollout recorded one step at a time
    np.testing.assert_allclose(
        old.log_prob(actions).numpy(),
        np.swapaxes(buffer.log_probs, 0, 1).reshape(-1),
        rtol=1e-5,
        atol=1e-6,
    )
    assert kl_divergence(old, new).mean().item() == pytest.approx(record.kl, rel=1e-5)
    advantages = np.swapaxes(buffer.advantages, 0, 1).reshape(-1)
    advantages = th.as_tensor((advantages - advantages.mean()) / (advantages.std(ddof=1) + 1e-8))
    ratio = th.exp(new.log_prob(actions) - old.log_prob(actions))
    assert -(ratio * advantages).mean().item() == pytest.approx(record.loss_after, rel=1e-4)
    assert record.loss_after < record.loss_before


def test_trpo_moves_the_actor_only():
    algo = RL2TRPO(
        "metabench/Bandit-v0", config=dataclasses.replace(SMALL, value_baseline="critic")
    )
    names = dict(algo.model.policy.named_parameters())
    actor = {id(p) for p in algo.model.actor_parameters()}
    assert actor and all(
        (id(p) in actor) != name.startswith(CRITIC_PREFIXES) for name, p in names.items()
    )
    assert isinstance(algo.model, RL2RecurrentTRPO)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="garage-linear-baseline"),
        pytest.param({"value_baseline": "critic"}, id="critic"),
        pytest.param(
            {"recurrent_cell": "lstm", "entropy_method": "max", "ent_coef": 0.01,
             "normalize_advantage": False},
            id="lstm-max-entropy",
        ),
    ],
)  # fmt: skip
def test_resume_from_state_dict_continues_exactly(options):
    config = dataclasses.replace(SMALL, **options)

    def make():
        return RL2TRPO("metabench/Bandit-v0", config=config, seed=3)

    straight, resumed = straight_and_resumed(make)
    assert resumed.iterations == 2 and resumed.model.num_timesteps == straight.model.num_timesteps
    for a, b in zip(policy_parameters(straight), policy_parameters(resumed), strict=True):
        assert torch.equal(a, b)


def test_checkpoint_of_another_config_is_refused_and_bad_configs_raise():
    state = RL2TRPO("metabench/Bandit-v0", config=SMALL).state_dict()
    other = RL2TRPO("metabench/Bandit-v0", config=dataclasses.replace(SMALL, max_kl=0.02))
    with pytest.raises(ValueError, match="different RL2TRPOConfig"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="max_kl"):
        RL2TRPOConfig(max_kl=0.0)
    with pytest.raises(ValueError, match="normalize_advantage=False"):
        RL2TRPOConfig(entropy_method="max")


def test_defaults_are_garage_s_rl2_trpo_example():
    values = get_algorithm("rl2-trpo").hyperparameters(get_benchmark("HalfCheetahVel"), {})
    assert (values["meta_batch_size"], values["episodes_per_trial"], values["hidden_size"]) == (
        10, 4, 64,
    )  # fmt: skip
    assert (values["recurrent_cell"], values["value_baseline"], values["max_kl"]) == (
        "gru", "linear", 0.01,
    )  # fmt: skip
    assert (values["discount"], values["gae_lambda"], values["normalize_advantage"]) == (
        0.99, 0.98, True,
    )  # fmt: skip
    assert get_algorithm("rl2-trpo").env_kwargs(get_benchmark("HalfCheetahVel")) == {}


@pytest.mark.slow
def test_rl2_trpo_learns_to_search_the_bandit_and_remember_the_arm():
    """Three deterministic arms, one pull per episode, three episodes per trial: finding the
    paying arm for sure takes remembering which arms failed. Optimal: 1/3, 2/3, 1. Seeds 0,
    1, 2 at 100 iterations: third pull 1.0, 1.0, 0.97."""
    spec = get_benchmark("Bandit")
    algo = RL2TRPO(
        spec.env_id,
        config=RL2TRPOConfig(**get_algorithm("rl2-trpo").hyperparameters(spec, {})),
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
