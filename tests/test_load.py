"""A grade that load cannot change: the same submissions keep the same marks on a busy machine.

Beside a CPU hog that keeps every core busy (busy-looping processes at nice 0, twice as many as
cores, as a course's machine is in the hour before a deadline), the reference and the correct styles
of tests/solutions/ keep full marks on both exercises and both sandboxes, ten gradings of the
reference each, none `error`. A grading whose harness is given a quarter of a CPU (a cgroup's CPU
quota on the local sandbox, the container's CPU limit in Docker), beside the same hog, as a
container of a hosted autograder is on a crowded host, ends `graded` with the score it gets on an
idle machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from benchmarks.bench_load import HOG
from grader.cli import main
from grader.core.exercise import Exercise, load_exercise
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard
from grader.course.store import Store
from grader.sandbox.local import run_local
from tests.helpers import PROJECT
from tests.service import child_env, grader_command

pytestmark = pytest.mark.slow

EXERCISES = ("continuous_batching", "paged_kv_cache")
SOLUTIONS = PROJECT / "tests" / "solutions"
# Left out: two lose points on purpose; slow_calls, correct but sleeping 0.2 s a call, sleeps past a
# random-workload test's 60 s on the top tier even on an idle machine (tests/test_correct_styles.py
# grades it on the free tier with smaller limits).
LEFT_OUT = {"endless_in_one_case", "crash_in_one_case", "slow_calls"}
REFERENCE_GRADINGS = 10
HOGS_PER_CORE = 2
# A hog stops by itself after this long, or as soon as the test process that started it is gone:
# a test killed by its timeout, or pytest killed outright, leaves no busy loop behind.
HOG_BOUND_S = 1500
# The busy loop itself is the benchmark's (benchmarks/bench_load.py): the same hog for both.



@dataclass
class Hog:
    """Busy-looping processes that hold every core, and how much of the machine they held."""
    processes: list[subprocess.Popen] = field(default_factory=list)
    started: float = 0.0

    def cpu_seconds(self) -> float:
        total = 0
        for process in self.processes:
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
        return total / os.sysconf("SC_CLK_TCK")

    def share(self) -> float:
        """The share of the machine's CPU time the hogs used since they started (1.0 = every core)."""
        return self.cpu_seconds() / ((time.monotonic() - self.started) * (os.cpu_count() or 1))

    def all_alive(self) -> bool:
        return all(process.poll() is None for process in self.processes)


@pytest.fixture
def cpu_hog() -> Iterator[Hog]:
    hog = Hog(started=time.monotonic())
    try:
        for _ in range(HOGS_PER_CORE * (os.cpu_count() or 1)):
            hog.processes.append(subprocess.Popen([sys.executable, "-c", HOG, str(os.getpid()), str(HOG_BOUND_S)],
                                                  stdin=subprocess.DEVNULL, start_new_session=True))
        yield hog
    finally:
        for process in hog.processes:
            process.kill()
        for process in hog.processes:
            process.wait()


def styles(slug: str) -> dict[str, Path]:
    """The correct styles of an exercise (each appended to its reference), by student name."""
    folder = SOLUTIONS if slug == "continuous_batching" else SOLUTIONS / slug
    return {p.stem.replace("_", "-"): p for p in sorted(folder.glob("*.py")) if p.stem not in LEFT_OUT}


def lost(card: Scorecard) -> list[tuple[str, str, str]]:
    """What a card that is not full marks lost, for the failure message."""
    return [(t.name, t.status, t.message[:300]) for t in card.tests if t.status != "passed"] or \
        [("(the grading)", card.status, card.reason[:600])]


def sandbox_name(request: pytest.FixtureRequest, name: str) -> str:
    if name == "docker":
        request.getfixturevalue("grading_image")  # skips without an engine (fails under CI=true)
    return name


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("sandbox", ["local", "docker"])
@pytest.mark.parametrize("slug", EXERCISES)
def test_beside_a_cpu_hog_the_reference_and_the_correct_styles_keep_full_marks(
        request, slug, sandbox, tmp_path, cpu_hog):
    name = sandbox_name(request, sandbox)
    exercise = load_exercise(slug)
    folder = tmp_path / "class"
    folder.mkdir()
    reference = exercise.reference.read_bytes()
    for number in range(REFERENCE_GRADINGS):
        # A trailing comment makes every copy a submission of its own (the store grades a file once).
        (folder / f"reference-{number:02d}.py").write_bytes(reference + f"\n# copy {number}\n".encode())
    for student, style in styles(slug).items():
        (folder / f"{student}.py").write_bytes(reference + b"\n\n" + style.read_bytes())
    db = tmp_path / "class.db"
    started = time.monotonic()
    code = main(["batch", str(folder), "--exercise", slug, "--tier", exercise.top_tier, "--jobs", "2",
                 "--sandbox", name, "--db", str(db)])
    wall = time.monotonic() - started
    share = cpu_hog.share()
    assert cpu_hog.all_alive(), "a hog ended before the batch did"
    with Store(db) as store:
        cards = {s.student: s.card for s in store.submissions(slug)}
    print(f"{slug} on {name}: {len(cards)} gradings in {wall:.0f} s beside the hog "
          f"(the hog held {share:.0%} of the machine)")
    assert code == 0
    assert len(cards) == REFERENCE_GRADINGS + len(styles(slug))
    errors = {student: card.reason for student, card in cards.items() if card.status == "error"}
    assert not errors, errors
    short = {student: lost(card) for student, card in cards.items()
             if not (card.status == "graded" and card.score == card.max_score > 0)}
    assert not short, short
    # The hog competed for real (its share of the machine is what the gradings left it: with two jobs of
    # two lanes each, about a third to a half).
    assert share > 0.25, f"the hog held only {share:.0%} of the machine"


