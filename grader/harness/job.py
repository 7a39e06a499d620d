"""The job description a backend hands the harness: where everything is inside the sandbox.

Written by the host (`grader.sandbox`), read by the harness (`grader.harness.__main__`). Paths are
as the harness sees them, which for Docker differs from the host's.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grader.harness.limits import Limits

RESULTS_SCHEMA = 1


@dataclass
class Suite:
    name: str  # as exercise.toml names it
    path: str  # a folder of pytest files
    reference: bool = False  # its tests may use the `reference` fixture
    details: bool = True  # a failed assertion without a message shows its expression


@dataclass
class Job:
    submission: str  # the submission file, readable by the worker
    module: str  # the module name it is imported as (the exercise's file name without .py)
    names: list[str]  # the names tests may ask `ns` for
    harness_root: str  # the folder holding `grader/harness`, readable by the worker
    python: str  # the interpreter for workers
    suites: list[Suite]
    results: str  # where the harness writes its results; only the harness can write there
    private: str  # the harness's own scratch (worker output files), unreadable by the worker
    scratch: str  # the worker's working folder, emptied between tests
    reference: str | None = None  # the reference solution, for suites that compare against it
    worker_user: int | None = None  # run workers as this uid/gid when the harness is root
    worker_group: int | None = None
    limits: Limits = field(default_factory=Limits)

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> "Job":
        data: dict[str, Any] = json.loads(text)
        data["suites"] = [Suite(**s) for s in data["suites"]]
        data["limits"] = Limits(**data["limits"])
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> "Job":
        return cls.from_json(Path(path).read_text(encoding="utf-8"))
