"""The Gaussian MLP policy MAML adapts, evaluated functionally with any parameter set.

MAML needs the same network under many parameter sets at once: the meta-parameters, and one
adapted set per task that is a differentiable function of them. So parameters are never
written into the module during adaptation; every evaluation applies the module's layers to a
plain ``dict`` of tensors (:meth:`GaussianMLPPolicy.mean_log_std`), and the module's own
parameters are only the meta-parameters the outer optimiser updates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Normal
from torch.func import vmap
from torch.nn import functional as F

from metabench.algos.base import Policy

__all__ = [
    "BatchedGaussianActor",
    "GaussianMLPPolicy",
    "GaussianPolicy",
    "Params",
    "check_policy_spaces",
    "detached_params",
]

Params = dict[str, torch.Tensor]
"""A full parameter set of a :class:`GaussianMLPPolicy`, keyed like ``named_parameters()``."""


def detached_params(params: Mapping[str, torch.Tensor]) -> Params:
    """A copy of ``params`` cut from every graph: what a policy that only acts needs."""
    return {name: tensor.detach().clone() for name, tensor in params.items()}


class GaussianMLPPolicy(nn.Module):
    """``a ~ N(mlp(obs), exp(log_std)^2)`` with independent dims and a state-independent std.

    The architecture of the MAML paper (Finn et al. 2017, section 5.3) and garage's
    ``GaussianMLPPolicy``: tanh hidden layers (100, 100 by default), a linear mean head, and a
    learned log standard deviation per action dim.

    :param obs_dim: size of the flat observation.
    :param action_dim: size of the flat action.
    :param hidden_sizes: widths of the tanh hidden layers.
    :param init_std: initial standard deviation of every action dim (garage: 1.0).
    :param weight_init: ``"pytorch"`` (its default init) or ``"xavier"`` (Xavier-uniform weights,
        zero biases, as Meta-World+'s MAML).
    :param action_scale: the network acts in units ``action_scale`` times the env's: its mean and
        std (``init_std`` included) are divided by ``action_scale`` on the way out. The same
        distribution and the same gradient steps as the network behind an env wrapper that
        divides its actions (pytorch-maml-rl's ``normalization_scale``, garage's
        ``expected_action_scale``), for protocols whose action path is fixed. Dividing only
        ``init_std`` gives the same initial noise, but a mean-head SGD step ``action_scale**2``
        times as long in the env's units.

    Example::

        >>> policy = GaussianMLPPolicy(2, 2, hidden_sizes=(8,))
        >>> params = dict(policy.named_parameters())
        >>> policy.distribution(torch.zeros(5, 2), params).sample().shape
        torch.Size([5, 2])
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_sizes: Sequence[int] = (100, 100),
        init_std: float = 1.0,
        weight_init: str = "pytorch",
        action_scale: float = 1.0,
    ) -> None:
        super().__init__()
        if obs_dim < 1 or action_dim < 1:
            raise ValueError(f"obs_dim and action_dim must be >= 1, got {obs_dim}, {action_dim}")
        if not init_std > 0:
            raise ValueError(f"init_std must be positive, got {init_std}")
        if any(size < 1 for size in hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive, got {tuple(hidden_sizes)}")
        if not action_scale > 0:
            raise ValueError(f"action_scale must be positive, got {action_scale}")
        self.action_scale = float(action_scale)
        self.obs_dim = int(obs_dim)
        self.action_dim = int(action_dim)
        self.hidden_sizes = tuple(int(size) for size in hidden_sizes)
        layers: list[nn.Module] = []
        width = self.obs_dim
        for size in self.hidden_sizes:
            layers += [nn.Linear(width, size), nn.Tanh()]
            width = size
        layers.append(nn.Linear(width, self.action_dim))
        self.mean_net = nn.Sequential(*layers)
        if weight_init == "xavier":  # after PyTorch's init, so its default draws stay the same
            for layer in self.mean_net:
                if isinstance(layer, nn.Linear):
                    nn.init.xavier_uniform_(layer.weight)
                    nn.init.zeros_(layer.bias)
        elif weight_init != "pytorch":
            raise ValueError(f"weight_init must be 'pytorch' or 'xavier', got {weight_init!r}")
        self.log_std = nn.Parameter(torch.full((self.action_dim,), math.log(init_std)))

    @classmethod
    def from_spaces(
        cls,
        observation_space: gym.Space[Any],
        action_space: gym.Space[Any],
        hidden_sizes: Sequence[int] = (100, 100),
        init_std: float = 1.0,
        weight_init: str = "pytorch",
        action_scale: float = 1.0,
    ) -> GaussianMLPPolicy:
        """Build a policy for flat ``Box`` observation and action spaces.

        :raises ValueError: for any other kind of space (a Gaussian needs continuous actions).
        """
        for name, space in (("observation", observation_space), ("action", action_space)):
            if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
                fix = (
                    "flatten the env (gymnasium.wrappers.FlattenObservation) first"
                    if name == "observation"
                    else "MAML-TRPO here is for continuous (Box) actions: use RL2-PPO"
                )
                raise ValueError(
                    f"GaussianMLPPolicy needs a flat Box {name} space, got {space}; {fix}"
                )
        return cls(
            observation_space.shape[0],  # type: ignore[index]
            action_space.shape[0],  # type: ignore[index]
            hidden_sizes,
            init_std,
            weight_init,
            action_scale,
        )

    def forward(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-std in the env's units, both ``(..., action_dim)``: plain tensors, so
        ``vmap`` can batch this over stacked parameter sets (a ``Normal`` cannot leave a
        ``vmap``)."""
        return self._in_env_units(self.mean_net(observations), self.log_std)

    def _in_env_units(
        self, mean: torch.Tensor, log_std: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The network's mean and log-std divided by :attr:`action_scale` (at scale 1, the
        network's own tensors: no operation added)."""
        if self.action_scale != 1.0:
            mean = mean / self.action_scale
            log_std = log_std - math.log(self.action_scale)
        return mean, log_std.expand_as(mean)

    def mean_log_std(
        self, observations: torch.Tensor, params: Mapping[str, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` with ``params`` (a full set) in place of the module's own (``None``:
        its own).

        The layers' own operations, applied to ``params``: the same results, bit for bit, as
        ``torch.func.functional_call``, which swaps the tensors into the module for each call.
        At one observation per call (the sequential meta-test) that swap made ``get_action``
        1.9-3.6x slower (``scripts/maml_policy_call.py``).
        """
        if params is None:
            return self(observations)
        x = observations
        for index, layer in enumerate(self.mean_net):
            if isinstance(layer, nn.Linear):
                x = F.linear(
                    x, params[f"mean_net.{index}.weight"], params[f"mean_net.{index}.bias"]
                )
            else:
                x = layer(x)
        return self._in_env_units(x, params["log_std"])

    def distribution(
        self, observations: torch.Tensor, params: Mapping[str, torch.Tensor] | None = None
    ) -> Normal:
        """The action distribution under ``params`` (``None``: the module's own parameters).

        Independent dims: sum ``log_prob(a)`` over the last axis for the joint log-likelihood.
        """
        mean, log_std = self.mean_log_std(observations, params)
        return Normal(mean, log_std.exp())

    def log_likelihood(
        self,
        observations: torch.Tensor,
        actions: torch.Tensor,
        params: Mapping[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """``log pi(actions | observations)`` summed over action dims, shape ``(...,)``."""
        return self.distribution(observations, params).log_prob(actions).sum(-1)

    def params(self) -> Params:
        """The module's own parameters as a dict (the meta-parameters; still in the graph)."""
        return dict(self.named_parameters())

    @property
    def dtype(self) -> torch.dtype:
        """The floating dtype of the parameters, which inputs are converted to."""
        return self.log_std.dtype

    @property
    def device(self) -> torch.device:
        """Where the parameters live, which inputs are moved to."""
        return self.log_std.device


def _cpu_noise(like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Standard normal noise shaped and placed like ``like``, drawn on the CPU from
    ``generator``: a policy on a GPU samples the same noise as on the CPU (and on the CPU this
    is the draw it always was)."""
    noise = torch.randn(like.shape, generator=generator, dtype=like.dtype)
    return noise.to(like.device)


def check_policy_spaces(
    policy: GaussianMLPPolicy, observation_space: gym.Space[Any], action_space: gym.Space[Any]
) -> None:
    """Raise ``ValueError`` unless ``policy`` reads this observation and writes this action.

    A shape mismatch would otherwise surface as a matrix error deep inside a rollout.
    """
    expected = GaussianMLPPolicy.from_spaces(observation_space, action_space, hidden_sizes=(1,))
    if (policy.obs_dim, policy.action_dim) != (expected.obs_dim, expected.action_dim):
        raise ValueError(
            f"policy takes {policy.obs_dim}-dim observations and gives {policy.action_dim}-dim "
            f"actions, but the env has observation space {observation_space} and action space "
            f"{action_space}; build it with GaussianMLPPolicy.from_spaces(env spaces)"
        )


class BatchedGaussianActor:
    """Acts in ``len(param_sets) * group_size`` sub-envs with one batched forward per step.

    Sub-envs ``[k * group_size, (k + 1) * group_size)`` act with ``param_sets[k]`` (one
    parameter set per task of a meta-batch, each task run in ``group_size`` sub-envs). The
    parameter sets are stacked and the forward is ``vmap``-ed over them, the model-ensembling
    pattern of ``torch.func``, so the per-step cost is one call whatever the number of tasks.

    :param policy: the network (its own parameters are not used).
    :param param_sets: one parameter dict per group (detached; acting needs no graph).
    :param group_size: sub-envs per parameter set.
    :param generator: the source of the action noise, for reproducible sampling.
    :param deterministic: act with the mean instead of sampling.
    """

    def __init__(
        self,
        policy: GaussianMLPPolicy,
        param_sets: Sequence[Mapping[str, torch.Tensor]],
        group_size: int,
        generator: torch.Generator | None = None,
        deterministic: bool = False,
    ) -> None:
        if not param_sets:
            raise ValueError("BatchedGaussianActor needs at least one parameter set")
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.policy = policy
        self.n_groups = len(param_sets)
        self.group_size = int(group_size)
        self.generator = generator
        self.deterministic = deterministic
        self._stacked = {
            name: torch.stack([params[name].detach() for params in param_sets])
            for name in param_sets[0]
        }
        self._forward = vmap(self._one_group)
        self.calls = 0
        """Number of forwards so far (one per env step; tests check the batching)."""

    def _one_group(
        self, params: dict[str, torch.Tensor], observations: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.policy.mean_log_std(observations, params)

    @property
    def num_envs(self) -> int:
        """Sub-envs this actor acts in."""
        return self.n_groups * self.group_size

    def __call__(self, observations: np.ndarray) -> np.ndarray:
        """Actions ``(num_envs, action_dim)`` for observations ``(num_envs, obs_dim)``."""
        obs = torch.as_tensor(
            np.asarray(observations), dtype=self.policy.dtype, device=self.policy.device
        )
        if obs.shape != (self.num_envs, self.policy.obs_dim):
            raise ValueError(
                f"observations have shape {tuple(obs.shape)}, expected "
                f"{(self.num_envs, self.policy.obs_dim)}"
            )
        self.calls += 1
        with torch.no_grad():
            grouped = obs.reshape(self.n_groups, self.group_size, self.policy.obs_dim)
            mean, log_std = self._forward(self._stacked, grouped)
            actions = mean
            if not self.deterministic:
                actions = mean + log_std.exp() * _cpu_noise(mean, self.generator)
        return actions.reshape(self.num_envs, self.policy.action_dim).cpu().numpy()


class GaussianPolicy(Policy):
    """The :class:`~metabench.algos.base.Policy` adapter: one parameter set, one env.

    Holds its own detached parameter dict, so the meta-policy and any number of adapted
    policies share one module without touching its parameters.

    :param module: the network.
    :param params: the parameter set to act with (copied and detached).
    :param generator: the source of the action noise.
    :param deterministic: act with the mean instead of sampling.
    """

    def __init__(
        self,
        module: GaussianMLPPolicy,
        params: Mapping[str, torch.Tensor],
        generator: torch.Generator | None = None,
        deterministic: bool = False,
    ) -> None:
        self.module = module
        self.params: Params = detached_params(params)
        self.generator = generator
        self.deterministic = deterministic

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        """A sampled (or, if ``deterministic``, the mean) action for one observation."""
        obs = torch.as_tensor(
            np.asarray(observation), dtype=self.module.dtype, device=self.module.device
        )
        if obs.shape != (self.module.obs_dim,):
            raise ValueError(
                f"observation has shape {tuple(obs.shape)}, expected ({self.module.obs_dim},): "
                f"GaussianPolicy acts in one env at a time"
            )
        with torch.no_grad():
            mean, log_std = self.module.mean_log_std(obs, self.params)
            action = mean
            if not self.deterministic:
                action = mean + log_std.exp() * _cpu_noise(mean, self.generator)
        return action.cpu().numpy()
