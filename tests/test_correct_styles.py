"""A correct program gets its marks whatever Python it is written in; a hostile one never breaks a grading.

Correct solutions in other styles (tests/solutions/, each appended to the reference) get full marks on
both sandboxes. A slow but correct solution loses nothing; one endless loop in one case costs exactly
the tests that reach it. Hostile submissions (tests/attacks/: lone surrogates, a 5,000-digit int, a
worker that stops reading) end with a written scorecard, exit 0, and a message naming what they did;
beside them in a batch, an honest student keeps full marks.
"""

from __future__ import annotations

import json
import os

import pytest

from grader.cli import main
from grader.confined import protocol
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.course.batch import discover, run_batch
from grader.course.store import Store
from grader.sandbox.local import run_local
from tests.helpers import ATTACKS, EXERCISE, PROJECT, REFERENCE, exercise_copy, worker_for

SOLUTIONS = PROJECT / "tests" / "solutions"
# Graded with smaller limits, on a copy of the exercise with one more test after the longest one.
LIMITED = ("slow_calls", "endless_in_one_case", "crash_in_one_case")
STYLES = sorted(p.stem for p in SOLUTIONS.glob("*.py") if p.stem not in LIMITED)
LONG_TEST = "test_a_long_prompt_takes_19_chunks_ending_with_128"
AFTER_TEST = "test_a_test_after_the_longest_one"


def styled(style: str) -> bytes:
    """The reference with a style appended: still a correct solution."""
    return REFERENCE.read_bytes() + b"\n\n" + (SOLUTIONS / f"{style}.py").read_bytes()


def full_marks(card) -> bool:
    return card.status == "graded" and card.score == card.max_score > 0


def failures(card) -> list[tuple[str, str, str]]:
    return [(t.name, t.status, t.message[:300]) for t in card.tests if t.status != "passed"] or [("run", card.status, card.reason)]


@pytest.fixture(scope="module", params=["local", "docker"])
def sandbox(request):
    """(backend, name) for each sandbox; Docker skips without an engine (fails under CI=true)."""
    if request.param == "local":
        return run_local, "local"
    from grader.sandbox.docker_backend import DockerBackend

    request.getfixturevalue("grading_image")
    return DockerBackend(request.getfixturevalue("docker_client")), "docker"


@pytest.fixture(scope="module")
def style_cards(sandbox, tmp_path_factory) -> dict:
    """Every style, graded on the premium tier as one batch of two parallel sandboxes."""
    backend, name = sandbox
    folder = tmp_path_factory.mktemp(f"styles-{name}")
    (folder / "class").mkdir()
    for style in STYLES:
        (folder / "class" / f"{style.replace('_', '-')}.py").write_bytes(styled(style))
    exercise = load_exercise(EXERCISE)
    with Store(folder / "class.db") as store:
        summary = run_batch(store, exercise, "premium", lambda: backend, discover(folder / "class", exercise), jobs=2)
    assert not summary.problems, summary.problems
    return {student.replace("-", "_"): card for student, card in summary.graded}


@pytest.mark.slow
@pytest.mark.parametrize("style", STYLES)
def test_a_correct_solution_in_any_style_gets_full_marks(style_cards, style):
    card = style_cards[style]
    assert full_marks(card), failures(card)
    assert card.diagnosis == [], "a correct program was told a misconception"


@pytest.fixture(scope="module")
def limited_exercise(tmp_path_factory):
    """The exercise with 1 s call and import limits, and a quick visible test that runs after the
    longest one (test files run in name order), with the worker started while the longest one ran."""
    folder = exercise_copy(tmp_path_factory.mktemp("limited"), call_timeout_s=1, import_timeout_s=1)
    (folder / "tests" / "test_visible_z_after.py").write_text(f'''
def {AFTER_TEST}(ns):
    """A quick test whose worker was started while the suite's longest test ran."""
    s = ns["Scheduler"](8, 2, 100)
    s.add(ns["Req"](1, 3, 2))
    assert [(r.rid, n) for r, n in s.schedule()] == [(1, 3)]
''')
    return load_exercise(str(folder))


