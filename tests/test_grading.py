"""End to end on the local sandbox: the reference, the stub, tiers, rejections, and failing closed."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path
from typing import get_args, get_type_hints

import pytest

from grader.cli import main
from grader.core.backend import PlainBackend, RawRun
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes, judge
from grader.core.scorecard import RUN_STATUSES, Diagnosis, Scorecard, TestResult
from grader.core.suite_tests import list_tests
from grader.harness.contract import RESULTS_MARKER, Results, TestRecord, results_line
from grader.sandbox.local import run_local
from tests.helpers import EXERCISE, REFERENCE, STUB, mutant_file


@pytest.fixture(scope="module")
def exercise():
    return load_exercise(EXERCISE)


def grade(exercise, data: bytes, tier: str = "premium") -> Scorecard:
    return grade_bytes(data, exercise, tier, run_local, "local")


@pytest.fixture(scope="module")
def reference_card(exercise):
    return grade(exercise, REFERENCE.read_bytes())


def test_the_reference_gets_full_marks_on_the_premium_tier(exercise, reference_card):
    card = reference_card
    assert card.status == "graded" and card.tier == "premium"
    assert card.score == card.max_score > 0
    hidden = list_tests(exercise.suites["hidden"])
    assert {t.suite for t in card.tests} == {"visible", "hidden"}
    assert len([t for t in card.tests if t.suite == "hidden"]) >= len(hidden) >= 7
    assert all(t.status == "passed" and t.score == t.max_score for t in card.tests)
    assert card.locked == []


def test_the_same_submission_always_gets_the_same_scorecard(exercise, reference_card):
    again = grade(exercise, REFERENCE.read_bytes())
    strip = lambda card: [(t.id, t.status, t.score, t.message) for t in card.tests]  # noqa: E731
    assert strip(again) == strip(reference_card)


def test_the_stub_scores_zero_with_a_clear_message_on_every_test(exercise):
    card = grade(exercise, STUB.read_bytes())
    assert card.status == "graded" and card.score == 0 and card.tests
    for test in card.tests:
        assert test.status == "failed", (test.name, test.status, test.message)
        assert "not implemented" in test.message


@pytest.mark.unit
def test_a_failed_test_is_reported_without_pytest_reading_source_files(monkeypatch):
    """A failing test's record is made by the harness (`explain`); pytest's own description of the
    failure, which re-parses the source of every frame, is never built."""
    from _pytest._code import code as pytest_code

    from grader.harness import plugin

    def parse(*args, **kwargs):
        raise AssertionError("pytest looked up a frame's source")

    monkeypatch.setattr(pytest_code.Code, "fullsource", property(parse))
    monkeypatch.setattr(pytest_code.TracebackEntry, "getsource", parse)
    item = type("Item", (), {})()
    plugin.GradingPlugin.pytest_itemcollected(item)
    try:
        raise ValueError("x" * 5000)
    except ValueError:
        line = item.repr_failure(pytest.ExceptionInfo.from_current())
    assert line.startswith("ValueError: xxx") and len(line) < 1100


def test_the_free_tier_runs_only_the_visible_suite_and_lists_the_locked_ones(exercise):
    card = grade(exercise, REFERENCE.read_bytes(), tier="free")
    assert {t.suite for t in card.tests} == {"visible"}
    assert len(card.tests) == 2 and card.score == card.max_score == 2 * exercise.suites["visible"].points
    locked = {t.name for t in card.locked}
    assert locked == set(list_tests(exercise.suites["hidden"]))
    assert all(t.suite == "hidden" for t in card.locked)


@pytest.mark.parametrize("data, expected", [
    (b"def f(:\n    pass\n", "syntax error at line 1"),
    (b"x = 1\ny = 2\nclass Scheduler(\n", "syntax error at line 3"),
    (b"", "the file is empty"),
    (b"   \n\n", "the file is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "NUL byte"),
    ("x = 'caf\u00e9'\n".encode("latin-1"), "not UTF-8 text: byte 8 (line 1)"),
    (b"# " + b"x" * (300 * 1024), "submissions are limited to 262,144 bytes"),
])
def test_unusable_files_are_rejected_with_a_specific_message_and_score_zero(exercise, data, expected):
    card = grade(exercise, data)
    assert card.status == "rejected" and card.score == 0 and card.tests == []
    assert expected in card.reason
    assert card.max_score > 0  # a rejection still says what was at stake


def test_results_without_this_runs_nonce_are_refused(exercise, reference_card):
    results = Results("forged", [], [])
    card = replace(reference_card, tests=[], score=0, status="graded")
    judge(card, RawRun(results_line(results).encode(), 0, False, 0.1), exercise, "premium", "the-real-nonce")
    assert card.status == "error" and card.score == 0 and "forged" in card.reason


@pytest.mark.unit
def test_the_host_makes_the_run_and_the_card_keeps_the_seed_it_sent(exercise):
    """grade_bytes makes each run's nonce and seed once: the backend is handed them, the results must
    carry that nonce, and the card records that seed (a backend cannot pick either)."""
    sent = []

    def backend(ex, source, tier, run):
        sent.append(run)
        return RawRun(results_line(Results(run.nonce, ["stop here"], [])).encode(),
                      0, False, 0.1)

    first = grade_bytes(REFERENCE.read_bytes(), exercise, "free", PlainBackend(backend), "fake")
    second = grade_bytes(REFERENCE.read_bytes(), exercise, "free", PlainBackend(backend), "fake")
    assert first.reason == "stop here", first.reason  # the nonce was accepted: the results were read
    assert first.seed == sent[0].seed == second.seed == sent[1].seed  # the same file, the same workloads
    assert sent[0].nonce != sent[1].nonce and len(sent[0].nonce) == 32


@pytest.mark.unit
def test_the_grading_diagnoses_the_judged_card_only_when_given_how(exercise):
    """The grading knows no diagnosis (grader/diagnosis stands above it): who grades for a person hands
    in `diagnose`, which is given the card once it is judged; a rejected file is not diagnosed."""
    def backend(ex, source, tier, run):
        return RawRun(results_line(Results(run.nonce, ["stop here"], [])).encode(), 0, False, 0.1)

    seen = []
    likely = [Diagnosis("01_late", "emits a token late", 0.9)]

    def diagnose(card, ex):
        seen.append((card.status, card.reason, ex))
        return likely

    told = grade_bytes(REFERENCE.read_bytes(), exercise, "free", PlainBackend(backend), "fake", diagnose=diagnose)
    assert told.diagnosis == likely and seen == [("error", "stop here", exercise)]
    assert grade_bytes(REFERENCE.read_bytes(), exercise, "free", PlainBackend(backend), "fake").diagnosis == []
    rejected = grade_bytes(b"def f(:\n", exercise, "free", PlainBackend(backend), "fake", diagnose=diagnose)
    assert rejected.status == "rejected" and rejected.diagnosis == [] and len(seen) == 1


@pytest.mark.unit
def test_a_scorecards_status_is_one_of_the_run_statuses_in_its_type_too():
    """`Scorecard.status` is typed as its statuses (mypy holds every assignment to it), which reading a card checks."""
    assert get_args(get_type_hints(Scorecard)["status"]) == RUN_STATUSES == ("graded", "rejected", "error")
    card = Scorecard(exercise=EXERCISE, tier="free", submission_sha256="", status="graded", score=0, max_score=0)
    assert Scorecard.from_dict(card.to_dict()) == card
    with pytest.raises(ValueError, match="unknown scorecard status 'passed'"):
        Scorecard.from_dict({**card.to_dict(), "status": "passed"})


@pytest.mark.unit
def test_a_run_without_results_or_with_a_test_missing_is_an_error(exercise):
    card = Scorecard(exercise=EXERCISE, tier="premium", submission_sha256="", status="graded", score=0, max_score=0)
    judge(card, RawRun(b"", -9, False, 1.0), exercise, "premium", "n")
    assert card.status == "error" and "without results" in card.reason
    passed = {"nodeid": "x", "suite": "visible", "name": "test_decodes_run_before_the_prompt", "status": "passed",
              "message": "", "description": "", "duration_s": 0.1, "traceback": [], "output": "",
              "output_cut": 0, "artifacts": []}
    results = Results("n", [], [passed])
    card = Scorecard(exercise=EXERCISE, tier="premium", submission_sha256="", status="graded", score=0, max_score=0)
    judge(card, RawRun(results_line(results).encode(), 0, False, 0.1), exercise, "premium", "n")
    assert card.status == "error" and card.score == 0 and "no result for" in card.reason
    card = Scorecard(exercise=EXERCISE, tier="premium", submission_sha256="", status="graded", score=0, max_score=0)
    judge(card, RawRun(RESULTS_MARKER.encode() + b" " + base64.b64encode(b"{not json"), 0, False, 0.1), exercise, "premium",
          "n")
    assert card.status == "error" and "could not be read" in card.reason


@pytest.mark.unit
def test_a_harness_that_dies_leaves_its_traceback_in_the_log(exercise, caplog):
    """The card says the harness ended; the log keeps why (once discarded with the rest of its output)."""
    died = (b"Traceback (most recent call last):\n  File \"plugin.py\", line 3, in <module>\n"
            b"RuntimeError: the lane could not start\n")
    card = Scorecard(exercise=EXERCISE, tier="premium", submission_sha256="", status="graded", score=0, max_score=0)
    with caplog.at_level("ERROR", logger="grader.grading"):
        judge(card, RawRun(died, 1, False, 1.0), exercise, "premium", "n")
    assert card.status == "error" and "exit status 1" in card.reason and "RuntimeError" not in card.reason
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "RuntimeError: the lane could not start" in logged and "exit status 1" in logged


MUTANT = mutant_file("03_skip_blocked_head")


def test_cli_submit_tells_a_mutant_its_likely_misconception(tmp_path, capsys):
    """`grader submit` grades for a person: it hands the grading the diagnosis."""
    assert main(["submit", str(MUTANT), "--student", "alice", "--exercise", EXERCISE, "--sandbox", "local",
                 "--db", str(tmp_path / "class.db")]) == 0
    assert "A likely cause: Your program behaves like one that skips a waiting request" in \
        " ".join(capsys.readouterr().out.split())


def test_cli_grade_tells_a_mutant_its_likely_misconception(tmp_path):
    out = tmp_path / "card.json"
    assert main(["grade", str(MUTANT), "--exercise", EXERCISE, "--sandbox", "local", "--json", str(out)]) == 0
    assert [found["mutant"] for found in json.loads(out.read_text())["diagnosis"]] == ["03_skip_blocked_head"]


def test_cli_grade_writes_the_scorecard_and_exits_zero_whatever_the_score(tmp_path, capsys):
    out = tmp_path / "card.json"
    assert main(["grade", str(STUB), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local",
                 "--json", str(out)]) == 0
    card = json.loads(out.read_text())
    assert card["schema_version"] == 1 and card["score"] == 0 and card["status"] == "graded"
    assert {"exercise", "tier", "submission_sha256", "status", "score", "max_score", "tests", "locked"} <= set(card)
    assert {"id", "name", "suite", "status", "score", "max_score", "message", "duration_s"} <= set(card["tests"][0])
    printed = " ".join(capsys.readouterr().out.split())
    assert "0/10 points" in printed and "not implemented" in printed


def test_cli_rejects_a_syntax_error_with_its_line_and_exit_zero(tmp_path, capsys):
    bad = tmp_path / "scheduler.py"
    bad.write_text("class Scheduler:\n    def schedule(self)\n        return []\n")
    assert main(["grade", str(bad), "--exercise", EXERCISE, "--sandbox", "local"]) == 0
    assert "syntax error at line 2" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv, expected", [
    (["grade", "/no/such/file.py", "--exercise", EXERCISE], "no such file"),
    (["grade", str(STUB), "--exercise", "no_such_exercise"], "no exercise named 'no_such_exercise'"),
    (["grade", str(STUB), "--exercise", "../../etc"], "neither an exercise folder nor a valid exercise name"),
    (["grade", str(Path(__file__).parent), "--exercise", EXERCISE], "not a file"),
])
def test_cli_usage_problems_exit_two_with_a_specific_message(argv, expected, capsys):
    assert main(argv) == 2
    assert expected in capsys.readouterr().err.replace("\n", " ")


def test_a_submission_that_rewrites_its_own_file_cannot_change_what_later_tests_run(exercise):
    # Each test's worker runs the file as it came (compiled once by the zygote), not as an earlier
    # worker left it.
    source = REFERENCE.read_bytes() + (b"\nwith open(__file__, 'a') as _own:\n"
                                       b"    _own.write('\\nraise RuntimeError(\"rewritten by an earlier test\")\\n')\n")
    card = grade(exercise, source)
    assert card.status == "graded" and card.score == card.max_score, [t.message for t in card.tests]


@pytest.mark.parametrize("mutant, expected", [
    ("10_chunk_uses_prompt_len", "after 19 chunks the prompt has 8512 of 8,192 tokens prefilled"),
    ("26_one_admission_per_step", "the plan begins with 2 one-token entries (2 entries in all)"),
])
def test_the_visible_tests_say_what_the_submission_did(exercise, mutant, expected):
    source = mutant_file(mutant)
    card = grade_bytes(source.read_bytes(), exercise, "free", run_local, "local")
    assert any(expected in t.message for t in card.tests), [t.message for t in card.tests]


def test_a_documented_attribute_the_submission_lacks_is_named_as_missing(exercise):
    """Correct code under another name for `reserved`: every test that reads it says it is missing, in the
    statement's words, never that it is None."""
    source = REFERENCE.read_text().replace("self.reserved", "self.kv_in_use")
    card = grade(exercise, source.encode())
    said = [t.message for t in card.tests if "reserved" in t.message]
    assert said and card.score < card.max_score
    assert all("NoneType" not in m for m in said)
    assert any("has no attribute reserved" in m and "the KV tokens reserved by the running requests" in m
               for m in said), said


