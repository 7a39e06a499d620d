"""The scheduler suite's helpers: shrinking a generated workload that fails (the report shows a smaller
scenario that still fails, found within the shrinker's bounds, and never a later failure than the one it
started from), and reading what the submission returned."""

from __future__ import annotations

from typing import Any

import pytest

from grader.confined.limits import Limits
from grader.harness.client import Scenario
from tests.helpers import EXERCISE, PROJECT, REFERENCE, load_module, mutant_file, worker_for

HIDDEN = PROJECT / "hidden_tests" / EXERCISE


@pytest.fixture(scope="module")
def helpers() -> Any:
    return load_module(HIDDEN / "_cb_helpers.py", "_cb_helpers_under_test")


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return vars(load_module(REFERENCE, "reference_for_shrinking"))


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
    source = mutant_file(mutant).read_text()
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


def test_a_failure_that_needs_no_large_numbers_is_shown_with_the_least_ones(helpers, reference):
    """A scheduler that never schedules fails whatever the sizes: the report shows one request of one
    prompt token and one output token, added at step 1, in the smallest settings that hold it, rather
    than numbers halved as far as the shrinker's bound of replays allowed."""
    source = mutant_file("30_does_nothing").read_text()
    with worker_for(source, Limits(call_timeout_s=10, import_timeout_s=5)) as client:
        ns = Names(client)
        for sc, d in _failing(helpers, reference, ns, "mixed", count=2):
            small, small_d = helpers._shrink(ns, reference, sc, d)
            assert small.reqs == (helpers.R(small.reqs[0].rid, 1, 1, 1),), small
            assert (small.budget, small.max_seqs, small.kv_tokens) == (1, 1, 2), small
            assert small_d.step == 1


def test_each_step_reads_the_live_requests_and_the_end_reads_everyone(helpers, reference):
    """A step reads the counts of the requests waiting or running in it, so its cost is what is live;
    a request that left is read once more after the last step, where a change made to it shows."""
    sc = helpers.random_scenario("live", "mixed")
    ref = helpers.run_reference(reference, sc)
    finished_early = [rid for rid, step in ref[0].left_at.items() if step < ref[-1].step - 1]
    assert finished_early, "the workload has requests that leave before its end"
    for rs in ref:
        assert set(rs.after) == set(rs.live) and not rs.finished & set(rs.live)
    assert sum(len(rs.after) for rs in ref) < len(sc.reqs) * len(ref)  # not everyone at every step
    with worker_for(REFERENCE.read_text(), Limits(call_timeout_s=10, import_timeout_s=5)) as client:
        helpers.run_submission(Names(client), sc, ref)
    source = mutant_file("31_changes_a_request_that_left").read_text()
    with worker_for(source, Limits(call_timeout_s=10, import_timeout_s=5)) as client:
        with pytest.raises(helpers.Divergence) as caught:
            helpers.run_submission(Names(client), sc, ref)
    message = str(caught.value)
    assert "prefilled=0" in message and "a request that has left is changed no more" in message, message
    assert caught.value.step < ref[-1].step or "after the last step, r" in message, message


@pytest.mark.unit
def test_the_reference_stops_at_the_step_a_candidate_is_judged_on(helpers, reference):
    sc = helpers.random_scenario("until", "mixed")
    whole = helpers.run_reference(reference, sc)
    part = helpers.run_reference(reference, sc, until=5)
    assert [s.step for s in part] == [1, 2, 3, 4, 5]
    assert [(s.plan, s.emitted, s.after) for s in part] == [(s.plan, s.emitted, s.after) for s in whole[:5]]


class Count(int):
    pass


@pytest.mark.unit
@pytest.mark.parametrize("raw, expected", [
    ("pairs", [(1, 3), (2, 1)]),
    ("lists", [(1, 3)]),
    ("int subclass", [(1, 3)]),
    ("empty", []),
    ("bool", "the token count of entry 0 is a bool, not an int"),
    ("triple", "entry 0 is not a pair"),
    ("stranger", "entry 1 does not hold one of the Req objects passed to add() (return the request objects "
                 "themselves, not copies)"),
    ("text", "it returned a str"),
    ("keys", "entry 0 is not a pair"),
])
def test_a_plan_is_read_as_rids_and_token_counts_or_refused_with_what_is_wrong(helpers, raw, expected):
    a, b = object(), object()
    ids = {id(a): 1, id(b): 2}
    value = {"pairs": [(a, 3), (b, 1)], "lists": [[a, 3]], "int subclass": [(a, Count(3))], "empty": [],
             "bool": [(a, True)], "triple": [(a, 3, 4)], "stranger": [(a, 1), (object(), 2)], "text": "ab",
             "keys": [{1: a, 2: b}]}[raw]
    if isinstance(expected, list):
        assert helpers._plain_plan(value, ids, 4, [], []) == expected
    else:
        with pytest.raises(helpers.Divergence) as refused:
            helpers._plain_plan(value, ids, 4, [], [])
        assert str(refused.value) == f"step 4: schedule() must return a list of (request, n_tokens) pairs, but {expected}"


@pytest.mark.unit
def test_a_queue_holding_anything_but_the_added_requests_is_named(helpers):
    a = object()
    ids = {id(a): 7}
    assert helpers._plain_state({"waiting": [a], "running": (), "reserved": 3}, ids) == ([7], [], 3)
    assert helpers._plain_state({"waiting": [a], "running": [object()], "reserved": 3}, ids) == \
        "running holds something else than the Req objects passed to add()"


@pytest.mark.unit
def test_a_missing_attribute_is_named_as_missing_with_the_statements_words_not_as_none(helpers):
    a = object()
    ids = {id(a): 7}
    said = helpers._plain_state({"waiting": [a], "running": []}, ids)  # no `reserved` at all
    assert said == ("the scheduler has no attribute reserved (the statement: `reserved`, the KV tokens reserved "
                    "by the running requests)")
    assert "NoneType" not in said
    # One that is there but None is still told apart: it is the wrong kind, not missing.
    assert helpers._plain_state({"waiting": [a], "running": [], "reserved": None}, ids) == \
        "reserved must be an int, but it is a NoneType"


@pytest.mark.parametrize("generated, expected", [
    ({0: 6, 1: 2}, "1 of 2 requests emitted more than their max_new tokens (complete() reported them after "
                   "their last token, or they stayed running): r0 (6 of 5)"),
    ({0: 5, 1: 1}, "1 of 2 requests never emitted all their max_new tokens"),
])
def test_progress_says_too_many_tokens_apart_from_too_few(helpers, generated, expected):
    sc = helpers.Scenario(64, 8, 1000, (helpers.R(0, 4, 5), helpers.R(1, 4, 2)))
    with pytest.raises(pytest.fail.Exception) as failed:
        helpers.expect_progress(sc, generated, cap=100)
    assert expected in str(failed.value)
    helpers.expect_progress(sc, {0: 5, 1: 2}, cap=100)  # exactly max_new each: no failure


@pytest.mark.unit
def test_a_plan_holding_a_request_twice_says_so(helpers):
    assert helpers.fmt_plan([(7, 4), (7, 4)]) == "[(r7, 4), (r7, 4)] (r7 2 times in one plan)"
    assert helpers.fmt_plan([(7, 4), (8, 1)]) == "[(r7, 4), (r8, 1)]"
