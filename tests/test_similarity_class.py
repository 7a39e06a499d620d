"""The similarity report on a class of the project's own making (tests/similarity_class/, ground truth
in its ANSWERS.toml): 20 solutions written independently, 3 disguised copies (renamed, reordered,
comments and blank lines changed, one with dead code), the stub handed in as is by two students, and a
lightly disguised copy of the reference."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import tomllib

from grader.cli import main
from grader.core.exercise import load_exercise
from grader.similarity import compare, sources
from tests.helpers import EXERCISE, PROJECT

CLASS = PROJECT / "tests" / "similarity_class"
ANSWERS = tomllib.loads((CLASS / "ANSWERS.toml").read_text())
COPIES = {frozenset((c["copy"], c["of"])) for c in ANSWERS["copies"]} | \
    {frozenset((ANSWERS["reference_copy"]["student"], "reference"))}


def class_report(folder: Path = CLASS):
    exercise = load_exercise(EXERCISE)
    documents = sources.from_folder(folder, exercise) + sources.reference(exercise)
    return compare(documents, sources.given_code(exercise), EXERCISE, limit=None)


@pytest.mark.unit
def test_the_folder_is_what_its_answers_say():
    students = {p.stem for p in CLASS.glob("*.py")}
    listed = {*ANSWERS["honest"], *ANSWERS["stub"], *(c["copy"] for c in ANSWERS["copies"]),
              ANSWERS["reference_copy"]["student"]}
    assert students == listed and len(ANSWERS["honest"]) == 20 and len(ANSWERS["copies"]) == 3
    stub = load_exercise(EXERCISE).stub.read_bytes()
    assert all((CLASS / f"{name}.py").read_bytes() == stub for name in ANSWERS["stub"])
    assert any(c["dead_code"] for c in ANSWERS["copies"])


@pytest.mark.unit
def test_every_copy_ranks_above_every_honest_pair_and_the_stubs_match_nothing():
    report = class_report()
    scored = {frozenset((p.a.label, p.b.label)): p.score for p in report.pairs}
    copies = {pair: scored.get(pair, 0.0) for pair in COPIES}
    honest = {pair: score for pair, score in scored.items() if pair not in COPIES}
    lowest_copy, highest_honest = min(copies.items(), key=lambda kv: kv[1]), max(honest.items(), key=lambda kv: kv[1])
    assert lowest_copy[1] > highest_honest[1], (sorted(lowest_copy[0]), lowest_copy[1], sorted(highest_honest[0]),
                                                highest_honest[1])
    assert [frozenset((p.a.label, p.b.label)) for p in report.pairs[:len(COPIES)]] == \
        sorted(COPIES, key=lambda pair: -scored[pair])
    stubs = set(ANSWERS["stub"])
    assert not any(stubs & {p.a.label, p.b.label} for p in report.pairs), "starter code made students alike"
    assert all(d.fingerprints == 0 for d in report.documents if d.label in stubs)
    assert sorted(frozenset(c) for c in report.clusters) == sorted(COPIES, key=sorted)
    assert report.widely_shared == [], "an honest class was said to share one solution"


@pytest.mark.slow
def test_the_graded_class_report_says_who_fails_alike_and_renders_with_its_regions_marked(tmp_path, new_page):
    """The class graded into a store, with two disguised copies of one wrong solution added: the report
    says they fail the same tests, and its pages show both files with the shared regions marked."""
    from playwright.sync_api import expect

    folder = tmp_path / "class"
    shutil.copytree(CLASS, folder)
    # A mistake its tests catch alike on every seed (each file has its own seed): add() refusing an exact fit.
    wrong = next(p for p in load_exercise(EXERCISE).mutants if p.stem == "21_add_rejects_exact_fit").read_text()
    (folder / "walt.py").write_text(wrong)
    disguised = re.sub(r"\bplan\b", "batch", re.sub(r"\bleft\b", "room", wrong)).replace("# ", "#  note: ")
    (folder / "zeke.py").write_text(disguised)
    db = tmp_path / "class.db"
    assert main(["batch", str(folder), "--exercise", EXERCISE, "--db", str(db), "--jobs", "2",
                 "--sandbox", "local"]) == 0
    out, data_file = tmp_path / "report", tmp_path / "report.json"
    assert main(["similarity", "--exercise", EXERCISE, "--db", str(db), "--out", str(out),
                 "--json", str(data_file)]) == 0
    data = json.loads(data_file.read_text())
    pairs = {frozenset((p["a"], p["b"])): p for p in data["pairs"]}
    alike = pairs[frozenset(("walt", "zeke"))]
    assert alike["behaviour"]["kind"] == "same-failures" and alike["behaviour"]["both_failed"], alike["behaviour"]
    assert pairs[frozenset(("dmitri", "quentin"))]["behaviour"]["kind"] == "both-pass"
    assert data["pairs"][0]["rank"] == 1 and data["students"] == len(list(folder.glob("*.py")))

    rank = alike["rank"]
    page = new_page(1400, 900)
    page.goto((out / "index.html").as_uri())
    row = page.locator("table.pairs tr", has=page.locator(f'a[href="pairs/{rank}.html"]'))
    expect(row).to_contain_text("both fail the same")
    row.locator("a.sim-score").click()
    expect(page).to_have_url(re.compile(rf"pairs/{rank}\.html$"))
    expect(page.locator("h1")).to_have_text(re.compile(r"(walt and zeke|zeke and walt)"))
    for side in ("walt", "zeke"):
        marked = page.locator(f'section.sim-file[aria-label="{side}"] tr[data-region]')
        assert marked.count() > 10, side  # most of the copied file is one shared region or more
        colour = marked.first.locator("td.src").evaluate("cell => getComputedStyle(cell).backgroundColor")
        assert colour not in ("rgba(0, 0, 0, 0)", "transparent"), colour
    plain = page.locator("section.sim-file tr:not([data-region]) td.src").first
    assert plain.evaluate("cell => getComputedStyle(cell).backgroundColor") in ("rgba(0, 0, 0, 0)", "transparent")
    page.locator("ol.regions a").first.click()
    expect(page).to_have_url(re.compile(r"#a-1$"))
    expect(page.locator("#a-1")).to_be_in_viewport()
