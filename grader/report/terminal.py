"""The terminal summary of a scorecard, drawn with rich.

Test ids (`test_x[mixed]`), messages and reasons come from the suite and the submission: they are
always given to rich as `Text`, never as strings, which rich would read as markup (`[mixed]` would
vanish, `[link=...]` would become a link). And whatever is printed, `PipedConsole` shows every control
character escaped (`\x1b`, `\x07`): a window title, the clipboard (OSC 52) or a cleared screen in a
message is text on the instructor's terminal, never a command to it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from grader.core.scorecard import Scorecard
from grader.diagnosis.words import card_diagnosis
from grader.text import without_surrogates

UNBOUNDED_WIDTH = 200
# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides that make text
# read other than it is.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")


def escaped(text: str) -> str:
    """`text` with every control character written out as its escape (`\x1b`, `\u202e`)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}",
                        text)
STYLES = {"passed": "green", "failed": "red", "timeout": "yellow", "crashed": "magenta", "error": "red bold"}


class PipedConsole(Console):
    """A console whose reader may leave (`grader ... | head`): rich's default then ends the program with
    exit status 1, which `grade` keeps for "cannot vouch for a result"; this one raises BrokenPipeError
    for the command line to end as a writer killed by SIGPIPE would. Written to a file or a pipe rather
    than a terminal, its lines are as wide as a summary needs (rich would fold them at 80 columns), unless
    COLUMNS says otherwise."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if not self.is_terminal and "width" not in options and "COLUMNS" not in os.environ:
            self.width = UNBOUNDED_WIDTH

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        # Every piece of text rich draws passes here (tables render their cells through it too); its own
        # control segments (cursor moves of a progress bar) are kept, the text's controls are escaped.
        for segment in super().render(renderable, options):
            if segment.control or not _CONTROL.search(segment.text):
                yield segment
            else:
                yield Segment(escaped(segment.text), segment.style)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("the reader of the output went away")


def first_line(text: str, width: int = 110) -> str:
    text = escaped(without_surrogates(text))  # escaped before the table is laid out, so widths are right
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def print_summary(card: Scorecard, console: Console | None = None) -> None:
    console = console or PipedConsole()
    head = Text.assemble((f"{card.title or card.exercise}", "bold"), f"  ·  tier {card.tier}  ·  ",
                         (f"{card.score}/{card.max_score} points", "bold"), f"  ·  {card.backend} sandbox")
    console.print(head)
    if card.status != "graded":
        console.print(Text(f"{card.status.upper()}: {without_surrogates(card.reason)}", style="red bold"))
    if card.tests:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        # A test id keeps its whole width while the line has room (the message gives way first); only on
        # a terminal too narrow for it is it folded over lines, never cut: `test_x[mixed]` stays whole.
        room = console.width - 50  # what the other columns need, the message at least 20 wide
        wanted = min(max(len(test.name) for test in card.tests), room) if room >= 20 else None
        for column in ("suite", "test", "status", "points", "why"):
            table.add_column(column, overflow="fold" if column in ("test", "why") else "ellipsis",
                             min_width=wanted if column == "test" else None)
        for test in card.tests:
            table.add_row(Text(test.suite), Text(without_surrogates(test.name)),
                          Text(test.status, style=STYLES.get(test.status, "")),
                          f"{test.score}/{test.max_score}", Text(first_line(test.message)))
        console.print(table)
    for suite, row in card.suites.items():
        console.print(Text(f"{card.suite_label(suite)}: {row['passed']}/{row['tests']} tests passed, "
                           f"{row['score']}/{row['max_score']} points"))
    diagnosis = without_surrogates(card_diagnosis(card))
    if diagnosis:
        console.print(Text(f"A likely cause: {diagnosis}", style="yellow"), soft_wrap=True)
    for suite in dict.fromkeys(t.suite for t in card.locked):
        names = [t.name for t in card.locked if t.suite == suite]
        console.print(Text(f"{card.suite_label(suite)}, not run on the {card.tier} tier ({len(names)}): "
                           f"{', '.join(names)}", style="dim"))
