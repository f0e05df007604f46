"""The training loop's contract with its hooks: what each hook point sees, and stopping."""

from __future__ import annotations

import io
import signal
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from metabench.algos.base import MetaRLAlgorithm
from metabench.harness import hooks
from metabench.harness.hooks import Checkpoints, ProgressBar, StopOnInterrupt
from metabench.harness.run import RunDirectory
from metabench.harness.trainer import Hook, MetaTest, MetaTrainer


class Counter(MetaRLAlgorithm):
    """Counts its iterations; each returns the count as its meta-train return."""

    steps_per_iteration = 10

    def __init__(self) -> None:
        self.count = 0

    def train(self, n_iterations: int) -> dict[str, float]:
        self.count += n_iterations
        return {"metatrain/average_return": self.count}

    def get_exploration_policy(self) -> Any:
        raise NotImplementedError

    def adapt_policy(self, exploration_policy: Any, exploration_episodes: Any) -> Any:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


class Recorder(Hook):
    """Records every call it gets; asks to stop at ``stop_at``."""

    def __init__(self, name: str = "hook", calls: list[Any] | None = None, stop_at: int = 0):
        self.name, self.stop_at = name, stop_at
        self.calls: list[Any] = [] if calls is None else calls

    def on_start(self, trainer: MetaTrainer) -> None:
        self.calls.append((self.name, "start", trainer.iteration))

    def after_iteration(
        self, trainer: MetaTrainer, iteration: int, stats: dict[str, float]
    ) -> bool:
        self.calls.append((self.name, iteration, dict(stats), trainer.env_steps, trainer.stopping))
        return iteration == self.stop_at

    def on_training_end(self, trainer: MetaTrainer) -> None:
        self.calls.append((self.name, "training end", trainer.iteration))

    def before_metatest(self, trainer: MetaTrainer, metatest: MetaTest) -> None:
        self.calls.append((self.name, "before", metatest.name))

    def after_metatest(self, trainer: MetaTrainer, metatest: MetaTest, result: Any) -> None:
        self.calls.append((self.name, "after", metatest.name, result))

    def on_end(self, trainer: MetaTrainer) -> None:
        self.calls.append((self.name, "end"))


class FakeEvaluator:
    """Stands in for a MetaEvaluator: its result is the algorithm's count when it ran."""

    def evaluate(self, algo: Counter, processes: int | None = None) -> str:
        return f"count {algo.count}, processes {processes}"


def test_a_hook_sees_every_iteration_in_order_then_the_meta_tests():
    hook = Recorder()
    metatests = [MetaTest("metatest", FakeEvaluator(), 2), MetaTest("other", FakeEvaluator())]
    results = MetaTrainer(Counter(), 3).run([hook], metatests)
    assert results == {"metatest": "count 3, processes 2", "other": "count 3, processes None"}
    assert hook.calls == [
        ("hook", "start", 0),
        ("hook", 1, {"metatrain/average_return": 1.0}, 10, False),
        ("hook", 2, {"metatrain/average_return": 2.0}, 20, False),
        ("hook", 3, {"metatrain/average_return": 3.0}, 30, False),
        ("hook", "training end", 3),
        ("hook", "before", "metatest"),
        ("hook", "after", "metatest", "count 3, processes 2"),
        ("hook", "before", "other"),
        ("hook", "after", "other", "count 3, processes None"),
        ("hook", "end"),
    ]


def test_a_hook_stops_training_after_every_hook_saw_the_iteration():
    calls: list[Any] = []
    hooks = [
        Recorder("first", calls),
        Recorder("stopper", calls, stop_at=2),
        Recorder("last", calls),
    ]
    algo = Counter()
    trainer = MetaTrainer(algo, 5)
    assert trainer.run(hooks, [MetaTest("metatest", FakeEvaluator())]) == {}
    assert algo.count == 2 and trainer.iteration == 2 and trainer.stopping
    iteration_2 = [call[:1] + call[-1:] for call in calls if call[1] == 2]
    assert iteration_2 == [("first", False), ("stopper", False), ("last", True)]
    assert not any(call[1] in ("before", "after") for call in calls)  # no final meta-test
    assert calls[-6:] == [
        ("first", "training end", 2), ("stopper", "training end", 2), ("last", "training end", 2),
        ("last", "end"), ("stopper", "end"), ("first", "end"),
    ]  # fmt: skip


