"""What produced a result: package versions, the git revision, the machine, and for an
algorithm metabench does not ship, where its code came from and what a shell needs to find it."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from metabench.devices import device_name
from metabench.harness.specfiles import SPECS_PATH_VARIABLE, specs_variable_folders

if TYPE_CHECKING:
    from metabench.harness.algorithms import AlgorithmEntry

PACKAGES = (
    "metabench",
    "gymnasium",
    "mujoco",
    "metaworld",
    "torch",
    "stable-baselines3",
    "sb3-contrib",
    "numpy",
)


def package_versions() -> dict[str, str | None]:
    """Installed version of every package a result depends on (``None`` if missing)."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_revision(path: str | Path | None = None) -> str | None:
    """The commit of the metabench checkout (with ``-dirty`` if it has uncommitted changes), or
    ``None`` when metabench was installed from a wheel."""
    root = Path(path) if path is not None else Path(__file__).resolve().parents[2]
    try:
        revision = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{revision}-dirty" if status else revision


VECTOR_EXTENSIONS = ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
"""The CPU flags that tell which code paths the numeric libraries can take, and so the numbers'
last bits: MKL chooses its kernels from the hardware, a choice ``torch_capability`` does not
show."""

KERNEL_ENV_VARS = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "OPENBLAS_CORETYPE",
)
"""Environment variables that override those choices. On a 2-core AMD EPYC with AVX-512,
``MKL_CBWR=AVX2`` moved ``make run``'s multitask row from -90.5 to -75.9, while
``ATEN_CPU_CAPABILITY=avx2`` left every number as it was and changed only ``torch_capability``."""


CPUINFO = Path("/proc/cpuinfo")
"""Where Linux describes the CPU."""


def _cpuinfo_field(name: str) -> str | None:
    """The first ``name : value`` of :data:`CPUINFO` (``None`` where there is none)."""
    try:
        for line in CPUINFO.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == name:
                return value.strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``; elsewhere ``platform.processor()``)."""
    return _cpuinfo_field("model name") or platform.processor() or "unknown"


def vector_extensions() -> list[str] | None:
    """Which of :data:`VECTOR_EXTENSIONS` the CPU has, in that order (``None`` where
    ``/proc/cpuinfo`` is not there to say)."""
    flags = _cpuinfo_field("flags")
    if flags is None:
        return None
    present = set(flags.split())
    return [flag for flag in VECTOR_EXTENSIONS if flag in present]


def cpu_record() -> dict[str, Any]:
    """What sets the numbers' last bits besides the code and the threads: the CPU, the vector
    instructions torch's own kernels use and those the CPU has (:data:`VECTOR_EXTENSIONS`), and
    the :data:`KERNEL_ENV_VARS` that are set."""
    return {
        "model": cpu_model(),
        "torch_capability": torch.backends.cpu.get_cpu_capability(),
        "vector_extensions": vector_extensions(),
        "kernel_env": {name: os.environ[name] for name in KERNEL_ENV_VARS if name in os.environ},
    }


def cpu_history(recorded: list[dict[str, Any]] | None, iteration: int) -> list[dict[str, Any]]:
    """The kinds of CPU that trained a run, each with the first iteration it trained
    (``{"from_iteration", "cpu"}``, ``cpu`` a :func:`cpu_record`): those its checkpoint
    recorded, then this machine's where it differs from the last.

    :param recorded: the checkpoint's history; ``None``: none (a new run, or a checkpoint of a
        version that kept none, whose CPU for its first ``iteration`` iterations is unknown).
    :param iteration: the iterations done before this process goes on.
    """
    here = cpu_record()
    history = list(recorded or [])
    if recorded is None and iteration > 0:
        history.append({"from_iteration": 1, "cpu": None})
    if not history or history[-1]["cpu"] != here:
        history.append({"from_iteration": iteration + 1, "cpu": here})
    return history


def provenance(device: str = "cpu", entry: AlgorithmEntry | None = None) -> dict[str, Any]:
    """Everything a result or evaluation file records about the code and machine that produced
    it: a run on a GPU (``device`` as config.json records it) also records the GPU's model and
    CUDA, and one of a third-party algorithm ``entry`` the identity of its code
    (:func:`algorithm_code`), which neither metabench's version nor its revision says."""
    record: dict[str, Any] = {
        "versions": package_versions(),
        "git_revision": git_revision(),
        **(
            {}
            if entry is None or entry.origin.shipped
            else {"algorithm_code": algorithm_code(entry)}
        ),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_record(),
        "threads": {
            "torch": torch.get_num_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        },
    }
    if device != "cpu":
        record["gpu"] = {
            "name": device_name(torch.device(device)),
            "cuda": torch.version.cuda,
        }
    return record


def module_files(module: str) -> tuple[Path, list[Path]]:
    """The source files of the code ``module`` belongs to, and the folder they are imported
    from: every ``.py`` file of its top-level package (an implementation imports its siblings),
    or its own file when it is a top-level module; no files when it cannot be found."""
    origin = module_file(module.split(".")[0])
    if origin is None:
        return Path(), []
    if origin.name == "__init__.py":
        return origin.parent.parent, sorted(origin.parent.rglob("*.py"))
    return origin.parent, [origin]


def algorithm_code(entry: AlgorithmEntry) -> dict[str, Any]:
    """The identity of a third-party algorithm's code: the sha256 of its module files
    (:func:`module_files`, names and contents), the git revision of the work tree that holds them
    (``-dirty`` with uncommitted changes; ``None`` outside one) and the package that provides it,
    with its version. An edited plug-in changes the sha256 even where nothing is committed."""
    folder, files = module_files(entry.module)
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    package, version = entry.origin.package, entry.origin.version
    if package is None:
        package, version = providing_distribution(entry.module)
    return {
        "module": entry.module,
        "files": len(files),
        "sha256": digest.hexdigest() if files else None,
        "git_revision": git_revision(folder) if files else None,
        "package": package,
        "package_version": version,
    }


