"""What a sandbox is to the grading that uses it: a callable that runs a tier's suites against one
submission and hands back what its harness printed (grader.core.grading judges it).

Defined here, beside its implementations (`local`, `docker`) and the factory that picks one (`choose`),
so that the grading depends on the sandboxes and no sandbox on the grading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from grader.core.exercise import Exercise
from grader.harness.contract import Run
from grader.sandbox.layout import RawRun


class Backend(Protocol):
    """A sandbox: runs a tier's suites against one submission and hands back what its harness printed.
    `close` ends what it keeps ready between gradings (a warm sandbox, a harness fork server); a backend
    keeping nothing closes at once."""

    @property
    def name(self) -> str:
        """What scorecards call it: "local", "docker"."""
        ...

    def __call__(self, exercise: Exercise, source: bytes, tier: str, run: Run) -> RawRun: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class PlainBackend:
    """A backend made of a function (a test's, a wrapper's): it keeps nothing, so closing it does nothing."""

    run: Callable[[Exercise, bytes, str, Run], RawRun]
    name: str = "plain"

    def __call__(self, exercise: Exercise, source: bytes, tier: str, run: Run) -> RawRun:
        return self.run(exercise, source, tier, run)

    def close(self) -> None:
        pass
