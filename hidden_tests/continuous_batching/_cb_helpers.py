"""Driver shared by the continuous_batching premium suite (a helper module, not a test module).

A `Scenario` is a scheduler configuration plus the requests added before given steps. `check()` runs
it on the reference (trusted, in this process) and on the submission (through `ns`: one scenario of
operations run in another process when grading, whose observations are judged here), step by step, and fails at the first divergence with a message in a student's
terms and a side-by-side trace of the plans. `check_random()` does the same for a generated workload
and shrinks the scenario before reporting it.

Rules for talking to the submission (see the brief): only call its classes and methods, read plain
attributes of the requests, unpack plan entries and compare requests by identity. Everything it
returns is converted to plain data (and sanity-checked) before being compared.
"""

from __future__ import annotations

import collections
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import pytest

Plan = list[tuple[int, int]]  # [(rid, n_tokens), ...]
State = tuple[list[int], list[int], int]  # the documented attributes: waiting, running (rids, in order), reserved


# ----------------------------------------------------------------------------------------- scenarios

@dataclass(frozen=True)
class R:
    """One request of a scenario, added just before the schedule() of step `at` (steps count from 1)."""

    rid: int
    prompt_len: int
    max_new: int
    at: int = 1


@dataclass(frozen=True)
class Scenario:
    budget: int
    max_seqs: int
    kv_tokens: int
    reqs: tuple[R, ...]

    @cached_property
    def last_arrival(self) -> int:
        return max((r.at for r in self.reqs), default=1)

    @cached_property
    def _by_step(self) -> dict[int, list[R]]:
        # The drivers ask for the arrivals of every step: indexed once, not searched for at each step.
        by_step: dict[int, list[R]] = {}
        for r in self.reqs:
            by_step.setdefault(r.at, []).append(r)
        return by_step

    def arrivals(self, step: int) -> list[R]:
        return list(self._by_step.get(step, ()))

    def describe(self) -> str:
        lines = [f"Scheduler(token_budget={self.budget}, max_seqs={self.max_seqs}, "
                 f"kv_tokens={self.kv_tokens})"]
        for at in sorted({r.at for r in self.reqs}):
            arrivals = [f"r{r.rid} (prompt_len {r.prompt_len}, max_new {r.max_new})" for r in self.arrivals(at)]
            if len(self.reqs) > LONG and len(arrivals) > 4:  # a crowd: a few of each step's arrivals
                arrivals = [f"{len(arrivals)} requests:", *arrivals[:3], "…", arrivals[-1]]
            items = ", ".join(arrivals).replace(":,", ":")
            lines.append(f"  added before step {at}: {items}")
        return "\n".join(lines)


LONG = 24  # entries of a plan, or requests of a scenario, listed in full in a message


def fmt_plan(plan: Plan) -> str:
    items = [f"(r{rid}, {n})" for rid, n in plan]
    if len(items) > LONG:  # a crowd: the explanation names the entry that matters
        items = items[:10] + [f"… {len(items) - 20} more …"] + items[-10:]
    seen: dict[int, int] = {}
    for rid, _ in plan:
        seen[rid] = seen.get(rid, 0) + 1
    twice = [f"r{rid} {count} times" for rid, count in seen.items() if count > 1]
    # A request appears at most once in a plan: the one thing a reader of a long plan must not miss.
    return "[" + ", ".join(items) + "]" + (f" ({', '.join(twice[:3])} in one plan)" if twice else "")


def _tokens(n: int) -> str:
    return f"{n} token" if n == 1 else f"{n} tokens"


def fmt_ids(ids: list[int]) -> str:
    items = [f"r{rid}" for rid in ids]
    if len(items) > 2 * LONG:
        items = items[:LONG] + [f"… {len(items) - 2 * LONG} more …"] + items[-LONG:]
    return "[" + ", ".join(items) + "]"


ITERATORS = ("iterator", "generator", "map", "filter", "zip", "reversed", "enumerate")


def kind_of(value: Any) -> str:
    """The name of a value's type, in the student's terms: an object of the submission (held here as a
    proxy) by its own class's name, as its repr begins, never the proxy's."""
    name = type(value).__name__
    if name == "RemoteObject":
        name = repr(value).split("(", 1)[0] or name
    return name


def kind_said(value: Any) -> str:
    """"a list_iterator (an iterator, which can be read only once)": a value's type, and what it is."""
    name = kind_of(value)
    if any(word in name for word in ITERATORS):
        return f"a {name} (an iterator, which can be read only once: return a list, list(...))"
    return f"a {name}"


# ----------------------------------------------------------------------------------------- reference

@dataclass
class RefStep:
    """What the reference did in one step, and the state it started from (for explanations)."""

    step: int
    running: list[tuple[int, int, int, int]]  # (rid, prompt_len, prefilled, max_new), oldest first
    waiting: list[tuple[int, int, int]]  # (rid, prompt_len, max_new), head first
    reserved: int
    released: list[tuple[int, int]]  # (rid, KV tokens) freed by the previous complete()
    left_at: dict[int, int]  # rid -> the step whose complete() it left in, for the whole run (shared)
    plan: Plan
    emitted: list[int] | None  # sorted; None for the final step, where complete() is not called
    # rid -> (prefilled, generated) after complete(), of the requests live in this step (waiting or
    # running once its arrivals are added): a request that left is read no more, so a step costs what
    # is live, not everything the run has seen.
    after: dict[int, tuple[int, int]] = field(default_factory=dict)
    scheduled: State | None = None  # waiting, running, reserved right after schedule()
    completed: State | None = None  # and right after complete()

    @property
    def finished(self) -> set[int]:
        """The requests that left before this step."""
        return {rid for rid, step in self.left_at.items() if step < self.step}

    @property
    def live(self) -> list[int]:
        """The requests waiting or running once this step's arrivals are added: those it can change."""
        return [r[0] for r in self.running] + [r[0] for r in self.waiting]

    @property
    def before(self) -> State:
        """The documented state right before schedule(), after this step's add() calls."""
        return [r[0] for r in self.waiting], [r[0] for r in self.running], self.reserved


def state_of(sched: Any) -> State:
    return [r.rid for r in sched.waiting], [r.rid for r in sched.running], sched.reserved


def run_reference(reference: Any, sc: Scenario, max_steps: int = 5000, until: int | None = None) -> list[RefStep]:
    """Run the scenario on the reference; the last step is the empty plan once everything is done.
    With `until`, stop after that step (the steps a shrinking candidate is judged on)."""
    s = reference["Scheduler"](sc.budget, sc.max_seqs, sc.kv_tokens)
    objs: dict[int, Any] = {}
    steps: list[RefStep] = []
    released: list[tuple[int, int]] = []
    left_at: dict[int, int] = {}
    for step in range(1, max_steps + 1):
        for spec in sc.arrivals(step):
            objs[spec.rid] = reference["Req"](spec.rid, spec.prompt_len, spec.max_new)
            s.add(objs[spec.rid])
        done = step > sc.last_arrival and not s.running and not s.waiting
        rec = RefStep(
            step=step,
            running=[(r.rid, r.prompt_len, r.prefilled, r.max_new) for r in s.running],
            waiting=[(r.rid, r.prompt_len, r.max_new) for r in s.waiting],
            reserved=s.reserved, released=released, left_at=left_at,
            plan=[], emitted=None)
        steps.append(rec)
        plan = s.schedule()
        rec.plan = [(r.rid, n) for r, n in plan]
        rec.scheduled = state_of(s)
        if done:
            return steps
        in_step = {r.rid: r for r in s.running}
        rec.emitted = sorted(s.complete(plan))
        rec.completed = state_of(s)
        still = {r.rid for r in s.running}
        released = [(rid, r.prompt_len + r.max_new) for rid, r in in_step.items() if rid not in still]
        left_at.update((rid, step) for rid, _ in released)
        rec.after = {rid: (objs[rid].prefilled, objs[rid].generated) for rid in rec.live}
        if step == until:
            return steps
    raise AssertionError("suite bug: the reference did not finish the scenario")


