"""The visible suite: the statement's basic cases, run for everyone."""

import pytest


def tables(m, *seqs):
    return {s: list(m.block_table(s)) for s in seqs}


def test_a_prompt_takes_the_lowest_blocks(ns):
    """A 10-token prompt in blocks of 4 takes blocks 0, 1 and 2, the last one partial."""
    m = ns["BlockManager"](8, 4)
    m.allocate(1, list(range(10, 20)))
    assert tables(m, 1) == {1: [0, 1, 2]}, f"expected block table [0, 1, 2], got {tables(m, 1)[1]}"
    assert list(m.block_tokens(2)) == [18, 19], f"block 2 should hold [18, 19], got {m.block_tokens(2)}"
    assert m.num_free_blocks() == 5, f"3 of 8 blocks are taken: 5 are free, not {m.num_free_blocks()}"


def test_a_sequence_gets_a_new_block_only_when_its_last_is_full(ns):
    """Appending to a partial block fills it; the next token starts a new block."""
    m = ns["BlockManager"](8, 4)
    m.allocate(1, [1, 2, 3])
    m.append_token(1, 4)
    assert tables(m, 1) == {1: [0]}, f"block 0 had room for the 4th token, yet the table is {tables(m, 1)[1]}"
    m.append_token(1, 5)
    assert tables(m, 1) == {1: [0, 1]}, f"block 0 was full: the 5th token goes to block 1, got {tables(m, 1)[1]}"
    assert list(m.block_tokens(1)) == [5], f"block 1 should hold [5], got {m.block_tokens(1)}"


def test_free_returns_the_blocks(ns):
    """A finished sequence's blocks are free again, and the lowest is handed out next."""
    m = ns["BlockManager"](4, 2)
    m.allocate(1, [1, 2, 3])
    m.allocate(2, [4])
    m.free(1)
    assert m.num_free_blocks() == 3, f"after free(1), 3 of 4 blocks are free, not {m.num_free_blocks()}"
    assert m.ref_count(0) == 0 and list(m.block_tokens(0)) == [], "a free block has ref_count 0 and no tokens"
    m.allocate(3, [5])
    assert tables(m, 3) == {3: [0]}, f"block 0 is the lowest free block, but the table is {tables(m, 3)[3]}"


def test_the_statement_example(ns):
    """The example of the statement: a shared prefix, a fork and a copy on write."""
    m = ns["BlockManager"](8, 4)
    m.allocate(1, [1, 2, 3, 4, 5, 6])
    m.allocate(2, [1, 2, 3, 4, 9])
    assert tables(m, 1, 2) == {1: [0, 1], 2: [0, 2]}, f"the first full block is shared: got {tables(m, 1, 2)}"
    assert m.ref_count(0) == 2, f"two sequences hold block 0, but its ref_count is {m.ref_count(0)}"
    m.fork(1, 3)
    m.append_token(3, 7)
    assert tables(m, 1, 3) == {1: [0, 1], 3: [0, 3]}, f"the shared block 1 is copied to block 3: got {tables(m, 1, 3)}"
    assert list(m.block_tokens(3)) == [5, 6, 7], f"the copy holds [5, 6, 7], got {m.block_tokens(3)}"
    assert (m.ref_count(1), m.num_free_blocks()) == (1, 4), \
        f"expected ref_count(1) == 1 and 4 free blocks, got {m.ref_count(1)} and {m.num_free_blocks()}"


def test_out_of_blocks_is_an_error(ns):
    """A prompt that needs more blocks than are free raises OutOfBlocks, a RuntimeError."""
    m = ns["BlockManager"](2, 4)
    m.allocate(1, [1, 2, 3, 4, 5])
    assert m.num_free_blocks() == 0, f"both blocks are taken, but num_free_blocks() says {m.num_free_blocks()}"
    with pytest.raises(RuntimeError):
        m.allocate(2, [6])
