"""allocate works out how many blocks the prompt needs first, and only then checks that the id is new.

An OrderedDict of tables, a dict of reference counts, a heap of free ids.
"""

import heapq
from collections import OrderedDict


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.pool = list(range(num_blocks))
        self.refs = {}
        self.data = {}
        self.tables = OrderedDict()
        self.known = {}

    def num_free_blocks(self):
        return len(self.pool)

    def block_table(self, seq_id):
        return list(self.tables[seq_id])

    def ref_count(self, block_id):
        return self.refs.get(block_id, 0)

    def block_tokens(self, block_id):
        return list(self.data.get(block_id, []))

    def _alloc_block(self, tokens):
        b = heapq.heappop(self.pool)
        self.refs[b] = 1
        self.data[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if not prompt:
            raise ValueError("empty prompt")
        bs = self.block_size
        layout = []
        for s in range(0, len(prompt), bs):
            chunk = prompt[s:s + bs]
            key = tuple(prompt[:s + bs]) if len(chunk) == bs else None
            layout.append((chunk, key, self.known.get(key) if key is not None else None))
        needed = sum(1 for _, _, hit in layout if hit is None)
        if needed > len(self.pool):
            raise OutOfBlocks(f"need {needed} blocks")
        if seq_id in self.tables:
            raise ValueError("sequence exists")
        table = []
        for chunk, key, hit in layout:
            if hit is None:
                hit = self._alloc_block(chunk)
                if key is not None:
                    self.known[key] = hit
            else:
                self.refs[hit] += 1
            table.append(hit)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        table = self.tables[seq_id]
        last = table[-1]
        if len(self.data[last]) == self.block_size:
            if not self.pool:
                raise OutOfBlocks("full")
            table.append(self._alloc_block([token]))
        elif self.refs[last] > 1:
            if not self.pool:
                raise OutOfBlocks("full")
            table[-1] = self._alloc_block(self.data[last] + [token])
            self.refs[last] -= 1
        else:
            self.data[last].append(token)

    def fork(self, parent_id, child_id):
        parent = self.tables[parent_id]
        if child_id in self.tables:
            raise ValueError("child exists")
        for b in parent:
            self.refs[b] += 1
        self.tables[child_id] = list(parent)

    def free(self, seq_id):
        for b in self.tables.pop(seq_id):
            self.refs[b] -= 1
            if self.refs[b] == 0:
                del self.refs[b]
                del self.data[b]
                self.known = {k: v for k, v in self.known.items() if v != b}
                heapq.heappush(self.pool, b)