# ----------------------------------------------------------------------------------------- explanations

def explain_plan(ref: RefStep, sc: Scenario, got: Plan) -> str:
    """Why `got` is wrong, in the terms of the rules; `ref` is the step the reference took."""
    exp = ref.plan
    run = {rid: (p, pf, m) for rid, p, pf, m in ref.running}
    wait = {rid: (p, m) for rid, p, m in ref.waiting}
    wait_order = [rid for rid, _, _ in ref.waiting]

    for rid, n in got:
        if n < 1:
            return f"every entry must have at least 1 token, but (r{rid}, {n}) has {n}"
    seen: set[int] = set()
    for rid, _ in got:
        if rid in seen:
            return f"r{rid} appears twice; a request appears at most once in a plan"
        seen.add(rid)
    total = sum(n for _, n in got)
    if total > sc.budget:
        return f"the plan spends {total} tokens but token_budget is {sc.budget}"
    for rid, _ in got:
        if rid not in run and rid not in wait:
            if rid in ref.finished:
                return f"r{rid} already emitted its max_new tokens and left; it must not be scheduled again"
            return f"r{rid} is neither running nor waiting at this step"

    def kind(rid: int) -> int:  # 0 decode, 1 prefill continuation, 2 admission
        if rid in wait:
            return 2
        p, pf, _ = run[rid]
        return 0 if pf == p else 1

    for (a, _), (b, _) in zip(got, got[1:]):
        if kind(b) < kind(a):
            if kind(b) == 0:
                return (f"decodes must be scheduled before prompt chunks (r{b} is decoding, "
                        f"r{a} is prefilling)")
            return (f"a prompt already in progress (r{b}) must continue before new requests are "
                    f"admitted (r{a} was waiting)")
    for rid, n in got:
        if kind(rid) == 0 and n != 1:
            return f"a decode gets exactly 1 token, but r{rid} (prompt fully prefilled) got {n}"

    def part(plan: Plan, k: int) -> Plan:
        return [(rid, n) for rid, n in plan if kind(rid) == k]

    # 1. decodes
    exp_dec, got_dec = [r for r, _ in part(exp, 0)], [r for r, _ in part(got, 0)]
    if exp_dec != got_dec:
        missing = [r for r in exp_dec if r not in got_dec]
        if missing and len(got_dec) < len(got):
            return (f"decodes come first: every running request that has finished its prefill gets 1 token "
                    f"before any prompt chunk, but r{missing[0]} got none")
        if missing:
            return (f"every running request that has finished its prefill gets 1 token while budget "
                    f"remains, but r{missing[0]} got none")
        extra = [r for r in got_dec if r not in exp_dec]
        if extra:
            return (f"only {len(exp_dec)} decodes fit in token_budget={sc.budget}; they go to the "
                    f"oldest running requests first, so r{extra[0]} must wait")
        return ("decodes go in running order, oldest first (the order in which requests were "
                f"admitted): expected {fmt_ids(exp_dec)}")
    left = sc.budget - len(exp_dec)

    # 2. prefill continuation
    exp_pre, got_pre = part(exp, 1), dict(part(got, 1))
    for rid, n in exp_pre:
        p, pf, _ = run[rid]
        if got_pre.get(rid) != n:
            given = "nothing" if rid not in got_pre else f"{got_pre[rid]}"
            return (f"r{rid} has {_tokens(p - pf)} of its prompt left (prefilled {pf} of {p}) and budget for "
                    f"{_tokens(left)} left, so its chunk is min({p - pf}, {left}) = {_tokens(n)}, not {given}")
        left -= n
    for rid in got_pre:
        if rid not in dict(exp_pre):
            return f"r{rid} should not get a prompt chunk: the budget ran out before it"

    # 3. admission
    got_adm, exp_adm = part(got, 2), part(exp, 2)
    for i, (rid, _) in enumerate(got_adm):
        if wait_order[i] != rid:
            return (f"r{rid} was admitted ahead of r{wait_order[i]}, the head of the waiting queue: "
                    f"requests are admitted in arrival order and a head that does not fit blocks "
                    f"everyone behind it (head-of-line blocking)")
    seats = len(run)
    reserved = ref.reserved
    for i, (rid, n) in enumerate(exp_adm):
        p, m = wait[rid]
        if i >= len(got_adm):
            freed = ""
            if ref.released:
                freed = " (" + ", ".join(f"r{r} finished in the previous step and released its {k} KV "
                                         f"tokens" for r, k in ref.released) + " at once)"
            return (f"r{rid}, the head of the waiting queue, must be admitted: only {seats} of "
                    f"max_seqs={sc.max_seqs} seats are taken, its reservation fits ({reserved} reserved + "
                    f"{p} + {m} = {reserved + p + m} <= kv_tokens={sc.kv_tokens}) and budget for "
                    f"{_tokens(left)} is left{freed}")
        if got_adm[i][1] != n:
            return (f"an admitted request gets min(prompt_len, budget left) = min({p}, {left}) = {n} "
                    f"tokens, but r{rid} got {got_adm[i][1]}")
        seats, reserved, left = seats + 1, reserved + p + m, left - n
    if len(got_adm) > len(exp_adm):
        rid = got_adm[len(exp_adm)][0]
        p, m = wait[rid]
        if seats >= sc.max_seqs:
            return (f"r{rid} must wait: {seats} of max_seqs={sc.max_seqs} seats are taken "
                    f"(a seat frees only when a request finishes)")
        if reserved + p + m > sc.kv_tokens:
            return (f"r{rid} must wait: it reserves prompt_len + max_new = {p + m} KV tokens, {reserved} "
                    f"are already reserved, and {reserved + p + m} > kv_tokens={sc.kv_tokens}")
        return f"r{rid} must wait: no budget is left"
    return "the plans differ"


def explain_emitted(ref: RefStep, got: list[int]) -> str:
    exp = ref.emitted or []
    if len(set(got)) != len(got):
        return "an id appears twice; each request emits at most one token per step"
    running = {rid: (p, pf) for rid, p, pf, _ in ref.running}
    chunk = dict(ref.plan)
    for rid in got:
        if rid not in exp:
            if rid not in chunk:
                return f"r{rid} was not in this step's plan, so it emits nothing"
            if rid in running:
                p, pf = running[rid]
                return (f"r{rid}'s chunk of {chunk[rid]} leaves its prompt unfinished ({pf + chunk[rid]} of "
                        f"{p} prefilled), so it emits nothing yet; complete() returns only the requests "
                        f"that emitted a token")
            waiting = {rid: p for rid, p, _ in ref.waiting}
            return (f"r{rid} was admitted with {chunk[rid]} of its {waiting.get(rid, '?')} prompt tokens, "
                    f"so it emits nothing yet; complete() returns only the requests that emitted a token")
    for rid in exp:
        if rid not in got:
            if rid in running and running[rid][0] == running[rid][1]:
                return f"r{rid} was decoding, and every decode emits one output token"
            return (f"r{rid}'s chunk finished its prompt, so it emits its first output token in this same "
                    f"step")
    return "the ids differ"


# ----------------------------------------------------------------------------------------- the driver

class Divergence(Exception):
    """The submission did something else than the reference, at `step`."""

    def __init__(self, step: int, message: str, expected: list[Plan], got: list[Plan]) -> None:
        super().__init__(message)
        self.step, self.message, self.expected, self.got = step, message, expected, got


