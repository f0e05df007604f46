"""The linear feature baseline against least squares on garage's features, built step by step."""

from __future__ import annotations

import math

import numpy as np
import pytest

from metabench.algos.common.baseline import LinearFeatureBaseline
from tests.factories import episode_batch


def test_linear_baseline_fit_equals_lstsq_on_the_same_features() -> None:
    episodes = episode_batch(2, [6, 4, 9])
    targets = np.random.default_rng(3).normal(size=episodes.n_steps)
    baseline = LinearFeatureBaseline(reg_coeff=1e-3)
    np.testing.assert_array_equal(baseline.predict(episodes), np.zeros(episodes.n_steps))
    baseline.fit(episodes, targets)

    rows = []  # garage's features, built step by step
    for obs_episode in episodes.observations_list:
        for t, obs in enumerate(obs_episode):
            clipped = np.clip(obs, -10, 10)
            s = t / 100
            rows.append([*clipped, *clipped**2, s, s**2, s**3, 1.0])
    features = np.array(rows)
    assert (np.abs(episodes.observations) > 10).any()  # the clip matters in this batch
    np.testing.assert_allclose(LinearFeatureBaseline.features(episodes), features)
    # ridge = least squares on [F; sqrt(reg) I] w ~ [y; 0]
    k = features.shape[1]
    augmented = np.vstack([features, math.sqrt(1e-3) * np.eye(k)])
    expected = np.linalg.lstsq(augmented, np.concatenate([targets, np.zeros(k)]), rcond=None)[0]
    assert baseline.fitted_reg_coeff == 1e-3
    assert baseline.coeffs is not None
    np.testing.assert_allclose(baseline.coeffs, expected, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(
        baseline.predict(episodes), features @ expected, rtol=1e-7, atol=1e-9
    )
    with pytest.raises(ValueError, match="one return per step"):
        baseline.fit(episodes, targets[:-1])
