"""What produced a result: package versions, the git revision, the machine."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

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


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``; elsewhere ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def provenance() -> dict[str, Any]:
    """Everything a result file records about the software and machine that produced it."""
    return {
        "versions": package_versions(),
        "git_revision": git_revision(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        # what sets the numbers' last bits besides the code: the CPU's vector instructions
        # (torch's kernels and MuJoCo's pick theirs from it), torch's and the BLAS threads
        "cpu": {"model": cpu_model(), "torch_capability": torch.backends.cpu.get_cpu_capability()},
        "threads": {
            "torch": torch.get_num_threads(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        },
    }
