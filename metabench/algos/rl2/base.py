"""What RL2 is whatever updates its recurrent policy (Duan et al. 2016): :class:`RL2`, the options
every RL2 config shares, and its default trial on a benchmark.

One iteration collects exactly one trial per sub-env of metabench's trial-aware vector env
(``n_steps`` = trial length): each sub-env holds one task of the meta-batch for a whole trial
(``episodes_per_trial`` episodes), the recurrent state resets only at trial starts, and returns
and advantages span the episodes of a trial, as in garage's RL2. :class:`RL2PPO
<metabench.algos.rl2.rl2_ppo.RL2PPO>` and :class:`RL2TRPO
<metabench.algos.rl2.rl2_trpo.RL2TRPO>` build the model that updates it.
"""

from __future__ import annotations

import abc
import functools
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Self

import gymnasium as gym
import numpy as np
import torch as th
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.callbacks import BaseCallback

from metabench.algos.base import MetaRLAlgorithm, Policy, PolicyBatch
from metabench.algos.benchmark import Benchmark
from metabench.algos.common.sb3 import (
    SB3Checkpoints,
    quiet_logger,
    rescale_actions,
    unclipped_actions,
)
from metabench.algos.rl2.meta_test import RL2AdaptedPolicy, RL2ExplorationPolicy, RL2PolicyBatch
from metabench.algos.rl2.policy import (
    TanhEncoder,
    WholeSequenceGruPolicy,
    WholeSequenceLstmPolicy,
)
from metabench.algos.rl2.recurrent_ppo import RL2RecurrentPPO
from metabench.algos.run_envs import RunEnvs
from metabench.data import EpisodeBatch
from metabench.devices import DeviceError, resolve_device
from metabench.tasks.base import TaskSampler, ordered_sampler
from metabench.validation import recorded_config
from metabench.vector import MetaBatchVecEnv, make_meta_vec_env
from metabench.wrappers import EPISODE_END, EPISODE_INDEX, EPISODE_RETURN, EPISODE_SUCCESS, RL2Env

POLICY_CLASSES: dict[str, type[RecurrentActorCriticPolicy]] = {
    "lstm": WholeSequenceLstmPolicy,
    "gru": WholeSequenceGruPolicy,
}


CLIP_ACTIONS_DOC = (
    "true: SB3 clips the policy's Gaussian sample to the action space before the env (and "
    "rescales bounds other than [-1, 1] to it). false: the raw sample reaches the env, as in "
    "garage's RL2 examples; HalfCheetah then charges its control cost on the raw sample and "
    "MuJoCo clamps the actuators"
)


ZERO_AT_EPISODE_START_DOC = (
    "true: the first observation of each inner episode carries zeros for the previous action, "
    "reward and done flag, as garage's RL2Env and Meta-World+ (RNNBasedMetaRLWrapper with "
    "same-step autoreset) give: the step that ends an episode never reaches the policy. false: "
    "it carries that step's action, reward and done flag, so the policy sees where an episode "
    "ended"
)
ENCODER_SIZES_DOC = (
    "widths of the tanh layers between the RL2 observation and the recurrent cell, every one "
    "activated; empty: none (garage). Meta-World+: [256, 256, 256] (metaworld-algorithms "
    "examples/meta_learning/rl2_ml10.py: encoder depth 2 plus its activated output layer)"
)
POLICY_HEAD_DOC = (
    "linear: a linear mean and a learned state-independent log-std (SB3, garage). tanh: one "
    "linear layer gives the mean and the log-std, both through tanh, so the std depends on the "
    "state and the history and lies in [e^-1, e] (Meta-World+: std_type=MLP_HEAD, "
    "activate_head=True, squash_tanh=False); gru only"
)
WEIGHT_INIT_DOC = (
    "sb3: SB3's orthogonal initialisation around PyTorch's default recurrent weights. xavier: "
    "Meta-World+'s, Xavier-uniform encoder, head and cell input weights, orthogonal recurrent "
    "weights per gate, zero biases; gru only"
)
RECURRENT_BIAS_DOC = (
    "all: PyTorch's GRU, a trained recurrent bias in the reset, update and candidate gates "
    "(garage's Keras GRUCell has them too). candidate: Flax's GRUCell (Meta-World+), a recurrent "
    "bias in the candidate gate only; the reset and update gates' stay at 0, where PyTorch's, "
    "trained beside the input biases, move those gates' total bias twice as fast; gru only"
)
DETERMINISTIC_TEST_DOC = (
    "test episodes act with the distribution's mode, exploration episodes sample (Meta-World+'s "
    "RL2 evaluation: adapt_action samples, eval_action takes dist.mode())"
)


