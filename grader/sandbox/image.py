"""The Docker grading image, built on this machine without any registry.

Two layers, each tagged by a content hash so that a stale image is never used:

* ``grader-base:<hash>`` -- a Debian rootfs made by ``mmdebstrap`` (python3, pytest, pytest-timeout,
  hypothesis, at the versions the suite ships, plus the extra packages an exercise declares in its
  ``[sandbox] packages``) and imported with the engine's image-import API. The hash covers the
  recipe: suite, variant, packages, mmdebstrap options and RECIPE_VERSION; an exercise without extra
  packages shares the one base every such exercise uses.
  Bump RECIPE_VERSION to pick up new Debian point releases / security updates.
* ``grader-harness:<hash>`` -- the base plus the in-sandbox code (``grader/__init__.py`` and
  ``grader/harness/**/*.py``, ``grader/confined/**/*.py``) under ``/opt/grader``, and the empty job folders of ``IMAGE_DIRS``.
  Built from an in-memory build context (``FROM`` a local image needs no registry). The hash covers
  the base tag, the generated Dockerfile and every path, mode and byte of the layer, so any change
  to a harness file gives a new tag.

Host side only: needs the ``docker`` SDK, ``mmdebstrap`` (for the base) and root (mmdebstrap's
root mode; `.ci/docker-up.sh` installs it).
"""

from __future__ import annotations

import collections
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker
import requests

from grader.errors import GradingError
from grader.harness.contract import WORKER_NAME
from grader.sandbox import layout
from grader.sandbox.folders import owned_folder
from grader.sandbox.worker_accounts import WORKER_UIDS

Progress = Callable[[str], None] | None

# --- the base recipe ------------------------------------------------------------------------------

#: Bump to force a rebuild of the base (new point release, security updates, changed hooks).
RECIPE_VERSION = 1
SUITE = "bookworm"
VARIANT = "apt"
PACKAGES = ("python3", "python3-pytest", "python3-pytest-timeout", "python3-hypothesis")
MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"
#: Measured on bookworm: 225 MB with none of these, 131 MB with them. The merged-usr hook alone saves
#: ~45 MB: without it, init-system-helpers pulls `usrmerge` and with it the whole of perl.
MMDEBSTRAP_OPTIONS = (
    f"--hook-dir={MERGED_USR_HOOKS}",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--dpkgopt=path-exclude=/usr/share/lintian/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-include=/usr/share/locale/locale.alias",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
)
BASE_REPOSITORY = "grader-base"
MMDEBSTRAP_TIMEOUT_S = 1200.0

# --- the harness layer ----------------------------------------------------------------------------

HARNESS_REPOSITORY = "grader-harness"
#: The harness package lands at /opt/grader/grader/...; PYTHONPATH points at /opt/grader.
HARNESS_PREFIX = "opt/grader"
#: Empty folders created in the image (path without leading slash, mode), all owned by root.
IMAGE_DIRS: tuple[tuple[str, int], ...] = (
    ("job", 0o700),
    ("work", 0o1777),
)
IMAGE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONPATH": "/" + HARNESS_PREFIX,
    # The root is read-only in a grading run; do not even try to write __pycache__.
    "PYTHONDONTWRITEBYTECODE": "1",
}
LAYER_VERSION = 1
LABEL_PREFIX = "org.grader"
#: The grader package on this host: where the harness code is read from.
PACKAGE_DIR = Path(__file__).resolve().parent.parent

_TAG_CHARS = 16  # 64 bits of sha256 in the tag; the full digest is in a label


class ImageBuildError(GradingError):
    """The grading image could not be built; the message says what is missing or what failed."""


# --- tags -----------------------------------------------------------------------------------------


def all_packages(extra: Iterable[str] = ()) -> list[str]:
    """The base's Debian packages: the grader's own and an exercise's extra ones, sorted, once each."""
    return sorted({*PACKAGES, *extra})


def base_recipe(extra: Iterable[str] = ()) -> dict[str, Any]:
    return {
        "recipe_version": RECIPE_VERSION,
        "suite": SUITE,
        "variant": VARIANT,
        "packages": all_packages(extra),
        "mmdebstrap_options": list(MMDEBSTRAP_OPTIONS),
    }


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def base_tag(extra: Iterable[str] = ()) -> str:
    """``grader-base:<hash of the recipe>`` (with an exercise's extra packages)."""
    return f"{BASE_REPOSITORY}:{_digest(base_recipe(extra))[:_TAG_CHARS]}"


