"""Premium suite: each rule of the statement in the smallest scenario that shows it, checked after
every call against the reference."""

import os
import sys

HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # the helper module sits next to this file
from _kv_helpers import Scenario, check  # noqa: E402


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
