"""The submission's objects as the harness knows them: a worker's table of what it handed over.

Each object the harness holds has a handle here (which keeps it alive), its type a number with the
type's public methods, and a snapshot of its plain public attributes, sent with it and refreshed after
each call, within bounds on what the harness keeps. A value is encoded against the table (builtin scalars
and containers as plain data, read as `values` reads them; any other object as its handle), and the
harness's arguments are decoded back into the submission's own objects. What a reply reports of new
objects, new types and fresh snapshots is its news; a reply refused as too large takes its news back.
"""

from __future__ import annotations

import collections
from typing import Any

from grader.confined import protocol
from grader.confined.values import (
    MAX_ITEMS,
    NOT_KEPT,
    ROW_SCALARS,
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
    same_snapshot,
    small_ints,
    snapshot_size,
    spend,
)

MAX_NAMES_READ = 256  # public names of one object read for its snapshot (each read may run its code)
WATCH_BYTES = 1 << 20  # about how much of a reply the prefetched snapshots of watched objects may take


class ObjectTable:
    """The objects handed to the harness, their types and snapshots, and the news of the next reply."""

    def __init__(self) -> None:
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

    def take_back(self) -> None:
        """Forget the news of a reply that cannot be sent: the objects and types first met in it, as if
        never sent, and the snapshots refreshed for it taken back (the harness reads them again on demand)."""
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

