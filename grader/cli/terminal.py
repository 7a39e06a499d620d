"""The terminal summary of a scorecard, drawn with rich.

Test ids (`test_x[mixed]`), messages and reasons come from the suite and the submission: they are
always given to rich as `Text`, never as strings, which rich would read as markup (`[mixed]` would
vanish, `[link=...]` would become a link), on a console that escapes every control character they
hold (`console.PipedConsole`).
"""

from __future__ import annotations

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from grader.cli.console import PipedConsole, escaped
from grader.core.scorecard import Scorecard
from grader.diagnosis.words import card_diagnosis
from grader.text import without_surrogates

STYLES = {"passed": "green", "failed": "red", "timeout": "yellow", "crashed": "magenta", "error": "red bold"}
COLUMNS = ("suite", "test", "status", "points", "why")
GAP = 2  # the columns' padding between two cells: one space each side, none at the edges


def first_line(text: str, width: int = 110) -> str:
    text = escaped(without_surrogates(text))  # escaped before the table is laid out, so widths are right
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def table_rows(card: Scorecard) -> list[list[Text]]:
    """The cells of the tests' table, a row a test, every piece of student text escaped."""
    return [[Text(escaped(test.suite)), Text(escaped(without_surrogates(test.name))),
             Text(test.status, style=STYLES.get(test.status, "")), Text(f"{test.score}/{test.max_score}"),
             Text(first_line(test.message))] for test in card.tests]


def table_of_tests(card: Scorecard, width: int, laid_out: bool = True) -> RenderableType:
    """The table of the card's tests for a console `width` wide. Where every cell fits whole, its lines
    are laid out here as rich lays out the same table (each column as wide as its widest cell, two spaces
    between columns) in a fraction of rich's time (docs/benchmarks.md); `laid_out=False`, or a table too
    wide for the line, goes to rich's `Table`, which folds the longest cells."""
    rows = table_rows(card)
    header = [Text(column, style="bold") for column in COLUMNS]
    widths = [max(cell.cell_len for cell in column) for column in zip(header, *rows)]
    if laid_out and sum(widths) + GAP * (len(widths) - 1) <= width:
        lines = []
        for cells, gap_style in ((header, "bold"), *((row, "") for row in rows)):
            line = Text()
            for at, (cell, cell_width) in enumerate(zip(cells, widths)):
                line.append_text(cell)
                line.append(" " * (cell_width - cell.cell_len), style=cell.style)  # a cell's colour fills its column
                if at < len(widths) - 1:
                    line.append(" " * GAP, style=gap_style)
            lines.append(line)
        laid = Text("\n").join(lines)
        laid.no_wrap = True  # every line fits: nothing to fold
        return laid
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    # A test id keeps its whole width while the line has room (the message gives way first); only on
    # a terminal too narrow for it is it folded over lines, never cut: `test_x[mixed]` stays whole.
    room = width - 50  # what the other columns need, the message at least 20 wide
    wanted = min(max(len(test.name) for test in card.tests), room) if room >= 20 else None
    for column in COLUMNS:
        table.add_column(column, overflow="fold" if column in ("test", "why") else "ellipsis",
                         min_width=wanted if column == "test" else None)
    for cells in rows:
        table.add_row(*cells)
    return table


def print_summary(card: Scorecard, console: Console | None = None) -> None:
    console = console or PipedConsole()
    head = Text.assemble((f"{card.title or card.exercise}", "bold"), f"  ·  tier {card.tier}  ·  ",
                         (f"{card.score}/{card.max_score} points", "bold"), f"  ·  {card.backend} sandbox")
    console.print(head)
    if card.status != "graded":
        console.print(Text(f"{card.status.upper()}: {without_surrogates(card.reason)}", style="red bold"))
    if card.tests:
        console.print(table_of_tests(card, console.width))
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
