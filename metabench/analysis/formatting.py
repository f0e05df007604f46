"""How numbers read in metabench's tables, progress lines and notes: decimals, durations, step
budgets (``2e7``) and ``mean [low, high]`` intervals."""

from __future__ import annotations

import math

__all__ = ["format_duration", "format_interval", "format_number", "format_steps"]


def format_number(value: float | None, digits: int = 2) -> str:
    """``value`` with ``digits`` decimals, or ``n/a`` when missing or not finite."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}"


def format_duration(seconds: float) -> str:
    """Minutes below an hour, hours above."""
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def format_steps(steps: float) -> str:
    """Env steps as people write budgets: 2e7, 9.2e6; below 100,000 in full (52,000)."""
    if steps < 100_000:
        return f"{steps:,.0f}"
    mantissa, exponent = f"{float(steps):.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def format_interval(interval: tuple[float, float, float] | None, digits: int) -> str:
    """``mean [low, high]`` with ``digits`` decimals, from a ``(mean, low, high)`` such as
    :class:`~metabench.analysis.stats.Interval`; the mean alone without an interval (one seed),
    ``n/a`` when missing."""
    if interval is None or not math.isfinite(interval[0]):
        return "n/a"
    mean, low, high = interval
    text = format_number(mean, digits)
    if math.isfinite(low) and math.isfinite(high):
        text += f" [{format_number(low, digits)}, {format_number(high, digits)}]"
    return text
