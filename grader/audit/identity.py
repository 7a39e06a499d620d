"""A generated mutant's key: what it changes, with the reference's own names made anonymous.

exercise.toml declares a generated mutant equivalent by its key, so the key must pick out the same
mutant after edits that do not touch it, and never another one. Mutation tools match mutants across
runs by file, operator, location and replacement (Stryker); a location in lines moves with every edit
above it, so here the location is the function the change is in, and the change is said as the code it
changes, before and after, with every name the reference defines (its variables, attributes, arguments,
functions) replaced by `_1`, `_2`, ... in the order they appear: renaming `self._d` to `self._entries`
changes no key. Names the reference does not define (`len`, `append`, `heapq.heappush`, `self`) stay:
they are the mistake's meaning.

The code said is the changed statement whole (a compound statement: its header), so two changes alike
on one line are told apart by the rest of their statement, and a digest of the whole of it makes the
key exact. Two mutants whose changes are alike on their own within one function (`if _1 == 0:` removed,
twice) are told apart by the statements that hold them, with the names numbered as the whole function
numbers them (`in 3fa9c1`: `for _5 in self._2:` is not `for _5 in self._7:`), then by the outermost of
those statements whole (`· 0b1e2c`: two loops alike in their headers differ in their bodies); only those
alike in all of that are told apart by where the statement is in the function (`at 3.1`: the fourth statement's second).
Never by the order they were found in, which would let one declaration excuse the other after an edit. A declaration whose key no current mutant has is stale, and
`likeliest` names the current mutant it most likely meant.
"""

from __future__ import annotations

import ast
import copy
import difflib
import hashlib
from collections.abc import Iterable, Sequence

BODIES = ("body", "orelse", "handlers", "finalbody", "cases")
KEPT_NAMES = frozenset({"self", "cls"})  # a convention, not a name the author chose


def defined_names(tree: ast.AST) -> frozenset[str]:
    """The names the reference itself gives: what it assigns, its arguments, functions, classes, the
    attributes it sets and the names it imports things as."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            found.add(node.attr)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)) and node.name:
            found.add(node.name)
        elif isinstance(node, ast.alias) and node.asname:
            found.add(node.asname)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
    return frozenset(found - KEPT_NAMES)


def header(node: ast.AST) -> ast.AST:
    """A compound statement without its bodies (`if x > 0:`), any other node as it is."""
    if not isinstance(node, ast.stmt) or not any(isinstance(getattr(node, name, None), list) and
                                                 name in BODIES for name in node._fields):
        return node
    shallow = copy.copy(node)
    for name in BODIES:
        if isinstance(getattr(shallow, name, None), list):
            setattr(shallow, name, [])
    return shallow


class Anonymiser:
    """The reference's own names replaced by `_1`, `_2`, ... in the order they are first met (in the
    code's own order: `req.prefilled` is `_1._2`), one numbering shared by every piece of code said in
    one key (a change's before and its after). `numbers` starts it from a numbering made before (a
    function's own, which tells apart two statements alike but for the names they use)."""

    def __init__(self, defined: frozenset[str], numbers: dict[str, str] | None = None) -> None:
        self.defined = defined
        self.numbers: dict[str, str] = dict(numbers or {})

    def _number(self, name: str) -> str:
        if name not in self.defined:
            return name
        return self.numbers.setdefault(name, f"_{len(self.numbers) + 1}")

    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = self._number(node.name)
        if isinstance(node, ast.Attribute):
            self._visit(node.value)
            node.attr = self._number(node.attr)
            return
        if isinstance(node, ast.Name):
            node.id = self._number(node.id)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg is not None:
            node.arg = self._number(node.arg)
        for child in ast.iter_child_nodes(node):
            self._visit(child)

    def number_all(self, node: ast.AST) -> dict[str, str]:
        """Number every name of `node` (a function), in order, without saying it: the numbering."""
        self._visit(copy.deepcopy(node))
        return self.numbers

    def whole(self, node: ast.AST) -> str:
        """The node's code whole (a compound statement with its bodies), anonymised."""
        shown = copy.deepcopy(node)
        self._visit(shown)
        return ast.unparse(shown)

    def text(self, node: ast.AST) -> str:
        """The node's code (a compound statement's header), anonymised, on one line."""
        shown = copy.deepcopy(header(node))
        self._visit(shown)
        try:
            text = ast.unparse(shown)
        except (AttributeError, TypeError, ValueError):
            text = ast.dump(shown, annotate_fields=False)
        return " ".join(text.split())


def change_key(scope: str, operator: str, before: Sequence[str], after: str) -> str:
    """`Class.method · operator · <before> → <after> · <digest>`: `before` the statements (or the
    expression's statement) the change touches as the reference has them, `after` as the mutant has
    them, or words (`removed`); both said by one `Anonymiser`."""
    said_before = " ⇄ ".join(before)
    digest = hashlib.sha256(f"{scope}\0{operator}\0{said_before}\0{after}".encode()).hexdigest()[:8]
    return f"{scope or '<module>'} · {operator} · {said_before} → {after} · {digest}"


def context_digest(texts: Sequence[str]) -> str:
    """Six hex digits of the statements around a change (its enclosing statements' headers and its own,
    numbered as their function numbers them): two changes alike on their own, told apart by what holds
    them, whatever the names are called."""
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()[:6]


def where(path: Iterable[tuple[str, int]]) -> str:
    """A statement's place in its function: `3.1` is the fourth statement's body's second;
    `2.orelse.0` the third statement's `else`'s first."""
    return ".".join(str(index) if field == "body" else f"{field}.{index}" for field, index in path)


def likeliest(stale: str, current: Iterable[str], cutoff: float = 0.5) -> str | None:
    """The current key a stale declaration most likely meant: the most alike in its words (the same
    function and operator count most), None when none is alike enough."""
    def said(key: str) -> str:
        return key.rsplit(" · ", 1)[0] if key.count(" · ") >= 3 else key

    best, score = None, cutoff
    for key in current:
        ratio = difflib.SequenceMatcher(None, said(stale), said(key), autojunk=False).ratio()
        if ratio > score:
            best, score = key, ratio
    return best
