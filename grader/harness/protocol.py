"""The wire between the trusted harness and the untrusted worker: length-framed JSON, data only.

Both ends use it, so it must never do anything but move bytes and parse JSON: no pickle, no eval.
Values cross as JSON scalars and arrays (lists), plus tagged objects for the few other shapes:
`{"$t": [...]}` a tuple, `{"$set": [...]}` a set, `{"$dict": [[k, v], ...]}` a dict, and
`{"$ref": n}` a handle to an object that lives in the worker.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64

TUPLE, SET, DICT, REF = "$t", "$set", "$dict", "$ref"


class ProtocolError(Exception):
    """The other end sent something that is not a well-formed message."""


class PeerClosed(ProtocolError):
    """The other end closed the pipe (for the worker: it exited or was killed)."""


class Deadline(Exception):
    """The other end did not answer in time."""


def send(fd: int, message: Any) -> None:
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES} byte cap")
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class Inbox:
    """The receiving end of one pipe. It reads whatever has arrived, up to 1 MiB at a time, so a whole
    message usually costs one `select` and one `read`; bytes past the message wait for the next one."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def _fill(self, deadline: float | None) -> None:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise Deadline()
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            raise PeerClosed("the pipe closed")
        self.buffer += chunk

    def receive(self, deadline: float | None = None) -> Any:
        """One message; `deadline` is a `time.monotonic()` instant, or None to wait forever."""
        while len(self.buffer) < HEADER.size:
            self._fill(deadline)
        (length,) = HEADER.unpack_from(self.buffer)
        if length > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"announced a message of {length} bytes, over the {MAX_MESSAGE_BYTES} byte cap")
        while len(self.buffer) < HEADER.size + length:
            self._fill(deadline)
        body = bytes(self.buffer[HEADER.size:HEADER.size + length])
        del self.buffer[:HEADER.size + length]
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise ProtocolError(f"a message was not valid JSON ({exc.__class__.__name__})") from None
