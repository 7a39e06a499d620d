"""`grader audit`: proof that an exercise's suites are strong enough to trust.

The reference must get full marks, the stub nothing (every test failing cleanly, no harness error),
and every mutant must fail at least one test of the top tier (the tier that runs the most suites) on
every seed it is graded on. The mutants are the author's own (solutions/<slug>/mutants/, one plausible
bug a file) and the ones the audit makes itself from the reference (grader/audit/mutate.py), which find the
mistakes nobody thought of. A generated mutant that behaves exactly as the reference does is declared
in exercise.toml's [audit.equivalent] with its reason; every other one must be caught.

A mutant is graded as a submission is, by the harness, on `[audit] seeds` seeds: first its own, then
others drawn the same way. A test that does not take the `seed` fixture does the same on every seed, so
a mutant one of those catches is caught on all of them and graded once; a mutant only the random
workloads catch is graded on every seed, and must be caught on each: a lucky workload is no catch.

Each tier the exercise declares also gets its figure, how many of the author's mutants its own suites
catch, so an author sees what the free tier leaves unchecked. A tier running a suite the top tier does
not is graded on its own.
"""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from grader.audit.coverage import Untaken, said_untaken, spans, unreached, untaken
from grader.audit.gradings import kept_card
from grader.audit.identity import likeliest
from grader.audit.mutate import Mutant, generate_mutants
from grader.core.backend import Backend
from grader.core.exercise import Exercise, ExerciseError
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard
from grader.core.seed_checks import check_seeds
from grader.core.seeding import audit_seeds
from grader.harness.contract import MutantRun


@dataclass
class AuditRow:
    label: str
    path: Path
    card: Scorecard  # graded on the top tier, on the submission's own seed
    description: str = ""
    problems: list[str] = field(default_factory=list)
    other_cards: dict[str, Scorecard] = field(default_factory=dict)  # tiers the top tier does not cover
    more_seeds: list[Scorecard] = field(default_factory=list)  # the same tier, on the audit's other seeds
    mutant: Mutant | None = None  # a generated mutant's change
    equivalent: str = ""  # why exercise.toml says no test can catch it
    seeded: frozenset[str] = frozenset()  # the tests (base names) whose workloads are drawn from the seed
    # A generated mutant's tests, by card seed, that ran past the audit's shortened call limit and were
    # not run to the exercise's own: they may only be slow, so they catch nothing (`MutantRun`).
    cut_short: dict[int | None, frozenset[str]] = field(default_factory=dict)
    # A correct solution's lines (of its functions) that no test ran, on its own seed; None: not known
    # (a mutant's row, or a grading that ended in error).
    unreached: list[int] | None = None
    untaken: list[Untaken] | None = None  # the same of the ways of its branches that no test took

    def catchers(self, card: Scorecard) -> list[str]:
        """The tests of `card` this submission fails, but those that only ran past a shortened limit."""
        cut = self.cut_short.get(card.seed, frozenset())
        return [t.name for t in card.tests if t.status != "passed" and t.name not in cut]

    @property
    def caught_by(self) -> list[str]:
        """The top tier's tests this submission fails (a generated mutant's: up to the first named one)."""
        return self.catchers(self.card)

    def caught_by_suites(self, suites: tuple[str, ...], tier: str) -> list[str]:
        card = self.other_cards.get(tier, self.card)
        return [t.name for t in card.tests if t.status != "passed" and t.suite in suites]

    @property
    def named_catchers(self) -> list[str]:
        """The tests that catch it and do the same on every seed: a named scenario, not a lucky draw."""
        return [name for name in self.caught_by if _base(name) not in self.seeded]

    @property
    def how_caught(self) -> str:
        """`named` (a test that does the same on every seed catches it), `workload` (only the random
        workloads, on every seed graded), `luck` (on some seeds only), `missed` (on none)."""
        missed = self.missed_on
        if missed:
            return "missed" if len(missed) == len(self.cards) else "luck"
        return "named" if self.named_catchers else "workload"

    @property
    def cards(self) -> list[Scorecard]:
        return [self.card, *self.more_seeds]

    @property
    def missed_on(self) -> list[int | None]:
        """The seeds on which no test caught it."""
        return [card.seed for card in self.cards if card.status == "graded" and not self.catchers(card)]


