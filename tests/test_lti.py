"""LTI 1.3 Advantage end to end, in-process (Starlette's TestClient on grader's app, a SQLite store) against a
platform of the tests' own on loopback (tests/lti_platform.py): login and launch, deep linking, grade
passback (a failed send kept, shown and retried), roster sync; and every kind of bad launch refused with its
own page."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from grader.cli import main
from grader.core.exercise import load_exercise
from grader.core.grading import new_scorecard
from grader.course.store import Store
from grader.db import schema
from grader.lti import ags, nrps, services
from grader.lti.deep_link import full_points
from grader.lti.launch import STATE_COOKIE
from grader.lti.mount import lti_pages
from grader.lti.platforms import add_platform
from grader.service import accounts, staff
from grader.web.app import LtiPages, Service, create_app
from grader.web.auth import COOKIE, SIGNIN_COOKIE
from tests.helpers import EXERCISE
from tests.lti_platform import CLIENT_ID, CONTEXT, DEPLOYMENT, INSTRUCTOR, LEARNER, TestPlatform, rsa_key
from tests.service import press_sign_in

BASE = "https://testserver"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class Recorded:
    def __init__(self) -> None:
        self.queued: list[int] = []

    def enqueue(self, submission_id: int) -> None:
        self.queued.append(submission_id)

    def health(self) -> list[str]:
        return []


@pytest.fixture
def lti(tmp_path):
    platform = TestPlatform().start()
    exercise = load_exercise(EXERCISE)
    store = Store(tmp_path / "grader.db")
    store.migrate()
    service = Service(store=store, dispatcher=Recorded(), exercises={exercise.slug: exercise}, base_url=BASE)
    add_platform(store, deployments=[DEPLOYMENT], tier="free", **platform.registration)
    app = create_app(service, lti_pages())

    def client() -> TestClient:
        return TestClient(app, base_url=BASE)

    platform.tool_jwks = client().get("/lti/jwks").json()
    yield SimpleNamespace(platform=platform, store=store, service=service, client=client, exercise=exercise)
    platform.stop()
    store.close()
    services.forget_tokens()


def login(client: TestClient, platform: TestPlatform, sub: str = "lms-user-1") -> tuple[str, str]:
    """The OIDC login as the platform starts it: (state, nonce) from the redirect to the platform."""
    response = client.get("/lti/login", params={"iss": platform.issuer, "login_hint": sub, "client_id": CLIENT_ID,
                                                "target_link_uri": f"{BASE}/lti/launch",
                                                "lti_deployment_id": DEPLOYMENT}, follow_redirects=False)
    assert response.status_code == 302, response.text[:300]
    where = urlsplit(response.headers["location"])
    assert f"{where.scheme}://{where.netloc}{where.path}" == f"{platform.url}/auth"
    query = {k: v[0] for k, v in parse_qs(where.query).items()}
    assert query["redirect_uri"] == f"{BASE}/lti/launch" and query["client_id"] == CLIENT_ID
    assert query["response_mode"] == "form_post" and query["scope"] == "openid" and query["login_hint"] == sub
    return query["state"], query["nonce"]


def launch(client: TestClient, platform: TestPlatform, sub: str = "lms-user-1", **token: object):
    state, nonce = login(client, platform, sub)
    id_token = platform.id_token(nonce, sub, **token)  # type: ignore[arg-type]
    return client.post("/lti/launch", data={"id_token": id_token, "state": state}, follow_redirects=False)


def grade(lti, student: str, score: int, sha: str) -> None:
    exercise = lti.exercise
    submission_id, _ = lti.store.add_submission(student, exercise.slug, "free", sha * 8, exercise.submission_file,
                                                f"# {sha}\n".encode(), state="graded")
    lti.store.save_scorecard(submission_id, dataclasses.replace(new_scorecard(exercise, "free", "local"), score=score))


def lms_students(store: Store) -> dict[str, str | None]:
    us = schema.lti_users
    with store.reading() as db:
        return dict(db.execute(select(us.c.sub, us.c.student_id)).all())


def csrf(page) -> str:
    found = CSRF.search(page.text)
    assert found, page.text[:500]
    return found.group(1)


# -- keys, login, launch ----------------------------------------------------------------------------------

def test_the_jwks_holds_the_tools_public_key_only(lti):
    keys = lti.client().get("/lti/jwks").json()["keys"]
    assert len(keys) == 1 and keys[0]["kty"] == "RSA" and keys[0]["alg"] == "RS256" and keys[0]["kid"]
    assert not {"d", "p", "q", "dp", "dq", "qi"} & set(keys[0]), "the private key left the store"
    assert lti.client().get("/lti/jwks").json() == {"keys": keys}, "the key changed between two requests"


def test_a_student_launch_creates_the_student_signs_them_in_and_opens_the_exercise(lti):
    client = lti.client()
    state, nonce = login(client, lti.platform)
    cookie = client.cookies.get(STATE_COOKIE + state)
    assert cookie == state
    response = client.post("/lti/launch", follow_redirects=False,
                           data={"id_token": lti.platform.id_token(nonce, exercise=EXERCISE), "state": state})
    assert response.status_code == 303, response.text[:500]
    assert response.headers["location"] == f"/exercises/{EXERCISE}"
    assert COOKIE in response.cookies
    student = accounts.student(lti.store, "ada.lovelace")
    assert student is not None and student.name == "Ada Lovelace" and student.tier == "free"
    page = client.get(f"/exercises/{EXERCISE}")
    assert page.status_code == 200 and "ada.lovelace" in page.text
    # Launched again: the same student, no other made.
    assert launch(client, lti.platform, exercise=EXERCISE).status_code == 303
    assert [s.id for s in accounts.students(lti.store)] == ["ada.lovelace"]
    assert lms_students(lti.store) == {"lms-user-1": "ada.lovelace"}


def test_the_state_cookie_is_samesite_none_and_secure(lti):
    response = lti.client().get("/lti/login", params={"iss": lti.platform.issuer, "login_hint": "x",
                                                      "client_id": CLIENT_ID}, follow_redirects=False)
    cookie = response.headers["set-cookie"].lower()
    assert cookie.startswith(STATE_COOKIE) and "samesite=none" in cookie and "secure" in cookie
    assert "httponly" in cookie and "path=/lti" in cookie


def test_another_user_with_the_same_name_gets_an_id_of_their_own_and_the_platforms_tier(lti, tmp_path):
    add_platform(lti.store, deployments=[DEPLOYMENT], tier="premium", **lti.platform.registration)
    assert launch(lti.client(), lti.platform, "user-a").status_code == 303
    assert launch(lti.client(), lti.platform, "user-b").status_code == 303
    assert lms_students(lti.store) == {"user-a": "ada.lovelace", "user-b": "ada.lovelace-2"}
    assert accounts.student(lti.store, "ada.lovelace-2").tier == "premium"


def test_an_instructor_launch_signs_in_as_an_instructor(lti):
    client = lti.client()
    response = launch(client, lti.platform, "teacher-1", roles=(INSTRUCTOR,))
    assert response.status_code == 303 and response.headers["location"] == "/instructor"
    page = client.get("/instructor")
    assert page.status_code == 200 and 'id="lti"' in page.text and "Systems programming" in page.text
    assert accounts.students(lti.store) == [], "an instructor was added to the roster"


# -- deep linking -------------------------------------------------------------------------------------------

ROLES = "http://purl.imsglobal.org/vocab/lis/v2/"


@pytest.mark.parametrize("extra", [f"{ROLES}institution/person#Instructor", "http://example.edu/roles#Instructor",
                                   f"{ROLES}system/person#Administrator", f"{ROLES}membership/Learner#Instructor"])
def test_only_a_context_role_of_the_course_makes_an_instructor(lti, extra):
    """Issue 55: a learner with an institution Instructor role (a graduate student who teaches elsewhere), a
    custom role ending in #Instructor or a system Administrator role signed in as the course's instructor."""
    client = lti.client()
    response = launch(client, lti.platform, "grad-1", roles=(LEARNER, extra))
    assert response.status_code == 303 and response.headers["location"] == "/", response.text[:300]
    assert client.get("/instructor").status_code == 403
    assert client.get("/", follow_redirects=False).status_code == 200, "not signed in as a student"
    assert lms_students(lti.store) == {"grad-1": "ada.lovelace"}


