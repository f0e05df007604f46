"""Meta-World+'s trained RL2 network as a metabench run directory, so that ``metabench evaluate``
meta-tests it exactly as it meta-tests metabench's own runs.

    python scripts/metaworld_plus_run.py params.npz TEMPLATE_RUN OUT_RUN
    metabench evaluate OUT_RUN

``params.npz`` comes from ``scripts/metaworld_plus_params.py`` (run in Meta-World+'s environment).
``TEMPLATE_RUN`` is a run of ``rl2-ppo-metaworld`` on the same benchmark: its ``config.json``
(benchmark, seed, every setting) is copied, and its checkpoint's policy parameters are replaced
by Meta-World+'s. The critic is left as the template's: the meta-test does not use it.
``rl2-ppo-metaworld``'s network is Meta-World+'s (``docs/fidelity.md`` §4; checked in
``tests/algos/rl2/test_metaworld_network.py`` with the mapping below), so the two compute the same
actions from the same parameters.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch as th

from metabench.algos.rl2 import WholeSequenceGruPolicy
from metabench.harness.loading import load_run
from metabench.harness.run import RunDirectory


def swap_layout(name: str, value: Any) -> Any:
    """A Flax kernel ``(in, out)`` as PyTorch's ``(out, in)`` weight, or back; biases unchanged."""
    return value.T if "kernel" in name else value


def flax_named(
    policy: WholeSequenceGruPolicy, of: Callable[[th.Tensor], th.Tensor] = lambda p: p
) -> dict[str, th.Tensor]:
    """``of`` each of ``policy``'s parameters (the parameter itself, its ``.grad``), cut into
    Flax's parameters and named as Flax names them; kernels stay in PyTorch's ``(out, in)``
    layout. The recurrent biases of the reset and update gates, which Flax has not, are left
    out. Flax keeps one Dense per GRU gate; PyTorch stacks them r, z, n."""
    encoder = [m for m in policy.features_extractor.modules() if isinstance(m, th.nn.Linear)]
    gru = policy.lstm_actor
    width = gru.hidden_size
    named = {"head/kernel": of(policy.action_net.weight), "head/bias": of(policy.action_net.bias)}
    for index, layer in enumerate(encoder):
        named[f"encoder/MLP_0/layer_{index}/kernel"] = of(layer.weight)
        named[f"encoder/MLP_0/layer_{index}/bias"] = of(layer.bias)
    for index, gate in enumerate("rzn"):
        block = slice(index * width, (index + 1) * width)
        named[f"cell/i{gate}/kernel"] = of(gru.weight_ih_l0)[block]
        named[f"cell/i{gate}/bias"] = of(gru.bias_ih_l0)[block]
        named[f"cell/h{gate}/kernel"] = of(gru.weight_hh_l0)[block]
    named["cell/hn/bias"] = of(gru.bias_hh_l0)[2 * width :]
    return named


def load_flax_parameters(policy: WholeSequenceGruPolicy, arrays: Any) -> None:
    """Copy Meta-World+'s parameters (``arrays["param/<Flax path>"]``) into ``policy``; the
    reset and update gates' recurrent biases, which Flax has not, are set to 0.

    :raises ValueError: if the names or shapes do not match ``policy``'s."""
    named = flax_named(policy)
    given = {k.removeprefix("param/") for k in arrays.files if k.startswith("param/")}
    if given != set(named):
        raise ValueError(
            f"the parameters are not those of rl2-ppo-metaworld's network: missing "
            f"{sorted(set(named) - given)}, unexpected {sorted(given - set(named))}"
        )
    with th.no_grad():
        for name, tensor in named.items():
            value = th.as_tensor(swap_layout(name, arrays[f"param/{name}"]))
            if value.shape != tensor.shape:
                raise ValueError(f"{name}: shape {tuple(value.shape)}, not {tuple(tensor.shape)}")
            tensor.copy_(value)
        gru = policy.lstm_actor
        gru.bias_hh_l0[: 2 * gru.hidden_size].zero_()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("params", type=Path, help="from scripts/metaworld_plus_params.py")
    parser.add_argument("template", type=Path, help="a run directory of rl2-ppo-metaworld")
    parser.add_argument("out", type=Path, help="the run directory to write (must not exist)")
    args = parser.parse_args()
    if args.out.exists():
        sys.exit(f"error: {args.out} exists; give a new directory")
    template = load_run(args.template, device="cpu")
    if template.config.algorithm != "rl2-ppo-metaworld":
        algorithm_name = template.config.algorithm
        sys.exit(f"error: {args.template} is a run of {algorithm_name}: give rl2-ppo-metaworld's")
    state = template.plan.run.load_checkpoint()
    assert state is not None  # load_run refuses a run without one
    algorithm = template.algorithm
    load_flax_parameters(algorithm.model.policy, np.load(args.params, allow_pickle=False))  # type: ignore[attr-defined]
    out = RunDirectory(args.out)
    out.create()
    out.claim(template.config)
    out.save_checkpoint({**state, "algorithm": algorithm.state_dict()}, type(algorithm).__name__)
    print(f"{args.out} written; meta-test it with: metabench evaluate {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
