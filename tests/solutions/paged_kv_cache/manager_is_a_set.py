"""The manager is the set of its live sequences: a set subclass."""

_BlockManager = BlockManager


class BlockManager(_BlockManager, set):
    def __init__(self, num_blocks, block_size):
        set.__init__(self)
        _BlockManager.__init__(self, num_blocks, block_size)

    def allocate(self, seq_id, prompt):
        _BlockManager.allocate(self, seq_id, prompt)
        self.add(seq_id)

    def fork(self, parent_id, child_id):
        _BlockManager.fork(self, parent_id, child_id)
        self.add(child_id)

    def free(self, seq_id):
        _BlockManager.free(self, seq_id)
        self.discard(seq_id)
