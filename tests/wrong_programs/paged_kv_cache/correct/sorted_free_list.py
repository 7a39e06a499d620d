"""Free ids in a sorted list (bisect), tokens kept as tuples, tables as deques handed out as lists."""

from bisect import insort
from collections import deque


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class CacheFull(OutOfBlocks):
    pass


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free_list = list(range(num_blocks))
        self.count = [0] * num_blocks
        self.data = [()] * num_blocks
        self.seq = {}
        self.prefix_block = {}

    def num_free_blocks(self):
        return len(self.free_list)

    def block_table(self, seq_id):
        if seq_id not in self.seq:
            raise KeyError(seq_id)
        return list(self.seq[seq_id])

    def ref_count(self, block_id):
        return self.count[block_id]

    def block_tokens(self, block_id):
        return list(self.data[block_id])

    def _grab(self, tokens):
        b = self.free_list.pop(0)
        self.count[b] = 1
        self.data[b] = tuple(tokens)
        return b

    def allocate(self, seq_id, prompt):
        if seq_id in self.seq:
            raise ValueError("duplicate sequence id")
        prompt = tuple(prompt)
        if len(prompt) < 1:
            raise ValueError("a prompt has at least one token")
        size = self.block_size
        starts = range(0, len(prompt), size)
        found = {}
        for s in starts:
            if s + size <= len(prompt) and prompt[:s + size] in self.prefix_block:
                found[s] = self.prefix_block[prompt[:s + size]]
        if len(starts) - len(found) > len(self.free_list):
            raise CacheFull("the cache is full")
        table = deque()
        for s in starts:
            if s in found:
                b = found[s]
                self.count[b] += 1
            else:
                b = self._grab(prompt[s:s + size])
                if s + size <= len(prompt):
                    self.prefix_block[prompt[:s + size]] = b
            table.append(b)
        self.seq[seq_id] = table

    def append_token(self, seq_id, token):
        table = self.seq[seq_id]
        last = table[-1]
        if len(self.data[last]) < size_of(self) and self.count[last] == 1:
            self.data[last] = self.data[last] + (token,)
            return
        if not self.free_list:
            raise CacheFull("no free block")
        if len(self.data[last]) == size_of(self):
            table.append(self._grab((token,)))
        else:
            table[-1] = self._grab(self.data[last] + (token,))
            self.count[last] -= 1

    def fork(self, parent_id, child_id):
        if parent_id not in self.seq:
            raise KeyError(parent_id)
        if child_id in self.seq:
            raise ValueError(child_id)
        for b in self.seq[parent_id]:
            self.count[b] += 1
        self.seq[child_id] = deque(self.seq[parent_id])

    def free(self, seq_id):
        table = self.seq.pop(seq_id)
        for b in table:
            self.count[b] -= 1
            if self.count[b] == 0:
                self.data[b] = ()
                for key in [k for k, v in self.prefix_block.items() if v == b]:
                    del self.prefix_block[key]
                insort(self.free_list, b)


def size_of(manager):
    return manager.block_size
