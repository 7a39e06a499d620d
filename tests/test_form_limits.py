"""Every form field has a limit: a field too long, sent twice, of the wrong kind or missing is refused with
a 400 page that names it, before the handler acts on any of the form."""

from __future__ import annotations

import re

import pytest
from starlette.routing import Route

from grader.service import accounts
from grader.web.form_fields import DEFAULT_CHARS
from tests.helpers import EXERCISE
from tests.service import press_sign_in
from tests.test_release import graded, premium_card
from tests.test_web_in_process import PAGE, site  # noqa: F401 (the fixture)

pytestmark = pytest.mark.unit


def post_routes(client) -> list[str]:
    """The paths of every route that takes a POST, from the application itself (inside its wrappers)."""
    app = client.app
    while not hasattr(app, "routes"):
        app = app.app
    return [r.path for r in app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]


def test_an_adjustment_too_long_malformed_or_doubled_is_refused_and_nothing_changes(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    submission_id = graded(store, service.exercises[EXERCISE], "ada", premium_card(service.exercises[EXERCISE]))
    instructor, csrf = sign_in("instructor")
    path = f"/submissions/{submission_id}/adjust"
    assert instructor.post(path, data={"csrf": csrf, "points": "2", "comment": "neat"},
                           follow_redirects=False).status_code == 303
    before = store.adjustments()
    refusals = {
        "comment of 600 characters": ({"csrf": csrf, "points": "1", "comment": "x" * 600}, "at most 500"),
        "points of 40 characters": ({"csrf": csrf, "points": "1" * 40, "comment": "why"}, "at most 20"),
        "no points": ({"csrf": csrf, "comment": "why"}, "did not carry its field “points to add”"),
        "no comment": ({"csrf": csrf, "points": "0"}, "did not carry its field “comment”"),
        "points twice": ({"csrf": csrf, "points": ["1", "3"], "comment": "why"}, "sent twice"),
        "a field of its own": ({"csrf": csrf, "points": "1", "comment": "why", "x": "y" * (DEFAULT_CHARS + 1)},
                               f"at most {DEFAULT_CHARS:,}"),
    }
    for case, (data, said) in refusals.items():
        answer = instructor.post(path, data=data, follow_redirects=False)
        assert answer.status_code == 400 and said in answer.text, (case, answer.status_code, answer.text[-600:])
    # A body that is no form at all: nothing read from it, nothing changed.
    answer = instructor.post(path, content=b"\xff" * 5000, headers={"content-type": "text/plain"},
                             follow_redirects=False)
    assert answer.status_code in (400, 403), answer.status_code
    files = {"comment": ("c.txt", b"a file", "text/plain")}
    answer = instructor.post(path, data={"csrf": csrf, "points": "1"}, files=files, follow_redirects=False)
    assert answer.status_code == 400 and "is text, and a file was sent" in answer.text
    assert store.adjustments() == before


def test_every_post_route_refuses_a_field_over_its_limit_naming_it(site):  # noqa: F811
    service, _, sign_in, store, _ = site
    submission_id = graded(store, service.exercises[EXERCISE], "bob", premium_card(service.exercises[EXERCISE]))
    instructor, csrf = sign_in("instructor")
    student, student_csrf = sign_in("student", "ada")
    values = {"slug": EXERCISE, "id": str(submission_id), "student": "ada", "action": "tier"}
    paths = post_routes(instructor)
    assert len(paths) >= 15, paths
    for pattern in paths:
        path = re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values.get(m.group(1), "x"), pattern)
        if pattern.startswith("/signin/"):
            link = f"/signin/{accounts.new_link(store, 'student', 'bob')}"
            answer = press_sign_in(site[1](), link, note="n" * (DEFAULT_CHARS + 1))
        else:
            students_own = pattern.startswith("/exercises/") or pattern.endswith("/inquiry")
            browser, token = (student, student_csrf) if students_own else (instructor, csrf)
            answer = browser.post(path, data={"csrf": token, "note": "n" * (DEFAULT_CHARS + 1)},
                                  follow_redirects=False)
        assert answer.status_code == 400, (pattern, answer.status_code, answer.text[-400:])
        assert "The note is 2,001 characters long" in answer.text, (pattern, answer.text[-400:])
    # Named fields have their own limits.
    answer = student.post(f"{PAGE}/prediction", data={"csrf": student_csrf, "choice": "2" * 10})
    assert answer.status_code == 400 and "at most 3" in answer.text
    answer = instructor.post("/instructor/site.zip", data={"csrf": csrf, "policy": "latest" * 10})
    assert answer.status_code == 400 and "at most 20" in answer.text
