"""I return the block's token list straight from the Block object, a block already keeps a list.

One object per block, a set of free ids.
"""


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


class Block:
    def __init__(self, block_id):
        self.block_id = block_id
        self.tokens = []
        self.refs = 0
        self.prefix = None


class BlockManager:
    def __init__(self, num_blocks, block_size):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_ids = set(range(num_blocks))
        self.sequences = {}
        self.prefixes = {}

    def num_free_blocks(self):
        return len(self.free_ids)

    def block_table(self, seq_id):
        return [block.block_id for block in self._get(seq_id)]

    def ref_count(self, block_id):
        return self.blocks[block_id].refs

    def block_tokens(self, block_id):
        return self.blocks[block_id].tokens

    def _get(self, seq_id):
        if seq_id not in self.sequences:
            raise KeyError(f"no sequence {seq_id}")
        return self.sequences[seq_id]

    def _new_block(self, tokens):
        block = self.blocks[min(self.free_ids)]
        self.free_ids.discard(block.block_id)
        block.tokens = list(tokens)
        block.refs = 1
        return block

    def allocate(self, seq_id, prompt):
        if seq_id in self.sequences:
            raise ValueError(f"sequence {seq_id} exists")
        if len(prompt) == 0:
            raise ValueError("prompt is empty")
        n = self.block_size
        chunks = [prompt[i:i + n] for i in range(0, len(prompt), n)]
        reuse = []
        for i, chunk in enumerate(chunks):
            key = tuple(prompt[:(i + 1) * n]) if len(chunk) == n else None
            reuse.append(self.prefixes.get(key) if key else None)
        if reuse.count(None) > len(self.free_ids):
            raise OutOfBlocks("cache full")
        table = []
        for i, chunk in enumerate(chunks):
            block = reuse[i]
            if block is not None:
                block.refs += 1
            else:
                block = self._new_block(chunk)
                if len(chunk) == n:
                    block.prefix = tuple(prompt[:(i + 1) * n])
                    self.prefixes[block.prefix] = block
            table.append(block)
        self.sequences[seq_id] = table

    def append_token(self, seq_id, token):
        table = self._get(seq_id)
        last = table[-1]
        if len(last.tokens) < self.block_size and last.refs == 1:
            last.tokens.append(token)
            return
        if not self.free_ids:
            raise OutOfBlocks("cache full")
        if len(last.tokens) == self.block_size:
            table.append(self._new_block([token]))
        else:
            copy = self._new_block(last.tokens + [token])
            last.refs -= 1
            table[-1] = copy

    def fork(self, parent_id, child_id):
        table = self._get(parent_id)
        if child_id in self.sequences:
            raise ValueError(f"sequence {child_id} exists")
        for block in table:
            block.refs += 1
        self.sequences[child_id] = table[:]

    def free(self, seq_id):
        table = self._get(seq_id)
        for block in table:
            block.refs -= 1
            if block.refs == 0:
                block.tokens = []
                if block.prefix is not None:
                    del self.prefixes[block.prefix]
                    block.prefix = None
                self.free_ids.add(block.block_id)
        del self.sequences[seq_id]
