"""I wrote `if shared:` to see whether a prompt block was found, forgetting that block 0 is falsy.

A lookup helper that returns a block id or None; a set of free ids.
"""


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_ids = set(range(num_blocks))
        self.refs = [0] * num_blocks
        self.data = [[] for _ in range(num_blocks)]
        self.tables = {}
        self.prefix_map = {}

    def num_free_blocks(self):
        return len(self.free_ids)

    def block_table(self, seq_id):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        return list(self.tables[seq_id])

    def ref_count(self, block_id):
        return self.refs[block_id]

    def block_tokens(self, block_id):
        return list(self.data[block_id])

    def _find_shared(self, prompt, end):
        if end > len(prompt):
            return None
        return self.prefix_map.get(tuple(prompt[:end]))

    def _take(self, tokens):
        b = min(self.free_ids)
        self.free_ids.remove(b)
        self.refs[b] = 1
        self.data[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.tables:
            raise ValueError("exists")
        if not prompt:
            raise ValueError("empty")
        bs = self.block_size
        starts = range(0, len(prompt), bs)
        found = [self._find_shared(prompt, s + bs) for s in starts]
        if sum(1 for f in found if not f) > len(self.free_ids):
            raise OutOfBlocks("not enough")
        table = []
        for s, shared in zip(starts, found):
            if shared:
                self.refs[shared] += 1
                table.append(shared)
            else:
                b = self._take(prompt[s:s + bs])
                if s + bs <= len(prompt):
                    self.prefix_map[tuple(prompt[:s + bs])] = b
                table.append(b)
        self.tables[seq_id] = table

    def append_token(self, seq_id, token):
        if seq_id not in self.tables:
            raise KeyError(seq_id)
        table = self.tables[seq_id]
        last = table[-1]
        if len(self.data[last]) == self.block_size:
            if not self.free_ids:
                raise OutOfBlocks("none free")
            table.append(self._take([token]))
        elif self.refs[last] > 1:
            if not self.free_ids:
                raise OutOfBlocks("none free")
            table[-1] = self._take(self.data[last] + [token])
            self.refs[last] -= 1
        else:
            self.data[last].append(token)

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
                self.data[b] = []
                self.prefix_map = {k: v for k, v in self.prefix_map.items() if v != b}
                self.free_ids.add(b)
