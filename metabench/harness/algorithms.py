"""Algorithms by name: ``baselines/*.toml`` (settings, sources, profiles), each naming the
:class:`~metabench.algos.implementation.Implementation` that builds it in its ``entry_point``.

A run's hyperparameters are, in order: the defaults of the implementation's config dataclass on
the benchmark, then the baseline file's ``[defaults]`` table, then each
``[benchmarks.<name or glob>]`` table of the file that matches the benchmark, then the overrides
of the run (``--set``, or a grid profile's ``set``). Every one ends up in the run's
``config.json`` with the sources it came from; an unknown name at any layer is an error.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import importlib
import reprlib
from dataclasses import dataclass, field
from typing import Any

from metabench.algos.base import MetaRLAlgorithm
from metabench.algos.implementation import Implementation
from metabench.algos.run_envs import RunEnvs
from metabench.harness.benchmarks import (
    BenchmarkSpec,
    env_kwargs_accepted,
    load_benchmarks,
)
from metabench.harness.plugins import check_algorithm, check_implementation, import_error
from metabench.harness.specfiles import (
    SHIPPED,
    SpecError,
    SpecFile,
    SpecOrigin,
    check_table,
    find_line,
    read_specs,
    unknown_name_message,
)
from metabench.validation import Layer, recorded_config, resolve_config

BASELINE_SCHEMA = {
    "description": str, "entry_point": str, "source": str, "cpus": int,
    "defaults": dict, "benchmarks": dict, "profiles": dict, "train_steps": dict,
}  # fmt: skip
DEFAULT_TRAIN_STEPS = 1_000_000
"""``metabench train``'s budget when neither ``--steps`` nor the baseline file's
``[train_steps]`` gives one."""
PROFILE_SCHEMA = {"source": str, "steps": int, "set": dict, "benchmarks": dict}
PROFILE_BENCHMARK_SCHEMA = {"source": str, "steps": int, "set": dict}


@dataclass(frozen=True)
class Setting:
    """Hyperparameters (or a budget) from one table of a baseline file, with their source."""

    where: str
    source: str
    values: dict[str, Any] = field(default_factory=dict)
    steps: int | None = None
    places: dict[str, str] = field(default_factory=dict)
    """``file:line`` of each value, for errors."""
    env: dict[str, Any] = field(default_factory=dict)
    """Task env kwargs the algorithm's published setup adds on the benchmark (``env = {...}``)."""
    cpus: int | None = None
    """Cores a run on the benchmark uses, when they differ from the file's ``cpus``."""


@dataclass(frozen=True)
class ProfileSettings:
    """What a grid profile runs one algorithm on one benchmark with."""

    steps: int
    overrides: dict[str, Any]
    sources: tuple[str, ...]
    places: dict[str, str] = field(default_factory=dict)
    """``file:line`` of each override, for errors."""


