"""The control sockets' messages: one JSON object a datagram (SOCK_SEQPACKET), with file descriptors
passed alongside where a message says so. Three sockets carry them, each served where it is documented:

    harness -> zygote (`zygote`)     {OP: LOAD, NAME} + [the submission]
                                     {OP: FORK, ENV, MODULE} + [to_worker_r, from_worker_w, output]
                                     {OP: KILL, PID}   {OP: SWEEP, KEEP: [pid, ...]}
    zygote -> harness                {PID} or {REFUSED: why}, once per fork; {SWEPT: n}; {EXIT: pid, CODE}
    zygote -> loader (`loader`)      {OP: FORK, FOLDER} + [to_worker_r, from_worker_w, output]
    loader -> zygote                 {LOADED: clean} once; {PID} or {FAILED: why} per fork; {EXIT: pid, CODE}
    host -> fork server (`grader.harness.forkserver`)
                                     {ID, PRIVATE, USER, GROUP} + [the run's pipe, the output file]
    fork server -> host                 {ID, PID} + [its pidfd] or {ID, ERROR: why}; {EXIT: pid, CODE}

Unlike the worker's wire, every end of these sockets is trusted code; each reader still checks the shape
of what it acts on.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from typing import Any

MAX_BYTES = 65536  # one datagram

OP = "op"
LOAD, FORK, KILL, SWEEP = "load", "fork", "kill", "sweep"
NAME, ENV, MODULE, KEEP, FOLDER = "name", "env", "module", "keep", "folder"
PID, REFUSED, SWEPT, EXIT, CODE = "pid", "refused", "swept", "exit", "code"
LOADED, FAILED = "loaded", "failed"
ID, PRIVATE, USER, GROUP, ERROR = "id", "private", "user", "group", "error"


class ControlError(ValueError):
    """A datagram that is not one JSON object."""


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """One message, with `fds` passed alongside. Raises OSError when the other end is gone."""
    if fds:
        socket.send_fds(sock, [encode(message)], list(fds))
    else:
        sock.send(encode(message))


def decode(data: bytes) -> dict[str, Any]:
    """The message of one datagram; ControlError (a ValueError) if it is not a JSON object."""
    try:
        message = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ControlError(f"a control message that is not JSON ({exc.__class__.__name__})") from None
    if type(message) is not dict:
        raise ControlError("a control message that is not an object")
    return message
