"""Picking a backend: `docker`, `local`, or `auto` (Docker when an engine answers, else the isolated
local sandbox: in namespaces, or inside a container that allows none in an account of its own; else a
refusal that says why)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grader.core.backend import Backend
from grader.errors import GradingError, SandboxUnavailable
from grader.sandbox.interpreter import WaitingHarness
from grader.sandbox.isolation import local_isolation
from grader.sandbox.local import LocalBackend

SANDBOXES = ("auto", "docker", "local")


@dataclass(frozen=True)
class Choice:
    backend: Backend
    name: str  # "docker" or "local"
    why: str  # what made `auto` pick it, for the user
    unsafe: bool = False  # the local sandbox without namespaces: for one's own trusted code only


def choose_backend(name: str, progress: Callable[[str], None] | None = None, *,
                   unsafe_local: bool = False, warm: bool = False) -> Backend:
    """The backend `choose` picks (it says its own name: `backend.name`)."""
    return choose(name, progress, unsafe_local=unsafe_local, warm=warm).backend


def choose(name: str, progress: Callable[[str], None] | None = None, *, unsafe_local: bool = False,
           warm: bool = False, waiting: WaitingHarness | None = None) -> Choice:
    """The sandbox to grade with. `progress` receives the lines of an image build, should the Docker
    backend need one. `unsafe_local` lets the local sandbox run without namespaces. `warm` keeps a
    sandbox ready for the next submission of the same tier (a batch, a service); such a backend must
    be closed (`close()`) when done. `waiting`: a harness started early, which a local backend takes
    for its first grading (its owner discards it when no grading claimed it)."""
    if name not in SANDBOXES:
        raise GradingError(f"unknown sandbox {name!r}; choose one of {', '.join(SANDBOXES)}")
    if name == "local":
        backend = LocalBackend(unsafe=unsafe_local, warm=warm, waiting=waiting)
        backend.check()
        return Choice(backend, "local", "asked for", unsafe=unsafe_local)
    from grader.sandbox.engine import engine_status

    client, why_not = engine_status()
    if client is not None:
        from grader.sandbox.docker_backend import DockerBackend

        return Choice(DockerBackend(client, progress=progress, warm=warm), "docker", "Docker engine found")
    if name == "docker":
        raise SandboxUnavailable(f"--sandbox docker: {why_not}")
    if unsafe_local:
        return Choice(LocalBackend(unsafe=True, warm=warm, waiting=waiting), "local", f"{why_not}; --unsafe-local", unsafe=True)
    try:
        isolation = local_isolation()
    except SandboxUnavailable as refused:
        raise SandboxUnavailable(f"no sandbox can isolate untrusted code here: {why_not}, and {refused}") from None
    how = "isolated local sandbox" if isolation == "namespaces" else "local sandbox, an account of its own per submission"
    return Choice(LocalBackend(warm=warm, isolation=isolation, waiting=waiting), "local", f"{why_not}; {how}")
