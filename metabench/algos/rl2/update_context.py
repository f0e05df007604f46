"""What RL2-PPO's update strategies read of the model, and what they report back.

``RL2RecurrentPPO.train`` picks a strategy (sb3-contrib's own update, the chunked update of
:mod:`~metabench.algos.rl2.chunked_update`, or the update split over processes of
:mod:`~metabench.algos.rl2.parallel_update`), hands it an :class:`UpdateContext` and logs the
:class:`UpdateStats` it returns. The strategies never touch the model itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch as th
from sb3_contrib.common.recurrent.buffers import RecurrentRolloutBuffer
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy

__all__ = ["UpdateContext", "UpdateStats"]


@dataclass(frozen=True)
class UpdateContext:
    """One ``train()`` call's inputs: the policy (its optimizer's learning rate already set for
    this update), the rollout and the PPO settings, with the clip ranges evaluated at the
    current progress."""

    policy: RecurrentActorCriticPolicy
    buffer: RecurrentRolloutBuffer
    device: th.device
    n_epochs: int
    batch_size: int | None
    clip_range: float
    clip_range_vf: float | None
    ent_coef: float
    vf_coef: float
    max_grad_norm: float
    normalize_advantage: bool
    target_kl: float | None


@dataclass(frozen=True)
class UpdateStats:
    """What ``RecurrentPPO.train`` logs of an update (``train/<name>``), and the epochs it ran
    (sb3-contrib counts an epoch stopped by ``target_kl`` too)."""

    epochs: int
    entropy: float
    policy: float
    value: float
    approx_kl: float
    clip_fraction: float
    loss: float
