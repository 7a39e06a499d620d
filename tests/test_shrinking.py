"""Shrinking a generated workload that fails: the report shows a smaller scenario that still fails,
found within the shrinker's bounds, and never a later failure than the one it started from."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from grader.harness.client import Scenario
from grader.harness.limits import Limits
from tests.helpers import EXERCISE, PROJECT, REFERENCE, worker_for

HIDDEN = PROJECT / "hidden_tests" / EXERCISE
MUTANTS = PROJECT / "solutions" / EXERCISE / "mutants"


def _module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def helpers() -> Any:
    return _module(HIDDEN / "_cb_helpers.py", "_cb_helpers_under_test")


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return vars(_module(REFERENCE, "reference_for_shrinking"))


class Names:
    """The `ns` fixture's scenario side, over a worker of the tests' own."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def scenario(self) -> Scenario:
        return Scenario(self.client, ["Scheduler", "Req"])


def _failing(helpers: Any, reference: Any, ns: Names, profile: str, count: int, tries: int = 24) -> list[Any]:
    """Up to `count` workloads of `profile` that the submission fails, each with its divergence."""
    found = []
    for i in range(tries):
        sc = helpers.random_scenario(f"shrink/{i}", profile)
        try:
            helpers.run_submission(ns, sc, helpers.run_reference(reference, sc))
        except helpers.Divergence as d:
            found.append((sc, d))
            if len(found) == count:
                break
    assert found, f"no failing {profile} workload in {tries} tries"
    return found


@pytest.mark.parametrize("mutant, profile", [("04_no_kv_check", "tight_kv"), ("03_skip_blocked_head", "mixed"),
                                             ("13_first_token_late", "tiny_budget")])
def test_the_shrunk_workload_is_smaller_still_fails_and_fails_no_later(helpers, reference, mutant, profile):
    source = (MUTANTS / f"{mutant}.py").read_text()
    with worker_for(source, Limits(call_timeout_s=10, import_timeout_s=5)) as client:
        ns = Names(client)
        for sc, d in _failing(helpers, reference, ns, profile, count=4):
            small, small_d = helpers._shrink(ns, reference, sc, d)
            assert len(small.reqs) < len(sc.reqs)
            assert small_d.step <= d.step, f"{sc}: shrunk from a failure at step {d.step} to one at {small_d.step}"
            # Replayed in full, to the end, the small workload fails at the step the report names.
            with pytest.raises(helpers.Divergence) as replay:
                helpers.run_submission(ns, small, helpers.run_reference(reference, small))
            assert replay.value.step == small_d.step and replay.value.args == small_d.args


def test_the_reference_stops_at_the_step_a_candidate_is_judged_on(helpers, reference):
    sc = helpers.random_scenario("until", "mixed")
    whole = helpers.run_reference(reference, sc)
    part = helpers.run_reference(reference, sc, until=5)
    assert [s.step for s in part] == [1, 2, 3, 4, 5]
    assert [(s.plan, s.emitted, s.after) for s in part] == [(s.plan, s.emitted, s.after) for s in whole[:5]]
