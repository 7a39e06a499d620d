"""The untrusted side: a process that imports the submission and answers calls on its objects.

It runs as its own (unprivileged, where possible) user, under resource limits it sets on itself before
the submission is imported. From that import on, nothing in this process can be trusted: the harness
only ever reads plain data from it, through `protocol`, and checks every message it gets.

A worker is forked for each test by the zygote (`forking`), with the submission already compiled (by
`loader`), and serves one harness (`grader.harness.client.WorkerClient`) over two pipes.
"""

from __future__ import annotations

import builtins
import collections
import importlib.util
import signal
import sys
import time
import traceback
from typing import Any

from grader.confined import protocol
from grader.confined.values import (
    MAX_ITEMS,
    NOT_KEPT,
    ROW_SCALARS,
    Group,
    TooBig,
    adds_methods,
    base_items,
    check_scalar,
    container_base,
    has_own_attributes,
    keep_attribute,
    packed,
    plain_scalar,
    public_methods,
    read_attributes,
    read_columns,
    same_snapshot,
    small_ints,
    snapshot_size,
    spend,
)

MAX_TEXT = 4_000  # characters of an exception message
MAX_NAMES_READ = 256  # public names of one object read for its snapshot (each read may run its code)
WATCH_BYTES = 1 << 20  # about how much of a reply the prefetched snapshots of watched objects may take


