"""Before writing I copy the last block whenever it is shared, and then start a new block if the copy is full.

Copy-on-write first, growth second; dicts and a heap.
"""

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_heap = list(range(num_blocks))
        self.rc = [0] * num_blocks
        self.toks = [[] for _ in range(num_blocks)]
        self.tables = {}
        self.hash_to_block = {}
        self.block_to_hash = {}

    def num_free_blocks(self):
        return len(self.free_heap)

    def block_table(self, seq_id):
        return list(self._table(seq_id))

    def ref_count(self, block_id):
        return self.rc[block_id]

    def block_tokens(self, block_id):
        return list(self.toks[block_id])

    def _table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return self.tables[seq_id]

    def _take(self, tokens):
        b = heapq.heappop(self.free_heap)
        self.rc[b] = 1
        self.toks[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty")
        n = self.block_size
        plan = []
        for i in range(0, len(prompt), n):
            key = tuple(prompt[:i + n]) if i + n <= len(prompt) else None
            plan.append((prompt[i:i + n], key, self.hash_to_block.get(key) if key else None))
        if sum(1 for p in plan if p[2] is None) > len(self.free_heap):
            raise OutOfBlocks("out of blocks")
        table = []
        for chunk, key, hit in plan:
            if hit is None:
                hit = self._take(chunk)
                if key:
                    self.hash_to_block[key] = hit
                    self.block_to_hash[hit] = key
            else:
                self.rc[hit] += 1
            table.append(hit)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        table = self._table(seq_id)
        last = table[-1]
        shared = self.rc[last] > 1
        full = len(self.toks[last]) == self.block_size
        if int(shared) + int(full) > len(self.free_heap):
            raise OutOfBlocks("out of blocks")
        if shared:
            copy = self._take(self.toks[last])
            self.rc[last] -= 1
            table[-1] = copy
            last = copy
        if full:
            table.append(self._take([token]))
        else:
            self.toks[last].append(token)

    def fork(self, parent_id, child_id):
        table = self._table(parent_id)
        if child_id in self.tables:
            raise ValueError("child exists")
        for b in table:
            self.rc[b] += 1
        self.tables[child_id] = list(table)

    def free(self, seq_id):
        for b in self._table(seq_id):
            self.rc[b] -= 1
            if self.rc[b] == 0:
                self.toks[b] = []
                key = self.block_to_hash.pop(b, None)
                if key:
                    del self.hash_to_block[key]
                heapq.heappush(self.free_heap, b)
        del self.tables[seq_id]