@dataclass
class TierFigure:
    tier: str
    suites: tuple[str, ...]
    caught: int  # mutants that at least one test of these suites fails
    mutants: int


@dataclass
class Audit:
    reference: AuditRow
    stub: AuditRow
    mutants: list[AuditRow]  # the author's, from solutions/<slug>/mutants/
    tier: str = ""  # the top tier, everything is graded on
    tiers: list[TierFigure] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # of the suites as written (their seeds): not strong
    warnings: list[str] = field(default_factory=list)  # said, for the author to judge
    generated: list[AuditRow] = field(default_factory=list)  # made from the reference (and variants) by grader.audit.mutate
    seeds: int = 1
    variants: list[AuditRow] = field(default_factory=list)  # correct solutions in other styles: full marks too
    mutant_call_limit_s: float = 0.0  # the calls' limit of a generated mutant's first grading (`call_limit_for`)
    exercise_call_limit_s: float = 0.0  # the exercise's own, which every verdict rests on

    @property
    def rows(self) -> list[AuditRow]:
        return [self.reference, *self.variants, self.stub, *self.mutants, *self.generated]

    @property
    def survivors(self) -> list[AuditRow]:
        """Generated mutants some seed let through, and not declared equivalent."""
        return [row for row in self.generated if row.problems]

    @property
    def ok(self) -> bool:
        return not self.refusals and not any(row.problems for row in self.rows)


def mutant_description(path: Path) -> str:
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (SyntaxError, UnicodeDecodeError):
        return "(the mutant does not parse)"
    return doc.strip().splitlines()[0] if doc else "(no description)"


def _base(test_name: str) -> str:
    return test_name.split("[", 1)[0].rsplit("::", 1)[-1]


def run_audit(exercise: Exercise, backend: Backend, backend_name: str, tier: str | None = None,
              on_row: Callable[[AuditRow], None] | None = None, seeds: int | None = None,
              generated: bool = True, jobs: int | None = None,
              on_start: Callable[[int], None] | None = None,
              make_backend: Callable[[], Backend] | None = None, keep_gradings: bool = False) -> Audit:
    """Grade the reference, the stub and every mutant, `jobs` gradings at a time; `on_start` hears how
    many mutants there are before they are graded, `on_row` each row as it is done. With
    `make_backend`, each grading thread makes a backend of its own (a warm one, as a batch's), closed
    at the end; else every grading uses `backend`. With `keep_gradings`, each mutant's gradings are kept
    for `grader misconceptions` (and a later audit) to read instead of grading it again."""
    tier = tier or exercise.top_tier
    for what, path in (("the reference", exercise.reference), ("the stub", exercise.stub)):
        if not path.is_file():
            raise ExerciseError(f"an audit grades {what}, and there is no {path}")
    grader = _AuditGrader(exercise, tier, seeds or exercise.audit.seeds, backend, backend_name, make_backend,
                          keep_gradings)
    reference = _graded_reference(grader, on_row)
    grader.mutant_call_limit_s = call_limit_for(reference.card, exercise.limits.call_timeout_s)
    variants = [_graded_reference(grader, on_row, path) for path in exercise.variants]
    stub = _graded_stub(grader, on_row)
    origins = {"": exercise.reference, **{path.stem: path for path in exercise.variants}}
    made = made_mutants(origins) if generated else []
    if on_start:
        on_start(len(exercise.mutants) + len(made))
    work: list[tuple[str, Path, bytes, Mutant | None]] = [
        (f"mutant {path.stem}", path, path.read_bytes(), None) for path in exercise.mutants]
    work += [(mutant.name, origins[mutant.variant], mutant.source.encode(), mutant) for mutant in made]
    ordered = _graded_mutants(grader, work, jobs, on_row)
    mutants = ordered[:len(exercise.mutants)]
    for row in mutants:
        row.description = mutant_description(row.path)
        _judge(row)
    if len(mutants) == 0:
        stub.problems.append(f"no mutants in {exercise.root / 'solutions' / exercise.slug / 'mutants'}")
    generated_rows = ordered[len(exercise.mutants):]
    warnings = (_judge_generated(exercise, generated_rows, generated) + _diagnosis_warnings(exercise)
                + _coverage_warnings([reference, *variants]))
    figures = [TierFigure(name, suites, sum(1 for row in mutants if row.caught_by_suites(suites, name)), len(mutants))
               for name, suites in exercise.tiers.items()]
    found = check_seeds(exercise)
    return Audit(reference, stub, mutants, tier, figures, found.refusals, found.warnings + warnings,
                 generated_rows, grader.seeds, variants, grader.mutant_call_limit_s, exercise.limits.call_timeout_s)


