"""MAML-TRPO outer step: metabench's KL curvature products against double backpropagation and
against PyTorch's stock Hessian-vector products.

One outer step (CG with 10 KL curvature products through the inner adaptation, then the line
search) on one fixed batch, taken with metabench's Gauss-Newton products, with double
backpropagation of the KL's gradient (built once), and with ``torch.autograd.functional.hvp``
(which re-runs adaptation and KL per product), interleaved in one run. The first two must take
the same step bit for bit, the stock one the same step to rounding; metabench's must be at least
1.5x faster than the stock products and 1.05x faster than double backpropagation (measured
1.18-1.37x on this 100-100 policy, 1.38x on Meta-World's 2x512, ``scripts/bench_maml_step.py``). Run
with ``make bench``.
"""

from __future__ import annotations

import pytest
import torch

from scripts.bench_maml_step import make_outer_steps, measure

pytestmark = pytest.mark.benchmark

EPISODES_PER_TASK, ROUNDS = 10, 3  # half garage's batch keeps the check to about half a minute


@pytest.mark.parametrize("kind", ["metabench", "double backward", "stock hvp"])
def test_maml_outer_step(benchmark, kind):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step = make_outer_steps(EPISODES_PER_TASK)[kind]
        benchmark.group = f"MAML-TRPO outer step, 40 tasks x {EPISODES_PER_TASK} episodes"
        benchmark.pedantic(step, rounds=2, iterations=1, warmup_rounds=1)
    finally:
        torch.set_num_threads(threads)


def test_outer_step_is_faster_than_double_backpropagation_and_stock_hvp(record_ratio):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        times = measure(ROUNDS, EPISODES_PER_TASK)
    finally:
        torch.set_num_threads(threads)
    ratio = times["stock hvp"] / times["metabench"]
    lever = times["double backward"] / times["metabench"]
    print(
        f"\nMAML-TRPO outer step, 40 tasks x {EPISODES_PER_TASK} episodes, best of {ROUNDS}: "
        f"metabench {times['metabench']:.2f} s, double backward {times['double backward']:.2f} s, "
        f"stock hvp {times['stock hvp']:.2f} s; {ratio:.2f}x the stock (target >= 1.5), "
        f"{lever:.2f}x double backpropagation (floor 1.05)"
    )
    assert ratio >= 1.5
    assert lever >= 1.05
    record_ratio("maml_outer_step_vs_stock_hvp", ratio, True)
    record_ratio("maml_outer_step_gauss_newton_vs_double_backward", lever, True)
