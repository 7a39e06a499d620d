"""block_table gives back the list I keep for the sequence, it's already a list so I didn't copy it.

Dicts of lists and a heap of free ids.
"""

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_heap = list(range(num_blocks))
        self.refcount = [0] * num_blocks
        self.contents = [[] for _ in range(num_blocks)]
        self.tables = {}
        self.cache = {}  # prefix tuple -> block id
        self.cache_key = {}  # block id -> prefix tuple

    def num_free_blocks(self):
        return len(self.free_heap)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return self.tables[seq_id]

    def ref_count(self, block_id):
        return self.refcount[block_id]

    def block_tokens(self, block_id):
        return list(self.contents[block_id])

    def _take(self, tokens):
        block = heapq.heappop(self.free_heap)
        self.refcount[block] = 1
        self.contents[block] = list(tokens)
        return block

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("already allocated")
        if not prompt:
            raise ValueError("empty prompt")
        size = self.block_size
        pieces = []
        for start in range(0, len(prompt), size):
            chunk = prompt[start:start + size]
            key = tuple(prompt[:start + size]) if len(chunk) == size else None
            pieces.append((chunk, key, self.cache.get(key)))
        new_needed = len([p for p in pieces if p[2] is None])
        if new_needed > len(self.free_heap):
            raise OutOfBlocks("not enough blocks")
        table = []
        for chunk, key, block in pieces:
            if block is None:
                block = self._take(chunk)
                if key is not None:
                    self.cache[key] = block
                    self.cache_key[block] = key
            else:
                self.refcount[block] += 1
            table.append(block)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        table = self.tables[seq_id]
        last = table[-1]
        if len(self.contents[last]) == self.block_size:
            if not self.free_heap:
                raise OutOfBlocks("no free block")
            table.append(self._take([token]))
        elif self.refcount[last] > 1:
            if not self.free_heap:
                raise OutOfBlocks("no free block to copy into")
            table[-1] = self._take(self.contents[last] + [token])
            self.refcount[last] -= 1
        else:
            self.contents[last].append(token)

    def fork(self, parent_id, child_id):
        if parent_id not in self.tables:
            raise KeyError(parent_id)
        if child_id in self.tables:
            raise ValueError("child exists")
        self.tables[child_id] = list(self.tables[parent_id])
        for block in self.tables[child_id]:
            self.refcount[block] += 1

    def free(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        for block in self.tables.pop(seq_id):
            self.refcount[block] -= 1
            if self.refcount[block] == 0:
                self.contents[block] = []
                if block in self.cache_key:
                    del self.cache[self.cache_key.pop(block)]
                heapq.heappush(self.free_heap, block)
