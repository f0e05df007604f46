"""Typed, range-checked values: the checks every config, spec and constructor shares.

An algorithm's hyperparameters are one frozen dataclass whose fields are made with
:func:`option` (default, range, documentation). :func:`check_config` checks and normalises every
field of such a dataclass; call it from ``__post_init__``. :func:`resolve_config` builds one from
layers of values (defaults, spec-file tables, ``--set``), each value checked where it was set,
so an error names that place (``--set``, or ``file:line``).

Values are read strictly: a boolean is ``true`` or ``false`` (a string ``"False"`` from the
command line is false, never a truthy string), an integer is never a rounded float, a number is
finite, and ranges are checked.

Example::

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Config:
    ...     steps: int = option(10, "how many", low=1)
    ...     fast: bool = option(False, "go fast")
    ...     def __post_init__(self) -> None:
    ...         check_config(self)
    >>> resolve_config(Config, [Layer({"steps": "3", "fast": "False"}, "--set")])
    Config(steps=3, fast=False)
    >>> try:
    ...     resolve_config(Config, [Layer({"steps": 2.7}, "--set")])
    ... except ConfigError as error:
    ...     print(error)
    --set: steps must be a positive integer, got 2.7
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

import numpy as np

__all__ = [
    "MAX_LAYER_WIDTH",
    "MAX_SEED",
    "ConfigError",
    "Field",
    "Layer",
    "check_config",
    "check_count",
    "check_number",
    "check_seed",
    "config_dict",
    "config_fields",
    "option",
    "parse_value",
    "resolve_config",
]

T = TypeVar("T")

MAX_LAYER_WIDTH = 4096
"""The largest width of a network layer or latent (``high`` of those options): 8x the widest
published setting here (Meta-World's 512-512 MAML policy). Without a bound, a typo such as
``hidden_size=99999999999`` ran out of memory while the network was built, with a traceback."""

MAX_COUNT = 1_000_000
"""The largest count of what a run holds in memory at once (tasks, episodes or environment
steps of a batch, candidates, vector envs; ``high`` of those options): 100x the largest
published setting here (PEARL's 4000 gradient-step batches aside, Meta-World's 10,000 steps per
task). Without a bound, a typo's extra zeros ran out of memory while the batch was built."""

MAX_REPLAY_BUFFER = 10_000_000
"""The largest replay buffer (``high`` of PEARL's ``replay_buffer_size``): 10x oyster's 1e6; a
buffer is allocated whole, and Humanoid's 376 floats a step make 1e7 steps 15 GB."""

MAX_SEED = 2**32 - 1
"""The largest seed: NumPy's and torch's global generators take 32-bit seeds."""


class ConfigError(ValueError):
    """A configuration value is of the wrong type or out of range; the message says where it was
    set and what is allowed."""


def option(
    default: Any,
    doc: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    recorded_at_default: bool = True,
) -> Any:
    """A dataclass field with its documentation and range (``low <= value <= high``, or strict
    with ``low_open``/``high_open``; for a list, the range of every item).

    ``recorded_at_default=False``: :func:`recorded_config` leaves the field out while it has its
    default. For options added after runs were recorded whose default is the earlier behaviour:
    those runs' configs and checkpoints still match, so they resume and evaluate."""
    metadata = {
        "doc": doc,
        "low": low,
        "high": high,
        "low_open": low_open,
        "high_open": high_open,
        "recorded_at_default": recorded_at_default,
    }
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a config dataclass, as :func:`config_fields` describes it."""

    name: str
    kind: Any
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    @property
    def type_name(self) -> str:
        """The type in words, for errors and listings."""
        return _kind_name(self.kind)

    @property
    def range_text(self) -> str:
        """``"> 0"``, ``"in [0, 1]"``, or ``""`` when unbounded."""
        if self.low is not None and self.high is not None:
            left = "(" if self.low_open else "["
            right = ")" if self.high_open else "]"
            return f"in {left}{_number(self.low)}, {_number(self.high)}{right}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {_number(self.low)}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {_number(self.high)}"
        return ""

    def describe(self) -> str:
        """``"a positive integer"``, ``"a finite number in [0, 1]"``: what a valid value is."""
        integer = self.kind in (int, int | None)
        if self.high is None and (integer or self.kind in (float, float | None)):
            noun = "integer" if integer else "number"
            null = " or null" if None.__class__ in typing.get_args(self.kind) else ""
            above_zero = self.low == 0 and self.low_open
            if above_zero or (integer and self.low == 1 and not self.low_open):
                return f"a positive {noun}{null}"
            if self.low == 0:
                return f"a non-negative {noun}{null}"
        return " ".join(part for part in (self.type_name, self.range_text) if part)

    def in_range(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)


def config_fields(cls: type) -> tuple[Field, ...]:
    """Every field of the config dataclass ``cls``, with its resolved type."""
    return _config_fields(cls)


@functools.cache
def _config_fields(cls: Any) -> tuple[Field, ...]:
    hints = typing.get_type_hints(cls)
    fields = []
    for item in dataclasses.fields(cls):
        meta = dict(item.metadata)
        fields.append(
            Field(
                item.name,
                hints[item.name],
                item.default,
                meta.get("doc", ""),
                meta.get("low"),
                meta.get("high"),
                meta.get("low_open", False),
                meta.get("high_open", False),
            )
        )
    return tuple(fields)


def check_config(config: Any) -> None:
    """Check every field of the frozen dataclass instance ``config`` and store its normalised
    value (``1`` becomes ``1.0`` for a float, a list becomes a tuple); call from
    ``__post_init__``.

    :raises ConfigError: naming the field, the valid values and the value given.
    """
    where = type(config).__name__
    for field in config_fields(type(config)):
        value = parse_value(field, getattr(config, field.name), where)
        object.__setattr__(config, field.name, value)


@dataclasses.dataclass(frozen=True)
class Layer:
    """Values of a config set in one place: ``where`` (``"--set"``, ``"file:line"``), or per
    name in ``places`` (a table of a spec file, each value on its own line)."""

    values: Mapping[str, Any]
    where: str
    places: Mapping[str, str] = dataclasses.field(default_factory=dict)
    typed: bool = False
    """Whether the values come with their types (a TOML file, Python), so that a string is a
    string and never text read as a number or a bool; ``False``: the command line's text."""

    def place(self, name: str) -> str:
        return self.places.get(name, self.where)


def resolve_config(cls: type[T], layers: Sequence[Layer]) -> T:
    """``cls`` built from its defaults and ``layers``, later layers winning; each value is
    checked against its field and reported with the place it was set.

    :raises ConfigError: for an unknown name or a bad value, saying where it was set.
    """
    fields = {field.name: field for field in config_fields(cls)}
    values: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.values.items():
            if name not in fields:
                raise ConfigError(
                    f"{layer.place(name)}: unknown hyperparameter {name!r} of {cls.__name__}; "
                    f"valid: {', '.join(sorted(fields))}"
                )
            values[name] = parse_value(fields[name], value, layer.place(name), text=not layer.typed)
    return cls(**values)


def config_dict(config: Any) -> dict[str, Any]:
    """The fields of ``config`` as plain JSON values (tuples become lists)."""
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in dataclasses.asdict(config).items()
    }


