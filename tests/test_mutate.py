"""The mutants the audit makes from a reference: every kind of change, each one change that parses, named
stably, with the reference's own text (comments, layout) kept around it."""

from __future__ import annotations

import ast
import textwrap
from collections import Counter

import pytest

from grader.audit.mutate import OPERATORS, generate_mutants
from tests.helpers import REFERENCE

SAMPLE = textwrap.dedent('''\
    """A sample with one of everything the operators change."""

    import heapq


    class Pool:
        def __init__(self, size: int) -> None:
            self.free = list(range(size))  # the ids, lowest first
            self.held: dict[int, list[int]] = {}

        def take(self, owner: int, count: int) -> list[int]:
            if owner in self.held:
                raise ValueError(f"{owner} already holds blocks")
            if count > len(self.free) or count < 1:
                raise RuntimeError("not enough")
            got = [heapq.heappop(self.free) for _ in range(count)]
            self.held[owner] = got
            return list(got)

        def give_back(self, owner: int) -> int:
            got = self.held[owner]
            for block in got:
                if block < 0:
                    continue
                heapq.heappush(self.free, block)
            del self.held[owner]
            return min(got) + len(got) * 2

        def owners(self) -> list[int]:
            return [owner for owner in self.held if not self.held[owner] == []]
''')


@pytest.mark.unit
def test_every_kind_of_change_is_made_on_a_sample_that_has_one_of_each():
    kinds = Counter(m.operator for m in generate_mutants(SAMPLE))
    assert set(kinds) == set(OPERATORS), set(OPERATORS) - set(kinds)


@pytest.mark.unit
def test_each_mutant_parses_differs_from_the_reference_and_differs_from_every_other():
    for source in (SAMPLE, REFERENCE.read_text()):
        mutants = generate_mutants(source)
        shapes = {ast.dump(ast.parse(m.source)) for m in mutants}
        assert ast.dump(ast.parse(source)) not in shapes
        assert len(shapes) == len(mutants)
        assert len({m.name for m in mutants}) == len(mutants)  # a name picks out one mutant


@pytest.mark.unit
def test_a_mutant_keeps_the_references_text_around_its_one_change():
    mutants = generate_mutants(SAMPLE)
    boundary = next(m for m in mutants if m.name == "Pool.give_back: if block < 0: → if block <= 0:")
    diff = boundary.diff(SAMPLE, "pool.py")
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == ["-            if block < 0:", "+            if block <= 0:"]
    assert "# the ids, lowest first" in boundary.source  # comments stay


@pytest.mark.parametrize(("name", "expected"), [
    ("Pool.take: return list(got) → return got", "return got"),  # the caller gets the manager's own list
    ("Pool.take: return list(got) → return tuple(got)", "return tuple(got)"),
    ("Pool.give_back: del self.held[owner] removed", "pass"),
    ("Pool.give_back: continue → break", "break"),
    ("Pool.give_back: return min(got) + len(got) * 2 → return max(got) + len(got) * 2", "max(got)"),
    ("Pool.take: raise ValueError(f\"{owner} already holds blocks\") → raise KeyError(f\"{owner} already holds "
     "blocks\")", "raise KeyError(f\"{owner}"),
    ("Pool.take: raise RuntimeError(\"not enough\") → raise ValueError(\"not enough\")", "raise ValueError(\"not"),
    ("Pool.take: if count > len(self.free) or count < 1: → if count > len(self.free):", "if count > len(self.free):"),
    ("Pool.owners: return [owner for owner in self.held if not self.held[owner] == []] → return tuple((owner for "
     "owner in self.held if not self.held[owner]", "return tuple("),
])
def test_the_mistakes_students_make_are_among_the_mutants(name, expected):
    """(A long line is cut in a name: the names here are the start of the mutant's name.)"""
    found = [m for m in generate_mutants(SAMPLE) if m.name.startswith(name.removesuffix("..."))]
    assert len(found) == 1, [m.name for m in generate_mutants(SAMPLE)]
    assert expected in found[0].source


@pytest.mark.unit
def test_swapping_statements_that_cannot_see_each_other_makes_no_mutant():
    names = [m.name for m in generate_mutants(SAMPLE) if m.operator == "swap"]
    # Two independent assignments: the same program either way.
    assert not any(name.startswith("Pool.__init__:") for name in names)
    # A write and the return that reads it: the order matters.
    assert "Pool.take: self.held[owner] = got ⇄ return list(got)" in names


@pytest.mark.unit
def test_an_early_return_goes_between_a_functions_statements():
    names = [m.name for m in generate_mutants(SAMPLE) if m.operator == "early return"]
    assert "Pool.give_back: return before del self.held[owner]" in names
    assert not any("return before got = self.held[owner]" in name for name in names)  # not before the first


@pytest.mark.unit
def test_text_that_is_not_ascii_before_a_change_on_its_line_keeps_the_change_in_place():
    source = 'def f(x):\n    return {"é": x < 1}["é"]\n'
    mutant = next(m for m in generate_mutants(source) if m.operator == "comparison")
    assert mutant.source == 'def f(x):\n    return {"é": x <= 1}["é"]\n'


@pytest.mark.unit
def test_messages_annotations_and_docstrings_are_left_alone():
    source = 'def f(x: int = 1) -> int:\n    """Doc 1."""\n    if x:\n        raise ValueError(f"{x + 1} bad")\n    return 2\n'
    for mutant in generate_mutants(source):
        assert '"""Doc 1."""' in mutant.source and "x: int" in mutant.source and "-> int" in mutant.source
        assert "bad" not in mutant.source or 'f"{x + 1} bad"' in mutant.source


@pytest.mark.unit
def test_the_name_stays_when_another_part_of_the_file_changes():
    before = {m.name for m in generate_mutants(SAMPLE)}
    edited = SAMPLE.replace("    def owners(self)", "    def size(self) -> int:\n        return len(self.free)\n\n"
                            "    def owners(self)")
    after = {m.name for m in generate_mutants(edited)}
    assert before <= after