@pytest.mark.slow
def test_slow_calls_well_within_the_limit_cost_nothing(limited_exercise, sandbox):
    backend, name = sandbox
    card = grade_bytes(styled("slow_calls"), limited_exercise, "free", backend, name)
    # The longest test makes about 40 calls of 0.2 s: far past the 1 s import limit of the next
    # test's worker, which was started while it ran.
    assert full_marks(card), failures(card)
    assert {t.name for t in card.tests} >= {LONG_TEST, AFTER_TEST}


CHATTY = b"""

import sys as _sys

_plain_schedule = Scheduler.schedule


def _schedule_and_say_so(self):
    print("schedule:", "." * 30_000)
    print("  and on stderr:", "," * 30_000, file=_sys.stderr)
    return _plain_schedule(self)


Scheduler.schedule = _schedule_and_say_so
"""


def test_printing_past_the_file_size_limit_costs_nothing_and_the_latest_output_is_kept(tmp_path, sandbox):
    # A debug line on every call: about 8 MB in the longest test, past a 1 MiB limit (16 MiB by default).
    folder = exercise_copy(tmp_path, file_size_mb=1)
    backend, name = sandbox
    card = grade_bytes(REFERENCE.read_bytes() + CHATTY, load_exercise(str(folder)), "free", backend, name)
    assert full_marks(card), failures(card)
    longest = next(t for t in card.tests if t.name == LONG_TEST)
    assert longest.output_cut > 0 and longest.output.rstrip().endswith("," * 1000)


@pytest.mark.slow
def test_an_endless_loop_in_one_case_costs_exactly_the_tests_that_reach_it(limited_exercise, sandbox):
    backend, name = sandbox
    card = grade_bytes(styled("endless_in_one_case"), limited_exercise, "free", backend, name)
    lost = {t.name: (t.status, t.message) for t in card.tests if t.status != "passed"}
    assert list(lost) == [LONG_TEST], failures(card)
    assert lost[LONG_TEST] == ("timeout", "schedule() did not finish within 1 s (is there an endless loop?)\n"
                               f"1 test of this grading ran out of time ({LONG_TEST}); that cost only it: the "
                               f"{len(card.tests) - 1} other test{'s' if len(card.tests) > 2 else ''} ran with "
                               f"{'their' if len(card.tests) > 2 else 'its'} own limits.")
    assert card.score == card.max_score - 5


@pytest.mark.slow
def test_killing_every_process_in_one_case_costs_exactly_the_tests_that_reach_it(limited_exercise, sandbox):
    backend, name = sandbox
    if name == "local" and os.geteuid() != 0:
        pytest.skip("the worker would run as this user, whose every process kill(-1) would reach")
    card = grade_bytes(styled("crash_in_one_case"), limited_exercise, "free", backend, name)
    lost = {t.name: (t.status, t.message) for t in card.tests if t.status != "passed"}
    # The next test's worker was killed too, while waiting; that test still gets a worker of its own.
    assert list(lost) == [LONG_TEST], failures(card)
    assert lost[LONG_TEST][0] == "crashed"
    assert lost[LONG_TEST][1].startswith("your code ended the worker process during schedule()")


# -- hostile submissions ----------------------------------------------------------------------------------

HOSTILE = {
    # attack file -> what every test's message must say
    "lone_surrogate": "schedule() raised ValueError: no plan for \ufffd\ufffd you",
    "huge_int": "schedule() returned an int with 5,000 digits",
    "stop_reading": "complete() did not finish within 5 s (your code stopped reading",
}