def code_differences(recorded: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """What of the code in two :func:`provenance` records differs, as ``"name: recorded ->
    here"`` lines: metabench's version and git revision, and a third-party algorithm's code
    (:func:`algorithm_code`). A fact the older record lacks is unknown, not different."""
    facts = [
        ("metabench", ("versions", "metabench")),
        ("metabench git revision", ("git_revision",)),
        ("algorithm module files' sha256", ("algorithm_code", "sha256")),
        ("algorithm git revision", ("algorithm_code", "git_revision")),
        ("algorithm package version", ("algorithm_code", "package_version")),
    ]
    lines = []
    for name, keys in facts:
        before, now = _lookup(recorded, keys), _lookup(here, keys)
        if before is not None and before != now:
            lines.append(f"{name}: {before!r} -> {now!r}")
    return lines


def _lookup(record: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    value: Any = record
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def provenance_differences(recorded: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """The facts of :func:`provenance` recorded for a run that differ on this machine, as
    ``"name: recorded -> here"`` lines (package versions, Python, the CPU record, threads): what
    to look at when a recorded number is not reproduced. The git revision, the platform string
    and the GPU are left out (a revision that changed the numbers is the code, not the machine)."""

    def flat(record: Mapping[str, Any]) -> dict[str, Any]:
        facts = {"python": record["python"]} if "python" in record else {}
        for section in ("versions", "cpu", "threads"):
            for key, value in (record.get(section) or {}).items():
                facts[f"{section}.{key}"] = value
        return facts

    before, now = flat(recorded), flat(here)
    return [  # only what the record holds: a fact an older record lacks is unknown, not different
        f"{name}: {value!r} -> {now.get(name)!r}"
        for name, value in sorted(before.items())
        if value != now.get(name)
    ]


def providing_distribution(module: str) -> tuple[str | None, str | None]:
    """The installed distribution that holds ``module`` and its version (``None, None`` for a
    module found through ``PYTHONPATH`` or the working folder)."""
    names = importlib.metadata.packages_distributions().get(module.split(".")[0], [])
    if not names:
        return None, None
    return names[0], importlib.metadata.version(names[0])


def algorithm_record(entry: AlgorithmEntry) -> dict[str, Any] | None:
    """What ``config.json`` records of a third-party algorithm, so that a reader can find and
    check its code: the spec file with its sha256, what registered the file, the
    implementation's entry point and the package that provides it with its version (``None``
    where there is none). ``None`` for the algorithms metabench ships (its version and git
    revision in the provenance say it)."""
    if entry.origin.shipped:
        return None
    package, version = entry.origin.package, entry.origin.version
    if package is None:
        package, version = providing_distribution(entry.module)
    return {
        "spec_file": str(Path(entry.path).absolute()),
        "spec_sha256": entry.sha256,
        "registered_by": entry.origin.registered_by,
        "entry_point": entry.entry_point,
        "package": package,
        "package_version": version,
    }


def how_to_make_known(record: dict[str, Any]) -> str:
    """What makes the algorithm of ``record`` (:func:`algorithm_record`) known again."""
    if record["registered_by"].startswith(f"{SPECS_PATH_VARIABLE}="):
        module = record["entry_point"].partition(":")[0]
        return f"set {record['registered_by']} and make {module} importable"
    version = f"=={record['package_version']}" if record["package_version"] else ""
    return f"install {record['package']}{version} (its {record['registered_by']})"


def command_environment(
    benchmark_path: str, entry: AlgorithmEntry, root: Path | None = None
) -> list[str]:
    """``VARIABLE=value`` words a plain shell needs to reproduce a run of ``entry`` on the
    benchmark read from ``benchmark_path``: ``METABENCH_SPECS`` when either spec file came from
    there, ``PYTHONPATH`` when the algorithm's module is found through it; folders under
    ``root`` (where the command runs) relative to it, others absolute."""
    words = []
    folders = specs_variable_folders()
    paths = [Path(benchmark_path).absolute(), Path(entry.path).absolute()]
    if any(folder in path.parents for folder in folders for path in paths):
        value = os.pathsep.join(portable_path(folder, root) for folder in folders)
        words.append(f"{SPECS_PATH_VARIABLE}={shlex.quote(value)}")
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    python_path = [Path(folder).absolute() for folder in entries if folder]
    module = None if entry.origin.shipped else module_file(entry.module)
    if module is not None and any(folder in module.parents for folder in python_path):
        value = os.pathsep.join(portable_path(folder, root) for folder in python_path)
        words.append(f"PYTHONPATH={shlex.quote(value)}")
    return words


def work_tree_root(path: Path) -> Path | None:
    """The root of the git work tree holding ``path`` (the nearest folder above it with a
    ``.git``), or ``None``."""
    for folder in path.absolute().parents:
        if (folder / ".git").exists():
            return folder
    return None


def portable_path(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` (where a recorded command runs) when it lies under it,
    else absolute. Symbolic links are kept: a virtual environment's ``python`` is one."""
    path = path.absolute()
    if root is not None and root in path.parents:
        return path.relative_to(root).as_posix()
    return str(path)


def module_file(module: str) -> Path | None:
    """The file ``module`` would be imported from (``None`` if it cannot be found)."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a parent package that is missing, or a bad name
        return None
    return None if found is None or found.origin is None else Path(found.origin).absolute()
