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
        assert len({m.key for m in mutants}) == len(mutants)  # a key picks out one mutant


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
    """(The names here are the start of the mutant's name.)"""
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


def renamed(source: str, names: dict[str, str]) -> str:
    """`source` with each name of `names` renamed wherever it stands as a name (never inside a string)."""
    import io
    import re
    import tokenize

    def in_fstring(text: str) -> str:  # Python 3.11 reads an f-string as one token: its fields by hand
        return re.sub(r"\{([^{}]*)\}", lambda field: "{" + re.sub(
            r"\b\w+\b", lambda word: names.get(word.group(), word.group()), field.group(1)) + "}", text)

    tokens = [(kind, names.get(text, text) if kind == tokenize.NAME else
               in_fstring(text) if kind == tokenize.STRING and text[:1] in "fF" else text)
              for kind, text, *_ in tokenize.generate_tokens(io.StringIO(source).readline)]
    return tokenize.untokenize(tokens)


RENAMES = {
    "continuous_batching": {"running": "_active", "reserved": "_held_tokens", "left": "budget_left", "req": "the_req"},
    "paged_kv_cache": {"_tables": "_entries", "_free": "_spare_blocks", "seq_id": "sid"},
}


@pytest.mark.unit
@pytest.mark.parametrize("slug", sorted(RENAMES))
def test_a_rename_in_the_reference_changes_no_mutants_key_and_no_declarations_match(slug):
    """Renaming `self._tables` to `self._entries` (and a local, and an argument) is no edit of any mutant:
    every key stays, so every [audit.equivalent] declaration still picks out the mutant it meant."""
    from grader.core.exercise import load_exercise

    exercise = load_exercise(slug)
    source = exercise.reference.read_text()
    changed = renamed(source, RENAMES[slug])
    assert changed != source and all(f"{new}" in changed for new in RENAMES[slug].values())
    before, after = generate_mutants(source), generate_mutants(changed)
    assert [m.key for m in before] == [m.key for m in after]
    assert [m.name for m in before] != [m.name for m in after]  # what a reader sees does follow the rename
    declared = set(exercise.audit.equivalent)
    for variant in exercise.variants:  # a variant's mutants, renamed alike
        text = variant.read_text()
        assert [m.key for m in generate_mutants(text, variant.stem)] == \
            [m.key for m in generate_mutants(renamed(text, RENAMES[slug]), variant.stem)]
        after += generate_mutants(renamed(text, RENAMES[slug]), variant.stem)
    assert declared and declared <= {m.key for m in after}


@pytest.mark.unit
def test_an_edit_elsewhere_changes_no_mutants_key():
    """A method added, a statement added to another method: every key of the mutants they do not touch stays."""
    source = REFERENCE.read_text()
    edited = source.replace("    def complete(", "    def idle(self) -> bool:\n        return not self.running\n\n"
                            "    def complete(", 1)
    assert edited != source
    before = {m.key for m in generate_mutants(source)}
    after = {m.key for m in generate_mutants(edited)}
    assert before <= after and any(key.startswith("Scheduler.idle ·") for key in after - before)


@pytest.mark.unit
def test_no_key_is_cut_and_mutants_alike_in_one_function_are_told_apart_by_what_holds_them():
    mutants = generate_mutants(REFERENCE.read_text())
    removed = [m for m in mutants if m.name == "Scheduler.schedule: if left == 0: removed"]
    assert len(removed) == 2 and len({m.key for m in removed}) == 2
    assert not any("(#" in m.key or "..." in m.key or " · at " in m.key for m in mutants)
