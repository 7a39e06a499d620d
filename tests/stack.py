"""The course server's stack (docker-compose.yml) brought up as a department would, with images CI can build.

No container registry is reached here, so the images the file names (postgres, redis, caddy, Debian's) are
replaced through its variables: the course server's own image is built by Compose from deploy/Dockerfile on
the base `grader image build` bootstraps (its Python packages from wheels made on this machine), and one image
of Debian's postgresql, redis-server and caddy packages (deploy/services.Dockerfile) stands in for the
three. Caddy ends TLS with its own CA (`tls internal`) for `localhost`; the client trusts that CA alone.

Used by tests/test_stack.py (the smoke through the stack) and benchmarks/bench_stack_up.py.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.servers import free_port

PROJECT = Path(__file__).resolve().parent.parent
WHEELS = PROJECT / "deploy" / "wheels"
# What Debian's Python 3.11.2 (the base's) needs beyond what pip resolves for this interpreter: redis
# wants async-timeout below 3.11.3, and building grader's own wheel in the image wants setuptools.
WHEELS_FOR_THE_BASE = ("async-timeout>=4.0.3", "setuptools>=61", "backports.tarfile")
SIGNIN = re.compile(r"instructor sign-in \(works once\): (https://\S+)")
STUDENT_LINK = re.compile(r'<tr><td>([^<]+)</td><td class="link">(https?://[^<]+)</td></tr>')


PLUGIN = ["docker", "compose"]
STANDALONE = ["docker-compose"]


def compose_commands() -> list[list[str]]:
    """The implementations of Compose this machine has: Debian's `docker-compose` (1.29), the compose
    plugin (`docker compose`), in that order."""
    found = [STANDALONE] if shutil.which("docker-compose") else []
    if shutil.which("docker") and subprocess.run([*PLUGIN, "version"], capture_output=True,
                                                 timeout=60).returncode == 0:
        found.append(PLUGIN)
    return found


def compose_command() -> list[str] | None:
    """Debian's `docker-compose` (1.29), else the compose plugin, else None."""
    found = compose_commands()
    return found[0] if found else None


def run(argv: list[str], timeout: float = 1200, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done  # type: ignore[no-any-return]


def prepare_images() -> dict[str, str]:
    """Make what the stack's images are built from (the wheels, the stand-in image of the services); the
    variables that point docker-compose.yml at them."""
    from grader.sandbox.image import base_tag

    base = base_tag()
    if run(["docker", "image", "ls", "-q", base]).stdout.strip() == "":
        raise RuntimeError(f"{base} is missing: run `grader image build` first")
    WHEELS.mkdir(exist_ok=True)
    run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(WHEELS), f"{PROJECT}[service,lti,docker]"])
    run([sys.executable, "-m", "pip", "download", "-q", "-d", str(WHEELS), *WHEELS_FOR_THE_BASE])
    for own in WHEELS.glob("grader-*.whl"):  # the image builds grader from its source; this wheel would only
        own.unlink()                          # change the build's context each time it is made
    services = "grader-services:" + base.split(":")[1]
    if run(["docker", "image", "ls", "-q", services]).stdout.strip() == "":
        run(["docker", "build", "-q", "-f", str(PROJECT / "deploy" / "services.Dockerfile"), "--build-arg",
             f"BASE={base}", "-t", services, str(PROJECT)])
    return {"GRADER_BASE_IMAGE": base, "GRADER_PIP_OPTIONS": "--no-index --find-links=/src/deploy/wheels",
            "GRADER_POSTGRES_IMAGE": services, "GRADER_REDIS_IMAGE": services, "GRADER_CADDY_IMAGE": services,
            "GRADER_IMAGE_TAG": "ci"}


