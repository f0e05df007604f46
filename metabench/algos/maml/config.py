"""Every MAML hyperparameter in one place: one config for MAML-TRPO, MAML-PPO and MAML-VPG.

garage shipped three classes (``MAMLTRPO``, ``MAMLPPO``, ``MAMLVPG``) over one ``MAML`` that
takes an inner algorithm and a meta-optimiser. Here the three are one :class:`MAMLConfig` with
``inner_loss``, ``outer_loss`` and ``outer_optimizer``; the ``[defaults]`` of the baseline
files (``baselines/maml-{trpo,ppo,vpg}.toml``) pick them. The defaults are MAML-TRPO's, so a
``config.json`` written before these fields existed builds the same algorithm.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from metabench.tasks.base import TRAIN_TASK_ORDER_DOC
from metabench.validation import MAX_COUNT, MAX_LAYER_WIDTH, check_config, option

__all__ = ["OUTER_OPTIMIZERS", "MAMLConfig"]

OUTER_OPTIMIZERS = ("trpo", "adam")
"""``trpo``: conjugate gradient on the exact KL Hessian, then a line search (garage's
``ConjugateGradientOptimizer``); ``adam``: ``torch.optim.Adam`` with ``outer_lr`` (garage's
``MAMLPPO`` and ``MAMLVPG``)."""


@dataclasses.dataclass(frozen=True)
class MAMLConfig:
    """Every MAML hyperparameter, with its default, range and documentation.

    Defaults are MAML-TRPO's, after garage's MAML-TRPO benchmark against ProMP (see
    ``REFERENCE.md``): meta-batch 40, 20 episodes per task, inner lr 0.1, one inner step, max KL
    0.01, discount 0.99, GAE lambda 1.0, a 100-100 tanh policy; CG and line search follow
    pytorch-maml-rl. The inner step descends the ``"vpg"`` loss and the TRPO step the
    likelihood-ratio (``"trpo"``) surrogate, as in pytorch-maml-rl.
    """

    meta_batch_size: int = option(40, "tasks per meta-iteration", low=1, high=MAX_COUNT)
    episodes_per_task: int = option(
        20, "episodes per task and sampling pass (inner and outer batch)", low=1, high=MAX_COUNT
    )
    inner_lr: float = option(0.1, "step size of the inner SGD", low=0.0, low_open=True)
    num_grad_updates: int = option(
        1, "inner SGD steps (also used by adapt_policy at meta-test)", low=1
    )
    first_order: bool = option(
        False,
        "drop the second-order term of the meta-gradient (FOMAML): the inner gradients are "
        "constants, so the meta-gradient is the outer loss's gradient at the adapted parameters; "
        "works with every inner_loss, outer_loss and outer_optimizer",
    )
    discount: float = option(0.99, "reward discount", low=0.0, high=1.0)
    gae_lambda: float = option(1.0, "GAE lambda", low=0.0, high=1.0)
    inner_loss: Literal["vpg", "ppo", "trpo"] = option(
        "vpg",
        "the objective of the inner SGD step. vpg: -mean(log pi * A), MAML's; trpo: the "
        "likelihood ratio to the pre-update policy (ProMP's low-variance curvature objective: "
        "the same first step, an unbiased second-order term); ppo: that ratio clipped to "
        "1 +- clip_range (garage's MAMLPPO)",
    )
    outer_loss: Literal["vpg", "ppo", "trpo"] = option(
        "trpo",
        "the meta-loss on the post-update episodes. trpo: -mean(pi / pi_old * A); ppo: the "
        "clipped surrogate; vpg: -mean(log pi * A)",
    )
    outer_optimizer: Literal["trpo", "adam"] = option(
        "trpo",
        "the meta-optimiser. trpo: conjugate gradient with the exact KL Hessian-vector product "
        "and a line search (max_kl, cg_*, ls_*); adam: torch.optim.Adam with outer_lr, "
        "outer_epochs steps per iteration (garage's MAMLPPO and MAMLVPG)",
    )
    max_kl: float = option(0.01, "TRPO trust-region radius", low=0.0, low_open=True)
    cg_iters: int = option(10, "conjugate-gradient iterations", low=1)
    cg_damping: float = option(1e-5, "damping added to the Fisher-vector products", low=0.0)
    ls_steps: int = option(15, "line-search fractions tried", low=1)
    ls_ratio: float = option(
        0.8, "line-search shrink factor", low=0.0, high=1.0, low_open=True, high_open=True
    )
    outer_lr: float = option(
        1e-3, "Adam's step size (outer_optimizer adam; garage: 1e-3)", low=0.0, low_open=True
    )
    outer_epochs: int = option(
        1,
        "Adam steps per iteration on the same episodes (garage: 1, where the ratio stays 1 and "
        "PPO's clipping never acts; more lets it act, as in ProMP)",
        low=1,
    )
    adam_eps: float = option(1e-5, "Adam's epsilon (garage's make_optimizer: 1e-5)", low=0.0,
                             low_open=True)  # fmt: skip
    clip_range: float = option(
        0.5, "PPO's clipping of the ratio, for a ppo loss (garage's MAMLPPO lr_clip_range: 0.5)",
        low=0.0, low_open=True,
    )  # fmt: skip
    hidden_sizes: tuple[int, ...] = option(
        (100, 100),
        "hidden layers of the tanh policy (a list of widths)",
        low=1,
        high=MAX_LAYER_WIDTH,
    )
    init_std: float = option(1.0, "initial action std of the policy (garage: 1.0)", low=0.0,
                             low_open=True)  # fmt: skip
    action_scale: float = option(
        1.0,
        "the policy acts in units action_scale times the env's, its actions divided by "
        "action_scale on the way out (pytorch-maml-rl's normalization_scale, for protocols "
        "whose action path is fixed; init_std is in the policy's units)",
        low=0.0,
        low_open=True,
        recorded_at_default=False,
    )
    update_threads: int = option(
        1,
        "torch threads of the update (baselines, adaptation, outer step), when the env workers "
        "are idle; sampling stays on one. Thread counts can change the last bits of the "
        "numbers, hence a recorded hyperparameter (on ML10's 2x512 policy 2 threads make the "
        "outer step 1.7x faster, docs/speed.md)",
        low=1,
    )
    deterministic_test: bool = option(
        False,
        "the adapted policy acts with its mean in the test episodes; exploration samples "
        "(Meta-World+: metaworld-algorithms rl/algorithms/mamltrpo.py eval_action takes "
        "dist.mode(); garage and pytorch-maml-rl sample)",
        recorded_at_default=False,
    )
    advantage_scale: Literal["std", "variance"] = option(
        "std",
        "what the centred advantages of a task are divided by: their std (garage's MAML-TRPO "
        "without center_adv, pytorch-maml-rl), or their variance (Meta-World+: "
        "metaworld-algorithms rl/algorithms/utils.py normalize_advantages; garage's center_adv)",
        recorded_at_default=False,
    )
    weight_init: Literal["pytorch", "xavier"] = option(
        "pytorch",
        "the policy's initial weights: PyTorch's default, or Xavier-uniform weights and zero "
        "biases on every layer, the output included (Meta-World+'s MAML-TRPO examples)",
        recorded_at_default=False,
    )
    train_task_order: Literal["sampled", "cycled"] = option(
        "sampled", TRAIN_TASK_ORDER_DOC, recorded_at_default=False
    )

    def __post_init__(self) -> None:
        check_config(self)
        if self.outer_epochs > 1 and self.outer_optimizer != "adam":
            raise ValueError(
                "outer_epochs > 1 needs outer_optimizer='adam': a TRPO step already searches "
                "along its direction; set outer_epochs=1"
            )
