"""RL2-PPO: a recurrent policy meta-trained with PPO across trials (Duan et al. 2016).

Built on sb3-contrib's ``RecurrentPPO`` and metabench's trial-aware vector env: each sub-env holds
one task of the meta-batch for a whole trial (``episodes_per_trial`` episodes), the LSTM state
resets only at trial starts, and returns and advantages span the episodes of a trial, as in
garage's RL2. One iteration collects exactly one trial per sub-env (``n_steps`` = trial length).
Training uses :class:`~metabench.algos.rl2.policy.WholeSequenceLstmPolicy`, which runs the LSTM
over whole sequences (exact, several times faster than the stock step-by-step loop).

Three components of garage's published RL2-PPO can be switched on from :class:`RL2PPOConfig`
(defaults: sb3-contrib's behaviour): ``value_baseline="linear"`` (garage's linear feature
baseline instead of a learned critic), ``recurrent_cell="gru"`` and ``entropy_method="max"``
(the entropy bonus added to the rewards); see :mod:`metabench.algos.rl2.ppo`.
"""

from __future__ import annotations

import abc
import functools
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch as th
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from metabench.algos.base import MetaRLAlgorithm, Policy, PolicyBatch
from metabench.algos.benchmark import Benchmark
from metabench.algos.common.sb3 import (
    load_training_state,
    quiet_logger,
    rescale_actions,
    training_state,
    unclipped_actions,
)
from metabench.algos.implementation import Implementation
from metabench.algos.rl2.chunked_update import check_chunk_settings
from metabench.algos.rl2.policy import (
    TanhEncoder,
    WholeSequenceGruPolicy,
    WholeSequenceLstmPolicy,
)
from metabench.algos.rl2.ppo import RL2RecurrentPPO
from metabench.data import EpisodeBatch
from metabench.devices import DeviceError, resolve_device
from metabench.tasks.base import TaskSampler
from metabench.validation import check_config, option, recorded_config
from metabench.vector import MetaBatchVecEnv, make_meta_vec_env
from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv
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
DETERMINISTIC_TEST_DOC = (
    "test episodes act with the distribution's mode, exploration episodes sample (Meta-World+'s "
    "RL2 evaluation: adapt_action samples, eval_action takes dist.mode())"
)


def check_network_options(config: Any) -> None:
    """Raise ``ValueError`` naming the fix for network options the chosen cell cannot take."""
    if config.recurrent_cell != "gru" and (config.policy_head, config.weight_init) != (
        "linear",
        "sb3",
    ):
        raise ValueError(
            "policy_head='tanh' and weight_init='xavier' are built for the GRU policy "
            "(Meta-World+'s): set recurrent_cell='gru', or leave them at 'linear' and 'sb3'"
        )


LINEAR_BASELINE_FIT_DOC = (
    "with value_baseline='linear': what one fit of the baseline covers. batch: every trial of "
    "the iteration together (garage: RL2NPO fits one LinearFeatureBaseline on all paths). "
    "trial: each trial on its own, its time feature running over the whole trial "
    "(Meta-World+ at its paper commit a2abf6a3bb1e: LinearFeatureBaseline._fit_baseline fits "
    "one set of coefficients per task, and RL2 hands it each task's trial as one episode)"
)


PROCESSES_DOC = (
    "step the sub-envs on every core the run may use (--cpus): the training process steps one "
    "shard, a worker process each other one, while the policy acts on one torch thread; the "
    "same numbers as in-process"
)


