"""A plain in-process plugin for authoring suites and for benchmarks. Never used to grade.

It imports the submission into the test process itself, which is exactly what the isolated harness
exists to avoid: a submission can patch pytest from here. Use it to run a suite against trusted code:

    GRADER_SUBMISSION=solutions/x/mod.py GRADER_REFERENCE=solutions/x/mod.py [GRADER_SEED=n] \
        pytest -p grader.harness.inprocess exercises/x/tests hidden_tests/x
"""

from __future__ import annotations

import collections
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from grader.harness.feedback import Feedback


def load_module(path: str | os.PathLike[str], name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, Path(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


class LocalSlot:
    def __init__(self, index: int) -> None:
        self.index = index


class LocalObservations:
    def __init__(self, values: list[Any], error: BaseException | None) -> None:
        self.values, self.error = values, error

    @property
    def failed_at(self) -> int | None:
        return None if self.error is None else len(self.values)

    def __getitem__(self, step: LocalSlot | int) -> Any:
        index = step.index if isinstance(step, LocalSlot) else step
        if index < len(self.values):
            value = self.values[index]
            return None if type(value) is _Group else value
        if self.error is not None:
            raise self.error
        raise IndexError(index)

    def __len__(self) -> int:
        return len(self.values)


def _read(target: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: _now(getattr(target, name)) for name in names if hasattr(target, name)}


def _now(value: Any) -> Any:
    """Containers copied as they are now (a deque as a list), as the worker's results would be."""
    if isinstance(value, (list, collections.deque)):
        return [_now(v) for v in value]
    if type(value) is tuple:
        return tuple(_now(v) for v in value)
    if type(value) is dict:
        return {k: _now(v) for k, v in value.items()}
    if type(value) in (set, frozenset):
        return set(value)
    return value


class _Group(list[Any]):
    """A scenario's `group`: its observation is None, as the worker's."""


class LocalScenario:
    """`client.Scenario`'s interface, run directly on the objects of this process."""

    def __init__(self, names: dict[str, Any]) -> None:
        self.names = names
        self.steps: list[Callable[[list[Any]], Any]] = []

    def _add(self, step: Callable[[list[Any]], Any]) -> LocalSlot:
        self.steps.append(step)
        return LocalSlot(len(self.steps) - 1)

    @staticmethod
    def _resolve(value: Any, values: list[Any]) -> Any:
        if isinstance(value, LocalSlot):
            return values[value.index]
        if type(value) in (list, tuple):
            return type(value)(LocalScenario._resolve(v, values) for v in value)
        if type(value) is dict:
            return {k: LocalScenario._resolve(v, values) for k, v in value.items()}
        return value

    def new(self, name: str, *args: Any, **kwargs: Any) -> LocalSlot:
        return self._add(lambda v: self.names[name](*self._resolve(args, v), **self._resolve(kwargs, v)))

    def call(self, target: Any, method: str, *args: Any, **kwargs: Any) -> LocalSlot:
        return self._add(lambda v: _now(getattr(self._resolve(target, v), method)(*self._resolve(args, v),
                                                                                  **self._resolve(kwargs, v))))

    def read(self, target: Any, *names: str) -> LocalSlot:
        return self._add(lambda v: _read(self._resolve(target, v), names))

    def group(self, *members: Any) -> LocalSlot:
        def gather(v: list[Any]) -> _Group:
            found = _Group()
            for member in self._resolve(list(members), v):
                found.extend(member) if type(member) is _Group else found.append(member)
            return found
        return self._add(gather)

    def read_columns(self, targets: Any, *names: str) -> LocalSlot:
        def columns(v: list[Any]) -> dict[str, list[Any]]:
            targets_now = self._resolve(targets, v)
            return {name: [_now(getattr(t, name, None)) for t in targets_now] for name in names}
        return self._add(columns)

    def run(self) -> LocalObservations:
        values: list[Any] = []
        for step in self.steps:
            try:
                values.append(step(values))
            except Exception as exc:
                return LocalObservations(values, exc)
        return LocalObservations(values, None)


class LocalNamespace(dict[str, Any]):
    def scenario(self) -> LocalScenario:
        return LocalScenario(self)


@pytest.fixture
def ns() -> LocalNamespace:
    path = os.environ["GRADER_SUBMISSION"]
    return LocalNamespace(vars(load_module(path, Path(path).stem)))


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