def test_a_session_opened_as_an_instructor_ends_when_the_lms_gives_the_user_another_role(lti):
    """An instructor session opened before (say, under the old reading of roles) does not outlive the role:
    the user's next launch, as a learner, ends it."""
    before = lti.client()
    assert launch(before, lti.platform, "grad-2", roles=(INSTRUCTOR,)).status_code == 303
    assert before.get("/instructor").status_code == 200
    now = lti.client()
    assert launch(now, lti.platform, "grad-2", roles=(LEARNER, f"{ROLES}institution/person#Instructor")).status_code == 303
    assert before.get("/instructor").status_code == 401 and now.get("/instructor").status_code == 403


def test_a_teaching_assistant_launch_signs_in_as_a_ta_not_a_student_nor_an_instructor(lti):
    client = lti.client()
    ta_roles = (INSTRUCTOR, f"{ROLES}membership/Instructor#TeachingAssistant", f"{ROLES}institution/person#Student")
    response = launch(client, lti.platform, "ta-1", roles=ta_roles)
    assert response.status_code == 303, response.text[:300]
    assert client.get("/", follow_redirects=False).headers["location"] == "/staff"
    assert client.get("/staff").status_code == 200 and client.get("/instructor").status_code == 403
    assert accounts.students(lti.store) == [], "a TA was added to the roster as a student"
    from grader.service import staff
    assert [t.id for t in staff.teaching_assistants(lti.store)] == ["ada.lovelace"]
    again = lti.client()  # launched again: the same TA, no other made
    assert launch(again, lti.platform, "ta-1", roles=ta_roles).status_code == 303
    assert [t.id for t in staff.teaching_assistants(lti.store)] == ["ada.lovelace"]


@pytest.mark.parametrize("roles", [(f"{ROLES}institution/person#Instructor",), (f"{ROLES}system/person#Administrator",),
                                   (f"{ROLES}membership#Mentor",), ()])
def test_a_launch_with_no_role_in_the_course_signs_no_one_in(lti, roles):
    client = lti.client()
    response = launch(client, lti.platform, "visitor-1", roles=roles)
    assert response.status_code == 403 and "No role in this course" in response.text
    assert COOKIE not in response.cookies and client.get("/instructor").status_code == 401
    assert lms_students(lti.store) == {}


def test_deep_linking_places_an_exercise_with_a_signed_response(lti):
    client = lti.client()
    page = launch(client, lti.platform, "teacher-1", roles=(INSTRUCTOR,), message_type="LtiDeepLinkingRequest")
    assert page.status_code == 200, page.text[:500]
    form = re.search(r'<form method="post" action="([^"]+)">\s*<input type="hidden" name="JWT" value="([^"]+)">\s*'
                     rf'<button id="place-{EXERCISE}"', page.text)
    assert form, page.text
    assert form.group(1) == f"{lti.platform.url}/deep-link-return"
    policy = page.headers["content-security-policy"]
    assert f"form-action 'self' {lti.platform.url}" in policy and f"frame-ancestors {lti.platform.url}" in policy
    # The platform checks the response against the tool's JWKS, as Canvas and Moodle do.
    token = form.group(2)
    keys = {k.key_id: k for k in jwt.PyJWKSet.from_dict(lti.client().get("/lti/jwks").json()).keys}
    key = keys[jwt.get_unverified_header(token)["kid"]]
    claims = jwt.decode(token, key.key, algorithms=["RS256"], audience=lti.platform.issuer)
    claim = "https://purl.imsglobal.org/spec/lti/claim/"
    assert claims["iss"] == CLIENT_ID and claims[claim + "message_type"] == "LtiDeepLinkingResponse"
    assert claims[claim + "deployment_id"] == DEPLOYMENT and claims[claim + "version"] == "1.3.0"
    assert claims["https://purl.imsglobal.org/spec/lti-dl/claim/data"] == "platform-opaque-data"
    [item] = claims["https://purl.imsglobal.org/spec/lti-dl/claim/content_items"]
    assert item["type"] == "ltiResourceLink" and item["url"] == f"{BASE}/lti/launch?exercise={EXERCISE}"
    assert item["custom"] == {"exercise": EXERCISE}
    assert item["lineItem"]["scoreMaximum"] == full_points(lti.exercise) > 0
    assert item["lineItem"]["resourceId"] == EXERCISE


def test_a_student_cannot_place_exercises(lti):
    page = launch(lti.client(), lti.platform, message_type="LtiDeepLinkingRequest")
    assert page.status_code == 403 and "Only an instructor" in page.text and COOKIE not in page.cookies


# -- grade passback -----------------------------------------------------------------------------------------

def test_a_graded_submission_s_score_arrives_at_the_line_item(lti):
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    assert ags.sync_round(lti.store, lti.service.exercises) == (0, 0), "a score was sent before any grading"
    grade(lti, "ada.lovelace", 3, "a")
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    [score] = lti.platform.scores
    maximum = new_scorecard(lti.exercise, "free", "local").exercise_max_score
    assert score["lineitem"] == f"/courses/{CONTEXT}/lineitems/1" and score["query"] == "type=grader"
    assert score["userId"] == "lms-user-1" and score["scoreGiven"] == 3 and score["scoreMaximum"] == maximum
    assert score["activityProgress"] == "Completed" and score["gradingProgress"] == "FullyGraded"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", score["timestamp"])
    # One token for the column's maximum (read once), one for scores.
    assert [a["aud"] for a in lti.platform.assertions] == [f"{lti.platform.url}/token"] * 2
    # Nothing changed: nothing sent. A new grading: its score sent, with a later timestamp.
    assert ags.sync_round(lti.store, lti.service.exercises) == (0, 0)
    grade(lti, "ada.lovelace", 5, "b")
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    assert [s["scoreGiven"] for s in lti.platform.scores] == [3, 5]
    assert lti.platform.scores[1]["timestamp"] > lti.platform.scores[0]["timestamp"]


