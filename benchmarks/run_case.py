"""One case of a grading benchmark, run over a class folder: the benchmark starts it in a cgroup of its
own and reads that group's CPU, so this module only does the work.

    python benchmarks/run_case.py CASE FOLDER [--exercise S] [--tier T] [--jobs N] [--cgroup-parent P]

CASE is one of:
  in-process  each submission in a fresh `pytest -p grader.harness.inprocess` (no isolation at all)
  grade       each submission through `grader grade --sandbox local`, as a user runs it
  local       the folder through `grader batch`'s grading (a warm local sandbox per job)
  docker-run  each submission in one throwaway `docker run` of the in-process suites (Gradescope's way)
  docker      the folder through `grader batch`'s grading with the Docker sandbox
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_docker import gradescope_style  # noqa: E402
from benchmarks.bench_harness import in_process  # noqa: E402
from grader.batch import discover, run_batch  # noqa: E402
from grader.exercise import load_exercise  # noqa: E402
from grader.sandbox.choose import choose_backend  # noqa: E402
from grader.sandbox.docker_backend import DockerBackend  # noqa: E402
from grader.sandbox.engine import engine_client  # noqa: E402
from grader.sandbox.image import ensure_image  # noqa: E402
from grader.seeding import seed_for_source  # noqa: E402
from grader.store import Store  # noqa: E402

CASES = ("in-process", "grade", "local", "docker-run", "docker")


def batch(folder: Path, exercise, tier: str, sandbox: str, jobs: int, cgroup_parent: str | None) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=CASES)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--exercise", default="continuous_batching")
    parser.add_argument("--tier", default="premium")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--cgroup-parent")
    args = parser.parse_args()
    exercise = load_exercise(args.exercise, ROOT)
    seed = lambda path: seed_for_source(path.read_bytes(), exercise)  # noqa: E731
    if args.case == "in-process":
        each(args.folder, args.jobs, lambda path: in_process(exercise, args.tier, path, seed(path),
                                                             failures_allowed=True))
    elif args.case == "grade":
        each(args.folder, args.jobs, lambda path: grade_command(path, exercise, args.tier))
    elif args.case == "docker-run":
        client = engine_client()
        image = ensure_image(client, None, exercise.packages)
        each(args.folder, args.jobs, lambda path: gradescope_style(
            client, image, exercise, args.tier, path, seed(path), failures_allowed=True,
            cgroup_parent=args.cgroup_parent))
    else:
        batch(args.folder, exercise, args.tier, args.case, args.jobs, args.cgroup_parent)


if __name__ == "__main__":
    main()
