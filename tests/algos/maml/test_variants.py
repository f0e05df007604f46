"""MAML's inner losses and outer optimisers (MAML-TRPO, MAML-PPO, MAML-VPG) against independent
computations: central finite differences of the post-update loss for every inner/outer loss pair
(float64, no MuJoCo), the first-order gradient with the inner gradients held constant,
``torch.optim.Adam`` on that gradient, exact resumption, and (slow) MAML-PPO learning PointGoal.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from metabench.algos.base import Policy
from metabench.algos.common.trpo import TRPOStep, flat_grad, flatten, set_flat_params
from metabench.algos.maml import (
    MAML,
    AdamStep,
    GaussianMLPPolicy,
    MAMLConfig,
    TaskData,
    adapt,
    meta_loss,
    old_outputs,
    policy_gradient_loss,
)
from metabench.algos.run_envs import RunEnvs
from metabench.data import EpisodeBatch, StepType
from metabench.harness.algorithms import get_algorithm
from metabench.harness.benchmarks import get_benchmark
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.validation import ConfigError
from tests.factories import make_maml

F64 = torch.float64
POINT_GOAL = "metabench/PointGoal-v0"
LOSSES = ("vpg", "ppo", "trpo")
PAIRS = list(itertools.product(LOSSES, LOSSES))
LR = 0.2
"""The inner step size of the toy problems: two steps of a larger one let the ratio losses blow
up (exp of a large log-ratio), out of reach of float64 finite differences."""


def make_policy(seed: int = 10) -> GaussianMLPPolicy:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy = GaussianMLPPolicy(2, 2, hidden_sizes=(3,)).to(F64)
        with torch.no_grad():
            policy.log_std.copy_(torch.tensor([-0.5, 0.3], dtype=F64))
    return policy


def random_data(n: int, seed: int) -> TaskData:
    generator = torch.Generator().manual_seed(seed)
    return TaskData(
        observations=torch.randn(n, 2, generator=generator, dtype=F64),
        actions=torch.randn(n, 2, generator=generator, dtype=F64),
        advantages=torch.randn(n, generator=generator, dtype=F64),
    )


def post_update_problem(
    inner: str, outer: str, steps: int, old_shift: float = 0.0, clip_range: float = 0.2
) -> tuple[GaussianMLPPolicy, Callable[[bool], torch.Tensor], list[TaskData], list[TaskData]]:
    """A two-task problem and its post-update loss as a function of the policy's parameters.

    The pre-update episodes were collected at the starting parameters: their log-likelihoods
    there are data, held fixed as the parameters move (the behaviour policy of the inner ratio).
    The old post-update policies are frozen at the parameters shifted by ``old_shift`` (so the
    outer ratios start away from 1 and PPO's clipping acts on some steps).
    """
    policy = make_policy()
    train = [random_data(9, seed=11), random_data(8, seed=12)]
    valid = [random_data(10, seed=13), random_data(7, seed=14)]
    with torch.no_grad():
        behaviour = [policy.log_likelihood(d.observations, d.actions) for d in train]
    shifted = {k: v.detach() + old_shift for k, v in policy.params().items()}
    start = [adapt(policy, shifted, d, LR, steps, False, inner, clip_range) for d in train]
    old = old_outputs(policy, start, valid)

    def post_update_loss(create_graph: bool) -> torch.Tensor:
        adapted = [
            adapt(policy, policy.params(), d, LR, steps, create_graph, inner, clip_range, b)
            for d, b in zip(train, behaviour, strict=True)
        ]
        return meta_loss(policy, adapted, valid, old, outer, clip_range)

    return policy, post_update_loss, train, valid


def finite_difference(
    policy: GaussianMLPPolicy, loss: Callable[[bool], torch.Tensor], eps: float = 1e-6
) -> torch.Tensor:
    params = list(policy.parameters())
    theta = flatten([p.detach() for p in params]).clone()
    gradient = torch.zeros_like(theta)
    for i in range(theta.numel()):
        unit = torch.zeros_like(theta)
        unit[i] = eps
        set_flat_params(params, theta + unit)
        plus = loss(False).item()
        set_flat_params(params, theta - unit)
        minus = loss(False).item()
        gradient[i] = (plus - minus) / (2 * eps)
    set_flat_params(params, theta)
    return gradient


# -- the losses ----------------------------------------------------------------------------------
def test_the_three_losses_by_hand() -> None:
    log_likelihood = torch.tensor([0.0, 0.5, -1.0], dtype=F64)
    old = torch.tensor([0.0, 0.0, 0.0], dtype=F64)
    advantages = torch.tensor([1.0, 2.0, -1.0], dtype=F64)
    ratio = torch.exp(log_likelihood)  # 1, 1.65, 0.37
    assert policy_gradient_loss("vpg", log_likelihood, advantages).item() == pytest.approx(
        -(0.0 + 1.0 + 1.0) / 3
    )
    expected_trpo = -(ratio * advantages).mean().item()
    assert policy_gradient_loss("trpo", log_likelihood, advantages, old).item() == pytest.approx(
        expected_trpo
    )
    # clipped at 1.2 (positive advantage) and at 0.8 (negative advantage): min(r A, clip(r) A)
    expected_ppo = -(1.0 * 1.0 + 1.2 * 2.0 + (-1.0) * 0.8) / 3
    assert policy_gradient_loss(
        "ppo", log_likelihood, advantages, old, clip_range=0.2
    ).item() == pytest.approx(expected_ppo)
    with pytest.raises(ValueError, match="one of 'vpg', 'ppo', 'trpo'"):
        policy_gradient_loss("a2c", log_likelihood, advantages, old)
    with pytest.raises(ValueError, match="old policy"):
        policy_gradient_loss("ppo", log_likelihood, advantages)


@pytest.mark.parametrize("inner", LOSSES)
def test_one_inner_step_is_the_same_for_every_inner_loss(inner: str) -> None:
    """At the policy that collected the episodes every ratio is 1: same first gradient."""
    policy = make_policy()
    data = random_data(9, seed=3)
    expected = adapt(policy, policy.params(), data, 0.3, 1, False, "vpg")
    adapted = adapt(policy, policy.params(), data, 0.3, 1, False, inner)
    for name, value in expected.items():
        torch.testing.assert_close(adapted[name], value)


# -- the outer gradient of every inner/outer pair ------------------------------------------------
@pytest.mark.parametrize("steps", [1, 2])
@pytest.mark.parametrize(("inner", "outer"), PAIRS)
def test_meta_gradient_of_every_pair_matches_finite_differences(
    inner: str, outer: str, steps: int
) -> None:
    policy, loss, _, _ = post_update_problem(inner, outer, steps, old_shift=0.05)
    gradient = flat_grad(loss(True), list(policy.parameters()))
    torch.testing.assert_close(gradient, finite_difference(policy, loss), rtol=1e-5, atol=1e-8)


def test_ppo_clipping_acts_in_the_finite_difference_problem() -> None:
    """The shifted old policy puts some outer ratios outside 1 +- 0.2, and the second inner step
    some inner ratios: clipped and unclipped losses differ there (so the check above covers
    the clipped branches)."""
    _, ppo_outer, _, _ = post_update_problem("ppo", "ppo", 2, old_shift=0.05)
    _, trpo_outer, _, _ = post_update_problem("ppo", "trpo", 2, old_shift=0.05)
    assert abs(ppo_outer(False).item() - trpo_outer(False).item()) > 1e-3
    _, trpo_inner, _, _ = post_update_problem("trpo", "trpo", 2, old_shift=0.05)
    assert abs(trpo_outer(False).item() - trpo_inner(False).item()) > 1e-3


def test_ratio_inner_losses_change_the_second_order_term() -> None:
    """The likelihood-ratio inner loss adds grad log pi grad log pi^T A to the inner Hessian."""
    vpg_policy, vpg_loss, _, _ = post_update_problem("vpg", "trpo", 1)
    ratio_policy, ratio_loss, _, _ = post_update_problem("trpo", "trpo", 1)
    vpg_params, ratio_params = list(vpg_policy.parameters()), list(ratio_policy.parameters())
    vpg = flat_grad(vpg_loss(True), vpg_params)
    ratio = flat_grad(ratio_loss(True), ratio_params)
    assert torch.linalg.vector_norm(vpg - ratio) > 0.05 * torch.linalg.vector_norm(vpg)
    # first order, the two agree: the inner gradients are equal and held constant
    torch.testing.assert_close(
        flat_grad(vpg_loss(False), vpg_params), flat_grad(ratio_loss(False), ratio_params)
    )


@pytest.mark.parametrize("steps", [1, 2])
@pytest.mark.parametrize(("inner", "outer"), PAIRS)
def test_first_order_gradient_of_every_pair_holds_the_inner_gradients_constant(
    inner: str, outer: str, steps: int
) -> None:
    """first_order: the meta-gradient is the outer loss's gradient at the adapted parameters,
    taken as leaves and summed over tasks (d theta' / d theta = I)."""
    policy, loss, train, valid = post_update_problem(inner, outer, steps, old_shift=0.05)
    params = list(policy.parameters())
    first_order = flat_grad(loss(False), params)
    # at the starting parameters the behaviour policy is the policy itself (adapt's default)
    shifted = {k: v.detach() + 0.05 for k, v in policy.params().items()}
    start = [adapt(policy, shifted, d, LR, steps, False, inner, 0.2) for d in train]
    old = old_outputs(policy, start, valid)
    leaves = [
        {
            k: v.detach().requires_grad_()
            for k, v in adapt(policy, policy.params(), d, LR, steps, False, inner, 0.2).items()
        }
        for d in train
    ]
    outer_value = meta_loss(policy, leaves, valid, old, outer, 0.2)
    per_task = torch.autograd.grad(outer_value, [v for leaf in leaves for v in leaf.values()])
    n = len(params)
    torch.testing.assert_close(first_order, flatten(per_task[:n]) + flatten(per_task[n:]))


# -- the algorithm -------------------------------------------------------------------------------
def small(**overrides: Any) -> MAML:
    config: dict[str, Any] = {
        "meta_batch_size": 2,
        "episodes_per_task": 2,
        "hidden_sizes": (8,),
        "init_std": 0.5,
        "env_kwargs": {"horizon": 5},
        "seed": 0,
    }
    config.update(overrides)
    return make_maml(POINT_GOAL, **config)


def test_config_defaults_are_maml_trpo() -> None:
    config = MAMLConfig()
    assert (config.inner_loss, config.outer_loss, config.outer_optimizer) == ("vpg", "trpo", "trpo")
    assert (config.outer_lr, config.outer_epochs, config.adam_eps, config.clip_range) == (
        1e-3, 1, 1e-5, 0.5,
    )  # fmt: skip
    with pytest.raises(ValueError, match="outer_epochs > 1 needs outer_optimizer='adam'"):
        MAMLConfig(outer_epochs=2)
    with pytest.raises(ConfigError, match="outer_optimizer must be one of 'trpo', 'adam'"):
        MAMLConfig(outer_optimizer="sgd")
    with pytest.raises(ConfigError, match="inner_loss must be one of"):
        MAMLConfig(inner_loss="a2c")


GARAGE_VARIANTS = {
    "trpo": {"inner_loss": "vpg", "outer_loss": "trpo", "outer_optimizer": "trpo"},
    "ppo": {"inner_loss": "ppo", "outer_loss": "ppo", "outer_optimizer": "adam"},
    "vpg": {"inner_loss": "vpg", "outer_loss": "vpg", "outer_optimizer": "adam"},
}
"""garage's MAMLTRPO, MAMLPPO and MAMLVPG: the inner algorithm's loss (garage's for the inner
step and the meta-loss; MAML-TRPO keeps pytorch-maml-rl's likelihood-ratio meta-loss) and the
meta-optimiser."""


@pytest.mark.parametrize("variant", sorted(GARAGE_VARIANTS))
def test_each_baseline_file_builds_its_variant(variant: str) -> None:
    entry = get_algorithm(f"maml-{variant}")
    values = entry.hyperparameters(get_benchmark("HalfCheetahDir"), {})
    for name, value in GARAGE_VARIANTS[variant].items():
        assert values[name] == value
    algo = entry.build(RunEnvs(get_benchmark("PointGoal")), {**values, "meta_batch_size": 2,
                       "episodes_per_task": 1}, None)  # fmt: skip
    try:
        assert {name: getattr(algo.config, name) for name in GARAGE_VARIANTS[variant]} == (
            GARAGE_VARIANTS[variant]
        )
    finally:
        algo.close()  # type: ignore[attr-defined]
    assert entry.env_kwargs(get_benchmark("HalfCheetahDir")) == {"action_scale": 10.0}
    if variant != "trpo":  # garage's examples: 20 tasks x 40 episodes, 64-64 tanh, Adam 1e-3
        assert (values["meta_batch_size"], values["episodes_per_task"]) == (20, 40)
        assert values["hidden_sizes"] == [64, 64] and values["outer_lr"] == 1e-3
        assert entry.profile("paper", "HalfCheetahDir").steps == 300 * 20 * 40 * 2 * 100


@pytest.mark.parametrize("first_order", [False, True])
@pytest.mark.parametrize("inner", LOSSES)
def test_adam_outer_step_is_torch_adam_on_the_meta_gradient(inner: str, first_order: bool) -> None:
    algo = small(
        inner_loss=inner,
        outer_loss="ppo",
        outer_optimizer="adam",
        outer_lr=0.01,
        first_order=first_order,
    )
    tasks = algo.task_sampler.sample(2, np.random.default_rng(0))
    meta = algo.policy.params()
    train = [algo.process(e) for e in algo.collect(tasks, [meta, meta])]
    adapted = [algo.adapt(meta, d, create_graph=False) for d in train]
    valid = [algo.process(e) for e in algo.collect(tasks, adapted)]

    # independently: the meta-gradient, then one step of a fresh Adam on a copy of the parameters
    params = list(algo.policy.parameters())
    post = [
        adapt(algo.policy, algo.policy.params(), d, 0.1, 1, not first_order, inner, 0.5)
        for d in train
    ]
    old = old_outputs(algo.policy, post, valid)
    gradient = flat_grad(meta_loss(algo.policy, post, valid, old, "ppo", 0.5), params)
    copies = [p.detach().clone().requires_grad_() for p in params]
    reference = torch.optim.Adam(copies, lr=0.01, eps=1e-5)
    offset = 0
    for copy in copies:
        copy.grad = gradient[offset : offset + copy.numel()].view_as(copy).clone()
        offset += copy.numel()
    reference.step()

    record = algo.meta_optimize(train, valid)
    assert isinstance(record, AdamStep) and record.accepted and record.epochs == 1
    assert record.gradient_norm == pytest.approx(float(torch.linalg.vector_norm(gradient)))
    for param, copy in zip(params, copies, strict=True):
        torch.testing.assert_close(param.detach(), copy.detach())
    algo.close()


def test_adam_epochs_and_stats() -> None:
    algo = small(outer_optimizer="adam", inner_loss="ppo", outer_loss="ppo", outer_epochs=3)
    stats = algo.train(1)
    record = algo.history[-1].outer
    assert isinstance(record, AdamStep) and record.epochs == 3
    assert {
        "metatrain/adam_loss_before",
        "metatrain/adam_kl",
        "metatrain/post_update_return",
    } <= set(stats)
    assert not any(key.startswith("metatrain/trpo_") for key in stats)
    algo.close()
    trpo = small()
    assert isinstance(trpo.train(1) and trpo.history[-1].outer, TRPOStep)
    trpo.close()


@pytest.mark.parametrize(
    ("inner", "optimizer"), [("ppo", "adam"), ("vpg", "adam"), ("trpo", "trpo")]
)
def test_every_variant_resumes_exactly(inner: str, optimizer: str) -> None:
    settings = {"inner_loss": inner, "outer_loss": inner, "outer_optimizer": optimizer}
    algo = small(**settings)
    algo.train(1)
    state = algo.state_dict()
    assert ("outer_optimizer" in state) == (optimizer == "adam")
    algo.train(1)
    expected = flatten([p.detach() for p in algo.policy.parameters()])
    resumed = small(seed=7, **settings)
    resumed.load_state_dict(state)
    resumed.train(1)
    assert resumed.history[-1].post_update_return == algo.history[-1].post_update_return
    assert torch.equal(flatten([p.detach() for p in resumed.policy.parameters()]), expected)
    if optimizer == "adam":
        with pytest.raises(ValueError, match="outer_optimizer"):
            resumed.load_state_dict({k: v for k, v in state.items() if k != "outer_optimizer"})
    algo.close()
    resumed.close()


# -- it learns -----------------------------------------------------------------------------------
def rollout(policy: Policy, env: gym.Env[Any, Any], task: Any, n_episodes: int) -> EpisodeBatch:
    """``n_episodes`` episodes of ``policy`` in ``env`` with ``task``, one step at a time
    through the :class:`~metabench.algos.base.Policy` interface (the evaluator's path)."""
    paths = []
    for _ in range(n_episodes):
        obs, _ = env.reset(options={"task": task})
        policy.reset()
        observations, actions, rewards, step_types = [obs], [], [], []
        while True:
            action = policy.get_action(obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(reward)
            step_types.append(
                StepType.get_step_type(len(rewards), None, terminated)
                if not truncated
                else StepType.TIMEOUT
            )
            if terminated or truncated:
                break
        paths.append(
            {
                "observations": np.array(observations),
                "actions": np.array(actions),
                "rewards": np.array(rewards),
                "step_types": np.array(step_types),
            }
        )
    return EpisodeBatch.from_list(paths)


def evaluate(algo: MAML, tasks: list[Any], n_episodes: int) -> tuple[float, float]:
    """Mean return before and after adaptation on ``tasks``, through the meta-test interface."""
    env = PointGoalEnv()
    pre, post = [], []
    for task in tasks:
        exploration = algo.get_exploration_policy()
        episodes = rollout(exploration, env, task, n_episodes)
        pre.append(episodes.episode_returns().mean())
        adapted = algo.adapt_policy(exploration, episodes)
        post.append(rollout(adapted, env, task, n_episodes).episode_returns().mean())
    return float(np.mean(pre)), float(np.mean(post))


@pytest.mark.slow
def test_maml_ppo_meta_learns_point_goal() -> None:
    """MAML-PPO (clipped loss inside and out, Adam) with baselines/maml-ppo.toml's PointGoal
    settings: after 60 iterations one inner step on held-out goals helps clearly, and much more
    than from an untrained policy. Seeds 0, 1, 2 gave post - pre 4.2, 3.8, 3.4 and post -
    untrained post 5.7, 6.6, 5.1."""
    spec = get_benchmark("PointGoal")
    entry = get_algorithm("maml-ppo")
    values = entry.hyperparameters(spec, {})
    assert (values["inner_loss"], values["outer_optimizer"], values["outer_lr"]) == (
        "ppo", "adam", 0.01,
    )  # fmt: skip
    config = MAMLConfig(**values)
    test_tasks = PointGoalEnv().sample_tasks(20, np.random.default_rng(1000))
    untrained = MAML(POINT_GOAL, config=config, seed=0)
    _, untrained_post = evaluate(untrained, test_tasks, 10)
    algo = MAML(POINT_GOAL, config=config, seed=0)
    algo.train(60)
    pre, post = evaluate(algo, test_tasks, 10)
    print(f"untrained post {untrained_post:.2f}; meta-trained pre {pre:.2f} post {post:.2f}")
    assert all(stats.outer.accepted for stats in algo.history)
    assert post > pre + 2.0
    assert post > untrained_post + 3.0
    untrained.close()
    algo.close()
