"""garage's linear feature baseline: a ridge regression of returns on simple state features.

MAML-TRPO's published runs (garage, ProMP, pytorch-maml-rl) all use it: it is fitted in
closed form per task batch, so it adds no optimiser and no hyperparameters to tune.
"""

from __future__ import annotations

import numpy as np

from metabench.data import EpisodeBatch

__all__ = ["LinearFeatureBaseline"]

OBS_CLIP = 10.0
"""Observations are clipped to ``[-10, 10]`` before squaring, as in garage's
``LinearFeatureBaseline`` (``lower_bound``/``upper_bound``), so one outlier cannot dominate."""

TIME_SCALE = 100.0
"""Time features use ``t = step / 100`` (garage), keeping ``t**3`` small over usual horizons."""


class LinearFeatureBaseline:
    """``V(s_t) = w . [obs, obs**2, t, t**2, t**3, 1]`` with ``t = step / 100``, fitted by ridge
    least squares.

    The fit solves the normal equations ``(F^T F + reg I) w = F^T R`` like garage; if that gives
    a non-finite ``w`` (a singular system in float64), ``reg`` is multiplied by 10 and the fit
    retried, up to 5 times (garage's loop). The ridge term covers every coefficient, the
    constant included.

    :param reg_coeff: the initial ridge coefficient (garage: 1e-5).
    """

    def __init__(self, reg_coeff: float = 1e-5) -> None:
        if not reg_coeff > 0:
            raise ValueError(f"reg_coeff must be positive, got {reg_coeff}")
        self.reg_coeff = float(reg_coeff)
        self.coeffs: np.ndarray | None = None
        self.fitted_reg_coeff: float | None = None
        """The ridge coefficient the last fit ended with (``reg_coeff`` unless it retried)."""

    @staticmethod
    def features(episodes: EpisodeBatch) -> np.ndarray:
        """``(N•T, 2 * obs_dim + 4)`` features of every step, in the batch's flat order."""
        obs = np.clip(
            np.asarray(episodes.observations, dtype=np.float64).reshape(episodes.n_steps, -1),
            -OBS_CLIP,
            OBS_CLIP,
        )
        starts = np.repeat(np.cumsum(episodes.lengths) - episodes.lengths, episodes.lengths)
        t = (np.arange(episodes.n_steps) - starts)[:, None] / TIME_SCALE
        return np.concatenate([obs, obs**2, t, t**2, t**3, np.ones_like(t)], axis=1)

    def fit(self, episodes: EpisodeBatch, returns: np.ndarray) -> None:
        """Fit to ``returns``, one target per step of ``episodes`` (flat order).

        :raises ValueError: if ``returns`` is not ``(episodes.n_steps,)``.
        """
        targets = np.asarray(returns, dtype=np.float64)
        if targets.shape != (episodes.n_steps,):
            raise ValueError(
                f"returns has shape {targets.shape}, expected ({episodes.n_steps},): one "
                f"return per step"
            )
        features = self.features(episodes)
        gram = features.T @ features
        target = features.T @ targets
        identity = np.eye(features.shape[1])
        reg = self.reg_coeff
        for _ in range(5):
            coeffs = np.linalg.lstsq(gram + reg * identity, target, rcond=None)[0]
            if np.isfinite(coeffs).all():
                break
            reg *= 10.0
        self.coeffs = coeffs
        self.fitted_reg_coeff = reg

    def predict(self, episodes: EpisodeBatch) -> np.ndarray:
        """``(N•T,)`` predicted values; zeros before the first fit (garage's behaviour)."""
        if self.coeffs is None:
            return np.zeros(episodes.n_steps)
        return self.features(episodes) @ self.coeffs
