"""MAML (Finn et al. 2017, "Model-Agnostic Meta-Learning", sections 3.3 and 5.3) for RL, with a
choice of inner loss and meta-optimiser (garage's torch ``MAML(inner_algo, meta_optimizer)``).

One meta-iteration, in garage's named steps:

1. :meth:`MAML.collect` episodes of every task of a meta-batch with the meta-parameters;
2. :func:`~metabench.algos.maml.functional.adapt`: ``num_grad_updates`` SGD steps on the
   :func:`~metabench.algos.maml.functional.inner_loss` of those episodes (``inner_loss``:
   ``"vpg"``, ``"trpo"`` or ``"ppo"``, see :mod:`~metabench.algos.maml.losses`), giving one
   adapted parameter set per task;
3. collect again with each task's adapted parameters;
4. :func:`~metabench.algos.maml.functional.meta_loss`: the ``outer_loss`` of the
   post-adaptation policies on those episodes, as a function of the meta-parameters *through*
   the adaptation (second-order unless ``first_order``); with a TRPO step it is constrained by
   the mean :func:`~metabench.algos.maml.functional.kl` between old and new post-adaptation
   policies;
5. :meth:`MAML.meta_optimize`: one :func:`~metabench.algos.common.trpo.trpo_step`
   (``outer_optimizer="trpo"``, MAML-TRPO) or ``outer_epochs`` Adam steps
   (``outer_optimizer="adam"``, garage's MAML-PPO and MAML-VPG).

Inner steps all use the same pre-update episodes. garage and pytorch-maml-rl resample between
inner steps during meta-training, but at meta-test :meth:`adapt_policy` receives one batch of
exploration episodes, so training the inner loop the way it is tested keeps the two identical
(with one inner step, the default, there is no difference). Later steps are then slightly
off-policy; the ``"vpg"`` inner loss ignores that, as garage's evaluator did, the ratio losses
weigh each step by ``pi / pi_pre-update``.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

import gymnasium as gym
import numpy as np
import torch

from metabench.algos.base import MetaRLAlgorithm, Policy
from metabench.algos.common.trpo import (
    TRPOStep,
    flat_grad,
    gauss_newton_vector_product,
    line_search_objectives,
    trpo_step,
)
from metabench.algos.implementation import Implementation
from metabench.algos.maml.collector import VectorEpisodeCollector
from metabench.algos.maml.config import MAMLConfig
from metabench.algos.maml.functional import (
    OldOutputs,
    TaskData,
    adapt,
    inner_loss,
    kl,
    kl_of_outputs,
    meta_loss,
    old_outputs,
    post_adaptation_outputs,
    process_episodes,
)
from metabench.algos.maml.outer import AdamStep, OuterStep, adam_step
from metabench.algos.maml.policy import (
    BatchedGaussianActor,
    GaussianMLPPolicy,
    GaussianPolicy,
    Params,
    check_policy_spaces,
    detached_params,
)
from metabench.algos.run_envs import RunEnvs
from metabench.data import EpisodeBatch
from metabench.devices import resolve_device, to_cpu
from metabench.registration import make_task_env
from metabench.rng import ALGORITHM_EVALUATION_TORCH, ALGORITHM_NUMPY, ALGORITHM_TORCH
from metabench.tasks.base import SetTaskSampler, Task, TaskSampler, ordered_sampler
from metabench.threads import torch_threads
from metabench.vector import make_task_vec_env

__all__ = ["MAML", "MAMLIterationStats"]

logger = logging.getLogger(__name__)


# -- the algorithm -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class MAMLIterationStats:
    """What one meta-iteration did (logged, and returned by :meth:`MAML.train`).

    :param iteration: 0-based index over the algorithm's lifetime.
    :param pre_update_return: mean undiscounted return with the meta-parameters.
    :param post_update_return: mean undiscounted return with the adapted parameters.
    :param outer: the meta-optimiser's record: a :class:`~metabench.algos.common.trpo.TRPOStep`
        (accepted, reason, losses, KL, step fraction) or an
        :class:`~metabench.algos.maml.outer.AdamStep`.
    :param time_sampling: seconds stepping envs (both sampling passes).
    :param time_adaptation: seconds fitting baselines and adapting for the second pass.
    :param time_outer_update: seconds in the meta-gradient and the meta-optimiser.
    :param env_steps: environment steps taken this iteration.
    """

    iteration: int
    pre_update_return: float
    post_update_return: float
    outer: OuterStep
    time_sampling: float
    time_adaptation: float
    time_outer_update: float
    env_steps: int

    @property
    def outer_name(self) -> str:
        """``"trpo"`` or ``"adam"``: the prefix of the outer step's numbers."""
        return "adam" if isinstance(self.outer, AdamStep) else "trpo"

    def as_dict(self) -> dict[str, Any]:
        """A flat dict, for loggers and result files."""
        flat = dataclasses.asdict(self)
        outer = flat.pop("outer")
        return {**flat, **{f"{self.outer_name}_{key}": value for key, value in outer.items()}}

    def metrics(self) -> dict[str, float]:
        """The numbers of :meth:`as_dict` as ``metatrain/<name>`` (what :meth:`MAML.train`
        returns): ``iteration``, ``pre_update_return``, ``post_update_return``, the ``trpo_*``
        (or ``adam_*``) numbers, the ``time_*`` seconds and ``env_steps``."""
        return {
            f"metatrain/{key}": float(value)
            for key, value in self.as_dict().items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }


