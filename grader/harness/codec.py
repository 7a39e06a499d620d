"""The harness's side of the values that cross the wire: the worker's plain data decoded into proxies
and copies, and a test's values encoded for the worker.

Everything decoded here is checked against the shapes and bounds of `protocol` (a worker that sends
anything else has broken the protocol), so the trusted side's memory stays bounded and nothing the
submission wrote is ever more than data. The tables (proxies, types, kept lists, subclass values) are
one worker's: a proxy of another worker's is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from grader.confined import protocol
from grader.harness.channel import Channel
from grader.harness.proxies import RemoteObject, TypeInfo
from grader.harness.scenario import Slot
from grader.harness.stops import RemoteException

Violation = Callable[[str, str], NoReturn]  # (during what, what was wrong): ends the worker, raises


class Codec:
    """One worker's proxies and copies, and the encoding of what a test sends it."""

    def __init__(self, channel: Channel, violation: Violation) -> None:
        self.channel = channel  # the worker's: its proxies hold it, and only its proxies are sent back
        self.violation = violation
        self.proxies: dict[int, RemoteObject] = {}
        self.types: dict[int, TypeInfo] = {}
        self.kept_attrs = self.kept_chars = 0  # in all proxies' attribute copies, bounded like the worker's
        # Values of builtin-type subclasses (a namedtuple...) in their base form, with their original's handle:
        # id(value) -> (value, handle, its elements when decoded); handle -> the value last decoded for it.
        self.originals: dict[int, tuple[Any, int, tuple[Any, ...]]] = {}
        self.original_of: dict[int, Any] = {}
        # Lists the submission returned, kept by the worker too (`protocol.KEPT`), the last few:
        # id(list) -> (the list, its serial, its elements when decoded).
        self.kept: dict[int, tuple[list[Any], int, tuple[Any, ...]]] = {}
        self.remembered_items = 0  # elements of the originals and kept lists, within MAX_REMEMBERED_ITEMS
        self.decode_budget: int | None = None  # values a running scenario may still receive
        self.building: object = None  # the scenario whose operation is being encoded (`encode_step`)

    def result(self, value: Any, where: str) -> Any:
        """A call's result. A list the worker keeps (`protocol.KEPT`) is remembered with its serial, so
        that passed back unchanged it is the submission's very list again, as `complete(schedule())`
        would be in-process."""
        if type(value) is not dict or len(value) != 1 or protocol.KEPT not in value:
            return self.decode(value, where)
        body = value[protocol.KEPT]
        if type(body) is not list or len(body) != 2 or type(body[0]) is not int:
            self.violation(where, "a malformed kept list")
        found = self.decode(body[1], where)
        if type(found) is not list:
            self.violation(where, "a kept value that is not a list")
        serial = body[0]
        # The worker keeps the last KEPT_LISTS serials: those before them it has let go.
        for key, (_, older, items) in list(self.kept.items()):
            if older <= serial - protocol.KEPT_LISTS:
                del self.kept[key]
                self.remembered_items -= len(items)
        # Kept here only as the worker says it keeps it (nothing a test could change inside), and within
        # the bound: any other list passed back goes as a copy.
        items = tuple(found)
        if self.remembered_items + len(items) <= protocol.MAX_REMEMBERED_ITEMS and _unchangeable(items, self.channel):
            self.kept[id(found)] = (found, serial, items)
            self.remembered_items += len(items)
        return found

    def remote_exception(self, body: Any, where: str) -> RemoteException:
        try:
            return RemoteException(
                type_name=_text(body[protocol.EXC_TYPE], 200), lineage=[_text(n, 200) for n in body[protocol.EXC_MRO]][:64],
                builtin=[_text(n, 200) for n in body[protocol.EXC_BUILTIN]][:64],
                message=_text(body[protocol.EXC_MESSAGE], 4000),
                traceback=[_text(t, 300) for t in body[protocol.EXC_TRACEBACK]][:16],
                where=where,
            )
        except (KeyError, TypeError, ValueError):
            self.violation(where, "a malformed exception report")
            raise  # unreachable

    def absorb(self, message: dict[str, Any], where: str) -> None:
        """Take in new types and fresh attribute snapshots that ride along with every reply."""
        try:
            for number, info in message.get(protocol.TYPES, {}).items():
                if len(self.types) >= protocol.MAX_TYPES or len(info[protocol.TYPE_METHODS]) > protocol.MAX_METHODS:
                    raise ValueError("more types or methods than the bounds")
                self.types[int(number)] = TypeInfo(_text(info[protocol.TYPE_NAME], 200),
                                                   frozenset(_text(m, 200) for m in info[protocol.TYPE_METHODS]))
            for number, info in message.get(protocol.OBJS, {}).items():
                handle = int(number)
                proxy = self.proxies.get(handle)
                attrs = info[protocol.OBJ_ATTRS]
                kinds = set(map(type, attrs.values())) if type(attrs) is dict else {dict}
                if len(attrs) > protocol.MAX_ATTRS or not _SCALAR_TYPES.issuperset(kinds):
                    raise ValueError("attributes must be scalars")
                if str in kinds and any(type(v) is str and len(v) > protocol.MAX_ATTR_CHARS for v in attrs.values()):
                    raise ValueError("an attribute past the bound")
                if proxy is None:
                    if len(self.proxies) >= protocol.MAX_HANDLES:
                        raise ValueError("more objects than the bound")
                    type_info = self.types[int(info[protocol.OBJ_TYPE])]
                    proxy = RemoteObject(self.channel, handle, type_info, bool(info[protocol.OBJ_CALLABLE]))
                    self.proxies[handle] = proxy
                self._keep_attrs(proxy, attrs)
                object.__setattr__(proxy, "_epoch", self.channel.epoch)
            same = message.get(protocol.SAME, [])
            if type(same) is not list or len(same) > protocol.MAX_HANDLES:
                raise ValueError("a malformed list of unchanged objects")
            for handle in same:  # re-read by this reply and unchanged: the copy here holds for this epoch
                if type(handle) is not int:
                    raise ValueError("a malformed list of unchanged objects")
                object.__setattr__(self.proxies[handle], "_epoch", self.channel.epoch)
        except (KeyError, TypeError, ValueError, AttributeError):
            self.violation(where, "malformed object snapshots")

    def _keep_attrs(self, proxy: RemoteObject, attrs: dict[str, Any]) -> None:
        """Replace a proxy's attribute copies, within the per-worker bounds the worker also keeps."""
        old = object.__getattribute__(proxy, "_attrs")
        attrs_after = self.kept_attrs - len(old) + len(attrs)
        chars_after = self.kept_chars - _chars(old) + _chars(attrs)
        if attrs_after > protocol.MAX_KEPT_ATTRS or chars_after > protocol.MAX_KEPT_CHARS:
            raise ValueError("more attributes than the bounds")
        self.kept_attrs, self.kept_chars = attrs_after, chars_after
        object.__setattr__(proxy, "_attrs", attrs)

    # -- values --------------------------------------------------------------------------------------
    def decode(self, value: Any, where: str, depth: int = 0) -> Any:
        if depth > protocol.MAX_DEPTH:
            self.violation(where, "a value nested too deeply")
        self._spend(1, where)
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is list:
            if _flat(value):  # the common case, a list of numbers or names: nothing to decode inside
                self._spend(len(value), where)
                return value
            return self._elements(value, where, depth)
        if kind is dict and len(value) == 1:
            ((tag, inner),) = value.items()
            if tag == protocol.REF and type(inner) is int and inner in self.proxies:
                return self.proxies[inner]
            if tag == protocol.REFS and type(inner) is list:
                return self._decode_refs(inner, where)
            if tag == protocol.TUPLE and type(inner) is list and _flat(inner):
                self._spend(len(inner), where)
                return tuple(inner)
            if tag == protocol.DICT and type(inner) is list and _flat_pairs(inner):
                self._spend(2 * len(inner), where)
                return {k: v for k, v in inner}
            if tag == protocol.AS and type(inner) is list and len(inner) == 2 and type(inner[0]) is int \
                    and inner[0] in self.proxies:
                return self._original(inner[0], self.decode(inner[1], where, depth + 1))
            if tag == protocol.ROWS and type(inner) is list:
                return self._rows(inner, where)
            if tag == protocol.TUPLE and type(inner) is list:
                return tuple(self._elements(inner, where, depth))
            if tag == protocol.SET and type(inner) is list:
                try:
                    return {self.decode(v, where, depth + 1) for v in inner}
                except TypeError:
                    self.violation(where, "an unhashable set element")
            if tag == protocol.DICT and type(inner) is list:
                try:
                    return {self.decode(k, where, depth + 1): self.decode(v, where, depth + 1) for k, v in inner}
                except (TypeError, ValueError):
                    self.violation(where, "a malformed dict")
        self.violation(where, "a value of unknown shape")

    def _elements(self, values: list[Any], where: str, depth: int) -> list[Any]:
        """A list's or tuple's elements: scalars and handles (the bulk of a plan) taken as they are,
        anything else decoded in full."""
        proxies = self.proxies
        found = []
        plain = 0
        for value in values:
            kind = type(value)
            if kind in _SCALARS:
                plain += 1
                found.append(value)
            elif kind is dict and len(value) == 1 and type(handle := value.get(protocol.REF)) is int \
                    and handle in proxies:
                plain += 1
                found.append(proxies[handle])
            else:
                found.append(self.decode(value, where, depth + 1))
        self._spend(plain, where)
        return found

    def _rows(self, body: list[Any], where: str) -> list[tuple[Any, ...]]:
        """A list of tuples sent as its columns (`protocol.ROWS`), checked a column at a time."""
        if len(body) != 3 or type(body[0]) is not int or type(body[1]) is not list or type(body[2]) is not list:
            self.violation(where, "malformed rows")
        width, refs, flat = body
        if not 0 < width <= protocol.MAX_ROW_WIDTH or not flat or len(flat) % width or not _flat(flat) \
                or not all(type(at) is int and 0 <= at < width for at in refs) or len(set(refs)) != len(refs):
            self.violation(where, "malformed rows")
        count = len(flat) // width
        self._spend(count * (width + 1), where)
        columns = [flat[at * count:(at + 1) * count] for at in range(width)]
        for at in refs:
            if set(map(type, columns[at])) != {int}:
                self.violation(where, "rows with objects that were never sent")
            try:
                columns[at] = list(map(self.proxies.__getitem__, columns[at]))
            except KeyError:
                self.violation(where, "rows with objects that were never sent")
        return list(zip(*columns))

    def _decode_refs(self, handles: list[Any], where: str) -> list[Any]:
        self._spend(len(handles), where)
        if handles and set(map(type, handles)) != {int}:
            self.violation(where, "a list of objects that were never sent")
        try:
            return list(map(self.proxies.__getitem__, handles))
        except KeyError:
            self.violation(where, "a list of objects that were never sent")
            raise  # unreachable

    def _spend(self, count: int, where: str) -> None:
        if self.decode_budget is not None:
            self.decode_budget -= count
            if self.decode_budget < 0:
                self.violation(where, f"results with more than {protocol.MAX_SCENARIO_ITEMS:,} values")

    def _original(self, handle: int, value: Any) -> Any:
        """A subclass value in its base form, remembered with its original's handle. The same tuple
        again is the same object here too, as a proxy is."""
        if type(value) not in (list, tuple, dict) or not value:
            return value
        last = self.original_of.get(handle)
        if type(last) is tuple and type(value) is tuple and _same_items(last, value):
            return last
        if last is not None:
            del self.original_of[handle]
            self.remembered_items -= len(self.originals.pop(id(last))[2])
        items = _items(value)
        if self.remembered_items + len(items) > protocol.MAX_REMEMBERED_ITEMS:
            return value  # past the bound: passed back, it goes as a copy
        self.remembered_items += len(items)
        self.original_of[handle] = value
        self.originals[id(value)] = (value, handle, items)
        return value

    def encode_step(self, value: Any, scenario: object) -> Any:
        """A value of an operation of `scenario`, which is being built: its steps may stand in it, a
        list the worker keeps may not (it runs later, by when the worker may have let it go)."""
        self.building = scenario
        try:
            return self.encode(value)
        finally:
            self.building = None

    def encode(self, value: Any, depth: int = 0) -> Any:
        """Test-side values -> wire values. Proxies become handles; anything else must be plain data.
        A value that came from the worker as a subclass's base form (a namedtuple) goes back as the
        original object, unless the test changed it."""
        if depth > protocol.MAX_DEPTH:
            raise ValueError("the grader cannot send a value nested this deeply")
        kind = type(value)
        # A scalar or a scenario's step is never an original (only lists, tuples and dicts are): the
        # common arguments first.
        if kind in _SCALARS:
            return value
        if kind is Slot:
            return {protocol.SLOT: value.check(self.building)}
        original = self.originals.get(id(value))
        if original is not None and original[0] is value and _same_items(original[2], _items(value)):
            return {protocol.REF: original[1]}
        kept = self.kept.get(id(value))
        # Not in a scenario's operations: built now, run later, by when the worker may have let it go.
        if kept is not None and self.building is None and kept[0] is value and _same_items(kept[2], tuple(value)):
            return {protocol.KEPT: kept[1]}
        if isinstance(value, RemoteObject):
            if object.__getattribute__(value, "_channel") is not self.channel:
                raise ValueError("an object from another run of your code cannot be passed here")
            return {protocol.REF: object.__getattribute__(value, "_handle")}
        if kind is list:
            return [self.encode(v, depth + 1) for v in value]
        if kind is tuple:
            return {protocol.TUPLE: [self.encode(v, depth + 1) for v in value]}
        if kind in (set, frozenset):
            return {protocol.SET: [self.encode(v, depth + 1) for v in value]}
        if kind is dict:
            return {protocol.DICT: [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value.items()]}
        raise TypeError(f"the grader cannot send a {kind.__name__} to your code")



