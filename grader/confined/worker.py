"""The untrusted side: a process that imports the submission and answers calls on its objects.

It runs as its own (unprivileged, where possible) user, under resource limits it sets on itself before
the submission is imported. From that import on, nothing in this process can be trusted: the harness
only ever reads plain data from it, through `protocol`, and checks every message it gets.

A worker is forked for each test by the zygote (`forking`), with the submission already compiled (by
`loader`), and serves one harness (`grader.harness.client.WorkerClient`) over two pipes. The objects it
hands the harness, and how values cross, are its `objects.ObjectTable`'s.
"""

from __future__ import annotations

import builtins
import importlib.util
import signal
import sys
import time
import traceback
from typing import Any

from grader.confined import protocol
from grader.confined.objects import ObjectTable
from grader.confined.tracing import Tracer
from grader.confined.values import MAX_ITEMS, Group, TooBig, read_attributes, read_columns

MAX_TEXT = 4_000  # characters of an exception message


class Worker(ObjectTable):
    """Serves one harness: imports the submission (or is handed it), then answers its calls and runs its
    scenarios on the submission's objects (kept in the `ObjectTable` it is), one reply a request."""

    def __init__(self, submission: str, module_name: str, fd_in: int, fd_out: int, code: Any = None,
                 module: Any = None) -> None:
        super().__init__()
        self.submission = submission
        self.code = code  # the submission compiled by the zygote, or None: compile it here
        self.module_name = module_name
        self.fd_in, self.fd_out = fd_in, fd_out
        self.inbox = protocol.Inbox(fd_in)
        self.module: Any = module  # the submission imported by the loader this worker was forked from
        self.pending: list[str] = []  # a running scenario's observations not sent yet, as JSON text
        self.pending_size = 0
        self.last_frame = 0.0
        self.in_op = False  # the submission's code of a scenario's operation is running
        self.refused = False
        self.tracer: Tracer | None = None  # what of the submission runs, while an audit asks for it

    # -- the loop ------------------------------------------------------------------------------------
    def reply(self, body: dict[str, Any], results: tuple[str, list[str]] | None = None) -> bool:
        """Send `body` with the news about objects; False when it was refused as too large and a refusal
        went instead. `results`, for a scenario: (a key, observations already in JSON text) to add."""
        body[protocol.OBJS], body[protocol.TYPES] = self.changed, self.new_types
        if self.same:
            body[protocol.SAME] = self.same
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        sent = True
        try:
            if results is None:
                frame = protocol.encode(body)
            else:
                key, texts = results
                text = f'{{"{key}":[{",".join(texts)}],' + protocol.COMPACT.encode(body)[1:]
                frame = protocol.frame(text.encode("utf-8"))
        except Exception as exc:  # too large for the wire, or (from a tampered value) not plain data
            frame, sent = self.refusal(exc), False
        self.changed, self.new_types, self.new_handles, self.previous, self.same = {}, {}, [], {}, []
        self.changed_bytes = 0
        protocol.write_frame(self.fd_out, frame)
        return sent

    def refusal(self, exc: Exception) -> bytes:
        """The frame that replaces a reply that cannot be sent: what was too large, and only the news the
        harness must have, the rest of the reply's news taken back (`take_back`)."""
        self.take_back()
        what = (f"a reply of {exc.size:,} bytes (at most {protocol.MAX_MESSAGE_BYTES:,})"
                if isinstance(exc, protocol.TooLarge) else "a value that is not plain data")
        try:
            return protocol.encode({protocol.TOO_BIG: what, protocol.OBJS: self.changed, protocol.TYPES: {}})
        except Exception:
            return protocol.encode({protocol.FATAL: f"the grader could not send the attributes of your objects ({what})",
                                    protocol.OBJS: {}, protocol.TYPES: {}})

    def describe(self, exc: BaseException) -> dict[str, Any]:
        try:
            message = str.__str__(str(exc))[:MAX_TEXT]
        except Exception:
            message = "(the exception's message could not be read)"
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == self.submission]
        return {
            protocol.EXC_TYPE: str.__str__(type(exc).__name__)[:200],
            protocol.EXC_MRO: [str.__str__(k.__name__)[:200] for k in type(exc).__mro__][:64],
            # Which of them are Python's own (a class of the submission's may be called ValueError too).
            protocol.EXC_BUILTIN: [k.__name__ for k in type(exc).__mro__ if getattr(builtins, k.__name__, None) is k][:64],
            protocol.EXC_MESSAGE: message,
            protocol.EXC_TRACEBACK: [f"line {f.lineno}, in {f.name}: {(f.line or '').strip()}"[:300] for f in frames[-8:]],
        }

    def import_submission(self) -> None:
        spec = importlib.util.spec_from_file_location(self.module_name, self.submission)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[self.module_name] = module
        if self.code is None:
            spec.loader.exec_module(module)
        else:  # what exec_module does once the file is compiled
            exec(self.code, module.__dict__)
        self.module = module

    def serve(self) -> None:
        try:
            if self.module is None:
                self.import_submission()
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included: all are the student's
            self.reply({protocol.IMPORT_ERROR: self.describe(exc)})
            return
        self.reply({protocol.READY: True})
        while True:
            try:
                request = self.inbox.receive()
            except protocol.PeerClosed:
                return
            if request.get(protocol.OP) == protocol.OP_SCENARIO:
                self.run_scenario(request[protocol.OPS], float(request[protocol.BEAT]))
                continue
            if request.get(protocol.OP) == protocol.OP_LINES:  # plain numbers, never a kept list
                self.reply(self.stop_tracing())
                continue
            kept = False
            try:
                self.watch(request.get(protocol.WATCH, ()))
                result = self.perform(request)
                body = {protocol.OK: self.encode(result)}
                self.freshen()
                if type(result) is list and self.unchangeable_items(result):
                    body[protocol.OK], kept = {protocol.KEPT: [self.next_kept, body[protocol.OK]]}, True
            except TooBig as exc:
                body = {protocol.TOO_BIG: str(exc)}
                self.touched, self.watched = {}, set()
            except BaseException as exc:
                try:
                    self.freshen()
                except BaseException:
                    pass
                body = {protocol.EXC: self.describe(exc)}
            if self.reply(body) and kept:
                self.keep(result)

    # -- scenarios: many operations in one message ---------------------------------------------------
    def run_scenario(self, ops: list[Any], beat: float) -> None:
        """Run the operations in order, sending their results as plain data in frames of about
        SCENARIO_CHUNK_BYTES, and what is done at least every `beat` seconds: after an operation, or from
        a timer while the submission's code runs, so that the harness, which times each operation from
        the last frame, knows which one is running. The last frame (`protocol.END`) says how it ended; an
        exception (or a value too large) stops the scenario at its step."""
        self.slots, self.pending, self.pending_size, self.refused = [], [], 0, False
        self.last_frame = time.monotonic()
        items = 0
        ending: dict[str, Any] = {}
        previous = signal.signal(signal.SIGALRM, self.on_beat)
        signal.setitimer(signal.ITIMER_REAL, beat, beat)
        try:
            for at, op in enumerate(ops[:protocol.MAX_SCENARIO_OPS]):
                try:
                    value, observed = self.scenario_step(op)
                    if self.refused:
                        return  # a frame sent from the timer was refused as too large: that ended it
                    budget = [MAX_ITEMS]
                    text = protocol.COMPACT.encode(self.encode(observed, budget=budget))
                    items += MAX_ITEMS - budget[0]
                    if items > protocol.MAX_SCENARIO_ITEMS:
                        raise TooBig(f"results with more than {protocol.MAX_SCENARIO_ITEMS:,} values in all")
                    if len(text) > protocol.MAX_MESSAGE_BYTES // 2:
                        raise TooBig(f"a value of {len(text):,} bytes")
                except TooBig as exc:
                    ending = {protocol.TOO_BIG: str(exc), protocol.AT: at}
                    break
                except BaseException as exc:
                    if self.refused:
                        return
                    ending = {protocol.EXC: self.describe(exc), protocol.AT: at}
                    break
                finally:
                    self.in_op = False
                    self.touched = {}
                self.slots.append(value)
                self.pending.append(text)
                self.pending_size += len(text) + 1
                if (self.pending_size + self.changed_bytes > protocol.SCENARIO_CHUNK_BYTES
                        or time.monotonic() - self.last_frame >= beat) and not self.flush():
                    return
            self.reply(ending, (protocol.END, self.pending))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            self.slots, self.pending = [], []

    def flush(self) -> bool:
        """Send the results so far as a part of the scenario; False if it was refused (too large)."""
        sent = self.reply({}, (protocol.PART, self.pending))
        self.pending, self.pending_size, self.last_frame = [], 0, time.monotonic()
        self.refused = self.refused or not sent
        return sent

    def on_beat(self, signum: int, frame: Any) -> None:
        # Only while the submission's own code runs: then nothing of this side is half-done.
        if self.in_op and self.pending and not self.refused:
            self.in_op = False
            try:
                self.flush()
            finally:
                self.in_op = not self.refused

    # -- the lines and arcs that ran (an audit's grading of a correct solution alone) ----------------
    def start_tracing(self) -> None:
        """Record the lines and arcs of the submission's file that run from now on (`tracing.Tracer`)."""
        self.tracer = Tracer(self.submission)
        self.tracer.start()

    def stop_tracing(self) -> dict[str, Any]:
        """The reply to OP_LINES: what ran since `start_tracing` (nothing, when it was not asked)."""
        tracer, self.tracer = self.tracer, None
        if tracer is None:
            return {protocol.OK: [], protocol.ARCS: []}
        lines, arcs = tracer.stop(protocol.MAX_LINES, protocol.MAX_ARCS)
        return {protocol.OK: lines, protocol.ARCS: arcs}

    def scenario_step(self, op: list[Any]) -> tuple[Any, Any]:
        """(the value an operation gives later ones, what the harness is told of it)."""
        kind = op[0]
        if kind == protocol.STEP_NEW:
            name, args, kwargs = op[1], op[2], op[3]
            if not hasattr(self.module, name):
                raise AttributeError(f"your file does not define {name!r}")
            function = getattr(self.module, name)
            args, kwargs = self.decode(args), {k: self.decode(v) for k, v in kwargs.items()}
            self.in_op = True  # the constructor and what `constructed` asks of its class are the submission's
            value = self.constructed(function, function(*args, **kwargs))
            self.in_op = False
            return value, value
        if kind == protocol.STEP_GROUP:
            members = Group()
            for part in self.decode(op[1]):
                members.extend(part) if type(part) is Group else members.append(part)
            return members, None
        target = self.decode(op[1])
        if kind == protocol.STEP_CALL:
            args, kwargs = self.decode(op[3]), {k: self.decode(v) for k, v in op[4].items()}
            method = getattr(target, op[2])
            self.in_op = True
            value = method(*args, **kwargs)
            self.in_op = False
            return value, value
        if kind in (protocol.STEP_READ, protocol.STEP_COLUMNS):  # properties are the submission's code
            self.in_op = True
            found = read_columns(target, op[2]) if kind == protocol.STEP_COLUMNS else read_attributes(target, op[2])
            self.in_op = False
            return found, found
        raise ValueError(f"unknown operation {kind!r}")

    def perform(self, request: dict[str, Any]) -> Any:
        op = request[protocol.OP]
        if op == protocol.OP_TRACE:
            self.start_tracing()
            return None
        if op == protocol.OP_NAME:
            name = request[protocol.NAME]
            if not hasattr(self.module, name):
                raise AttributeError(f"your file does not define {name!r}")
            return getattr(self.module, name)
        target = self.handles[request[protocol.TARGET]]
        self.touched[request[protocol.TARGET]] = None
        if op == protocol.OP_SNAP:  # a fresh snapshot of the target, nothing else
            return None
        if op == protocol.OP_GETATTR:
            return getattr(target, request[protocol.NAME])
        args = self.decode(request.get(protocol.ARGS, []))
        kwargs = {k: self.decode(v) for k, v in request.get(protocol.KWARGS, {}).items()}
        if op == protocol.OP_CALL:
            return self.constructed(target, target(*args, **kwargs))
        if op == protocol.OP_METHOD:
            return getattr(target, request[protocol.NAME])(*args, **kwargs)
        raise ValueError(f"unknown operation {op!r}")
