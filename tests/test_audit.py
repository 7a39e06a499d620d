"""`grader audit`: the real exercise passes it, and a weak suite is caught."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from grader.cli import main
from tests.helpers import EXERCISE, PROJECT, REFERENCE, exercise_copy, worker_for


@pytest.mark.slow
def test_the_exercise_passes_its_audit_with_fifteen_or_more_mutants_and_every_generated_one(capsys):
    assert main(["audit", EXERCISE, "--sandbox", "local"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "the suite is strong" in out
    caught, total = out.split(" mutants caught")[0].rsplit(" ", 1)[1].split("/")
    assert caught == total and int(total) >= 15
    # Every tier the exercise declares gets its figure; the free tier's suite catches only some.
    free = out.split("tier free (visible): its tests catch ")[1].split(" mutants")[0]
    premium = out.split("tier premium (visible, hidden): its tests catch ")[1].split(" mutants")[0]
    assert premium == f"{total} of {total}"
    assert 0 < int(free.split(" of ")[0]) < int(total)
    # The mutants made from the reference: well over a hundred, every one caught but those declared equivalent.
    killed, made = out.split(" generated mutants (from the reference and 1 correct variant) caught on every seed")[0].rsplit(" ", 1)[1].split("/")
    assert killed == made and int(made) >= 100 and "survivor:" not in out


def test_a_mutant_caught_only_by_a_random_workload_or_only_on_a_kind_seed_is_no_catch(capsys):
    """The third exercise (tests/lucky_course): its named tests catch neither realistic bug; its random
    workload catches one on every seed and the other only on the seeds that draw a long enough list.
    The audit says how each was caught, and the suite is not strong."""
    dedupe = PROJECT / "tests" / "lucky_course" / "exercises" / "dedupe"
    assert main(["audit", str(dedupe), "--sandbox", "local", "--no-generated"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "mutant 02_reads_only_the_start: caught by luck: only some seeds catch this mutant" in out
    assert ("mutant 01_only_neighbours: caught only by a generated workload (test_random_lists_match_the_reference), "
            "on every seed graded: no named test catches it") in out
    assert "CAUGHT BY LUCK" in out and "random workload only" in out
    assert "the suite is WEAK" in out and ("0/2 mutants caught by a named test on every seed (1 by random workloads "
                                           "only, 1 caught by luck)") in out


def test_a_mutant_that_no_test_catches_makes_the_audit_fail(tmp_path, capsys):
    folder = exercise_copy(tmp_path)
    mutants = tmp_path / "solutions" / EXERCISE / "mutants"
    shutil.rmtree(mutants)
    mutants.mkdir()
    survivor = mutants / "01_same_as_reference.py"
    survivor.write_text(REFERENCE.read_text())  # identical to the reference: nothing can catch it
    assert main(["audit", str(folder), "--sandbox", "local", "--no-generated"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "no test catches this mutant" in out and "the suite is WEAK" in out



@pytest.mark.unit
def test_tier_figures_follow_the_declared_tiers_whatever_their_names(tmp_path, monkeypatch):
    """No tier name is assumed: the top tier runs the most suites, and a tier it does not cover is
    graded on its own. Grading is stood in for: a file's text names the suite whose test it fails."""
    import grader.audit.audit as audit
    from grader.core.exercise import load_exercise
    from grader.core.scorecard import Scorecard, TestResult

    copy = load_exercise(str(exercise_copy(tmp_path)))
    exercise = replace(copy, tiers={"taster": ("visible",), "everything": ("visible", "hidden"), "odd": ("other",)})
    copy.reference.write_text("ok")
    copy.stub.write_text("stub")
    mutants = copy.reference.parent / "mutants"
    shutil.rmtree(mutants)
    shutil.rmtree(copy.reference.parent / "variants")  # a file's text is what it fails, here: no variant
    mutants.mkdir()
    for name, bug in (("m1", "visible"), ("m2", "hidden"), ("m3", "other")):
        (mutants / f"{name}.py").write_text(bug)
    graded = []

    def fake_grade(data, exercise, tier, backend, name, seed=None, lines=None, arcs=None, mutant_run=None):
        graded.append(tier)
        bug = data.decode()
        tests = [TestResult(f"{suite}::t", f"test_{suite}", suite, "failed" if bug in (suite, "stub") else "passed",
                            0 if bug in (suite, "stub") else 1, 1, message="not implemented" if bug == "stub" else "")
                 for suite in exercise.tiers[tier]]
        return Scorecard(exercise.slug, tier, "", "graded", sum(t.score for t in tests), len(tests), tests=tests)

    monkeypatch.setattr(audit, "grade_bytes", fake_grade)
    result = audit.run_audit(exercise, backend=None, backend_name="none")
    assert result.tier == "everything"
    assert [(f.tier, f.caught, f.mutants) for f in result.tiers] == [("taster", 1, 3), ("everything", 2, 3),
                                                                     ("odd", 1, 3)]
    assert graded.count("odd") == 3  # each mutant once more, on the tier the top tier does not cover
    assert [row.problems for row in result.mutants] == [[], [], ["no test catches this mutant"]]