@dataclass(frozen=True)
class AlgorithmEntry:
    """An algorithm the CLI and the harness can build: one ``baselines/*.toml`` file."""

    name: str
    description: str
    source: str
    entry_point: str
    cpus: int
    path: str
    benchmarks: tuple[tuple[str, Setting], ...] = ()
    """``(benchmark name or glob, setting)`` in file order; every match applies, later wins."""
    profiles: tuple[tuple[str, Setting, tuple[tuple[str, Setting], ...]], ...] = ()
    """``(profile, setting, per-benchmark settings)``."""
    origin: SpecOrigin = SHIPPED
    """Where the spec file was found (shipped, ``METABENCH_SPECS``, an entry point)."""
    sha256: str = ""
    """The spec file's sha256, recorded with the runs of a third-party algorithm."""
    defaults: Setting | None = None
    """The file's ``[defaults]`` table: hyperparameters on every benchmark, from its ``source``
    (what makes MAML MAML-PPO)."""
    train_steps: tuple[tuple[str, int], ...] = ()
    """``(benchmark name or glob, budget)`` of the file's ``[train_steps]``, in file order:
    ``metabench train``'s budget where ``--steps`` is not given (later matches win)."""

    def default_steps(self, benchmark: str) -> int:
        """``metabench train``'s budget on ``benchmark`` without ``--steps``: the last matching
        entry of ``[train_steps]``, else :data:`DEFAULT_TRAIN_STEPS` (a toy's iterations can be
        a few steps each, or minutes each, so one number cannot fit every algorithm)."""
        matches = [steps for p, steps in self.train_steps if fnmatch.fnmatchcase(benchmark, p)]
        return matches[-1] if matches else DEFAULT_TRAIN_STEPS

    @property
    def implementation(self) -> Implementation:
        return load_implementation(self.entry_point, self.path)

    @property
    def module(self) -> str:
        """The module that holds the implementation (the part of ``entry_point`` before ``:``)."""
        return self.entry_point.partition(":")[0]

    def settings_for(self, benchmark: str) -> list[Setting]:
        """The ``[benchmarks.*]`` tables that apply to ``benchmark``, in file order."""
        return [s for pattern, s in self.benchmarks if fnmatch.fnmatchcase(benchmark, pattern)]

    def cpus_for(self, benchmark: str) -> int:
        """The cores a run on ``benchmark`` declares: the last matching table's ``cpus``, else
        the file's."""
        declared = [s.cpus for s in self.settings_for(benchmark) if s.cpus is not None]
        return declared[-1] if declared else self.cpus

    def env_kwargs(self, spec: BenchmarkSpec) -> dict[str, Any]:
        """The task env kwargs this algorithm adds on ``spec`` (its tables' ``env``).

        :raises SpecError: a kwarg the benchmark's task env does not take.
        """
        accepted = env_kwargs_accepted(spec.env_id)
        merged: dict[str, Any] = {}
        for setting in self.settings_for(spec.name):
            for key in setting.env:
                if accepted is not None and key not in accepted:
                    raise SpecError(
                        f"{setting.where}: env.{key} is not an argument of {spec.env_id}"
                    )
            merged.update(setting.env)
        return merged

    def untuned_note(self, benchmark: str) -> str | None:
        """One line saying that ``benchmark`` runs with the file's defaults because none of its
        ``[benchmarks.*]`` tables matches it, or ``None`` (a table matches, or the file has none:
        an algorithm without per-benchmark settings)."""
        if not self.benchmarks or self.settings_for(benchmark):
            return None
        tables = ", ".join(pattern for pattern, _ in self.benchmarks)
        settings = "the published settings" if self.origin.shipped else "its settings there"
        return (
            f"{self.name} has no settings for {benchmark} ({self.path} has [benchmarks.*] tables "
            f"for {tables} only): it runs with its defaults; add a [benchmarks.{benchmark}] table "
            f"with {settings} to tune it"
        )

    def sources(self, benchmark: str) -> list[str]:
        """Where the hyperparameters of a run on ``benchmark`` come from."""
        return [self.source, *(setting.source for setting in self.settings_for(benchmark))]

    def hyperparameters(
        self,
        spec: BenchmarkSpec,
        overrides: dict[str, Any],
        where: str = "--set",
        places: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Every hyperparameter of a run on ``spec``: defaults, the file's tables, ``overrides``
        (set at ``where``, or per name at ``places``), each checked where it was set.

        :raises ValueError: an unknown name or a bad value, saying where it was set.
        """
        implementation = self.implementation
        defaults = implementation.defaults(spec)
        layers = [Layer(defaults, f"{self.name}'s defaults")]
        if self.defaults is not None:
            layers.append(
                Layer(self.defaults.values, self.defaults.where, self.defaults.places, typed=True)
            )
        layers += [
            Layer(setting.values, setting.where, setting.places, typed=True)
            for setting in self.settings_for(spec.name)
        ]
        layers.append(Layer(overrides, where, places or {}))
        for layer in layers[1:]:
            unknown = sorted(set(layer.values) - set(defaults))
            if unknown:
                raise ValueError(
                    f"{layer.place(unknown[0])}: unknown hyperparameter(s) {', '.join(unknown)} "
                    f"of {self.name}; valid: {', '.join(sorted(defaults))}"
                )
        config = resolve_config(implementation.config, layers)
        if implementation.check_benchmark is not None:
            try:
                implementation.check_benchmark(spec, config)
            except ValueError as refusal:  # the contract's way to say what to change: its
                # message is the line to show, not a crash of the algorithm's code to trace
                raise refusal.with_traceback(None) from None
        return recorded_config(config)

    def build(
        self,
        envs: RunEnvs,
        hyperparameters: dict[str, Any],
        log_dir: str | None,
        device: str = "cpu",
    ) -> MetaRLAlgorithm:
        """The algorithm of a run, from the hyperparameters its ``config.json`` records: the one
        place a run's config object is made, so that what trains is what was recorded.

        :param envs: the run's environments: its benchmark, seed and cores.
        :raises SpecError: the algorithm breaks the plug-in contract
            (see :func:`metabench.harness.plugins.check_algorithm`).
        """
        implementation = self.implementation
        algo = implementation.algorithm.from_benchmark(
            envs,
            implementation.config(**hyperparameters),
            log_dir=log_dir,
            device=device if self.takes_device else "cpu",
        )
        return check_algorithm(algo, f"{self.path}: entry_point {self.entry_point!r}")

    @property
    def takes_device(self) -> bool:
        """Whether the algorithm puts networks on ``--device``
        (:attr:`~metabench.algos.base.MetaRLAlgorithm.uses_device`). The others (NOP, CEM,
        CMA-ES) run on the CPU whatever ``--device`` says."""
        return self.implementation.algorithm.uses_device

    def profile(self, name: str, benchmark: str) -> ProfileSettings:
        """The budget and overrides of profile ``name`` on ``benchmark``."""
        for profile, setting, per_benchmark in self.profiles:
            if profile == name:
                matches = [s for p, s in per_benchmark if fnmatch.fnmatchcase(benchmark, p)]
                steps, overrides = setting.steps, dict(setting.values)
                places = dict(setting.places)
                for match in matches:
                    steps = match.steps if match.steps is not None else steps
                    overrides.update(match.values)
                    places.update(match.places)
                if steps is None:
                    raise SpecError(f"{self.path}: [profiles.{name}] sets no steps for {benchmark}")
                sources = (setting.source, *(match.source for match in matches))
                return ProfileSettings(steps, overrides, tuple(s for s in sources if s), places)
        names = ", ".join(profile for profile, _, _ in self.profiles) or "none"
        raise KeyError(f"{self.path} has no profile {name!r}; its profiles: {names}")


@functools.cache
def load_implementation(entry_point: str, path: str = "") -> Implementation:
    """The :class:`Implementation` that ``"module:attribute"`` names, its functions checked
    against the plug-in contract (:func:`metabench.harness.plugins.check_implementation`).

    :raises SpecError: naming ``path``, the entry point and what to change.
    """
    module_name, _, attribute = entry_point.partition(":")
    where = f"{path}: entry_point {entry_point!r}"
    if not module_name or not attribute:
        raise SpecError(f"{where} must be 'module:attribute' (e.g. 'my_algorithm:IMPLEMENTATION')")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # ImportError, or whatever the module raises when imported
        raise SpecError(f"{where} cannot be loaded: {import_error(error, module_name)}") from error
    implementation = getattr(module, attribute, None)
    if implementation is None:
        raise SpecError(f"{where} cannot be loaded: module {module_name} has no {attribute}")
    if not isinstance(implementation, Implementation):
        raise SpecError(
            f"{where} names {reprlib.repr(implementation)} ({type(implementation).__name__}), "
            f"not a metabench.algos.implementation.Implementation: export one (see the README)"
        )
    check_implementation(implementation, where)
    return implementation


def _setting(spec: SpecFile, table: dict[str, Any], where: str, schema: Any = None) -> Setting:
    """One table: ``source`` (required), ``steps`` and ``set`` for profiles, else values."""
    if schema is None:  # a [benchmarks.*] table: hyperparameters beside source, env and cpus
        values = {
            key: value for key, value in table.items() if key not in ("source", "env", "cpus")
        }
        if not isinstance(table.get("source"), str):
            raise spec.error(f'[{where}] needs source = "where these settings come from"')
        places = {key: _place(spec, key, where) for key in values}
        env = check_table(spec, table.get("env", {}), None, where=f"{where}.env")
        cpus = table.get("cpus")
        if cpus is not None and (not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 1):
            raise spec.error(f"cpus must be an integer of at least 1, got {cpus!r}", "cpus", where)
        return Setting(
            f"{spec.path} [{where}]", table["source"], values, places=places, env=env, cpus=cpus
        )
    checked = check_table(spec, table, schema, where=where, required=("source",))
    steps = checked.get("steps")
    if steps is not None and steps < 1:
        raise spec.error(f"steps must be at least 1, got {steps}", "steps", where)
    values = check_table(spec, checked.get("set", {}), None, where=f"{where}.set")
    place = _place(spec, "set", where)  # an inline table: its keys share the line of `set`
    return Setting(
        f"{spec.path} [{where}]", checked["source"], values, steps, {key: place for key in values}
    )


def _place(spec: SpecFile, key: str, table: str) -> str:
    """``file:line`` where ``key`` is set in ``[table]`` (``file [table]`` if not found)."""
    line = find_line(spec.text, key, table)
    return f"{spec.path}:{line}" if line else f"{spec.path} [{table}]"


def _did_you_mean(pattern: str, names: set[str]) -> str:
    """``" (did you mean 'X'?)"`` for the benchmark name closest to a misspelt one, or ``""``."""
    close = difflib.get_close_matches(pattern, sorted(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def algorithm_from_spec(spec: SpecFile, benchmark_names: set[str]) -> AlgorithmEntry:
    """The :class:`AlgorithmEntry` of one ``baselines/*.toml`` file."""
    top = check_table(
        spec, spec.data, BASELINE_SCHEMA,
        required=("description", "entry_point", "source", "profiles"),
    )  # fmt: skip
    cpus = top.get("cpus", 1)
    if cpus < 1:
        raise spec.error(f"cpus must be at least 1, got {cpus}", "cpus")
    benchmarks = []
    for pattern, table in top.get("benchmarks", {}).items():
        if not any(fnmatch.fnmatchcase(name, pattern) for name in benchmark_names):
            close = _did_you_mean(pattern, benchmark_names)
            raise spec.error(
                f"[benchmarks.{pattern}] matches no benchmark{close}; benchmarks: "
                f"{', '.join(sorted(benchmark_names))}",
                pattern,
            )
        benchmarks.append((pattern, _setting(spec, table, f"benchmarks.{pattern}")))
    profiles = []
    for profile, table in top["profiles"].items():
        where = f"profiles.{profile}"
        setting = _setting(spec, table, where, PROFILE_SCHEMA)
        per_benchmark = tuple(
            (
                pattern,
                _setting(spec, sub, f"{where}.benchmarks.{pattern}", PROFILE_BENCHMARK_SCHEMA),
            )
            for pattern, sub in check_table(
                spec, table.get("benchmarks", {}), None, where=f"{where}.benchmarks"
            ).items()
        )
        profiles.append((profile, setting, per_benchmark))
    train_steps = []
    for pattern, steps in check_table(
        spec, top.get("train_steps", {}), None, where="train_steps"
    ).items():
        if not any(fnmatch.fnmatchcase(name, pattern) for name in benchmark_names):
            close = _did_you_mean(pattern, benchmark_names)
            raise spec.error(
                f"[train_steps] {pattern} matches no benchmark{close}; benchmarks: "
                f"{', '.join(sorted(benchmark_names))}",
                pattern,
                "train_steps",
            )
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise spec.error(
                f"[train_steps] {pattern} must be a positive integer (env steps), got {steps!r}",
                pattern,
                "train_steps",
            )
        train_steps.append((pattern, steps))
    defaults = None
    if "defaults" in top:
        values = check_table(spec, top["defaults"], None, where="defaults")
        places = {key: _place(spec, key, "defaults") for key in values}
        defaults = Setting(f"{spec.path} [defaults]", top["source"], values, places=places)
    return AlgorithmEntry(
        spec.name, top["description"], top["source"], top["entry_point"], cpus, spec.path,
        tuple(benchmarks), tuple(profiles), spec.origin, spec.sha256, defaults,
        tuple(train_steps),
    )  # fmt: skip


@functools.cache
def load_algorithms() -> dict[str, AlgorithmEntry]:
    """Every algorithm of ``baselines/*.toml`` (and ``$METABENCH_SPECS``), by name."""
    names = set(load_benchmarks())
    return {
        name: algorithm_from_spec(spec, names) for name, spec in read_specs("baselines").items()
    }


def get_algorithm(name: str) -> AlgorithmEntry:
    """The algorithm called ``name``, or a ``KeyError`` listing the valid names and saying
    where an algorithm of one's own is looked for (``METABENCH_SPECS``, entry points)."""
    algorithms = load_algorithms()
    try:
        return algorithms[name]
    except KeyError:
        raise KeyError(unknown_name_message("baselines", name, algorithms)) from None


def clear_spec_caches() -> None:
    """Forget the loaded specs, so that the next look-up reads the files (and
    ``$METABENCH_SPECS``) again."""
    from metabench.harness import benchmarks

    for cached in (benchmarks.load_benchmarks, benchmarks._check_env, load_algorithms):
        cached.cache_clear()
