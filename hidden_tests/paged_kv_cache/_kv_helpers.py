"""Driver shared by the paged_kv_cache premium suite (a helper module, not a test module).

A scenario is a cache size plus a list of calls. `check()` makes the calls on the reference (trusted,
in this process) and on the submission, and after every call compares what the call did (returned, or
raised which error) and the whole visible state: every live sequence's block table, the free count,
and every block's reference count and tokens. The submission's calls and the reads after each run in
the worker as scenarios of operations (`Replay`: one message for the whole replay, and one more after
each call that raises), judged here step by step. At the first difference the test fails with a
sentence in the statement's terms, and the feedback shows the block tables step by step, the
reference's beside the submission's.

Everything the submission returns is converted to plain data (and its types checked) before it is
compared: an object of the submission only ever equals itself.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

Call = tuple  # ("allocate", seq, [tokens]) | ("append_token", seq, token) | ("fork", parent, child) | ("free", seq)


@dataclass(frozen=True)
class Scenario:
    num_blocks: int
    block_size: int
    calls: tuple[Call, ...]

    def code(self, upto: int | None = None) -> str:
        """The scenario as the Python a student can paste to replay it."""
        lines = [f"m = BlockManager(num_blocks={self.num_blocks}, block_size={self.block_size})"]
        lines += [f"m.{fmt_call(c)}" for c in self.calls[:upto]]
        return "\n".join(lines)


def fmt_call(call: Call) -> str:
    return f"{call[0]}({', '.join(repr(a) for a in call[1:])})"


@dataclass
class State:
    """What can be seen of a manager after a call, as plain data."""

    outcome: str  # "ok", "OutOfBlocks", "ValueError", "KeyError", or what else was raised
    free: Any
    tables: dict[int, Any]  # seq id -> its block table
    refs: list[Any]  # block id -> reference count
    tokens: list[Any]  # block id -> tokens
    # After a refused call, a sequence it named that does not exist -> what fork(seq, seq) does: a KeyError (no
    # such parent), where a sequence left behind gives the ValueError of a child that exists. The probe
    # changes nothing either way, and needs no reader to raise (a block_table that returns [] for an
    # unknown sequence is a mistake of its own, not a sequence left behind).
    gone: dict[int, str] = field(default_factory=dict)


REPLAY_LINES = 12  # a longer replay goes into the feedback only

OUTCOME_WORDS = {"ok": "returns normally", "OutOfBlocks": "raises OutOfBlocks",
                 "ValueError": "raises ValueError", "KeyError": "raises KeyError",
                 "RuntimeError": "raises a RuntimeError that is not an OutOfBlocks"}


OUTCOME_TYPES = {"ValueError": ValueError, "KeyError": KeyError}


def _lineage(exc: BaseException) -> list[str]:
    """The names of the classes an exception is an instance of: the worker reports them for an exception
    of the submission (its `remote`), an exception raised here has its own."""
    remote = getattr(exc, "remote", None)
    if remote is not None:
        return list(remote.lineage)
    return [klass.__name__ for klass in type(exc).__mro__]


def _outcome(exc: BaseException | None, expected: str | None = None) -> str:
    """What a call did, as a word; an exception of several kinds (a KeyError that is also a
    ValueError) is the `expected` one when it is that kind too. OutOfBlocks is the stub's class or a
    subclass of it (known by its name in the exception's classes), never any RuntimeError."""
    if exc is None:
        return "ok"
    lineage = _lineage(exc)
    if expected == "OutOfBlocks" and "OutOfBlocks" in lineage:
        return expected
    if expected in OUTCOME_TYPES and isinstance(exc, OUTCOME_TYPES[expected]):
        return expected
    for kind in (ValueError, KeyError):
        if isinstance(exc, kind):
            return kind.__name__
    if "OutOfBlocks" in lineage:
        return "OutOfBlocks"
    if isinstance(exc, RuntimeError):
        return "RuntimeError"
    name, text = type(exc).__name__, str(exc)
    return text if text.startswith(f"{name}:") else f"{name}: {text}"  # a remote one names its type already


def _call(manager: Any, call: Call, expected: str | None = None) -> str:
    try:
        getattr(manager, call[0])(*call[1:])
    except NotImplementedError:
        raise  # the stub: reported as "not implemented" by the harness
    except Exception as exc:
        return _outcome(exc, expected)
    return "ok"


def _read(reader: Any, kind: str, *args: Any) -> Any:
    """A read of the state as plain data: an int, a list of ints, or a sentence about what went wrong."""
    try:
        value = reader(*args)
    except NotImplementedError:
        raise
    except Exception as exc:
        return _raised(exc)
    return _plain(value, kind)


def _raised(exc: BaseException) -> str:
    """What a read raised, as a few words; a KeyError of the submission's own class is a KeyError."""
    return "raises KeyError" if isinstance(exc, KeyError) else f"raises {_lineage(exc)[0]}"


def _named(call: Call) -> list[int]:
    """The sequence ids a call names."""
    return [call[1], call[2]] if call[0] == "fork" else [call[1]]


def _plain(value: Any, kind: str) -> Any:
    """What a read returned, as plain data: an int, a list of ints, or a sentence saying what it is."""
    if kind == "int":
        return value if type(value) is int else f"{kind_said(value)}, not an int"
    if isinstance(value, (list, tuple)) and all(type(x) is int for x in value):
        return list(value)
    return f"{kind_said(value)}, not a list of ints"


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


def snapshot(manager: Any, outcome: str, seqs: list[int], num_blocks: int, full: bool = True,
             gone: tuple[int, ...] = ()) -> State:
    """The reference's state (in this process); without `full`, its free count and tables only. `gone`:
    sequences that do not exist (fork(seq, seq) raises KeyError)."""
    return State(
        outcome=outcome,
        free=_read(manager.num_free_blocks, "int"),
        tables={s: _read(manager.block_table, "list", s) for s in seqs},
        refs=[_read(manager.ref_count, "int", b) for b in range(num_blocks)] if full else [],
        tokens=[_read(manager.block_tokens, "list", b) for b in range(num_blocks)] if full else [],
        gone={s: _call(manager, ("fork", s, s)) for s in gone},
    )


def run_reference(reference: Any, sc: Scenario, full: bool = True) -> list[State]:
    m = reference["BlockManager"](sc.num_blocks, sc.block_size)
    live: list[int] = []
    states = []
    for call in sc.calls:
        outcome = _call(m, call)
        live = _live_after(live, call, outcome)
        # After a refused call, the sequences it named that do not exist must still not exist.
        gone = tuple(dict.fromkeys(s for s in _named(call) if s not in live)) if outcome != "ok" else ()
        states.append(snapshot(m, outcome, live, sc.num_blocks, full, gone))
    return states


def _live_after(live: list[int], call: Call, outcome: str) -> list[int]:
    if outcome != "ok":
        return live
    if call[0] == "allocate":
        return live + [call[1]]
    if call[0] == "fork":
        return live + [call[2]]
    if call[0] == "free":
        return [s for s in live if s != call[1]]
    return live


def first_difference(want: State, got: State, before: State | None = None) -> str | None:
    """The first thing that differs, as the end of a sentence, or None. `before`: the submission's state
    after the previous call (None before the first), which matched the reference's: a refused call is
    said to have changed the state only where the submission's reads differ from those before it."""
    if want.outcome != got.outcome:
        have = OUTCOME_WORDS.get(got.outcome, f"raises {got.outcome}")
        sentence = f"the call {OUTCOME_WORDS.get(want.outcome, want.outcome)}, but yours {have}"
        if want.outcome == "OutOfBlocks" and got.outcome == "RuntimeError":
            sentence += " (raise the stub's OutOfBlocks, or a subclass of it)"
        return sentence
    found = _state_difference(want, got)
    if found is None:
        return None
    what, detail = found
    if want.outcome == "ok":
        return detail
    raised = f"the call {OUTCOME_WORDS.get(want.outcome, want.outcome)}, as it should"
    if what is not None and before is not None and _value(before, what) is not _MISSING \
            and _value(before, what) != _value(got, what):
        # The reference's state did not change (a refused call changes nothing), and the submission's
        # read of the same thing before the call matched it: the call changed it.
        return (f"{raised}, but a call that raises must change nothing (rules 6 and 7), and yours changed "
                f"{what[0]}: {detail.replace(' should be ', ' should still be ', 1)} "
                f"(before the call, yours {_shown_value(_value(before, what))})")
    return detail  # the call did as it should; what differs was already so, or no earlier read shows it


_MISSING = object()


def _value(state: State, what: tuple[str, str, Any]) -> Any:
    """A read of a state, as `_state_difference` names it; _MISSING when the state has no such read."""
    _, field_name, key = what
    if field_name == "free":
        return state.free
    if field_name == "tables":
        return state.tables.get(key, _MISSING)
    values = getattr(state, field_name)
    return values[key] if key < len(values) else _MISSING


def _shown_value(value: Any) -> str:
    """What a read gave, in a sentence that reads right whatever it was: "returns 3", "raises KeyError",
    "returns a str, not an int"."""
    if isinstance(value, str):
        return value if value.startswith("raises ") else f"returns {value}"
    return f"returns {value}"


NEVER_USED = " (a block no sequence holds, never used or freed, has reference count 0 and holds [])"


def _state_difference(want: State, got: State) -> tuple[tuple[str, str, Any] | None, str] | None:
    """The first read that differs: which (the reader's call, the state's field, its key) and a sentence."""
    for seq, table in want.tables.items():
        if got.tables.get(seq) != table:
            return ((f"block_table({seq})", "tables", seq),
                    f"block_table({seq}) should be {table}, yours {_shown_value(got.tables.get(seq))}")
    for seq, outcome in want.gone.items():
        if got.gone.get(seq) != outcome:
            have = OUTCOME_WORDS.get(got.gone.get(seq, ""), f"raises {got.gone.get(seq)}")
            return (None, f"sequence {seq} does not exist after this call, so fork({seq}, {seq}) should raise KeyError "
                          f"(no such parent, rule 7), yours {have}: your manager still has a sequence {seq}")
    if want.free != got.free:
        return (("num_free_blocks()", "free", None),
                f"num_free_blocks() should be {want.free}, yours {_shown_value(got.free)}")
    for block, (w, g) in enumerate(zip(want.refs, got.refs)):
        if w != g:
            note = NEVER_USED if w == 0 else ""
            return ((f"ref_count({block})", "refs", block),
                    f"ref_count({block}) should be {w}, yours {_shown_value(g)}{note}")
    for block, (w, g) in enumerate(zip(want.tokens, got.tokens)):
        if w != g:
            note = NEVER_USED if w == [] and (not want.refs or want.refs[block] == 0) else ""
            return ((f"block_tokens({block})", "tokens", block),
                    f"block_tokens({block}) should be {w}, yours {_shown_value(g)}{note}")
    return None


def _call_cell(call: Call, want: State, got: State) -> str:
    """The call, and what it raised when it raised (on either side)."""
    raised = {side: OUTCOME_WORDS.get(state.outcome, f"raises {state.outcome}")
              for side, state in (("reference", want), ("yours", got)) if state.outcome != "ok"}
    if not raised:
        return fmt_call(call)
    if len(raised) == 2 and want.outcome == got.outcome:
        return f"{fmt_call(call)}: {raised['reference']}"
    return f"{fmt_call(call)}: " + "; ".join(f"{side} {what}" for side, what in raised.items())


def _trace_step(state: State) -> list[tuple[str, int]]:
    return [(f"s{seq}", len(table) if isinstance(table, list) else 0) for seq, table in state.tables.items()]


def _differing_reads(want: State, got: State) -> list[list[Any]]:
    """What differs after one call, read by read: [what was read, the reference's answer, yours]; the reads
    that agree are left out."""
    rows: list[list[Any]] = []
    if want.outcome != got.outcome:
        rows.append(["what the call did", OUTCOME_WORDS.get(want.outcome, want.outcome),
                     OUTCOME_WORDS.get(got.outcome, f"raises {got.outcome}")])
    for seq, table in want.tables.items():
        if got.tables.get(seq) != table:
            rows.append([f"block_table({seq})", str(table), str(got.tables.get(seq))])
    for seq, outcome in want.gone.items():
        if got.gone.get(seq) != outcome:
            rows.append([f"sequence {seq} exists", "no", "yes"])
    if want.free != got.free:
        rows.append(["num_free_blocks()", str(want.free), str(got.free)])
    for name, wants, gots in (("ref_count", want.refs, got.refs), ("block_tokens", want.tokens, got.tokens)):
        rows += [[f"{name}({block})", str(w), str(g)]
                 for block, (w, g) in enumerate(zip(wants, gots)) if w != g]
    return rows


def _report(feedback: Any, sc: Scenario, want: list[State], got: list[State]) -> None:
    """The step where the submission and the reference part ways, its differing reads only, and the calls
    that lead there; the blocks each sequence holds step by step when they differ there."""
    step = len(got)
    rows = _differing_reads(want[-1], got[-1])
    feedback.table(f"step {step}, {_call_cell(sc.calls[step - 1], want[-1], got[-1])}: what differs after it",
                   ["read", "reference", "your code"], rows[:20])
    expected, observed = [_trace_step(s) for s in want], [_trace_step(s) for s in got]
    if expected != observed:
        feedback.trace("blocks held by each sequence, step by step", expected, observed, unit="blocks")
    feedback.text("the calls, to replay", sc.code(upto=step))


# ----------------------------------------------------------------------------------------- the replay

# The managers each test's program has made so far, by the test's `ns`: a failure's replay makes the
# earlier ones first, since a manager of the submission may share state with another (a class attribute).
_MADE: dict[int, tuple[Any, list[Replay]]] = {}


def made_so_far(ns: Any) -> list[Replay]:
    return _MADE.setdefault(id(ns), (ns, []))[1]


def earlier_code(replays: list[Replay]) -> str:
    """The managers made before, each with the calls it received (not the reads after them), as Python."""
    lines = []
    for number, replay in enumerate(replays, 1):
        lines.append(f"m{number} = BlockManager(num_blocks={replay.size[0]}, block_size={replay.size[1]})")
        lines += [f"m{number}.{fmt_call((replay.ops[i][0], *replay.ops[i][1]))}" for i in replay.calls
                  if i < len(replay.results)]
    return "\n".join(lines)


class Replay:
    """The submission's side of a scenario: its calls, each followed by the reads that observe it, as
    operations on one BlockManager that run in the worker as scenarios of operations (one message for
    many of them, `ns.scenario()`), their results taken here one by one, in order.

    A scenario stops at an operation that raises, and what it raised is that operation's result; the
    operations after it run in a new scenario, on the same manager, once a result past it is asked for.
    A scenario is sent up to the next call that the reference raised at (a full cache, a mistaken id),
    where the submission's stops too when it is right: so a replay costs one message and one more for
    each exception the reference raises before the first difference, the worker never runs an
    operation twice, and what the judge does not look at, past the first difference, is never sent.
    """

    def __init__(self, ns: Any, num_blocks: int, block_size: int) -> None:
        self.ns = ns
        self.size = (num_blocks, block_size)
        self.ops: list[tuple[str, tuple[Any, ...]]] = []  # a method of the manager, and its arguments
        self.ends: list[int] = []  # the operations a scenario ends with: calls the reference raised at
        self.calls: list[int] = []  # the operations that start a step (its call; the reads follow)
        self.results: list[tuple[Exception | None, Any]] = []  # (what it raised, what it returned)
        self.manager: Any = None  # the submission's manager, once the first scenario made it
        self.scenarios = 0  # messages sent to the worker

    def add(self, method: str, *args: Any, step: bool = False, raises: bool = False) -> int:
        """A call of the manager's `method`: a step's own call with `step` (else a read), which the
        reference raised at with `raises`. Its index."""
        self.ops.append((method, args))
        if step:
            self.calls.append(len(self.ops) - 1)
        if raises:
            self.ends.append(len(self.ops) - 1)
        return len(self.ops) - 1

    def _result(self, index: int) -> tuple[Exception | None, Any]:
        while index >= len(self.results):
            self._send(len(self.results))
        return self.results[index]

    def _send(self, start: int) -> None:
        stop = next((end + 1 for end in self.ends if end >= start), len(self.ops))
        if start and not (start - 1 in self.ends and self.results[start - 1][0] is not None):
            # The last one sent ended at an exception the reference did not raise, or at a call the
            # reference raised at and the submission did not: that step differs, so the judge stops
            # there and only the rest of its reads are needed.
            stop = min(stop, next((call for call in self.calls if call > start), len(self.ops)))
        run = self.ns.scenario()
        made = run.new("BlockManager", *self.size) if self.manager is None else None
        target = made if made is not None else self.manager
        steps = [run.call(target, method, *args) for method, args in self.ops[start:stop]]
        seen = run.run()
        self.scenarios += 1
        if made is not None:
            made_so_far(self.ns).append(self)
            self.manager = seen[made]  # raises what the constructor raised, as ns["BlockManager"](...) would
        for step in steps:
            try:
                value = seen[step]
            except Exception as exc:
                self.results.append((exc, None))
                return  # the scenario stopped here: the next one starts after it
            self.results.append((None, value))

    def outcome(self, index: int, expected: str | None = None) -> str:
        """What a call did, as `_call` says it."""
        exc, _ = self._result(index)
        if exc is None:
            return "ok"
        if isinstance(exc, NotImplementedError):
            raise exc  # the stub: reported as "not implemented" by the harness
        return _outcome(exc, expected)

    def read(self, index: int, kind: str) -> Any:
        """What a read returned, as `_read` says it."""
        exc, value = self._result(index)
        if exc is None:
            return _plain(value, kind)
        if isinstance(exc, NotImplementedError):
            raise exc
        if isinstance(exc, AttributeError):
            # A method the manager does not have is named by the harness, as when a test reads it; an
            # AttributeError raised inside one that exists is what the read did.
            getattr(self.manager, self.ops[index][0])
        return _raised(exc)


@dataclass
class StepOps:
    """The places in a replay of one step's call and of the reads after it."""

    call: int
    free: int
    tables: dict[int, int]  # seq id -> its block_table()
    refs: list[int]  # block id -> its ref_count()
    tokens: list[int]  # block id -> its block_tokens()
    gone: dict[int, int]  # seq id the call named, not live after it -> its fork(seq, seq)


def _replay(ns: Any, sc: Scenario, want: list[State], full: bool = True) -> tuple[Replay, list[StepOps]]:
    """Every call of the scenario and the reads that observe it, in the order the checks read them:
    the free count, the table of every sequence the reference holds, and with `full` every block's
    reference count and tokens."""
    replay = Replay(ns, sc.num_blocks, sc.block_size)
    blocks = range(sc.num_blocks) if full else range(0)
    steps = [StepOps(call=replay.add(call[0], *call[1:], step=True, raises=expected.outcome != "ok"),
                     free=replay.add("num_free_blocks"),
                     tables={seq: replay.add("block_table", seq) for seq in expected.tables},
                     refs=[replay.add("ref_count", b) for b in blocks],
                     tokens=[replay.add("block_tokens", b) for b in blocks],
                     gone={seq: replay.add("fork", seq, seq, raises=outcome != "ok")
                           for seq, outcome in expected.gone.items()})
             for call, expected in zip(sc.calls, want)]
    return replay, steps


def _observed(replay: Replay, ops: StepOps, expected: State) -> State:
    """The submission's state after one step, as `snapshot` reads the reference's."""
    return State(outcome=replay.outcome(ops.call, expected.outcome), free=replay.read(ops.free, "int"),
                 tables={seq: replay.read(at, "list") for seq, at in ops.tables.items()},
                 refs=[replay.read(at, "int") for at in ops.refs],
                 tokens=[replay.read(at, "list") for at in ops.tokens],
                 gone={seq: replay.outcome(at, expected.gone[seq]) for seq, at in ops.gone.items()})


def _run(ns: Any, reference: Any, sc: Scenario) -> tuple[list[State], list[State], str | None, Replay]:
    """The reference's states, the submission's up to the first difference, that difference, and the
    submission's side."""
    want = run_reference(reference, sc)
    replay, steps = _replay(ns, sc, want)
    got: list[State] = []
    for ops, expected in zip(steps, want):
        got.append(_observed(replay, ops, expected))
        problem = first_difference(expected, got[-1], got[-2] if len(got) > 1 else None)
        if problem:
            return want[:len(got)], got, problem, replay
    return want, got, None, replay


def check(ns: Any, reference: Any, feedback: Any, sc: Scenario, about: str = "", shrink: bool = False) -> Replay:
    """Make the scenario's calls on both, step by step; fail at the first difference. With `shrink`,
    the failure shows the fewest calls (of those made) that still make the submission differ. The
    submission's side, when all matched (its `manager` is in the scenario's last state).

    When the test made other managers before this one, the managers are looked at for evidence of
    shared state (`shared_state`): with it, the failure is said to depend on them and the replay makes
    them first; without it, the failure is shrunk and replayed alone, as any other."""
    earlier = list(made_so_far(ns))
    want, got, problem, replay = _run(ns, reference, sc)
    if problem is None:
        return replay
    shown = Scenario(sc.num_blocks, sc.block_size, sc.calls[:len(got)])
    shared = bool(earlier) and shared_state(ns, reference, earlier, shown, problem)
    if shrink and not shared:
        small = _shrink(ns, reference, shown)
        if small != shown and (again := _run(ns, reference, small))[2] is not None:
            about += f" (shrunk from {len(shown.calls)} calls)"
            sc, (want, got, problem, _) = small, again
    _report(feedback, sc, want, got)
    step, context = len(got), f"This test checks {about}.\n" if about else ""
    if shared:
        before = earlier_code(earlier)
        lines = step + len(before.splitlines())
        # The same calls on a new manager did not fail the same way: what this manager did depends on
        # the managers made before it. The replay makes them first.
        feedback.text("the managers this test made before, to replay first", before)
        first = (f"This test made {len(earlier)} other manager(s) before this one, in the same program, and what "
                 "a new manager does depends on them (calls that worked on the first manager do otherwise when "
                 "made again on a new one): your managers share state (a class attribute, a default argument, "
                 "a module variable); ")
        replay_text = (f"{first}replay them first:\n{before}\n{sc.code(upto=step)}" if lines <= REPLAY_LINES else
                       f"{first}the calls to replay, theirs first, are in the feedback.")
    else:
        replay_text = (f"Replay it:\n{sc.code(upto=step)}" if step <= REPLAY_LINES else
                       f"The {step} calls that lead here are below, to replay, beside the block tables.")
    pytest.fail(f"at step {step}, {fmt_call(sc.calls[step - 1])}: {problem}.\n{context}{replay_text}", pytrace=False)


def shared_state(ns: Any, reference: Any, earlier: list[Replay], failing: Scenario, problem: str) -> bool:
    """Whether the program's managers share state, shown by the program itself: the calls of the first
    manager this test made (which matched the reference then) made again on a new manager, and the failing
    calls made again on a new one, must do what they did the first time. A program whose managers keep
    everything to themselves does; one whose managers share a table (a class attribute) gives itself away.
    Without such evidence nothing is said of shared state."""
    first = earlier[0]
    calls = tuple((first.ops[i][0], *first.ops[i][1]) for i in first.calls if i < len(first.results))
    if calls and _run(ns, reference, Scenario(*first.size, calls))[2] is not None:
        return True
    return _run(ns, reference, failing)[2] != problem


# ------------------------------------------------------------------------ what a reader hands out

SENTINEL = 4242  # what a caller appends to a list a reader returned


def check_new_lists(ns: Any, reference: Any, feedback: Any, sc: Scenario, reader: str) -> None:
    """Make the scenario's calls (checked as `check` does), then, for `reader` ("block_table" of every
    live sequence, or "block_tokens" of every block), in the submission's process: take what it
    returns, append to it as a caller may, and read again, which must be unchanged; and sort what a
    second read returns, which only a list can do. Fails with what was handed out and how to fix it."""
    replay = check(ns, reference, feedback, sc, about=f"the calls before reading {reader}()")
    final = run_reference(reference, sc)[-1]
    expected = final.tables if reader == "block_table" else dict(enumerate(final.tokens))
    run = ns.scenario()
    probes = []
    for arg in expected:
        first = run.call(replay.manager, reader, arg)
        grown = run.call(first, "append", SENTINEL)
        again = run.call(replay.manager, reader, arg)
        second = run.call(replay.manager, reader, arg)
        probes.append((arg, first, grown, again, run.call(second, "sort")))
    seen = run.run()
    for arg, first, grown, again, ordered in probes:
        read = f"{reader}({arg})"
        lines = f"{sc.code()}\nx = m.{read}\nx.append({SENTINEL})\nm.{read}"
        fail = functools.partial(_fail_read, feedback, lines)
        fail_sort = functools.partial(_fail_read, feedback, f"{sc.code()}\nx = m.{read}\nx.sort()")
        value = seen[first]
        if type(value) is not list:
            kind = "tuple" if type(value) is tuple else kind_of(value)
            fail(f"{read} returned {_shown(value)}, a {kind}: the statement asks for a new list, "
                 f"which a caller may change (append to it, sort it); return list(...) of what you hold.")
        try:
            seen[grown]
        except AttributeError as exc:
            fail(f"{read} returned something that is not a list: appending to it raised {exc}. "
                 f"The statement asks for a new list; return list(...) of what you hold.")
        now = seen[again]
        if now != expected[arg]:
            fail(f"after a caller appended {SENTINEL} to the list {read} returned, {read} is {_shown(now)} "
                 f"instead of {expected[arg]}: your {reader} hands out the list your manager keeps, so a "
                 f"caller who changes what it got changes your manager. Return a new list (list(...)).")
        try:
            seen[ordered]
        except AttributeError as exc:
            fail_sort(f"{read} returned something that is not a list (a caller cannot sort it: {exc}). "
                 f"The statement asks for a new list; return list(...) of what you hold.")


def _fail_read(feedback: Any, lines: str, why: str) -> None:
    feedback.text("the calls, to replay", lines)
    pytest.fail(f"{why}\nReplay it:\n{lines}", pytrace=False)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


SHRINK_ATTEMPTS = 80  # a fixed number, so that the same submission always gets the same message


def _differs_quickly(ns: Any, reference: Any, sc: Scenario) -> bool:
    """Whether the submission differs from the reference on what each call did, the block tables or
    the free count: the cheap part of the comparison (no per-block reads), for shrinking."""
    want = run_reference(reference, sc, full=False)
    replay, steps = _replay(ns, sc, want, full=False)
    for ops, expected in zip(steps, want):
        # Judged result by result, stopping at the first that differs: a call or a read that raises
        # where the reference's did not ends its scenario, and nothing after it is needed.
        if replay.outcome(ops.call, expected.outcome) != expected.outcome \
                or replay.read(ops.free, "int") != expected.free \
                or any(replay.read(at, "list") != expected.tables[seq] for seq, at in ops.tables.items()) \
                or any(replay.outcome(at, expected.gone[seq]) != expected.gone[seq] for seq, at in ops.gone.items()):
            return True
    return False


def _shrink(ns: Any, reference: Any, sc: Scenario) -> Scenario:
    """Drop calls, one at a time from the last, while the submission still differs (judged cheaply)."""
    if not _differs_quickly(ns, reference, sc):
        return sc  # the difference is in reference counts or tokens only: keep the scenario as it is
    calls, attempts, dropped = list(sc.calls), 0, True
    while dropped and attempts < SHRINK_ATTEMPTS:
        dropped = False
        for i in range(len(calls) - 1, -1, -1):
            if attempts >= SHRINK_ATTEMPTS or i >= len(calls):
                continue
            attempts += 1
            candidate = calls[:i] + calls[i + 1:]
            if candidate and _differs_quickly(ns, reference, Scenario(sc.num_blocks, sc.block_size, tuple(candidate))):
                calls, dropped = candidate, True
    return Scenario(sc.num_blocks, sc.block_size, tuple(calls))


# ----------------------------------------------------------------------------------- random scenarios

PROFILES = {
    # name: (num_blocks, block_size, calls, how often each kind of call is picked)
    "shared_prefixes": (24, 4, 70, {"allocate": 4, "append_token": 4, "fork": 1, "free": 2}),
    "parallel_sampling": (24, 4, 70, {"allocate": 2, "append_token": 6, "fork": 3, "free": 2}),
    "tight_cache": (10, 2, 70, {"allocate": 3, "append_token": 5, "fork": 2, "free": 4}),
    # A full cache while forks share partial blocks: copies on write that find no free block.
    "full_cache_forks": (7, 3, 70, {"allocate": 2, "append_token": 6, "fork": 4, "free": 2}),
    "one_token_blocks": (8, 1, 60, {"allocate": 3, "append_token": 4, "fork": 2, "free": 3}),
    "one_block_cache": (1, 3, 40, {"allocate": 4, "append_token": 4, "fork": 2, "free": 3}),
}
SYSTEM_PROMPTS = ([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 8, 8], [7, 7, 7, 7, 7, 7, 7, 7], [0, 0, 0, 0, 0, 0])
MISTAKES = 0.08  # how often a call is one the rules refuse (ValueError, KeyError), in every state


class _Ids:
    """Sequence ids as a server might pick them: in any order, 0 among them, now and then a large one,
    and an id again once its sequence is freed."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.freed: list[int] = []  # ids whose sequence was freed (or never made): unknown to the manager

    def fresh(self, live: list[int]) -> int:
        rng = self.rng
        if self.freed and rng.random() < 0.35:
            return rng.choice(self.freed)
        while True:
            seq = rng.choice((0, rng.randint(1, 30), rng.randint(1, 30), rng.randint(31, 10**6)))
            if seq not in live:
                return seq

    def after(self, live: list[int], call: Call) -> None:
        self.freed = [s for s in dict.fromkeys(self.freed + _named(call)) if s not in live][-8:]


def _prompt(rng: random.Random, block_size: int) -> list[int]:
    """A new prompt: often a system prompt's beginning and a question; now and then exactly a number of
    blocks long."""
    prompt = list(rng.choice(SYSTEM_PROMPTS))[:rng.randint(1, 9)] if rng.random() < 0.7 else []
    prompt += [rng.randint(0, 9) for _ in range(rng.randint(0 if prompt else 1, 6))]
    if rng.random() < 0.3:  # exactly filling its blocks
        blocks = max(1, -(-len(prompt) // block_size) - rng.randint(0, 1))
        prompt = (prompt * block_size)[:blocks * block_size]
    return prompt


def _mistake(rng: random.Random, ids: _Ids, live: list[int]) -> Call:
    """A call the rules refuse, of any kind the current state allows: which error comes first when two
    apply is as rule 7 and the statement's list say."""
    missing = ids.fresh(live)
    options: list[Call] = [("allocate", missing, []), ("append_token", missing, rng.randint(0, 9)),
                           ("free", missing), ("fork", missing, ids.fresh(live))]
    if live:
        seq, other = rng.choice(live), rng.choice(live)
        options += [("allocate", seq, _prompt(rng, 4)), ("allocate", seq, []), ("allocate", seq, [1] * 40),
                    ("fork", missing, seq),  # a missing parent and an existing child: the KeyError
                    ("fork", seq, other)]  # an existing child (perhaps the parent itself): the ValueError
    return rng.choice(options)


def random_scenario(reference: Any, seed: int | str, profile: str) -> Scenario:
    """Calls a scheduler could make, mostly valid, with prompts that share beginnings. The reference
    makes them as they are drawn, so that only the sequences that really exist are used next. `seed`
    is the run's seed (the `seed` fixture), with a suffix to draw several sequences from it."""
    num_blocks, block_size, count, weights = PROFILES[profile]
    rng = random.Random(f"{profile}-{seed}")
    m = reference["BlockManager"](num_blocks, block_size)
    live: list[int] = []
    ids = _Ids(rng)
    calls: list[Call] = []
    prompts: list[list[int]] = []  # the prompts of the allocate() calls so far
    for _ in range(count):
        kind = rng.choices(list(weights), list(weights.values()))[0]
        if kind != "allocate" and not live:
            kind = "allocate"
        call: Call
        if rng.random() < MISTAKES:
            call = _mistake(rng, ids, live)
        elif kind == "allocate" and prompts and rng.random() < 0.1:
            # A prompt sent before, again (a retry, a popular question): equal prompts share their
            # full blocks only, never a partial last block.
            call = ("allocate", ids.fresh(live), list(rng.choice(prompts)))
        elif kind == "allocate" and prompts and rng.random() < 0.1:
            # A prompt sent before with another beginning: its later blocks hold the same tokens at the
            # same places after a different prefix, and are not the same blocks.
            again = list(rng.choice(prompts))
            again[:block_size] = [rng.randint(0, 9) for _ in again[:block_size]]
            call = ("allocate", ids.fresh(live), again)
        elif kind == "allocate" and live and rng.random() < 0.2:
            # The next turn of a conversation: all a sequence holds (its prompt and what it generated)
            # and a few tokens more, so that blocks filled by decoding and partial last blocks meet an
            # equal prompt, and must not be shared with it.
            held = [t for b in m.block_table(rng.choice(live)) for t in m.block_tokens(b)]
            call = ("allocate", ids.fresh(live), held + [rng.randint(0, 9) for _ in range(rng.randint(0, 3))])
        elif kind == "allocate":
            prompt = _prompt(rng, block_size)
            room = num_blocks * block_size
            if len(prompt) > room and rng.random() < 0.7:
                # A small cache: most prompts fit it, so that sequences live, grow and fork there too.
                prompt = prompt[:rng.randint(1, room)]
            call = ("allocate", ids.fresh(live), prompt)
        elif kind == "append_token":
            call = ("append_token", rng.choice(live), rng.randint(0, 9))
        elif kind == "fork":
            call = ("fork", rng.choice(live), ids.fresh(live))
        else:
            call = ("free", rng.choice(live))
        calls.append(call)
        if call[0] == "allocate" and call[2]:
            prompts.append(call[2])
        live = _live_after(live, call, _call(m, call))
        ids.after(live, call)
    return Scenario(num_blocks, block_size, tuple(calls))
