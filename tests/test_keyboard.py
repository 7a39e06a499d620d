"""The service with the keyboard alone (WCAG 2.1.1, 2.4.1, 2.4.3, 2.4.7), in headless Chromium: a student
signs in, answers the question before the code, submits, reads the report; the instructor signs in and
releases the results; the student then sees the score and asks about the grade; the instructor answers and
resolves the inquiry from the dashboard's queue, and the student reads the answer. Only Tab, Shift+Tab,
Enter and Space are pressed, and a message typed into the field that has the focus: no click, no fill. At every stop the element with the focus must be on screen and drawn with the focus
outline (the pages' `:focus-visible` style), and the first Tab of a page with navigation reaches the link
that skips to the main content. docs/accessibility.md lists what this walk does not see.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.browser import expect, problems
from tests.helpers import EXERCISE, exercise_copy
from tests.service import import_roster, local_server, signed_in

pytestmark = pytest.mark.slow
NEXT, BACK = "Tab", "Shift+Tab"
# What the focused element is, as the walk reads it: its accessible name as near as the page gives it (a
# label's text for a field), and how it is drawn.
FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const box = el.getBoundingClientRect();
  const label = el.labels && el.labels.length ? el.labels[0].innerText : "";
  return {tag: el.tagName.toLowerCase(), id: el.id, type: el.type || "", href: el.getAttribute("href") || "",
          name: (el.getAttribute("aria-label") || label || el.innerText || el.value || "").trim(),
          outline: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2,
          shown: box.width > 0 && box.height > 0 && box.bottom > 0 && box.right > 0
                 && box.top < window.innerHeight && box.left < window.innerWidth};
}"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """`grader serve` on a copy of the exercise whose hidden results wait for the instructor's release, with
    one student on the roster; the student's sign-in link and a fresh one-time link of the instructor's."""
    folder = tmp_path_factory.mktemp("project")
    toml = exercise_copy(folder) / "exercise.toml"
    toml.write_text(toml.read_text().replace("[web]\n", '[web]\nrelease = "on_release"\n'))
    with local_server(folder, cwd=folder) as server:
        instructor, csrf = signed_in(server, server.instructor_link)
        student_link = import_roster(server, instructor, csrf, "id,name,tier\nkai,Kai K,premium\n")["kai"]
        page = instructor.post("/instructor/link", data={"csrf": csrf})
        found = re.search(r"(http://[^<\s\"]+/signin/[A-Za-z0-9_-]+)", page.text)
        assert found, page.text[:2000]
        yield server, student_link, found.group(1)


def focused(page: Any) -> dict[str, Any]:
    found = page.evaluate(FOCUSED)
    assert found is not None, f"the focus left the page's elements on {page.url}"
    return found


Wanted = str | re.Pattern[str] | Callable[[dict[str, Any]], bool]


def tab_to(page: Any, name: Wanted, key: str = NEXT, limit: int = 200) -> dict[str, Any]:
    """Press `key` until the element whose name is `name` (or matches it, or that `name` accepts) has the
    focus; every element on the way must be shown and outlined."""
    seen = []
    for _ in range(limit):
        page.keyboard.press(key)
        now = focused(page)
        seen.append(now["name"][:40])
        assert now["shown"], f"the focus is on {now} on {page.url}, out of sight"
        assert now["outline"], f"the focus on {now} on {page.url} is not drawn (no :focus-visible outline)"
        if (name.search(now["name"]) if isinstance(name, re.Pattern)
                else name(now) if callable(name) else now["name"] == name):
            return now
    raise AssertionError(f"{name!r} not reached with {key} on {page.url}; the focus went through {seen}")


def press(page: Any, key: str = "Enter", navigates: bool = True) -> None:
    if navigates:
        with page.expect_navigation():
            page.keyboard.press(key)
    else:
        page.keyboard.press(key)


def skip_to_main(page: Any) -> None:
    """The first Tab reaches the skip link, shown while it has the focus; Enter moves the focus to <main>."""
    page.keyboard.press(NEXT)
    first = focused(page)
    assert first["name"] == "Skip to the main content" and first["shown"] and first["outline"], first
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


def test_a_term_walked_with_the_keyboard_alone(new_page, course):
    server, student_link, instructor_link = course
    page = new_page()
    page.goto(student_link)  # the link from the instructor's email: opening it signs in no one
    skip_to_main(page)
    tab_to(page, "Sign in")
    press(page)
    expect(page).to_have_url(f"{server.url}/")

    tab_to(page, re.compile(r"^One step of a continuous-batching scheduler"))
    press(page)
    expect(page).to_have_url(f"{server.url}/exercises/{EXERCISE}")
    # The question before the code: Tab reaches the group of choices, Space picks the one with the focus.
    tab_to(page, lambda now: now["type"] == "radio")
    page.keyboard.press("Space")
    expect(page.locator("#prediction input[name=choice]:checked")).to_have_count(1)
    tab_to(page, "Answer, then open the editor")
    press(page)
    # The editor holds the stub: submitted as it is, it fails every test (no text typed, no trap in the
    # textarea: Tab leaves it).
    tab_to(page, "Submit for grading")
    press(page)
    expect(page).to_have_url(re.compile(r"/submissions/\d+$"))
    submission = page.url
    expect(page.locator('[data-state="graded"]')).to_be_visible(timeout=240_000)  # the page refreshes itself
    expect(page.locator("#withheld")).to_be_visible()  # the hidden suites wait for the release
    tab_to(page, "Read the report")
    press(page)
    expect(page).to_have_url(re.compile(r"/submissions/\d+/report$"))
    # The report: a test of the to-do list is reached and followed; a test's summary folds and unfolds.
    tab_to(page, lambda now: now["tag"] == "a" and now["href"].startswith("#t-"))
    press(page, navigates=False)
    assert re.search(r"#t-", page.url), page.url
    tab_to(page, lambda now: now["tag"] == "summary")
    details = page.locator("details:has(> summary:focus)")
    is_open = details.evaluate("d => d.open")
    page.keyboard.press("Enter")
    expect(details).to_have_js_property("open", not is_open)
    page.keyboard.press("Space")
    expect(details).to_have_js_property("open", is_open)
    tab_to(page, re.compile(r"^← Submission \d+$"), key=BACK)  # and back up to the way out, Shift+Tab

    desk = new_page()
    desk.goto(instructor_link)
    skip_to_main(desk)
    tab_to(desk, "Sign in")
    press(desk)
    tab_to(desk, "Dashboard")
    press(desk)
    expect(desk).to_have_url(f"{server.url}/instructor")
    skip_to_main(desk)
    tab_to(desk, "Release results")
    press(desk)
    expect(desk.locator("#notice")).to_contain_text("are released")

    page.goto(submission)
    expect(page.locator("#score")).to_have_text(re.compile(r"^0/\d+ points on the premium tier"))
    # Released: the student asks about the grade from the submission's page, the whole submission (the
    # list's first choice, left as it is), the question typed into the field with the focus.
    skip_to_main(page)
    tab_to(page, "Ask about this grade")
    press(page)
    expect(page).to_have_url(f"{submission}/inquiry")
    tab_to(page, lambda now: now["tag"] == "select" and now["name"].startswith("About"))
    tab_to(page, re.compile(r"^Your question"))
    page.keyboard.type("Every test fails: is the stub graded as it should be?")
    tab_to(page, "Send the question")
    press(page, "Space")
    expect(page).to_have_url(re.compile(r"/inquiries/\d+$"))
    thread = page.url
    expect(page.locator("#thread")).to_contain_text("is the stub graded as it should be?")

    # The instructor finds it from the dashboard's count of open inquiries, answers and resolves it (the
    # box to resolve is ticked while the inquiry is open).
    desk.goto(f"{server.url}/instructor")
    skip_to_main(desk)
    tab_to(desk, "1 open")
    press(desk)
    expect(desk).to_have_url(f"{server.url}/inquiries")
    tab_to(desk, lambda now: now["tag"] == "a" and now["href"] == thread.removeprefix(server.url))
    press(desk)
    tab_to(desk, re.compile(r"^Message"))
    desk.keyboard.type("It is: the stub returns no batch at all, so no test can pass.")
    resolve = tab_to(desk, "and resolve the inquiry")
    assert resolve["type"] == "checkbox" and desk.locator("#resolve").is_checked()
    tab_to(desk, "Send")
    press(desk)
    expect(desk.locator("#notice")).to_contain_text("Answered and resolved.")

    page.goto(thread)
    expect(page.locator("#thread")).to_contain_text("the stub returns no batch at all")
    expect(page.locator("#inquiry-facts")).to_contain_text("Resolved")
    assert problems(page) == [] and problems(desk) == []
