"""Picking a backend: `docker`, `local`, or `auto` (Docker when an engine answers, else local)."""

from __future__ import annotations

from collections.abc import Callable

from grader.errors import GradingError
from grader.grading import Backend
from grader.sandbox.local import run_local

SANDBOXES = ("auto", "docker", "local")


def choose_backend(name: str, progress: Callable[[str], None] | None = None) -> tuple[Backend, str]:
    """`progress` receives the lines of an image build, should the Docker backend need one."""
    if name not in SANDBOXES:
        raise GradingError(f"unknown sandbox {name!r}; choose one of {', '.join(SANDBOXES)}")
    if name == "local":
        return run_local, "local"
    from grader.sandbox.engine import engine_client

    client = engine_client()
    if client is not None:
        from grader.sandbox.docker_backend import DockerBackend

        return DockerBackend(client, progress=progress), "docker"
    if name == "docker":
        raise GradingError("--sandbox docker: no Docker engine is reachable (is dockerd running, and may this user "
                           "use /var/run/docker.sock?)")
    return run_local, "local"
