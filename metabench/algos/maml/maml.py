"""MAML-TRPO (Finn et al. 2017, "Model-Agnostic Meta-Learning", section 3.3 and 5.3).

One meta-iteration, in garage's named steps:

1. :meth:`MAMLTRPO.sample` episodes of every task of a meta-batch with the meta-parameters;
2. :func:`adapt`: ``num_grad_updates`` SGD steps on the vanilla policy-gradient :func:`inner_loss`
   of those episodes, giving one adapted parameter set per task;
3. sample again with each task's adapted parameters;
4. :func:`meta_loss`: the TRPO surrogate of the post-adaptation policies on those episodes, as a
   function of the meta-parameters *through* the adaptation (second-order unless
   ``first_order``), constrained by the mean :func:`kl` between old and new post-adaptation
   policies;
5. :meth:`MAMLTRPO.meta_optimize`: one :func:`~metabench.algos.trpo.trpo_step`.

Inner steps all use the same pre-update episodes. garage and pytorch-maml-rl resample between
inner steps during meta-training, but at meta-test :meth:`adapt_policy` receives one batch of
exploration episodes, so training the inner loop the way it is tested keeps the two identical
(with one inner step, the default, there is no difference). Later steps are then slightly
off-policy; the vanilla gradient ignores that, as garage's evaluator did.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch.distributions import Normal, kl_divergence

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.implementation import Benchmark, Implementation
from metabench.algos.maml.baseline import LinearFeatureBaseline
from metabench.algos.maml.collector import VectorEpisodeCollector, make_maml_vec_env
from metabench.algos.maml.policy import (
    BatchedGaussianActor,
    GaussianMLPPolicy,
    GaussianPolicy,
    Params,
    check_policy_spaces,
    detached_params,
)
from metabench.algos.maml.returns import discounted_returns, gae_advantages
from metabench.algos.trpo import TRPOStep, flat_grad, flatten, hessian_vector_product, trpo_step
from metabench.data import EpisodeBatch
from metabench.tasks.base import SetTaskSampler, Task, TaskSampler
from metabench.validation import check_config, check_count, config_dict, option

__all__ = [
    "MAMLTRPO",
    "MAMLIterationStats",
    "MAMLTRPOConfig",
    "OldOutputs",
    "TaskData",
    "adapt",
    "inner_loss",
    "kl",
    "meta_loss",
    "old_outputs",
    "process_episodes",
]

logger = logging.getLogger(__name__)

ADVANTAGE_EPS = 1e-8
"""Added to the advantage std when normalising (garage's VPG ``center_adv``)."""


# -- data --------------------------------------------------------------------------------------
class TaskData(NamedTuple):
    """One task's episodes as loss inputs: every real step, in the batch's flat order.

    :param observations: ``(M, obs_dim)``.
    :param actions: ``(M, action_dim)``.
    :param advantages: ``(M,)`` normalised GAE advantages (constants to the losses).
    """

    observations: torch.Tensor
    actions: torch.Tensor
    advantages: torch.Tensor


def process_episodes(
    episodes: EpisodeBatch,
    discount: float,
    gae_lambda: float,
    dtype: torch.dtype = torch.float32,
    normalize: bool = True,
) -> TaskData:
    """Fit a fresh :class:`LinearFeatureBaseline` to ``episodes`` and turn them into loss inputs.

    The baseline is fitted per task batch on the discounted returns of the very episodes it is
    used on, as in garage's ``VPG._compute_advantage`` and pytorch-maml-rl's
    ``BatchEpisodes.compute_advantages``. Advantages are normalised to mean 0 and std 1 over
    all real steps of the batch (both repos do; it makes ``inner_lr`` independent of the reward
    scale).

    :param episodes: one task's episodes.
    :param discount: reward discount.
    :param gae_lambda: GAE's lambda (1.0: Monte-Carlo returns minus the baseline).
    :param dtype: the policy's dtype.
    :param normalize: normalise the advantages.
    """
    valids = episodes.valids
    real = valids.astype(bool)
    returns = discounted_returns(episodes.padded_rewards, valids, discount)
    baseline = LinearFeatureBaseline()
    baseline.fit(episodes, returns[real])
    values = episodes.padded(baseline.predict(episodes))
    advantages = gae_advantages(episodes.padded_rewards, values, valids, discount, gae_lambda)
    flat = advantages[real]  # row-major over (episode, time): the batch's flat order
    if normalize:
        flat = (flat - flat.mean()) / (flat.std() + ADVANTAGE_EPS)
    n_steps = episodes.n_steps
    return TaskData(
        observations=torch.as_tensor(episodes.observations.reshape(n_steps, -1), dtype=dtype),
        actions=torch.as_tensor(episodes.actions.reshape(n_steps, -1), dtype=dtype),
        advantages=torch.as_tensor(flat, dtype=dtype),
    )


class OldOutputs(NamedTuple):
    """The old post-adaptation policy on one task's validation steps (detached)."""

    mean: torch.Tensor
    log_std: torch.Tensor


# -- the named steps as functions ----------------------------------------------------------------
def inner_loss(
    policy: GaussianMLPPolicy, params: Mapping[str, torch.Tensor], data: TaskData
) -> torch.Tensor:
    """The vanilla policy-gradient loss ``-mean_t(log pi(a_t|s_t) * A_t)`` (REINFORCE with a
    baseline; garage's ``VPG`` is MAML's inner algorithm), averaged over every real step."""
    log_likelihood = policy.log_likelihood(data.observations, data.actions, params)
    return -(log_likelihood * data.advantages).mean()


def adapt(
    policy: GaussianMLPPolicy,
    params: Mapping[str, torch.Tensor],
    data: TaskData,
    inner_lr: float,
    num_grad_updates: int,
    create_graph: bool,
) -> Params:
    """``num_grad_updates`` SGD steps ``params <- params - inner_lr * grad inner_loss(params)``.

    Functional: ``params`` is not modified, a new dict is returned. With ``create_graph`` the
    result is differentiable to second order w.r.t. ``params`` (MAML's meta-gradient through the
    inner step, Finn et al. eq. 1); without it the inner gradients are constants, the
    first-order approximation (FOMAML). Parameters that do not require grad (a detached
    meta-test copy) are made to, so that the inner gradient exists.

    :raises ValueError: if ``num_grad_updates < 1`` or ``inner_lr <= 0``.
    """
    _check_inner(inner_lr, num_grad_updates)
    current: Params = {
        name: tensor if tensor.requires_grad else tensor.detach().requires_grad_()
        for name, tensor in params.items()
    }
    for _ in range(num_grad_updates):
        loss = inner_loss(policy, current, data)
        grads = torch.autograd.grad(loss, list(current.values()), create_graph=create_graph)
        current = {
            name: tensor - inner_lr * grad
            for (name, tensor), grad in zip(current.items(), grads, strict=True)
        }
    return current


def old_outputs(
    policy: GaussianMLPPolicy, adapted: Sequence[Params], valid_data: Sequence[TaskData]
) -> list[OldOutputs]:
    """The post-adaptation policies' outputs at their validation steps, frozen as the "old"
    policies of the TRPO surrogate and KL (pytorch-maml-rl's ``detach_distribution``)."""
    outputs = []
    with torch.no_grad():
        for params, data in zip(adapted, valid_data, strict=True):
            mean, log_std = policy.mean_log_std(data.observations, params)
            outputs.append(OldOutputs(mean.detach(), log_std.detach()))
    return outputs


def meta_loss(
    policy: GaussianMLPPolicy,
    adapted: Sequence[Params],
    valid_data: Sequence[TaskData],
    old: Sequence[OldOutputs],
) -> torch.Tensor:
    """The TRPO surrogate ``-mean_t(pi_new(a|s) / pi_old(a|s) * A_t)``, averaged over tasks.

    ``pi_new`` is each task's adapted policy as a function of the meta-parameters; ``pi_old`` is
    the same policy frozen when the episodes were collected, so the ratio is 1 at the start of
    the update and its gradient is the post-adaptation policy gradient.
    """
    losses = []
    for params, data, frozen in zip(adapted, valid_data, old, strict=True):
        new_log_likelihood = policy.log_likelihood(data.observations, data.actions, params)
        old_log_likelihood = (
            Normal(frozen.mean, frozen.log_std.exp()).log_prob(data.actions).sum(-1)
        )
        ratio = torch.exp(new_log_likelihood - old_log_likelihood)
        losses.append(-(ratio * data.advantages).mean())
    return torch.stack(losses).mean()


def kl(
    policy: GaussianMLPPolicy,
    adapted: Sequence[Params],
    valid_data: Sequence[TaskData],
    old: Sequence[OldOutputs],
) -> torch.Tensor:
    """Mean ``KL(pi_old || pi_new)`` over each task's validation steps, then over tasks.

    The direction of the TRPO paper's constraint (eq. 12); at ``pi_new = pi_old`` both
    directions have the same value (0), gradient (0) and Hessian (the Fisher matrix).
    """
    kls = []
    for params, data, frozen in zip(adapted, valid_data, old, strict=True):
        mean, log_std = policy.mean_log_std(data.observations, params)
        per_step = kl_divergence(
            Normal(frozen.mean, frozen.log_std.exp()), Normal(mean, log_std.exp())
        ).sum(-1)
        kls.append(per_step.mean())
    return torch.stack(kls).mean()


def _check_inner(inner_lr: float, num_grad_updates: int) -> None:
    if not inner_lr > 0:
        raise ValueError(f"inner_lr must be positive, got {inner_lr}")
    check_count("num_grad_updates", num_grad_updates, hint="the inner gradient steps")


# -- the algorithm -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MAMLTRPOConfig:
    """Every MAML-TRPO hyperparameter in one place, with its default, range and documentation.

    Defaults are garage's MAML-TRPO benchmark against ProMP (see ``REFERENCE.md``): meta-batch
    40, 20 episodes per task, inner lr 0.1, one inner step, max KL 0.01, discount 0.99, GAE
    lambda 1.0, a 100-100 tanh policy; CG and line search follow pytorch-maml-rl.
    """

    meta_batch_size: int = option(40, "tasks per meta-iteration", low=1)
    episodes_per_task: int = option(
        20, "episodes per task and sampling pass (inner and outer batch)", low=1
    )
    inner_lr: float = option(0.1, "step size of the inner SGD", low=0.0, low_open=True)
    num_grad_updates: int = option(
        1, "inner SGD steps (also used by adapt_policy at meta-test)", low=1
    )
    first_order: bool = option(False, "drop the second-order term of the meta-gradient (FOMAML)")
    discount: float = option(0.99, "reward discount", low=0.0, high=1.0)
    gae_lambda: float = option(1.0, "GAE lambda", low=0.0, high=1.0)
    max_kl: float = option(0.01, "TRPO trust-region radius", low=0.0, low_open=True)
    cg_iters: int = option(10, "conjugate-gradient iterations", low=1)
    cg_damping: float = option(1e-5, "damping added to the Fisher-vector products", low=0.0)
    ls_steps: int = option(15, "line-search fractions tried", low=1)
    ls_ratio: float = option(
        0.8, "line-search shrink factor", low=0.0, high=1.0, low_open=True, high_open=True
    )
    hidden_sizes: tuple[int, ...] = option(
        (100, 100), "hidden layers of the tanh policy (a list of widths)", low=1
    )
    init_std: float = option(1.0, "initial action std of the policy (garage: 1.0)", low=0.0,
                             low_open=True)  # fmt: skip

    def __post_init__(self) -> None:
        check_config(self)


@dataclasses.dataclass(frozen=True)
class MAMLIterationStats:
    """What one meta-iteration did (logged, and returned by :meth:`MAMLTRPO.train`).

    :param iteration: 0-based index over the algorithm's lifetime.
    :param pre_update_return: mean undiscounted return with the meta-parameters.
    :param post_update_return: mean undiscounted return with the adapted parameters.
    :param trpo: the outer step's record (accepted, reason, losses, KL, step fraction).
    :param time_sampling: seconds stepping envs (both sampling passes).
    :param time_adaptation: seconds fitting baselines and adapting for the second pass.
    :param time_outer_update: seconds in the meta-gradient, CG and line search.
    :param env_steps: environment steps taken this iteration.
    """

    iteration: int
    pre_update_return: float
    post_update_return: float
    trpo: TRPOStep
    time_sampling: float
    time_adaptation: float
    time_outer_update: float
    env_steps: int

    def as_dict(self) -> dict[str, Any]:
        """A flat dict, for loggers and result files."""
        flat = dataclasses.asdict(self)
        trpo = flat.pop("trpo")
        return {**flat, **{f"trpo_{key}": value for key, value in trpo.items()}}

    def metrics(self) -> dict[str, float]:
        """The numbers of :meth:`as_dict` as ``metatrain/<name>`` (what :meth:`MAMLTRPO.train`
        returns): ``iteration``, ``pre_update_return``, ``post_update_return``, the ``trpo_*``
        numbers, the ``time_*`` seconds and ``env_steps``."""
        return {
            f"metatrain/{key}": float(value)
            for key, value in self.as_dict().items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }


class MAMLTRPO(MetaRLAlgorithm):
    """MAML with a vanilla-policy-gradient inner loop and a TRPO outer loop.

    The hyperparameters, their defaults (garage's MAML-TRPO benchmark against ProMP) and ranges
    are the fields of :class:`MAMLTRPOConfig`.

    :param env: a task env id (``"metabench/HalfCheetahVel-v0"``) or a factory of task envs.
    :param task_sampler: where meta-batches come from; ``None``: the task env's
        ``sample_tasks``. Its ``check_batch_size(meta_batch_size)`` must pass.
    :param config: the hyperparameters (:class:`MAMLTRPOConfig`); ``None``: the defaults.
    :param hyperparameters: fields of :class:`MAMLTRPOConfig` to change (``inner_lr=0.05``), over
        ``config``.
    :param seed: seeds the policy initialisation, task sampling, env resets and action noise;
        no global random state is touched.
    :param env_kwargs: passed to the task env (e.g. ``{"horizon": 20}``).
    :param policy: use this policy instead of building one; its spaces must match the env.
    :param vec_env: a ready vector env of ``meta_batch_size * episodes_per_task`` sub-envs with
        ``set_tasks`` (e.g. a batched MuJoCo env); ``None`` builds one with
        :func:`~metabench.algos.maml.collector.make_maml_vec_env`.
    :param max_episode_length: cut episodes at this length (``None``: the env ends them).

    Example::

        >>> import metabench
        >>> algo = MAMLTRPO("metabench/PointGoal-v0", meta_batch_size=2, episodes_per_task=2,
        ...                 hidden_sizes=(8,), env_kwargs={"horizon": 5})
        >>> stats = algo.train(1)
        >>> stats["metatrain/env_steps"], algo.history[-1].env_steps
        (40.0, 40)
    """

    def __init__(
        self,
        env: str | Callable[..., gym.Env[Any, Any]],
        task_sampler: TaskSampler | None = None,
        config: MAMLTRPOConfig | None = None,
        *,
        seed: int = 0,
        env_kwargs: dict[str, Any] | None = None,
        policy: GaussianMLPPolicy | None = None,
        vec_env: gym.vector.VectorEnv[Any, Any, Any] | None = None,
        max_episode_length: int | None = None,
        **hyperparameters: Any,
    ) -> None:
        config = config or MAMLTRPOConfig()
        if hyperparameters:
            config = dataclasses.replace(config, **hyperparameters)
        self.config = config
        self.meta_batch_size = config.meta_batch_size
        self.episodes_per_task = config.episodes_per_task
        self.inner_lr = config.inner_lr
        self.num_grad_updates = config.num_grad_updates
        self.first_order = config.first_order
        self.discount = config.discount
        self.gae_lambda = config.gae_lambda
        self.max_kl = config.max_kl
        self.cg_iters = config.cg_iters
        self.cg_damping = config.cg_damping
        self.ls_steps = config.ls_steps
        self.ls_ratio = config.ls_ratio
        hidden_sizes, init_std = config.hidden_sizes, config.init_std
        self.seed = int(seed)
        env_kwargs = dict(env_kwargs or {})

        # One task env of our own, for its task distribution (the sub-envs may be in processes).
        task_env: Any = (
            env(**env_kwargs) if callable(env) else gym.make(env, **env_kwargs).unwrapped
        )
        if task_sampler is None:
            task_sampler = SetTaskSampler(task_env.sample_tasks)
        task_sampler.check_batch_size(self.meta_batch_size)  # fail before building envs
        self.task_sampler = task_sampler
        self.horizon: int | None = getattr(task_env, "horizon", None)

        built_here = vec_env is None
        if vec_env is None:
            vec_env = make_maml_vec_env(
                env,
                self.meta_batch_size,
                self.episodes_per_task,
                seed=self.seed,
                env_kwargs=env_kwargs,
            )
        elif vec_env.num_envs != self.meta_batch_size * self.episodes_per_task:
            raise ValueError(
                f"vec_env has {vec_env.num_envs} sub-envs, expected meta_batch_size * "
                f"episodes_per_task = {self.meta_batch_size * self.episodes_per_task}"
            )
        self.collector = VectorEpisodeCollector(vec_env, self.episodes_per_task, max_episode_length)
        observation_space = vec_env.single_observation_space
        action_space = vec_env.single_action_space

        if policy is None:
            with torch.random.fork_rng(devices=[]):  # seeded init without touching global state
                torch.manual_seed(self.seed)
                policy = GaussianMLPPolicy.from_spaces(
                    observation_space, action_space, hidden_sizes, init_std
                )
        else:
            try:
                check_policy_spaces(policy, observation_space, action_space)
            except ValueError:
                if built_here:  # do not leak the sub-envs (worker processes, if any)
                    vec_env.close()
                raise
        self.policy = policy

        seeds = np.random.SeedSequence(self.seed).spawn(3)
        self._rng = np.random.default_rng(seeds[0])
        self._generator = torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]))
        self._eval_generator = torch.Generator().manual_seed(int(seeds[2].generate_state(1)[0]))
        self.iteration = 0
        self.history: list[MAMLIterationStats] = []

    @property
    def steps_per_iteration(self) -> int:  # type: ignore[override]
        """Env steps of one iteration when episodes run to the horizon: a pre-update and a
        post-update batch of ``meta_batch_size * episodes_per_task`` episodes (0 if unknown)."""
        episodes = 2 * self.meta_batch_size * self.episodes_per_task
        return episodes * (self.horizon or 0)

    @property
    def sampler(self) -> VectorEpisodeCollector:
        """The old name of :attr:`collector` (goes in the next release)."""
        return self.collector

    # -- named steps -------------------------------------------------------------------------
    def collect(self, tasks: Sequence[Task], param_sets: Sequence[Params]) -> list[EpisodeBatch]:
        """``episodes_per_task`` episodes of each task, task ``k`` acting with
        ``param_sets[k]``; one batched policy forward per time step."""
        actor = BatchedGaussianActor(
            self.policy, param_sets, self.episodes_per_task, generator=self._generator
        )
        return self.collector.collect(tasks, actor, seed=int(self._rng.integers(2**31 - 1)))

    sample = collect
    """The old name of :meth:`collect` (goes in the next release)."""

    def process(self, episodes: EpisodeBatch) -> TaskData:
        """Loss inputs of one task's episodes (see :func:`process_episodes`)."""
        return process_episodes(episodes, self.discount, self.gae_lambda, self.policy.dtype)

    def inner_loss(self, params: Mapping[str, torch.Tensor], data: TaskData) -> torch.Tensor:
        """See :func:`inner_loss`."""
        return inner_loss(self.policy, params, data)

    def adapt(
        self, params: Mapping[str, torch.Tensor], data: TaskData, create_graph: bool | None = None
    ) -> Params:
        """:func:`adapt` with this algorithm's ``inner_lr`` and ``num_grad_updates``;
        ``create_graph`` defaults to ``not first_order``."""
        if create_graph is None:
            create_graph = not self.first_order
        return adapt(self.policy, params, data, self.inner_lr, self.num_grad_updates, create_graph)

    def meta_loss(
        self,
        adapted: Sequence[Params],
        valid_data: Sequence[TaskData],
        old: Sequence[OldOutputs],
    ) -> torch.Tensor:
        """See :func:`meta_loss`."""
        return meta_loss(self.policy, adapted, valid_data, old)

    def kl(
        self,
        adapted: Sequence[Params],
        valid_data: Sequence[TaskData],
        old: Sequence[OldOutputs],
    ) -> torch.Tensor:
        """See :func:`kl`."""
        return kl(self.policy, adapted, valid_data, old)

    def meta_optimize(
        self, train_data: Sequence[TaskData], valid_data: Sequence[TaskData]
    ) -> TRPOStep:
        """One TRPO step on the meta-parameters (in place; unchanged if rejected).

        The meta-gradient and the KL Hessian both differentiate through the inner adaptation
        (built once, with ``create_graph`` unless ``first_order``); line-search evaluations
        re-adapt from each candidate without building a graph.
        """
        params = list(self.policy.parameters())
        adapted = [self.adapt(self.policy.params(), data) for data in train_data]
        old = old_outputs(self.policy, adapted, valid_data)
        loss = self.meta_loss(adapted, valid_data, old)
        kl_value = self.kl(adapted, valid_data, old)
        gradient = flat_grad(loss, params, retain_graph=True)
        hvp = hessian_vector_product(lambda: kl_value, params, self.cg_damping)

        cache: dict[str, torch.Tensor] = {}

        def evaluate() -> tuple[torch.Tensor, torch.Tensor]:
            # The line search asks for the loss and then the KL at the same point: adapt once.
            at = flatten([param.detach() for param in params])
            if "at" not in cache or not torch.equal(cache["at"], at):
                candidate = [
                    self.adapt(detached_params(self.policy.params()), data, create_graph=False)
                    for data in train_data
                ]
                with torch.no_grad():
                    cache["loss"] = self.meta_loss(candidate, valid_data, old)
                    cache["kl"] = self.kl(candidate, valid_data, old)
                cache["at"] = at.clone()
            return cache["loss"], cache["kl"]

        return trpo_step(
            params,
            gradient,
            hvp,
            lambda: evaluate()[0],
            lambda: evaluate()[1],
            max_kl=self.max_kl,
            cg_iters=self.cg_iters,
            ls_steps=self.ls_steps,
            ls_ratio=self.ls_ratio,
            loss_before=float(loss.item()),
        )

    # -- MetaRLAlgorithm -------------------------------------------------------------------
    def train(self, n_iterations: int) -> dict[str, float]:
        """Run ``n_iterations`` meta-iterations, logging each at INFO and appending its
        :class:`MAMLIterationStats` to :attr:`history`; return the last one's
        :meth:`~MAMLIterationStats.metrics` (``{}`` for 0 iterations)."""
        if isinstance(n_iterations, bool) or n_iterations < 0:
            raise ValueError(f"n_iterations must be a non-negative integer, got {n_iterations!r}")
        results = []
        for _ in range(int(n_iterations)):
            stats = self._iteration()
            self.history.append(stats)
            results.append(stats)
            trpo = stats.trpo
            logger.info(
                "MAML iter %d: pre %.3f post %.3f | TRPO %s kl %.2e frac %.3f | "
                "sample %.2fs adapt %.2fs update %.2fs",
                stats.iteration,
                stats.pre_update_return,
                stats.post_update_return,
                trpo.reason,
                trpo.kl,
                trpo.step_fraction,
                stats.time_sampling,
                stats.time_adaptation,
                stats.time_outer_update,
            )
            if not trpo.accepted:
                logger.warning(
                    "MAML iter %d: outer step rejected (%s)", stats.iteration, trpo.reason
                )
        return results[-1].metrics() if results else {}

    def _iteration(self) -> MAMLIterationStats:
        tasks = self.task_sampler.sample(self.meta_batch_size, self._rng)
        start = time.perf_counter()
        meta = detached_params(self.policy.params())
        train_episodes = self.collect(tasks, [meta] * len(tasks))
        sampled = time.perf_counter()
        train_data = [self.process(episodes) for episodes in train_episodes]
        adapted = [
            detached_params(self.adapt(meta, data, create_graph=False)) for data in train_data
        ]
        adapted_at = time.perf_counter()
        valid_episodes = self.collect(tasks, adapted)
        sampled_again = time.perf_counter()
        valid_data = [self.process(episodes) for episodes in valid_episodes]
        step = self.meta_optimize(train_data, valid_data)
        done = time.perf_counter()
        stats = MAMLIterationStats(
            iteration=self.iteration,
            pre_update_return=_mean_return(train_episodes),
            post_update_return=_mean_return(valid_episodes),
            trpo=step,
            time_sampling=(sampled - start) + (sampled_again - adapted_at),
            time_adaptation=adapted_at - sampled,
            time_outer_update=done - sampled_again,
            env_steps=sum(e.n_steps for e in train_episodes)
            + sum(e.n_steps for e in valid_episodes),
        )
        self.iteration += 1
        return stats

    def get_exploration_policy(self) -> GaussianPolicy:
        """The meta-policy (a frozen copy of the current meta-parameters), sampling actions."""
        return GaussianPolicy(self.policy, self.policy.params(), generator=self._eval_generator)

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> GaussianPolicy:
        """The inner update (same ``inner_lr``, same ``num_grad_updates``) on
        ``exploration_episodes``, starting from ``exploration_policy``'s parameters.

        :raises TypeError: if ``exploration_policy`` did not come from
            :meth:`get_exploration_policy` of an algorithm with this network.
        :raises ValueError: if the episodes' observations or actions do not fit the policy.
        """
        if not isinstance(exploration_policy, GaussianPolicy) or (
            exploration_policy.module is not self.policy
        ):
            raise TypeError(
                f"adapt_policy needs the GaussianPolicy returned by this algorithm's "
                f"get_exploration_policy(), got {type(exploration_policy).__name__}"
            )
        module = self.policy
        obs_shape = exploration_episodes.observations.shape[1:]
        act_shape = exploration_episodes.actions.shape[1:]
        if math.prod(obs_shape) != module.obs_dim or math.prod(act_shape) != module.action_dim:
            raise ValueError(
                f"episodes have observations {obs_shape} and actions {act_shape}, the policy "
                f"takes ({module.obs_dim},) and gives ({module.action_dim},)"
            )
        data = self.process(exploration_episodes)
        adapted = self.adapt(exploration_policy.params, data, create_graph=False)
        return GaussianPolicy(module, adapted, generator=exploration_policy.generator)

    @contextlib.contextmanager
    def evaluation_streams(self, seed: int) -> Iterator[None]:
        """Meta-test action noise from a generator seeded with ``seed``; the evaluation generator
        (and the global ones) are restored afterwards."""
        saved = self._eval_generator.get_state()
        try:
            self._eval_generator.manual_seed(seed)
            with super().evaluation_streams(seed):
                yield
        finally:
            self._eval_generator.set_state(saved)

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Policy parameters, iteration count and every random state, for exact resumption.

        The sub-envs' own generators are not saved: each sampling pass reseeds them from the
        saved numpy generator, so a resumed run resets them identically.
        """
        return {
            "policy": {k: v.detach().clone() for k, v in self.policy.state_dict().items()},
            "iteration": self.iteration,
            "numpy_rng": self._rng.bit_generator.state,
            "torch_rng": self._generator.get_state(),
            "eval_torch_rng": self._eval_generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`.

        :raises ValueError: if keys are missing or the policy shapes differ.
        """
        missing = {"policy", "iteration", "numpy_rng", "torch_rng", "eval_torch_rng"} - set(state)
        if missing:
            raise ValueError(f"state is missing {sorted(missing)}: pass MAMLTRPO.state_dict()")
        try:
            self.policy.load_state_dict(state["policy"])
        except RuntimeError as error:
            raise ValueError(f"checkpoint policy does not fit this policy: {error}") from error
        self.iteration = int(state["iteration"])
        self._rng.bit_generator.state = state["numpy_rng"]
        self._generator.set_state(state["torch_rng"])
        self._eval_generator.set_state(state["eval_torch_rng"])

    def close(self) -> None:
        """Close the vector env."""
        self.collector.vec_env.close()


