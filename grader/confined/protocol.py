"""The wire between the trusted harness and the untrusted worker: length-framed JSON, data only.

Both ends use it, so it must never do anything but move bytes and parse JSON: no pickle, no eval.
Values cross as JSON scalars and arrays (lists), plus tagged objects for the few other shapes:
`{"$t": [...]}` a tuple, `{"$set": [...]}` a set, `{"$dict": [[k, v], ...]}` a dict, and
`{"$ref": n}` a handle to an object that lives in the worker, and `{"$as": [n, value]}` a value of a
subclass of a builtin type (a namedtuple, an int subclass...) in its base type's form, with the handle of
the original, so that passing it back gives the submission its own object again.
A list of objects of the worker (a queue of requests) crosses compactly as `{"$refs": [n, ...]}`.

The bounds below are shared: the worker refuses to send more (with a sentence saying what was too
large) and the harness treats more as a broken protocol, so the trusted side's memory stays bounded
whatever the worker does.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any, Protocol

HEADER = struct.Struct(">I")
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_INT_DIGITS = 4_000  # under Python's own 4,300-digit limit on converting ints to text
MAX_STRING_CHARS = 1_000_000  # one string in a value
MAX_HANDLES = 50_000  # objects of the submission the harness holds proxies of, per worker
MAX_TYPES = 5_000  # types of those objects, per worker
MAX_METHODS = 200  # public method names kept per type
MAX_ATTRS = 64  # scalar attributes kept (copied into a proxy) per object; the rest are read on demand
MAX_ATTR_CHARS = 1_000  # a longer string attribute is read on demand, not kept
MAX_KEPT_ATTRS = 100_000  # attributes kept across all the proxies of one worker
MAX_KEPT_CHARS = 1_000_000  # characters of string attributes kept across all the proxies of one worker
MAX_WATCH = 10_000  # objects whose snapshots a call may ask to have sent back with its answer
MAX_SCENARIO_OPS = 200_000  # operations of one scenario (one message)
MAX_SCENARIO_ITEMS = 4_000_000  # values (elements of containers included) in all the results of one scenario
# A scenario's results travel in frames of about this size: small, so that the harness decodes one
# while the worker makes the next.
SCENARIO_CHUNK_BYTES = 1 << 14

TUPLE, SET, DICT, REF, AS = "$t", "$set", "$dict", "$ref", "$as"
REFS = "$refs"
# A list of same-length tuples of scalars and objects (a plan: [(request, tokens), ...]) as its columns:
# {ROWS: [width, [the columns that hold handles], the columns one after the other in one flat list]}
ROWS = "$rows"
MAX_ROW_WIDTH = 16
SLOT = "$slot"  # in a scenario's arguments only: the result of an earlier operation of the same scenario
SLOTS = "$slots"  # ... and a list of such results, as their operations' indices: {SLOTS: [i, j, ...]}
# A list a call returned, kept by the worker with a serial number so that a test passing it back unchanged
# hands the submission its very list (`complete(schedule())`): {KEPT: [serial, the list]} as a call's
# result, {KEPT: serial} in a later call's arguments. Each side keeps the last KEPT_LISTS of them.
KEPT = "$kept"
KEPT_LISTS = 32
# Elements of the values (kept lists, subclass values) the harness remembers, per worker, so as to pass
# them back as the submission's own objects; past it, a value passed back goes as a copy.
MAX_REMEMBERED_ITEMS = 200_000


# The messages, by their keys; nothing else crosses. A request of the harness is {OP: an op, its fields}.
OP = "op"
OP_NAME = "name"  # a top-level name of the submission: {NAME}
OP_SNAP = "snap"  # a fresh snapshot of an object, nothing else: {TARGET}
OP_GETATTR = "getattr"  # an attribute read remotely: {TARGET, NAME}
OP_CALL = "call"  # calling an object: {TARGET, ARGS, KWARGS}
OP_METHOD = "method"  # calling a method of an object: {TARGET, NAME, ARGS, KWARGS}
OP_SCENARIO = "scenario"  # many operations in one message: {OPS, BEAT}
# An audit's grading of a correct solution only: OP_TRACE starts recording the lines of the submission's
# file that run, OP_LINES stops it and answers them, {OK: a sorted list of at most MAX_LINES line numbers,
# ARCS: at most MAX_ARCS arcs, [the line before, the line after], a function's entry and exit as minus its
# first line (grader/confined/tracing.py)}.
OP_TRACE, OP_LINES = "trace", "lines"
ARCS = "arcs"
MAX_LINES = 100_000
MAX_ARCS = 100_000
NAME, TARGET, ARGS, KWARGS = "name", "ref", "args", "kwargs"  # TARGET: the handle of the object concerned
WATCH = "watch"  # with any call: the objects read since the last one, whose snapshots may ride along
OPS, BEAT = "ops", "beat"
# A scenario's operations, as lists: [STEP_NEW, name, args, kwargs], [STEP_CALL, target, method, args,
# kwargs], [STEP_READ or STEP_COLUMNS, target(s), names], [STEP_GROUP, members].
STEP_NEW, STEP_CALL, STEP_READ, STEP_COLUMNS, STEP_GROUP = "new", "call", "read", "columns", "group"
# The worker's first message: READY (true), or IMPORT_ERROR (an exception report).
READY, IMPORT_ERROR = "ready", "import_error"
# How a call ended: OK (its value), EXC (an exception report), TOO_BIG (what was past the bounds, a
# sentence), FATAL (the worker cannot go on consistently: a sentence).
OK, EXC, TOO_BIG, FATAL = "ok", "exc", "too_big", "fatal"
# A scenario answers in frames: PART (results so far), then END (the last results, and EXC or TOO_BIG
# with AT, the step that stopped it).
PART, END, AT = "part", "scenario", "at"
# With every reply: OBJS {handle: {OBJ_TYPE, OBJ_CALLABLE, OBJ_ATTRS}} (fresh snapshots), TYPES
# {number: {TYPE_NAME, TYPE_METHODS}} (types first met), SAME [handles] (re-read and unchanged).
OBJS, TYPES, SAME = "objs", "types", "same"
OBJ_TYPE, OBJ_CALLABLE, OBJ_ATTRS = "type", "callable", "attrs"
TYPE_NAME, TYPE_METHODS = "name", "methods"
# An exception report.
EXC_TYPE, EXC_MRO, EXC_BUILTIN, EXC_MESSAGE, EXC_TRACEBACK = "type", "mro", "builtin", "message", "traceback"


class ProtocolError(Exception):
    """The other end sent something that is not a well-formed message."""


class TooLarge(ProtocolError):
    """A message past MAX_MESSAGE_BYTES, refused before it is sent."""

    def __init__(self, size: int) -> None:
        super().__init__(f"message of {size} bytes exceeds the {MAX_MESSAGE_BYTES} byte cap")
        self.size = size


class PeerClosed(ProtocolError):
    """The other end closed the pipe (for the worker: it exited or was killed)."""


class Deadline(Exception):
    """The other end did not answer in time."""


# One encoder for every message: `json.dumps` with options builds a new one on each call.
COMPACT = json.JSONEncoder(separators=(",", ":"))


def encode(message: Any) -> bytes:
    """The frame of one message. Raises ProtocolError past the cap."""
    return frame(COMPACT.encode(message).encode("utf-8"))


def frame(data: bytes) -> bytes:
    """The frame of a message already in JSON text. Raises ProtocolError past the cap."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise TooLarge(len(data))
    return HEADER.pack(len(data)) + data


