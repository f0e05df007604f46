"""PEARL's gradient step against SB3's SAC step with the same networks on the same 4,096
transitions, interleaved in one run (``scripts/bench_pearl_step.py``). PEARL updates a context
encoder and a V-function besides SAC's networks, so it may cost more, but not more than 1.5x.
Run with ``make bench``.
"""

from __future__ import annotations

import pytest

from metabench.threads import torch_threads
from scripts.bench_pearl_step import measure

pytestmark = [pytest.mark.benchmark, pytest.mark.mujoco]

ROUNDS, STEPS = 3, 3


def test_pearl_step_costs_at_most_1_5_sac_steps(record_ratio):
    with torch_threads(1):
        per_step = measure(ROUNDS, STEPS)
    ratio = per_step["pearl"] / per_step["sb3 sac"]
    print(
        f"\ngradient step, 16 tasks x 256 transitions, best of {ROUNDS}: PEARL "
        f"{1e3 * per_step['pearl']:.0f} ms, SB3 SAC {1e3 * per_step['sb3 sac']:.0f} ms; "
        f"{ratio:.2f} (target <= 1.5)"
    )
    assert ratio <= 1.5
    record_ratio("pearl_step_vs_sb3_sac", ratio, False)
