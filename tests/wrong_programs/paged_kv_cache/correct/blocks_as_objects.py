"""Each block is an object that knows its tokens, its holders and the prefix it is known by."""

from __future__ import annotations

from dataclasses import dataclass, field


class OutOfBlocks(RuntimeError):
    """No free block is left for what was asked; the manager was left as it was."""


@dataclass
class Block:
    id: int
    tokens: list[int] = field(default_factory=list)
    refs: int = 0
    prefix: tuple[int, ...] | None = None  # set for a full block made by allocate


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_ids = set(range(num_blocks))
        self.seqs: dict[int, list[Block]] = {}
        self.known: dict[tuple[int, ...], Block] = {}

    def num_free_blocks(self) -> int:
        return len(self.free_ids)

    def block_table(self, seq_id: int) -> list[int]:
        return [b.id for b in self._seq(seq_id)]

    def ref_count(self, block_id: int) -> int:
        return self.blocks[block_id].refs

    def block_tokens(self, block_id: int) -> list[int]:
        return self.blocks[block_id].tokens.copy()

    def _seq(self, seq_id: int) -> list[Block]:
        try:
            return self.seqs[seq_id]
        except KeyError:
            raise KeyError(f"unknown sequence {seq_id}") from None

    def _take(self, tokens: list[int]) -> Block:
        block = self.blocks[min(self.free_ids)]
        self.free_ids.remove(block.id)
        block.tokens = list(tokens)
        block.refs = 1
        return block

    def allocate(self, seq_id: int, prompt: list[int]) -> None:
        if seq_id in self.seqs:
            raise ValueError("sequence exists")
        if len(prompt) == 0:
            raise ValueError("empty prompt")
        n = self.block_size
        plan: list[tuple[list[int], tuple[int, ...] | None, Block | None]] = []
        for i in range(0, len(prompt), n):
            chunk = list(prompt[i:i + n])
            key = tuple(prompt[:i + n]) if len(chunk) == n else None
            plan.append((chunk, key, self.known.get(key) if key is not None else None))
        if sum(1 for _, _, b in plan if b is None) > len(self.free_ids):
            raise OutOfBlocks("not enough free blocks")
        table = []
        for chunk, key, shared in plan:
            if shared is None:
                shared = self._take(chunk)
                if key is not None:
                    shared.prefix = key
                    self.known[key] = shared
            else:
                shared.refs += 1
            table.append(shared)
        self.seqs[seq_id] = table

    def append_token(self, seq_id: int, token: int) -> None:
        table = self._seq(seq_id)
        last = table[-1]
        if len(last.tokens) == self.block_size:
            if not self.free_ids:
                raise OutOfBlocks("no free block")
            table.append(self._take([token]))
        elif last.refs > 1:
            if not self.free_ids:
                raise OutOfBlocks("no free block for the copy")
            table[-1] = self._take(last.tokens + [token])
            last.refs -= 1
        else:
            last.tokens.append(token)

    def fork(self, parent_id: int, child_id: int) -> None:
        table = self._seq(parent_id)
        if child_id in self.seqs:
            raise ValueError("child exists")
        for block in table:
            block.refs += 1
        self.seqs[child_id] = list(table)

    def free(self, seq_id: int) -> None:
        for block in self._seq(seq_id):
            block.refs -= 1
            if block.refs == 0:
                block.tokens = []
                if block.prefix is not None:
                    del self.known[block.prefix]
                    block.prefix = None
                self.free_ids.add(block.id)
        del self.seqs[seq_id]
