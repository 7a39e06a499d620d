"""Valid text from untrusted strings: what a submission (or the sandbox it ran in) hands the host.

Every string of a harness's results passes through here before it reaches a scorecard, and so a
report, the store or the terminal: lone surrogates (which JSON can carry but UTF-8 cannot encode) are
replaced, and text past a limit is cut with a visible count of what was cut.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def valid_text(value: Any, limit: int | None = None) -> str:
    """`value` as text that encodes as UTF-8, at most `limit` characters plus a note of what was cut."""
    text = _SURROGATE.sub(REPLACEMENT, value if type(value) is str else str(value))
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}… [{len(text) - limit:,} more characters cut]"
    return text


def valid_tail(value: Any, limit: int) -> tuple[str, int]:
    """The last `limit` characters of `value` as valid text, and how many characters were cut before them."""
    text = valid_text(value)
    cut = max(0, len(text) - limit)
    return text[cut:], cut


def valid_data(value: Any, limit: int) -> Any:
    """JSON data with every string (keys included) made valid text, each cut at `limit`."""
    if isinstance(value, str):
        return valid_text(value, limit)
    if isinstance(value, list):
        return [valid_data(v, limit) for v in value]
    if isinstance(value, dict):
        return {valid_text(k, limit): valid_data(v, limit) for k, v in value.items()}
    return value


def without_surrogates(text: str) -> str:
    """Only the replacement, no cut: for a whole document about to be written."""
    return _SURROGATE.sub(REPLACEMENT, text)