def harness_files(package_dir: Path | str | None = None) -> list[tuple[str, bytes]]:
    """The in-sandbox code (see `layout.harness_files`); a missing package is a build error."""
    package = Path(package_dir) if package_dir is not None else PACKAGE_DIR
    if not (package / "__init__.py").is_file():
        raise ImageBuildError(f"no harness code: {package / '__init__.py'} does not exist")
    return layout.harness_files(package)


def _layer_entries(files: Iterable[tuple[str, bytes]]) -> list[tuple[str, int, bytes | None]]:
    """Every member of the harness layer: (path without leading slash, mode, bytes or None for a dir)."""
    dirs: dict[str, int] = {}
    for path, mode in IMAGE_DIRS:
        dirs[path.strip("/")] = mode
    parts = HARNESS_PREFIX.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        dirs.setdefault("/".join(parts[:i]), 0o755)
    entries_files = []
    for relative, data in files:
        if relative.startswith("/") or ".." in relative.split("/"):
            raise ImageBuildError(f"refusing a harness path outside the package: {relative!r}")
        target = f"{HARNESS_PREFIX.strip('/')}/{relative}"
        folder = target.rsplit("/", 1)[0]
        while folder and folder not in dirs:
            dirs[folder] = 0o755
            folder = folder.rpartition("/")[0]
        entries_files.append((target, 0o644, data))
    return sorted([(d, m, None) for d, m in dirs.items()]) + sorted(entries_files, key=lambda e: e[0])


def _dockerfile(base: str) -> str:
    env = " ".join(f"{k}={v}" for k, v in IMAGE_ENV.items())
    # Compiled once here: a grading's root is read-only, so without them every run compiles the harness.
    compile_harness = f"RUN python3 -m compileall -q /{HARNESS_PREFIX}"
    return f"FROM {base}\nADD harness.tar /\n{compile_harness}\n{_worker_accounts()}\nENV {env}\n"


def _worker_accounts() -> str:
    """The step that names the accounts workers run as (`worker_accounts.WORKER_UIDS`), so that a submission that
    asks who runs it (getpass, pwd) gets an answer, as in the local sandbox (`confine.account_files`)."""
    script = (f"first, last = {WORKER_UIDS.start}, {WORKER_UIDS.stop - 1}\n"
              "with open('/etc/passwd', 'a') as passwd, open('/etc/group', 'a') as group:\n"
              "    for uid in range(first, last + 1):\n"
              f"        passwd.write(f'{WORKER_NAME}:x:{{uid}}:{{uid}}:{WORKER_NAME}:/tmp:/usr/sbin/nologin\\n')\n"
              f"        group.write(f'{WORKER_NAME}:x:{{uid}}:\\n')\n")
    return f"RUN {json.dumps(['python3', '-c', script])}"


def _harness_digest(files: Iterable[tuple[str, bytes]], base: str) -> str:
    entries = [[path, mode, None if data is None else hashlib.sha256(data).hexdigest()]
               for path, mode, data in _layer_entries(files)]
    return _digest({"layer_version": LAYER_VERSION, "base": base, "dockerfile": _dockerfile(base),
                    "entries": entries})


def harness_tag(files: Iterable[tuple[str, bytes]] | None = None, base: str | None = None) -> str:
    """``grader-harness:<hash>`` for these harness files (default: the ones on disk now)."""
    files = harness_files() if files is None else list(files)
    return f"{HARNESS_REPOSITORY}:{_harness_digest(files, base or base_tag())[:_TAG_CHARS]}"


def image_tag(client: docker.DockerClient | None = None, extra: Iterable[str] = ()) -> str:
    """The tag of the grading image the current code wants (whether or not it exists yet).

    Computed from the recipe (with an exercise's extra packages) and the harness files alone;
    `client` is accepted for symmetry and not needed.
    """
    del client
    return harness_tag(base=base_tag(extra))


# --- building -------------------------------------------------------------------------------------


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)


def _exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False
    except (docker.errors.APIError, requests.RequestException) as exc:
        raise ImageBuildError(f"cannot ask the Docker engine about image {tag}: {exc}") from exc


@contextmanager
def _build_lock() -> Iterator[None]:
    """Serialise builds between processes on this host (two graders starting at once build once)."""
    path = Path(tempfile.gettempdir()) / f"grader-image-build-{os.getuid()}.lock"
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_NETWORK_HINTS = re.compile(
    r"Temporary failure resolving|Could not resolve|Failed to fetch|Unable to connect|Connection timed out|"
    r"Network is unreachable|No route to host|Connection refused|Some index files failed to download|"
    r"apt-get update failed", re.IGNORECASE)


