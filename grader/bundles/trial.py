"""A bundle tried on one submission, in containers started as its platform starts them: the images and
containers of `grader package --run SUBMISSION` (`try_bundle`) and of the tests of tests/test_package.py.
What the platform would show of a run is `trial_outcome`'s.

- Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/tech/ and .../troubleshooting/):
  the autograder's image is its base image with the zip unpacked to /autograder/source and setup.sh
  run there as root, committed; each submission runs /autograder/run_autograder in a fresh container
  of that image with the files in /autograder/submission, as root, the network on, 768 MB of memory
  and half a CPU (Gradescope's defaults), Docker's defaults otherwise. Its output is what Gradescope
  keeps for the staff as /autograder/results/stdout.
- PrairieLearn: the question's image/ recipe is built (`--base` as the Dockerfile's BASE), and each
  submission runs the entrypoint of info.json with ONE folder bound at /grade (tests/, student/,
  data/, results/), as PrairieLearn's grader host makes it (`PRAIRIELEARN` below). As there, results.json
  is read only when the entrypoint exited 0 within the timeout.

Nothing here loosens Docker's confinement: no security options, no added capabilities, never
privileged. The images and containers made are this module's own (unique names) and are removed.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import tarfile
import uuid
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import docker

from grader.bundles.trial_outcome import Outcome, parsed_results

GRADESCOPE_BASE = "gradescope/autograder-base:ubuntu-22.04"  # the base Gradescope offers by default
RESULTS_MAX_BYTES = 4 << 20  # read at most this much of a results.json written in a container
SETUP_TIMEOUT_S = 3600  # setup.sh may install packages over the network


@dataclass(frozen=True)
class Container:
    """How a platform starts a grading container: what it sets; the rest is Docker's default."""

    memory_mb: int
    cpu_quota_us: int  # per cpu_period_us: 50_000 of 100_000 is `docker run --cpus 0.5`
    cpu_period_us: int = 100_000
    memory_swap_mb: int | None = None  # None: Docker's default
    kernel_memory_mb: int | None = None
    pids_limit: int | None = None
    network: bool = True
    tty: bool = False
    ipc_private: bool = False
    no_core_dumps: bool = False
    # A narrower container than any platform's (the tests drop CAP_SETUID to see a run fail closed).
    cap_drop: tuple[str, ...] = ()

    def at(self, cpus: float, memory_mb: int) -> Container:
        """The same container with other resources (a loaded platform, a smaller allocation)."""
        swap = memory_mb if self.memory_swap_mb is not None else None
        return replace(self, memory_mb=memory_mb, memory_swap_mb=swap, cpu_quota_us=round(cpus * self.cpu_period_us))

    @property
    def cpus(self) -> float:
        return self.cpu_quota_us / self.cpu_period_us

    def host_config(self, client: docker.DockerClient, binds: dict[str, Mapping[str, str]] | None = None) -> dict[str, Any]:
        mb = 1 << 20
        options: dict[str, Any] = {
            "mem_limit": self.memory_mb * mb, "cpu_period": self.cpu_period_us, "cpu_quota": self.cpu_quota_us,
        }
        if self.memory_swap_mb is not None:
            options["memswap_limit"] = self.memory_swap_mb * mb
        if self.kernel_memory_mb is not None:
            options["kernel_memory"] = self.kernel_memory_mb * mb
        if self.pids_limit is not None:
            options["pids_limit"] = self.pids_limit
        if self.ipc_private:
            options["ipc_mode"] = "private"
        if self.no_core_dumps:
            options["ulimits"] = [docker.types.Ulimit(name="core", soft=0, hard=0)]
        if self.cap_drop:
            options["cap_drop"] = list(self.cap_drop)
        return client.api.create_host_config(binds=binds, **options)


# Gradescope's documented defaults: 768 MB of memory and 1/2 of a virtual CPU per autograder
# (https://gradescope-autograders.readthedocs.io/en/latest/troubleshooting/); the network is on.
GRADESCOPE = Container(memory_mb=768, cpu_quota_us=50_000, network=True)
# PrairieLearn's grader host (github.com/PrairieLearn/PrairieLearn, apps/grader-host/src/index.ts,
# runJob's createContainer, and the defaults of apps/grader-host/src/lib/config.ts, as of commit
# 88fb8556a7a1768e2082736be9095241b11238d7): Memory and MemorySwap 2 GiB (no swap), KernelMemory
# 512 MiB, CpuPeriod 100000 with CpuQuota 90000 (0.9 CPU), PidsLimit 1024, IpcMode private, core dumps
# off (Ulimits core 0), Tty on, NetworkDisabled unless enableNetworking, Binds `JOB:/grade`, no User
# (the image's: root here), the entrypoint of info.json. Its DiskQuota (1 GiB) needs a storage driver
# with quotas and is left out.
PRAIRIELEARN = Container(memory_mb=2048, memory_swap_mb=2048, kernel_memory_mb=512, cpu_quota_us=90_000,
                         pids_limit=1024, network=False, tty=True, ipc_private=True, no_core_dumps=True)


