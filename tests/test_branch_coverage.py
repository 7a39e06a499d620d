"""The branches of a correct solution no test takes: the worker's tracer records arcs, the host finds each
function's branches in the syntax tree and says which way no arc shows. A way is said never taken only
where the lines tell the ways apart: a false "never taken" is worse than a missed one."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from grader.audit.coverage import Untaken, branches, said_untaken, untaken
from grader.confined.tracing import Tracer

pytestmark = pytest.mark.unit

FILE = "/exercise/solution.py"  # only frames of this file are traced; it need not exist


def run_traced(source: str, calls: list[tuple[str, tuple[Any, ...]]]) -> set[tuple[int, int]]:
    """The arcs `source`'s functions make when called as `calls` say (exceptions let through silently)."""
    namespace: dict[str, Any] = {}
    exec(compile(source, FILE, "exec"), namespace)
    tracer = Tracer(FILE)
    tracer.start()
    try:
        for name, args in calls:
            try:
                result = namespace[name](*args)
                if hasattr(result, "__next__"):
                    list(result)
            except Exception:
                pass
    finally:
        _, arcs = tracer.stop(100_000, 100_000)
    return {(a, b) for a, b in arcs}


def untaken_when(source: str, *calls: tuple[str, tuple[Any, ...]]) -> list[tuple[int, str]]:
    source = textwrap.dedent(source).lstrip("\n")
    return [(way.line, way.said) for way in untaken(source, run_traced(source, list(calls)))]


IF = """
def f(x):
    y = 0
    if x > 0:
        y = 1
    return y
"""

IF_ELIF = """
def f(x):
    if x == 1:
        return "one"
    elif x == 2:
        return "two"
    else:
        return "many"
"""

LOOPS = """
def count(n):
    while n > 0:
        n -= 1
    return n


def total(xs):
    t = 0
    for x in xs:
        t += x
    return t


def first_even(xs):
    for x in xs:
        if x % 2 == 0:
            return x
    return None


def drain(xs):
    while xs:
        if xs.pop() == 0:
            return True
    return False
"""

NESTED = """
def f(x, y):
    if x:
        if y:
            return 1
        return 2
    return 3
"""

ONE_LINE = """
def f(x):
    if x: return 1
    while x: x -= 1
    for _ in x: pass
    return 0
"""

MULTI_LINE = """
def f(a, b, c):
    if (a and
            b):
        return 1
    if (a or
            b or
            c):
        result = (
            g(a))
        return result
    return 0


def g(v):
    return v
"""

CONDITIONAL = """
def f(x):
    value = (
        "big"
        if x > 10
        else "small"
    )
    return value
"""

LAST_STATEMENT = """
import functools


@functools.lru_cache(maxsize=None)
def f(x):
    if x:
        g(x)


def g(x):
    pass
"""


@pytest.mark.parametrize(("source", "calls", "expected"), [
    (IF, [("f", (1,)), ("f", (0,))], []),
    (IF, [("f", (1,))], [(3, "the `if` is never false")]),
    (IF, [("f", (0,)), ("f", (-3,))], [(3, "the `if` is never true")]),
    (IF_ELIF, [("f", (1,)), ("f", (3,))], [(4, "the `elif` is never true")]),
    (IF_ELIF, [("f", (2,)), ("f", (1,))], [(4, "the `elif` is never false")]),
    (LOOPS, [("count", (0,)), ("total", ([],)), ("first_even", ([2],)), ("drain", ([],))],
     [(2, "the `while` never runs its body"), (9, "the `for` never runs its body"),
      (15, "the `for` never runs out"), (16, "the `if` is never false"), (22, "the `while` never runs its body")]),
    (LOOPS, [("count", (2,)), ("total", ([1, 2],)), ("first_even", ([1],)), ("drain", ([0],))],
     [(16, "the `if` is never true"), (22, "the `while`'s condition is never false"), (23, "the `if` is never false")]),
    (LOOPS, [("count", (2,)), ("count", (0,)), ("total", ([1],)), ("total", ([],)), ("first_even", ([1, 2],)),
             ("first_even", ([],)), ("drain", ([0, 1],)), ("drain", ([1],))], []),
    (NESTED, [("f", (1, 0)), ("f", (0, 0))], [(3, "the `if` is never true")]),
    (NESTED, [("f", (1, 1)), ("f", (1, 0))], [(2, "the `if` is never false")]),
    # A decision on one line with its body: the lines cannot tell its ways apart, and nothing is said.
    (ONE_LINE, [("f", (0,))], []),
    (MULTI_LINE, [("f", (0, 0, 0)), ("f", (1, 1, 0)), ("f", (0, 1, 0))], []),
    (MULTI_LINE, [("f", (0, 0, 0)), ("f", (1, 0, 0))], [(2, "the `if` is never true")]),
    (MULTI_LINE, [("f", (0, 0, 0)), ("f", (0, 0, 1))], [(2, "the `if` is never true")]),  # decided on its third line
    (MULTI_LINE, [("f", (1, 1, 1))], [(2, "the `if` is never false")]),
    (MULTI_LINE, [("f", (0, 1, 0)), ("f", (1, 0, 1))], [(2, "the `if` is never true"), (5, "the `if` is never false")]),
    (CONDITIONAL, [("f", (11,))], [(4, "the conditional expression is never false")]),
    (CONDITIONAL, [("f", (11,)), ("f", (1,))], []),
    # The other way of an `if` last in its function leaves the function: its exit arc tells it.
    (LAST_STATEMENT, [("f", (0,)), ("f", (1,))], []),
    (LAST_STATEMENT, [("f", (0,))], [(6, "the `if` is never true")]),
], ids=["if-both", "if-only-true", "if-only-false", "elif-never-true", "elif-never-false", "loops-never-entered",
        "loops-never-done", "loops-both", "nested-outer", "nested-inner", "one-line", "multi-line-both",
        "and-short-circuit", "or-third-line", "multi-line-never-false", "two-conditions", "conditional-never-false",
        "conditional-both", "exit-both", "exit-never-true"])
