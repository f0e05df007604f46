"""The ``metabench`` command."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

if TYPE_CHECKING:
    from metabench.analysis.stats import Summary
    from metabench.harness.cells import Cell


INTERRUPTED = "interrupted; run the same command to resume"
"""What Ctrl-C prints (exit code 130): runs and grids resume from their checkpoints."""


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Ends an option's help with ``(default: ...)``, a list as it is typed (``0 1``), unless
    there is no default to show (a required option, ``None``, an empty list, a flag's ``False``)
    or the help already says what it is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        flag = isinstance(action, argparse._StoreTrueAction)
        if flag or action.default in (None, []) or "default" in (action.help or ""):
            return action.help
        if isinstance(action.default, list):
            return f"{action.help} (default: {' '.join(map(str, action.default))})"
        return super()._get_help_string(action)

    def _split_lines(self, text: str, width: int) -> list[str]:
        """argparse's wrapping, without breaking a name at its hyphen (``maml-`` / ``trpo``)."""
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (``metabench train: error: ...``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0 (a seed), with an error that says so."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def seed_value(text: str) -> int:
    """An argparse type for ``--seed`` and ``--seeds``: an integer from 0 to 2**32 - 1, the
    seeds every algorithm's generators take (a larger one failed in some algorithms, deep in
    their generators and without naming the option, and was taken by others)."""
    from metabench.validation import MAX_SEED, check_seed

    try:
        return check_seed(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer from 0 to 2**32 - 1 ({MAX_SEED}), got {text!r}"
        ) from None


def spec_name(kind: Literal["envs", "baselines"], names: Sequence[str]) -> Callable[[str], str]:
    """An argparse type for a benchmark (``kind="envs"``) or an algorithm (``"baselines"``) of
    ``names``: an unknown one says which there are and where a spec file of one's own is looked
    for (``METABENCH_SPECS``), where argparse's ``choices`` said only "invalid choice"."""
    from metabench.harness.specfiles import unknown_name_message

    def known(text: str) -> str:
        if text not in names:
            raise argparse.ArgumentTypeError(unknown_name_message(kind, text, names))
        return text

    return known


def listed_name(names: Sequence[str]) -> Callable[[str], str]:
    """An argparse type for ``metabench list``'s names: a benchmark or an algorithm of ``names``,
    an unknown one answered with the closest."""

    def known(text: str) -> str:
        if text not in names:
            close = difflib.get_close_matches(text, names, n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise argparse.ArgumentTypeError(
                f"no benchmark or algorithm is called {text!r}{guess}: metabench list, without "
                f"names, lists them all"
            )
        return text

    return known


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1, with an error that says so."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def machine_cpus(text: str) -> int:
    """An argparse type for ``--cpus``: a positive integer, at most this machine's cores (a
    larger one is a typo or another machine's count, and would be recorded as the run's)."""
    value = positive_int(text)
    cores = os.cpu_count() or 1
    if value > cores:
        raise argparse.ArgumentTypeError(
            f"{value} is more than the {cores} cores of this machine: use at most {cores}"
        )
    return value


def test_task_choice(text: str) -> int | Literal["periodic"]:
    """An argparse type for ``evaluate --test-tasks``: a positive integer or ``periodic``."""
    if text == "periodic":
        return "periodic"
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or 'periodic', got {text!r}"
        ) from None


def device_option(text: str) -> str:
    """An argparse type for ``--device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``, refused at
    once where it names a GPU torch does not see (the run would fail after building its envs)."""
    from metabench.devices import DeviceError, resolve_device

    try:
        resolve_device(text)
    except DeviceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def hyperparameter(text: str) -> tuple[str, Any]:
    """An argparse type for ``--set KEY=VALUE``; VALUE is read as JSON when it parses as JSON."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def build_parser() -> argparse.ArgumentParser:
    from metabench.harness.algorithms import DEFAULT_TRAIN_STEPS, load_algorithms
    from metabench.harness.benchmarks import load_benchmarks

    benchmarks = load_benchmarks()  # envs/*.toml
    algorithms = load_algorithms()  # baselines/*.toml
    profiles = sorted({name for entry in algorithms.values() for name, _, _ in entry.profiles})

    parser = OneLineParser(
        prog="metabench",
        description="Meta-RL benchmarks: task envs, RL2, MAML and PEARL, meta-test evaluation.",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, show the full traceback instead of one line (before the command: "
        "metabench --debug train ...)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run a random policy through RL2 trials of HalfCheetahVel and ML10 tasks",
        description=(
            "Sample tasks of HalfCheetahVel and of Meta-World ML10's test split, run one RL2 trial "
            "per task with random actions, and print the return of every episode."
        ),
    )
    demo.add_argument("--tasks", type=positive_int, default=5, help="tasks per benchmark (5)")
    demo.add_argument(
        "--episodes-per-trial", type=positive_int, default=2, help="episodes per trial (2)"
    )
    demo.add_argument("--seed", type=seed_value, default=0, help="seed for tasks and actions (0)")
    demo.add_argument(
        "--no-metaworld", action="store_true", help="skip ML10 (saves ~10 s of set-up)"
    )

    train = commands.add_parser(
        "train",
        help="meta-train an algorithm on a benchmark, then meta-test it on held-out tasks",
        description=(
            "Meta-train, meta-test on the benchmark's held-out tasks, and write result.json to "
            "the output directory. Checkpoints are written atomically; running the same command "
            "again after an interruption resumes from the last one."
        ),
        epilog="metabench list says what each benchmark and algorithm is, and every "
        "hyperparameter --set takes. Before training, train prints the run's predicted wall time "
        "where metabench plan's calibration file holds its settings (--predict measures them).",
        formatter_class=DefaultsHelpFormatter,
    )
    train.add_argument(
        "--benchmark", required=True, type=spec_name("envs", sorted(benchmarks)),
        metavar="BENCHMARK", help=f"the benchmark, one of: {', '.join(sorted(benchmarks))}",
    )  # fmt: skip
    train.add_argument(
        "--algorithm", required=True, type=spec_name("baselines", sorted(algorithms)),
        metavar="ALGORITHM",
        help=f"the algorithm, one of: {', '.join(sorted(algorithms))}; one of your own is "
        "found through METABENCH_SPECS (docs/own-algorithm.md)",
    )  # fmt: skip
    train.add_argument(
        "--seed",
        type=seed_value,
        default=0,
        help="seed of training and test tasks (0 to 2**32 - 1)",
    )
    train.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        help="meta-training budget in environment steps of the iterations (whole iterations only, "
        "never more); an initial collection (PEARL's) comes on top, and the steps a run "
        "records include it (default: the algorithm's [train_steps] for the benchmark in its "
        f"baselines/*.toml, minutes on the toys; else {DEFAULT_TRAIN_STEPS:,})",
    )
    train.add_argument(
        "--out",
        type=Path,
        default=None,
        help="run directory (default: runs/<benchmark>-<algorithm>-seed<seed>)",
    )
    periodic = train.add_mutually_exclusive_group()
    periodic.add_argument(
        "--eval-every", type=non_negative_int, default=0, metavar="N",
        help="meta-test every N iterations during training (0: only at the end). These "
        "meta-tests use the benchmark's [evaluation] periodic_test_tasks when it sets them "
        "(Meta-World: a few)",
    )  # fmt: skip
    periodic.add_argument(
        "--eval-every-steps", type=non_negative_int, default=0, metavar="S",
        help="meta-test after the first iteration at or past every S env steps instead (the "
        "same curve points for algorithms of different iteration sizes; 0: only at the end)",
    )  # fmt: skip
    train.add_argument(
        "--checkpoint-every", type=positive_int, default=10, help="checkpoint every N iterations"
    )
    train.add_argument(
        "--cpus",
        type=machine_cpus,
        default=None,
        help="cores the run may use: bounds the worker processes that step its envs, and its "
        "torch threads, which are 1 but for an algorithm's update_threads (an update_threads "
        "above --cpus is an error); recorded in config.json (metabench bench sets it from the "
        "baseline's cpus; default: no bound)",
    )
    train.add_argument(
        "--device", type=device_option, default="cpu",
        help="where the networks act and train: cpu, cuda (cuda:N) or auto (cuda where torch "
        "sees a GPU); the envs always step on the CPU, and so do the algorithms without "
        "networks (nop, cem, cmaes). A GPU is recorded in config.json",
    )  # fmt: skip
    train.add_argument(
        "--set",
        dest="overrides",
        type=hyperparameter,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one hyperparameter (repeatable), e.g. --set learning_rate=3e-4",
    )
    train.add_argument(
        "--predict", action="store_true",
        help="print the run's predicted wall time on this machine and stop, without training: "
        "measures the machine first (one training iteration and two meta-tests, as metabench "
        "plan does) unless the calibration file (metabench plan's, ~/.cache/metabench/"
        "calibration.json) holds these settings",
    )  # fmt: skip

    evaluate = commands.add_parser(
        "evaluate",
        help="meta-test the latest checkpoint of a run, or the trained agent of a finished one",
        description="Meta-test the latest checkpoint of a run directory (a finished run: its "
        "trained agent, agent.pt) and print the result. Without options this is the run's own "
        "final meta-test again, and says whether it gives the numbers of its result.json; the "
        "options meta-test the same agent under another protocol.",
    )
    evaluate.add_argument("run_dir", type=Path, help="a directory written by metabench train")
    evaluate.add_argument(
        "--test-tasks",
        type=test_task_choice,
        default=None,
        metavar="N|periodic",
        help="meta-test on N of the run's test tasks, the first of each class, as many of each "
        "(ML10: a multiple of 5), or on those of its meta-tests during training (periodic); "
        "default: all of them",
    )
    evaluate.add_argument(
        "--exploration-episodes", type=positive_int, default=None, help="episodes before adapting"
    )
    evaluate.add_argument(
        "--test-episodes", type=positive_int, default=None, help="episodes after adapting"
    )
    evaluate.add_argument(
        "--test-actions", choices=("mode", "sample"), default=None,
        help="the test episodes act with the mode of the action distribution (Meta-World+'s "
        "protocol) or sample from it (garage's); default: as the run's deterministic_test says",
    )  # fmt: skip
    evaluate.add_argument(
        "--out", type=Path, default=None,
        help="the folder to write the evaluation's file into (default: the run's evaluations/), "
        "e.g. for a run that cannot be written to",
    )  # fmt: skip
    evaluate.add_argument(
        "--device", type=device_option, default=None,
        help="where the networks act (cpu, cuda or auto; default: where the run trained), e.g. "
        "cpu for a run trained on a GPU",
    )  # fmt: skip

    status = commands.add_parser(
        "status",
        help="show how far each run is, whether it is still going, and its latest meta-test",
        description="For each run directory (a --out of metabench train, or every one below a "
        "folder such as a grid's --results): finished, running (a process holds its lock), "
        "stopped (a checkpoint to resume from), failed (a grid cell's error.json) or not "
        "started; env steps done of the run's total (an initial collection included), training "
        "time so far and left at that pace, "
        "and the latest meta-test (the final one, or the latest periodic one, which may use "
        "fewer test tasks). Under the table, the command that resumes each stopped run, as "
        "it recorded it. Reads the files only: safe beside a running run.",
        formatter_class=DefaultsHelpFormatter,
    )
    status.add_argument(
        "paths", nargs="*", type=Path, default=[Path("runs")], metavar="PATH",
        help="run directories, or folders to search for them",
    )  # fmt: skip
    status.add_argument(
        "--unfinished", action="store_true",
        help="list only the runs without a result (running, stopped, failed or not started)",
    )  # fmt: skip

    bench = commands.add_parser(
        "bench",
        help="run a grid of benchmarks x algorithms x seeds and print the results table",
        description=(
            "Run every cell of the grid (one metabench train per benchmark, algorithm and seed) "
            "on this machine or a Ray cluster, skip cells that already have a result (stop at one "
            "of other settings; extend one of a smaller budget), record "
            "failing cells and go on, then write <results>/README.md and print the table. Run "
            "the same command again to finish an interrupted grid."
        ),
        epilog="metabench plan, with the same grid options, predicts how long the grid takes "
        "on this machine before you start it.",
        formatter_class=DefaultsHelpFormatter,
    )
    grid_arguments(bench, list(benchmarks), list(algorithms), profiles)
    bench.add_argument("--results", type=Path, default=Path("runs/grid"), help="where the runs go")
    bench.add_argument(
        "--executor", default="local", choices=["local", "ray"],
        help="where cells run: local (a pool of processes on this machine) or ray (a Ray "
        "cluster; each cell a task asking for the cores its baseline declares)",
    )  # fmt: skip
    bench.add_argument(
        "--address", default="auto", metavar="HOST:PORT",
        help="ray executor: the cluster's address, as 'ray start --head' prints it, or "
        "ray://HOST:PORT; auto: the cluster running on this machine, or RAY_ADDRESS",
    )  # fmt: skip

    plan = commands.add_parser(
        "plan",
        help="predict the wall time of a bench grid on this machine, locally and on Ray",
        description=(
            "Predict each cell's wall time, and the grid's on the local executor and on N Ray "
            "nodes like this machine, from a calibration of this machine: one training "
            "iteration, two meta-tests of different sizes (a meta-test's fixed and per-task "
            "cost) and the env-only step rate of each benchmark x algorithm, measured once "
            "(seconds to minutes each) and kept in --calibration. "
            "Nothing is trained or written besides that file."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    grid_arguments(plan, list(benchmarks), list(algorithms), profiles)
    plan.add_argument(
        "--ray-nodes", nargs="*", type=positive_int, default=[], metavar="N",
        help="also predict the grid on N Ray nodes (each of --node-cores cores), e.g. 2 4 8",
    )  # fmt: skip
    plan.add_argument(
        "--node-cores", type=positive_int, default=os.cpu_count() or 1,
        help="cores of each Ray node (default: this machine's)",
    )  # fmt: skip
    plan.add_argument(
        "--calibration", type=Path, default=None,
        help="the calibration file (default: ~/.cache/metabench/calibration.json)",
    )  # fmt: skip
    plan.add_argument(
        "--recalibrate", action="store_true",
        help="measure every cell's calibration again instead of reusing the file's",
    )  # fmt: skip

    listing = commands.add_parser(
        "list",
        help="list the benchmarks and algorithms (from envs/ and baselines/)",
        description="List every benchmark of envs/*.toml and every algorithm of "
        "baselines/*.toml (and of $METABENCH_SPECS), with what each is and, for an algorithm, "
        "its hyperparameters; or only the ones named.",
    )
    listing.add_argument(
        "names", nargs="*", metavar="NAME",
        type=listed_name([*sorted(benchmarks), *sorted(algorithms)]),
        help="benchmarks or algorithms to show (default: all)",
    )  # fmt: skip

    table = commands.add_parser(
        "table",
        help="write the results tables (Markdown, CSV) and plots from the result files",
        description="Collect every result.json below --results and write README.md (summary "
        "with Student's t intervals over seeds, performance profiles and probabilities of "
        "improvement between algorithms, per-run rows, failed grid cells, commands, "
        "published references), summary.csv and plots/ in --out. Only files metabench wrote "
        "there before are replaced: a file of your own, or one you edited, is refused.",
        formatter_class=DefaultsHelpFormatter,
    )
    table.add_argument("--results", type=Path, default=Path("results"), help="folder to scan")
    table.add_argument(
        "--out", type=Path, default=None,
        help="folder for README.md, summary.csv and plots/ (default: the --results folder)",
    )  # fmt: skip

    plot = commands.add_parser(
        "plot",
        help="plot adaptation curves (return per episode of the trial) and returns per test "
        "task from result files",
        description="One PNG per benchmark: return (and success) against episode index within "
        "the trial, one line per algorithm, with a 95% bootstrap band over seeds. Where a "
        "benchmark's task is one number (HalfCheetahVel's velocity), a second PNG: the "
        "post-adaptation return of each test task against that number. Where a benchmark has "
        "several algorithms, rliable's performance profile and probability of improvement "
        "over seeds.",
        formatter_class=DefaultsHelpFormatter,
    )
    plot.add_argument("--results", type=Path, default=Path("results"), help="folder to scan")
    plot.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the PNGs go in <out>/plots, as table --out writes them (default: the --results "
        "folder)",
    )
    return parser


def grid_arguments(
    command: argparse.ArgumentParser,
    benchmarks: Sequence[str],
    algorithms: Sequence[str],
    profiles: Sequence[str],
) -> None:
    """The options that name a grid's cells, shared by ``bench`` and ``plan``."""
    command.add_argument(
        "--benchmarks", nargs="+", default=["HalfCheetahVel"],
        type=spec_name("envs", sorted(benchmarks)), metavar="BENCHMARK",
        help=f"benchmarks, from: {', '.join(sorted(benchmarks))}",
    )  # fmt: skip
    command.add_argument(
        "--algorithms", nargs="+",
        default=["rl2-ppo", "maml-trpo", "cem", "nop"],
        type=spec_name("baselines", sorted(algorithms)), metavar="ALGORITHM",
        help=f"algorithms, from: {', '.join(sorted(algorithms))}",
    )  # fmt: skip
    command.add_argument(
        "--seeds", nargs="+", type=seed_value, default=[0],
        help="seeds (a seed given twice runs once)",
    )  # fmt: skip
    command.add_argument(
        "--profile", default="quick", choices=profiles,
        help="budgets and settings from each baseline's [profiles.NAME]: quick (minutes per "
        "cell), reduced (the budgets of the runs in results/) or paper (the published settings)",
    )  # fmt: skip
    command.add_argument(
        "--device", type=device_option, default="cpu",
        help="every cell's --device (cpu, cuda or auto); on Ray a cell on a GPU asks for one",
    )  # fmt: skip
    command.add_argument(
        "--cores", type=positive_int, default=os.cpu_count() or 1,
        help="local executor: the machine's cores the grid's cells share; cells run side by side "
        "while their cores fit (a cell's own cores, its metabench train --cpus, are its "
        "baseline's cpus)",
    )  # fmt: skip
    command.add_argument(
        "--eval-every-steps", type=non_negative_int, default=0, metavar="S",
        help="every cell's metabench train --eval-every-steps: a meta-test during training "
        "after every S env steps, for learning curves (0: only at the end)",
    )  # fmt: skip


def write_tables(results: Path, out: Path, option: str) -> tuple[list[Path], list[Summary]]:
    """Regenerate the Markdown page, the CSV summary and the plots of ``results`` in ``out``;
    the files written, and the summaries they show. A result file the tables cannot use is named
    in a warning (on stderr) and left out; a file of the user's in ``out`` is never replaced
    (``option`` is the command-line option that chose ``out``)."""
    from metabench.analysis.comparisons import compare
    from metabench.analysis.generated import no_results_error, write_generated
    from metabench.analysis.plots import render_plots
    from metabench.analysis.resultfile import collect_results
    from metabench.analysis.stats import summarize
    from metabench.analysis.tables import collect_failures, results_markdown, summary_csv
    from metabench.errors import RunError

    if out.exists() and not out.is_dir():
        raise RunError(
            f"{option} {out} is a file: give a folder for README.md, summary.csv, plots/"
        )
    runs, failures = collect_results(results, warn=print_warning), collect_failures(results)
    if not runs and not failures:
        raise no_results_error(results)
    summaries = summarize(runs)
    plots = {f"plots/{name}": png for name, png in render_plots(runs).items()}
    page = results_markdown(results, runs, summaries, list(plots), failures, compare(runs))
    files = {"README.md": page.encode(), "summary.csv": summary_csv(summaries).encode(), **plots}
    return write_generated(out, files, option), summaries


def print_warning(message: str) -> None:
    print(f"metabench: warning: {message}", file=sys.stderr)


def demo_command(args: argparse.Namespace) -> None:
    from metabench.demo import run_demo

    run_demo(args.tasks, args.episodes_per_trial, args.seed, metaworld=not args.no_metaworld)


def train_command(args: argparse.Namespace) -> None:
    from metabench.harness.algorithms import get_algorithm
    from metabench.harness.calibration import forecast
    from metabench.harness.run import RunSettings, recorded_command
    from metabench.harness.schedule import MetaTestSchedule
    from metabench.harness.training import train

    out = args.out or Path("runs") / f"{args.benchmark}-{args.algorithm}-seed{args.seed}"
    steps = args.steps or get_algorithm(args.algorithm).default_steps(args.benchmark)
    # the record names the budget: a default that a later version changes would change the run
    argv = sys.argv[1:] if args.steps else [*sys.argv[1:], "--steps", str(steps)]
    settings = RunSettings(
        benchmark=args.benchmark,
        algorithm=args.algorithm,
        seed=args.seed,
        env_steps=steps,
        out=out,
        hyperparameters=dict(args.overrides),
        eval_schedule=MetaTestSchedule(args.eval_every, args.eval_every_steps),
        checkpoint_every=args.checkpoint_every,
        command=recorded_command(argv, args.benchmark, args.algorithm, out),
        cpus=args.cpus,
        device=args.device,
    )

    def calibrating(cell: Cell) -> None:
        print("calibrating (one training iteration and two meta-tests) ...", file=sys.stderr)

    if args.predict:
        print(forecast(settings, measure=True, on_calibrate=calibrating), flush=True)
        return
    # said before training starts (a budget of days on a toy is seen at once), and only once
    # the run directory took the settings: never before a refusal or for a finished run
    train(settings, before_training=lambda: print(forecast(settings), flush=True))


def bench_command(args: argparse.Namespace) -> None:
    from metabench.atomic import make_writable_folder
    from metabench.errors import RunError
    from metabench.harness.executors import make_executor
    from metabench.harness.grid import plan, run_grid
    from metabench.harness.report import grid_tables, make_console

    console = make_console()
    cells = plan(args.benchmarks, args.algorithms, args.seeds, args.profile, args.results,
                 args.device, args.eval_every_steps)  # fmt: skip
    make_writable_folder(args.results, "--results")
    if args.address != "auto" and args.executor != "ray":
        raise RunError("--address is for the ray executor: add --executor ray")
    executor = make_executor(args.executor, cores=args.cores, address=args.address)
    try:
        outcome = run_grid(cells, executor, console)
    finally:
        executor.close()
    _, summaries = write_tables(args.results, args.results, "--results")
    for table in grid_tables(summaries, title=f"metabench bench --profile {args.profile}"):
        console.print(table)
    console.print(f"Tables and plots: {args.results / 'README.md'}, {args.results / 'plots'}")
    if any(error is not None for error in outcome.values()):
        raise RunError("some cells failed: see the list above")


def plan_command(args: argparse.Namespace) -> None:
    from metabench.harness.calibration import CalibrationCache, default_cache, predict_cells
    from metabench.harness.costs import cluster_time, schedule_time
    from metabench.harness.grid import plan
    from metabench.harness.report import make_console, plan_table

    console = make_console()
    cells = plan(args.benchmarks, args.algorithms, args.seeds, args.profile, Path("runs/grid"),
                 args.device, args.eval_every_steps)  # fmt: skip
    cache = CalibrationCache(args.calibration or default_cache())

    def calibrating(cell: Cell) -> None:
        console.print(f"calibrating {cell.benchmark} {cell.algorithm} (one iteration) ...")

    predictions = predict_cells(
        cells, cache, recalibrate=args.recalibrate, on_calibrate=calibrating
    )
    console.print(plan_table(cells, predictions, title=f"metabench plan --profile {args.profile}"))
    durations = [cost.total_s for _, cost in predictions]
    cell_cpus = [cell.cpus for cell in cells]
    lines = [
        f"one cell after another: {sum(durations) / 3600:.2f} h",
        f"local executor, {args.cores} core{'' if args.cores == 1 else 's'}: "
        f"{schedule_time(durations, cell_cpus, args.cores) / 3600:.2f} h",
    ]
    lines += [
        f"Ray, {nodes} nodes x {args.node_cores} core{'' if args.node_cores == 1 else 's'}: "
        f"{cluster_time(durations, cell_cpus, nodes, args.node_cores) / 3600:.2f} h"
        for nodes in args.ray_nodes
    ]
    console.print("Predicted wall time of the grid (from " + str(cache.path) + "):")
    for line in lines:
        console.print(f"  {line}")


def list_command(args: argparse.Namespace) -> None:
    from metabench.harness.report import make_console, specs_tables

    console = make_console()
    for table in specs_tables(set(args.names) or None):
        if table.row_count:
            console.print(table)


def table_command(args: argparse.Namespace) -> None:
    if not args.results.is_dir():
        raise ValueError(f"--results {args.results} is not a folder")
    for path in write_tables(args.results, args.out or args.results, "--out")[0]:
        print(f"wrote {path}")


def plot_command(args: argparse.Namespace) -> None:
    from metabench.analysis.generated import no_results_error, write_generated
    from metabench.analysis.plots import render_plots
    from metabench.analysis.resultfile import collect_results
    from metabench.errors import RunError

    if not args.results.is_dir():
        raise ValueError(f"--results {args.results} is not a folder")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise RunError(f"--out {args.out} is a file: give a folder for the plots")
    runs = collect_results(args.results, warn=print_warning)
    if not runs:
        raise no_results_error(args.results)
    plots = render_plots(runs)
    # <out>/plots, as `table --out` writes them (without --out: <results>/plots)
    out = args.results if args.out is None else args.out
    written = write_generated(out, {f"plots/{n}": p for n, p in plots.items()}, "--out")
    for path in written:
        print(f"wrote {path}")


def status_command(args: argparse.Namespace) -> None:
    from metabench.errors import RunError
    from metabench.harness.report import make_console, status_table
    from metabench.harness.status import find_runs, run_status

    console = make_console()
    unreadable = 0
    for root in args.paths:
        statuses = []
        for path in find_runs(root):
            try:
                status = run_status(path)
            except RunError as error:  # one damaged run: the others are still worth seeing
                print_warning(str(error))
                unreadable += 1
                continue
            if not (args.unfinished and status.state == "finished"):
                statuses.append(status)
        if statuses:
            console.print(status_table(statuses, root))
        elif args.unfinished:
            console.print(f"every run under {root} has finished")
        for status in statuses:
            if status.state == "stopped" and status.command is not None:
                console.print(f"to resume {status.path}: {status.command}", soft_wrap=True)
    if unreadable:
        what = "run directory" if unreadable == 1 else "run directories"
        raise RunError(f"{unreadable} {what} could not be read: see the warnings above")


def evaluate_command(args: argparse.Namespace) -> None:
    from metabench.harness.training import evaluate

    evaluate(
        args.run_dir,
        args.test_tasks,
        args.exploration_episodes,
        args.test_episodes,
        device=args.device,
        test_actions=args.test_actions,
        out=args.out,
        command=shlex.join([sys.executable, "-m", "metabench", *sys.argv[1:]]),
    )


COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {
    "demo": demo_command,
    "train": train_command,
    "evaluate": evaluate_command,
    "status": status_command,
    "bench": bench_command,
    "plan": plan_command,
    "list": list_command,
    "table": table_command,
    "plot": plot_command,
}
"""Each subcommand's handler: it runs the command from its parsed arguments, and raises what
:func:`main` turns into a one-line error and an exit code."""


def error_line(error: Exception) -> str | None:
    """The one line ``metabench: error: ...`` says for ``error``, or ``None`` for an error it
    has no line for (a bug: the traceback is shown).

    An error raised inside a third-party algorithm's code says the method, file and line it
    came from; then metabench's own errors, which say what to change.
    """
    from metabench.errors import RunError
    from metabench.harness.algorithms import load_algorithms
    from metabench.harness.plugins import user_code_error
    from metabench.harness.specfiles import SpecError

    try:
        algorithms = list(load_algorithms().values())
    except SpecError:  # the specs changed since the command started: no algorithm to blame
        algorithms = []
    third_party = [entry.module for entry in algorithms if not entry.origin.shipped]
    from_user_code = user_code_error(error, third_party)
    if from_user_code is not None:
        return f"{from_user_code} (metabench --debug ... shows the traceback)"
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    if isinstance(error, (RunError, ValueError)):  # SpecError, CorruptResultError: ValueErrors
        return str(error)
    if isinstance(error, OSError):  # a file that cannot be written or read: say which, and why
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{error.strerror or error}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    from metabench.harness.specfiles import SpecError

    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()
    except SpecError as error:  # a malformed envs/ or baselines/ file: say which, and where
        if "--debug" in arguments:
            raise
        print(f"metabench: error: {error}", file=sys.stderr)
        return 1
    args = parser.parse_args(arguments)

    try:
        COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print(f"metabench: {INTERRUPTED}", file=sys.stderr)
        return 130
    except Exception as error:
        line = None if args.debug else error_line(error)
        if line is None:
            raise
        print(f"metabench: error: {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
