"""What a test holds of the submission: proxies of its objects in the worker.

A proxy's scalar attributes are local copies and its methods are remote calls with a deadline. A copy
is fresh until the next call: the objects a call concerns (those in its result, its target, and those
the test read since its previous call) come back with fresh copies, and any other is fetched again when
the test reads it, so a call costs the same however many objects the worker holds. A proxy only ever
equals itself, whatever the submission's `__eq__` says.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from grader.confined import protocol
from grader.harness.channel import Channel


class TypeInfo(NamedTuple):
    """What the harness knows of a type of the submission's objects."""

    name: str
    methods: frozenset[str]  # its public methods: read on a proxy, a method, not an attribute


class RemoteObject:
    """A proxy for one object in the worker. Identity is the only equality it has."""

    __slots__ = ("_attrs", "_callable", "_channel", "_epoch", "_handle", "_label", "_type")

    def __init__(self, channel: Channel, handle: int, type_info: TypeInfo, is_callable: bool) -> None:
        object.__setattr__(self, "_channel", channel)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_type", type_info)
        object.__setattr__(self, "_callable", is_callable)
        object.__setattr__(self, "_attrs", {})
        object.__setattr__(self, "_label", type_info.name)
        object.__setattr__(self, "_epoch", channel.epoch)

    def __getattr__(self, name: str) -> Any:
        attrs = object.__getattribute__(self, "_attrs")
        channel: Channel = object.__getattribute__(self, "_channel")
        handle = object.__getattribute__(self, "_handle")
        type_info = object.__getattribute__(self, "_type")
        if object.__getattribute__(self, "_epoch") != channel.epoch and not object.__getattribute__(self, "_callable"):
            # A copy from before the last call. A method needs no copy; an attribute the copy held is
            # fetched with the object's fresh snapshot (one round trip, then cached until the next call);
            # any other name is read remotely, which brings the fresh snapshot along too.
            if name.startswith("__") or (name in type_info.methods and name not in attrs):
                pass
            elif name in attrs:
                channel.request(protocol.OP_SNAP, f"reading {type_info.name}.{name}", {protocol.TARGET: handle})
                attrs = object.__getattribute__(self, "_attrs")
            else:
                return channel.request(protocol.OP_GETATTR, f"reading {type_info.name}.{name}",
                                      {protocol.TARGET: handle, protocol.NAME: name})
        if name in attrs:
            channel.read[handle] = None
            return attrs[name]
        if name.startswith("__"):
            raise AttributeError(name)
        if name in type_info.methods:
            return RemoteMethod(self, name)
        return channel.request(protocol.OP_GETATTR, f"reading {type_info.name}.{name}",
                                      {protocol.TARGET: handle, protocol.NAME: name})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("objects of the submission are read-only to tests")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        channel: Channel = object.__getattribute__(self, "_channel")
        name = object.__getattribute__(self, "_type").name
        if not object.__getattribute__(self, "_callable"):
            raise TypeError(f"your {name} object is not callable")
        label = _callee_label(self)
        encode = channel.encode
        return channel.request(protocol.OP_CALL, f"{label}(...)", {
            protocol.TARGET: object.__getattribute__(self, "_handle"),
            protocol.ARGS: encode(list(args)), protocol.KWARGS: {k: encode(v) for k, v in kwargs.items()}})

    def _not_a_container(self, *args: Any) -> Any:
        raise TypeError(f"your code returned a {object.__getattribute__(self, '_type').name} object where the "
                        "grader expected a list or tuple; return plain lists, tuples, ints and your own objects")

    __iter__ = __len__ = __getitem__ = __contains__ = _not_a_container

    def __repr__(self) -> str:
        channel: Channel = object.__getattribute__(self, "_channel")
        if object.__getattribute__(self, "_epoch") != channel.epoch and not channel.dead_reason \
                and not object.__getattribute__(self, "_callable"):
            channel.request(protocol.OP_SNAP, f"reading a {object.__getattribute__(self, '_type').name}",
                           {protocol.TARGET: object.__getattribute__(self, "_handle")})
        attrs = object.__getattribute__(self, "_attrs")
        shown = ", ".join(f"{k}={v!r}" for k, v in list(attrs.items())[:8])
        return f"{_callee_label(self)}({shown})"


def _callee_label(proxy: RemoteObject) -> str:
    label: str = object.__getattribute__(proxy, "_label")
    return label


class RemoteMethod:
    """A bound method of a remote object; calling it is one request to the worker."""

    __slots__ = ("name", "owner")

    def __init__(self, owner: RemoteObject, name: str) -> None:
        self.owner, self.name = owner, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        channel: Channel = object.__getattribute__(self.owner, "_channel")
        encode = channel.encode
        return channel.request(protocol.OP_METHOD, f"{self.name}()", {
            protocol.TARGET: object.__getattribute__(self.owner, "_handle"), protocol.NAME: self.name,
            protocol.ARGS: encode(list(args)), protocol.KWARGS: {k: encode(v) for k, v in kwargs.items()}})

    def __repr__(self) -> str:
        return f"<method {self.name} of your code>"