# -- a quarter of a CPU ------------------------------------------------------------------------------

QUARTER = 0.25
PERIOD_US = 100_000
CGROUPS = Path("/sys/fs/cgroup")


class CpuQuota:
    """A cgroup of this test's own whose processes get at most `cpus` of one CPU: cgroup v2's
    `cpu.max`, or v1's CFS quota where the cpu controller is mounted on its own."""

    def __init__(self, name: str, cpus: float) -> None:
        quota = str(int(cpus * PERIOD_US))
        if (CGROUPS / "cgroup.controllers").exists():
            if "cpu" not in (CGROUPS / "cgroup.subtree_control").read_text().split():
                pytest.skip("cgroup v2 without the cpu controller enabled for child groups")
            self.path, files = CGROUPS / name, {"cpu.max": f"{quota} {PERIOD_US}"}
        elif (CGROUPS / "cpu" / "cpu.cfs_quota_us").exists():
            self.path, files = CGROUPS / "cpu" / name, {"cpu.cfs_period_us": str(PERIOD_US),
                                                         "cpu.cfs_quota_us": quota}
        else:
            pytest.skip("no cgroup cpu controller on this machine")
        try:
            self.path.mkdir()
            for file, value in files.items():
                (self.path / file).write_text(value)
        except OSError as exc:
            self.remove()
            pytest.skip(f"cannot make a cgroup with a CPU quota here ({exc})")

    def command(self, argv: list[str]) -> list[str]:
        """`argv`, run by a shell that first moves itself into this group (its children follow)."""
        return ["sh", "-c", f'echo $$ > "{self.path / "cgroup.procs"}" && exec "$@"', "sh", *argv]

    def throttled(self) -> int:
        """How many periods the group's processes were stopped for having used their quota."""
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return int(stat["nr_throttled"])

    def remove(self) -> None:
        if not self.path.is_dir():
            return
        for pid in (self.path / "cgroup.procs").read_text().split():  # what a grading left, if anything
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


QUARTER_CASES = ("reference", "mutant", "stub")


def quarter_sources(exercise: Exercise) -> dict[str, Path]:
    mutant = exercise.mutants[len(exercise.mutants) // 2]
    return {"reference": exercise.reference, "mutant": mutant, "stub": exercise.stub}


def outcome(card: dict) -> tuple[str, int, int, list[tuple[str, str]]]:
    """What must not change with the CPU a grading gets: its status, score and each test's result
    (from the scorecard's JSON, as `grader grade --json` writes it)."""
    return card["status"], card["score"], card["max_score"], sorted((t["name"], t["status"]) for t in card["tests"])


def lost_json(card: dict) -> list[tuple[str, str, str]]:
    return [(t["name"], t["status"], t["message"][:300]) for t in card["tests"] if t["status"] != "passed"] or \
        [("(the grading)", card["status"], card.get("reason", "")[:600])]


@pytest.fixture(scope="module")
def idle_outcomes() -> dict[str, tuple]:
    """Each case graded on the local sandbox without any limit of ours, before any hog starts: what
    the quarter must give."""
    exercise = load_exercise("continuous_batching")
    return {case: outcome(grade_bytes(path.read_bytes(), exercise, exercise.top_tier, run_local, "local").to_dict())
            for case, path in quarter_sources(exercise).items()}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", QUARTER_CASES)
def test_a_grading_given_a_quarter_of_a_cpu_on_the_local_sandbox_gets_its_idle_score(case, tmp_path, idle_outcomes,
                                                                                     cpu_hog):
    exercise = load_exercise("continuous_batching")
    source = quarter_sources(exercise)[case]
    group = CpuQuota(f"grader-test-quarter-{os.getpid()}-{case}", QUARTER)
    try:
        card_path = tmp_path / "card.json"
        # The whole `grader grade` in the group: the harness, the zygote and the workers it starts.
        argv = grader_command("grade", str(source), "--exercise", exercise.slug, "--tier", exercise.top_tier,
                              "--sandbox", "local", "--json", str(card_path))
        started = time.monotonic()
        done = subprocess.run(group.command(argv), cwd=PROJECT, env=child_env(), capture_output=True, text=True,
                              timeout=800)
        wall = time.monotonic() - started
        throttled = group.throttled()
    finally:
        group.remove()
    print(f"{case} at a quarter of a CPU: {wall:.1f} s, throttled in {throttled} periods")
    assert done.returncode == 0, done.stderr[-3000:]
    card = json.loads(card_path.read_text(encoding="utf-8"))
    assert throttled > 0, "the quota never held the grading back"
    assert card["status"] == "graded", lost_json(card)
    assert outcome(card) == idle_outcomes[case], lost_json(card)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", QUARTER_CASES)
def test_a_grading_given_a_quarter_of_a_cpu_in_docker_gets_its_idle_score(case, grading_image, docker_client,
                                                                         idle_outcomes, cpu_hog):
    from grader.sandbox.docker_backend import DockerBackend

    class QuarterCpu(DockerBackend):
        """The grading container (harness and worker together) limited to a quarter of a CPU."""

        def nano_cpus(self, worker_cpus: float) -> int:
            return int(QUARTER * 1e9)

    exercise = load_exercise("continuous_batching")
    backend = QuarterCpu(docker_client)
    started = time.monotonic()
    card = grade_bytes(quarter_sources(exercise)[case].read_bytes(), exercise, exercise.top_tier, backend, "docker")
    print(f"{case} at a quarter of a CPU in Docker: {time.monotonic() - started:.1f} s")
    assert card.status == "graded", lost(card)
    assert outcome(card.to_dict()) == idle_outcomes[case], lost(card)