class Limit(Protocol):
    """A deadline that may move later while it is waited for (see `grader.confined.clock`)."""

    def left(self) -> float: ...


Until = float | Limit  # a `time.monotonic()` instant, or a deadline that says how long is left


def left_of(deadline: Until) -> float:
    return deadline - time.monotonic() if type(deadline) is float else deadline.left()  # type: ignore[union-attr]


def send(fd: int, message: Any, deadline: Until | None = None) -> None:
    """Send one message. With a `deadline` the writes do not block: a peer that stops reading costs at
    most the time left, then Deadline is raised."""
    write_frame(fd, encode(message), deadline)


def write_frame(fd: int, frame: bytes, deadline: Until | None = None) -> None:
    view = memoryview(frame)
    if deadline is None:
        while view:
            view = view[os.write(fd, view):]
        return
    os.set_blocking(fd, False)
    while view:
        try:
            view = view[os.write(fd, view):]
            continue
        except BlockingIOError:
            pass
        left = left_of(deadline)
        if (left <= 0 or not select.select([], [fd], [], left)[1]) and left_of(deadline) <= 0:
            raise Deadline()


# A pipe holds 64 KiB: no read returns more. Asking for more would only cost a larger allocation on each
# read (past 128 KiB, glibc maps it and shrinks it again, many times the cost of the read).
READ_BYTES = 1 << 16


class Inbox:
    """The receiving end of one pipe. It reads whatever has arrived, up to a pipe's capacity at a time,
    so a whole message usually costs one `select` and one `read`; bytes past the message wait for the
    next one."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def _fill(self, deadline: Until | None) -> None:
        if deadline is not None:
            # A message that has already arrived is read even when the deadline has passed.
            while not select.select([self.fd], [], [], max(0.0, left_of(deadline)))[0]:
                if left_of(deadline) <= 0:  # a deadline that moved later is waited for again
                    raise Deadline()
        chunk = os.read(self.fd, READ_BYTES)
        if not chunk:
            raise PeerClosed("the pipe closed")
        self.buffer += chunk

    def receive(self, deadline: Until | None = None) -> Any:
        """One message; `deadline` is a `time.monotonic()` instant or a `Limit`, or None to wait forever."""
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