@pytest.mark.slow
@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_a_hostile_submission_gets_a_scorecard_that_names_the_real_cause(attack, sandbox, tmp_path, capsys):
    _, name = sandbox
    card_path, html, md = tmp_path / "card.json", tmp_path / "report.html", tmp_path / "report.md"
    code = main(["grade", str(ATTACKS / f"{attack}.py"), "--exercise", EXERCISE, "--tier", "free",
                 "--sandbox", name, "--json", str(card_path), "--html", str(html), "--md", str(md)])
    assert code == 0
    card = json.loads(card_path.read_text(encoding="utf-8"))
    assert card["status"] == "graded" and card["score"] == 0 and card["tests"]
    for test in card["tests"]:
        assert test["message"].startswith(HOSTILE[attack]), test["message"]
    assert html.stat().st_size and md.stat().st_size
    if attack == "lone_surrogate":
        assert "\ufffd" in card["tests"][0]["output"]  # what it printed, replaced too
        assert "no plan for" in capsys.readouterr().out


@pytest.mark.slow
def test_in_a_batch_beside_hostile_submissions_the_honest_students_keep_full_marks(sandbox, tmp_path, capsys):
    _, name = sandbox
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_bytes(REFERENCE.read_bytes())
    (folder / "bob.py").write_bytes(styled("many_properties"))
    for attack in HOSTILE:
        (folder / f"{attack.replace('_', '-')}.py").write_bytes((ATTACKS / f"{attack}.py").read_bytes())
    db = tmp_path / "class.db"
    argv = ["batch", str(folder), "--exercise", EXERCISE, "--jobs", "2", "--tier", "free", "--sandbox", name,
            "--db", str(db)]
    assert main(argv) == 0
    with Store(db) as store:
        cards = {s.student: s.card for s in store.submissions(EXERCISE)}
    assert set(cards) == {"alice", "bob", "lone-surrogate", "huge-int", "stop-reading"}
    assert full_marks(cards["alice"]) and full_marks(cards["bob"]), (failures(cards["alice"]), failures(cards["bob"]))
    assert all(cards[s].status == "graded" and cards[s].score == 0 for s in ("lone-surrogate", "huge-int", "stop-reading"))
    capsys.readouterr()
    assert main(argv) == 0  # run again: everyone is stored, nobody is graded twice
    assert "graded 0 in this run, 5 skipped" in " ".join(capsys.readouterr().out.split())


def test_an_error_while_storing_one_result_is_reported_for_that_student_and_the_batch_goes_on(tmp_path, monkeypatch):
    folder = tmp_path / "class"
    folder.mkdir()
    for student in ("alice", "bob", "carol"):
        (folder / f"{student}.py").write_bytes(REFERENCE.read_bytes())
    exercise = load_exercise(EXERCISE)
    with Store(tmp_path / "class.db") as store:
        add = store.add_submission

        def failing_for_bob(student, *args, **kwargs):
            if student == "bob":
                raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
            return add(student, *args, **kwargs)

        monkeypatch.setattr(store, "add_submission", failing_for_bob)
        done = []
        summary = run_batch(store, exercise, "free", lambda: run_local, discover(folder, exercise),
                            jobs=2, on_done=lambda student, card, problem: done.append(student))
        assert [student for student, _ in summary.problems] == ["bob"]
        assert "not stored" in summary.problems[0][1] and "UnicodeEncodeError" in summary.problems[0][1]
        assert sorted(s.student for s in store.submissions(EXERCISE) if s.card) == ["alice", "carol"]
        assert sorted(done) == ["alice", "bob", "carol"]


# -- the bounds of what the harness keeps ---------------------------------------------------------------

def test_objects_with_thousands_of_long_properties_are_kept_within_the_bounds():
    source = REFERENCE.read_text() + "\n\n" + (SOLUTIONS / "many_properties.py").read_text()
    with worker_for(source) as client:
        Req = client.lookup("Req")
        reqs = [Req(i, 5, 2) for i in range(300)]
        # The ordinary attributes are local copies; the 4,000-character strings are read on demand.
        assert [r.prompt_len for r in reqs[:3]] == [5, 5, 5]
        assert reqs[7].note_1999 == "1999" * 1000
        assert client.codec.kept_chars <= protocol.MAX_KEPT_CHARS and client.codec.kept_attrs <= protocol.MAX_KEPT_ATTRS
        kept = object.__getattribute__(reqs[7], "_attrs")
        assert set(kept) == {"rid", "prompt_len", "max_new", "prefilled", "generated"}


