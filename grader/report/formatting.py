"""Text as every report may show it: cleaned of control codes, cut to a limit with a count of
what was cut, and the small formats (percent, durations, times, anchors) the views share."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any

from grader.text import without_surrogates

MESSAGE_LIMIT = 4_000   # characters of a test's message shown
OUTPUT_LIMIT = 8_000    # characters of the output tail shown
TEXT_LIMIT = 8_000      # characters of a text artifact's body shown
REASON_LIMIT = 4_000    # characters of a run's rejection/error reason shown
CELL_LIMIT = 200        # characters of one table cell or trace label
TRACEBACK_LINES = 40    # the last lines of the student's traceback shown


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f]")
_CONTROLS = {**{i: chr(0x2400 + i) for i in range(0x20) if chr(i) not in "\n\t"}, 0x7F: "\u2421",
             **{i: "\ufffd" for i in range(0x80, 0xA0)}}


def printable(text: object) -> str:
    """Text as it can be shown anywhere: no ANSI colour codes, control characters made visible
    (U+2400 pictures), bidirectional overrides (which make text read other than it is) named, lone
    surrogates replaced; newlines and tabs kept."""
    text = str(text)
    text = without_surrogates(text)
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)
    return text.translate(_CONTROLS)


def clip(text: str, limit: int) -> tuple[str, int]:
    """The first `limit` characters of `text`, and how many were cut after them."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def clip_tail(text: str, limit: int) -> tuple[str, int]:
    """The last `limit` characters of `text`, and how many were cut before them."""
    if len(text) <= limit:
        return text, 0
    return text[len(text) - limit:], len(text) - limit


def one_line(text: Any, limit: int = CELL_LIMIT) -> str:
    """Cleaned text on one line, at most `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def percent(score: float, max_score: float) -> int:
    if max_score <= 0:
        return 0
    return max(0, min(100, math.floor(100 * score / max_score)))


def short_duration(seconds: float) -> str:
    if seconds < 0.001:
        return "<1 ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s" if seconds < 100 else f"{seconds:.0f} s"


def when(stamp: str) -> str:
    """An ISO timestamp as '2026-11-30 07:25 UTC' (left as it is when it does not parse)."""
    try:
        moment = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return one_line(stamp or "", 40)
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
        return moment.strftime("%Y-%m-%d %H:%M UTC")
    return moment.strftime("%Y-%m-%d %H:%M")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:80] or "x"