def call_limit_for(reference: Scorecard, limit_s: float) -> float:
    """The call limit of a generated mutant's first grading: the first of 0.25 s, 0.5 s, 1 s, ... that is
    twice the reference's slowest test (the whole test, every call in it), never more than the exercise's
    `limit_s`. Steps, not the figure itself, so that a kept grading is found again on the next audit."""
    slowest = max((t.duration_s for t in reference.tests), default=0.0)
    step = 0.25
    while step < 2 * slowest and step < limit_s:
        step *= 2
    return min(step, limit_s)


def _cut_short(card: Scorecard, run: MutantRun) -> frozenset[str]:
    return frozenset(t.name for t in card.tests if run.cut_short(t.id, t.status))


def made_mutants(origins: dict[str, Path]) -> list[Mutant]:
    """The mutants made from the reference (origin "") and from each correct variant. A variant's code
    that is the reference's own makes the reference's mutants again, the same change to the same code
    (the same key, names anonymous): only the variant's own code adds mutants."""
    made: list[Mutant] = []
    seen: set[str] = set()
    for name, path in origins.items():
        for mutant in generate_mutants(path.read_text(encoding="utf-8"), name):
            said = mutant.key.removeprefix(f"{name} · ") if name else mutant.key
            if said not in seen:
                made.append(mutant)
            if not name:
                seen.add(said)
    return made


