"""A full prompt block is known by (the block before it, its own tokens), as vLLM hashes its blocks."""

import heapq


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class UnknownSequence(KeyError):
    pass


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.heap = list(range(num_blocks))
        self.refs = {}
        self.toks = {}
        self.tables = {}
        self.by_key = {}
        self.key_of = {}

    def num_free_blocks(self):
        return len(self.heap)

    def block_table(self, seq_id):
        return self._table(seq_id)[:]

    def ref_count(self, block_id):
        return self.refs.get(block_id, 0)

    def block_tokens(self, block_id):
        return list(self.toks.get(block_id, ()))

    def _table(self, seq_id):
        if seq_id not in self.tables:
            raise UnknownSequence(seq_id)
        return self.tables[seq_id]

    def _new(self, tokens):
        b = heapq.heappop(self.heap)
        self.refs[b] = 1
        self.toks[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError(f"{seq_id} is already allocated")
        if not prompt:
            raise ValueError("empty prompt")
        bs = self.block_size
        chunks = [list(prompt[i:i + bs]) for i in range(0, len(prompt), bs)]
        # Which blocks can be shared: follow the chain while it is known.
        shared = []
        parent = None
        for chunk in chunks:
            if len(chunk) < bs:
                break
            b = self.by_key.get((parent, tuple(chunk)))
            if b is None:
                break
            shared.append(b)
            parent = b
        if len(chunks) - len(shared) > len(self.heap):
            raise OutOfBlocks(f"{len(chunks) - len(shared)} blocks needed")
        table = []
        for b in shared:
            self.refs[b] += 1
            table.append(b)
        for chunk in chunks[len(shared):]:
            b = self._new(chunk)
            if len(chunk) == bs:
                key = (parent, tuple(chunk))
                self.by_key[key] = b
                self.key_of[b] = key
            parent = b
            table.append(b)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        table = self._table(seq_id)
        last = table[-1]
        full = len(self.toks[last]) == self.block_size
        if (full or self.refs[last] > 1) and not self.heap:
            raise OutOfBlocks("no free block")
        if full:
            table.append(self._new([token]))
        elif self.refs[last] > 1:
            table[-1] = self._new(self.toks[last] + [token])
            self.refs[last] -= 1
        else:
            self.toks[last].append(token)

    def fork(self, parent_id, child_id):
        parent = self._table(parent_id)
        if child_id in self.tables:
            raise ValueError(f"{child_id} exists")
        self.tables[child_id] = list(parent)
        for b in parent:
            self.refs[b] += 1

    def free(self, seq_id):
        table = self._table(seq_id)
        del self.tables[seq_id]
        for b in table:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                del self.refs[b]
                del self.toks[b]
                key = self.key_of.pop(b, None)
                if key is not None:
                    del self.by_key[key]
                heapq.heappush(self.heap, b)
