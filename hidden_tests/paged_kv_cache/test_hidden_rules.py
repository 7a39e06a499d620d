"""Premium suite: each rule of the statement, and each answer of its "What the rules leave to you", in
the smallest scenario that shows it, checked after every call against the reference (the whole state:
every live sequence's block table, the free count, every block's reference count and tokens, and that
a sequence the call named and that does not exist is unknown)."""

import pytest
from _kv_helpers import Scenario, check, check_new_lists


def test_the_lowest_free_block_is_taken_even_after_frees(ns, reference, feedback):
    """After blocks are freed in any order, the lowest free id is always taken next."""
    check(ns, reference, feedback, Scenario(6, 2, (
        ("allocate", 1, [1, 2]), ("allocate", 2, [3, 4]), ("allocate", 3, [5, 6]), ("allocate", 4, [7, 8]),
        ("free", 1), ("free", 3), ("free", 2),
        ("allocate", 5, [9, 9, 9, 9, 9]),
    )), about="rule 1, which block")


def test_a_prompt_that_fills_its_blocks_exactly_takes_no_extra_block(ns, reference, feedback):
    """A prompt of exactly 2 blocks takes 2; the next token then starts a third."""
    check(ns, reference, feedback, Scenario(5, 4, (
        ("allocate", 1, [1, 2, 3, 4, 5, 6, 7, 8]),
        ("append_token", 1, 9),
        ("append_token", 1, 10),
    )), about="growth: a new block only when the last is full")


def test_a_block_is_shared_only_when_the_whole_prefix_matches(ns, reference, feedback):
    """The same 4 tokens after a different beginning are not the same block."""
    check(ns, reference, feedback, Scenario(8, 4, (
        ("allocate", 1, [1, 2, 3, 4, 5, 6, 7, 8]),
        ("allocate", 2, [9, 9, 9, 9, 5, 6, 7, 8]),
        ("allocate", 3, [1, 2, 3, 4, 5, 6, 7, 8, 1]),
    )), about="rule 2, prefix sharing")


def test_a_partial_last_block_is_never_shared(ns, reference, feedback):
    """Two equal prompts share their full blocks, never their partial last block."""
    check(ns, reference, feedback, Scenario(8, 4, (
        ("allocate", 1, [1, 2, 3, 4, 5, 6]),
        ("allocate", 2, [1, 2, 3, 4, 5, 6]),
        ("append_token", 2, 7),
    )), about="rule 2, prefix sharing")


def test_blocks_filled_by_decoding_are_not_shared(ns, reference, feedback):
    """A block that append_token filled is not looked up by a later prompt."""
    check(ns, reference, feedback, Scenario(8, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("append_token", 1, 4),
        ("allocate", 2, [1, 2, 3, 4]),
    )), about="rule 2, prefix sharing")


def test_a_freed_block_is_no_longer_shared(ns, reference, feedback):
    """Once nobody holds a prompt block, a new prompt with the same prefix takes a fresh block."""
    check(ns, reference, feedback, Scenario(6, 2, (
        ("allocate", 1, [5, 6, 7, 8]),
        ("allocate", 2, [1, 1]),
        ("free", 1),
        ("allocate", 3, [3, 3]),
        ("allocate", 4, [5, 6, 7, 8]),
    )), about="rule 5, free")


def test_copy_on_write_leaves_the_parent_untouched(ns, reference, feedback):
    """Writing into a shared partial block copies it; the parent keeps its tokens and its block."""
    check(ns, reference, feedback, Scenario(8, 4, (
        ("allocate", 1, [1, 2, 3, 4, 5, 6]),
        ("fork", 1, 2),
        ("append_token", 2, 7),
        ("append_token", 1, 8),
        ("append_token", 2, 9),
    )), about="rule 3, copy-on-write")


def test_each_fork_copies_its_own_block_once(ns, reference, feedback):
    """Three samples of one prompt: each copies the shared partial block when it first writes."""
    check(ns, reference, feedback, Scenario(10, 4, (
        ("allocate", 1, [1, 2, 3, 4, 5]),
        ("fork", 1, 2), ("fork", 1, 3),
        ("append_token", 3, 6), ("append_token", 2, 7), ("append_token", 1, 8), ("append_token", 1, 9),
    )), about="rule 3, copy-on-write")


