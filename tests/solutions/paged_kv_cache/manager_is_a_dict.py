"""The manager is the map of its sequences to their block tables: a dict subclass."""

_BlockManager = BlockManager


class BlockManager(_BlockManager, dict):
    def __init__(self, num_blocks, block_size):
        dict.__init__(self)
        _BlockManager.__init__(self, num_blocks, block_size)
        self._tables = self  # seq_id -> block table, in the manager itself