@dataclass(frozen=True)
class RL2PPOConfig:
    """Every RL2-PPO hyperparameter in one place (defaults: garage's HalfCheetahVel example).

    Each field carries its range and documentation (:func:`metabench.validation.option`); a
    value of the wrong type or out of range is a :class:`~metabench.validation.ConfigError`.
    """

    meta_batch_size: int = option(10, "tasks (sub-envs) per iteration, one trial each", low=1)
    episodes_per_trial: int = option(4, "episodes of one task per trial", low=1)
    hidden_size: int = option(
        64, "width of the recurrent cell (garage: a GRU of 64 on HalfCheetah)", low=1
    )
    discount: float = option(0.99, "reward discount", low=0.0, high=1.0)
    gae_lambda: float = option(0.95, "GAE lambda", low=0.0, high=1.0)
    clip_range: float = option(0.2, "PPO clipping of the probability ratio", low=0.0, low_open=True)
    n_epochs: int = option(10, "PPO epochs per iteration", low=1)
    batch_size: int | None = option(
        None,
        "PPO minibatch in steps; null = the whole iteration (garage's minibatch of 32 trials "
        "exceeds its 10 trials per iteration, so it used the whole batch too)",
        low=1,
    )
    learning_rate: float = option(1e-3, "Adam step size", low=0.0, low_open=True)
    ent_coef: float = option(0.02, "entropy bonus coefficient", low=0.0)
    vf_coef: float = option(0.5, "value loss coefficient", low=0.0)
    max_grad_norm: float = option(0.5, "gradient clipping norm", low=0.0, low_open=True)
    normalize_advantage: bool = option(False, "garage's example used center_adv=False")
    reward_scale: float = option(
        1.0, "multiplies the reward in the RL2 observation (Meta-World uses 0.1)", low=0.0
    )
    log_std_init: float = option(
        0.0,
        "initial log standard deviation of the Gaussian policy, in the [-1, 1] action space SB3 "
        "acts in (garage: init_std 1.0, i.e. 0.0)",
    )
    clip_actions: bool = option(True, CLIP_ACTIONS_DOC)
    zero_at_episode_start: bool = option(
        False, ZERO_AT_EPISODE_START_DOC, recorded_at_default=False
    )
    deterministic_eval: bool = option(
        False, "act with the distribution's mode in every meta-test episode"
    )
    deterministic_test: bool = option(False, DETERMINISTIC_TEST_DOC, recorded_at_default=False)
    encoder_sizes: tuple[int, ...] = option((), ENCODER_SIZES_DOC, low=1, recorded_at_default=False)
    policy_head: Literal["linear", "tanh"] = option(
        "linear", POLICY_HEAD_DOC, recorded_at_default=False
    )
    weight_init: Literal["sb3", "xavier"] = option(
        "sb3", WEIGHT_INIT_DOC, recorded_at_default=False
    )
    processes: bool = option(False, PROCESSES_DOC)
    update_processes: bool = option(
        False,
        "with processes: split the PPO update's passes by trials between the training process "
        "and the env workers, summing their gradients (equal to the one-process update up to "
        "float rounding; metabench/algos/rl2/parallel_update.py)",
        recorded_at_default=False,
    )
    chunk_length: int | None = option(
        None,
        "null: one PPO step per epoch on the whole trials (garage, sb3-contrib). A number: "
        "Meta-World+'s RL2 update (metaworld_algorithms/rl/algorithms/rl2.py, chunk_len=250 in "
        "examples/meta_learning/rl2_ml10.py), one step per chunk of this many steps per epoch, "
        "backpropagation truncated at chunk starts (metabench/algos/rl2/chunked_update.py); "
        "needs value_baseline='linear'",
        low=2,
        recorded_at_default=False,
    )
    chunk_overlap: int = option(
        50,
        "with chunk_length: steps each chunk shares with the next (Meta-World+: 50)",
        low=0,
        recorded_at_default=False,
    )
    value_baseline: Literal["critic", "linear"] = option(
        "critic",
        "what advantages are measured against. critic: sb3-contrib's learned value function (a "
        "critic LSTM trained with weight vf_coef, GAE bootstrapped at the trial's time limit). "
        "linear: garage's RL2 baseline (garage/tf/algos/_rl2npo.py, "
        "garage/np/baselines/linear_feature_baseline.py), linear features over the whole trial "
        "fitted before each update to the discounted returns, GAE over each trial with the value "
        "after its last step 0; no critic, vf_coef ignored",
    )
    linear_baseline_fit: Literal["batch", "trial"] = option(
        "batch", LINEAR_BASELINE_FIT_DOC, recorded_at_default=False
    )
    recurrent_cell: Literal["lstm", "gru"] = option(
        "lstm",
        "lstm (sb3-contrib's cell) or gru, the cell of garage's GaussianGRUPolicy "
        "(garage/examples/tf/rl2_ppo_halfcheetah.py), both hidden_size wide",
    )
    entropy_method: Literal["regularized", "max"] = option(
        "regularized",
        "how ent_coef enters. regularized: sb3-contrib's -ent_coef * mean entropy in the PPO "
        "loss. max: garage's RL2 setting (entropy_method='max', stop_entropy_gradient=True in "
        "garage/examples/tf/rl2_ppo_halfcheetah.py, garage/tf/algos/npo.py), ent_coef * entropy "
        "added to every step's reward before returns and advantages, no entropy term in the "
        "loss; refuses normalize_advantage=true, as garage does",
    )

    def __post_init__(self) -> None:
        check_config(self)
        check_network_options(self)
        if self.update_processes and not self.processes:
            raise ValueError(
                "update_processes=true splits the update over the env worker processes: set "
                "processes=true too"
            )
        if self.linear_baseline_fit != "batch" and self.value_baseline != "linear":
            raise ValueError(
                f"linear_baseline_fit={self.linear_baseline_fit!r} fits the linear baseline: set "
                "value_baseline='linear', or linear_baseline_fit to 'batch'"
            )
        if self.chunk_length is not None:
            check_chunk_settings(self.chunk_length, self.chunk_overlap, self.value_baseline)
            if self.update_processes:
                raise ValueError(
                    "update_processes=true splits the whole-trial update; the chunked update "
                    "(chunk_length) runs in one process: set one of them to its default"
                )
        if self.entropy_method == "max" and self.normalize_advantage:
            raise ValueError(
                "entropy_method='max' needs normalize_advantage=False (garage refuses "
                "center_adv with it): normalising would remove most of the entropy bonus"
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


class RL2ExplorationPolicy(Policy):
    """The recurrent policy acting in one env; its state spans every episode of the trial.

    ``reset`` keeps the hidden state (garage's ``NoResetPolicy``): RL2 adapts by remembering.
    The state starts fresh when the policy is created, i.e. once per meta-test task.
    """

    def __init__(self, model: RecurrentPPO, deterministic: bool) -> None:
        self.model = model
        self.deterministic = deterministic
        self._state: tuple[np.ndarray, ...] | None = None
        self._episode_start = np.ones(1, dtype=bool)

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        return self.act(observation, self.deterministic)

    def act(self, observation: np.ndarray, deterministic: bool) -> np.ndarray:
        """One step from the current hidden state, the mode if ``deterministic``."""
        action, self._state = self.model.predict(
            observation[None],
            state=self._state,
            episode_start=self._episode_start,
            deterministic=deterministic,
        )
        self._episode_start = np.zeros(1, dtype=bool)
        return np.asarray(action[0])


class RL2AdaptedPolicy(Policy):
    """The recurrent policy after exploration: every test episode starts from the hidden state
    that exploration ended with (garage's ``RL2AdaptedPolicy``, Meta-World+'s ``RL2Wrapped``),
    so each test episode measures the adapted policy, not the one after the previous test.

    :param deterministic: act with the mode (Meta-World+'s ``eval_action``) even where
        exploration sampled.
    """

    def __init__(self, explored: RL2ExplorationPolicy, deterministic: bool) -> None:
        self.model = explored.model
        self.deterministic = deterministic
        self._adapted = explored._state
        self._explored = explored

    def reset(self) -> None:
        self._explored._state = self._adapted
        self._explored._episode_start = np.zeros(1, dtype=bool)

    def get_action(self, observation: np.ndarray) -> np.ndarray:
        return self._explored.act(observation, self.deterministic)


class RL2PolicyBatch(PolicyBatch):
    """:class:`RL2ExplorationPolicy` and :class:`RL2AdaptedPolicy` for ``n`` tasks at once: one
    recurrent forward pass per step over the rows that act, each row with its own hidden state.

    :meth:`adapted` is the batch after exploration: each test episode of a row starts from the
    hidden state that row's exploration ended with.
    """

    def __init__(self, model: RecurrentPPO, deterministic: bool, n: int) -> None:
        self.model = model
        self.deterministic = deterministic
        self.n = n
        self._state: tuple[np.ndarray, ...] | None = None  # (layers, n, hidden) arrays
        self._episode_start = np.ones(n, dtype=bool)
        self._adapted: tuple[np.ndarray, ...] | None = None

    def get_actions(self, observations: np.ndarray, rows: np.ndarray) -> np.ndarray:
        state = None if self._state is None else tuple(s[:, rows] for s in self._state)
        actions, new_state = self.model.predict(
            observations,
            state=state,
            episode_start=self._episode_start[rows],
            deterministic=self.deterministic,
        )
        assert new_state is not None  # a recurrent model always returns its state
        if self._state is None:
            self._state = tuple(
                np.zeros((s.shape[0], self.n, *s.shape[2:]), dtype=s.dtype) for s in new_state
            )
        for full, part in zip(self._state, new_state, strict=True):
            full[:, rows] = part
        self._episode_start[rows] = False
        return np.asarray(actions)

    def adapted(self, deterministic: bool) -> RL2PolicyBatch:
        """The rows' policies after exploration, acting with the mode if ``deterministic``
        (this batch must not explore again)."""
        if self._state is None:
            raise RuntimeError("the exploration policies have not acted: nothing to adapt to")
        self._adapted = tuple(s.copy() for s in self._state)
        self.deterministic = self.deterministic or deterministic
        return self

    def reset(self, rows: np.ndarray) -> None:
        if self._adapted is not None:  # a test episode: back to the state exploration ended in
            assert self._state is not None
            for full, adapted in zip(self._state, self._adapted, strict=True):
                full[:, rows] = adapted[:, rows]


def _rl2_env(
    env: gym.Env[Any, Any], reward_scale: float, zero_at_episode_start: bool, clip_actions: bool
) -> gym.Env[Any, Any]:
    """What RL2's policies observe: ``RL2Env`` around ``env``, actions as SB3 presents them."""
    rl2 = RL2Env(env, reward_scale=reward_scale, zero_at_episode_start=zero_at_episode_start)
    return _action_wrapper(clip_actions)(rl2)


def _action_wrapper(clip_actions: bool) -> Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]:
    return rescale_actions if clip_actions else unclipped_actions


