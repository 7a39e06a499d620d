"""The trusted side of the worker: starts it, talks to it, and hands tests proxies of its objects.

A test never touches an object of the submission. It gets `RemoteObject` proxies whose scalar
attributes are local copies and whose methods are remote calls with a deadline. A copy is fresh until
the next call: the objects a call concerns (those in its result, its target, and those the test read
since its previous call) come back with fresh copies, and any other is fetched again when the test
reads it, so a call costs the same however many objects the worker holds. Whatever comes back is
decoded from plain data here, so an object with a rigged `__eq__` stays a proxy that only ever equals
itself. A `Scenario` runs many operations in one message and hands back what each observed.
"""

from __future__ import annotations

import builtins
import functools
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from grader.confined import protocol
from grader.confined.clock import Earliest, OwnDeadline, process_charge
from grader.confined.limits import Limits
from grader.harness.confine import WORKER_NAME, Confinement, ForkedProcess, ZygoteUnavailable, private_file

# A test's worker's environment (its HOME is its own folder): what a program run from a terminal would
# find, so that one that asks for its user (getpass, os.environ["USER"]) runs as it does there.
WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "USER": WORKER_NAME, "LOGNAME": WORKER_NAME}
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

    status = "error"

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


class WorkerClient:
    """One worker process: one submission import, many calls, one test."""

    def __init__(self, *, confinement: Confinement, module: str, limits: Limits, output_path: str,
                 env: dict[str, str] | None = None) -> None:
        self.limits = limits
        self.output_path = output_path
        self.proxies: dict[int, RemoteObject] = {}
        self.types: dict[int, dict[str, Any]] = {}
        self.kept_attrs = self.kept_chars = 0  # in all proxies' attribute copies, bounded like the worker's
        # Values of builtin-type subclasses (a namedtuple...) in their base form, with their original's handle:
        # id(value) -> (value, handle, its elements when decoded); handle -> the value last decoded for it.
        self.originals: dict[int, tuple[Any, int, tuple[Any, ...]]] = {}
        self.original_of: dict[int, Any] = {}
        # Lists the submission returned, kept by the worker too (`protocol.KEPT`), the last few:
        # id(list) -> (the list, its serial, its elements when decoded).
        self.kept: dict[int, tuple[list[Any], int, tuple[Any, ...]]] = {}
        self.remembered_items = 0  # elements of the originals and kept lists, within MAX_REMEMBERED_ITEMS
        self.dead_reason: str | None = None
        self.epoch = 0  # calls so far: a proxy's copy taken at an earlier epoch is stale
        self.read: dict[int, None] = {}  # proxies whose copies the test read since the last call
        self.decode_budget: int | None = None  # values a running scenario may still receive
        self.building: Scenario | None = None  # the scenario whose operation is being encoded
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        output = private_file(output_path)
        try:
            self.process: ForkedProcess = confinement.fork(
                env=env if env is not None else WORKER_ENV, module=module,
                fds=(to_worker_r, from_worker_w, output))
        except ZygoteUnavailable:
            for fd in (to_worker_w, from_worker_r):
                os.close(fd)
            raise
        finally:
            for fd in (to_worker_r, from_worker_w, output):
                os.close(fd)
        self.fd_out, self.fd_in = to_worker_w, from_worker_r
        self.inbox = protocol.Inbox(from_worker_r)
        self.import_error: RemoteException | None = None
        self.incident: GradingStop | None = None
        self.started = time.monotonic()
        self.is_ready = False
        # The time this worker waited for a CPU that other work held is not charged to the submission.
        # What every process of the worker's account used is the submission's own work (a fork bomb's),
        # where that account is the grading's alone: run as the grader's own account without a namespace
        # (--unsafe-local), the account's processes are everyone else's too, and only the worker's counts.
        job = confinement.job
        account = job.worker_user if job.worker_user is not None else (os.getuid() if confinement.namespaced else None)
        self.charge = process_charge(self.process.seen_as, account)

    def deadline(self, limit: float) -> OwnDeadline:
        """A limit on the submission's own time in this worker, from now (see `clock`)."""
        return OwnDeadline(limit, self.charge)

    # -- lifecycle -----------------------------------------------------------------------------------
    def wait_ready(self) -> None:
        """Wait for the worker's import of the submission, for a test that needs it now.

        The deadline runs from now, not from the worker's start: a spare worker started while another
        test ran must not be judged against a clock that the other test used up."""
        if self.is_ready:
            return
        self.is_ready = True
        message = self._receive(self.deadline(self.limits.import_timeout_s), "importing your file")
        if isinstance(message, dict) and "import_error" in message:
            self.import_error = self._remote_exception(message["import_error"], "importing your file")
            return
        if message.get("ready") is not True:
            self._violation("importing your file", "the worker did not report ready")

    def idle(self) -> bool:
        """Whether the worker, between calls, is still alive with nothing unasked on its pipe (a dead
        worker's pipe reads as closed)."""
        if self.dead_reason or self.inbox.buffer or self.process is None or self.process.poll() is not None:
            return False
        return not select.select([self.fd_in], [], [], 0)[0]

    def close(self, wait: bool = True) -> None:
        """Kill the worker's whole process group and release the pipes. Safe to call twice. Without
        `wait`, the caller awaits the worker's end itself (`process.await_end`)."""
        self.process.kill(wait=wait)
        for fd in (self.fd_in, self.fd_out):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd_in = self.fd_out = -1

    def _kill(self) -> None:
        self.process.kill()

    def _violation(self, where: str, detail: str) -> NoReturn:
        self._kill()
        self.dead_reason = f"the worker broke the grader's protocol during {where}"
        raise ProtocolViolation(f"{self.dead_reason} ({detail}); did your code write to file descriptors it does not own?")

    def _receive(self, deadline: protocol.Until, where: str) -> dict[str, Any]:
        if self.dead_reason:
            raise WorkerCrashed(f"your code can no longer be called: {self.dead_reason}")
        try:
            message = self.inbox.receive(deadline)
        except protocol.Deadline:
            self._kill()
            limit = self.limits.import_timeout_s if where == "importing your file" else self.limits.call_timeout_s
            self.dead_reason = f"{where} did not finish within {limit:g} s"
            raise CallTimeout(f"{where} did not finish within {limit:g} s (is there an endless loop?)") from None
        except protocol.PeerClosed:
            try:
                self.process.wait()  # the zygote's note of its end, for as long as the zygote is there
            except subprocess.TimeoutExpired:
                self._kill()
            how = describe_exit(self.process.returncode)
            self._kill()
            self.dead_reason = f"the worker process ended during {where}: {how}"
            raise WorkerCrashed(f"your code ended the worker process during {where}: {how}") from None
        except protocol.ProtocolError as exc:
            self._violation(where, str(exc))
        if type(message) is not dict:
            self._violation(where, "a message that is not an object")
        if "fatal" in message:  # the worker could not keep its side consistent: never judge on stale copies
            self._kill()
            self.dead_reason = _text(message["fatal"], 300) if type(message["fatal"]) is str else "it failed"
            raise WorkerCrashed(f"your code can no longer be called after {where}: {self.dead_reason}")
        self._absorb(message, where)
        return message

    # -- requests ------------------------------------------------------------------------------------
    def lookup(self, name: str) -> Any:
        """A top-level name of the submission (a class, usually), as a proxy labelled with its name."""
        value = self.request("name", f"looking up {name}", name=name)
        if isinstance(value, RemoteObject):
            object.__setattr__(value, "_label", name)
        return value

    def request(self, op: str, where: str, **fields: Any) -> Any:
        """One call into the worker. A timeout or crash is also kept in `incident`, so that a test which
        catches it (by accident or on purpose) still cannot pass."""
        try:
            return self._request(op, where, **fields)
        except GradingStop as stop:
            self.incident = self.incident or stop
            raise

    def _request(self, op: str, where: str, **fields: Any) -> Any:
        if self.import_error is not None:
            raise self.import_error.as_exception()
        if self.dead_reason:
            raise WorkerCrashed(f"your code can no longer be called: {self.dead_reason}")
        # One deadline from the moment the call is sent covers sending it and receiving the answer: a
        # worker that stops reading its pipe cannot hold the harness longer than an endless loop can.
        deadline = self.deadline(self.limits.call_timeout_s)
        if op != "snap":  # anything that runs the submission's code may change any of its objects
            self.epoch += 1
            if self.read:
                fields["watch"] = list(self.read)[:protocol.MAX_WATCH]
                self.read = {}
        try:
            protocol.send(self.fd_out, {"op": op, **fields}, deadline)
        except protocol.Deadline:
            self._kill()
            limit = self.limits.call_timeout_s
            self.dead_reason = f"{where} did not finish within {limit:g} s"
            raise CallTimeout(f"{where} did not finish within {limit:g} s (your code stopped reading the "
                              "grader's call to it: is there an endless loop, or a thread that blocks?)") from None
        except (BrokenPipeError, OSError):
            self._receive(time.monotonic() + 1.0, where)  # reports how the worker died
            self._violation(where, "the worker stopped reading")
        reply = self._receive(deadline, where)
        if "ok" in reply:
            return self._result(reply["ok"], where)
        if "exc" in reply:
            remote = self._remote_exception(reply["exc"], where)
            if remote.out_of_memory:
                self._kill()
                self.dead_reason = f"{where} ran out of memory"
                raise WorkerCrashed(f"your code ran out of memory during {where} (limit {self.limits.memory_mb} MiB)")
            raise remote.as_exception()
        if "too_big" in reply and type(reply["too_big"]) is str:
            # A GradingStop, so that a test expecting an exception from this call cannot pass on it.
            raise ValueRefused(f"{where} returned {_text(reply['too_big'], 300)}, more than the grader accepts")
        self._violation(where, "an answer of unknown shape")

    def _result(self, value: Any, where: str) -> Any:
        """A call's result. A list the worker keeps (`protocol.KEPT`) is remembered with its serial, so
        that passed back unchanged it is the submission's very list again, as `complete(schedule())`
        would be in-process."""
        if type(value) is not dict or len(value) != 1 or protocol.KEPT not in value:
            return self.decode(value, where)
        body = value[protocol.KEPT]
        if type(body) is not list or len(body) != 2 or type(body[0]) is not int:
            self._violation(where, "a malformed kept list")
        found = self.decode(body[1], where)
        if type(found) is not list:
            self._violation(where, "a kept value that is not a list")
        serial = body[0]
        # The worker keeps the last KEPT_LISTS serials: those before them it has let go.
        for key, (_, older, items) in list(self.kept.items()):
            if older <= serial - protocol.KEPT_LISTS:
                del self.kept[key]
                self.remembered_items -= len(items)
        # Kept here only as the worker says it keeps it (nothing a test could change inside), and within
        # the bound: any other list passed back goes as a copy.
        items = tuple(found)
        if self.remembered_items + len(items) <= protocol.MAX_REMEMBERED_ITEMS and _unchangeable(items, self):
            self.kept[id(found)] = (found, serial, items)
            self.remembered_items += len(items)
        return found

    def scenario(self, ops: list[list[Any]], labels: list[str]) -> Observations:
        """Run a scenario's operations (already in wire form) in one message; see `Scenario`."""
        try:
            return self._scenario(ops, labels)
        except GradingStop as stop:
            self.incident = self.incident or stop
            raise
        finally:
            self.decode_budget = None
            # The snapshots that came with the results are of their step, not of the end: all stale.
            self.epoch += 1

    def _scenario(self, ops: list[list[Any]], labels: list[str]) -> Observations:
        if self.import_error is not None:
            raise self.import_error.as_exception()
        if self.dead_reason:
            raise WorkerCrashed(f"your code can no longer be called: {self.dead_reason}")
        if len(ops) > protocol.MAX_SCENARIO_OPS:
            raise ValueError(f"a scenario has at most {protocol.MAX_SCENARIO_OPS:,} operations")
        self.epoch += 1
        self.read = {}
        limit = self.limits.call_timeout_s
        # Each operation runs under the call deadline, measured here: the worker sends what it has at
        # least every `beat` seconds, so no frame for `limit + beat` seconds means the operation running
        # has taken longer than `limit`. The whole is bounded by len(ops) deadlines and the test's own
        # (a deadline for the whole alone would let an endless first operation hold the test that long).
        beat = min(0.5, limit / 10)
        values: list[Any] = []

        def where() -> str:  # the operation running, named as a proxy call would be
            return labels[min(len(values), len(labels) - 1)] if labels else "a scenario"

        try:
            protocol.send(self.fd_out, {"op": "scenario", "ops": ops, "beat": beat}, self.deadline(limit))
        except protocol.Deadline:
            self._kill()
            self.dead_reason = f"{where()} did not finish within {limit:g} s"
            raise CallTimeout(f"{self.dead_reason} (your code stopped reading the grader's call to it)") from None
        except (BrokenPipeError, OSError):
            self._receive(time.monotonic() + 1.0, where())
            self._violation(where(), "the worker stopped reading")
        self.decode_budget = protocol.MAX_SCENARIO_ITEMS
        whole = self.deadline((limit + beat) * max(1, len(ops)))  # frames that say nothing cannot extend it
        while True:
            reply = self._receive(Earliest(self.deadline(limit + beat), whole), where())
            key = "part" if "part" in reply else "scenario"
            batch = reply.get(key)
            if type(batch) is not list or len(values) + len(batch) > len(ops):
                if "too_big" in reply and type(reply["too_big"]) is str:
                    raise ValueRefused(f"{where()} returned {_text(reply['too_big'], 300)}, more than the "
                                       "grader accepts")
                self._violation(where(), "an answer of unknown shape")
            for value in batch:
                values.append(self.decode(value, where()))
            if key == "part":
                continue
            if "too_big" in reply and type(reply["too_big"]) is str:
                raise ValueRefused(f"{where()} returned {_text(reply['too_big'], 300)}, more than the grader "
                                   "accepts")
            if "exc" in reply:
                remote = self._remote_exception(reply["exc"], where())
                if remote.out_of_memory:
                    self._kill()
                    self.dead_reason = f"{where()} ran out of memory"
                    raise WorkerCrashed(f"your code ran out of memory during {where()} "
                                        f"(limit {self.limits.memory_mb} MiB)")
                return Observations(values, remote)
            if len(values) != len(ops):
                self._violation(where(), "a scenario that ended early without a reason")
            return Observations(values, None)

    def _remote_exception(self, body: Any, where: str) -> RemoteException:
        try:
            return RemoteException(
                type_name=_text(body["type"], 200), lineage=[_text(n, 200) for n in body["mro"]][:64],
                builtin=[_text(n, 200) for n in body["builtin"]][:64],
                message=_text(body["message"], 4000), traceback=[_text(t, 300) for t in body["traceback"]][:16],
                where=where,
            )
        except (KeyError, TypeError, ValueError):
            self._violation(where, "a malformed exception report")
            raise  # unreachable

    def _absorb(self, message: dict[str, Any], where: str) -> None:
        """Take in new types and fresh attribute snapshots that ride along with every reply."""
        try:
            for number, info in message.get("types", {}).items():
                if len(self.types) >= protocol.MAX_TYPES or len(info["methods"]) > protocol.MAX_METHODS:
                    raise ValueError("more types or methods than the bounds")
                self.types[int(number)] = {"name": _text(info["name"], 200),
                                           "methods": frozenset(_text(m, 200) for m in info["methods"])}
            for number, info in message.get("objs", {}).items():
                handle = int(number)
                proxy = self.proxies.get(handle)
                attrs = info["attrs"]
                kinds = set(map(type, attrs.values())) if type(attrs) is dict else {dict}
                if len(attrs) > protocol.MAX_ATTRS or not _SCALAR_TYPES.issuperset(kinds):
                    raise ValueError("attributes must be scalars")
                if str in kinds and any(type(v) is str and len(v) > protocol.MAX_ATTR_CHARS for v in attrs.values()):
                    raise ValueError("an attribute past the bound")
                if proxy is None:
                    if len(self.proxies) >= protocol.MAX_HANDLES:
                        raise ValueError("more objects than the bound")
                    type_info = self.types[int(info["type"])]
                    proxy = RemoteObject(self, handle, type_info, bool(info["callable"]))
                    self.proxies[handle] = proxy
                self._keep_attrs(proxy, attrs)
                object.__setattr__(proxy, "_epoch", self.epoch)
            same = message.get("same", [])
            if type(same) is not list or len(same) > protocol.MAX_HANDLES:
                raise ValueError("a malformed list of unchanged objects")
            for handle in same:  # re-read by this reply and unchanged: the copy here holds for this epoch
                if type(handle) is not int:
                    raise ValueError("a malformed list of unchanged objects")
                object.__setattr__(self.proxies[handle], "_epoch", self.epoch)
        except (KeyError, TypeError, ValueError, AttributeError):
            self._violation(where, "malformed object snapshots")

    def _keep_attrs(self, proxy: RemoteObject, attrs: dict[str, Any]) -> None:
        """Replace a proxy's attribute copies, within the per-worker bounds the worker also keeps."""
        old = object.__getattribute__(proxy, "_attrs")
        attrs_after = self.kept_attrs - len(old) + len(attrs)
        chars_after = self.kept_chars - _chars(old) + _chars(attrs)
        if attrs_after > protocol.MAX_KEPT_ATTRS or chars_after > protocol.MAX_KEPT_CHARS:
            raise ValueError("more attributes than the bounds")
        self.kept_attrs, self.kept_chars = attrs_after, chars_after
        object.__setattr__(proxy, "_attrs", attrs)

    # -- values --------------------------------------------------------------------------------------
    def decode(self, value: Any, where: str, depth: int = 0) -> Any:
        if depth > protocol.MAX_DEPTH:
            self._violation(where, "a value nested too deeply")
        self._spend(1, where)
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is list:
            if _flat(value):  # the common case, a list of numbers or names: nothing to decode inside
                self._spend(len(value), where)
                return value
            return self._elements(value, where, depth)
        if kind is dict and len(value) == 1:
            ((tag, inner),) = value.items()
            if tag == protocol.REF and type(inner) is int and inner in self.proxies:
                return self.proxies[inner]
            if tag == protocol.REFS and type(inner) is list:
                return self._decode_refs(inner, where)
            if tag == protocol.TUPLE and type(inner) is list and _flat(inner):
                self._spend(len(inner), where)
                return tuple(inner)
            if tag == protocol.DICT and type(inner) is list and _flat_pairs(inner):
                self._spend(2 * len(inner), where)
                return {k: v for k, v in inner}
            if tag == protocol.AS and type(inner) is list and len(inner) == 2 and type(inner[0]) is int \
                    and inner[0] in self.proxies:
                return self._original(inner[0], self.decode(inner[1], where, depth + 1))
            if tag == protocol.ROWS and type(inner) is list:
                return self._rows(inner, where)
            if tag == protocol.TUPLE and type(inner) is list:
                return tuple(self._elements(inner, where, depth))
            if tag == protocol.SET and type(inner) is list:
                try:
                    return {self.decode(v, where, depth + 1) for v in inner}
                except TypeError:
                    self._violation(where, "an unhashable set element")
            if tag == protocol.DICT and type(inner) is list:
                try:
                    return {self.decode(k, where, depth + 1): self.decode(v, where, depth + 1) for k, v in inner}
                except (TypeError, ValueError):
                    self._violation(where, "a malformed dict")
        self._violation(where, "a value of unknown shape")

    def _elements(self, values: list[Any], where: str, depth: int) -> list[Any]:
        """A list's or tuple's elements: scalars and handles (the bulk of a plan) taken as they are,
        anything else decoded in full."""
        proxies = self.proxies
        found = []
        plain = 0
        for value in values:
            kind = type(value)
            if kind in _SCALARS:
                plain += 1
                found.append(value)
            elif kind is dict and len(value) == 1 and type(handle := value.get(protocol.REF)) is int \
                    and handle in proxies:
                plain += 1
                found.append(proxies[handle])
            else:
                found.append(self.decode(value, where, depth + 1))
        self._spend(plain, where)
        return found

    def _rows(self, body: list[Any], where: str) -> list[tuple[Any, ...]]:
        """A list of tuples sent as its columns (`protocol.ROWS`), checked a column at a time."""
        if len(body) != 3 or type(body[0]) is not int or type(body[1]) is not list or type(body[2]) is not list:
            self._violation(where, "malformed rows")
        width, refs, flat = body
        if not 0 < width <= protocol.MAX_ROW_WIDTH or not flat or len(flat) % width or not _flat(flat) \
                or not all(type(at) is int and 0 <= at < width for at in refs) or len(set(refs)) != len(refs):
            self._violation(where, "malformed rows")
        count = len(flat) // width
        self._spend(count * (width + 1), where)
        columns = [flat[at * count:(at + 1) * count] for at in range(width)]
        for at in refs:
            if set(map(type, columns[at])) != {int}:
                self._violation(where, "rows with objects that were never sent")
            try:
                columns[at] = list(map(self.proxies.__getitem__, columns[at]))
            except KeyError:
                self._violation(where, "rows with objects that were never sent")
        return list(zip(*columns))

    def _decode_refs(self, handles: list[Any], where: str) -> list[Any]:
        self._spend(len(handles), where)
        if handles and set(map(type, handles)) != {int}:
            self._violation(where, "a list of objects that were never sent")
        try:
            return list(map(self.proxies.__getitem__, handles))
        except KeyError:
            self._violation(where, "a list of objects that were never sent")
            raise  # unreachable

    def _spend(self, count: int, where: str) -> None:
        if self.decode_budget is not None:
            self.decode_budget -= count
            if self.decode_budget < 0:
                self._violation(where, f"results with more than {protocol.MAX_SCENARIO_ITEMS:,} values")

    def _original(self, handle: int, value: Any) -> Any:
        """A subclass value in its base form, remembered with its original's handle. The same tuple
        again is the same object here too, as a proxy is."""
        if type(value) not in (list, tuple, dict) or not value:
            return value
        last = self.original_of.get(handle)
        if type(last) is tuple and type(value) is tuple and _same_items(last, value):
            return last
        if last is not None:
            del self.original_of[handle]
            self.remembered_items -= len(self.originals.pop(id(last))[2])
        items = _items(value)
        if self.remembered_items + len(items) > protocol.MAX_REMEMBERED_ITEMS:
            return value  # past the bound: passed back, it goes as a copy
        self.remembered_items += len(items)
        self.original_of[handle] = value
        self.originals[id(value)] = (value, handle, items)
        return value

    def encode(self, value: Any, depth: int = 0) -> Any:
        """Test-side values -> wire values. Proxies become handles; anything else must be plain data.
        A value that came from the worker as a subclass's base form (a namedtuple) goes back as the
        original object, unless the test changed it."""
        if depth > protocol.MAX_DEPTH:
            raise ValueError("the grader cannot send a value nested this deeply")
        kind = type(value)
        # A scalar or a scenario's step is never an original (only lists, tuples and dicts are): the
        # common arguments first.
        if kind in _SCALARS:
            return value
        if kind is Slot:
            return {protocol.SLOT: value.check(self)}
        original = self.originals.get(id(value))
        if original is not None and original[0] is value and _same_items(original[2], _items(value)):
            return {protocol.REF: original[1]}
        kept = self.kept.get(id(value))
        # Not in a scenario's operations: built now, run later, by when the worker may have let it go.
        if kept is not None and self.building is None and kept[0] is value and _same_items(kept[2], tuple(value)):
            return {protocol.KEPT: kept[1]}
        if isinstance(value, RemoteObject):
            if object.__getattribute__(value, "_client") is not self:
                raise ValueError("an object from another run of your code cannot be passed here")
            return {protocol.REF: object.__getattribute__(value, "_handle")}
        if kind is list:
            return [self.encode(v, depth + 1) for v in value]
        if kind is tuple:
            return {protocol.TUPLE: [self.encode(v, depth + 1) for v in value]}
        if kind in (set, frozenset):
            return {protocol.SET: [self.encode(v, depth + 1) for v in value]}
        if kind is dict:
            return {protocol.DICT: [[self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value.items()]}
        raise TypeError(f"the grader cannot send a {kind.__name__} to your code")

    def output_tail(self, limit: int = 4000) -> tuple[str, int]:
        """The end of what the worker printed, and how many bytes before it were cut."""
        try:
            size = os.path.getsize(self.output_path)
            with open(self.output_path, "rb") as handle:
                handle.seek(max(0, size - limit))
                tail = handle.read(limit)
        except OSError:
            return "", 0
        return tail.decode("utf-8", errors="replace"), max(0, size - limit)


_SCALARS = (type(None), bool, int, float, str)


def _chars(attrs: dict[str, Any]) -> int:
    return sum(len(v) for v in attrs.values() if type(v) is str) if str in set(map(type, attrs.values())) else 0


def _unchangeable(items: tuple[Any, ...], client: WorkerClient) -> bool:
    """Whether a list's elements are scalars, proxies of `client` and tuples of those: nothing a test
    could change without the list's own elements changing."""
    for item in items:
        for part in item if type(item) is tuple else (item,):
            if type(part) not in _SCALAR_TYPES and not (isinstance(part, RemoteObject)
                                                        and object.__getattribute__(part, "_client") is client):
                return False
    return True


def _items(value: Any) -> tuple[Any, ...]:
    return tuple(x for pair in value.items() for x in pair) if type(value) is dict else tuple(value)


def _same_items(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """The same elements, by identity for objects and by value (and exact type) for scalars."""
    return len(a) == len(b) and all(x is y or (type(x) is type(y) and type(x) in _SCALARS and x == y)
                                    for x, y in zip(a, b))


_SCALAR_TYPES = frozenset(_SCALARS)


def _flat(values: list[Any]) -> bool:
    """Whether a decoded JSON list holds scalars only (JSON gives no other scalar types)."""
    return _SCALAR_TYPES.issuperset(map(type, values))


def _flat_pairs(pairs: list[Any]) -> bool:
    """Whether a decoded dict's [key, value] pairs hold scalars only."""
    for pair in pairs:
        if type(pair) is not list or len(pair) != 2 or type(pair[0]) not in _SCALARS or type(pair[1]) not in _SCALARS:
            return False
    return True


def _text(value: Any, limit: int) -> str:
    if type(value) is not str:
        raise TypeError("expected text")
    return value[:limit]


class RemoteObject:
    """A proxy for one object in the worker. Identity is the only equality it has."""

    __slots__ = ("_attrs", "_callable", "_client", "_epoch", "_handle", "_label", "_type")

    def __init__(self, client: WorkerClient, handle: int, type_info: dict[str, Any], is_callable: bool) -> None:
        object.__setattr__(self, "_client", client)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_type", type_info)
        object.__setattr__(self, "_callable", is_callable)
        object.__setattr__(self, "_attrs", {})
        object.__setattr__(self, "_label", type_info["name"])
        object.__setattr__(self, "_epoch", client.epoch)

    def __getattr__(self, name: str) -> Any:
        attrs = object.__getattribute__(self, "_attrs")
        client: WorkerClient = object.__getattribute__(self, "_client")
        handle = object.__getattribute__(self, "_handle")
        type_info = object.__getattribute__(self, "_type")
        if object.__getattribute__(self, "_epoch") != client.epoch and not object.__getattribute__(self, "_callable"):
            # A copy from before the last call. A method needs no copy; an attribute the copy held is
            # fetched with the object's fresh snapshot (one round trip, then cached until the next call);
            # any other name is read remotely, which brings the fresh snapshot along too.
            if name.startswith("__") or (name in type_info["methods"] and name not in attrs):
                pass
            elif name in attrs:
                client.request("snap", f"reading {type_info['name']}.{name}", ref=handle)
                attrs = object.__getattribute__(self, "_attrs")
            else:
                return client.request("getattr", f"reading {type_info['name']}.{name}", ref=handle, name=name)
        if name in attrs:
            client.read[handle] = None
            return attrs[name]
        if name.startswith("__"):
            raise AttributeError(name)
        if name in type_info["methods"]:
            return RemoteMethod(self, name)
        return client.request("getattr", f"reading {type_info['name']}.{name}", ref=handle, name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("objects of the submission are read-only to tests")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        client = object.__getattribute__(self, "_client")
        name = object.__getattribute__(self, "_type")["name"]
        if not object.__getattribute__(self, "_callable"):
            raise TypeError(f"your {name} object is not callable")
        label = _callee_label(self)
        return client.request("call", f"{label}(...)", ref=object.__getattribute__(self, "_handle"),
                              args=client.encode(list(args)), kwargs={k: client.encode(v) for k, v in kwargs.items()})

    def _not_a_container(self, *args: Any) -> Any:
        raise TypeError(f"your code returned a {object.__getattribute__(self, '_type')['name']} object where the "
                        "grader expected a list or tuple; return plain lists, tuples, ints and your own objects")

    __iter__ = __len__ = __getitem__ = __contains__ = _not_a_container

    def __repr__(self) -> str:
        client: WorkerClient = object.__getattribute__(self, "_client")
        if object.__getattribute__(self, "_epoch") != client.epoch and not client.dead_reason \
                and not object.__getattribute__(self, "_callable"):
            client.request("snap", f"reading a {object.__getattribute__(self, '_type')['name']}",
                           ref=object.__getattribute__(self, "_handle"))
        attrs = object.__getattribute__(self, "_attrs")
        shown = ", ".join(f"{k}={v!r}" for k, v in list(attrs.items())[:8])
        return f"{_callee_label(self)}({shown})"


def _callee_label(proxy: RemoteObject) -> str:
    return object.__getattribute__(proxy, "_label")


class RemoteMethod:
    """A bound method of a remote object; calling it is one request to the worker."""

    __slots__ = ("name", "owner")

    def __init__(self, owner: RemoteObject, name: str) -> None:
        self.owner, self.name = owner, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        client: WorkerClient = object.__getattribute__(self.owner, "_client")
        return client.request("method", f"{self.name}()", ref=object.__getattribute__(self.owner, "_handle"),
                              name=self.name, args=client.encode(list(args)),
                              kwargs={k: client.encode(v) for k, v in kwargs.items()})

    def __repr__(self) -> str:
        return f"<method {self.name} of your code>"


class Slot:
    """The result of one operation of a `Scenario`, to pass to later operations or to look up in its
    `Observations`."""

    __slots__ = ("index", "scenario")

    def __init__(self, scenario: Scenario, index: int) -> None:
        self.scenario, self.index = scenario, index

    def check(self, client: WorkerClient) -> int:
        if client.building is not self.scenario:
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

    def __init__(self, client: WorkerClient, names: list[str] | None = None) -> None:
        self.client = client
        self.names = names
        self.ops: list[list[Any]] = []
        self.labels: list[str] = []

    def _encode(self, value: Any) -> Any:
        self.client.building = self
        try:
            return self.client.encode(value)
        finally:
            self.client.building = None

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
        return self._add(["new", name, encode(list(args)), {k: encode(v) for k, v in kwargs.items()}], f"{name}(...)")

    def call(self, target: Any, method: str, *args: Any, **kwargs: Any) -> Slot:
        """Call `method` of an earlier step's result (or of a proxy) with the arguments."""
        encode = self._encode
        return self._add(["call", self._target(target), method, encode(list(args)),
                          {k: encode(v) for k, v in kwargs.items()}], f"{method}()")

    def read(self, target: Any, *names: str) -> Slot:
        """The attributes `names` of an earlier step's result, as a dict; a missing one is left out."""
        return self._add(["read", self._target(target), list(names)], f"reading {', '.join(names)}")

    def group(self, *members: Any) -> Slot:
        """Objects gathered in the worker, to read together with `read_columns`; a member that is an
        earlier group adds its members, so a growing set of objects is sent once, not at every read.
        It observes nothing (None)."""
        return self._add(["group", [self._target(m) for m in members]], "grouping objects")

    def read_columns(self, targets: list[Any] | Slot, *names: str) -> Slot:
        """The attributes `names` of each of `targets` (a list, or a `group`) in one operation, as a dict
        of lists: name -> the values of the targets in order, None where one has no such attribute."""
        wire = self._target(targets) if isinstance(targets, Slot) else [self._target(t) for t in targets]
        return self._add(["columns", wire, list(names)], f"reading {', '.join(names)}")

    def run(self) -> Observations:
        return self.client.scenario(self.ops, self.labels)


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