def _unique(kind: str) -> str:
    return f"grader-trial-{kind}:{uuid.uuid4().hex[:12]}"


def _tar(members: Iterable[tuple[str, bytes | None, int]]) -> bytes:
    """A tar of (path, bytes or None for a folder, mode), every entry root's."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data, mode in members:
            info = tarfile.TarInfo(path)
            info.mode, info.mtime = mode, 0
            info.type = tarfile.DIRTYPE if data is None else tarfile.REGTYPE
            info.size = 0 if data is None else len(data)
            tar.addfile(info, None if data is None else io.BytesIO(data))
    return buffer.getvalue()


def submitted(path: Path) -> list[tuple[str, bytes]]:
    """A submission as a student uploads it: one file, or the files of a folder (relative paths)."""
    if path.is_file():
        return [(path.name, path.read_bytes())]
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder")
    return [(p.relative_to(path).as_posix(), p.read_bytes()) for p in sorted(path.rglob("*")) if p.is_file()]


def _wait(container: Any, timeout_s: float) -> int | None:
    """The container's exit status, or None when it was still running at `timeout_s` (then killed)."""
    try:
        return int(container.wait(timeout=timeout_s)["StatusCode"])
    except Exception as exc:
        if "timed out" not in str(exc).lower() and "timeout" not in type(exc).__name__.lower():
            raise
        container.kill()
        container.wait(timeout=60)
        return None


def _read_member(archive: bytes, name: str) -> bytes | None:
    """A regular file of a tar from `get_archive`, at most RESULTS_MAX_BYTES, or None. The tar comes from a
    container that ran untrusted code: only that one name is read, never extracted by its own paths."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if member.name == name and member.isreg() and member.size <= RESULTS_MAX_BYTES:
                handle = tar.extractfile(member)
                return handle.read() if handle is not None else None
    return None


# -- Gradescope ---------------------------------------------------------------------------------------

GRADESCOPE_SETUP = ("set -e; cd /autograder/source && bash ./setup.sh; "
                    "cp /autograder/source/run_autograder /autograder/run_autograder; "
                    "chmod 0755 /autograder/run_autograder; mkdir -p /autograder/results /autograder/submission")


def zip_members(bundle: bytes) -> list[tuple[str, bytes | None, int]]:
    """The zip as Gradescope unpacks it to /autograder/source, with the modes it records."""
    members: list[tuple[str, bytes | None, int]] = [("autograder", None, 0o755), ("autograder/source", None, 0o755)]
    folders: set[str] = set()
    with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
        for info in archive.infolist():
            path = Path(info.filename)
            if path.is_absolute() or ".." in path.parts:
                raise ValueError(f"the zip holds {info.filename!r}, outside its folder")
            for parent in reversed(path.parents[:-1]):
                if parent.as_posix() not in folders:
                    folders.add(parent.as_posix())
                    members.append((f"autograder/source/{parent.as_posix()}", None, 0o755))
            if not info.is_dir():
                mode = info.external_attr >> 16 & 0o777 or 0o644
                members.append((f"autograder/source/{info.filename}", archive.read(info), mode))
    return members


class _BuiltImage:
    """An image this run built for itself, removed when the run is over (`with` builds it first)."""

    client: docker.DockerClient
    image: str

    def build(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        if self.image:
            self.client.images.remove(self.image, force=True)
            self.image = ""

    def __enter__(self) -> Any:
        return self.build() if not self.image else self

    def __exit__(self, *_: object) -> None:
        self.close()


@dataclass
class GradescopeAutograder(_BuiltImage):
    """The autograder's image, made from `bundle` (autograder.zip) on `base` as Gradescope makes it."""

    client: docker.DockerClient
    bundle: bytes
    base: str = GRADESCOPE_BASE
    container: Container = GRADESCOPE
    timeout_s: float = 2400  # the longest autograder timeout Gradescope allows (40 minutes)
    environment: dict[str, str] = field(default_factory=dict)
    image: str = ""
    setup_log: str = ""

    def build(self) -> GradescopeAutograder:
        made = self.client.containers.create(self.base, ["bash", "-c", GRADESCOPE_SETUP], user="root")
        try:
            made.put_archive("/", _tar(zip_members(self.bundle)))
            made.start()
            status = _wait(made, SETUP_TIMEOUT_S)
            self.setup_log = made.logs().decode("utf-8", "replace")
            if status != 0:
                raise RuntimeError(f"setup.sh failed (exit status {status}) on {self.base}:\n{self.setup_log[-4000:]}")
            repository, tag = _unique("gradescope").split(":")
            made.commit(repository=repository, tag=tag)
            self.image = f"{repository}:{tag}"
        finally:
            made.remove(force=True)
        return self

    def grade(self, submission: Path, folder: Path, container: Container | None = None) -> Outcome:
        """Run /autograder/run_autograder on `submission` (a file or a folder); keep results.json and
        the run's output (`stdout`) in `folder`."""
        spec = container or self.container
        folder.mkdir(parents=True, exist_ok=True)
        files: list[tuple[str, bytes | None, int]] = [("autograder/submission", None, 0o755)]
        files += [(f"autograder/submission/{name}", data, 0o644) for name, data in submitted(submission)]
        made = self.client.api.create_container(
            self.image, ["/autograder/run_autograder"], environment=self.environment,
            host_config=spec.host_config(self.client), network_disabled=not spec.network)
        identifier = made["Id"]
        try:
            self.client.api.put_archive(identifier, "/", _tar(files))
            self.client.api.start(identifier)
            status = _wait(self.client.containers.get(identifier), self.timeout_s)
            log = self.client.api.logs(identifier).decode("utf-8", "replace")
            (folder / "stdout").write_text(log, encoding="utf-8")
            stream, _ = self.client.api.get_archive(identifier, "/autograder/results")
            data = _read_member(b"".join(stream), "results/results.json")
        finally:
            self.client.api.remove_container(identifier, force=True)
        if status is None:
            return Outcome("gradescope", None, log, folder,
                           failure=f"the autograder did not finish within the timeout ({self.timeout_s:g} s)")
        results, failure = parsed_results(data)
        if results is not None:
            (folder / "results.json").write_bytes(data or b"")
        return Outcome("gradescope", status, log, folder, results, failure)


