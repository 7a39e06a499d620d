"""Misconception diagnosis measured on real gradings: every mutant, graded on a seed its signature was
not made from, is diagnosed as itself (or as a mutant indistinguishable from it: one cause family); at least 60% of the wrong
programs written apart from the mutants (tests/wrong_programs/SLUG/*.py) get a diagnosis, and those
whose mistake a mutant shares get a fitting one; no correct program (tests/wrong_programs/SLUG/correct/)
ever gets one, on either tier."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.audit.match import diagnose_graded, indistinguishable
from grader.audit.signatures import current_signatures
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard
from grader.sandbox.local import run_local
from tests.helpers import PROJECT

pytestmark = pytest.mark.slow

SLUGS = ("continuous_batching", "paged_kv_cache")
SHARE = 0.6  # the least share of wrong programs that must get a diagnosis
# The wrong programs written for this measurement (diagnosis_*.py), and those written apart whose
# mistake a mutant shares -> the mutants whose hint fits their mistake; an empty set: no mutant's hint
# fits, so none may be given.
FITS: dict[str, set[str]] = {
    "diagnosis_admits_any_that_fits": {"03_skip_blocked_head"},
    "diagnosis_budget_can_go_negative": {"11_admit_with_zero_budget"},
    "diagnosis_chunk_ignores_budget": {"08_chunk_not_capped_by_budget"},
    "diagnosis_complete_reports_all": {"25_complete_returns_all_plan_ids"},
    "diagnosis_decodes_are_free": set(),
    "diagnosis_finishes_one_early": {"44_first_token_counted_twice"},
    "diagnosis_first_token_with_decode": {"13_first_token_late"},
    "diagnosis_no_release": {"18_no_release"},
    "diagnosis_reserve_prompt_only": {"06_kv_reserve_prompt_only"},
    "diagnosis_seq_cap_greater": {"07_seq_cap_off_by_one"},
    "diagnosis_waiting_newest_first": {"24_waiting_lifo"},
    "admission_budget_counts_decodes_only": {"41_admission_budget_after_decodes_only"},
    "complete_pops_the_plan": {"32_complete_empties_the_plan"},
    "complete_refills_the_freed_seat": {"35_complete_admits_into_the_freed_seat"},
    "decodes_in_id_order": {"33_decodes_in_id_order"},
    "double_counts_finishing_prefill": {"44_first_token_counted_twice"},
    "free_kv_taken_once": {"37_free_kv_counted_once"},
    "kv_check_for_the_prompt_only": {"45_kv_check_prompt_only"},
    "looks_past_a_blocked_head": {"03_skip_blocked_head"},
    "prompt_chunk_not_cut_to_the_budget": {"08_chunk_not_capped_by_budget"},
    "removal_swaps_with_the_last": {"34_removal_swaps_in_the_last"},
    "removes_finished_at_next_schedule": {"43_removed_at_next_schedule"},
    "reserved_counts_tokens_in_the_cache": {"38_reserved_counts_cache_tokens"},
    "reserves_kv_when_the_prompt_is_in": {"39_reserve_when_the_prompt_is_in"},
    "returns_only_finished_ids": {"42_complete_returns_finished_ids"},
    "seat_count_taken_once": {"36_seats_counted_once"},
    "seats_are_for_decoding_requests": {"40_seats_for_decoding_only"},
    "waits_until_the_whole_prompt_fits": {"46_waits_for_the_whole_prompt"},
    "diagnosis_newest_free_first": {"01_free_blocks_lifo"},
    "diagnosis_ceil_wrong": {"03_extra_block_for_exact_fit"},
    "diagnosis_shares_nothing": {"04_no_prefix_sharing"},
    "diagnosis_shares_by_block_content": {"06_prefix_by_block_tokens_only"},
    "diagnosis_writes_into_shared_block": {"07_no_copy_on_write"},
    "diagnosis_fork_no_refs": {"11_fork_without_references"},
    "diagnosis_free_everything": {"13_free_ignores_references"},
    "diagnosis_allocate_grabs_then_fails": {"15_allocate_not_atomic"},
    "diagnosis_reallocate_replaces": {"18_duplicate_allocate_overwrites"},
    "diagnosis_free_keeps_old_tokens": {"21_free_keeps_tokens"},
    "diagnosis_copy_loses_tokens": {"09_copy_drops_old_tokens"},
    "diagnosis_reader_returns_own_list": {"22_block_table_hands_out_its_own_list"},
    # paged_kv_cache's other wrong programs, each with the mutant that makes its mistake
    "allocate_checks_room_before_duplicate": {"28_allocate_checks_room_before_the_id"},
    "block_table_of_unknown_is_empty": {"30_unknown_sequence_has_an_empty_table"},
    "block_zero_never_shared": {"38_block_zero_never_shared"},
    "copy_on_write_shares_the_token_list": {"35_copy_shares_the_token_list"},
    "cow_lowers_count_before_taking": {"27_copy_lets_go_before_taking"},
    "fork_checks_child_first": {"26_fork_checks_the_child_first"},
    "fork_copies_the_last_partial_block": {"36_fork_copies_the_partial_last_block"},
    "free_unknown_sequence_ignored": {"31_free_of_an_unknown_sequence_ignored"},
    "freed_blocks_queued_at_the_back": {"37_free_blocks_fifo"},
    "full_shared_block_copied": {"33_full_shared_block_copied"},
    "ref_count_of_a_free_block_is_none": {"39_ref_count_of_a_free_block_is_none"},
    "refused_allocate_keeps_the_sequence": {"29_refused_allocate_keeps_the_sequence"},
    "shared_block_forgotten_with_first_owner": {"32_shared_block_forgotten_with_its_maker"},
    "shared_by_position_and_block_tokens": {"34_prefix_by_position_and_block_tokens",
                                            "06_prefix_by_block_tokens_only"},
    "table_is_a_tuple": {"24_block_table_returns_a_tuple"},
    "table_returns_own_list": {"22_block_table_hands_out_its_own_list"},
    "tokens_as_deque": {"25_block_tokens_returns_a_deque"},
    "tokens_returns_own_list": {"23_block_tokens_hands_out_its_own_list"},
    "zero_marks_an_empty_slot": set(),
}


def graded(slug: str, jobs: dict[str, tuple[bytes, str]], seed: int | None = None) -> dict[str, Scorecard]:
    exercise = load_exercise(slug)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(grade_bytes, data, exercise, tier, run_local, "local", seed, diagnose_graded)
                   for name, (data, tier) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def programs(slug: str, folder: str = "") -> list[Path]:
    return sorted((PROJECT / "tests" / "wrong_programs" / slug / folder).glob("*.py"))


@pytest.mark.parametrize("slug", SLUGS)
def test_every_mutant_is_diagnosed_as_itself_on_a_seed_of_its_own(slug):
    exercise = load_exercise(slug)
    signatures = current_signatures(exercise)
    assert signatures is not None, f"stale or missing: grader misconceptions {slug}"
    seeded = set(signatures.seeded)
    family = {m.mutant: {o.mutant for o in signatures.mutants if indistinguishable(o, m, seeded)}
              for m in signatures.mutants}
    # A seed none of the signatures was made from (they use the audit's first three).
    cards = graded(slug, {path.stem: (path.read_bytes(), exercise.top_tier) for path in exercise.mutants},
                   seed=7)
    wrong = {name: [d.mutant for d in card.diagnosis] for name, card in cards.items()
             if not {d.mutant for d in card.diagnosis} & (family[name] | {name})}
    assert not wrong, wrong


@pytest.mark.parametrize("slug", SLUGS)
def test_most_wrong_programs_get_a_fitting_diagnosis_and_correct_ones_none(slug):
    wrong, correct = programs(slug), programs(slug, "correct")
    assert wrong and correct
    jobs = {path.stem: (path.read_bytes(), "premium") for path in wrong}
    jobs |= {f"correct/{path.stem}/{tier}": (path.read_bytes(), tier) for path in correct for tier in ("free", "premium")}
    cards = graded(slug, jobs)
    for name, card in cards.items():
        if name.startswith("correct/"):
            assert card.status == "graded" and card.score == card.max_score, name
            assert card.diagnosis == [], f"{name}: a correct program was told {card.diagnosis}"
    losing = {name: card for name, card in cards.items() if not name.startswith("correct/")
              and card.score < card.max_score}
    diagnosed = {name for name, card in losing.items() if card.diagnosis}
    assert len(diagnosed) >= SHARE * len(losing), (sorted(diagnosed), sorted(set(losing) - diagnosed))
    # A diagnosis given must fit: one of the mutants whose hint says the program's mistake, or one no
    # grading tells apart from such a mutant (its cause family, named by whichever member is closest).
    signatures = current_signatures(load_exercise(slug))
    assert signatures is not None
    seeded = set(signatures.seeded)
    by_name = {m.mutant: m for m in signatures.mutants}
    fitting = {name: {o.mutant for o in signatures.mutants for m in mutants if m in by_name
                      and indistinguishable(o, by_name[m], seeded)} | mutants for name, mutants in FITS.items()}
    told = {name: {d.mutant for d in losing[name].diagnosis} for name in FITS if name in losing}
    unfitting = {name: sorted(found) for name, found in told.items() if found and not found & fitting[name]}
    assert not unfitting, unfitting