_MISSING_PACKAGE = re.compile(r"Unable to locate package (\S+)|Package '?([^'\s]+)'? has no installation candidate")


def _run_mmdebstrap(target: Path, progress: Progress, packages: list[str]) -> None:
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise ImageBuildError("cannot build the base image: mmdebstrap is not installed "
                              "(run .ci/docker-up.sh, or apt-get install mmdebstrap)")
    if not Path(MERGED_USR_HOOKS).is_dir():
        raise ImageBuildError(f"cannot build the base image: this mmdebstrap has no {MERGED_USR_HOOKS} "
                              "(need mmdebstrap >= 1.0, as in Debian bookworm)")
    argv = [mmdebstrap, f"--variant={VARIANT}", *MMDEBSTRAP_OPTIONS, f"--include={','.join(packages)}",
            SUITE, str(target)]
    env = {**os.environ, "LC_ALL": "C.UTF-8", "DEBIAN_FRONTEND": "noninteractive"}
    # mmdebstrap keeps its chroot in its own temp dir and removes it (and unmounts /proc, /dev there)
    # itself; we never rmtree a chroot, only our output folder.
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, text=True, errors="replace")
    except OSError as exc:
        raise ImageBuildError(f"cannot run mmdebstrap: {exc}") from exc
    timed_out = threading.Event()

    def stop() -> None:  # SIGTERM first: mmdebstrap cleans up its chroot and mounts on TERM
        timed_out.set()
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()

    timer = threading.Timer(MMDEBSTRAP_TIMEOUT_S, stop)
    timer.daemon = True
    timer.start()
    tail: collections.deque[str] = collections.deque(maxlen=40)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
            if line.startswith("I: ") and any(w in line for w in ("downloading", "extracting", "installing",
                                                                   "cleaning", "creating tarball", "success")):
                _say(progress, f"mmdebstrap: {line[3:]}")
        code = proc.wait()
    except BaseException:
        stop()
        raise
    finally:
        timer.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
    log = "\n".join(tail)
    if timed_out.is_set():
        raise ImageBuildError(f"mmdebstrap did not finish within {MMDEBSTRAP_TIMEOUT_S:.0f} s; last output:\n{log}")
    if code != 0:
        missing = sorted({name for pair in _MISSING_PACKAGE.findall(log) for name in pair if name})
        if missing:
            raise ImageBuildError(f"Debian {SUITE} has no package named {', '.join(missing)}: check the "
                                  "[sandbox] packages of the exercise's exercise.toml (apt-cache search "
                                  f"finds the right name); last output:\n{log}")
        if _NETWORK_HINTS.search(log):
            raise ImageBuildError("mmdebstrap could not download packages from the Debian mirror "
                                  f"(no network, or no route to deb.debian.org?); last output:\n{log}")
        if os.geteuid() != 0 and re.search(r"unshare|subuid|newuidmap|Operation not permitted", log):
            raise ImageBuildError("mmdebstrap needs root (or working user namespaces with /etc/subuid) "
                                  f"to build the base image; last output:\n{log}")
        raise ImageBuildError(f"mmdebstrap failed with exit status {code}; last output:\n{log}")
    if not target.is_file() or target.stat().st_size == 0:
        raise ImageBuildError(f"mmdebstrap reported success but wrote no {target.name}; last output:\n{log}")


def _import_rootfs(client: docker.DockerClient, tarball: Path, tag: str, extra: Iterable[str] = ()) -> None:
    repository, _, version = tag.partition(":")
    changes = [f"ENV PATH={IMAGE_ENV['PATH']}", f"ENV LANG={IMAGE_ENV['LANG']}",
               f"LABEL {LABEL_PREFIX}.recipe-sha256={_digest(base_recipe(extra))}", 'CMD ["python3"]']
    try:
        # A `str` src that is an existing file is streamed from disk with no request timeout; never
        # pass a path that might not exist: the API would treat it as a URL to fetch.
        assert tarball.is_file()
        answer = client.api.import_image(src=str(tarball), repository=repository, tag=version, changes=changes)
    except (docker.errors.APIError, requests.RequestException, OSError) as exc:
        raise ImageBuildError(f"docker import of the base rootfs failed: {exc}") from exc
    for line in str(answer or "").splitlines():  # a JSON progress stream; errors arrive with status 200
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and (message.get("error") or message.get("errorDetail")):
            raise ImageBuildError(f"docker import of the base rootfs failed: {message.get('error') or message}")
    if not _exists(client, tag):
        raise ImageBuildError(f"docker import finished but {tag} does not exist; engine said: {answer!r:.500}")


