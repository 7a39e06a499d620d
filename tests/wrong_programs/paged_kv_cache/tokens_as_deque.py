"""My blocks hold their tokens in deques, so block_tokens hands back a copy of the deque.

Deques for tokens, a dict of tables, a heap of free ids.
"""

import heapq
from collections import deque


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.heap = list(range(num_blocks))
        self.rc = {}
        self.store = {}
        self.seqs = {}
        self.lookup = {}

    def num_free_blocks(self):
        return len(self.heap)

    def block_table(self, seq_id):
        return list(self.seqs[seq_id])

    def ref_count(self, block_id):
        return self.rc.get(block_id, 0)

    def block_tokens(self, block_id):
        return deque(self.store.get(block_id, ()))

    def _fresh(self, tokens):
        b = heapq.heappop(self.heap)
        self.rc[b] = 1
        self.store[b] = deque(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.seqs:
            raise ValueError("seq exists")
        if not prompt:
            raise ValueError("empty prompt")
        bs = self.block_size
        plan = []
        for start in range(0, len(prompt), bs):
            part = prompt[start:start + bs]
            key = tuple(prompt[:start + bs]) if len(part) == bs else None
            plan.append((part, key, self.lookup.get(key) if key else None))
        if sum(1 for p in plan if p[2] is None) > len(self.heap):
            raise OutOfBlocks("no room")
        table = []
        for part, key, hit in plan:
            if hit is not None:
                self.rc[hit] += 1
                table.append(hit)
            else:
                b = self._fresh(part)
                if key:
                    self.lookup[key] = b
                table.append(b)
        self.seqs[seq_id] = table

    def append_token(self, seq_id, token):
        table = self.seqs[seq_id]
        last = table[-1]
        if len(self.store[last]) == self.block_size:
            if not self.heap:
                raise OutOfBlocks("no room")
            table.append(self._fresh([token]))
        elif self.rc[last] > 1:
            if not self.heap:
                raise OutOfBlocks("no room")
            table[-1] = self._fresh(list(self.store[last]) + [token])
            self.rc[last] -= 1
        else:
            self.store[last].append(token)

    def fork(self, parent_id, child_id):
        table = self.seqs[parent_id]
        if child_id in self.seqs:
            raise ValueError("child exists")
        for b in table:
            self.rc[b] += 1
        self.seqs[child_id] = list(table)

    def free(self, seq_id):
        table = self.seqs.pop(seq_id)
        for b in table:
            self.rc[b] -= 1
            if self.rc[b] == 0:
                del self.rc[b]
                del self.store[b]
                self.lookup = {k: v for k, v in self.lookup.items() if v != b}
                heapq.heappush(self.heap, b)
