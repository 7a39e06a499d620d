"""The grading plugin run on a suite in a fresh interpreter, as a grading's harness runs in a process of
its own (`python -m tests.plugin_run JOB OUT`): JOB holds (a Job, the run's root folder, the suite's
folder) pickled; OUT gets (the records by test name, the run's problems) pickled. For
tests/test_plugin_outcomes.py: what the harness does to its process (a subreaper, a memory cap, its
timers, a frozen heap) never reaches the test process."""

from __future__ import annotations

import os
import pickle
import sys

import pytest

from grader.harness.plugin import GradingPlugin
from grader.harness.state import HarnessState


def main(job_file: str, out_file: str) -> None:
    with open(job_file, "rb") as given:
        job, root, folder = pickle.load(given)
    os.chdir(root)
    harness = HarnessState(job, root)
    harness.pool.subreaper = False
    pytest.main(["-q", "-p", "no:cacheprovider", folder], plugins=[GradingPlugin(harness)])
    records = {record.name.split("::")[-1]: record for record in harness.records.values()}
    with open(out_file, "wb") as out:
        pickle.dump((records, harness.problems), out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    os._exit(0)
