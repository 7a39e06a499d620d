"""Premium suite, hand-written scenarios: one rule of SPEC.md per test.

Each scenario runs on the submission and on the reference side by side (see `_cb_helpers.check`); the
plans the reference must take are spelled out in `expect`, so a reader sees what each test is about.
Plans are written as [(rid, n_tokens), ...]; R(rid, prompt_len, max_new, at=step it is added before).
"""

from _cb_helpers import R, Scenario, Session, check, expect_that

# --- the statement's worked example ---------------------------------------------------------------

def test_the_example_of_the_statement(ns, reference, feedback):
    """The small example worked out in the statement, step by step."""
    sc = Scenario(8, 3, 30, (R(0, 5, 3), R(1, 12, 2), R(2, 10, 4, at=2), R(3, 2, 1, at=2)))
    check(ns, reference, feedback, sc, about="the small example worked out in the statement (README.md)",
          expect=[[(0, 5), (1, 3)], [(0, 1), (1, 7)], [(0, 1), (1, 2)], [(1, 1), (2, 7)], [(2, 3), (3, 2)],
                  [(2, 1)], [(2, 1)], [(2, 1)]])


# --- prefill continuation against a new arrival ---------------------------------------------------

def test_in_progress_prefill_continues_before_a_new_arrival(ns, reference, feedback):
    """A prompt already being prefilled is continued before a new arrival is admitted."""
    sc = Scenario(64, 8, 1000, (R(0, 100, 3), R(1, 40, 2, at=2)))
    check(ns, reference, feedback, sc,
          about="a prompt already being prefilled continues before a newly arrived request is admitted",
          expect=[[(0, 64)], [(0, 36), (1, 28)], [(0, 1), (1, 12)], [(0, 1), (1, 1)]])


def test_a_new_arrival_waits_while_a_prompt_uses_the_whole_budget(ns, reference, feedback):
    """Nothing is admitted once the budget is spent, and no entry gets 0 tokens."""
    sc = Scenario(32, 8, 1000, (R(0, 100, 1), R(1, 5, 1, at=2)))
    check(ns, reference, feedback, sc,
          about="a request is admitted only while budget remains, and never with 0 tokens",
          expect=[[(0, 32)], [(0, 32)], [(0, 32)], [(0, 4), (1, 5)]])


def test_decodes_prefill_and_admission_share_the_budget(ns, reference, feedback):
    """Decodes, then prompt remainders, then admissions share one step's budget, in that order."""
    sc = Scenario(10, 8, 1000, (R(0, 1, 6), R(1, 20, 2, at=2), R(2, 5, 1, at=3)))
    check(ns, reference, feedback, sc,
          about="decodes first, then the prompt in progress, then admission, all from one budget",
          expect=[[(0, 1)], [(0, 1), (1, 9)], [(0, 1), (1, 9)], [(0, 1), (1, 2), (2, 5)],
                  [(0, 1), (1, 1)], [(0, 1)]])


def test_decodes_follow_admission_order(ns, reference, feedback):
    """Decodes are scheduled oldest first, in the order requests were admitted."""
    sc = Scenario(8, 8, 1000, (R(0, 1, 4), R(1, 1, 4), R(2, 3, 3, at=2)))
    check(ns, reference, feedback, sc,
          about="decodes go in running order, oldest (first admitted) first",
          expect=[[(0, 1), (1, 1)], [(0, 1), (1, 1), (2, 3)], [(0, 1), (1, 1), (2, 1)],
                  [(0, 1), (1, 1), (2, 1)]])


def test_decodes_follow_admission_order_not_id_order(ns, reference, feedback):
    """Oldest first means first admitted, whatever the ids: requests added as r5, r2, r9 decode as r5, r2, r9."""
    # Ids say nothing of age: r5 arrives first, then r2, then r9 (a step later). Decodes, prompt
    # chunks and running all follow the order of admission.
    sc = Scenario(8, 8, 1000, (R(5, 1, 3), R(2, 1, 4), R(9, 2, 3, at=2)))
    check(ns, reference, feedback, sc,
          about="running, and the decodes, follow the order requests were admitted in, not their ids",
          expect=[[(5, 1), (2, 1)], [(5, 1), (2, 1), (9, 2)], [(5, 1), (2, 1), (9, 1)], [(2, 1), (9, 1)]])


# --- head-of-line blocking ------------------------------------------------------------------------

