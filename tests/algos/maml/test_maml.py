"""MAML-TRPO against independent computations, and proof that it meta-learns PointGoal.

Golden values: closed-form Gaussian policy gradients, SGD on a separately built module,
central finite differences of the post-update loss (float64), ``numpy.linalg.lstsq``, and plain
Python loops for returns and GAE. The episode collector is checked against rewards recomputed
from the goals and against the actions its batched actor returned.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from torch import nn
from torch.distributions import Normal
from torch.func import functional_call, vmap

from metabench.algos.common import trpo
from metabench.algos.common.baseline import LinearFeatureBaseline
from metabench.algos.common.returns import discounted_returns, gae_advantages
from metabench.algos.common.trpo import TRPOStep, flat_grad, flatten, set_flat_params
from metabench.algos.maml import (
    MAML,
    BatchedGaussianActor,
    GaussianMLPPolicy,
    GaussianPolicy,
    TaskData,
    VectorEpisodeCollector,
    adapt,
    check_policy_spaces,
    inner_loss,
    kl,
    meta_loss,
    old_outputs,
    process_episodes,
)
from metabench.algos.maml import maml as maml_module
from metabench.data import StepType
from metabench.tasks.base import ListTaskSampler
from metabench.tasks.toy.envs import PointGoalEnv
from metabench.vector import MetaBatchVectorEnv, make_task_vec_env
from metabench.wrappers import Trial
from tests.factories import episode_batch, make_maml

F64 = torch.float64
POINT_GOAL = "metabench/PointGoal-v0"


# -- helpers -------------------------------------------------------------------------------------
def make_policy(
    hidden: tuple[int, ...] = (3,), obs_dim: int = 2, act_dim: int = 2, seed: int = 0
) -> GaussianMLPPolicy:
    """A float64 policy with seeded weights and a non-trivial log-std."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy = GaussianMLPPolicy(obs_dim, act_dim, hidden_sizes=hidden).to(F64)
        with torch.no_grad():
            policy.log_std.copy_(torch.linspace(-0.5, 0.3, act_dim, dtype=F64))
    return policy


def random_data(policy: GaussianMLPPolicy, n: int, seed: int) -> TaskData:
    """Observations, actions and (not normalised) advantages drawn at random."""
    generator = torch.Generator().manual_seed(seed)
    return TaskData(
        observations=torch.randn(n, policy.obs_dim, generator=generator, dtype=F64),
        actions=torch.randn(n, policy.action_dim, generator=generator, dtype=F64),
        advantages=torch.randn(n, generator=generator, dtype=F64),
    )


def small_maml(**overrides: Any) -> MAML:
    """A MAML on PointGoal small enough for fast tests."""
    config: dict[str, Any] = {
        "meta_batch_size": 2,
        "episodes_per_task": 2,
        "hidden_sizes": (8,),
        "init_std": 0.1,
        "env_kwargs": {"horizon": 5},
        "seed": 0,
    }
    config.update(overrides)
    return make_maml(POINT_GOAL, **config)


# -- policy --------------------------------------------------------------------------------------
def test_functional_forward_uses_the_given_params_and_leaves_the_module_alone() -> None:
    policy = make_policy(hidden=(4,), seed=1)
    other = make_policy(hidden=(4,), seed=2)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    obs = torch.randn(7, 2, dtype=F64)
    mean, log_std = policy.mean_log_std(obs, other.params())
    expected_mean, expected_log_std = other(obs)
    torch.testing.assert_close(mean, expected_mean)
    torch.testing.assert_close(log_std, expected_log_std)
    for name, value in policy.state_dict().items():
        assert torch.equal(value, before[name]), f"{name} changed"
    # the log-likelihood is the independent-Gaussian density, written out
    actions = torch.randn(7, 2, dtype=F64)
    std = expected_log_std.exp()
    closed_form = (
        -0.5 * ((actions - expected_mean) / std) ** 2
        - expected_log_std
        - 0.5 * math.log(2 * math.pi)
    ).sum(-1)
    torch.testing.assert_close(policy.log_likelihood(obs, actions, other.params()), closed_form)


