"""The worker's confinement: what a submission can see and touch, on either sandbox, as root and not.

A worker runs in namespaces of its own (local: bubblewrap; Docker: the container), and the trusted
side never acts by path where a worker can write. Tried here as an attacker would: racing the harness
with symlinks, hunting the machine for other students' work, and grading without root.
"""

from __future__ import annotations

import csv
import io
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from grader.cli import main
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.harness.confine import seccomp_program
from grader.sandbox.local import LocalBackend, run_local
from tests.helpers import ATTACKS, EXERCISE, PROJECT, REFERENCE
from tests.test_attacks import SECRETS

RACE = ATTACKS / "symlink_race.py"
HUNTER = ATTACKS / "read_other_students.py"
CANARY = "canary-5d1c0b7e-other-students-work"


@pytest.fixture(scope="module")
def exercise():
    return load_exercise(EXERCISE)


@pytest.fixture
def careless_machine():
    """Other students' work where a careless machine keeps it: readable by everyone, in /tmp."""
    yield from _careless_files("/tmp")


def _careless_files(parent: str):
    folder = Path(tempfile.mkdtemp(prefix="grader-canary-", dir=parent))
    try:
        os.chmod(folder, 0o755)
        for relative, text in (("batch/bob.py", f"# {CANARY} bob's solution\n"),
                               ("grader.db", f"SQLite format 3 {CANARY} submissions"),
                               ("project/.git/objects/pack/pack-1.pack", f"PACK {CANARY} hidden suite")):
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            for parent in [path.parent, *path.parent.relative_to(folder).parents]:
                os.chmod(folder / parent, 0o755)
            path.write_text(text)
            path.chmod(0o644)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def leaked(card) -> bool:
    return CANARY in card.to_json()


def test_a_namespaced_worker_sees_nothing_of_the_machine(exercise, careless_machine):
    """The hunter finds no store, batch folder or .git outside its namespaces; the same hunt without
    namespaces finds them all, which shows the hunt is real."""
    card = grade_bytes(HUNTER.read_bytes(), exercise, "free", run_local, "local")
    assert card.status == "graded" and card.score == 0
    assert not leaked(card), "a namespaced worker read files of the machine"
    assert all("nothing found" in t.message for t in card.tests), [t.message for t in card.tests]

    unprotected = grade_bytes(HUNTER.read_bytes(), exercise, "free", LocalBackend(unsafe=True), "local")
    assert leaked(unprotected), "the hunt found nothing even without namespaces: it proves nothing"


def _left_in_temp(token: str) -> list[str]:
    """Entries of the machine's temporary folders that name `token` or hold a file containing it."""
    found = []
    for root in (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")):
        for entry in root.iterdir() if root.is_dir() else ():
            if token in entry.name:
                found.append(str(entry))
                continue
            if not entry.is_dir() or entry.is_symlink() or not entry.name.startswith(("submission-", "loader-", "worker-")):
                continue
            for path in entry.rglob("*"):
                try:
                    if path.is_file() and not path.is_symlink() and token.encode() in path.read_bytes():
                        found.append(str(path))
                except OSError:
                    pass
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="without root the workers run as the grader's own account")
def test_a_grading_without_namespaces_leaves_nothing_of_the_submission_behind(exercise):
    """Without namespaces the workers share the machine's /tmp: what the grading and the submission put
    there goes with the grading, so no later grading under the same worker account finds this
    student's file or what their code wrote."""
    token = f"leftover-{os.getpid()}-{time.monotonic_ns()}"
    source = REFERENCE.read_bytes() + textwrap.dedent(f"""

        # {token}
        with open("/tmp/{token}-written", "w") as _note:
            _note.write("what this student's code left for the next one")
        """).encode()
    card = grade_bytes(source, exercise, "free", LocalBackend(unsafe=True), "local")
    assert card.status == "graded" and card.score == card.max_score, [t.message for t in card.tests]
    assert _left_in_temp(token) == []