def test_head_that_does_not_fit_blocks_everyone_behind_it(ns, reference, feedback):
    """A waiting head that does not fit the KV cache blocks everyone behind it (head-of-line blocking)."""
    # r0 reserves 50 + 3 = 53 of 100 KV tokens; r1 needs 45 + 5 = 50 and must wait. r2 and r3 would
    # fit, but they are behind r1 and must wait too; all three get in once r0 has left.
    sc = Scenario(64, 8, 100, (R(0, 50, 3), R(1, 45, 5), R(2, 4, 2), R(3, 2, 1, at=2)))
    check(ns, reference, feedback, sc,
          about="admission stops at the first waiting request that does not fit (head-of-line blocking)",
          expect=[[(0, 50)], [(0, 1)], [(0, 1)], [(1, 45), (2, 4), (3, 2)], [(1, 1), (2, 1)],
                  [(1, 1)], [(1, 1)], [(1, 1)]])


# --- the sequence cap -----------------------------------------------------------------------------

def test_no_more_than_max_seqs_requests_run(ns, reference, feedback):
    """No more than max_seqs requests run at once; a seat frees when a request finishes."""
    sc = Scenario(100, 3, 10**6, (R(0, 10, 1), R(1, 10, 3), R(2, 10, 3), R(3, 10, 2), R(4, 10, 2)))
    check(ns, reference, feedback, sc,
          about="at most max_seqs requests run at once; a seat frees when a request finishes",
          expect=[[(0, 10), (1, 10), (2, 10)], [(1, 1), (2, 1), (3, 10)], [(1, 1), (2, 1), (3, 1)],
                  [(4, 10)], [(4, 1)]])


def test_a_sequence_cap_of_one_runs_requests_one_at_a_time(ns, reference, feedback):
    """With max_seqs = 1, requests run strictly one after another."""
    sc = Scenario(8, 1, 10**6, (R(0, 12, 2), R(1, 3, 1), R(2, 1, 2)))
    check(ns, reference, feedback, sc,
          about="with max_seqs=1 the next request waits until the running one has finished",
          expect=[[(0, 8)], [(0, 4)], [(0, 1)], [(1, 3)], [(2, 1)], [(2, 1)]])


# --- budgets and sizes at their smallest ----------------------------------------------------------

def test_a_budget_of_one(ns, reference, feedback):
    """With a budget of one token, each step serves exactly one token."""
    sc = Scenario(1, 4, 10**6, (R(0, 3, 2), R(1, 1, 2), R(2, 2, 1, at=2)))
    check(ns, reference, feedback, sc,
          about="with token_budget=1 each step runs exactly one token: one prompt token or one decode",
          expect=[[(0, 1)], [(0, 1)], [(0, 1)], [(0, 1)], [(1, 1)], [(1, 1)], [(2, 1)], [(2, 1)]])


def test_one_token_prompts_emit_at_once(ns, reference, feedback):
    """A one-token prompt is prefilled and emits its first token in the same step."""
    sc = Scenario(3, 8, 10**6, tuple(R(i, 1, 2) for i in range(5)))
    check(ns, reference, feedback, sc,
          about="a one-token prompt is prefilled in one step and emits its first output token in it",
          expect=[[(0, 1), (1, 1), (2, 1)], [(0, 1), (1, 1), (2, 1)], [(3, 1), (4, 1)], [(3, 1), (4, 1)]])


def test_max_new_of_one_finishes_when_the_prompt_completes(ns, reference, feedback):
    """A request with max_new = 1 finishes when its prompt completes and frees its KV at once."""
    # r0 emits its only token in step 1 and leaves at once: it is never decoded, and its KV
    # (10 + 1 = 11 tokens) lets r1 (20 + 1 = 21 tokens, of 30) in at step 2.
    sc = Scenario(16, 4, 30, (R(0, 10, 1), R(1, 20, 1)))
    check(ns, reference, feedback, sc,
          about="a request with max_new=1 is done in the step its prompt completes",
          expect=[[(0, 10)], [(1, 16)], [(1, 4)]])


# --- first-token emission -------------------------------------------------------------------------

def test_first_token_in_the_step_a_chunked_prompt_completes(ns, reference, feedback):
    """A prompt split into chunks emits its first token in the step of its last chunk."""
    sc = Scenario(16, 2, 10**6, (R(0, 40, 3),))
    check(ns, reference, feedback, sc,
          about="a chunked prompt emits its first output token in the step of its last chunk, not before, "
                "not after",
          expect=[[(0, 16)], [(0, 16)], [(0, 8)], [(0, 1)], [(0, 1)]])


