"""The lines and branches of a correct solution that no test reaches: what the suites never run or never
decide both ways, so no mutant there can be caught but by luck, and a student's mistake there goes unseen.

The lines and arcs that ran come from the audit's own gradings of the reference and each correct variant
(the worker records them: grader/confined/tracing.py, asked by `grade_bytes(lines=..., arcs=...)`); the
lines that could run are those of the solution's compiled functions, read from their code objects on the
host, which compiles the file and never imports it, and its branches are read from its syntax tree. A
module's or a class's body runs when the file is imported, whatever the tests do, so only the lines and
branches of functions (methods, lambdas, comprehensions) count.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from types import CodeType


def function_lines(source: str, filename: str) -> set[int]:
    """The lines of the functions defined in `source` that hold code (a docstring or a comment does not);
    none when it does not compile."""
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return set()
    lines: set[int] = set()
    pending: list[CodeType] = [code]
    while pending:
        current = pending.pop()
        if current.co_flags & inspect.CO_NEWLOCALS:  # a function's frame; a module's or class's body is not
            lines.update(line for _, _, line in current.co_lines() if line is not None)
        pending.extend(const for const in current.co_consts if isinstance(const, CodeType))
    return lines


def unreached(source: str, filename: str, reached: set[int]) -> list[int]:
    """The lines of the functions of `source` that no test ran, in order."""
    return sorted(function_lines(source, filename) - reached)


def spans(lines: list[int]) -> str:
    """`41, 57-59`: sorted line numbers, runs of consecutive ones as ranges."""
    parts: list[str] = []
    start = previous = None
    for line in [*lines, None]:
        if start is not None and previous is not None and line == previous + 1:
            previous = line
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = line
    return ", ".join(parts)


# -- branches ----------------------------------------------------------------------------------------
# The worker records arcs, each step from one line to the next in one call of a function (a function's
# entry and exit as minus its first line: grader/confined/tracing.py). A branch's way was taken when an
# arc shows it: from the lines its decision is made on into its body, or out elsewhere. Only what lines
# can tell apart is judged, and a way is said never taken only when no arc could be it: a branch whose
# body shares a line with its test (`if x: return`), whose test is a constant (compiled away), or whose
# body makes no code (`pass` alone, `global`) is left out, rather than guessed at.

_CLOSING = re.compile(r"[\s)\]},]*(#.*)?")  # what may follow a conditional expression on its last line


@dataclass(frozen=True)
class Branch:
    """A decision in a function of the solution, and the lines that tell which way it went."""

    line: int  # where it is said to be: the statement's first line, a conditional expression's `if`
    kind: str  # "if", "elif", "while", "for" or "conditional"
    decided: frozenset[int]  # the lines the decision is made on: the test, a loop's header
    body: frozenset[int]  # the lines of the way taken: the body, a conditional expression's value if true
    # A conditional expression's value if false; None for a statement, whose other way goes anywhere but
    # its body: the `else`, past the statement, back to an enclosing loop, or out of the function (`exit`).
    orelse: frozenset[int] | None
    exit: int  # minus the first line of the function it is in: the arc that leaves it ends there

    def ways(self, arcs: set[tuple[int, int]]) -> tuple[bool, bool, bool]:
        """(the decision ran, its first way was taken, its other way was taken) by `arcs`."""
        ran = any(a in self.decided or b in self.decided for a, b in arcs)
        if self.orelse is None:
            into = {b for a, b in arcs if a in self.decided}
            return (ran, bool(into & self.body),
                    any(b not in self.decided and b not in self.body and (b > 0 or b == self.exit) for b in into))
        # A conditional expression: where it jumps from is not its test's line on every Python (3.11 jumps
        # from the expression's first line, the value's if true), so the first way is told by leaving that
        # value elsewhere than into the test or the other value, the other way by entering its value.
        orelse = self.orelse
        near = self.decided | self.body | orelse
        return (ran, any(a in self.body and b not in near for a, b in arcs),
                any(b in orelse and a not in orelse for a, b in arcs))

    def untaken(self, arcs: set[tuple[int, int]]) -> str | None:
        """What `arcs` never did of this branch, in words; None when it did both, or never ran."""
        ran, first, other = self.ways(arcs)
        if not ran or (first and other):
            return None
        name = {"conditional": "the conditional expression"}.get(self.kind, f"the `{self.kind}`")
        if not first and not other:
            return f"{name} never goes either way"
        if self.kind in ("for", "while"):
            return f"{name} never runs its body" if not first else (
                f"{name}'s condition is never false" if self.kind == "while" else f"{name} never runs out")
        return f"{name} is never {'true' if not first else 'false'}"


@dataclass(frozen=True)
class Untaken:
    """A way of a branch no test took."""

    line: int
    said: str  # "the `if` is never false"


def branches(source: str) -> list[Branch]:
    """The branches of the functions defined in `source` (a module's or a class's body, which runs on
    import, has none) that lines can tell the ways of; none when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    finder = _BranchFinder(source.splitlines())
    finder.visit(tree)
    return sorted(finder.found, key=lambda branch: branch.line)


