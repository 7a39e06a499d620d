"""The HTML and Markdown feedback reports: what they show for real runs, and that nothing a submission
writes can become markup, a link, a template or a leak of the hidden suite."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from grader.cli import main
from grader.core.scorecard import LockedTest, Scorecard
from grader.core.scorecard import TestResult as Result
from grader.harness.feedback import Feedback
from grader.report import (
    MESSAGE_LIMIT,
    OUTPUT_LIMIT,
    clip,
    clip_tail,
    md_cell,
    md_code,
    md_fence,
    md_text,
    printable,
    render_html,
    render_markdown,
    report_view,
    squeeze_blank_lines,
    timeline,
    trace_rows,
)
from tests import golden
from tests.helpers import EXERCISE, PROJECT, REFERENCE, STUB, mutant_file

pytestmark = pytest.mark.unit

MUTANT = mutant_file("03_skip_blocked_head")
EVIL = ("<script>alert(1)</script> {{ 7*7 }} {% raw %} [click](http://evil.example/x) "
        "![img](http://evil.example/i.png) ``` www.evil.example <img src=x onerror=alert(2)>")
NOT_IMPLEMENTED = 'raise NotImplementedError("schedule() is not implemented yet")'

# The tags the HTML report is built from: anything else in a page came from a submission.
OUR_TAGS = {"html", "head", "meta", "title", "style", "body", "main", "header", "footer", "nav", "section",
            "div", "span", "p", "b", "h1", "h2", "h3", "ul", "ol", "li", "a", "code", "pre", "details",
            "summary", "figure", "figcaption", "table", "thead", "tbody", "tr", "th", "td", "svg", "circle",
            "rect", "line", "path", "text"}


@pytest.fixture(scope="module")
def cards() -> dict[str, Scorecard]:
    """Real scorecards, graded once and kept (tests/golden/; tests/test_golden.py keeps them current)."""
    return {name: golden.load(case) for name, case in {
        "reference": "reference", "stub": "stub", "mutant": "mutant", "evil": "evil_free",
        "timeout": "timeout_free", "rejected": "rejected_unclosed"}.items()}


@pytest.fixture(scope="module")
def rendered(cards: dict[str, Scorecard]) -> dict[str, tuple[str, str]]:
    return {name: (render_html(card), render_markdown(card)) for name, card in cards.items()}


def showcase() -> Scorecard:
    """A hand-made scorecard with every status, long texts and hostile text in every field."""
    feedback = Feedback()
    feedback.trace("plans " + EVIL, [[(EVIL, 5)], [("a", 2)]], [[(EVIL, 5)], [("<b>bold</b>", 1), ("|x|", 2)]])
    feedback.table("values " + EVIL, ["step", "got " + EVIL], [[0, "ok"], [1, EVIL]], mark_row=1)
    feedback.text("notes " + EVIL, "body " + EVIL)
    tests = [
        Result("v::ok", "test_ok", "visible", "passed", 5, 5, description="passes", duration_s=0.01),
        Result("v::evil " + EVIL, "test_evil " + EVIL, "visible", "failed", 0, 5, message=EVIL * 2,
                   description="checks " + EVIL, traceback=[f"line 3, in schedule: raise ValueError({EVIL!r})"],
                   output=f"{EVIL}\n" * 3, output_cut=77, artifacts=feedback.artifacts, duration_s=0.2),
        Result("h::slow", "test_slow", "hidden", "timeout", 0, 2, message="schedule() did not return within 5 s"),
        Result("h::boom", "test_boom", "hidden", "crashed", 0, 2,
               message="your code was killed: out of memory (512 MiB)"),
        Result("h::skip", "test_skip", "hidden", "error", 0, 2,
               message="the test was skipped, so it cannot count as passed"),
        Result("h::long", "test_long", "hidden", "failed", 0, 2, message="m" * (MESSAGE_LIMIT + 1234),
                   output="o" * (OUTPUT_LIMIT + 314) + "THE END"),
    ]
    return Scorecard(EXERCISE, "premium", "ab" * 32, "graded", 5, 18, tests=tests, title="Showcase " + EVIL,
                     backend="local", graded_at="2026-11-30T07:25:26+00:00", duration_s=3.2, grader_version="0.1.0")


class Tags(HTMLParser):
    """The start tags of a page and the targets of its links and images."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.hrefs: list[str] = []
        self.handlers: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.hrefs += [value or "" for name, value in attrs if name in ("href", "src", "xlink:href", "action")]
        self.handlers += [name for name, _ in attrs if name.startswith("on")]