def test_hooks_end_in_reverse_order_when_training_fails():
    class Failing(Counter):
        def train(self, n_iterations: int) -> dict[str, float]:
            raise RuntimeError("diverged")

    calls: list[Any] = []
    with pytest.raises(RuntimeError, match="diverged"):
        MetaTrainer(Failing(), 3).run([Recorder("a", calls), Recorder("b", calls)])
    assert calls == [("a", "start", 0), ("b", "start", 0), ("b", "end"), ("a", "end")]


class SavedIterations(RunDirectory):
    def __init__(self, path: Any) -> None:
        super().__init__(path)
        self.saved: list[int] = []

    def save_checkpoint(self, state: dict[str, Any], algorithm: str = "the algorithm") -> None:
        self.saved.append(state["iteration"])
        super().save_checkpoint(state, algorithm)


def test_checkpoints_are_written_every_n_iterations_and_at_the_last(tmp_path):
    run = SavedIterations(tmp_path)
    MetaTrainer(Counter(), 7).run([Checkpoints(run, 3)])
    assert run.saved == [3, 6, 7]
    state = run.load_checkpoint()
    assert state is not None
    assert (state["iteration"], state["algorithm"], state["metatrain"]) == (
        7, {"count": 7}, {"metatrain/average_return": 7.0},
    )  # fmt: skip


def test_a_stopped_run_checkpoints_where_it_stopped_and_resumes_to_the_same_iterations(tmp_path):
    run = SavedIterations(tmp_path)
    MetaTrainer(Counter(), 7).run([Recorder(stop_at=4), Checkpoints(run, 3)])
    assert run.saved == [3, 4]

    whole, resumed = Recorder(), Recorder()
    MetaTrainer(Counter(), 7).run([whole])
    trainer = MetaTrainer(Counter(), 7)
    state = run.load_checkpoint()
    assert state is not None
    trainer.resume(state)
    trainer.run([resumed, Checkpoints(run, 3)])
    assert run.saved == [3, 4, 6, 7]
    assert resumed.calls[0] == ("hook", "start", 4)
    assert resumed.calls[1:4] == whole.calls[5:8]  # iterations 5 to 7, the same stats


def test_ctrl_c_stops_after_the_iteration_with_a_checkpoint_then_interrupts(tmp_path):
    class CtrlC(Hook):
        def after_iteration(self, trainer: MetaTrainer, iteration: int, stats: Any) -> bool:
            if iteration == 2:
                signal.raise_signal(signal.SIGINT)  # the first Ctrl-C only asks to stop
            return False

    output = io.StringIO()
    run, before = SavedIterations(tmp_path), signal.getsignal(signal.SIGINT)
    algo = Counter()
    with pytest.raises(KeyboardInterrupt):
        MetaTrainer(algo, 10).run(
            [CtrlC(), StopOnInterrupt(Console(file=output)), Checkpoints(run, 5)]
        )
    assert algo.count == 2 and run.saved == [2]
    assert "stopping after this iteration" in output.getvalue()
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_during_the_final_metatest_interrupts_it_at_once(tmp_path):
    class CtrlCEvaluator(FakeEvaluator):
        tasks_done = 0

        def evaluate(self, algorithm: Any, processes: int | None = None) -> Any:
            for _ in range(5):  # five test tasks; Ctrl-C after the second
                self.tasks_done += 1
                if self.tasks_done == 2:
                    signal.raise_signal(signal.SIGINT)
            return super().evaluate(algorithm, processes)

    output = io.StringIO()
    run, before = SavedIterations(tmp_path), signal.getsignal(signal.SIGINT)
    evaluator = CtrlCEvaluator()
    with pytest.raises(KeyboardInterrupt):
        MetaTrainer(Counter(), 3).run(
            [StopOnInterrupt(Console(file=output)), Checkpoints(run, 5)],
            [MetaTest("metatest", evaluator)],
        )
    assert evaluator.tasks_done == 2  # not the whole meta-test, then a success
    assert run.saved == [3]  # the last iteration's checkpoint: the command runs it again
    assert "stopping after this iteration" not in output.getvalue()
    assert signal.getsignal(signal.SIGINT) is before


