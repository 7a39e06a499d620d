"""One case of a grading benchmark, run over a class folder: the benchmark starts it in a cgroup of its
own and reads that group's CPU, so this module only does the work.

    python -m benchmarks.run_case CASE FOLDER [--exercise S] [--tier T] [--jobs N] [--cgroup-parent P]

CASE is one of:
  in-process  each submission in a fresh `pytest -p grader.harness.inprocess` (no isolation at all)
  grade       each submission through `grader grade --sandbox local`, as a user runs it
  local       the folder through `grader batch`'s grading (a warm local sandbox per job)
  docker-run  each submission in one throwaway `docker run` of the in-process suites (Gradescope's way)
  docker      the folder through `grader batch`'s grading with the Docker sandbox
  sandbox              each submission graded by the local sandbox (`grade_bytes`, the lanes
                       `grader grade` uses) in a fresh Python of its own: `grader grade` without the
                       command line's start
  sandbox-one-lane     the same with one lane
  sandbox-unprotected  the same without namespaces (`--unsafe-local`, one lane)
  docker-single        each submission graded by a cold Docker sandbox (a container started for it) in
                       a fresh Python of its own, as `grader grade --sandbox docker` grades
Docker cases place their containers under `--cgroup-parent`, so that the containers' CPU is counted
in the case's group.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.core.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent

# The cases that grade each submission in a fresh Python of its own with one backend (the sandbox's cost
# without the command line's), and that backend's settings. What every case needs is imported where it
# is used: such a fresh Python would otherwise count the store's and the Docker SDK's imports too.
SINGLE = {"sandbox": {}, "sandbox-one-lane": {"lanes": 1}, "sandbox-unprotected": {"unsafe": True},
          "docker-single": {}}
CASES = ("in-process", "grade", "local", "docker-run", "docker", *SINGLE)


def batch(folder: Path, exercise, tier: str, sandbox: str, jobs: int, cgroup_parent: str | None) -> None:
    from grader.course.batch import discover, run_batch
    from grader.course.store import Store
    from grader.sandbox.choose import choose_backend
    from grader.sandbox.docker_backend import DockerBackend

    def make_backend():
        backend = choose_backend(sandbox, warm=True)
        if isinstance(backend, DockerBackend):
            backend.cgroup_parent = cgroup_parent
        return backend

    with tempfile.TemporaryDirectory() as scratch, Store(Path(scratch) / "bench.db") as store:
        summary = run_batch(store, exercise, tier, make_backend, discover(folder, exercise), jobs=jobs)
    if summary.problems or not summary.graded:
        raise SystemExit(f"the batch did not grade every submission: {summary.problems[:3]}")


def each(folder: Path, jobs: int, run) -> None:
    files = sorted(folder.glob("*.py"))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(run, files))


def grade_command(path: Path, exercise, tier: str) -> None:
    done = subprocess.run([sys.executable, "-m", "grader.cli", "grade", str(path), "--exercise", exercise.slug,
                           "--tier", tier, "--sandbox", "local"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"grader grade {path} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def single(case: str, path: Path, exercise, tier: str, cgroup_parent: str | None) -> None:
    """Grade one submission with the backend of `case`, in this process (started for it by `fresh`)."""
    from grader.core.grading import grade_bytes
    from grader.sandbox.local import LocalBackend

    if case == "docker-single":
        from grader.sandbox.docker_backend import DockerBackend
        from grader.sandbox.engine import engine_client

        client = engine_client()
        backend = DockerBackend(client, cgroup_parent=cgroup_parent)
        sandbox = "docker"
    else:
        backend, sandbox = LocalBackend(**SINGLE[case]), "local"
    try:
        card = grade_bytes(path.read_bytes(), exercise, tier, backend, sandbox)
    finally:
        backend.close()
    if card.status == "error":
        raise SystemExit(f"{path}: the grading ended in an error: {card.reason}")


def fresh(case: str, path: Path, exercise, tier: str, cgroup_parent: str | None) -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.run_case", case, str(path), "--single",
                           "--exercise", exercise.slug, "--tier", tier,
                           *(["--cgroup-parent", cgroup_parent] if cgroup_parent else [])],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{case} {path} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=CASES)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--exercise", default="continuous_batching")
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--cgroup-parent")
    parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)  # FOLDER is one file: grade it here
    args = parser.parse_args()
    exercise = load_exercise(args.exercise, ROOT)
    if args.single:
        single(args.case, args.folder, exercise, args.tier, args.cgroup_parent)
        return
    if args.case == "in-process":
        from benchmarks.unprotected import in_process

        each(args.folder, args.jobs, lambda path: in_process(exercise, args.tier, path, failures_allowed=True))
    elif args.case == "grade":
        each(args.folder, args.jobs, lambda path: grade_command(path, exercise, args.tier))
    elif args.case in SINGLE:
        each(args.folder, args.jobs, lambda path: fresh(args.case, path, exercise, args.tier, args.cgroup_parent))
    elif args.case == "docker-run":
        from benchmarks.unprotected import gradescope_style
        from grader.sandbox.engine import engine_client
        from grader.sandbox.image import ensure_image

        client = engine_client()
        image = ensure_image(client, None, exercise.packages)
        each(args.folder, args.jobs, lambda path: gradescope_style(
            client, image, exercise, args.tier, path, failures_allowed=True,
            cgroup_parent=args.cgroup_parent))
    else:
        batch(args.folder, exercise, args.tier, args.case, args.jobs, args.cgroup_parent)


if __name__ == "__main__":
    main()
