"""Checks a submission must pass before any sandbox starts: size, text, encoding, Python syntax.

A refusal names the exact problem (the line of a syntax error, the byte that is not UTF-8), because a
student who sent the wrong file should learn that in one glance.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path


class Rejected(Exception):
    """The submission cannot be graded as it is; the message tells the student why."""


@dataclass(frozen=True)
class Submission:
    source: bytes
    sha256: str


def read_capped(path: Path, max_bytes: int) -> bytes:
    """The file's bytes, but never more than one byte past the limit: a huge file is refused for its
    size without being read into memory."""
    with open(path, "rb") as handle:
        return handle.read(max_bytes + 1)


def _is_notebook(text: str) -> bool:
    """A notebook is JSON, which Python compiles as a dict display: it would be graded, and fail every
    test with "does not define ...", rather than be named for what it is."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        document = json.loads(text)
    except ValueError:
        return False
    return isinstance(document, dict) and "cells" in document and "nbformat" in document


def validate(data: bytes, filename: str, max_bytes: int) -> Submission:
    sha = hashlib.sha256(data).hexdigest()
    if len(data) > max_bytes:
        raise Rejected(f"the file is larger than {max_bytes:,} bytes; submissions are limited to {max_bytes:,} bytes")
    if not data.strip():
        raise Rejected("the file is empty: submit your solution's Python source")
    if b"\x00" in data:
        offset = data.index(b"\x00")
        raise Rejected(f"the file holds a NUL byte at offset {offset}: it is binary, not Python source")
    body = data[len(codecs.BOM_UTF8):] if data.startswith(codecs.BOM_UTF8) else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[:exc.start].count(b"\n") + 1
        raise Rejected(f"the file is not UTF-8 text: byte {exc.start} (line {line}) is 0x{body[exc.start]:02x}; "
                       "save it as UTF-8") from None
    if _is_notebook(text):
        raise Rejected(f"this is a Jupyter notebook (.ipynb), not a Python file: export it as Python (File > "
                       f"Save and Export Notebook As > Executable Script, or `jupyter nbconvert --to script`) and "
                       f"submit that as {filename}")
    try:
        compile(text, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        shown = (exc.text or "").rstrip("\n")
        raise Rejected(f"syntax error at {where}: {exc.msg}" + (f"\n    {shown.strip()}" if shown.strip() else "")) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise Rejected(f"the file cannot be compiled as Python: {exc.__class__.__name__}") from None
    return Submission(source=body, sha256=sha)
