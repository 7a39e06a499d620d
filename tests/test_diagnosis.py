"""Misconception diagnosis, in the fast loop: the hints of the mutants, the committed signatures being
current, and the matching of a scorecard's failures, on scorecards built by hand (no sandbox)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from grader.audit.match import THRESHOLD, diagnose, diagnose_graded
from grader.audit.signatures import (
    Failure,
    Signature,
    Signatures,
    current_signatures,
    read_signatures,
    signatures_fingerprint,
    signatures_path,
)
from grader.cli import main
from grader.core.causes import masked_divergence, masked_headline
from grader.core.exercise import Exercise, load_exercise
from grader.core.scorecard import Diagnosis, Scorecard
from grader.core.scorecard import TestResult as Result
from grader.core.suite_tests import list_tests
from grader.diagnosis.counts import misconception_counts
from grader.diagnosis.hints import hint_of, mutant_hint
from grader.diagnosis.words import card_diagnosis, diagnosis_sentence
from tests.helpers import EXERCISE, PROJECT

pytestmark = pytest.mark.unit

SLUGS = ("continuous_batching", "paged_kv_cache")


# -- the hints ----------------------------------------------------------------------------------------

def test_a_hint_is_the_misconception_paragraph_of_the_docstring_joined_and_without_its_full_stop():
    source = '"""What it does.\n\nMisconception: counts a token\ntwice.\n\nMore."""\nx = 1\n'
    assert hint_of(source) == "counts a token twice"
    assert hint_of('"""No hint here."""\n') == "" and hint_of("def (:\n") == "" and hint_of("x = 1\n") == ""


@pytest.mark.parametrize("slug", SLUGS)
def test_every_mutant_has_a_hint_that_names_no_test(slug):
    exercise = load_exercise(slug)
    tests = {name.split("[")[0] for suite in exercise.suites.values() for name in list_tests(suite)}
    assert exercise.mutants
    for path in exercise.mutants:
        hint = mutant_hint(path)
        assert hint, f"{path.name}: no Misconception: paragraph"
        assert hint[0].islower() and not hint.endswith("."), f"{path.name}: completes 'behaves like one that'"
        assert "test_" not in hint and not any(name in hint for name in tests), f"{path.name} names a test"


# -- the committed signatures ---------------------------------------------------------------------------

@pytest.mark.parametrize("slug", SLUGS)
def test_the_committed_signatures_are_current(slug):
    """A change to a suite, the reference, exercise.toml or a mutant makes the file stale: write it again
    with `grader misconceptions SLUG`."""
    exercise = load_exercise(slug)
    found = read_signatures(exercise)
    assert found is not None, f"no {signatures_path(exercise)}: run grader misconceptions {slug}"
    assert found.fingerprint == signatures_fingerprint(exercise), f"stale: run grader misconceptions {slug}"
    assert current_signatures(exercise) is not None
    assert [m.mutant for m in found.mutants] == [p.stem for p in exercise.mutants]
    assert all(m.hint == mutant_hint(p) for m, p in zip(found.mutants, exercise.mutants, strict=True))
    assert all(m.fails for m in found.mutants), "a mutant that fails nothing cannot be diagnosed"
    assert main(["misconceptions", slug, "--check"]) == 0


def test_a_stale_file_is_not_used(tmp_path):
    exercise = plain_copy(tmp_path)
    assert current_signatures(exercise) is not None
    suite = next(iter(exercise.suites.values())).path
    test_file = sorted(suite.glob("test_*.py"))[0]
    test_file.write_text(test_file.read_text() + "\n# changed\n")
    assert current_signatures(exercise) is None
    assert main(["misconceptions", str(exercise.folder), "--check"]) == 1


def test_a_due_date_or_an_audit_declaration_leaves_the_file_current_and_a_limit_does_not(tmp_path):
    exercise = plain_copy(tmp_path)
    toml = exercise.folder / "exercise.toml"
    original = toml.read_text()
    toml.write_text(original.replace("[web]\n", "[web]\ndue = 2031-01-01T00:00:00+00:00\n", 1)
                    .replace("[audit]\nseeds = 3", "[audit]\nseeds = 4"))
    assert "due = 2031" in toml.read_text() and "seeds = 4" in toml.read_text()
    assert current_signatures(load_exercise(str(exercise.folder))) is not None
    toml.write_text(original.replace("call_timeout_s = 5", "call_timeout_s = 4"))
    assert current_signatures(load_exercise(str(exercise.folder))) is None  # a limit can change what fails


def test_the_signatures_and_a_gradings_fingerprint_count_the_same_settings(tmp_path):
    """One computation: the default tier and a suite's label (how results are shown) change neither the
    exercise's fingerprint nor the signatures', where the signatures once counted both."""
    from grader.core.fingerprint import exercise_fingerprint

    exercise = plain_copy(tmp_path)
    toml = exercise.folder / "exercise.toml"
    before = (exercise_fingerprint(exercise), signatures_fingerprint(exercise))
    toml.write_text(toml.read_text().replace('default_tier = "premium"', 'default_tier = "free"')
                    .replace('label = "Visible tests"', 'label = "Open tests"'))
    changed = load_exercise(str(exercise.folder))
    assert changed.default_tier == "free"
    assert (exercise_fingerprint(changed), signatures_fingerprint(changed)) == before
    assert current_signatures(changed) is not None


def test_a_stale_file_is_named_on_every_grading(tmp_path, caplog):
    """A stale file turns the diagnosis off: every grading says so in its log, full marks or not."""
    exercise = plain_copy(tmp_path)
    passing = card_failing({}, exercise=exercise.slug)
    with caplog.at_level("WARNING", logger="grader.diagnosis"):
        assert diagnose_graded(passing, exercise) == []
    assert not caplog.records  # current: nothing to say
    suite = next(iter(exercise.suites.values())).path
    test_file = sorted(suite.glob("test_*.py"))[0]
    test_file.write_text(test_file.read_text() + "\n# changed\n")
    for _ in range(2):
        with caplog.at_level("WARNING", logger="grader.diagnosis"):
            assert diagnose_graded(passing, exercise) == []
    stale = [r.getMessage() for r in caplog.records if "misconceptions.json is stale" in r.getMessage()]
    assert len(stale) == 2 and f"grader misconceptions {exercise.slug}" in stale[0]


def plain_copy(folder: Path) -> Exercise:
    """The exercise's files copied as they are (its signature file stays current)."""
    for top in ("exercises", "hidden_tests", "solutions"):
        shutil.copytree(PROJECT / top / EXERCISE, folder / top / EXERCISE, ignore=shutil.ignore_patterns("__pycache__"))
    return load_exercise(str(folder / "exercises" / EXERCISE))


