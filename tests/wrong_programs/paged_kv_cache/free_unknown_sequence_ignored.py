"""free() of a sequence that isn't there just does nothing, freeing twice seemed harmless.

dict.pop with a default; lists by block id; a heap.
"""

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_list = list(range(num_blocks))
        self.ref = [0] * num_blocks
        self.tok = [[] for _ in range(num_blocks)]
        self.table = {}
        self.full_blocks = {}
        self.key_of = {}

    def num_free_blocks(self):
        return len(self.free_list)

    def block_table(self, seq_id):
        if seq_id not in self.table:
            raise KeyError(seq_id)
        return list(self.table[seq_id])

    def ref_count(self, block_id):
        return self.ref[block_id]

    def block_tokens(self, block_id):
        return list(self.tok[block_id])

    def _take(self, tokens):
        b = heapq.heappop(self.free_list)
        self.ref[b] = 1
        self.tok[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.table:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty")
        bs = self.block_size
        steps = []
        for i in range(0, len(prompt), bs):
            key = tuple(prompt[:i + bs]) if i + bs <= len(prompt) else None
            steps.append((prompt[i:i + bs], key, self.full_blocks.get(key) if key else None))
        if sum(1 for s in steps if s[2] is None) > len(self.free_list):
            raise OutOfBlocks("full")
        blocks = []
        for chunk, key, hit in steps:
            if hit is None:
                hit = self._take(chunk)
                if key:
                    self.full_blocks[key] = hit
                    self.key_of[hit] = key
            else:
                self.ref[hit] += 1
            blocks.append(hit)
        self.table[seq_id] = blocks

    def append_token(self, seq_id, token):
        if seq_id not in self.table:
            raise KeyError(seq_id)
        blocks = self.table[seq_id]
        last = blocks[-1]
        if len(self.tok[last]) == self.block_size:
            if not self.free_list:
                raise OutOfBlocks("full")
            blocks.append(self._take([token]))
        elif self.ref[last] > 1:
            if not self.free_list:
                raise OutOfBlocks("full")
            blocks[-1] = self._take(self.tok[last] + [token])
            self.ref[last] -= 1
        else:
            self.tok[last].append(token)

    def fork(self, parent_id, child_id):
        if parent_id not in self.table:
            raise KeyError(parent_id)
        if child_id in self.table:
            raise ValueError(child_id)
        self.table[child_id] = list(self.table[parent_id])
        for b in self.table[child_id]:
            self.ref[b] += 1

    def free(self, seq_id):
        for b in self.table.pop(seq_id, []):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.tok[b] = []
                if b in self.key_of:
                    del self.full_blocks[self.key_of.pop(b)]
                heapq.heappush(self.free_list, b)