def _is_int(value: Any) -> bool:
    """An int by what it is (an int subclass included); a bool is not a token count or an id."""
    return isinstance(value, int) and not isinstance(value, bool)


def _plain_plan(raw: Any, ids: dict[int, int], step: int, expected: list[Plan], got: list[Plan]) -> Plan:
    """Convert a plan from the submission to [(rid, n)], failing clearly if it is malformed."""

    def bad(what: str) -> Divergence:
        return Divergence(step, f"step {step}: schedule() must return a list of (request, n_tokens) pairs, "
                                f"but {what}", expected, got)

    if not isinstance(raw, (list, tuple)):
        raise bad(f"it returned {kind_said(raw)}")
    try:  # the usual plan, a list of (request, int) tuples, in one pass; anything else is looked at below
        plan = [(ids[id(req)], n) for req, n in raw]
        if all(type(entry) is tuple for entry in raw) and all(type(n) is int for _, n in plan):
            return plan
    except (KeyError, TypeError, ValueError):
        pass
    plan = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise bad(f"entry {i} is not a pair")
        req, n = entry
        if id(req) not in ids:
            raise bad(f"entry {i} does not hold one of the Req objects passed to add() (return the "
                      f"request objects themselves, not copies)")
        if not _is_int(n):
            raise bad(f"the token count of entry {i} is a {type(n).__name__}, not an int")
        plan.append((ids[id(req)], n))
    return plan


def plain_plan(raw: Any, ids: dict[int, int], step: int) -> Plan:
    """A plan of the submission as [(rid, n)]; a malformed one fails the test with a plain sentence."""
    try:
        return _plain_plan(raw, ids, step, [], [])
    except Divergence as d:
        message = d.message
    pytest.fail(message, pytrace=False)


def _plain_ids(raw: Any, step: int, expected: list[Plan], got: list[Plan]) -> list[int]:
    if type(raw) is list and set(map(type, raw)) <= {int}:  # the usual answer, in one pass over its types
        return sorted(raw)
    if isinstance(raw, (list, tuple, set, frozenset, collections.deque)) and all(_is_int(x) for x in raw):
        return sorted(raw)
    raise Divergence(step, f"step {step}: complete() must return a list of request ids (ints), but it "
                           f"returned {kind_said(raw)}", expected, got)


# What each call does to the documented attributes, said when one of them is wrong after it.
STATE_RULES = {
    "add()": "add() appends the request to waiting; running and reserved do not change",
    "schedule()": ("an admitted request leaves the head of waiting, goes to the end of running and takes "
                   "its reservation (prompt_len + max_new) at once"),
    "complete()": ("a request that has emitted max_new tokens leaves running and its reservation "
                   "(prompt_len + max_new) is released at once; waiting does not change"),
    "a refused add()": ("a refused request changes nothing: waiting, running and reserved stay as they were, "
                        "and so does every request, the one already holding that id too"),
}


STATE_NAMES = ("waiting", "running", "reserved")
# What the statement says of each, for a submission that has no such attribute at all.
STATE_STATEMENT = {
    "waiting": "a deque of requests that have not started yet, first come first served",
    "running": "a list of the requests that have been admitted, oldest first",
    "reserved": "the KV tokens reserved by the running requests",
}


def _plain_state(found: dict[str, Any], ids: dict[int, int]) -> State | str:
    """The submission's waiting, running and reserved (as one read of the scenario observed them) as
    plain data, or a sentence saying what is wrong."""
    missing = [name for name in STATE_NAMES if name not in found]  # `read` leaves a missing attribute out
    if missing:
        return (f"the scheduler has no attribute {missing[0]} (the statement: `{missing[0]}`, "
                f"{STATE_STATEMENT[missing[0]]})")
    lists = []
    for name in ("waiting", "running"):
        raw = found.get(name)
        if not isinstance(raw, (list, tuple, collections.deque)):
            return f"{name} must be a sequence of requests (a deque or a list), but it is {kind_said(raw)}"
        try:
            lists.append(list(map(ids.__getitem__, map(id, raw))))
        except KeyError:
            return f"{name} holds something else than the Req objects passed to add()"
    reserved = found.get("reserved")
    if not isinstance(reserved, int) or isinstance(reserved, bool):
        return f"reserved must be an int, but it is {kind_said(reserved)}"
    return lists[0], lists[1], reserved


def _counts(found: dict[str, list[Any]]) -> list[tuple[Any, Any]]:
    """(prefilled, generated) of each request, as one read of the scenario observed them."""
    return list(zip(found["prefilled"], found["generated"]))


def _state_problem(got: State | str, want: State, call: str) -> str | None:
    if isinstance(got, str):
        return f"after {call}, {got}"
    for i, name in enumerate(("waiting", "running")):
        if got[i] != want[i]:
            return (f"after {call}, {name} is {fmt_ids(got[i])} but should be {fmt_ids(want[i])} "
                    f"({STATE_RULES[call]})")
    if got[2] != want[2]:
        return (f"after {call}, reserved is {got[2]} but should be {want[2]}: the sum of prompt_len + max_new "
                f"over the running requests ({STATE_RULES[call]})")
    return None


@dataclass
class StepOps:
    """The operations of one step of a scenario's run on the submission (the results' places in it)."""

    made: list[tuple[int, Any, Any]]  # (rid, Req(...), add()) of each arrival
    before: Any  # the state read after the arrivals' add() calls, if any
    plan: Any
    rids: list[int]  # the requests whose counts are read, in that order
    counts_scheduled: Any
    scheduled: Any
    emitted: Any = None  # complete(), and what follows it, for every step but the last
    counts_completed: Any = None
    completed: Any = None


@dataclass
class ReplayOps:
    """A scenario's whole replay on the submission: its scheduler, its steps, and a last read of every
    request's counts (those that left are read at the end only)."""

    run: Any
    sched: Any
    steps: list[StepOps]
    rids: list[int]  # every request added, in order
    counts_at_end: Any


def _scenario_ops(ns: Any, sc: Scenario, ref: list[RefStep]) -> ReplayOps:
    """The whole replay as one scenario of operations (one message to the worker): the calls the old
    step-by-step driver made, and a read of the documented state and counts where it checked them.
    Each step reads the counts of the requests live in it (its cost is what is live, not what the run
    has seen); what a step could change of a request that left is read once, after the last step."""
    run = ns.scenario()
    sched = run.new("Scheduler", sc.budget, sc.max_seqs, sc.kv_tokens)
    made_of: dict[int, Any] = {}  # rid -> its Req(...) step
    everyone: Any = None  # every request added so far, gathered in the worker: sent once, read at the end
    steps: list[StepOps] = []
    for rs in ref:
        made = []
        for spec in sc.arrivals(rs.step):
            r = run.new("Req", spec.rid, spec.prompt_len, spec.max_new)
            made.append((spec.rid, r, run.call(sched, "add", r)))
            made_of[spec.rid] = r
        if made:
            everyone = run.group(*([everyone] if everyone is not None else []), *(r for _, r, _ in made))
        before = run.read(sched, *STATE_NAMES) if made else None
        plan = run.call(sched, "schedule")
        # The live requests, by their steps; while they are most of those added, all of them, as the
        # group already in the worker (nothing sent): either way a step costs about what is live.
        read: list[int] = rs.live
        if everyone is not None and 2 * len(read) >= len(made_of):
            read, targets = list(made_of), everyone
        else:
            targets = [made_of[rid] for rid in read]
        ops = StepOps(made, before, plan, read, run.read_columns(targets, "prefilled", "generated"),
                      run.read(sched, *STATE_NAMES))
        if rs.emitted is not None:
            ops.emitted = run.call(sched, "complete", plan)
            ops.counts_completed = run.read_columns(targets, "prefilled", "generated")
            ops.completed = run.read(sched, *STATE_NAMES)
        steps.append(ops)
    at_end = run.read_columns(everyone, "prefilled", "generated") if everyone is not None else None
    return ReplayOps(run, sched, steps, list(made_of), at_end)


