"""A failure's cause as words that do not depend on its scenario: what the reports group failures by
and what a mutant's signature records.

One bug often fails many tests, each with its own scenario but the same broken rule ("a decode gets
exactly 1 token, but r3 got 2"; in the next test, "... but r7 got 2"). The first line of a message is
where it says what broke and, for a divergence, the first call where the program and the reference part
ways; masked of each scenario's particulars (numbers, request-style ids such as `r12`, bracketed lists
such as plans and block tables), it reads the same in every test the same mistake fails.
"""

from __future__ import annotations

import re

_LISTS = re.compile(r"\[[^\[\]]*\]")
# "at step 3, allocate(1, [4]): ..." (the call where they part ways, then the difference): one mistake
# meets different calls in different tests, and reads the same after them.
_CALL = re.compile(r"^at step #, [A-Za-z_]\w*\([^()]*\): ")
_IDS = re.compile(r"\b[A-Za-z]\d+\b")
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")


def masked_headline(message: str) -> str:
    """The message's first non-empty line, its particulars masked and its spaces made single."""
    return _CALL.sub("at step #, a call: ", _masked(message, keep_empty=False))


_EMPTY = "\0empty\0"


def masked_divergence(message: str) -> str:
    """The message's first line masked as `masked_headline` does, but keeping what tells one mistake from
    another where both part ways from the reference: the call they part ways at (its name; its arguments
    masked) and an empty list as empty. `allocate(#, [])` refused by the reference is another mistake
    than `allocate(#, […])` refused, though both read "the call raises ValueError, but yours returns
    normally" (what a mutant's signature records: grader/audit/signatures.py)."""
    return _masked(message, keep_empty=True)


def _masked(message: str, keep_empty: bool) -> str:
    line = next((line for line in str(message).split("\n") if line.strip()), "")
    masked = line.strip()
    if keep_empty:
        masked = re.sub(r"\[\s*\]", _EMPTY, masked)
    for _ in range(4):  # nested lists: innermost first
        masked = _LISTS.sub("[…]", masked)
    masked = _IDS.sub("x#", masked)
    masked = _NUMBERS.sub("#", masked)
    return " ".join(masked.replace(_EMPTY, "[]").split())


_STEP = re.compile(r"\bstep (\d+)\b")


def first_step(message: str) -> int | None:
    """The step a message's first line names (where the program and the reference part ways), if any."""
    line = next((line for line in str(message).split("\n") if line.strip()), "")
    found = _STEP.search(line)
    return int(found.group(1)) if found else None
