"""Markdown that submission text cannot break out of: escaped text, code spans and fences longer
than any backtick run inside, table cells, and blank lines squeezed outside fences."""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

from grader.report.formatting import one_line, printable

_MD_PUNCT = re.compile(r"([\\`*_{}\[\]()#!|~$]|(?<=www)\.|:(?=/)|@)", re.IGNORECASE)


def md_text(text: Any) -> Markup:
    """Prose for Markdown, always placed mid-line: on one line; `<`, `>` and `&` as HTML entities (no
    tag or entity can form); the punctuation of emphasis, code, links, images, tables, strikethrough
    and math backslash-escaped, and so are the `:` of `scheme://`, the `.` of `www.` and `@`, so no
    autolink forms either."""
    flat = one_line(text, 10_000)
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return Markup(_MD_PUNCT.sub(r"\\\1", flat))


def md_code(text: Any, table: bool = False) -> Markup:
    """An inline code span (literal text: no HTML, links or emphasis), delimited by a backtick run
    longer than any inside. In a table cell `|` is escaped, which GFM honours inside code spans."""
    flat = one_line(text, 10_000)
    if not flat:
        return Markup("")
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    if flat.startswith("`") or flat.endswith("`") or (flat.startswith(" ") and flat.endswith(" ")):
        flat = f" {flat} "
    if table:
        flat = flat.replace("|", "\\|")
    return Markup(f"{fence}{flat}{fence}")


def md_cell(text: Any) -> Markup:
    return md_code(text, table=True)


def md_fence(text: Any, info: str = "text") -> Markup:
    """A fenced code block: the fence is a backtick run longer than any in the text (and at least
    three), so no line of the text can close it."""
    body = printable(text).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return Markup(f"{fence}{info}\n{body}\n{fence}")


def squeeze_blank_lines(text: str) -> str:
    """At most one blank line in a row outside fenced blocks (the templates' conditionals leave
    some); the inside of a fence is left exactly as it is."""
    out: list[str] = []
    fence = ""
    for line in text.strip("\n").split("\n"):
        if fence:
            if line.startswith(fence) and not line.strip("`"):
                fence = ""
        elif (opening := re.match(r"`{3,}", line)) is not None:
            fence = opening.group()
        elif not line.strip() and out and not out[-1].strip():
            continue
        out.append(line.rstrip() if not fence else line)
    return "\n".join(out) + "\n"
