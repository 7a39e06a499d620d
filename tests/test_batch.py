"""Whole classes: the store, `submit`, `batch` (parallel, resumable, robust) and the gradebook."""

from __future__ import annotations

import csv
import io
import re
import shutil
import sqlite3
import time
from datetime import datetime

import pytest

from grader.cli import main
from grader.core.backend import PlainBackend, RawRun
from grader.core.exercise import load_exercise
from grader.core.grading import expected_max
from grader.course.batch import discover, run_batch
from grader.course.gradebook import pick
from grader.course.store import SCHEMA_VERSION, Store, StoreError
from grader.sandbox.local import run_local
from tests.helpers import ATTACKS, EXERCISE, REFERENCE, STUB, exercise_copy, mutant_file

MUTANT = mutant_file("03_skip_blocked_head")


def whole_points() -> str:
    """The exercise's whole points, which a gradebook's max_score states every score against (the free
    tier runs 10 of them)."""
    exercise = load_exercise(EXERCISE)
    return str(sum(expected_max(exercise, exercise.top_tier).values()))


def class_folder(folder, files):
    folder.mkdir()
    for name, source in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    return folder


@pytest.fixture(params=["local", "docker"])
def sandbox(request):
    if request.param == "docker":
        request.getfixturevalue("grading_image")  # skips without an engine (fails under CI=true)
    return request.param


def test_a_batch_with_broken_and_hostile_submissions_grades_everyone_fairly(tmp_path, capsys, sandbox):
    folder = class_folder(tmp_path / "class", {
        "alice.py": REFERENCE, "bob/scheduler.py": STUB, "carol.py": MUTANT,
        "dave.py": ATTACKS / "syntax_error.py", "eve.py": ATTACKS / "kill_everything.py",
        "frank.py": ATTACKS / "fork_bomb.py", "grace.py": REFERENCE, "mallory.py": ATTACKS / "patch_pytest.py",
    })
    (folder / "notes.txt").write_text("not a submission")
    (folder / "heidi").mkdir()  # a student folder without the exercise's file
    db, gradebook = tmp_path / "class.db", tmp_path / "gradebook.csv"
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--jobs", "2", "--sandbox", sandbox,
                 "--tier", "free", "--db", str(db), "--gradebook", str(gradebook)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "graded 8" in out and "notes.txt" in out and "no scheduler.py" in out
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(gradebook.read_text()))}
    assert set(rows) == {"alice", "bob", "carol", "dave", "eve", "frank", "grace", "mallory"}
    # The reference gets full marks even while hostile submissions (killing every process they can
    # signal, forking without end) run beside it.
    assert rows["alice"]["score"] == rows["alice"]["tier_max_score"] == rows["grace"]["score"] == "10"
    assert rows["alice"]["max_score"] == whole_points()  # a free 10/10 is 10 of the exercise's points, not full marks
    for student in ("bob", "dave", "eve", "frank", "mallory"):
        assert rows[student]["score"] == "0", student
    header = next(csv.reader(io.StringIO(gradebook.read_text())))
    assert header[:5] == ["student", "name", "tier", "score", "max_score"] and "test_decodes_run_before_the_prompt" in header
    assert rows["alice"]["tier"] == "free" and rows["alice"]["name"] == ""  # no roster gave names
    with Store(db) as store:
        statuses = {s.student: s.card.status for s in store.submissions(EXERCISE)}
    assert statuses["dave"] == "rejected" and statuses["alice"] == "graded"


def test_an_interrupted_batch_loses_nothing_and_resumes(tmp_path):
    exercise = load_exercise(EXERCISE)
    folder = class_folder(tmp_path / "class", {f"s{i}.py": (REFERENCE if i % 2 else STUB) for i in range(5)})
    calls = []

    def interrupting_backend():
        def backend(ex, source, tier, run):
            calls.append(tier)
            if len(calls) == 3:
                raise KeyboardInterrupt  # as if Ctrl-C arrived while this one was grading
            return run_local(ex, source, tier, run)
        return PlainBackend(backend, "local")

    with Store(tmp_path / "class.db") as store:
        summary = run_batch(store, exercise, "free", interrupting_backend, discover(folder, exercise), jobs=1)
        # The two graded before the interrupt are saved, and so is one that was already under way.
        assert summary.interrupted and 2 <= len(summary.graded) <= 3
        saved = len(summary.graded)
    database = sqlite3.connect(tmp_path / "class.db")
    assert database.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert database.execute("SELECT count(*) FROM scorecards").fetchone()[0] == saved
    database.close()
    with Store(tmp_path / "class.db") as store:
        again = run_batch(store, exercise, "free", lambda: run_local, discover(folder, exercise), jobs=2)
        assert len(again.skipped) == saved and len(again.graded) == 5 - saved and not again.problems
        assert len([s for s in store.submissions(EXERCISE) if s.card]) == 5