def test_forked_tables_change_independently(ns, reference, feedback):
    """A child's new block does not appear in its parent's table."""
    check(ns, reference, feedback, Scenario(8, 2, (
        ("allocate", 1, [1, 2]),
        ("fork", 1, 2),
        ("append_token", 2, 3),
        ("append_token", 1, 4),
        ("free", 2),
    )), about="rule 4, fork")


def test_free_keeps_the_blocks_others_hold(ns, reference, feedback):
    """Freeing a parent keeps the blocks its fork and a prefix sharer still hold."""
    check(ns, reference, feedback, Scenario(8, 2, (
        ("allocate", 1, [1, 2, 3, 4, 5]),
        ("allocate", 2, [1, 2, 3, 9]),
        ("fork", 1, 3),
        ("free", 1),
        ("append_token", 3, 6),
        ("free", 2),
        ("free", 3),
    )), about="rule 5, free")


def test_allocate_out_of_blocks_changes_nothing(ns, reference, feedback):
    """A prompt that does not fit raises OutOfBlocks and takes no block; one that fits by sharing works."""
    check(ns, reference, feedback, Scenario(4, 2, (
        ("allocate", 1, [1, 2, 3, 4, 5]),
        ("allocate", 2, [6, 7, 8, 9, 1]),
        ("allocate", 3, [1, 2, 3, 4, 9]),
        ("allocate", 4, [5]),
    )), about="rule 6, out of blocks")


def test_append_out_of_blocks_changes_nothing(ns, reference, feedback):
    """A new block or a copy with no free block raises OutOfBlocks and changes nothing."""
    check(ns, reference, feedback, Scenario(3, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("fork", 1, 2),
        ("append_token", 2, 4),
        ("append_token", 2, 5),
        ("append_token", 1, 6),
        ("free", 2),
        ("append_token", 1, 6),
    )), about="rule 6, out of blocks")


def test_mistakes_raise_and_change_nothing(ns, reference, feedback):
    """An empty prompt, an id used twice and an unknown sequence raise, and change nothing."""
    check(ns, reference, feedback, Scenario(6, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("allocate", 2, []),
        ("allocate", 1, [4]),
        ("fork", 1, 1),
        ("fork", 7, 8),
        ("append_token", 7, 1),
        ("free", 7),
        ("free", 1),
        ("free", 1),
    )), about="rule 7, mistakes")


# -- a refused call changes nothing, and which error comes first --------------------------------------

def test_copy_on_write_with_no_free_block_raises_and_keeps_the_shared_block(ns, reference, feedback):
    """Writing into a shared partial block when no block is free raises OutOfBlocks and leaves the
    shared block's reference count as it was (lower it only once the copy is taken)."""
    check(ns, reference, feedback, Scenario(3, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("allocate", 2, [9]),
        ("fork", 1, 3),
        ("append_token", 3, 4),
        ("append_token", 1, 5),
        ("free", 2),
        ("append_token", 3, 4),
        ("append_token", 1, 5),
    )), about="rule 6, out of blocks during a copy on write")


def test_fork_of_a_missing_parent_raises_key_error_even_when_the_child_exists(ns, reference, feedback):
    """A missing parent is a KeyError whether or not the child exists; an existing child of an existing
    parent (the parent itself too) is a ValueError."""
    check(ns, reference, feedback, Scenario(4, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("fork", 9, 1),
        ("fork", 9, 9),
        ("fork", 1, 1),
        ("fork", 1, 2),
        ("fork", 2, 1),
        ("fork", 9, 2),
    )), about="rule 7 and \"two mistakes at once\": fork")


def test_allocate_of_an_existing_id_raises_value_error_whatever_the_prompt(ns, reference, feedback):
    """An id that exists is a ValueError, with an empty prompt, with the same prompt, and with a prompt
    too long for the free blocks (not OutOfBlocks)."""
    check(ns, reference, feedback, Scenario(4, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("allocate", 1, []),
        ("allocate", 1, [1, 2, 3]),
        ("allocate", 1, [5, 5, 5, 5, 5, 5, 5]),
        ("allocate", 2, []),
        ("allocate", 2, [4]),
    )), about="rule 7 and \"two mistakes at once\": allocate")


def test_a_refused_call_leaves_no_sequence_behind(ns, reference, feedback):
    """A sequence whose allocate or fork was refused does not exist afterwards (block_table raises
    KeyError), and its id can be used again."""
    check(ns, reference, feedback, Scenario(3, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("allocate", 2, [4, 5, 6]),
        ("allocate", 3, []),
        ("fork", 8, 4),
        ("allocate", 2, [4]),
        ("fork", 2, 3),
        ("free", 2),
        ("free", 2),
        ("allocate", 4, [1, 2, 4]),
    )), about="rules 6 and 7, a refused call changes nothing")


