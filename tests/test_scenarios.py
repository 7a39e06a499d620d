"""Scenarios: many operations in one message, observed as plain data and judged on the trusted side."""

from __future__ import annotations

import time

import pytest

from grader.confined import protocol
from grader.confined.limits import Limits
from grader.harness.client import CallTimeout, RemoteObject, Scenario, ValueRefused, WorkerCrashed
from tests.helpers import worker_for
from tests.test_proxies import PLAIN


def test_a_scenario_runs_every_operation_in_order_and_observes_each_step():
    with worker_for(PLAIN) as client:
        sc = Scenario(client)
        box = sc.new("Box")
        item = sc.new("Item", 7, size=30)
        put = sc.call(box, "put", item)
        before = sc.read(box, "count", "items", "missing")
        pairs = sc.call(box, "pairs")
        sc.call(box, "put", sc.new("Item", 8, 1))
        after = sc.read(box, "count")
        table = sc.call(box, "table")
        columns = sc.read_columns([item, put, box], "rid", "done")
        seen = sc.run()
        assert seen[columns] == {"rid": [7, 7, None], "done": [1, 1, None]}  # None: the box has neither
        assert len(seen) == 10 and seen.failed_at is None and seen.error is None
        made = seen[item]
        assert isinstance(made, RemoteObject) and seen[put] is made  # identity, as with proxies
        assert seen[before] == {"count": 1, "items": [made]}  # a missing attribute is left out
        assert seen[pairs] == [(made, 30)]
        assert seen[after] == {"count": 2}  # each read is of its own step
        assert seen[table] == {7: (30, None, 1.5, "s"), 8: (1, None, 1.5, "s")}
        assert made.done == 1  # proxies made by a scenario work as any other, read as they are now


def test_a_group_gathers_objects_once_and_grows_by_earlier_groups():
    with worker_for(PLAIN) as client:
        sc = Scenario(client)
        first, second, third = (sc.new("Item", rid, 1) for rid in (1, 2, 3))
        two = sc.group(first, second)
        before = sc.read_columns(two, "rid")
        sc.call(sc.new("Box"), "put", first)  # put() marks the item done
        three = sc.group(two, third)
        after = sc.read_columns(three, "rid", "done")
        seen = sc.run()
        assert seen[two] is None and seen[three] is None  # a group observes nothing: it is not sent back
        assert seen[before] == {"rid": [1, 2]}
        assert seen[after] == {"rid": [1, 2, 3], "done": [1, 0, 0]}
        # Steps and proxies together in one list, and steps alone (sent as their indices), read alike.
        item = client.lookup("Item")(4, 1)
        sc = Scenario(client)
        made = sc.new("Item", 5, 1)
        mixed, steps = sc.read_columns([item, made], "rid"), sc.read_columns([made, made], "rid")
        seen = sc.run()
        assert seen[mixed] == {"rid": [4, 5]} and seen[steps] == {"rid": [5, 5]}


def test_a_scenario_can_act_on_proxies_and_its_objects_are_proxies_afterwards():
    with worker_for(PLAIN) as client:
        box = client.lookup("Box")()
        sc = Scenario(client)
        item = sc.new("Item", 1, 2)
        sc.call(box, "put", item)
        seen = sc.run()
        assert box.count == 1  # a copy from before the scenario is stale and read again
        assert box.put(seen[item]) is seen[item] and seen[item].done == 2


def test_an_exception_stops_the_scenario_at_its_step():
    source = PLAIN + '''
def boom(x):
    raise KeyError(f"no request {x}")
'''
    with worker_for(source) as client:
        sc = Scenario(client)
        box = sc.new("Box")
        first = sc.call(box, "put", sc.new("Item", 1, 2))
        failing = sc.new("boom", 9)
        never = sc.call(box, "put", sc.new("Item", 2, 2))
        seen = sc.run()
        assert seen.failed_at == failing.index == 3 and len(seen) == 3
        assert isinstance(seen[first], RemoteObject)
        for step in (failing, never):
            with pytest.raises(KeyError, match="no request 9") as caught:
                seen[step]
            assert caught.value.remote.where == "boom(...)"
        assert client.lookup("Box") is not None  # the worker goes on after an exception
        assert seen[box].count == 1  # the operations after the failing one never ran


