"""Mutants made from a reference solution: the mistakes `grader audit` tries an exercise's suites on.

A suite's author writes mutants by hand for the mistakes they expect; the ones nobody expected are the
ones that get full marks. So the audit also makes its own: each mutation operator looks at one node of
the reference's syntax tree and proposes a changed version of it (a boundary moved, a constant off by
one, a check or a copy dropped, two statements swapped, another exception raised, ...). A mutant is the
reference's own text with only that node's span rewritten, so its diff is one readable change; the
mutated text is parsed again and must give exactly the tree the operator meant, else it is dropped.

The standard library's `ast` does this in one small module: a maintained mutation library would bring
its own runner and trampolines, and the harness, not the library, must decide kill or survive (the
measurements are in docs/benchmarks.md).

A mutant's name says where and what (`Scheduler.schedule: left > 0 → left >= 0`), for a reader; its
key (grader/audit/identity.py) is how exercise.toml declares it equivalent: what it changes, with the
reference's own names made anonymous, so it stays the same when other parts of the file change and when
a name is renamed.
"""

from __future__ import annotations

import ast
import copy
import difflib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from grader.audit.identity import Anonymiser, change_key, context_digest, defined_names, where

# What each operator turns an operator into (one change each: the nearest mistake, not every one).
COMPARISONS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
ARITHMETIC: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
COPIES = {"list", "tuple", "dict", "set", "sorted", "deque"}  # list(x) -> x: the caller gets the original
EXCEPTIONS = {"ValueError": "KeyError"}  # any other raised type becomes a ValueError
SWAPPED_CALLS = {"min": "max", "max": "min"}


@dataclass(frozen=True)
class Mutant:
    name: str  # where and what, for a reader: "Scheduler.add: need > k → need >= k"
    operator: str  # the kind of change, one of OPERATORS
    line: int  # the first line it changes, in the reference
    source: str  # the whole mutated file
    key: str = ""  # what [audit.equivalent] names it by: the same across renames and unrelated edits
    variant: str = ""  # the correct solution it was made from ("": the reference)

    def diff(self, reference: str, filename: str) -> str:
        return "".join(difflib.unified_diff(reference.splitlines(keepends=True), self.source.splitlines(keepends=True),
                                            f"a/{filename}", f"b/{filename}", n=1))


OPERATORS = ("comparison", "constant", "arithmetic", "boolean", "condition", "statement", "copy", "collection",
             "exception", "swap", "early return", "call")


@dataclass
class _Site:
    """One place a change can go: the node, where it hangs in its parent, the function holding it, the
    statement holding it (the node itself for a statement) and that statement's place in the function."""
    node: ast.AST
    parent: ast.AST
    field: str
    index: int | None
    scope: str
    statement: ast.stmt | None = None
    path: tuple[tuple[str, int], ...] = ()
    holders: tuple[ast.stmt, ...] = ()  # the statements holding `statement` within its function, outermost first
    scope_node: ast.AST | None = None  # the function (class, module) it is in
    scope_path: tuple[tuple[str, int | None], ...] = ()  # how to reach it from the module: (field, index)...


@dataclass
class _Change:
    operator: str
    replacement: ast.AST | list[ast.stmt]  # a node for the site, or the statements for a whole block


