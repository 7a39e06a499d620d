"""For copy-on-write I gave the new block the old block's token list and then appended the token to it.

The copy is `tokens[new] = tokens[old]` (the same list object); dicts and a heap.
"""

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.heap = list(range(num_blocks))
        self.refs = {b: 0 for b in range(num_blocks)}
        self.tokens = {b: [] for b in range(num_blocks)}
        self.tables = {}
        self.known = {}

    def num_free_blocks(self):
        return len(self.heap)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return list(self.tables[seq_id])

    def ref_count(self, block_id):
        return self.refs[block_id]

    def block_tokens(self, block_id):
        return list(self.tokens[block_id])

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty")
        bs = self.block_size
        items = []
        for i in range(0, len(prompt), bs):
            key = tuple(prompt[:i + bs]) if i + bs <= len(prompt) else None
            items.append((prompt[i:i + bs], key, self.known.get(key) if key else None))
        if sum(1 for it in items if it[2] is None) > len(self.heap):
            raise OutOfBlocks("full")
        table = []
        for chunk, key, hit in items:
            if hit is None:
                hit = heapq.heappop(self.heap)
                self.refs[hit] = 1
                self.tokens[hit] = list(chunk)
                if key:
                    self.known[key] = hit
            else:
                self.refs[hit] += 1
            table.append(hit)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        table = self.tables[seq_id]
        last = table[-1]
        if len(self.tokens[last]) == self.block_size:
            if not self.heap:
                raise OutOfBlocks("full")
            b = heapq.heappop(self.heap)
            self.refs[b] = 1
            self.tokens[b] = [token]
            table.append(b)
        elif self.refs[last] > 1:
            if not self.heap:
                raise OutOfBlocks("full")
            b = heapq.heappop(self.heap)
            self.refs[b] = 1
            self.tokens[b] = self.tokens[last]
            self.tokens[b].append(token)
            self.refs[last] -= 1
            table[-1] = b
        else:
            self.tokens[last].append(token)

    def fork(self, parent_id, child_id):
        if parent_id not in self.tables:
            raise KeyError(parent_id)
        if child_id in self.tables:
            raise ValueError(child_id)
        self.tables[child_id] = list(self.tables[parent_id])
        for b in self.tables[child_id]:
            self.refs[b] += 1

    def free(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        for b in self.tables.pop(seq_id):
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.tokens[b] = []
                self.known = {k: v for k, v in self.known.items() if v != b}
                heapq.heappush(self.heap, b)
