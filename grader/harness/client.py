"""The trusted side of the worker: starts it, sends it a test's calls, and reads its answers.

A test never touches an object of the submission: it gets proxies (`proxies`) whose copies and
results are decoded from plain data (`codec`), and every way a call can end other than with a value
is a stop the test cannot catch (`stops`). Each answer is read once, here: `_receive` takes in the
message and turns a timeout, an end or a broken protocol into a stop; `_ending` says how it ended. A
`Scenario` runs many operations in one message and hands back what each observed. The proxies,
scenarios and codec know the client only as their `channel.Channel`: what they need of it, and no more.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Callable
from typing import Any, NoReturn

from grader.confined import protocol
from grader.confined.bubblewrap import WORKER_NAME
from grader.confined.clock import CPUCount, Earliest, OwnDeadline, process_charge
from grader.confined.limits import Limits
from grader.harness.codec import Codec, _text
from grader.harness.confine import Confinement, ForkedProcess, ZygoteUnavailable, private_file
from grader.harness.contract import valid_arcs, valid_lines
from grader.harness.proxies import RemoteObject
from grader.harness.scenario import Observations, Scenario, Slot
from grader.harness.stops import (
    CallTimeout,
    GradingStop,
    ProtocolViolation,
    RemoteException,
    SubmissionError,
    ValueRefused,
    WorkerCrashed,
    WorkerUnavailable,
    describe_exit,
)

__all__ = ["CallTimeout", "GradingStop", "Observations", "ProtocolViolation", "RemoteException", "RemoteObject",
           "Scenario", "Slot", "SubmissionError", "ValueRefused", "WorkerClient", "WorkerCrashed",
           "WorkerUnavailable"]

# A test's worker's environment (its HOME is its own folder): what a program run from a terminal would
# find, so that one that asks for its user (getpass, os.environ["USER"]) runs as it does there.
WORKER_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "USER": WORKER_NAME, "LOGNAME": WORKER_NAME}


class WorkerClient:
    """One worker process: one submission import, many calls, one test."""

    def __init__(self, *, confinement: Confinement, module: str, limits: Limits, output_path: str,
                 env: dict[str, str] | None = None, cpu: Callable[[], CPUCount] | None = None,
                 wait: bool = True) -> None:
        self.limits = limits
        self.output_path = output_path
        self.codec = Codec(self, self._violation)
        self.dead_reason: str | None = None
        self.epoch = 0  # calls so far: a proxy's copy taken at an earlier epoch is stale
        self.read: dict[int, None] = {}  # proxies whose copies the test read since the last call
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        output = private_file(output_path)
        try:
            self.process: ForkedProcess = confinement.fork(
                env=env if env is not None else WORKER_ENV, module=module,
                fds=(to_worker_r, from_worker_w, output), wait=wait)
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
        # The time this worker waited for a CPU that work of no grading held is not charged to the
        # submission. What the gradings' processes used is never credited (a fork bomb's, spinners', another
        # lane's, another grading's): their control groups' count (`cpu`); else what every process of the
        # worker's account visibly used, where that account is the grading's alone: run as the grader's own
        # account without a namespace (--unsafe-local), the account's processes are everyone else's too,
        # and only the worker's own threads count.
        job = confinement.job
        account = job.worker_user if job.worker_user is not None else (os.getuid() if confinement.namespaced else None)
        self.charge = process_charge(self.process.seen_as, account, cpu)

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
        if protocol.IMPORT_ERROR in message:
            self.import_error = self.codec.remote_exception(message[protocol.IMPORT_ERROR], "importing your file")
            return
        if message.get(protocol.READY) is not True:
            self._violation("importing your file", "the worker did not report ready")

    def idle(self) -> bool:
        """Whether the worker, between calls, is still alive with nothing unasked on its pipe (a dead
        worker's pipe reads as closed)."""
        if self.dead_reason or self.inbox.buffer or self.process is None or self.process.poll() is not None:
            return False
        return not select.select([self.fd_in], [], [], 0)[0]

    def close(self, swept: bool = False) -> None:
        """Kill the worker's whole process group, wait for its end and release the pipes. Safe to call
        twice. With `swept`, the caller's sweep of the confinement kills it and the caller awaits its end
        (`process.await_end`): only the pipes are released here."""
        if not swept:
            self.process.kill()
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

    def _stopped(self, stop: type[GradingStop], reason: str, message: str) -> NoReturn:
        """End the worker for good: every later call says `reason`; this one raises `stop`."""
        self._kill()
        self.dead_reason = reason
        raise stop(message)

    def _timed_out(self, where: str, limit: float, hint: str) -> NoReturn:
        self._stopped(CallTimeout, f"{where} did not finish within {limit:g} s",
                      f"{where} did not finish within {limit:g} s ({hint})")

    # -- the wire ------------------------------------------------------------------------------------
    def _send(self, message: dict[str, Any], deadline: protocol.Until, where: str) -> None:
        """Send a request. One deadline from the moment the call is sent covers sending it and receiving
        the answer: a worker that stops reading its pipe cannot hold the harness longer than an endless
        loop can."""
        try:
            protocol.send(self.fd_out, message, deadline)
        except protocol.Deadline:
            self._timed_out(where, self.limits.call_timeout_s, "your code stopped reading the grader's call "
                            "to it: is there an endless loop, or a thread that blocks?")
        except (BrokenPipeError, OSError):
            self._receive(time.monotonic() + 1.0, where)  # reports how the worker died
            self._violation(where, "the worker stopped reading")

    def _receive(self, deadline: protocol.Until, where: str) -> dict[str, Any]:
        """The next message, checked and with its snapshots taken in; how the worker failed to send one
        (a timeout, an end, a broken protocol) raised as a stop."""
        if self.dead_reason:
            raise WorkerCrashed(f"your code can no longer be called: {self.dead_reason}")
        try:
            message = self.inbox.receive(deadline)
        except protocol.Deadline:
            limit = self.limits.import_timeout_s if where == "importing your file" else self.limits.call_timeout_s
            self._timed_out(where, limit, "is there an endless loop?")
        except protocol.PeerClosed:
            try:
                self.process.wait()  # the zygote's note of its end, for as long as the zygote is there
            except subprocess.TimeoutExpired:
                self._kill()
            how = describe_exit(self.process.returncode)
            self._stopped(WorkerCrashed, f"the worker process ended during {where}: {how}",
                          f"your code ended the worker process during {where}: {how}")
        except protocol.ProtocolError as exc:
            self._violation(where, str(exc))
        if type(message) is not dict:
            self._violation(where, "a message that is not an object")
        if protocol.FATAL in message:  # the worker could not keep its side consistent: never judge on stale copies
            fatal = message[protocol.FATAL]
            reason = _text(fatal, 300) if type(fatal) is str else "it failed"
            self._stopped(WorkerCrashed, reason, f"your code can no longer be called after {where}: {reason}")
        self.codec.absorb(message, where)
        return message

    def _ending(self, reply: dict[str, Any], where: str) -> RemoteException | None:
        """How an answer ended when it carries no value: the submission's exception (returned, for the
        caller to raise or to keep), or a value past the bounds and a worker out of memory (raised as
        stops, which no test can take for the exception it expects). None when it ended well."""
        if protocol.TOO_BIG in reply:
            if type(reply[protocol.TOO_BIG]) is not str:
                self._violation(where, "an answer of unknown shape")
            raise ValueRefused(f"{where} returned {_text(reply[protocol.TOO_BIG], 300)}, more than the grader accepts")
        if protocol.EXC not in reply:
            return None
        remote = self.codec.remote_exception(reply[protocol.EXC], where)
        if remote.out_of_memory:
            self._stopped(WorkerCrashed, f"{where} ran out of memory",
                          f"your code ran out of memory during {where} (limit {self.limits.memory_mb} MiB)")
        return remote

    def _usable(self) -> None:
        if self.import_error is not None:
            raise self.import_error.as_exception()
        if self.dead_reason:
            raise WorkerCrashed(f"your code can no longer be called: {self.dead_reason}")

    # -- requests ------------------------------------------------------------------------------------
    def lookup(self, name: str) -> Any:
        """A top-level name of the submission (a class, usually), as a proxy labelled with its name."""
        value = self.request(protocol.OP_NAME, f"looking up {name}", {protocol.NAME: name})
        if isinstance(value, RemoteObject):
            object.__setattr__(value, "_label", name)
        return value

    def request(self, op: str, where: str, fields: dict[str, Any]) -> Any:
        """One call into the worker. A timeout or crash is also kept in `incident`, so that a test which
        catches it (by accident or on purpose) still cannot pass."""
        try:
            return self._request(op, where, fields)
        except GradingStop as stop:
            self.incident = self.incident or stop
            raise

    def _request(self, op: str, where: str, fields: dict[str, Any]) -> Any:
        self._usable()
        deadline = self.deadline(self.limits.call_timeout_s)
        if op != protocol.OP_SNAP:  # anything that runs the submission's code may change any of its objects
            self.epoch += 1
            if self.read:
                fields[protocol.WATCH] = list(self.read)[:protocol.MAX_WATCH]
                self.read = {}
        self._send({protocol.OP: op, **fields}, deadline, where)
        reply = self._receive(deadline, where)
        if protocol.OK in reply:
            return self.codec.result(reply[protocol.OK], where)
        remote = self._ending(reply, where)
        if remote is None:
            self._violation(where, "an answer of unknown shape")
        raise remote.as_exception()

    def trace_lines(self) -> None:
        """Have the worker record the lines and arcs of the submission's file that run (an audit's grading
        of a correct solution). A failure is the test's, as any call's."""
        self.request(protocol.OP_TRACE, "starting to record the lines that run", {})

    def reached(self) -> tuple[list[int], list[list[int]]]:
        """The lines and the arcs the worker recorded since `trace_lines`, each checked as data
        (`contract.valid_lines`, `contract.valid_arcs`); none of either when it cannot say (it ended, or
        answered wrong): a report of fewer lines or arcs, never a failure."""
        try:
            self._usable()
            deadline = self.deadline(self.limits.call_timeout_s)
            self._send({protocol.OP: protocol.OP_LINES}, deadline, "reading the lines that ran")
            reply = self._receive(deadline, "reading the lines that ran")
        except Exception:  # a stop, a student's exception (its import failed), a wrong answer: nothing to say
            return [], []
        lines: list[int] = []
        arcs: list[list[int]] = []
        try:
            lines = valid_lines(reply.get(protocol.OK))
        except ValueError:
            pass
        try:
            arcs = valid_arcs(reply.get(protocol.ARCS))
        except ValueError:
            pass
        return lines, arcs

    def encode(self, value: Any, scenario: object = None) -> Any:
        """A test's value in wire form (`codec`); `scenario`: the one whose operation is being built."""
        return self.codec.encode(value) if scenario is None else self.codec.encode_step(value, scenario)

    def run_scenario(self, ops: list[list[Any]], labels: list[str]) -> tuple[list[Any], RemoteException | None]:
        """Run a scenario's operations (already in wire form) in one message: what each observed, up to
        the one that raised, and its exception; see `Scenario`."""
        try:
            return self._scenario(ops, labels)
        except GradingStop as stop:
            self.incident = self.incident or stop
            raise
        finally:
            self.codec.decode_budget = None
            # The snapshots that came with the results are of their step, not of the end: all stale.
            self.epoch += 1

    def _scenario(self, ops: list[list[Any]], labels: list[str]) -> tuple[list[Any], RemoteException | None]:
        self._usable()
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

        self._send({protocol.OP: protocol.OP_SCENARIO, protocol.OPS: ops, protocol.BEAT: beat},
                   self.deadline(limit), where())
        codec = self.codec
        codec.decode_budget = protocol.MAX_SCENARIO_ITEMS
        whole = self.deadline((limit + beat) * max(1, len(ops)))  # frames that say nothing cannot extend it
        while True:
            reply = self._receive(Earliest(self.deadline(limit + beat), whole), where())
            key = protocol.PART if protocol.PART in reply else protocol.END
            batch = reply.get(key)
            if type(batch) is not list or len(values) + len(batch) > len(ops):
                self._ending(reply, where())  # a refused value ends a scenario with no results
                self._violation(where(), "an answer of unknown shape")
            for value in batch:
                values.append(codec.decode(value, where()))
            if key == protocol.PART:
                continue
            remote = self._ending(reply, where())
            if remote is None and len(values) != len(ops):
                self._violation(where(), "a scenario that ended early without a reason")
            return values, remote

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