class _AuditGrader:
    """Grades the audit's files into rows: on `backend`, or on a backend of each grading thread's own
    (`make_backend`), which `close` ends."""

    def __init__(self, exercise: Exercise, tier: str, seeds: int, backend: Backend, backend_name: str,
                 make_backend: Callable[[], Backend] | None, keep_gradings: bool = False) -> None:
        self.exercise, self.tier, self.seeds = exercise, tier, seeds
        self.keep_gradings = keep_gradings
        self.backend, self.backend_name, self.make_backend = backend, backend_name, make_backend
        covered = set(exercise.tiers[tier])
        # The tiers running a suite the audited tier does not: a mutant is graded on each of them too.
        self.uncovered = [name for name, suites in exercise.tiers.items() if not set(suites) <= covered]
        # A generated mutant's calls' limit (`MutantRun`), set from the reference's grading (`call_limit_for`).
        self.mutant_call_limit_s = exercise.limits.call_timeout_s
        self.local = threading.local()
        self.made_backends: list[Backend] = []

    def card(self, data: bytes, tier: str, seed: int | None = None, mutant: bool = False,
             lines: set[int] | None = None, arcs: set[tuple[int, int]] | None = None,
             mutant_run: MutantRun | None = None) -> Scorecard:
        """A grading; a mutant's is read from the kept gradings (grader/audit/gradings.py) when the
        audit keeps them and this very grading was kept before. `lines` gets the lines the tests ran,
        `arcs` their arcs; a generated mutant's grading has its `mutant_run`."""
        if self.make_backend is None:
            backend = self.backend
        else:
            if not hasattr(self.local, "backend"):
                self.local.backend = self.make_backend()
                self.made_backends.append(self.local.backend)
            backend = self.local.backend

        def make() -> Scorecard:
            return grade_bytes(data, self.exercise, tier, backend, self.backend_name, seed, lines=lines, arcs=arcs,
                               mutant_run=mutant_run)

        if mutant and self.keep_gradings:
            return kept_card(make, self.exercise, data, tier, seed, self.backend_name, mutant_run)
        return make()

    def generated_card(self, data: bytes, seed: int | None) -> tuple[Scorecard, frozenset[str]]:
        """A generated mutant's grading on `seed`, and the tests of it that only ran past the shortened
        call limit. It is graded until a named test catches it, its calls cut at `mutant_call_limit_s`
        (`MutantRun`). A timeout there may be a mutant that is only slow, so it is no catch: when nothing
        else a named test does catches it, the first named test that ran past the limit runs again to the
        exercise's own; when that one does not catch it either, the whole grading is done again at the
        exercise's limits. No verdict rests on a shortened limit."""
        first = MutantRun(self.mutant_call_limit_s)
        card = self.card(data, self.tier, seed, True, mutant_run=first)
        cut = _cut_short(card, first)
        if card.status != "graded" or not cut or any(first.settles(t.id, t.status, t.seeded) for t in card.tests):
            return card, cut
        named = [t.id for t in card.tests if t.name in cut and not t.seeded]
        if named:
            again = MutantRun(self.mutant_call_limit_s, (named[0],))
            second = self.card(data, self.tier, seed, True, mutant_run=again)
            if second.status == "graded" and any(again.settles(t.id, t.status, t.seeded) for t in second.tests):
                return second, _cut_short(second, again)
        return self.card(data, self.tier, seed, True), frozenset()

    def row(self, label: str, path: Path, data: bytes, mutant: bool = False, made: Mutant | None = None,
            traced: bool = False) -> AuditRow:
        """A file's row; a `traced` one's (a correct solution's) with the lines of it no test reaches and
        the ways of its branches no test takes."""
        every_seed = audit_seeds(data, self.exercise, self.seeds) if mutant else [None]
        reached: set[int] | None = set() if traced else None
        arcs: set[tuple[int, int]] | None = set() if traced else None
        cut: frozenset[str] = frozenset()
        if made is None:
            card = self.card(data, self.tier, every_seed[0], mutant, reached, arcs)
        else:
            card, cut = self.generated_card(data, every_seed[0])
        # Which tests draw from the seed, as the harness found them (a fixture that takes it counts too).
        row = AuditRow(label, path, card, mutant=made, seeded=frozenset(_base(t.name) for t in card.tests if t.seeded),
                       cut_short={card.seed: cut})
        if reached is not None and arcs is not None and row.card.status == "graded":
            source = data.decode("utf-8", errors="replace")
            row.unreached = unreached(source, str(path), reached)
            row.untaken = untaken(source, arcs)
        if mutant and made is None:
            row.other_cards = {name: self.card(data, name, mutant=True) for name in self.uncovered}
        if mutant and row.caught_by and not row.named_catchers:
            # Only the random workloads caught it: each other seed must catch it too.
            for seed in every_seed[1:]:
                if made is None:
                    row.more_seeds.append(self.card(data, self.tier, seed, True))
                else:
                    more, row.cut_short[seed] = self.generated_card(data, seed)
                    row.more_seeds.append(more)
                if row.missed_on:
                    break  # one seed that lets it through is enough to say so
        for card in (*row.cards, *row.other_cards.values()):
            if card.status != "graded":
                row.problems.append(f"{card.tier}: {card.status}: {card.reason}")
        return row

    def close(self) -> None:
        for made_backend in self.made_backends:
            made_backend.close()


def _graded_reference(grader: _AuditGrader, on_row: Callable[[AuditRow], None] | None,
                      variant: Path | None = None) -> AuditRow:
    """The reference's row, or a correct variant's: it must get full marks."""
    path = variant or grader.exercise.reference
    what = f"variant {path.stem}" if variant else "reference"
    reference = grader.row(what, path, path.read_bytes(), traced=True)
    if on_row:
        on_row(reference)
    if reference.card.score != reference.card.max_score or not reference.card.tests:
        failing = [t.name for t in reference.card.tests if t.status != "passed"]
        reference.problems.append(f"the {what} must get full marks; it fails: {', '.join(failing) or 'everything'}")
    return reference


def _graded_stub(grader: _AuditGrader, on_row: Callable[[AuditRow], None] | None) -> AuditRow:
    """The stub's row: it must score 0, every test failing with a clear 'not implemented'."""
    stub = grader.row("stub", grader.exercise.stub, grader.exercise.stub.read_bytes())
    if on_row:
        on_row(stub)
    if stub.card.score != 0:
        stub.problems.append(f"the stub must score 0, it scored {stub.card.score}")
    unclear = [t.name for t in stub.card.tests if t.status != "failed" or "not implemented" not in t.message]
    if unclear:
        stub.problems.append(f"these tests do not fail the stub with a clear 'not implemented': {', '.join(unclear)}")
    return stub


