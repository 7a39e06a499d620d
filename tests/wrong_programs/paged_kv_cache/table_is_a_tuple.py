"""I keep every block table as a tuple so nobody can change it, and block_table returns that tuple.

Immutable tables rebuilt on every change, a sorted list of free ids.
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
        self.shared = {}

    def num_free_blocks(self):
        return len(self.free_blocks)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return self.tables[seq_id]

    def ref_count(self, block_id):
        return self.refs[block_id]

    def block_tokens(self, block_id):
        return self.tokens[block_id][:]

    def _pop_lowest(self, tokens):
        self.free_blocks.sort()
        b = self.free_blocks.pop(0)
        self.refs[b] = 1
        self.tokens[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty")
        bs = self.block_size
        chunks = [(i, prompt[i:i + bs]) for i in range(0, len(prompt), bs)]
        hits = {}
        for i, chunk in chunks:
            if len(chunk) == bs and tuple(prompt[:i + bs]) in self.shared:
                hits[i] = self.shared[tuple(prompt[:i + bs])]
        if len(chunks) - len(hits) > len(self.free_blocks):
            raise OutOfBlocks("full")
        table = ()
        for i, chunk in chunks:
            if i in hits:
                b = hits[i]
                self.refs[b] += 1
            else:
                b = self._pop_lowest(chunk)
                if len(chunk) == bs:
                    self.shared[tuple(prompt[:i + bs])] = b
            table = table + (b,)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        table = self.tables[seq_id]
        last = table[-1]
        if len(self.tokens[last]) == self.block_size:
            if not self.free_blocks:
                raise OutOfBlocks("full")
            self.tables[seq_id] = table + (self._pop_lowest([token]),)
        elif self.refs[last] > 1:
            if not self.free_blocks:
                raise OutOfBlocks("full")
            new = self._pop_lowest(self.tokens[last] + [token])
            self.refs[last] -= 1
            self.tables[seq_id] = table[:-1] + (new,)
        else:
            self.tokens[last].append(token)

    def fork(self, parent_id, child_id):
        if parent_id not in self.tables:
            raise KeyError(parent_id)
        if child_id in self.tables:
            raise ValueError(child_id)
        self.tables[child_id] = self.tables[parent_id]
        for b in self.tables[parent_id]:
            self.refs[b] += 1

    def free(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        for b in self.tables[seq_id]:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.tokens[b] = []
                for key in [k for k, v in self.shared.items() if v == b]:
                    del self.shared[key]
                self.free_blocks.append(b)
        del self.tables[seq_id]
