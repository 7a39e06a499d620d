"""Paged KV cache: the block manager of an inference server.

Implement every method of `BlockManager`. `OutOfBlocks` and the start of `__init__` are given; keep
them. The statement, with the exact rules, is in README.md.
"""

from __future__ import annotations


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks  # physical blocks, ids 0 .. num_blocks - 1
        self.block_size = block_size  # tokens per block
        # Your state here: the free blocks, each block's reference count and tokens, each
        # sequence's block table, and the full prompt blocks that can be shared.

    def num_free_blocks(self) -> int:
        """How many blocks no sequence holds."""
        raise NotImplementedError("num_free_blocks")

    def block_table(self, seq_id: int) -> list[int]:
        """The blocks of a sequence, in token order (a new list). KeyError for an unknown sequence."""
        raise NotImplementedError("block_table")

    def ref_count(self, block_id: int) -> int:
        """How many sequences hold this block (0 for a free block)."""
        raise NotImplementedError("ref_count")

    def block_tokens(self, block_id: int) -> list[int]:
        """The tokens stored in this block, in order (a new list; [] for a free block)."""
        raise NotImplementedError("block_tokens")

    def allocate(self, seq_id: int, prompt: list[int]) -> None:
        """Admit a new sequence: give its prompt blocks, sharing the full blocks of a known prefix."""
        raise NotImplementedError("allocate")

    def append_token(self, seq_id: int, token: int) -> None:
        """Store one generated token: a new block when the last is full, a copy when it is shared."""
        raise NotImplementedError("append_token")

    def fork(self, parent_id: int, child_id: int) -> None:
        """Start `child_id` as a copy of `parent_id` that shares all its blocks (parallel sampling)."""
        raise NotImplementedError("fork")

    def free(self, seq_id: int) -> None:
        """The sequence is finished: drop its hold on its blocks; blocks nobody holds become free."""
        raise NotImplementedError("free")