def test_every_refused_call_changes_nothing(ns, reference, feedback):
    """With shared prefix blocks, forks and a copied block in a full cache: each kind of refused call
    (OutOfBlocks for a new block, for a copy and for a prompt; ValueError; KeyError) leaves every block
    table, reference count, block's tokens and the free count as they were, between calls that work."""
    check(ns, reference, feedback, Scenario(6, 2, (
        ("allocate", 1, [1, 2, 3, 4, 5]),
        ("allocate", 2, [1, 2, 3, 4, 6]),
        ("fork", 1, 3),
        ("append_token", 3, 7),
        ("allocate", 4, [8]),
        ("fork", 2, 5),
        ("append_token", 5, 9),
        ("append_token", 2, 9),
        ("append_token", 3, 8),
        ("allocate", 6, [1, 2, 3, 4]),
        ("allocate", 7, [1, 2, 3, 4, 5]),
        ("allocate", 7, [1, 2]),
        ("allocate", 8, []),
        ("allocate", 1, [1, 2]),
        ("fork", 1, 2),
        ("fork", 99, 2),
        ("fork", 99, 100),
        ("append_token", 99, 1),
        ("free", 99),
        ("free", 5),
        ("append_token", 2, 9),
        ("append_token", 6, 1),
    )), about="rules 6 and 7, a refused call changes nothing")


# -- what a reader hands out ------------------------------------------------------------------------

def test_block_table_returns_a_new_list(ns, reference, feedback):
    """block_table() returns a list of its own: a caller who appends to it (or sorts it) changes
    nothing in the manager, and a tuple or another sequence is not a list."""
    check_new_lists(ns, reference, feedback, Scenario(8, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("allocate", 2, [1, 2, 4]),
        ("fork", 1, 3),
        ("append_token", 3, 5),
    )), "block_table")


def test_block_tokens_returns_a_new_list(ns, reference, feedback):
    """block_tokens() returns a list of its own, for a block held once, a shared one, a copy and a free
    block: a caller who appends to it (or sorts it) changes nothing in the manager."""
    check_new_lists(ns, reference, feedback, Scenario(6, 2, (
        ("allocate", 1, [3, 2, 1]),
        ("allocate", 2, [3, 2, 9]),
        ("fork", 1, 3),
        ("append_token", 3, 5),
        ("allocate", 4, [7]),
        ("free", 4),
    )), "block_tokens")


def test_block_table_of_an_unknown_sequence_raises_key_error(ns):
    """block_table() of a sequence never made, or of one freed, raises KeyError (rule 7), as every
    method that takes a seq_id does; it does not return an empty table."""
    m = ns["BlockManager"](4, 2)
    m.allocate(1, [1, 2, 3])
    m.free(1)
    for seq, what in ((1, "freed"), (5, "never allocated")):
        try:
            table = m.block_table(seq)
        except KeyError:
            continue
        pytest.fail(f"block_table({seq}) of a sequence {what} should raise KeyError (rule 7), yours returns "
                    f"{table!r}.\nReplay it:\nm = BlockManager(num_blocks=4, block_size=2)\nm.allocate(1, [1, 2, 3])"
                    f"\nm.free(1)\nm.block_table({seq})", pytrace=False)


# -- the statement's answers to what the rules leave open -------------------------------------------

def test_a_prompt_block_stays_shared_after_its_first_owner_is_freed(ns, reference, feedback):
    """A full prompt block is known for sharing as long as any sequence holds it, not only while the
    sequence that made it lives."""
    check(ns, reference, feedback, Scenario(6, 2, (
        ("allocate", 1, [1, 2, 3, 4, 5]),
        ("allocate", 2, [1, 2, 3, 4, 6]),
        ("free", 1),
        ("allocate", 3, [1, 2, 3, 4, 7]),
        ("free", 2),
        ("free", 3),
        ("allocate", 4, [1, 2, 3, 4]),
    )), about="rule 2, a shared block outlives its first owner")


