"""A Griffe extension for the API reference: metabench's docstrings are reST (Sphinx roles,
``::`` literal blocks, doctests), the docs site renders Markdown.

- ``:class:`~a.b.C``` and the other Python roles become code: ``C`` (``~`` keeps the last part),
  ``a.b.C`` without it;
- a paragraph ending in ``::`` ends in ``:`` (its indented block is already a Markdown code block);
- doctest lines (``>>>`` and ``...``, with the output under them) become a ``pycon`` code block,
  not a Markdown quote;
- text after the ``:param:`` fields (an example, a note) moves above them: reST allows it there,
  but Griffe's Sphinx parser would read it as part of the last field.

Only the rendering changes: the docstrings in the source stay reST.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|attr|data|obj|exc|const|term):`(~?)([^`]+)`")
DOUBLE_COLON = re.compile(r"(\S)::$", re.MULTILINE)
FIELD = re.compile(r":(?:param|type|returns?|rtype|raises?|var|ivar|cvar|vartype|yields?)\b")


def _fields_last(text: str) -> str:
    """Move the paragraphs that follow the field list (at the left margin, after a blank line)
    above its first field."""
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if FIELD.match(line)), None)
    if first is None:
        return text
    fields: list[str] = []
    after: list[str] = []
    in_field = True
    for i, line in enumerate(lines[first:]):
        if FIELD.match(line):
            in_field = True
        elif line and not line[0].isspace() and not lines[first + i - 1].strip():
            in_field = False
        (fields if in_field else after).append(line)
    if not after:
        return text
    before = lines[:first]
    while before and not before[-1].strip():
        before.pop()
    while fields and not fields[-1].strip():
        fields.pop()
    while after and not after[-1].strip():
        after.pop()
    return "\n".join([*before, "", *after, "", *fields])


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _doctests(text: str) -> str:
    """Fence every run of doctest lines (and the output lines under them) as ``pycon``; a run
    in a ``::`` literal block moves out to the indent of the paragraph that introduces it."""
    out: list[str] = []
    fence: str | None = None  # the indent of the open fence
    strip = 0  # how much of each line's indent the open fence removes
    intro = ""  # the last non-blank line before the current one
    for line in text.split("\n"):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(">>>"):
            fence = _indent(intro) if intro.rstrip().endswith("::") else _indent(line)
            strip = len(_indent(line)) - len(fence)
            if out and out[-1].strip():
                out.append("")
            out.append(f"{fence}```pycon")
        elif fence is not None and not stripped:
            out.append(f"{fence}```")
            fence = None
        if fence is not None:
            line = line[strip:] if not line[:strip].strip() else line.lstrip()
        out.append(line)
        if stripped:
            intro = line
    if fence is not None:
        out.append(f"{fence}```")
    return "\n".join(out)


def markdown(text: str) -> str:
    """A reST docstring's text, as the docs site should render it."""
    return DOUBLE_COLON.sub(r"\1:", _doctests(ROLE.sub(_role, _fields_last(text))))


class SphinxToMarkdown(griffe.Extension):
    """Rewrite each docstring once, when Griffe has loaded its object."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
