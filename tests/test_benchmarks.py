"""The benchmarks' own machinery: the floor runs the suites' tests in one process with each submission's
seed, and the grading benchmarks read each case against it from cgroups of their own."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cpu import cgroups_writable
from grader.core.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent
EXERCISE = load_exercise("continuous_batching", ROOT)


BENCHMARKS = sorted(path for path in (ROOT / "benchmarks").glob("*.py") if path.name != "__init__.py")


def test_the_benchmarks_are_modules_of_a_package_run_with_python_m_and_edit_no_path():
    """Each benchmark runs as `python -m benchmarks.NAME` from the project's folder, which puts that folder
    on the path: none inserts a path of its own, and each one's usage says how it is run."""
    assert (ROOT / "benchmarks" / "__init__.py").is_file() and len(BENCHMARKS) >= 10
    edits = [path.name for path in BENCHMARKS if "sys.path" in path.read_text(encoding="utf-8")]
    assert not edits, f"benchmarks that edit sys.path: {edits}"
    for path in BENCHMARKS:
        text = path.read_text(encoding="utf-8")
        assert "python benchmarks/" not in text, path.name
        if 'if __name__ == "__main__":' in text:
            assert f"python -m benchmarks.{path.stem}" in text, f"{path.name} does not say how it is run"
    # Every one imports from the project's folder alone: no PYTHONPATH, no path of pytest's.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    code = f"import importlib; [importlib.import_module('benchmarks.' + name) for name in {[p.stem for p in BENCHMARKS]!r}]"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def imported_names(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of a file, those inside its functions included: a benchmark
    imports most of what it measures only when it runs."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module, [alias.name for alias in node.names]))
    return found


def missing_names(path: Path) -> list[str]:
    """What a file imports that is not there: a module, or a name of one (`from grader.x import gone`)."""
    missing = []
    for line, source, names in imported_names(path):
        try:
            module = importlib.import_module(source)
        except ImportError as exc:
            missing.append(f"{path.name}:{line}: {source} ({exc})")
            continue
        for name in names:
            if not hasattr(module, name) and not (hasattr(module, "__path__")
                                                  and importlib.util.find_spec(f"{source}.{name}") is not None):
                missing.append(f"{path.name}:{line}: {source}.{name}")
    return missing


@pytest.mark.unit
@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda path: path.stem)
def test_every_benchmark_imports_without_running_and_finds_every_name_it_imports(path, capsys):
    """A rename in the grader breaks this test, not whoever runs the benchmark next: each module imports
    (running nothing: no process, no socket, nothing printed), and every module and name it imports,
    in its functions too, is there."""
    module = importlib.import_module(f"benchmarks.{path.stem}")
    assert Path(module.__file__ or "") == path and capsys.readouterr() == ("", "")
    assert not missing_names(path)


@pytest.mark.unit
def test_the_benchmarks_import_check_sees_a_name_that_is_gone(tmp_path):
    sample = tmp_path / "bench_sample.py"
    sample.write_text("import json\n\ndef main():\n    from grader.sandbox.local import LocalBackend, GONE\n"
                      "    from grader.sandbox import layout, gone_module\n    import not_a_module_anywhere\n")
    assert [entry.split(": ", 1)[1].split(" (")[0] for entry in missing_names(sample)] == [
        "grader.sandbox.local.GONE", "grader.sandbox.gone_module", "not_a_module_anywhere"]


def floor(*files: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.floor", "--tier", "premium",
                           *map(str, files)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_floor_calls_every_test_of_each_submission_and_counts_its_own_cpu(tmp_path):
    stub = tmp_path / "stub.py"
    stub.write_bytes(EXERCISE.stub.read_bytes())
    found = floor(EXERCISE.reference, stub)
    suites = [str(ROOT / spec.path) for spec in EXERCISE.suites_for("premium")]
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "grader.harness.inprocess",
                                "-c", os.devnull, "--rootdir", str(ROOT), *suites], capture_output=True, text=True,
                               cwd=ROOT, env={**os.environ, "GRADER_SUBMISSION": str(EXERCISE.reference),
                                              "GRADER_REFERENCE": str(EXERCISE.reference)}, timeout=120)
    assert found["tests"] == collected.stdout.count("::") > 0  # every test of every premium suite
    assert set(found["cpu_s"]) == {str(EXERCISE.reference.resolve()), str(stub.resolve())}
    assert all(0 < seconds < 60 for seconds in found["cpu_s"].values())
    assert all(0 < seconds < 60 for seconds in found["wall_s"].values())


