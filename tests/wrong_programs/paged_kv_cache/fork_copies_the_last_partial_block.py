"""fork copies the parent's last block when it is not full, so that the two samples can write without sharing.

Eager copy at fork time instead of copy-on-write; a class per sequence.
"""

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class Sequence:
    def __init__(self, blocks):
        self.blocks = blocks


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.pool = list(range(num_blocks))
        self.refs = [0] * num_blocks
        self.content = [[] for _ in range(num_blocks)]
        self.seqs = {}
        self.prefix_table = {}
        self.prefix_of = {}

    def num_free_blocks(self):
        return len(self.pool)

    def _seq(self, seq_id):
        if seq_id not in self.seqs:
            raise KeyError(seq_id)
        return self.seqs[seq_id]

    def block_table(self, seq_id):
        return list(self._seq(seq_id).blocks)

    def ref_count(self, block_id):
        return self.refs[block_id]

    def block_tokens(self, block_id):
        return list(self.content[block_id])

    def _take(self, tokens):
        b = heapq.heappop(self.pool)
        self.refs[b] = 1
        self.content[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.seqs:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty")
        bs = self.block_size
        plan = []
        for i in range(0, len(prompt), bs):
            key = tuple(prompt[:i + bs]) if i + bs <= len(prompt) else None
            plan.append((prompt[i:i + bs], key, self.prefix_table.get(key) if key else None))
        if sum(1 for p in plan if p[2] is None) > len(self.pool):
            raise OutOfBlocks("full")
        blocks = []
        for chunk, key, hit in plan:
            if hit is None:
                hit = self._take(chunk)
                if key:
                    self.prefix_table[key] = hit
                    self.prefix_of[hit] = key
            else:
                self.refs[hit] += 1
            blocks.append(hit)
        self.seqs[seq_id] = Sequence(blocks)

    def append_token(self, seq_id, token):
        blocks = self._seq(seq_id).blocks
        last = blocks[-1]
        if len(self.content[last]) == self.block_size:
            if not self.pool:
                raise OutOfBlocks("full")
            blocks.append(self._take([token]))
        elif self.refs[last] > 1:
            if not self.pool:
                raise OutOfBlocks("full")
            blocks[-1] = self._take(self.content[last] + [token])
            self.refs[last] -= 1
        else:
            self.content[last].append(token)

    def fork(self, parent_id, child_id):
        parent = self._seq(parent_id)
        if child_id in self.seqs:
            raise ValueError(child_id)
        blocks = list(parent.blocks)
        last = blocks[-1]
        partial = len(self.content[last]) < self.block_size
        if partial and not self.pool:
            raise OutOfBlocks("no block for the child's copy")
        for b in blocks[:-1] if partial else blocks:
            self.refs[b] += 1
        if partial:
            blocks[-1] = self._take(self.content[last])
        self.seqs[child_id] = Sequence(blocks)

    def free(self, seq_id):
        for b in self._seq(seq_id).blocks:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.content[b] = []
                key = self.prefix_of.pop(b, None)
                if key:
                    del self.prefix_table[key]
                heapq.heappush(self.pool, b)
        del self.seqs[seq_id]
