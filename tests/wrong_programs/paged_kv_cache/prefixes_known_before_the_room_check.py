"""allocate() picks the blocks prompt block by prompt block, making each full one known as it goes, and raises OutOfBlocks when it finds no free block left.
"""

from __future__ import annotations

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free = list(range(num_blocks))  # a min-heap: the lowest free id is handed out first
        self._refs = [0] * num_blocks
        self._tokens: list[list[int]] = [[] for _ in range(num_blocks)]
        self._tables: dict[int, list[int]] = {}
        self._by_prefix: dict[tuple[int, ...], int] = {}  # the tokens up to a full block's end -> that block
        self._prefix_of: dict[int, tuple[int, ...]] = {}

    # -- what a scheduler reads ---------------------------------------------------------------------

    def num_free_blocks(self) -> int:
        return len(self._free)

    def block_table(self, seq_id: int) -> list[int]:
        return list(self._table(seq_id))

    def ref_count(self, block_id: int) -> int:
        return self._refs[block_id]

    def block_tokens(self, block_id: int) -> list[int]:
        return list(self._tokens[block_id])

    # -- what changes the cache ---------------------------------------------------------------------

    def allocate(self, seq_id: int, prompt: list[int]) -> None:
        if seq_id in self._tables:
            raise ValueError(f"sequence {seq_id} already has blocks")
        prompt = list(prompt)
        if not prompt:
            raise ValueError("a prompt needs at least one token")
        size = self.block_size
        free = sorted(self._free)
        table: list[int] = []
        new: list[tuple[int, list[int]]] = []
        for start in range(0, len(prompt), size):
            chunk = prompt[start:start + size]
            prefix = tuple(prompt[:start + size]) if len(chunk) == size else None
            if prefix is not None and prefix in self._by_prefix:
                table.append(self._by_prefix[prefix])
                continue
            if not free:
                raise OutOfBlocks(f"sequence {seq_id} needs more blocks than are free")
            block = free.pop(0)
            if prefix is not None:
                self._by_prefix[prefix], self._prefix_of[block] = block, prefix
            new.append((block, chunk))
            table.append(block)
        taken = {block for block, _ in new}
        for block in table:
            if block not in taken:
                self._refs[block] += 1
        self._free = [b for b in self._free if b not in taken]
        heapq.heapify(self._free)
        for block, chunk in new:
            self._refs[block] = 1
            self._tokens[block] = list(chunk)
        self._tables[seq_id] = table

    def append_token(self, seq_id: int, token: int) -> None:
        table = self._table(seq_id)
        last = table[-1]
        if len(self._tokens[last]) == self.block_size:
            self._need_one(seq_id)
            table.append(self._take([token]))
        elif self._refs[last] > 1:  # shared with a fork: copy before writing
            self._need_one(seq_id)
            table[-1] = self._take(self._tokens[last] + [token])
            self._refs[last] -= 1
        else:
            self._tokens[last].append(token)

    def fork(self, parent_id: int, child_id: int) -> None:
        table = self._table(parent_id)
        if child_id in self._tables:
            raise ValueError(f"sequence {child_id} already has blocks")
        for block in table:
            self._refs[block] += 1
        self._tables[child_id] = list(table)

    def free(self, seq_id: int) -> None:
        for block in self._table(seq_id):
            self._refs[block] -= 1
            if self._refs[block] == 0:
                self._tokens[block] = []
                prefix = self._prefix_of.pop(block, None)
                if prefix is not None:
                    del self._by_prefix[prefix]
                heapq.heappush(self._free, block)
        del self._tables[seq_id]

    # -- helpers ------------------------------------------------------------------------------------

    def _table(self, seq_id: int) -> list[int]:
        if seq_id not in self._tables:
            raise KeyError(f"no sequence {seq_id}")
        return self._tables[seq_id]

    def _need_one(self, seq_id: int) -> None:
        if not self._free:
            raise OutOfBlocks(f"sequence {seq_id} needs a new block and none is free")

    def _take(self, tokens: list[int]) -> int:
        block = heapq.heappop(self._free)
        self._refs[block] = 1
        self._tokens[block] = list(tokens)
        return block
