"""``metabench bench`` before and while its cells run: a file of the user's is found before any
cell runs, the plan is recorded for ``metabench status``, and progress shows off a terminal."""

import io
from collections.abc import Iterator, Sequence

import pytest
from rich.console import Console

from metabench.analysis.generated import write_generated
from metabench.cli import main
from metabench.errors import RunError
from metabench.harness.cells import Cell
from metabench.harness.grid import plan, run_grid
from metabench.harness.status import RunStatus, find_runs, run_status


class RecordingExecutor:
    """Runs nothing: records the cells it was given and, before yielding any, what ``metabench
    status`` shows of the grid's folder (as it would while the first cell runs)."""

    def __init__(self, outcomes: Sequence[str | None] = ()) -> None:
        self.outcomes = list(outcomes)
        self.ran: list[Cell] = []
        self.seen: list[RunStatus] = []

    def run(self, cells: Sequence[Cell]) -> Iterator[tuple[Cell, str | None]]:
        if cells:
            root = cells[0].out.parent.parent
            self.seen = [run_status(path) for path in find_runs(root)]
        for k, cell in enumerate(cells):
            self.ran.append(cell)
            yield cell, self.outcomes[k] if k < len(self.outcomes) else None

    def close(self) -> None:
        """Nothing to release."""


def text_console() -> tuple[Console, io.StringIO]:
    """A console that writes to a string, as one writing to a log file or a pipe does."""
    buffer = io.StringIO()
    return Console(file=buffer, width=200), buffer


def test_a_readme_of_the_users_is_refused_before_any_cell_runs(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# my notes\n")
    cells = plan(["Bandit"], ["nop"], [0, 1], "quick", tmp_path)
    executor = RecordingExecutor()
    with pytest.raises(RunError, match=r"README.md was not written by metabench.*--results"):
        run_grid(cells, executor, text_console()[0])
    assert executor.ran == []
    assert readme.read_text() == "# my notes\n"


def test_bench_into_a_folder_with_a_readme_of_the_users_runs_no_cell(tmp_path, capsys):
    (tmp_path / "README.md").write_text("# my notes\n")
    args = ["bench", "--benchmarks", "Bandit", "--algorithms", "nop", "--results", str(tmp_path)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'README.md'} was not written by metabench" in err
    assert not (tmp_path / "Bandit").exists()  # no cell started


def test_a_readme_metabench_wrote_does_not_stop_the_grid(tmp_path):
    cells = plan(["Bandit"], ["nop"], [0], "quick", tmp_path)
    executor = RecordingExecutor()
    write_generated(tmp_path, {"README.md": b"# Results\n"}, "--results")
    run_grid(cells, executor, text_console()[0])
    assert executor.ran == cells


def test_off_a_terminal_each_finished_cell_prints_one_line(tmp_path):
    cells = plan(["Bandit"], ["nop", "cem"], [0, 1], "quick", tmp_path)
    console, buffer = text_console()
    run_grid(cells, RecordingExecutor([None, "boom", None, None]), console)
    lines = [line for line in buffer.getvalue().splitlines() if line.startswith("grid: ")]
    assert len(lines) == len(cells)
    for k, (line, cell) in enumerate(zip(lines, cells, strict=True), start=1):
        state = "FAILED" if k == 2 else "done"
        assert line.startswith(f"grid: {k}/4 cells, ") and line.endswith(f"{cell.label}: {state}")


def test_status_during_a_grid_lists_every_planned_cell(tmp_path):
    cells = plan(["Bandit", "PointGoal"], ["nop"], [0, 1], "quick", tmp_path)
    executor = RecordingExecutor()
    run_grid(cells, executor, text_console()[0])
    seen = {(s.benchmark, s.algorithm, s.seed): s for s in executor.seen}
    assert set(seen) == {(c.benchmark, c.algorithm, c.seed) for c in cells}
    for cell in cells:
        status = seen[(cell.benchmark, cell.algorithm, cell.seed)]
        assert status.path == cell.out and status.state == "not started"
        assert status.env_steps_budget == status.planned_env_steps == cell.steps
    # from a benchmark's folder or a cell's own (not created yet), the cells there only
    bandit = tmp_path / "Bandit"
    assert find_runs(bandit) == sorted(c.out for c in cells if c.benchmark == "Bandit")
    assert run_status(cells[0].out).state == "not started"


def test_status_cli_shows_the_cells_not_started(tmp_path, capsys):
    cells = plan(["Bandit"], ["nop"], [0, 1], "quick", tmp_path)
    run_grid(cells, RecordingExecutor(), text_console()[0])
    assert main(["status", "--unfinished", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("not started") == 2
    assert "Bandit / nop / 0" in out and "Bandit / nop / 1" in out
