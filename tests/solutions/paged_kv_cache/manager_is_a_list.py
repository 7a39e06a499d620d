"""The manager is the list of its blocks' tokens: a list subclass."""

_BlockManager = BlockManager


class BlockManager(_BlockManager, list):
    def __init__(self, num_blocks, block_size):
        _BlockManager.__init__(self, num_blocks, block_size)
        list.extend(self, [[] for _ in range(num_blocks)])
        self._tokens = self  # block id -> its tokens, in the manager itself