def test_an_adjustment_changes_the_score_sent(lti):
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    grade(lti, "ada.lovelace", 3, "a")
    ags.sync_round(lti.store, lti.service.exercises)
    [sub] = lti.store.submissions(EXERCISE, "ada.lovelace")
    lti.store.adjust(sub.id, 1.5, "good comments", "instructor")
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    assert [s["scoreGiven"] for s in lti.platform.scores] == [3, 4.5]


def test_an_adjustment_follows_the_student_across_a_resubmission_and_its_note_is_the_scores_comment(lti):
    """The term's finding: a +3 waiver on one submission vanished when the student resubmitted (the LMS went
    84 -> 81, silently); the note never reached the LMS."""
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    grade(lti, "ada.lovelace", 5, "a")
    [first] = lti.store.submissions(EXERCISE, "ada.lovelace")
    lti.store.adjust(first.id, 3, "late pass waived", "instructor")
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    assert (lti.platform.scores[-1]["scoreGiven"], lti.platform.scores[-1]["comment"]) == (8, "late pass waived")
    grade(lti, "ada.lovelace", 5, "b")  # resubmitted: the same score, the waiver still holds
    assert ags.sync_round(lti.store, lti.service.exercises) == (0, 0), "the resubmission changed the LMS's grade"
    grade(lti, "ada.lovelace", 6, "c")
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    assert [(s["scoreGiven"], s.get("comment")) for s in lti.platform.scores] == [
        (8, "late pass waived"), (9, "late pass waived")]
    # The latest submission's page says where the adjustment was made, and that it holds.
    teacher = lti.client()
    assert launch(teacher, lti.platform, "teacher-1", roles=(INSTRUCTOR,)).status_code == 303
    latest = lti.store.submissions(EXERCISE, "ada.lovelace")[-1]
    page = teacher.get(f"/submissions/{latest.id}").text
    assert 'id="adjustment-carried"' in page and f"submission {first.id}" in page and "late pass waived" in page


def test_the_lms_columns_maximum_follows_the_exercise_after_a_regrade(lti):
    """The exercise went from 88 to 90 points: scores were sent as x/90 to a column that stayed at 88."""
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    grade(lti, "ada.lovelace", 3, "a")
    maximum = new_scorecard(lti.exercise, "free", "local").exercise_max_score
    lti.platform.lineitems[f"/courses/{CONTEXT}/lineitems/1"] = {"id": lti.platform.lineitem(), "label": "Ex",
                                                                  "scoreMaximum": maximum}
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    assert lti.platform.lineitem_puts == [], "a column already right was written"
    [sub] = lti.store.submissions(EXERCISE, "ada.lovelace")  # regraded: the exercise is worth 2 more now
    card = new_scorecard(lti.exercise, "free", "local")
    lti.store.save_scorecard(sub.id, dataclasses.replace(card, score=3, max_score=card.max_score + 2))
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    [put] = lti.platform.lineitem_puts
    assert put["scoreMaximum"] == maximum + 2 and put["label"] == "Ex", "the column kept its old maximum"
    assert lti.platform.scores[-1]["scoreMaximum"] == maximum + 2
    grade(lti, "ada.lovelace", 4, "b")
    lti.store.save_scorecard(lti.store.submissions(EXERCISE, "ada.lovelace")[-1].id,
                             dataclasses.replace(card, score=4, max_score=card.max_score + 2))
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    assert len(lti.platform.lineitem_puts) == 1, "the column was written again though it was right"


def test_a_score_goes_to_the_lms_only_once_its_results_are_released(lti):
    from grader.core.scorecard import utc_now

    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    lti.store.set_exercise_terms(EXERCISE, {"release": "on_release"}, "instructor")
    grade(lti, "ada.lovelace", 3, "a")
    assert ags.sync_round(lti.store, lti.service.exercises) == (0, 0) and lti.platform.scores == []
    lti.store.set_exercise_terms(EXERCISE, {"released_at": utc_now()}, "instructor")
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    assert [s["scoreGiven"] for s in lti.platform.scores] == [3]


def test_withholding_again_takes_the_score_back_from_the_lms(lti):
    from grader.core.scorecard import utc_now

    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    teacher = lti.client()
    assert launch(teacher, lti.platform, "teacher-1", roles=(INSTRUCTOR,)).status_code == 303
    lti.store.set_exercise_terms(EXERCISE, {"release": "on_release", "released_at": utc_now()}, "instructor")
    grade(lti, "ada.lovelace", 3, "a")
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    lti.platform.stop()  # the withdrawal waits for the platform like any score, and the dashboard says what it is
    page = teacher.post(f"/instructor/exercises/{EXERCISE}/withhold", data={"csrf": csrf(teacher.get("/instructor"))})
    assert page.status_code == 200
    assert ags.sync_round(lti.store, lti.service.exercises) == (0, 1)
    assert "withheld again: the score is taken back" in teacher.get("/instructor").text
    lti.platform.start()
    assert ags.deliver(lti.store, now=time.time() + ags.LAST_RETRY_S) == (1, 0)
    released, taken_back = lti.platform.scores
    assert released["scoreGiven"] == 3 and released["gradingProgress"] == "FullyGraded"
    assert "scoreGiven" not in taken_back and "scoreMaximum" not in taken_back
    assert taken_back["gradingProgress"] == "Pending" and taken_back["activityProgress"] == "Submitted"
    assert taken_back["timestamp"] > released["timestamp"]
    # Nothing more while it stays withheld; released again, the score goes again.
    assert ags.sync_round(lti.store, lti.service.exercises) == (0, 0)
    lti.store.set_exercise_terms(EXERCISE, {"released_at": utc_now()}, "instructor")
    assert ags.sync_round(lti.store, lti.service.exercises) == (1, 0)
    assert lti.platform.scores[-1]["scoreGiven"] == 3


