"""Declared field specs for exercise.toml, and the one reader that checks a table against them.

Each key exercise.toml may hold is declared once, as a `Field`: the TOML types it may have, its default
(or that it is required), the checks its value must pass with the sentence that says what is wrong, and
the name it is kept under. A `Table` is the declared keys of one TOML table, with how it becomes the
grader's own record. `read` checks a table against its `Table`, so every mistake is told the same way:
a key it does not declare with the closest known one, a value of the wrong type or out of bounds with
what was expected and what was found.

Standard library only, and Python 3.10 syntax: it loads exercises inside course platforms' containers.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# What a check's sentence may be: a template (str.format with the value as written, `value`, its key,
# `key`, the table's name, `at`, and every value read before it, by name) or, for a sentence a template
# cannot say, a function of the value as read (converted, when it got that far) and those names.
Message = str | Callable[[Any, Mapping[str, Any]], str]


class Refused(ValueError):
    """A value exercise.toml cannot use; the sentence says which and why (the file's name is the caller's)."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # a Field's default when the key must be written


@dataclass(frozen=True)
class Check:
    """A rule a value must keep, and what a value that breaks it is told. `holds` gets the value as
    converted and every value read before it (by name, with the caller's context)."""
    holds: Callable[[Any, Mapping[str, Any]], bool]
    says: Message


def rule(holds: Callable[[Any], bool], says: Message) -> Check:
    """A check of the value alone."""
    return Check(lambda value, known: holds(value), says)


@dataclass(frozen=True)
class Field:
    """One key of a table. In order: a missing key takes its default (REQUIRED: refused with `missing`,
    else `says`; None: left unset, no check), a written one must be of one of `kinds` (exact TOML types,
    so true is never a number), then `convert` makes it the grader's value (a ValueError: refused with
    `says`, or `refused`, which may name the error as {error}), a sub-`table` or a table of names the
    author chose, `each` read by its own Field, is read, and `checks` run in order."""
    key: str
    kinds: tuple[type, ...]
    says: Message  # what a value of another type is told: what the key must hold, and what it holds
    default: Any = REQUIRED
    default_from: Callable[[Mapping[str, Any]], Any] | None = None  # a default that follows earlier values
    convert: Callable[[Any], Any] | None = None
    refused: Message = ""
    checks: tuple[Check, ...] = ()
    missing: Message = ""
    into: str = ""  # the name the value is kept under: the record's field; "": the key
    table: Table | None = None
    each: Field | None = None
    names: tuple[Check, ...] = ()  # with `each`: checks of each name the author chose
    grades: bool = True  # False: it decides nothing of a grade (a scorecard's fingerprint leaves it out)

    @property
    def name(self) -> str:
        return self.into or self.key


@dataclass(frozen=True)
class Table:
    """The declared keys of a TOML table. `at` is how sentences name it ("[web] ", "[suites.{name}]",
    formatted with the context); `build` makes the record from the values read (by name) and the
    context; `if_empty` is the value of a table written empty or not at all, when it is not read."""
    at: str
    fields: tuple[Field, ...]
    build: Callable[[dict[str, Any], Mapping[str, Any]], Any] | None = None
    checks: tuple[Check, ...] = ()  # rules over several values: holds(values read, context)
    # A key the table does not declare: {keys} names every such key, {key} the first, {hint} the
    # closest declared key (difflib), or them all.
    unknown: str = "{at}unknown key {key!r} ({hint})"
    if_empty: Any = REQUIRED

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(one.key for one in self.fields)


TABLE_SAYS = "{key} must be a table ([{key}])"


def read(table: Mapping[str, Any], spec: Table, context: Mapping[str, Any] | None = None) -> Any:
    """`table` checked against `spec` and made into its record (a dict by name without `build`); a
    Refused says what is wrong, the first mistake in the order the keys are declared."""
    known = dict(context or {})
    at = spec.at.format(**known)
    if not table and spec.if_empty is not REQUIRED:
        return spec.if_empty
    _refuse_unknown(table, spec, at)
    values: dict[str, Any] = {}
    for one in spec.fields:
        value = _value(one, one.key, table, {**known, **values, "at": at})
        values[one.name] = value
    for check in spec.checks:
        if not check.holds(values, known):
            raise Refused(_say(check.says, values, values, {**known, "at": at}))
    return spec.build(values, known) if spec.build else values


def _refuse_unknown(table: Mapping[str, Any], spec: Table, at: str) -> None:
    unknown = [key for key in table if key not in spec.keys]
    if unknown:
        near = difflib.get_close_matches(unknown[0], spec.keys, n=1)
        hint = f"did you mean {near[0]}?" if near else f"known: {', '.join(spec.keys)}"
        raise Refused(spec.unknown.format(at=at, key=unknown[0], keys=", ".join(sorted(unknown)), hint=hint))


def _value(spec: Field, key: str, table: Mapping[str, Any], known: dict[str, Any]) -> Any:
    """The value of `key` in `table` as `spec` declares it, checked and converted."""
    known = {**known, "key": key}
    if key in table:
        written = table[key]
        if type(written) not in spec.kinds:
            raise Refused(_say(spec.says, written, written, known))
    elif spec.default is REQUIRED and spec.default_from is None:
        raise Refused(_say(spec.missing or spec.says, None, None, known))
    else:
        written = spec.default_from(known) if spec.default_from else spec.default
        if written is None:
            return None  # unset: nothing to check
    value = written
    if spec.convert is not None:
        try:
            value = spec.convert(written)
        except ValueError as error:
            raise Refused(_say(spec.refused or spec.says, written, written, {**known, "error": error})) from None
    if spec.table is not None:
        value = read(value, spec.table, known)
    if spec.each is not None:
        value = {name: _entry(spec.each, spec.names, name, value, known) for name in value}
    for check in spec.checks:
        if not check.holds(value, known):
            raise Refused(_say(check.says, written, value, known))
    return value


def _entry(spec: Field, names: tuple[Check, ...], name: str, table: Mapping[str, Any], known: dict[str, Any]) -> Any:
    """One entry of a table whose names the author chose (a suite, a tier, a test's points)."""
    known = {**known, "name": name}
    for check in names:
        if not check.holds(name, known):
            raise Refused(_say(check.says, name, name, {**known, "key": name}))
    return _value(spec, name, table, known)


def _say(message: Message, written: Any, value: Any, known: Mapping[str, Any]) -> str:
    if callable(message):
        return message(value, known)
    return message.format(**{**known, "value": written})


def keys_of(spec: Table, grading: bool | None = None) -> tuple[str, ...]:
    """The keys `spec` declares; with `grading`, only those that decide a grade (True) or do not (False)."""
    return tuple(one.key for one in spec.fields if grading is None or one.grades == grading)

