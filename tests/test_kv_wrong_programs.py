"""paged_kv_cache graded as a class of students would be: programs written from the statement alone, each
with one mistake a student makes (tests/wrong_programs/paged_kv_cache/), lose points on every seed, and
always in a named test of the premium suite (one that does not draw from the `seed` fixture), not only
by the luck of a random workload; correct programs in other styles get full marks on every seed.

A submission's seed comes from its bytes (grader/seeding.py): a comment line of its own gives the same
program another seed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.exercise import load_exercise
from grader.grading import grade_bytes
from grader.sandbox.local import LocalBackend
from tests.helpers import PROJECT

SLUG = "paged_kv_cache"
PROGRAMS = PROJECT / "tests" / "wrong_programs" / SLUG
HIDDEN = PROJECT / "hidden_tests" / SLUG
SEEDS = 3

# Each wrong program, and a named premium test that must catch it on every seed: the test whose name
# says the mistake (others may fail too).
CAUGHT_BY = {
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
}
WRONG = sorted(p.stem for p in PROGRAMS.glob("*.py"))
CORRECT = sorted(p.stem for p in (PROGRAMS / "correct").glob("*.py"))


def seeded_tests() -> set[str]:
    """The premium tests that take the `seed` fixture (their random workloads differ by seed)."""
    names = set()
    for path in HIDDEN.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(a.arg == "seed" for a in node.args.args):
                names.add(node.name)
    return names


@pytest.fixture(scope="module")
def exercise():
    return load_exercise(SLUG)


@pytest.fixture(scope="module")
def backend():
    backend = LocalBackend(warm=True)
    yield backend
    backend.close()


def gradings(path: Path, exercise, backend) -> list:
    """The program graded on the premium tier on SEEDS seeds (a comment line of its own for each)."""
    source = path.read_bytes()
    cards = [grade_bytes(source + f"\n# seed variant {i}\n".encode(), exercise, "premium", backend, "local")
             for i in range(SEEDS)]
    assert len({card.seed for card in cards}) == SEEDS
    return cards


def test_every_wrong_program_is_listed_with_the_named_test_that_catches_it():
    assert len(WRONG) >= 14 and len(CORRECT) >= 3
    assert sorted(CAUGHT_BY) == WRONG
    seeded = seeded_tests()
    assert seeded and not seeded & set(CAUGHT_BY.values())
    for name in WRONG:
        doc = ast.get_docstring(ast.parse((PROGRAMS / f"{name}.py").read_text()))
        assert doc and doc.splitlines()[0].strip(), f"{name}.py: its docstring's first line says the mistake"


@pytest.mark.slow
@pytest.mark.parametrize("name", WRONG)
def test_a_wrong_program_loses_points_in_a_named_test_on_every_seed(exercise, backend, name):
    seeded = seeded_tests()
    for card in gradings(PROGRAMS / f"{name}.py", exercise, backend):
        assert card.status == "graded", card.reason
        failed = {t.name.split("[")[0] for t in card.tests if t.status != "passed"}
        assert card.score < card.max_score, f"{name} got full marks on seed {card.seed}"
        assert failed - seeded, f"{name} lost points on seed {card.seed} only in random workloads: {sorted(failed)}"
        assert CAUGHT_BY[name] in failed, f"{name}: {CAUGHT_BY[name]} passed on seed {card.seed}; failed: {sorted(failed)}"


@pytest.mark.slow
@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_program_gets_full_marks_on_every_seed(exercise, backend, name):
    for card in gradings(PROGRAMS / "correct" / f"{name}.py", exercise, backend):
        assert card.status == "graded", card.reason
        assert card.score == card.max_score > 0, [(t.name, t.message[:300]) for t in card.tests if t.status != "passed"]