def test_a_send_that_fails_is_kept_shown_and_retried_until_it_arrives(lti):
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    teacher = lti.client()
    assert launch(teacher, lti.platform, "teacher-1", roles=(INSTRUCTOR,)).status_code == 303
    lti.platform.stop()  # the platform is down
    grade(lti, "ada.lovelace", 3, "a")
    assert ags.sync_round(lti.store, lti.service.exercises) == (0, 1)
    [row] = ags.pending(lti.store)
    assert row.attempts == 1 and "refused" in row.last_error.lower() and row.next_try > time.time()
    assert ags.deliver(lti.store) == (0, 0), "a failed send was tried again before its back-off"
    page = teacher.get("/instructor")
    assert 'id="lti-pending"' in page.text and "refused" in page.text.lower() and "ada.lovelace" in page.text
    # Still down: the button tries at once and keeps it.
    page = teacher.post("/instructor/lti/retry", data={"csrf": csrf(page)})
    assert "0 score(s) sent" in page.text and "1 failed again" in page.text
    assert ags.pending(lti.store)[0].attempts == 2
    lti.platform.start()  # back, on the same port
    assert ags.deliver(lti.store, now=time.time() + ags.LAST_RETRY_S) == (1, 0)
    assert [s["scoreGiven"] for s in lti.platform.scores] == [3] and ags.pending(lti.store) == []
    assert 'id="lti-pending"' not in teacher.get("/instructor").text


def test_the_retry_button_sends_what_waits(lti):
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    teacher = lti.client()
    assert launch(teacher, lti.platform, "teacher-1", roles=(INSTRUCTOR,)).status_code == 303
    lti.platform.stop()
    grade(lti, "ada.lovelace", 2, "a")
    ags.sync_round(lti.store, lti.service.exercises)
    lti.platform.start()
    page = teacher.post("/instructor/lti/retry", data={"csrf": csrf(teacher.get("/instructor"))})
    assert page.status_code == 200 and "1 score(s) sent to the LMS." in page.text
    assert [s["scoreGiven"] for s in lti.platform.scores] == [2]


def test_a_platform_refusing_a_score_keeps_it_with_the_platforms_answer(lti):
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    lti.platform.tool_jwks = {"keys": []}  # the platform no longer knows the tool's key
    grade(lti, "ada.lovelace", 3, "a")
    assert ags.sync_round(lti.store, lti.service.exercises) == (0, 1)
    [row] = ags.pending(lti.store)
    assert "HTTP 401" in row.last_error and "invalid_client" in row.last_error


# -- roster sync ------------------------------------------------------------------------------------------

def member(sub: str, name: str, role: str = LEARNER, status: str = "Active", email: str = "") -> dict:
    return {"user_id": sub, "name": name, "roles": [role], "status": status, **({"email": email} if email else {})}


def test_roster_sync_adds_the_courses_learners(lti):
    lti.platform.members = [member("s-1", "Grace Hopper", email="grace@uni.example"), member("s-2", "Alan Turing"),
                            member("t-1", "Dr Teacher", INSTRUCTOR), member("s-3", "Gone Student", status="Inactive"),
                            member("lms-user-1", "Ada Lovelace", email="ada.lovelace@uni.example")]
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303  # Ada, before the sync
    teacher = lti.client()
    assert launch(teacher, lti.platform, "teacher-1", roles=(INSTRUCTOR,)).status_code == 303
    page = teacher.get("/instructor")
    page = teacher.post("/instructor/lti/sync-roster", data={"csrf": csrf(page), "platform": "1", "context": CONTEXT})
    assert page.status_code == 200, page.text[:500]
    assert "2 learner(s) of Systems programming added to the roster: grace, alan-turing; 1 on it already" in page.text
    assert {s.id: s.name for s in accounts.students(lti.store)} == {
        "ada.lovelace": "Ada Lovelace", "grace": "Grace Hopper", "alan-turing": "Alan Turing"}
    # Grace's first launch signs her in as the student the sync made; her score goes to the course.
    assert launch(lti.client(), lti.platform, "s-1", exercise=EXERCISE, name="Grace Hopper").status_code == 303
    assert lms_students(lti.store)["s-1"] == "grace" and len(accounts.students(lti.store)) == 3
    grade(lti, "alan-turing", 4, "c")  # never launched: a member by the sync, scored all the same
    ags.sync_round(lti.store, lti.service.exercises)
    assert [(s["userId"], s["scoreGiven"]) for s in lti.platform.scores] == [("s-2", 4)]


def test_roster_sync_from_the_command_line(lti, capsys):
    lti.platform.members = [member("s-9", "Barbara Liskov")]
    assert launch(lti.client(), lti.platform, "teacher-1", roles=(INSTRUCTOR,)).status_code == 303
    assert main(["lti", "sync-roster", "--db", str(lti.store.location)]) == 0
    assert "1 learner(s) added: barbara-liskov" in capsys.readouterr().out


# -- refused launches -------------------------------------------------------------------------------------

def refused(lti, response, status: int, title: str) -> None:
    assert response.status_code == status, (response.status_code, response.text[:600])
    assert title in response.text and "<html" in response.text.lower()
    assert COOKIE not in response.cookies, "a refused launch signed someone in"
    assert accounts.students(lti.store) == [], "a refused launch added a student"


@pytest.mark.parametrize(("token", "status", "title"), [
    ({"key": "other", "kid": None}, 401, "Forged id_token"),
    ({"key": "other", "kid": "attackers-key"}, 401, "Unknown signing key"),
    ({"issued_ago_s": 1000, "lifetime_s": 300}, 401, "Expired id_token"),
    ({"issued_ago_s": -3600}, 401, "id_token from the future"),
    ({"aud": "another-tool"}, 401, "Wrong audience"),
    ({"aud": ["another-tool", CLIENT_ID]}, 401, "Wrong authorized party"),
    ({"aud": [CLIENT_ID, "another-tool"], "azp": "another-tool"}, 401, "Wrong authorized party"),
    ({"deployment": "deployment-unknown"}, 403, "Deployment not registered"),
    ({"iss": "https://lms.elsewhere.example"}, 403, "Platform not registered"),
], ids=["forged", "unknown-key", "expired", "future", "wrong-aud", "aud-list-no-azp", "wrong-azp",
        "unknown-deployment", "unknown-issuer"])
def test_a_bad_id_token_is_refused(lti, token, status, title):
    if token.get("key") == "other":
        token = {**token, "key": rsa_key()}
    token = {k: v for k, v in token.items() if v is not None}
    refused(lti, launch(lti.client(), lti.platform, **token), status, title)


def test_an_audience_list_with_this_tool_as_azp_is_taken(lti):
    response = launch(lti.client(), lti.platform, aud=["another-tool", CLIENT_ID], azp=CLIENT_ID)
    assert response.status_code == 303


def test_a_replayed_launch_is_refused(lti):
    client = lti.client()
    state, nonce = login(client, lti.platform)
    data = {"id_token": lti.platform.id_token(nonce), "state": state}
    assert client.post("/lti/launch", data=data, follow_redirects=False).status_code == 303
    # The attacker has everything: the id_token, the state, and the state's cookie.
    thief = lti.client()
    thief.cookies.set(STATE_COOKIE + state, state)
    response = thief.post("/lti/launch", data=data, follow_redirects=False)
    assert response.status_code == 403 and "Replayed launch" in response.text and COOKIE not in response.cookies


def test_a_nonce_the_tool_never_issued_is_refused(lti):
    client = lti.client()
    state, _ = login(client, lti.platform)
    response = client.post("/lti/launch", data={"id_token": lti.platform.id_token("made-up-nonce"), "state": state},
                           follow_redirects=False)
    refused(lti, response, 403, "Unknown nonce")


