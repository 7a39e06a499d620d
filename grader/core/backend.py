"""What the grading needs of a sandbox: a callable that runs a tier's suites against one submission and
hands back what its harness printed (`RawRun`), which grader.core.grading judges.

Defined here, beside the grading that uses it, so that the sandboxes (grader.sandbox: `local`,
`docker`, and the factory that picks one) implement it and the grading knows none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from grader.core.exercise import Exercise
from grader.harness.contract import Run


@dataclass
class RawRun:
    """What a backend hands back: everything the harness printed and what explains a missing result."""

    output: bytes
    exit_status: int | None
    timed_out: bool
    duration_s: float
    detail: str = ""  # a backend's own explanation (out of memory, ...)
    isolation: str = ""  # how the workers were kept apart (`contract.ISOLATIONS`), for the scorecard


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
