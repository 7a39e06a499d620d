"""Premium suite: the questions the statement answers beyond the exercise page, one test each.

Limits of 0, empty prompts, max_new of 0 and duplicate ids are refused by the provided code; each
test then runs a scheduler to the end, so it also demands that the submission makes progress (the stub,
or a scheduler that does nothing, fails every test here).
"""

import os
import sys

HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)  # the helper module sits next to this file
from _cb_helpers import R, Scenario, Session, check, expect_steps, expect_that, fmt_plan  # noqa: E402


def _run_to_the_end(s, steps=20):
    """Plans until an empty one, completing each (the empty one too: the test goes on with more calls,
    and the engine completes every plan before the next schedule()); returns the plans."""
    plans = []
    for _ in range(steps):
        raw, plan = s.schedule()
        plans.append(plan)
        s.complete(raw)
        if not plan:
            break
    return plans


def _refused(call, *args):
    try:
        call(*args)
    except ValueError:
        return True
    return False


def test_limits_of_zero_are_refused(ns):
    """Scheduler() raises ValueError for a token_budget, max_seqs or kv_tokens of 0; limits of 1 work."""
    for args in ((0, 4, 100), (8, 0, 100), (8, 4, 0)):
        expect_that(_refused(ns["Scheduler"], *args),
                    f"Scheduler{args} was accepted: a limit of 0 lets nothing ever run, so Scheduler() must "
                    f"raise ValueError (keep the provided __init__)")
    s = Session(ns, 1, 1, 2)
    s.add(0, 1, 1)
    plans = _run_to_the_end(s)
    expect_steps(plans, [[(0, 1)], []], "with token_budget=1, max_seqs=1, kv_tokens=2, r0 (prompt_len 1, max_new 1) "
                                        "runs in one step")


def test_add_refuses_an_empty_prompt_or_no_output(ns):
    """add() raises ValueError for prompt_len 0 or max_new 0, and the scheduler goes on without them."""
    s = Session(ns, 16, 4, 100)
    for rid, prompt_len, max_new in ((0, 0, 5), (1, 5, 0)):
        r = s.new(rid, prompt_len, max_new)
        expect_that(_refused(s.sched.add, r),
                    f"add() accepted r{rid} with prompt_len {prompt_len} and max_new {max_new}: add() refuses "
                    f"prompt_len < 1 and max_new < 1 with ValueError (keep the provided add())")
    s.add(2, 3, 2)
    plans = _run_to_the_end(s)
    want = [[(2, 3)], [(2, 1)], []]
    expect_steps(plans, want, "after refusing r0 and r1, the scheduler runs r2 (prompt_len 3, max_new 2) only")


def test_add_refuses_a_live_duplicate_id_and_accepts_it_once_finished(ns):
    """add() raises ValueError for an id already waiting or running; a finished request's id can be used again."""
    s = Session(ns, 16, 4, 100)
    s.add(7, 4, 2)
    twin = s.ns["Req"](7, 4, 2)
    expect_that(_refused(s.sched.add, twin), "add() accepted a second r7 while r7 was waiting: an id already "
                                             "waiting or running is refused with ValueError")
    raw, plan = s.schedule()
    expect_that(plan == [(7, 4)], f"step 1: expected the plan [(r7, 4)], got {fmt_plan(plan)}")
    s.complete(raw)  # r7 emitted its first token and is running (max_new 2): add() comes between steps
    expect_that(_refused(s.sched.add, twin), "add() accepted a second r7 while r7 was running: an id already "
                                             "waiting or running is refused with ValueError")
    plans = _run_to_the_end(s)
    expect_steps(plans, [[(7, 1)], []], "after the refused twin, r7 (prompt_len 4, max_new 2) goes on alone")
    s.add(70, 2, 1)  # a fresh id, then the old one again: both accepted now that r7 has finished
    again = s.new(7, 3, 1)
    expect_that(not _refused(s.sched.add, again), "add() refused r7 after the first r7 had finished: a "
                                                  "finished request's id may be used again")
    plans = _run_to_the_end(s)
    expect_steps(plans, [[(70, 2), (7, 3)], []], "then r70 (prompt_len 2, max_new 1) and a new r7 (prompt_len 3, "
                                                 "max_new 1) run")


def test_schedule_changes_no_counts_until_complete(ns, reference, feedback):
    """Between schedule() and complete(), no request's prefilled or generated changes."""
    # Chunked prompts, decodes and a first token in one step: schedule() must leave every count as it
    # was; only complete() applies the step.
    sc = Scenario(10, 4, 1000, (R(0, 1, 4), R(1, 14, 2), R(2, 3, 1, at=2)))
    check(ns, reference, feedback, sc,
          about="schedule() only plans a step; prefilled and generated change in complete(), never before",
          expect=[[(0, 1), (1, 9)], [(0, 1), (1, 5), (2, 3)], [(0, 1), (1, 1)], [(0, 1)]])


def test_waiting_running_and_reserved_are_right_after_every_call(ns, reference, feedback):
    """waiting, running and reserved are checked after add(), schedule() and complete(), step by step."""
    # kv_tokens=30: r0 (10 + 2) and r1 (8 + 6) are admitted; r2 (9 + 3) waits behind the KV cache and
    # is admitted in the schedule() after r0 has left and released 12.
    sc = Scenario(20, 3, 30, (R(0, 10, 2), R(1, 8, 6), R(2, 9, 3), R(3, 1, 1, at=3)))
    check(ns, reference, feedback, sc,
          about="the documented waiting (head first), running (oldest first) and reserved after every call",
          expect=[[(0, 10), (1, 8)], [(0, 1), (1, 1)], [(1, 1), (2, 9), (3, 1)], [(1, 1), (2, 1)],
                  [(1, 1), (2, 1)], [(1, 1)]])


def test_a_crowd_of_decodes_all_run_in_one_step(ns, reference, feedback):
    """With 150 requests decoding and budget to spare, every one of them gets its token in the same step."""
    sc = Scenario(512, 256, 10**6, tuple(R(i, 1, 3) for i in range(150)) + (R(150, 40, 1, at=2),))
    check(ns, reference, feedback, sc,
          about="every decoding request gets a token while budget remains, however many there are",
          expect=[[(i, 1) for i in range(150)], [(i, 1) for i in range(150)] + [(150, 40)],
                  [(i, 1) for i in range(150)]])


def test_complete_accepts_an_empty_plan(ns):
    """complete([]) returns no ids and changes nothing; the requests added next run normally."""
    s = Session(ns, 8, 2, 20)
    raw, plan = s.schedule()
    expect_that(plan == [], f"an empty scheduler plans nothing, but schedule() returned {fmt_plan(plan)}")
    ids = s.complete(raw)
    expect_that(ids == [], f"complete([]) must return no ids, got {ids}")
    s.add(0, 2, 1)
    plans = _run_to_the_end(s)
    expect_steps(plans, [[(0, 2)], []], "then r0 (prompt_len 2, max_new 1) runs")


def test_complete_returns_every_emitting_request_once(ns, reference, feedback):
    """Several requests emit in one step: complete() returns each of them once (compared in any order)."""
    sc = Scenario(12, 4, 1000, (R(0, 1, 2), R(1, 1, 2), R(2, 1, 2), R(3, 5, 1, at=2)))
    check(ns, reference, feedback, sc,
          about="complete() returns every request that emitted a token, each once, in any order",
          expect=[[(0, 1), (1, 1), (2, 1)], [(0, 1), (1, 1), (2, 1), (3, 5)]])