def test_an_operation_that_loops_forever_times_out_by_the_call_deadline():
    source = PLAIN + "def spin():\n    while True:\n        pass\n"
    with worker_for(source, Limits(call_timeout_s=0.5, import_timeout_s=3)) as client:
        sc = Scenario(client)
        for _ in range(50):
            sc.new("Item", 1, 1)
        sc.new("spin")
        for _ in range(50):
            sc.new("Item", 1, 1)
        started = time.monotonic()
        with pytest.raises(CallTimeout, match=r"spin\(...\) did not finish within 0.5 s"):
            sc.run()
        assert time.monotonic() - started < 3  # one call's deadline, not the hundred operations'
        assert client.process.poll() is not None and isinstance(client.incident, CallTimeout)


def test_slow_operations_each_within_the_deadline_do_not_time_out():
    source = "import time\ndef nap():\n    time.sleep(0.3)\n    return 1\n"
    with worker_for(source, Limits(call_timeout_s=0.5, import_timeout_s=3)) as client:
        sc = Scenario(client)
        steps = [sc.new("nap") for _ in range(6)]  # 1.8 s in all, more than one call's deadline
        seen = sc.run()
        assert [seen[s] for s in steps] == [1] * 6


def test_a_huge_result_is_refused_with_what_was_too_large():
    source = "def huge():\n    return list(range(200_000))\ndef big_text():\n    return 'x' * 900_000\n"
    with worker_for(source) as client:
        sc = Scenario(client)
        sc.new("big_text")
        sc.new("huge")
        with pytest.raises(ValueRefused, match=r"huge\(...\) returned a value with more than 100,000 elements"):
            sc.run()
    with worker_for(source) as client:
        sc = Scenario(client)
        for _ in range(5):  # each fits; together they travel in several frames
            sc.new("big_text")
        seen = sc.run()
        assert [len(v) for v in seen.values] == [900_000] * 5


def test_results_past_the_scenario_bound_are_refused(monkeypatch):
    source = "def some():\n    return list(range(90_000))\n"
    with worker_for(source) as client:
        sc = Scenario(client)
        for _ in range(protocol.MAX_SCENARIO_ITEMS // 90_000 + 2):
            sc.new("some")
        with pytest.raises(ValueRefused, match="more than 4,000,000 values in all"):
            sc.run()


def test_a_rigged_eq_stays_behind_in_the_worker():
    source = '''
class Liar:
    def __eq__(self, other): return True
    def __hash__(self): return 0
class Sneaky(int):
    def __eq__(self, other): return True
def liar(): return Liar()
def sneaky(): return [Sneaky(3), Sneaky(4)]
'''
    with worker_for(source) as client:
        sc = Scenario(client)
        liar, sneaky = sc.new("liar"), sc.new("sneaky")
        seen = sc.run()
        assert isinstance(seen[liar], RemoteObject) and seen[liar] != 0 and seen[liar] != [1]
        assert seen[sneaky] == [3, 4] and seen[sneaky] != [3, 3] and type(seen[sneaky][0]) is int


def test_a_crash_during_a_scenario_is_a_crash_with_the_cause():
    source = "import os\ndef leave(): os._exit(3)\ndef one(): return 1\n"
    with worker_for(source) as client:
        sc = Scenario(client)
        sc.new("one")
        sc.new("leave")
        with pytest.raises(WorkerCrashed, match="exited with status 3"):
            sc.run()


def test_steps_belong_to_their_scenario_and_names_to_the_exercise():
    with worker_for(PLAIN) as client:
        first, second = Scenario(client), Scenario(client, names=["Item"])
        box = first.new("Box")
        with pytest.raises(ValueError, match="another scenario"):
            second.call(box, "put", 1)
        with pytest.raises(ValueError, match="another scenario"):
            second.read_columns([box], "rid")  # a list of steps, sent by their indices
        with pytest.raises(KeyError, match="does not declare"):
            second.new("Box")
        with pytest.raises(TypeError):
            second.call(3, "put")