def test_the_floor_refuses_a_file_that_is_not_there(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks.floor", str(tmp_path / "none.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode != 0 and "no such file" in done.stderr


def against_the_floor(module: str, *options: str) -> tuple[dict[str, float], str]:
    """Run a grading benchmark; each case's CPU as a multiple of the floor, and what it printed. Checks
    that it left none of its cgroups behind."""
    process = subprocess.Popen([sys.executable, "-m", f"benchmarks.{module}", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    stdout, stderr = process.communicate(timeout=900)
    assert process.returncode == 0, stderr
    leftover = [p.name for p in Path("/sys/fs/cgroup").glob(f"**/grader-bench-{process.pid}-*")]
    assert not leftover, f"cgroups left behind: {leftover}"
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\s+(\S+)\s+CPU .*?(\d+\.\d+)x the floor",
                                                                  stdout, re.M)}
    return rows, stdout


needs_cgroups = pytest.mark.skipif(not cgroups_writable() and os.environ.get("CI") != "true",
                                   reason="makes cgroups: needs root on a writable /sys/fs/cgroup")


@pytest.mark.slow
@needs_cgroups
def test_the_audit_benchmark_prints_mutants_a_minute_beside_the_floor(tmp_path):
    from grader.course.scaffold import new_exercise

    new_exercise("running_max", tmp_path)
    rows, stdout = against_the_floor("bench_audit", "--project", str(tmp_path), "--exercise", "running_max",
                                     "--rounds", "1")
    assert rows.keys() == {"audit", "floor"} and rows["floor"] == 1.0 and rows["audit"] > 1, stdout
    made = int(re.search(r"1 own mutants and (\d+) made from the reference", stdout).group(1))
    assert made >= 10 and "0 survivors" in stdout and "the local sandbox" in stdout, stdout
    rate = re.search(r"audit: (\d+\.\d+) mutants a second, (\d+) a minute \((\d+\.\d) s for (\d+)\); its CPU "
                     r"\((\d+\.\d) s\) needs (\d+\.\d) s at the least on (\d+) cores", stdout)
    assert rate and int(rate.group(4)) == made + 1, stdout
    # The figures agree with one another: the rate is the count over the wall time, the least wall the CPU
    # over the cores.
    assert abs(float(rate.group(1)) - (made + 1) / float(rate.group(3))) < 0.05 * float(rate.group(1)) + 0.01, stdout
    assert abs(float(rate.group(6)) - float(rate.group(5)) / int(rate.group(7))) <= 0.1, stdout


@pytest.mark.slow
@needs_cgroups
def test_the_batch_benchmark_prints_each_case_against_the_floor():
    rows, stdout = against_the_floor("bench_batch", "--count", "2", "--rounds", "1", "--cases", "in-process,local")
    assert rows.keys() == {"floor", "in-process", "local"}, stdout
    assert rows["floor"] == 1.0
    # A fresh pytest (and a sandbox) per submission costs more than the tests' own calls in a warm process.
    assert rows["in-process"] > 1 and rows["local"] > 1, stdout


@pytest.mark.slow
@needs_cgroups
def test_the_sandbox_benchmark_prints_every_way_of_grading_one_submission_against_the_floor():
    rows, stdout = against_the_floor("bench_harness", "--count", "1", "--rounds", "1")
    assert rows.keys() == {"floor", "in-process", "grade", "sandbox", "sandbox-one-lane", "sandbox-unprotected"}, stdout
    assert rows["floor"] == 1.0 and all(ratio > 1 for case, ratio in rows.items() if case != "floor"), stdout
    assert "copies of the reference" in stdout and "namespaces add" in stdout, stdout


@pytest.mark.unit
def test_every_unprotected_case_grades_with_the_seed_the_grader_gives_the_submission(tmp_path, monkeypatch):
    """The cases compared do the same work: the in-process run is given the submission's own seed."""
    import benchmarks.unprotected as unprotected
    from grader.core.seeding import seed_for_source

    seen: dict[str, str] = {}

    def run(argv, **kwargs):
        seen.update(kwargs["env"])
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(unprotected.subprocess, "run", run)
    submission = tmp_path / "scheduler.py"
    submission.write_bytes(EXERCISE.stub.read_bytes() + b"\n# mine\n")
    unprotected.in_process(EXERCISE, "premium", submission, failures_allowed=True)
    assert seen["GRADER_SUBMISSION"] == str(submission)
    assert seen["GRADER_SEED"] == str(seed_for_source(submission.read_bytes(), EXERCISE))


@pytest.mark.slow
@needs_cgroups
def test_the_docker_benchmark_counts_each_case_with_its_containers_against_the_floor(docker_client, grading_image):
    rows, stdout = against_the_floor("bench_docker", "--count", "1", "--rounds", "1")
    assert rows.keys() == {"floor", "in-process", "docker-run", "docker-single", "docker", "sandbox"}, stdout
    assert rows["floor"] == 1.0 and all(ratio > 1 for case, ratio in rows.items() if case != "floor"), stdout
    assert "harness in container" in stdout, stdout


@pytest.mark.unit
def test_each_process_of_a_grading_is_put_down_to_its_role_from_the_shape_of_the_tree():
    """bench_roles.py knows a process by where it stands: a `bwrap` is started by a harness and runs a
    zygote, whose child with children is the loader; a `bwrap` whose Python forks nothing is the host's
    check; a harness forked (not started) from another is a grading's (or a lane's)."""
    from benchmarks.bench_roles import Roles, Tree

    tree = Tree()
    python, worker_python = "/usr/local/bin/python3.11", "/usr/bin/python3"
    processes = {  # pid: (parent, what it executed, if anything)
        10: (1, python),  # the batch (the host)
        11: (10, "/usr/bin/bwrap"), 12: (11, worker_python),  # the host's check of namespaces
        20: (10, python),  # the harness started for the job: a fork server
        21: (20, None),  # a grading's harness, forked from it
        22: (21, "/usr/bin/bwrap"), 23: (22, worker_python),  # its confinement and zygote
        24: (23, None), 25: (23, None),  # the zygote's first worker, then the loader
        26: (25, None), 27: (25, None),  # workers forked by the loader
        28: (26, None),  # what a worker left behind
        30: (1, python),  # not the case's
    }
    for pid, (parent, executed) in processes.items():
        tree.parent[pid] = parent
        if executed:
            tree.executed[pid] = executed
    roles = Roles(tree, root=10)
    assert {pid: roles.role(pid) for pid in processes} == {
        10: "host", 11: "isolation check", 12: "isolation check", 20: "harness", 21: "harness, forked",
        22: "bubblewrap", 23: "zygote", 24: "worker", 25: "loader", 26: "worker", 27: "worker", 28: "worker",
        30: None}


needs_perf = pytest.mark.skipif(shutil.which("perf") is None and os.environ.get("CI") != "true",
                                reason="samples the case with perf (Debian: linux-perf)")


@pytest.mark.slow
@needs_cgroups
@needs_perf
def test_the_roles_benchmark_shares_a_batch_out_among_its_processes_beside_the_floor():
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_roles", "--count", "2"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {match[0].strip(): float(match[1]) for match in
            re.findall(r"^  (\D+?)\s+([\d.]+) s", done.stdout, re.M)}
    assert {"floor", "host", "harness, forked", "zygote", "loader", "worker", "all of it"} <= rows.keys(), done.stdout
    parts = sum(seconds for name, seconds in rows.items() if name not in ("floor", "all of it"))
    assert parts == pytest.approx(rows["all of it"], abs=0.01), done.stdout
    assert "92 workers" in done.stdout, done.stdout  # 46 tests a submission (2 open, 44 premium), a fresh worker each


