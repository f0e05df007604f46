"""``metabench plan``: the cost model, the executors' scheduling replayed, the calibration file."""

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from metabench.algos.base import MetaRLAlgorithm
from metabench.cli import main
from metabench.harness import calibration
from metabench.harness.calibration import (
    CalibrationCache,
    calibrate,
    calibration_key,
    calibration_tasks,
    cell_plan,
    metatest_sizes,
    predict_cells,
    spread,
)
from metabench.harness.costs import (
    CellTimes,
    cell_cost,
    cluster_time,
    fit_metatest,
    schedule_time,
)
from metabench.harness.grid import plan
from metabench.harness.run import build_algorithm
from metabench.harness.schedule import MetaTestSchedule

TIMES = CellTimes(setup_s=4.0, iteration_s=10.0, steps_per_iteration=300, metatest_fixed_s=3.0,
                  task_s=0.5, env_steps_per_s=1000.0, initial_s=0.0)  # fmt: skip


def test_a_cell_costs_setup_whole_iterations_and_each_metatest():
    cost = cell_cost(TIMES, env_steps=1000, metatests=[40, 10])
    # 1000 steps are 3 whole iterations of 300 (metabench train never runs past the budget);
    # each meta-test pays its fixed part once
    assert cost.iterations == 3
    assert cost.total_s == pytest.approx(4.0 + 3 * 10.0 + (3.0 + 40 * 0.5) + (3.0 + 10 * 0.5))
    assert TIMES.steps_per_s == pytest.approx(30.0)
    assert TIMES.metatest_s(0) == 0.0  # no meta-test, no fixed part
    # nop: no iterations, a meta-test
    nothing_to_train = CellTimes(1.0, 0.0, 0, 0.0, 0.5, 1000.0, 0.0)
    assert cell_cost(nothing_to_train, 1000, [4]).total_s == pytest.approx(1.0 + 2.0)
    with pytest.raises(ValueError, match=">= 0"):
        cell_cost(TIMES, -1, [0])
    with pytest.raises(ValueError, match=">= 0"):
        cell_cost(TIMES, 1000, [-1])


def test_a_collection_before_the_first_iteration_is_paid_once_per_run():
    # PEARL: 7 s of initial steps before 3 iterations of 10 s, and none for a run of no iteration
    pearl = replace(TIMES, initial_s=7.0)
    cost = cell_cost(pearl, env_steps=1000, metatests=[])
    assert cost.train_s == pytest.approx(7.0 + 3 * 10.0)
    assert cost.total_s == pytest.approx(4.0 + 7.0 + 3 * 10.0)
    assert cell_cost(pearl, env_steps=299, metatests=[]).train_s == 0.0


class ClockedAlgorithm:
    """Advances a fake clock as its training would take time: ``initial`` seconds of one-off
    collection in its first iteration (``initial_steps``), then ``iteration`` per iteration."""

    steps_per_iteration = 100

    def __init__(self, clock: list[float], initial_steps: int, initial: float, iteration: float):
        self.clock, self.initial_steps = clock, initial_steps
        self.initial, self.iteration, self.iterations = initial, iteration, 0

    def train(self, n_iterations: int) -> dict[str, float]:
        for _ in range(n_iterations):
            self.clock[0] += self.iteration + (self.initial if self.iterations == 0 else 0.0)
            self.iterations += 1
        return {}