def test_a_launch_without_its_state_or_with_anothers_is_refused(lti):
    client = lti.client()
    state, nonce = login(client, lti.platform)
    id_token = lti.platform.id_token(nonce)
    refused(lti, client.post("/lti/launch", data={"id_token": id_token}, follow_redirects=False),
            400, "Launch without state")
    # Another browser (no state cookie): the launch cannot be tied to its login.
    refused(lti, lti.client().post("/lti/launch", data={"id_token": id_token, "state": state}, follow_redirects=False),
            400, "Launch state missing")
    # This browser, with a state not its own.
    other, _ = login(lti.client(), lti.platform)
    refused(lti, client.post("/lti/launch", data={"id_token": id_token, "state": other}, follow_redirects=False),
            400, "Launch state mismatch")
    refused(lti, client.post("/lti/launch", data={"state": state}, follow_redirects=False),
            400, "Launch without id_token")
    # The nonce was not used by any of these: the real launch still works.
    assert client.post("/lti/launch", data={"id_token": id_token, "state": state},
                       follow_redirects=False).status_code == 303


def test_a_login_from_an_unknown_platform_is_refused(lti):
    response = lti.client().get("/lti/login", params={"iss": "https://lms.elsewhere.example", "login_hint": "x"},
                                follow_redirects=False)
    assert response.status_code == 403 and "not registered" in response.text and "set-cookie" not in response.headers


def test_a_revoked_student_is_not_signed_in_by_a_launch(lti):
    assert launch(lti.client(), lti.platform).status_code == 303
    accounts.revoke_links(lti.store, "ada.lovelace")
    response = launch(lti.client(), lti.platform)
    assert response.status_code == 403 and "Access revoked" in response.text and COOKIE not in response.cookies
    accounts.new_link(lti.store, "student", "ada.lovelace")  # the instructor restores access
    assert launch(lti.client(), lti.platform).status_code == 303


@pytest.mark.unit
def test_the_lti_pages_are_the_services_only_when_handed_to_it(tmp_path):
    """The web application does not look for grader/lti (which stands above it): whoever assembles the
    service hands its pages in."""
    with Store(tmp_path / "grader.db") as store:
        store.migrate()
        service = Service(store=store, dispatcher=Recorded(), exercises={}, base_url=BASE)
        assert TestClient(create_app(service), base_url=BASE).get("/lti/jwks").status_code == 404
        pages = lti_pages()
        assert pages is not None and pages.panel(store) is None  # no platform registered: no dashboard block
        assert TestClient(create_app(service, pages), base_url=BASE).get("/lti/jwks").json()["keys"]


@pytest.mark.unit
def test_a_call_to_a_platform_no_longer_registered_fails_alike_for_scores_and_rosters(tmp_path):
    """Both services find the platform a call goes to in one place (`services.registered`)."""
    with Store(tmp_path / "grader.db") as store:
        store.migrate()
        with pytest.raises(services.ServiceError, match="the platform is no longer registered"):
            services.registered(store, 99)
        with pytest.raises(services.ServiceError, match="the platform is no longer registered"):
            nrps.sync_roster(store, nrps.Course(99, "course-1", "A course", "https://lms.example/members"))


# -- the command line -------------------------------------------------------------------------------------

@pytest.mark.unit
def test_grader_serve_hands_the_lti_pages_to_the_service(tmp_path, monkeypatch):
    handed = []
    monkeypatch.setattr("grader.web.serve.serve", lambda options, lti=None: handed.append(lti))
    assert main(["serve", "--db", str(tmp_path / "class.db"), "--port", "0"]) == 0
    assert isinstance(handed[0], LtiPages) and "/lti/launch" in [getattr(r, "path", "") for r in handed[0].routes]


