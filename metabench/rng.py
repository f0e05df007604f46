"""The streams a run's seed splits into, random states as plain values, and evaluation streams
that leave training's alone.

Every stream derived from a run's seed is a :class:`Stream` of this module, keyed here and nowhere
else (``tests/test_rng.py`` checks that no other module builds a ``SeedSequence``): a new stream
takes a key no run shares with it, and an existing key never changes, since it fixes the numbers
of every run that draws from it.

Checkpoints hold only tensors and plain Python values (so that ``torch.load(weights_only=True)``
reads them and unpickling can run no code); :func:`global_rng_state` gives the global generators'
states in that form. :func:`isolated_global_rng` runs a block (a meta-test during training) on
generators of its own, derived from a seed and a key, and puts the global states back afterwards.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np


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
    import torch  # here, not at the top: reading results imports this module without torch

    return {
        "torch": torch.get_rng_state(),
        "numpy": numpy_global_state(),
        "python": random.getstate(),
    }


def set_global_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`global_rng_state`."""
    import torch

    torch.set_rng_state(state["torch"])
    numpy_state = dict(state["numpy"])
    inner = numpy_state["state"]
    numpy_state["state"] = {"key": np.asarray(inner["key"], dtype=np.uint32), "pos": inner["pos"]}
    np.random.set_state(numpy_state)
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))


@dataclass(frozen=True)
class Stream:
    """One stream of a run's seed: ``SeedSequence(seed, spawn_key=key + index)``.

    Two streams may share a key only when no run draws from both (their ``users`` are disjoint and
    neither is ``"harness"``, which every run uses); ``indexed`` streams take one more key element
    per draw (an iteration, a trial), so they never meet an unindexed stream of the same key.
    """

    key: tuple[int, ...]
    users: frozenset[str]
    indexed: bool = False

    def sequence(self, seed: int, *index: int) -> np.random.SeedSequence:
        """The ``SeedSequence`` of this stream of ``seed`` (``index`` for an indexed stream)."""
        if len(index) != int(self.indexed):
            raise ValueError(f"stream {self.key} takes {int(self.indexed)} index, got {index}")
        return np.random.SeedSequence(int(seed), spawn_key=self.key + tuple(int(i) for i in index))

    def generator(self, seed: int, *index: int) -> np.random.Generator:
        """A NumPy generator on this stream."""
        return np.random.default_rng(self.sequence(seed, *index))

    def seed(self, seed: int, *index: int) -> int:
        """A 32-bit seed from this stream (for torch's generators and the global ones)."""
        return int(self.sequence(seed, *index).generate_state(1)[0])


_TORCH_LEARNERS = frozenset({"maml", "pearl"})
_SB3_LEARNERS = frozenset({"rl2", "reference"})
_EVERY_RUN = frozenset({"harness"})

ALGORITHM_NUMPY = Stream((0,), _TORCH_LEARNERS)
"""MAML's and PEARL's NumPy generator (task batches, replay sampling)."""
ALGORITHM_TORCH = Stream((1,), _TORCH_LEARNERS)
"""MAML's and PEARL's torch generator for training (action and latent sampling)."""
ALGORITHM_EVALUATION_TORCH = Stream((2,), _TORCH_LEARNERS)
"""MAML's and PEARL's torch generator for meta-tests."""
PEARL_TRAIN_TASKS = Stream((3,), frozenset({"pearl"}))
"""Draws PEARL's fixed set of training tasks."""
METAWORLD_TASK_CYCLES = Stream((), frozenset({"maml", "rl2"}))
"""The run seed itself, unspawned (``default_rng(seed)``): Meta-World's training envs shuffle
their task lists with a generator seeded so, and :class:`~metabench.tasks.base.CycledTaskSampler`
follows their order for the same seed."""
META_BATCH_SLOTS = Stream((0,), _SB3_LEARNERS, indexed=True)
"""The meta-batch of trial ``n`` that every slot of an RL2 vec env takes its task from."""
META_BATCH_TASKS = Stream((1,), _SB3_LEARNERS)
"""The task draws of an RL2 vec env's ``sample_tasks`` / ``set_task`` controls."""
EVALUATION = Stream((1,), _EVERY_RUN, indexed=True)
"""The meta-test at iteration ``n`` (``--eval-every``, ``metabench evaluate``)."""
TEST_TASKS = Stream((7,), _EVERY_RUN)
"""Draws the test tasks of the final meta-test (training uses the run seed directly)."""
TRAIN_EVALUATION_TASKS = Stream((8,), _EVERY_RUN)
"""Draws the training tasks meta-tested after training."""
PERIODIC_TASKS = Stream((9,), _EVERY_RUN)
"""Draws the test tasks of the meta-tests during training."""
TASK_LIST = Stream((10,), _EVERY_RUN)
"""Draws the fixed list of tasks of a ``[split] kind = "list"`` benchmark (oyster's protocol)."""

STREAMS: tuple[Stream, ...] = (
    ALGORITHM_NUMPY,
    ALGORITHM_TORCH,
    ALGORITHM_EVALUATION_TORCH,
    PEARL_TRAIN_TASKS,
    METAWORLD_TASK_CYCLES,
    META_BATCH_SLOTS,
    META_BATCH_TASKS,
    EVALUATION,
    TEST_TASKS,
    TRAIN_EVALUATION_TASKS,
    PERIODIC_TASKS,
    TASK_LIST,
)
"""Every stream of a run's seed."""


def combined_seed_sequence(*values: int) -> np.random.SeedSequence:
    """A ``SeedSequence`` of several seeds together: a meta-test task's reset seed from the
    meta-test's seed and the task's index, a Sawyer env's from a reset seed and its class."""
    return np.random.SeedSequence(tuple(int(v) for v in values))


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
    import torch

    saved = global_rng_state()
    try:
        torch.manual_seed(seed)
        np.random.seed(seed)
        random.seed(seed)
        yield
    finally:
        set_global_rng_state(saved)