_SCALARS = (type(None), bool, int, float, str)


def _chars(attrs: dict[str, Any]) -> int:
    return sum(len(v) for v in attrs.values() if type(v) is str) if str in set(map(type, attrs.values())) else 0


def _unchangeable(items: tuple[Any, ...], channel: Channel) -> bool:
    """Whether a list's elements are scalars, proxies of `channel` and tuples of those: nothing a test
    could change without the list's own elements changing."""
    for item in items:
        for part in item if type(item) is tuple else (item,):
            if type(part) not in _SCALAR_TYPES and not (isinstance(part, RemoteObject)
                                                        and object.__getattribute__(part, "_channel") is channel):
                return False
    return True


def _items(value: Any) -> tuple[Any, ...]:
    return tuple(x for pair in value.items() for x in pair) if type(value) is dict else tuple(value)


def _same_items(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """The same elements, by identity for objects and by value (and exact type) for scalars."""
    return len(a) == len(b) and all(x is y or (type(x) is type(y) and type(x) in _SCALARS and x == y)
                                    for x, y in zip(a, b))


_SCALAR_TYPES = frozenset(_SCALARS)


def _flat(values: list[Any]) -> bool:
    """Whether a decoded JSON list holds scalars only (JSON gives no other scalar types)."""
    return _SCALAR_TYPES.issuperset(map(type, values))


def _flat_pairs(pairs: list[Any]) -> bool:
    """Whether a decoded dict's [key, value] pairs hold scalars only."""
    for pair in pairs:
        if type(pair) is not list or len(pair) != 2 or type(pair[0]) not in _SCALARS or type(pair[1]) not in _SCALARS:
            return False
    return True


def _text(value: Any, limit: int) -> str:
    if type(value) is not str:
        raise TypeError("expected text")
    return value[:limit]