def _sites(tree: ast.Module) -> Iterator[_Site]:
    def walk(node: ast.AST, scope: str, statement: ast.stmt | None, path: tuple[tuple[str, int], ...],
             holders: tuple[ast.stmt, ...], scope_node: ast.AST, trail: tuple[tuple[str, int | None], ...],
             scope_path: tuple[tuple[str, int | None], ...]) -> Iterator[_Site]:
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "decorator_list", "type_comment"):
                continue  # annotations and decorators say nothing a test can see
            children = value if isinstance(value, list) else [value]
            for index, child in enumerate(children):
                if not isinstance(child, ast.AST) or isinstance(child, ast.JoinedStr):
                    continue  # f-strings are messages: a changed message is no mistake
                inner, inner_statement, inner_path, inner_holders = scope, statement, path, holders
                if isinstance(child, ast.stmt):
                    inner_statement, inner_path = child, (*path, (name, index))
                    inner_holders = (*holders, statement) if statement is not None else holders
                yield _Site(child, node, name, index if isinstance(value, list) else None, scope,
                            inner_statement, inner_path, inner_holders, scope_node, scope_path)
                child_trail = (*trail, (name, index if isinstance(value, list) else None))
                inner_scope, inner_scope_path = scope_node, scope_path
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner, inner_path, inner_holders = (f"{scope}.{child.name}" if scope else child.name), (), ()
                    inner_scope, inner_statement, inner_scope_path = child, None, child_trail
                if isinstance(child, ast.Raise):
                    continue  # a raise's message is not behaviour; its type is (the exception operator)
                yield from walk(child, inner, inner_statement, inner_path, inner_holders, inner_scope, child_trail,
                                inner_scope_path)

    yield from walk(tree, "", None, (), (), tree, (), ())


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _expression_changes(node: ast.AST) -> Iterator[_Change]:
    if isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            if type(op) in COMPARISONS:
                new = copy.deepcopy(node)
                new.ops[k] = COMPARISONS[type(op)]()
                yield _Change("comparison", new)
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        for value in (node.value + 1, node.value - 1):
            yield _Change("constant", ast.Constant(value))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield _Change("boolean", ast.Constant(not node.value))
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in ARITHMETIC:
        changed = copy.deepcopy(node)
        changed.op = ARITHMETIC[type(node.op)]()
        yield _Change("arithmetic", changed)
    elif isinstance(node, ast.BoolOp):
        flipped = copy.deepcopy(node)
        flipped.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield _Change("boolean", flipped)
        for k in range(len(node.values)):  # one of the checks dropped
            rest = [copy.deepcopy(v) for j, v in enumerate(node.values) if j != k]
            yield _Change("condition", rest[0] if len(rest) == 1 else ast.BoolOp(node.op, rest))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield _Change("boolean", copy.deepcopy(node.operand))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name in COPIES and len(node.args) == 1 and not node.keywords \
                and not isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)):
            yield _Change("copy", copy.deepcopy(node.args[0]))
        if name == "list":
            yield _Change("collection", ast.Call(ast.Name("tuple", ast.Load()), copy.deepcopy(node.args),
                                                  copy.deepcopy(node.keywords)))
        if name in SWAPPED_CALLS:
            call = copy.deepcopy(node)
            call.func = ast.Name(SWAPPED_CALLS[name], ast.Load())
            yield _Change("call", call)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "copy" \
            and not node.args and not node.keywords:
        yield _Change("copy", copy.deepcopy(node.func.value))
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) \
            and node.slice.lower is node.slice.upper is node.slice.step is None:
        yield _Change("copy", copy.deepcopy(node.value))  # x[:] -> x


def _condition_changes(node: ast.AST) -> Iterator[_Change]:
    negatable = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)  # the comparison operator negates those
    if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not isinstance(node.test, ast.UnaryOp) \
            and not (isinstance(node.test, ast.Compare) and len(node.test.ops) == 1
                     and isinstance(node.test.ops[0], negatable)):
        new = copy.deepcopy(node)
        new.test = ast.UnaryOp(ast.Not(), new.test)
        yield _Change("condition", new)


def _return_changes(node: ast.AST) -> Iterator[_Change]:
    """A list built to be returned comes back as a tuple: `return [..]`, `return list(..)`."""
    if isinstance(node, ast.Return) and isinstance(node.value, (ast.List, ast.ListComp)):
        value = node.value
        inner: ast.expr = ast.GeneratorExp(value.elt, value.generators) if isinstance(value, ast.ListComp) \
            else ast.Tuple(value.elts, ast.Load())
        if isinstance(inner, ast.GeneratorExp):
            inner = ast.Call(ast.Name("tuple", ast.Load()), [inner], [])
        yield _Change("collection", ast.Return(copy.deepcopy(inner)))


def _raise_changes(node: ast.AST) -> Iterator[_Change]:
    if not isinstance(node, ast.Raise) or node.exc is None:
        return
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    if isinstance(exc, ast.Name):
        new = copy.deepcopy(node)
        target = new.exc.func if isinstance(new.exc, ast.Call) else new.exc
        assert isinstance(target, ast.Name)
        target.id = EXCEPTIONS.get(exc.id, "ValueError")
        yield _Change("exception", new)


