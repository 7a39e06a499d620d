"""My free blocks are a queue: I take from the front and put freed blocks at the back.

A deque of free ids, FIFO.
"""

from collections import deque


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.queue = deque(range(num_blocks))
        self.refs = [0] * num_blocks
        self.tokens = [[] for _ in range(num_blocks)]
        self.tables = {}
        self.prefixes = {}

    def num_free_blocks(self):
        return len(self.queue)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return list(self.tables[seq_id])

    def ref_count(self, block_id):
        return self.refs[block_id]

    def block_tokens(self, block_id):
        return list(self.tokens[block_id])

    def _next_block(self, toks):
        b = self.queue.popleft()
        self.refs[b] = 1
        self.tokens[b] = list(toks)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty")
        bs = self.block_size
        plan = []
        for i in range(0, len(prompt), bs):
            key = tuple(prompt[:i + bs]) if i + bs <= len(prompt) else None
            plan.append((prompt[i:i + bs], key, self.prefixes.get(key) if key else None))
        if [p[2] for p in plan].count(None) > len(self.queue):
            raise OutOfBlocks("no blocks")
        table = []
        for chunk, key, hit in plan:
            if hit is None:
                hit = self._next_block(chunk)
                if key:
                    self.prefixes[key] = hit
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
            if not self.queue:
                raise OutOfBlocks("no blocks")
            table.append(self._next_block([token]))
        elif self.refs[last] > 1:
            if not self.queue:
                raise OutOfBlocks("no blocks")
            table[-1] = self._next_block(self.tokens[last] + [token])
            self.refs[last] -= 1
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
                self.prefixes = {k: v for k, v in self.prefixes.items() if v != b}
                self.queue.append(b)
