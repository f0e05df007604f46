"""MAML's ``action_scale`` against pytorch-maml-rl's construction, computed independently: a
network acting in its own units with std 1, whose actions an env wrapper divides by the scale
(``NormalizedActionWrapper(scale=10)``)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Normal
from torch.func import functional_call

from metabench.algos.maml import GaussianMLPPolicy, MAMLConfig, TaskData, adapt
from metabench.validation import ConfigError

F64 = torch.float64
SCALE = 10.0


def scaled_policy(hidden: tuple[int, ...], init_std: float = 1.0) -> GaussianMLPPolicy:
    torch.manual_seed(3)
    policy = GaussianMLPPolicy(4, 2, hidden, init_std=init_std, action_scale=SCALE).to(F64)
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([0.2, -0.3], dtype=F64))  # not the initial value
    return policy


def task_data(n: int = 64) -> TaskData:
    """Env actions in the actuators' range, arbitrary advantages."""
    generator = torch.Generator().manual_seed(5)
    return TaskData(
        observations=torch.randn(n, 4, generator=generator, dtype=F64),
        actions=torch.rand(n, 2, generator=generator, dtype=F64) * 2 - 1,
        advantages=torch.randn(n, generator=generator, dtype=F64),
    )


def wrapped_env_step(
    policy: GaussianMLPPolicy, data: TaskData, lr: float
) -> dict[str, torch.Tensor]:
    """One SGD step of ``-mean(log pi(a'|s) A)`` for the network in its own units, on the
    actions it sent before the wrapper divided them (``a' = SCALE * a``)."""
    network = policy.mean_net
    params = {name: tensor.detach().clone().requires_grad_() for name, tensor in
              policy.named_parameters()}  # fmt: skip
    weights = {name.removeprefix("mean_net."): t for name, t in params.items() if name != "log_std"}
    mean = functional_call(network, weights, (data.observations,))
    own_actions = SCALE * data.actions
    log_likelihood = Normal(mean, params["log_std"].exp()).log_prob(own_actions).sum(-1)
    loss = -(log_likelihood * data.advantages).mean()
    grads = torch.autograd.grad(loss, list(params.values()))
    return {name: (t - lr * g).detach() for (name, t), g in zip(params.items(), grads, strict=True)}


@pytest.mark.parametrize("hidden", [(), (8, 8)])
def test_the_inner_step_is_that_of_the_network_behind_an_action_dividing_wrapper(
    hidden: tuple[int, ...],
) -> None:
    policy = scaled_policy(hidden)
    data = task_data()
    adapted = adapt(policy, policy.params(), data, inner_lr=0.1, num_grad_updates=1,
                    create_graph=False)  # fmt: skip
    expected = wrapped_env_step(policy, data, lr=0.1)
    assert adapted.keys() == expected.keys()
    for name, tensor in adapted.items():
        torch.testing.assert_close(tensor.detach(), expected[name], rtol=1e-10, atol=1e-12)

    # and the env actions it samples are the wrapped network's, divided by the scale
    weights = {n.removeprefix("mean_net."): t for n, t in expected.items() if n != "log_std"}
    own_mean = functional_call(policy.mean_net, weights, (data.observations,))
    mean, log_std = policy.mean_log_std(data.observations, adapted)
    torch.testing.assert_close(mean.detach(), own_mean / SCALE, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(
        log_std.detach(), (expected["log_std"] - math.log(SCALE)).expand_as(mean)
    )


def test_dividing_the_std_instead_moves_a_linear_policys_mean_scale_squared_times_as_far() -> None:
    """The same initial distribution, acting in env units (head and std divided by the scale):
    its SGD step moves the mean ``SCALE**2`` times as far, its log-std as far."""
    scaled = scaled_policy(())
    in_env_units = GaussianMLPPolicy(4, 2, (), action_scale=1.0).to(F64)
    with torch.no_grad():
        for name, tensor in in_env_units.named_parameters():
            source = dict(scaled.named_parameters())[name]
            tensor.copy_(source - math.log(SCALE) if name == "log_std" else source / SCALE)
    data = task_data()
    before = [p.mean_log_std(data.observations) for p in (scaled, in_env_units)]
    torch.testing.assert_close(before[0][0], before[1][0])
    torch.testing.assert_close(before[0][1], before[1][1])

    moves = []
    for policy, (mean0, log_std0) in zip((scaled, in_env_units), before, strict=True):
        adapted = adapt(policy, policy.params(), data, 0.1, 1, create_graph=False)
        mean1, log_std1 = policy.mean_log_std(data.observations, adapted)
        moves.append((mean1.detach() - mean0.detach(), log_std1.detach() - log_std0.detach()))
    torch.testing.assert_close(moves[1][0], SCALE**2 * moves[0][0], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(moves[1][1], moves[0][1], rtol=1e-9, atol=1e-12)


def test_at_scale_1_the_policy_returns_its_networks_own_outputs() -> None:
    torch.manual_seed(0)
    policy = GaussianMLPPolicy(4, 2, (8,))
    observations = torch.randn(5, 4)
    mean, log_std = policy.mean_log_std(observations, policy.params())
    assert torch.equal(mean, policy.mean_net(observations))
    assert torch.equal(log_std, policy.log_std.expand(5, 2))


def test_a_scale_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="action_scale must be positive"):
        GaussianMLPPolicy(4, 2, action_scale=0.0)
    with pytest.raises(ConfigError, match="action_scale"):
        MAMLConfig(action_scale=-1.0)
