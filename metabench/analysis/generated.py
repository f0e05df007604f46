"""Files that ``metabench table``, ``bench`` and ``plot`` generate, written without ever
replacing a file of the user's.

A folder's ``.metabench-generated.json`` lists each file metabench wrote there with its sha256
(while files are being replaced, both the old and the new one, so that an interruption leaves
every file recognisable).
A file may be replaced only if it is not there yet, is still exactly what metabench wrote, or
already holds the new content: a ``README.md`` of your own, or a generated one you edited, is
refused with a message naming it.

When a results folder holds no result to generate from, :func:`no_results_error` says so, and
names the ``result.json`` files there that could not be used, and why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from metabench.analysis.resultfile import (
    RESULT_FILE,
    CorruptResultError,
    read_result,
    table_problem,
)
from metabench.atomic import atomic_write_bytes, atomic_write_json, make_writable_folder
from metabench.errors import RunError
from metabench.records import RecordVersionError

MANIFEST = ".metabench-generated.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest(folder: Path) -> dict[str, list[str]]:
    path = folder / MANIFEST
    if not path.exists():
        return {}
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise RunError(f"{path} is unreadable ({error}): delete it") from None
    if not isinstance(manifest, dict) or not all(
        isinstance(digests, list) for digests in manifest.values()
    ):
        raise RunError(f"{path} is not metabench's list of generated files: delete it")
    return {str(name): [str(digest) for digest in digests] for name, digests in manifest.items()}


def check_generated(folder: Path, names: Iterable[str], option: str) -> None:
    """Refuse, before anything is written or run, to replace in ``folder`` any of ``names``
    that exists but is not metabench's (whatever content it would get): what
    :func:`write_generated` would refuse, checked early (``metabench bench`` checks its
    ``README.md`` before the grid runs, not after).

    :raises RunError: naming the file; ``option`` is the option that chose ``folder``.
    """
    manifest = _manifest(folder)
    for name in names:
        path = folder / name
        if path.is_dir():
            raise RunError(f"{path} is a folder: move it, or choose another {option}")
        if path.exists() and _sha256(path.read_bytes()) not in manifest.get(name, []):
            raise RunError(
                f"{path} was not written by metabench (or was edited since): move it, or "
                f"choose another {option}"
            )


def no_results_error(root: Path) -> RunError:
    """The error for a ``--results`` folder with no result a table or plot can use: none
    found (say what is needed), or the ``result.json`` files there and why none could be used
    (the first one's reason; the warnings name each)."""
    found = sorted(root.rglob(RESULT_FILE))
    if not found:
        return RunError(
            f"no result.json under {root}: run metabench train or bench first, or point "
            f"--results at their folder (tables and plots need finished runs' result.json)"
        )
    reason = _unusable(found[0])
    if len(found) == 1:
        return RunError(f"the only result.json under {root} cannot be used: {reason}")
    return RunError(
        f"none of the {len(found)} result.json under {root} can be used (each is named above); "
        f"the first: {reason}"
    )


def _unusable(path: Path) -> str:
    """Why the tables cannot use the result file at ``path``, naming it."""
    try:
        problem = table_problem(read_result(path))
    except (CorruptResultError, RecordVersionError) as error:
        return str(error)
    return f"{path} {problem}: delete it and re-run" if problem else f"{path} is usable"


def write_generated(folder: Path, files: Mapping[str, bytes], option: str) -> list[Path]:
    """Write ``files`` (paths relative to ``folder``) into ``folder``, creating it; the paths.

    :raises RunError: naming the first file that exists but is not metabench's, before anything
        is written; ``option`` is the command-line option that chooses ``folder``.
    """
    make_writable_folder(folder, option)
    manifest = _manifest(folder)
    replacing = dict(manifest)
    for name, data in files.items():
        path = folder / name
        if path.is_dir():
            raise RunError(f"{path} is a folder: move it, or choose another {option}")
        current = _sha256(path.read_bytes()) if path.exists() else None
        new = _sha256(data)
        if current not in (None, new, *manifest.get(name, [])):
            raise RunError(
                f"{path} was not written by metabench (or was edited since): move it, or "
                f"choose another {option}"
            )
        replacing[name] = [digest for digest in (current, new) if digest is not None]
    atomic_write_json(folder / MANIFEST, dict(sorted(replacing.items())))
    written = []
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
        manifest[name] = [_sha256(data)]
        written.append(path)
    atomic_write_json(folder / MANIFEST, dict(sorted(manifest.items())))
    return written