def build_base(client: docker.DockerClient, progress: Progress = None, extra: Iterable[str] = ()) -> str:
    """Build and import ``grader-base:<hash>`` (a Debian bootstrap: the slow step of a first build), with
    an exercise's extra packages. Returns the tag."""
    extra = tuple(extra)
    tag, packages = base_tag(extra), all_packages(extra)
    started = time.monotonic()
    _say(progress, f"building base image {tag} with mmdebstrap ({SUITE}, {VARIANT}: {', '.join(packages)})")
    # A folder that the next build removes if this one is killed outright (it holds a rootfs tarball).
    with owned_folder(None, "grader-base-") as folder:
        tarball = folder / "rootfs.tar"
        _run_mmdebstrap(tarball, progress, packages)
        size_mb = tarball.stat().st_size / 1e6
        _say(progress, f"importing the {size_mb:.0f} MB rootfs as {tag}")
        _import_rootfs(client, tarball, tag, extra)
    _say(progress, f"base image {tag} ready in {time.monotonic() - started:.1f} s")
    return tag


def _tar_bytes(members: Iterable[tuple[str, int, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, mode, data in members:
            info = tarfile.TarInfo(path)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            info.mode = mode
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def build_harness(client: docker.DockerClient, base: str | None = None, progress: Progress = None,
                  files: list[tuple[str, bytes]] | None = None) -> str:
    """Build ``grader-harness:<hash>`` on an existing base image. Returns the tag."""
    base = base or base_tag()
    files = harness_files() if files is None else files
    tag = harness_tag(files, base)
    digest = _harness_digest(files, base)
    if not _exists(client, base):
        raise ImageBuildError(f"cannot build the harness layer: the base image {base} does not exist "
                              "(ensure_image() or build_image() builds it; no registry is used)")
    _say(progress, f"building harness layer {tag} ({len(files)} files) on {base}")
    layer = _tar_bytes(_layer_entries(files))
    dockerfile = _dockerfile(base).encode()
    context = _tar_bytes([("Dockerfile", 0o644, dockerfile), ("harness.tar", 0o644, layer)])
    labels = {f"{LABEL_PREFIX}.harness-sha256": digest, f"{LABEL_PREFIX}.base": base}
    try:
        client.images.build(fileobj=io.BytesIO(context), custom_context=True, tag=tag, pull=False, rm=True,
                            forcerm=True, network_mode="none", labels=labels)
    except docker.errors.BuildError as exc:
        log = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log
                      if isinstance(chunk, dict))[-2000:]
        raise ImageBuildError(f"building the harness layer {tag} failed: {exc.msg}\n{log}") from exc
    except (docker.errors.APIError, requests.RequestException) as exc:
        raise ImageBuildError(f"building the harness layer {tag} failed: {exc}") from exc
    return tag


def ensure_base(client: docker.DockerClient, progress: Progress = None, extra: Iterable[str] = ()) -> str:
    """``grader-base:<hash>`` with these extra packages, bootstrapped only if missing. Also the
    stand-in for a platform's Debian image in the tests of the platform bundles."""
    extra = tuple(extra)
    base = base_tag(extra)
    if not _exists(client, base):
        with _build_lock():
            if not _exists(client, base):  # another process may have built it while we waited
                build_base(client, progress, extra)
    return base


def ensure_image(client: docker.DockerClient, progress: Progress = None, extra: Iterable[str] = ()) -> str:
    """The grading image's tag (with an exercise's extra packages), building the base and/or the
    harness layer only if missing."""
    extra = tuple(extra)
    base = base_tag(extra)
    files = harness_files()
    tag = harness_tag(files, base)
    if _exists(client, tag):
        return tag
    with _build_lock():
        if _exists(client, tag):  # another process built it while we waited
            return tag
        if not _exists(client, base):
            build_base(client, progress, extra)
        build_harness(client, base, progress, files)
    return tag


def build_image(client: docker.DockerClient, force: bool = False, progress: Progress = None,
                extra: Iterable[str] = ()) -> str:
    """(Re)build the grading image (with an exercise's extra packages): the base if missing (or
    always with `force`), then the harness.

    With `force` the base rootfs is bootstrapped afresh (new Debian updates) and re-tagged; images
    built on the old base keep it alive until removed.
    """
    extra = tuple(extra)
    base = base_tag(extra)
    files = harness_files()
    with _build_lock():
        if force or not _exists(client, base):
            build_base(client, progress, extra)
        return build_harness(client, base, progress, files)
