"""Never looks up known prefixes: every prompt gets fresh blocks.

A wrong program written apart from the mutants, to measure the misconception diagnosis
(grader/diagnosis) on: tests/test_diagnosis_programs.py.
"""

from __future__ import annotations


class OutOfBlocks(RuntimeError):
    pass


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_ids = set(range(num_blocks))
        self.refs = {b: 0 for b in range(num_blocks)}
        self.contents = {b: [] for b in range(num_blocks)}
        self.tables = {}
        self.known = {}  # prefix tuple -> block
        self.key_of = {}  # block -> prefix tuple

    def num_free_blocks(self) -> int:
        return len(self.free_ids)

    def _get(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return self.tables[seq_id]

    def block_table(self, seq_id: int) -> list[int]:
        return list(self._get(seq_id))

    def ref_count(self, block_id: int) -> int:
        return self.refs[block_id]

    def block_tokens(self, block_id: int) -> list[int]:
        return list(self.contents[block_id])

    def _new_block(self, tokens):
        b = min(self.free_ids)
        self.free_ids.discard(b)
        self.refs[b] = 1
        self.contents[b] = list(tokens)
        return b

    def allocate(self, seq_id: int, prompt: list[int]) -> None:
        if seq_id in self.tables:
            raise ValueError("sequence exists")
        if len(prompt) == 0:
            raise ValueError("empty prompt")
        n = self.block_size
        plan = []
        i = 0
        while i < len(prompt):
            piece = list(prompt[i:i + n])
            key = tuple(prompt[:i + n]) if len(piece) == n else None
            plan.append((key, piece))
            i += n
        fresh = 0
        for key, piece in plan:
            if True:
                fresh += 1
        if fresh > len(self.free_ids):
            raise OutOfBlocks("not enough free blocks")
        table = []
        for key, piece in plan:
            if False:
                b = 0
                self.refs[b] += 1
            else:
                b = self._new_block(piece)
                if key is not None:
                    self.known[key] = b
                    self.key_of[b] = key
            table.append(b)
        self.tables[seq_id] = table

    def append_token(self, seq_id: int, token: int) -> None:
        table = self._get(seq_id)
        last = table[-1]
        if len(self.contents[last]) >= self.block_size:
            if not self.free_ids:
                raise OutOfBlocks("no free block")
            table.append(self._new_block([token]))
            return
        if self.refs[last] > 1:
            if not self.free_ids:
                raise OutOfBlocks("no free block")
            b = self._new_block(self.contents[last] + [token])
            self.refs[last] -= 1
            table[-1] = b
            return
        self.contents[last].append(token)

    def fork(self, parent_id: int, child_id: int) -> None:
        parent = self._get(parent_id)
        if child_id in self.tables:
            raise ValueError("child exists")
        for b in parent:
            self.refs[b] += 1
        self.tables[child_id] = parent[:]

    def free(self, seq_id: int) -> None:
        table = self._get(seq_id)
        del self.tables[seq_id]
        for b in table:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.contents[b] = []
                key = self.key_of.pop(b, None)
                if key is not None:
                    del self.known[key]
                self.free_ids.add(b)
