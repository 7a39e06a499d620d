"""The trusted side of the worker: starts it, talks to it, and hands tests proxies of its objects.

A test never touches an object of the submission. It gets `RemoteObject` proxies whose scalar
attributes are local copies (refreshed after every call) and whose methods are remote calls with a
deadline. Whatever comes back is decoded from plain data here, so an object with a rigged `__eq__`
stays a proxy that only ever equals itself.
"""

from __future__ import annotations

import builtins
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from grader.harness import protocol
from grader.harness.limits import Limits
from grader.harness.confine import Confinement, ForkedProcess, ZygoteUnavailable, private_file

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


class SubmissionError(Exception):
    """An exception of the submission whose type has no builtin counterpart to raise here."""


@dataclass
class RemoteException:
    """What the worker told us about an exception raised by the submission."""

    type_name: str
    lineage: list[str]  # the names of the type's MRO
    message: str
    traceback: list[str]
    where: str

    def as_exception(self) -> BaseException:
        """The nearest builtin Exception type in the original's MRO, keeping the student's type name."""
        text = f"{self.type_name}: {self.message}" if self.message else self.type_name
        for name in self.lineage:
            klass = getattr(builtins, name, None)
            if isinstance(klass, type) and issubclass(klass, Exception):
                try:
                    exc: BaseException = klass(text)
                except Exception:
                    continue
                break
        else:
            # SystemExit, KeyboardInterrupt, GeneratorExit...: not something a test should catch.
            exc = SubmissionError(text)
        exc.remote = self  # type: ignore[attr-defined]
        return exc


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
        self.dead_reason: str | None = None
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        output = private_file(output_path)
        try:
            self.process: ForkedProcess = confinement.fork(
                env=env if env is not None else {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, module=module,
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

    # -- lifecycle -----------------------------------------------------------------------------------
    def wait_ready(self) -> None:
        """Wait for the worker's import of the submission; the deadline runs from the worker's start."""
        if self.is_ready:
            return
        self.is_ready = True
        message = self._receive(self.started + self.limits.import_timeout_s, "importing your file")
        if isinstance(message, dict) and "import_error" in message:
            self.import_error = self._remote_exception(message["import_error"], "importing your file")
            return
        if message.get("ready") is not True:
            self._violation("importing your file", "the worker did not report ready")

    def close(self) -> None:
        """Kill the worker's whole process group and release the pipes. Safe to call twice."""
        self._kill()
        for fd in (self.fd_in, self.fd_out):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd_in = self.fd_out = -1

    def _kill(self) -> None:
        self.process.kill()

    def _violation(self, where: str, detail: str) -> None:
        self._kill()
        self.dead_reason = f"the worker broke the grader's protocol during {where}"
        raise ProtocolViolation(f"{self.dead_reason} ({detail}); did your code write to file descriptors it does not own?")

    def _receive(self, deadline: float, where: str) -> dict[str, Any]:
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
                self.process.wait(timeout=2)
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
        try:
            protocol.send(self.fd_out, {"op": op, **fields})
        except (BrokenPipeError, OSError):
            self._receive(time.monotonic() + 1.0, where)  # reports how the worker died
            self._violation(where, "the worker stopped reading")
        reply = self._receive(time.monotonic() + self.limits.call_timeout_s, where)
        if "ok" in reply:
            return self.decode(reply["ok"], where)
        if "exc" in reply:
            remote = self._remote_exception(reply["exc"], where)
            if remote.type_name == "MemoryError" or "MemoryError" in remote.lineage:
                self._kill()
                self.dead_reason = f"{where} ran out of memory"
                raise WorkerCrashed(f"your code ran out of memory during {where} (limit {self.limits.memory_mb} MiB)")
            raise remote.as_exception()
        if "too_big" in reply:
            raise ValueError(f"{where} returned {str(reply['too_big'])[:200]}, more than the grader accepts")
        self._violation(where, "an answer of unknown shape")

    def _remote_exception(self, body: Any, where: str) -> RemoteException:
        try:
            return RemoteException(
                type_name=_text(body["type"], 200), lineage=[_text(n, 200) for n in body["mro"]][:64],
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
                self.types[int(number)] = {"name": _text(info["name"], 200),
                                           "methods": frozenset(_text(m, 200) for m in info["methods"])}
            for number, info in message.get("objs", {}).items():
                handle = int(number)
                proxy = self.proxies.get(handle)
                if proxy is None:
                    type_info = self.types[int(info["type"])]
                    proxy = RemoteObject(self, handle, type_info, bool(info["callable"]))
                    self.proxies[handle] = proxy
                attrs = info["attrs"]
                if type(attrs) is not dict or any(type(v) not in _SCALARS for v in attrs.values()):
                    raise ValueError("attributes must be scalars")
                object.__setattr__(proxy, "_attrs", attrs)
        except (KeyError, TypeError, ValueError, AttributeError):
            self._violation(where, "malformed object snapshots")

    # -- values --------------------------------------------------------------------------------------
    def decode(self, value: Any, where: str, depth: int = 0) -> Any:
        if depth > protocol.MAX_DEPTH:
            self._violation(where, "a value nested too deeply")
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is list:
            return [self.decode(v, where, depth + 1) for v in value]
        if kind is dict and len(value) == 1:
            ((tag, inner),) = value.items()
            if tag == protocol.REF and type(inner) is int and inner in self.proxies:
                return self.proxies[inner]
            if tag == protocol.TUPLE and type(inner) is list:
                return tuple(self.decode(v, where, depth + 1) for v in inner)
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

    def encode(self, value: Any, depth: int = 0) -> Any:
        """Test-side values -> wire values. Proxies become handles; anything else must be plain data."""
        if depth > protocol.MAX_DEPTH:
            raise ValueError("the grader cannot send a value nested this deeply")
        if isinstance(value, RemoteObject):
            if object.__getattribute__(value, "_client") is not self:
                raise ValueError("an object from another run of your code cannot be passed here")
            return {protocol.REF: object.__getattribute__(value, "_handle")}
        kind = type(value)
        if kind in _SCALARS:
            return value
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


def _text(value: Any, limit: int) -> str:
    if type(value) is not str:
        raise TypeError("expected text")
    return value[:limit]


class RemoteObject:
    """A proxy for one object in the worker. Identity is the only equality it has."""

    __slots__ = ("_client", "_handle", "_type", "_callable", "_attrs", "_label")

    def __init__(self, client: WorkerClient, handle: int, type_info: dict[str, Any], is_callable: bool) -> None:
        object.__setattr__(self, "_client", client)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_type", type_info)
        object.__setattr__(self, "_callable", is_callable)
        object.__setattr__(self, "_attrs", {})
        object.__setattr__(self, "_label", type_info["name"])

    def __getattr__(self, name: str) -> Any:
        attrs = object.__getattribute__(self, "_attrs")
        if name in attrs:
            return attrs[name]
        if name.startswith("__"):
            raise AttributeError(name)
        type_info = object.__getattribute__(self, "_type")
        if name in type_info["methods"]:
            return RemoteMethod(self, name)
        client = object.__getattribute__(self, "_client")
        return client.request("getattr", f"reading {type_info['name']}.{name}",
                              ref=object.__getattribute__(self, "_handle"), name=name)

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
        attrs = object.__getattribute__(self, "_attrs")
        shown = ", ".join(f"{k}={v!r}" for k, v in list(attrs.items())[:8])
        return f"{_callee_label(self)}({shown})"


def _callee_label(proxy: RemoteObject) -> str:
    return object.__getattribute__(proxy, "_label")


class RemoteMethod:
    """A bound method of a remote object; calling it is one request to the worker."""

    __slots__ = ("owner", "name")

    def __init__(self, owner: RemoteObject, name: str) -> None:
        self.owner, self.name = owner, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        client: WorkerClient = object.__getattribute__(self.owner, "_client")
        return client.request("method", f"{self.name}()", ref=object.__getattribute__(self.owner, "_handle"),
                              name=self.name, args=client.encode(list(args)),
                              kwargs={k: client.encode(v) for k, v in kwargs.items()})

    def __repr__(self) -> str:
        return f"<method {self.name} of your code>"
