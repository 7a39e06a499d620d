"""The command line's conventions: --version, help for every option, `-` for standard output,
--fail-under, and test ids shown whole in the terminal."""

from __future__ import annotations

import argparse
import io
import json
import re
import shlex
import subprocess
import sys
import textwrap
from importlib.metadata import version

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.cli import BELOW, EXAMPLES, build_parser, main, subcommands, threshold
from grader.cli.console import PipedConsole
from grader.cli.terminal import print_summary, table_of_tests
from grader.core.scorecard import SCHEMA_VERSION, Scorecard
from grader.core.scorecard import TestResult as Result
from tests.helpers import ATTACKS, EXERCISE, REFERENCE, STUB

FREE = ["--exercise", EXERCISE, "--tier", "free", "--sandbox", "local"]


@pytest.mark.unit
def test_version_names_the_package_and_the_scorecard_schema(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == f"grader {version('grader')} (scorecard schema {SCHEMA_VERSION})\n"


def every_parser() -> list[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser()
    return [("", parser), *subcommands(parser)]


@pytest.mark.unit
def test_every_option_and_command_of_every_parser_has_help():
    undocumented = []
    for words, parser in every_parser():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                documented = {choice.dest for choice in action._choices_actions if choice.help}
                undocumented += [f"grader {words} {name}" for name in action.choices if name not in documented]
            if not action.help or action.help == argparse.SUPPRESS:
                undocumented.append(f"grader {words} {'/'.join(action.option_strings) or action.dest}")
    assert undocumented == []


@pytest.mark.unit
def test_every_command_has_examples_and_every_example_parses():
    parser = build_parser()
    for words, sub in subcommands(parser):
        assert words in EXAMPLES, f"`grader {words}` has no examples in EXAMPLES"
        help_text = sub.format_help()
        for line in EXAMPLES[words]:
            assert line in help_text
            tokens = shlex.split(line)
            command = tokens[1:tokens.index("|")] if "|" in tokens else tokens[1:]
            command = command[:command.index(">")] if ">" in command else command
            args = parser.parse_args(command)  # exits (fails the test) on a wrong example
            assert " ".join(command).startswith(words.split()[0]) and hasattr(args, "run")


@pytest.mark.unit
def test_defaults_are_shown_once():
    help_of = dict(every_parser())
    assert "submissions graded at once (default: 2)" in " ".join(help_of["batch"].format_help().split())
    serve = " ".join(help_of["serve"].format_help().split())
    assert "(default: 8000)" in serve and "(default: 127.0.0.1)" in serve and "(default: 30.0)" in serve
    grade = " ".join(help_of["grade"].format_help().split())
    assert "(default: auto)" in grade and "(default: None)" not in grade and "(default: False)" not in grade
    assert "(default: its default tier) (default" not in grade


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    """Scorecards of the reference and of the stub on the free tier, graded through the CLI."""
    folder = tmp_path_factory.mktemp("cards")
    for name, path in (("reference", REFERENCE), ("stub", STUB)):
        assert main(["grade", str(path), *FREE, "--json", str(folder / f"{name}.json")]) == 0
    return folder


def test_json_dash_writes_only_the_scorecard_to_standard_output(capsys):
    assert main(["grade", str(REFERENCE), *FREE, "--json", "-"]) == 0
    captured = capsys.readouterr()
    card = json.loads(captured.out)  # nothing but the document
    assert card["score"] == card["max_score"] == 10 and card["exercise_fingerprint"]
    assert "10/10 points" in captured.err and "scorecard: standard output" in captured.err
    assert not (REFERENCE.parent / "-").exists()


def test_report_and_export_write_to_standard_output_with_a_dash(cards, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(cards / "stub.json"), "--md", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out.lstrip().startswith("#") and "0/10" in captured.out and "Markdown report" in captured.err
    assert main(["export", str(cards / "reference.json"), "--format", "gradescope", "-o", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 10
    assert main(["grade", str(REFERENCE), *FREE, "--json", "-", "--md", "-"]) == 2
    assert "only one output" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


@pytest.mark.unit
@pytest.mark.parametrize("text, expected", [("8", (8.0, False)), ("80%", (80.0, True)), ("0", (0.0, False)),
                                            ("100%", (100.0, True)), (" 7.5 ", (7.5, False))])
def test_fail_under_reads_points_or_a_percentage(text, expected):
    found = threshold(text)
    assert (found.value, found.percent) == expected


@pytest.mark.unit
@pytest.mark.parametrize("text", ["", "%", "eighty", "-1", "101%", "nan", "inf"])
def test_fail_under_refuses_what_is_not_a_score(text, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["grade", str(REFERENCE), *FREE, "--fail-under", text])
    assert stop.value.code == 2 and "--fail-under" in capsys.readouterr().err


def test_fail_under_gates_on_the_score_and_leaves_the_default_contract_alone(capsys):
    assert main(["grade", str(STUB), *FREE]) == 0  # graded, whatever the score
    assert main(["grade", str(STUB), *FREE, "--fail-under", "1"]) == BELOW == 4
    assert "below --fail-under 1 points" in " ".join(capsys.readouterr().out.split())
    assert main(["grade", str(REFERENCE), *FREE, "--fail-under", "100%"]) == 0
    assert main(["grade", str(REFERENCE), *FREE, "--fail-under", "10"]) == 0
    assert main(["grade", str(REFERENCE), *FREE, "--fail-under", "11"]) == BELOW
    # A rejected file is graded (exit 0) and scores 0, so it is below any positive bar.
    assert main(["grade", str(ATTACKS / "syntax_error.py"), *FREE]) == 0
    assert main(["grade", str(ATTACKS / "syntax_error.py"), *FREE, "--fail-under", "50%"]) == BELOW


def column_text(printed: str, column: str, after: str | None = None) -> str:
    """The text of one column of the summary's table (up to the column `after`), its folded lines joined."""
    lines = printed.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("suite "))
    start, end = lines[header].index(column), lines[header].index(after) if after else None
    rows = lines[header + 1:]
    rows = rows[:next(i for i, line in enumerate(rows) if "tests passed" in line)]
    return "".join(line[start:end].strip() for line in rows)


@pytest.mark.unit
def test_the_terminal_table_shows_test_ids_whole_and_student_text_as_text():
    tests = [Result(id=f"t::{name}", name=name, suite="visible", status="failed", score=0, max_score=1,
                    message=message)
             for name, message in (("test_schedule[mixed]", "[bold]not bold[/bold] [link=https://x.example]y"),
                                   ("test_limits[0-1-[x]]", "expected [1, 2] got [red]"))]
    card = Scorecard(exercise="e", tier="free", submission_sha256="0" * 64, status="graded", score=0, max_score=2,
                     tests=tests, reason="")
    for width in (50, 120):  # narrow: the ids are folded over lines, never cut
        out = io.StringIO()
        print_summary(card, Console(file=out, width=width, color_system=None))
        assert column_text(out.getvalue(), "test", "status") == "test_schedule[mixed]test_limits[0-1-[x]]"
        assert column_text(out.getvalue(), "why").replace(" ", "").startswith("[bold]notbold[/bold]")
        assert "got [red]" in out.getvalue() or width < 100
    out = io.StringIO()
    rejected = Scorecard(exercise="e", tier="free", submission_sha256="0" * 64, status="rejected", score=0,
                         max_score=2, reason="line 1: [bold]x[/bold]")
    print_summary(rejected, Console(file=out, width=100, color_system=None))
    assert "line 1: [bold]x[/bold]" in out.getvalue()


@pytest.mark.unit
@pytest.mark.parametrize("color", [None, "standard"])
def test_the_table_of_tests_laid_out_where_it_fits_reads_as_rich_lays_it_out(color):
    statuses = ["passed", "failed", "timeout", "crashed", "error"]
    tests = [Result(id=f"t::test_{i}", name=f"test_{'x' * (i % 7)}_{i}[case-{i}]", suite=("visible", "hidden")[i % 2],
                    status=statuses[i % 5], score=i % 3, max_score=2 + i % 11,
                    message=["", "expected [1, 2] got 3", "漢字 wide ✓ text\nsecond line", "\x1b[31m[red]"][i % 4])
             for i in range(23)]
    card = Scorecard(exercise="e", tier="free", submission_sha256="0" * 64, status="graded", score=0, max_score=2,
                     tests=tests, reason="")

    def shown(laid_out: bool) -> str:
        out = io.StringIO()
        console = PipedConsole(file=out, width=140, force_terminal=color is not None, color_system=color)
        console.print(table_of_tests(card, console.width, laid_out))
        return out.getvalue()

    laid, by_rich = shown(True), shown(False)
    assert isinstance(table_of_tests(card, 140), Text) and isinstance(table_of_tests(card, 60), Table)
    assert re.sub(r"\x1b\[[0-9;]*m", "", laid) == re.sub(r"\x1b\[[0-9;]*m", "", by_rich)
    assert laid.count("\n") == len(tests) + 1 and "\\x1b[31m[red]" in laid
    if color:  # each status in its colour, as rich shows it
        assert "\x1b[31mfailed" in laid and "\x1b[33mtimeout" in laid and "\x1b[35mcrashed" in laid


def test_a_summary_written_to_a_pipe_keeps_each_test_id_on_one_line(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["grade", str(REFERENCE), "--exercise", EXERCISE, "--tier", "premium", "--sandbox", "local"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("test_add_refuses_a_live_duplicate_id_and_accepts_it_once_finished" in line for line in lines)


def test_a_reader_that_leaves_ends_grade_as_sigpipe_would_not_as_a_grading_it_cannot_vouch_for(tmp_path):
    # `grader grade ... | head -1`: exit status 1 would say "the grader cannot vouch for a result". The
    # reader here leaves at once, long before the grading's first line.
    command = (f"{shlex.quote(sys.executable)} -m grader.cli grade {shlex.quote(str(REFERENCE))} "
               f"{' '.join(FREE)} | true; echo ${{PIPESTATUS[0]}}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "141" and done.stderr == "", (done.stdout, done.stderr)


@pytest.mark.unit
@pytest.mark.parametrize("command", [
    ["grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "local", "--json", "{missing}/card.json"],
    ["grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "local", "--html", "{folder}"],
    ["batch", "{folder}", "--exercise", EXERCISE, "--sandbox", "local", "--gradebook", "{missing}/g.csv"],
    ["report", "{missing}/card.json", "--md", "{missing}/r.md"],
])
def test_an_output_that_cannot_be_written_is_refused_before_any_grading(tmp_path, capsys, monkeypatch, command):
    graded = []
    monkeypatch.setattr("grader.core.grading.grade_bytes", lambda *args: graded.append(args))
    folder, missing = tmp_path / "class", tmp_path / "nodir"
    folder.mkdir()
    argv = [part.format(folder=folder, missing=missing) for part in command]
    assert main([*argv, "--db", str(tmp_path / "s.db")] if command[0] == "batch" else argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "does not exist" in err or "is a folder" in err
    assert graded == [] and not missing.exists()


def test_report_and_export_take_a_scorecard_from_the_store(tmp_path, capsys):
    db = str(tmp_path / "class.db")
    assert main(["report", "--submission", "1", "--db", db]) == 2
    assert "no store at" in capsys.readouterr().err and not (tmp_path / "class.db").exists()
    for source in (STUB, REFERENCE):
        assert main(["submit", str(source), "--student", "alice", "--exercise", EXERCISE, "--tier", "free",
                     "--sandbox", "local", "--db", db]) == 0
    capsys.readouterr()
    assert main(["report", "--submission", "1", "--db", db, "--md", "-"]) == 0
    assert "0/10 points" in capsys.readouterr().out
    assert main(["report", "--student", "alice", "--exercise", EXERCISE, "--db", db, "--md", "-"]) == 0
    assert "10/10 points" in capsys.readouterr().out  # her latest
    assert main(["export", "--submission", "2", "--db", db, "--format", "gradescope"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 10
    for argv, why in ((["--submission", "9"], "holds no scorecard of submission 9"),
                      (["--student", "bob", "--exercise", EXERCISE], "holds no scorecard of bob's"),
                      (["--student", "alice"], "--student goes with --exercise"),
                      ([], "give a scorecard file, or --submission N")):
        assert main(["report", *argv, "--db", db]) == 2
        assert why in capsys.readouterr().err, argv


def test_escape_sequences_from_a_submission_are_shown_escaped_never_sent_to_the_terminal(tmp_path, capsys):
    """A window title, the clipboard (OSC 52) and a cleared screen in what a submission raises reach the
    instructor's terminal as text: every control character escaped, the summary's own colours kept."""
    hostile = tmp_path / "scheduler.py"
    hostile.write_text(STUB.read_text() + textwrap.dedent('''

        _SEQUENCES = "\\u202egnp \\x1b]52;c;cm0g\\x07 \\x1b[2J \\x9b31m \\x1b]0;pwned\\x07"


        class Scheduler(Scheduler):
            def __init__(self, *args, **kwargs):
                raise RuntimeError(_SEQUENCES)
        '''))
    assert main(["grade", str(hostile), *FREE]) == 0
    printed = capsys.readouterr().out
    assert "\\x1b]52;c;cm0g" in printed and "\\x1b[2J" in printed and "\\u202e" in printed
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", printed), repr(printed)
    out = io.StringIO()
    card = Scorecard(exercise="e", tier="free", submission_sha256="0" * 64, status="rejected", score=0,
                     max_score=2, reason="\x1b]0;title\x07 line 1")
    print_summary(card, PipedConsole(file=out, force_terminal=True, color_system="standard"))
    # Only the summary's own colour codes (SGR: ESC [ ... m) remain as sequences.
    assert re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue()).count("\x1b") == 0 and "\\x1b]0;title" in out.getvalue()


@pytest.mark.parametrize(("target", "output", "says"), [
    ("gradescope", "missing/autograder.zip", "the folder {tmp}/missing does not exist"),
    ("gradescope", ".", "is a folder; Gradescope takes a zip"),
    ("gradescope", "notes.txt", "give a name ending in .zip"),
    ("prairielearn", "notes.txt", "is a file; PrairieLearn takes a question folder"),
    ("prairielearn", "missing/question", "the folder {tmp}/missing does not exist"),
])
def test_package_refuses_an_output_it_cannot_write_before_any_work(target, output, says, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("an instructor's notes, not to be overwritten")
    image = ["--image", "course/grader:1"] if target == "prairielearn" else []
    code = main(["package", "--target", target, "--exercise", EXERCISE, *image, "-o", str(tmp_path / output)])
    assert code == 2 and says.format(tmp=tmp_path) in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text().startswith("an instructor's notes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("document", ['{"score": 3}', "[1, 2]", '{"schema_version": 99, "status": "graded"}'])
def test_export_of_a_json_that_is_no_scorecard_says_so(document, tmp_path, capsys):
    (tmp_path / "x.json").write_text(document)
    assert main(["export", str(tmp_path / "x.json"), "--format", "junit"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "x.json: " in err and ("not a scorecard" in err or "schema version 99 is not 1" in err), err


@pytest.mark.parametrize("given, says", [
    ("grader.example.edu", "'grader.example.edu' has no scheme: give the whole address, such as "
                           "https://grader.example.edu/"),
    ("ftp://grader.example.edu/", "the scheme must be https (or http), not 'ftp'"),
    ("https://grader.example.edu/?course=7", "has a query (?course=7): give the address alone"),
    ("https://grader.example.edu/#top", "has a fragment (#top): give the address alone"),
    ("https://grader.example.edu/grader/", "has a path (/grader/)"),
    ("https://me:secret@grader.example.edu/", "holds a user name or password"),
    ("https://", "names no host"),
    ("https://grader.example.edu:port/", "names no host (and port)"),
    ("https://grader example.edu/", "is not an address"),
])
def test_a_base_url_that_is_no_public_address_is_refused_saying_what_is_wrong(given, says, capsys, monkeypatch,
                                                                             tmp_path):
    import grader.web.serve

    monkeypatch.setattr(grader.web.serve, "serve", lambda options, lti=None: pytest.fail("served with a wrong --base-url"))
    for command in (["serve"], ["roster", "instructor-link", "--db", str(tmp_path / "class.db")]):
        assert main([*command, "--base-url", given]) == 2, command
        said = capsys.readouterr().err
        assert "--base-url" in said and says in " ".join(said.split()), said
    assert not (tmp_path / "class.db").exists()  # refused before anything was made


@pytest.mark.unit
def test_serve_takes_its_public_address_from_base_url(monkeypatch):
    import grader.web.serve

    given = []
    monkeypatch.setattr(grader.web.serve, "serve", lambda options, lti=None: given.append(options))
    for address, kept in (("https://grader.example.edu/", "https://grader.example.edu"),
                          ("HTTPS://Grader.example.edu:8443", "https://Grader.example.edu:8443"), (None, None)):
        assert main(["serve", *(["--base-url", address] if address else [])]) == 0
        assert given.pop().base_url == kept


def test_the_choices_the_parser_spells_out_are_those_of_the_modules_it_leaves_unimported():
    from grader.bundles import TARGETS
    from grader.cli import common, package
    from grader.core.exercise import VISIBILITIES
    from grader.sandbox.choose import SANDBOXES

    assert (common.SANDBOXES, common.VISIBILITIES, package.TARGETS) == (SANDBOXES, VISIBILITIES, TARGETS)


def test_the_command_line_imports_no_command_until_one_runs():
    """`grader grade` pays for what grading needs, not for the store, the bundles or the web service:
    the parsers are registered without importing what their commands use."""
    heavy = ["grader.core.exercise", "grader.sandbox.choose", "grader.bundles", "grader.course.store", "grader.web",
             "grader.report", "rich.console", "jinja2", "sqlalchemy"]
    code = f"import sys, grader.cli; grader.cli.build_parser(); print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_a_file_not_named_as_the_exercises_submission_file_is_said_to_be_graded_as_it(tmp_path, capsys):
    answer = tmp_path / "my answer.txt"
    answer.write_bytes(REFERENCE.read_bytes())
    assert main(["grade", str(answer), *FREE]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "note: my answer.txt graded as scheduler.py, the exercise's submission file" in out
    assert main(["grade", str(REFERENCE), *FREE, "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert "graded as" not in captured.err and json.loads(captured.out)["score"] == 10