def assert_inert_html(page: str) -> None:
    parsed = Tags(page)
    assert parsed.tags <= OUR_TAGS, parsed.tags - OUR_TAGS
    assert all(href.startswith("#") for href in parsed.hrefs), parsed.hrefs
    assert parsed.handlers == []
    assert not re.search(r"<\s*(script|img|iframe|object|embed|link|base|form)\b", page, re.IGNORECASE)


def markdown_as_html(text: str) -> str:
    """What a CommonMark renderer with GFM tables and raw HTML allowed (the permissive case) makes of it."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def assert_inert_markdown(text: str) -> None:
    page = markdown_as_html(text)
    parsed = Tags(page)
    allowed = {"h2", "h3", "h4", "p", "strong", "em", "code", "pre", "table", "thead", "tbody", "tr", "th",
               "td", "ul", "li", "blockquote", "hr"}
    assert parsed.tags <= allowed, parsed.tags - allowed
    assert "<a " not in page and "<img" not in page and "<script" not in page and parsed.handlers == []


def outside_fences(text: str) -> str:
    """The lines of a Markdown text that are not inside a fenced block."""
    kept, fence = [], ""
    for line in text.split("\n"):
        if fence:
            if line.startswith(fence) and not line.strip("`"):
                fence = ""
            continue
        if match := re.match(r"`{3,}", line):
            fence = match.group()
            continue
        kept.append(line)
    return "\n".join(kept)


# -- real runs ---------------------------------------------------------------------------------------

def test_the_reference_report_shows_full_marks_with_every_test_folded(cards, rendered):
    card, (page, md) = cards["reference"], rendered["reference"]
    assert card.status == "graded" and card.score == card.max_score
    assert f"{card.score} / {card.max_score}" in page and ">100%<" in page
    assert page.count('<details class="test s-passed"') == len(card.tests)
    assert " open>" not in page.replace("<details class=\"all-steps\">", "")
    assert "To fix" not in page and "What went wrong" not in md
    for test in card.tests:
        assert html.escape(test.name) in page and f"`{test.name}`" in md
    assert md.startswith(f"## {md_text(card.title)}: {card.score}/{card.max_score} points (100%)")
    assert f"| **Total** | **{len(card.tests)}/{len(card.tests)}** | **{card.score}/{card.max_score}** |" in md


def test_the_stub_report_groups_its_failures_under_their_one_reason(cards, rendered):
    card, (page, md) = cards["stub"], rendered["stub"]
    assert card.score == 0 and all(t.status == "failed" for t in card.tests)
    # Every test keeps its details (message and the student's traceback); one reason, said once, opened once.
    assert page.count('<details class="test s-failed"') == len(card.tests)
    assert page.count(" open>") == 1
    assert all(t.message.endswith("is not implemented yet") and t.message.count("not implemented") == 1
               for t in card.tests), [t.message for t in card.tests]  # the stub's own words, said once
    assert "is not implemented yet (NotImplementedError" not in page
    assert NOT_IMPLEMENTED in html.unescape(page)  # the student's own traceback line
    assert f"To fix ({len(card.tests)} tests, 1 reason)" in page
    assert f"One reason, {len(card.tests)} tests:" in page
    assert page.count("Fails for the same reason as") == len(card.tests) - 1
    # Markdown: the reason in full once, every other test named once.
    assert f"### What went wrong ({len(card.tests)} tests, 1 reason)" in md
    assert md.count("```text\nschedule() is not implemented yet") == 1
    assert f"*The same reason fails {len(card.tests) - 1} more tests:*" in md
    for test in card.tests[1:]:
        assert md.count(f"`{test.name}` ({test.score}/{test.max_score})") == 1


def test_a_failing_trace_shows_its_first_difference_in_the_table_and_the_timeline(cards, rendered):
    card, (page, md) = cards["mutant"], rendered["mutant"]
    traces = [a for t in card.tests for a in t.artifacts if a["kind"] == "trace"]
    assert traces and all(a["first_difference"] is not None for a in traces)
    # Markdown shows the first test of each cause in full (the others are named under it).
    leads = {g["lead"]["name"] for g in report_view(card)["groups"]}
    for test in card.tests:
        for artifact in (a for a in test.artifacts if a["kind"] == "trace"):
            step = artifact["first_difference"] + 1
            assert f'data-first-difference="{step}"' in page
            assert f">first difference: step {step}</text>" in page
            if test.name in leads:
                assert re.search(rf"\| \*\*{step}\*\* \|[^\n]*\| ⬅️ \*\*first difference\*\* \|", md)
    # One marker per trace in the drawing and in the table, no more.
    assert page.count('class="diff-band"') == page.count("data-first-difference=") == len(traces)
    assert page.count('<span class="flag">first difference</span>') == len(traces)
    # The message that the table explains is there too.
    failed = [t for t in card.tests if t.status == "failed"]
    assert all(t.message.splitlines()[0] in html.unescape(page) for t in failed)


def test_a_rejected_submission_gets_the_reason_and_what_to_do_next(cards, rendered):
    card, (page, md) = cards["rejected"], rendered["rejected"]
    assert card.status == "rejected" and "syntax error at line 1" in card.reason
    assert "Your submission was not run" in page and "What to do next" in page
    assert card.reason in html.unescape(page)
    assert md_fence(card.reason) in md and "**What to do next**" in md
    assert "<details" not in page and "### Tests" not in md


def test_a_timeout_is_explained_with_what_to_look_for(cards, rendered):
    card, (page, md) = cards["timeout"], rendered["timeout"]
    assert [t.status for t in card.tests] == ["timeout", "timeout"]
    assert "within 1 s" in card.tests[0].message
    # Two timeouts with one message: one reason, opened once, both tests named under it.
    assert page.count('<details class="test s-timeout"') == 2 and page.count(" open>") == 1
    assert "Your code ran out of time" in page and "endless loop" in page and "slow algorithm" in page
    assert md.count("#### ⏱️") == 1 and "*The same reason fails 1 more test:*" in md and "endless loop" in md


def test_the_free_tier_names_the_premium_tests_it_did_not_run(cards, rendered):
    card, (page, md) = cards["evil"], rendered["evil"]
    assert card.tier == "free" and card.locked
    # The heading is the suite's label from exercise.toml, carried by the scorecard.
    assert card.suite_labels["hidden"] == "Premium tests"
    assert f"Premium tests not run ({len(card.locked)})" in page and f"Premium tests not run ({len(card.locked)})" in md
    for test in card.locked:
        assert f"<code>{test.name}</code>" in page and f"- `{test.name}` *(not run)*" in md
    assert page.count('<span class="pill s-locked">not run</span>') == len(card.locked)


def test_what_a_submission_prints_or_raises_is_shown_escaped(cards, rendered):
    card, (page, md) = cards["evil"], rendered["evil"]
    assert all(t.status == "failed" and EVIL in t.message for t in card.tests)
    assert all(EVIL in t.output for t in card.tests)
    assert_inert_html(page)
    assert html.escape(EVIL, quote=False) in page  # shown, as text
    assert page.count("{{ 7*7 }}") >= 2 * len(card.tests) and "{% raw %}" in page  # as written, not evaluated
    assert_inert_markdown(md)
    assert EVIL in md and "{{ 7*7 }}" in md
    assert EVIL not in outside_fences(md)  # only inside fenced blocks, which it cannot close
    assert "````" in md  # the fence is longer than the ``` the submission printed


def test_no_report_shows_the_hidden_tests_or_the_reference(rendered):
    secret_files = [*sorted((PROJECT / "hidden_tests" / EXERCISE).glob("*.py")), REFERENCE]
    public = {line.strip() for path in [STUB, *(PROJECT / "exercises" / EXERCISE / "tests").glob("*.py")]
              for line in path.read_text(encoding="utf-8").splitlines()}
    secrets = {line.strip() for path in secret_files for line in path.read_text(encoding="utf-8").splitlines()}
    secrets = {line for line in secrets - public if len(line) >= 24 or line.startswith(("def ", "class ", "import "))}
    assert any(line.startswith("def test_") for line in secrets) and len(secrets) > 100
    for name, (page, md) in rendered.items():
        for text in (html.unescape(page), md):
            leaked = [line for line in secrets if line in text]
            assert not leaked, (name, leaked[:3])


# -- hand-made scorecards ----------------------------------------------------------------------------

def test_every_field_of_a_hostile_scorecard_is_escaped_in_both_reports():
    card = showcase()
    page, md = render_html(card), render_markdown(card)
    assert_inert_html(page)
    assert_inert_markdown(md)
    assert "{{ 7*7 }}" in page and "{{ 7*7 }}" in md and "{% raw %}" in page
    assert html.escape("<b>bold</b>", quote=False) in page  # a trace label
    # The statuses a student can meet each come with what to do.
    assert "Your code ran out of time" in page and "The process running your code died" in page
    assert "The grader could not judge this test" in page and "contact the course staff" in page


def test_long_messages_and_output_are_cut_with_a_visible_count():
    card = showcase()
    page, md = render_html(card), render_markdown(card)
    assert "… 1,234 more characters not shown" in page and "… 1,234 more characters not shown" in md
    assert "… 321 characters printed before this not shown" in page
    assert "THE END" in page and "o" * (OUTPUT_LIMIT + 1) not in page and "m" * (MESSAGE_LIMIT + 1) not in page
    assert "… 77 bytes printed before this not shown" in page  # what the harness had already cut


def test_a_rejected_or_errored_run_without_tests_renders():
    for status, reason in (("rejected", "the file is empty: submit your solution's Python source"),
                           ("error", "the grading harness ended without results (exit status 137)")):
        card = Scorecard(EXERCISE, "free", "cd" * 32, status, 0, 10, reason=reason,
                         locked=[LockedTest("test_hidden_a", "hidden", 2)])
        page, md = render_html(card), render_markdown(card)
        assert reason in html.unescape(page) and md_fence(reason) in md
        assert "What to do next" in page and "test_hidden_a" in page and "test_hidden_a" in md
        assert ">—</text>" in page  # no percentage for a run that was not graded


def test_a_report_says_how_the_submission_was_isolated_where_it_was_not_the_sandbox_s_usual_way():
    card = Scorecard(EXERCISE, "free", "cd" * 32, "graded", 0, 10, backend="local", isolation="account")
    assert "an account of its own" in render_html(card) and "an account of its own" in render_markdown(card)
    card.isolation = "namespaces"
    assert "account of its own" not in render_html(card) and "isolated" not in render_markdown(card)


def test_malformed_artifacts_do_not_break_a_report():
    test = Result("v::t", "test_t", "visible", "failed", 0, 1, message="m", artifacts=[
        {"kind": "video", "title": "x"}, "not a dict",
        {"kind": "table", "title": "t", "columns": None, "rows": [[1], "x"]},
        {"kind": "trace", "title": "t", "expected": [[["a", "NaN"]], "x"], "got": None, "first_difference": 99},
    ])
    card = Scorecard(EXERCISE, "premium", "00" * 32, "graded", 0, 1, tests=[test])
    assert "cannot be shown here" in render_html(card)
    assert "test_t" in render_markdown(card)


def test_reports_are_a_function_of_the_scorecard_json(cards, rendered, tmp_path: Path):
    path = tmp_path / "card.json"
    cards["mutant"].write(path)
    again = Scorecard.read(path)
    assert (render_html(again), render_markdown(again)) == rendered["mutant"]
    out_html, out_md = tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", str(path), "--html", str(out_html), "--md", str(out_md)]) == 0
    assert out_html.read_text(encoding="utf-8") == rendered["mutant"][0]
    assert out_md.read_text(encoding="utf-8") == rendered["mutant"][1]


# -- the helpers -------------------------------------------------------------------------------------

def test_clip_keeps_the_head_and_clip_tail_the_tail():
    assert clip("abcdef", 4) == ("abcd", 2) and clip("abc", 4) == ("abc", 0)
    assert clip_tail("abcdef", 4) == ("cdef", 2) and clip_tail("abc", 4) == ("abc", 0)


def test_printable_makes_control_characters_visible_and_keeps_lines():
    assert printable("a\x00b\x1b[31mred\x1b[0m\r\nc\td\u202eé") == "a\u2400bred\nc\td<U+202E>é"
    assert printable("lone \ud800 surrogate") == "lone \ufffd surrogate"


def test_a_fence_is_longer_than_any_backtick_run_inside():
    for text in ("plain", "```", "a ```` b", "``````\n```"):
        block = md_fence(text)
        fence = block.split("\n", 1)[0].removesuffix("text")
        assert len(fence) >= 3 and len(fence) > max((len(r) for r in re.findall("`+", text)), default=0)
        assert block.endswith("\n" + fence)
        assert markdown_as_html(block).count("<pre>") == 1
    assert md_code("a `b` c") == "``a `b` c``" and md_code("`x") == "`` `x ``"
    assert md_cell("x|y") == "`x\\|y`"


def test_markdown_prose_cannot_become_a_link_or_markup():
    rendered = markdown_as_html(f"x {md_text(EVIL + ' https://evil.example a@evil.example *em* _u_')}")
    assert "<a" not in rendered and "<img" not in rendered and "<script" not in rendered and "<em>" not in rendered
    assert "&lt;script&gt;" in rendered


def test_blank_lines_are_squeezed_only_outside_fences():
    text = "a\n\n\n\nb\n```text\nx\n\n\n\ny\n```\n\n\nc\n"
    assert squeeze_blank_lines(text) == "a\n\nb\n```text\nx\n\n\n\ny\n```\n\nc\n"


def trace(expected: list, got: list, first_step: int = 0) -> dict:
    feedback = Feedback()
    feedback.trace("t", expected, got)
    artifact = feedback.artifacts[0]
    if first_step:
        artifact["first_step"] = first_step
        artifact["first_difference"] += first_step
    return artifact


def test_the_timeline_draws_both_sides_in_the_same_colours_and_marks_the_first_difference():
    artifact = trace([[("r1", 4), ("r2", 3)], [("r1", 1)]], [[("r1", 4), ("r2", 3)], [("r1", 1), ("r3", 2)]])
    chart = timeline(artifact)
    colour = {(bar["title"].split(": ")[1].split()[0], bar["side"]): bar["colour"] for bar in chart["bars"]}
    assert colour[("r1", 0)] == colour[("r1", 1)] != colour[("r2", 0)] == colour[("r2", 1)]
    assert len(chart["bars"]) == 7
    assert chart["marker"]["caption"] == "first difference: step 2"
    assert [label["label"] for label in chart["labels"] if label["first"]] == ["2"]
    assert [item["label"] for item in chart["legend"]] == ["r1", "r2", "r3"]


def test_a_trace_names_its_amounts_only_when_the_exercise_gives_a_unit():
    feedback = Feedback()
    feedback.trace("blocks held", [[("s1", 2)]], [[("s1", 3)]], unit="blocks")
    named, plain = timeline(feedback.artifacts[0]), timeline(trace([[("s1", 2)]], [[("s1", 3)]]))
    assert named["unit"] == "blocks" and named["summary"].startswith("blocks per step")
    assert {bar["title"] for bar in named["bars"]} == {"step 1, reference: s1 2 blocks",
                                                       "step 1, your code: s1 3 blocks"}
    assert plain["unit"] == "" and plain["summary"].startswith("amounts per step")
    assert [tick["label"] for tick in named["ticks"]] == ["0", "1", "2", "3", "4", "5"]  # whole numbers of blocks
    assert [tick["label"] for tick in timeline(trace([[("a", 5)]], []))["ticks"]] == ["0", "1", "2", "3", "4", "5"]
    assert [tick["label"] for tick in timeline(trace([[("a", 90)]], []))["ticks"]] == ["0", "25", "50", "75", "100"]
    assert {bar["title"] for bar in plain["bars"]} == {"step 1, reference: s1 2", "step 1, your code: s1 3"}
    card = Scorecard(EXERCISE, "premium", "00" * 32, "graded", 0, 1, tests=[
        Result("v::t", "test_t", "visible", "failed", 0, 1, message="m", artifacts=feedback.artifacts)])
    assert '<text class="unit"' in render_html(card) and '<text class="unit"' not in render_html(
        Scorecard(EXERCISE, "premium", "00" * 32, "graded", 0, 1, tests=[
            Result("v::t", "test_t", "visible", "failed", 0, 1, message="m", artifacts=[trace([[("a", 1)]], [])])]))


def test_the_timeline_stays_bounded_from_one_step_to_two_hundred():
    one = timeline(trace([[("a", 1)]], [[("a", 2)]]))
    assert one["marker"] is not None and 200 <= one["width"] <= 400
    steps = [[(f"r{i % 7}", 1 + i % 5)] for i in range(200)]
    changed = [*steps[:150], [("r1", 9)], *steps[151:]]
    wide = timeline(trace(steps, changed))
    assert wide["width"] <= 46 + 200 * 9 + 14 and wide["steps"] == 157  # it ends a few steps after the change
    assert wide["marker"]["caption"] == "first difference: step 151"
    assert all(bar["w"] >= 3 for bar in wide["bars"])
    labels = [int(label["label"]) for label in wide["labels"]]
    assert 151 in labels and len(labels) < 60  # not every step number is written
    agree = timeline(trace(steps, steps))
    assert agree["marker"] is None and agree["steps"] == 200


def test_trace_rows_number_steps_as_the_messages_do_and_window_around_the_difference():
    steps = [[("a", 1)]] * 30
    rows = trace_rows(trace(steps, [*steps[:20], [("a", 2)], *steps[21:]], first_step=100), before=5, after=2)
    assert [r["step"] for r in rows["rows"]] == list(range(116, 124))
    assert [r["step"] for r in rows["rows"] if r["first"]] == [121] == [rows["first_difference_step"]]
    assert rows["hidden_before"] == 15 and rows["hidden_after"] == 7
    assert rows["rows"][5]["got_marks"] == [True] and rows["rows"][4]["got_marks"] == [False]
    short = trace_rows(trace([[("a", 1)], [("b", 2)]], [[("a", 1)]]))
    assert short["rows"][1]["got"] is None and short["rows"][1]["got_text"] == "(no step)"


def test_a_trace_with_no_step_adds_nothing_to_the_report():
    from grader.harness.feedback import Feedback

    feedback = Feedback()
    feedback.trace("plans step by step, up to step 1", [], [])
    feedback.trace("plans", [[("r0", 4)]], [])
    assert [a["title"] for a in feedback.artifacts] == ["plans"]


def test_a_trace_whose_sides_agree_keeps_its_last_steps_where_the_test_failed():
    # The test failed at the trace's last step on something the trace does not show (a count).
    from grader.harness.feedback import MAX_STEPS, Feedback

    steps = [[("seq 1", n)] for n in range(MAX_STEPS + 12)]
    feedback = Feedback()
    feedback.trace("block tables, up to step 52", steps, steps)
    (artifact,) = feedback.artifacts
    assert artifact["first_step"] == 12 and len(artifact["got"]) == MAX_STEPS
    rows = trace_rows(artifact, before=5, after=2)
    assert rows["rows"][-1]["step"] == MAX_STEPS + 12 and rows["hidden_after"] == 0 and rows["hidden_before"] > 0


# -- misconception diagnosis --------------------------------------------------------------------------

def test_a_mutants_report_says_which_mistake_its_failures_look_like(cards, rendered):
    from grader.diagnosis.hints import mutant_hint
    from grader.report.plain import run_text

    hint = mutant_hint(MUTANT)
    assert [d.mutant for d in cards["mutant"].diagnosis] == [MUTANT.stem]
    page, markdown = rendered["mutant"]
    sentence = f"Your program behaves like one that {hint}."
    assert 'class="diagnosis"' in page and sentence in html.unescape(page)
    assert "A likely cause:" in markdown and sentence in markdown.replace("\\", "")
    assert sentence in run_text(cards["mutant"])
    for name in ("reference", "stub", "rejected"):  # full marks, failures like no mutant's, not graded
        assert cards[name].diagnosis == [] and 'class="diagnosis"' not in rendered[name][0]
        assert "A likely cause" not in rendered[name][1]


def test_a_diagnosis_is_escaped_and_never_shown_for_full_marks():
    from grader.core.scorecard import Diagnosis

    card = showcase()
    card.diagnosis = [Diagnosis("01_x", "writes " + EVIL, 0.9)]
    page, markdown = render_html(card), render_markdown(card)
    assert_inert_html(page)
    assert_inert_markdown(markdown)
    assert 'class="diagnosis"' in page and "A likely cause" in markdown
    full = showcase()
    full.score, full.diagnosis = full.max_score, card.diagnosis
    assert 'class="diagnosis"' not in render_html(full) and "A likely cause" not in render_markdown(full)
