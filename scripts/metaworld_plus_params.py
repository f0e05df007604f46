"""Export the RL2 policy parameters of a Meta-World+ checkpoint to an ``.npz`` that
``scripts/metaworld_plus_run.py`` turns into a metabench run directory.

Runs in Meta-World+'s own environment (metaworld-algorithms at a2abf6a3bb1e with the versions its
``uv.lock`` pins: orbax, JAX, Flax), not in metabench's, which has none of them::

    python scripts/metaworld_plus_params.py RUN/checkpoints/2000001 params.npz

It reads the ``agent`` item of an orbax checkpoint written by metaworld-algorithms' ``Run`` and
writes each leaf of the policy's parameters as ``param/<Flax path>`` (for example
``param/cell/ir/kernel``), Flax's layout unchanged, so the reading side owns the mapping. Only
arrays are read: no pickle, no code from the checkpoint runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def flatten(tree: dict, prefix: str = "") -> dict[str, np.ndarray]:
    """``{"a": {"b": x}}`` as ``{"a/b": x}``, arrays as NumPy."""
    flat: dict[str, np.ndarray] = {}
    for key, value in tree.items():
        path = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict):
            flat.update(flatten(value, path))
        else:
            flat[path] = np.asarray(value)
    return flat


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a step directory of RUN/checkpoints/")
    parser.add_argument("out", type=Path, help="the .npz to write (must not exist)")
    args = parser.parse_args()
    if args.out.exists():
        sys.exit(f"error: {args.out} exists; give a new file name")
    agent_dir = args.checkpoint.absolute() / "agent"
    if not agent_dir.is_dir():
        sys.exit(f"error: {agent_dir} is missing; give a step directory of RUN/checkpoints/")

    import orbax.checkpoint as ocp  # Meta-World+'s environment only

    agent = ocp.StandardCheckpointer().restore(agent_dir)
    params = agent["policy"]["params"]["params"]  # RNNTrainState.params: Flax's {"params": ...}
    flat = {f"param/{name}": value for name, value in flatten(params).items()}
    tmp = args.out.with_name(args.out.name + ".partial.npz")
    np.savez(tmp, **flat)
    tmp.replace(args.out)
    print(f"{len(flat)} arrays -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