@pytest.fixture
def careless_server():
    """Other students' work readable by everyone, where a server keeps its data (outside the temporary
    folders, which every account may write and so read too)."""
    yield from _careless_files("/run")


@pytest.fixture(scope="module")
def private_exercise(private_project):
    return load_exercise(str(private_project / "exercises" / EXERCISE))


def test_a_worker_in_an_account_of_its_own_reads_nothing_of_the_machine(private_exercise, account_backend,
                                                                        careless_machine, careless_server):
    """Without namespaces, Landlock keeps the worker to the system's folders and a temporary folder of its
    own: the hunter finds none of the files that every account may read by their modes, in /tmp or
    where a server keeps its data; the same hunt unprotected finds them."""
    from grader.confined.restrict import landlock_abi

    if not landlock_abi():
        pytest.skip("the kernel offers no Landlock: the worker reads what its account's modes allow (docs/security.md)")
    card = grade_bytes(HUNTER.read_bytes(), private_exercise, "free", account_backend, "local")
    assert card.status == "graded" and card.score == 0 and card.isolation == "account"
    assert not leaked(card), "a worker in the account isolation read files of the machine"
    unprotected = grade_bytes(HUNTER.read_bytes(), private_exercise, "free", LocalBackend(unsafe=True), "local")
    assert leaked(unprotected), "the hunt found nothing even without isolation: it proves nothing"


def test_an_account_grading_gives_full_marks_and_leaves_nothing_behind(private_exercise, account_backend):
    """Correct code that writes to the temporary folder (its own: `tempfile` and $TMPDIR, for its
    subprocesses too) gets its marks there too, and what it wrote goes with the grading."""
    token = f"leftover-{os.getpid()}-{time.monotonic_ns()}"
    source = REFERENCE.read_bytes() + textwrap.dedent(f"""

        # {token}
        import os as _os, subprocess as _subprocess, sys as _sys, tempfile as _tempfile
        with open(_os.path.join(_tempfile.gettempdir(), "{token}-written"), "w") as _note:
            _note.write("what this student's code left for the next one")
        with _tempfile.NamedTemporaryFile("w+", delete=False) as _note:
            _note.write("{token}")
        assert open(_note.name).read() == "{token}"
        _subprocess.run([_sys.executable, "-c", "import tempfile; open(tempfile.mkstemp()[1], 'w').write('{token}')"],
                        check=True)
        """).encode()
    card = grade_bytes(source, private_exercise, "premium", account_backend, "local")
    assert card.status == "graded" and card.score == card.max_score, [t.message for t in card.tests]
    assert card.isolation == "account"
    assert _left_in_temp(token) == []


def test_the_account_isolation_refuses_an_exercise_its_workers_could_read(account_backend):
    """A project whose folders every account may read (as a checkout usually is): graded there, the
    hidden suite would be the submission's to read. The grading is refused, naming the files and the
    remedy."""
    from grader.errors import SandboxUnavailable

    folder = Path(tempfile.mkdtemp(prefix="grader-readable-", dir="/tmp"))
    try:
        for top in ("exercises", "hidden_tests", "solutions"):
            shutil.copytree(PROJECT / top / EXERCISE, folder / top / EXERCISE, ignore=shutil.ignore_patterns("__pycache__"))
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        readable = load_exercise(str(folder / "exercises" / EXERCISE))
        with pytest.raises(SandboxUnavailable) as refused:
            grade_bytes(REFERENCE.read_bytes(), readable, "premium", account_backend, "local")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    said = str(refused.value)
    assert "hidden_tests/continuous_batching/" in said and "readable by root only" in said and "chmod" in said


