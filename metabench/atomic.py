"""Write files so that a reader (or a resumed run) never sees a half-written one, into folders
checked writable before any work that would be lost."""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from metabench.errors import RunError


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it to disk, then rename it over
    ``path``: an interrupted write leaves the old file (or none), never a truncated one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file private (0600); give it the permissions open() would have
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def claim_new_file(folder: str | Path, stem: str, suffix: str) -> Path:
    """``folder/stem+suffix``, or ``stem-2``, ``stem-3``... if taken: a name no other file has,
    claimed by creating it empty (``O_EXCL``), so two writers at once never share it. Fill it
    with :func:`atomic_write_bytes`."""
    for n in itertools.count(1):
        path = Path(folder) / f"{stem}{'' if n == 1 else f'-{n}'}{suffix}"
        try:
            path.open("x").close()
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")


def remove_temporaries(directory: str | Path) -> list[Path]:
    """Delete the temporary files that :func:`atomic_write_bytes` left under ``directory`` when
    its process was killed mid-write (SIGKILL, power loss); returns them. Call only while no
    other process writes there (a run resuming its own directory)."""
    stale = [p for p in Path(directory).rglob(".*.tmp") if p.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_json(path: str | Path, value: Any) -> None:
    """:func:`atomic_write_bytes` of :func:`json_text`."""
    atomic_write_bytes(path, json_text(value).encode())


def json_text(value: Any) -> str:
    """``value`` as the indented JSON metabench writes (NaN is written as ``null``): two values
    with the same text are the same record."""
    return json.dumps(_finite(value), indent=2, sort_keys=True, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    """Replace NaN and inf (not valid JSON) by ``None``, recursively."""
    if isinstance(value, float) and not (value == value and abs(value) != float("inf")):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def make_writable_folder(path: Path, option: str) -> None:
    """Create ``path`` and check a file can be written in it, or raise :class:`RunError` naming
    the command-line ``option`` to change."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise RunError(
            f"cannot write to {path} ({error.strerror}): choose a writable {option}"
        ) from None
