"""The published settings and numbers that tables and plots show beside ours
(``metabench/references.toml``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@dataclass(frozen=True)
class Reference:
    """A published setting (and number, where one exists) to print beside ours."""

    benchmark: str
    algorithm: str
    setting: str
    source: str
    metric: str | None = None
    value: float | None = None


def load_references() -> list[Reference]:
    """The entries of ``metabench/references.toml``."""
    text = resources.files("metabench").joinpath("references.toml").read_text()
    return [Reference(**entry) for entry in tomllib.loads(text)["reference"]]


def references_for(benchmarks: Iterable[str]) -> list[Reference]:
    """The entries of ``metabench/references.toml`` for ``benchmarks`` only: a page of results
    lists the published settings of the benchmarks it holds results of (a HalfCheetahVel grid's
    page, none of Meta-World's)."""
    wanted = set(benchmarks)
    return [ref for ref in load_references() if ref.benchmark in wanted]
