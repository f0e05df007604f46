"""No file of the project keeps a merge's conflict markers: a merge once committed both sides of
two README sections and a docs table, and nothing else failed."""

from __future__ import annotations

import re
from pathlib import Path

from tests.factories import ROOT

TEXT_SUFFIXES = {".md", ".py", ".toml", ".txt", ".json", ".cfg", ".yaml", ".yml", ".ini", ""}
SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache"}
MARKER = re.compile(r"^(<{7} |={7}$|>{7} )", re.MULTILINE)


def project_text_files() -> list[Path]:
    """The text files under the project root, outside caches and environments."""
    files = []
    for path in ROOT.rglob("*"):
        parts = set(path.relative_to(ROOT).parts)
        if parts & SKIPPED_DIRS or any(p.startswith(".") and p != ".ci" for p in parts):
            continue
        if path.is_file() and path.suffix in TEXT_SUFFIXES and path.stat().st_size < 2_000_000:
            files.append(path)
    return files


def conflict_lines(text: str) -> list[int]:
    """1-based numbers of the lines that open, split or close a conflict."""
    return [text.count("\n", 0, m.start()) + 1 for m in MARKER.finditer(text)]


def test_conflict_lines_finds_each_marker() -> None:
    text = "a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> topic\nd\n======= not alone\n"
    assert conflict_lines(text) == [2, 4, 6]


def test_no_project_file_keeps_conflict_markers() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for path in project_text_files()
        if (lines := conflict_lines(path.read_text(encoding="utf-8", errors="replace")))
    }
    assert not found, f"conflict markers (file: lines): {found}"
