"""The benchmarks' own machinery: the floor runs the suites' tests in one process with each submission's
seed, and the batch benchmark reads each case against it from cgroups of its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cpu import cgroups_writable
from grader.exercise import load_exercise

ROOT = Path(__file__).resolve().parent.parent
EXERCISE = load_exercise("continuous_batching", ROOT)


def floor(*files: Path) -> dict:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "floor.py"), "--tier", "premium",
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
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "floor.py"), str(tmp_path / "none.py")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode != 0 and "no such file" in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not cgroups_writable() and os.environ.get("CI") != "true",
                    reason="makes cgroups: needs root on a writable /sys/fs/cgroup")
def test_the_batch_benchmark_prints_each_case_against_the_floor():
    process = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "bench_batch.py"), "--count", "2",
                                "--rounds", "1", "--cases", "in-process,local"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\s+(\S+)\s+CPU .*?(\d+\.\d+)x the floor",
                                                                  stdout, re.M)}
    assert rows.keys() == {"floor", "in-process", "local"}, stdout
    assert rows["floor"] == 1.0
    # A fresh pytest (and a sandbox) per submission costs more than the tests' own calls in a warm process.
    assert rows["in-process"] > 1 and rows["local"] > 1, stdout
    leftover = [p.name for p in Path("/sys/fs/cgroup").glob(f"*/grader-bench-{process.pid}-*")]
    assert not leftover, f"cgroups left behind: {leftover}"
