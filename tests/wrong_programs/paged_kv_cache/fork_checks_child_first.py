"""In fork I check that the child id is free before I look the parent up.

Plain lists indexed by block id, a set of free ids.
"""


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.available = set(range(num_blocks))
        self.counts = [0] * num_blocks
        self.held = [[] for _ in range(num_blocks)]
        self.table_of = {}
        self.prefix_to_block = {}
        self.block_to_prefix = {}

    def num_free_blocks(self):
        return len(self.available)

    def block_table(self, seq_id):
        return list(self.table_of[seq_id])

    def ref_count(self, block_id):
        return self.counts[block_id]

    def block_tokens(self, block_id):
        return list(self.held[block_id])

    def _grab(self, tokens):
        b = min(self.available)
        self.available.remove(b)
        self.counts[b] = 1
        self.held[b] = list(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.table_of:
            raise ValueError(seq_id)
        if not prompt:
            raise ValueError("empty")
        size = self.block_size
        found = []
        for start in range(0, len(prompt), size):
            if start + size <= len(prompt):
                found.append(self.prefix_to_block.get(tuple(prompt[:start + size])))
            else:
                found.append(None)
        if found.count(None) > len(self.available):
            raise OutOfBlocks("out of blocks")
        table = []
        for i, start in enumerate(range(0, len(prompt), size)):
            if found[i] is not None:
                self.counts[found[i]] += 1
                table.append(found[i])
                continue
            b = self._grab(prompt[start:start + size])
            if start + size <= len(prompt):
                key = tuple(prompt[:start + size])
                self.prefix_to_block[key] = b
                self.block_to_prefix[b] = key
            table.append(b)
        self.table_of[seq_id] = table

    def append_token(self, seq_id, token):
        table = self.table_of[seq_id]
        last = table[-1]
        if len(self.held[last]) == self.block_size:
            if not self.available:
                raise OutOfBlocks("out of blocks")
            table.append(self._grab([token]))
        elif self.counts[last] > 1:
            if not self.available:
                raise OutOfBlocks("out of blocks")
            table[-1] = self._grab(self.held[last] + [token])
            self.counts[last] -= 1
        else:
            self.held[last].append(token)

    def fork(self, parent_id, child_id):
        if child_id in self.table_of:
            raise ValueError(f"{child_id} already exists")
        if parent_id not in self.table_of:
            raise KeyError(parent_id)
        self.table_of[child_id] = list(self.table_of[parent_id])
        for b in self.table_of[child_id]:
            self.counts[b] += 1

    def free(self, seq_id):
        for b in self.table_of.pop(seq_id):
            self.counts[b] -= 1
            if self.counts[b] == 0:
                self.held[b] = []
                key = self.block_to_prefix.pop(b, None)
                if key is not None:
                    del self.prefix_to_block[key]
                self.available.add(b)
