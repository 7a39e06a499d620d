"""The terminal summary of a scorecard, drawn with rich.

Test ids (`test_x[mixed]`), messages and reasons come from the suite and the submission: they are
always given to rich as `Text`, never as strings, which rich would read as markup (`[mixed]` would
vanish, `[link=...]` would become a link), on a console that escapes every control character they
hold (`console.PipedConsole`).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.cli.console import PipedConsole, escaped
from grader.core.scorecard import Scorecard
from grader.diagnosis.words import card_diagnosis
from grader.text import without_surrogates

STYLES = {"passed": "green", "failed": "red", "timeout": "yellow", "crashed": "magenta", "error": "red bold"}


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
