"""Premium suite: the questions the statement answers beyond the exercise page, one test each.

Limits of 0, empty prompts, max_new of 0 and duplicate ids are refused by the provided code; each
test then has the scheduler plan work, so the stub, or a scheduler that does nothing, fails every test
here. A test driven by hand (`Session` with the reference) judges every schedule() and complete() as it
comes, so a test fails at the first call that went wrong and names that call, never a later one that
only follows from it.
"""

from _cb_helpers import R, Scenario, Session, check, expect_that, fmt_ids, fmt_plan, plain_plan


def _refused(call, *args):
    try:
        call(*args)
    except ValueError:
        return True
    return False


def test_limits_of_zero_are_refused_and_limits_of_one_work(ns):
    """Scheduler() raises ValueError for a token_budget, max_seqs or kv_tokens of 0; with limits of 1 a request is scheduled."""
    for args in ((0, 4, 100), (8, 0, 100), (8, 4, 0)):
        expect_that(_refused(ns["Scheduler"], *args),
                    f"Scheduler{args} was accepted: a limit of 0 lets nothing ever run, so Scheduler() must "
                    f"raise ValueError (keep the provided __init__)")
    s = Session(ns, 1, 1, 2)
    s.add(0, 1, 1)
    _, plan = s.schedule()
    expect_that(plan == [(0, 1)], f"with token_budget=1, max_seqs=1, kv_tokens=2 and r0 (prompt_len 1, max_new 1) "
                                  f"waiting, the first schedule() should plan [(r0, 1)], but it returned {fmt_plan(plan)}")


def test_add_refuses_an_empty_prompt_or_no_output(ns, reference):
    """add() raises ValueError for prompt_len 0 or max_new 0, and the next schedule() goes on without them."""
    s = Session(ns, 16, 4, 100, reference)
    for rid, prompt_len, max_new in ((0, 0, 5), (1, 5, 0)):
        r = s.new(rid, prompt_len, max_new)
        expect_that(s.refused(r),
                    f"add() accepted r{rid} with prompt_len {prompt_len} and max_new {max_new}: add() refuses "
                    f"prompt_len < 1 and max_new < 1 with ValueError (keep the provided add())")
    s.add(2, 3, 2)
    s.schedule()  # judged against the reference: [(r2, 3)], and r2 alone in running


def test_add_refuses_a_live_duplicate_id_and_accepts_it_once_finished(ns, reference):
    """add() raises ValueError for an id already waiting or running; a finished request's id can be used again."""
    s = Session(ns, 16, 4, 100, reference)
    s.add(7, 4, 1)
    twin = s.new(7, 4, 1)
    expect_that(s.refused(twin), "add() accepted a second r7 while r7 was waiting: an id already "
                                 "waiting or running is refused with ValueError")
    raw, _ = s.schedule()  # r7 is admitted: running from now on, until complete() counts its only token
    twin = s.new(7, 4, 1)
    expect_that(s.refused(twin), "add() accepted a second r7 while r7 was running (added between schedule() and "
                                 "complete()): an id already waiting or running is refused with ValueError")
    s.complete(raw)  # judged against the reference: r7 emits its only token and leaves
    s.add(70, 2, 1)  # a fresh id, then the old one again: both accepted now that r7 has finished
    again = s.new(7, 3, 1)
    expect_that(not s.refused(again), "add() refused r7 after the first r7 had finished: a finished request's id "
                                      "may be used again")
    s.ref_add(again)
    s.schedule()  # judged against the reference: [(r70, 2), (r7, 3)]


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


def test_complete_accepts_an_empty_plan(ns, reference):
    """complete([]) returns no ids and changes nothing: a request added before it still waits, for the next schedule()."""
    s = Session(ns, 8, 2, 20, reference)
    raw, plan = s.schedule()
    expect_that(plan == [], f"an empty scheduler plans nothing, but schedule() returned {fmt_plan(plan)}")
    s.add(0, 2, 1)  # between schedule() and complete(): it waits
    ids = s.complete(raw)  # judged against the reference: no ids, r0 still waiting with nothing reserved
    expect_that(ids == [], f"complete([]) must return no ids, got {fmt_ids(ids)}")
    s.schedule()  # judged against the reference: [(r0, 2)]


def test_a_request_added_before_complete_waits_for_the_next_schedule(ns, reference):
    """A request added between schedule() and complete() stays waiting: complete() neither applies nor admits it, even when a seat frees."""
    # max_seqs=1: r0 holds the only seat. r1 arrives after the plan is made; complete() lets r0 go
    # (its only token) but must leave r1 waiting, untouched; the next schedule() admits it.
    s = Session(ns, 16, 1, 100, reference)
    s.add(0, 4, 1)
    raw, _ = s.schedule()
    s.add(1, 3, 2)
    s.complete(raw)  # judged against the reference: r0 emits and leaves; waiting [r1], running [], reserved 0
    s.schedule()  # judged against the reference: [(r1, 3)]


