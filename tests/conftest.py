"""Shared fixtures for the project's tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# axe-core's script for the accessibility tests (`axe`) lives in tests/axe.py, the Playwright fixtures
# (chromium_browser, new_page, page) in tests/browser.py.
from tests.axe import axe  # noqa: F401
from tests.browser import chromium_browser, find_chromium, new_page, page  # noqa: F401
from tests.helpers import PROJECT

# The unit tier's guard: a test marked `unit` that starts a process or opens a socket fails (tests/tiers.py).
from tests.tiers import (  # noqa: F401
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_runtest_call,
    pytest_runtest_setup,
)


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


@pytest.fixture(scope="session")
def docker_client():
    """A connected Docker client. Without a reachable engine the test is skipped, except when
    CI=true: CI promises an engine (.ci/docker-up.sh), so its absence fails the test instead."""
    from grader.sandbox.engine import engine_client

    client = engine_client()
    if client is None:
        message = "no Docker engine is reachable (start one with .ci/docker-up.sh)"
        if _ci():
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def grading_image(docker_client) -> str:
    """The tag of the Docker grading image for the current harness code, built if missing (the base
    takes about 30-45 s the first time on this kind of machine; the harness layer under a second)."""
    from grader.sandbox.image import ensure_image

    return ensure_image(docker_client)


@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        message = "Chromium is not installed (Debian: apt-get install -y --no-install-recommends chromium)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    return path


def _required(message: str) -> None:
    """Skip the test, except under CI=true, where .ci/run installs what it needs: there it fails."""
    if _ci():
        pytest.fail(f"CI=true but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real redis-server on loopback (Debian's redis-server package)."""
    from tests.servers import Redis, redis_binary

    if redis_binary() is None:
        _required("redis-server is not installed (Debian: apt-get install -y redis-server)")
    server = Redis(tmp_path_factory.mktemp("redis"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def postgres_url():
    """The URL of a fresh PostgreSQL cluster on loopback (Debian's postgresql package)."""
    from tests.servers import postgres, postgres_bin

    if postgres_bin() is None:
        _required("PostgreSQL is not installed (Debian: apt-get install -y postgresql)")
    with postgres() as url:
        yield url


@pytest.fixture(scope="session")
def private_project(tmp_path_factory) -> Path:
    """The project as a platform bundle holds it in the platform's container: readable by root only."""
    root = tmp_path_factory.mktemp("private-project")
    os.chmod(root, 0o700)
    for folder in ("exercises", "hidden_tests", "solutions"):
        shutil.copytree(PROJECT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture(scope="session")
def account_backend():
    """The local sandbox as it grades inside a container that allows no namespaces: each submission an
    account of its own, its limits, a seccomp filter without network, Landlock where the kernel has it."""
    from grader.sandbox.isolation import account_problem
    from grader.sandbox.local import LocalBackend

    problem = account_problem()
    if problem is not None:
        _required(f"the account isolation cannot be given here: {problem}")
    return LocalBackend(isolation="account")
