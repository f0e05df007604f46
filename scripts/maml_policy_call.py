"""MAML's adapted policy acting in one env: the layers applied to its parameters against
``torch.func.functional_call``.

The sequential meta-test (PointGoal, HalfCheetahVel) calls ``GaussianPolicy.get_action`` once per
env step; ``GaussianMLPPolicy.mean_log_std`` used to go through ``functional_call``, which swaps
the parameter set into the module for every call. This times ``get_action`` on the same
observations both ways, interleaved, after checking that both give the same actions bit for bit.

    .venv/bin/python scripts/maml_policy_call.py [--hidden 64 64] [--obs-dim 2] [--rounds 7]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from unittest import mock

import numpy as np
import torch
from torch.func import functional_call

from metabench.algos.maml.policy import GaussianMLPPolicy, GaussianPolicy
from metabench.harness.timing import best_times

CALLS = 2000


def make_calls(hidden: Sequence[int], obs_dim: int) -> dict[str, Callable[[], np.ndarray]]:
    """``CALLS`` deterministic ``get_action`` calls each way; each returns the actions."""
    torch.manual_seed(0)
    module = GaussianMLPPolicy(obs_dim, 2, hidden)
    params = {name: value.detach() + 0.01 for name, value in module.named_parameters()}
    policy = GaussianPolicy(module, params, deterministic=True)
    observations = np.random.default_rng(0).normal(size=(CALLS, obs_dim))

    def layers() -> np.ndarray:
        return np.stack([policy.get_action(obs) for obs in observations])

    def stock() -> np.ndarray:
        with mock.patch.object(
            GaussianMLPPolicy,
            "mean_log_std",
            lambda self, obs, p: functional_call(self, dict(p), (obs,)),
        ):
            return layers()

    return {"layers": layers, "functional_call": stock}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64], help="hidden sizes")
    parser.add_argument("--obs-dim", type=int, default=2, help="observation size (PointGoal 2)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per way")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    calls = make_calls(args.hidden, args.obs_dim)
    ours, stock = (call() for call in calls.values())  # also the warm-up
    if ours.tobytes() != stock.tobytes():
        raise AssertionError("the two ways act differently")
    times = best_times(calls, args.rounds)
    for name, seconds in times.items():
        print(f"{name:>15}: {1e6 * seconds / CALLS:.0f} us per get_action")
    print(f"functional_call / layers: {times['functional_call'] / times['layers']:.2f}x")


if __name__ == "__main__":
    main()