def test_submit_stores_grades_once_and_the_policies_pick_latest_or_best(tmp_path, capsys):
    db = str(tmp_path / "store.db")
    argv = ["--exercise", EXERCISE, "--student", "alice", "--tier", "free", "--sandbox", "local", "--db", db]
    assert main(["submit", str(REFERENCE), *argv]) == 0
    first = " ".join(capsys.readouterr().out.split())
    assert "10/10 points" in first and "report:" in first
    assert main(["submit", str(REFERENCE), *argv]) == 0
    assert "already graded" in " ".join(capsys.readouterr().out.split())
    assert main(["submit", str(STUB), *argv]) == 0
    with Store(db) as store:
        submissions = store.submissions(EXERCISE, "alice")
        assert len(submissions) == 2 and all(s.card for s in submissions)
        assert pick(submissions, "latest")[("alice", EXERCISE)].card.score == 0
        assert pick(submissions, "best")[("alice", EXERCISE)].card.score == 10
    report = tmp_path / "reports" / "alice" / f"{EXERCISE}-1.html"
    assert report.is_file() and "<html" in report.read_text().lower()


@pytest.mark.unit
@pytest.mark.parametrize("student", ["../etc", "a/b", "", ".hidden", "x" * 65, "bob smith", "bob\n", "bob\x1b[2J",
                                     "_x", "bob\u202e"])
def test_student_ids_with_path_tricks_are_refused(tmp_path, student, capsys):
    code = main(["submit", str(REFERENCE), "--exercise", EXERCISE, "--student", student,
                 "--db", str(tmp_path / "s.db"), "--sandbox", "local"])
    assert code == 2 and "invalid student id" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


@pytest.mark.unit
def test_the_store_has_a_schema_version_and_refuses_a_newer_one(tmp_path):
    path = tmp_path / "s.db"
    with Store(path) as store:
        assert store.version == SCHEMA_VERSION
    database = sqlite3.connect(path)
    database.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    database.close()
    # A store refused is handed to no one: every connection it opened is closed before the error
    # (Python 3.13 warns of a SQLite connection left to the collector).
    from sqlalchemy import event
    from sqlalchemy.pool import Pool

    opened, closed = [], []
    listeners = [(Pool, "connect", lambda connection, record: opened.append(connection)),
                 (Pool, "close", lambda connection, record: closed.append(connection))]
    for target, name, listener in listeners:
        event.listen(target, name, listener)
    try:
        with pytest.raises(StoreError, match="newer than this grader"):
            Store(path)
    finally:
        for target, name, listener in listeners:
            event.remove(target, name, listener)
    assert opened and closed == opened


@pytest.mark.unit
def test_the_store_location_follows_db_then_the_environment(tmp_path, monkeypatch):
    from grader.course.store import default_db_path

    monkeypatch.setenv("GRADER_DB", str(tmp_path / "env.db"))
    assert default_db_path(None) == tmp_path / "env.db"
    assert default_db_path(str(tmp_path / "flag.db")) == tmp_path / "flag.db"
    monkeypatch.delenv("GRADER_DB")
    assert str(default_db_path(None)) == "grader.db"