def test_appending_to_a_full_shared_block_takes_a_new_block_without_copying(ns, reference, feedback):
    """When the last block is full, the token goes into a new block appended to the table, whether the
    full block is shared (by a fork or by an equal prompt) or not: nothing is copied."""
    check(ns, reference, feedback, Scenario(8, 2, (
        ("allocate", 1, [1, 2, 3, 4]),
        ("fork", 1, 2),
        ("append_token", 2, 5),
        ("append_token", 1, 6),
        ("allocate", 3, [1, 2, 3, 4]),
        ("append_token", 3, 7),
        ("append_token", 3, 8),
    )), about="rule 3, growth of a full shared block")


def test_a_prompt_takes_the_lowest_free_blocks_in_prompt_order(ns, reference, feedback):
    """The new blocks of a prompt are taken in prompt order, each the lowest free id at that moment,
    wherever the free ids are; shared blocks keep their place in the table."""
    check(ns, reference, feedback, Scenario(9, 2, (
        ("allocate", 1, [1]), ("allocate", 2, [2]), ("allocate", 3, [3]), ("allocate", 4, [4]),
        ("allocate", 5, [5, 6]),
        ("free", 4), ("free", 2),
        ("allocate", 6, [5, 6, 7, 8, 9, 9, 1]),
        ("free", 1),
        ("allocate", 7, [5, 6, 7, 8, 1, 1]),
    )), about="rule 1, which block")


def test_a_block_made_by_copy_on_write_is_never_shared(ns, reference, feedback):
    """A copy made by append_token is not a prompt block: even full, a later prompt with the same
    tokens does not share it (nor a block append_token filled), but the prompt's own full blocks are."""
    check(ns, reference, feedback, Scenario(8, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("fork", 1, 2),
        ("append_token", 2, 4),
        ("allocate", 3, [1, 2, 3, 4]),
        ("append_token", 1, 4),
        ("allocate", 4, [1, 2, 3, 4, 5]),
    )), about="rule 2, only allocate's full blocks are shared")


def test_sharing_stops_at_the_first_block_that_differs(ns, reference, feedback):
    """Sharing is always the first blocks of a prompt, up to the first that differs: equal blocks after
    it, or the same tokens at another place, are new blocks."""
    check(ns, reference, feedback, Scenario(12, 2, (
        ("allocate", 1, [1, 2, 3, 4, 5, 6]),
        ("allocate", 2, [1, 2, 9, 9, 5, 6]),
        ("allocate", 3, [3, 4, 1, 2, 5, 6]),
        ("allocate", 4, [1, 2, 3, 4, 9, 9, 5, 6]),
    )), about="rule 2, prefix sharing")


def test_a_table_never_holds_the_same_block_twice(ns, reference, feedback):
    """A prompt that repeats itself gets a block for each of its blocks: equal tokens at different
    places are different blocks."""
    check(ns, reference, feedback, Scenario(8, 2, (
        ("allocate", 1, [7, 7, 7, 7, 7, 7]),
        ("allocate", 2, [7, 7, 7, 7, 7]),
        ("append_token", 2, 7),
        ("allocate", 3, [7, 7, 7, 7, 7, 7, 7, 7]),
    )), about="rule 2, prefix sharing")


def test_sequence_ids_come_in_any_order_and_again_after_free(ns, reference, feedback):
    """Sequence ids are any ints: 0, large ones, not increasing, and an id again once its sequence was
    freed (a new sequence, with nothing of the old one)."""
    check(ns, reference, feedback, Scenario(6, 2, (
        ("allocate", 0, [1, 2, 3]),
        ("allocate", 1000000, [1, 2]),
        ("allocate", 7, [4]),
        ("free", 0),
        ("allocate", 0, [5, 5]),
        ("fork", 7, 3),
        ("free", 1000000),
        ("fork", 0, 1000000),
        ("free", 7),
        ("append_token", 3, 6),
        ("allocate", 7, [1, 2, 3]),
    )), about="sequence ids")


def test_blocks_of_one_token(ns, reference, feedback):
    """With block_size 1 every block is full: every prompt block can be shared, and every token
    appended takes a new block (never a copy)."""
    check(ns, reference, feedback, Scenario(5, 1, (
        ("allocate", 1, [0, 2, 3]),
        ("allocate", 2, [0, 2, 4]),
        ("fork", 1, 3),
        ("append_token", 3, 5),
        ("append_token", 1, 0),
        ("free", 2),
        ("append_token", 1, 0),
        ("allocate", 4, [0]),
    )), about="blocks of one token")