def run_submission(ns: Any, sc: Scenario, ref: list[RefStep],
                   expected: list[Plan] | None = None, got: list[Plan] | None = None,
                   work: list[int] | None = None) -> None:
    """Replay the scenario on the submission; raise Divergence at the first difference.

    The replay runs in the worker as one scenario (one message); what it observed is judged here step by
    step, in the order it happened, so an exception of the submission surfaces at the step it happened.
    Checked at every step: the documented state (waiting, running, reserved) after this step's add()
    calls, the plan, that schedule() changed no prefilled/generated, the state after schedule(), the
    ids complete() returns, the live requests' counts and the state after complete(); every request's
    counts once more after the last step.
    `expected` and `got` (filled step by step) tell the caller how far it went if the submission raises;
    `work[0]` counts the steps judged times the requests of the scenario (the shrinker's work bound).
    """
    replay = _scenario_ops(ns, sc, ref)
    seen = replay.run.run()
    seen[replay.sched]
    ids: dict[int, int] = {}  # id(request proxy) -> rid
    counts: dict[int, tuple[int, int]] = {}  # rid -> (prefilled, generated) after the last complete()
    expected = [] if expected is None else expected
    got = [] if got is None else got

    def diverge(step: int, message: str) -> Divergence:
        return Divergence(step, f"step {step}: {message}", expected, got)

    for rs, ops in zip(ref, replay.steps):
        step = rs.step
        if work is not None:
            work[0] += len(sc.reqs)
        for rid, made, added in ops.made:
            r = seen[made]
            seen[added]
            ids[id(r)] = rid
            counts[rid] = (0, 0)
        if ops.made and (problem := _state_problem(_plain_state(seen[ops.before], ids), rs.before, "add()")):
            raise diverge(step, problem)
        expected.append(rs.plan)
        raw = seen[ops.plan]
        plan = _plain_plan(raw, ids, step, expected, got)
        got.append(plan)
        if plan != rs.plan:
            if rs.emitted is None:
                msg = (f"step {step}: every request has finished, so schedule() should return an empty plan, "
                       f"but it returned {fmt_plan(plan)}")
                if any(rid in rs.finished for rid, _ in plan):
                    msg += ": a request leaves as soon as it has generated max_new tokens"
            else:
                msg = (f"step {step}: expected plan {fmt_plan(rs.plan)} but your schedule() returned "
                       f"{fmt_plan(plan)}: {explain_plan(rs, sc, plan)}")
            raise Divergence(step, msg, expected, got)
        for rid, have in zip(ops.rids, _counts(seen[ops.counts_scheduled])):
            if have != counts[rid]:
                raise diverge(step, f"schedule() changed r{rid} from prefilled={counts[rid][0]}, generated="
                                    f"{counts[rid][1]} to prefilled={have[0]}, generated={have[1]}: schedule() "
                                    f"only plans the step, complete() applies it once the step has run")
        assert rs.scheduled is not None
        if problem := _state_problem(_plain_state(seen[ops.scheduled], ids), rs.scheduled, "schedule()"):
            raise diverge(step, problem)
        if rs.emitted is None:
            break
        emitted = _plain_ids(seen[ops.emitted], step, expected, got)
        if emitted != rs.emitted:
            raise Divergence(step, f"step {step}: the plan {fmt_plan(plan)} is right, but complete() "
                                   f"returned {fmt_ids(emitted)} instead of {fmt_ids(rs.emitted)} (in any "
                                   f"order): {explain_emitted(rs, emitted)}", expected, got)
        for rid, have in zip(ops.rids, _counts(seen[ops.counts_completed])):
            if rid not in rs.after:  # it left in an earlier step
                if have != counts[rid]:
                    raise diverge(step, _changed_after_leaving(rid, have, counts[rid], rs.left_at))
                continue
            want = rs.after[rid]
            if have != want:
                r = sc_req(sc, rid)
                raise diverge(step, count_problem(rid, have, want, counts[rid], dict(plan).get(rid),
                                                  r.prompt_len, r.max_new))
        counts.update(rs.after)
        assert rs.completed is not None
        if problem := _state_problem(_plain_state(seen[ops.completed], ids), rs.completed, "complete()"):
            raise diverge(step, problem)
    if replay.counts_at_end is None:
        return
    # A request that left may be read no more step by step: what any later call changed of it shows here.
    for rid, have in zip(replay.rids, _counts(seen[replay.counts_at_end])):
        if have != counts[rid]:
            raise diverge(ref[len(replay.steps) - 1].step,
                          "after the last step, " + _changed_after_leaving(rid, have, counts[rid], ref[0].left_at))


def count_problem(rid: int, have: tuple[Any, Any], want: tuple[int, int], before: tuple[int, int],
                  n: int | None, prompt_len: int, max_new: int) -> str:
    """What complete() did wrong to one request's counts, from the entry the plan gave it (`n` tokens,
    None if the plan did not hold it) and its counts before the step. The sentence depends on the
    mistake only, never on the numbers of a scenario, so one mistake reads the same in every test."""
    head = (f"after complete(), r{rid} has prefilled={have[0]}, generated={have[1]}, but expected "
            f"prefilled={want[0]}, generated={want[1]}")
    finishing = n is not None and before[0] < prompt_len and before[0] + n >= prompt_len
    decode = n is not None and before[0] >= prompt_len
    if n is None:
        why = "r{} was not in the plan: complete() changes only the requests of the plan it is given"
        return f"{head}: {why.format(rid)}"
    if have[0] != want[0]:
        if decode:
            return f"{head}: a decode entry emits a token and leaves prefilled as it is"
        return f"{head}: complete() adds each prefill chunk's n_tokens to prefilled"
    if not _is_int(have[1]):
        return f"{head}: generated counts the output tokens emitted"
    if have[1] > want[1]:
        if finishing and have[1] - before[1] > 1:
            return (f"{head}: the chunk that finishes a prompt emits exactly one token, the first output "
                    f"token; complete() counted it twice (as the chunk that finished the prompt, then again "
                    f"as a decode)")
        if not finishing and not decode:
            return f"{head}: a chunk that leaves part of the prompt unprocessed emits nothing yet"
        if have[1] > max_new:
            return f"{head}: a request stops after max_new output tokens"
        return f"{head}: a decode emits exactly one token"
    if finishing:
        return (f"{head}: the chunk that finishes a prompt emits the first output token in this same step "
                f"(generated += 1)")
    return f"{head}: a decode emits one output token (generated += 1)"


def _changed_after_leaving(rid: int, have: tuple[Any, Any], want: tuple[int, int], left_at: dict[int, int]) -> str:
    left_in = left_at.get(rid)
    when = f"it left in step {left_in} with" if left_in is not None else "after its last complete() it had"
    return (f"r{rid} has prefilled={have[0]}, generated={have[1]}, but {when} prefilled={want[0]}, "
            f"generated={want[1]}: a request that has left is changed no more")


def sc_req(sc: Scenario, rid: int) -> R:
    return next(r for r in sc.reqs if r.rid == rid)


def _trace(feedback: Any, title: str, expected: list[Plan], got: list[Plan]) -> None:
    feedback.trace(title, [[(f"r{rid}", n) for rid, n in step] for step in expected],
                   [[(f"r{rid}", n) for rid, n in step] for step in got])


def _report(feedback: Any, sc: Scenario, d: Divergence, about: str, note: str = "") -> None:
    _trace(feedback, f"plans step by step, up to step {d.step}", d.expected, d.got)
    feedback.text("scenario", sc.describe())
    message = f"{d.message}.\n{note}Scenario:\n{sc.describe()}"
    if about:
        message += f"\nThis test checks: {about}."
    pytest.fail(message, pytrace=False)


