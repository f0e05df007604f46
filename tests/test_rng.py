"""The registry of seed streams: every stream keyed in one place, and no two that a run shares."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import numpy as np
import pytest

import metabench
from metabench import rng
from metabench.rng import STREAMS, Stream

PACKAGE = Path(metabench.__file__).parent


def _builds_seed_sequences(path: Path) -> list[int]:
    """Lines of ``path`` that build a ``SeedSequence`` or spawn one."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in {"SeedSequence", "spawn"}:
            lines.append(node.lineno)
    return lines


def test_only_the_registry_derives_streams() -> None:
    """A stream keyed outside ``rng.py`` could take a key another stream of the same run has."""
    offenders = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "rng.py" and (lines := _builds_seed_sequences(path))
    }
    assert offenders == {}


def test_the_check_sees_a_stream_keyed_elsewhere(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text("import numpy as np\nrng = np.random.SeedSequence(0, spawn_key=(3,))\n")
    assert _builds_seed_sequences(module) == [2]


def _may_share_a_run(a: Stream, b: Stream) -> bool:
    return bool(a.users & b.users) or "harness" in a.users | b.users


def test_streams_a_run_may_share_have_distinct_keys() -> None:
    for a, b in itertools.combinations(STREAMS, 2):
        if _may_share_a_run(a, b):
            assert (a.key, a.indexed) != (b.key, b.indexed), (a, b)


def test_every_stream_is_registered() -> None:
    declared = {id(v) for v in vars(rng).values() if isinstance(v, Stream)}
    assert declared == {id(s) for s in STREAMS}


def test_streams_of_one_run_draw_independent_numbers() -> None:
    """Every pair of streams a run may use gives different draws for the same seed."""
    seed = 3
    draws = {}
    for stream in STREAMS:
        index = (0,) if stream.indexed else ()
        draws[stream] = stream.generator(seed, *index).integers(2**62, size=4).tolist()
    for a, b in itertools.combinations(STREAMS, 2):
        if _may_share_a_run(a, b):
            assert draws[a] != draws[b], (a, b)


def test_a_stream_is_the_spawned_child_of_the_seed() -> None:
    """The keys are ``SeedSequence.spawn``'s: the child ``k`` of a seed is the stream ``(k,)``."""
    children = np.random.SeedSequence(11).spawn(4)
    assert rng.ALGORITHM_TORCH.seed(11) == int(children[1].generate_state(1)[0])
    assert rng.PEARL_TRAIN_TASKS.seed(11) == int(children[3].generate_state(1)[0])
    grandchild = children[0].spawn(3)[2]
    assert rng.META_BATCH_SLOTS.seed(11, 2) == int(grandchild.generate_state(1)[0])


def test_indexed_streams_need_their_index() -> None:
    with pytest.raises(ValueError, match="takes 1 index"):
        rng.EVALUATION.seed(0)
    with pytest.raises(ValueError, match="takes 0 index"):
        rng.TEST_TASKS.seed(0, 1)
