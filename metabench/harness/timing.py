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


RATIO_TOLERANCE = 0.15
"""How much worse than its saved baseline a speed ratio may get before a check fails (15 %):
side-by-side ratios on a shared 2-core machine move by up to about 10 % between runs."""


def ratio_regressions(
    current: dict[str, tuple[float, bool]],
    baseline: dict[str, float],
    tolerance: float = RATIO_TOLERANCE,
) -> list[str]:
    """The ratios of ``current`` (name -> (value, higher_is_better)) that regressed by more than
    ``tolerance`` against ``baseline``, each as a one-line message; ratios the baseline does not
    hold are not judged."""
    problems = []
    for name, (value, higher_is_better) in sorted(current.items()):
        if name not in baseline:
            continue
        reference = baseline[name]
        limit = reference * (1 - tolerance) if higher_is_better else reference * (1 + tolerance)
        if (value < limit) if higher_is_better else (value > limit):
            direction = "fell" if higher_is_better else "rose"
            problems.append(
                f"{name} {direction} to {value:.3f} from the baseline's {reference:.3f} "
                f"(tolerance {tolerance:.0%})"
            )
    return problems