# -- the matching ---------------------------------------------------------------------------------------

def card_failing(failing: dict[str, str], tier: str = "premium", passing: tuple[str, ...] = ("hidden::ok",),
                 exercise: str = "ex") -> Scorecard:
    """A graded card: the tests of `failing` ("suite::name" -> first message line) failed, `passing` passed."""
    tests = [Result(key.split("::")[1], key.split("::")[1], key.split("::")[0], "failed", 0, 1, message)
             for key, message in failing.items()]
    tests += [Result(key.split("::")[1], key.split("::")[1], key.split("::")[0], "passed", 1, 1) for key in passing]
    return Scorecard(exercise=exercise, tier=tier, submission_sha256="0" * 64, status="graded",
                     score=len(passing), max_score=len(tests), tests=tests)


def kind(message: str) -> str:
    return f"failed: {message}"


SIGNATURES = Signatures("ex", "f" * 16, "premium", 3, seeded=["hidden::random"], mutants=[
    Signature("01_late", "emits a token late", {
        "visible::a": Failure(1.0, [kind("step #: got […]")]),
        "hidden::b": Failure(1.0, [kind("a token came late")]),
        "hidden::c": Failure(1.0, [kind("a token came late")]),
        "hidden::random": Failure(0.333, [kind("step #: differs")])}),
    Signature("02_never", "never gives back its reservation", {
        "hidden::d": Failure(1.0, [kind("the reservation stays")]),
        "hidden::e": Failure(1.0, [kind("the reservation stays")])}),
    Signature("03_also_never", "gives back its reservation a step late", {
        "hidden::d": Failure(1.0, [kind("the reservation stays")]),
        "hidden::e": Failure(1.0, [kind("the reservation stays")])}),
])


