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


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Deadline()
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise Deadline()
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise PeerClosed("the pipe closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(fd: int, deadline: float | None = None) -> Any:
    """One message; `deadline` is a `time.monotonic()` instant, or None to wait forever."""
    (length,) = HEADER.unpack(_read_exact(fd, HEADER.size, deadline))
    if length > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"announced a message of {length} bytes, over the {MAX_MESSAGE_BYTES} byte cap")
    body = _read_exact(fd, length, deadline)
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"a message was not valid JSON ({exc.__class__.__name__})") from None
