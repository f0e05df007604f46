"""One meta-training run in one directory, resumable after any interruption.

A run directory holds::

    config.json         the resolved configuration (:class:`~metabench.records.RunConfig`:
                        benchmark, algorithm, hyperparameters, seed, budget, meta-test protocol,
                        test tasks): a re-run with another configuration is refused; one written
                        by an earlier version is read through the records' migrations
    checkpoint.pt       the latest checkpoint (algorithm state, iteration, wall time), replaced
                        atomically every ``checkpoint_every`` iterations, while the run goes
    agent.pt            once the run has finished, the trained agent in place of the checkpoint:
                        what meta-testing needs (weights and random states), without the
                        optimiser state, buffers and networks only training reads
    tensorboard/        meta-train and meta-test curves
    evaluations/        a meta-test result at each point of ``eval_schedule`` (on the subset of the
                        test tasks that ``[evaluation] periodic_test_tasks`` asks for, if any)
    result.json         the final result with its provenance

Every file is written atomically, so killing the process (even with SIGKILL) leaves either the
previous version or the new one. Running the same command again resumes from the checkpoint.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pickle
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from metabench.algos.base import MetaRLAlgorithm
from metabench.algos.run_envs import RunEnvs
from metabench.analysis.resultfile import CorruptResultError, read_result
from metabench.atomic import atomic_write_bytes, atomic_write_json, make_writable_folder
from metabench.devices import resolve_device
from metabench.errors import RunError
from metabench.evaluation import MetaEvaluator, task_from_json, task_to_json
from metabench.harness.algorithms import get_algorithm, load_algorithms
from metabench.harness.benchmarks import BenchmarkSpec, get_benchmark
from metabench.harness.provenance import (
    algorithm_record,
    command_environment,
    how_to_make_known,
    portable_path,
    work_tree_root,
)
from metabench.harness.schedule import MetaTestSchedule
from metabench.memory import retain_freed_memory
from metabench.records import Protocol, RecordVersionError, RunConfig, RunResult
from metabench.records.migrations import renamed_options
from metabench.tasks.base import Task
from metabench.validation import check_count

CHECKPOINT_FORMAT = 2
"""Format 2: tensors and plain values only, read with ``torch.load(weights_only=True)`` so that
loading a checkpoint can run no code (format 1 held NumPy arrays and was unpickled in full)."""


AGENT_FORMAT = 1
"""``agent.pt``: ``{"format", "iteration", "algorithm"}``, the last being the algorithm's
:meth:`~metabench.algos.base.MetaRLAlgorithm.agent_state`; read like a checkpoint, with
``torch.load(weights_only=True)``."""


CONFIG_REQUIRED = ("benchmark", "algorithm", "hyperparameters", "seed")
"""What ``config.json`` must hold for ``metabench evaluate`` to rebuild the run."""


NEW_RUN_FILES = frozenset({"evaluations", "tensorboard", ".lock", "train.log", "error.json"})
"""What a run directory may hold before its ``config.json``: the folders :meth:`RunDirectory.create`
makes, its lock, and a grid cell's log and error record (written before its run starts)."""


@dataclass
class RunSettings:
    """What ``metabench train`` was asked for."""

    benchmark: str
    algorithm: str
    seed: int
    env_steps: int
    out: Path
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    eval_schedule: MetaTestSchedule = field(default_factory=MetaTestSchedule)
    """When it meta-tests during training (``--eval-every``, ``--eval-every-steps``)."""
    checkpoint_every: int = 10
    command: str | None = None
    """The command line that started the run, recorded in ``result.json`` for reproduction."""
    cpus: int | None = None
    """Cores the run may use: bounds its worker processes and torch threads (``None``: no bound).
    Recorded in ``config.json``, since thread counts can change the numbers."""
    device: str = "cpu"
    """Where the algorithm's networks act and train: ``auto``, ``cpu`` or ``cuda``
    (:mod:`metabench.devices`), recorded in ``config.json`` as the device ``auto`` resolved to
    (for an algorithm that takes a device; the CPU for the others)."""