def test_a_batch_grades_again_when_the_exercise_changes_and_everything_with_regrade(tmp_path):
    exercise = load_exercise(str(exercise_copy(tmp_path / "project")))
    folder = class_folder(tmp_path / "class", {"alice.py": REFERENCE, "bob.py": STUB})
    graded: list[str] = []

    def counting_backend():
        def backend(ex, source, tier, run):
            graded.append(tier)
            return run_local(ex, source, tier, run)
        return PlainBackend(backend, "local")

    def batch(**options):
        graded.clear()
        return run_batch(store, exercise, "free", counting_backend, discover(folder, exercise), **options)

    with Store(tmp_path / "class.db") as store:
        assert len(batch().graded) == 2 and len(graded) == 2
        again = batch()
        assert graded == [] and sorted(again.skipped) == ["alice", "bob"]
        assert {s: c.score for s, c in again.results.items()} == {"alice": 10, "bob": 0}  # the stored results
        suite_file = sorted(exercise.suites["visible"].path.glob("test_*.py"))[0]
        suite_file.write_text(suite_file.read_text() + "\n# the suite changed\n")
        changed = batch()
        assert len(changed.graded) == 2 and not changed.skipped and len(graded) == 2
        assert not batch().graded  # unchanged since
        forced = batch(regrade=True)
        assert len(forced.graded) == 2 and len(graded) == 2
        alice = store.submissions(EXERCISE, "alice")
        assert len(alice) == 1 and len(store.scorecards(alice[0].id)) == 3  # every grading is kept


def timing_out_backend():
    """The local sandbox, except that a file holding TIME_ME_OUT runs into the exercise's time limit."""
    def backend(exercise, source, tier, run):
        if b"TIME_ME_OUT" in source:
            return RawRun(output=b"", exit_status=None, timed_out=True, duration_s=1.0)
        return run_local(exercise, source, tier, run)
    return PlainBackend(backend, "local")


def test_the_batch_summary_counts_each_outcome_and_its_mean_covers_a_resume(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("grader.sandbox.choose.choose_backend", lambda *args, **kwargs: timing_out_backend())
    folder = class_folder(tmp_path / "class", {"alice.py": REFERENCE, "dave.py": ATTACKS / "syntax_error.py"})
    (folder / "tim.py").write_text(REFERENCE.read_text() + "\n# TIME_ME_OUT\n")
    db, gradebook = tmp_path / "class.db", tmp_path / "gradebook.csv"
    argv = ["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local", "--db", str(db)]
    assert main([*argv, "--gradebook", str(gradebook)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "graded 3 in this run, 0 skipped" in out
    assert "1 graded, 1 rejected, 1 timed out" in out and "mean score 5.0/10 over 2" in out
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(gradebook.read_text()))}
    assert list(rows["alice"])[:10] == ["student", "name", "tier", "score", "max_score", "status", "reason",
                                        "submitted_at", "late", "graded_at"]
    assert (rows["alice"]["status"], rows["alice"]["reason"]) == ("graded", "")
    assert rows["dave"]["status"] == "rejected" and "syntax" in rows["dave"]["reason"].lower()
    assert rows["tim"]["status"] == "error" and rows["tim"]["reason"].startswith("grading did not finish")
    assert rows["tim"]["score"] == "" and rows["tim"]["max_score"] == whole_points()  # no 0 for a run nobody judged
    assert all(row["submitted_at"].startswith("20") and row["graded_at"].startswith("20") for row in rows.values())
    assert oct(gradebook.stat().st_mode & 0o777) == "0o600"

    # A resume: bob is new, tim's error is tried again, alice and dave stand; the mean is over all of them.
    shutil.copy(STUB, folder / "bob.py")
    assert main([*argv, "--gradebook", "-", "--fail-under", "50%"]) == 4
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "graded 2 in this run, 2 skipped" in err
    assert "2 graded, 1 rejected, 1 timed out" in err and "mean score 3.3/10 over 3" in err
    assert "below --fail-under 50% or not graded: bob, dave, tim" in err
    assert sorted(row["student"] for row in csv.DictReader(captured.out.splitlines())) == ["alice", "bob", "dave", "tim"]


def test_a_batch_records_each_file_taken_in_before_its_grading_ended(tmp_path, capsys, monkeypatch):
    def slow_backend(exercise, source, tier, run):
        time.sleep(1.2)  # longer than the timestamps' second, so that their order shows
        return run_local(exercise, source, tier, run)
    monkeypatch.setattr("grader.sandbox.choose.choose_backend", lambda *args, **kwargs: PlainBackend(slow_backend, "local"))
    folder = class_folder(tmp_path / "class", {"alice.py": REFERENCE, "bob.py": STUB})
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local",
                 "--db", str(tmp_path / "class.db"), "--gradebook", "-"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [row["student"] for row in rows] == ["alice", "bob"]
    for row in rows:
        taken, graded = (datetime.fromisoformat(row[key]) for key in ("submitted_at", "graded_at"))
        assert (graded - taken).total_seconds() >= 1, row


def test_a_link_out_of_the_class_folder_is_not_followed(tmp_path, capsys):
    # A cloned repository can carry links: to the reference, or to any file of the grading machine.
    folder = class_folder(tmp_path / "class", {"alice.py": REFERENCE})
    secret = tmp_path / "elsewhere" / "scheduler.py"
    secret.parent.mkdir()
    shutil.copy(REFERENCE, secret)
    (folder / "mallory.py").symlink_to(secret)
    (folder / "oscar").mkdir()
    (folder / "oscar" / "scheduler.py").symlink_to("/etc/passwd")
    (folder / "trent").symlink_to(secret.parent)  # a student folder that is a link out
    (folder / "loop.py").symlink_to(folder / "loop.py")
    (folder / "bob.py").symlink_to(folder / "alice.py")  # another student's file: not followed either
    (folder / "carol").mkdir()
    (folder / "carol" / "scheduler.py").symlink_to("../alice.py")
    (folder / "dave" / "src").mkdir(parents=True)
    shutil.copy(REFERENCE, folder / "dave" / "src" / "scheduler.py")
    (folder / "dave" / "scheduler.py").symlink_to("src/scheduler.py")  # inside dave's own folder: followed
    db = tmp_path / "class.db"
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local",
                 "--db", str(db), "--gradebook", "-"]) == 0
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    for student in ("mallory", "oscar", "trent"):
        assert f"{student}: " in err and "outside the class folder: not followed" in err, student
    assert "loop: " in err and "a link that leads to no file" in err
    for student in ("bob", "carol"):
        assert f"{student}: " in err and "not the student's own file: not followed" in err, student
    assert "root:" not in captured.out + captured.err
    rows = {row["student"]: row for row in csv.DictReader(captured.out.splitlines())}
    assert set(rows) == {"alice", "dave"} and rows["dave"]["score"] == "10"
    with Store(db) as store:
        assert {s.student for s in store.submissions(EXERCISE)} == {"alice", "dave"}


