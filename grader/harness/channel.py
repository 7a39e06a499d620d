"""The channel: what the wire's pieces below the client need of the connection to one worker.

A test's proxies (`proxies`), its scenarios (`scenario`) and the codec that decodes and encodes their
values (`codec`) hold a channel, never the client: through it they send a request, encode a value and
run a scenario's operations, and from it they read how far the conversation has gone (a copy taken at
an earlier epoch is stale) and which copies the test has read since the last call. The client
(`client.WorkerClient`) is the one channel; the pieces know this protocol alone, so each stands below
the client instead of in a circle with it.
"""

from __future__ import annotations

from typing import Any, Protocol

from grader.harness.stops import RemoteException


class Channel(Protocol):
    """One worker's connection, as proxies, scenarios and the codec use it."""

    epoch: int  # calls so far: a proxy's copy taken at an earlier epoch is stale
    read: dict[int, None]  # the proxies whose copies the test read since the last call
    dead_reason: str | None  # why the worker can no longer be called; None while it can

    def request(self, op: str, where: str, fields: dict[str, Any]) -> Any:
        """One call into the worker (`protocol.OP_*` with its fields): its result, decoded; the
        submission's exception raised as its own type; any other end raised as a stop."""
        ...

    def encode(self, value: Any, scenario: object = None) -> Any:
        """A test's value in wire form; `scenario`: the one whose operation it is part of, whose steps
        it may hold."""
        ...

    def run_scenario(self, ops: list[list[Any]], labels: list[str]) -> tuple[list[Any], RemoteException | None]:
        """A scenario's operations (in wire form) run in one message: what each observed, up to the one
        that raised, and that one's exception."""
        ...
