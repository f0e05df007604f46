"""Algorithms by name: ``baselines/*.toml`` (settings, sources, profiles) plus the Python that
builds each one (the ``Implementation`` its ``entry_point`` names).

A run's hyperparameters are, in order: the implementation's defaults for the benchmark, then each
``[benchmarks.<name or glob>]`` table of the baseline file that matches the benchmark, then the
overrides of the run (``--set``, or a grid profile's ``set``). Every one ends up in the run's
``config.json`` with the sources it came from; an unknown name at any layer is an error.
"""

from __future__ import annotations

import dataclasses
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
from metabench.harness.specfiles import SpecError, SpecFile, check_table, read_specs

Builder = Callable[[BenchmarkSpec, int, dict[str, Any], "str | None"], MetaRLAlgorithm]


@dataclass(frozen=True)
class Implementation:
    """The Python side of an algorithm.

    :param defaults: every hyperparameter with its default on a benchmark (the names it takes).
    :param build: makes the algorithm from a benchmark, a seed and resolved hyperparameters.
    :param check: validates (and normalises) a full set of hyperparameters; raises ``ValueError``.
    """

    defaults: Callable[[BenchmarkSpec], dict[str, Any]]
    build: Builder
    check: Callable[[dict[str, Any]], dict[str, Any]] = dict