def check_network_options(config: Any) -> None:
    """Raise ``ValueError`` naming the fix for network options the chosen cell cannot take."""
    if config.recurrent_cell != "gru" and (
        config.policy_head,
        config.weight_init,
        config.gru_recurrent_bias,
    ) != ("linear", "sb3", "all"):
        raise ValueError(
            "policy_head='tanh', weight_init='xavier' and gru_recurrent_bias='candidate' are "
            "built for the GRU policy (Meta-World+'s): set recurrent_cell='gru', or leave them at "
            "'linear', 'sb3' and 'all'"
        )


LINEAR_BASELINE_FIT_DOC = (
    "with value_baseline='linear': what one fit of the baseline covers. batch: every trial of "
    "the iteration together (garage: RL2NPO fits one LinearFeatureBaseline on all paths). "
    "trial: each trial on its own, its time feature running over the whole trial "
    "(Meta-World+ at its paper commit a2abf6a3bb1e: LinearFeatureBaseline._fit_baseline fits "
    "one set of coefficients per task, and RL2 hands it each task's trial as one episode)"
)


STEP_IN_WORKERS_DOC = (
    "step the sub-envs on every core the run may use (--cpus): the training process steps one "
    "shard, a worker process each other one, while the policy acts on one torch thread; the "
    "same numbers as in-process"
)


class _TrialStats(BaseCallback):
    """Collects meta-train return and success per episode index of the trial from ``info``."""

    def __init__(self) -> None:
        super().__init__()
        self.returns: dict[int, list[float]] = defaultdict(list)
        self.successes: list[float] = []

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if info.get(EPISODE_END):
                self.returns[info[EPISODE_INDEX]].append(info[EPISODE_RETURN])
                self.successes.append(float(info[EPISODE_SUCCESS]))
        return True

    def summary(self) -> dict[str, float]:
        stats = {
            f"metatrain/return_episode_{k + 1}": float(np.mean(v))
            for k, v in sorted(self.returns.items())
        }
        every = [r for v in self.returns.values() for r in v]
        stats["metatrain/average_return"] = float(np.mean(every)) if every else float("nan")
        stats["metatrain/success_rate"] = (
            float(np.mean(self.successes)) if self.successes else float("nan")
        )
        return stats


def _rl2_env(
    env: gym.Env[Any, Any], reward_scale: float, zero_at_episode_start: bool, clip_actions: bool
) -> gym.Env[Any, Any]:
    """What RL2's policies observe: ``RL2Env`` around ``env``, actions as SB3 presents them."""
    rl2 = RL2Env(env, reward_scale=reward_scale, zero_at_episode_start=zero_at_episode_start)
    return _action_wrapper(clip_actions)(rl2)


def _action_wrapper(clip_actions: bool) -> Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]:
    return rescale_actions if clip_actions else unclipped_actions


