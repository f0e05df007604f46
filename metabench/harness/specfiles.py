"""Benchmark and algorithm specs as TOML data: where the files are, reading them, checking keys.

The specs live in the top-level ``envs/`` and ``baselines/`` folders of a clone; a wheel carries
the same files as ``metabench/specs/envs`` and ``metabench/specs/baselines`` (copied there by
``setup.py``). ``METABENCH_SPECS`` adds folders of your own (``os.pathsep``-separated, each with
``envs/`` and/or ``baselines/`` inside), so a new benchmark or algorithm needs no change to the
package. Every error names the file (and the line, where one can be found) and what to change.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SPECS_PATH_VARIABLE = "METABENCH_SPECS"
KINDS = ("envs", "baselines")


class SpecError(ValueError):
    """A spec file is malformed or inconsistent; the message names the file and the fix."""


@dataclass(frozen=True)
class SpecFile:
    """One parsed TOML spec: its name (the file stem), where it came from, and its tables."""

    name: str
    path: str
    text: str
    data: dict[str, Any]

    def error(self, message: str, key: str | None = None, table: str | None = None) -> SpecError:
        """A :class:`SpecError` prefixed with ``file:line`` (the line of ``key`` when found)."""
        line = find_line(self.text, key, table) if key is not None else None
        where = f"{self.path}:{line}" if line else self.path
        return SpecError(f"{where}: {message}")


def find_line(text: str, key: str, table: str | None = None) -> int | None:
    """The 1-based line where ``key`` is set (inside ``[table]`` when given), if any.

    tomllib keeps no positions, so this searches the text: good enough to point at a typo.
    """
    lines = text.splitlines()
    start = 0
    if table is not None:
        header = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(map(_key_pattern, table.split("."))))
        start = next((i for i, line in enumerate(lines) if header.match(line)), 0)
    pattern = re.compile(r"^\s*" + _key_pattern(key) + r"\s*(=|\.|\])")
    for number in range(start, len(lines)):
        if pattern.match(lines[number]) or re.match(
            r"^\s*\[[^\]]*" + _key_pattern(key) + r"\s*\]", lines[number]
        ):
            return number + 1
    return None


def _key_pattern(key: str) -> str:
    return r"""["']?""" + re.escape(key) + r"""["']?"""


def spec_dirs(kind: str) -> list[Traversable]:
    """The folders holding ``kind`` (``envs`` or ``baselines``) specs, built-in first."""
    if kind not in KINDS:
        raise ValueError(f"unknown spec kind {kind!r}: use one of {', '.join(KINDS)}")
    installed = resources.files("metabench").joinpath("specs", kind)
    if installed.is_dir():  # a wheel install
        folders: list[Traversable] = [installed]
    else:  # a clone (or an editable install of one): the top-level folder beside the package
        folders = [Path(str(resources.files("metabench"))).parent / kind]
    for extra in os.environ.get(SPECS_PATH_VARIABLE, "").split(os.pathsep):
        if extra and (Path(extra) / kind).is_dir():
            folders.append(Path(extra) / kind)
    return folders


def read_spec_file(name: str, path: str, text: str) -> SpecFile:
    """Parse one TOML file; malformed TOML raises :class:`SpecError` with file and line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: malformed TOML: {error}: fix the syntax there") from None
    return SpecFile(name, path, text, data)


def read_specs(kind: str) -> dict[str, SpecFile]:
    """Every ``*.toml`` of ``kind``, by name; two files with one name is an error."""
    specs: dict[str, SpecFile] = {}
    for folder in spec_dirs(kind):
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir(), key=lambda item: item.name):
            if not entry.name.endswith(".toml"):
                continue
            name = entry.name.removesuffix(".toml")
            spec = read_spec_file(name, str(entry), entry.read_text(encoding="utf-8"))
            if name in specs:
                raise SpecError(
                    f"{spec.path}: {kind} spec {name!r} is also defined in {specs[name].path}: "
                    f"rename one of them"
                )
            specs[name] = spec
    if not specs:
        raise SpecError(
            f"no {kind} specs found in {', '.join(map(str, spec_dirs(kind)))}: reinstall metabench"
        )
    return specs


Schema = Mapping[str, "type | tuple[type, ...]"]


def check_table(
    spec: SpecFile,
    table: Any,
    schema: Schema | None,
    *,
    where: str | None = None,
    required: tuple[str, ...] = (),
) -> dict[str, Any]:
    """``table`` (at ``[where]``, or the top level) with only ``schema``'s keys, of their types
    (``schema=None``: any keys, checked later by their user).

    Unknown keys, missing required keys and values of the wrong type raise :class:`SpecError`.
    """
    label = f"[{where}]" if where else "the top level"
    if not isinstance(table, dict):
        raise spec.error(f"{where} must be a table", where)
    if schema is not None:
        for key, value in table.items():
            _check_value(spec, schema, key, value, where, label)
    missing = [key for key in required if key not in table]
    if missing:
        raise spec.error(f"{label} lacks {', '.join(missing)}: add it")
    return dict(table)


def _check_value(
    spec: SpecFile, schema: Schema, key: str, value: Any, where: str | None, label: str
) -> None:
    if key not in schema:
        raise spec.error(
            f"unknown key {key!r} in {label}; valid keys: {', '.join(schema)}", key, where
        )
    expected = schema[key]
    # bool is an int to isinstance, but `steps = true` is not a budget
    wrong_bool = isinstance(value, bool) and bool not in _as_tuple(expected)
    if wrong_bool or not isinstance(value, expected):
        raise spec.error(f"{key} must be {_type_names(expected)}, got {value!r}", key, where)


def _as_tuple(expected: type | tuple[type, ...]) -> tuple[type, ...]:
    return expected if isinstance(expected, tuple) else (expected,)


def _type_names(expected: type | tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    names.update({dict: "a table", list: "an array"})
    return " or ".join(names.get(kind, kind.__name__) for kind in _as_tuple(expected))