def untaken(source: str, arcs: set[tuple[int, int]]) -> list[Untaken]:
    """The ways of the branches of `source` no arc shows taken, those of branches that ran, in order."""
    found = []
    for branch in branches(source):
        said = branch.untaken(arcs)
        if said is not None:
            found.append(Untaken(branch.line, said))
    return found


def said_untaken(untaken: list[Untaken]) -> str:
    """`line 57 (the `if` is never false), line 63 (the `for` never runs its body)`."""
    return ", ".join(f"line {way.line} ({way.said})" for way in untaken)


def _block(body: list[ast.stmt]) -> frozenset[int]:
    """The lines of a block of statements, from its first statement's decorators on."""
    first = min(node.lineno for node in ast.walk(body[0]) if isinstance(node, (ast.stmt, ast.expr)))
    return frozenset(range(first, (body[-1].end_lineno or body[-1].lineno) + 1))


def _span(first: int, nodes: list[ast.expr]) -> frozenset[int]:
    """From line `first` to the last line of `nodes`."""
    return frozenset(range(first, max(node.end_lineno or node.lineno for node in nodes) + 1))


def _may_compile_away(test: ast.expr) -> bool:
    """A test the compiler may fold into a constant, or drop: one that names nothing."""
    return not any(isinstance(node, ast.Name) and node.id != "__debug__" for node in ast.walk(test))


def _makes_code(body: list[ast.stmt]) -> bool:
    """Some statement of `body` surely runs code, so a line of it is traced when it is entered: `pass`,
    `global`, a bare constant or annotation may leave no line behind."""
    for statement in body:
        if isinstance(statement, (ast.Pass, ast.Global, ast.Nonlocal)):
            continue
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue
        if isinstance(statement, ast.AnnAssign) and statement.value is None:
            continue
        if isinstance(statement, (ast.If, ast.While)) and isinstance(statement.test, ast.Constant):
            continue
        return True
    return False


class _BranchFinder(ast.NodeVisitor):
    """Walks a module for the branches of its functions, knowing which function each is in."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.exit: int | None = None  # the function being walked's, or None outside any
        self.found: list[Branch] = []

    def _function(self, first: int, outside: list[ast.AST], body: list[ast.stmt] | list[ast.expr]) -> None:
        """A function whose code object starts at line `first` (its first decorator's, as Python counts):
        what runs where it is defined (decorators, defaults, annotations) is of the enclosing code."""
        for part in outside:
            self.visit(part)
        saved, self.exit = self.exit, -first
        for statement in body:
            self.visit(statement)
        self.exit = saved

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
        self._function(first, [*node.decorator_list, node.args, *([node.returns] if node.returns else [])], node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node.lineno, [node.args], [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        saved, self.exit = self.exit, None  # a class's body runs once, as the module's does
        self.generic_visit(node)
        self.exit = saved

    def _statement(self, node: ast.If | ast.While | ast.For, kind: str, header: list[ast.expr]) -> None:
        if self.exit is not None and node.body:
            decided = _span(node.lineno, header)
            body = _block(node.body)
            if not (decided & body) and _makes_code(node.body) and not (
                    kind in ("if", "elif", "while") and _may_compile_away(header[0])):
                self.found.append(Branch(node.lineno, kind, decided, body, None, self.exit))
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        line = self.lines[node.lineno - 1] if node.lineno <= len(self.lines) else ""
        kind = "elif" if line[node.col_offset:].startswith("elif") else "if"
        self._statement(node, kind, [node.test])

    def visit_While(self, node: ast.While) -> None:
        self._statement(node, "while", [node.test])

    def visit_For(self, node: ast.For) -> None:
        self._statement(node, "for", [node.target, node.iter])

    def visit_IfExp(self, node: ast.IfExp) -> None:
        test, body, orelse = node.test, node.body, node.orelse
        end = orelse.end_lineno or 0
        rest = self.lines[end - 1][orelse.end_col_offset or 0:] if 0 < end <= len(self.lines) else ""
        # Its value if false alone on its lines (nothing after it there that runs whichever way), each
        # part on lines of its own, and a test that is not a constant.
        if (self.exit is not None and (body.end_lineno or 0) < test.lineno and (test.end_lineno or 0) < orelse.lineno
                and _CLOSING.fullmatch(rest) and not _may_compile_away(test)):
            self.found.append(Branch(test.lineno, "conditional", _span(test.lineno, [test]),
                                     _span(body.lineno, [body]), _span(orelse.lineno, [orelse]), self.exit))
        self.generic_visit(node)
