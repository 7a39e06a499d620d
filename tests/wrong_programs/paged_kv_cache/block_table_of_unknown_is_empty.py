"""block_table of a sequence I don't know returns an empty list, since it holds no blocks.

dict.get with a default in the reader; a sorted list of free ids.
"""


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_blocks = list(range(num_blocks))
        self.refs = [0] * num_blocks
        self.tokens = [[] for _ in range(num_blocks)]
        self.tables = {}
        self.prefix = {}

    def num_free_blocks(self):
        return len(self.free_blocks)

    def block_table(self, seq_id):
        return list(self.tables.get(seq_id, []))

    def ref_count(self, block_id):
        return self.refs[block_id]

    def block_tokens(self, block_id):
        return list(self.tokens[block_id])

    def _take(self, toks):
        b = self.free_blocks.pop(0)
        self.refs[b] = 1
        self.tokens[b] = list(toks)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty")
        bs = self.block_size
        chunks = []
        for i in range(0, len(prompt), bs):
            key = tuple(prompt[:i + bs]) if i + bs <= len(prompt) else None
            chunks.append((prompt[i:i + bs], key, self.prefix.get(key) if key else None))
        if sum(c[2] is None for c in chunks) > len(self.free_blocks):
            raise OutOfBlocks("full")
        table = []
        for chunk, key, hit in chunks:
            if hit is None:
                hit = self._take(chunk)
                if key:
                    self.prefix[key] = hit
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
            if not self.free_blocks:
                raise OutOfBlocks("full")
            table.append(self._take([token]))
        elif self.refs[last] > 1:
            if not self.free_blocks:
                raise OutOfBlocks("full")
            table[-1] = self._take(self.tokens[last] + [token])
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
                self.prefix = {k: v for k, v in self.prefix.items() if v != b}
                self.free_blocks.append(b)
                self.free_blocks.sort()
