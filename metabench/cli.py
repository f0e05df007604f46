"""The ``metabench`` command."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from metabench.harness.stats import Summary


INTERRUPTED = "interrupted; run the same command to resume"
"""What Ctrl-C prints (exit code 130): runs and grids resume from their checkpoints."""


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Ends an option's help with ``(default: ...)``, a list as it is typed (``0 1``), unless
    there is no default to show (a required option, ``None``, an empty list) or the help
    already says what it is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, []) or "default" in (action.help or ""):
            return action.help
        if isinstance(action.default, list):
            return f"{action.help} (default: {' '.join(map(str, action.default))})"
        return super()._get_help_string(action)


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


def hyperparameter(text: str) -> tuple[str, Any]:
    """An argparse type for ``--set KEY=VALUE``; VALUE is read as JSON when it parses as JSON."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(raw)
    except ValueError:
        return key, raw


class RenamedOption(argparse.Action):
    """An old spelling of an option, kept for one release: stores into the new option's ``dest``
    and warns (one line on stderr) with the new spelling."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.new = kwargs.pop("new")
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print_warning(
            f"{option_string} is now {self.new}; the old spelling goes in the next release"
        )
        setattr(namespace, self.dest, values)


def add_renamed(
    parser: argparse.ArgumentParser,
    new: str,
    old: str,
    *,
    required: bool = False,
    help: str,
    **kwargs: Any,
) -> None:
    """Add option ``new``, and its old spelling ``old`` hidden from ``--help``; giving both is
    an error."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(new, help=help, **kwargs)
    kwargs.pop("default", None)
    dest = new.removeprefix("--").replace("-", "_")
    group.add_argument(
        old, dest=dest, action=RenamedOption, new=new, help=argparse.SUPPRESS, **kwargs
    )


