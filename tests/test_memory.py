"""Freed memory kept for the next allocations: counted by the kernel's page faults, in fresh
processes (a process's malloc settings cannot be undone)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the settings are glibc's; other C libraries keep their allocators",
)

BLOCKS = 64
"""Arrays of 1 MiB allocated, touched and freed twice: above glibc's first mmap threshold
(128 KiB), below the largest one (32 MiB)."""

PROGRAM = f"""
import json, resource, sys
import numpy as np

def allocate_touch_free():
    blocks = [np.ones(1 << 18, dtype=np.float32) for _ in range({BLOCKS})]
    del blocks

applied = False
if sys.argv[1] == "kept":
    from metabench.memory import retain_freed_memory
    applied = retain_freed_memory()
elif sys.argv[1] == "run":
    from metabench.harness.run import RunSettings, build_algorithm, resolve
    spec, config = resolve(RunSettings("Bandit", "nop", 0, 1, sys.argv[2]))
    build_algorithm(spec, config, None)
allocate_touch_free()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
allocate_touch_free()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({{"applied": applied, "faults": faults}}))
"""


def second_round_faults(side: str, tmp_path) -> dict[str, int | bool]:
    """Page faults of the second allocation of the blocks in a fresh process."""
    output = subprocess.run(
        [sys.executable, "-c", PROGRAM, side, str(tmp_path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def test_memory_freed_is_reused_without_page_faults_in_a_run_and_not_by_default(tmp_path):
    pages = BLOCKS * (1 << 20) // 4096
    default = second_round_faults("default", tmp_path)
    kept = second_round_faults("kept", tmp_path)
    run = second_round_faults("run", tmp_path)
    assert default["faults"] > pages / 2  # glibc as it comes: the freed pages went back
    assert kept["applied"] is True
    assert kept["faults"] < pages / 20
    assert run["faults"] < pages / 20  # every run's process keeps them (build_algorithm)