def test_a_prompt_left_out_of_the_plan_is_said_to_be_missing_not_to_have_got_a_decodes_token(exercise):
    source = REFERENCE.read_text() + (
        "\n_schedule = Scheduler.schedule\n"
        "Scheduler.schedule = lambda self: [(r, n) for r, n in _schedule(self) if r.rid != 999]\n")
    card = grade_bytes(source.encode(), exercise, "free", run_local, "local")
    message = {t.name: t.message for t in card.tests}["test_decodes_run_before_the_prompt"]
    assert "the plan holds none of it" in message and "got 1" not in message, message


@pytest.mark.parametrize("document", [
    '{"schema": 2, "nonce": "n", "problems": [], "tests": []}',
    '{"schema": 1, "nonce": 5, "problems": [], "tests": []}',
    '{"schema": 1, "nonce": "n", "problems": "none", "tests": []}',
    '{"schema": 1, "nonce": "n", "problems": [3], "tests": []}',
    '{"schema": 1, "nonce": "n", "problems": [], "tests": [["x"]]}',
    '[1, 2]',
])
def test_the_results_document_reads_back_what_it_wrote_and_refuses_other_shapes(document):
    written = Results("n", ["a problem"], [{"name": "test_x", "status": "passed"}])
    assert Results.from_json(written.to_json()) == written
    with pytest.raises(ValueError):
        Results.from_json(document)


