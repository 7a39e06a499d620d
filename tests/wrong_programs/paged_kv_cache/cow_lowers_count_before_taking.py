"""When a sequence writes into a shared block I first let go of the old block, then take the copy.

Sorted free list with bisect, a dict of tables, a registry of full prompt blocks.
"""

import bisect


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_sorted = list(range(num_blocks))
        self.ref = [0] * num_blocks
        self.tok = [[] for _ in range(num_blocks)]
        self.tables = {}
        self.registry = {}

    def num_free_blocks(self):
        return len(self.free_sorted)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return list(self.tables[seq_id])

    def ref_count(self, block_id):
        return self.ref[block_id]

    def block_tokens(self, block_id):
        return list(self.tok[block_id])

    def _take(self, tokens):
        if not self.free_sorted:
            raise OutOfBlocks("no free block")
        b = self.free_sorted.pop(0)
        self.ref[b] = 1
        self.tok[b] = list(tokens)
        return b

    def _release(self, b):
        self.ref[b] -= 1
        if self.ref[b] == 0:
            self.tok[b] = []
            for key in [k for k, v in self.registry.items() if v == b]:
                del self.registry[key]
            bisect.insort(self.free_sorted, b)

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("sequence already exists")
        if not prompt:
            raise ValueError("prompt must not be empty")
        bs = self.block_size
        blocks = []
        for i in range(0, len(prompt), bs):
            full = i + bs <= len(prompt)
            blocks.append((prompt[i:i + bs], tuple(prompt[:i + bs]) if full else None))
        need = sum(1 for _, key in blocks if key is None or key not in self.registry)
        if need > len(self.free_sorted):
            raise OutOfBlocks("not enough free blocks")
        table = []
        for chunk, key in blocks:
            if key is not None and key in self.registry:
                b = self.registry[key]
                self.ref[b] += 1
            else:
                b = self._take(chunk)
                if key is not None:
                    self.registry[key] = b
            table.append(b)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        table = self.tables[seq_id]
        last = table[-1]
        if len(self.tok[last]) == self.block_size:
            table.append(self._take([token]))
        elif self.ref[last] > 1:
            old_tokens = list(self.tok[last])
            self.ref[last] -= 1
            table[-1] = self._take(old_tokens + [token])
        else:
            self.tok[last].append(token)

    def fork(self, parent_id, child_id):
        if parent_id not in self.tables:
            raise KeyError(parent_id)
        if child_id in self.tables:
            raise ValueError(child_id)
        self.tables[child_id] = list(self.tables[parent_id])
        for b in self.tables[child_id]:
            self.ref[b] += 1

    def free(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        for b in self.tables.pop(seq_id):
            self._release(b)