# -- PrairieLearn -------------------------------------------------------------------------------------

@dataclass
class PrairieLearnGrader(_BuiltImage):
    """The question's grading image, built from its image/ folder (`base` as the Dockerfile's BASE)."""

    client: docker.DockerClient
    question: Path
    base: str | None = None
    container: Container = PRAIRIELEARN
    environment: dict[str, str] = field(default_factory=dict)
    image: str = ""

    @property
    def options(self) -> dict[str, Any]:
        options: dict[str, Any] = json.loads((self.question / "info.json").read_text(encoding="utf-8"))[
            "externalGradingOptions"]
        return options

    def build(self) -> PrairieLearnGrader:
        tag = _unique("prairielearn")
        self.client.images.build(path=str(self.question / "image"), tag=tag, rm=True, forcerm=True, pull=False,
                                 buildargs={"BASE": self.base} if self.base else None)
        self.image = tag
        return self

    def job_folder(self, submission: Path, folder: Path) -> Path:
        """/grade as the grader host fills it: the question's tests/, the files in student/, data/."""
        job = folder / "grade"
        shutil.copytree(self.question / "tests", job / "tests")
        for name, data in submitted(submission):
            (job / "student" / name).parent.mkdir(parents=True, exist_ok=True)
            (job / "student" / name).write_bytes(data)
        (job / "student").mkdir(parents=True, exist_ok=True)
        (job / "results").mkdir()
        (job / "data").mkdir()
        (job / "data" / "data.json").write_text(json.dumps({"params": {}, "correct_answers": {}, "gradable": True}))
        return job

    def grade(self, submission: Path, folder: Path, container: Container | None = None) -> Outcome:
        spec = container or self.container
        options = self.options
        folder.mkdir(parents=True, exist_ok=True)
        job = self.job_folder(submission, folder)
        entrypoint = options.get("entrypoint")
        entrypoint = shlex.split(entrypoint) if isinstance(entrypoint, str) else entrypoint
        timeout = options.get("timeout", 30)  # PrairieLearn's default
        made = self.client.api.create_container(
            self.image, entrypoint=entrypoint, tty=spec.tty, network_disabled=not options.get("enableNetworking", False),
            environment={**options.get("environment", {}), **self.environment},
            host_config=spec.host_config(self.client, {str(job): {"bind": "/grade", "mode": "rw"}}))
        identifier = made["Id"]
        try:
            self.client.api.start(identifier)
            status = _wait(self.client.containers.get(identifier), timeout)
            log = self.client.api.logs(identifier).decode("utf-8", "replace")
            (folder / "job.log").write_text(log, encoding="utf-8")
            return self._outcome(status, log, job, folder, timeout)
        finally:
            self.client.api.remove_container(identifier, force=True, v=True)
            # The job's copy of the bundle holds the hidden suites: it goes. Not as root, what the
            # container made root's may stay behind.
            shutil.rmtree(job, ignore_errors=os.geteuid() != 0)

    def _outcome(self, status: int | None, log: str, job: Path, folder: Path, timeout: int) -> Outcome:
        """As the grader host reads a job: results.json only after exit status 0 within the timeout, and
        under 1 MiB."""
        if status is None:
            return Outcome("prairielearn", None, log, folder, failure=f"the job did not complete within {timeout} s")
        if status != 0:
            return Outcome("prairielearn", status, log, folder,
                           failure=f"the entrypoint exited with status {status}, so results.json is not read")
        path = job / "results" / "results.json"
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        if data is not None and len(data) > 1 << 20:
            return Outcome("prairielearn", status, log, folder, failure="results.json is larger than 1 MB")
        results, failure = parsed_results(data)
        if results is not None:
            (folder / "results.json").write_bytes(data or b"")
        return Outcome("prairielearn", status, log, folder, results, failure)
