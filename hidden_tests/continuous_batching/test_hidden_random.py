"""Premium suite, generated workloads: step by step against the reference, and the invariants of
SPEC.md checked on the submission alone.

The workloads are drawn from the `seed` fixture: derived from the submission's SHA-256 and a key kept
with this suite (grader/core/seeding.py), so each submission gets its own workloads and a regrade of the
same file gets the same ones. Every test here also demands progress: each request must finish.
"""

import pytest
from _cb_helpers import (
    PROFILES,
    check_calls,
    check_random,
    drive_alone,
    expect_progress,
    expect_that,
    fmt_ids,
    fmt_plan,
    random_calls,
    random_scenario,
    run_reference,
)


@pytest.mark.parametrize("profile", sorted(set(PROFILES) - {"crowd"}))
def test_random_workloads_match_the_reference(ns, reference, feedback, seed, profile):
    """Generated workloads, step by step: every plan, emitted id and the state after every call match the rules."""
    for i in (1, 2):
        check_random(ns, reference, feedback, random_scenario(f"{seed}/{i}", profile),
                     about=f"a generated workload ({profile.replace('_', ' ')}), step by step against "
                           f"the rules")


def test_hundreds_of_running_requests_match_the_reference(ns, reference, feedback, seed):
    """A generated crowd: hundreds of requests decoding at once under a large budget, step by step."""
    check_random(ns, reference, feedback, random_scenario(f"{seed}/crowd", "crowd"),
                 about="hundreds of requests running at once under a large budget, step by step against "
                       "the rules", shrink_work=3_000)


def test_the_budget_holds_across_a_random_workload(ns, reference, seed):
    """No step spends more than the token budget, no entry is empty, no request appears twice, and every request finishes."""
    # Judged on the submission alone: at most token_budget tokens, every n >= 1, no request twice;
    # and progress, so that doing nothing cannot pass.
    sc = random_scenario(f"{seed}/budget", "mixed")
    steps = len(run_reference(reference, sc))
    cap = 2 * steps + 10
    generated: dict[int, int] = {}
    last_planned: dict[int, int] = {}
    step = 0
    for step, plan, emitted in drive_alone(ns, sc, cap, steps):
        for rid in emitted:
            generated[rid] = generated.get(rid, 0) + 1
        last_planned.update((rid, step) for rid, _ in plan)
        total = sum(n for _, n in plan)
        expect_that(total <= sc.budget, f"step {step}: the plan {fmt_plan(plan)} spends {total} tokens "
                                        f"but token_budget is {sc.budget}")
        expect_that(all(n >= 1 for _, n in plan), f"step {step}: every entry of a plan needs at least 1 "
                                                  f"token, but schedule() returned {fmt_plan(plan)}")
        rids = [rid for rid, _ in plan]
        expect_that(len(set(rids)) == len(rids),
                    f"step {step}: a request appears twice in the plan {fmt_plan(plan)}")
    expect_progress(sc, generated, cap, last_planned, step)


def test_every_request_emits_max_new_tokens_the_first_when_its_prompt_completes(ns, reference, seed):
    """Each request emits exactly max_new tokens, the first in the step its prompt completes."""
    # Judged on the submission alone, from its own plans: what complete() returns matches the plan,
    # nobody is scheduled after its last token, and in the end every request got all its tokens.
    sc = random_scenario(f"{seed}/tokens", "tight_kv")
    spec = {r.rid: r for r in sc.reqs}
    prefilled = {rid: 0 for rid in spec}
    generated = {rid: 0 for rid in spec}
    steps = len(run_reference(reference, sc))
    cap = 2 * steps + 10
    last_planned: dict[int, int] = {}
    step = 0
    for step, plan, emitted in drive_alone(ns, sc, cap, steps):
        last_planned.update((rid, step) for rid, _ in plan)
        should = []  # what the plan makes emit: each decode, and each chunk that finishes its prompt
        for rid, n in plan:
            r = spec[rid]
            expect_that(generated[rid] < r.max_new, f"step {step}: r{rid} is scheduled again after it "
                                                    f"emitted all its max_new={r.max_new} tokens")
            if prefilled[rid] < r.prompt_len:
                prefilled[rid] += n
                if prefilled[rid] < r.prompt_len:
                    continue
            should.append(rid)
            generated[rid] += 1
        expect_that(emitted == sorted(should), (
            f"step {step}: with the plan {fmt_plan(plan)}, the requests that emit a token are "
            f"{fmt_ids(sorted(should))} (each decode, and each chunk that finishes its prompt), but "
            f"complete() returned {fmt_ids(emitted)}"))
    expect_progress(sc, generated, cap, last_planned, step)


def test_random_calls_with_refused_adds_and_ids_used_again_match_the_reference(ns, reference, seed):
    """A generated call sequence over the whole API: refused adds (too big, empty, no output, a live id),
    adds between schedule() and complete(), finished ids used again; every call judged against the rules."""
    limits, ops = random_calls(reference, f"{seed}/calls")
    check_calls(ns, reference, limits, ops)