def check(ns: Any, reference: Any, feedback: Any, sc: Scenario, about: str = "",
          expect: list[Plan] | None = None) -> list[RefStep]:
    """Run a hand-written scenario on both sides and fail at the first divergence.

    `expect`, when given, is the plans the test author worked out by hand (without the final empty
    plan); it guards the suite itself against a change of the reference.
    """
    ref = run_reference(reference, sc)
    if expect is not None:
        plans = [rs.plan for rs in ref[:-1]]
        assert plans == expect, f"suite bug: the reference took {plans}, the test expects {expect}"
    _run_and_report(ns, reference, feedback, sc, ref, about, shrink=0)
    return ref


def _run_and_report(ns: Any, reference: Any, feedback: Any, sc: Scenario, ref: list[RefStep],
                    about: str, shrink: int) -> None:
    expected: list[Plan] = []
    got: list[Plan] = []
    try:
        run_submission(ns, sc, ref, expected, got)
        return
    except Divergence as e:
        d = e
    except Exception:
        # The submission raised: let the harness report the exception, with the context attached.
        step = len(expected)
        feedback.text("scenario", f"{sc.describe()}\nYour code raised an exception during step {step}.")
        _trace(feedback, f"plans step by step, up to step {step}", expected, got)
        raise
    # Fail outside the except block, so that the report is not chained to the Divergence.
    note = ""
    if shrink:
        small, d = _shrink(ns, reference, sc, d, max_work=shrink)
        if small != sc:
            note = (f"(a generated workload of {len(sc.reqs)} requests failed; this is the smallest "
                    f"part of it that still fails)\n")
        sc = small
    _report(feedback, sc, d, about, note)


# ----------------------------------------------------------------------------------------- random workloads

PROFILES: dict[str, dict[str, Any]] = {
    # ranges of budget, max_seqs, kv_tokens, number of requests, prompt_len, max_new; arrivals spread over
    # the first `window` steps; `exact_fits`: some requests fill the KV cache exactly
    "mixed": dict(budget=(48, 96), seats=(4, 10), kv=(400, 800), n=(24, 32), prompt=(1, 100),
                  new=(1, 12), window=16, exact_fits=False),
    "tight_kv": dict(budget=(32, 64), seats=(6, 12), kv=(90, 140), n=(16, 22), prompt=(5, 60),
                     new=(1, 10), window=12, exact_fits=True),
    "tight_seats": dict(budget=(64, 160), seats=(2, 3), kv=(10**6, 10**6), n=(20, 26), prompt=(1, 80),
                        new=(1, 6), window=10, exact_fits=False),
    "tiny_budget": dict(budget=(1, 5), seats=(2, 5), kv=(24, 40), n=(12, 16), prompt=(1, 10),
                        new=(1, 4), window=20, exact_fits=True),
    # hundreds of requests decoding at once under a large budget (more than 64, more than 128, ...);
    # short prompts so that everyone is decoding after a few steps, and about 40 steps in all; a cache
    # and a sequence cap that bind now and then, so that a blocked head and the cap are met here too
    "crowd": dict(budget=(1024, 4096), seats=(150, 300), kv=(5000, 8000), n=(250, 350), prompt=(1, 24),
                  new=(8, 24), window=4, exact_fits=False),
}


def random_scenario(seed: int | str, profile: str) -> Scenario:
    """A generated workload. `seed` is the run's seed (the `seed` fixture: derived from the submission
    and a key the student never sees), optionally with a suffix to draw several workloads from it."""
    cfg = PROFILES[profile]
    rng = random.Random(f"{profile}:{seed}")
    kv = rng.randint(*cfg["kv"])
    reqs = []
    for rid in range(rng.randint(*cfg["n"])):
        new = rng.randint(*cfg["new"])
        prompt = rng.randint(cfg["prompt"][0], min(cfg["prompt"][1], kv - new))
        if cfg["exact_fits"] and rng.random() < 0.1:
            prompt = kv - new  # a request that fills the KV cache exactly, now and then
        reqs.append(R(rid, prompt, new, at=1 + rng.randrange(cfg["window"])))
    reqs.sort(key=lambda r: r.at)
    # Ids are the student's to compare, never to order by: half the workloads number the requests in
    # arrival order (easier to read), the others draw any ids, 0 and large ones among them, in any order.
    ids = list(range(len(reqs))) if rng.random() < 0.5 else rng.sample(range(10 * len(reqs) + 1000), len(reqs))
    reqs = [replace(r, rid=rid) for rid, r in zip(ids, reqs)]
    return Scenario(rng.randint(*cfg["budget"]), rng.randint(*cfg["seats"]), kv, tuple(reqs))