class RL2(MetaRLAlgorithm):
    """What RL2 is whatever updates its recurrent policy: the trial-aware vector env, one trial
    per sub-env per iteration, the meta-test policies and the checkpoints. :class:`RL2PPO` and
    :class:`~metabench.algos.rl2.trpo_algorithm.RL2TRPO` only build their model.

    :param env: a task env id (``"metabench/HalfCheetahVel-v0"``) or a task env factory.
    :param sampler: meta-training tasks; ``None`` uses the task env's ``sample_tasks``.
    :param config: hyperparameters (an instance of the subclass's ``config_class``); ``None``
        takes its defaults.
    :param seed: seeds the sub-envs, the task sequence and torch.
    :param env_kwargs: passed to the task env (``horizon``, ``split``, ...).
    :param log_dir: directory for SB3's TensorBoard logs, or ``None``.
    :param cpus: with ``config.processes``, the processes that step sub-envs, this one
        included (default: one per core).
    :param device: where the policy acts and trains (``"auto"``, ``"cpu"``, ``"cuda"``;
        :mod:`metabench.devices`); the envs stay on the CPU.
    :param policy_class: ``None`` picks the whole-sequence policy of ``config.recurrent_cell``;
        sb3-contrib's stock ``RecurrentActorCriticPolicy`` trains the same LSTM policy step by
        step (only for speed comparisons: results are equal).
    """

    config: Any
    config_class: type[Any]
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
        cpus: int | None = None,
        device: str | th.device = "cpu",
        policy_class: type[RecurrentActorCriticPolicy] | None = None,
    ) -> None:
        self.config = config = self.config_class() if config is None else config
        self.device = resolve_device(device)
        if self.device.type != "cpu" and getattr(config, "update_processes", False):
            raise DeviceError(
                "update_processes=true splits the update over CPU worker processes: set it to "
                "false to train on the GPU"
            )
        if policy_class is None:
            policy_class = POLICY_CLASSES[config.recurrent_cell]
        elif issubclass(policy_class, WholeSequenceGruPolicy) != (config.recurrent_cell == "gru"):
            raise ValueError(
                f"policy_class {policy_class.__name__} does not build the "
                f"{config.recurrent_cell!r} cell that config.recurrent_cell asks for"
            )
        self.venv: MetaBatchVecEnv = make_meta_vec_env(  # type: ignore[assignment]
            env,
            config.meta_batch_size,
            episodes_per_trial=config.episodes_per_trial,
            sampler=sampler,
            rl2=True,
            reward_scale=config.reward_scale,
            zero_at_episode_start=config.zero_at_episode_start,
            seed=seed,
            backend="sb3",
            processes=config.processes,
            env_kwargs=env_kwargs,
            wrapper=_action_wrapper(config.clip_actions),
            workers=cpus,
        )
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
            policy_kwargs.update(head=config.policy_head, init=config.weight_init)
        if config.value_baseline == "linear":
            policy_kwargs["enable_critic_lstm"] = False  # no critic to run
        self.model = self._make_model(policy_class, policy_kwargs, seed, log_dir)
        quiet_logger(self.model, log_dir)
        if config.processes:  # torch's threads would spin on the cores the env workers step on
            self.model.rollout_threads = 1
        self.iterations = 0

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
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue training: weights, optimizer, counters, task schedule."""
        return {
            "config": recorded_config(self.config),
            **training_state(self.model, self.venv, self.iterations),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("config") != recorded_config(self.config):
            raise ValueError(
                f"checkpoint was written with a different {type(self.config).__name__}"
            )
        self.iterations = load_training_state(self.model, self.venv, state)


class RL2PPO(RL2):
    """RL2 with PPO as the inner algorithm.

    Takes :class:`RL2`'s arguments; ``config`` is an :class:`RL2PPOConfig` (``None``: its
    defaults).

    Example::

        >>> import metabench
        >>> algo = RL2PPO("metabench/PointGoal-v0", config=RL2PPOConfig(meta_batch_size=2))
        >>> stats = algo.train(1)
        >>> algo.env_steps  # 2 trials of 4 episodes of 20 steps
        160
    """

    config: RL2PPOConfig
    config_class = RL2PPOConfig
    tb_log_name = "rl2_ppo"

    def _make_model(
        self,
        policy_class: type[RecurrentActorCriticPolicy],
        policy_kwargs: dict[str, Any],
        seed: int,
        log_dir: str | None,
    ) -> RL2RecurrentPPO:
        config = self.config
        model = RL2RecurrentPPO(
            policy_class,
            self.venv,
            learning_rate=config.learning_rate,
            batch_size=config.batch_size or self.steps_per_iteration,
            n_epochs=config.n_epochs,
            clip_range=config.clip_range,
            vf_coef=0.0 if config.value_baseline == "linear" else config.vf_coef,
            max_grad_norm=config.max_grad_norm,
            policy_kwargs=policy_kwargs,
            tensorboard_log=log_dir,
            seed=seed,
            chunk_length=config.chunk_length,
            chunk_overlap=config.chunk_overlap,
            linear_baseline_fit=config.linear_baseline_fit,
            **self._model_kwargs(),
        )
        if config.update_processes:
            model.update_venv = _sharded(self.venv)
        return model


def _sharded(venv: VecEnv) -> ShardedSubprocVecEnv | None:
    """The :class:`ShardedSubprocVecEnv` under ``venv``'s wrappers, if there is one."""
    while not isinstance(venv, ShardedSubprocVecEnv):
        if not isinstance(venv, VecEnvWrapper):
            return None
        venv = venv.venv
    return venv


# -- the entry points of baselines/rl2-*.toml -----------------------------------------------------
def trial_defaults(spec: Benchmark) -> dict[str, Any]:
    """RL2's default trial on a benchmark: the benchmark's episodes per trial."""
    return {"episodes_per_trial": spec.episodes_per_trial}


RL2_PPO = Implementation(RL2PPO, RL2PPOConfig, trial_defaults)
"""RL2-PPO on a benchmark: ``entry_point = "metabench.algos.rl2.algorithm:RL2_PPO"``."""
