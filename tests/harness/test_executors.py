"""Executors: cells run on this machine within the core budget, or on a Ray cluster."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace

import pytest

from metabench.errors import RunError
from metabench.harness import executors
from metabench.harness.executors import (
    LocalExecutor,
    RayExecutor,
    check_reachable,
    make_executor,
    write_back,
)
from metabench.harness.grid import Cell, plan


def test_local_runs_cells_and_reports_failures(tmp_path):
    nops = plan(["Bandit"], ["nop"], [0, 1], "quick", tmp_path)
    maml = plan(["Bandit"], ["maml-trpo"], [0], "quick", tmp_path)
    executor = make_executor("local", cores=2, address=None)
    outcome = dict(executor.run([*nops, *maml]))
    executor.close()
    assert set(outcome) == {*nops, *maml}
    for cell in nops:
        assert outcome[cell] is None
        assert json.loads((cell.out / "result.json").read_text())["config"]["seed"] == cell.seed
    assert "continuous (Box) actions" in outcome[maml[0]]
    assert (maml[0].out / "error.json").exists()


def test_local_never_runs_more_cpus_than_it_has(tmp_path, monkeypatch):
    lock = threading.Lock()
    busy, peak, large_alone = 0, 0, []

    def fake_run_cell(cell: Cell) -> str | None:
        nonlocal busy, peak
        with lock:
            busy += cell.cpus
            if cell.cpus > 3:
                large_alone.append(busy == cell.cpus)
            else:
                peak = max(peak, busy)
        time.sleep(0.1)
        with lock:
            busy -= cell.cpus
        return None if cell.seed % 2 else f"seed {cell.seed} failed"

    monkeypatch.setattr(executors, "run_cell", fake_run_cell)
    base = plan(["Bandit"], ["nop"], [0], "quick", tmp_path)[0]
    cpus = [1, 2, 3, 1, 5, 2, 1, 1, 3, 2]  # 5 > the executor's 3: it runs anyway, alone
    cells = [replace(base, seed=seed, cpus=n) for seed, n in enumerate(cpus)]
    with closing(LocalExecutor(cores=3)) as executor:
        outcome = {cell.seed: message for cell, message in executor.run(cells)}
    assert outcome == {seed: None if seed % 2 else f"seed {seed} failed" for seed in range(10)}
    assert peak == 3 and large_alone == [True]


def test_bad_executor_settings_are_run_errors():
    with pytest.raises(RunError, match=r"^--cores must be at least 1, got 0$"):
        make_executor("local", cores=0, address=None)
    with pytest.raises(RunError, match="choose one of local, ray"):
        make_executor("slurm", cores=1, address=None)
    with pytest.raises(RunError, match="not HOST:PORT"):
        check_reachable("localhost")


def test_ray_missing_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RunError, match=r'pip install "metabench\[ray\]"'):
        RayExecutor("127.0.0.1:6379")


def test_unreachable_ray_address_fails_fast(monkeypatch):
    pytest.importorskip("ray")
    started = time.monotonic()
    with pytest.raises(RunError, match=r"Ray cluster at 127\.0\.0\.1:1 does not answer.*ray start"):
        RayExecutor("127.0.0.1:1")
    with pytest.raises(RunError, match="does not answer"):
        check_reachable("ray://127.0.0.1:1")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # what "auto" reads first
    with pytest.raises(RunError, match=r":1 does not answer"):
        make_executor("ray", cores=1, address=None)
    assert time.monotonic() - started < 10


def test_write_back_puts_returned_files_in_the_cell_folder(tmp_path):
    out = tmp_path / "Bandit" / "nop-seed0"  # not there yet: the node wrote elsewhere
    write_back(out, {"train.log": b"failed\n", "error.json": b"{}"}, succeeded=False)
    assert (out / "error.json").read_bytes() == b"{}"
    write_back(out, {"result.json": b'{"seed": 0}', "train.log": b"ok\n"}, succeeded=True)
    assert sorted(path.name for path in out.iterdir()) == ["result.json", "train.log"]
    assert (out / "train.log").read_bytes() == b"ok\n"
    with pytest.raises(ValueError, match="unexpected file"):
        write_back(out, {"../escape": b""}, succeeded=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """A one-node Ray cluster for this module, stopped (only it) at the end: 2 CPUs and one GPU
    that Ray is told exists (a fake one: Ray schedules by the count it is given; a CPU cell
    asks for none, so the other tests run as on a cluster without one). One cluster, since
    each start costs seconds."""
    pytest.importorskip("ray")
    port = _free_port()
    temp_dir = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths have a length limit
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        patch.delenv("RAY_ADDRESS", raising=False)
        head = subprocess.Popen(
            [
                sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
                f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                "--disable-usage-stats", f"--temp-dir={temp_dir}", "--block", "--num-gpus=1",
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if head.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"ray start --head did not come up (exit code {head.poll()})")
                    time.sleep(0.2)
            yield f"127.0.0.1:{port}"
        finally:
            # `ray stop` would stop every Ray on this machine: end only this one (with --block,
            # SIGTERM makes it stop the processes it started)
            head.send_signal(signal.SIGTERM)
            try:
                head.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(head.pid, signal.SIGKILL)
                head.wait()
            shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_ray_runs_cells_and_brings_results_back(ray_address, tmp_path):
    nop = plan(["Bandit"], ["nop"], [1], "quick", tmp_path)[0]
    maml = plan(["Bandit"], ["maml-trpo"], [0], "quick", tmp_path)[0]
    large = replace(plan(["Bandit"], ["nop"], [2], "quick", tmp_path)[0], cpus=8)
    executor = make_executor("ray", cores=1, address=ray_address)
    try:
        outcome = dict(executor.run([nop, maml, large]))
    finally:
        executor.close()
    assert outcome[nop] is None and outcome[large] is None  # 8 cores on a 2-core node: runs
    for cell in (nop, large):
        result = json.loads((cell.out / "result.json").read_text())
        assert result["config"]["seed"] == cell.seed
        assert (cell.out / "config.json").exists() and (cell.out / "train.log").exists()
    assert "continuous (Box) actions" in outcome[maml]
    error = json.loads((maml.out / "error.json").read_text())
    assert error["exit_code"] == 1 and "maml-trpo" in error["command"]


@pytest.mark.slow
def test_ray_reserves_a_gpu_for_a_cell_on_one(ray_address, tmp_path):
    """On a cluster with GPUs a cell with ``--device auto`` asks Ray for one GPU, a CPU cell
    for none, and both run there (NOP runs on the CPU whatever --device says, and ``auto``
    resolves to the CPU on this node's torch, so the cell finishes without CUDA)."""
    on_cpu = plan(["Bandit"], ["nop"], [0], "quick", tmp_path)[0]
    on_gpu = plan(["Bandit"], ["nop"], [1], "quick", tmp_path, device="auto")[0]
    assert on_gpu.command()[-2:] == ["--device", "auto"]
    executor = make_executor("ray", cores=1, address=ray_address)
    asked: dict[int, dict[str, object]] = {}
    task = executor._task  # type: ignore[attr-defined]

    class Recording:
        def options(self, **kwargs: object) -> object:
            remote = task.options(**kwargs)

            class Remote:
                def remote(self, cell):  # type: ignore[no-untyped-def]
                    asked[cell.seed] = kwargs
                    return remote.remote(cell)

            return Remote()

    executor._task = Recording()  # type: ignore[attr-defined]
    try:
        outcome = dict(executor.run([on_cpu, on_gpu]))
    finally:
        executor.close()
    assert outcome == {on_cpu: None, on_gpu: None}
    assert asked[0]["num_gpus"] == 0 and asked[1]["num_gpus"] == 1


@pytest.mark.slow
def test_bench_runs_a_grid_on_ray_through_the_cli(ray_address, tmp_path, capsys):
    from metabench.cli import main

    # HalfCheetahVel: CEM needs more than PointGoal's one exploration episode. Two cells, one
    # round on the 2 cores (several cells at once: test_ray_runs_cells_and_brings_results_back)
    args = ["bench", "--benchmarks", "HalfCheetahVel", "--algorithms", "nop", "cem",
            "--seeds", "1", "--results", str(tmp_path),
            "--executor", "ray", "--address", ray_address]  # fmt: skip
    assert main(args) == 0
    for name in ("nop-seed1", "cem-seed1"):
        assert (tmp_path / "HalfCheetahVel" / name / "result.json").exists()
    assert "| HalfCheetahVel | cem | 1 |" in (tmp_path / "README.md").read_text()
    assert "2 cells ran, 0 failed" in capsys.readouterr().out


def test_bench_with_a_ray_address_that_does_not_answer_is_a_one_line_error(tmp_path, capsys):
    from metabench.cli import main

    pytest.importorskip("ray")
    base = ["bench", "--benchmarks", "Bandit", "--algorithms", "nop", "--results", str(tmp_path)]
    assert main([*base, "--executor", "ray", "--address", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("metabench: error: Ray cluster at 127.0.0.1:1 does not answer")
    assert err.count("\n") == 1 and not (tmp_path / "Bandit").exists()
    assert main([*base, "--address", "127.0.0.1:1"]) == 1
    assert "--address is for the ray executor" in capsys.readouterr().err


def test_cells_declare_the_cores_their_baseline_needs(tmp_path):
    cells = plan(["HalfCheetahVel"], ["maml-trpo", "rl2-ppo"], [0], "quick", tmp_path)
    assert [(cell.algorithm, cell.cpus) for cell in cells] == [("maml-trpo", 2), ("rl2-ppo", 1)]