def test_a_student_with_two_files_gets_neither_graded_and_no_students_file_is_counted_as_one(tmp_path, capsys):
    folder = class_folder(tmp_path / "class", {"alice.py": STUB, "alice/scheduler.py": REFERENCE,
                                               "bob.py": REFERENCE, "carol/solution.py": REFERENCE,
                                               "erin.py": REFERENCE, "Erin.py": STUB})
    (folder / "README.md").write_text("# class of 2026\n")
    (folder / "__pycache__").mkdir()
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local",
                 "--db", str(tmp_path / "class.db"), "--fail-under", "0"]) == 4
    out = " ".join(capsys.readouterr().out.split())
    assert "alice: two files for alice:" in out and "keep one and run again" in out
    assert "no scheduler.py in" in out and "(it holds solution.py)" in out
    assert "ignored (no student's file): README.md" in out and "__pycache__" not in out
    # Neither of the things that are no student's file is named as a student not graded.
    assert "erin: two files for erin:" in out and "Erin: two files for Erin:" in out
    assert "below --fail-under 0 points or not graded: Erin, alice, carol, erin" in out


def test_the_file_handed_in_last_is_the_latest_even_when_it_was_handed_in_before(tmp_path, capsys):
    folder = class_folder(tmp_path / "class", {"ann.py": STUB})
    argv = ["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local",
            "--db", str(tmp_path / "class.db"), "--gradebook", "-"]
    scores = []
    for source in (STUB, REFERENCE, STUB):
        shutil.copy(source, folder / "ann.py")
        time.sleep(1.1)  # the store's times are to the second
        assert main(argv) == 0
        scores.append(next(csv.DictReader(capsys.readouterr().out.splitlines()))["score"])
    assert scores == ["0", "10", "0"]  # the stub again, not the reference it had once replaced
    submit = ["submit", "--exercise", EXERCISE, "--student", "zed", "--tier", "free", "--sandbox", "local",
              "--db", str(tmp_path / "class.db")]
    for source in (REFERENCE, STUB, REFERENCE):
        time.sleep(1.1)
        assert main([submit[0], str(source), *submit[1:]]) == 0
    with Store(tmp_path / "class.db") as store:
        assert pick(store.submissions(EXERCISE, "zed"), "latest")[("zed", EXERCISE)].card.score == 10