def build_parser() -> argparse.ArgumentParser:
    from metabench.harness.algorithms import load_algorithms
    from metabench.harness.benchmarks import load_benchmarks

    benchmarks = load_benchmarks()  # envs/*.toml
    algorithms = load_algorithms()  # baselines/*.toml
    profiles = sorted({name for entry in algorithms.values() for name, _, _ in entry.profiles})

    parser = OneLineParser(
        prog="metabench",
        description="Meta-RL benchmarks: task envs, RL2 and MAML, meta-test evaluation.",
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
    demo.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed for tasks and actions (0)"
    )
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
        formatter_class=DefaultsHelpFormatter,
    )
    train.add_argument(
        "--benchmark", required=True, choices=sorted(benchmarks), help="the benchmark"
    )
    add_renamed(
        train, "--algorithm", "--algo", required=True, choices=sorted(algorithms),
        help="the algorithm (old spelling: --algo): "
        + "; ".join(f"{name}: {entry.description}" for name, entry in algorithms.items()),
    )  # fmt: skip
    train.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of training and test tasks"
    )
    train.add_argument(
        "--steps",
        type=positive_int,
        default=1_000_000,
        help="meta-training budget in environment steps (whole iterations only, never more)",
    )
    train.add_argument(
        "--out",
        type=Path,
        default=None,
        help="run directory (default: runs/<benchmark>-<algorithm>-seed<seed>)",
    )
    train.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="meta-test every N iterations during training (0: only at the end); for a meta-test "
        "every S env steps, N = S / the algorithm's steps per iteration. These meta-tests use "
        "the benchmark's [evaluation] periodic_test_tasks when it sets them (Meta-World: a few)",
    )
    train.add_argument(
        "--checkpoint-every", type=positive_int, default=10, help="checkpoint every N iterations"
    )
    train.add_argument(
        "--cpus",
        type=machine_cpus,
        default=None,
        help="cores the run may use: bounds its worker processes and torch threads, and is "
        "recorded in config.json (metabench bench sets it from the baseline's cpus; default: no "
        "bound)",
    )
    train.add_argument(
        "--set",
        dest="overrides",
        type=hyperparameter,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one hyperparameter (repeatable), e.g. --set learning_rate=3e-4",
    )

    evaluate = commands.add_parser(
        "evaluate",
        help="meta-test the latest checkpoint of a run",
        description="Meta-test the latest checkpoint of a run directory and print the result.",
    )
    evaluate.add_argument("run_dir", type=Path, help="a directory written by metabench train")
    evaluate.add_argument(
        "--test-tasks", type=positive_int, default=None, help="number of held-out tasks"
    )
    evaluate.add_argument(
        "--exploration-episodes", type=positive_int, default=None, help="episodes before adapting"
    )
    evaluate.add_argument(
        "--test-episodes", type=positive_int, default=None, help="episodes after adapting"
    )

    bench = commands.add_parser(
        "bench",
        help="run a grid of benchmarks x algorithms x seeds and print the results table",
        description=(
            "Run every cell of the grid (one metabench train per benchmark, algorithm and seed) "
            "on this machine or a Ray cluster, skip cells that already have a result, record "
            "failing cells and go on, then write <results>/README.md and print the table. Run "
            "the same command again to finish an interrupted grid."
        ),
        formatter_class=DefaultsHelpFormatter,
    )
    add_renamed(
        bench, "--benchmarks", "--envs", nargs="+", default=["HalfCheetahVel"],
        choices=sorted(benchmarks), metavar="BENCHMARK",
        help=f"benchmarks (old spelling: --envs), from: {', '.join(sorted(benchmarks))}",
    )  # fmt: skip
    add_renamed(
        bench, "--algorithms", "--baselines", nargs="+",
        default=["rl2-ppo", "maml-trpo", "cem", "nop"], choices=sorted(algorithms),
        metavar="ALGORITHM",
        help=f"algorithms (old spelling: --baselines), from: {', '.join(sorted(algorithms))}",
    )  # fmt: skip
    bench.add_argument(
        "--seeds", nargs="+", type=non_negative_int, default=[0],
        help="seeds (a seed given twice runs once)",
    )  # fmt: skip
    bench.add_argument(
        "--profile", default="quick", choices=profiles,
        help="budgets and settings from each baseline's [profiles.NAME]: quick (minutes per "
        "cell), reduced (the budgets of the runs in results/) or paper (the published settings)",
    )  # fmt: skip
    bench.add_argument("--results", type=Path, default=Path("runs/grid"), help="where the runs go")
    bench.add_argument(
        "--executor", default="local", choices=["local", "ray"],
        help="where cells run: local (a pool of processes on this machine) or ray (a Ray "
        "cluster; each cell a task asking for the cores its baseline declares)",
    )  # fmt: skip
    bench.add_argument(
        "--workers", type=positive_int, default=os.cpu_count() or 1,
        help="local executor: cores' worth of cells run at once",
    )  # fmt: skip
    bench.add_argument(
        "--address", default="auto", metavar="HOST:PORT",
        help="ray executor: the cluster's address, as 'ray start --head' prints it, or "
        "ray://HOST:PORT; auto: the cluster running on this machine, or RAY_ADDRESS",
    )  # fmt: skip

    commands.add_parser(
        "list",
        help="list the benchmarks and algorithms (from envs/ and baselines/)",
        description="List every benchmark of envs/*.toml and every algorithm of "
        "baselines/*.toml (and of $METABENCH_SPECS), with what each is.",
    )

    table = commands.add_parser(
        "table",
        help="write the results tables (Markdown, CSV) and plots from the result files",
        description="Collect every result.json below --results and write <results>/README.md "
        "(summary with bootstrap intervals over seeds, per-run rows, commands, published "
        "references), <results>/summary.csv and <results>/plots/.",
        formatter_class=DefaultsHelpFormatter,
    )
    table.add_argument("--results", type=Path, default=Path("results"), help="folder to scan")
    table.add_argument(
        "--out", type=Path, default=None, help="output file (default: <results>/README.md)"
    )

    plot = commands.add_parser(
        "plot",
        help="plot adaptation curves (return per episode of the trial) and returns per test "
        "task from result files",
        description="One PNG per benchmark: return (and success) against episode index within "
        "the trial, one line per algorithm, with a 95% bootstrap band over seeds. Where a "
        "benchmark's task is one number (HalfCheetahVel's velocity), a second PNG: the "
        "post-adaptation return of each test task against that number.",
        formatter_class=DefaultsHelpFormatter,
    )
    plot.add_argument("--results", type=Path, default=Path("results"), help="folder to scan")
    plot.add_argument(
        "--out", type=Path, default=None, help="output folder (default: <results>/plots)"
    )
    return parser


def check_output_file(path: Path, option: str) -> None:
    """Raise :class:`~metabench.harness.run.RunError` unless ``path`` can be a file: not a
    folder, in a folder that exists."""
    from metabench.harness.run import RunError

    if path.is_dir():
        raise RunError(f"{option} {path} is a folder: give a file name, e.g. {path / 'README.md'}")
    if not path.parent.is_dir():
        raise RunError(
            f"{option} {path}: its folder {path.parent} does not exist: create it or choose "
            f"another {option}"
        )


def check_output_folder(path: Path, option: str) -> None:
    """Raise :class:`~metabench.harness.run.RunError` if ``path`` exists and is not a folder."""
    from metabench.harness.run import RunError

    if path.exists() and not path.is_dir():
        raise RunError(f"{option} {path} is a file: give a folder for the plots")