def _shrink(ns: Any, reference: Any, sc: Scenario, d: Divergence,
            max_runs: int = 40, max_work: int = 20_000) -> tuple[Scenario, Divergence]:
    """Make a failing scenario smaller while it still fails; at most `max_runs` replays of the submission,
    and at most `max_work` request-steps replayed in all (so that a large workload cannot make shrinking
    slow; counting work, not seconds, keeps a regrade identical).

    A candidate counts as failing when it diverges no later than the step the smallest failure so far
    did, so each replay stops there: nothing after it is run, sent or judged, and the failure reported
    only ever moves earlier.

    After every success, first drop the requests added after the failing step (they can hardly have
    caused it). Then drop runs of requests (halves, quarters, ..., single ones, latest first), then
    make the numbers smaller (max_seqs, token_budget, kv_tokens, then each request's prompt_len,
    max_new and arrival step): each to its least value first (1, or a cache that just holds the
    largest request), else to half of it.
    Returns the smallest failing scenario found and its divergence.
    """
    runs = 0
    work = [0]
    least_passed: set[Any] = set()  # the numbers whose least value made a candidate pass

    def attempt(cand: Scenario) -> bool:
        nonlocal runs, sc, d
        runs += 1
        try:
            run_submission(ns, cand, run_reference(reference, cand, until=d.step), work=work)
        except Divergence as e:
            sc, d = cand, e
            trimmed = replace(cand, reqs=tuple(r for r in cand.reqs if r.at <= e.step))
            if trimmed != cand and runs < max_runs:
                attempt(trimmed)
            return True
        except Exception:
            # The submission raised on the smaller scenario: keep the divergence we have, and stop
            # calling a submission that may be stuck or gone.
            runs = max_runs
        finally:
            if work[0] >= max_work:
                runs = max_runs
        return False

    def drop(chunk: int) -> bool:
        changed = False
        end = len(sc.reqs)
        while end > 0 and runs < max_runs:
            start = max(0, end - chunk)
            changed |= attempt(replace(sc, reqs=sc.reqs[:start] + sc.reqs[end:]))
            end = min(start, len(sc.reqs))
        return changed

    def lower() -> bool:
        changed = False
        first = min((r.at for r in sc.reqs), default=1)
        if first > 1 and runs < max_runs:  # start at step 1
            changed |= attempt(replace(sc, reqs=tuple(replace(r, at=r.at - first + 1) for r in sc.reqs)))
        for name in ("max_seqs", "budget", "kv_tokens"):
            # The least a setting can be first (one, or a cache that just holds the largest request),
            # then half of it: a failure that needs neither large settings nor large requests is
            # shown with the smallest numbers in one replay rather than after halving them one by one.
            least = max((r.prompt_len + r.max_new for r in sc.reqs), default=1) if name == "kv_tokens" else 1
            changed |= smaller(name, getattr(sc, name), least, lambda value: replace(sc, **{name: value}))  # noqa: B023 (called at once)
        for rid in [r.rid for r in sc.reqs]:
            for name in ("prompt_len", "max_new", "at"):
                r = next((q for q in sc.reqs if q.rid == rid), None)
                if r is not None:
                    changed |= smaller((rid, name), getattr(r, name), 1, lambda value: with_request(rid, name, value))  # noqa: B023
        return changed

    def smaller(number: Any, value: int, least: int, make: Callable[[int], Scenario]) -> bool:
        """Try the least value of a number (once: a number whose least passed is only halved from
        then on), else half of it, if that is still at least `least`."""
        candidates = (value // 2,) if number in least_passed else (least, value // 2)
        for candidate in dict.fromkeys(candidates):
            if runs < max_runs and least <= candidate < value:
                if attempt(make(candidate)):
                    return True
                if candidate == least:
                    least_passed.add(number)
        return False

    def with_request(rid: int, name: str, value: int) -> Scenario:
        reqs = [replace(q, **{name: value}) if q.rid == rid else q for q in sc.reqs]
        return replace(sc, reqs=tuple(sorted(reqs, key=lambda q: (q.at, q.rid))))

    trimmed = replace(sc, reqs=tuple(r for r in sc.reqs if r.at <= d.step))
    if trimmed != sc:
        attempt(trimmed)
    chunk = len(sc.reqs) // 2
    while chunk > 1 and runs < max_runs:
        drop(chunk)
        chunk //= 2
    while runs < max_runs and (drop(1) | lower()):
        pass
    return sc, d


def check_random(ns: Any, reference: Any, feedback: Any, sc: Scenario, about: str = "",
                 shrink_work: int = 20_000) -> None:
    """Run a generated workload on both sides; on a divergence, shrink it (at most `shrink_work`
    request-steps replayed) and report the smallest part that still fails."""
    _run_and_report(ns, reference, feedback, sc, run_reference(reference, sc), about, shrink=shrink_work)


# ----------------------------------------------------------------------------------------- by hand

def expect_progress(sc: Scenario, generated: dict[int, int], cap: int,
                    last_planned: dict[int, int] | None = None, steps: int = 0) -> None:
    """Every request of the scenario emitted exactly its max_new tokens within `cap` steps: too many
    (it stayed running, or complete() reported it more often than it emitted) and too few are said
    apart. With `last_planned` (rid -> the last step whose plan held it) and `steps` (the steps run),
    a request that owes tokens and was dropped from the plans long before the end is said first: it
    left running early, which is complete()'s doing, not schedule()'s."""
    over = [r for r in sc.reqs if generated.get(r.rid, 0) > r.max_new]
    under = [r for r in sc.reqs if generated.get(r.rid, 0) < r.max_new]

    def listed(reqs: list[R], when: bool = False) -> str:
        shown = [f"r{r.rid} ({generated.get(r.rid, 0)} of {r.max_new}"
                 + (f", last planned in step {last_planned[r.rid]})" if when and last_planned else ")")
                 for r in reqs[:8]]
        return ", ".join(shown) + (f" and {len(reqs) - 8} more" if len(reqs) > 8 else "")

    expect_that(not over, f"{len(over)} of {len(sc.reqs)} requests emitted more than their max_new tokens "
                          f"(complete() reported them after their last token, or they stayed running): "
                          f"{listed(over)}")
    if last_planned is not None:
        # A request that emitted a token is running; one that owes tokens yet is planned no more while
        # the run goes on was taken out of running early (complete()), or left out of the plans (schedule()).
        dropped = [r for r in under if generated.get(r.rid, 0) > 0 and last_planned.get(r.rid, steps) < steps - 1]
        expect_that(not dropped, f"{len(dropped)} of {len(sc.reqs)} requests were planned no more after emitting "
                                 f"some of their max_new tokens (counted from the ids complete() returned): "
                                 f"{listed(dropped, True)}; a request stays running until complete() has counted "
                                 f"its max_new-th token, and a running request is planned while budget remains: "
                                 f"complete() let it leave running early, or schedule() left it out")
    expect_that(not under, f"{len(under)} of {len(sc.reqs)} requests never emitted all their max_new tokens "
                           f"(the run stops when schedule() plans nothing once every request has arrived, or "
                           f"after {cap} steps): {listed(under)}")


def expect_steps(got: list[Any], want: list[Any], context: str, what: str = "plan", fmt: Any = None) -> None:
    """Compare what the submission did step by step with what it should have done, and fail at the
    first difference, saying nothing of the steps after it."""
    fmt = fmt or fmt_plan
    for i in range(max(len(got), len(want))):
        have = got[i] if i < len(got) else None
        should = want[i] if i < len(want) else None
        if have != should:
            shown = lambda v: "no step" if v is None else fmt(v)  # noqa: E731
            agree = f" (steps 1-{i} agree)" if i > 1 else (" (step 1 agrees)" if i == 1 else "")
            expect_that(False, f"{context}: at step {i + 1} the {what} should be {shown(should)}, but it was "
                               f"{shown(have)}{agree}")


def expect_that(ok: bool, message: str) -> None:
    """Fail with a plain sentence (no traceback of the suite's own code)."""
    if not ok:
        pytest.fail(message, pytrace=False)


def drive_alone(ns: Any, sc: Scenario, max_steps: int, chunk: int) -> Iterator[tuple[int, Plan, list[int]]]:
    """Run a scenario on the submission alone; yield (step, plan, emitted) after each complete(), until
    schedule() plans nothing once every request has arrived, or after `max_steps` steps.

    The steps run in the worker as scenarios of `chunk` steps (one message each) and are judged here
    in order; a submission that finishes within the first `chunk` steps (the reference's count) needs
    one. Past the step where the run stops, the rest of a chunk may still call schedule() and
    complete([]) on the idle scheduler (both valid calls); what they return or raise is never looked at.
    """
    scheduler: Any = None  # the submission's, once made
    ids: dict[int, int] = {}  # id(request proxy) -> rid
    chunk = max(1, chunk)
    step = 0
    while step < max_steps:
        run = ns.scenario()
        made_scheduler = run.new("Scheduler", sc.budget, sc.max_seqs, sc.kv_tokens) if scheduler is None else None
        target = made_scheduler if scheduler is None else scheduler
        steps = []
        for s in range(step + 1, min(step + chunk, max_steps) + 1):
            made = [(r.rid, run.new("Req", r.rid, r.prompt_len, r.max_new)) for r in sc.arrivals(s)]
            added = [run.call(target, "add", req) for _, req in made]
            plan = run.call(target, "schedule")
            steps.append((s, made, added, plan, run.call(target, "complete", plan)))
        seen = run.run()
        if scheduler is None:
            scheduler = seen[made_scheduler]
        for step, made, added, plan_op, emitted_op in steps:
            for rid, req in made:
                ids[id(seen[req])] = rid
            for add in added:
                seen[add]
            try:
                plan = _plain_plan(seen[plan_op], ids, step, [], [])
                if not plan and step > sc.last_arrival:
                    return
                emitted = _plain_ids(seen[emitted_op], step, [], [])
            except Divergence as d:
                message = d.message
            else:
                yield step, plan, emitted
                continue
            pytest.fail(message, pytrace=False)


class Session:
    """The submission's scheduler driven by hand; every result is converted to plain data first.

    With `reference`, every call also runs on the reference, and each schedule() and complete() is
    judged at once, as the random workloads judge them: the plan and the state after schedule(); the
    ids, every request's counts and the state after complete(). A test then fails at the first call
    that went wrong, naming that call, with the same sentence as every other test that meets the same
    mistake, and with a replay: the calls that build the state from a fresh scheduler."""

    def __init__(self, ns: Any, budget: int, max_seqs: int, kv_tokens: int, reference: Any = None) -> None:
        self.ns = ns
        self.sched = ns["Scheduler"](budget, max_seqs, kv_tokens)
        self.limits = (budget, max_seqs, kv_tokens)
        self.reqs: dict[int, Any] = {}
        self.ids: dict[int, int] = {}
        self.plans: list[Plan] = []
        self.replay = ["from scheduler import Req, Scheduler", f"s = Scheduler({budget}, {max_seqs}, {kv_tokens})"]
        self.ref = reference["Scheduler"](budget, max_seqs, kv_tokens) if reference is not None else None
        self.reference = reference
        self.ref_reqs: dict[int, Any] = {}  # rid -> the reference's request (the latest of that id)
        self.specs: dict[int, R] = {}
        self.ref_plan: Any = None
        self.left_at: dict[int, int] = {}
        self.released: list[tuple[int, int]] = []
        self.reused: set[int] = set()  # ids added again after their first request finished

    def new(self, rid: int, prompt_len: int, max_new: int) -> Any:
        """A request of the submission, not added yet (`add`, or `refused` then `ref_add`, adds it)."""
        r = self.ns["Req"](rid, prompt_len, max_new)
        self.ids[id(r)] = rid
        return r

    def add(self, rid: int, prompt_len: int, max_new: int) -> Any:
        r = self.new(rid, prompt_len, max_new)
        self.sched.add(r)
        self.replay.append(f"s.add(Req({rid}, {prompt_len}, {max_new}))")
        self.ref_add(r)
        return r

    def ref_add(self, r: Any) -> None:
        """`r`, which the submission's add() accepted, is added: the reference adds its own copy of it."""
        rid, prompt_len, max_new = self.ids[id(r)], r.prompt_len, r.max_new
        self.reqs[rid] = r
        if self.ref is not None:
            self.ref_reqs[rid] = self.reference["Req"](rid, prompt_len, max_new)
            self.ref.add(self.ref_reqs[rid])
            self.specs[rid] = R(rid, prompt_len, max_new)
            if self.left_at.pop(rid, None) is not None:
                self.reused.add(rid)

    def refused(self, r: Any) -> bool:
        """Whether the submission's add() refuses `r` (made with `new`) with ValueError; the replay
        records the call either way."""
        self.replay.append(f"s.add(Req({r.rid}, {r.prompt_len}, {r.max_new}))   # refused with ValueError")
        try:
            self.sched.add(r)
        except ValueError:
            self._judge_refusal()
            return True
        self.replay[-1] = self.replay[-1].split("   #")[0] + "   # accepted"
        return False

    def _judge_refusal(self) -> None:
        """After a refused add(), with the reference: the state and every live request's counts are as
        they were (a refused request changes nothing)."""
        if self.ref is None:
            return
        step = len(self.plans)
        where = f"after step {step}" if step else "before the first step"
        if problem := _state_problem(self._state(), self._ref_state(), "a refused add()"):
            self.fail(f"{where}: {problem}")
        want = self._ref_counts()
        for rid, have in self._counts().items():
            if have != want[rid]:
                self.fail(f"{where}: a refused add() changed r{rid} from prefilled={want[rid][0]}, "
                          f"generated={want[rid][1]} to prefilled={have[0]}, generated={have[1]}: "
                          f"{STATE_RULES['a refused add()']}")

    def fail(self, message: str) -> None:
        """Fail with `message` (its first line says what broke) and the replay of the calls so far."""
        named = [rid for rid in sorted(self.reused) if re.search(rf"\br{rid}\b", message)]
        if named:
            message += (f" (r{named[0]} is a new request that took the id of one that had finished: nothing "
                        f"kept for the old r{named[0]} counts for it)")
        pytest.fail(f"{message}.\nReplay, from a fresh scheduler:\n  " + "\n  ".join(self.replay), pytrace=False)

    def _state(self) -> State | str:
        found = {}
        for name in STATE_NAMES:
            try:
                found[name] = getattr(self.sched, name)
            except AttributeError:
                pass
        return _plain_state(found, self.ids)

    def _ref_state(self) -> State:
        assert self.ref is not None
        return state_of(self.ref)

    def _counts(self) -> dict[int, tuple[Any, Any]]:
        """The counts of the requests a call can change: those waiting or running on the reference, and
        those that have just left (each read is a round trip: a long session reads what is live, not
        everything it has seen)."""
        if self.ref is None:
            return {rid: (r.prefilled, r.generated) for rid, r in self.reqs.items() if rid in self.ref_reqs}
        live = {r.rid for r in (*self.ref.waiting, *self.ref.running)} | {rid for rid, _ in self.released}
        rids = [rid for rid in self.reqs if rid in self.ref_reqs and rid in live]
        if not rids:
            return {}
        run = self.ns.scenario()  # every count in one read, one message
        columns = run.read_columns([self.reqs[rid] for rid in rids], "prefilled", "generated")
        found = run.run()[columns]
        return dict(zip(rids, zip(found["prefilled"], found["generated"])))

    def _ref_counts(self) -> dict[int, tuple[int, int]]:
        return {rid: (r.prefilled, r.generated) for rid, r in self.ref_reqs.items()}

    def schedule(self) -> tuple[Any, Plan]:
        step = len(self.plans) + 1
        ref_before = None
        if self.ref is not None:
            ref_before = RefStep(
                step=step, running=[(r.rid, r.prompt_len, r.prefilled, r.max_new) for r in self.ref.running],
                waiting=[(r.rid, r.prompt_len, r.max_new) for r in self.ref.waiting], reserved=self.ref.reserved,
                released=self.released, left_at=self.left_at, plan=[], emitted=None)
            counts = self._ref_counts()
        raw = self.sched.schedule()
        self.replay.append("plan = s.schedule()")
        try:
            plan = _plain_plan(raw, self.ids, step, [], [])
        except Divergence as d:
            message = d.message
        else:
            self.plans.append(plan)
            self.replay[-1] += f"   # {fmt_plan(plan)}"
            if self.ref is not None and ref_before is not None:
                self.ref_plan = self.ref.schedule()
                want = [(r.rid, n) for r, n in self.ref_plan]
                ref_before.plan = want
                if plan != want:
                    sc = Scenario(*self.limits, tuple(self.specs.values()))
                    self.fail(f"step {step}: expected plan {fmt_plan(want)} but your schedule() returned "
                              f"{fmt_plan(plan)}: {explain_plan(ref_before, sc, plan)}")
                for rid, have in self._counts().items():
                    if have != counts[rid]:
                        self.fail(f"step {step}: schedule() changed r{rid} from prefilled={counts[rid][0]}, "
                                  f"generated={counts[rid][1]} to prefilled={have[0]}, generated={have[1]}: "
                                  f"schedule() only plans the step, complete() applies it once the step has run")
                if problem := _state_problem(self._state(), self._ref_state(), "schedule()"):
                    self.fail(f"step {step}: {problem}")
            return raw, plan
        self.fail(message.rstrip("."))
        raise AssertionError  # not reached: fail() raises

    def complete(self, raw: Any) -> list[int]:
        step = len(self.plans)
        try:
            emitted = _plain_ids(self.sched.complete(raw), step, [], [])
        except Divergence as d:
            self.fail(d.message.rstrip("."))
        self.replay.append(f"s.complete(plan)   # returns {fmt_ids(emitted)} (in any order)")
        if self.ref is None:
            return emitted
        plan = self.plans[-1] if self.plans else []
        ref_plan = self.ref_plan if self.ref_plan is not None else []
        before = self._ref_counts()
        in_step = {r.rid: r for r in self.ref.running}
        want = sorted(self.ref.complete(ref_plan))
        self.ref_plan = None
        still = {r.rid for r in self.ref.running}
        self.released = [(rid, r.prompt_len + r.max_new) for rid, r in in_step.items() if rid not in still]
        self.left_at.update((rid, step) for rid, _ in self.released)
        if emitted != want:
            rs = RefStep(step=step, running=[(rid, r.prompt_len, before[rid][0], r.max_new)
                                             for rid, r in in_step.items()],
                         waiting=[], reserved=0, released=[], left_at=self.left_at, plan=plan, emitted=want)
            self.fail(f"step {step}: the plan {fmt_plan(plan)} is right, but complete() returned "
                      f"{fmt_ids(emitted)} instead of {fmt_ids(want)} (in any order): {explain_emitted(rs, emitted)}")
        after = self._ref_counts()
        for rid, have in self._counts().items():
            if have != after[rid]:
                spec = self.specs[rid]
                self.fail(f"step {step}: " + count_problem(rid, have, after[rid], before[rid], dict(plan).get(rid),
                                                            spec.prompt_len, spec.max_new))
        if problem := _state_problem(self._state(), self._ref_state(), "complete()"):
            self.fail(f"step {step}: {problem}")
        return emitted


# ----------------------------------------------------------------------------------------- whole call sequences

Op = tuple  # ("add", rid, prompt_len, max_new) | ("schedule",) | ("complete",)


def random_calls(reference: Any, seed: int | str, steps: int = 24) -> tuple[tuple[int, int, int], list[Op]]:
    """A generated sequence of calls over the whole API, error paths included: adds that are refused (too
    big, an empty prompt, no output, the id of a request waiting or running), adds between schedule() and
    complete(), and ids used again once their request has finished, with prompts of several steps. The
    reference makes the calls as they are drawn, so that the ids live and finished are known."""
    rng = random.Random(f"calls:{seed}")
    budget, seats, kv = rng.randint(2, 12), rng.randint(1, 4), rng.randint(12, 40)
    s = reference["Scheduler"](budget, seats, kv)
    ops: list[Op] = []
    finished: list[int] = []
    turned_away: list[int] = []  # ids whose add() was refused and that nobody holds
    fresh = iter(rng.sample(range(1000), 200))

    def live() -> list[int]:
        return [r.rid for r in (*s.waiting, *s.running)]

    def draw_add() -> None:
        kind = rng.choices(("new", "again", "too big", "empty", "duplicate"), (5, 3, 1, 1, 2))[0]
        new = rng.randint(1, 4)
        prompt = rng.randint(1, max(1, min(kv - new, 3 * budget)))
        rid = next(fresh)
        if kind == "new" and turned_away and rng.random() < 0.5:
            rid = turned_away.pop(rng.randrange(len(turned_away)))  # an id whose add() was refused, once more
        if kind == "again" and finished:
            rid = rng.choice(finished)
        elif kind == "too big":
            prompt = kv - new + rng.randint(1, 5)
            rid = rng.choice(live()) if live() and rng.random() < 0.3 else rid
        elif kind == "empty":
            prompt, new = (0, new) if rng.random() < 0.5 else (prompt, 0)
        elif kind == "duplicate" and live():
            rid = rng.choice(live())
        ops.append(("add", rid, prompt, new))
        try:
            s.add(reference["Req"](rid, prompt, new))
        except ValueError:
            if rid not in live() and rid not in turned_away:
                turned_away.append(rid)
        else:
            if rid in finished:
                finished.remove(rid)

    for _ in range(steps):
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            draw_add()
        ops.append(("schedule",))
        plan = s.schedule()
        if rng.random() < 0.2:
            draw_add()  # between schedule() and complete()
        before = {r.rid for r in s.running}
        ops.append(("complete",))
        s.complete(plan)
        finished += [rid for rid in before - {r.rid for r in s.running}]
    return (budget, seats, kv), ops


def run_calls(ns: Any, reference: Any, limits: tuple[int, int, int], ops: list[Op], drain: int = 300,
              reached: list[int] | None = None) -> None:
    """Make the calls on the submission through a Session, each judged at once against the reference (a
    refused add() by what it leaves), then schedule() and complete() until nothing is left. `reached[0]`
    is set to the number of calls begun (a failure stops at the last)."""
    s = Session(ns, *limits, reference=reference)
    pending: Any = None
    assert s.ref is not None
    for number, op in enumerate(ops, 1):
        if reached is not None:
            reached[0] = number
        if op[0] == "add":
            _, rid, prompt_len, max_new = op
            refuses = False
            try:
                s.ref.add(reference["Req"](rid, prompt_len, max_new))
            except ValueError as exc:
                refuses, why = True, str(exc)
            else:
                s.ref.waiting.pop()  # only asked: ref_add() adds the reference's own request below
            r = s.new(rid, prompt_len, max_new)
            refused = s.refused(r)
            if refuses and not refused:
                s.fail(f"add() accepted r{rid} (prompt_len {prompt_len}, max_new {max_new}), which it refuses with "
                       f"ValueError ({why})")
            if refused and not refuses:
                s.fail(f"add() refused r{rid} (prompt_len {prompt_len}, max_new {max_new}): it fits the KV cache and "
                       f"no request waiting or running has its id (a finished request's id may be used again)")
            if not refused:
                s.ref_add(r)
        elif op[0] == "schedule":
            if pending is not None:  # every plan is completed before the next schedule(), as the engine does
                s.complete(pending)
            pending, _ = s.schedule()
        elif pending is not None:  # complete(), when a schedule() came before it
            s.complete(pending)
            pending = None
    if pending is not None:
        s.complete(pending)
    for _ in range(drain):
        raw, plan = s.schedule()
        if not plan:
            return
        s.complete(raw)
    s.fail(f"the requests did not finish within {drain} steps after the calls")


SHRINK_CALLS = 80  # replays of a failing sequence at most: a fixed number, so a regrade says the same


def check_calls(ns: Any, reference: Any, limits: tuple[int, int, int], ops: list[Op]) -> None:
    """Run a generated call sequence; on a failure, make it smaller while it still fails (at most
    SHRINK_CALLS replays) and report the smallest sequence found, with its replay: first the calls after
    the failing one go, then runs of calls (halves, quarters, ... single ones, latest first)."""
    reached = [0]
    try:
        run_calls(ns, reference, limits, ops, reached=reached)
        return
    except pytest.fail.Exception:
        pass
    calls, attempts = list(ops[:reached[0]]), 0

    def fails(candidate: list[Op]) -> bool:
        nonlocal attempts, calls
        attempts += 1
        try:
            run_calls(ns, reference, limits, candidate, reached=reached)
        except pytest.fail.Exception:
            calls = candidate[:reached[0]]
            return True
        except Exception:
            attempts = SHRINK_CALLS  # the submission raised on a smaller sequence: keep what we have
        return False

    chunk = max(1, len(calls) // 2)
    while attempts < SHRINK_CALLS:
        end = len(calls)
        while end > 0 and attempts < SHRINK_CALLS:
            start = max(0, end - chunk)
            fails(calls[:start] + calls[end:])
            end = min(start, len(calls))
        if chunk == 1:
            break
        chunk //= 2
    failure: BaseException | None = None
    try:
        run_calls(ns, reference, limits, calls)
    except pytest.fail.Exception as exc:
        failure = exc
    if failure is None:
        run_calls(ns, reference, limits, ops)  # the smaller one passed after all (a flaky program): the whole one
        return
    message = str(getattr(failure, "msg", failure))
    first, _, rest = message.partition("\n")
    note = (f"\n(a generated sequence of {len(ops)} calls failed; this is the smallest part of it that still "
            f"fails: {len(calls)} calls, then schedule() and complete() until nothing is left)")
    # Failed outside the except block, so that the report is not chained to the first failure.
    pytest.fail(f"{first}{note}\n{rest}", pytrace=False)
