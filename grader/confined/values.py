"""The values that cross the wire from the worker's side, read so that the submission has no say:
scalars by their base types' own methods, containers by theirs, the bounds past which a value is too
big to carry, and the reads of the submission's objects' attributes that snapshots and scenarios make.
"""

from __future__ import annotations

import collections
from typing import Any

from grader.confined import protocol

SCALARS = (type(None), bool, int, float, str)
MAX_ITEMS = 100_000  # elements in one encoded value
NOT_KEPT = object()  # an attribute value the snapshot leaves to be read on demand


class TooBig(Exception):
    """A value the grader refuses to carry; the message says what it was ("an int with 5,000 digits")."""


def int_digits(value: int) -> int:
    """The number of decimal digits of `value`, without converting it to text (Python refuses past 4,300)."""
    magnitude = -value if value < 0 else value
    if magnitude < 10:
        return 1
    estimate = int(magnitude.bit_length() * 0.30102999566398120) + 1  # within one of the truth
    if estimate <= 100_000 and magnitude < 10 ** (estimate - 1):  # past that, within one is enough
        estimate -= 1
    return estimate


def plain_scalar(value: Any) -> Any:
    """A scalar of a builtin type (or of a subclass of one) as the base type's own value; NOT_KEPT else.

    The base type's own methods read the value, so an override (an `__eq__` that is always true, an
    `__int__` that lies) has no say: `EqInt(-1)` crosses as -1. A bool stays a bool."""
    kind = type(value)
    if kind in SCALARS:
        return value
    try:
        if issubclass(kind, int):  # bool cannot be subclassed, so this is never a bool
            return int.__index__(value)
        if issubclass(kind, float):
            return float.__float__(value)
        if issubclass(kind, str):
            return str.__str__(value)
    except Exception:  # a type whose layout lies about its base: keep it an object
        pass
    return NOT_KEPT


def keep_attribute(attrs: dict[str, Any], name: Any, value: Any) -> None:
    """Add an attribute to a snapshot if the harness may keep a copy of it (a scalar within the bounds,
    under a public name); any other is read on demand."""
    if type(name) is not str or name[:1] == "_" or len(attrs) >= protocol.MAX_ATTRS or len(name) > 200:
        return
    value = plain_scalar(value)
    if value is NOT_KEPT or (type(value) is str and len(value) > protocol.MAX_ATTR_CHARS):
        return
    if type(value) is int and value.bit_length() > 13_000 and int_digits(value) > protocol.MAX_INT_DIGITS:
        return
    attrs[name] = value


def spend(budget: list[int], count: int) -> None:
    """Count `count` elements of a value against its budget; TooBig past MAX_ITEMS."""
    budget[0] -= count
    if budget[0] < 0:
        raise TooBig(f"a value with more than {MAX_ITEMS:,} elements")


ROW_SCALARS = frozenset(SCALARS)  # what a column of a plan may hold besides objects


def small_ints(values: list[int]) -> bool:
    """Whether every int of `values` is within check_scalar's bound (the extremes tell)."""
    return max(values).bit_length() <= 13_000 and min(values).bit_length() <= 13_000


def check_scalar(value: Any) -> Any:
    """A plain scalar, or TooBig when it is past the grader's bounds."""
    if type(value) is int and value.bit_length() > 13_000:  # 4,000 digits need about 13,300 bits
        digits = int_digits(value)
        if digits > protocol.MAX_INT_DIGITS:
            raise TooBig(f"an int with {digits:,} digits")
    if type(value) is str and len(value) > protocol.MAX_STRING_CHARS:
        raise TooBig(f"a string of {len(value):,} characters")
    return value


def base_items(value: Any) -> tuple[Any, Any] | None:
    """(the tag or kind, the elements) of a container of a builtin type or a subclass of one, read with
    the base type's own methods so that overridden `__iter__`/`__len__`/`items` have no say."""
    kind = type(value)
    try:
        if issubclass(kind, (list, collections.deque)):
            return list, list(list.__iter__(value) if issubclass(kind, list) else collections.deque.__iter__(value))
        if issubclass(kind, tuple):
            return tuple, list(tuple.__iter__(value))
        if issubclass(kind, dict):
            return dict, list(dict.items(value))
        if issubclass(kind, frozenset):
            return set, list(frozenset.__iter__(value))
        if issubclass(kind, set):
            return set, list(set.__iter__(value))
    except Exception:
        pass
    return None


def packed(items: list[Any]) -> Any:
    """A list of the submission's objects as one flat list of handles (`protocol.REFS`), else as is."""
    if len(items) < 2:
        return items
    for item in items:
        if type(item) is not dict or len(item) != 1 or protocol.REF not in item:
            return items
    return {protocol.REFS: [item[protocol.REF] for item in items]}


class Group(list[Any]):
    """Objects a scenario gathered to read together (`columns`); a group in a group adds its members."""


def same_snapshot(current: dict[str, Any], last: dict[str, Any]) -> bool:
    """Whether two snapshots hold exactly the same values: of the same types (1, 1.0 and True are equal
    to Python, not to a test), floats bit for bit (0.0 == -0.0; a NaN is not equal to itself)."""
    if current.keys() != last.keys():
        return False
    for name, value in current.items():
        old = last[name]
        if type(value) is not type(old):
            return False
        if value != old if type(value) is not float else value.hex() != old.hex():
            return False
    return True


def read_columns(targets: list[Any], names: list[str]) -> dict[str, list[Any]]:
    """Each attribute of `names` of every target, a list per name (None where one is missing): many
    objects' attributes as a few flat lists, the cheapest shape to send and to check."""
    targets = list(targets)
    return {name: [getattr(target, name, None) for target in targets] for name in names}


def read_attributes(target: Any, names: list[str]) -> dict[str, Any]:
    found = {}
    for name in names:
        try:
            found[name] = getattr(target, name)
        except AttributeError:
            continue
    return found


def text_size(value: str) -> int:
    """At least the bytes of `value` as JSON text (escapes included)."""
    return len(value) * (2 if value.isascii() and value.isprintable() else 12) + 2


def snapshot_size(attrs: dict[str, Any]) -> int:
    """About the bytes of a snapshot as JSON, never less (a kept int has at most 4,000 digits)."""
    size = 16
    for name, value in attrs.items():
        size += text_size(name) + 2
        if type(value) is str:
            size += text_size(value)
        elif type(value) is int and value.bit_length() > 64:
            size += value.bit_length() // 3 + 2
        else:
            size += 24
    return size


CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)


def container_base(kind: type) -> type | None:
    """The builtin container a subclass builds on, or None (the container itself, or no container)."""
    try:
        base = next((c for c in kind.__mro__ if c in CONTAINERS), None)
    except Exception:
        return None
    return None if base is kind else base


def adds_methods(kind: type) -> bool:
    """Whether a subclass of a builtin container has public methods its builtin base lacks."""
    base = container_base(kind)
    return base is not None and bool(set(public_methods(kind)) - set(public_methods(base)))


def has_own_attributes(value: Any) -> bool:
    """Whether an object of a builtin container's subclass holds public attributes of its own (`self.rid`)."""
    try:
        own = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return False
    return type(own) is dict and any(type(name) is str and not name.startswith("_") for name in own)


def public_methods(kind: type) -> list[str]:
    names = []
    try:
        candidates = dir(kind)
    except Exception:
        return []
    for name in candidates:
        if type(name) is not str or name.startswith("_") or len(name) > 100:
            continue
        try:
            if callable(getattr(kind, name)) and not isinstance(getattr(kind, name), type):
                names.append(name)
        except Exception:
            continue
    return names