def _block_changes(body: list[ast.stmt], function: bool, modules: frozenset[str]) -> Iterator[tuple[int, _Change]]:
    """Changes to a block as a whole: a statement removed, two neighbours swapped, an early return."""
    for i, stmt in enumerate(body):
        if _is_docstring(stmt) or isinstance(stmt, (ast.Pass, ast.Import, ast.ImportFrom, ast.FunctionDef,
                                                    ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
            continue  # a dataclass field without a default: removing it is no mistake a student makes
        yield i, _Change("statement", [*body[:i], ast.Pass(), *body[i + 1:]])
        if i + 1 < len(body) and _order_matters(stmt, body[i + 1], modules):
            yield i, _Change("swap", [*body[:i], body[i + 1], stmt, *body[i + 2:]])
        if function and i > 0 and not isinstance(stmt, ast.Return):
            yield i, _Change("early return", [*body[:i], ast.Return(None), *body[i:]])
    for i, stmt in enumerate(body):
        if isinstance(stmt, (ast.Break, ast.Continue)):
            other = ast.Continue() if isinstance(stmt, ast.Break) else ast.Break()
            yield i, _Change("early return", [*body[:i], other, *body[i + 1:]])


def _path(node: ast.AST) -> str | None:
    """`self._refs[b].x` -> "self._refs.x"'s root part "self._refs": what a statement reads or writes."""
    while isinstance(node, (ast.Subscript, ast.Starred)):
        node = node.value
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


PURE_CALLS = {"len", "range", "list", "tuple", "dict", "set", "sorted", "min", "max", "sum", "any", "all", "abs",
              "int", "str", "bool", "isinstance", "enumerate", "zip", "reversed", "deque"}


@dataclass
class _Effects:
    writes: set[str]  # dotted paths: "self._refs", "table"
    reads: set[str]
    jumps: bool  # returns, raises, breaks or continues
    shows: bool  # writes what may outlive the call: an attribute, an item, through a call


def _effects(stmt: ast.stmt, modules: frozenset[str]) -> _Effects:
    """What a statement writes and reads, whether it jumps and whether a write may be seen from outside."""
    writes: set[str] = set()
    reads: set[str] = set()
    jumps = shows = False

    def visit(node: ast.AST) -> None:
        nonlocal jumps, shows
        if isinstance(node, (ast.Return, ast.Raise, ast.Break, ast.Continue, ast.FunctionDef, ast.ClassDef)):
            jumps = True
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Starred)):
            path = _path(node)
            if path:
                stored = isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del))
                (writes if stored else reads).add(path)
                shows = shows or (stored and not isinstance(node, ast.Name))
                while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):  # the chain is one path
                    if isinstance(node, ast.Subscript):
                        visit(node.slice)
                    node = node.value
                return
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in PURE_CALLS):
            # A call may change what it is called on; a function (heapq.heappush) what it is given.
            shows = True
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            method = receiver is not None and _path(receiver) not in modules
            for target in ([receiver] if method and receiver is not None else node.args):
                path = _path(target)
                if path:
                    writes.add(path)
        if isinstance(node, ast.AugAssign):
            path = _path(node.target)
            if path:
                reads.add(path)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(stmt)
    return _Effects(writes, reads, jumps, shows)


def _overlap(one: set[str], other: set[str]) -> bool:
    return any(a == b or a.startswith(b + ".") or b.startswith(a + ".") for a in one for b in other)