def test_failures_like_a_mutants_get_its_hint():
    card = card_failing({"visible::a": "step 3: got [1, 2]", "hidden::b": "a token came late",
                         "hidden::c": "a token came late"})
    found = diagnose(card, SIGNATURES)
    assert [d.mutant for d in found] == ["01_late"] and found[0].similarity >= THRESHOLD
    assert card_diagnosis(dataclasses.replace(card, diagnosis=found)) == \
        "Your program behaves like one that emits a token late."


def test_mutants_that_behave_alike_everywhere_are_one_cause_named_once():
    """02 and 03 fail the same tests at the same calls: no grading tells them apart, so they are one
    family, named once by its closest member (not "X, or Y")."""
    card = card_failing({"hidden::d": "the reservation stays", "hidden::e": "the reservation stays"})
    found = diagnose(card, SIGNATURES)
    assert [d.mutant for d in found] == ["02_never"]
    assert diagnosis_sentence(found) == "Your program behaves like one that never gives back its reservation."


TWO_CAUSES = Signatures("ex", "f" * 16, "premium", 3, seeded=[], mutants=[
    Signature("01_left", "forgets the left one", {
        "hidden::d": Failure(1.0, [kind("at step #, put(x#): the call raises ValueError, but yours returns normally.")]),
        "hidden::e": Failure(1.0, [kind("at step #, put(x#): the call raises ValueError, but yours returns normally.")])}),
    Signature("02_right", "forgets the right one", {
        "hidden::d": Failure(1.0, [kind("at step #, put(x#): the call raises ValueError, but yours returns normally.")]),
        "hidden::f": Failure(1.0, [kind("at step #, put(x#): the call raises ValueError, but yours returns normally.")])}),
])
REFUSED_PUT = "at step 2, put(r4): the call raises ValueError, but yours returns normally."


def test_a_card_that_fits_two_causes_as_well_gets_none():
    both = card_failing({"hidden::d": REFUSED_PUT, "hidden::e": REFUSED_PUT, "hidden::f": REFUSED_PUT})
    assert diagnose(both, TWO_CAUSES) == []


def test_the_right_cause_alone_when_it_is_clearly_the_best():
    left = card_failing({"hidden::d": REFUSED_PUT, "hidden::e": REFUSED_PUT})
    assert [d.mutant for d in diagnose(left, TWO_CAUSES)] == ["01_left"]


def test_the_same_tests_failing_at_another_first_call_are_another_cause():
    """Both mutants fail d and e; the program parts ways at get(), as 02 does, not at put() as 01 does."""
    signatures = dataclasses.replace(TWO_CAUSES, mutants=[
        TWO_CAUSES.mutants[0],
        Signature("02_get", "reads the wrong one", {key: Failure(1.0, [kind(
            "at step #, get(x#): the call returns […], but yours returns [].")]) for key in ("hidden::d", "hidden::e")})])
    wrong_get = "at step 3, get(r2): the call returns [4, 5], but yours returns []."
    card = card_failing({"hidden::d": wrong_get, "hidden::e": wrong_get})
    assert [d.mutant for d in diagnose(card, signatures)] == ["02_get"]


