"""The instructor's pages: the dashboard and what its actions do (the roster, links, tiers, extensions,
an exercise's terms, releasing results), a student's history, adjusting a grade, regrading an exercise,
the class site (its pages, and as a zip) and the similarity report.

An action ends on the dashboard's own address (post/redirect/get); one that signs a student out is never
one click: its page says what it does first.
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import quote, unquote, urlencode

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from grader.core.exercise import Exercise
from grader.core.fingerprint import exercise_fingerprint
from grader.course.gradebook import pick
from grader.course.store import StoredSubmission
from grader.course.terms import TermsError
from grader.diagnosis.counts import MisconceptionCount, misconception_counts
from grader.errors import StoreError
from grader.service import accounts, inquiries, jobs, staff
from grader.web import release, terms_page
from grader.web.auth import TOKEN, delete_cookie, set_cookie
from grader.web.base import Page, Service, enqueue, log, render, text_field, whole_number
from grader.web.lookup import deadlines_of, exercise_of, extension_row, late_ids, shown_to, submission_for

# The links an instructor's action just made, carried to the dashboard it redirects to and shown there once.
NEW_LINKS_COOKIE = "grader_new_links"
NEW_LINKS_SECONDS = 120
# The most links one redirect carries (a cookie holds about 4 KB): a roster that makes more is answered in place.
NEW_LINKS_MOST = 100
# What an action that redirected says on the dashboard when it is more than DONE's sentences (counts, names):
# carried like the links, shown once.
NOTICE_COOKIE = "grader_notice"
NOTICE_LIMIT = 1000
MEDIA = {"html": "text/html; charset=utf-8", "csv": "text/csv; charset=utf-8", "json": "application/json"}


# The overviews of the other policies, beside that of the latest: under their own folder, so that the
# site's relative links keep the policy.
POLICY_FOLDERS = ("best", "on-time")
SITE_POLICIES = ("latest", *POLICY_FOLDERS)


def dashboard(service: Service, request: Request, who: accounts.Session | None, form: FormData | None,
              new_links: list[tuple[str, str]] | None = None, notice: str = "", status: int = 200,
              roster_text: str = "", problem: str = "", roster_problems: list[str] | None = None) -> Response:
    if form is None:  # the page an action redirected to: what it did, and the links it made, shown once
        new_links = shown_once(service, request)
        notice = notice or done_notice(service, request, bool(new_links)) or \
            unquote(request.cookies.get(NOTICE_COOKIE, ""))[:NOTICE_LIMIT]
    subs = service.store.submissions()
    counts: dict[str, int] = {}
    for sub in subs:
        counts[sub.state] = counts.get(sub.state, 0) + 1
    predictions = {slug: prediction_tally(exercise, accounts.prediction_counts(service.store, slug))
                   for slug, exercise in service.exercises.items() if exercise.prediction is not None}
    releases = release.release_rows(deadlines_of(service).terms, service.clock())
    response = render("instructor.html.j2", status, who=who, students=accounts.students(service.store),
                      releases=releases, policies=SITE_POLICIES,
                      exercises=list(service.exercises.values()), counts=counts, total=len(subs),
                      grading_problems=grading_problems(service), predictions=predictions, misconceptions=misconceptions_by_exercise(subs),
                      stale=stale_scorecards(service, subs), new_links=new_links or [], notice=notice,
                      terms={slug: terms_page.summary(t, service.clock()) for slug, t in deadlines_of(service).terms.items()},
                      roster_text=roster_text, problem=problem, roster_problems=roster_problems or [],
                      spooled=service.spool.count() if service.spool is not None else 0,
                      lti=lti_panel(service, request), inquiries=inquiries.counts(service.store),
                      tas=staff.teaching_assistants(service.store))
    for cookie in (NEW_LINKS_COOKIE, NOTICE_COOKIE):
        if cookie in request.cookies:
            delete_cookie(service, response, cookie, path="/instructor")
    return response


# What the dashboard says after an action that redirected to it (post/redirect/get), by the action's name.
DONE = {
    "tier": "{student} is now {tier}.",
    "link": "New sign-in link for {student}: the old one no longer works, and {student} is signed out.",
    "revoke": "The sign-in link of {student} is revoked, and {student} is signed out: only a new link lets "
              "them in again.",
    "instructor-link": "A new instructor sign-in link: it works once.",
    "released": "The results of {exercise} are released: its students see every result and their score now.",
    "withheld": "The results of {exercise} are withheld again: its students see the open tests' results only, "
                "until you release them.",
}
SHOWN_ONCE = " The link was shown once, when it was made: if it was not kept, make another."


def after(service: Service, done: str = "", student: str = "", tokens: tuple[str, ...] = (),
          exercise: str = "", notice: str = "") -> Response:
    """Post/redirect/get: an instructor's action ends on the dashboard's own address, which says what was
    done, so that a reload does not do it again. The links it made travel to that page in a cookie for a
    moment and are shown once: they are not in the address (nor in the history, nor in a log). A `notice`
    (what the action found: counts, names) travels alike, so that the address says nothing a link could fake."""
    query = urlencode({**({"done": done} if done else {}), **({"student": student} if student else {}),
                       **({"exercise": exercise} if exercise else {})})
    response = RedirectResponse(f"/instructor?{query}" if query else "/instructor", status_code=303)
    if tokens:
        set_cookie(service, response, NEW_LINKS_COOKIE, ".".join(tokens), path="/instructor",
                   max_age=NEW_LINKS_SECONDS, samesite="strict")
    if notice:
        set_cookie(service, response, NOTICE_COOKIE, quote(notice[:NOTICE_LIMIT]), path="/instructor",
                   max_age=NEW_LINKS_SECONDS, samesite="strict")
    return response


def done_notice(service: Service, request: Request, links_shown: bool) -> str:
    done = request.query_params.get("done", "")
    if done not in DONE:
        return ""
    student = accounts.student(service.store, request.query_params.get("student", ""))
    exercise = service.exercises.get(request.query_params.get("exercise", ""))
    if ("{student}" in DONE[done] and student is None) or ("{exercise}" in DONE[done] and exercise is None):
        return ""
    notice = DONE[done].format(student=student.id if student else "", tier=student.tier if student else "",
                               exercise=exercise.title if exercise else "")
    return notice + (SHOWN_ONCE if done in ("link", "instructor-link") and not links_shown else "")


def shown_once(service: Service, request: Request) -> list[tuple[str, str]]:
    """The links the action that redirected here made (the cookie it set), each only while it still signs
    someone in: a cookie made elsewhere shows no link that is not one."""
    links = []
    for token in request.cookies.get(NEW_LINKS_COOKIE, "").split(".")[:NEW_LINKS_MOST]:
        holder = accounts.link_holder(service.store, token) if TOKEN.fullmatch(token) else None
        if holder is not None:
            whom = holder.student or (f"{holder.ta} (TA)" if holder.ta else "instructor")
            links.append((whom, service.link(token)))
    return links


def grading_problems(service: Service) -> list[str]:
    """What keeps the graders from taking work, as the queue says it, for the dashboard."""
    try:
        return service.dispatcher.health()
    except Exception:
        log.exception("asking the graders how they are failed")
        return ["The queue cannot say how its graders are."]


def misconceptions_by_exercise(subs: list[StoredSubmission]) -> dict[str, list[MisconceptionCount]]:
    """Per exercise, students per misconception their latest graded submission looks like."""
    latest = pick(subs, "latest")
    return {exercise: misconception_counts([sub.card for (_, slug), sub in latest.items()
                                            if slug == exercise and sub.card is not None])
            for exercise in sorted({slug for _, slug in latest})}


def prediction_tally(exercise: Exercise, counts: dict[str, int]) -> dict[str, Any]:
    """The answers to the exercise's question: each choice, in its order, with how many chose it and
    whether it is the right one (an answer stored under a choice since reworded is counted apart)."""
    assert exercise.prediction is not None
    choices = exercise.prediction.choices
    rows = [{"choice": c, "count": counts.get(c, 0), "right": i == exercise.prediction.answer, "reworded": False}
            for i, c in enumerate(choices)]
    rows += [{"choice": c, "count": n, "right": False, "reworded": True} for c, n in counts.items() if c not in choices]
    total = sum(counts.values())
    return {"rows": rows, "total": total,
            "right": sum(r["count"] for r in rows if r["right"])}


def stale_scorecards(service: Service, subs: list[StoredSubmission]) -> dict[str, int]:
    """For each exercise, how many current scorecards another grader or another version of its suites and
    reference gave (their fingerprint is not the exercise's now): a regrade brings them up to date."""
    current = {slug: exercise_fingerprint(exercise) for slug, exercise in service.exercises.items()}
    stale: dict[str, int] = {}
    for sub in subs:
        if sub.card is not None and sub.exercise in current and sub.card.exercise_fingerprint != current[sub.exercise]:
            stale[sub.exercise] = stale.get(sub.exercise, 0) + 1
    return stale


def lti_panel(service: Service, request: Request) -> dict[str, Any] | None:
    """The dashboard's LTI block (grader/lti): None without LTI pages (`create_app` was given none) or a
    platform registered."""
    panel = request.app.state.lti_panel
    return panel(service.store) if panel is not None else None


def roster(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert form is not None
    upload = form.get("file")
    pasted = str(form.get("csv", ""))
    try:
        text = accounts.decode_roster(upload.file.read()) if isinstance(upload, UploadFile) and upload.filename \
            else pasted
        made = accounts.import_roster(service.store, text)
    except StoreError as refused:
        # The roster is refused whole: the text pasted stays in the form, to be corrected where it is
        # wrong, every wrong line named at once.
        problems = refused.problems if isinstance(refused, accounts.RosterError) else [str(refused)]
        if len(problems) == 1:
            return dashboard(service, request, who, form, status=400, roster_text=pasted,
                             problem=f"Roster not imported: {problems[0]}")
        return dashboard(service, request, who, form, status=400, roster_text=pasted, roster_problems=problems,
                         problem=f"Roster not imported: {len(problems)} problems, each to correct before "
                                 "importing it again:")
    tokens = tuple(token for _, token in made if token)
    if len(tokens) <= NEW_LINKS_MOST:
        return after(service, tokens=tokens, notice=f"{len(made)} student(s) imported.")
    # More links than a redirect carries: shown here, once (importing the same roster again makes none).
    links = [(sid, service.link(token)) for sid, token in made if token]
    return dashboard(service, request, who, form, links, f"{len(made)} student(s) imported.")


def student_action(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    assert form is not None
    student_id = known_student(service, request).id
    action = request.path_params["action"]
    if action == "tier":
        accounts.set_tier(service.store, student_id, text_field(form, "tier"))
        return after(service, "tier", student_id)
    if action == "extension":
        return give_extension(service, request, who, form, student_id)
    raise Page(404, "No such action", "Unknown action.")


def known_student(service: Service, request: Request) -> accounts.Student:
    known = accounts.student(service.store, request.path_params["student"])
    if known is None:
        raise Page(404, "No such student", "There is no student with that id.")
    return known


def asked_first(request: Request, who: accounts.Session | None, form: FormData | None, student: accounts.Student,
                action: str, title: str, lines: list[str], button: str) -> Response | None:
    """An action that signs a student out is never one click on the dashboard: GET shows what it does with
    its button; a POST that does not come from that button (no `confirm` naming the student) is sent to
    that page. None once confirmed."""
    if form is not None and text_field(form, "confirm") == student.id:
        return None
    if form is not None:
        return RedirectResponse(request.url.path, status_code=303)
    return render("confirm.html.j2", who=who, student=student.id, action=action, title=title, lines=lines,
                  button=button)


def named(student: accounts.Student) -> str:
    return f"{student.id} ({student.name})" if student.name else student.id


def new_student_link(service: Service, request: Request, who: accounts.Session | None,
                     form: FormData | None) -> Response:
    """A new link for a student, after the page that says it signs them out: the old link stops working."""
    student = known_student(service, request)
    ask = asked_first(request, who, form, student, "link", f"A new sign-in link for {named(student)}?",
                      [f"{student.id}'s current link stops working, and {student.id} is signed out on every device "
                       "where it was used.",
                       f"The new link is shown once, on the dashboard: send it to {student.id}."],
                      f"Make a new link and sign {student.id} out")
    if ask is not None:
        return ask
    accounts.revoke_links(service.store, student.id)
    service.sessions.forget_student(student.id)
    return after(service, "link", student.id, (accounts.new_link(service.store, "student", student.id),))


def revoke_student(service: Service, request: Request, who: accounts.Session | None,
                   form: FormData | None) -> Response:
    """Revoking a student's link, after the page that says it signs them out."""
    student = known_student(service, request)
    ask = asked_first(request, who, form, student, "revoke", f"Revoke the sign-in link of {named(student)}?",
                      [f"{student.id}'s link stops working, and {student.id} is signed out on every device. "
                       f"Only a new link lets {student.id} in again."] if student.link_active else
                      [f"{student.id} has no active sign-in link: there is nothing to revoke."],
                      f"Revoke and sign {student.id} out" if student.link_active else "")
    if ask is not None:
        return ask
    accounts.revoke_links(service.store, student.id)
    service.sessions.forget_student(student.id)
    return after(service, "revoke", student.id)


def give_extension(service: Service, request: Request, who: accounts.Session | None, form: FormData,
                   student_id: str) -> Response:
    """The student's own due date for an exercise, from the form's date and time, read in the zone the
    course shows the exercise's dates in (as the form says it: `terms_page.course_zone`), wherever they
    were set; an empty date takes the extension back."""
    exercise = exercise_of(service, str(form.get("exercise", "")))
    typed = str(form.get("due", "")).strip()
    if not typed:
        service.store.set_extension(student_id, exercise.slug, None)
        return RedirectResponse(f"/instructor/students/{student_id}?extension=removed", status_code=303)
    try:
        due = terms_page.read_moment(typed, terms_page.course_zone(deadlines_of(service).terms, exercise.slug))
    except ValueError:
        raise Page(400, "Not a date", f"{typed[:40]!r} is not a date and time such as 2026-12-21T23:59.") from None
    service.store.set_extension(student_id, exercise.slug, due)
    return RedirectResponse(f"/instructor/students/{student_id}?extension=given", status_code=303)


def exercise_terms(service: Service, request: Request, who: accounts.Session | None, form: FormData | None,
                   ) -> Response:
    """GET: the exercise's dates, late policy and release as a form, beside every change made so far.
    POST: record what the form changes (with who changed it), then back to this page."""
    assert who is not None
    exercise = exercise_of(service, request.path_params["slug"])
    all_terms = deadlines_of(service).terms
    terms = all_terms[exercise.slug]
    problem = ""
    if form is not None:
        try:
            changes = terms_page.changes_from(form, terms)
        except TermsError as wrong:
            problem = f"Nothing changed: {wrong}."
        else:
            service.store.set_exercise_terms(exercise.slug, changes, who.by)
            return RedirectResponse(f"/instructor/exercises/{exercise.slug}?saved={len(changes)}", status_code=303)
    saved = whole_number(request.query_params.get("saved", ""), 2)
    notice = "" if saved is None else "Nothing changed: the form held the terms in force." if not saved else (
        "Saved. Students' pages and the gradebooks follow the new terms now; no regrade is needed.")
    return render("exercise_terms.html.j2", 400 if problem else 200, who=who, exercise=exercise,
                  form=terms_page.form_view(exercise, terms, terms_page.course_zone(all_terms, exercise.slug)),
                  notice=notice, problem=problem,
                  history=terms_page.history_rows(service.store.exercise_term_history(exercise.slug),
                                                  lambda by: accounts.named_by(service.store, by)))


def release_results(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The dashboard's "Release results": the exercise's students see every result and score from now."""
    return set_release(service, request, who, True)


def withhold_results(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The dashboard's "Withhold again": back to the open tests' results only, until released again."""
    return set_release(service, request, who, False)


def set_release(service: Service, request: Request, who: accounts.Session | None, released: bool) -> Response:
    assert who is not None
    exercise = exercise_of(service, request.path_params["slug"])
    try:
        release.set_released(service.store, exercise, deadlines_of(service).terms[exercise.slug], released,
                             service.clock(), who.by)
    except release.NothingToRelease as exc:
        raise Page(400, "Not possible", str(exc)) from None
    return after(service, "released" if released else "withheld", exercise=exercise.slug)


def site_zip(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The class site as a zip file to publish elsewhere: pseudonymous unless the form asks for names."""
    from grader.web.site_zip import site_archive

    assert form is not None
    policy = text_field(form, "policy") or "latest"
    if policy not in SITE_POLICIES:
        raise Page(400, "Not possible", f"The site counts the latest, best or on-time submission, not {policy[:40]!r}.")
    names = text_field(form, "names") == "1"
    deadlines = deadlines_of(service)
    # Meant for any host: a result its student cannot see yet stays out (the dashboard says so).
    whole = release.seen_whole(service.store.submissions(), deadlines.terms, service.clock(), service.exercises,
                               deadlines.due_for)
    data = site_archive(service.store, policy, not names, deadlines, include=lambda sub: sub.id in whole)
    filename = f"class-site-{policy}{'-names' if names else ''}.zip"
    return Response(data, media_type="application/zip",
                    headers={"content-disposition": f'attachment; filename="{filename}"'})


def instructor_link(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """A new one-time sign-in link for another instructor (or this one on another device), made for the person
    the form names: what they change is recorded under that name."""
    assert form is not None
    return after(service, "instructor-link",
                 tokens=(accounts.new_link(service.store, "instructor", label=text_field(form, "name")),))


def student_history(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    student_id = request.path_params["student"]
    known = accounts.student(service.store, student_id)
    if known is None:
        raise Page(404, "No such student", "There is no student with that id.")
    answers = accounts.predictions_of(service.store, student_id)
    theirs = service.store.submissions(student=student_id)
    deadlines = deadlines_of(service)
    # Every exercise with a date, set in exercise.toml or on the dashboard.
    dated = [e for e in service.exercises.values() if (t := deadlines.terms.get(e.slug)) is not None
             and (t.due is not None or t.closes is not None)]
    return render("history.html.j2", who=who, student=student_id, known=known,
                  answers=[(service.exercises[slug], choice, right) for slug, (choice, right) in sorted(answers.items())
                           if slug in service.exercises],
                  extensions=[extension_row(deadlines, student_id, e) for e in dated],
                  history=list(reversed(theirs)), late=late_ids(deadlines, theirs),
                  shown=shown_to(service, who, theirs, deadlines))


def adjust(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """An instructor's points added to (or taken from) a submission's grade, with why: the student sees both,
    and gradebooks show them apart from the tests' score. 0 points and no comment take it back."""
    assert who is not None and form is not None
    sub = submission_for(service, who, request.path_params["id"])
    typed, comment = text_field(form, "points").strip(), " ".join(text_field(form, "comment").split())[:500]
    try:
        added = float(typed or "0")
    except ValueError:
        raise Page(400, "Not a number", f"The points to add (or take off, with a minus) are a number, not "
                                        f"{typed[:20]!r}.") from None
    if not math.isfinite(added) or abs(added) > 10_000:
        raise Page(400, "Not possible", "The points to add or take off are a number within ±10000.")
    if added and not comment:
        raise Page(400, "Say why", "An adjustment needs a comment: the student reads it beside their grade.")
    service.store.adjust(sub.id, round(added, 2), comment, who.by)
    return RedirectResponse(f"/submissions/{sub.id}?adjusted=1#grade", status_code=303)


def regrade(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """GET: what a regrade of the exercise would grade again, and what the newest gradings changed. POST
    (the page's button): queue them all, then back to this page, which follows the regrade as it goes."""
    from grader.service.regrade import regrade_summary

    exercise = exercise_of(service, request.path_params["slug"])
    if form is None:
        summary = regrade_summary(service.store, exercise.slug)
        asked = whole_number(request.query_params.get("queued", ""), 7)
        return render("regrade.html.j2", who=who, exercise=exercise, summary=summary, names=service.store.student_names(),
                      notice=regrade_notice(asked, summary.waiting))
    ids = [s.id for s in service.store.submissions(exercise.slug)]
    queued = jobs.requeue(service.store, ids)
    for submission_id in queued:
        enqueue(service, submission_id)
    return RedirectResponse(f"/instructor/regrade/{exercise.slug}?queued={len(queued)}", status_code=303)


def regrade_notice(queued: int | None, waiting: int) -> str:
    """What the regrade page says after its button queued `queued` submissions: under way while some
    still wait (the count from the store, not the one queued), done once none does."""
    if queued is None:
        return ""
    if waiting:
        return (f"{queued} submission(s) queued for regrading; {waiting} still waiting to be graded. This page "
                "shows each changed score as its grading ends (reload it).")
    return (f"The regrade is done: the {queued} submission(s) queued for regrading are graded again, and every "
            "changed score is listed below.")


def class_gradebook(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """One gradebook across the exercises (CSV): a row per student with their LMS id and email, and each
    exercise's grade under the policy asked (latest, best or on-time)."""
    from grader.course.class_gradebook import class_csv

    policy = request.query_params.get("policy", "latest")
    if policy not in SITE_POLICIES:
        raise Page(400, "Not possible", f"The gradebook counts the latest, best or on-time submission, not "
                                        f"{policy[:40]!r}.")
    data = class_csv(service.store, service.exercises, policy, deadlines_of(service))
    return Response(data, media_type=MEDIA["csv"],
                    headers={"content-disposition": f'attachment; filename="gradebook-{policy}.csv"'})


def site_file(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    from grader.course.deadlines import Deadlines
    from grader.course.publish import build_site

    name = request.path_params["name"]
    asked = request.query_params.get("policy")
    if asked in POLICY_FOLDERS and not name.startswith(f"{asked}/"):
        return RedirectResponse(f"/instructor/site/{asked}/{name}", status_code=303)
    folder, _, rest = name.partition("/")
    policy, name = (folder, rest) if folder in POLICY_FOLDERS else ("latest", name)
    files = build_site(service.store, policy, deadlines=Deadlines.of(service.exercises.values(), service.store),
                       back=("/instructor", "Dashboard"))
    if name not in files:  # a name in the site built in memory, never a path on disk
        raise Page(404, "No such page", "The class overview has no such page.")
    kind = name.rsplit(".", 1)[-1]
    headers = {} if kind == "html" else {"content-disposition": f'attachment; filename="{name.rsplit("/", 1)[-1]}"'}
    return Response(files[name], media_type=MEDIA.get(kind, "text/plain"), headers=headers)


def similarity(service: Service, request: Request, who: accounts.Session | None, form: FormData | None) -> Response:
    """The similarity report of an exercise (grader.similarity), for instructors: the ranked pairs, or
    one pair side by side. Made from the store on each visit, so it follows new submissions."""
    from grader.similarity import compare, sources
    from grader.similarity.view import render_index, render_pair

    exercise = exercise_of(service, request.path_params["slug"])
    policy = "best" if request.query_params.get("policy") == "best" else "latest"
    documents = sources.from_store(service.store, exercise.slug, policy) + sources.reference(exercise)
    report = compare(documents, sources.given_code(exercise), exercise.slug)
    query = f"?policy={policy}"
    base = f"/instructor/similarity/{exercise.slug}"
    raw_rank = request.path_params.get("rank")
    if raw_rank is None:
        return HTMLResponse(render_index(report, f"{base}/{{rank}}{query}", policy, back=("/instructor", "Dashboard")))
    rank = whole_number(raw_rank, 6)
    if rank is None or not 1 <= rank <= len(report.pairs):
        raise Page(404, "No such pair", f"The similarity report of {exercise.slug} has no pair {raw_rank} now.")
    return HTMLResponse(render_pair(report, rank, base + query))