class RunDirectory:
    """The files of one run (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.config_path = self.path / "config.json"
        self.checkpoint_path = self.path / "checkpoint.pt"
        self.agent_path = self.path / "agent.pt"
        self.final_checkpoint_path = self.path / "final-checkpoint.pt"
        """A finished run's last checkpoint, kept beside its agent so that a larger ``--steps``
        can extend it (``.gitignore`` leaves it out of the repository: agents ship)."""
        self.result_path = self.path / "result.json"
        self.corrupt_path = self.path / "result.json.corrupt"
        self.set_aside = False
        """Whether :meth:`completed_result` moved a corrupt result to :attr:`corrupt_path`."""
        self.evaluations = self.path / "evaluations"
        self.tensorboard = self.path / "tensorboard"

    def create(self) -> None:
        """Make the directory, or raise :class:`RunError` if it cannot be written or holds files
        that are not a run's (a folder of the user's)."""
        make_writable_folder(self.path, "--out")
        if not self.config_path.exists():
            foreign = sorted(p.name for p in self.path.iterdir() if p.name not in NEW_RUN_FILES)
            if foreign:
                raise RunError(
                    f"--out {self.path} is not empty ({', '.join(foreign[:3])}"
                    f"{', ...' if len(foreign) > 3 else ''}) and is not a metabench run "
                    f"directory: choose a new or empty folder"
                )
        for folder in (self.evaluations, self.tensorboard):  # written later, by other code
            make_writable_folder(folder, "--out")

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the directory's lock (``.lock``) for the block: a second process training into
        it at the same time gets a :class:`RunError` instead of racing this one. The operating
        system releases the lock when the process ends, however it ends."""
        with (self.path / ".lock").open("a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise RunError(
                    f"{self.path} is in use by a metabench run ({holder}): wait for it to end, "
                    f"or choose another --out"
                ) from None
            try:
                handle.seek(0)
                handle.truncate()
                handle.write(f"pid {os.getpid()}")
                handle.flush()
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def read_config(self) -> RunConfig | None:
        """The run's ``config.json`` (an earlier version's read through the records'
        migrations, the file left as it is), ``None`` if there is none; :class:`RunError` if it
        is not a run configuration."""
        if not self.config_path.exists():
            return None
        try:
            config = json.loads(self.config_path.read_text())
        except (OSError, ValueError) as error:
            raise RunError(
                f"{self.config_path} is unreadable ({error}): delete {self.path} to start over"
            ) from None
        missing = [
            key for key in CONFIG_REQUIRED if not isinstance(config, dict) or key not in config
        ]
        if missing:
            what = (
                "lacks " + ", ".join(missing)
                if isinstance(config, dict)
                else "is not a JSON object"
            )
            raise RunError(
                f"{self.config_path} {what}: it is not a metabench run configuration; delete "
                f"{self.path} to start over"
            )
        try:
            return RunConfig.from_json(config)
        except RecordVersionError as error:
            raise RunError(f"{self.config_path}: {error}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise RunError(
                f"{self.config_path} is not a metabench run configuration ({error!r}): delete "
                f"{self.path} to start over"
            ) from None

    def completed_result(self) -> RunResult | None:
        """The run's result, or ``None`` when it has none yet.

        A truncated or corrupt ``result.json`` is moved aside to :attr:`corrupt_path` (which the
        caller reports) and ``None`` returned, so the run finishes again (from its last
        checkpoint) instead of the damaged file being used.
        """
        if not self.result_path.exists():
            return None
        try:
            return read_result(self.result_path)
        except CorruptResultError:
            self.result_path.replace(self.corrupt_path)
            self.set_aside = True
            return None

    def claim(self, config: RunConfig) -> str | None:
        """Write ``config``, or check it equals the one already there (a resumed run), read
        through the records' migrations: a run started by an earlier version is the same run,
        and its file is left as it is. A ``config`` that differs only in a larger budget
        extends the run (:meth:`_extend`); what that did is returned, to be said."""
        existing = self.read_config()
        if existing is None:
            if self.checkpoint_path.exists():
                raise RunError(
                    f"{self.path} holds a checkpoint but no config.json: it is not a metabench "
                    f"run directory; choose another --out"
                )
            atomic_write_json(self.config_path, config.to_json())
            return None
        if existing != config:
            new, old = config.to_json(), existing.to_json()
            differing = sorted(k for k in new if new[k] != old[k])
            budget, recorded = config.env_steps_budget, existing.env_steps_budget
            if differing == ["env_steps_budget"] and budget > recorded:
                return self._extend(config, recorded)
            if set(differing) <= SPEC_FILE_KEYS:
                raise RunError(
                    f"{self.path} was started with other spec files (differs in: "
                    f"{', '.join(differing)}; its hyperparameters and tasks are the same): "
                    f"restore the files as they were to resume it, or choose another --out"
                )
            raise RunError(
                f"{self.path} holds a different run (differs in: {', '.join(differing)}): "
                f"choose another --out, or delete the directory to start over"
            )
        return None

    def _extend(self, config: RunConfig, recorded: int) -> str:
        """Raise the budget of the run to ``config``'s: a finished run gets its last
        checkpoint back and its result set aside as ``result-<env steps>-steps.json``, then
        ``config.json`` takes the new budget, and training goes on from that checkpoint. Each
        step leaves files that the same command, run again after a kill, takes up."""
        budget = config.env_steps_budget
        said = f"Extending {self.path} from --steps {recorded} to {budget}"
        result = self.completed_result()
        if result is not None:
            if not self.checkpoint_path.exists():
                if not self.final_checkpoint_path.exists():
                    raise RunError(
                        f"{self.path} finished at --steps {recorded} and cannot be extended: it "
                        f"holds its trained agent but not its training state "
                        f"({self.final_checkpoint_path.name}, which a clone does not have); "
                        f"train --steps {budget} into another --out"
                    )
                self.final_checkpoint_path.replace(self.checkpoint_path)
            aside = self.path / f"result-{result.env_steps}-steps.json"
            self.result_path.replace(aside)
            said += f"; its result at {result.env_steps} env steps is now {aside}"
        atomic_write_json(self.config_path, config.to_json())
        return said

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The checkpoint, ``None`` if there is none, :class:`RunError` if it is corrupt or not
        of the current format.

        Only tensors and plain values are read (``weights_only=True``): a file that would
        construct any other object is refused without running it, since anyone who can write
        a run directory (a shared ``--results`` folder, a repository's ``results/``) could
        otherwise run code as the next user who resumes or evaluates it.
        """
        return self._current_names(
            _load_weights_only(
                self.checkpoint_path,
                CHECKPOINT_FORMAT,
                "checkpoint",
                "delete it to restart the run from the beginning",
            )
        )

    def load_agent(self) -> dict[str, Any] | None:
        """The finished run's trained agent (``agent.pt``), read as :meth:`load_checkpoint`
        reads a checkpoint; ``None`` if there is none."""
        return self._current_names(
            _load_weights_only(
                self.agent_path,
                AGENT_FORMAT,
                "trained agent",
                "train the run again into a new --out (its command is in result.json)",
            )
        )

    def _current_names(self, state: dict[str, Any] | None) -> dict[str, Any] | None:
        """``state`` with the hyperparameters a built-in algorithm's checkpoints and agents
        record (``["algorithm"]["config"]``, which they must match to load) under the names
        the run's config record reads with (:func:`~metabench.records.migrations.renamed_options`):
        neither file records a version."""
        config = self.read_config()
        recorded = None if state is None else state.get("algorithm", {}).get("config")
        if config is None or config.algorithm_spec is not None or not isinstance(recorded, dict):
            return state
        assert state is not None
        return {**state, "algorithm": {**state["algorithm"], "config": renamed_options(recorded)}}

    def keep_agent(self, algorithm: MetaRLAlgorithm) -> bool:
        """Give a finished run its trained agent (``agent.pt``): the
        :meth:`~metabench.algos.base.MetaRLAlgorithm.agent_state` of the checkpoint's state,
        a fraction of its size, which is what a run committed to a repository ships. The
        checkpoint becomes :attr:`final_checkpoint_path`, which the repository leaves out and a
        larger ``--steps`` extends the run from. Returns whether there was a checkpoint.

        The agent is written before the checkpoint is moved: a process killed in between
        leaves both, and the next call does the same again.
        """
        state = self.load_checkpoint()
        if state is None:
            return False
        agent = {
            "format": AGENT_FORMAT,
            "iteration": state["iteration"],
            "algorithm": algorithm.agent_state(state["algorithm"]),
        }
        buffer = io.BytesIO()
        torch.save(agent, buffer)
        atomic_write_bytes(self.agent_path, buffer.getvalue())
        self.checkpoint_path.replace(self.final_checkpoint_path)
        return True

    def save_checkpoint(self, state: dict[str, Any], algorithm: str = "the algorithm") -> None:
        """Write ``state`` (``algorithm``: the algorithm's ``state_dict()``), once it is known
        that :meth:`load_checkpoint` can read it back.

        :param algorithm: the algorithm's class name, for the error.
        :raises RunError: naming the entry of ``state_dict()`` that a checkpoint cannot hold.
        """
        data = _weights_only_bytes({"format": CHECKPOINT_FORMAT, **state})
        if data is None:
            where, value = _unreadable(state["algorithm"], f"{algorithm}.state_dict()")
            kind = type(value)
            raise RunError(
                f"{where} is a {kind.__module__}.{kind.__qualname__}, which a checkpoint cannot "
                f"hold: checkpoints hold only tensors and plain values (numbers, strings, bools, "
                f"None, and lists, tuples and dicts of them) so that loading one runs no code; "
                f"convert it in state_dict() (torch.as_tensor, .tolist(), int) and back in "
                f"load_state_dict()"
            )
        atomic_write_bytes(self.checkpoint_path, data)


def _load_weights_only(path: Path, format: int, what: str, fix: str) -> dict[str, Any] | None:
    """The ``format`` file at ``path`` (a checkpoint or an agent, ``what``), ``None`` if there
    is none; :class:`RunError` ending with ``fix`` if it is damaged, of another format, or holds
    anything but tensors and plain values (refused without running it)."""
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"GLOBAL ([\w.]+)", str(error))
        objects = f" ({found.group(1)})" if found else ""
        raise RunError(
            f"{what} {path} holds objects other than tensors and plain values{objects}, so it "
            f"was not loaded: it was written by an older metabench, by an algorithm whose "
            f"state_dict() held such objects, or is not a metabench {what}; {fix}"
        ) from None
    except Exception as error:  # torch raises many kinds on a damaged file
        raise RunError(f"{what} {path} is corrupt ({type(error).__name__}): {fix}") from None
    if not isinstance(state, dict) or state.get("format") != format:
        raise RunError(f"{what} {path} is not a metabench {what} of format {format}: {fix}")
    return state


def _weights_only_bytes(value: Any) -> bytes | None:
    """``value`` saved by ``torch.save``, or ``None`` if ``torch.load(weights_only=True)`` (what
    :meth:`RunDirectory.load_checkpoint` uses) cannot read it back."""
    buffer = io.BytesIO()
    try:
        torch.save(value, buffer)
        torch.load(io.BytesIO(buffer.getvalue()), map_location="cpu", weights_only=True)
    except Exception:  # pickling errors of every kind, and the weights-only refusal
        return None
    return buffer.getvalue()


def _unreadable(value: Any, where: str) -> tuple[str, Any]:
    """The innermost entry of ``value`` (and its place, ``where[...]``) that a checkpoint cannot
    hold; ``value`` itself when none of its entries is to blame."""
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
        for key, _ in items:
            if _weights_only_bytes(key) is None:
                return f"a key of {where}", key
    else:
        items = list(enumerate(value)) if isinstance(value, (list, tuple)) else []
    for key, item in items:
        if _weights_only_bytes(item) is None:
            return _unreadable(item, f"{where}[{key!r}]")
    return where, value


@dataclass(frozen=True)
class RunPlan:
    """A run resolved once, before anything is built or written: what the loop consumes.

    :param spec: the benchmark.
    :param config: the full configuration, as ``config.json`` holds it.
    :param test_tasks: the held-out tasks (``config.test_tasks`` before JSON).
    :param run: the run directory.
    """

    spec: BenchmarkSpec
    config: RunConfig
    test_tasks: tuple[Task, ...]
    run: RunDirectory

    def evaluator(
        self,
        test_tasks: Sequence[Task] | None = None,
        exploration_episodes: int | None = None,
        test_episodes: int | None = None,
    ) -> MetaEvaluator:
        """The meta-test of this run: its test tasks (or ``test_tasks``), with its recorded
        protocol unless the episode counts change it."""
        protocol = self.config.protocol
        return make_evaluator(
            self.spec,
            self.config.seed,
            test_tasks=self.test_tasks if test_tasks is None else test_tasks,
            exploration_episodes=(
                protocol.exploration_episodes
                if exploration_episodes is None
                else exploration_episodes
            ),
            test_episodes=protocol.test_episodes if test_episodes is None else test_episodes,
        )

    def periodic_evaluator(self) -> MetaEvaluator:
        """The meta-test during training: :meth:`evaluator`, or the same protocol on the subset
        of the test tasks recorded as ``config.periodic_test_tasks`` (their indices)."""
        tasks = self.periodic_test_tasks
        return self.evaluator() if tasks is None else self.evaluator(tasks)

    @property
    def periodic_test_tasks(self) -> list[Task] | None:
        """The test tasks at ``config.periodic_test_tasks``; ``None`` where the meta-tests
        during training use them all."""
        indices = self.config.periodic_test_tasks
        return None if indices is None else [self.test_tasks[index] for index in indices]

    def train_evaluator(self) -> MetaEvaluator | None:
        """The meta-test on training tasks after training (``None`` if the benchmark has none):
        the benchmark's protocol on its recorded training tasks, in the training split."""
        tasks = self.config.train_evaluation_tasks
        if not tasks:
            return None
        seed = self.config.seed
        return MetaEvaluator(
            lambda: self.spec.make_train_env(seed),
            [task_from_json(task) for task in tasks],
            self.spec.exploration_episodes,
            self.spec.test_episodes,
            seed=seed,
        )

    @property
    def metatest_processes(self) -> int | None:
        """See :func:`metatest_processes`."""
        return metatest_processes(self.config)


def metatest_processes(config: RunConfig) -> int | None:
    """The ``processes`` of a run's meta-test (``MetaEvaluator.evaluate``): ``None`` (one task
    at a time) unless its protocol is batched, then the run's ``cpus`` (default: every core).
    The number of processes never changes the numbers."""
    if not config.protocol.batched:
        return None
    return config.cpus or os.cpu_count() or 1


def plan_run(settings: RunSettings) -> RunPlan:
    """Resolve ``settings`` once (raises ``KeyError`` or ``ValueError`` for unknown names and
    bad hyperparameters; nothing is built or written)."""
    spec, config, test_tasks = _resolve(settings)
    return RunPlan(spec, config, tuple(test_tasks), RunDirectory(settings.out))


def resolve(settings: RunSettings) -> tuple[BenchmarkSpec, RunConfig]:
    """The benchmark and the full configuration a run records (raises ``KeyError`` or
    ``ValueError`` for unknown names and bad hyperparameters)."""
    spec, config, _ = _resolve(settings)
    return spec, config


def _resolve(settings: RunSettings) -> tuple[BenchmarkSpec, RunConfig, list[Task]]:
    entry = get_algorithm(settings.algorithm)
    spec = benchmark_for(settings.benchmark, settings.algorithm)
    hyperparameters = entry.hyperparameters(spec, settings.hyperparameters)
    test_tasks = spec.test_tasks(settings.seed)
    if settings.cpus is not None:
        check_count("--cpus", settings.cpus)
        threads = hyperparameters.get("update_threads", 1)
        if threads > settings.cpus:
            raise RunError(
                f"update_threads = {threads} (torch threads of the gradient steps) exceeds --cpus "
                f"{settings.cpus}, the run's cores: raise --cpus, or lower update_threads"
            )
    device = resolve_device(settings.device)
    periodic = spec.periodic_test_indices(settings.seed, test_tasks)
    train_tasks = spec.train_evaluation_tasks(settings.seed)
    config = RunConfig(
        benchmark=spec.name,
        benchmark_source=spec.source,
        env_id=spec.env_id,
        env_kwargs=spec.train_env_kwargs(settings.seed),
        algorithm=entry.name,
        hyperparameters=hyperparameters,
        hyperparameter_sources=entry.sources(spec.name),
        seed=settings.seed,
        env_steps_budget=settings.env_steps,
        protocol=Protocol(spec.exploration_episodes, spec.test_episodes, spec.batched_metatest),
        test_tasks=tuple(task_to_json(task) for task in test_tasks),
        periodic_test_tasks=None if periodic is None else tuple(periodic),
        train_evaluation_tasks=(
            tuple(task_to_json(task) for task in train_tasks) if train_tasks else None
        ),
        cpus=settings.cpus,
        device=str(device) if entry.takes_device else "cpu",
        algorithm_spec=algorithm_record(entry),  # a third-party algorithm: where its code came from
    )
    # as config.json will read back
    return spec, RunConfig.from_json(json.loads(json.dumps(config.to_json()))), test_tasks


def recorded_command(argv: Sequence[str], benchmark: str, algorithm: str, out: str | Path) -> str:
    """The command line of ``metabench argv`` that reproduces a run in a plain shell
    (``env -i bash``), run from the root of the git work tree that holds the run directory
    ``out``: the Python that runs it (``python -m metabench``, so no ``PATH`` is needed), with
    ``METABENCH_SPECS=...`` (and ``PYTHONPATH=...``) in front when the run needs them; paths
    relative to that root (a run kept in a repository resumes from any clone), or absolute
    where no work tree holds the run or the path is outside it; each word quoted for the shell.
    """
    root = work_tree_root(Path(out))
    entry = get_algorithm(algorithm)
    environment = command_environment(get_benchmark(benchmark).path, entry, root)
    python = portable_path(Path(sys.executable), root)
    words = with_out(argv, portable_path(Path(out), root))
    return " ".join([*environment, shlex.join([python, "-m", "metabench", *words])])


def with_out(argv: Sequence[str], out: str) -> list[str]:
    """``argv`` with the value of its ``--out`` option (``--out X`` or ``--out=X``) replaced by
    ``out``, or ``--out out`` added where it has none (the run's default folder)."""
    words = list(argv)
    for index, word in enumerate(words):
        if word == "--out" and index + 1 < len(words):
            words[index + 1] = out
            return words
        if word.startswith("--out="):
            words[index] = f"--out={out}"
            return words
    return [*words, "--out", out]


def check_algorithm_known(config: RunConfig) -> None:
    """Raise :class:`RunError` when the third-party algorithm a run recorded (``config.json``'s
    ``algorithm_spec``) is not known here, saying what it was trained with and how to make it
    known. Runs of an unknown algorithm without that record are left to the look-up's error."""
    record = config.algorithm_spec
    if record is None or config.algorithm in load_algorithms():
        return
    raise RunError(
        f"algorithm {config.algorithm!r} of this run is not known: it was trained with "
        f"{record['spec_file']} (sha256 {record['spec_sha256']}), implemented by "
        f"{record['entry_point']}; to evaluate it, {how_to_make_known(record)}"
    )


SPEC_FILE_KEYS = frozenset({"algorithm_spec", "hyperparameter_sources", "benchmark_source"})
"""The keys of a run's config that its spec files' text gives besides its settings: a
``source`` or a plug-in spec file's sha256 changed by an edit that left the settings alone."""


def benchmark_for(benchmark: str, algorithm: str) -> BenchmarkSpec:
    """The benchmark as ``algorithm`` runs it: with the task env kwargs its baseline file adds
    (e.g. garage's action normalisation for MAML on HalfCheetah), for training and meta-test."""
    spec = get_benchmark(benchmark)
    return spec.with_env_kwargs(get_algorithm(algorithm).env_kwargs(spec))


def metatest_protocol(
    spec: BenchmarkSpec, algo: MetaRLAlgorithm, evaluator: MetaEvaluator, run_test_tasks: int
) -> dict[str, Any]:
    """What changes the numbers of a meta-test besides the algorithm's parameters, in one
    record of every result: how many test tasks (of the run's ``run_test_tasks``; fewer for a
    periodic meta-test), the episodes, whether test episodes act with the mode, and for
    a split of its family's, what it records (Meta-World's: the version, benchmark, reward
    function and goals per test class).

    :param evaluator: the meta-test, after it ran (its task env is read).
    """
    record: dict[str, Any] = {
        "n_test_tasks": len(evaluator.test_tasks),
        "n_run_test_tasks": run_test_tasks,
        "exploration_episodes": evaluator.exploration_episodes,
        "test_episodes": evaluator.test_episodes,
        "deterministic_test": algo.deterministic_test,
    }
    split_record = spec.split.record(evaluator.task_env.unwrapped)
    if split_record is not None:
        record[spec.split.kind] = split_record
    return record


RUN_TORCH_THREADS = 1
"""The torch threads of every run (see :func:`build_algorithm`), recorded in its provenance."""


def build_algorithm(spec: BenchmarkSpec, config: RunConfig, log_dir: str | None) -> MetaRLAlgorithm:
    entry = get_algorithm(config.algorithm)
    # One torch thread, whatever the machine or OMP_NUM_THREADS: thread counts can change the
    # last bits of the numbers, and a recorded command must reproduce them in any shell. Runs
    # use their cores through env worker processes (`cpus`), which never change the numbers.
    torch.set_num_threads(RUN_TORCH_THREADS)
    retain_freed_memory()  # before the env workers fork, which inherit it
    envs = RunEnvs(spec, config.seed, processes=config.cpus)
    return entry.build(envs, config.hyperparameters, log_dir, device=config.device)


def make_evaluator(
    spec: BenchmarkSpec,
    seed: int,
    *,
    test_tasks: Sequence[Task] | None = None,
    exploration_episodes: int | None = None,
    test_episodes: int | None = None,
) -> MetaEvaluator:
    """The meta-test of a run of ``spec`` seeded ``seed``: ``test_tasks`` (default: the
    benchmark's for the seed), with the benchmark's protocol unless the episode counts change
    it."""
    return MetaEvaluator(
        lambda: spec.make_test_env(seed),
        spec.test_tasks(seed) if test_tasks is None else list(test_tasks),
        spec.exploration_episodes if exploration_episodes is None else exploration_episodes,
        spec.test_episodes if test_episodes is None else test_episodes,
        seed=seed,
        metaworld_envs_per_class=spec.metaworld_envs_per_class,
    )
