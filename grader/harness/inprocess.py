"""A plain in-process plugin for authoring suites and for benchmarks. Never used to grade.

It imports the submission into the test process itself, which is exactly what the isolated harness
exists to avoid: a submission can patch pytest from here. Use it to run a suite against trusted code:

    GRADER_SUBMISSION=solutions/x/mod.py GRADER_REFERENCE=solutions/x/mod.py [GRADER_SEED=n] \
        pytest -p grader.harness.inprocess exercises/x/tests hidden_tests/x
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from grader.harness.feedback import Feedback


def load_module(path: str | os.PathLike[str], name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, Path(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def ns() -> dict[str, object]:
    path = os.environ["GRADER_SUBMISSION"]
    return vars(load_module(path, Path(path).stem))


@pytest.fixture
def reference() -> dict[str, object]:
    return vars(load_module(os.environ["GRADER_REFERENCE"], "_reference"))


@pytest.fixture
def seed() -> int:
    """GRADER_SEED, or 0: replay a graded run's random workloads with the seed its scorecard records."""
    return int(os.environ.get("GRADER_SEED", "0"))


@pytest.fixture
def feedback() -> Feedback:
    return Feedback()