def test_a_batchs_gradebook_has_the_folders_students_on_its_tier(tmp_path, capsys):
    db = str(tmp_path / "class.db")
    folder = class_folder(tmp_path / "class", {"ben.py": REFERENCE})
    # Elsewhere in the store: ben on another tier, later; and a student of another class.
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local", "--db", db]) == 0
    time.sleep(1.1)
    for student in ("ben", "other"):
        assert main(["submit", str(STUB), "--student", student, "--exercise", EXERCISE, "--tier", "premium",
                     "--sandbox", "local", "--db", db]) == 0
    capsys.readouterr()
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local", "--db", db,
                 "--gradebook", "-"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [(row["student"], row["score"], row["tier_max_score"], row["max_score"]) for row in rows] == \
        [("ben", "10", "10", whole_points())]


@pytest.mark.unit
def test_ids_in_any_alphabet_are_students_and_one_in_two_spellings_or_forms_is_one(tmp_path):
    """`zoë` (typed composed, or listed decomposed by a Mac's file system) and `李雷` are student ids; one
    id differing from another in case only, in any alphabet, is refused."""
    with Store(tmp_path / "s.db") as store:
        store.migrate()
        composed, decomposed = "zo\u00eb", "zoe\u0308"
        first, _ = store.add_submission(composed, EXERCISE, "free", "a" * 64, "scheduler.py", b"x")
        again, _ = store.add_submission(decomposed, EXERCISE, "free", "a" * 64, "scheduler.py", b"x")
        assert first == again, "the two forms of one id were two students"
        store.add_submission("李雷", EXERCISE, "free", "b" * 64, "scheduler.py", b"x")
        with pytest.raises(StoreError, match="only in case"):
            store.add_submission("ZOË", EXERCISE, "free", "c" * 64, "scheduler.py", b"x")
        assert {s.student for s in store.submissions()} == {composed, "李雷"}


def test_a_batch_grades_students_of_any_alphabet_and_fails_on_a_file_named_no_student_id(tmp_path, capsys):
    folder = class_folder(tmp_path / "class", {"zoe\u0308.py": REFERENCE, "bob.py": REFERENCE,
                                               "bad name.py": REFERENCE})
    code = main(["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local",
                 "--db", str(tmp_path / "class.db")])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 2, out
    assert "1 file(s) not graded, their names are not student ids: 'bad name.py'; rename them" in out
    with Store(tmp_path / "class.db") as store:
        graded = {s.student: s.card.score for s in store.submissions(EXERCISE)}
    assert graded == {"zo\u00eb": 10, "bob": 10}


def test_a_folder_with_no_submission_is_refused_saying_what_it_holds(tmp_path, capsys):
    folder, db = tmp_path / "class", tmp_path / "class.db"
    folder.mkdir()
    argv = ["batch", str(folder), "--exercise", EXERCISE, "--sandbox", "local", "--db", str(db)]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"no submission of {EXERCISE} to grade (it is empty)" in err and "alice/scheduler.py" in err
    (folder / "README.md").write_text("the class of 2026\n")
    assert main(argv) == 2
    assert "(it holds only README.md)" in " ".join(capsys.readouterr().err.split())
    assert not db.exists()  # no store made for nothing


def test_a_batch_prints_each_students_score_by_student(tmp_path, capsys):
    folder = class_folder(tmp_path / "class", {"zoe.py": STUB, "alice.py": REFERENCE,
                                               "dave.py": ATTACKS / "syntax_error.py"})
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--tier", "free", "--sandbox", "local",
                 "--db", str(tmp_path / "class.db")]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [next(i for i, line in enumerate(lines) if re.fullmatch(pattern, line.strip()))
            for pattern in (r"student\s+score\s+result", r"alice\s+10/10\s+graded", r"dave\s+0/10\s+rejected",
                            r"zoe\s+0/10\s+graded")]
    assert rows == sorted(rows), lines