def test_the_first_divergent_call_keeps_its_name_and_an_empty_list():
    message = "at step 5, allocate(2, []): the call raises ValueError, but yours returns normally.\nThis test ..."
    assert masked_divergence(message) == "at step #, allocate(#, []): the call raises ValueError, but yours returns normally."
    assert masked_divergence(message.replace("[]", "[4, 5]")) == \
        "at step #, allocate(#, […]): the call raises ValueError, but yours returns normally."
    # the reports still group one difference met at different calls as one cause
    assert masked_headline(message) == "at step #, a call: the call raises ValueError, but yours returns normally."


# What a program that accepts an empty prompt fails (paged_kv_cache, graded on the premium tier): every
# first difference is an allocate() of an empty prompt that the reference refuses.
EMPTY_PROMPT_FAILS = {
    **{f"hidden::test_random_calls_match_the_reference[{profile}]":
       "at step 1, allocate(8, []): the call raises ValueError, but yours returns normally."
       for profile in ("full_cache_forks", "one_block_cache", "one_token_blocks", "parallel_sampling",
                       "shared_prefixes", "tight_cache")},
    "hidden::test_mistakes_raise_and_change_nothing":
        "at step 2, allocate(2, []): the call raises ValueError, but yours returns normally.",
    "hidden::test_allocate_of_an_existing_id_raises_value_error_whatever_the_prompt":
        "at step 5, allocate(2, []): the call raises ValueError, but yours returns normally.",
    "hidden::test_a_refused_call_leaves_no_sequence_behind":
        "at step 3, allocate(3, []): the call raises ValueError, but yours returns normally.",
    "hidden::test_every_refused_call_changes_nothing":
        "at step 13, allocate(8, []): the call raises ValueError, but yours returns normally.",
}


def real_card(slug: str, failing: dict[str, str]) -> Scorecard:
    """A premium card of the exercise: `failing` failed, every other test of its suites passed."""
    exercise = load_exercise(slug)
    ran = [f"{suite.name}::{name}" for suite in exercise.suites.values() for name in list_tests(suite)]
    assert set(failing) <= set(ran)
    return card_failing(failing, passing=tuple(key for key in ran if key not in failing), exercise=slug)


def test_a_program_that_accepts_an_empty_prompt_is_not_told_it_overwrites_a_duplicate_allocate():
    exercise = load_exercise("paged_kv_cache")
    signatures = current_signatures(exercise)
    assert signatures is not None
    found = diagnose(real_card("paged_kv_cache", EMPTY_PROMPT_FAILS), signatures)
    assert "18_duplicate_allocate_overwrites" not in [d.mutant for d in found]
    assert len(found) <= 1


def test_the_golden_mutants_card_is_told_its_one_cause():
    """tests/golden/mutant.json: mutant 03 graded; its failures name 03's mistake alone."""
    exercise = load_exercise("continuous_batching")
    signatures = current_signatures(exercise)
    assert signatures is not None
    card = Scorecard.from_dict(json.loads((PROJECT / "tests" / "golden" / "mutant.json").read_text(encoding="utf-8")))
    assert [d.mutant for d in diagnose(card, signatures)] == ["03_skip_blocked_head"]


def test_a_mutant_counts_only_where_it_parts_ways_as_the_program_does():
    """The same tests failing, but the program's first failure is not the mutant's: another mistake."""
    first_differs = card_failing({"visible::a": "a crash", "hidden::b": "a token came late",
                                  "hidden::c": "a token came late"})
    assert diagnose(first_differs, SIGNATURES) == []


def test_the_same_tests_failing_another_way_count_for_less():
    same_way = card_failing({"hidden::d": "the reservation stays", "hidden::e": "the reservation stays"})
    other_way = card_failing({"hidden::d": "a crash", "hidden::e": "a crash"})
    assert diagnose(same_way, SIGNATURES) and not diagnose(other_way, SIGNATURES)


