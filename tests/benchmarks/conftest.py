"""Side-by-side timing for the speed checks.

The machine these run on is shared and noisy, so absolute times drift: every check measures its
subject and its reference in the same run, interleaved round by round, and compares the best
round of each (the least disturbed one).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from metabench.harness.timing import best_times


@pytest.fixture
def side_by_side() -> Callable[..., dict[str, float]]:
    return best_times
