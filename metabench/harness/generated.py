"""Files that ``metabench table``, ``bench`` and ``plot`` generate, written without ever
replacing a file of the user's.

A folder's ``.metabench-generated.json`` lists each file metabench wrote there with its sha256
(while files are being replaced, both the old and the new one, so that an interruption leaves
every file recognisable).
A file may be replaced only if it is not there yet, is still exactly what metabench wrote, or
already holds the new content: a ``README.md`` of your own, or a generated one you edited, is
refused with a message naming it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from metabench.harness.atomic import atomic_write_bytes, atomic_write_json
from metabench.harness.run import RunError, make_writable_folder

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