def write_tables(results: Path, markdown: Path | None) -> tuple[list[Path], list[Summary]]:
    """Regenerate the Markdown page, the CSV summary and the plots of ``results``; the files
    written, and the summaries they show. A result file the tables cannot use is named in a
    warning (on stderr) and left out."""
    from metabench.harness.atomic import atomic_write_bytes
    from metabench.harness.plots import plot_results
    from metabench.harness.stats import summarize, summary_csv
    from metabench.harness.tables import collect_results, results_markdown

    markdown = markdown or results / "README.md"
    check_output_file(markdown, "--out")
    runs = collect_results(results, warn=print_warning)
    summaries = summarize(runs)
    plots = plot_results([result for _, result in runs], results / "plots")
    figures = [Path(os.path.relpath(plot, markdown.parent)).as_posix() for plot in plots]
    atomic_write_bytes(markdown, results_markdown(results, runs, summaries, figures).encode())
    csv_path = results / "summary.csv"
    atomic_write_bytes(csv_path, summary_csv(summaries).encode())
    return [markdown, csv_path, *plots], summaries


def print_warning(message: str) -> None:
    print(f"metabench: warning: {message}", file=sys.stderr)


def _run(args: argparse.Namespace) -> None:
    if args.command == "demo":
        from metabench.demo import run_demo

        run_demo(args.tasks, args.episodes_per_trial, args.seed, metaworld=not args.no_metaworld)
    elif args.command == "train":
        from metabench.harness.run import RunSettings
        from metabench.harness.training import train

        out = args.out or Path("runs") / f"{args.benchmark}-{args.algorithm}-seed{args.seed}"
        train(
            RunSettings(
                benchmark=args.benchmark,
                algorithm=args.algorithm,
                seed=args.seed,
                env_steps=args.steps,
                out=out,
                hyperparameters=dict(args.overrides),
                eval_every=args.eval_every,
                checkpoint_every=args.checkpoint_every,
                command=" ".join(["metabench", *sys.argv[1:]]),
                cpus=args.cpus,
            )
        )
    elif args.command == "bench":
        from metabench.harness.executors import make_executor
        from metabench.harness.grid import plan, run_grid
        from metabench.harness.report import grid_tables, make_console
        from metabench.harness.run import RunError, make_writable_folder

        console = make_console()
        cells = plan(args.benchmarks, args.algorithms, args.seeds, args.profile, args.results)
        make_writable_folder(args.results, "--results")
        if args.address != "auto" and args.executor != "ray":
            raise RunError("--address is for the ray executor: add --executor ray")
        executor = make_executor(args.executor, workers=args.workers, address=args.address)
        try:
            outcome = run_grid(cells, executor, console)
        finally:
            executor.close()
        _, summaries = write_tables(args.results, None)
        for table in grid_tables(summaries, title=f"metabench bench --profile {args.profile}"):
            console.print(table)
        console.print(f"Tables and plots: {args.results / 'README.md'}, {args.results / 'plots'}")
        if any(error is not None for error in outcome.values()):
            raise RunError("some cells failed: see the list above")
    elif args.command == "list":
        from metabench.harness.report import make_console, specs_tables

        console = make_console()
        for table in specs_tables():
            console.print(table)
    elif args.command == "table":
        if not args.results.is_dir():
            raise ValueError(f"--results {args.results} is not a folder")
        for path in write_tables(args.results, args.out)[0]:
            print(f"wrote {path}")
    elif args.command == "plot":
        from metabench.harness.plots import plot_results
        from metabench.harness.tables import collect_results

        if not args.results.is_dir():
            raise ValueError(f"--results {args.results} is not a folder")
        out = args.out or args.results / "plots"
        check_output_folder(out, "--out")
        runs = [result for _, result in collect_results(args.results, warn=print_warning)]
        for path in plot_results(runs, out):
            print(f"wrote {path}")
    elif args.command == "evaluate":
        from metabench.harness.training import evaluate

        evaluate(args.run_dir, args.test_tasks, args.exploration_episodes, args.test_episodes)


def main(argv: Sequence[str] | None = None) -> int:
    from metabench.harness.run import RunError
    from metabench.harness.specfiles import SpecError

    try:
        parser = build_parser()
    except SpecError as error:  # a malformed envs/ or baselines/ file: say which, and where
        print(f"metabench: error: {error}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)

    try:
        _run(args)
    except (RunError, KeyError, ValueError) as error:  # CorruptResultError is a ValueError
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"metabench: error: {message}", file=sys.stderr)
        return 1
    except OSError as error:  # a file that cannot be written or read: say which, and why
        where = f"{error.filename}: " if error.filename else ""
        print(f"metabench: error: {where}{error.strerror or error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"metabench: {INTERRUPTED}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
