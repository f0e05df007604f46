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
(the entropy bonus added to the rewards); see :mod:`metabench.algos.rl2.recurrent_ppo`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from metabench.algos.implementation import Implementation
from metabench.algos.rl2.base import (
    CLIP_ACTIONS_DOC,
    DETERMINISTIC_TEST_DOC,
    ENCODER_SIZES_DOC,
    LINEAR_BASELINE_FIT_DOC,
    POLICY_HEAD_DOC,
    RECURRENT_BIAS_DOC,
    RL2,
    STEP_IN_WORKERS_DOC,
    WEIGHT_INIT_DOC,
    ZERO_AT_EPISODE_START_DOC,
    check_network_options,
    trial_defaults,
)
from metabench.algos.rl2.chunked_update import check_chunk_settings
from metabench.algos.rl2.recurrent_ppo import RL2RecurrentPPO
from metabench.tasks.base import TRAIN_TASK_ORDER_DOC
from metabench.validation import MAX_COUNT, MAX_LAYER_WIDTH, check_config, option
from metabench.vector.sharded_sb3 import ShardedSubprocVecEnv


@dataclass(frozen=True)
class RL2PPOConfig:
    """Every RL2-PPO hyperparameter in one place (defaults: garage's HalfCheetahVel example).

    Each field carries its range and documentation (:func:`metabench.validation.option`); a
    value of the wrong type or out of range is a :class:`~metabench.validation.ConfigError`.
    """

    meta_batch_size: int = option(
        10, "tasks (sub-envs) per iteration, one trial each", low=1, high=MAX_COUNT
    )
    episodes_per_trial: int = option(4, "episodes of one task per trial", low=1, high=MAX_COUNT)
    hidden_size: int = option(
        64,
        "width of the recurrent cell (garage: a GRU of 64 on HalfCheetah)",
        low=1,
        high=MAX_LAYER_WIDTH,
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
    encoder_sizes: tuple[int, ...] = option(
        (), ENCODER_SIZES_DOC, low=1, high=MAX_LAYER_WIDTH, recorded_at_default=False
    )
    policy_head: Literal["linear", "tanh"] = option(
        "linear", POLICY_HEAD_DOC, recorded_at_default=False
    )
    weight_init: Literal["sb3", "xavier"] = option(
        "sb3", WEIGHT_INIT_DOC, recorded_at_default=False
    )
    gru_recurrent_bias: Literal["all", "candidate"] = option(
        "all", RECURRENT_BIAS_DOC, recorded_at_default=False
    )
    train_task_order: Literal["sampled", "cycled"] = option(
        "sampled", TRAIN_TASK_ORDER_DOC, recorded_at_default=False
    )
    step_in_workers: bool = option(False, STEP_IN_WORKERS_DOC)
    update_in_workers: bool = option(
        False,
        "with step_in_workers: split the PPO update's passes by trials between the training "
        "process and the env workers, summing their gradients (equal to the one-process update "
        "up to float rounding; metabench/algos/rl2/parallel_update.py, and "
        "parallel_chunked_update.py with chunk_length)",
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
        if self.update_in_workers and not self.step_in_workers:
            raise ValueError(
                "update_in_workers=true splits the update over the env worker processes: set "
                "step_in_workers=true too"
            )
        if self.linear_baseline_fit != "batch" and self.value_baseline != "linear":
            raise ValueError(
                f"linear_baseline_fit={self.linear_baseline_fit!r} fits the linear baseline: set "
                "value_baseline='linear', or linear_baseline_fit to 'batch'"
            )
        if self.chunk_length is not None:
            check_chunk_settings(self.chunk_length, self.chunk_overlap, self.value_baseline)
        if self.entropy_method == "max" and self.normalize_advantage:
            raise ValueError(
                "entropy_method='max' needs normalize_advantage=False (garage refuses "
                "center_adv with it): normalising would remove most of the entropy bonus"
            )


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
        if config.update_in_workers:
            model.update_venv = _sharded(self.venv)
        return model


def _sharded(venv: VecEnv) -> ShardedSubprocVecEnv | None:
    """The :class:`ShardedSubprocVecEnv` under ``venv``'s wrappers, if there is one."""
    while not isinstance(venv, ShardedSubprocVecEnv):
        if not isinstance(venv, VecEnvWrapper):
            return None
        venv = venv.venv
    return venv


# -- the entry point of baselines/rl2-ppo*.toml ----------------------------------------------------
RL2_PPO = Implementation(RL2PPO, RL2PPOConfig, trial_defaults)
"""RL2-PPO on a benchmark: ``entry_point = "metabench.algos.rl2:RL2_PPO"``."""
