"""RL2-TRPO: RL2's recurrent policy meta-trained with TRPO (garage's ``RL2TRPO``).

Everything but the update is RL2-PPO's (:class:`~metabench.algos.rl2.base.RL2`): the
trial-aware vector env, one trial per sub-env per iteration, the meta-test policies, the
checkpoints. The update is the single TRPO step of
:class:`~metabench.algos.rl2.recurrent_trpo.RL2RecurrentTRPO`.
The defaults are garage's ``examples/tf/rl2_trpo_halfcheetah.py`` with ``RL2TRPO``'s own defaults
for what the example leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

from metabench.algos.implementation import Implementation
from metabench.algos.rl2.base import (
    CLIP_ACTIONS_DOC,
    DETERMINISTIC_TEST_DOC,
    ENCODER_SIZES_DOC,
    POLICY_HEAD_DOC,
    RECURRENT_BIAS_DOC,
    RL2,
    STEP_IN_WORKERS_DOC,
    WEIGHT_INIT_DOC,
    ZERO_AT_EPISODE_START_DOC,
    check_network_options,
    trial_defaults,
)
from metabench.algos.rl2.recurrent_ppo import RL2RecurrentPPO
from metabench.algos.rl2.recurrent_trpo import RL2RecurrentTRPO
from metabench.tasks.base import TRAIN_TASK_ORDER_DOC
from metabench.validation import MAX_COUNT, MAX_LAYER_WIDTH, check_config, option

__all__ = ["RL2TRPO", "RL2_TRPO", "RL2TRPOConfig"]


@dataclass(frozen=True)
class RL2TRPOConfig:
    """Every RL2-TRPO hyperparameter in one place (defaults: garage's HalfCheetahVel example,
    ``src/garage/examples/tf/rl2_trpo_halfcheetah.py``, and ``RL2TRPO``'s defaults)."""

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
    recurrent_cell: Literal["lstm", "gru"] = option(
        "gru", "gru (garage's GaussianGRUPolicy) or lstm (sb3-contrib's cell)"
    )
    discount: float = option(0.99, "reward discount", low=0.0, high=1.0)
    gae_lambda: float = option(
        0.98, "GAE lambda (RL2TRPO's default; the example does not set it)", low=0.0, high=1.0
    )
    max_kl: float = option(0.01, "TRPO trust-region radius (garage: max_kl_step 0.01)",
                           low=0.0, low_open=True)  # fmt: skip
    cg_iters: int = option(10, "conjugate-gradient iterations (garage: 10)", low=1)
    cg_damping: float = option(
        1e-5, "damping added to the Fisher-vector products (garage's reg_coeff: 1e-5)", low=0.0
    )
    ls_steps: int = option(15, "line-search fractions tried (garage's max_backtracks: 15)", low=1)
    ls_ratio: float = option(
        0.8, "line-search shrink factor (garage's backtrack_ratio: 0.8)",
        low=0.0, high=1.0, low_open=True, high_open=True,
    )  # fmt: skip
    normalize_advantage: bool = option(True, "garage's center_adv (RL2TRPO's default: true)")
    ent_coef: float = option(0.0, "entropy coefficient (garage: no entropy)", low=0.0)
    entropy_method: Literal["regularized", "max"] = option(
        "regularized",
        "regularized: -ent_coef * mean entropy in the surrogate; max: ent_coef * entropy added "
        "to every reward (as in rl2-ppo)",
    )
    value_baseline: Literal["critic", "linear"] = option(
        "linear",
        "linear: garage's LinearFeatureBaseline over each trial, fitted before each update; "
        "critic: a learned value function trained after the TRPO step (n_epochs Adam steps)",
    )
    learning_rate: float = option(
        1e-3, "Adam step size of the critic (value_baseline critic only)", low=0.0, low_open=True
    )
    n_epochs: int = option(
        10, "full-batch Adam steps of the critic per iteration (critic only)", low=1
    )
    max_grad_norm: float = option(
        0.5, "gradient clipping norm of the critic (critic only)", low=0.0, low_open=True
    )
    reward_scale: float = option(
        1.0, "multiplies the reward in the RL2 observation (Meta-World uses 0.1)", low=0.0
    )
    log_std_init: float = option(
        0.0, "initial log standard deviation of the Gaussian policy (garage: init_std 1.0)"
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

    def __post_init__(self) -> None:
        check_config(self)
        check_network_options(self)
        if self.entropy_method == "max" and self.normalize_advantage:
            raise ValueError(
                "entropy_method='max' needs normalize_advantage=False (garage refuses "
                "center_adv with it): normalising would remove most of the entropy bonus"
            )


class RL2TRPO(RL2):
    """RL2 with TRPO as the inner algorithm: one trust-region step per iteration.

    Takes :class:`~metabench.algos.rl2.base.RL2`'s arguments; ``config`` is an
    :class:`RL2TRPOConfig` (``None``: its defaults). :meth:`train` adds the last TRPO step's
    ``metatrain/trpo_*`` numbers to the trials' returns.

    Example::

        >>> import metabench
        >>> algo = RL2TRPO("metabench/Bandit-v0", config=RL2TRPOConfig(meta_batch_size=4))
        >>> stats = algo.train(1)
        >>> algo.env_steps, stats["metatrain/trpo_kl"] <= 0.01  # 4 trials of 4 one-pull episodes
        (16, True)
    """

    config: RL2TRPOConfig
    config_class = RL2TRPOConfig
    tb_log_name = "rl2_trpo"

    def _make_model(
        self,
        policy_class: type[RecurrentActorCriticPolicy],
        policy_kwargs: dict[str, Any],
        seed: int,
        log_dir: str | None,
    ) -> RL2RecurrentPPO:
        config = self.config
        return RL2RecurrentTRPO(
            policy_class,
            self.venv,
            learning_rate=config.learning_rate,
            batch_size=self.steps_per_iteration,
            n_epochs=config.n_epochs,
            max_grad_norm=config.max_grad_norm,
            vf_coef=0.0,  # the critic, if any, trains on its own loss after the TRPO step
            policy_kwargs=policy_kwargs,
            tensorboard_log=log_dir,
            seed=seed,
            max_kl=config.max_kl,
            cg_iters=config.cg_iters,
            cg_damping=config.cg_damping,
            ls_steps=config.ls_steps,
            ls_ratio=config.ls_ratio,
            **self._model_kwargs(),
        )

    def _update_stats(self) -> dict[str, float]:
        assert isinstance(self.model, RL2RecurrentTRPO)
        step = self.model.last_step
        if step is None:
            return {}
        return {
            f"metatrain/trpo_{key}": float(value)
            for key, value in vars(step).items()
            if not isinstance(value, str)
        }


RL2_TRPO = Implementation(RL2TRPO, RL2TRPOConfig, trial_defaults)
"""RL2-TRPO on a benchmark: ``entry_point = "metabench.algos.rl2:RL2_TRPO"``."""
