"""allocate puts the new sequence in my table dict first and then raises OutOfBlocks if it doesn't fit.

A dict of tables filled as the prompt is read, a heap of free ids.
"""

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_ids = list(range(num_blocks))
        self.refs = [0] * num_blocks
        self.tokens = [[] for _ in range(num_blocks)]
        self.seq_blocks = {}
        self.prefix_cache = {}
        self.prefix_of_block = {}

    def num_free_blocks(self):
        return len(self.free_ids)

    def block_table(self, seq_id):
        if seq_id not in self.seq_blocks:
            raise KeyError(seq_id)
        return list(self.seq_blocks[seq_id])

    def ref_count(self, block_id):
        return self.refs[block_id]

    def block_tokens(self, block_id):
        return list(self.tokens[block_id])

    def _take(self, toks):
        b = heapq.heappop(self.free_ids)
        self.refs[b] = 1
        self.tokens[b] = list(toks)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.seq_blocks:
            raise ValueError("seq_id in use")
        if not prompt:
            raise ValueError("empty prompt")
        table = self.seq_blocks[seq_id] = []
        bs = self.block_size
        starts = list(range(0, len(prompt), bs))
        hits = [self.prefix_cache.get(tuple(prompt[:s + bs])) if s + bs <= len(prompt) else None for s in starts]
        if hits.count(None) > len(self.free_ids):
            raise OutOfBlocks("cache is full")
        for s, hit in zip(starts, hits):
            if hit is not None:
                self.refs[hit] += 1
                table.append(hit)
            else:
                b = self._take(prompt[s:s + bs])
                if s + bs <= len(prompt):
                    self.prefix_cache[tuple(prompt[:s + bs])] = b
                    self.prefix_of_block[b] = tuple(prompt[:s + bs])
                table.append(b)

    def append_token(self, seq_id, token):
        if seq_id not in self.seq_blocks:
            raise KeyError(seq_id)
        table = self.seq_blocks[seq_id]
        last = table[-1]
        if len(self.tokens[last]) == self.block_size:
            if not self.free_ids:
                raise OutOfBlocks("cache is full")
            table.append(self._take([token]))
        elif self.refs[last] > 1:
            if not self.free_ids:
                raise OutOfBlocks("cache is full")
            table[-1] = self._take(self.tokens[last] + [token])
            self.refs[last] -= 1
        else:
            self.tokens[last].append(token)

    def fork(self, parent_id, child_id):
        if parent_id not in self.seq_blocks:
            raise KeyError(parent_id)
        if child_id in self.seq_blocks:
            raise ValueError(child_id)
        self.seq_blocks[child_id] = list(self.seq_blocks[parent_id])
        for b in self.seq_blocks[parent_id]:
            self.refs[b] += 1

    def free(self, seq_id):
        if seq_id not in self.seq_blocks:
            raise KeyError(seq_id)
        for b in self.seq_blocks.pop(seq_id):
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.tokens[b] = []
                if b in self.prefix_of_block:
                    del self.prefix_cache[self.prefix_of_block.pop(b)]
                heapq.heappush(self.free_ids, b)