def test_without_namespaces_a_container_grades_as_accounts_and_elsewhere_refuses(monkeypatch, tmp_path, capsys):
    """Where bubblewrap cannot make namespaces: inside a container the local sandbox chooses the account
    isolation itself (and says so on the scorecard); outside one it refuses, as before; not as root it
    refuses with what the container must change."""
    import grader.sandbox.isolation as isolation

    monkeypatch.setenv("GRADER_BWRAP", "/bin/false")
    monkeypatch.setattr(isolation, "CONTAINER_MARKS", (str(tmp_path / "absent"),))
    with pytest.raises(isolation.SandboxUnavailable, match="cannot isolate untrusted code here"):
        isolation.local_isolation()
    (tmp_path / ".dockerenv").touch()
    monkeypatch.setattr(isolation, "CONTAINER_MARKS", (str(tmp_path / ".dockerenv"),))
    if isolation.account_problem() is None:
        assert isolation.local_isolation() == "account"
    isolation.account_problem.cache_clear()
    monkeypatch.setattr(isolation.os, "geteuid", lambda: 1000)
    try:
        with pytest.raises(isolation.SandboxUnavailable) as refused:
            isolation.local_isolation()
    finally:
        isolation.account_problem.cache_clear()
    said = str(refused.value)
    assert "not as root" in said and "Run the grader as root in the container" in said


@pytest.mark.slow
def test_the_symlink_race_never_wins_on_the_local_sandbox(exercise):
    """Twenty premium gradings of the racing submission: never a point, never a secret."""
    for attempt in range(20):
        card = grade_bytes(RACE.read_bytes(), exercise, "premium", run_local, "local")
        text = card.to_json()
        assert card.status == "graded" and card.score == 0, (attempt, card.status, card.reason, card.score)
        assert not [line for line in SECRETS if line in text], attempt


@pytest.mark.slow
def test_the_symlink_race_never_wins_in_docker(exercise, docker_client, grading_image):
    from grader.sandbox.docker_backend import LABEL, DockerBackend

    backend = DockerBackend(docker_client)
    for attempt in range(20):
        card = grade_bytes(RACE.read_bytes(), exercise, "premium", backend, "docker")
        text = card.to_json()
        assert card.status == "graded" and card.score == 0, (attempt, card.status, card.reason, card.score)
        assert not [line for line in SECRETS if line in text], attempt
    assert len(backend.jobs) == 20
    for job in backend.jobs:
        assert docker_client.containers.list(all=True, filters={"label": f"{LABEL}={job}"}) == []


@pytest.fixture(params=["local", "docker"])
def sandbox(request):
    if request.param == "docker":
        request.getfixturevalue("grading_image")  # skips without an engine (fails under CI=true)
    return request.param


@pytest.mark.slow
def test_hostile_neighbours_in_a_batch_never_cost_an_honest_student_a_point(tmp_path, sandbox, careless_machine):
    folder = tmp_path / "class"
    folder.mkdir()
    for name, source in (("alice.py", REFERENCE), ("mallory.py", RACE), ("oscar.py", HUNTER),
                         ("trudy.py", RACE), ("bob.py", REFERENCE)):
        shutil.copy(source, folder / name)
    db, gradebook = tmp_path / "class.db", tmp_path / "book.csv"
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--jobs", "2", "--sandbox", sandbox,
                 "--tier", "premium", "--db", str(db), "--gradebook", str(gradebook)]) == 0
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(gradebook.read_text()))}
    for honest in ("alice", "bob"):
        assert rows[honest]["score"] == rows[honest]["max_score"] != "0", rows[honest]
    for hostile in ("mallory", "oscar", "trudy"):
        assert rows[hostile]["score"] == "0", rows[hostile]
    assert CANARY not in db.read_bytes().decode("utf-8", "replace")


