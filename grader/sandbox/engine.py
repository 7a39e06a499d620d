"""Finding a Docker engine: a connected client, or None when there is none to talk to."""

from __future__ import annotations

import docker
import requests

#: The per-request timeout of the client handed out. `timeout` below only bounds the probe;
#: long operations (image builds, imports, waiting for a container) set their own.
REQUEST_TIMEOUT_S = 60.0


def engine_client(timeout: float = 5.0) -> docker.DockerClient | None:
    """A client whose engine answered a ping within `timeout` seconds, or None.

    Honours DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH like the docker CLI. Never raises
    because no engine is reachable (no socket, permission denied on it, daemon not answering, a
    remote host that does not answer): that is the caller's cue to fall back or to explain.
    """
    client = None
    try:
        # version="auto" negotiates down to what the engine speaks (Debian's 20.10 speaks 1.41).
        client = docker.from_env(version="auto", timeout=max(0.1, float(timeout)))
        if not client.ping():
            raise docker.errors.DockerException("ping did not answer OK")
    except (docker.errors.DockerException, requests.RequestException, OSError, ValueError):
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a half-open client must not mask the answer
                pass
        return None
    client.api.timeout = REQUEST_TIMEOUT_S
    return client