def _order_matters(first: ast.stmt, second: ast.stmt, modules: frozenset[str]) -> bool:
    """Swapping two neighbours can change behaviour: one jumps past a change the other makes where it can
    be seen, or one writes what the other touches. (Two independent assignments swapped, or a local
    assignment moved across a raise, are the same program: no mutant at all.)"""
    if isinstance(second, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    one, other = _effects(first, modules), _effects(second, modules)
    if (one.jumps and (other.jumps or other.shows)) or (other.jumps and one.shows):
        return True
    return _overlap(one.writes, other.writes | other.reads) or _overlap(other.writes, one.reads)


def _code(line: str) -> str:
    """A line as a name shows it: no indent, no trailing comment, spaces collapsed (never cut: the whole
    line is the change a reader sees)."""
    code = line.split("  #", 1)[0] if "  #" in line else line
    return " ".join(code.split())


def _changed_line(source: _Source, node: ast.AST, text: str | None) -> str:
    """`before → after` for the first line the change touches."""
    if text is None:
        return ""
    line = getattr(node, "lineno", 1) - 1
    new_lines = text.splitlines()
    before = _code(source.lines[line].decode())
    after = _code(new_lines[line]) if line < len(new_lines) else ""
    return f"{before} → {after}"


class _Source:
    """The reference's text as UTF-8 lines: the offsets `ast` gives are in bytes."""

    def __init__(self, text: str) -> None:
        self.lines = [line.encode() for line in text.splitlines(keepends=True)]

    def replace(self, first: int, col: int, last: int, end_col: int, new: str) -> str:
        before = b"".join(self.lines[:first - 1]) + self.lines[first - 1][:col]
        after = self.lines[last - 1][end_col:] + b"".join(self.lines[last:])
        return (before + new.encode() + after).decode()

    def whole_lines(self, node: ast.stmt) -> bool:
        """The statement stands alone on its lines (no `a; b`), so its lines can be moved as they are."""
        start = self.lines[node.lineno - 1][:node.col_offset]
        end = self.lines[node.end_lineno - 1][node.end_col_offset:] if node.end_lineno else b"x"
        return not start.strip() and (not end.strip() or end.lstrip().startswith(b"#"))

    def indent(self, node: ast.stmt) -> str:
        return self.lines[node.lineno - 1][:node.col_offset].decode()

    def first_line(self, node: ast.stmt) -> str:
        return _code(self.lines[node.lineno - 1].decode())

    def statement_text(self, node: ast.stmt) -> str:
        assert node.end_lineno is not None
        return b"".join(self.lines[node.lineno - 1:node.end_lineno]).decode()


def _shape(tree: ast.AST) -> str:
    return ast.dump(tree, annotate_fields=False)


def _follow(tree: ast.AST, path: tuple[tuple[str, int | None], ...]) -> ast.AST | None:
    """The node `path` leads to from `tree` (a function or class, from its module), None where there is none."""
    node: Any = tree
    for name, index in path:
        node = getattr(node, name, None)
        if index is not None:
            node = node[index] if isinstance(node, list) and index < len(node) else None
        if not isinstance(node, ast.AST):
            return None
    found: ast.AST = node
    return found


def _scope_shape(tree: ast.AST, site: _Site) -> tuple[tuple[tuple[str, int | None], ...], str]:
    """The shape of the function (class, module) a change is in, and where it is: a change touches
    nothing outside it, so comparing it alone costs the function's size, not the file's."""
    scope = _follow(tree, site.scope_path)
    return site.scope_path, _shape(scope) if scope is not None else ""


def _parsed_scope(text: str, site: _Site, lines: int) -> tuple[tuple[tuple[str, int | None], ...], str]:
    """`_scope_shape` of a mutant's text, parsing only the lines of the function the change is in (the
    file around it is the reference's own): what keeps making mutants linear in the file's size.
    `lines` is the reference's count of lines; a change may add or remove some, inside the function."""
    scope = site.scope_node
    if not site.scope_path or not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
            or scope.end_lineno is None:
        return _scope_shape(ast.parse(text), site)
    first = min([scope.lineno, *(d.lineno for d in scope.decorator_list)])
    mutated = text.splitlines(keepends=True)
    region = "".join(mutated[first - 1:scope.end_lineno + len(mutated) - lines])
    wrapped = f"if 1:\n{region}" if scope.col_offset else region  # an indented block parses inside an `if`
    body = ast.parse(wrapped).body
    node = body[0].body[0] if scope.col_offset and isinstance(body[0], ast.If) and body[0].body else body[0]
    if len(body) != 1:
        return site.scope_path, ""
    return site.scope_path, _shape(node)


def _apply(tree: ast.Module, site: _Site, replacement: ast.AST | list[ast.stmt]) -> Callable[[], None]:
    """Put the change into the tree in place; the returned function takes it out again."""
    if isinstance(replacement, list):
        holder = getattr(site.parent, site.field)
        saved = list(holder)
        holder[:] = replacement
        return lambda: holder.__setitem__(slice(None), saved)
    if site.index is None:
        setattr(site.parent, site.field, replacement)
        return lambda: setattr(site.parent, site.field, site.node)
    holder = getattr(site.parent, site.field)
    holder[site.index] = replacement
    return lambda: holder.__setitem__(site.index, site.node)


def _block_text(source: _Source, body: list[ast.stmt], new_body: list[ast.stmt]) -> str | None:
    """The block's lines rewritten: a statement kept keeps its own text, a new one takes the block's
    indent; the lines between statements (comments, blank lines) stay in their places."""
    if not all(source.whole_lines(s) for s in body):
        return None
    indent = source.indent(body[0])
    kept = {id(s): source.statement_text(s) for s in body}
    parts = [kept.get(id(s), f"{indent}{ast.unparse(s)}\n") for s in new_body]
    gaps = [b"".join(source.lines[a.end_lineno or 0:b.lineno - 1]).decode() for a, b in zip(body, body[1:])]
    text = "".join(part + (gaps[k] if k < len(gaps) else "") for k, part in enumerate(parts))
    last = body[-1].end_lineno or 0
    return b"".join(source.lines[:body[0].lineno - 1]).decode() + text + b"".join(source.lines[last:]).decode()


def generate_mutants(reference: str, variant: str = "") -> list[Mutant]:
    """Every mutant the operators make of `reference`, in the file's order, each distinct, each parsing,
    each with a key no other has (`variant` names the correct solution it was made from)."""
    tree = ast.parse(reference)
    source = _Source(reference)
    found: list[tuple[Mutant, tuple[str, str], tuple[tuple[str, int], ...]]] = []
    seen: set[tuple[tuple[tuple[str, int | None], ...], str]] = set()  # each scope's shapes, its original's first
    defined = defined_names(tree)
    modules = frozenset(alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                        for alias in node.names)

    numberings: dict[int, dict[str, str]] = {}

    def around(site: _Site, statements: list[ast.stmt]) -> tuple[str, str]:
        """What holds a change, numbered as its function numbers it (read before the change is put in):
        the headers of the statements holding it and its own; then the outermost of them whole."""
        scope = site.scope_node if site.scope_node is not None else tree
        if id(scope) not in numberings:
            numberings[id(scope)] = Anonymiser(defined).number_all(scope)
        names = Anonymiser(defined, numberings[id(scope)])
        headers = context_digest([names.text(held) for held in (*site.holders, *statements)])
        outermost = (site.holders or statements)[0]
        whole = context_digest([names.whole(outermost), *(names.text(s) for s in statements)])
        return headers, whole

    originals: set[tuple[tuple[str, int | None], ...]] = set()

    def unchanged(site: _Site) -> None:
        """The scope's original shape among those seen (read before any change of it is put in)."""
        if site.scope_path not in originals:
            originals.add(site.scope_path)
            seen.add(_scope_shape(tree, site))

    def keep(operator: str, line: int, site: _Site, what: str, text: str | None, undo: Callable[[], None],
             key: str, context: tuple[str, str], path: tuple[tuple[str, int], ...]) -> None:
        try:
            expected = _scope_shape(tree, site)
        finally:
            undo()
        if text is None or expected in seen:
            return
        try:
            if _parsed_scope(text, site, len(source.lines)) != expected:
                return
        except SyntaxError:
            return
        seen.add(expected)
        scope = site.scope
        origin = f"{variant} · " if variant else ""  # a variant's mutants are its own: no key of the reference's
        found.append((Mutant(f"{origin}{scope or '<module>'}: {what}", operator, line, text, origin + key, variant),
                      context, path))

    for site in list(_sites(tree)):
        node = site.node
        unchanged(site)
        if isinstance(node, ast.stmt) and site.index is not None and site.index == 0:
            body = getattr(site.parent, site.field)
            function = isinstance(site.parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and site.field == "body"
            for i, change in _block_changes(body, function, modules):
                assert isinstance(change.replacement, list)
                old = body[i]
                text = _block_text(source, list(body), change.replacement)
                names = Anonymiser(defined)
                before: list[ast.AST] = [old]
                if change.operator == "statement":
                    what, after = f"{source.first_line(old)} removed", "removed"
                elif change.operator == "swap":
                    what, after = f"{source.first_line(old)} ⇄ {source.first_line(body[i + 1])}", "swapped"
                    before.append(body[i + 1])
                elif isinstance(old, (ast.Break, ast.Continue)):
                    after = "continue" if isinstance(old, ast.Break) else "break"
                    what = f"{source.first_line(old)} → {after}"
                else:
                    what, after = f"return before {source.first_line(old)}", "return before it"
                key = change_key(site.scope, change.operator, [names.text(n) for n in before], after)
                context = around(site, body[i:i + 2] if change.operator == "swap" else [old])
                undo = _apply(tree, site, change.replacement)
                keep(change.operator, old.lineno, site, what, text, undo, key, context,
                     (*site.path[:-1], (site.field, i)))
        if isinstance(node, ast.stmt) and isinstance(site.parent, ast.Module):
            continue  # module level: imports and definitions, nothing a mutant changes as a whole
        changes = [*_expression_changes(node), *_condition_changes(node), *_return_changes(node), *_raise_changes(node)]
        for change in changes:
            assert isinstance(change.replacement, ast.AST)
            if isinstance(node, ast.stmt):
                text = _rewrite_statement(source, node, change.replacement) if source.whole_lines(node) else None
            else:
                assert isinstance(node, ast.expr) and node.end_lineno is not None and node.end_col_offset is not None
                new = ast.unparse(change.replacement)
                text = source.replace(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, new)
                if not _parses_as(text, tree, site, change.replacement, len(source.lines)):  # precedence: say it with brackets
                    text = source.replace(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, f"({new})")
            what = _changed_line(source, node, text)
            statement = site.statement if site.statement is not None else node
            names = Anonymiser(defined)
            said_before = names.text(statement)
            context = around(site, [statement]) if isinstance(statement, ast.stmt) else ("", "")
            undo = _apply(tree, site, change.replacement)
            said_after = names.text(change.replacement if statement is node else statement)
            key = change_key(site.scope, change.operator, [said_before], said_after)
            keep(change.operator, node.lineno, site, what, text, undo, key, context, site.path)
    return _told_apart(found)


def _told_apart(found: list[tuple[Mutant, tuple[str, str], tuple[tuple[str, int], ...]]]) -> list[Mutant]:
    """Keys made unique: mutants alike on their own within a function are told apart by the statements
    holding them (grader/audit/identity.py), those alike in that too by where their statement is in it;
    never by the order they were found in."""
    counts = Counter(mutant.key for mutant, _, _ in found)
    headed = [(replace(mutant, key=f"{mutant.key} · in {context[0]}") if counts[mutant.key] > 1 else mutant,
               context[1], path) for mutant, context, path in found]
    counts = Counter(mutant.key for mutant, _, _ in headed)
    held = [(replace(mutant, key=f"{mutant.key} · {context}") if counts[mutant.key] > 1 else mutant, path)
            for mutant, context, path in headed]
    counts = Counter(mutant.key for mutant, _ in held)
    told = [replace(mutant, key=f"{mutant.key} · at {where(path)}") if counts[mutant.key] > 1 else mutant
            for mutant, path in held]
    again = Counter(mutant.key for mutant in told)
    if len(again) != len(told):  # the same change twice at one place: the operators made one mutant twice
        raise AssertionError(f"two generated mutants share a key: {[k for k, n in again.items() if n > 1]}")
    return told


def _rewrite_statement(source: _Source, node: ast.stmt, replacement: ast.AST) -> str | None:
    """A changed statement in place of the old: a one-line header (`if`, `while`) keeps its body's text."""
    assert node.end_lineno is not None and node.end_col_offset is not None
    if isinstance(node, (ast.If, ast.While)) and isinstance(replacement, (ast.If, ast.While)):
        test = node.test
        assert test.end_lineno is not None and test.end_col_offset is not None
        return source.replace(test.lineno, test.col_offset, test.end_lineno, test.end_col_offset,
                              ast.unparse(replacement.test))
    if isinstance(node, ast.Raise) and isinstance(replacement, ast.Raise):
        # Only the exception's name changes: the message keeps its own text.
        old = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        new = replacement.exc.func if isinstance(replacement.exc, ast.Call) else replacement.exc
        assert old is not None and new is not None and old.end_lineno is not None and old.end_col_offset is not None
        return source.replace(old.lineno, old.col_offset, old.end_lineno, old.end_col_offset, ast.unparse(new))
    if node.lineno != node.end_lineno:
        return None  # a statement over several lines, other than those above: unparsed it would lose its layout
    return source.replace(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, ast.unparse(replacement))


def _parses_as(text: str, tree: ast.Module, site: _Site, replacement: ast.AST, lines: int) -> bool:
    undo = _apply(tree, site, replacement)
    try:
        expected = _scope_shape(tree, site)
    finally:
        undo()
    try:
        return _parsed_scope(text, site, lines) == expected
    except SyntaxError:
        return False
