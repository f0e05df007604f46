"""MAML-TRPO outer step: metabench's KL curvature products against double backpropagation and
against PyTorch's stock Hessian-vector products.

The outer step (the TRPO update of the meta-parameters, 76% of a HalfCheetahVel iteration) is
dominated by conjugate gradient's products of the KL's Hessian through the inner adaptation.
metabench computes them as Gauss-Newton products ``J^T K J v`` (exact where the step starts, and
the same floats); double backpropagation builds the KL's gradient once and differentiates it per
product (metabench's products until 2026-12); the stock ``torch.autograd.functional.hvp`` re-runs
the adaptation and the KL for every product. This times the same outer step (same batch, same
parameters, same CG and line search) the three ways, interleaved, checks that the first two take
the same step bit for bit, and prints each time and the ratios. The batch is garage's
HalfCheetahVel shape (40 tasks x 20 episodes, 100-100 policy) on the MuJoCo-free PointGoal env
with horizon 20, sampled once; ``--hidden 512 512`` gives Meta-World's policy.

    .venv/bin/python scripts/bench_maml_step.py [--rounds 5] [--hidden 512 512]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from unittest import mock

import torch

import metabench  # noqa: F401 - registers the ids
from metabench.algos.common.trpo import flatten, hessian_vector_product
from metabench.algos.maml import MAML, MAMLConfig, functional
from metabench.algos.maml import maml as maml_module
from metabench.algos.maml.policy import detached_params
from metabench.harness.timing import best_times


def make_outer_steps(
    episodes_per_task: int = 20, seed: int = 0, hidden_sizes: Sequence[int] = (100, 100)
) -> dict[str, Callable[[], torch.Tensor]]:
    """One sampled batch and three ways to take the outer step on it from the same start; each
    returns the flat meta-parameters after its step."""
    config = MAMLConfig(
        meta_batch_size=40, episodes_per_task=episodes_per_task, hidden_sizes=tuple(hidden_sizes)
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
        outputs: object, kl_of_outputs: object, params: Sequence[torch.Tensor], damping: float
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """``v -> (H + damping I) v`` by ``torch.autograd.functional.hvp`` on :func:`kl_of`."""

        def product(vector: torch.Tensor) -> torch.Tensor:
            flat = flatten([param.detach() for param in params])
            _, hv = torch.autograd.functional.hvp(kl_of, flat, vector.detach())
            return hv + damping * vector.detach()

        return product

    def double_backpropagation(
        outputs: Sequence[torch.Tensor],
        kl_of_outputs: Callable[[Sequence[torch.Tensor]], torch.Tensor],
        params: Sequence[torch.Tensor],
        damping: float,
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """``v -> (H + damping I) v`` by differentiating the KL's gradient, built once."""
        return hessian_vector_product(lambda: kl_of_outputs(outputs), params, damping)

    def step() -> torch.Tensor:
        algo.policy.load_state_dict(start)
        algo.meta_optimize(train_data, valid_data)
        return flatten([param.detach().clone() for param in algo.policy.parameters()])

    def with_products(make: Callable[..., Callable[[torch.Tensor], torch.Tensor]]):
        def patched_step() -> torch.Tensor:
            with mock.patch.object(maml_module, "gauss_newton_vector_product", make):
                return step()

        return patched_step

    return {
        "metabench": step,
        "double backward": with_products(double_backpropagation),
        "stock hvp": with_products(stock_hessian_vector_product),
    }


def measure(
    rounds: int,
    episodes_per_task: int = 20,
    hidden_sizes: Sequence[int] = (100, 100),
    kinds: Sequence[str] = ("metabench", "double backward", "stock hvp"),
) -> dict[str, float]:
    """Seconds of the fastest of ``rounds`` interleaved outer steps of each of ``kinds`` (after
    checking that they take the same step: bit for bit against double backpropagation)."""
    steps = {
        k: v for k, v in make_outer_steps(episodes_per_task, 0, hidden_sizes).items() if k in kinds
    }
    after = {kind: step() for kind, step in steps.items()}  # also the warm-up
    ours = after["metabench"]
    if "double backward" in after and not torch.equal(ours, after["double backward"]):
        raise AssertionError("the Gauss-Newton step is not double backpropagation's, bit for bit")
    if "stock hvp" in after and not torch.allclose(ours, after["stock hvp"], rtol=1e-4, atol=1e-5):
        raise AssertionError("the outer steps differ: the products are not the same Hessian")
    return best_times(steps, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per kind")
    parser.add_argument("--episodes-per-task", type=int, default=20, help="batch: 40 tasks x N")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--hidden", type=int, nargs="+", default=[100, 100], help="policy sizes")
    parser.add_argument(
        "--no-stock", action="store_true", help="leave out the (slowest) stock products"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kinds = ["metabench", "double backward"] + ([] if args.no_stock else ["stock hvp"])
    times = measure(args.rounds, args.episodes_per_task, args.hidden, kinds)
    for name, seconds in times.items():
        print(f"{name:>15}: {seconds:.3f} s per outer step")
    for name in kinds[1:]:
        print(f"{name} / metabench: {times[name] / times['metabench']:.2f}x")


if __name__ == "__main__":
    main()