def test_a_cache_of_one_block(ns, reference, feedback):
    """With one block: a prompt longer than a block never fits, a fork's first write finds no block to
    copy into, and a block filled by append_token is not shared."""
    check(ns, reference, feedback, Scenario(1, 3, (
        ("allocate", 1, [1, 2, 0, 4]),
        ("allocate", 1, [1, 0]),
        ("fork", 1, 2),
        ("append_token", 2, 3),
        ("append_token", 1, 3),
        ("free", 2),
        ("append_token", 1, 3),
        ("append_token", 1, 4),
        ("allocate", 3, [1, 0, 3]),
        ("free", 1),
        ("allocate", 3, [1, 0, 3]),
        ("allocate", 4, [1, 0, 3]),
    )), about="a cache of one block")


def test_two_managers_share_no_block_and_no_prompt(ns, reference, feedback):
    """Each BlockManager is a cache of its own: a prompt block known in one is unknown in another."""
    first = Scenario(4, 2, (("allocate", 1, [1, 2, 3]), ("fork", 1, 2)))
    check(ns, reference, feedback, first, about="a first manager")
    check(ns, reference, feedback, Scenario(4, 2, (("allocate", 1, [1, 2, 3]), ("allocate", 2, [1, 2]))),
          about="a second manager, made after the first")


# -- refused calls, and the ids they named used next ------------------------------------------------

def test_out_of_blocks_is_the_stubs_out_of_blocks_not_any_runtime_error(ns, reference, feedback):
    """A prompt, a new block and a copy on write that find no free block raise the stub's OutOfBlocks (or a
    subclass of it): a plain RuntimeError is not OutOfBlocks."""
    check(ns, reference, feedback, Scenario(2, 2, (
        ("allocate", 1, [1, 2, 3, 4, 5]),
        ("allocate", 1, [1, 2, 3]),
        ("fork", 1, 2),
        ("append_token", 2, 4),
        ("free", 2),
        ("append_token", 1, 4),
        ("append_token", 1, 5),
        ("allocate", 3, [1, 2]),
    )), about="rule 6 and \"Out of blocks\": the exception raised")


def test_calls_after_a_refused_call_with_the_same_ids_go_on_as_if_it_never_happened(ns, reference, feedback):
    """After each kind of refused call (OutOfBlocks for a prompt, a new block and a copy; ValueError;
    KeyError), calls with the same ids work as if it had never been made: no prefix, block, token or
    sequence of the refused call is left to share, hold or grow."""
    check(ns, reference, feedback, Scenario(4, 2, (
        ("allocate", 1, [1, 2, 3]),
        ("allocate", 2, [1, 2, 5, 6, 7, 8, 9]),
        ("allocate", 2, [1, 2, 5, 6, 7]),
        ("append_token", 2, 8),
        ("fork", 9, 2),
        ("fork", 2, 1),
        ("allocate", 1, [5, 6]),
        ("append_token", 1, 4),
        ("append_token", 1, 5),
        ("free", 2),
        ("append_token", 1, 5),
        ("fork", 1, 2),
        ("append_token", 2, 6),
        ("append_token", 2, 7),
        ("allocate", 9, [1, 2, 3, 4, 5, 6]),
        ("fork", 1, 9),
        ("append_token", 9, 1),
    )), about="rules 6 and 7: a refused call changes nothing, for the ids it named too")


def test_an_id_used_again_after_free_is_a_new_sequence_that_grows_from_its_own_prompt(ns, reference, feedback):
    """A sequence freed after growing over several blocks, then an id used again with a shorter prompt:
    the new sequence grows from its own prompt (a new block only when its own last block is full), and
    nothing of the old one (its length, its blocks, its last block) counts."""
    check(ns, reference, feedback, Scenario(6, 2, (
        ("allocate", 5, [1, 2, 3]),
        ("append_token", 5, 4),
        ("append_token", 5, 5),
        ("append_token", 5, 6),
        ("fork", 5, 6),
        ("free", 5),
        ("allocate", 5, [7]),
        ("append_token", 5, 8),
        ("append_token", 5, 9),
        ("free", 6),
        ("fork", 5, 6),
        ("append_token", 6, 1),
        ("append_token", 5, 2),
        ("free", 5),
        ("allocate", 5, [1, 2, 3, 4, 5]),
        ("append_token", 5, 6),
    )), about="sequence ids: an id again once its sequence is freed")
