"""Algorithms by name: ``baselines/*.toml`` (settings, sources, profiles) plus the Python that
builds each one (the ``Implementation`` its ``entry_point`` names).

A run's hyperparameters are, in order: the implementation's defaults for the benchmark, then each
``[benchmarks.<name or glob>]`` table of the baseline file that matches the benchmark, then the
overrides of the run (``--set``, or a grid profile's ``set``). Every one ends up in the run's
``config.json`` with the sources it came from; an unknown name at any layer is an error.
"""

from __future__ import annotations

import fnmatch
import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from metabench.algos.base import MetaRLAlgorithm
from metabench.harness.benchmarks import BenchmarkSpec, load_benchmarks
from metabench.harness.specfiles import SpecError, SpecFile, check_table, find_line, read_specs
from metabench.validation import Layer, config_dict, resolve_config

Builder = Callable[..., MetaRLAlgorithm]
"""``build(spec, seed, hyperparameters, log_dir)`` makes the algorithm; a builder that also takes
``cpus=`` (the cores the run may use, or ``None``) gets it and bounds its worker processes."""


@dataclass(frozen=True)
class Implementation:
    """The Python side of an algorithm.

    :param defaults: every hyperparameter with its default on a benchmark (the names it takes).
    :param build: makes the algorithm from a benchmark, a seed and resolved hyperparameters.
    :param check: validates (and normalises) a full set of hyperparameters; raises ``ValueError``.
    :param config: ``"module:Class"`` of the algorithm's frozen config dataclass (fields made
        with :func:`metabench.validation.option`), imported when first needed: every value is
        checked against its field's type and range where it was set, and recorded as the field
        normalises it.
    :param check_benchmark: raises ``ValueError`` (naming the fix) when resolved
        hyperparameters cannot work on a benchmark.
    """

    defaults: Callable[[BenchmarkSpec], dict[str, Any]]
    build: Builder
    check: Callable[[dict[str, Any]], dict[str, Any]] = dict
    config: str | None = None
    check_benchmark: Callable[[BenchmarkSpec, dict[str, Any]], None] | None = None

    def config_class(self) -> type | None:
        """The class :attr:`config` names (``None`` when there is none)."""
        if self.config is None:
            return None
        module, _, name = self.config.partition(":")
        config: type = getattr(importlib.import_module(module), name)
        return config


# -- RL2-PPO ---------------------------------------------------------------------------------------
def _rl2_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.rl2.algorithm import RL2PPOConfig

    return {**config_dict(RL2PPOConfig()), "episodes_per_trial": spec.episodes_per_trial}