@pytest.mark.unit
def test_add_platform_and_list(tmp_path, capsys):
    db = str(tmp_path / "class.db")
    args = ["lti", "add-platform", "--issuer", "https://canvas.example.edu", "--client-id", "100001",
            "--deployment", "1:abc", "--auth-login-url", "https://canvas.example.edu/api/lti/authorize_redirect",
            "--auth-token-url", "https://canvas.example.edu/login/oauth2/token",
            "--keyset-url", "https://canvas.example.edu/api/lti/security/jwks", "--tier", "premium",
            "--db", db, "--base-url", "https://grader.example.edu"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "https://grader.example.edu/lti/login" in out and "https://grader.example.edu/lti/jwks" in out
    assert "https://grader.example.edu/lti/launch" in out
    assert main([*args[:7], "2:def", *args[8:]]) == 0  # a second deployment of the same platform
    capsys.readouterr()
    assert main(["lti", "list", "--db", db]) == 0
    assert "client id 100001  deployment(s) 1:abc, 2:def  tier premium" in capsys.readouterr().out
    assert main([*args[:-4], "--auth-login-url", "ftp://x", "--db", db]) == 2


@pytest.mark.unit
def test_add_platform_makes_the_tier_an_explicit_choice(tmp_path, capsys):
    """The LMS's students got the free tier by default, and their LMS grade was the visible tests' 10/88."""
    args = ["lti", "add-platform", "--issuer", "https://moodle.example.edu", "--client-id", "AbC123",
            "--deployment", "2", "--auth-login-url", "https://moodle.example.edu/mod/lti/auth.php",
            "--auth-token-url", "https://moodle.example.edu/mod/lti/token.php",
            "--keyset-url", "https://moodle.example.edu/mod/lti/certs.php", "--db", str(tmp_path / "c.db")]
    with pytest.raises(SystemExit) as refused:
        main(args)
    assert refused.value.code == 2 and "--tier" in capsys.readouterr().err
    assert main([*args, "--tier", "premium"]) == 0 and "new students: premium" in capsys.readouterr().out
    # Every add-platform the docs show says the tier, as premium.
    from pathlib import Path

    project = Path(__file__).resolve().parents[1]
    commands = [(doc.name, text.split("`")[0]) for doc in [project / "README.md", *sorted((project / "docs").glob("*.md"))]
                for text in doc.read_text().split("grader lti add-platform")[1:] if text.startswith(" --")]
    assert len(commands) >= 5 and all("--tier premium" in command for _, command in commands), commands


def test_the_serve_thread_sends_a_new_grading_s_score_by_itself(lti):
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    sync = ags.ScoreSync(lti.store, lti.service.exercises, interval_s=0.05)
    sync.start()
    try:
        grade(lti, "ada.lovelace", 3, "a")
        deadline = time.monotonic() + 20
        while not lti.platform.scores:
            assert time.monotonic() < deadline, "the thread sent no score"
            time.sleep(0.05)
        grade(lti, "ada.lovelace", 4, "b")
        while len(lti.platform.scores) < 2:
            assert time.monotonic() < deadline, "the thread did not send the changed score"
            time.sleep(0.05)
    finally:
        sync.stop()
    assert [s["scoreGiven"] for s in lti.platform.scores] == [3, 4]


def test_a_login_for_another_address_is_refused(lti):
    response = lti.client().get("/lti/login", params={"iss": lti.platform.issuer, "login_hint": "x",
                                                      "client_id": CLIENT_ID,
                                                      "target_link_uri": "https://elsewhere.example/lti/launch"},
                                follow_redirects=False)
    assert response.status_code == 400 and "not at this tool&#39;s address https://testserver/" in response.text


def test_without_the_lti_extra_the_service_runs_without_its_pages(tmp_path):
    """`pip install 'grader[service]'` alone: no PyJWT; the app is made, with no /lti route, and the
    dashboard has no LTI block."""
    import subprocess
    import sys

    from tests.helpers import PROJECT

    script = f"""
import sys
from importlib.abc import MetaPathFinder

class Absent(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("jwt", "cryptography"):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Absent())
from starlette.testclient import TestClient
from grader.core.exercise import load_exercise
from grader.service import accounts, staff
from grader.course.store import Store
from grader.lti.mount import lti_pages
from grader.web.app import Service, create_app
from grader.web.auth import COOKIE, SIGNIN_COOKIE
from tests.service import press_sign_in
store = Store({str(tmp_path / "grader.db")!r})
exercise = load_exercise({EXERCISE!r})
service = Service(store=store, dispatcher=None, exercises={{exercise.slug: exercise}}, base_url="http://testserver")
client = TestClient(create_app(service, lti_pages()))
assert client.get("/lti/jwks").status_code == 404
signed = press_sign_in(client, "/signin/" + accounts.new_link(store, "instructor"))
client.cookies.set(COOKIE, signed.cookies[COOKIE])
page = client.get("/instructor")
assert page.status_code == 200 and 'id="lti"' not in page.text, page.text[:300]
assert "jwt" not in sys.modules
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


# -- the term as an instructor ran it ------------------------------------------------------------------------

def test_a_launch_before_the_exercise_opens_says_when_it_does(lti):
    lti.store.set_exercise_terms(EXERCISE, {"opens": "2099-01-05T08:00:00+01:00"}, "instructor")
    landed = launch(lti.client(), lti.platform, exercise=EXERCISE)
    assert landed.status_code == 403 and "opens 2099-01-05 08:00 UTC+01:00" in landed.text, landed.text[:300]
    teacher = launch(lti.client(), lti.platform, "teacher-1", roles=(INSTRUCTOR,), exercise=EXERCISE)
    assert teacher.status_code == 303 and teacher.headers["location"] == f"/exercises/{EXERCISE}"


# Every POST route that is not a button of a page that changes something, and why.
NOT_BUTTONS = {"/lti/login": "the OIDC login the platform starts: a protocol step, not a button",
               "/lti/launch": "the launch the platform posts: a protocol step, it redirects or shows deep linking",
               "/instructor/site.zip": "a download: it changes nothing"}


def test_every_button_that_changes_something_redirects_after_its_post(lti):
    """Post/redirect/get everywhere: the roster sync and "Send them now" answered in place, so a reload posted
    again. Each POST route of the service is listed here: one added without a redirect fails this test."""
    from starlette.routing import Route

    lti.platform.members = [member("s-1", "Grace Hopper", email="grace@uni.example")]
    lti.service.exercises[EXERCISE] = dataclasses.replace(
        lti.exercise, web=dataclasses.replace(lti.exercise.web, submission_interval_s=0))
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303
    teacher = lti.client()
    assert launch(teacher, lti.platform, "teacher-1", roles=(INSTRUCTOR,)).status_code == 303
    token = csrf(teacher.get("/instructor"))
    grade(lti, "ada.lovelace", 3, "a")
    [sub] = lti.store.submissions(EXERCISE)
    student = lti.client()
    assert launch(student, lti.platform, exercise=EXERCISE).status_code == 303
    student_token = csrf(student.get(f"/exercises/{EXERCISE}"))
    fresh = lti.client()
    link = accounts.new_link(lti.store, "student", "ada.lovelace")
    signin_page = fresh.get(f"/signin/{link}")
    terms = {"csrf": token, "opens": "", "due": "", "closes": "", "zone": "0", "per_day": "0", "cap": "",
             "release": "on_release"}
    staff.add_ta(lti.store, "bea", "Bea Assistant")
    presses = [  # (who, path, form), in an order each can run in
        (teacher, "/instructor/lti/retry", {}),
        (teacher, "/instructor/lti/sync-roster", {"platform": "1", "context": CONTEXT}),
        (teacher, "/instructor/roster", {"csv": "id,name\neve,Eve\n"}),
        (teacher, f"/instructor/exercises/{EXERCISE}", terms),
        (teacher, f"/instructor/exercises/{EXERCISE}/release", {}),
        (student, f"/submissions/{sub.id}/inquiry", {"about": "", "message": "Why did test 3 fail?"}),
        (teacher, "/inquiries/1/reply", {"message": "It reads the budget after the decodes."}),
        (teacher, "/inquiries/1/resolve", {}),
        (teacher, "/instructor/inquiry-settings", {"window_days": "7"}),
        (teacher, "/instructor/tas/bea/revoke", {}),
        (teacher, f"/instructor/exercises/{EXERCISE}/withhold", {}),
        (teacher, f"/submissions/{sub.id}/adjust", {"points": "1", "comment": "fine"}),
        (teacher, "/instructor/students/eve/tier", {"tier": "premium"}),
        (teacher, "/instructor/students/eve/link", {"confirm": "eve"}),
        (teacher, "/instructor/students/eve/revoke", {"confirm": "eve"}),
        (teacher, f"/instructor/regrade/{EXERCISE}", {}),
        (teacher, "/instructor/link", {}),
        (student, f"/exercises/{EXERCISE}/prediction", {"choice": "0"}),
        (student, f"/exercises/{EXERCISE}/submit", {"code": "def f():\n    return 2\n"}),
        (fresh, f"/signin/{link}", {"csrf": signin_page.cookies[SIGNIN_COOKIE]}),
        (student, "/signout", {}),
    ]
    routes = lti.client().app.app.app.routes
    posted = {r.path for r in routes if isinstance(r, Route) and "POST" in (r.methods or set())}
    pressed = {route.path for route in routes for _, path, _ in presses
               if isinstance(route, Route) and route.path_regex.fullmatch(path)}
    assert posted - set(NOT_BUTTONS) == pressed, "a POST route neither pressed here nor said why it is not a button"
    for who, path, form in presses:
        if "csrf" not in form:
            form = {"csrf": student_token if who is student else token, **form}
        answer = who.post(path, data=form, follow_redirects=False)
        assert answer.status_code == 303, (path, answer.status_code, answer.text[:300])
    # The notices of the buttons that answered in place are on the page they redirect to, once.
    sent = teacher.post("/instructor/lti/retry", data={"csrf": token}, follow_redirects=False)
    page = teacher.get(sent.headers["location"])
    assert "score(s) sent to the LMS." in page.text
    assert "score(s) sent to the LMS." not in teacher.get("/instructor").text
    synced = teacher.post("/instructor/lti/sync-roster", data={"csrf": token, "platform": "1", "context": CONTEXT})
    assert "learner(s) of Systems programming added to the roster" in synced.text


def test_one_gradebook_across_exercises_gives_each_students_lms_id_and_email(lti):
    """The gradebook was one file per exercise, with no LMS user id or email to match the LMS's rows by."""
    import csv
    import io

    second = dataclasses.replace(lti.exercise, slug="second")
    lti.service.exercises["second"] = second
    lti.platform.members = [member("s-1", "Grace Hopper", email="grace@uni.example")]
    assert launch(lti.client(), lti.platform, exercise=EXERCISE).status_code == 303  # Ada, with her email
    teacher = lti.client()
    assert launch(teacher, lti.platform, "teacher-1", roles=(INSTRUCTOR,)).status_code == 303
    teacher.post("/instructor/lti/sync-roster", data={"csrf": csrf(teacher.get("/instructor")), "platform": "1",
                                                      "context": CONTEXT})
    accounts.add_student(lti.store, "bob", "Bob Roster")  # on the roster alone: no LMS, no submission
    grade(lti, "ada.lovelace", 3, "a")
    [first] = lti.store.submissions(EXERCISE)
    lti.store.adjust(first.id, 1, "well argued", "instructor")
    made, _ = lti.store.add_submission("grace", "second", "free", "g" * 64, second.submission_file, b"# g\n",
                                       state="graded")
    lti.store.save_scorecard(made, dataclasses.replace(new_scorecard(second, "free", "local"), score=2))
    download = teacher.get("/instructor/gradebook.csv")
    assert download.status_code == 200 and download.headers["content-type"].startswith("text/csv")
    assert 'filename="gradebook-latest.csv"' in download.headers["content-disposition"]
    rows = {row["student"]: row for row in csv.DictReader(io.StringIO(download.text))}
    assert list(rows) == ["ada.lovelace", "bob", "grace"]
    maximum = new_scorecard(lti.exercise, "free", "local").exercise_max_score
    ada, grace, bob = rows["ada.lovelace"], rows["grace"], rows["bob"]
    assert (ada["email"], ada["lms_user_id"], ada["name"]) == ("ada.lovelace@uni.example", "lms-user-1", "Ada Lovelace")
    assert (ada[f"{EXERCISE}:score"], ada[f"{EXERCISE}:max_score"], ada[f"{EXERCISE}:adjustment"]) == \
        ("4", str(maximum), "1")
    assert ada["second:score"] == "" and grace["second:score"] == "2" and grace[f"{EXERCISE}:score"] == ""
    assert (grace["email"], grace["lms_user_id"]) == ("grace@uni.example", "s-1")
    assert (bob["email"], bob["lms_user_id"], bob["name"]) == ("", "", "Bob Roster")
    assert teacher.get("/instructor/gradebook.csv?policy=best").status_code == 200
    assert teacher.get("/instructor/gradebook.csv?policy=worst").status_code == 400
    assert 'href="/instructor/gradebook.csv"' in teacher.get("/instructor").text
    student = lti.client()
    assert launch(student, lti.platform, exercise=EXERCISE).status_code == 303
    assert student.get("/instructor/gradebook.csv").status_code == 403


def test_the_change_history_names_who_made_each_change(lti):
    """The history said "instructor (sign-in link 1)", not who."""
    from grader.web.auth import COOKIE as SESSION

    teacher = lti.client()
    assert launch(teacher, lti.platform, "teacher-1", roles=(INSTRUCTOR,), name="Dr Ruth Teacher").status_code == 303
    form = {"csrf": csrf(teacher.get("/instructor")), "opens": "", "due": "2099-01-05T23:59", "closes": "",
            "zone": "0", "per_day": "0", "cap": "", "release": "at_once"}
    assert teacher.post(f"/instructor/exercises/{EXERCISE}", data=form, follow_redirects=False).status_code == 303
    assert store_by(lti.store) == ["Dr Ruth Teacher (LMS user teacher-1)"]
    # A link the dashboard makes for a named colleague: what they change is recorded under their name.
    made = teacher.post("/instructor/link", data={"csrf": form["csrf"], "name": "Grace Hopper"})
    [link] = re.findall(r'<td class="link">([^<]+)</td>', made.text)
    colleague = lti.client()
    pressed = press_sign_in(colleague, link.replace(BASE, ""))
    colleague.cookies.set(SESSION, pressed.cookies[SESSION])
    grade(lti, "ada.lovelace", 3, "a")
    [sub] = lti.store.submissions(EXERCISE)
    adjusted = colleague.post(f"/submissions/{sub.id}/adjust", data={
        "csrf": csrf(colleague.get("/instructor")), "points": "1", "comment": "kind"}, follow_redirects=False)
    assert adjusted.status_code == 303
    assert re.match(r"Grace Hopper \(sign-in link \d+\)$", lti.store.adjustments()["ada.lovelace", EXERCISE].by)
    # A change recorded before the history named people names them now.
    link_id = lti.store.adjustments()["ada.lovelace", EXERCISE].by.split("link ")[1].rstrip(")")
    lti.store.set_exercise_terms(EXERCISE, {"late_cap": 50.0}, f"instructor (sign-in link {link_id})")
    history = teacher.get(f"/instructor/exercises/{EXERCISE}").text
    assert "<td>Grace Hopper (sign-in link" in history and "<td>Dr Ruth Teacher (LMS user teacher-1)</td>" in history
    assert "<td>instructor (sign-in link" not in history


def store_by(store: Store) -> list[str]:
    return [change.by for _, change in store.exercise_term_history(EXERCISE)]


# -- the platform's key set ------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "title", "said"), [
    (b'{"keys": []}', "Platform has no usable keys", "is empty"),
    (b"<html>Sign in to Canvas</html>", "Platform keys malformed", "is not JSON"),
    (b'{"kid": "platform-key-1"}', "Platform keys malformed", "has no list of keys"),
    (b'{"keys": [{"kty": "RSA", "kid": "platform-key-1", "n": "!!", "e": "AQAB"}]}', "Platform has no usable keys",
     "none an RSA signing key"),
    (b'{"keys": [' + b" " * (300 * 1024) + b"]}", "Platform keys too large", "over 256 KiB"),
    (None, "Platform keys unavailable", "could not be fetched"),
], ids=["empty", "not-json", "no-list", "unusable-key", "too-large", "unreachable"])
def test_a_bad_key_set_gets_a_502_page_saying_what_is_wrong_with_the_platforms_keys(lti, body, title, said):
    client = lti.client()
    state, nonce = login(client, lti.platform)
    id_token = lti.platform.id_token(nonce)
    if body is None:
        lti.platform.stop()
    else:
        lti.platform.jwks_body = body
    response = client.post("/lti/launch", data={"id_token": id_token, "state": state}, follow_redirects=False)
    refused(lti, response, 502, title)
    assert said in response.text and lti.platform.registration["keyset_url"] in response.text
    assert "fault is ours" not in response.text


