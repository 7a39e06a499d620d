"""Each block is a fixed array of block_size slots and I use 0 to mean an empty slot.

Fixed-size slot arrays like real GPU memory; a heap of free ids.
"""

import heapq

EMPTY = 0


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.slots = [[EMPTY] * block_size for _ in range(num_blocks)]
        self.refs = [0] * num_blocks
        self.heap = list(range(num_blocks))
        self.tables = {}
        self.prefix_blocks = {}
        self.block_prefix = {}

    def _used(self, b):
        return [t for t in self.slots[b] if t != EMPTY]

    def num_free_blocks(self):
        return len(self.heap)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return list(self.tables[seq_id])

    def ref_count(self, block_id):
        return self.refs[block_id]

    def block_tokens(self, block_id):
        return self._used(block_id)

    def _take(self, tokens):
        b = heapq.heappop(self.heap)
        self.refs[b] = 1
        self.slots[b] = list(tokens) + [EMPTY] * (self.block_size - len(tokens))
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty prompt")
        bs = self.block_size
        wanted = []
        for i in range(0, len(prompt), bs):
            key = tuple(prompt[:i + bs]) if i + bs <= len(prompt) else None
            wanted.append((prompt[i:i + bs], key, self.prefix_blocks.get(key) if key else None))
        if sum(1 for w in wanted if w[2] is None) > len(self.heap):
            raise OutOfBlocks("full")
        table = []
        for chunk, key, hit in wanted:
            if hit is None:
                hit = self._take(chunk)
                if key:
                    self.prefix_blocks[key] = hit
                    self.block_prefix[hit] = key
            else:
                self.refs[hit] += 1
            table.append(hit)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        table = self.tables[seq_id]
        last = table[-1]
        used = self._used(last)
        if len(used) == self.block_size:
            if not self.heap:
                raise OutOfBlocks("full")
            table.append(self._take([token]))
        elif self.refs[last] > 1:
            if not self.heap:
                raise OutOfBlocks("full")
            table[-1] = self._take(used + [token])
            self.refs[last] -= 1
        else:
            self.slots[last][len(used)] = token

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
                self.slots[b] = [EMPTY] * self.block_size
                key = self.block_prefix.pop(b, None)
                if key:
                    del self.prefix_blocks[key]
                heapq.heappush(self.heap, b)