class Worker:
    def __init__(self, submission: str, module_name: str, fd_in: int, fd_out: int, code: Any = None,
                 module: Any = None) -> None:
        self.submission = submission
        self.code = code  # the submission compiled by the zygote, or None: compile it here
        self.module_name = module_name
        self.fd_in, self.fd_out = fd_in, fd_out
        self.inbox = protocol.Inbox(fd_in)
        self.module: Any = module  # the submission imported by the loader this worker was forked from
        self.handles: dict[int, Any] = {}  # handle -> object, keeps each object alive
        self.handle_of: dict[int, int] = {}  # id(object) -> handle
        self.next_handle = 1
        self.snapshots: dict[int, dict[str, Any]] = {}  # what the harness was last told
        self.kept_attrs = 0  # attributes in all snapshots the harness holds
        self.kept_chars = 0  # characters of string attributes in them
        self.type_ids: dict[int, int] = {}  # id(type) -> type number
        self.object_types: set[type] = set()  # types found to subclass no builtin scalar or container
        self.types_kept: list[type] = []  # keeps id(type) keys valid
        self.kinds: dict[int, tuple[bool, list[str]]] = {}
        self.new_types: dict[str, Any] = {}
        self.changed: dict[str, Any] = {}
        self.new_handles: list[int] = []  # handles made since the last reply (undone if it cannot be sent)
        # Objects whose fresh snapshot rides with the next reply: those in its result, the call's target,
        # and the ones the harness asks to watch. Nothing else is re-read, so a call costs the
        # same however many objects the harness holds.
        self.touched: dict[int, None] = {}
        self.watched: set[int] = set()
        self.changed_bytes = 0  # about the size of the snapshots in `changed`, for a scenario's frames
        self.slots: list[Any] = []  # the results of a running scenario's operations so far
        self.pending: list[str] = []  # their observations not sent yet, as JSON text
        self.pending_size = 0
        self.last_frame = 0.0
        self.in_op = False  # the submission's code of a scenario's operation is running
        self.refused = False
        self.previous: dict[int, dict[str, Any]] = {}  # snapshots replaced in this reply (restored if refused)
        self.same: list[int] = []  # objects re-read for this reply whose snapshot the harness has already
        self.kept: dict[int, list[Any]] = {}  # serial -> a list a call returned (`protocol.KEPT`), the last few
        self.next_kept = 0

    # -- encoding (objects of the submission -> plain data) ----------------------------------------
    def encode(self, value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
        """Plain data for the harness. Builtin scalars and containers (and subclasses of them, in their
        base type's form) cross as data; anything else as a handle to the object, which stays here."""
        budget = budget if budget is not None else [MAX_ITEMS]
        spend(budget, 1)
        if depth > protocol.MAX_DEPTH:
            raise TooBig(f"a value nested more than {protocol.MAX_DEPTH} levels deep")
        kind = type(value)
        # The common shapes first (a plan is a list of (object, int) tuples): the same result, sooner.
        if kind is int or kind is str:
            return check_scalar(value)
        if kind is bool or kind is float or value is None:
            return value
        if kind is list:
            return self.encode_list(value, depth, budget)
        if kind in self.object_types:  # an object of a type seen before to be no builtin's subclass
            return {protocol.REF: self.handle(value)}
        if kind is tuple:
            return {protocol.TUPLE: [self.encode(v, depth + 1, budget) for v in value]}
        scalar = plain_scalar(value)
        if scalar is not NOT_KEPT:
            return check_scalar(scalar)
        found = base_items(value)
        if found is None:
            if len(self.object_types) < protocol.MAX_TYPES:
                self.object_types.add(kind)
            return {protocol.REF: self.handle(value)}
        kind, items = found
        if kind is dict:
            data: Any = {protocol.DICT: [[self.encode(k, depth + 1, budget), self.encode(v, depth + 1, budget)]
                                         for k, v in items]}
        else:
            if kind is list:
                data = self.encode_list(items, depth, budget)
            else:
                inner = [self.encode(v, depth + 1, budget) for v in items]
                data = {protocol.TUPLE if kind is tuple else protocol.SET: inner}
        if type(value) in (list, tuple, dict, set, frozenset, collections.deque) or not items or kind is set:
            return data
        # A namedtuple, a list subclass...: the harness gets the base type's value, and the handle of the
        # original, so that passing the value back hands the submission its own object.
        return {protocol.AS: [self.handle(value), data]}

    def encode_list(self, value: list[Any], depth: int, budget: list[int]) -> Any:
        """A list's elements. The common lists (counts, a queue of requests, a plan) in one pass over
        their types, with the value their elements one by one would give."""
        if value and depth + 2 <= protocol.MAX_DEPTH:
            kinds = set(map(type, value))
            if kinds == {int} and small_ints(value):
                spend(budget, len(value))  # a column of counts: nothing to encode one by one
                return list(value)
            if len(value) > 1 and kinds <= self.object_types:
                spend(budget, len(value))
                return {protocol.REFS: self.handles_of(value)}
            if len(value) > 1 and kinds == {tuple} and (rows := self.rows(value, budget)) is not None:
                return rows
        return packed([self.encode(v, depth + 1, budget) for v in value])

    def rows(self, value: list[Any], budget: list[int]) -> Any:
        """A list of same-length tuples of scalars and objects of known types as its columns
        (`protocol.ROWS`), one pass a column instead of a call an element; None for any other list
        (then encoded element by element, which gives the harness the same value)."""
        if set(map(type, value)) != {tuple}:  # tuples exactly: a namedtuple travels with its original
            return None
        width = len(value[0])
        if not 0 < width <= protocol.MAX_ROW_WIDTH or set(map(len, value)) != {width}:
            return None
        refs: list[int] = []
        flat: list[Any] = []
        for at, column in enumerate(zip(*value)):
            kinds = set(map(type, column))
            if kinds <= self.object_types:
                refs.append(at)
                flat.extend(self.handles_of(column))
            elif kinds <= ROW_SCALARS and (int not in kinds or small_ints([v for v in column if type(v) is int])) \
                    and (str not in kinds or max(len(v) for v in column if type(v) is str) <= protocol.MAX_STRING_CHARS):
                flat.extend(column)
            else:
                return None
        spend(budget, len(value) * (width + 1))  # as many as the tuples one by one would count
        return {protocol.ROWS: [width, refs, flat]}

    def handles_of(self, objects: Any) -> list[int]:
        """`handle` of each object, in order: when all have one already (a scenario reading the same
        requests step after step), in one pass instead of a call each."""
        numbers: list[Any] = list(map(self.handle_of.get, map(id, objects)))
        if None in numbers:
            return list(map(self.handle, objects))
        self.touched.update(dict.fromkeys(numbers))
        return numbers

    def handle(self, obj: Any) -> int:
        key = id(obj)
        if key in self.handle_of:
            number = self.handle_of[key]
            self.touched[number] = None
            return number
        if len(self.handles) >= protocol.MAX_HANDLES:
            raise TooBig(f"more than {protocol.MAX_HANDLES:,} of your objects at once")
        kind = type(obj)
        is_callable = callable(obj)
        snapshot = {} if isinstance(obj, type) or is_callable else self.snapshot(obj)
        if id(kind) not in self.type_ids:
            if len(self.types_kept) >= protocol.MAX_TYPES:
                raise TooBig(f"objects of more than {protocol.MAX_TYPES:,} different types")
            self.type_ids[id(kind)] = len(self.types_kept) + 1
            self.types_kept.append(kind)
            name = getattr(kind, "__qualname__", None)
            self.new_types[str(self.type_ids[id(kind)])] = {
                protocol.TYPE_NAME: plain_scalar(name)[:200] if isinstance(name, str) else "object",
                protocol.TYPE_METHODS: public_methods(kind)[:protocol.MAX_METHODS],
            }
        try:
            self.account(snapshot, +1)
        except TooBig:
            snapshot = {}  # past the bound, the harness reads this object's attributes on demand
        number = self.next_handle
        self.next_handle += 1
        self.handles[number] = obj
        self.handle_of[key] = number
        self.new_handles.append(number)
        if snapshot or not (isinstance(obj, type) or is_callable):
            self.snapshots[number] = snapshot
        self.changed[str(number)] = {
            protocol.OBJ_TYPE: self.type_ids[id(kind)], protocol.OBJ_CALLABLE: is_callable, protocol.OBJ_ATTRS: snapshot}
        self.changed_bytes += snapshot_size(snapshot)
        return number

    def account(self, snapshot: dict[str, Any], sign: int) -> None:
        """Count a snapshot in (+1) or out (-1) of what the harness keeps; refuse to keep past the bounds."""
        attrs = len(snapshot) * sign
        chars = sum(len(v) for v in snapshot.values() if type(v) is str) * sign
        if sign > 0 and self.kept_attrs + attrs > protocol.MAX_KEPT_ATTRS:
            raise TooBig(f"objects with more than {protocol.MAX_KEPT_ATTRS:,} attributes in all")
        if sign > 0 and self.kept_chars + chars > protocol.MAX_KEPT_CHARS:
            raise TooBig(f"objects whose text attributes hold more than {protocol.MAX_KEPT_CHARS:,} characters in all")
        self.kept_attrs += attrs
        self.kept_chars += chars

    def snapshot(self, obj: Any) -> dict[str, Any]:
        """Public attributes holding scalars, as getattr reads them (properties and slots included).

        At most MAX_ATTRS are kept, strings of at most MAX_ATTR_CHARS: the harness reads any other
        attribute on demand, so a bound here costs a remote read, never a wrong value."""
        plain, described = self.attribute_names(type(obj))
        attrs: dict[str, Any] = {}
        if plain:
            # The common case, a plain class: its instance dict is exactly what getattr would read.
            try:
                instance = object.__getattribute__(obj, "__dict__")
            except AttributeError:
                instance = None
            if type(instance) is dict:
                for name, value in list(instance.items())[:MAX_NAMES_READ]:
                    # The common attribute (a small int, a bool, a float, None under a plain name)
                    # kept here as `keep_attribute` would keep it, without a call for each.
                    kind = type(value)
                    if ((kind is int and value.bit_length() <= 64) or kind is bool or kind is float or value is None) \
                            and type(name) is str and name[:1] != "_" and len(name) <= 200:
                        if len(attrs) < protocol.MAX_ATTRS:
                            attrs[name] = value
                    else:
                        keep_attribute(attrs, name, value)
            if not described:
                return attrs
        names = described if plain else self.all_names(obj, described)
        for name in names[:MAX_NAMES_READ]:
            if len(attrs) >= protocol.MAX_ATTRS:
                break
            if name in attrs:
                continue
            try:
                value = getattr(obj, name)
            except Exception:
                continue
            keep_attribute(attrs, name, value)
        return attrs

    def attribute_names(self, kind: type) -> tuple[bool, list[str]]:
        """(whether instances can be read from their __dict__, the public slot and property names)."""
        key = id(kind)
        if key not in self.kinds:
            described: list[str] = []
            for klass in kind.__mro__:
                slots = klass.__dict__.get("__slots__", ())
                described += [slots] if isinstance(slots, str) else [n for n in slots if isinstance(n, str)]
                described += [n for n, v in klass.__dict__.items() if isinstance(v, property)]
            # Read on the class, this is the function its instances use, not a method bound to the class.
            getattribute: object = kind.__getattribute__
            plain = getattribute is object.__getattribute__
            self.kinds[key] = (plain, [n for n in dict.fromkeys(described) if not n.startswith("_")])
        return self.kinds[key]

    @staticmethod
    def all_names(obj: Any, described: list[str]) -> list[str]:
        try:
            instance = object.__getattribute__(obj, "__dict__")
            found = [n for n in instance if type(n) is str and not n.startswith("_")] if type(instance) is dict else []
        except AttributeError:
            found = []
        return list(dict.fromkeys(found + described))

    def freshen(self) -> None:
        """Queue fresh snapshots of the objects this reply concerns (`touched`); new ones already have one.

        Each is sent even when unchanged: the harness treats every other copy as stale after a call."""
        budget = WATCH_BYTES
        new = set(self.new_handles)
        touched, self.touched = self.touched, {}
        for number in touched:
            last = self.snapshots.get(number)
            if last is None or number in new:
                continue
            current = self.snapshot(self.handles[number])
            if same_snapshot(current, last):
                self.same.append(number)  # the harness is told its copy still holds, not sent it again
                continue
            if number in self.watched:
                budget -= snapshot_size(current)
                if budget < 0:
                    continue  # past the prefetch budget: the harness reads this one on demand
            self.account(last, -1)
            try:
                self.account(current, +1)
            except TooBig:
                current = {}  # past the bound, the harness reads this object's attributes on demand
            self.previous.setdefault(number, last)
            self.snapshots[number] = current
            entry = self.changed.setdefault(str(number), {})
            entry[protocol.OBJ_ATTRS] = current
        self.watched = set()

    # -- decoding (harness arguments -> values here) -----------------------------------------------
    def decode(self, value: Any) -> Any:
        if type(value) is list:
            return [self.decode(v) for v in value]
        if type(value) is dict:
            ((tag, inner),) = value.items()
            if tag == protocol.REF:
                return self.handles[inner]
            if tag == protocol.SLOT:
                return self.slots[inner]
            if tag == protocol.SLOTS:
                return [self.slots[i] for i in inner]
            if tag == protocol.KEPT:
                if inner not in self.kept:
                    raise ValueError(f"list {inner!r} is no longer kept")
                return self.kept[inner]
            if tag == protocol.TUPLE:
                return tuple(self.decode(v) for v in inner)
            if tag == protocol.SET:
                return {self.decode(v) for v in inner}
            if tag == protocol.DICT:
                return {self.decode(k): self.decode(v) for k, v in inner}
            raise ValueError(f"unknown tag {tag!r}")
        return value

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
        harness must have; the objects and types first met in this reply are forgotten, as if never sent,
        and the snapshots refreshed for it are taken back (the harness reads them again on demand)."""
        for number in self.new_handles:
            self.account(self.snapshots.pop(number, {}), -1)
            del self.handle_of[id(self.handles.pop(number))]
            self.changed.pop(str(number), None)
        for number in sorted(map(int, self.new_types), reverse=True):
            del self.type_ids[id(self.types_kept.pop(number - 1))]
        for number, last in self.previous.items():  # the harness keeps its copies: so does the count here
            self.account(self.snapshots[number], -1)
            self.account(last, +1)
            self.snapshots[number] = last
            self.changed.pop(str(number), None)
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

    def unchangeable_items(self, value: list[Any]) -> bool:
        """Whether a list holds nothing a test could change in place: scalars, objects (proxies on the
        harness's side) and tuples of those. Passed back, such a list is sent as its serial only while
        the harness's copy holds the same elements, so its elements must not change unseen."""
        objects = self.object_types
        for item in value:
            kind = type(item)
            if kind is tuple:
                for part in item:
                    if type(part) not in ROW_SCALARS and type(part) not in objects:
                        return False
            elif kind not in ROW_SCALARS and kind not in objects:
                return False
        return True

    def keep(self, value: list[Any]) -> None:
        """Keep a list the harness now knows by its serial (`protocol.KEPT`), and only the last few."""
        self.kept[self.next_kept] = value
        self.next_kept += 1
        if len(self.kept) > protocol.KEPT_LISTS:
            del self.kept[next(iter(self.kept))]

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

    def constructed(self, maker: Any, value: Any) -> Any:
        """What a class of the submission made is the object a test works with: when its class builds on a
        builtin container (`class BlockManager(dict)`, `class Req(list)`) and adds methods or attributes
        of its own, its objects cross as objects (the test calls their methods, reads their attributes),
        not as the container's items, as other subclasses (a namedtuple) do."""
        kind = type(value)
        if isinstance(maker, type) and kind not in self.object_types and len(self.object_types) < protocol.MAX_TYPES \
                and container_base(kind) is not None and (adds_methods(kind) or has_own_attributes(value)):
            self.object_types.add(kind)
        return value

    def watch(self, handles: Any) -> None:
        """Objects the harness read since its last call: their snapshots ride along (prefetched), within
        WATCH_BYTES, since a test that read them is likely to read them again."""
        self.watched = {n for n in handles[:protocol.MAX_WATCH] if n in self.snapshots}
        self.touched.update(dict.fromkeys(self.watched))

    def perform(self, request: dict[str, Any]) -> Any:
        op = request[protocol.OP]
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