def test_a_key_set_slower_than_its_time_gets_a_502_page(lti, monkeypatch):
    from grader.lti import key_sets

    monkeypatch.setattr(key_sets, "FETCH_TIMEOUT_S", 0.5)
    lti.platform.jwks_delay_s = 3
    started = time.monotonic()
    refused(lti, launch(lti.client(), lti.platform), 502, "Platform keys too slow")
    assert time.monotonic() - started < 2.5


def test_concurrent_launches_wait_for_one_fetch_of_the_key_set_which_is_kept_for_its_lifetime(lti):
    import concurrent.futures

    lti.platform.jwks_delay_s = 1.0
    lti.platform.jwks_headers = {"Cache-Control": "max-age=3600"}
    clients = [lti.client() for _ in range(8)]
    posts = []
    for number, client in enumerate(clients):
        state, nonce = login(client, lti.platform, f"user-{number}")
        posts.append((client, {"id_token": lti.platform.id_token(nonce, f"user-{number}"), "state": state}))
    with concurrent.futures.ThreadPoolExecutor(len(posts)) as pool:
        answers = list(pool.map(lambda p: p[0].post("/lti/launch", data=p[1], follow_redirects=False), posts))
    assert [a.status_code for a in answers] == [303] * len(posts)
    assert lti.platform.jwks_requests == 1
    # Kept: later launches, and one with a key id the set lacks (made up), ask the platform nothing more.
    lti.platform.jwks_delay_s = 0
    assert launch(lti.client(), lti.platform, "user-9").status_code == 303
    refused_answer = launch(lti.client(), lti.platform, "user-10", key=rsa_key(), kid="made-up")
    assert refused_answer.status_code == 401 and "Unknown signing key" in refused_answer.text
    assert lti.platform.jwks_requests == 1