def _build_rl2(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.rl2.algorithm import RL2PPO, RL2PPOConfig

    return RL2PPO(
        spec.env_id,
        sampler=spec.train_sampler(seed),
        config=RL2PPOConfig(**hyperparameters),
        seed=seed,
        env_kwargs=spec.train_env_kwargs(seed),
        tensorboard_log=log_dir,
    )


# -- MAML-TRPO -------------------------------------------------------------------------------------
def _maml_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.maml.maml import MAMLTRPOConfig

    return config_dict(MAMLTRPOConfig())


def _build_maml(
    spec: BenchmarkSpec,
    seed: int,
    hyperparameters: dict[str, Any],
    log_dir: str | None,
    cpus: int | None = None,
) -> MetaRLAlgorithm:
    from metabench.algos.maml.maml import MAMLTRPO, MAMLTRPOConfig

    config = MAMLTRPOConfig(**hyperparameters)
    env_kwargs = spec.train_env_kwargs(seed)
    num_envs = config.meta_batch_size * config.episodes_per_task
    vec_env: gym.vector.VectorEnv[Any, Any, Any] | None = None
    if spec.metaworld is not None:
        # Meta-World: the sub-envs sharded across worker processes, one per core (at most
        # `cpus`), each stepping its shard in a loop (the same results as in-process)
        from metabench.vector.sharded import make_sharded_task_env

        vec_env = make_sharded_task_env(spec.env_id, num_envs, n_workers=cpus, **env_kwargs)
    elif gym.spec(spec.env_id).vector_entry_point is not None:
        # a batched vector env (HalfCheetah: all cheetahs stepped as one) instead of one
        # Python env per episode; the sampler talks to both through the same API
        # (stepped on at most `cpus` processes, the calling one included: same results)
        kwargs: dict[str, Any] = {**env_kwargs, **({} if cpus is None else {"nthread": cpus})}
        vec_env = gym.make_vec(
            spec.env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
        )
    try:
        return MAMLTRPO(
            spec.env_id,
            spec.train_sampler(seed),
            config,
            seed=seed,
            env_kwargs=env_kwargs,
            vec_env=vec_env,
        )
    except BaseException:
        if vec_env is not None:  # do not leak its worker processes
            vec_env.close()
        raise


# -- NOP -------------------------------------------------------------------------------------------
def _nop_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.nop import NOPConfig

    return config_dict(NOPConfig())


def _build_nop(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.nop import NOP as NOPAlgorithm

    env = spec.make_test_env(seed)
    return NOPAlgorithm(env.action_space, action=hyperparameters["action"], seed=seed)


# -- CEM and CMA-ES: per-test-task policy search, no meta-learning ---------------------------------
def _search_population(spec: BenchmarkSpec) -> int:
    """Candidates per generation that fit the benchmark's exploration episodes: all of them in
    one generation when there are few, else two generations."""
    episodes = spec.n_exploration_eps
    return max(2, episodes if episodes < 4 else episodes // 2)


def _check_generation(name: str) -> Callable[[BenchmarkSpec, dict[str, Any]], None]:
    """A check that one generation of ``name``'s search fits the benchmark's exploration
    episodes: with fewer, the search never updates and scores exactly as NOP does."""

    def check(spec: BenchmarkSpec, values: dict[str, Any]) -> None:
        n_samples, episodes = values.get("n_samples"), spec.n_exploration_eps
        if n_samples is not None and n_samples > episodes:
            fix = (
                f"set n_samples to at most {episodes} (--set n_samples={episodes})"
                if episodes >= 2
                else f"raise [evaluation] exploration_episodes to at least 2 in {spec.path}, or "
                f"use another algorithm"
            )
            raise ValueError(
                f"{name} on {spec.name}: one generation of n_samples={n_samples} candidates "
                f"needs {n_samples} exploration episodes but the benchmark gives {episodes}, so "
                f"the search would never update (it would score as NOP): {fix}"
            )

    return check


def _cem_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.cem import CEMConfig

    return {**config_dict(CEMConfig()), "n_samples": _search_population(spec)}


def _build_cem(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.cem import CEM as CEMAlgorithm

    env = spec.make_test_env(seed)
    return CEMAlgorithm(env.action_space, env.observation_space, seed=seed, **hyperparameters)


def _cmaes_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.cmaes import CMAESConfig

    return {**config_dict(CMAESConfig()), "n_samples": _search_population(spec)}


def _build_cmaes(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.cmaes import CMAES as CMAESAlgorithm

    env = spec.make_test_env(seed)
    return CMAESAlgorithm(env.action_space, env.observation_space, seed=seed, **hyperparameters)


RL2_PPO = Implementation(
    _rl2_defaults, _build_rl2, config="metabench.algos.rl2.algorithm:RL2PPOConfig"
)
MAML_TRPO = Implementation(
    _maml_defaults, _build_maml, config="metabench.algos.maml.maml:MAMLTRPOConfig"
)
NOP = Implementation(_nop_defaults, _build_nop, config="metabench.algos.nop:NOPConfig")
CEM = Implementation(
    _cem_defaults,
    _build_cem,
    config="metabench.algos.cem:CEMConfig",
    check_benchmark=_check_generation("CEM"),
)
CMAES = Implementation(
    _cmaes_defaults,
    _build_cmaes,
    config="metabench.algos.cmaes:CMAESConfig",
    check_benchmark=_check_generation("CMA-ES"),
)


# -- oracle and multitask: PPO references (task in the observation, or not) ------------------------
def _reference_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.reference import ReferenceConfig

    return config_dict(ReferenceConfig())


def _build_reference(
    oracle: bool,
    spec: BenchmarkSpec,
    seed: int,
    hyperparameters: dict[str, Any],
    log_dir: str | None,
) -> MetaRLAlgorithm:
    from metabench.algos.reference import ReferenceConfig, ReferencePPO

    return ReferencePPO(
        spec.env_id,
        sampler=spec.train_sampler(seed),
        config=ReferenceConfig(**hyperparameters),
        oracle=oracle,
        seed=seed,
        env_kwargs=spec.train_env_kwargs(seed),
        tensorboard_log=log_dir,
    )


ORACLE = Implementation(
    _reference_defaults,
    functools.partial(_build_reference, True),
    config="metabench.algos.reference:ReferenceConfig",
)
MULTITASK = Implementation(
    _reference_defaults,
    functools.partial(_build_reference, False),
    config="metabench.algos.reference:ReferenceConfig",
)


# -- baselines/*.toml ------------------------------------------------------------------------------
BASELINE_SCHEMA = {
    "description": str, "entry_point": str, "source": str, "cpus": int,
    "benchmarks": dict, "profiles": dict,
}  # fmt: skip
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

    @property
    def implementation(self) -> Implementation:
        return load_implementation(self.entry_point, self.path)

    def settings_for(self, benchmark: str) -> list[Setting]:
        """The ``[benchmarks.*]`` tables that apply to ``benchmark``, in file order."""
        return [s for pattern, s in self.benchmarks if fnmatch.fnmatchcase(benchmark, pattern)]

    def env_kwargs(self, spec: BenchmarkSpec) -> dict[str, Any]:
        """The task env kwargs this algorithm adds on ``spec`` (its tables' ``env``).

        :raises SpecError: a kwarg the benchmark's task env does not take.
        """
        from metabench.harness.benchmarks import env_kwargs_accepted

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
        layers += [
            Layer(setting.values, setting.where, setting.places)
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
        config = implementation.config_class()
        if config is not None:
            values = config_dict(resolve_config(config, layers))
        else:
            values = {name: value for layer in layers for name, value in layer.values.items()}
        values = implementation.check(values)
        if implementation.check_benchmark is not None:
            implementation.check_benchmark(spec, values)
        return values

    def build(
        self,
        spec: BenchmarkSpec,
        seed: int,
        hyperparameters: dict[str, Any],
        log_dir: str | None,
        cpus: int | None = None,
    ) -> MetaRLAlgorithm:
        """The algorithm, with at most ``cpus`` worker processes when its builder takes it."""
        build = self.implementation.build
        if cpus is not None and "cpus" in inspect.signature(build).parameters:
            return build(spec, seed, hyperparameters, log_dir, cpus=cpus)
        return build(spec, seed, hyperparameters, log_dir)

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
    """The :class:`Implementation` that ``"module:attribute"`` names."""
    module_name, _, attribute = entry_point.partition(":")
    try:
        implementation = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise SpecError(f"{path}: entry_point {entry_point!r} cannot be loaded ({error})") from None
    if not isinstance(implementation, Implementation):
        raise SpecError(
            f"{path}: entry_point {entry_point!r} is not a metabench.algos.registry.Implementation"
        )
    return implementation


def _setting(spec: SpecFile, table: dict[str, Any], where: str, schema: Any = None) -> Setting:
    """One table: ``source`` (required), ``steps`` and ``set`` for profiles, else values."""
    if schema is None:  # a [benchmarks.*] table: hyperparameters beside the source and env
        values = {key: value for key, value in table.items() if key not in ("source", "env")}
        if not isinstance(table.get("source"), str):
            raise spec.error(f'[{where}] needs source = "where these settings come from"')
        places = {key: _place(spec, key, where) for key in values}
        env = check_table(spec, table.get("env", {}), None, where=f"{where}.env")
        return Setting(f"{spec.path} [{where}]", table["source"], values, places=places, env=env)
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
            raise spec.error(
                f"[benchmarks.{pattern}] matches no benchmark; benchmarks: "
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
    return AlgorithmEntry(
        spec.name, top["description"], top["source"], top["entry_point"], cpus, spec.path,
        tuple(benchmarks), tuple(profiles),
    )  # fmt: skip


@functools.cache
def load_algorithms() -> dict[str, AlgorithmEntry]:
    """Every algorithm of ``baselines/*.toml`` (and ``$METABENCH_SPECS``), by name."""
    names = set(load_benchmarks())
    return {
        name: algorithm_from_spec(spec, names) for name, spec in read_specs("baselines").items()
    }


def get_algorithm(name: str) -> AlgorithmEntry:
    """The algorithm called ``name``, or a ``KeyError`` listing the valid names."""
    algorithms = load_algorithms()
    try:
        return algorithms[name]
    except KeyError:
        raise KeyError(
            f"unknown algorithm {name!r}; choose one of: {', '.join(sorted(algorithms))}"
        ) from None


def clear_spec_caches() -> None:
    """Forget the loaded specs, so that the next look-up reads the files (and
    ``$METABENCH_SPECS``) again."""
    from metabench.harness import benchmarks

    for cached in (benchmarks.load_benchmarks, benchmarks._check_env, load_algorithms):
        cached.cache_clear()
