"""An audit on the terminal: which test catches which of the author's mutants, what the generated
mutants found (by kind of change), every survivor as a diff to read, and the verdict."""

from __future__ import annotations

import json
from collections import Counter

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from grader.audit.audit import Audit

HOW = {"named": "a named test", "workload": "random workload only", "luck": "CAUGHT BY LUCK", "missed": "missed"}


def print_audit(audit: Audit, console: Console, submission_file: str) -> None:
    tests = [t.name for t in audit.reference.card.tests]
    table = Table(title="which tests catch which mutant (x = the test fails)", header_style="bold")
    table.add_column("submission")
    table.add_column("score")
    table.add_column("how")
    table.add_column("caught by (random: a workload drawn from the seed)")
    for row in audit.mutants:
        caught = [name if name in row.named_catchers else f"{name} (random)" for name in row.caught_by]
        how = row.how_caught
        table.add_row(Text(f"{row.path.stem}\n{row.description}"), f"{row.card.score}/{row.card.max_score}",
                      Text(HOW[how], style="" if how == "named" else "red bold"),
                      Text(", ".join(caught) if caught else "NOTHING", style="" if caught else "red bold"))
    console.print(table)
    # One compact line of marks per test, so the matrix fits a terminal whatever the number of mutants.
    matrix = Table(header_style="bold", box=None, title="x = the test catches mutant n (columns 1..N, in order)")
    matrix.add_column("test", overflow="fold")
    matrix.add_column("".join(str(i % 10) for i in range(1, len(audit.mutants) + 1)), no_wrap=True)
    matrix.add_column("kills", justify="right")
    matrix.add_column("generated", justify="right")  # of the tests run until a named test caught each
    for test in tests:
        marks = "".join("x" if test in row.caught_by else "·" for row in audit.mutants)
        generated = sum(1 for row in audit.generated if test in row.caught_by)
        matrix.add_row(Text(test), marks, str(marks.count("x")), str(generated))
    console.print(matrix)
    if audit.generated:
        print_generated(audit, console, submission_file)
    for row in (audit.reference, *audit.variants, audit.stub, *audit.mutants):
        for problem in row.problems:
            console.print(Text(f"{row.label}: {problem}", style="red bold"))
    for refusal in audit.refusals:
        console.print(Text(f"seeds: {refusal}", style="red bold"), soft_wrap=True)
    for warning in audit.warnings:
        console.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    for row in (audit.reference, *audit.variants):
        if row.unreached == []:
            console.print(f"{row.label}: every line of {row.path.name} is reached by a test")
        if row.untaken == []:
            console.print(f"{row.label}: every branch of {row.path.name} is taken each way by a test")
    for figure in audit.tiers:  # what each tier's suites catch: the free tier's blind spots, in one number
        console.print(f"tier {figure.tier} ({', '.join(figure.suites)}): its tests catch {figure.caught} of "
                      f"{figure.mutants} mutants; {figure.mutants - figure.caught} go unnoticed on this tier")
    if audit.reference.card.status == "error":  # nothing graded the suites: no verdict on them
        verdict = "the exercise cannot be graded"
    else:
        verdict = "the suite is strong" if audit.ok else "the suite is WEAK"
    own = sum(1 for row in audit.mutants if row.how_caught == "named")
    hows = Counter(row.how_caught for row in audit.mutants)
    not_named = ", ".join(f"{hows[how]} {words}" for how, words in (("workload", "by random workloads only"),
                                                                     ("luck", "caught by luck"), ("missed", "missed"))
                          if hows[how])
    made = ""
    if audit.generated:
        killed = sum(1 for row in audit.generated if not row.problems and not row.equivalent)
        equivalent = sum(1 for row in audit.generated if row.equivalent)
        origins = f"the reference and {len(audit.variants)} correct variant{'s' if len(audit.variants) != 1 else ''}" \
            if audit.variants else "the reference"
        made = (f", {killed}/{len(audit.generated) - equivalent} generated mutants (from {origins}) caught on every "
                f"seed ({equivalent} declared equivalent)")
    console.print(Text(f"{verdict}: reference {audit.reference.card.score}/{audit.reference.card.max_score}, "
                       f"stub {audit.stub.card.score}, {own}/{len(audit.mutants)} mutants caught by a named test "
                       f"on every seed" + (f" ({not_named})" if not_named else "") + f" on the {audit.tier} tier{made}", style="green bold" if audit.ok else "red bold"))


def print_generated(audit: Audit, console: Console, submission_file: str) -> None:
    """The generated mutants by kind of change, then each survivor: its name (what [audit.equivalent]
    takes), what let it through, and its diff against the reference."""
    kinds = Table(title=f"mutants made from the reference and each correct variant, each graded on up to "
                        f"{audit.seeds} seeds until a named test catches it", header_style="bold")
    for column in ("from", "change", "made", "caught", "equivalent", "survived"):
        kinds.add_column(column, justify="left" if column in ("from", "change") else "right")
    made: Counter[tuple[str, str]] = Counter()
    outcome: Counter[tuple[str, str, str]] = Counter()
    for row in audit.generated:
        assert row.mutant is not None
        kind = (row.mutant.variant or "reference", row.mutant.operator)
        made[kind] += 1
        outcome[(*kind, "equivalent" if row.equivalent else "survived" if row.problems else "caught")] += 1
    for kind in sorted(made, key=lambda k: (k[0] != "reference", k[0], -made[k])):
        survived = outcome[(*kind, "survived")]
        kinds.add_row(*kind, str(made[kind]), str(outcome[(*kind, "caught")]), str(outcome[(*kind, "equivalent")]),
                      Text(str(survived), style="red bold" if survived else ""))
    console.print(kinds)
    limit = audit.exercise_call_limit_s
    if audit.mutant_call_limit_s < limit:
        console.print(Text(f"their calls were cut at {audit.mutant_call_limit_s:g} s (twice the reference's slowest "
                           f"test, in steps); a test that ran past that was run again to the exercise's {limit:g} s "
                           "before it counted as a catch", style="dim"), soft_wrap=True)
    for row in audit.generated:
        if row.equivalent and row.mutant is not None:
            console.print(Text(f"ignored: {row.mutant.name}: {row.equivalent}", style="dim"), soft_wrap=True)
    for row in audit.survivors:
        assert row.mutant is not None
        console.print(Text(f"survivor: {row.mutant.name}", style="red bold"), soft_wrap=True)
        console.print(Text(f"  {row.problems[0]}", style="red"), soft_wrap=True)
        origin = row.path.read_text(encoding="utf-8")  # the reference, or the variant it was made from
        console.print(Syntax(row.mutant.diff(origin, submission_file), "diff", theme="ansi_dark",
                             background_color="default"))
        console.print(Text(f"  if no test can tell it from the {'variant ' + row.mutant.variant if row.mutant.variant else 'reference'}, declare it in "
                           "exercise.toml:", style="dim"))
        console.print(Text(f"  [audit.equivalent]\n  {declaration(row.mutant.key)}"), soft_wrap=True)


def declaration(key: str) -> str:
    """A line for exercise.toml's [audit.equivalent], ready to paste: the key, and a reason to write."""
    return f'{json.dumps(key, ensure_ascii=False)} = "why no test can tell it from the solution it was made from"'