def recorded_config(config: Any) -> dict[str, Any]:
    """:func:`config_dict` as runs record it: without the fields declared
    ``recorded_at_default=False`` (:func:`option`) that have their default value."""
    values = config_dict(config)
    for field in dataclasses.fields(config):
        if not field.metadata.get("recorded_at_default", True) and (
            getattr(config, field.name) == field.default  # a tuple, where values has a list
        ):
            del values[field.name]
    return values


# -- one value ---------------------------------------------------------------------------------
_TRUE, _FALSE = ("true",), ("false",)


def parse_value(field: Field, value: Any, where: str, text: bool = True) -> Any:
    """``value`` checked (and normalised) for ``field``; with ``text`` (the command line's) a
    string is read as the field's type, without (a TOML file's typed value) a string is only a
    string: ``meta_batch_size = "8"`` is an error there. Raises :class:`ConfigError` saying
    ``where``."""
    try:
        typed_text = not text and isinstance(value, str) and not _takes_strings(field.kind)
        parsed = _INVALID if typed_text else _parse(field.kind, value)
    except (TypeError, ValueError):
        parsed = _INVALID
    if parsed is not _INVALID and not _within(field, parsed):
        parsed = _INVALID
    if parsed is _INVALID:
        raise ConfigError(f"{where}: {field.name} must be {field.describe()}, got {value!r}")
    return parsed


_INVALID: Any = object()