def test_functional_forward_is_functional_calls_bit_for_bit_with_gradients_and_vmap() -> None:
    """The layers applied to a parameter set give what ``torch.func.functional_call`` gives
    (the module with those tensors swapped in), bit for bit: outputs, gradients of a loss
    through them to the parameters, and the same under ``vmap`` over stacked sets."""
    policy = make_policy(hidden=(5, 4), obs_dim=3, seed=1).float()
    sets = [make_policy(hidden=(5, 4), obs_dim=3, seed=s).float().params() for s in (2, 3)]
    obs = torch.randn(6, 3)

    def loss(outputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        mean, log_std = outputs
        return (mean.sin() * log_std.exp()).sum()

    params = {name: value.detach().requires_grad_() for name, value in sets[0].items()}
    ours = policy.mean_log_std(obs, params)
    theirs = functional_call(policy, params, (obs,))
    for a, b in zip(ours, theirs, strict=True):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()
    ours_grads = torch.autograd.grad(loss(ours), list(params.values()))
    theirs_grads = torch.autograd.grad(loss(theirs), list(params.values()))
    for a, b in zip(ours_grads, theirs_grads, strict=True):
        assert a.numpy().tobytes() == b.numpy().tobytes()
    stacked = {name: torch.stack([s[name].detach() for s in sets]) for name in sets[0]}
    grouped = torch.randn(2, 4, 3)
    ours = vmap(policy.mean_log_std)(grouped, stacked)
    theirs = vmap(lambda o, p: functional_call(policy, p, (o,)))(grouped, stacked)
    for a, b in zip(ours, theirs, strict=True):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_policy_from_spaces_and_space_checks() -> None:
    env = PointGoalEnv()
    policy = GaussianMLPPolicy.from_spaces(env.observation_space, env.action_space, (4,))
    assert (policy.obs_dim, policy.action_dim, policy.hidden_sizes) == (2, 2, (4,))
    check_policy_spaces(policy, env.observation_space, env.action_space)
    with pytest.raises(ValueError, match="flat Box action space"):
        GaussianMLPPolicy.from_spaces(env.observation_space, spaces.Discrete(3))
    wrong = GaussianMLPPolicy(3, 2, hidden_sizes=(4,))
    with pytest.raises(ValueError, match="3-dim observations"):
        check_policy_spaces(wrong, env.observation_space, env.action_space)


def test_gaussian_policy_adapter_samples_from_its_own_params() -> None:
    module = make_policy(hidden=(4,), seed=3).float()
    params = make_policy(hidden=(4,), seed=4).float().params()
    obs = np.array([0.2, -0.1])
    mean, log_std = module.mean_log_std(torch.as_tensor(obs, dtype=torch.float32), params)
    greedy = GaussianPolicy(module, params, deterministic=True)
    np.testing.assert_allclose(greedy.get_action(obs), mean.detach().numpy())
    sampling = GaussianPolicy(module, params, generator=torch.Generator().manual_seed(5))
    noise = torch.randn(2, generator=torch.Generator().manual_seed(5))
    expected = (mean + log_std.exp() * noise).detach().numpy()
    np.testing.assert_allclose(sampling.get_action(obs), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="one env at a time"):
        greedy.get_action(np.zeros((3, 2)))


# -- inner step ------------------------------------------------------------------------------------
def test_inner_step_of_a_linear_policy_matches_the_closed_form_gradient() -> None:
    """``mu = W s + b``: ``d log pi / d mu = (a - mu) / sigma^2`` and
    ``d log pi / d log_sigma = (a - mu)^2 / sigma^2 - 1``, written out in numpy."""
    policy = make_policy(hidden=(), seed=6)
    data = random_data(policy, 11, seed=7)
    lr = 0.3
    w = policy.params()["mean_net.0.weight"].detach().numpy()
    b = policy.params()["mean_net.0.bias"].detach().numpy()
    log_std = policy.log_std.detach().numpy()
    obs, actions, adv = (t.numpy() for t in data)
    mu = obs @ w.T + b
    var = np.exp(2 * log_std)
    d_mu = (actions - mu) / var  # (M, act)
    m = len(adv)
    grad_w = -((adv[:, None] * d_mu).T @ obs) / m
    grad_b = -(adv[:, None] * d_mu).sum(0) / m
    grad_log_std = -(adv[:, None] * ((actions - mu) ** 2 / var - 1)).sum(0) / m

    log_pi = (-0.5 * (actions - mu) ** 2 / var - log_std - 0.5 * math.log(2 * math.pi)).sum(1)
    loss = inner_loss(policy, policy.params(), data)
    assert loss.item() == pytest.approx(-(log_pi * adv).mean(), rel=1e-12)

    adapted = adapt(policy, policy.params(), data, lr, 1, create_graph=False)
    np.testing.assert_allclose(adapted["mean_net.0.weight"].detach(), w - lr * grad_w, rtol=1e-12)
    np.testing.assert_allclose(adapted["mean_net.0.bias"].detach(), b - lr * grad_b, rtol=1e-12)
    np.testing.assert_allclose(adapted["log_std"].detach(), log_std - lr * grad_log_std, rtol=1e-12)


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_inner_steps_match_sgd_on_a_separately_built_module(steps: int) -> None:
    """garage broke with more than one inner step; here 1, 2 and 3 steps equal plain
    ``torch.optim.SGD`` on an ``nn.Module`` with copied weights and the loss written out."""
    policy = make_policy(hidden=(5,), seed=8)
    data = random_data(policy, 13, seed=9)
    lr = 0.2
    mean_net = nn.Sequential(nn.Linear(2, 5), nn.Tanh(), nn.Linear(5, 2)).to(F64)
    mean_net.load_state_dict(policy.mean_net.state_dict())
    log_std = nn.Parameter(policy.log_std.detach().clone())
    optimizer = torch.optim.SGD([*mean_net.parameters(), log_std], lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        log_pi = Normal(mean_net(data.observations), log_std.exp()).log_prob(data.actions).sum(-1)
        (-(log_pi * data.advantages).mean()).backward()
        optimizer.step()

    adapted = adapt(policy, policy.params(), data, lr, steps, create_graph=True)
    for name, expected in [*(("mean_net." + k, v) for k, v in mean_net.named_parameters())]:
        torch.testing.assert_close(adapted[name].detach(), expected.detach())
    torch.testing.assert_close(adapted["log_std"].detach(), log_std.detach())
    assert torch.equal(policy.log_std.detach(), make_policy(hidden=(5,), seed=8).log_std.detach())


@pytest.mark.parametrize(
    ("inner_lr", "steps", "match"),
    [
        (0.0, 1, "inner_lr"),
        (-0.1, 1, "inner_lr"),
        (0.1, 0, "num_grad_updates"),
        (0.1, 1.5, "integer"),
    ],
)
def test_adapt_rejects_bad_inner_settings(inner_lr: float, steps: Any, match: str) -> None:
    policy = make_policy()
    with pytest.raises(ValueError, match=match):
        adapt(policy, policy.params(), random_data(policy, 3, 0), inner_lr, steps, True)


# -- meta-gradient -------------------------------------------------------------------------------
def meta_problem(
    steps: int, lr: float = 0.5
) -> tuple[GaussianMLPPolicy, Callable[[bool], torch.Tensor], list[TaskData], list[Any]]:
    """A float64 two-task MAML problem and its post-update loss as a function of the
    policy's current parameters (the old policies frozen at the starting point)."""
    policy = make_policy(hidden=(3,), seed=10)
    train = [random_data(policy, 9, seed=11), random_data(policy, 8, seed=12)]
    valid = [random_data(policy, 10, seed=13), random_data(policy, 7, seed=14)]
    start = [adapt(policy, policy.params(), d, lr, steps, create_graph=False) for d in train]
    old = old_outputs(policy, start, valid)

    def post_update_loss(create_graph: bool) -> torch.Tensor:
        adapted = [adapt(policy, policy.params(), d, lr, steps, create_graph) for d in train]
        return meta_loss(policy, adapted, valid, old)

    return policy, post_update_loss, train, old


@pytest.mark.parametrize("steps", [1, 2])
def test_meta_gradient_matches_central_finite_differences(steps: int) -> None:
    policy, post_update_loss, _, _ = meta_problem(steps)
    params = list(policy.parameters())
    gradient = flat_grad(post_update_loss(True), params)
    theta = flatten([p.detach() for p in params]).clone()
    eps = 1e-6
    finite_difference = torch.zeros_like(theta)
    for i in range(theta.numel()):
        unit = torch.zeros_like(theta)
        unit[i] = eps
        set_flat_params(params, theta + unit)
        plus = post_update_loss(False).item()
        set_flat_params(params, theta - unit)
        minus = post_update_loss(False).item()
        finite_difference[i] = (plus - minus) / (2 * eps)
    set_flat_params(params, theta)
    torch.testing.assert_close(gradient, finite_difference, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("steps", [1, 2])
def test_first_order_gradient_equals_the_gradient_with_inner_gradients_detached(
    steps: int,
) -> None:
    policy, post_update_loss, train, old = meta_problem(steps)
    params = list(policy.parameters())
    second_order = flat_grad(post_update_loss(True), params)
    first_order = flat_grad(post_update_loss(False), params)

    # Independently: with the inner gradients constant, d theta' / d theta = I, so the
    # first-order meta-gradient is the post-update loss's gradient at the adapted parameters.
    valid = [random_data(policy, 10, seed=13), random_data(policy, 7, seed=14)]
    leaves = [
        {
            k: v.detach().requires_grad_()
            for k, v in adapt(policy, policy.params(), d, 0.5, steps, False).items()
        }
        for d in train
    ]
    loss = meta_loss(policy, leaves, valid, old)
    per_task = torch.autograd.grad(loss, [v for leaf in leaves for v in leaf.values()])
    n = len(params)
    expected = flatten(per_task[:n]) + flatten(per_task[n:])
    torch.testing.assert_close(first_order, expected)
    # and the second-order term is not negligible in this problem
    difference = torch.linalg.vector_norm(second_order - first_order)
    assert difference > 0.05 * torch.linalg.vector_norm(second_order)


def test_meta_loss_and_kl_at_the_old_policy() -> None:
    """At the starting point the ratio is 1 (loss = -mean advantage) and the KL is 0."""
    policy, _, train, old = meta_problem(1)
    valid = [random_data(policy, 10, seed=13), random_data(policy, 7, seed=14)]
    adapted = [adapt(policy, policy.params(), d, 0.5, 1, create_graph=True) for d in train]
    expected = -torch.stack([d.advantages.mean() for d in valid]).mean()
    torch.testing.assert_close(meta_loss(policy, adapted, valid, old), expected)
    assert kl(policy, adapted, valid, old).item() == pytest.approx(0.0, abs=1e-12)


# -- advantages ---------------------------------------------------------------------------------
def test_process_episodes_normalises_gae_of_the_fitted_baseline() -> None:
    episodes = episode_batch(4, [5, 5, 3], obs_dim=2)
    data = process_episodes(episodes, discount=0.9, gae_lambda=0.8, dtype=F64)
    valids = episodes.valids
    returns = discounted_returns(episodes.padded_rewards, valids, 0.9)
    baseline = LinearFeatureBaseline()
    baseline.fit(episodes, returns[valids > 0])
    values = episodes.padded(baseline.predict(episodes))
    raw = gae_advantages(episodes.padded_rewards, values, valids, 0.9, 0.8)[valids > 0]
    expected = (raw - raw.mean()) / (raw.std() + 1e-8)
    np.testing.assert_allclose(data.advantages.numpy(), expected, rtol=1e-10)
    np.testing.assert_array_equal(data.observations.numpy(), episodes.observations)
    np.testing.assert_array_equal(data.actions.numpy(), episodes.actions)


def test_advantage_scale_variance_divides_the_centred_advantages_by_their_variance() -> None:
    """Meta-World+'s ``normalize_advantages``: ``(A - mean) / (var + 1e-8)``, recomputed here
    from the unnormalised advantages; the MAML option reaches the algorithm's processing."""
    episodes = episode_batch(4, [5, 5, 3], obs_dim=2)
    raw = process_episodes(episodes, 0.9, 0.8, F64, normalize=False).advantages.numpy()
    data = process_episodes(episodes, 0.9, 0.8, F64, scale="variance")
    expected = (raw - raw.mean()) / (np.var(raw) + 1e-8)
    np.testing.assert_allclose(data.advantages.numpy(), expected, rtol=1e-10)
    assert not np.allclose(expected, (raw - raw.mean()) / (raw.std() + 1e-8))
    algo = small_maml(advantage_scale="variance")
    raw = process_episodes(
        episodes, algo.config.discount, algo.config.gae_lambda, F64, normalize=False
    )
    flat = raw.advantages.numpy()
    processed = algo.process(episodes).advantages.numpy()
    np.testing.assert_allclose(processed, (flat - flat.mean()) / (np.var(flat) + 1e-8), rtol=1e-5)


def test_xavier_weight_init_draws_glorot_bounds_and_zero_biases() -> None:
    torch.manual_seed(0)
    policy = GaussianMLPPolicy(40, 6, hidden_sizes=(512, 512), weight_init="xavier")
    linears = [m for m in policy.mean_net if isinstance(m, nn.Linear)]
    assert len(linears) == 3
    for layer in linears:
        fan_out, fan_in = layer.weight.shape
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        weights = layer.weight.detach().numpy()
        assert np.abs(weights).max() <= bound
        assert weights.std() == pytest.approx(bound / math.sqrt(3.0), rel=0.05)  # uniform's std
        assert not layer.bias.detach().any()
    assert torch.equal(policy.log_std.detach(), torch.zeros(6))  # init_std 1.0
    algo = small_maml(weight_init="xavier")
    assert all(not m.bias.detach().any() for m in algo.policy.mean_net if isinstance(m, nn.Linear))
    with pytest.raises(ValueError, match="weight_init"):
        GaussianMLPPolicy(2, 2, weight_init="glorot")


# -- sampler -------------------------------------------------------------------------------------
class RecordingActor:
    """A deterministic actor that remembers every batch it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray]] = []

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        n = len(observations)
        actions = 0.05 * np.tanh(observations[:, :1] + np.arange(n)[:, None] * 0.1)
        actions = np.repeat(actions, 2, axis=1) if observations.shape[1] == 2 else actions
        self.calls.append((observations.copy(), actions))
        return actions


def test_collector_returns_per_task_batches_from_one_batched_actor() -> None:
    vec_env = make_task_vec_env(POINT_GOAL, 6, env_kwargs={"horizon": 5})
    collector = VectorEpisodeCollector(vec_env, episodes_per_task=3)
    tasks = [{"goal": [0.3, -0.2]}, {"goal": [-0.4, 0.1]}]
    actor = RecordingActor()
    batches = collector.collect(tasks, actor, seed=0)

    assert len(actor.calls) == 5  # one forward per time step, not one per sub-env
    assert all(obs.shape == (6, 2) for obs, _ in actor.calls)
    assert len(batches) == 2
    for k, (batch, task) in enumerate(zip(batches, tasks, strict=True)):
        assert batch.n_episodes == 3
        assert batch.lengths.tolist() == [5, 5, 5]
        assert list(batch.episode_infos["task"]) == [task] * 3
        types = [StepType.FIRST, StepType.MID, StepType.MID, StepType.MID, StepType.TIMEOUT]
        np.testing.assert_array_equal(batch.step_types, types * 3)
        for j in range(3):  # episode j of task k ran in sub-env 3k + j
            env_index = 3 * k + j
            rows = slice(5 * j, 5 * (j + 1))
            expected_actions = np.stack([actions[env_index] for _, actions in actor.calls])
            np.testing.assert_array_equal(batch.actions[rows], expected_actions)
            expected_obs = np.stack([obs[env_index] for obs, _ in actor.calls])
            np.testing.assert_array_equal(batch.observations[rows], expected_obs)
        # the reward is the negative distance of the next position to *this task's* goal
        distance = np.linalg.norm(batch.next_observations - np.array(task["goal"]), axis=1)
        np.testing.assert_allclose(batch.rewards, -distance)
        np.testing.assert_allclose(
            batch.last_observations, np.cumsum(batch.actions.reshape(3, 5, 2), axis=1)[:, -1]
        )
    with pytest.raises(ValueError, match="pass 2 tasks"):
        collector.collect(tasks[:1], actor)
    vec_env.close()


class CountdownEnv(gym.Env[np.ndarray, np.ndarray]):
    """Terminates after ``task["length"]`` steps; observes the step count; reward = action."""

    observation_space = spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float64)
    action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float64)

    def __init__(self) -> None:
        self.length = 1
        self.t = 0

    def sample_tasks(self, n: int, rng: np.random.Generator | None = None) -> list[Any]:
        return [{"length": 3}] * n

    def set_task(self, task: Any) -> None:
        self.length = task["length"]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options and options.get("task") is not None:
            self.set_task(options["task"])
        self.t = 0
        return np.zeros(1), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        assert self.t < self.length, "stepped after the episode ended"
        self.t += 1
        return np.array([float(self.t)]), float(action[0]), self.t >= self.length, False, {}


def countdown_vec_env(num_envs: int, mode: AutoresetMode) -> MetaBatchVectorEnv:
    return MetaBatchVectorEnv(
        SyncVectorEnv(
            [lambda: Trial(CountdownEnv(), 1) for _ in range(num_envs)], autoreset_mode=mode
        ),
        None,
        0,
    )


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_collector_masks_episodes_that_end_early_in_every_autoreset_mode(
    mode: AutoresetMode,
) -> None:
    collector = VectorEpisodeCollector(countdown_vec_env(4, mode), episodes_per_task=2)
    actor = RecordingActor()
    batches = collector.collect([{"length": 2}, {"length": 4}], actor)
    assert len(actor.calls) == 4  # until the longest episode ended
    short, long = batches
    assert short.lengths.tolist() == [2, 2] and long.lengths.tolist() == [4, 4]
    np.testing.assert_array_equal(short.step_types, [StepType.FIRST, StepType.TERMINAL] * 2)
    long_types = [StepType.FIRST, StepType.MID, StepType.MID, StepType.TERMINAL]
    np.testing.assert_array_equal(long.step_types, long_types * 2)
    np.testing.assert_array_equal(short.observations[:, 0], [0, 1] * 2)
    np.testing.assert_array_equal(short.last_observations[:, 0], [2, 2])  # not a reset's 0
    np.testing.assert_array_equal(long.last_observations[:, 0], [4, 4])
    np.testing.assert_array_equal(short.rewards, short.actions[:, 0])
    # the short episodes' steps are the actor's first two calls, at rows 0 and 1
    np.testing.assert_array_equal(short.actions[2:, 0], [actor.calls[t][1][1, 0] for t in range(2)])


def test_collector_cuts_at_max_episode_length() -> None:
    collector = VectorEpisodeCollector(
        countdown_vec_env(2, AutoresetMode.NEXT_STEP), 1, max_episode_length=3
    )
    batches = collector.collect([{"length": 10}, {"length": 2}], RecordingActor())
    assert [b.lengths.tolist() for b in batches] == [[3], [2]]
    np.testing.assert_array_equal(
        batches[0].step_types, [StepType.FIRST, StepType.MID, StepType.TIMEOUT]
    )


def test_batched_actor_uses_each_tasks_params_in_one_call() -> None:
    policy = make_policy(hidden=(4,), seed=15)
    params = [make_policy(hidden=(4,), seed=s).params() for s in (16, 17)]
    obs = np.random.default_rng(5).normal(size=(6, 2))
    greedy = BatchedGaussianActor(policy, params, group_size=3, deterministic=True)
    actions = greedy(obs)
    assert greedy.calls == 1
    for k in range(2):
        mean, _ = policy.mean_log_std(torch.as_tensor(obs[3 * k : 3 * k + 3]), params[k])
        np.testing.assert_allclose(actions[3 * k : 3 * k + 3], mean.detach().numpy(), rtol=1e-12)
    sampling = BatchedGaussianActor(policy, params, 3, generator=torch.Generator().manual_seed(6))
    noise = torch.randn(2, 3, 2, generator=torch.Generator().manual_seed(6), dtype=F64)
    std = torch.stack([p["log_std"].exp() for p in params])[:, None, :]
    expected = actions.reshape(2, 3, 2) + (std * noise).detach().numpy()
    np.testing.assert_allclose(sampling(obs), expected.reshape(6, 2), rtol=1e-12)
    with pytest.raises(ValueError, match="expected"):
        greedy(obs[:5])


# -- the algorithm -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"inner_lr": 0.0}, ValueError, "inner_lr must be a positive number"),
        ({"inner_lr": -1.0}, ValueError, "inner_lr must be a positive number"),
        ({"num_grad_updates": 0}, ValueError, "num_grad_updates"),
        ({"meta_batch_size": 0}, ValueError, r"meta_batch_size must be an integer in \[1, "),
        ({"max_kl": 0.0}, ValueError, "max_kl"),
        ({"ls_ratio": 1.0}, ValueError, "ls_ratio"),
        ({"policy": GaussianMLPPolicy(3, 2)}, ValueError, "3-dim observations"),
    ],
)
def test_maml_rejects_bad_configuration(overrides: dict[str, Any], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        small_maml(**overrides)


def test_maml_rejects_a_meta_batch_larger_than_the_task_set() -> None:
    tasks = ListTaskSampler([{"goal": [0.1, 0.1]}, {"goal": [-0.1, 0.2]}, {"goal": [0.0, 0.3]}])
    with pytest.raises(ValueError, match="cannot draw 5 distinct tasks from 3"):
        make_maml(POINT_GOAL, tasks, meta_batch_size=5, episodes_per_task=2, hidden_sizes=(4,))
    # three tasks, each run in four sub-envs, is fine
    algo = make_maml(POINT_GOAL, tasks, meta_batch_size=3, episodes_per_task=4, hidden_sizes=(4,))
    assert algo.collector.vec_env.num_envs == 12
    algo.close()


def test_maml_rejects_a_vector_env_of_the_wrong_size() -> None:
    vec_env = make_task_vec_env(POINT_GOAL, 3)
    with pytest.raises(ValueError, match="expected meta_batch_size"):
        small_maml(vec_env=vec_env)
    vec_env.close()


@pytest.mark.parametrize(("steps", "first_order"), [(1, False), (2, False), (3, False), (2, True)])
def test_training_iteration_with_several_inner_steps(steps: int, first_order: bool) -> None:
    algo = small_maml(num_grad_updates=steps, first_order=first_order)
    before = flatten([p.detach() for p in algo.policy.parameters()]).clone()
    algo.train(1)
    stats = algo.history[-1]
    after = flatten([p.detach() for p in algo.policy.parameters()])
    assert stats.iteration == 0 and algo.iteration == 1
    assert stats.env_steps == 2 * (2 * 2 * 5)  # two passes of 2 tasks x 2 episodes x 5 steps
    assert math.isfinite(stats.pre_update_return) and math.isfinite(stats.post_update_return)
    assert stats.outer.accepted == (not torch.equal(before, after))
    if stats.outer.accepted:
        assert stats.outer.kl <= algo.config.max_kl
    assert set(stats.as_dict()) >= {"pre_update_return", "trpo_accepted", "time_sampling"}
    algo.close()


def test_meta_optimize_keeps_the_true_kl_inside_the_trust_region() -> None:
    algo = small_maml(max_kl=1e-3)
    tasks = algo.task_sampler.sample(2, np.random.default_rng(0))
    meta = algo.policy.params()
    train = [algo.process(e) for e in algo.collect(tasks, [meta, meta])]
    adapted = [algo.adapt(meta, d, create_graph=False) for d in train]
    valid = [algo.process(e) for e in algo.collect(tasks, adapted)]
    old = old_outputs(algo.policy, adapted, valid)
    record = algo.meta_optimize(train, valid)
    assert record.accepted
    new = [algo.adapt(algo.policy.params(), d, create_graph=False) for d in train]
    true_kl = kl(algo.policy, new, valid, old).item()
    assert true_kl <= 1e-3
    assert true_kl == pytest.approx(record.kl, rel=1e-6)
    assert meta_loss(algo.policy, new, valid, old).item() < record.loss_before
    algo.close()


@pytest.mark.parametrize("first_order", [False, True])
def test_outer_step_takes_the_step_of_double_backpropagation_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, first_order: bool
) -> None:
    """The Gauss-Newton products skip only terms multiplied by an exact zero: the TRPO step is
    the one the KL's Hessian by double backpropagation takes, to the last bit."""

    def step(double_backpropagation: bool) -> tuple[TRPOStep, torch.Tensor]:
        algo = small_maml(hidden_sizes=(16, 16), first_order=first_order)
        if double_backpropagation:
            monkeypatch.setattr(
                maml_module,
                "gauss_newton_vector_product",
                lambda outputs, kl_of, params, damping: trpo.hessian_vector_product(
                    lambda: kl_of(outputs), params, damping
                ),
            )
        tasks = algo.task_sampler.sample(2, np.random.default_rng(3))
        meta = algo.policy.params()
        train = [algo.process(e) for e in algo.collect(tasks, [meta, meta])]
        adapted = [algo.adapt(meta, d, create_graph=False) for d in train]
        valid = [algo.process(e) for e in algo.collect(tasks, adapted)]
        record = algo.meta_optimize(train, valid)
        assert isinstance(record, TRPOStep) and record.kl > 0  # a direction was tried
        algo.close()
        monkeypatch.undo()
        return record, flatten([p.detach() for p in algo.policy.parameters()])

    (record, after), (reference, reference_after) = step(False), step(True)
    assert record == reference  # the KL and loss at the last point tried, the backtracks
    assert torch.equal(after, reference_after)


def test_meta_optimize_with_a_nan_advantage_leaves_the_meta_policy_unchanged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    algo = small_maml()
    tasks = algo.task_sampler.sample(2, np.random.default_rng(1))
    meta = algo.policy.params()
    train = [algo.process(e) for e in algo.collect(tasks, [meta, meta])]
    valid = [algo.process(e) for e in algo.collect(tasks, [meta, meta])]
    poisoned = valid[1].advantages.clone()
    poisoned[3] = math.nan
    valid[1] = valid[1]._replace(advantages=poisoned)
    before = flatten([p.detach() for p in algo.policy.parameters()]).clone()
    record = algo.meta_optimize(train, valid)
    assert (record.accepted, record.reason) == (False, "nonfinite_gradient")
    assert torch.equal(flatten([p.detach() for p in algo.policy.parameters()]), before)

    # and train() reports a rejected step in its stats and the log
    algo.meta_optimize = lambda train_data, valid_data: record  # type: ignore[method-assign]
    with caplog.at_level("WARNING", logger="metabench.algos.maml.maml"):
        algo.train(1)
        stats = algo.history[-1]
    assert stats.outer is record
    assert "outer step rejected (nonfinite_gradient)" in caplog.text
    algo.close()


def test_adapt_policy_runs_the_same_inner_update_on_the_episodes() -> None:
    algo = small_maml(num_grad_updates=2, inner_lr=0.05)
    exploration = algo.get_exploration_policy()
    meta_before = {k: v.detach().clone() for k, v in algo.policy.params().items()}
    (episodes, _) = algo.collect(
        [{"goal": [0.2, 0.2]}, {"goal": [0.0, -0.3]}], [exploration.params] * 2
    )
    adapted = algo.adapt_policy(exploration, episodes)

    data = process_episodes(episodes, algo.config.discount, algo.config.gae_lambda)
    expected = adapt(algo.policy, meta_before, data, 0.05, 2, create_graph=False)
    for name, value in expected.items():
        torch.testing.assert_close(adapted.params[name], value.detach())
        assert torch.equal(algo.policy.params()[name].detach(), meta_before[name])
    assert adapted.get_action(np.zeros(2)).shape == (2,)
    with pytest.raises(TypeError, match="get_exploration_policy"):
        algo.adapt_policy(GaussianPolicy(make_policy(), make_policy().params()), episodes)
    with pytest.raises(ValueError, match="observations"):
        algo.adapt_policy(exploration, episode_batch(0, [3], obs_dim=3))
    algo.close()


@pytest.mark.parametrize("deterministic_test", [False, True])
def test_deterministic_test_acts_with_the_adapted_mean(deterministic_test: bool) -> None:
    algo = small_maml(deterministic_test=deterministic_test)
    assert algo.deterministic_test is deterministic_test
    exploration = algo.get_exploration_policy()
    (episodes, _) = algo.collect([{"goal": [0.2, 0.2]}] * 2, [exploration.params] * 2)
    adapted = algo.adapt_policy(exploration, episodes)
    observation = np.array([0.1, -0.2])
    with torch.no_grad():
        mean, _ = algo.policy.mean_log_std(
            torch.as_tensor(observation, dtype=algo.policy.dtype), adapted.params
        )
    actions = [adapted.get_action(observation) for _ in range(2)]
    assert np.allclose(actions[0], mean.numpy()) is deterministic_test
    assert np.array_equal(actions[0], actions[1]) is deterministic_test
    assert not np.array_equal(
        exploration.get_action(observation), exploration.get_action(observation)
    )
    algo.close()


def test_state_dict_resumes_training_exactly() -> None:
    algo = small_maml()
    algo.train(1)
    state = algo.state_dict()
    algo.train(1)
    expected = algo.history[-1]
    expected_params = flatten([p.detach() for p in algo.policy.parameters()])

    resumed = small_maml(seed=123)  # different seed: everything must come from the state
    resumed.load_state_dict(state)
    resumed.train(1)
    stats = resumed.history[-1]
    assert stats.iteration == expected.iteration == 1
    assert stats.pre_update_return == expected.pre_update_return
    assert stats.post_update_return == expected.post_update_return
    assert torch.equal(flatten([p.detach() for p in resumed.policy.parameters()]), expected_params)
    with pytest.raises(ValueError, match="missing"):
        resumed.load_state_dict({"policy": state["policy"]})
    other_shape = small_maml(hidden_sizes=(5,))
    with pytest.raises(ValueError, match="does not fit"):
        other_shape.load_state_dict(state)
    for a in (algo, resumed, other_shape):
        a.close()


class StopsAtStep3(PointGoalEnv):
    """PointGoal whose episodes end (terminated) at their third step, before the horizon."""

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = super().step(action)
        return observation, reward, terminated or self._steps == 3, truncated, info


def test_steps_taken_count_episodes_that_end_before_the_horizon() -> None:
    """The budget counts each episode at the horizon of 5; the steps taken are 3 per episode:
    2 passes x 2 tasks x 2 episodes x 3 steps = 24 an iteration. They survive a resume, and a
    checkpoint saved before they were counted leaves them unknown."""
    config = {"meta_batch_size": 2, "episodes_per_task": 2, "hidden_sizes": (8,)}
    algo = make_maml(StopsAtStep3, env_kwargs={"horizon": 5}, **config)
    assert algo.steps_per_iteration == 2 * 2 * 2 * 5
    assert algo.env_steps_taken == 0
    algo.train(1)
    assert algo.env_steps_taken == 24
    state = algo.state_dict()
    resumed = make_maml(StopsAtStep3, env_kwargs={"horizon": 5}, seed=9, **config)
    resumed.load_state_dict(state)
    resumed.train(2)
    assert resumed.env_steps_taken == 3 * 24
    resumed.load_state_dict({k: v for k, v in state.items() if k != "env_steps_taken"})
    resumed.train(1)
    assert resumed.env_steps_taken is None
    for a in (algo, resumed):
        a.close()


def test_update_threads_apply_to_the_update_only() -> None:
    """update_threads sets torch's threads for the baselines, the adaptation and the outer step
    (the env workers are idle then), one thread while sampling, and gives the count back."""
    algo = small_maml(update_threads=2)
    seen: dict[str, int] = {}
    collect, meta_optimize = algo.collect, algo.meta_optimize

    def counting_collect(*args: Any) -> Any:
        seen["collect"] = torch.get_num_threads()
        return collect(*args)

    def counting_meta_optimize(*args: Any) -> Any:
        seen["meta_optimize"] = torch.get_num_threads()
        return meta_optimize(*args)

    algo.collect = counting_collect  # type: ignore[method-assign]
    algo.meta_optimize = counting_meta_optimize  # type: ignore[method-assign]
    algo.train(1)
    assert seen == {"collect": 1, "meta_optimize": 2}
    assert torch.get_num_threads() == 1
