"""Benchmark and algorithm specs as TOML data: where the files are, reading them, checking keys.

The specs live in the top-level ``envs/`` and ``baselines/`` folders of a clone; a wheel carries
the same files as ``metabench/specs/envs`` and ``metabench/specs/baselines`` (copied there by
``setup.py``). ``METABENCH_SPECS`` adds folders of your own (``os.pathsep``-separated, each with
``envs/`` and/or ``baselines/`` inside), and installed packages add algorithms through entry
points of the ``metabench.algorithms`` group (see :func:`entry_point_specs`), so a new benchmark
or algorithm needs no change to the package. Every error names the file (and the line, where one
can be found) and what to change.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.metadata
import os
import re
import sys
from collections.abc import Iterable, Mapping
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
ENTRY_POINT_GROUP = "metabench.algorithms"
"""The entry-point group through which an installed package adds algorithms."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
"""What a benchmark's or an algorithm's name (its file's name) may be: it is typed on the command
line and becomes part of run directories."""


class SpecError(ValueError):
    """A spec file is malformed or inconsistent; the message names the file and the fix."""


@dataclass(frozen=True)
class SpecOrigin:
    """Where a spec file was found, recorded with the runs of a third-party algorithm.

    :param registered_by: ``"metabench"`` (shipped with the package),
        ``"METABENCH_SPECS=<folder>"``, or ``"<group> entry point <name> = <package>"``.
    :param package: the distribution whose entry point registered the file, and its version.
    """

    registered_by: str = "metabench"
    package: str | None = None
    version: str | None = None

    @property
    def shipped(self) -> bool:
        return self.registered_by == "metabench"


SHIPPED = SpecOrigin()


@dataclass(frozen=True)
class SpecFile:
    """One parsed TOML spec: its name (the file stem), where it came from, and its tables."""

    name: str
    path: str
    text: str
    data: dict[str, Any]
    origin: SpecOrigin = SHIPPED

    @property
    def sha256(self) -> str:
        """The sha256 of the file's bytes (its text is read without translating newlines)."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

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


def specs_variable_folders() -> list[Path]:
    """The folders ``METABENCH_SPECS`` names, as absolute paths.

    :raises SpecError: an entry that is not a folder, or a folder with neither ``envs/`` nor
        ``baselines/`` inside (``METABENCH_SPECS`` pointing at ``baselines/`` itself).
    """
    folders = []
    for extra in os.environ.get(SPECS_PATH_VARIABLE, "").split(os.pathsep):
        if not extra:
            continue
        folder = Path(extra).absolute()
        if not folder.is_dir():
            raise SpecError(
                f"{SPECS_PATH_VARIABLE} names {extra}, which is not a folder: create it, or "
                f"remove it from {SPECS_PATH_VARIABLE}"
            )
        if not any((folder / kind).is_dir() for kind in KINDS):
            raise SpecError(
                f"{SPECS_PATH_VARIABLE} names {extra}, which holds neither envs/ nor baselines/: "
                f"point {SPECS_PATH_VARIABLE} at the folder that holds them"
            )
        folders.append(folder)
    return folders


SPEC_DOCS = {"envs": "docs/specs.md", "baselines": "docs/own-algorithm.md"}
"""Where the docs say how a spec file of one's own is made known, by kind."""


def unknown_name_message(kind: str, name: str, known: Iterable[str]) -> str:
    """What to say about a benchmark (``kind="envs"``) or algorithm (``"baselines"``) that no
    spec file defines: the names there are, and where a spec file of one's own is looked for.
    A plug-in's author whose ``METABENCH_SPECS`` is not set meets this first, so it says
    whether it is set and what it should hold."""
    if kind not in KINDS:
        raise ValueError(f"unknown spec kind {kind!r}: use one of {', '.join(KINDS)}")
    noun, one = ("benchmark", "a") if kind == "envs" else ("algorithm", "an")
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    folders = os.environ.get(SPECS_PATH_VARIABLE, "")
    looked = (
        f"{SPECS_PATH_VARIABLE}={folders} holds no {kind}/{name}.toml"
        if folders
        else f"{SPECS_PATH_VARIABLE} is not set"
    )
    package = (
        f", or in a package with a {ENTRY_POINT_GROUP} entry point" if kind == "baselines" else ""
    )
    return (
        f"unknown {noun} {name!r}{guess}; choose one of: {', '.join(names)}; {one} {noun} of "
        f"your own is found through its spec file {name}.toml, in <folder>/{kind}/ with "
        f"{SPECS_PATH_VARIABLE}=<folder>{package} ({looked}; see {SPEC_DOCS[kind]})"
    )


