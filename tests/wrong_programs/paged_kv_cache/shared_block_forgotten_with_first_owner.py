"""Each sequence remembers the prefixes it registered, and free() forgets them, even if someone still holds the block.

Registered prefixes are owned by the sequence that made them; a min() over a set of free ids.
"""


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_set = set(range(num_blocks))
        self.refcnt = [0] * num_blocks
        self.content = [[] for _ in range(num_blocks)]
        self.tables = {}
        self.prefix_index = {}
        self.registered_by = {}  # seq id -> prefixes it registered

    def num_free_blocks(self):
        return len(self.free_set)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return self.tables[seq_id].copy()

    def ref_count(self, block_id):
        return self.refcnt[block_id]

    def block_tokens(self, block_id):
        return self.content[block_id].copy()

    def _new(self, tokens):
        b = min(self.free_set)
        self.free_set.remove(b)
        self.refcnt[b] = 1
        self.content[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("duplicate")
        if not prompt:
            raise ValueError("empty")
        bs = self.block_size
        parts = []
        for i in range(0, len(prompt), bs):
            key = tuple(prompt[:i + bs]) if i + bs <= len(prompt) else None
            parts.append((prompt[i:i + bs], key, self.prefix_index.get(key) if key else None))
        if sum(p[2] is None for p in parts) > len(self.free_set):
            raise OutOfBlocks("full")
        table = []
        mine = []
        for chunk, key, hit in parts:
            if hit is not None:
                self.refcnt[hit] += 1
                table.append(hit)
            else:
                b = self._new(chunk)
                if key is not None:
                    self.prefix_index[key] = b
                    mine.append(key)
                table.append(b)
        self.tables[seq_id] = table
        self.registered_by[seq_id] = mine

    def append_token(self, seq_id, token):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        table = self.tables[seq_id]
        last = table[-1]
        if len(self.content[last]) == self.block_size:
            if not self.free_set:
                raise OutOfBlocks("full")
            table.append(self._new([token]))
        elif self.refcnt[last] > 1:
            if not self.free_set:
                raise OutOfBlocks("full")
            table[-1] = self._new(self.content[last] + [token])
            self.refcnt[last] -= 1
        else:
            self.content[last].append(token)

    def fork(self, parent_id, child_id):
        if parent_id not in self.tables:
            raise KeyError(parent_id)
        if child_id in self.tables:
            raise ValueError(child_id)
        self.tables[child_id] = self.tables[parent_id].copy()
        self.registered_by[child_id] = []
        for b in self.tables[child_id]:
            self.refcnt[b] += 1

    def free(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        for key in self.registered_by.pop(seq_id):
            self.prefix_index.pop(key, None)
        for b in self.tables.pop(seq_id):
            self.refcnt[b] -= 1
            if self.refcnt[b] == 0:
                self.content[b] = []
                for key in [k for k, v in self.prefix_index.items() if v == b]:
                    del self.prefix_index[key]
                self.free_set.add(b)