def test_subclasses_of_builtin_types_cross_as_their_base_type_and_come_back_as_themselves():
    source = '''
import enum
from collections import OrderedDict, namedtuple

Pair = namedtuple("Pair", "left right")

class Count(int):
    def __eq__(self, other): return True
    def __repr__(self): return "Count()"

class Colour(enum.IntEnum):
    RED = 1

class Name(str):
    pass

class Lying(list):
    def __iter__(self): return iter([0] * 19)
    def __len__(self): return 19

def values():
    return Pair(Count(3), Colour.RED), Lying([1, 2]), OrderedDict(a=Name("x")), True, 2.5

def describe(pair):
    return type(pair).__name__, pair[0]
'''
    with worker_for(source) as client:
        pair, lying, ordered, flag, number = client.lookup("values")()
        assert type(pair) is tuple and pair == (3, 1) and type(pair[0]) is int and pair[0] != 4
        assert type(lying) is list and lying == [1, 2]  # read as the list it is, not as it says
        assert type(ordered) is dict and ordered == {"a": "x"} and type(ordered["a"]) is str
        assert flag is True and number == 2.5
        # Passed back, the namedtuple is the submission's own object again.
        assert client.lookup("describe")(pair) == ("Pair", 3)
        assert client.lookup("describe")((pair[0], pair[1])) == ("tuple", 3)


@pytest.mark.parametrize("body, what", [
    ("return 10 ** 4999", "f() returned an int with 5,000 digits"),
    ("return 'x' * 2_000_000", "f() returned a string of 2,000,000 characters"),
    ("return [[0] * 1000] * 1000", "f() returned a value with more than 100,000 elements"),
    ("return ['y' * 900_000] * 6", "f() returned a reply of 5,400,"),
])
def test_values_past_the_bounds_are_refused_with_what_was_too_large(body, what):
    from grader.harness.client import ValueRefused

    with worker_for(f"class Thing:\n    def f(self):\n        {body}\n    def ok(self):\n        return 1\n") as client:
        thing = client.lookup("Thing")()
        with pytest.raises(ValueRefused) as refused:
            thing.f()
        assert refused.value.message.startswith(what)
        assert thing.ok() == 1  # the worker is still there, and still answers


@pytest.mark.unit
def test_a_trace_keeps_a_bounded_number_of_segments_per_step_and_still_finds_the_difference():
    from grader.harness.feedback import MAX_SEGMENTS, Feedback

    feedback = Feedback()
    expected = [[(f"r{i}", 1) for i in range(MAX_SEGMENTS)]]
    got = [[("r0", 1)] * 20_000]
    feedback.trace("plans", expected, [expected[0] + [("r9", 1)]])
    feedback.trace("plans", expected, got)
    beyond, huge = feedback.artifacts
    assert beyond["first_difference"] == 0 and beyond["got"] == [[list(s) for s in expected[0]]]
    assert beyond["truncated_segments"] == 1
    assert len(huge["got"][0]) == MAX_SEGMENTS and huge["truncated_segments"] == 20_000 - MAX_SEGMENTS


def test_the_harness_limits_its_own_address_space_and_a_worker_still_gets_its_exercises_limit():
    import subprocess
    import sys

    code = """
import resource
from grader.harness.state import limit_own_memory
from grader.confined.limits import apply_limits
limit_own_memory(1024)
print(resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)
apply_limits({"memory_mb": 2048, "file_size_mb": 16, "open_files": 64, "cpu_s": 60})  # as a worker would
print(resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["1024", "2048"]