class RL2(SB3Checkpoints, MetaRLAlgorithm):
    """What RL2 is whatever updates its recurrent policy: the trial-aware vector env, one trial
    per sub-env per iteration, the meta-test policies and the checkpoints. :class:`RL2PPO` and
    :class:`~metabench.algos.rl2.rl2_trpo.RL2TRPO` only build their model.

    :param env: a task env id (``"metabench/HalfCheetahVel-v0"``) or a task env factory.
    :param sampler: meta-training tasks; ``None`` uses the task env's ``sample_tasks``.
    :param config: hyperparameters (an instance of the subclass's ``config_class``); ``None``
        takes its defaults.
    :param seed: seeds the sub-envs, the task sequence and torch.
    :param env_kwargs: passed to the task env (``horizon``, ``split``, ...).
    :param log_dir: directory for SB3's TensorBoard logs, or ``None``.
    :param venv: the meta-batch's vector env, built as :meth:`meta_batch_settings` says (its
        sampler drawing the tasks; :meth:`from_benchmark` builds it on the run's cores);
        ``None``: every sub-env in this process.
    :param device: where the policy acts and trains (``"auto"``, ``"cpu"``, ``"cuda"``;
        :mod:`metabench.devices`); the envs stay on the CPU.
    :param policy_class: ``None`` picks the whole-sequence policy of ``config.recurrent_cell``;
        sb3-contrib's stock ``RecurrentActorCriticPolicy`` trains the same LSTM policy step by
        step (only for speed comparisons: results are equal).
    """

    config: Any
    config_class: type[Any]
    model: RL2RecurrentPPO
    tb_log_name = "rl2"
    uses_device = True

    def __init__(
        self,
        env: str | Callable[..., gym.Env[Any, Any]],
        sampler: TaskSampler | None = None,
        config: Any = None,
        *,
        seed: int = 0,
        env_kwargs: dict[str, Any] | None = None,
        log_dir: str | None = None,
        device: str | th.device = "cpu",
        policy_class: type[RecurrentActorCriticPolicy] | None = None,
        venv: MetaBatchVecEnv | None = None,
    ) -> None:
        self.config = config = self.config_class() if config is None else config
        self.device = resolve_device(device)
        if self.device.type != "cpu" and getattr(config, "update_in_workers", False):
            raise DeviceError(
                "update_in_workers=true splits the update over CPU worker processes: set it to "
                "false to train on the GPU"
            )
        if policy_class is None:
            policy_class = POLICY_CLASSES[config.recurrent_cell]
        elif issubclass(policy_class, WholeSequenceGruPolicy) != (config.recurrent_cell == "gru"):
            raise ValueError(
                f"policy_class {policy_class.__name__} does not build the "
                f"{config.recurrent_cell!r} cell that config.recurrent_cell asks for"
            )
        if venv is None:
            built = make_meta_vec_env(
                env,
                config.meta_batch_size,
                seed=seed,
                backend="sb3",
                env_kwargs=env_kwargs,
                **self.meta_batch_settings(config, sampler, seed),
            )
            assert isinstance(built, MetaBatchVecEnv)
            venv = built
        elif venv.num_envs != config.meta_batch_size:
            raise ValueError(
                f"venv has {venv.num_envs} sub-envs, expected meta_batch_size = "
                f"{config.meta_batch_size}"
            )
        self.venv: MetaBatchVecEnv = venv
        horizons = self.venv.get_attr("horizon", indices=[0])
        self.trial_length = config.episodes_per_trial * int(horizons[0])
        self.steps_per_iteration = self.trial_length * config.meta_batch_size
        policy_kwargs: dict[str, Any] = {
            "lstm_hidden_size": config.hidden_size,
            "net_arch": {"pi": [], "vf": []},
            "log_std_init": config.log_std_init,
        }
        if config.encoder_sizes:
            policy_kwargs["features_extractor_class"] = TanhEncoder
            policy_kwargs["features_extractor_kwargs"] = {"sizes": config.encoder_sizes}
        if config.recurrent_cell == "gru":
            policy_kwargs.update(
                head=config.policy_head,
                init=config.weight_init,
                recurrent_bias=config.gru_recurrent_bias,
            )
        if config.value_baseline == "linear":
            policy_kwargs["enable_critic_lstm"] = False  # no critic to run
        self.model = self._make_model(policy_class, policy_kwargs, seed, log_dir)
        quiet_logger(self.model, log_dir)
        if config.step_in_workers:  # torch's threads would spin on the env workers' cores
            self.model.rollout_threads = 1
        self.iterations = 0

    @classmethod
    def from_benchmark(
        cls, envs: RunEnvs, config: Any, *, log_dir: str | None = None, device: str = "cpu"
    ) -> Self:
        """RL2 on a benchmark: with ``step_in_workers``, the meta-batch's sub-envs step on the
        run's cores (:meth:`RunEnvs.trial_batch <metabench.algos.run_envs.RunEnvs.trial_batch>`),
        the same numbers as in this process."""
        sampler = envs.train_sampler()
        venv = envs.trial_batch(
            config.meta_batch_size,
            in_workers=config.step_in_workers,
            **cls.meta_batch_settings(config, sampler, envs.seed),
        )
        return cls.on_train_envs(envs, config, sampler, log_dir=log_dir, device=device, venv=venv)

    @staticmethod
    def meta_batch_settings(config: Any, sampler: TaskSampler | None, seed: int) -> dict[str, Any]:
        """How RL2's meta-batch is built of ``config``'s trials: the arguments of
        :func:`~metabench.vector.make_meta_vec_env` but the env, its arguments, the seed and
        the processes."""
        return {
            "episodes_per_trial": config.episodes_per_trial,
            "sampler": ordered_sampler(sampler, config.train_task_order, seed),
            "rl2": True,
            "reward_scale": config.reward_scale,
            "zero_at_episode_start": config.zero_at_episode_start,
            "wrapper": _action_wrapper(config.clip_actions),
        }

    @abc.abstractmethod
    def _make_model(
        self,
        policy_class: type[RecurrentActorCriticPolicy],
        policy_kwargs: dict[str, Any],
        seed: int,
        log_dir: str | None,
    ) -> RL2RecurrentPPO:
        """The sb3-contrib model that collects one trial per sub-env and updates the policy."""

    def _model_kwargs(self) -> dict[str, Any]:
        """The arguments every RL2 model takes from the config: the rollout and advantages."""
        config = self.config
        maximum_entropy = config.entropy_method == "max"
        return {
            "n_steps": self.trial_length,
            "gamma": config.discount,
            "gae_lambda": config.gae_lambda,
            "normalize_advantage": config.normalize_advantage,
            "ent_coef": 0.0 if maximum_entropy else config.ent_coef,
            "value_baseline": config.value_baseline,
            "entropy_method": config.entropy_method,
            "policy_ent_coeff": config.ent_coef if maximum_entropy else 0.0,
            "device": self.device,
        }

    @property
    def env_steps(self) -> int:
        """Environment steps taken in meta-training so far."""
        return self.iterations * self.steps_per_iteration

    def train(self, n_iterations: int) -> dict[str, float]:
        """Run ``n_iterations`` iterations, one trial per sub-env each; returns their stats."""
        if n_iterations < 1:
            raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
        stats = _TrialStats()
        self.model.learn(
            total_timesteps=n_iterations * self.steps_per_iteration,
            callback=stats,
            reset_num_timesteps=False,
            tb_log_name=self.tb_log_name,
        )
        self.iterations += n_iterations
        return {**stats.summary(), **self._update_stats()}

    def _update_stats(self) -> dict[str, float]:
        """``metatrain/`` numbers of the last update, beside the trials' returns."""
        return {}

    def get_exploration_policy(self) -> Policy:
        return RL2ExplorationPolicy(self.model, self.config.deterministic_eval)

    def adapt_policy(
        self, exploration_policy: Policy, exploration_episodes: EpisodeBatch
    ) -> Policy:
        """RL2 adapts in its hidden state: the policy goes on from the state exploration ended
        with, restored at the start of every test episode (:class:`RL2AdaptedPolicy`), acting
        with the mode if ``deterministic_test`` or ``deterministic_eval``."""
        if not isinstance(exploration_policy, RL2ExplorationPolicy):
            raise TypeError("adapt_policy needs the policy returned by get_exploration_policy()")
        return RL2AdaptedPolicy(exploration_policy, bool(self.deterministic_test))

    def get_exploration_policies(self, n: int) -> PolicyBatch:
        return RL2PolicyBatch(self.model, self.config.deterministic_eval, n)

    def adapt_policies(
        self, exploration_policies: PolicyBatch, exploration_episodes: Sequence[EpisodeBatch]
    ) -> PolicyBatch:
        """As :meth:`adapt_policy`, row by row: each row goes on from its own hidden state."""
        if not isinstance(exploration_policies, RL2PolicyBatch):
            raise TypeError("adapt_policies needs the batch returned by get_exploration_policies()")
        return exploration_policies.adapted(bool(self.deterministic_test))

    def wrap_env(self, env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        return self.env_wrapper()(env)

    def env_wrapper(self) -> Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]:
        return functools.partial(
            _rl2_env,
            reward_scale=self.config.reward_scale,
            zero_at_episode_start=self.config.zero_at_episode_start,
            clip_actions=self.config.clip_actions,
        )

    # -- checkpoints -----------------------------------------------------------------------------
    def checkpoint_identity(self) -> dict[str, Any]:
        return {"config": recorded_config(self.config)}


def trial_defaults(spec: Benchmark) -> dict[str, Any]:
    """RL2's default trial on a benchmark: the benchmark's episodes per trial."""
    return {"episodes_per_trial": spec.episodes_per_trial}
