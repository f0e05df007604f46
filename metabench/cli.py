"""The ``metabench`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1, with an error that says so."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    demo.add_argument("--seed", type=int, default=0, help="seed for tasks and actions (0)")
    demo.add_argument(
        "--no-metaworld", action="store_true", help="skip ML10 (saves ~10 s of set-up)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from metabench.demo import run_demo

        run_demo(args.tasks, args.episodes_per_trial, args.seed, metaworld=not args.no_metaworld)
    return 0


if __name__ == "__main__":
    sys.exit(main())
