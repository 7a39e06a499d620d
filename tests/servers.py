"""A real Redis and a real PostgreSQL for the tests, on loopback, in temporary folders.

Both are Debian's packages (`redis-server`, `postgresql`), started directly (not as system services)
on a free port. PostgreSQL refuses to run as root, so its cluster belongs to, and runs as, the
`postgres` account the package creates (else `nobody`).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str, wait_s: float = 60) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on port {port} within {wait_s} s")


def redis_binary() -> str | None:
    return shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Redis:
    """A redis-server without persistence; `restart()` brings it back empty, as after a crash."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = self.launch()

    def launch(self) -> subprocess.Popen:
        binary = redis_binary()
        assert binary
        process = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "no", "--dir", str(self.folder), "--protected-mode", "yes"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, process, "redis-server")
        return process

    def restart(self, down_s: float = 0) -> None:
        """Stop it, leave it down `down_s` seconds, and start it again, empty."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def stop(self) -> None:
        stop(self.process)

    def start(self) -> None:
        """Start it again (empty) after `stop()`, on the same port."""
        self.process = self.launch()

    def close(self) -> None:
        stop(self.process)


def database_account() -> pwd.struct_passwd:
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("no postgres or nobody account to run PostgreSQL as")


class Postgres:
    """A fresh PostgreSQL cluster on loopback (user `grader`, trust authentication); `restart()` stops
    it and brings it back with its data, as after a server restart or a failover."""

    def __init__(self) -> None:
        binaries = postgres_bin()
        assert binaries
        self.binaries = binaries
        account = database_account()
        self.as_account = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups"]
        self.folder = Path(tempfile.mkdtemp(prefix="grader-pg-"))
        self.data = self.folder / "data"
        self.data.mkdir()
        for path in (self.folder, self.data):
            os.chown(path, account.pw_uid, account.pw_gid)
        os.chmod(self.data, 0o700)
        self.env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.folder)}
        self.port = free_port()
        self.url = f"postgresql://grader@127.0.0.1:{self.port}/postgres"
        self.process: subprocess.Popen | None = None
        subprocess.run([*self.as_account, str(binaries / "initdb"), "-D", str(self.data), "-U", "grader",
                        "--auth=trust", "-E", "UTF8", "--no-sync"], check=True, env=self.env, cwd=self.folder,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.process = self.launch()

    def launch(self) -> subprocess.Popen:
        process = subprocess.Popen([*self.as_account, str(self.binaries / "postgres"), "-D", str(self.data),
                                    "-p", str(self.port), "-h", "127.0.0.1", "-k", str(self.folder),
                                    "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                                   env=self.env, cwd=self.folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, process, "postgres")
        # The port opens before recovery ends ("the database system is not yet accepting connections").
        deadline = time.monotonic() + 60
        while subprocess.run([str(self.binaries / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"],
                             env=self.env).returncode != 0:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("postgres started but never accepted connections")
            time.sleep(0.1)
        return process

    def restart(self, down_s: float = 0) -> None:
        """Stop it at once (a fast shutdown: every connection is cut, as in a restart or a failover),
        leave it down `down_s` seconds, start it again with its data."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def stop(self) -> None:
        """A fast shutdown: every connection is cut, as in a restart or a failover."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # SIGTERM would wait for every client to leave
            self.process.wait(timeout=30)

    def start(self) -> None:
        """Start it again with its data after `stop()`, on the same port."""
        self.process = self.launch()

    def close(self) -> None:
        if self.process is not None:
            stop(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def postgres() -> Iterator[str]:
    """A fresh PostgreSQL cluster; yields its URL."""
    cluster = Postgres()
    try:
        yield cluster.url
    finally:
        cluster.close()


def fresh_database(cluster_url: str) -> str:
    """A new, empty database in the cluster; its URL."""
    import secrets

    from sqlalchemy import create_engine, text

    name = "grader_" + secrets.token_hex(4)
    admin = create_engine(cluster_url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return cluster_url.rsplit("/", 1)[0] + "/" + name