def test_the_ways_no_call_takes_are_said(source, calls, expected):
    assert untaken_when(source, *calls) == expected


def test_what_the_lines_cannot_tell_apart_is_not_a_branch():
    """A body on its test's line, a test the compiler folds, a body that leaves no line traced, a
    conditional expression sharing lines or with code after it on its last line: left out."""
    source = textwrap.dedent("""
        def f(x, xs):
            if x: return 1
            while True:
                break
            if x:
                pass
            if x:
                global Y
            y = 1 if x else 2
            z = g(1
                  if x
                  else 2, y)
            for v in xs:
                z += v
            return z


        def g(a, b):
            return a
        """).lstrip("\n")
    assert [(branch.line, branch.kind) for branch in branches(source)] == [(13, "for")]
    assert branches("def f(:\n") == []
    # A module's or a class's body runs on import: its branches are not the tests'.
    assert branches("import os\nif os.sep:\n    A = 1\n\n\nclass C:\n    if os.sep:\n        B = 1\n") == []


def test_a_branch_that_never_ran_is_left_to_the_lines():
    """A function no test calls: its lines are reported, its branches not a second time."""
    assert untaken_when(NESTED + "\n\ndef h():\n    return 0\n", ("h", ())) == []


def test_a_resumed_generator_continues_from_where_it_paused():
    """A generator paused on its test resumes there: the arc from its test to the way it took is recorded,
    not one from its entry."""
    source = textwrap.dedent("""
        def numbers(xs):
            for x in xs:
                if (yield x):
                    break
        """).lstrip("\n")
    arcs = run_traced(source, [("numbers", ([1, 2],))])
    assert (3, 2) in arcs and (-1, 2) in arcs  # entered once, then resumed at line 3 and back to the loop
    assert [(way.line, way.said) for way in untaken(source, arcs)] == [(3, "the `if` is never true")]


def test_untaken_ways_are_said_in_order():
    assert said_untaken([Untaken(57, "the `if` is never false"), Untaken(63, "the `for` never runs its body")]) == \
        "line 57 (the `if` is never false), line 63 (the `for` never runs its body)"


def test_only_frames_of_the_file_are_traced_and_stopping_bounds_what_is_sent():
    source = "def f(n):\n    for i in range(n):\n        len([i])\n    return n\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, FILE, "exec"), namespace)

    def traced(n: int, most_lines: int, most_arcs: int) -> tuple[list[int], list[list[int]]]:
        tracer = Tracer(FILE)
        tracer.start()
        try:
            namespace["f"](n)
        finally:
            reached = tracer.stop(most_lines, most_arcs)
        return reached

    lines, arcs = traced(3, 2, 3)
    assert lines == [1, 2]  # at most 2: the first ones
    assert len(arcs) == 3 and all(len(arc) == 2 for arc in arcs)
    lines, arcs = traced(2, 100, 100)
    assert lines == [1, 2, 3, 4]
    assert {tuple(arc) for arc in arcs} == {(-1, 2), (2, 3), (3, 2), (2, 4), (4, -1)}


@pytest.mark.parametrize(("answer", "expected"), [
    ({"ok": [2, 3], "arcs": [[-1, 2], [2, 3]]}, ([2, 3], [[-1, 2], [2, 3]])),
    ({"ok": [2, 3], "arcs": [[2, "3"]]}, ([2, 3], [])),  # wrong arcs: none, the lines kept
    ({"ok": [0], "arcs": [[-1, 2]]}, ([], [[-1, 2]])),
    ({"ok": [2]}, ([2], [])),
    ({"exc": {}}, ([], [])),
])
def test_a_worker_that_answers_wrong_gives_fewer_lines_or_arcs_never_a_failure(answer, expected):
    """The harness's end of the wire: the worker's answer is checked as data, each list on its own."""
    from grader.harness.client import WorkerClient

    client = object.__new__(WorkerClient)
    client._usable = lambda: None
    client.deadline = lambda limit: None
    client.limits = type("Limits", (), {"call_timeout_s": 1.0})()
    client._send = lambda message, deadline, where: None
    client._receive = lambda deadline, where: answer
    assert client.reached() == expected
