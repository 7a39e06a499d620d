"""Sandboxes started before their submission: what `warm` backends keep, one per exercise and tier.

A backend's `start(exercise, tier)` gives a sandbox that has its job and waits for a submission; its
`fresh_for` says whether it is still alive and made from the suites as they are now. A warm backend
takes the waiting sandbox for a grading and starts the next one as soon as the submission is on its
way, so that the harness's start, the collection of the tests and the workers' confinement happen
while the previous submission grades. Each sandbox still grades exactly one submission.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from grader.core.exercise import Exercise


class Waiting(Protocol):
    def fresh_for(self, exercise: Exercise, tier: str) -> bool: ...

    def discard(self) -> None: ...


W = TypeVar("W", bound=Waiting)


@dataclass
class WarmSlots(Generic[W]):
    """The waiting sandbox of one backend, with the exercise and tier it was made for."""

    ready: dict[tuple[str, str, str], W] = field(default_factory=dict)

    @staticmethod
    def key(exercise: Exercise, tier: str) -> tuple[str, str, str]:
        return (str(exercise.root), exercise.slug, tier)

    def take(self, exercise: Exercise, tier: str, start: Callable[[], W]) -> W:
        """The sandbox waiting for this exercise and tier, if it is still good, else a new one."""
        waiting = self.ready.pop(self.key(exercise, tier), None)
        if waiting is not None and not waiting.fresh_for(exercise, tier):
            waiting.discard()
            waiting = None
        return waiting or start()

    def refill(self, exercise: Exercise, tier: str, start: Callable[[], W]) -> Callable[[], None]:
        """What to run once a submission is on its way: start the next sandbox for this tier. One
        sandbox waits at a time (a service grading many exercises keeps the latest one's), so what a
        backend holds stays bounded."""
        def start_next() -> None:
            self.close()
            self.ready[self.key(exercise, tier)] = start()
        return start_next

    def close(self) -> None:
        while self.ready:
            self.ready.popitem()[1].discard()

    def __len__(self) -> int:
        return len(self.ready)