def spec_dirs(kind: str) -> list[Traversable]:
    """The folders holding ``kind`` (``envs`` or ``baselines``) specs, built-in first."""
    if kind not in KINDS:
        raise ValueError(f"unknown spec kind {kind!r}: use one of {', '.join(KINDS)}")
    installed = resources.files("metabench").joinpath("specs", kind)
    if installed.is_dir():  # a wheel install
        folders: list[Traversable] = [installed]
    else:  # a clone (or an editable install of one): the top-level folder beside the package
        folders = [Path(str(resources.files("metabench"))).parent / kind]
    folders += [folder / kind for folder in specs_variable_folders() if (folder / kind).is_dir()]
    return folders


def read_spec_file(name: str, path: str, text: str, origin: SpecOrigin = SHIPPED) -> SpecFile:
    """Parse one TOML file; malformed TOML or a name that cannot be typed on the command line
    raises :class:`SpecError` with file and line."""
    if not NAME.fullmatch(name):
        raise SpecError(
            f"{path}: {name!r} cannot be a name (the file's name, without .toml, is the name of "
            f"its benchmark or algorithm): rename the file to letters, digits and . _ + -"
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: malformed TOML: {error}: fix the syntax there") from None
    return SpecFile(name, path, text, data, origin)


def entry_point_specs() -> list[SpecFile]:
    """The algorithm spec files installed packages register: an entry point ``name = package``
    of the ``metabench.algorithms`` group is the file ``name.toml`` inside ``package`` (package
    data), and ``name`` is the algorithm's name.

    :raises SpecError: an entry point that names an attribute, a package that cannot be
        imported, or one without the file; each names the entry point and its distribution.
    """
    specs = []
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        package = None if point.dist is None else point.dist.name
        version = None if point.dist is None else point.dist.version
        registered_by = f"{ENTRY_POINT_GROUP} entry point {point.name} = {point.value}"
        where = f"{registered_by} (of {f'{package} {version}' if package else 'a package'})"
        if point.attr:
            raise SpecError(
                f"{where}: an entry point names the package that holds {point.name}.toml, not an "
                f"attribute: write {point.name} = {point.module}"
            )
        try:
            module = importlib.import_module(point.module)
        except Exception as error:  # ImportError, or whatever the package raises on import
            raise SpecError(
                f"{where}: package {point.module} cannot be imported "
                f"({type(error).__name__}: {error}): reinstall {package or 'it'}"
            ) from error
        if not hasattr(module, "__path__"):
            raise SpecError(
                f"{where}: {point.module} is a module, not a package: name the package (a folder "
                f"with __init__.py) that holds {point.name}.toml"
            )
        file = resources.files(module) / f"{point.name}.toml"
        if not file.is_file():
            raise SpecError(
                f"{where}: package {point.module} holds no {point.name}.toml: ship the "
                f"algorithm's spec file in the package (package data), named after the entry point"
            )
        origin = SpecOrigin(registered_by, package, version)
        text = file.read_bytes().decode("utf-8")
        specs.append(read_spec_file(point.name, str(file), text, origin))
    return specs


def _folder_specs(kind: str) -> list[SpecFile]:
    """Every ``*.toml`` of the folders of ``kind``, shipped first."""
    variable = {str(folder / kind): folder for folder in specs_variable_folders()}
    specs = []
    for folder in spec_dirs(kind):
        if not folder.is_dir():
            continue
        extra = variable.get(str(folder))
        origin = SHIPPED if extra is None else SpecOrigin(f"{SPECS_PATH_VARIABLE}={extra}")
        for entry in sorted(folder.iterdir(), key=lambda item: item.name):
            if entry.name.endswith(".toml"):
                name = entry.name.removesuffix(".toml")
                text = entry.read_bytes().decode("utf-8")
                specs.append(read_spec_file(name, str(entry), text, origin))
    return specs


def read_specs(kind: str) -> dict[str, SpecFile]:
    """Every spec of ``kind``, by name: the folders' ``*.toml`` and, for algorithms, the files
    of installed entry points; two files with one name is an error."""
    specs: dict[str, SpecFile] = {}
    found = _folder_specs(kind) + (entry_point_specs() if kind == "baselines" else [])
    for spec in found:
        if spec.name in specs:
            raise SpecError(
                f"{spec.path}: {kind} spec {spec.name!r} is also defined in "
                f"{specs[spec.name].path}: rename one of them"
            )
        specs[spec.name] = spec
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
