"""MAML-TRPO outer step: metabench's Hessian-vector products against PyTorch's stock ones.

One outer step (CG with 10 KL Hessian-vector products through the inner adaptation, then the line
search) on one fixed batch, taken with metabench's products (the KL gradient built once) and with
``torch.autograd.functional.hvp`` (which re-runs adaptation and KL per product), interleaved in
one run. Both must take the same step; metabench's must be at least 1.5x faster (measured: about
2.9x at the full batch, ``scripts/bench_maml_step.py``). Run with ``make bench``.
"""

from __future__ import annotations

import pytest
import torch

from scripts.bench_maml_step import make_outer_steps, measure

pytestmark = pytest.mark.benchmark

EPISODES_PER_TASK, ROUNDS = 10, 3  # half garage's batch keeps the check to about half a minute


@pytest.mark.parametrize("kind", ["metabench", "stock hvp"])
def test_maml_outer_step(benchmark, kind):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        step = make_outer_steps(EPISODES_PER_TASK)[kind]
        benchmark.group = f"MAML-TRPO outer step, 40 tasks x {EPISODES_PER_TASK} episodes"
        benchmark.pedantic(step, rounds=2, iterations=1, warmup_rounds=1)
    finally:
        torch.set_num_threads(threads)


def test_outer_step_is_at_least_1_5x_faster_than_stock_hvp(record_ratio):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        times = measure(ROUNDS, EPISODES_PER_TASK)
    finally:
        torch.set_num_threads(threads)
    ratio = times["stock hvp"] / times["metabench"]
    print(
        f"\nMAML-TRPO outer step, 40 tasks x {EPISODES_PER_TASK} episodes, best of {ROUNDS}: "
        f"metabench {times['metabench']:.2f} s, stock hvp {times['stock hvp']:.2f} s; "
        f"{ratio:.2f}x (target >= 1.5)"
    )
    assert ratio >= 1.5
    record_ratio("maml_outer_step_vs_stock_hvp", ratio, True)
