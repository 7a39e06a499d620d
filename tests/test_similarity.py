"""Similarity (grader/similarity): what renaming, comments, layout and reordering cannot hide, what
the given code never adds, and the report's JSON, pages, command and instructor-only web page."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.core.exercise import ExerciseError, load_exercise
from grader.core.scorecard import Scorecard
from grader.core.scorecard import TestResult as Result
from grader.similarity import Document, compare
from grader.similarity.behaviour import compare_behaviour
from grader.similarity.tokens import python_tokens
from grader.similarity.winnow import K, W, kgram_hashes, winnow
from tests.helpers import EXERCISE, PROJECT
from tests.helpers import REFERENCE as REFERENCE_FILE
from tests.helpers import STUB as STUB_FILE

STUB = STUB_FILE.read_text()
REFERENCE = REFERENCE_FILE.read_text()

ORIGINAL = textwrap.dedent('''
    def busiest(rows, limit):
        """The rows over the limit, busiest first."""
        found = []
        for row in rows:
            if row.load > limit:   # over the limit
                found.append((row.load, row.name))
        found.sort(reverse=True)
        return [name for _, name in found]


    def total(rows):
        result = 0
        for row in rows:
            result += row.load * 2 + 1
        return result
''')

# The same two functions, as a copier hides them: names changed, the functions swapped, comments and
# docstring rewritten, blank lines and spaces moved.
DISGUISED = textwrap.dedent('''
    # utilities for the report


    def sum_up(entries):
        acc = 0
        for e in entries:

            acc += e.load*2 + 1
        return acc
    def top_entries(entries, cap):
        """Entries above cap."""
        out = []
        for e in entries:
            if e.load > cap:
                out.append( (e.load, e.name) )
        out.sort(reverse = True)
        return [n for _, n in out]
''')


def tokens_of(source: str) -> list[str]:
    return [t.text for t in python_tokens(source)]


@pytest.mark.unit
def test_names_comments_and_layout_do_not_change_the_tokens():
    one = "def f(a, b):\n    # add them\n    return a + b * 2\n"
    other = "def add_up(x,y):\n\n    return x+y*2   # the sum\n"
    assert tokens_of(one) == tokens_of(other)
    assert tokens_of(one) != tokens_of("def f(a, b):\n    return a - b * 2\n"), "an operator changed nothing"
    assert "len" in tokens_of("n = len(items)\n"), "a builtin was taken for a name of the student's"


@pytest.mark.unit
def test_a_file_python_cannot_read_is_compared_word_by_word():
    broken = "def f(a:\n    return a +\n"
    found = python_tokens(broken)
    assert [t.text for t in found][:4] == ["def", "v", "(", "v"]
    assert found[-1].line == 2


@pytest.mark.unit
def test_winnowing_finds_every_shared_run_of_k_plus_w_minus_1_tokens():
    shared = [f"t{i % 7}" for i in range(K + W - 1)]
    for before, after in ((["a"] * 3, ["b"] * 40), (["c", "d"] * 30, [])):
        one = winnow(kgram_hashes(["x"] * 25 + shared + ["y"] * 9))
        other = winnow(kgram_hashes(before + shared + after))
        assert {f.hash for f in one} & {f.hash for f in other}, "a shared run of the guaranteed length was missed"


@pytest.mark.unit
def test_a_disguised_copy_is_found_and_its_moved_functions_are_two_regions():
    honest = textwrap.dedent('''
        def biggest(values, bound):
            best = None
            i = 0
            while i < len(values):
                if values[i] <= bound and (best is None or values[i] > best):
                    best = values[i]
                i += 1
            return best


        def count(values):
            return sum(1 for v in values if v)
    ''')
    documents = [Document("ada", "student", ORIGINAL), Document("bob", "student", DISGUISED),
                 Document("cy", "student", honest)]
    report = compare(documents, exercise="demo")
    top = report.pairs[0]
    assert {top.a.label, top.b.label} == {"ada", "bob"}
    assert top.score > 0.9, top.score
    assert len(top.regions) == 2, top.regions  # the two functions, swapped in the copy
    others = [p for p in report.pairs if "cy" in (p.a.label, p.b.label)]
    assert all(p.score < 0.5 for p in others), [(p.a.label, p.b.label, p.score) for p in others]
    assert report.clusters == [["ada", "bob"]]


@pytest.mark.unit
def test_the_given_code_never_makes_two_students_alike():
    """Two students who hand in the stub as given share nothing; two who keep the stub and write
    their own code are compared on their own code alone."""
    stub_only = [Document("ana", "student", STUB), Document("ben", "student", STUB)]
    report = compare(stub_only, [STUB], "continuous_batching")
    assert report.pairs == [] and all(d.fingerprints == 0 for d in report.documents)
    assert all(d.given_kgrams > 100 for d in report.documents)
    without_stub = compare([Document("ana", "student", STUB), Document("ben", "student", STUB)])
    assert without_stub.pairs and without_stub.pairs[0].score == 1.0, "the stub alone matched nothing"


@pytest.mark.unit
def test_the_reference_is_compared_with_code_the_whole_class_holds():
    """Code more than the common limit of students hold is left out between students, not against
    the reference: a solution passed round the whole class still shows."""
    documents = [Document(f"s{i:02}", "student", REFERENCE.replace("plan", f"plan{i}")) for i in range(12)]
    documents.append(Document("reference", "reference", REFERENCE))
    report = compare(documents, [STUB], "continuous_batching")
    assert report.common_limit == 10 and report.ignored_common > 0
    labels = [{p.a.label, p.b.label} for p in report.pairs]
    assert all("reference" in pair for pair in labels), "students were matched on code all of them hold"
    assert len(labels) == 12 and all(p.score > 0.9 for p in report.pairs)
    assert all(d.common == d.fingerprints for d in report.documents if d.kind == "student")
    assert report.widely_shared == [f"s{i:02}" for i in range(12)], "a solution passed round the class went unsaid"


def card(tests: list[tuple[str, str, str]], drawn: tuple[str, ...] = ()) -> Scorecard:
    results = [Result(id=f"t::{name}", name=name, suite="hidden", status=status,
                          score=int(status == "passed"), max_score=1, message=message, seeded=name in drawn)
               for name, status, message in tests]
    return Scorecard(exercise="demo", tier="premium", submission_sha256="0" * 64, status="graded",
                     score=sum(r.score for r in results), max_score=len(results), tests=results)


@pytest.mark.unit
def test_two_files_that_fail_alike_are_the_strong_sign():
    wrong = [("a", "passed", ""), ("b", "failed", "got 3, expected 4"), ("c", "failed", "step 2: no decode")]
    same = compare_behaviour(card(wrong), card(wrong))
    assert same.kind == "same-failures" and same.strong and same.both_failed == ["b", "c"]
    assert "same 2 tests, 2 with the same message" in same.summary()
    reworded = compare_behaviour(card(wrong), card([*wrong[:2], ("c", "failed", "step 5: no decode")]))
    assert reworded.kind == "same-failures" and not reworded.strong and reworded.same_message == ["b"]
    other = compare_behaviour(card(wrong), card([("a", "failed", "x"), ("b", "passed", ""), ("c", "passed", "")]))
    assert other.kind == "different" and (other.only_a, other.only_b) == (2, 1)
    passing = [("a", "passed", ""), ("b", "passed", ""), ("c", "passed", "")]
    assert compare_behaviour(card(passing), card(passing)).kind == "both-pass"
    assert compare_behaviour(card(passing), None).kind == "unknown"
    # Only the tests both ran count: a free tier's card beside a premium one compares the free tests.
    assert compare_behaviour(card(wrong[:1]), card(wrong)).kind == "both-pass"


@pytest.mark.unit
def test_failures_on_workloads_drawn_for_each_file_do_not_hide_two_copies_failing_alike():
    """Two copies draw different workloads: a drawn test one fails and the other passes, or fails with
    other words, is left out where both fail tests of fixed workloads alike."""
    first = [("fixed", "failed", "got 3, expected 4"), ("random", "failed", "step 9 of workload 81"),
             ("tokens", "failed", "request 4 got 2 tokens"), ("other", "passed", "")]
    second = [("fixed", "failed", "got 3, expected 4"), ("random", "passed", ""),
              ("tokens", "failed", "request 7 got 1 token"), ("other", "passed", "")]
    alike = compare_behaviour(card(first, drawn=("random", "tokens")), card(second, drawn=("random", "tokens")))
    assert alike.kind == "same-failures" and alike.strong and alike.both_failed == ["fixed"]
    assert alike.drawn == 2 and "2 failure(s) on workloads drawn for each file not compared" in alike.summary()
    # Unflagged, the same cards differ: the drawn test counts against them.
    plain = compare_behaviour(card(first), card(second))
    assert plain.kind == "shared-failures" and not plain.strong and plain.only_a == 1
    # Where only drawn tests fail, they are all there is to compare.
    only_drawn = compare_behaviour(card(first[1:], drawn=("random", "tokens")),
                                   card(first[1:], drawn=("random", "tokens")))
    assert only_drawn.kind == "same-failures" and only_drawn.drawn == 0 and only_drawn.both_failed == ["random", "tokens"]


def write_exercise(root: Path, given: str) -> Path:
    folder = root / "exercises" / "demo"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_visible.py").write_text("def test_one(ns):\n    assert ns.f() == 1\n")
    (folder / "solution.py").write_text("def f():\n    raise NotImplementedError\n")
    (folder / "helpers.py").write_text("def helper():\n    return 1\n")
    (folder / "exercise.toml").write_text(textwrap.dedent(f'''
        title = "demo"
        submission = "solution.py"
        names = ["f"]
        [suites.visible]
        folder = "exercises/demo/tests"
        points = 1
        [tiers]
        free = ["visible"]
        [similarity]
        given = {given}
    '''))
    return folder


@pytest.mark.unit
def test_an_exercise_lists_its_given_files_and_a_wrong_one_is_refused(tmp_path):
    folder = write_exercise(tmp_path / "good", '["helpers.py"]')
    assert load_exercise(str(folder)).given_code == (folder / "helpers.py",)
    for given, said in (('["missing.py"]', "'missing.py', which is no file"), ('["../../../etc/passwd"]', "no file"),
                        ('"helpers.py"', "must be a list of file names")):
        bad = write_exercise(tmp_path / f"bad{len(said)}{given.count('.')}", given)
        with pytest.raises(ExerciseError, match=re.escape(said)):
            load_exercise(str(bad))


def run_similarity(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader.cli", "similarity", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(PROJECT)}, timeout=120)


def test_the_command_reads_a_class_folder_and_writes_json_and_owner_only_pages(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "ada.py").write_text(STUB + ORIGINAL)
    (folder / "bob.py").write_text(STUB + DISGUISED)
    (folder / "cy.py").write_text(STUB)
    (folder / "notes.txt").write_text("not a submission")
    done = run_similarity(str(folder), "--exercise", EXERCISE, "--json", "-", "--out", str(tmp_path / "out"),
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema_version"] == 1 and data["students"] == 3
    first = data["pairs"][0]
    assert {first["a"], first["b"]} == {"ada", "bob"}, first
    assert any(p["b_kind"] == "reference" for p in data["pairs"]) is False  # nobody copied the reference
    assert "ada" in done.stderr and "bob" in done.stderr  # the terminal's table, beside the JSON
    index = tmp_path / "out" / "index.html"
    pages = [index, *sorted((tmp_path / "out" / "pairs").glob("*.html"))]
    assert len(pages) == 1 + len(data["pairs"])
    assert all(stat.S_IMODE(page.stat().st_mode) == 0o600 for page in pages)
    assert 'href="pairs/1.html"' in index.read_text()
    assert 'data-region="1"' in (tmp_path / "out" / "pairs" / "1.html").read_text()


def test_the_command_says_what_is_wrong(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, said in (([str(empty)], "no submission of continuous_batching"),
                       ([str(tmp_path / "nowhere")], "not a folder of submissions"),
                       (["--db", str(tmp_path / "none.db")], "no store at"),
                       ([str(empty), "--top", "0"], "--top 0"),
                       ([str(empty), "--against", str(tmp_path / "gone")], "neither a folder of submissions nor a store")):
        done = run_similarity(*args, "--exercise", EXERCISE, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert said in " ".join(done.stderr.split()), (args, done.stderr)


@pytest.mark.unit
def test_the_services_report_is_for_instructors_only(tmp_path):
    from starlette.testclient import TestClient

    from grader.course.store import Store
    from grader.service import accounts
    from grader.web.app import Service, create_app
    from grader.web.auth import COOKIE
    from tests.service import press_sign_in

    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    store.migrate()
    for student, text in (("ada", STUB + ORIGINAL), ("bob", STUB + DISGUISED), ("cy", STUB)):
        accounts.add_student(store, student)
        submission_id, _ = store.add_submission(student, exercise.slug, "premium", student * 8,
                                                exercise.submission_file, text.encode(), state="graded")
        store.save_scorecard(submission_id, card([("a", "failed", "got 3")]))
    service = Service(store=store, dispatcher=None, exercises={exercise.slug: exercise},  # type: ignore[arg-type]
                      base_url="http://testserver")

    def client_of(token: str) -> TestClient:
        client = TestClient(create_app(service))
        signed_in = press_sign_in(client, f"/signin/{token}")
        client.cookies.set(COOKIE, signed_in.cookies[COOKIE])
        return client

    instructor = client_of(accounts.new_link(store, "instructor"))
    student = client_of(accounts.new_link(store, "student", "ada"))
    base = f"/instructor/similarity/{exercise.slug}"
    assert base in instructor.get("/instructor").text, "the dashboard does not link to the report"
    index = instructor.get(base)
    assert index.status_code == 200
    assert re.search(r"<td>ada</td>\s*<td>bob</td>", index.text), index.text
    assert "both fail the same 1 test, 1 with the same message" in index.text
    pair = instructor.get(f"{base}/1?policy=best")
    assert pair.status_code == 200 and "ada and bob" in pair.text and 'data-region="2"' in pair.text
    assert instructor.get(f"{base}/99").status_code == 404
    assert instructor.get("/instructor/similarity/nothing").status_code == 404
    for path in (base, f"{base}/1"):
        refused = student.get(path)
        assert refused.status_code == 403 and "bob" not in refused.text, path
        assert TestClient(create_app(service)).get(path).status_code == 401
    store.close()


def test_a_store_is_compared_with_an_earlier_term_and_shown_under_pseudonyms(tmp_path):
    """The store's latest submissions, with last term's folder: a student who handed in last year's
    file is paired with it, last year's students are never paired with each other, and under
    --pseudonymous no student id is printed."""
    from grader.course.publish import pseudonym
    from grader.course.store import Store

    exercise = load_exercise(EXERCISE)
    db = tmp_path / "class.db"
    with Store(db) as store:
        store.migrate()
        for student, text in (("ada", STUB + ORIGINAL), ("cy", STUB + "x = 1\n")):
            sid, _ = store.add_submission(student, EXERCISE, "premium", f"{student:0<64}", exercise.submission_file,
                                          text.encode(), state="graded")
            store.save_scorecard(sid, card([("a", "passed", "")]))
        key = store.setting("pseudonym_key")
    last = tmp_path / "last-term"
    last.mkdir()
    (last / "old_bob.py").write_text(STUB + DISGUISED)
    (last / "old_dan.py").write_text(STUB + DISGUISED)  # two alike files of last term: not this class's business
    done = run_similarity("--exercise", EXERCISE, "--db", str(db), "--against", str(last), "--json", "-",
                          "--no-reference", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pairs = {frozenset((p["a"], p["b"])) for p in json.loads(done.stdout)["pairs"]}
    assert frozenset(("ada", "last-term/old_bob")) in pairs and frozenset(("ada", "last-term/old_dan")) in pairs
    assert frozenset(("last-term/old_bob", "last-term/old_dan")) not in pairs
    hidden = run_similarity("--exercise", EXERCISE, "--db", str(db), "--against", str(last), "--json", "-",
                            "--pseudonymous", cwd=tmp_path)
    assert hidden.returncode == 0, hidden.stderr
    assert '"ada"' not in hidden.stdout and "ada" not in hidden.stderr
    assert pseudonym(key, "ada") in hidden.stdout and f"last-term/{pseudonym(key, 'old_bob')}" in hidden.stdout
