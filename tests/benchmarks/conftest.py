"""Side-by-side timing for the speed checks.

The machine these run on is shared and noisy, so absolute times drift: every check measures its
subject and its reference in the same run, interleaved round by round, and compares the best
round of each (the least disturbed one).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def best_times(fns: dict[str, Callable[[], object]], rounds: int = 7) -> dict[str, float]:
    """Run each function once per round, interleaved; return each one's fastest wall time."""
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


@pytest.fixture
def side_by_side() -> Callable[..., dict[str, float]]:
    return best_times


# The speed scripts in scripts/ hold the measurements; the checks here import them.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