@pytest.mark.slow
@needs_cgroups
def test_the_side_by_side_benchmark_grades_one_submission_at_a_time_from_each_checkout_in_turn():
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_side_by_side", str(ROOT), "--grade",
                           "--count", "2", "--pairs", "1"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.search(r"this checkout ([\d.]+) s of CPU and ([\d.]+) s wall a grading, \S+ ([\d.]+) s and ([\d.]+) s",
                      done.stdout)
    assert found and all(float(value) > 0 for value in found.groups()), done.stdout
    assert re.search(r"([\d.]+) of the CPU \(.*\), ([\d.]+) of the wall time", done.stdout), done.stdout


def test_the_mutation_benchmark_prints_mutants_a_second_beside_the_recorded_figure():
    """Both figures, now and 0.11.0's, for each size; the mutants double with the lines."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.bench_mutate", "--rounds", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"\s+\d+\s+\d+ \|", line)]
    assert len(rows) == 3, done.stdout
    mutants = [int(row[1]) for row in rows]
    assert mutants == [mutants[0], 2 * mutants[0], 4 * mutants[0]] and mutants[0] > 100
    assert all(float(row[3]) > 0 and float(row[6]) > 0 for row in rows), done.stdout  # now | recorded
    assert "0.11.0 (recorded)" in done.stdout and "x the CPU for 4x the lines" in done.stdout