def test_failures_like_no_mutants_get_nothing():
    assert diagnose(card_failing({"hidden::x": "something else", "hidden::y": "else"}), SIGNATURES) == []
    # half of a mutant's failures and as many of its own: below the threshold
    assert diagnose(card_failing({"hidden::b": "a token came late", "hidden::x": "else", "hidden::y": "else"}),
                    SIGNATURES) == []


def test_a_random_workload_weighs_less_than_a_named_test():
    only_random = card_failing({"hidden::random": "step 4: differs"})
    assert diagnose(only_random, SIGNATURES) == []


def test_full_marks_and_runs_that_are_not_graded_get_none():
    card = card_failing({"visible::a": "step 3: got [1, 2]", "hidden::b": "a token came late",
                         "hidden::c": "a token came late"})
    full = dataclasses.replace(card, score=card.max_score)
    assert diagnose(full, SIGNATURES) == []
    for status in ("error", "rejected"):
        assert diagnose(dataclasses.replace(card, status=status), SIGNATURES) == []
    assert diagnose(dataclasses.replace(card, exercise="another"), SIGNATURES) == []
    # a stored card that says otherwise is never told to its reader
    told = dataclasses.replace(full, diagnosis=[Diagnosis("01_late", "emits a token late", 1.0)])
    assert card_diagnosis(told) == ""


def test_the_free_tier_matches_on_the_tests_it_ran_only():
    """A free run has the visible suite's tests alone: a mutant is judged by its failures among them."""
    free = card_failing({"visible::a": "step 3: got [1, 2]"}, tier="free", passing=("visible::z",))
    found = diagnose(free, SIGNATURES)
    assert [d.mutant for d in found] == ["01_late"]
    assert all("hidden" not in d.hint for d in found)
    # the mutant's hidden failures neither help nor hurt a free run
    assert found[0].similarity == 1.0


def test_diagnosis_is_made_after_grading_only_from_a_current_file(tmp_path):
    exercise = plain_copy(tmp_path)
    signatures = current_signatures(exercise)
    assert signatures is not None
    mutant = signatures.mutants[0]
    card = card_failing({key: "" for key in mutant.fails}, exercise=exercise.slug)
    card.tests = [dataclasses.replace(t, message=mutant.fails[f"{t.suite}::{t.name}"].kinds[0].split(": ", 1)[1])
                  if f"{t.suite}::{t.name}" in mutant.fails else t for t in card.tests]
    assert mutant.mutant in [d.mutant for d in diagnose_graded(card, exercise)]
    signatures_path(exercise).write_text("{}", encoding="utf-8")
    assert diagnose_graded(card, exercise) == []


def test_the_scorecard_keeps_its_diagnosis_and_reads_a_card_without_one():
    card = card_failing({"hidden::d": "x"})
    card.diagnosis = [Diagnosis("02_never", "never gives back its reservation", 0.93)]
    again = Scorecard.from_dict(json.loads(card.to_json()))
    assert again.diagnosis == card.diagnosis
    older = json.loads(card.to_json())
    del older["diagnosis"]
    assert Scorecard.from_dict(older).diagnosis == []


def test_students_are_counted_per_misconception_most_common_first():
    wrong = card_failing({"hidden::d": "x"})
    never = Diagnosis("02_never", "never gives back its reservation", 0.9)
    late = Diagnosis("01_late", "emits a token late", 0.8)
    cards = [dataclasses.replace(wrong, diagnosis=[never]), dataclasses.replace(wrong, diagnosis=[never, late]),
             dataclasses.replace(wrong, diagnosis=[late]), dataclasses.replace(wrong, diagnosis=[late]),
             dataclasses.replace(wrong, score=wrong.max_score, diagnosis=[never]), wrong]
    assert [(row.mutant, row.students) for row in misconception_counts(cards)] == [("01_late", 3), ("02_never", 2)]
