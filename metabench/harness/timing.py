"""Side-by-side timing for speed comparisons on a shared, noisy machine."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_times(fns: dict[str, Callable[[], object]], rounds: int = 7) -> dict[str, float]:
    """Run each function once per round, interleaved, and return each one's fastest round.

    Absolute times drift on a shared machine; interleaving exposes subject and reference to the
    same load, and the fastest round is the least disturbed one, so their ratio is stable.
    """
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best
