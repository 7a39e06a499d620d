"""A worker's printed output: standard output and error as one file whose tail the scorecard keeps,
cut to its latest part rather than failing when it reaches the file-size limit."""

from __future__ import annotations

import errno
import io
import os
import resource
import sys
from typing import Any


class PrintedOutput(io.RawIOBase):
    """Standard output or error of a worker (descriptors 1 and 2: one write-only file, whose tail the
    scorecard keeps). Past the file-size limit a write does not fail: the file is cut to the latest
    KEEP_BYTES printed through here, after a line saying how much went, and the write goes on. Chatty
    but correct code (a debug line on every one of 12,000 calls) keeps its marks; writes to the
    descriptor itself still meet the limit, as any file's do."""

    KEEP_BYTES = 64 * 1024

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.recent = bytearray()  # the latest bytes written through here (the file cannot be read)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def write(self, data: Any) -> int:
        data = bytes(data)
        done = 0
        while done < len(data):
            try:
                done += os.write(self.fd, data[done:])
            except OSError as exc:
                if exc.errno != errno.EFBIG or not self.cut():
                    raise
        self.recent += data[-self.KEEP_BYTES:]
        if len(self.recent) > 2 * self.KEEP_BYTES:
            del self.recent[:-self.KEEP_BYTES]
        return len(data)

    def cut(self) -> bool:
        """Start the file again with its latest bytes; False when that would not make room."""
        size = os.fstat(self.fd).st_size
        tail = bytes(self.recent[-self.KEEP_BYTES:])
        if size <= len(tail) + 4096:
            return False
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0] // (1024 * 1024)
        note = f"[{size - len(tail):,} bytes printed before this were cut: a test keeps at most {limit} MiB]\n"
        os.write(self.fd, note.encode() + tail)
        self.recent = bytearray(tail)
        return True


def keep_printing() -> None:
    """Standard output and error as `PrintedOutput`, with their encodings and unbuffered (as `-u`)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        setattr(sys, name, io.TextIOWrapper(PrintedOutput(stream.fileno()), encoding=stream.encoding,
                                            errors=stream.errors, write_through=True))
