"""A run's configuration (``config.json``) and its result (``result.json``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from metabench.records.metatest import MetaTestRecord
from metabench.records.migrations import VERSION, migrate

__all__ = ["Protocol", "RunConfig", "RunResult"]


@dataclass(frozen=True)
class Protocol:
    """The meta-test's protocol: episodes before and after adaptation, and whether its test
    tasks are stepped together (:mod:`metabench.evaluation.batched`)."""

    exploration_episodes: int
    test_episodes: int
    batched: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "exploration_episodes": self.exploration_episodes,
            "test_episodes": self.test_episodes,
            "batched": self.batched,
        }


@dataclass(frozen=True)
class RunConfig:
    """The resolved configuration of a run: what a resumed run must match, and what
    ``metabench evaluate`` rebuilds it from.

    :param test_tasks: the held-out tasks, in JSON form
        (:func:`~metabench.evaluation.task_from_json`).
    :param periodic_test_tasks: indices of the test tasks the meta-tests during training run
        (``None``: all of them).
    :param train_evaluation_tasks: the training tasks of the meta-test on training tasks after
        training, in JSON form (``None``: the benchmark has none).
    :param cpus: the cores the run may use (``None``: no bound).
    :param device: where the networks act and train, as ``auto`` resolved it.
    :param algorithm_spec: where a third-party algorithm's code came from (``None``: one of
        metabench's own).
    """

    benchmark: str
    benchmark_source: str
    env_id: str
    env_kwargs: dict[str, Any]
    algorithm: str
    hyperparameters: dict[str, Any]
    hyperparameter_sources: list[str]
    seed: int
    env_steps_budget: int
    protocol: Protocol
    test_tasks: tuple[Any, ...]
    periodic_test_tasks: tuple[int, ...] | None = None
    train_evaluation_tasks: tuple[Any, ...] | None = None
    cpus: int | None = None
    device: str = "cpu"
    algorithm_spec: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """Every field, and the version."""
        periodic, train = self.periodic_test_tasks, self.train_evaluation_tasks
        return {
            "version": VERSION,
            "benchmark": self.benchmark,
            "benchmark_source": self.benchmark_source,
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "algorithm": self.algorithm,
            "hyperparameters": self.hyperparameters,
            "hyperparameter_sources": self.hyperparameter_sources,
            "seed": self.seed,
            "env_steps_budget": self.env_steps_budget,
            "protocol": self.protocol.to_json(),
            "test_tasks": list(self.test_tasks),
            "periodic_test_tasks": None if periodic is None else list(periodic),
            "train_evaluation_tasks": None if train is None else list(train),
            "cpus": self.cpus,
            "device": self.device,
            "algorithm_spec": self.algorithm_spec,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunConfig:
        """Read a stored configuration of any version (:func:`~metabench.records.migrate`).

        :raises ValueError: for a file that is not a run configuration (or ``KeyError`` and
            ``TypeError``, for a missing or mistyped field).
        :raises RecordVersionError: for a version this metabench cannot read.
        """
        config = migrate(data, "config")
        protocol, periodic = config["protocol"], config["periodic_test_tasks"]
        train, cpus = config["train_evaluation_tasks"], config["cpus"]
        return cls(
            benchmark=str(config["benchmark"]),
            benchmark_source=config["benchmark_source"],
            env_id=str(config["env_id"]),
            env_kwargs=dict(config["env_kwargs"]),
            algorithm=str(config["algorithm"]),
            hyperparameters=dict(config["hyperparameters"]),
            hyperparameter_sources=config["hyperparameter_sources"],
            seed=int(config["seed"]),
            env_steps_budget=int(config["env_steps_budget"]),
            protocol=Protocol(
                exploration_episodes=int(protocol["exploration_episodes"]),
                test_episodes=int(protocol["test_episodes"]),
                batched=bool(protocol["batched"]),
            ),
            test_tasks=tuple(config["test_tasks"]),
            periodic_test_tasks=None if periodic is None else tuple(int(i) for i in periodic),
            train_evaluation_tasks=None if train is None else tuple(train),
            cpus=None if cpus is None else int(cpus),
            device=str(config["device"]),
            algorithm_spec=config["algorithm_spec"],
        )


@dataclass(frozen=True)
class RunResult:
    """A finished run (``result.json``).

    :param command: the command line that produced it (``None`` from Python).
    :param provenance: versions, git revision, host.
    :param wall_time_s: seconds of training and meta-test, over every resumed session.
    :param metatrain: the last iteration's meta-training numbers (``metatrain/...``).
    :param metatest: the final meta-test.
    :param metatest_protocol: what changes the meta-test's numbers, in one place
        (:func:`metabench.harness.run.metatest_protocol`; ``None``: recorded before it was).
    :param train_evaluation: (Meta-World) the same meta-test on training tasks, after training.
    :param env_steps: the steps the budget counts: the iterations' ``steps_per_iteration`` and
        the initial collection.
    :param env_steps_taken: the steps stepped, where the algorithm counts them apart because
        its episodes can end before the horizon at which ``env_steps`` counts them (MAML,
        PEARL: :attr:`~metabench.algos.base.MetaRLAlgorithm.env_steps_taken`). ``None``: exactly
        ``env_steps`` (the other algorithms), or not counted (recorded before version 5, or
        resumed from a checkpoint saved before).
    """

    config: RunConfig
    command: str | None
    provenance: dict[str, Any]
    iterations: int
    env_steps: int
    wall_time_s: float
    metatrain: dict[str, float]
    metatest: MetaTestRecord
    metatest_protocol: dict[str, Any] | None = None
    train_evaluation: MetaTestRecord | None = None
    env_steps_taken: int | None = None

    def to_json(self) -> dict[str, Any]:
        """Every field, and the version."""
        train = self.train_evaluation
        return {
            "version": VERSION,
            "config": self.config.to_json(),
            "command": self.command,
            "provenance": self.provenance,
            "iterations": self.iterations,
            "env_steps": self.env_steps,
            "env_steps_taken": self.env_steps_taken,
            "wall_time_s": self.wall_time_s,
            "metatrain": dict(self.metatrain),
            "metatest": self.metatest.to_json(),
            "metatest_protocol": self.metatest_protocol,
            "train_evaluation": None if train is None else train.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunResult:
        """Read a stored result of any version (:func:`~metabench.records.migrate`).

        :raises ValueError: for a file that is not a run's result (or ``KeyError`` and
            ``TypeError``, for a missing or mistyped field).
        :raises RecordVersionError: for a version this metabench cannot read.
        """
        result = migrate(data, "result")
        train, taken = result["train_evaluation"], result["env_steps_taken"]
        return cls(
            config=RunConfig.from_json(result["config"]),
            command=result["command"],
            provenance=dict(result["provenance"]),
            iterations=int(result["iterations"]),
            env_steps=int(result["env_steps"]),
            env_steps_taken=None if taken is None else int(taken),
            wall_time_s=float(result["wall_time_s"]),
            metatrain={str(k): v for k, v in result["metatrain"].items()},
            metatest=MetaTestRecord.from_json(result["metatest"]),
            metatest_protocol=result["metatest_protocol"],
            train_evaluation=None if train is None else MetaTestRecord.from_json(train),
        )
