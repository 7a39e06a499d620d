"""Programs a class might write from a statement alone, graded as that class would be.

tests/wrong_programs/SLUG/ holds whole submissions, each with one plausible mistake that its docstring's
first line says in a student's words; correct/ holds correct ones in other styles. None is a copy of the
reference or of a mutant. Each is graded on the premium tier on three seeds (those `grader audit` grades
a mutant on): every wrong one must lose points on every seed, in at least one test that does not take
the `seed` fixture (a named test catches the mistake, not a lucky workload), and every correct one must
get full marks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.core.exercise import Exercise, load_exercise
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard
from grader.core.seed_checks import seeded_tests
from grader.core.seeding import audit_seeds
from grader.sandbox.local import LocalBackend
from tests.helpers import PROJECT

SLUGS = ("continuous_batching", "paged_kv_cache")
SEEDS = 3

# paged_kv_cache: each wrong program, and a named premium test that must catch it on every seed (the
# test whose name says the mistake; others may fail too).
KV_CAUGHT_BY = {
    "diagnosis_allocate_grabs_then_fails": "test_allocate_out_of_blocks_changes_nothing",
    "diagnosis_ceil_wrong": "test_a_prompt_that_fills_its_blocks_exactly_takes_no_extra_block",
    "diagnosis_copy_loses_tokens": "test_copy_on_write_leaves_the_parent_untouched",
    "diagnosis_fork_no_refs": "test_each_fork_copies_its_own_block_once",
    "diagnosis_free_everything": "test_free_keeps_the_blocks_others_hold",
    "diagnosis_free_keeps_old_tokens": "test_free_returns_the_blocks",
    "diagnosis_newest_free_first": "test_the_lowest_free_block_is_taken_even_after_frees",
    "diagnosis_reader_returns_own_list": "test_block_table_returns_a_new_list",
    "diagnosis_reallocate_replaces": "test_allocate_of_an_existing_id_raises_value_error_whatever_the_prompt",
    "diagnosis_shares_by_block_content": "test_a_block_is_shared_only_when_the_whole_prefix_matches",
    "diagnosis_shares_nothing": "test_a_block_is_shared_only_when_the_whole_prefix_matches",
    "diagnosis_writes_into_shared_block": "test_copy_on_write_leaves_the_parent_untouched",
    "allocate_checks_room_before_duplicate": "test_allocate_of_an_existing_id_raises_value_error_whatever_the_prompt",
    "block_table_of_unknown_is_empty": "test_block_table_of_an_unknown_sequence_raises_key_error",
    "block_zero_never_shared": "test_a_block_is_shared_only_when_the_whole_prefix_matches",
    "copy_on_write_shares_the_token_list": "test_copy_on_write_leaves_the_parent_untouched",
    "cow_lowers_count_before_taking": "test_copy_on_write_with_no_free_block_raises_and_keeps_the_shared_block",
    "fork_checks_child_first": "test_fork_of_a_missing_parent_raises_key_error_even_when_the_child_exists",
    "fork_copies_the_last_partial_block": "test_copy_on_write_leaves_the_parent_untouched",
    "free_unknown_sequence_ignored": "test_mistakes_raise_and_change_nothing",
    "freed_blocks_queued_at_the_back": "test_the_lowest_free_block_is_taken_even_after_frees",
    "full_shared_block_copied": "test_appending_to_a_full_shared_block_takes_a_new_block_without_copying",
    "prefixes_shared_by_every_manager": "test_two_managers_share_no_block_and_no_prompt",
    "ref_count_of_a_free_block_is_none": "test_free_keeps_the_blocks_others_hold",
    "refused_allocate_keeps_the_sequence": "test_a_refused_call_leaves_no_sequence_behind",
    "shared_block_forgotten_with_first_owner": "test_a_prompt_block_stays_shared_after_its_first_owner_is_freed",
    "shared_by_position_and_block_tokens": "test_sharing_stops_at_the_first_block_that_differs",
    "table_is_a_tuple": "test_block_table_returns_a_new_list",
    "table_returns_own_list": "test_block_table_returns_a_new_list",
    "tokens_as_deque": "test_block_tokens_returns_a_new_list",
    "tokens_returns_own_list": "test_block_tokens_returns_a_new_list",
    "zero_marks_an_empty_slot": "test_blocks_of_one_token",
    "out_of_blocks_as_a_plain_runtime_error": "test_out_of_blocks_is_the_stubs_out_of_blocks_not_any_runtime_error",
    "freed_table_list_kept_for_the_id":
        "test_an_id_used_again_after_free_is_a_new_sequence_that_grows_from_its_own_prompt",
    "prefixes_known_before_the_room_check":
        "test_calls_after_a_refused_call_with_the_same_ids_go_on_as_if_it_never_happened",
}

# continuous_batching: the programs whose mistake only a named test of a corner shows (the others are
# caught by several), and that test.
CB_CAUGHT_BY = {
    "prompt_left_set_before_add_checks": "test_a_refused_add_changes_nothing_for_the_request_holding_that_id",
    "id_taken_before_add_checks": "test_a_refused_add_leaves_nothing_behind_for_its_id",
    "decoding_ids_kept_after_finishing": "test_a_finished_id_used_again_starts_a_new_request",
}


def folder(slug: str, kind: str = "") -> Path:
    return PROJECT / "tests" / "wrong_programs" / slug / kind


def programs(slug: str, kind: str = "") -> list[str]:
    return sorted(p.stem for p in folder(slug, kind).glob("*.py"))


WRONG = [(slug, name) for slug in SLUGS for name in programs(slug)]
CORRECT = [(slug, name) for slug in SLUGS for name in programs(slug, "correct")]


def docstring_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


@pytest.fixture(scope="module")
def backend():
    backend = LocalBackend(warm=True)
    yield backend
    backend.close()


def gradings(path: Path, exercise: Exercise, backend: LocalBackend) -> list[Scorecard]:
    source = path.read_bytes()
    return [grade_bytes(source, exercise, "premium", backend, "local", seed)
            for seed in audit_seeds(source, exercise, SEEDS)]


@pytest.mark.unit
@pytest.mark.parametrize("slug", SLUGS)
def test_there_are_enough_programs_each_saying_its_mistake_and_none_a_mutant(slug):
    wrong, correct = programs(slug), programs(slug, "correct")
    assert len(wrong) >= 14 and len(correct) >= 3, (wrong, correct)
    exercise = load_exercise(slug)
    given = {exercise.reference.read_text(), *(p.read_text() for p in exercise.mutants)}
    for name in wrong:
        path = folder(slug) / f"{name}.py"
        assert len(docstring_line(path)) > 20, f"{name}: the docstring's first line says the mistake"
        assert path.read_text() not in given, f"{name} is the reference or a mutant"


@pytest.mark.unit
def test_every_paged_kv_cache_program_is_listed_with_a_named_test_that_catches_it():
    assert sorted(KV_CAUGHT_BY) == programs("paged_kv_cache")
    seeded = seeded_tests(load_exercise("paged_kv_cache"))
    assert seeded and not seeded & set(KV_CAUGHT_BY.values())


@pytest.mark.unit
def test_the_continuous_batching_programs_of_corners_are_there_with_a_named_test():
    assert set(CB_CAUGHT_BY) <= set(programs("continuous_batching"))
    seeded = seeded_tests(load_exercise("continuous_batching"))
    assert seeded and not seeded & set(CB_CAUGHT_BY.values())


@pytest.mark.slow
@pytest.mark.parametrize(("slug", "name"), WRONG)
def test_a_wrong_program_loses_points_on_every_seed_in_a_named_test(backend, slug, name):
    exercise = load_exercise(slug)
    seeded = seeded_tests(exercise)
    for card in gradings(folder(slug) / f"{name}.py", exercise, backend):
        assert card.status == "graded", card.reason
        failed = {t.name.split("[")[0] for t in card.tests if t.status != "passed"}
        assert card.score < card.max_score, f"{name} got full marks on seed {card.seed}"
        assert failed - seeded, f"{name} lost points on seed {card.seed} only in random workloads: {sorted(failed)}"
        caught_by = KV_CAUGHT_BY.get(name) if slug == "paged_kv_cache" else CB_CAUGHT_BY.get(name)
        if caught_by is not None:
            assert caught_by in failed, f"{name}: {caught_by} passed on seed {card.seed}"


@pytest.mark.slow
@pytest.mark.parametrize(("slug", "name"), CORRECT)
def test_a_correct_program_gets_full_marks_on_every_seed(backend, slug, name):
    exercise = load_exercise(slug)
    for card in gradings(folder(slug, "correct") / f"{name}.py", exercise, backend):
        assert card.status == "graded", card.reason
        assert card.score == card.max_score > 0, [(t.name, t.message[:300]) for t in card.tests if t.status != "passed"]