def test_first_token_when_the_prompt_ends_on_a_chunk_boundary(ns, reference, feedback):
    """Prompts that end exactly on a chunk boundary emit their first token in that step."""
    # r0's 32 tokens are two full chunks of 16; r1's prompt is exactly one budget.
    sc = Scenario(16, 2, 10**6, (R(0, 32, 2), R(1, 16, 2, at=4)))
    check(ns, reference, feedback, sc,
          about="a prompt that ends exactly at a chunk boundary emits its first token in that step",
          expect=[[(0, 16)], [(0, 16)], [(0, 1)], [(1, 16)], [(1, 1)]])


def test_complete_returns_only_the_requests_that_emitted(ns, reference, feedback):
    """complete() returns only the requests that emitted a token, not every request in the plan."""
    sc = Scenario(10, 4, 10**6, (R(0, 1, 5), R(1, 30, 1)))
    check(ns, reference, feedback, sc,
          about="complete() returns the decodes and the prompts finished in this step, not partial chunks",
          expect=[[(0, 1), (1, 9)], [(0, 1), (1, 9)], [(0, 1), (1, 9)], [(0, 1), (1, 3)], [(0, 1)]])


# --- release of the reservation -------------------------------------------------------------------

def test_released_kv_admits_the_head_in_the_next_schedule(ns, reference, feedback):
    """KV released by a finished request lets the waiting head in at the next schedule(); exact fits are admitted."""
    # kv_tokens=20: r0 (8 + 2) and r1 (6 + 4) fill it exactly. r2 (7 + 3) waits; r0 leaves at the
    # end of step 2, so step 3 admits r2, again an exact fit (10 + 10 = 20).
    sc = Scenario(32, 4, 20, (R(0, 8, 2), R(1, 6, 4), R(2, 7, 3)))
    check(ns, reference, feedback, sc,
          about="a finished request releases prompt_len + max_new KV tokens at once, so the next "
                "schedule() can admit the waiting head (an exact fit is admitted)",
          expect=[[(0, 8), (1, 6)], [(0, 1), (1, 1)], [(1, 1), (2, 7)], [(1, 1), (2, 1)], [(2, 1)]])


def test_idle_steps_and_late_arrivals(ns, reference, feedback):
    """Idle steps return empty plans, and requests added later are picked up."""
    sc = Scenario(8, 2, 10, (R(0, 2, 1, at=3), R(1, 2, 2, at=6)))
    check(ns, reference, feedback, sc,
          about="an empty scheduler plans nothing, and picks requests up when they arrive",
          expect=[[], [], [(0, 2)], [], [], [(1, 2)], [(1, 1)]])


# --- impossible requests --------------------------------------------------------------------------

def _run_to_the_end(s, steps=20):
    """Schedule and complete until schedule() plans nothing; each call is judged against the reference
    as it comes (see `Session`). Returns the plans."""
    plans = []
    for _ in range(steps):
        raw, plan = s.schedule()
        plans.append(plan)
        if not plan:
            break
        s.complete(raw)
    return plans


def test_add_rejects_a_request_that_can_never_fit(ns, reference):
    """add() raises ValueError for a request larger than the KV cache, and the scheduler goes on."""
    s = Session(ns, 16, 4, 50, reference)
    s.add(0, 10, 2)
    big = s.new(1, 45, 6)  # 45 + 6 = 51 > 50
    expect_that(s.refused(big), "add() accepted r1 with prompt_len + max_new = 51 > kv_tokens = 50: it can never fit, "
                                "so add() must raise ValueError")
    s.add(2, 3, 1)
    # Judged step by step against the reference: [(r0, 10), (r2, 3)], [(r0, 1)], then nothing.
    _run_to_the_end(s)


def test_add_accepts_an_exact_kv_fit_and_runs_it(ns, reference):
    """add() accepts a request that exactly fills the KV cache, and it runs to completion."""
    s = Session(ns, 16, 4, 50, reference)
    exact = s.new(0, 44, 6)  # 44 + 6 = 50 = kv_tokens
    expect_that(not s.refused(exact), "add() rejected r0 with prompt_len + max_new = 50 = kv_tokens: an exact fit is "
                                      "accepted")
    s.ref_add(exact)
    # Judged step by step against the reference: chunks of 16, 16 and 12, then 5 decodes, then nothing.
    plans = _run_to_the_end(s)
    expect_that(len(plans) == 9, f"r0 should take 8 steps and then an empty plan, but the run took {len(plans)}")
