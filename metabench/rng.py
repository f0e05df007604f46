"""Random states as plain values, and evaluation streams that leave training's alone.

Checkpoints hold only tensors and plain Python values (so that ``torch.load(weights_only=True)``
reads them and unpickling can run no code); :func:`global_rng_state` gives the global generators'
states in that form. :func:`isolated_global_rng` runs a block (a meta-test during training) on
generators of its own, derived from a seed and a key, and puts the global states back afterwards.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch


def numpy_global_state() -> dict[str, Any]:
    """NumPy's legacy global generator (``np.random.*``) as plain values."""
    state = np.random.get_state(legacy=False)
    assert isinstance(state, dict)
    inner = state["state"]
    return {
        "bit_generator": str(state["bit_generator"]),
        "state": {"key": np.asarray(inner["key"]).tolist(), "pos": int(inner["pos"])},
        "has_gauss": int(state["has_gauss"]),
        "gauss": float(state["gauss"]),
    }


def global_rng_state() -> dict[str, Any]:
    """The states of torch's, NumPy's and Python's global generators (tensors and plain values)."""
    return {
        "torch": torch.get_rng_state(),
        "numpy": numpy_global_state(),
        "python": random.getstate(),
    }


def set_global_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`global_rng_state`."""
    torch.set_rng_state(state["torch"])
    numpy_state = dict(state["numpy"])
    inner = numpy_state["state"]
    numpy_state["state"] = {"key": np.asarray(inner["key"], dtype=np.uint32), "pos": inner["pos"]}
    np.random.set_state(numpy_state)
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))


def derived_seed(seed: int, key: Sequence[int]) -> int:
    """A 32-bit seed for the stream ``key`` (e.g. ``(EVALUATION, iteration)``) of run ``seed``;
    independent of every other key's stream."""
    sequence = np.random.SeedSequence(seed, spawn_key=tuple(int(k) for k in key))
    return int(sequence.generate_state(1)[0])


@contextmanager
def isolated_global_rng(seed: int) -> Iterator[None]:
    """Seed torch's, NumPy's and Python's global generators with ``seed`` for the block, then put
    back the states they had before it: what the block draws changes nothing outside it.

    Example::

        >>> import numpy as np
        >>> before = np.random.get_state()[1][:3].tolist()
        >>> with isolated_global_rng(7):
        ...     _ = np.random.rand(100)
        >>> np.random.get_state()[1][:3].tolist() == before
        True
    """
    saved = global_rng_state()
    try:
        torch.manual_seed(seed)
        np.random.seed(seed)
        random.seed(seed)
        yield
    finally:
        set_global_rng_state(saved)