@dataclass
class Stack:
    """One stack of docker-compose.yml under a project name of its own, on free ports of this machine."""
    name: str
    folder: Path
    images: dict[str, str]
    https_port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    password: str = field(default_factory=lambda: secrets.token_hex(16))
    clients: list[httpx.Client] = field(default_factory=list)
    # The Compose that runs it: docker-compose 1.29 or the plugin (the first this machine has by default).
    command: list[str] = field(default_factory=lambda: compose_command() or STANDALONE)

    @property
    def url(self) -> str:
        return f"https://localhost:{self.https_port}"

    def environment(self) -> dict[str, str]:
        import os

        return {**os.environ, **self.images, "GRADER_DOMAIN": "localhost", "GRADER_TLS": "tls internal",
                "POSTGRES_PASSWORD": self.password, "GRADER_HTTPS_PORT": str(self.https_port),
                "GRADER_HTTP_PORT": str(self.http_port), "GRADER_COURSE": str(PROJECT)}

    def compose(self, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
        return run([*self.command, "-p", self.name, "-f", str(PROJECT / "docker-compose.yml"), *args], timeout=timeout,
                   env=self.environment(), cwd=PROJECT)

    def build(self) -> None:
        self.compose("build", "-q" if self.command == PLUGIN else "--quiet")

    def up(self) -> None:
        self.compose("up", "-d")

    def wait_ready(self, wait_s: float = 600) -> None:
        """Until the proxy answers over TLS and hands a request to `grader serve`."""
        deadline = time.monotonic() + wait_s
        last = ""
        while time.monotonic() < deadline:
            try:
                with httpx.Client(verify=False, timeout=5) as probe:  # the CA is fetched once the proxy made it
                    if probe.get(f"{self.url}/favicon.ico").status_code < 400:
                        return
            except httpx.HTTPError as exc:
                last = str(exc)
            time.sleep(0.5)
        raise RuntimeError(f"the stack {self.name} did not answer in {wait_s} s ({last}):\n{self.logs()}")

    def certificate_authority(self) -> ssl.SSLContext:
        """Trust Caddy's own root certificate, and nothing else."""
        root = self.compose("exec", "-T", "proxy", "cat", "/data/caddy/pki/authorities/local/root.crt").stdout
        path = self.folder / f"{self.name}-root.crt"
        path.write_text(root)
        return ssl.create_default_context(cafile=str(path))

    def client(self) -> httpx.Client:
        client = httpx.Client(base_url=self.url, verify=self.certificate_authority(), follow_redirects=True,
                              timeout=60)
        self.clients.append(client)
        return client

    def instructor_link(self, wait_s: float = 120) -> str:
        """The path of the newest one-time instructor link `grader serve` printed."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            found = SIGNIN.findall(self.compose("logs", "--no-color", "web").stdout)
            if found:
                return urlsplit(found[-1]).path
            time.sleep(0.5)
        raise RuntimeError(f"no instructor link in the web service's log:\n{self.logs()}")

    def exec_web(self, *argv: str) -> str:
        return self.compose("exec", "-T", "web", *argv).stdout

    def container(self, service: str) -> str:
        # -a: the compose plugin lists a stopped service's container only when asked (1.29 always does).
        return self.compose("ps", "-a", "-q", service).stdout.strip()

    def tables(self) -> dict[str, list[list[object]]]:
        """Every row of every table of the stack's store, read inside its web container."""
        code = ("import json; from sqlalchemy import MetaData, select; from grader.course.store import Store; "
                "s = Store(__import__('os').environ['GRADER_DB']); m = MetaData(); m.reflect(s.engine); "
                "c = s.engine.connect(); "
                "print(json.dumps({n: sorted(([repr(v) for v in r] for r in c.execute(select(t))), key=repr) "
                "for n, t in m.tables.items()}))")
        return json.loads(self.exec_web("python3", "-c", code))  # type: ignore[no-any-return]

    def logs(self) -> str:
        try:
            return self.compose("logs", "--no-color", "--tail", "60").stdout[-8000:]
        except RuntimeError as exc:
            return str(exc)

    def down(self) -> None:
        for client in self.clients:
            client.close()
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.compose("down", "-v", "--remove-orphans", timeout=300)


@contextlib.contextmanager
def stack(name: str, folder: Path, images: dict[str, str], command: list[str] | None = None) -> Iterator[Stack]:
    """A stack, taken down with its volumes afterwards whatever happens."""
    made = Stack(name=f"{name}{secrets.token_hex(3)}", folder=folder, images=images,
                 command=command or compose_command() or STANDALONE)
    try:
        yield made
    finally:
        made.down()
