"""MAML-TRPO outer step: metabench's Hessian-vector products against PyTorch's stock ones.

The outer step (the TRPO update of the meta-parameters, 76% of a HalfCheetahVel iteration) is
dominated by conjugate gradient's Hessian-vector products of the KL through the inner adaptation.
metabench builds the KL gradient once and double-backpropagates it per product; the stock
``torch.autograd.functional.hvp`` re-runs the adaptation and the KL for every product. This times
the same outer step (same batch, same parameters, same CG and line search) both ways, interleaved,
and prints each time and the ratio. The batch is garage's HalfCheetahVel shape (40 tasks x 20
episodes, 100-100 policy) on the MuJoCo-free PointGoal env with horizon 20, sampled once.

    .venv/bin/python scripts/bench_maml_step.py [--rounds 5]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from unittest import mock

import torch

import metabench  # noqa: F401 - registers the ids
from metabench.algos.common.trpo import flatten
from metabench.algos.maml import MAML, MAMLConfig, functional
from metabench.algos.maml import maml as maml_module
from metabench.algos.maml.policy import detached_params
from metabench.harness.timing import best_times


def make_outer_steps(
    episodes_per_task: int = 20, seed: int = 0
) -> dict[str, Callable[[], torch.Tensor]]:
    """One sampled batch and two ways to take the outer step on it from the same start; each
    returns the flat meta-parameters after its step."""
    config = MAMLConfig(
        meta_batch_size=40, episodes_per_task=episodes_per_task, hidden_sizes=(100, 100)
    )
    algo = MAML("metabench/PointGoal-v0", config=config, seed=seed, env_kwargs={"horizon": 20})
    tasks = algo.task_sampler.sample(algo.config.meta_batch_size, algo._rng)
    meta = detached_params(algo.policy.params())
    train_data = [algo.process(e) for e in algo.collect(tasks, [meta] * len(tasks))]
    adapted = [detached_params(algo.adapt(meta, data, create_graph=False)) for data in train_data]
    valid_data = [algo.process(e) for e in algo.collect(tasks, adapted)]
    start = {name: value.clone() for name, value in algo.policy.state_dict().items()}
    old = functional.old_outputs(
        algo.policy, [algo.adapt(meta, data) for data in train_data], valid_data
    )
    names = [name for name, _ in algo.policy.named_parameters()]

    def kl_of(flat: torch.Tensor) -> torch.Tensor:
        """The outer step's KL as a function of the flat meta-parameters, adaptation included."""
        sizes = [param.numel() for _, param in algo.policy.named_parameters()]
        shapes = [param.shape for _, param in algo.policy.named_parameters()]
        params = {n: c.view(s) for n, c, s in zip(names, flat.split(sizes), shapes, strict=True)}
        adapted_now = [algo.adapt(params, data) for data in train_data]
        return algo.kl(adapted_now, valid_data, old)

    def stock_hessian_vector_product(
        kl_fn: Callable[[], torch.Tensor], params: Sequence[torch.Tensor], damping: float
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """``v -> (H + damping I) v`` by ``torch.autograd.functional.hvp`` on :func:`kl_of`."""

        def product(vector: torch.Tensor) -> torch.Tensor:
            flat = flatten([param.detach() for param in params])
            _, hv = torch.autograd.functional.hvp(kl_of, flat, vector.detach())
            return hv + damping * vector.detach()

        return product

    def step() -> torch.Tensor:
        algo.policy.load_state_dict(start)
        algo.meta_optimize(train_data, valid_data)
        return flatten([param.detach().clone() for param in algo.policy.parameters()])

    def stock_step() -> torch.Tensor:
        with mock.patch.object(maml_module, "hessian_vector_product", stock_hessian_vector_product):
            return step()

    return {"metabench": step, "stock hvp": stock_step}


def measure(rounds: int, episodes_per_task: int = 20) -> dict[str, float]:
    """Seconds of the fastest of ``rounds`` interleaved outer steps of each kind (after checking
    that both kinds take the same step)."""
    steps = make_outer_steps(episodes_per_task)
    ours, stock = (step() for step in steps.values())  # also the warm-up
    if not torch.allclose(ours, stock, rtol=1e-4, atol=1e-5):
        raise AssertionError("the two outer steps differ: the products are not the same Hessian")
    return best_times(steps, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per kind")
    parser.add_argument("--episodes-per-task", type=int, default=20, help="batch: 40 tasks x N")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    times = measure(args.rounds, args.episodes_per_task)
    for name, seconds in times.items():
        print(f"{name:>10}: {seconds:.3f} s per outer step")
    print(f"stock hvp / metabench: {times['stock hvp'] / times['metabench']:.2f}x")


if __name__ == "__main__":
    main()
