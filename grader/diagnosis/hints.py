"""The hint of a mutant: the mistake it embodies, in a student's words, from its module docstring.

A mutant's docstring holds a paragraph that starts `Misconception:` and completes the sentence "your
program behaves like one that ...":

    Misconception: counts a request's first token only when its whole prompt fits in one chunk.

The paragraph may wrap over several lines; it ends at a blank line. Its final full stop is dropped.
"""

from __future__ import annotations

import ast
from pathlib import Path

LABEL = "Misconception:"


def hint_of(source: str) -> str:
    """The hint in a mutant's source, or "" when its docstring has none (or it does not parse)."""
    try:
        doc = ast.get_docstring(ast.parse(source))
    except SyntaxError:
        return ""
    for paragraph in (doc or "").split("\n\n"):
        text = " ".join(paragraph.split())
        if text.startswith(LABEL):
            return text[len(LABEL):].strip().rstrip(".").strip()
    return ""


def mutant_hint(path: Path) -> str:
    try:
        return hint_of(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return ""