def test_requests_admitted_earlier_in_a_step_count_against_max_seqs(ns, reference, feedback):
    """A request admitted in this step takes its seat at once: with max_seqs=2 and one running, only one more gets in."""
    # r0 is running; r1, r2, r3 arrive at step 2. r1 takes the second seat, so r2 and r3 wait although
    # budget and KV are left over; they get in as seats free.
    sc = Scenario(100, 2, 10**6, (R(0, 1, 3), R(1, 5, 1, at=2), R(2, 5, 1, at=2), R(3, 5, 1, at=2)))
    check(ns, reference, feedback, sc,
          about="the requests admitted earlier in a step are in running at once and count against max_seqs",
          expect=[[(0, 1)], [(0, 1), (1, 5)], [(0, 1), (2, 5)], [(3, 5)]])


def test_requests_admitted_earlier_in_a_step_count_against_the_kv_cache(ns, reference, feedback):
    """A request admitted in this step reserves its KV at once: the next head is checked against what is left."""
    # kv_tokens=30: r0 reserves 1 + 3 = 4; r1 and r2 (5 + 5 = 10 each) get in (24 reserved), and r3 would
    # make 34 > 30, so it waits, although each request alone would fit in what was free before the step;
    # it gets in (an exact fit, 30) once r0 has left and released its 4.
    sc = Scenario(100, 8, 30, (R(0, 1, 3), R(1, 5, 5, at=2), R(2, 5, 5, at=2), R(3, 5, 5, at=2)))
    check(ns, reference, feedback, sc,
          about="the requests admitted earlier in a step have their reservation in reserved at once, and the "
                "KV check of the next head counts it",
          expect=[[(0, 1)], [(0, 1), (1, 5), (2, 5)], [(0, 1), (1, 1), (2, 1)], [(1, 1), (2, 1), (3, 5)],
                  [(1, 1), (2, 1), (3, 1)], [(1, 1), (2, 1), (3, 1)], [(3, 1)], [(3, 1)]])


def test_running_keeps_its_order_when_a_request_leaves(ns, reference, feedback):
    """When a request in the middle of running leaves, the others keep their order, oldest first."""
    # r1 leaves first (max_new 2), then r3 (max_new 3), then r0 and r2: running goes
    # [r0, r1, r2, r3] -> [r0, r2, r3] -> [r0, r2] -> [], and each step decodes in that order.
    sc = Scenario(16, 8, 1000, (R(0, 1, 5), R(1, 1, 2), R(2, 1, 5), R(3, 1, 3)))
    check(ns, reference, feedback, sc,
          about="a request that leaves is taken out of running, and the others keep their order (oldest first)",
          expect=[[(0, 1), (1, 1), (2, 1), (3, 1)], [(0, 1), (1, 1), (2, 1), (3, 1)], [(0, 1), (2, 1), (3, 1)],
                  [(0, 1), (2, 1)], [(0, 1), (2, 1)]])


def test_complete_leaves_the_plan_unchanged(ns):
    """complete() only reads the plan it is given: after it, the list holds the same entries as schedule() returned."""
    # Two steps with a decode, a chunk that leaves prompt to go, a chunk that finishes a prompt, and
    # requests that leave: the plan object schedule() returned is read again after complete().
    run = ns.scenario()
    sched = run.new("Scheduler", 8, 4, 100)
    reqs = [(rid, run.new("Req", rid, p, m)) for rid, p, m in ((0, 1, 2), (1, 10, 1))]
    for _, r in reqs:
        run.call(sched, "add", r)
    steps = []
    for _ in range(2):
        plan = run.call(sched, "schedule")
        run.call(sched, "complete", plan)
        steps.append((plan, run.call(plan, "__mul__", 1)))  # a copy of the plan as it is after complete()
    seen = run.run()
    ids = {id(seen[r]): rid for rid, r in reqs}
    # The plans are read too: an empty plan, left empty, says nothing of what complete() does with one.
    expected = [[(0, 1), (1, 7)], [(0, 1), (1, 3)]]
    for step, (plan, after) in enumerate(steps, 1):
        before = plain_plan(seen[plan], ids, step)
        expect_that(before == expected[step - 1], f"step {step}: schedule() should return "
                                                  f"{fmt_plan(expected[step - 1])}, but it returned {fmt_plan(before)}")
        now = plain_plan(seen[after], ids, step)
        expect_that(now == before, f"step {step}: schedule() returned {fmt_plan(before)}, and after complete() that "
                                   f"same list holds {fmt_plan(now)}: complete() only reads the plan, it must leave "
                                   f"the list as it was (the engine keeps it)")


def test_complete_returns_every_emitting_request_once(ns, reference, feedback):
    """Several requests emit in one step: complete() returns each of them once (compared in any order)."""
    sc = Scenario(12, 4, 1000, (R(0, 1, 2), R(1, 1, 2), R(2, 1, 2), R(3, 5, 1, at=2)))
    check(ns, reference, feedback, sc,
          about="complete() returns every request that emitted a token, each once, in any order",
          expect=[[(0, 1), (1, 1), (2, 1)], [(0, 1), (1, 1), (2, 1), (3, 5)]])