def signature_defaults(callable_: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The defaults of ``names`` in ``callable_``'s signature (one source of truth: the class)."""
    parameters = inspect.signature(callable_).parameters
    return {name: parameters[name].default for name in names}


# -- RL2-PPO ---------------------------------------------------------------------------------------
def _rl2_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.rl2.algorithm import RL2PPOConfig

    return {**dataclasses.asdict(RL2PPOConfig()), "episodes_per_trial": spec.episodes_per_trial}


def _rl2_check(values: dict[str, Any]) -> dict[str, Any]:
    from metabench.algos.rl2.algorithm import RL2PPOConfig

    return dataclasses.asdict(RL2PPOConfig(**values))


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


RL2_PPO = Implementation(_rl2_defaults, _build_rl2, _rl2_check)


# -- MAML-TRPO -------------------------------------------------------------------------------------
MAML_HYPERPARAMETERS = (
    "meta_batch_size", "episodes_per_task", "inner_lr", "num_grad_updates", "first_order",
    "discount", "gae_lambda", "max_kl", "cg_iters", "cg_damping", "ls_steps", "ls_ratio",
    "hidden_sizes", "init_std",
)  # fmt: skip


def _maml_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.maml import MAMLTRPO

    values = signature_defaults(MAMLTRPO, MAML_HYPERPARAMETERS)
    return {**values, "hidden_sizes": list(values["hidden_sizes"])}


def _maml_check(values: dict[str, Any]) -> dict[str, Any]:
    return {**values, "hidden_sizes": list(values["hidden_sizes"])}


def _build_maml(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.maml import MAMLTRPO

    values = dict(hyperparameters)
    values["hidden_sizes"] = tuple(values["hidden_sizes"])
    env_kwargs = spec.train_env_kwargs(seed)
    num_envs = values["meta_batch_size"] * values["episodes_per_task"]
    vec_env: gym.vector.VectorEnv[Any, Any, Any] | None = None
    if spec.metaworld is not None:
        # Meta-World: the sub-envs sharded across worker processes, one per core, each
        # stepping its shard in a loop (the same envs and results as stepping them in-process)
        from metabench.vector.sharded import make_sharded_task_env

        vec_env = make_sharded_task_env(spec.env_id, num_envs, **env_kwargs)
    elif gym.spec(spec.env_id).vector_entry_point is not None:
        # a batched vector env (HalfCheetah: all cheetahs stepped as one) instead of one
        # Python env per episode; the sampler talks to both through the same API
        vec_env = gym.make_vec(
            spec.env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_kwargs
        )
    try:
        return MAMLTRPO(
            spec.env_id,
            spec.train_sampler(seed),
            seed=seed,
            env_kwargs=env_kwargs,
            vec_env=vec_env,
            **values,
        )
    except BaseException:
        if vec_env is not None:  # do not leak its worker processes
            vec_env.close()
        raise


MAML_TRPO = Implementation(_maml_defaults, _build_maml, _maml_check)


# -- NOP -------------------------------------------------------------------------------------------
def _nop_check(values: dict[str, Any]) -> dict[str, Any]:
    if values["action"] not in ("zero", "random"):
        raise ValueError(f"NOP takes action='zero' or 'random', got {values['action']!r}")
    return values


def _build_nop(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.nop import NOP as NOPAlgorithm

    env = spec.make_test_env(seed)
    return NOPAlgorithm(env.action_space, action=hyperparameters["action"], seed=seed)


NOP = Implementation(lambda spec: {"action": "zero"}, _build_nop, _nop_check)


# -- CEM and CMA-ES: per-test-task policy search, no meta-learning ---------------------------------
def _search_population(spec: BenchmarkSpec) -> int:
    """Candidates per generation that fit the benchmark's exploration episodes: all of them in
    one generation when there are few, else two generations."""
    episodes = spec.n_exploration_eps
    return max(2, episodes if episodes < 4 else episodes // 2)


def _cem_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.cem import CEM as CEMAlgorithm

    names = ("best_frac", "init_std", "extra_std", "extra_decay_time")
    return {"n_samples": _search_population(spec), **signature_defaults(CEMAlgorithm, names)}


def _build_cem(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.cem import CEM as CEMAlgorithm

    env = spec.make_test_env(seed)
    return CEMAlgorithm(env.action_space, env.observation_space, seed=seed, **hyperparameters)


def _cmaes_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.cmaes import CMAES as CMAESAlgorithm

    return {
        "n_samples": _search_population(spec),
        **signature_defaults(CMAESAlgorithm, ("sigma0",)),
    }


def _build_cmaes(
    spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
) -> MetaRLAlgorithm:
    from metabench.algos.cmaes import CMAES as CMAESAlgorithm

    env = spec.make_test_env(seed)
    return CMAESAlgorithm(env.action_space, env.observation_space, seed=seed, **hyperparameters)


CEM = Implementation(_cem_defaults, _build_cem)
CMAES = Implementation(_cmaes_defaults, _build_cmaes)


# -- oracle and multitask: PPO references (task in the observation, or not) ------------------------
def _reference_defaults(spec: BenchmarkSpec) -> dict[str, Any]:
    from metabench.algos.reference import ReferenceConfig

    values = dataclasses.asdict(ReferenceConfig())
    del values["oracle"]  # fixed by the algorithm's name, not a hyperparameter
    return {**values, "hidden_sizes": list(values["hidden_sizes"])}


def _reference_check(values: dict[str, Any]) -> dict[str, Any]:
    from metabench.algos.reference import ReferenceConfig

    config = ReferenceConfig(**{**values, "hidden_sizes": tuple(values["hidden_sizes"])})
    checked = {**dataclasses.asdict(config), "hidden_sizes": list(config.hidden_sizes)}
    del checked["oracle"]
    return checked


def _build_reference(
    oracle: bool,
    spec: BenchmarkSpec,
    seed: int,
    hyperparameters: dict[str, Any],
    log_dir: str | None,
) -> MetaRLAlgorithm:
    from metabench.algos.reference import ReferenceConfig, ReferencePPO

    values = {**hyperparameters, "hidden_sizes": tuple(hyperparameters["hidden_sizes"])}
    return ReferencePPO(
        spec.env_id,
        sampler=spec.train_sampler(seed),
        config=ReferenceConfig(oracle=oracle, **values),
        seed=seed,
        env_kwargs=spec.train_env_kwargs(seed),
        tensorboard_log=log_dir,
    )


ORACLE = Implementation(
    _reference_defaults, functools.partial(_build_reference, True), _reference_check
)
MULTITASK = Implementation(
    _reference_defaults, functools.partial(_build_reference, False), _reference_check
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
    env: dict[str, Any] = field(default_factory=dict)
    """Task env kwargs the algorithm's published setup adds on the benchmark (``env = {...}``)."""


@dataclass(frozen=True)
class ProfileSettings:
    """What a grid profile runs one algorithm on one benchmark with."""

    steps: int
    overrides: dict[str, Any]
    sources: tuple[str, ...]


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

    def hyperparameters(self, spec: BenchmarkSpec, overrides: dict[str, Any]) -> dict[str, Any]:
        """Every hyperparameter of a run on ``spec``: defaults, the file's tables, ``overrides``.

        :raises ValueError: an unknown name (saying where it was set) or a bad value.
        """
        values = self.implementation.defaults(spec)
        layers = [(setting.where, setting.values) for setting in self.settings_for(spec.name)]
        for where, layer in [*layers, ("--set", overrides)]:
            unknown = sorted(set(layer) - set(values))
            if unknown:
                raise ValueError(
                    f"{where}: unknown hyperparameter(s) {', '.join(unknown)} of {self.name}; "
                    f"valid: {', '.join(sorted(values))}"
                )
            values.update(layer)
        return self.implementation.check(values)

    def build(
        self, spec: BenchmarkSpec, seed: int, hyperparameters: dict[str, Any], log_dir: str | None
    ) -> MetaRLAlgorithm:
        return self.implementation.build(spec, seed, hyperparameters, log_dir)

    def profile(self, name: str, benchmark: str) -> ProfileSettings:
        """The budget and overrides of profile ``name`` on ``benchmark``."""
        for profile, setting, per_benchmark in self.profiles:
            if profile == name:
                matches = [s for p, s in per_benchmark if fnmatch.fnmatchcase(benchmark, p)]
                steps, overrides = setting.steps, dict(setting.values)
                for match in matches:
                    steps = match.steps if match.steps is not None else steps
                    overrides.update(match.values)
                if steps is None:
                    raise SpecError(f"{self.path}: [profiles.{name}] sets no steps for {benchmark}")
                sources = (setting.source, *(match.source for match in matches))
                return ProfileSettings(steps, overrides, tuple(s for s in sources if s))
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
        env = check_table(spec, table.get("env", {}), None, where=f"{where}.env")
        return Setting(f"{spec.path} [{where}]", table["source"], values, env=env)
    checked = check_table(spec, table, schema, where=where, required=("source",))
    steps = checked.get("steps")
    if steps is not None and steps < 1:
        raise spec.error(f"steps must be at least 1, got {steps}", "steps", where)
    values = check_table(spec, checked.get("set", {}), None, where=f"{where}.set")
    return Setting(f"{spec.path} [{where}]", checked["source"], values, steps)


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
