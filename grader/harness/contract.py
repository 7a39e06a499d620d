"""The contract between the host and the sandbox: the job, its limits, the results line, the bootstrap.

Both sides import this one module and nothing else of each other: the host builds a `Job` and reads
the results line; the harness inside the sandbox reads the `Job` and prints the results line. It
depends on the standard library alone, so the host can import it without pytest and the sandbox can
run it on Debian's Python.

Isolation modes of the worker (the untrusted process), chosen by the host:
    namespaces  bubblewrap: own mount, PID, network, IPC and UTS namespaces; a read-only system,
                the submission and a private tmpfs, nothing else of the machine (the local sandbox)
    container   the container is the namespace (the Docker sandbox); workers run as their own account
    account     inside a container someone else started, where no namespace can be made (a course
                platform's, with Docker's default security): workers run as their own account, under
                their limits, a seccomp filter without network and, where the kernel offers it, a
                Landlock domain that reads the system and writes only their own folder (`restrict`)
    none        a plain process as the worker account: only for one's own trusted code (--unsafe-local)
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import posixpath
import re
import struct
import textwrap
import zipfile
from collections.abc import Container, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

# What the host needs of the confinement's own code, named here so that this module is all the host
# imports of the sandbox's side (tests/test_import_rules.py holds both sides to it).
from grader.confined import control as control
from grader.confined import restrict as restrict
from grader.confined.bubblewrap import SANDBOX_CODE as SANDBOX_CODE
from grader.confined.bubblewrap import SANDBOX_ENV as SANDBOX_ENV
from grader.confined.bubblewrap import WORKER_NAME as WORKER_NAME
from grader.confined.bubblewrap import bwrap_arguments as bwrap_arguments
from grader.confined.clock import process_ending as process_ending
from grader.confined.forking import INPUT_CLOSED as INPUT_CLOSED
from grader.confined.forking import START_TIME_FIELD as START_TIME_FIELD
from grader.confined.forking import stat_number as stat_number
from grader.confined.limits import Limits as Limits
from grader.confined.processes import wait_for_exit as wait_for_exit
from grader.confined.protocol import MAX_ARCS as MAX_ARCS
from grader.confined.protocol import MAX_LINES as MAX_LINES
from grader.confined.restrict import seccomp_program as seccomp_program
from grader.harness.start import bootstrap as bootstrap

RESULTS_SCHEMA = 1
RESULTS_MARKER = "GRADER-RESULTS"
JOB_FILE = "secret/job.json"
# The suites' modules compiled ahead by the host, for a harness that runs the host's own Python
# (`grader.harness.bytecode`): a marshalled {path of a module: (its code, its code with pytest's asserts)}.
BYTECODE_FILE = "secret/bytecode"
TEST_FILES = "test_*.py"  # the harness's pytest collects these (and rewrites their asserts, as conftest.py's)
ISOLATIONS = ("namespaces", "container", "account", "none")
INPUT_FRAME = struct.Struct(">Q")
MAX_INPUT_BYTES = 1 << 30
# The worker side: the `grader.confined` package, whole, shipped to the worker as one zip.
CONFINED_PACKAGE = "confined"


@dataclass
class Suite:
    name: str  # as exercise.toml names it
    path: str  # a folder of pytest files, relative to the job's base folder
    reference: bool = False  # its tests may use the `reference` fixture
    details: bool = True  # a failed assertion without a message shows its expression


@dataclass
class Job:
    """Where everything is inside the sandbox (paths relative to the job's base folder) and how the
    worker is confined. Written by the host into the job tar, read by the harness.

    What the harness reads on its standard input comes in two parts, each a frame (an 8-byte length,
    then the bytes), so that a sandbox can be started and made ready before a submission exists:
        1. the job: a tar of the suites, the reference, the worker's code and this description;
        2. the submission: a frame of JSON (`Run`: the nonce, the seed), then a frame of its source.
    """

    submission: str  # the submission's file name (the worker imports it as `module`)
    module: str  # the module name it is imported as (the exercise's file name without .py)
    names: list[str]  # the names tests may ask `ns` for
    suites: list[Suite]
    worker_code: str  # the zip holding the worker side (the `grader.confined` package)
    worker_python: str  # the interpreter for workers
    isolation: str  # one of ISOLATIONS
    private: str = "secret/private"  # the harness's own folder: worker output files, logs
    reference: str | None = None  # the reference solution, for suites that compare against it
    worker_user: int | None = None  # run workers as this uid/gid when the harness is root
    worker_group: int | None = None
    bwrap: str | None = None  # the bubblewrap binary, for the namespaces isolation
    seed: int = 0  # what the suites' random workloads are drawn from: set from the run (see `Run`)
    # The worker accounts ([uid, gid]) of extra lanes, each a harness process running its share of the
    # tests at once (see `lanes`); none: one lane.
    lane_accounts: list[list[int | None]] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Job:
        data: dict[str, Any] = json.loads(text)
        data["suites"] = [Suite(**s) for s in data["suites"]]
        data["limits"] = Limits(**data["limits"])
        job = cls(**data)
        if job.isolation not in ISOLATIONS:
            raise ValueError(f"unknown isolation {job.isolation!r}")
        return job

    def at(self, base: str | Path, relative: str) -> str:
        return posixpath.join(str(base), relative)


MAX_FULL_LIMIT_TESTS = 1000  # tests a mutant's run may name as keeping the exercise's call limit


@dataclass(frozen=True)
class MutantRun:
    """An audit's grading of a generated mutant, which only needs to know whether a named test (one that
    does not draw from the seed) catches it. Every call into the submission gets `call_limit_s` (less
    than the exercise's call limit) but in the tests of `full_limit` (pytest node ids), which keep the
    exercise's own: a mutant that never returns then costs a fraction of the limit a test, not all of it.
    With `stop_at_catch` the tests after the first that a named test catches, by anything but a timeout
    at the shortened limit, are not run, and have no record. The audit counts no test that ran past the
    shortened limit as a catch unless it ran it to the exercise's own (grader/audit/audit.py). Never set
    on a student's grading."""

    call_limit_s: float
    full_limit: tuple[str, ...] = ()
    stop_at_catch: bool = True

    @classmethod
    def from_data(cls, data: Any) -> MutantRun:
        if not isinstance(data, dict) or set(data) != {"call_limit_s", "full_limit", "stop_at_catch"}:
            raise ValueError("a mutant's run is an object with call_limit_s, full_limit and stop_at_catch")
        limit, tests, stop = data["call_limit_s"], data["full_limit"], data["stop_at_catch"]
        if type(limit) not in (int, float) or not 0 < limit < 1e6:
            raise ValueError("a mutant's call limit is a positive number of seconds")
        if (not isinstance(tests, list) or len(tests) > MAX_FULL_LIMIT_TESTS
                or not all(isinstance(test, str) and len(test) <= 1000 for test in tests)):
            raise ValueError("full_limit is a bounded list of test ids")
        if type(stop) is not bool:
            raise ValueError("stop_at_catch is true or false")
        return cls(float(limit), tuple(tests), stop)

    def call_limit(self, nodeid: str, exercise_limit: float) -> float:
        """The call limit of a test: never more than the exercise's own."""
        return exercise_limit if nodeid in self.full_limit else min(self.call_limit_s, exercise_limit)

    def settled(self, record: TestRecord) -> bool:
        """Whether the test's outcome is a catch by a named test: a failure of a test that does not draw
        from the seed, but a timeout at the shortened limit (the mutant may only be slow)."""
        return self.settles(record.nodeid, record.status, record.seeded)

    def settles(self, nodeid: str, status: str, seeded: bool) -> bool:
        return status != "passed" and not seeded and not self.cut_short(nodeid, status)

    def cut_short(self, nodeid: str, status: str) -> bool:
        """Whether the test's outcome says nothing: it ran out of time under the shortened limit."""
        return status == "timeout" and nodeid not in self.full_limit


@dataclass(frozen=True)
class Run:
    """What comes with the submission: the nonce that authenticates the results, and the seed of the
    suites' random workloads (the host derives it: grader.core.seeding)."""

    nonce: str
    seed: int
    # An audit's grading of a correct solution: each test's record carries the lines of the submission's
    # file that ran (`TestRecord.lines`). Never set on a student's grading.
    trace_lines: bool = False
    mutant_run: MutantRun | None = None  # an audit's grading of a generated mutant (`MutantRun`)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Run:
        data = json.loads(text)
        mutant = data.get("mutant_run")
        return cls(nonce=str(data["nonce"]), seed=int(data["seed"]), trace_lines=data.get("trace_lines") is True,
                   mutant_run=None if mutant is None else MutantRun.from_data(mutant))


def input_frame(data: bytes) -> bytes:
    """One part of the harness's input: an 8-byte length, then the bytes (not the worker's `protocol.frame`)."""
    return INPUT_FRAME.pack(len(data)) + data


def read_input_frame(stream: Any) -> bytes:
    """One frame from a binary stream; EOFError when the stream ends first."""
    header = stream.read(INPUT_FRAME.size)
    if len(header) < INPUT_FRAME.size:
        raise EOFError("the input ended before a frame")
    (length,) = INPUT_FRAME.unpack(header)
    if length > MAX_INPUT_BYTES:
        raise ValueError(f"a frame of {length} bytes")
    data: bytes = stream.read(length)
    if len(data) < length:
        raise EOFError("the input ended inside a frame")
    return data


def worker_files(package_dir: Path) -> list[tuple[str, bytes]]:
    """The worker side as (path in the zip, bytes), from a `grader` package folder: its `__init__.py` and
    every module of the confined package, nothing else."""
    confined = sorted((package_dir / CONFINED_PACKAGE).glob("*.py"))
    return [("grader/__init__.py", (package_dir / "__init__.py").read_bytes()),
            *((f"grader/{CONFINED_PACKAGE}/{path.name}", path.read_bytes()) for path in confined)]


def worker_zip(package_dir: Path) -> bytes:
    """One zip of the worker's code, importable from `sys.path`. Each module comes with its bytecode,
    compiled here: every grading starts a zygote from this zip, and a zip is never given a cache, so
    without it each start compiled the worker again. A worker's Python of another
    version finds the bytecode's magic number wrong and compiles the source instead."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in worker_files(package_dir):
            for entry, content in ((name, data), (name + "c", _bytecode(name, data))):
                info = zipfile.ZipInfo(entry, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                archive.writestr(info, content)
    return buffer.getvalue()


def zip_holds(archive: bytes, files: list[tuple[str, bytes]]) -> bool:
    """Whether `archive` holds exactly `files`, each with bytecode of this Python's version whose header
    names that source's hash: a zip of other sources, another version's or one cut short is refused."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as opened:
            if sorted(opened.namelist()) != sorted([name for name, _ in files] + [name + "c" for name, _ in files]):
                return False
            for name, data in files:
                header = opened.read(name + "c")[:16]
                if opened.read(name) != data or header != _bytecode_header(data):
                    return False
    except (zipfile.BadZipFile, OSError, ValueError, KeyError):
        return False
    return True


def _bytecode_header(source: bytes) -> bytes:
    import importlib.util

    flags = 0b01  # hash-based, source not checked: the zip is built from this very source
    return importlib.util.MAGIC_NUMBER + flags.to_bytes(4, "little") + importlib.util.source_hash(source)


def _bytecode(name: str, source: bytes) -> bytes:
    """`source` compiled, as an unchecked hash-based .pyc (PEP 552): valid whatever the zip's dates."""
    import marshal

    code = compile(source, name, "exec", dont_inherit=True, optimize=0)  # asserts kept, whatever -O says
    return _bytecode_header(source) + marshal.dumps(code)


# What one test can end as. Only "passed" earns points.
TestStatus = Literal["passed", "failed", "timeout", "crashed", "error"]
TEST_STATUSES: tuple[TestStatus, ...] = get_args(TestStatus)

# Bounds on what a test's record may carry into the host; the harness keeps well under them already.
NAME_CHARS, MESSAGE_CHARS, LINE_CHARS, OUTPUT_CHARS, ARTIFACT_CHARS = 500, 8_000, 500, 64_000, 4_000
TRACEBACK_LINES = 32
MAX_LINE_NUMBER = 10_000_000  # of a line a worker says ran (the submission's size bounds its real lines)


@dataclass
class TestRecord:
    """One test's result, as the harness records it and the host reads it back. It leaves the harness as
    `to_dict` (one entry of the results document's `tests`) and enters the host through `from_untrusted`
    alone: the sandbox that wrote it ran the submission, so nothing in it is taken on trust there."""

    __test__ = False  # a record, not a test class, wherever pytest meets its name

    nodeid: str  # pytest's id of the test, file included (the scorecard's `id`)
    suite: str
    name: str  # the id without the file, as the host lists the tests: `test_x[case]`, `TestClass::test_x`
    description: str
    status: TestStatus = "passed"
    message: str = ""
    traceback: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    cpu_wait_s: float = 0.0  # how far the test's limits were moved for time spent waiting for a CPU
    output: str = ""
    output_cut: int = 0
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # of the submission's file, that ran (a traced run's only)
    # Of the submission's file too: [the line before, the line after], a function's entry and exit as
    # minus its first line (grader/confined/tracing.py); a traced run's only.
    arcs: list[list[int]] = field(default_factory=list)
    seeded: bool = False  # the test draws its workloads from the run's seed (the `seed` fixture)

    def to_dict(self) -> dict[str, Any]:
        """The record as the results document carries it (a copy: the record may still change)."""
        return dict(vars(self))

    @classmethod
    def from_untrusted(cls, data: dict[str, Any], suites: Container[str]) -> TestRecord:
        """The record in `data`, an entry of results the host did not write: its suite one of `suites`
        (those of the exercise), its status one of `TEST_STATUSES`, every string made valid text and cut
        with a count past its bound, every number made one. ValueError, KeyError or TypeError for an
        entry of any other shape."""
        if type(data) is not dict:
            raise ValueError("a result that is not an object")
        if data["suite"] not in suites or data["status"] not in TEST_STATUSES:
            raise ValueError(f"a result with suite {valid_text(data['suite'], 100)!r} and status "
                             f"{valid_text(data['status'], 100)!r}")
        output, cut = valid_tail(data["output"], OUTPUT_CHARS)
        return cls(
            nodeid=valid_text(data["nodeid"], NAME_CHARS), name=valid_text(data["name"], NAME_CHARS),
            suite=data["suite"], status=data["status"], message=valid_text(data["message"], MESSAGE_CHARS),
            description=valid_text(data["description"], NAME_CHARS), duration_s=round(float(data["duration_s"]), 4),
            # A record of a harness older than the CPU-wait credit has none.
            cpu_wait_s=max(0.0, round(float(data.get("cpu_wait_s", 0.0)), 3)),
            traceback=[valid_text(t, LINE_CHARS) for t in data["traceback"]][:TRACEBACK_LINES], output=output,
            output_cut=int(data["output_cut"]) + cut, artifacts=valid_data(list(data["artifacts"]), ARTIFACT_CHARS),
            lines=valid_lines(data.get("lines", [])), arcs=valid_arcs(data.get("arcs", [])),
            # A record of a harness older than the flag has none.
            seeded=data.get("seeded", False) is True,
        )


@dataclass
class Results:
    """The results document: what the harness hands back at the end of a run. It carries the run's
    nonce (results without it were not written by this run's harness), the problems that keep the run
    from being vouched for, and one entry per test (`TestRecord.to_dict`). Read by the host, which
    checks the nonce first and then every field of each entry (`TestRecord.from_untrusted`)."""

    nonce: str | None
    problems: list[str]
    tests: list[dict[str, Any]]

    @classmethod
    def of(cls, nonce: str | None, problems: list[str], records: Iterable[TestRecord]) -> Results:
        """The document of a run's records."""
        return cls(nonce, problems, [record.to_dict() for record in records])

    def to_json(self) -> str:
        return json.dumps({"schema": RESULTS_SCHEMA, "nonce": self.nonce, "problems": self.problems,
                           "tests": self.tests})

    @classmethod
    def from_json(cls, text: str | bytes) -> Results:
        """The document's parts, in their types; ValueError for anything else."""
        data = json.loads(text)
        if type(data) is not dict or data.get("schema") != RESULTS_SCHEMA:
            raise ValueError("unknown results format")
        nonce, problems, tests = data.get("nonce"), data.get("problems"), data.get("tests")
        if not (nonce is None or type(nonce) is str) or type(problems) is not list or type(tests) is not list \
                or not all(type(p) is str for p in problems) or not all(type(t) is dict for t in tests):
            raise ValueError("a results document of the wrong shape")
        return cls(nonce, problems, tests)


def results_line(results: Results) -> str:
    """The harness's last line of output: the results document, which carries the run's nonce."""
    return f"{RESULTS_MARKER} {base64.b64encode(results.to_json().encode()).decode()}"


def results_from_output(output: bytes) -> bytes | None:
    """The results document the harness printed last, or None when there is none."""
    marker = RESULTS_MARKER.encode() + b" "
    for line in reversed(output.splitlines()):
        if line.startswith(marker):
            try:
                return base64.b64decode(line[len(marker):], validate=True)
            except (binascii.Error, ValueError):
                return None
    return None


def collection_error(report: str, limit: int = 600) -> str:
    """What pytest's report of a test file it could not import comes down to: the error's own lines (those
    pytest marks `E`: `ModuleNotFoundError: No module named 'numpy'`, a syntax error's file, line and
    caret), without the import machinery's frames around them. The whole report when it has none."""
    lines = [line[1:].rstrip() for line in report.splitlines() if line.startswith("E ")]
    text = textwrap.dedent("\n".join(line for line in lines if line)).strip("\n") or report.strip()
    return text if len(text) <= limit else text[:limit] + "..."


# -- text from the sandbox ---------------------------------------------------------------------------
# Every string of a harness's results passes through here before it reaches a scorecard, and so a report,
# the store or the terminal: lone surrogates (which JSON can carry but UTF-8 cannot encode) are replaced,
# and text past a limit is cut with a visible count of what was cut. `grader.text` hands them on to the
# rest of the host.

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def valid_lines(value: Any, limit: int = MAX_LINES) -> list[int]:
    """Line numbers a worker says ran: a list of at most `limit` ints, each from 1 to MAX_LINE_NUMBER;
    ValueError for anything else. Data to report, never acted on."""
    if type(value) is not list or len(value) > limit \
            or not all(type(n) is int and 0 < n <= MAX_LINE_NUMBER for n in value):
        raise ValueError("a list of lines reached that is not a bounded list of line numbers")
    return list(value)


def valid_arcs(value: Any, limit: int = MAX_ARCS) -> list[list[int]]:
    """Arcs a worker says ran: a list of at most `limit` pairs [from, to] of ints, each from 1 to
    MAX_LINE_NUMBER or minus one (a function's entry or exit); ValueError for anything else. Data to
    report, never acted on."""
    if type(value) is not list or len(value) > limit or not all(
            type(arc) is list and len(arc) == 2
            and all(type(n) is int and 0 < abs(n) <= MAX_LINE_NUMBER for n in arc) for arc in value):
        raise ValueError("a list of arcs that is not a bounded list of pairs of line numbers")
    return [list(arc) for arc in value]


def valid_text(value: Any, limit: int | None = None) -> str:
    """`value` as text that encodes as UTF-8, at most `limit` characters plus a note of what was cut."""
    text = _SURROGATE.sub(REPLACEMENT, value if type(value) is str else str(value))
    if limit is not None and len(text) > limit:
        text = f"{text[:limit]}… [{len(text) - limit:,} more characters cut]"
    return text


def valid_tail(value: Any, limit: int) -> tuple[str, int]:
    """The last `limit` characters of `value` as valid text, and how many characters were cut before them."""
    text = valid_text(value)
    cut = max(0, len(text) - limit)
    return text[cut:], cut


def valid_data(value: Any, limit: int) -> Any:
    """JSON data with every string (keys included) made valid text, each cut at `limit`."""
    if isinstance(value, str):
        return valid_text(value, limit)
    if isinstance(value, list):
        return [valid_data(v, limit) for v in value]
    if isinstance(value, dict):
        return {valid_text(k, limit): valid_data(v, limit) for k, v in value.items()}
    return value


def without_surrogates(text: str) -> str:
    """Only the replacement, no cut: for a whole document about to be written."""
    return _SURROGATE.sub(REPLACEMENT, text)