# -- a refused add() changes nothing, and an id is free again once its request has finished -----------

def _run_to_the_end(s, cap=60):
    """schedule() and complete(), each judged against the reference, until the plan is empty (that one
    completed too, as the engine does when it goes on calling)."""
    for _ in range(cap):
        raw, plan = s.schedule()
        s.complete(raw)
        if not plan:
            return
    expect_that(False, f"the requests did not finish within {cap} steps")


def _expect_refused(s, rid, prompt_len, max_new, why):
    r = s.new(rid, prompt_len, max_new)
    expect_that(s.refused(r), f"add() accepted r{rid} (prompt_len {prompt_len}, max_new {max_new}): {why}, so "
                              f"add() refuses it with ValueError, and a refused request changes nothing")


def test_a_refused_add_changes_nothing_for_the_request_holding_that_id(ns, reference):
    """Refused adds (a duplicate id, too big, an empty prompt, no output) of an id that is running, between
    schedule() and complete() too, leave that request, waiting, running and reserved as they were."""
    # r7's prompt takes three steps (budget 8): every refused add of id 7 comes while it is half
    # prefilled, and r7 must go on as if none had been tried; each refused call is judged at once.
    s = Session(ns, 8, 2, 40, reference)
    s.add(7, 20, 2)
    raw, _ = s.schedule()
    _expect_refused(s, 7, 3, 1, "r7 is running (added between schedule() and complete())")
    s.complete(raw)
    _expect_refused(s, 7, 3, 1, "r7 is running")
    _expect_refused(s, 7, 30, 20, "r7 is running, and 30 + 20 > kv_tokens=40")
    _expect_refused(s, 7, 0, 1, "an empty prompt cannot emit a first token")
    _expect_refused(s, 7, 4, 0, "a request that wants no output could never finish")
    raw, _ = s.schedule()
    _expect_refused(s, 7, 1, 1, "r7 is running (added between schedule() and complete())")
    s.complete(raw)
    _run_to_the_end(s)


def test_a_refused_add_leaves_nothing_behind_for_its_id(ns, reference):
    """An id whose add() was refused (too big, an empty prompt, no output) is taken by nobody: the same id
    is accepted next, and that request runs as any other."""
    s = Session(ns, 6, 2, 30, reference)
    s.add(1, 4, 3)
    _expect_refused(s, 4, 25, 6, "25 + 6 > kv_tokens=30: it could never fit")
    _expect_refused(s, 4, 0, 3, "an empty prompt cannot emit a first token")
    _expect_refused(s, 4, 9, 0, "a request that wants no output could never finish")
    raw, _ = s.schedule()
    s.complete(raw)
    s.add(4, 9, 2)  # the refused id, now a request that fits: its prompt takes two steps
    _expect_refused(s, 1, 1, 1, "r1 is running")
    _run_to_the_end(s)


def test_a_finished_id_used_again_starts_a_new_request(ns, reference):
    """Once a request has finished, a new request with its id starts from nothing: its prompt, in chunks
    over several steps, and its max_new tokens; nothing kept for the old one counts for it."""
    # Budget 4: r3 (prompt 2, max_new 2) and r5 (prompt 1, max_new 1) finish within two steps; then r3
    # and r5 come again with prompts of several chunks and other max_new, while r9 decodes beside them.
    s = Session(ns, 4, 3, 60, reference)
    s.add(3, 2, 2)
    s.add(5, 1, 1)
    _run_to_the_end(s)
    s.add(9, 1, 6)
    s.add(3, 10, 3)
    raw, _ = s.schedule()
    s.complete(raw)
    s.add(5, 7, 2)
    _run_to_the_end(s)
    s.add(3, 5, 1)  # a third r3, whose whole prompt fits in one step
    _run_to_the_end(s)


def test_schedule_returns_a_new_list_every_step(ns):
    """The engine keeps every step's plan: the list schedule() returned in one step still holds that step's
    plan after the next schedule() and complete() (a new list each step, not one list cleared and refilled)."""
    run = ns.scenario()
    sched = run.new("Scheduler", 8, 4, 100)
    reqs = [(rid, run.new("Req", rid, p, m)) for rid, p, m in ((0, 1, 3), (1, 10, 1))]
    for _, r in reqs:
        run.call(sched, "add", r)
    plans = []
    for _ in range(3):
        plan = run.call(sched, "schedule")
        run.call(sched, "complete", plan)
        plans.append(plan)
    kept = run.call(plans[0], "__mul__", 1)  # the first step's list, read after the third step
    seen = run.run()
    ids = {id(seen[r]): rid for rid, r in reqs}
    first = [(0, 1), (1, 7)]
    now = plain_plan(seen[kept], ids, 1)
    expect_that(now == first, f"schedule() returned {fmt_plan(first)} in step 1, and after two more steps that "
                              f"same list holds {fmt_plan(now)}: schedule() must return a new list at every call "
                              f"(the engine keeps the plan of every step), not one list it clears and fills again")
