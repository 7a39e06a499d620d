"""Picking a backend: `docker`, `local`, or `auto` (Docker when an engine answers, else the isolated
local sandbox, else a refusal that says why)."""

from __future__ import annotations

from collections.abc import Callable

from grader.errors import GradingError, SandboxUnavailable
from grader.grading import Backend
from grader.sandbox.local import LocalBackend, isolation_problem, refusal

SANDBOXES = ("auto", "docker", "local")


def choose_backend(name: str, progress: Callable[[str], None] | None = None, *,
                   unsafe_local: bool = False) -> tuple[Backend, str, str]:
    """(backend, its name, why it was chosen). `progress` receives the lines of an image build, should
    the Docker backend need one. `unsafe_local` lets the local sandbox run without namespaces."""
    if name not in SANDBOXES:
        raise GradingError(f"unknown sandbox {name!r}; choose one of {', '.join(SANDBOXES)}")
    if name == "local":
        backend = LocalBackend(unsafe=unsafe_local)
        backend.check()
        return backend, "local", "asked for"
    from grader.sandbox.engine import engine_status

    client, why_not = engine_status()
    if client is not None:
        from grader.sandbox.docker_backend import DockerBackend

        return DockerBackend(client, progress=progress), "docker", "Docker engine found"
    if name == "docker":
        raise SandboxUnavailable(f"--sandbox docker: {why_not}")
    if unsafe_local:
        return LocalBackend(unsafe=True), "local", f"{why_not}; --unsafe-local"
    problem = isolation_problem()
    if problem is not None:
        raise SandboxUnavailable(f"no sandbox can isolate untrusted code here: {why_not}, and {refusal(problem)}")
    return LocalBackend(), "local", f"{why_not}; isolated local sandbox"
