"""The published settings and numbers that tables and plots show beside ours
(``metabench/references.toml``)."""

from __future__ import annotations

import fnmatch
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
    """A benchmark's name, or a glob of names (``AntDir-*``: one setting for every protocol)."""
    algorithm: str
    setting: str
    source: str
    metric: str | None = None
    value: float | None = None

    def applies_to(self, benchmark: str) -> bool:
        """Whether this entry is about ``benchmark`` (by name or glob)."""
        return fnmatch.fnmatchcase(benchmark, self.benchmark)


def load_references() -> list[Reference]:
    """The entries of ``metabench/references.toml``."""
    text = resources.files("metabench").joinpath("references.toml").read_text()
    return [Reference(**entry) for entry in tomllib.loads(text)["reference"]]


def references_for(benchmarks: Iterable[str]) -> list[Reference]:
    """The entries of ``metabench/references.toml`` for ``benchmarks`` only: a page of results
    lists the published settings of the benchmarks it holds results of (a HalfCheetahVel grid's
    page, none of Meta-World's)."""
    wanted = set(benchmarks)
    return [ref for ref in load_references() if any(map(ref.applies_to, wanted))]
