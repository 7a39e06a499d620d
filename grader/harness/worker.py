"""The untrusted side: a process that imports the submission and answers calls on its objects.

It runs as its own (unprivileged, where possible) user, under resource limits it sets on itself before
the submission is imported. From that import on, nothing in this process can be trusted: the harness
only ever reads plain data from it, through `protocol`, and checks every message it gets.

Started by `client.WorkerClient` as
    python3 -I -u -c "<bootstrap>" '<json config>'
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import resource
import signal
import sys
import traceback
from typing import Any

from grader.harness import protocol

SCALARS = (type(None), bool, int, float, str)
MAX_ITEMS = 100_000  # elements in one encoded value
MAX_TEXT = 4_000  # characters of an exception message


class TooBig(Exception):
    pass


def apply_limits(limits: dict[str, int]) -> None:
    """Resource limits on this process and what it starts, before any student code runs."""
    mib = 1024 * 1024
    wanted = {
        resource.RLIMIT_AS: limits["memory_mb"] * mib,
        resource.RLIMIT_FSIZE: limits["file_size_mb"] * mib,
        resource.RLIMIT_NOFILE: limits["open_files"],
        resource.RLIMIT_CPU: limits["cpu_s"],
        resource.RLIMIT_CORE: 0,
    }
    if limits.get("processes"):  # absent for the zygote, which sets it in each child
        wanted[resource.RLIMIT_NPROC] = limits["processes"]
    for which, value in wanted.items():
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))
    # Writing past the file-size limit should be an OSError the student sees, not a silent kill.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class Worker:
    def __init__(self, submission: str, module_name: str, fd_in: int, fd_out: int) -> None:
        self.submission = submission
        self.module_name = module_name
        self.fd_in, self.fd_out = fd_in, fd_out
        self.inbox = protocol.Inbox(fd_in)
        self.module: Any = None
        self.handles: dict[int, Any] = {}  # handle -> object, keeps each object alive
        self.handle_of: dict[int, int] = {}  # id(object) -> handle
        self.snapshots: dict[int, dict[str, Any]] = {}  # what the harness was last told
        self.type_ids: dict[int, int] = {}  # id(type) -> type number
        self.types_kept: list[type] = []  # keeps id(type) keys valid
        self.kinds: dict[int, tuple[bool, list[str]]] = {}
        self.new_types: dict[str, Any] = {}
        self.changed: dict[str, Any] = {}

    # -- encoding (objects of the submission -> plain data) ----------------------------------------
    def encode(self, value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
        budget = budget if budget is not None else [MAX_ITEMS]
        budget[0] -= 1
        if budget[0] < 0:
            raise TooBig(f"a value with more than {MAX_ITEMS} elements")
        if depth > protocol.MAX_DEPTH:
            raise TooBig(f"a value nested more than {protocol.MAX_DEPTH} levels deep")
        kind = type(value)
        if kind in SCALARS:
            return value
        if kind is list or kind is collections.deque:
            return [self.encode(v, depth + 1, budget) for v in value]
        if kind is tuple:
            return {protocol.TUPLE: [self.encode(v, depth + 1, budget) for v in value]}
        if kind is set or kind is frozenset:
            return {protocol.SET: [self.encode(v, depth + 1, budget) for v in value]}
        if kind is dict:
            return {protocol.DICT: [[self.encode(k, depth + 1, budget), self.encode(v, depth + 1, budget)]
                                    for k, v in value.items()]}
        return {protocol.REF: self.handle(value)}

    def handle(self, obj: Any) -> int:
        key = id(obj)
        if key in self.handle_of:
            return self.handle_of[key]
        number = len(self.handles) + 1
        self.handles[number] = obj
        self.handle_of[key] = number
        kind = type(obj)
        if id(kind) not in self.type_ids:
            self.type_ids[id(kind)] = len(self.types_kept) + 1
            self.types_kept.append(kind)
            self.new_types[str(self.type_ids[id(kind)])] = {
                "name": getattr(kind, "__qualname__", "object") if isinstance(getattr(kind, "__qualname__", None), str) else "object",
                "methods": public_methods(kind),
            }
        snapshot = {} if isinstance(obj, type) or callable(obj) else self.snapshot(obj)
        if snapshot or not (isinstance(obj, type) or callable(obj)):
            self.snapshots[number] = snapshot
        self.changed[str(number)] = {
            "type": self.type_ids[id(kind)],
            "callable": callable(obj),
            "attrs": snapshot,
        }
        return number

    def snapshot(self, obj: Any) -> dict[str, Any]:
        """Public attributes holding scalars, as getattr reads them (properties and slots included)."""
        plain, described = self.attribute_names(type(obj))
        attrs: dict[str, Any] = {}
        if plain:
            # The common case, a plain class: its instance dict is exactly what getattr would read.
            try:
                instance = object.__getattribute__(obj, "__dict__")
            except AttributeError:
                instance = None
            if type(instance) is dict:
                for name, value in instance.items():
                    if type(name) is str and name[:1] != "_" and type(value) in SCALARS:
                        attrs[name] = value
        names = described if plain else self.all_names(obj, described)
        for name in names:
            try:
                value = getattr(obj, name)
            except Exception:
                continue
            if type(value) in SCALARS:
                attrs[name] = value
        for name, value in attrs.items():
            if type(value) is str and len(value) > MAX_TEXT:
                attrs[name] = value[:MAX_TEXT]
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
            plain = kind.__getattribute__ is object.__getattribute__
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

    def refresh(self) -> None:
        """Queue fresh snapshots of every object the harness holds whose attributes changed."""
        for number, last in self.snapshots.items():
            current = self.snapshot(self.handles[number])
            if current != last:
                self.snapshots[number] = current
                entry = self.changed.setdefault(str(number), {})
                entry["attrs"] = current

    # -- decoding (harness arguments -> values here) -----------------------------------------------
    def decode(self, value: Any) -> Any:
        if type(value) is list:
            return [self.decode(v) for v in value]
        if type(value) is dict:
            ((tag, inner),) = value.items()
            if tag == protocol.REF:
                return self.handles[inner]
            if tag == protocol.TUPLE:
                return tuple(self.decode(v) for v in inner)
            if tag == protocol.SET:
                return {self.decode(v) for v in inner}
            if tag == protocol.DICT:
                return {self.decode(k): self.decode(v) for k, v in inner}
            raise ValueError(f"unknown tag {tag!r}")
        return value

    # -- the loop ------------------------------------------------------------------------------------
    def reply(self, body: dict[str, Any]) -> None:
        body["objs"], body["types"] = self.changed, self.new_types
        self.changed, self.new_types = {}, {}
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        protocol.send(self.fd_out, body)

    def describe(self, exc: BaseException) -> dict[str, Any]:
        try:
            message = str(exc)[:MAX_TEXT]
        except Exception:
            message = "(the exception's message could not be read)"
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == self.submission]
        return {
            "type": type(exc).__name__,
            "mro": [k.__name__ for k in type(exc).__mro__],
            "message": message,
            "traceback": [f"line {f.lineno}, in {f.name}: {(f.line or '').strip()}"[:300] for f in frames[-8:]],
        }

    def import_submission(self) -> None:
        spec = importlib.util.spec_from_file_location(self.module_name, self.submission)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[self.module_name] = module
        spec.loader.exec_module(module)
        self.module = module

    def serve(self) -> None:
        try:
            self.import_submission()
        except BaseException as exc:  # SystemExit and KeyboardInterrupt included: all are the student's
            self.reply({"import_error": self.describe(exc)})
            return
        self.reply({"ready": True})
        while True:
            try:
                request = self.inbox.receive()
            except protocol.PeerClosed:
                return
            try:
                result = self.perform(request)
                self.refresh()
                body = {"ok": self.encode(result)}
            except TooBig as exc:
                body = {"too_big": str(exc)}
            except BaseException as exc:
                try:
                    self.refresh()
                except BaseException:
                    pass
                body = {"exc": self.describe(exc)}
            self.reply(body)

    def perform(self, request: dict[str, Any]) -> Any:
        op = request["op"]
        if op == "name":
            name = request["name"]
            if not hasattr(self.module, name):
                raise AttributeError(f"your file does not define {name!r}")
            return getattr(self.module, name)
        target = self.handles[request["ref"]]
        if op == "getattr":
            return getattr(target, request["name"])
        args = self.decode(request.get("args", []))
        kwargs = {k: self.decode(v) for k, v in request.get("kwargs", {}).items()}
        if op == "call":
            return target(*args, **kwargs)
        if op == "method":
            return getattr(target, request["name"])(*args, **kwargs)
        raise ValueError(f"unknown operation {op!r}")


def public_methods(kind: type) -> list[str]:
    names = []
    try:
        candidates = dir(kind)
    except Exception:
        return []
    for name in candidates:
        if not isinstance(name, str) or name.startswith("_"):
            continue
        try:
            if callable(getattr(kind, name)) and not isinstance(getattr(kind, name), type):
                names.append(name)
        except Exception:
            continue
    return names


def main(argv: list[str] | None = None) -> None:
    config = json.loads((argv or sys.argv)[-1])
    apply_limits(config["limits"])
    Worker(config["submission"], config["module"], config["fd_in"], config["fd_out"]).serve()
    # Leave without running the submission's atexit handlers or finalizers: nothing is left to do.
    os._exit(0)


if __name__ == "__main__":
    main()
