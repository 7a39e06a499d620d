"""ref_count reads my dict of holders with .get, so a block nobody holds gives None.

Reference counts only for blocks in use; a heap of free ids.
"""

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.heap = list(range(num_blocks))
        self.counts = {}
        self.tokens = {}
        self.tables = {}
        self.known = {}

    def num_free_blocks(self):
        return len(self.heap)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return list(self.tables[seq_id])

    def ref_count(self, block_id):
        return self.counts.get(block_id)

    def block_tokens(self, block_id):
        return list(self.tokens.get(block_id, []))

    def _take(self, toks):
        b = heapq.heappop(self.heap)
        self.counts[b] = 1
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
            plan.append((prompt[i:i + bs], key, self.known.get(key) if key else None))
        if sum(1 for p in plan if p[2] is None) > len(self.heap):
            raise OutOfBlocks("full")
        table = []
        for chunk, key, hit in plan:
            if hit is None:
                hit = self._take(chunk)
                if key:
                    self.known[key] = hit
            else:
                self.counts[hit] += 1
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
            table.append(self._take([token]))
        elif self.counts[last] > 1:
            if not self.heap:
                raise OutOfBlocks("full")
            table[-1] = self._take(self.tokens[last] + [token])
            self.counts[last] -= 1
        else:
            self.tokens[last].append(token)

    def fork(self, parent_id, child_id):
        if parent_id not in self.tables:
            raise KeyError(parent_id)
        if child_id in self.tables:
            raise ValueError(child_id)
        self.tables[child_id] = list(self.tables[parent_id])
        for b in self.tables[child_id]:
            self.counts[b] += 1

    def free(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        for b in self.tables.pop(seq_id):
            self.counts[b] -= 1
            if self.counts[b] == 0:
                del self.counts[b]
                del self.tokens[b]
                self.known = {k: v for k, v in self.known.items() if v != b}
                heapq.heappush(self.heap, b)