def _mean_return(batches: Sequence[EpisodeBatch]) -> float:
    """Mean undiscounted episode return over all episodes of all batches."""
    return float(np.mean(np.concatenate([batch.episode_returns() for batch in batches])))


# -- the entry point of baselines/maml-trpo.toml ---------------------------------------------------
def _maml_defaults(spec: Benchmark) -> dict[str, Any]:
    return config_dict(MAMLTRPOConfig())


def _build_maml(
    spec: Benchmark,
    seed: int,
    hyperparameters: dict[str, Any],
    log_dir: str | None,
    cpus: int | None = None,
) -> MetaRLAlgorithm:
    config = MAMLTRPOConfig(**hyperparameters)
    env_kwargs = spec.train_env_kwargs(seed)
    num_envs = config.meta_batch_size * config.episodes_per_task
    vec_env: gym.vector.VectorEnv[Any, Any, Any] | None = None
    if spec.metaworld is not None:
        # Meta-World: the sub-envs sharded across worker processes, one per core (at most
        # `cpus`), each stepping its shard in a loop (the same results as in-process)
        from metabench.vector.sharded import make_sharded_task_env

        vec_env = make_sharded_task_env(spec.env_id, num_envs, n_workers=cpus, **env_kwargs)
    elif gym.spec(spec.env_id).vector_entry_point is not None:
        # a batched vector env (HalfCheetah: all cheetahs stepped as one) instead of one
        # Python env per episode; the collector talks to both through the same API
        # (stepped on at most `cpus` processes, the calling one included: same results)
        kwargs: dict[str, Any] = {**env_kwargs, **({} if cpus is None else {"nthread": cpus})}
        vec_env = gym.make_vec(
            spec.env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
        )
    try:
        return MAMLTRPO(
            spec.env_id,
            spec.train_sampler(seed),
            config,
            seed=seed,
            env_kwargs=env_kwargs,
            vec_env=vec_env,
        )
    except BaseException:
        if vec_env is not None:  # do not leak its worker processes
            vec_env.close()
        raise


MAML_TRPO = Implementation(
    _maml_defaults, _build_maml, config="metabench.algos.maml.maml:MAMLTRPOConfig"
)
"""MAML-TRPO on a benchmark: ``entry_point = "metabench.algos.maml:MAML_TRPO"``."""