class FakeClock:
    """``time.monotonic`` advancing ``tick`` seconds per call."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now - self.tick


class ResultEvaluator:
    """Stands in for a MetaEvaluator whose result carries the figures a progress line shows."""

    def evaluate(self, algo: Counter, processes: int | None = None) -> Any:
        count = SimpleNamespace(success_rate=0.5)
        return SimpleNamespace(
            n_tasks=4,
            test_return=float(algo.count),
            test_episode_success_rate=0.25,
            metaworld=count,
        )


class MetaTestAt(Hook):
    """A meta-test during training (no description, as ``PeriodicMetaTest``'s) at ``iteration``."""

    def __init__(self, iteration: int) -> None:
        self.iteration = iteration

    def after_iteration(self, trainer: MetaTrainer, iteration: int, stats: Any) -> bool:
        if iteration == self.iteration:
            trainer.metatest(MetaTest("periodic_metatest", ResultEvaluator()))
        return False


def test_a_log_gets_progress_lines_spaced_in_time_and_one_per_meta_test(monkeypatch):
    """Outside a terminal: a line when ``line_every_s`` has passed since the last one and after
    the last iteration, its time per iteration counted from the resume."""
    monkeypatch.setattr(hooks.time, "monotonic", FakeClock(tick=10.0))  # 10 s per iteration
    output = io.StringIO()
    trainer = MetaTrainer(Counter(), 8)
    trainer.resume({"iteration": 2, "algorithm": {"count": 2}, "wall_time": 0.0, "metatrain": {}})
    console = Console(file=output, width=80, force_terminal=False)
    bar = ProgressBar(console, "Toy counter seed 0", line_every_s=25.0)
    trainer.run(
        [MetaTestAt(4), bar], [MetaTest("metatest", ResultEvaluator(), None, "meta-testing")]
    )
    # clock: start 0; iterations 3..8 at 10..60 s; lines at 10 (first), 40 (30 s after), 60 (last)
    assert output.getvalue().splitlines() == [
        "Toy counter seed 0: iteration 3/8, 30 env steps, 10.0 s per iteration, 0.8 min left, "
        "meta-train return 3.00",
        "Toy counter seed 0: meta-test at iteration 4 (40 env steps, 4 test tasks): test return "
        "4.00, success 0.25, Meta-World's count 0.50",
        "Toy counter seed 0: iteration 6/8, 60 env steps, 10.0 s per iteration, 0.3 min left, "
        "meta-train return 6.00",
        "Toy counter seed 0: iteration 8/8, 80 env steps, 10.0 s per iteration, 0.0 min left, "
        "meta-train return 8.00",
        "Toy counter seed 0: meta-testing",
    ]


def test_a_terminal_gets_a_bar_and_the_meta_test_lines_but_no_progress_lines():
    output = io.StringIO()
    console = Console(file=output, width=200, force_terminal=True)
    MetaTrainer(Counter(), 5).run([MetaTestAt(2), ProgressBar(console, "Toy seed 0", 0.0)])
    text = output.getvalue()
    assert "Toy seed 0: meta-test at iteration 2 (20 env steps, 4 test tasks)" in text
    assert "5/5" in text and "s per iteration" not in text
