"""The premium suites' generated workloads never collapse: on every seed, the workloads a grading draws
cover the space their tests are there for (a prompt over several steps, a blocked head, a full budget,
several outputs; a full cache, copies on write, shared prefixes, refused calls, ids used again), so no
submission is graded on trivial workloads only because its seed was unkind. Checked over many seeds,
with the reference (no sandbox, no submission)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import PROJECT, load_module

pytestmark = pytest.mark.unit

SEEDS = range(0, 2**63, 2**63 // 120)  # 120 seeds spread over the seeding's range


@pytest.fixture(scope="module")
def cb() -> Any:
    return load_module(PROJECT / "hidden_tests" / "continuous_batching" / "_cb_helpers.py", "_cb_helpers_drawn")


@pytest.fixture(scope="module")
def cb_reference() -> dict[str, Any]:
    return vars(load_module(PROJECT / "solutions" / "continuous_batching" / "scheduler.py", "cb_reference_drawn"))


@pytest.fixture(scope="module")
def kv() -> Any:
    return load_module(PROJECT / "hidden_tests" / "paged_kv_cache" / "_kv_helpers.py", "_kv_helpers_drawn")


@pytest.fixture(scope="module")
def kv_reference() -> dict[str, Any]:
    return vars(load_module(PROJECT / "solutions" / "paged_kv_cache" / "block_manager.py", "kv_reference_drawn"))


def scheduler_traits(cb: Any, reference: Any, sc: Any) -> set[str]:
    """What a scheduler workload meets, as the reference runs it."""
    traits = set()
    if sc.budget > 1 and sc.max_seqs > 1 and sc.kv_tokens > 2:
        traits.add("limits above one")
    if any(r.max_new > 1 for r in sc.reqs) and any(r.prompt_len > 1 for r in sc.reqs):
        traits.add("prompts and outputs of several tokens")
    seen: dict[int, int] = {}
    for rs in cb.run_reference(reference, sc):
        for rid, _ in rs.plan:
            seen[rid] = seen.get(rid, 0) + 1
        if sum(n for _, n in rs.plan) == sc.budget:
            traits.add("a step that spends the whole budget")
        if len(_kinds(rs)) >= 2:
            traits.add("decodes and prompt chunks in one step")
        admitted = {rid for rid, _ in rs.plan} & {rid for rid, _, _ in rs.waiting}
        if rs.waiting and not admitted and sum(n for _, n in rs.plan) < sc.budget:
            traits.add("a head that waits with budget left")
    if any(count > 1 for count in seen.values()) and any(
            r.prompt_len > sc.budget or r.prompt_len > 1 for r in sc.reqs):
        traits.add("requests over several steps")
    return traits


def _kinds(rs: Any) -> set[str]:
    running = {rid: (p, pf) for rid, p, pf, _ in rs.running}
    return {"decode" if rid in running and running[rid][0] == running[rid][1] else "prefill" for rid, _ in rs.plan}


def test_every_seed_draws_scheduler_workloads_that_cover_the_rules(cb, cb_reference):
    wanted = {"limits above one", "prompts and outputs of several tokens", "a step that spends the whole budget",
              "decodes and prompt chunks in one step", "a head that waits with budget left",
              "requests over several steps"}
    for seed in SEEDS:
        # The workloads one grading draws (test_hidden_random.py), the crowd aside (it is one profile of many).
        drawn = [cb.random_scenario(f"{seed}/{i}", profile) for profile in sorted(set(cb.PROFILES) - {"crowd"})
                 for i in (1, 2)]
        drawn += [cb.random_scenario(f"{seed}/budget", "mixed"), cb.random_scenario(f"{seed}/tokens", "tight_kv")]
        met = set().union(*(scheduler_traits(cb, cb_reference, sc) for sc in drawn))
        assert met == wanted, (seed, wanted - met)
        # No profile collapses either: each of its workloads has limits above one and work over several steps.
        for sc in drawn:
            traits = scheduler_traits(cb, cb_reference, sc)
            assert "requests over several steps" in traits, (seed, sc.describe())


def manager_traits(kv: Any, reference: Any, sc: Any) -> set[str]:
    """What a sequence of block manager calls meets, as the reference makes them."""
    traits = set()
    states = kv.run_reference(reference, sc, full=False)
    freed: set[int] = set()
    for call, state in zip(sc.calls, states):
        if state.outcome == "OutOfBlocks":
            traits.add("out of blocks")
        elif state.outcome in ("ValueError", "KeyError"):
            traits.add("a refused mistake")
        elif call[0] == "free":
            freed.add(call[1])
        elif call[0] in ("allocate", "fork") and call[-1 if call[0] == "fork" else 1] in freed:
            traits.add("an id used again after free")
    m = reference["BlockManager"](sc.num_blocks, sc.block_size)
    for call in sc.calls:
        before = {seq: m.block_table(seq) for seq in m._tables}
        try:
            getattr(m, call[0])(*call[1:])
        except Exception:
            continue
        if call[0] == "append_token" and before[call[1]][:-1] == m.block_table(call[1])[:-1] \
                and before[call[1]][-1] != m.block_table(call[1])[-1]:
            traits.add("a copy on write")
        if call[0] == "allocate" and any(m.ref_count(b) > 1 for b in m.block_table(call[1])):
            traits.add("a shared prefix")
    return traits


def test_every_seed_draws_call_sequences_that_cover_the_rules(kv, kv_reference):
    wanted = {"out of blocks", "a refused mistake", "an id used again after free", "a copy on write",
              "a shared prefix"}
    for seed in SEEDS[::3]:
        drawn = [kv.random_scenario(kv_reference, f"{seed}/{i}", profile)
                 for profile in sorted(kv.PROFILES) for i in (1, 2, 3)]
        met = set().union(*(manager_traits(kv, kv_reference, sc) for sc in drawn))
        assert met == wanted, (seed, wanted - met)
        for sc in drawn:
            assert len({call[0] for call in sc.calls}) >= 3, (seed, sc.code())  # no sequence of one or two methods