def test_the_local_sandbox_refuses_untrusted_code_without_namespaces(monkeypatch, capsys, tmp_path):
    import grader.sandbox.isolation as isolation

    monkeypatch.setenv("GRADER_BWRAP", "/bin/false")  # bubblewrap that cannot make namespaces
    monkeypatch.setattr(isolation, "CONTAINER_MARKS", (str(tmp_path / "absent"),))  # and not in a container
    assert main(["grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "local"]) == 3
    said = " ".join(capsys.readouterr().err.split())
    assert "cannot isolate untrusted code" in said and "--unsafe-local" in said and "--sandbox docker" in said

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert main(["grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "auto"]) == 3
    said = " ".join(capsys.readouterr().err.split())
    assert "no Docker engine is running" in said and "cannot isolate untrusted code" in said

    card = tmp_path / "card.json"
    assert main(["grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "local", "--unsafe-local",
                 "--tier", "free", "--json", str(card)]) == 0
    captured = capsys.readouterr()
    assert "WITHOUT isolation" in " ".join(captured.err.split())
    assert '"score": 10' in card.read_text()


def test_a_docker_socket_that_denies_access_is_named_as_such(monkeypatch, tmp_path):
    from grader.sandbox import engine

    socket_file = tmp_path / "docker.sock"
    socket_file.write_text("")
    socket_file.chmod(0)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{socket_file}")
    real_access = os.access
    monkeypatch.setattr(engine.os, "access", lambda path, mode: False if str(path) == str(socket_file)
                        else real_access(path, mode))
    client, why = engine.engine_status(timeout=1)
    assert client is None
    assert "exists but this user may not use it" in why and str(socket_file) in why


def test_a_docker_socket_without_an_engine_is_named_as_such_and_left_closed(monkeypatch, tmp_path):
    """The socket of an engine that is not running refuses the connection: the probe says so, and leaves
    no socket of its own open (the SDK's connection, which leaks one then, is never made)."""
    import gc
    import socket
    import warnings

    from grader.sandbox import engine

    path = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX) as left:  # a socket file that nothing listens on, as a stopped engine leaves
        left.bind(str(path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        client, why = engine.engine_status(timeout=1)
        gc.collect()
    assert client is None and why == "the Docker engine did not answer ([Errno 111] Connection refused)"
    assert not [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def unprivileged_account() -> tuple[int, int]:
    """The unprivileged user CI makes (`grader-ci`), else a uid no account has, outside the range lent
    to gradings."""
    try:
        account = pwd.getpwnam("grader-ci")
        return account.pw_uid, account.pw_gid
    except KeyError:
        return 63500, 63500


UNPRIVILEGED_UID, UNPRIVILEGED_GID = unprivileged_account()


def debian_python_with_pytest() -> bool:
    done = subprocess.run(["/usr/bin/python3", "-c", "import pytest, pytest_timeout"], capture_output=True)
    return done.returncode == 0


@pytest.fixture(scope="module")
def unprivileged_copy(tmp_path_factory):
    """The grader and the exercise, readable by an unprivileged user, and that user's home."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    if not debian_python_with_pytest():
        message = "Debian's python3-pytest and python3-pytest-timeout are not installed"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)
    root = Path(tempfile.mkdtemp(prefix="grader-unprivileged-"))
    for top in ("grader", f"exercises/{EXERCISE}", f"hidden_tests/{EXERCISE}", f"solutions/{EXERCISE}"):
        shutil.copytree(PROJECT / top, root / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(HUNTER, root / "hunter.py")
    for path in [root, *root.rglob("*")]:
        os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_GID)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def run_unprivileged(root: Path, program: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["/usr/bin/python3", "-c", textwrap.dedent(program)], cwd=root, user=UNPRIVILEGED_UID,
        group=UNPRIVILEGED_GID, extra_groups=[], capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "HOME": str(root), "PYTHONPATH": str(root), **env})


GRADE = """
    import sys
    from grader.core.exercise import load_exercise
    from grader.core.grading import grade_bytes
    from grader.sandbox.local import run_local
    card = grade_bytes(open(sys.argv[-1] if len(sys.argv) > 1 else {file!r}, "rb").read(),
                       load_exercise("{slug}"), "{tier}", run_local, "local")
    print(card.status, card.score, card.max_score)
    print(card.to_json())
"""


def test_a_grading_without_root_is_isolated_in_user_namespaces(unprivileged_copy, careless_machine):
    root = unprivileged_copy
    done = run_unprivileged(root, GRADE.format(file=f"solutions/{EXERCISE}/scheduler.py", slug=EXERCISE,
                                               tier="premium"))
    assert done.returncode == 0, done.stderr[-2000:]
    status, score, top = done.stdout.splitlines()[0].split()
    assert status == "graded" and score == top != "0", done.stdout[:500]

    done = run_unprivileged(root, GRADE.format(file="hunter.py", slug=EXERCISE, tier="premium"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("graded 0 "), done.stdout[:500]
    assert CANARY not in done.stdout
    assert not [line for line in SECRETS if line in done.stdout], "the hidden suite reached the scorecard"


def test_without_root_and_without_namespaces_the_local_sandbox_refuses(unprivileged_copy):
    done = run_unprivileged(unprivileged_copy, """
        from grader.errors import SandboxUnavailable
        from grader.sandbox.local import run_local
        try:
            run_local.check()
        except SandboxUnavailable as exc:
            print("refused:", exc)
    """, GRADER_BWRAP="/bin/false")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("refused:") and "--unsafe-local" in done.stdout, done.stdout


# -- the local sandbox sealed: no process a worker reaches lacks its limits, every writable place sized --

TRACER = ATTACKS / "trace_everything.py"
FILLER = ATTACKS / "tmpfs_fill.py"
MIB = 1024 * 1024


def _namespaces_required() -> None:
    from grader.sandbox.isolation import isolation_problem
    from tests.conftest import _required

    problem = isolation_problem()
    if problem is not None:
        _required(f"the local sandbox cannot make namespaces here: {problem}")


def _messages(card, marker: str) -> list[str]:
    found = [t.message for t in card.tests if marker in t.message]
    assert found, [t.message[:300] for t in card.tests]
    return found


def test_a_worker_reaches_no_process_without_its_limits(exercise):
    """Every process a worker can trace, or whose memory it can open, runs under the worker's own limits;
    PID 1 (the fork server) it cannot reach at all; a fork loop stops at the process limit."""
    import re

    _namespaces_required()
    limits = exercise.limits
    card = grade_bytes(TRACER.read_bytes(), exercise, "free", run_local, "local")
    assert card.status == "graded" and card.score == 0, (card.status, card.reason)
    entry = re.compile(r"pid (\d+) (\S*): ptrace ([^,]*), mem ([^,]*), vm ([^,]*), limits (\{[^}]*\})")
    for message in _messages(card, "TRACE own limits"):
        seen = entry.findall(message)
        assert seen, message
        for pid, name, ptrace, mem, vm, found in seen:
            reached = "ATTACHED" in ptrace or "OPENED" in mem or "READ" in vm
            assert not (pid == "1" and reached), f"PID 1 ({name}) was reachable: {message[:600]}"
            if reached:
                assert eval(found) == {"as": str(limits.memory_mb * MIB), "nproc": str(limits.nproc),
                                       "fsize": str(limits.file_size_mb * MIB)}, (pid, name, found)
        peak = int(re.search(r"FORK peak (\d+) processes", message).group(1))
        # The account's process limit counts every process of the namespace (the submission's share and
        # room for the worker itself, the zygote, the loader and the next test's worker); only the fork
        # server, which forks on the harness's orders alone, may start one past it (the next test's worker).
        assert limits.processes < peak <= limits.nproc + 2, message[-300:]


def test_a_worker_cannot_end_or_stop_its_fork_server():
    """Signals a worker sends to PID 1 and to its parent (the fork server, for the first workers) reach
    nothing: the same fork server forks the next worker."""
    from tests.helpers import confinement_for

    _namespaces_required()
    source = textwrap.dedent("""
        import os, signal

        def started():
            with open("/proc/1/stat") as handle:
                return handle.read().rsplit(")", 1)[1].split()[19]

        def attack():
            for target in dict.fromkeys((1, os.getppid())):
                for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGSEGV,
                               signal.SIGSTOP, signal.SIGKILL):
                    try:
                        os.kill(target, number)
                    except OSError:
                        pass
            return os.getppid()
        """)
    with confinement_for(source) as (confinement, spawn):
        first = spawn()
        before = first.lookup("started")()
        first.lookup("attack")()
        first.close()
        assert not confinement.broken
        second = spawn()
        assert second.lookup("started")() == before
        assert not confinement.broken


def test_a_full_tmp_stops_at_its_size_and_the_grading_is_graded(exercise):
    """Every writable place of a namespaced worker has a size (/tmp and /dev/shm: the exercise's
    `disk_mb`) or is read-only, and the grading whose /tmp is full ends graded, each test failing with
    the submission's own "No space left on device"."""
    import re

    _namespaces_required()
    card = grade_bytes(FILLER.read_bytes(), exercise, "free", run_local, "local")
    assert card.status == "graded" and card.score == 0, (card.status, card.reason)
    assert all(t.status == "failed" for t in card.tests), [(t.name, t.status, t.message[:200]) for t in card.tests]
    for message in _messages(card, "FILL /tmp"):
        filled = {folder: (int(mib), why) for folder, mib, why in re.findall(r"FILL (\S+) (\d+) MiB: ([^;]*)", message)}
        for folder in ("/tmp", "/dev/shm"):
            assert filled[folder][0] <= exercise.limits.disk_mb, message
            assert filled[folder][1] == "No space left on device", message
        for folder in ("/", "/dev"):
            assert filled[folder] == (0, "Read-only file system"), message


WORKER_UID_HOLDER = """
import sys
from grader.sandbox.worker_accounts import worker_account
with worker_account() as (uid, _):
    print(uid, flush=True)
    sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="worker accounts are lent only as root")
def test_two_gradings_on_one_host_never_share_a_worker_uid(tmp_path):
    """Two graders with temporary folders of their own and one uid range: each holds a different uid
    (the locks are the host's, not under $TMPDIR)."""
    holders = []
    try:
        for name in ("first", "second"):
            folder = tmp_path / name
            folder.mkdir()
            holders.append(subprocess.Popen(
                [sys.executable, "-c", WORKER_UID_HOLDER], cwd=PROJECT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                text=True, env={**os.environ, "TMPDIR": str(folder), "GRADER_WORKER_UIDS": "61056-61063",
                                "PYTHONPATH": str(PROJECT)}))
            holders[-1].uid = holders[-1].stdout.readline().strip()
        uids = [holder.uid for holder in holders]
        assert all(uid.isdigit() for uid in uids) and uids[0] != uids[1], uids
    finally:
        for holder in holders:
            holder.stdin.close()
            holder.wait(timeout=10)
            holder.stdout.close()


def test_a_worker_traces_nothing_and_makes_no_system_v_objects_yet_multiprocessing_works():
    """The confinement's seccomp filter: no ptrace, not even of the worker's own child, no System V
    shared memory, semaphores or message queues (objects that would outlive the worker, of no size its
    limits bound) and no memory file (pages no address-space limit counts); POSIX semaphores and shared
    memory, in the sized /dev/shm, and ctypes callbacks (libffi's closures) still work."""
    from tests.helpers import worker_for

    _namespaces_required()
    source = textwrap.dedent("""
        import ctypes, os, time

        def probe():
            libc = ctypes.CDLL(None, use_errno=True)
            refused = {}
            child = os.fork()
            if child == 0:
                time.sleep(10)
                os._exit(0)
            for name, call in (("ptrace", lambda: libc.ptrace(16, child, None, None)),
                               ("shmget", lambda: libc.shmget(0, 1 << 20, 0o1600)),
                               ("semget", lambda: libc.semget(0, 8, 0o1600)),
                               ("msgget", lambda: libc.msgget(0, 0o1600)),
                               ("memfd_create", lambda: libc.memfd_create(b"held", 0))):
                refused[name] = call() == -1 and ctypes.get_errno() == 1  # EPERM
            os.kill(child, 9)
            os.waitpid(child, 0)
            twice = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda n: 2 * n)
            assert twice(21) == 42
            import multiprocessing
            from multiprocessing import shared_memory
            with multiprocessing.Lock():
                memory = shared_memory.SharedMemory(create=True, size=1 << 20)
                memory.close()
                memory.unlink()
            return refused
        """)
    if seccomp_program() is None:
        pytest.skip("no seccomp numbers for this machine's architecture")
    with worker_for(source) as client:
        assert client.lookup("probe")() == {"ptrace": True, "shmget": True, "semget": True, "msgget": True,
                                            "memfd_create": True}


def test_a_worker_is_the_out_of_memory_killers_first_choice_not_the_grader():
    """Short of memory, the kernel ends the submission's process, never the harness or the grader."""
    from tests.helpers import worker_for

    _namespaces_required()
    source = "def adjustment():\n    return int(open('/proc/self/oom_score_adj').read())\n"
    with worker_for(source) as client:
        assert client.lookup("adjustment")() == 1000
    assert int(Path("/proc/self/oom_score_adj").read_text()) < 1000


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_an_accounts_clean_up_ends_its_processes_here_and_none_in_a_container_with_the_same_uid():
    """A container's processes may run as a uid that a grading on the host also uses: the host's clean-up
    of that account (the `account` isolation's sweep) ends only the processes of its own PID namespace."""
    from grader.sandbox.harness_process import end_processes_of
    from grader.sandbox.worker_accounts import worker_account

    with worker_account() as (uid, gid):
        sleep = ["sleep", "60"]
        here = subprocess.Popen(sleep, user=uid, group=gid, extra_groups=[])
        # A PID namespace of its own, as a container's: `unshare` forks the sleep into it, as the same uid.
        there = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child",
                                  "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *sleep])
        try:
            deadline = time.monotonic() + 10
            inside = None
            while inside is None and time.monotonic() < deadline:
                inside = next((pid for pid in descendants(there.pid) if owner(pid) == uid), None)
                time.sleep(0.05)
            assert inside is not None and owner(here.pid) == uid
            end_processes_of(uid)
            assert here.wait(timeout=10) == -signal.SIGKILL
            assert there.poll() is None and owner(inside) == uid  # the container's is untouched
        finally:
            for process in (here, there):
                process.kill()
                process.wait()


def owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as file:
                    children = [int(child) for child in file.read().split()]
                found += children
                todo += children
        except OSError:
            continue
    return found


@pytest.mark.unit
@pytest.mark.skipif(os.geteuid() != 0, reason="worker accounts are lent as root")
def test_a_grading_in_a_container_draws_a_uid_no_grading_on_the_host_lends():
    from grader.sandbox.worker_accounts import APART_UIDS, WORKER_UIDS, worker_account

    with worker_account(apart=True) as (first, _), worker_account(apart=True) as (second, _):
        assert first in APART_UIDS and second in APART_UIDS and first != second
        assert not set(WORKER_UIDS) & {first, second}


@pytest.mark.unit
def test_the_account_isolations_check_is_tried_again_when_its_probe_was_killed(monkeypatch):
    import grader.sandbox.isolation as isolation

    answers = iter([("the worker's restrictions cannot be put in place (-9)", False), (None, True)])
    monkeypatch.setattr(isolation, "_account_check", lambda: next(answers))
    monkeypatch.setattr(isolation.time, "sleep", lambda seconds: None)
    assert isolation.account_problem.__wrapped__() is None
    certain = iter([("root may not run a process as another account here", True)])
    monkeypatch.setattr(isolation, "_account_check", lambda: next(certain))
    # A certain answer is given at once (a second try would find `certain` exhausted).
    assert isolation.account_problem.__wrapped__() == "root may not run a process as another account here"