def test_a_test_record_crosses_the_boundary_whole_and_enters_the_host_only_within_its_bounds():
    """The harness writes a record with `to_dict`; the host reads it with `from_untrusted`, which keeps
    what is in bounds as it was and cuts, cleans or refuses the rest."""
    record = TestRecord(nodeid="tests/test_x.py::test_x[1]", suite="visible", name="test_x[1]", description="d",
                        status="failed", message="m", traceback=["line"], duration_s=0.5, cpu_wait_s=0.25,
                        output="out", output_cut=3, artifacts=[{"kind": "text", "body": "b"}], lines=[3],
                        arcs=[[-1, 3], [3, -1]])
    assert TestRecord.from_untrusted(json.loads(json.dumps(record.to_dict())), {"visible"}) == record
    hostile = {**record.to_dict(), "message": "\ud800" + "x" * 9_000, "output": "y" * 70_000, "cpu_wait_s": -4,
               "traceback": ["z" * 600] * 40, "artifacts": [{"k" * 5_000: 1}]}
    read = TestRecord.from_untrusted(hostile, {"visible"})
    assert read.message.startswith("\ufffd") and read.message.endswith("[1,001 more characters cut]")
    assert len(read.output) == 64_000 and read.output_cut == 3 + 6_000 and read.cpu_wait_s == 0.0
    assert len(read.traceback) == 32 and read.traceback[0].endswith("[100 more characters cut]")
    assert list(read.artifacts[0]) == ["k" * 4_000 + "… [1,000 more characters cut]"]
    for wrong in ({"suite": "hidden"}, {"status": "skipped"}):
        with pytest.raises(ValueError, match="a result with suite"):
            TestRecord.from_untrusted({**record.to_dict(), **wrong}, {"visible"})
    old = record.to_dict()
    del old["cpu_wait_s"]  # a record without the CPU-wait credit reads as none
    assert TestRecord.from_untrusted(old, {"visible"}).cpu_wait_s == 0.0
    result = TestResult.scored(record, 5)
    assert (result.id, result.status, result.score, result.max_score) == (record.nodeid, "failed", 0, 5)