def test_an_audit_without_the_stub_says_so(tmp_path, capsys):
    folder = exercise_copy(tmp_path)
    (folder / "scheduler.py").unlink()
    assert main(["audit", str(folder), "--sandbox", "local"]) == 2
    assert f"an audit grades the stub, and there is no {folder / 'scheduler.py'}" in " ".join(capsys.readouterr().err.split())


def test_an_exercise_that_cannot_be_graded_gets_no_verdict_on_its_suite(tmp_path, capsys):
    folder = exercise_copy(tmp_path)
    shutil.rmtree(tmp_path / "solutions" / EXERCISE / "mutants")
    visible = folder / "tests" / "test_visible.py"  # a visible test asks for the reference it may not use
    visible.write_text(visible.read_text().replace("def test_decodes_run_before_the_prompt(ns):",
                                                   "def test_decodes_run_before_the_prompt(ns, reference):"))
    assert main(["audit", str(folder), "--sandbox", "local", "--no-generated"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "the exercise is misconfigured" in out and "must say reference = true" in out
    assert "the exercise cannot be graded" in out and "WEAK" not in out


def _seeded_audit(tmp_path, monkeypatch, outcome, reference="ok", equivalent=None, generated=False):
    """An audit with grading stood in for: `outcome(text, seed)` names the tests a file fails on a seed."""
    import grader.audit.audit as audit
    from grader.core.exercise import AuditSettings, load_exercise
    from grader.core.scorecard import Scorecard, TestResult

    copy = load_exercise(str(exercise_copy(tmp_path)))
    exercise = replace(copy, tiers={"free": ("visible",), "premium": ("visible", "hidden")},
                       audit=AuditSettings(3, equivalent or {}))
    copy.reference.write_text(reference)
    copy.stub.write_text("stub")
    mutants = copy.reference.parent / "mutants"
    shutil.rmtree(mutants)
    shutil.rmtree(copy.reference.parent / "variants")  # a file's text is what it fails, here: no variant
    mutants.mkdir()
    for name in ("rule", "random_always", "random_once"):
        (mutants / f"{name}.py").write_text(name)
    graded: list[tuple[str, int | None]] = []
    runs: list[tuple[str, object]] = []  # each grading's text and MutantRun
    names = ("test_decodes_run_before_the_prompt", "test_random_workloads_match_the_reference[mixed]",
             "test_head_that_does_not_fit_blocks_everyone_behind_it")

    def fake_grade(data, exercise, tier, backend, name, seed=None, lines=None, arcs=None, mutant_run=None):
        """As the harness grades: `outcome` names the failing tests (a set) or says how each ends (a dict:
        "failed", "hang": past any limit, "slow": past the shortened limit only); a MutantRun cuts the
        calls of the tests it does not spare and stops at the first catch by a named test."""
        text = data.decode()
        graded.append((text, seed))
        runs.append((text, mutant_run))
        said = {test: "failed" for test in names} if text == "stub" else outcome(text, seed)
        ends = said if isinstance(said, dict) else {test: "failed" for test in said}
        tests = []
        for test in names:
            nodeid, seeded = f"t::{test}", "random" in test
            end = ends.get(test, "passed")
            cut = mutant_run is not None and nodeid not in mutant_run.full_limit
            status = {"failed": "failed", "hang": "timeout", "slow": "timeout" if cut else "passed"}.get(end, "passed")
            tests.append(TestResult(nodeid, test, "visible" if "decodes" in test else "hidden", status,
                                    int(status == "passed"), 1, message="not implemented" if text == "stub" else "",
                                    seeded=seeded))
            if mutant_run is not None and mutant_run.stop_at_catch and mutant_run.settles(nodeid, status, seeded):
                break
        return Scorecard(exercise.slug, tier, "", "graded", sum(t.score for t in tests), len(tests), tests=tests,
                         seed=seed)

    monkeypatch.setattr(audit, "grade_bytes", fake_grade)
    result = audit.run_audit(exercise, backend=None, backend_name="none", generated=generated, jobs=2)
    _seeded_audit.runs = runs  # type: ignore[attr-defined]
    return result, graded


@pytest.mark.unit
def test_a_mutant_only_the_random_workloads_catch_is_graded_on_every_seed_and_is_no_named_catch(tmp_path, monkeypatch):
    firsts: dict[str, int] = {}

    def outcome(text, seed):
        firsts.setdefault(text, seed)
        if text == "rule":
            return {"test_decodes_run_before_the_prompt"}
        if text == "random_always" or (text == "random_once" and seed == firsts[text]):
            return {"test_random_workloads_match_the_reference[mixed]"}
        return set()

    result, graded = _seeded_audit(tmp_path, monkeypatch, outcome)
    problems = {row.path.stem: row.problems for row in result.mutants}
    assert problems["rule"] == []
    # Caught on every seed, but by a random workload alone: no named test stands for the mistake.
    assert problems["random_always"] == ["caught only by a generated workload (test_random_workloads_match_the_"
                                         "reference[mixed]), on every seed graded: no named test catches it; a "
                                         "named scenario should"]
    assert problems["random_once"] and problems["random_once"][0].startswith("caught by luck: only some seeds catch")
    assert {row.path.stem: row.how_caught for row in result.mutants} == {
        "rule": "named", "random_always": "workload", "random_once": "luck"}
    assert not result.ok
    count = {text: sum(1 for t, _ in graded if t == text) for text in ("rule", "random_always", "random_once")}
    # A test that does not take the seed catches on every seed: graded once. The random workloads' catch is
    # checked on each of the three seeds, and the audit stops at the first seed that lets it through.
    assert count == {"rule": 1, "random_always": 3, "random_once": 2}
    assert len({seed for text, seed in graded if text == "random_always"}) == 3


KEY = "f · comparison · return _1 < 1 → return _1 <= 1 · 14ef4769"  # what `x < 1` → `x <= 1` in f is declared by


@pytest.mark.unit
def test_a_generated_mutant_is_graded_until_a_named_test_catches_it_and_no_slow_call_is_a_catch(tmp_path, monkeypatch):
    """A generated mutant's calls are cut short and its grading stops at the first catch by a named test.
    A timeout at the shortened limit is no catch: the named test that ran past it runs again to the
    exercise's limit, and a mutant that is only slow there, caught by nothing else, survives."""
    from grader.harness.contract import MutantRun

    reference = "def f(x):\n    return x < 1\n"
    hangs, slow, wrong = ("def f(x):\n    return x <= 1\n", "def f(x):\n    return x < 2\n",
                          "def f(x):\n    return x < 0\n")

    def outcome(text, seed):
        if text == hangs:  # past any limit in two named tests
            return {"test_decodes_run_before_the_prompt": "hang", "test_head_that_does_not_fit_blocks_everyone_behind_it": "hang"}
        if text == slow:  # past the shortened limit only, and right otherwise
            return {"test_decodes_run_before_the_prompt": "slow"}
        if text == wrong:  # the first named test, and the last
            return {"test_decodes_run_before_the_prompt": "failed",
                    "test_head_that_does_not_fit_blocks_everyone_behind_it": "failed"}
        return set() if text == reference else {"test_decodes_run_before_the_prompt"}

    result, _ = _seeded_audit(tmp_path, monkeypatch, outcome, reference, generated=True)
    runs = _seeded_audit.runs
    rows = {row.mutant.source: row for row in result.generated}
    limit = runs[[text for text, _ in runs].index(hangs)][1].call_limit_s
    assert 0 < limit < 5
    first = "t::test_decodes_run_before_the_prompt"
    # The hang: cut short in both, then the first named one run to the exercise's limit, where it hangs.
    assert [run for text, run in runs if text == hangs] == [MutantRun(limit), MutantRun(limit, (first,))]
    assert rows[hangs].how_caught == "named" and rows[hangs].caught_by == ["test_decodes_run_before_the_prompt"]
    assert not rows[hangs].problems
    # The slow one: cut short, run again with its named test at the exercise's limit (passes), then graded
    # whole at the exercise's limits: nothing catches it, it survives.
    assert [run for text, run in runs if text == slow] == [MutantRun(limit), MutantRun(limit, (first,)), None]
    assert rows[slow].how_caught == "missed" and rows[slow].problems == ["no test catches this mutant"]
    assert rows[slow].mutant in [row.mutant for row in result.survivors] and not result.ok
    # Caught by a named test: one grading, which stopped there (the test after it has no result).
    assert [run for text, run in runs if text == wrong] == [MutantRun(limit)]
    assert [t.name for t in rows[wrong].card.tests] == ["test_decodes_run_before_the_prompt"]
    assert rows[wrong].caught_by == ["test_decodes_run_before_the_prompt"] and rows[wrong].how_caught == "named"
    # The author's own mutants are graded whole, at the exercise's limits: the diagnosis reads all of it.
    assert all(run is None for text, run in runs if text in ("rule", "random_always", "random_once"))


def test_the_harness_cuts_a_mutants_calls_spares_the_tests_named_and_stops_at_a_named_catch():
    """The real harness with a generated mutant's run: an endless loop costs the shortened limit in every
    test but the one spared, which runs to the exercise's limit; a catch by a named test ends the grading,
    the tests after it without a result, and the host takes such a card as graded."""
    from grader.audit.audit import made_mutants
    from grader.core.exercise import load_exercise
    from grader.core.grading import grade_bytes
    from grader.harness.contract import MutantRun
    from grader.sandbox.local import LocalBackend

    exercise = load_exercise(EXERCISE)
    made = made_mutants({"": exercise.reference})
    # Admission's `break` (the head does not fit) made `continue`: schedule() never returns then.
    loop = next(m for m in made if m.key.startswith("Scheduler.schedule · early return · break → continue")
                and "kv_tokens:\n                continue" in m.source)
    backend = LocalBackend(lanes=1)
    cut = grade_bytes(loop.source.encode(), exercise, "premium", backend, "local", mutant_run=MutantRun(0.25))
    assert cut.status == "graded"
    timeouts = [t for t in cut.tests if t.status == "timeout"]
    assert len(timeouts) >= 5 and all("within 0.25 s" in t.message for t in timeouts)
    full = grade_bytes(exercise.reference.read_bytes(), exercise, "premium", backend, "local")
    assert [t.name for t in cut.tests] == [t.name for t in full.tests]  # no named catch: every test ran
    spared = next(t for t in timeouts if not t.seeded)
    run = MutantRun(0.25, (spared.id,))
    again = grade_bytes(loop.source.encode(), exercise, "premium", backend, "local", mutant_run=run)
    assert again.status == "graded"
    names = [t.name for t in again.tests]
    assert names == [t.name for t in full.tests][:len(names)] and names[-1] == spared.name  # stopped at it
    assert "within 5 s" in again.tests[-1].message and again.tests[-1].status == "timeout"
    assert all("within 0.25 s" in t.message for t in again.tests[:-1] if t.status == "timeout")


@pytest.mark.unit
def test_a_generated_mutants_call_limit_steps_from_the_reference_and_never_passes_the_exercises():
    from grader.audit.audit import call_limit_for
    from grader.core.scorecard import Scorecard, TestResult

    def reference(*durations):
        return Scorecard("x", "premium", "", "graded", 1, 1, tests=[
            TestResult(f"t::{k}", f"test_{k}", "hidden", "passed", 1, 1, duration_s=d) for k, d in enumerate(durations)])

    assert call_limit_for(reference(0.01, 0.09), 5) == 0.25
    assert call_limit_for(reference(0.2), 5) == 0.5
    assert call_limit_for(reference(0.3, 0.1), 5) == 1.0
    assert call_limit_for(reference(30.0), 5) == 5
    assert call_limit_for(reference(), 0.1) == 0.1


@pytest.mark.unit
def test_a_mutant_run_is_checked_as_data_and_never_lengthens_a_call():
    import json

    from grader.harness.contract import MutantRun, Run, TestRecord

    run = Run("n", 7, mutant_run=MutantRun(0.25, ("a::t",)))
    assert Run.from_json(run.to_json()) == run and Run.from_json(Run("n", 7).to_json()).mutant_run is None
    for forged in ({"call_limit_s": -1, "full_limit": [], "stop_at_catch": True},
                   {"call_limit_s": "1", "full_limit": [], "stop_at_catch": True},
                   {"call_limit_s": 1, "full_limit": "a::t", "stop_at_catch": True},
                   {"call_limit_s": 1, "full_limit": [], "stop_at_catch": 1},
                   {"call_limit_s": 1, "full_limit": ["x"] * 1001, "stop_at_catch": True},
                   {"call_limit_s": 1, "full_limit": []}):
        with pytest.raises(ValueError):
            Run.from_json(json.dumps({"nonce": "n", "seed": 1, "mutant_run": forged}))
    short = MutantRun(0.25, ("a::t",))
    assert short.call_limit("b::t", 5) == 0.25 and short.call_limit("a::t", 5) == 5
    assert MutantRun(60).call_limit("b::t", 5) == 5  # never more than the exercise's
    assert short.settled(TestRecord("b::t", "hidden", "t", "", "failed"))
    assert short.settled(TestRecord("a::t", "hidden", "t", "", "timeout"))  # at the exercise's limit
    assert not short.settled(TestRecord("b::t", "hidden", "t", "", "timeout"))  # cut short: maybe only slow
    assert not short.settled(TestRecord("b::t", "hidden", "t", "", "failed", seeded=True))  # a random workload
    assert not short.settled(TestRecord("b::t", "hidden", "t", "", "passed"))


@pytest.mark.unit
def test_a_generated_survivor_fails_the_audit_unless_declared_equivalent_with_its_reason(tmp_path, monkeypatch):
    reference = "def f(x):\n    return x < 1\n"

    def outcome(text, seed):  # nothing tells `x <= 1` from the reference
        return set() if text in (reference, "def f(x):\n    return x <= 1\n") else {"test_decodes_run_before_the_prompt"}

    weak, _ = _seeded_audit(tmp_path, monkeypatch, outcome, reference, generated=True)
    assert [(row.mutant.name, row.mutant.key) for row in weak.survivors] == [("f: return x < 1 → return x <= 1", KEY)]
    assert not weak.ok and "no test catches this mutant" in weak.survivors[0].problems
    declared = {KEY: "x is never 1 here", "f: gone → away": "an old one"}
    strong, _ = _seeded_audit(tmp_path / "again", monkeypatch, outcome, reference, declared, generated=True)
    assert strong.ok and not strong.survivors
    assert [row.equivalent for row in strong.generated if row.equivalent] == ["x is never 1 here"]
    assert any("'f: gone → away'" in warning and "which no mutant of the reference or its variants has now" in warning
               for warning in strong.warnings)


@pytest.mark.unit
def test_a_stale_declaration_says_which_current_mutant_it_most_likely_means(tmp_path, monkeypatch):
    """The reference changed around a declared mutant (here: its function renamed): the declaration no
    longer matches, the mutant is a survivor again, and the warning names the key to declare instead."""
    reference = "def g(x):\n    return x < 1\n"
    declared = {KEY: "x is never 1 here"}
    result, _ = _seeded_audit(tmp_path, monkeypatch, lambda text, seed: set() if "<= 1" in text or text == reference
                              else {"test_decodes_run_before_the_prompt"}, reference, declared, generated=True)
    assert not result.ok
    meant = "g · comparison · return _1 < 1 → return _1 <= 1 · "
    stale = [w for w in result.warnings if KEY in w]
    assert len(stale) == 1 and f"it most likely means '{meant}" in stale[0] and "(g: return x < 1 → return x <= 1)" in stale[0]


@pytest.mark.unit
def test_a_survivor_prints_its_declaration_ready_to_paste_and_a_declared_one_shows_ignored(tmp_path, monkeypatch):
    import tomllib
    from rich.console import Console

    from grader.audit.view import print_audit

    reference = "def f(x):\n    return x < 1\n"

    def outcome(text, seed):
        return set() if text in (reference, "def f(x):\n    return x <= 1\n", "def f(x):\n    return x < 2\n") \
            else {"test_decodes_run_before_the_prompt"}

    declared = {KEY: "x is never 1 here"}
    result, _ = _seeded_audit(tmp_path, monkeypatch, outcome, reference, declared, generated=True)
    console = Console(record=True, width=200)
    print_audit(result, console, "scheduler.py")
    out = console.export_text()
    assert "ignored: f: return x < 1 → return x <= 1: x is never 1 here" in out
    pasted = out.split("[audit.equivalent]\n", 1)[1].splitlines()[0].strip()
    survivor = tomllib.loads(f"[audit.equivalent]\n{pasted}")["audit"]["equivalent"]
    assert list(survivor) == ["f · constant · return _1 < 1 → return _1 < 2 · 7087cd6e"]


@pytest.mark.unit
def test_a_declared_equivalent_that_a_test_catches_is_pointed_out(tmp_path, monkeypatch):
    reference = "def f(x):\n    return x < 1\n"
    declared = {KEY: "wrongly thought equivalent"}
    result, _ = _seeded_audit(tmp_path, monkeypatch, lambda text, seed: set() if text == reference else
                              {"test_decodes_run_before_the_prompt"}, reference, declared, generated=True)
    assert result.ok
    assert any("is declared equivalent, but test_decodes_run_before_the_prompt catches it" in w for w in result.warnings)


@pytest.mark.unit
def test_audit_options_are_checked(capsys):
    with pytest.raises(SystemExit):
        main(["audit", EXERCISE, "--seeds", "0"])
    assert "0 must be at least 1" in capsys.readouterr().err


@pytest.mark.unit
def test_the_audit_says_what_keeps_the_diagnosis_from_naming_a_mistake(tmp_path, monkeypatch):
    result, _ = _seeded_audit(tmp_path, monkeypatch, lambda text, seed: {"test_decodes_run_before_the_prompt"})
    assert "rule.py has no `Misconception:` hint in its docstring: no submission will be told its mistake" \
        in result.warnings
    # The copy's mutants are not those its signatures were made from.
    assert any("misconceptions.json is stale" in w and "`grader misconceptions continuous_batching`" in w
               for w in result.warnings)


@pytest.mark.unit
def test_a_mutants_grading_is_kept_once_for_the_audit_and_the_signatures_alike(tmp_path, monkeypatch):
    """`grader audit` and `grader misconceptions` grade an author's mutant on the same seeds: the second
    reads what the first kept. An error is never kept, and a change to the suites is a new grading."""
    from grader.audit.gradings import kept_card
    from grader.core.exercise import load_exercise
    from grader.core.scorecard import Scorecard

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    exercise = load_exercise(str(exercise_copy(tmp_path)))
    made: list[str] = []

    def grading(status):
        def make():
            made.append(status)
            return Scorecard(exercise.slug, "premium", "", status, 1, 2, seed=7)
        return make

    assert kept_card(grading("error"), exercise, b"bug", "premium", 7, "local").status == "error"
    assert kept_card(grading("graded"), exercise, b"bug", "premium", 7, "local").status == "graded"
    again = kept_card(grading("graded"), exercise, b"bug", "premium", 7, "local")
    assert made == ["error", "graded"] and again.score == 1 and again.seed == 7
    kept_card(grading("graded"), exercise, b"bug", "premium", 8, "local")  # another seed: graded
    test_file = sorted(next(iter(exercise.suites.values())).path.glob("test_*.py"))[0]
    test_file.write_text(test_file.read_text() + "\n# changed\n")
    kept_card(grading("graded"), exercise, b"bug", "premium", 7, "local")  # another suite: graded again
    assert made == ["error", "graded", "graded", "graded"]


@pytest.mark.unit
def test_mutants_are_made_from_every_correct_variant_and_say_which():
    """solutions/<slug>/variants/: a correct solution in another style (a set of live ids beside the
    queues) has mistakes of its own; its code that is the reference's makes no mutant twice."""
    from grader.audit.audit import made_mutants
    from grader.audit.mutate import generate_mutants
    from grader.core.exercise import load_exercise

    exercise = load_exercise(EXERCISE)
    assert [path.stem for path in exercise.variants] == ["live_ids"]
    made = made_mutants({"": exercise.reference, "live_ids": exercise.variants[0]})
    own = [m for m in made if m.variant == "live_ids"]
    assert len(made) - len(own) == len(generate_mutants(REFERENCE.read_text()))
    assert own and all(m.key.startswith("live_ids · ") and m.name.startswith("live_ids · ") for m in own)
    assert "live_ids · Scheduler.complete: self._live.discard(req.rid) removed" in {m.name for m in own}
    assert all("_live" in m.name for m in own)  # only the variant's own code
    declared = set(load_exercise(EXERCISE).audit.equivalent)
    assert any(key.startswith("live_ids · ") for key in declared)


def test_the_lines_and_branches_of_the_reference_that_no_test_reaches_are_reported(tmp_path, capsys):
    """A reference with a branch no test takes (dedupe of something not a list): the audit names its
    lines, as a warning that leaves the verdict alone; the lines the tests run are not named. A branch
    whose lines all run but that no test takes one way (a check that is never false) is named too."""
    shutil.copytree(PROJECT / "tests" / "lucky_course", tmp_path / "course",
                    ignore=shutil.ignore_patterns("__pycache__"))
    reference = tmp_path / "course" / "solutions" / "dedupe" / "dedupe.py"
    source = reference.read_text()
    assert "    seen: set[int] = set()\n" in source and source.endswith("    return kept\n")
    reference.write_text(source.replace("    seen: set[int] = set()\n", "    if not isinstance(values, list):\n"
                                        "        raise TypeError('dedupe takes a list')\n"
                                        "    seen: set[int] = set()\n")
                         .replace("    return kept\n", "    if len(kept) <= len(values):\n        kept = kept[:]\n"
                                  "    return kept\n"))
    assert main(["audit", str(tmp_path / "course" / "exercises" / "dedupe"), "--sandbox", "local",
                 "--no-generated"]) == 1  # weak as before: its mutants are caught by luck
    out = " ".join(capsys.readouterr().out.split())
    assert "warning: lines no test reaches: dedupe.py 6 (the reference)" in out
    assert "every line of dedupe.py is reached" not in out
    # The `for` runs its body and runs out, the `if` in it goes both ways: only the two checks are named.
    assert ("warning: branches no test takes: dedupe.py line 5 (the `if` is never true), line 13 (the `if` is "
            "never false) (the reference): a mistake there goes unseen; a test should take them") in out
    assert "every branch of dedupe.py" not in out


def test_every_line_reached_is_said(capsys):
    """The third exercise's tests run every line of its reference, and take each branch both ways."""
    dedupe = PROJECT / "tests" / "lucky_course" / "exercises" / "dedupe"
    main(["audit", str(dedupe), "--sandbox", "local", "--no-generated", "--seeds", "1"])
    out = " ".join(capsys.readouterr().out.split())
    assert "reference: every line of dedupe.py is reached by a test" in out and "lines no test reaches" not in out
    assert "reference: every branch of dedupe.py is taken each way by a test" in out
    assert "branches no test takes" not in out


def test_a_traced_worker_answers_the_lines_and_arcs_that_ran():
    """The worker of an audit's grading records the lines and arcs of the submission's file from the
    request to trace on; one never asked answers none."""
    from grader.audit.coverage import Untaken, untaken

    source = "def f(xs):\n    for x in xs:\n        if x:\n            return x\n    return 0\n"
    with worker_for(source) as client:
        assert client.reached() == ([], [])
    with worker_for(source) as client:
        client.trace_lines()
        assert client.lookup("f")([0, 2]) == 2
        lines, arcs = client.reached()
    assert lines == [1, 2, 3, 4]
    assert {(a, b) for a, b in arcs} == {(-1, 2), (2, 3), (3, 2), (3, 4), (4, -1)}
    assert untaken(source, {(a, b) for a, b in arcs}) == [Untaken(2, "the `for` never runs out")]


@pytest.mark.unit
def test_the_lines_that_could_run_are_the_functions_lines_with_code():
    """A docstring, a comment, a blank line, a module's or a class's body hold no line a test could
    miss; a function's `def`, its branches and its comprehensions do."""
    from grader.audit.coverage import function_lines, spans, unreached

    source = ('"""doc"""\nLIMIT = 3\n\n\nclass A:\n    size = 1\n\n    def m(self, x):\n        """doc"""\n'
              '        # why\n        if x:\n            return [i for i in range(x)]\n        return []\n')
    assert function_lines(source, "a.py") == {8, 11, 12, 13}
    assert unreached(source, "a.py", {8, 11, 13, 99}) == [12]
    assert function_lines("def f(:\n", "a.py") == set()
    assert spans([41, 57, 58, 59, 61]) == "41, 57-59, 61" and spans([]) == ""


@pytest.mark.unit
def test_only_an_audit_asks_for_the_lines_and_what_comes_back_is_checked_as_data():
    """A grading traces nothing unless its caller hands in `lines`; the lines each record says ran are
    gathered into it; a record whose lines are not a bounded list of line numbers makes the run unreadable."""
    from grader.core.backend import PlainBackend, RawRun
    from grader.core.exercise import load_exercise
    from grader.core.grading import expected_max, grade_bytes
    from grader.harness.contract import MAX_LINES, Results, Run, TestRecord, results_line, valid_lines

    exercise = load_exercise(EXERCISE)
    sent: list[Run] = []

    def backend_saying(lines):
        def backend(ex, source, tier, run):
            sent.append(run)
            records = [TestRecord(f"{suite}/x.py::{name}", suite, name, "", lines=lines(k))
                       for k, (suite, name) in enumerate(expected_max(ex, tier))]
            return RawRun(results_line(Results.of(run.nonce, [], records)).encode(), 0, False, 0.1)
        return PlainBackend(backend)

    plain = grade_bytes(REFERENCE.read_bytes(), exercise, "free", backend_saying(lambda k: []), "fake")
    assert plain.status == "graded" and sent[-1].trace_lines is False
    assert Run.from_json(sent[-1].to_json()).trace_lines is False
    reached: set[int] = set()
    card = grade_bytes(REFERENCE.read_bytes(), exercise, "free", backend_saying(lambda k: [k + 1, 40]), "fake",
                       lines=reached)
    assert card.status == "graded" and sent[-1].trace_lines is True and Run.from_json(sent[-1].to_json()).trace_lines
    assert reached == {40} | {k + 1 for k in range(len(card.tests))}
    for forged in (["7"], [0], [True], [10**8], list(range(1, MAX_LINES + 2))):
        with pytest.raises(ValueError):
            valid_lines(forged)
        bad = grade_bytes(REFERENCE.read_bytes(), exercise, "free", backend_saying(lambda k, f=forged: f), "fake",
                          lines=set())
        assert bad.status == "error" and "could not be read" in bad.reason



@pytest.mark.unit
def test_the_arcs_each_record_says_ran_are_gathered_and_checked_as_data():
    """The arcs (line before, line after; a function's entry and exit as minus its first line) of every
    test's record are gathered into `arcs`; a record whose arcs are not a bounded list of pairs of line
    numbers makes the run unreadable."""
    from grader.core.backend import PlainBackend, RawRun
    from grader.core.exercise import load_exercise
    from grader.core.grading import expected_max, grade_bytes
    from grader.harness.contract import MAX_ARCS, Results, TestRecord, results_line, valid_arcs

    exercise = load_exercise(EXERCISE)

    def backend_saying(arcs):
        def backend(ex, source, tier, run):
            records = [TestRecord(f"{suite}/x.py::{name}", suite, name, "", lines=[7], arcs=arcs(k))
                       for k, (suite, name) in enumerate(expected_max(ex, tier))]
            return RawRun(results_line(Results.of(run.nonce, [], records)).encode(), 0, False, 0.1)
        return PlainBackend(backend)

    lines: set[int] = set()
    arcs: set[tuple[int, int]] = set()
    card = grade_bytes(REFERENCE.read_bytes(), exercise, "free", backend_saying(lambda k: [[-3, 5], [5, k + 6]]),
                       "fake", lines=lines, arcs=arcs)
    assert card.status == "graded" and lines == {7}
    assert arcs == {(-3, 5)} | {(5, k + 6) for k in range(len(card.tests))}
    assert valid_arcs([[-3, 5], [5, -3]]) == [[-3, 5], [5, -3]]
    with pytest.raises(ValueError):
        valid_arcs([(1, 2)])  # pairs as lists, as JSON has them
    for forged in ("x", [[1]], [[1, 2, 3]], [[0, 1]], [[True, 1]], [["1", 2]], [[1, 10**8]], [[1, 2.0]],
                   [[1, 2]] * (MAX_ARCS + 1)):
        with pytest.raises(ValueError):
            valid_arcs(forged)
        bad = grade_bytes(REFERENCE.read_bytes(), exercise, "free", backend_saying(lambda k, f=forged: f), "fake",
                          lines=set(), arcs=set())
        assert bad.status == "error" and "could not be read" in bad.reason
