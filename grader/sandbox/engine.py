"""Finding a Docker engine: a connected client, or the reason there is none to talk to."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    import docker

#: What to install where the Docker SDK is missing: `pip install grader` grades on the local sandbox alone.
DOCKER_EXTRA = "the Docker SDK is not installed (pip install 'grader[docker]')"

#: The per-request timeout of the client handed out. `timeout` below only bounds the probe;
#: long operations (image builds, imports, waiting for a container) set their own.
REQUEST_TIMEOUT_S = 60.0
DEFAULT_SOCKET = "/var/run/docker.sock"


def engine_status(timeout: float = 5.0) -> tuple[docker.DockerClient | None, str]:
    """(a client whose engine answered a ping within `timeout` seconds, "") or (None, why not).

    Honours DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH like the docker CLI. Never raises
    because no engine is reachable (no socket, permission denied on it, daemon not answering, a
    remote host that does not answer): that is the caller's cue to fall back or to explain.
    """
    try:
        # The SDK is an extra: without it there is no engine to talk to, which `auto` falls back from.
        import docker
        import requests
    except ModuleNotFoundError:
        return None, DOCKER_EXTRA
    client = None
    try:
        path = _socket_path()
        if path:
            _probe(path, timeout)
        # version="auto" negotiates down to what the engine speaks (Debian's 20.10 speaks 1.41).
        # The SDK hands the timeout to requests, which takes seconds as a float; its stubs say int.
        client = docker.from_env(version="auto", timeout=max(0.1, float(timeout)))  # type: ignore[arg-type]
        if not client.ping():
            raise docker.errors.DockerException("ping did not answer OK")
    except (docker.errors.DockerException, requests.RequestException, OSError, ValueError) as exc:
        if client is not None:
            try:
                client.close()
            except Exception:
                pass
        return None, _why(exc)
    client.api.timeout = REQUEST_TIMEOUT_S  # type: ignore[assignment]  # a float, as above
    return client, ""


def engine_in_sight() -> bool:
    """Whether an engine may answer here without asking it (`auto` would then grade in Docker): its
    address is set, or its usual socket exists."""
    return "DOCKER_HOST" in os.environ or os.path.exists(DEFAULT_SOCKET)


def _socket_path() -> str:
    """The engine's socket, as DOCKER_HOST names it (the default one without it); "" for a host reached otherwise."""
    host = os.environ.get("DOCKER_HOST", "")
    return urlparse(host).path if host.startswith("unix://") else (DEFAULT_SOCKET if not host else "")


def _probe(path: str, timeout: float) -> None:
    """Connect to the engine's socket and close it again: OSError when no engine listens there. Found out
    here, first, because the SDK's own connection leaves its socket open when the connect fails."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(max(0.1, timeout))
        probe.connect(path)


def _why(exc: BaseException) -> str:
    socket_path = _socket_path()
    if socket_path and os.path.exists(socket_path) and not os.access(socket_path, os.R_OK | os.W_OK):
        return (f"the Docker socket {socket_path} exists but this user may not use it (permission denied; "
                "join the docker group or grade as root)")
    if socket_path and not os.path.exists(socket_path):
        return f"no Docker engine is running (no socket at {socket_path})"
    return f"the Docker engine did not answer ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})"


def engine_client(timeout: float = 5.0) -> docker.DockerClient | None:
    """A connected client, or None (see `engine_status` for the reason)."""
    return engine_status(timeout)[0]
