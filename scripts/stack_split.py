"""Where a running ``metabench train`` spends its time, from py-spy's sampled stacks.

Timers inside the code (``scripts/profile_ml10.py``) need a run of their own on an idle machine;
sampling a run that is going anyway costs it almost nothing. py-spy is not a metabench
dependency: install it apart (``python -m venv /tmp/spy && /tmp/spy/bin/pip install py-spy``),
then record the trainer and its env worker with idle time included, and split their main threads
by the frames named::

    /tmp/spy/bin/py-spy record -p PID --idle -r 25 -d 240 -f raw -o main.txt --nonblocking
    .venv/bin/python scripts/stack_split.py main.txt chunked_train step_wait forward recv

Each sample is counted under the first named frame on its stack (outermost first, so name an
enclosing phase before what it calls), else under ``other``; ``--inside FRAME`` splits only
the samples under ``FRAME`` by the next frames below it.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def main_thread_stacks(path: Path) -> list[tuple[list[str], int]]:
    """The main thread's samples of a py-spy ``raw`` file: (function names outermost first,
    count). py-spy writes one ``frame;frame;... count`` line per distinct stack; the main
    thread's stacks start at ``<module>``."""
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [frame.split(" (")[0] for frame in stack.split(";")]
        if frames and frames[0].startswith("<module>"):
            stacks.append((frames, int(count)))
    return stacks


def matches(frame: str, name: str) -> bool:
    return frame == name or frame.endswith("." + name)


def split(stacks: list[tuple[list[str], int]], names: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for frames, count in stacks:
        counts[next((n for n in names if any(matches(f, n) for f in frames)), "other")] += count
    return counts


def split_inside(stacks: list[tuple[list[str], int]], frame: str, depth: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for frames, count in stacks:
        at = next((i for i, f in enumerate(frames) if matches(f, frame)), None)
        if at is not None:
            counts[" > ".join(frames[at + 1 : at + 1 + depth]) or frame] += count
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("samples", type=Path, help="py-spy record -f raw output")
    parser.add_argument("frames", nargs="*", help="function names to split by")
    parser.add_argument("--inside", help="split the samples under this frame instead")
    parser.add_argument("--depth", type=int, default=2, help="frames shown with --inside")
    parser.add_argument("--rate", type=float, default=25.0, help="py-spy's samples per second")
    args = parser.parse_args()
    stacks = main_thread_stacks(args.samples)
    total = sum(count for _, count in stacks)
    counts = (
        split_inside(stacks, args.inside, args.depth) if args.inside else split(stacks, args.frames)
    )
    print(f"{args.samples}: main thread {total / args.rate:.1f} s sampled")
    for name, count in counts.most_common(20):
        print(f"{count / args.rate:8.1f} s {count / total:6.1%}  {name}")


if __name__ == "__main__":
    main()