def in_own_loop(coroutine):
    """A coroutine's result, run on a loop of its own in a thread of its own (a browser test's Playwright
    may hold this thread's loop)."""
    import asyncio
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def fetches_within(header: str, kept_s: float) -> list[int]:
    """How many fetches a key set answering with Cache-Control `header` has had: after a first launch,
    after another just before `kept_s` and after a third just past it."""

    from grader.lti import key_sets

    body = json.dumps({"keys": [TestPlatform().jwk()]}).encode()
    now, counts = [1000.0], []
    sets = key_sets.KeySets(lambda url: key_sets.Fetched(body, key_sets.max_age(header)), clock=lambda: now[0])
    for step in (0, kept_s - 1, 2):
        now[0] += step
        in_own_loop(sets.signing_key("https://lms.example/jwks", "platform-key-1"))
        counts.append(sets.fetches)
    sets.pool.shutdown()
    return counts


@pytest.mark.unit
def test_a_key_set_is_kept_as_long_as_its_cache_control_says_within_bounds():
    from grader.lti import key_sets

    for header, kept_s in (("max-age=120", 120), ("", key_sets.DEFAULT_KEEP_S), ("no-store", key_sets.MIN_KEEP_S),
                           ("public, max-age=99999999", key_sets.MAX_KEEP_S), ("max-age=5", key_sets.MIN_KEEP_S)):
        assert fetches_within(header, kept_s) == [1, 1, 2], header


def test_logins_and_launches_from_one_address_are_limited_and_the_nonces_bounded(lti, monkeypatch):
    from grader.lti import launch as launch_module
    from grader.lti import routes

    monkeypatch.setattr(routes, "LOGINS_BURST", 5)
    client = lti.client()
    params = {"iss": lti.platform.issuer, "login_hint": "x", "client_id": CLIENT_ID}
    answers = [client.get("/lti/login", params=params, follow_redirects=False) for _ in range(6)]
    assert [a.status_code for a in answers] == [302] * 5 + [429]
    assert "Too many logins" in answers[-1].text and int(answers[-1].headers["retry-after"]) >= 1
    with lti.store.reading() as db:
        assert db.execute(select(schema.lti_nonces.c.nonce)).all().__len__() == 5
    # Launches alike (any id_token: the count comes first).
    posts = [client.post("/lti/launch", data={"id_token": "x", "state": "y"}) for _ in range(6)]
    assert [a.status_code for a in posts][-1] == 429 and "Too many launches" in posts[-1].text
    # However many addresses, the logins waiting in the store are bounded.
    monkeypatch.setattr(routes, "LOGINS_BURST", 1000)
    routes._rates.clear()  # the buckets made with the burst of 5
    monkeypatch.setattr(launch_module, "MAX_LOGINS_WAITING", 8)
    answers = [lti.client().get("/lti/login", params=params, follow_redirects=False) for _ in range(4)]
    assert [a.status_code for a in answers] == [302] * 3 + [503] and "Too many logins under way" in answers[-1].text


def test_a_login_or_launch_field_over_its_limit_is_refused(lti):
    params = {"iss": lti.platform.issuer, "login_hint": "x" * 3000, "client_id": CLIENT_ID}
    answer = lti.client().get("/lti/login", params=params, follow_redirects=False)
    assert answer.status_code == 400 and "at most 2,000" in answer.text
    answer = lti.client().post("/lti/launch", data={"id_token": "x" * 70_000, "state": "y" * 30})
    assert answer.status_code == 400 and "at most 65,536" in answer.text


@pytest.mark.unit
def test_launches_waiting_for_a_key_set_are_bounded_and_share_one_fetch(monkeypatch):
    import asyncio
    import threading

    from grader.lti import key_sets

    monkeypatch.setattr(key_sets, "MAX_WAITING", 3)
    body = json.dumps({"keys": [TestPlatform().jwk()]}).encode()
    release = threading.Event()

    def slow_fetch(url: str) -> key_sets.Fetched:
        release.wait(10)
        return key_sets.Fetched(body, None)

    sets = key_sets.KeySets(slow_fetch)

    async def launches() -> list[object]:
        async def one() -> object:
            try:
                return await sets.signing_key("https://lms.example/jwks", "platform-key-1")
            except key_sets.KeySetError as exc:
                return exc

        waiting = [asyncio.ensure_future(one()) for _ in range(3)]
        await asyncio.sleep(0.1)
        refused = await one()  # a fourth while three wait
        release.set()
        return [*(await asyncio.gather(*waiting)), refused]

    *keys, refused = in_own_loop(launches())
    assert all(isinstance(key, jwt.PyJWK) for key in keys) and sets.fetches == 1
    assert isinstance(refused, key_sets.KeySetError) and refused.status == 503 and "3 launches wait" in refused.message
    sets.pool.shutdown()