class MAML(MetaRLAlgorithm):
    """MAML with a policy-gradient inner loop and a TRPO or Adam outer loop.

    The hyperparameters, their defaults (MAML-TRPO's: garage's MAML-TRPO benchmark against
    ProMP) and ranges are the fields of :class:`MAMLConfig`; ``inner_loss``, ``outer_loss`` and
    ``outer_optimizer`` make it garage's MAML-TRPO, MAML-PPO or MAML-VPG.

    :param env: a task env id (``"metabench/HalfCheetahVel-v0"``) or a factory of task envs.
    :param sampler: where meta-batches come from; ``None``: the task env's
        ``sample_tasks``. Its ``check_batch_size(meta_batch_size)`` must pass.
    :param config: the hyperparameters (:class:`MAMLConfig`); ``None``: the defaults.
    :param seed: seeds the policy initialisation, task sampling, env resets and action noise;
        no global random state is touched.
    :param env_kwargs: passed to the task env (e.g. ``{"horizon": 20}``).
    :param log_dir: unused (MAML logs through the harness).
    :param policy: use this policy instead of building one; its spaces must match the env.
    :param vec_env: a ready vector env of ``meta_batch_size * episodes_per_task`` sub-envs with
        ``set_tasks`` (e.g. a batched MuJoCo env); ``None`` builds one with
        :func:`~metabench.vector.make_task_vec_env`, every sub-env in this process.
    :param max_episode_length: cut episodes at this length (``None``: the env ends them).
    :param device: where the policy and its updates run (``"auto"``, ``"cpu"``, ``"cuda"``;
        :mod:`metabench.devices`). The envs, the baselines and the action noise stay on the CPU.

    Example::

        >>> import metabench
        >>> config = MAMLConfig(meta_batch_size=2, episodes_per_task=2, hidden_sizes=(8,))
        >>> algo = MAML("metabench/PointGoal-v0", config=config, env_kwargs={"horizon": 5})
        >>> stats = algo.train(1)
        >>> stats["metatrain/env_steps"], algo.history[-1].env_steps
        (40.0, 40)
    """

    uses_device = True

    def __init__(
        self,
        env: str | Callable[..., gym.Env[Any, Any]],
        sampler: TaskSampler | None = None,
        config: MAMLConfig | None = None,
        *,
        seed: int = 0,
        env_kwargs: dict[str, Any] | None = None,
        log_dir: str | None = None,
        device: str | torch.device = "cpu",
        policy: GaussianMLPPolicy | None = None,
        vec_env: gym.vector.VectorEnv[Any, Any, Any] | None = None,
        max_episode_length: int | None = None,
    ) -> None:
        self.device = resolve_device(device)
        self.config = config = config or MAMLConfig()
        hidden_sizes, init_std = config.hidden_sizes, config.init_std
        self.seed = int(seed)
        env_kwargs = dict(env_kwargs or {})

        # One task env of our own, for its task distribution (the sub-envs may be in processes).
        task_env: Any = make_task_env(env, **env_kwargs)
        sampler = ordered_sampler(sampler, config.train_task_order, self.seed)
        if sampler is None:
            sampler = SetTaskSampler(task_env.sample_tasks)
        sampler.check_batch_size(config.meta_batch_size)  # fail before building envs
        self.task_sampler = sampler
        self.horizon: int | None = getattr(task_env, "horizon", None)

        built_here = vec_env is None
        if vec_env is None:
            vec_env = make_task_vec_env(
                env,
                config.meta_batch_size * config.episodes_per_task,
                seed=self.seed,
                env_kwargs=env_kwargs,
            )
        elif vec_env.num_envs != config.meta_batch_size * config.episodes_per_task:
            raise ValueError(
                f"vec_env has {vec_env.num_envs} sub-envs, expected meta_batch_size * "
                f"episodes_per_task = {config.meta_batch_size * config.episodes_per_task}"
            )
        self.collector = VectorEpisodeCollector(
            vec_env, config.episodes_per_task, max_episode_length
        )
        observation_space = vec_env.single_observation_space
        action_space = vec_env.single_action_space

        if policy is None:
            with torch.random.fork_rng(devices=[]):  # seeded init without touching global state
                torch.manual_seed(self.seed)
                policy = GaussianMLPPolicy.from_spaces(
                    observation_space,
                    action_space,
                    hidden_sizes,
                    init_std,
                    config.weight_init,
                    config.action_scale,
                )
        else:
            try:
                check_policy_spaces(policy, observation_space, action_space)
            except ValueError:
                if built_here:  # do not leak the sub-envs (worker processes, if any)
                    vec_env.close()
                raise
        self.policy = policy.to(self.device)

        self._rng = ALGORITHM_NUMPY.generator(self.seed)
        self._generator = torch.Generator().manual_seed(ALGORITHM_TORCH.seed(self.seed))
        self._eval_generator = torch.Generator().manual_seed(
            ALGORITHM_EVALUATION_TORCH.seed(self.seed)
        )
        self.iteration = 0
        self._env_steps_taken: int | None = 0
        self.history: list[MAMLIterationStats] = []
        self._outer_optimizer: torch.optim.Adam | None = None
        if config.outer_optimizer == "adam":
            self._outer_optimizer = torch.optim.Adam(
                self.policy.parameters(), lr=config.outer_lr, eps=config.adam_eps
            )

    @classmethod
    def from_benchmark(
        cls, envs: RunEnvs, config: MAMLConfig, *, log_dir: str | None = None, device: str = "cpu"
    ) -> Self:
        """MAML on a benchmark, with the vector env that steps its family fastest on the run's
        cores (:meth:`RunEnvs.episode_batch <metabench.algos.run_envs.RunEnvs.episode_batch>`):
        the same numbers as one process."""
        sampler = envs.train_sampler()
        vec_env = envs.episode_batch(config.meta_batch_size * config.episodes_per_task)
        return cls.on_train_envs(
            envs, config, sampler, log_dir=log_dir, device=device, vec_env=vec_env
        )

    @property
    def steps_per_iteration(self) -> int:  # type: ignore[override]
        """Env steps of one iteration when episodes run to the horizon: a pre-update and a
        post-update batch of ``meta_batch_size * episodes_per_task`` episodes (0 if unknown)."""
        episodes = 2 * self.config.meta_batch_size * self.config.episodes_per_task
        return episodes * (self.horizon or 0)

    @property
    def env_steps_taken(self) -> int | None:
        """The steps of every iteration's episodes, which end at the horizon or earlier (a
        walker that falls), where ``steps_per_iteration`` counts each at the horizon; ``None``
        after resuming from a checkpoint saved before it was counted."""
        return self._env_steps_taken

    # -- named steps -------------------------------------------------------------------------
    def collect(self, tasks: Sequence[Task], param_sets: Sequence[Params]) -> list[EpisodeBatch]:
        """``episodes_per_task`` episodes of each task, task ``k`` acting with
        ``param_sets[k]``; one batched policy forward per time step."""
        actor = BatchedGaussianActor(
            self.policy, param_sets, self.config.episodes_per_task, generator=self._generator
        )
        return self.collector.collect(tasks, actor, seed=int(self._rng.integers(2**31 - 1)))

    def process(self, episodes: EpisodeBatch) -> TaskData:
        """Loss inputs of one task's episodes (see :func:`process_episodes`)."""
        return process_episodes(
            episodes,
            self.config.discount,
            self.config.gae_lambda,
            self.policy.dtype,
            scale=self.config.advantage_scale,
            device=self.device,
        )

    def inner_loss(self, params: Mapping[str, torch.Tensor], data: TaskData) -> torch.Tensor:
        """:func:`inner_loss` at ``params``, its ratios (if any) to the policy at ``params``."""
        old_log_likelihood = None
        if self.config.inner_loss != "vpg":
            with torch.no_grad():
                old_log_likelihood = self.policy.log_likelihood(
                    data.observations, data.actions, params
                )
        return inner_loss(
            self.policy,
            params,
            data,
            self.config.inner_loss,
            old_log_likelihood,
            self.config.clip_range,
        )

    def adapt(
        self, params: Mapping[str, torch.Tensor], data: TaskData, create_graph: bool | None = None
    ) -> Params:
        """:func:`adapt` with this algorithm's ``inner_lr`` and ``num_grad_updates``;
        ``create_graph`` defaults to ``not first_order``."""
        if create_graph is None:
            create_graph = not self.config.first_order
        return adapt(
            self.policy,
            params,
            data,
            self.config.inner_lr,
            self.config.num_grad_updates,
            create_graph,
            loss=self.config.inner_loss,
            clip_range=self.config.clip_range,
        )

    def meta_loss(
        self,
        adapted: Sequence[Params],
        valid_data: Sequence[TaskData],
        old: Sequence[OldOutputs],
    ) -> torch.Tensor:
        """:func:`meta_loss` with this algorithm's ``outer_loss``."""
        return meta_loss(
            self.policy, adapted, valid_data, old, self.config.outer_loss, self.config.clip_range
        )

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
    ) -> OuterStep:
        """One outer step on the meta-parameters (in place): :meth:`trpo_optimize` or
        :meth:`adam_optimize`, as ``outer_optimizer`` says."""
        if self.config.outer_optimizer == "adam":
            return self.adam_optimize(train_data, valid_data)
        return self.trpo_optimize(train_data, valid_data)

    def adam_optimize(
        self, train_data: Sequence[TaskData], valid_data: Sequence[TaskData]
    ) -> AdamStep:
        """``outer_epochs`` Adam steps on the meta-loss (garage's MAML-PPO and MAML-VPG).

        Each step re-adapts from the current meta-parameters (with ``create_graph`` unless
        ``first_order``); the old post-adaptation policies stay the ones that collected
        ``valid_data``, so PPO's ratio moves away from 1 (and its clipping acts) from the second
        epoch on.
        """
        assert self._outer_optimizer is not None
        old: list[OldOutputs] = []

        def loss_at(epoch: int) -> torch.Tensor:
            adapted = [self.adapt(self.policy.params(), data) for data in train_data]
            if epoch == 0:
                old.extend(old_outputs(self.policy, adapted, valid_data))
            return self.meta_loss(adapted, valid_data, old)

        def after() -> tuple[torch.Tensor, torch.Tensor]:
            return self._loss_and_kl_now(train_data, valid_data, old)

        return adam_step(
            self._outer_optimizer,
            list(self.policy.parameters()),
            loss_at,
            after,
            self.config.outer_epochs,
        )

    def _loss_and_kl_now(
        self,
        train_data: Sequence[TaskData],
        valid_data: Sequence[TaskData],
        old: Sequence[OldOutputs],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Meta-loss and KL of the current meta-parameters, re-adapted without a graph (the
        outer optimisers' check of a step they took)."""
        candidate = [
            self.adapt(detached_params(self.policy.params()), data, create_graph=False)
            for data in train_data
        ]
        with torch.no_grad():
            return (
                self.meta_loss(candidate, valid_data, old),
                self.kl(candidate, valid_data, old),
            )

    def trpo_optimize(
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
        gradient = flat_grad(loss, params, retain_graph=True)
        # the post-adaptation policies equal the old ones here, where the KL's Hessian is its
        # Gauss-Newton product: the same floats as double backpropagation, 2/3 of its FLOPs
        hvp = gauss_newton_vector_product(
            post_adaptation_outputs(self.policy, adapted, valid_data),
            lambda outputs: kl_of_outputs(outputs, old),
            params,
            self.config.cg_damping,
        )

        def loss_and_kl() -> tuple[torch.Tensor, torch.Tensor]:
            return self._loss_and_kl_now(train_data, valid_data, old)

        loss_fn, kl_fn = line_search_objectives(params, loss_and_kl)
        return trpo_step(
            params,
            gradient,
            hvp,
            loss_fn,
            kl_fn,
            max_kl=self.config.max_kl,
            cg_iters=self.config.cg_iters,
            ls_steps=self.config.ls_steps,
            ls_ratio=self.config.ls_ratio,
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
            outer = stats.outer
            logger.info(
                "MAML iter %d: pre %.3f post %.3f | %s %s kl %.2e %s | "
                "sample %.2fs adapt %.2fs update %.2fs",
                stats.iteration,
                stats.pre_update_return,
                stats.post_update_return,
                stats.outer_name.upper() if stats.outer_name == "trpo" else "Adam",
                outer.reason,
                outer.kl,
                f"frac {outer.step_fraction:.3f}"
                if isinstance(outer, TRPOStep)
                else f"epochs {outer.epochs}",
                stats.time_sampling,
                stats.time_adaptation,
                stats.time_outer_update,
            )
            if not outer.accepted:
                logger.warning(
                    "MAML iter %d: outer step rejected (%s)", stats.iteration, outer.reason
                )
        return results[-1].metrics() if results else {}

    def _iteration(self) -> MAMLIterationStats:
        tasks = self.task_sampler.sample_batch(
            self.iteration, self.config.meta_batch_size, self._rng
        )
        start = time.perf_counter()
        meta = detached_params(self.policy.params())
        train_episodes = self.collect(tasks, [meta] * len(tasks))
        sampled = time.perf_counter()
        with torch_threads(self.config.update_threads):
            train_data = [self.process(episodes) for episodes in train_episodes]
            adapted = [
                detached_params(self.adapt(meta, data, create_graph=False)) for data in train_data
            ]
        adapted_at = time.perf_counter()
        valid_episodes = self.collect(tasks, adapted)
        sampled_again = time.perf_counter()
        with torch_threads(self.config.update_threads):
            valid_data = [self.process(episodes) for episodes in valid_episodes]
            step = self.meta_optimize(train_data, valid_data)
        done = time.perf_counter()
        stats = MAMLIterationStats(
            iteration=self.iteration,
            pre_update_return=_mean_return(train_episodes),
            post_update_return=_mean_return(valid_episodes),
            outer=step,
            time_sampling=(sampled - start) + (sampled_again - adapted_at),
            time_adaptation=adapted_at - sampled,
            time_outer_update=done - sampled_again,
            env_steps=sum(e.n_steps for e in train_episodes)
            + sum(e.n_steps for e in valid_episodes),
        )
        self.iteration += 1
        if self._env_steps_taken is not None:
            self._env_steps_taken += stats.env_steps
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
        return GaussianPolicy(
            module,
            adapted,
            generator=exploration_policy.generator,
            deterministic=self.config.deterministic_test,
        )

    # meta-test draws (action noise; PEARL: z too) from ``_eval_generator``, seeded per meta-test
    evaluation_streams = MetaRLAlgorithm._eval_generator_streams

    # -- checkpoints ------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Policy parameters, the iteration and env-step counts and every random state, for exact
        resumption.

        The sub-envs' own generators are not saved: each sampling pass reseeds them from the
        saved numpy generator, so a resumed run resets them identically. With an Adam outer
        step its moments are saved too (``"outer_optimizer"``; a TRPO step keeps no state).
        """
        state = {
            "policy": {k: v.detach().cpu().clone() for k, v in self.policy.state_dict().items()},
            "iteration": self.iteration,
            "env_steps_taken": self._env_steps_taken,
            "numpy_rng": self._rng.bit_generator.state,
            "torch_rng": self._generator.get_state(),
            "eval_torch_rng": self._eval_generator.get_state(),
        }
        if self._outer_optimizer is not None:
            # a copy: the optimizer's own state tensors change in place at its next step
            state["outer_optimizer"] = copy.deepcopy(self._outer_optimizer.state_dict())
            if self.device.type != "cpu":  # the checkpoint loads on either device
                state["outer_optimizer"] = to_cpu(state["outer_optimizer"])
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`.

        :raises ValueError: if keys are missing or the policy shapes differ.
        """
        required = {"policy", "iteration", "numpy_rng", "torch_rng", "eval_torch_rng"}
        if self._outer_optimizer is not None:
            required.add("outer_optimizer")
        missing = required - set(state)
        if missing:
            raise ValueError(
                f"state is missing {sorted(missing)}: pass the state_dict() of a MAML with the "
                f"same outer_optimizer"
            )
        self.load_agent_state(state)
        if self._outer_optimizer is not None:
            self._outer_optimizer.load_state_dict(state["outer_optimizer"])

    def agent_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """The policy, the counts and the random states, without the outer step's Adam
        moments (``"outer_optimizer"``, present with an Adam outer step only)."""
        return {key: value for key, value in state.items() if key != "outer_optimizer"}

    def load_agent_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`agent_state` (or the policy and random states of a whole
        :meth:`state_dict`).

        :raises ValueError: if the policy shapes differ.
        """
        try:
            self.policy.load_state_dict(state["policy"])
        except RuntimeError as error:
            raise ValueError(f"checkpoint policy does not fit this policy: {error}") from error
        self.iteration = int(state["iteration"])
        self._env_steps_taken = state.get("env_steps_taken")  # absent: saved before it was counted
        self._rng.bit_generator.state = state["numpy_rng"]
        self._generator.set_state(state["torch_rng"])
        self._eval_generator.set_state(state["eval_torch_rng"])

    def close(self) -> None:
        """Close the vector env."""
        self.collector.vec_env.close()


def _mean_return(batches: Sequence[EpisodeBatch]) -> float:
    """Mean undiscounted episode return over all episodes of all batches."""
    return float(np.mean(np.concatenate([batch.episode_returns() for batch in batches])))


# -- the entry point of baselines/maml-{trpo,ppo,vpg}.toml -----------------------------------------
MAML_IMPLEMENTATION = Implementation(MAML, MAMLConfig)
"""MAML on a benchmark: ``entry_point = "metabench.algos.maml:MAML_IMPLEMENTATION"``; each
baseline file's ``[defaults]`` makes it MAML-TRPO, MAML-PPO or MAML-VPG."""
