"""The `unit` tier's promise, kept: a test marked `unit` starts no process (no sandbox, no server, no
browser, no subprocess of the grader), opens no socket and makes no Docker client.

While a unit test's setup and call run (not its teardown, where the session's fixtures of other tests
may end their servers after the last test), the ways to start a process or reach a server raise
`NotUnit`, a BaseException so that no `except Exception` in the code under test can swallow it; what was
tried is also recorded, and the test fails with it even if something caught it anyway.

To find tests that could join the tier: `GRADER_GUARD_EVERY_TEST=1 python -m pytest -m "not slow and not unit"`
guards every test; those that still pass (from an empty `XDG_CACHE_HOME` too) qualify.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# Starting a process: subprocess (and asyncio's) through Popen._execute_child, multiprocessing's spawn and
# forkserver through fork_exec; the rest are the os module's own ways.
PROCESS_CALLS = [(subprocess.Popen, "_execute_child"), (_posixsubprocess, "fork_exec"), (os, "fork"), (os, "forkpty"), (os, "posix_spawn"),
                 (os, "posix_spawnp"), (os, "system"), (os, "execv"), (os, "execve")]
# Reaching or being a server (Redis, PostgreSQL, a Docker engine's socket, a uvicorn on loopback).
# A bind alone is allowed: urllib3 binds ::1 on import to learn whether the machine has IPv6.
SOCKET_CALLS = [(socket.socket, "connect"), (socket.socket, "connect_ex"), (socket.socket, "listen")]


class NotUnit(BaseException):
    """A test marked `unit` tried to start a process, reach a server or make a Docker client."""


def _refuse(what: str, tried: list[str]) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        tried.append(what)
        raise NotUnit(f"a unit test may not {what}: mark it otherwise, or give it what it needs in-process")

    return refused


def _docker_calls() -> list[tuple[Any, str]]:
    try:
        from docker.api.client import APIClient
    except ImportError:
        return []
    return [(APIClient, "__init__")]


@contextlib.contextmanager
def refused_outside_calls() -> Iterator[list[str]]:
    """While inside: every way out of the process raises `NotUnit`; yields what was tried."""
    tried: list[str] = []
    docker_calls = _docker_calls()  # imported before the sockets are refused
    with pytest.MonkeyPatch.context() as patch:
        for owner, name in PROCESS_CALLS:
            if hasattr(owner, name):
                patch.setattr(owner, name, _refuse(f"start a process ({name})", tried))
        for owner, name in SOCKET_CALLS:
            patch.setattr(owner, name, _refuse(f"use a socket ({name})", tried))
        for owner, name in docker_calls:
            patch.setattr(owner, name, _refuse("make a Docker client", tried))
        yield tried


def _is_unit(item: pytest.Item) -> bool:
    return item.get_closest_marker("unit") is not None or os.environ.get("GRADER_GUARD_EVERY_TEST") == "1"


def _guarded(item: pytest.Item) -> Iterator[None]:
    """A hook wrapper's body: the phase runs under `refused_outside_calls` when the test is a unit test."""
    if not _is_unit(item):
        return (yield)
    with refused_outside_calls() as tried:
        result = yield
    if tried:
        raise NotUnit(f"{item.nodeid} is marked unit but tried to: {', '.join(sorted(set(tried)))}")
    return result


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before unit tests run: the test lists of the project's own suites, which the host gets once from a
    pytest collection (a subprocess) and then keeps on disk (`suite_tests.list_test_ids`), made here if missing,
    so that a unit test reading an exercise finds them, as every grading after the first does."""
    if any(_is_unit(item) for item in session.items):
        warm_test_lists()


def warm_test_lists() -> None:
    from grader.core.exercise import load_exercise
    from grader.core.suite_tests import list_test_ids
    from tests.helpers import PROJECT

    for folder in (PROJECT / "exercises", PROJECT / "tests" / "course" / "exercises"):
        for toml in sorted(folder.glob("*/exercise.toml")):
            for suite in load_exercise(str(toml.parent)).suites.values():
                list_test_ids(suite)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tiers do not overlap: `-m unit`, `-m "not slow and not unit"` and `-m slow` are the whole suite once."""
    both = [item.nodeid for item in items if item.get_closest_marker("unit") and item.get_closest_marker("slow")]
    if both:
        raise pytest.UsageError(f"tests marked both unit and slow (a unit test is fast): {both}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))
