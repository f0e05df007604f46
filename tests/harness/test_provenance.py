"""What a result records of the machine: the CPU facts that set the numbers' last bits."""

from __future__ import annotations

import dataclasses
import platform
import re
from pathlib import Path

import pytest
import torch

from metabench.harness import provenance
from tests.factories import make_result

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512cd avx512_bf16 sha_ni
bugs\t\t: sysret_ss_attrs

processor\t: 1
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512cd avx512_bf16 sha_ni
"""


def test_the_cpu_record_names_the_model_its_vector_extensions_and_the_kernel_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cpuinfo").write_text(CPUINFO)
    monkeypatch.setattr(provenance, "CPUINFO", tmp_path / "cpuinfo")
    for name in provenance.KERNEL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    monkeypatch.setenv("MKL_VERBOSE", "1")  # not one that picks kernels: not recorded
    assert provenance.cpu_record() == {
        "model": "AMD EPYC 9R14",
        "torch_capability": torch.backends.cpu.get_cpu_capability(),
        # in VECTOR_EXTENSIONS' order; sse and sha_ni are not among them, avx512cd neither
        "vector_extensions": ["avx", "avx2", "fma", "avx512f", "avx512_bf16"],
        "kernel_env": {"MKL_CBWR": "AVX2"},
    }


def test_without_cpuinfo_the_model_comes_from_platform_and_the_extensions_are_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(provenance, "CPUINFO", tmp_path / "absent")
    record = provenance.cpu_record()
    assert record["model"] == (platform.processor() or "unknown")
    assert record["vector_extensions"] is None


def test_a_cpu_without_flags_has_none_of_the_extensions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cpuinfo").write_text("model name\t: Old CPU\nflags\t\t: fpu sse sse2\n")
    monkeypatch.setattr(provenance, "CPUINFO", tmp_path / "cpuinfo")
    assert provenance.vector_extensions() == []
    assert provenance.cpu_model() == "Old CPU"


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists(), reason="needs Linux's /proc/cpuinfo")
def test_this_machines_extensions_are_the_flags_its_cpuinfo_lists() -> None:
    match = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
    assert match is not None
    flags = set(match.group(1).split())
    assert provenance.vector_extensions() == [
        flag for flag in provenance.VECTOR_EXTENSIONS if flag in flags
    ]


def test_differences_list_what_changed_between_a_record_and_this_machine() -> None:
    recorded = {
        "git_revision": "abc",
        "python": "3.11.7",
        "platform": "Linux-a",
        "versions": {"torch": "2.13.0", "mujoco": "3.3.0"},
        "cpu": {"model": "AMD EPYC", "vector_extensions": ["avx", "avx2"], "kernel_env": {}},
        "threads": {"torch": 1, "OMP_NUM_THREADS": "1"},
    }
    here = {
        **recorded,
        "git_revision": "def",  # the code, not the machine: not listed
        "platform": "Linux-b",  # a kernel build string: not listed
        "versions": {"torch": "2.13.0", "mujoco": "3.3.1", "rich": "14.0"},
        "cpu": {**recorded["cpu"], "vector_extensions": ["avx", "avx2", "avx512f"]},
        "gpu": {"name": "H100"},
    }
    assert provenance.provenance_differences(recorded, here) == [
        "cpu.vector_extensions: ['avx', 'avx2'] -> ['avx', 'avx2', 'avx512f']",
        "versions.mujoco: '3.3.0' -> '3.3.1'",
    ]  # rich: recorded here only, unknown for the record
    older = {**recorded, "cpu": {"model": "AMD EPYC"}}  # recorded before the extensions were
    assert provenance.provenance_differences(older, here) == ["versions.mujoco: '3.3.0' -> '3.3.1'"]
    assert provenance.provenance_differences(recorded, recorded) == []
    current = provenance.provenance()
    assert provenance.provenance_differences(current, provenance.provenance()) == []


def test_a_meta_test_that_differs_names_the_code_then_the_machine_then_the_agents_state() -> None:
    """What ``evaluate`` says when its numbers differ from the run's: no record shows an agent
    state that leaves out a random generator, so that cause is named last, after the machine."""
    from metabench.harness.training import differ_because

    record = {"versions": {"mujoco": "3.3.0"}, "threads": {"OMP_NUM_THREADS": "1"}}
    recorded = dataclasses.replace(make_result("B", "x", 0, [[0.0, 1.0]]), provenance=record)
    moved = {**record, "threads": {"OMP_NUM_THREADS": None}}
    threads = differ_because(recorded, moved)
    assert threads.startswith("this machine or its packages compute differently (threads.OMP")
    assert threads.endswith("or the algorithm's saved state (agent_state) may lack something its "
                            "actions draw on, such as a random generator's state")  # fmt: skip
    same = differ_because(recorded, record)
    assert same.startswith("its provenance records no difference") and "agent_state" in same
