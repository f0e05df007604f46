"""A tiny run of every algorithm, and the sha256 of each result's numbers.

A change that must not move any number (a refactor, a new option at its default) leaves every
line this script prints unchanged: run it before and after, and compare the two outputs::

    .venv/bin/python scripts/fingerprint_tiny_runs.py > /tmp/before.txt
    # ... change the code ...
    .venv/bin/python scripts/fingerprint_tiny_runs.py > /tmp/after.txt
    diff /tmp/before.txt /tmp/after.txt

Each run is ``metabench train`` on PointGoal (CEM and CMA-ES: HalfCheetahVel) on one core, with a
budget of a few iterations; ``rl2-ppo-chunked`` also runs its chunked update, and
``rl2-ppo-metaworld`` every setting of its ML10 table but the task batch and order, with short
chunks (their own settings are for Meta-World only). The hash covers every number of
``result.json``'s training and meta-test sections except wall times, and their keys, as
:func:`metabench.analysis.resultfile.read_result` reads the file (of any version) and
:meth:`~metabench.records.RunResult.to_json` writes it back, with the meta-tests' ``version``
hashed as 2: the fields version 3 of the records added are ``null`` where these runs have none
(no numbers), so that the fingerprints stay those of version 2 and a run written in any version
hashes the same. (Fingerprints printed before version 2 hashed the file as written and cannot be
compared with these.)

``--code`` trains with another checkout of metabench (the runs run in it, with it first on their
``PYTHONPATH``) while the hashing stays this script's, for instance the commit before a change
that renames stored keys::

    git worktree add /tmp/before <commit>
    .venv/bin/python scripts/fingerprint_tiny_runs.py --code /tmp/before > /tmp/before.txt
    .venv/bin/python scripts/fingerprint_tiny_runs.py > /tmp/after.txt

``--benchmark`` runs them on another benchmark instead of PointGoal, for instance one of your own
through ``METABENCH_SPECS``. A change of PointGoal's protocol moves its fingerprints; a copy of
the former ``envs/PointGoal.toml`` under another name shows whether the code still computes the
same numbers (algorithms with ``[benchmarks.PointGoal]`` settings need them under the copy's
name too, and the MAML budgets below are set for the present PointGoal)::

    METABENCH_SPECS=/tmp/old .venv/bin/python scripts/fingerprint_tiny_runs.py \
        --benchmark PointGoalOld > /tmp/after.txt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from metabench.analysis.resultfile import read_result

ALGORITHMS = {
    "nop": [],
    # policy search on HalfCheetahVel (PointGoal gave one exploration episode, too few)
    "cem": ["--benchmark", "HalfCheetahVel"],
    "cmaes": ["--benchmark", "HalfCheetahVel"],
    "multitask": [],
    "oracle": [],
    # two iterations of their PointGoal settings (20 tasks x 20 or 10 episodes x 100 steps x 2)
    "maml-trpo": ["--steps", "160000"],
    "maml-vpg": ["--steps", "80000"],
    "maml-ppo": ["--steps", "80000"],
    "rl2-ppo": [],
    "rl2-ppo-tuned": [],
    "rl2-trpo": [],
    "rl2-ppo-chunked": [
        "--set",
        "chunk_length=10",
        "--set",
        "chunk_overlap=2",
        "--set",
        "value_baseline=linear",
    ],
    # its settings are Meta-World's only: each is set (meta_world_settings), with short chunks
    "rl2-ppo-metaworld": ["--set", "chunk_length=10", "--set", "chunk_overlap=2"],
    "pearl": [
        "--steps",
        "2000",
        *("--set", "n_train_tasks=2", "--set", "num_initial_steps=200", "--set", "batch_size=16"),
        *("--set", "num_tasks_sample=2", "--set", "num_steps_prior=200"),
        *("--set", "num_train_steps_per_itr=20", "--set", "hidden_sizes=[16]"),
        *("--set", "encoder_hidden_sizes=[16]", "--set", "embedding_batch_size=16"),
    ],
}
"""Each algorithm and the ``metabench train`` arguments its tiny run adds (a later
``--benchmark``, ``--steps`` or ``--set`` replaces the script's)."""

META_WORLD_ONLY = {"rl2-ppo-metaworld": "ML10"}
"""Algorithms whose baseline file sets everything that makes them what they are for Meta-World
only, and the benchmark whose settings their tiny run takes (:func:`meta_world_settings`)."""

SECTIONS = ("env_steps", "iterations", "metatest", "metatrain", "train_evaluation")
"""The parts of ``result.json`` whose numbers the hash covers."""

HASHED_VERSION = 2
"""The meta-tests' ``version`` the hash covers, whatever version wrote them: the fingerprints
printed since version 2 of the meta-test result stay comparable."""


def meta_world_settings(algorithm: str, benchmark: str) -> list[str]:
    """``--set`` for each hyperparameter the baseline file gives ``algorithm`` on ``benchmark``,
    but the task batch and its order (a PointGoal run would otherwise use the defaults)."""
    from metabench.harness.algorithms import get_algorithm

    values: dict[str, Any] = {}
    for setting in get_algorithm(algorithm).settings_for(benchmark):
        values.update(setting.values)
    skipped = {"meta_batch_size", "train_task_order"}
    return [
        f"--set={key}={json.dumps(value)}" for key, value in values.items() if key not in skipped
    ]


def numbers(value: Any, path: str = "", ignore: frozenset[str] = frozenset()) -> dict[str, float]:
    """Every number under ``value`` by its path, without wall times and keys in ``ignore``: what
    an unchanged result keeps, while fields that only describe the run (versions, commands) may
    be added. ``ignore`` leaves out fields a change adds, to compare with the runs before it."""
    if isinstance(value, dict):
        found: dict[str, float] = {}
        for key, item in value.items():
            if key in ignore or "time" in key or (path == "" and key not in SECTIONS):
                continue
            found.update(numbers(item, f"{path}/{key}", ignore))
        return found
    if isinstance(value, list):
        return {
            k: v
            for i, item in enumerate(value)
            for k, v in numbers(item, f"{path}/{i}", ignore).items()
        }
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {path: value}
    return {}


def fingerprint(
    algorithm: str,
    benchmark: str,
    steps: int,
    extra: list[str],
    root: Path,
    ignore: frozenset[str],
    code: Path | None = None,
) -> str:
    """The sha256 of one tiny run's numbers (trained with the metabench in ``code`` if given)."""
    out = root / algorithm
    command = [
        sys.executable, "-m", "metabench.cli", "train", "--benchmark", benchmark,
        "--algorithm", algorithm, "--seed", "3", "--steps", str(steps), "--cpus", "1",
        "--out", str(out), *extra,
    ]  # fmt: skip
    env, cwd = None, None
    if code is not None:  # run in it too: ``python -m`` puts the working directory first
        cwd = code.resolve()
        paths = [str(cwd), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env, cwd=cwd)
    record = read_result(out / "result.json").to_json()
    for section in ("metatest", "train_evaluation"):
        if record[section] is not None:
            record[section]["version"] = HASHED_VERSION
    payload = json.dumps(numbers(record, ignore=ignore), sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=16_000, help="budget of each run")
    parser.add_argument(
        "--benchmark", default="PointGoal", help="the runs' benchmark (CEM, CMA-ES: HalfCheetahVel)"
    )
    parser.add_argument(
        "--ignore", nargs="+", default=[], metavar="KEY",
        help="leave out the numbers under these keys (fields a change adds)",
    )  # fmt: skip
    parser.add_argument(
        "--code", type=Path, metavar="DIR",
        help="train with the metabench checkout in DIR (the hashing stays this script's)",
    )  # fmt: skip
    parser.add_argument("algorithms", nargs="*", default=list(ALGORITHMS))
    args = parser.parse_args()
    ignore = frozenset(args.ignore)
    with tempfile.TemporaryDirectory() as root:
        for algorithm in args.algorithms:
            extra = ALGORITHMS[algorithm]
            if algorithm in META_WORLD_ONLY:
                extra = [*meta_world_settings(algorithm, META_WORLD_ONLY[algorithm]), *extra]
            digest = fingerprint(
                algorithm, args.benchmark, args.steps, extra, Path(root), ignore, args.code
            )
            print(f"{algorithm:16s} {digest}", flush=True)


if __name__ == "__main__":
    main()
