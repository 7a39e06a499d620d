"""Scenarios: many operations on the submission in one message, and what each observed."""

from __future__ import annotations

from typing import Any

from grader.confined import protocol
from grader.harness.channel import Channel
from grader.harness.proxies import RemoteObject
from grader.harness.stops import RemoteException


class Slot:
    """The result of one operation of a `Scenario`, to pass to later operations or to look up in its
    `Observations`."""

    __slots__ = ("index", "scenario")

    def __init__(self, scenario: Scenario, index: int) -> None:
        self.scenario, self.index = scenario, index

    def check(self, building: object) -> int:
        """Its index, in an operation of `building` (the scenario being built; None: no scenario's)."""
        if building is not self.scenario:
            raise ValueError("a step of another scenario cannot be passed here")
        return self.index

    def __repr__(self) -> str:
        return f"<step {self.index + 1}: {self.scenario.labels[self.index]}>"


class Scenario:
    """Many operations on the submission in one message: build it, `run()` it, judge what it observed.

        sc = ns.scenario()
        sched = sc.new("Scheduler", 64, 4, 1000)     # construct from a top-level name
        req = sc.new("Req", 0, 10, 3)
        sc.call(sched, "add", req)                   # a method of an earlier result; args may hold steps
        plan = sc.call(sched, "schedule")
        state = sc.read(sched, "waiting", "reserved")  # attributes as they are at this step
        seen = sc.run()
        seen[plan]  -> [(<proxy of req>, 3)]; seen[state] -> {"waiting": [], "reserved": 13}

    The worker only runs the operations and sends back their results as plain data, decoded as a
    proxy call's would be (objects as proxies; one made by the scenario carries the snapshot of its
    creation, and a read step gives attributes as they were at that step). An exception stops the
    scenario at its step: looking up that step, or a later one, raises it as a proxy call would.
    """

    def __init__(self, channel: Channel, names: list[str] | None = None) -> None:
        self.channel = channel
        self.names = names
        self.ops: list[list[Any]] = []
        self.labels: list[str] = []

    def _encode(self, value: Any) -> Any:
        return self.channel.encode(value, self)

    def _add(self, op: list[Any], label: str) -> Slot:
        self.ops.append(op)
        self.labels.append(label)
        return Slot(self, len(self.ops) - 1)

    def _target(self, target: Any) -> Any:
        if type(target) is not Slot and not isinstance(target, RemoteObject):
            raise TypeError("a scenario's operations apply to an earlier step or to an object of the submission")
        return self._encode(target)

    def new(self, name: str, *args: Any, **kwargs: Any) -> Slot:
        """Call the top-level name `name` (a class, usually) with the arguments."""
        if self.names is not None and name not in self.names:
            raise KeyError(f"the exercise does not declare the name {name!r}")
        encode = self._encode
        return self._add([protocol.STEP_NEW, name, encode(list(args)), {k: encode(v) for k, v in kwargs.items()}], f"{name}(...)")

    def call(self, target: Any, method: str, *args: Any, **kwargs: Any) -> Slot:
        """Call `method` of an earlier step's result (or of a proxy) with the arguments."""
        encode = self._encode
        return self._add([protocol.STEP_CALL, self._target(target), method, encode(list(args)),
                          {k: encode(v) for k, v in kwargs.items()}], f"{method}()")

    def read(self, target: Any, *names: str) -> Slot:
        """The attributes `names` of an earlier step's result, as a dict; a missing one is left out."""
        return self._add([protocol.STEP_READ, self._target(target), list(names)], f"reading {', '.join(names)}")

    def group(self, *members: Any) -> Slot:
        """Objects gathered in the worker, to read together with `read_columns`; a member that is an
        earlier group adds its members, so a growing set of objects is sent once, not at every read.
        It observes nothing (None)."""
        return self._add([protocol.STEP_GROUP, [self._target(m) for m in members]], "grouping objects")

    def read_columns(self, targets: list[Any] | Slot, *names: str) -> Slot:
        """The attributes `names` of each of `targets` (a list, or a `group`) in one operation, as a dict
        of lists: name -> the values of the targets in order, None where one has no such attribute."""
        if isinstance(targets, Slot):
            wire = self._target(targets)
        elif targets and all(type(t) is Slot for t in targets):  # the common case, compactly
            if any(t.scenario is not self for t in targets):
                raise ValueError("a step of another scenario cannot be passed here")
            wire = {protocol.SLOTS: [t.index for t in targets]}
        else:
            wire = [self._target(t) for t in targets]
        return self._add([protocol.STEP_COLUMNS, wire, list(names)], f"reading {', '.join(names)}")

    def run(self) -> Observations:
        return Observations(*self.channel.run_scenario(self.ops, self.labels))


class Observations:
    """What a scenario's run observed: one value per operation, up to the one that raised."""

    def __init__(self, values: list[Any], error: RemoteException | None) -> None:
        self.values = values
        self.error = error  # the exception that stopped the scenario, at step len(values)

    @property
    def failed_at(self) -> int | None:
        """The index of the operation that raised, or None."""
        return None if self.error is None else len(self.values)

    def __getitem__(self, step: Slot | int) -> Any:
        index = step.index if isinstance(step, Slot) else step
        if index < len(self.values):
            return self.values[index]
        if self.error is not None:
            raise self.error.as_exception()
        raise IndexError(index)

    def __len__(self) -> int:
        return len(self.values)