def _takes_strings(kind: Any) -> bool:
    """Whether a field of ``kind`` holds strings (``str``, a ``Literal`` of them, a union with
    one), so that a typed string value is one of its values rather than text to read."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return any(_takes_strings(option) for option in typing.get_args(kind))
    if origin is Literal:
        return any(isinstance(arg, str) for arg in typing.get_args(kind))
    return kind is str


def _parse(kind: Any, value: Any) -> Any:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if type(None) in options and (
            value is None or (isinstance(value, str) and value.lower() in ("none", "null"))
        ):
            return None
        for option_kind in options:
            if option_kind is type(None):
                continue
            parsed = _parse(option_kind, value)
            if parsed is not _INVALID:
                return parsed
        return _INVALID
    if origin is Literal:
        text = _text(value)
        return text if text in typing.get_args(kind) else _INVALID
    if origin is tuple:
        (item_kind, _) = typing.get_args(kind)
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, (list, tuple)):
            return _INVALID
        items = tuple(_parse(item_kind, item) for item in value)
        return _INVALID if any(item is _INVALID for item in items) else items
    if kind is bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        return _INVALID
    if kind is int:
        if isinstance(value, (bool, np.bool_)):
            return _INVALID
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, str):
            return int(value.strip())  # "2.7" raises: never rounded
        return _INVALID
    if kind is float:
        if isinstance(value, (bool, np.bool_)):
            return _INVALID
        if isinstance(value, str):
            value = float(value.strip())
        if not isinstance(value, numbers.Real):
            return _INVALID
        number = float(value)
        return number if math.isfinite(number) else _INVALID
    if kind is str:
        return _text(value)
    raise TypeError(f"config fields of type {kind!r} are not supported")


def _text(value: Any) -> Any:
    """A string value; the command line may have quoted it as JSON (``'"zero"'``)."""
    if not isinstance(value, str):
        return _INVALID
    if value.startswith('"'):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return decoded if isinstance(decoded, str) else value
    return value


def _within(field: Field, value: Any) -> bool:
    items = value if isinstance(value, tuple) else (value,)
    return all(
        not isinstance(item, (int, float)) or isinstance(item, bool) or field.in_range(item)
        for item in items
    )


def _kind_name(kind: Any) -> str:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        names = [_kind_name(k) for k in typing.get_args(kind) if k is not type(None)]
        optional = type(None) in typing.get_args(kind)
        return " or ".join(names) + (" or null" if optional else "")
    if origin is Literal:
        return "one of " + ", ".join(repr(option) for option in typing.get_args(kind))
    if origin is tuple:
        return f"a list of {_kind_name(typing.get_args(kind)[0]).removeprefix('an ')}s"
    words: dict[Any, str] = {
        bool: "true or false", int: "an integer", float: "a finite number", str: "a string"
    }  # fmt: skip
    return words.get(kind, getattr(kind, "__name__", str(kind)))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# -- checks of single arguments (constructors outside a config dataclass) ----------------------
def check_count(name: str, value: Any, minimum: int = 1, hint: str = "") -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) ``>= minimum``, else
    ``ValueError`` naming ``name`` (and ``hint``, the fix)."""
    integer = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not integer or value < minimum:
        suffix = f": {hint}" if hint else ""
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(
            minimum, f"an integer >= {minimum}"
        )
        raise ValueError(f"{name} must be {kind}, got {value!r}{suffix}")
    return int(value)


def check_seed(value: Any, name: str = "seed") -> int:
    """``value`` as an ``int`` if it is a seed, an integer (not a bool) from 0 to
    :data:`MAX_SEED`, else ``ValueError`` naming ``name`` and the range: refused up front for
    every algorithm, where a larger one failed in some algorithms' generators (without naming
    the option) and was taken by others."""
    integer = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not integer or not 0 <= value <= MAX_SEED:
        raise ValueError(
            f"{name} must be an integer from 0 to 2**32 - 1 ({MAX_SEED}), got {value!r}"
        )
    return int(value)


def check_number(
    name: str, value: Any, *, low: float | None = None, low_open: bool = False, hint: str = ""
) -> float:
    """``value`` as a finite ``float`` (not a bool, not a string) ``>= low`` (``> low`` with
    ``low_open``), else ``ValueError`` naming ``name`` (and ``hint``, the fix)."""
    field = Field(name, float, None, "", low=low, low_open=low_open)
    parsed = _INVALID if isinstance(value, str) else _parse(float, value)
    if parsed is _INVALID or not _within(field, parsed):
        suffix = f": {hint}" if hint else ""
        raise ValueError(f"{name} must be {field.describe()}, got {value!r}{suffix}")
    return float(parsed)