@pytest.mark.parametrize("initial_steps, initial_s", [(2_000, 7.0), (0, 0.0)])
def test_the_calibration_separates_the_initial_collection_from_the_iteration(
    tmp_path, monkeypatch, initial_steps, initial_s
):
    clock = [0.0]
    monkeypatch.setattr(calibration, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(calibration, "env_only_rate", lambda plan: 1000.0)
    monkeypatch.setattr(calibration, "_metatest_time", lambda plan, algo, tasks: 2.0 * len(tasks))
    monkeypatch.setattr(
        calibration,
        "build_algorithm",
        lambda spec, config, out: ClockedAlgorithm(clock, initial_steps, initial_s, 10.0),
    )
    cell = plan(["PointGoal"], ["pearl"], [0], "quick", tmp_path)[0]
    times = calibration._calibrate_here(cell)
    # without the separation, PEARL's first iteration (17 s) would be charged to every iteration
    assert times.iteration_s == 10.0
    assert times.initial_s == initial_s
    assert times.steps_per_iteration == 100


def test_two_metatests_of_different_sizes_give_the_fixed_and_the_per_task_cost():
    # 7.5 s + 2.25 s per task (about ML1-push's RL2 meta-tests on 2 cores: 10 tasks 30 s,
    # 50 tasks 120 s) and the times of 2 and 20 tasks it gives
    fixed, per_task = fit_metatest((2, 7.5 + 2 * 2.25), (20, 7.5 + 20 * 2.25))
    assert (fixed, per_task) == (pytest.approx(7.5), pytest.approx(2.25))
    # one size only, or the larger meta-test no slower (noise), or a negative fixed part:
    # the larger one's time per task
    assert fit_metatest((4, 10.0), (4, 12.0)) == (0.0, 3.0)
    assert fit_metatest((2, 10.0), (20, 9.0)) == (0.0, pytest.approx(0.45))
    assert fit_metatest((2, 1.0), (20, 40.0)) == (0.0, 2.0)
    with pytest.raises(ValueError, match=">= 1"):
        fit_metatest((0, 0.0), (20, 40.0))


def test_the_calibration_metatests_spread_over_the_test_tasks(tmp_path):
    assert spread(200, 2) == [0, 199]
    assert spread(200, 5) == [0, 50, 100, 149, 199]
    assert spread(3, 8) == [0, 1, 2] and spread(1, 1) == [0] and spread(5, 0) == []
    cell = plan(["PointGoal"], ["maml-trpo"], [0], "quick", tmp_path)[0]
    run = cell_plan(cell)
    n, processes = len(run.test_tasks), run.metatest_processes or 1
    assert calibration_tasks(run) == (
        spread(n, min(n, processes)),
        spread(n, min(n, 4 * processes)),
    )
    # a benchmark with a periodic subset (as many of each class): that subset is the larger one
    ml10 = cell_plan(plan(["ML10"], ["rl2-ppo-metaworld"], [0], "paper", tmp_path)[0])
    small, large = calibration_tasks(ml10)
    assert tuple(large) == ml10.config.periodic_test_tasks and len(large) == 20
    assert small == spread(200, ml10.metatest_processes)


def test_the_local_schedule_starts_cells_in_grid_order_as_their_cores_free_up():
    # 2 cores, 1 core each: 0 runs 0-3; 1 runs 0-1, 2 runs 1-2, 3 runs 2-3
    assert schedule_time([3, 1, 1, 1], [1, 1, 1, 1], cores=2) == 3
    # a 2-core cell first, then two 1-core cells side by side
    assert schedule_time([1, 5, 5], [2, 1, 1], cores=2) == 6
    # a small cell overtakes a wide one that does not fit yet: 0 (0-4) and 2 (0-1); 1 waits
    # for both cores until 4
    assert schedule_time([4, 1, 1], [1, 2, 1], cores=2) == 5
    # a cell wider than the machine runs alone rather than never
    assert schedule_time([2, 1], [8, 1], cores=2) == 3
    durations, cpus = [5.0, 2.0, 7.0, 1.0], [1, 1, 1, 1]
    assert schedule_time(durations, cpus, cores=1) == sum(durations)
    assert schedule_time(durations, cpus, cores=4) == max(durations)


def test_the_cluster_schedule_packs_cells_onto_nodes():
    # three 2-core cells on 2 nodes of 2 cores: two at once, then the third
    assert cluster_time([1, 1, 1], [2, 2, 2], nodes=2, cores=2) == 2
    # a 4-core cell on 2-core nodes takes a whole node
    assert cluster_time([3, 3], [4, 4], nodes=2, cores=2) == 3
    durations, cpus = [5.0, 2.0, 7.0, 1.0], [1, 1, 1, 1]
    assert cluster_time(durations, cpus, nodes=1, cores=2) == schedule_time(durations, cpus, 2)
    assert cluster_time(durations, cpus, nodes=4, cores=1) == max(durations)
    with pytest.raises(ValueError, match="nodes must be at least 1"):
        cluster_time([1], [1], nodes=0, cores=2)


def test_a_calibration_is_keyed_by_settings_not_by_seed_or_budget(tmp_path):
    maml, maml_seed1 = plan(["PointGoal"], ["maml-trpo"], [0, 1], "quick", tmp_path)
    key = calibration_key(cell_plan(maml))
    assert calibration_key(cell_plan(maml_seed1)) == key
    assert calibration_key(cell_plan(replace(maml, steps=10 * maml.steps))) == key
    assert calibration_key(cell_plan(replace(maml, overrides=(("meta_batch_size", 4),)))) != key
    assert calibration_key(cell_plan(replace(maml, cpus=1))) != key
    assert (
        calibration_key(cell_plan(plan(["PointGoal"], ["nop"], [0], "quick", tmp_path)[0])) != key
    )


def test_the_calibration_file_keeps_each_measurement_and_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "cache" / "calibration.json"
    cache = CalibrationCache(path)
    cache.put("abc", "PointGoal nop", TIMES)
    reread = CalibrationCache(path)
    assert reread.get("abc") == TIMES and reread.get("other") is None
    assert reread.entries["abc"]["label"] == "PointGoal nop"
    # an entry of an earlier cost model (one time per task) is measured again, not misread
    times = dict(reread.entries["abc"]["times"])
    del times["metatest_fixed_s"]
    reread.entries["abc"]["times"] = times
    assert reread.get("abc") is None
    path.write_text(json.dumps({"something": "else"}))
    with pytest.raises(ValueError, match=r"not a metabench calibration file.*delete it"):
        CalibrationCache(path)


def test_each_setting_is_calibrated_once_and_then_read_from_the_file(tmp_path, monkeypatch):
    measured = []

    def fake_calibrate(cell):
        measured.append((cell.algorithm, cell.seed))
        return TIMES

    monkeypatch.setattr(calibration, "calibrate", fake_calibrate)
    cells = plan(["PointGoal"], ["maml-trpo", "nop"], [0, 1, 2], "quick", tmp_path / "runs")
    cache = CalibrationCache(tmp_path / "calibration.json")
    predictions = predict_cells(cells, cache)
    assert measured == [("maml-trpo", 0), ("nop", 0)]  # seeds 1 and 2 reuse seed 0's
    for cell, (times, cost) in zip(cells, predictions, strict=True):
        assert times == TIMES
        assert cost == cell_cost(TIMES, cell.steps, metatest_sizes(cell_plan(cell)))
    predict_cells(cells, CalibrationCache(tmp_path / "calibration.json"))
    assert len(measured) == 2  # the file's
    predict_cells(cells, cache, recalibrate=True)
    assert len(measured) == 4


def test_a_cells_meta_tests_during_training_are_in_its_cost(tmp_path, monkeypatch):
    """ML10 RL2 at 2e7 steps (200 iterations of 1e5), --eval-every-steps 1e6: 20 meta-tests on
    the periodic subset (20 of the 200 test goals) besides the final ones."""
    times = replace(TIMES, steps_per_iteration=100_000)
    monkeypatch.setattr(calibration, "calibrate", lambda cell: times)
    (cell,) = plan(["ML10"], ["rl2-ppo-metaworld"], [0], "paper", tmp_path,
                   eval_every_steps=1_000_000)  # fmt: skip
    [(_, cost)] = predict_cells([cell], CalibrationCache(tmp_path / "calibration.json"))
    final = metatest_sizes(cell_plan(cell))
    assert cell.steps == 20_000_000 and final[0] == 200
    expected = 4.0 + 200 * 10.0 + 20 * (3.0 + 20 * 0.5) + sum(3.0 + n * 0.5 for n in final)
    assert cost.total_s == pytest.approx(expected)
    without = replace(cell, eval_schedule=MetaTestSchedule())
    [(_, cost)] = predict_cells([without], CalibrationCache(tmp_path / "calibration.json"))
    assert cost.total_s == pytest.approx(expected - 20 * (3.0 + 20 * 0.5))


def test_a_calibration_measures_the_cell_as_it_would_run(tmp_path):
    cell = plan(["Bandit"], ["rl2-ppo"], [0], "quick", tmp_path)[0]
    times = calibrate(cell)
    run = cell_plan(cell)
    algo: MetaRLAlgorithm = build_algorithm(run.spec, run.config, None)
    assert times.steps_per_iteration == algo.steps_per_iteration > 0
    assert times.iteration_s > 0 and times.task_s > 0 and times.setup_s > 0
    assert times.metatest_fixed_s >= 0
    assert times.env_steps_per_s > 0


def test_plan_prints_each_cell_and_the_grid_on_each_executor(tmp_path, capsys):
    cells = plan(["PointGoal"], ["maml-trpo", "nop"], [0, 1], "quick", tmp_path / "runs")
    cache = CalibrationCache(tmp_path / "calibration.json")
    nop_times = CellTimes(1.0, 0.0, 0, 0.5, 0.25, 2000.0, 0.0)
    for cell in cells:
        cache.put(
            calibration_key(cell_plan(cell)), "", TIMES if cell.algorithm != "nop" else nop_times
        )
    costs = [
        cell_cost(
            TIMES if c.algorithm != "nop" else nop_times, c.steps, metatest_sizes(cell_plan(c))
        )
        for c in cells
    ]
    durations, cpus = [c.total_s for c in costs], [c.cpus for c in cells]
    args = ["plan", "--benchmarks", "PointGoal", "--algorithms", "maml-trpo", "nop", "--seeds",
            "0", "1", "--calibration", str(cache.path), "--cores", "2", "--ray-nodes", "3",
            "--node-cores", "2"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "calibrating" not in out
    assert f"one cell after another: {sum(durations) / 3600:.2f} h" in out
    assert f"local executor, 2 cores: {schedule_time(durations, cpus, 2) / 3600:.2f} h" in out
    assert f"Ray, 3 nodes x 2 cores: {cluster_time(durations, cpus, 3, 2) / 3600:.2f} h" in out


def test_plan_names_a_foreign_calibration_file(tmp_path, capsys):
    bad = tmp_path / "calibration.json"
    bad.write_text("[1, 2]")
    assert main(["plan", "--benchmarks", "PointGoal", "--algorithms", "nop", "--calibration",
                 str(bad)]) == 1  # fmt: skip
    assert "not a metabench calibration file" in capsys.readouterr().err


PEARL_POINT_GOAL = CellTimes(setup_s=3.0, iteration_s=520.0, steps_per_iteration=2000,
                             metatest_fixed_s=10.0, task_s=2.0, env_steps_per_s=1000.0,
                             initial_s=60.0)  # fmt: skip
"""PEARL on PointGoal at the pace of the trial that planned 73 h: 520 s per iteration."""


def train_args(out, *extra: str) -> list[str]:
    return ["train", "--benchmark", "PointGoal", "--algorithm", "pearl", "--out", str(out), *extra]


def test_train_says_its_predicted_time_before_it_trains(tmp_path, capsys, monkeypatch):
    """From the calibration file ``metabench plan`` keeps; the run's cores are its baseline's
    where ``--cpus`` sets none, as a grid cell's are."""
    import os

    from metabench.harness import training
    from metabench.harness.run import RunSettings

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "run"
    cell = calibration.run_cell(RunSettings("PointGoal", "pearl", 0, 1_000_000, out))
    assert cell.cpus == min(2, os.cpu_count() or 1)  # pearl.toml's cpus
    cache = CalibrationCache(calibration.default_cache())
    cache.put(calibration_key(cell_plan(cell)), "pearl", PEARL_POINT_GOAL)
    said_before_training: list[str] = []

    def fake_train(settings, before_training):
        assert capsys.readouterr().out == ""  # nothing said before the directory is claimed
        before_training()
        said_before_training.append(capsys.readouterr().out)

    monkeypatch.setattr(training, "train", fake_train)
    assert main(train_args(out, "--steps", "1000000")) == 0
    # 500 iterations of 2,000 steps after PEARL's collection, then PointGoal's 20 test tasks
    train_s, metatest_s = 60.0 + 500 * 520.0, 10.0 + 20 * 2.0
    total_h = (3.0 + train_s + metatest_s) / 3600
    assert said_before_training == [
        f"predicted: pearl on PointGoal, 1,000,000 env steps: {total_h:.2f} h on this machine "
        f"(500 iterations of 2,000 env steps at 520.0 s each, then {metatest_s / 60:.1f} min of "
        f"meta-tests; calibrated on {cell.cpus} cores)\n"
    ]


def test_train_without_a_calibration_says_how_to_get_one_and_trains(tmp_path, capsys, monkeypatch):
    from metabench.harness import training

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    trained: list[int] = []

    def fake_train(settings, before_training):
        before_training()
        trained.append(settings.env_steps)

    monkeypatch.setattr(training, "train", fake_train)
    assert main(train_args(tmp_path / "run")) == 0
    path = tmp_path / "cache" / "metabench" / "calibration.json"
    assert capsys.readouterr().out == (
        f"no predicted time for pearl on PointGoal, 2,000 env steps: {path} holds no calibration "
        f"of these settings on this machine; the same command with --predict measures one (one "
        f"training iteration and two meta-tests) and stops before training\n"
    )
    assert trained == [2_000]  # pearl.toml's [train_steps]: one iteration, not 500


def test_train_predict_measures_keeps_and_prints_the_prediction_without_training(
    tmp_path, capsys, monkeypatch
):
    from metabench.harness import training

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    measured: list[tuple[str, str, int]] = []

    def fake_calibrate(cell):
        measured.append((cell.benchmark, cell.algorithm, cell.cpus))
        return PEARL_POINT_GOAL

    monkeypatch.setattr(calibration, "calibrate", fake_calibrate)
    monkeypatch.setattr(training, "train", lambda *args, **kwargs: pytest.fail("--predict trained"))
    assert main(train_args(tmp_path / "run", "--predict", "--cpus", "1")) == 0
    captured = capsys.readouterr()
    assert measured == [("PointGoal", "pearl", 1)]
    assert "calibrating (one training iteration and two meta-tests) ..." in captured.err
    total_min = (3.0 + 60.0 + 520.0 + 10.0 + 20 * 2.0) / 60  # one iteration: 2,000 steps
    assert captured.out.startswith(
        f"predicted: pearl on PointGoal, 2,000 env steps: {total_min:.1f} min on this machine "
        f"(1 iteration of 2,000 env steps"
    )
    assert not (tmp_path / "run").exists()
    # kept: the next run says it without measuring
    monkeypatch.setattr(training, "train", lambda settings, before_training: before_training())
    assert main(train_args(tmp_path / "run", "--cpus", "1")) == 0
    assert capsys.readouterr().out.startswith("predicted: pearl on PointGoal, 2,000 env steps")
    assert len(measured) == 1


def test_train_says_no_prediction_before_it_refuses_an_out_of_another_run(
    tmp_path, capsys, monkeypatch
):
    """A refusal (here: --out holds a run of another seed) is the only thing said, and a
    finished run is reported as finished, without a prediction of a training that never runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert main(["train", "--benchmark", "PointGoal", "--algorithm", "nop", "--seed", "0",
                 "--out", str(out)]) == 0  # fmt: skip
    assert "no predicted time for nop" in capsys.readouterr().out
    assert main(["train", "--benchmark", "PointGoal", "--algorithm", "nop", "--seed", "1",
                 "--out", str(out)]) == 1  # fmt: skip
    refused = capsys.readouterr()
    assert "holds a different run (differs in: " in refused.err
    assert "predicted" not in refused.out + refused.err
    assert main(["train", "--benchmark", "PointGoal", "--algorithm", "nop", "--seed", "0",
                 "--out", str(out)]) == 0  # fmt: skip
    finished = capsys.readouterr()
    assert "is already complete" in finished.err
    assert "predicted" not in finished.out + finished.err
