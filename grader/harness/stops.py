"""How a test's call into the submission can end other than with a value: the stops a test cannot
catch (a timeout, a crash, a broken protocol, a refused value) and the submission's own exceptions as
the worker reported them."""

from __future__ import annotations

import builtins
import functools
import signal
from dataclasses import dataclass
from typing import ClassVar

from grader.harness.contract import TestStatus

SIGNAL_CAUSES = {
    signal.SIGSEGV: "a segmentation fault (the Python interpreter crashed)",
    signal.SIGBUS: "a bus error (the Python interpreter crashed)",
    signal.SIGABRT: "an abort (the Python interpreter crashed)",
    signal.SIGFPE: "a floating-point exception (the Python interpreter crashed)",
    signal.SIGXCPU: "the CPU time limit",
    signal.SIGXFSZ: "the file size limit",
    signal.SIGKILL: "a kill signal (often: out of memory)",
}


class GradingStop(BaseException):
    """The submission stopped a test in a way the test must not be able to catch.

    A BaseException, so that a test's own `except Exception` can never turn a timeout or a crash into a
    pass. `status` is the scorecard status the harness records for the test.
    """

    status: ClassVar[TestStatus] = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CallTimeout(GradingStop):
    status = "timeout"


class WorkerCrashed(GradingStop):
    status = "crashed"


class ProtocolViolation(GradingStop):
    status = "error"


class WorkerUnavailable(GradingStop):
    """No worker could be started: a fault of the grader's, never of the submission's."""

    status = "error"


class ValueRefused(GradingStop):
    """The submission handed the grader a value past its bounds (an int with 5,000 digits...)."""

    status = "failed"


class SubmissionError(Exception):
    """An exception of the submission whose type has no builtin counterpart to raise here."""


@dataclass
class RemoteException:
    """What the worker told us about an exception raised by the submission."""

    type_name: str
    lineage: list[str]  # the names of the type's MRO
    builtin: list[str]  # those of them that are Python's own types, in the same order
    message: str
    traceback: list[str]
    where: str

    @property
    def out_of_memory(self) -> bool:
        """Whether the worker ran out of memory: Python's own MemoryError, not a student's exception that
        derives from it (a full cache may well be one), after which the worker lives on."""
        return self.type_name == "MemoryError" and self.builtin[:1] == ["MemoryError"]

    def as_exception(self) -> BaseException:
        """An exception of the builtin Exception types in the original's MRO, keeping the student's type
        name: of all of them (a class that is both a KeyError and a ValueError is caught as either, as
        in-process), else of the nearest one that can be made."""
        text = f"{self.type_name}: {self.message}" if self.message else self.type_name
        bases = _builtin_bases(tuple(self.builtin))
        exc: BaseException | None = None
        for klass in ([_combined(bases)] if len(bases) > 1 else []) + list(bases):
            if klass is None:
                continue
            try:
                exc = klass(text)
            except Exception:
                continue
            break
        if exc is None:
            # SystemExit, KeyboardInterrupt, GeneratorExit...: not something a test should catch.
            exc = SubmissionError(text)
        exc.remote = self  # type: ignore[attr-defined]
        return exc


@functools.lru_cache(maxsize=256)
def _builtin_bases(lineage: tuple[str, ...]) -> tuple[type, ...]:
    """The builtin Exception types of an MRO (their names), each but those an earlier one already
    derives from."""
    found: list[type] = []
    for name in lineage:
        klass = getattr(builtins, name, None)
        if isinstance(klass, type) and issubclass(klass, Exception) and not any(issubclass(k, klass) for k in found):
            found.append(klass)
    return tuple(found)


@functools.lru_cache(maxsize=256)
def _combined(bases: tuple[type, ...]) -> type | None:
    """One class deriving from all of `bases`, named as the first; None where Python cannot combine
    them (builtin types of incompatible layouts)."""
    try:
        return type(bases[0].__name__, bases, {})
    except TypeError:
        return None


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        try:
            cause = SIGNAL_CAUSES.get(signal.Signals(-returncode), f"signal {signal.Signals(-returncode).name}")
        except ValueError:
            cause = f"signal {-returncode}"
        return f"it was killed by {cause}"
    return f"it exited with status {returncode} (a solution must not end the process)"