def _graded_mutants(grader: _AuditGrader, work: list[tuple[str, Path, bytes, Mutant | None]], jobs: int | None,
                    on_row: Callable[[AuditRow], None] | None) -> list[AuditRow]:
    """Each mutant's row, `jobs` at a time, in the order of `work`; the gradings' own backends are
    closed at the end."""
    rows: dict[int, AuditRow] = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1), thread_name_prefix="audit") as pool:
            pending: dict[Future[AuditRow], int] = {
                pool.submit(grader.row, label, path, data, True, mutant): k
                for k, (label, path, data, mutant) in enumerate(work)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    rows[pending.pop(future)] = row = future.result()
                    if on_row:
                        on_row(row)
    finally:
        grader.close()
    return [rows[k] for k in range(len(work))]


def _judge_generated(exercise: Exercise, rows: list[AuditRow], generated: bool) -> list[str]:
    """The generated mutants judged, but those [audit.equivalent] declares (by key: grader/audit/identity.py);
    warnings for a declared one a test catches, or one no current mutant has, with the current mutant it
    most likely means."""
    warnings: list[str] = []
    for row in rows:
        assert row.mutant is not None
        row.description = row.mutant.operator
        row.equivalent = exercise.audit.equivalent.get(row.mutant.key, "")
        if row.equivalent and row.caught_by:
            warnings.append(f"{row.mutant.key!r} ({row.mutant.name}) is declared equivalent, but "
                            f"{row.caught_by[0]} catches it: remove it from [audit.equivalent]")
        elif not row.equivalent:
            _judge(row)
    if generated:
        keys = {row.mutant.key: row.mutant for row in rows if row.mutant}
        for key in exercise.audit.equivalent:
            if key in keys:
                continue
            meant = likeliest(key, keys)
            warnings.append(f"[audit.equivalent] names {key!r}, which no mutant of the reference or its variants has now" +
                            (f": it most likely means {meant!r} ({keys[meant].name}); declare that one instead, "
                             "if it is equivalent" if meant else ": remove it"))
    return warnings


def _coverage_warnings(rows: list[AuditRow]) -> list[str]:
    """A warning for each correct solution with lines no test reaches, and one for each with branches
    no test takes both ways: a blind spot of the suites, where a student's mistake goes unseen; not a
    verdict (a line, or a branch's way, may be there for a case no test can make)."""
    lines = [f"lines no test reaches: {row.path.name} {spans(row.unreached)} (the {row.label}): a mistake there "
             "goes unseen; a test should run them" for row in rows if row.unreached]
    return lines + [f"branches no test takes: {row.path.name} {said_untaken(row.untaken)} (the {row.label}): a "
                    "mistake there goes unseen; a test should take them" for row in rows if row.untaken]


def _diagnosis_warnings(exercise: Exercise) -> list[str]:
    """What keeps the misconception diagnosis from telling a student their mistake: a mutant without its
    hint, a signature file missing or made from other files."""
    from grader.audit.signatures import signatures_problem
    from grader.diagnosis.hints import mutant_hint

    found = [f"{path.name} has no `Misconception:` hint in its docstring: no submission will be told its mistake"
             for path in exercise.mutants if not mutant_hint(path)]
    problem = signatures_problem(exercise)
    return [*found, problem] if problem else found


def _judge(row: AuditRow) -> None:
    """A mutant is caught when a named test (one that does the same on every seed) catches it, on every
    seed: a random workload that catches it on every seed graded is a catch no scenario stands for, one
    that catches it on some seeds only is luck."""
    if any(card.status != "graded" for card in row.cards):
        return  # said already: graded with an error
    how = row.how_caught
    if how == "missed":
        row.problems.append("no test catches this mutant")
    elif how == "luck":
        row.problems.append(f"caught by luck: only some seeds catch this mutant (none of the tests fails on seed "
                            f"{row.missed_on[0]}); a test that does not depend on the seed should catch it")
    elif how == "workload":
        row.problems.append(f"caught only by a generated workload ({', '.join(row.caught_by)}), on every seed "
                            "graded: no named test catches it; a named scenario should")
