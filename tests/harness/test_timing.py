"""Speed-ratio baselines: which changes count as regressions."""

from metabench.harness.timing import ratio_regressions


def test_regressions_respect_direction_and_tolerance():
    baseline = {"speedup": 4.0, "overhead": 0.05, "slowdown": 1.3}
    current = {
        "speedup": (3.5, True),  # -12.5 %: within 15 %
        "overhead": (0.06, False),  # +20 %: a regression for a lower-is-better ratio
        "slowdown": (1.6, False),  # +23 %: a regression
        "new": (9.9, True),  # not in the baseline: not judged
    }
    problems = ratio_regressions(current, baseline, tolerance=0.15)
    assert [p.split()[0] for p in problems] == ["overhead", "slowdown"]
    assert "rose to 0.060 from the baseline's 0.050" in problems[0]
    assert ratio_regressions({"speedup": (3.3, True)}, baseline, 0.15) == [
        "speedup fell to 3.300 from the baseline's 4.000 (tolerance 15%)"
    ]
    assert ratio_regressions({"speedup": (9.0, True)}, baseline) == []  # faster is never a failure
