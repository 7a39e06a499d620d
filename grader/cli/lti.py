"""`grader lti`: the LMSs (Canvas, Moodle) that launch `grader serve` over LTI 1.3, their courses, and
the roster synced from them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from grader.cli.common import BROKEN, COMMAND_HELP, DB_HELP, OK, UsageError, open_store, service_address

if TYPE_CHECKING:
    from rich.console import Console

EXAMPLES = {
    "lti": ["grader lti add-platform --issuer https://canvas.instructure.com --client-id 10000000000001 "
            "--deployment 1:abc --auth-login-url https://sso.canvaslms.com/api/lti/authorize_redirect "
            "--auth-token-url https://sso.canvaslms.com/login/oauth2/token "
            "--keyset-url https://sso.canvaslms.com/api/lti/security/jwks --tier premium",
            "grader lti list", "grader lti sync-roster"],
    "lti add-platform": ["grader lti add-platform --issuer https://moodle.example.edu --client-id AbC123 "
                         "--deployment 2 --auth-login-url https://moodle.example.edu/mod/lti/auth.php "
                         "--auth-token-url https://moodle.example.edu/mod/lti/token.php "
                         "--keyset-url https://moodle.example.edu/mod/lti/certs.php --tier premium"],
    "lti list": ["grader lti list --db postgresql://grader@db/course"],
    "lti sync-roster": ["grader lti sync-roster", "grader lti sync-roster --context 4 --db class.db"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lti = commands.add_parser("lti", help="LTI 1.3: the LMSs (Canvas, Moodle) that launch `grader serve` (extra `lti`)")
    lti_commands = lti.add_subparsers(dest="lti_command", required=True, metavar="COMMAND", help=COMMAND_HELP)
    add_platform = lti_commands.add_parser("add-platform", help="register an LMS (or add a deployment to it), "
                                                                "and print the tool's addresses to give it")
    add_platform.add_argument("--issuer", required=True, metavar="URL", help="the platform's issuer (iss)")
    add_platform.add_argument("--client-id", required=True, metavar="ID", help="the client id the LMS gave the tool")
    add_platform.add_argument("--deployment", required=True, action="append", metavar="ID",
                              help="a deployment id the LMS launches from (repeatable)")
    add_platform.add_argument("--auth-login-url", required=True, metavar="URL", help="the platform's OIDC auth URL")
    add_platform.add_argument("--auth-token-url", required=True, metavar="URL",
                              help="the platform's OAuth2 token URL (grade passback, roster)")
    add_platform.add_argument("--keyset-url", required=True, metavar="URL", help="the platform's public key set (JWKS)")
    # No default: an LMS's students are graded on the plan chosen here (free: the visible tests' score alone
    # reaches the LMS's gradebook), so it is said, never assumed.
    add_platform.add_argument("--tier", choices=("free", "premium"), required=True,
                              help="the plan of the students its launches and roster syncs add to the roster: "
                                   "premium grades them on every suite (the LMS's grade is the whole exercise's), "
                                   "free on the visible tests alone")
    add_platform.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    add_platform.add_argument("--base-url", metavar="URL", help="the https address of `grader serve`, for the "
                                                                "addresses printed (default http://127.0.0.1:8000)")
    add_platform.set_defaults(run=command_lti_add_platform)
    lti_list = lti_commands.add_parser("list", help="the platforms registered, their courses and unsent scores")
    lti_list.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    lti_list.set_defaults(run=command_lti_list)
    lti_sync = lti_commands.add_parser("sync-roster", help="add the learners of the courses launches came from "
                                                           "to the roster (Names and Role Provisioning)")
    lti_sync.add_argument("--context", metavar="ID", help="only the course of this context id")
    lti_sync.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    lti_sync.set_defaults(run=command_lti_sync_roster)


def command_lti_add_platform(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.lti.keys import tool_key
    from grader.lti.platforms import add_platform

    url = service_address(args).rstrip("/")
    with open_store(args) as store:
        platform = add_platform(store, args.issuer, args.client_id, args.deployment, args.auth_login_url,
                                args.auth_token_url, args.keyset_url, args.tier)
        tool_key(store)  # made now, so the JWKS the LMS fetches first is the one it keeps
    console.print(Text(f"platform {platform.issuer} (client id {platform.client_id}) registered, deployment(s) "
                       f"{', '.join(platform.deployments)}; new students: {platform.tier}"), soft_wrap=True)
    for label, path in (("login (OIDC initiation) URL", "/lti/login"), ("redirect and target link URL", "/lti/launch"),
                        ("public JWK set URL", "/lti/jwks")):
        console.print(Text(f"  {label}: {url}{path}"), soft_wrap=True)
    if not url.startswith("https://"):
        console.print("LTI needs `grader serve --base-url https://...`: a browser drops the launch's cookie otherwise",
                      style="yellow")
    return OK


def command_lti_list(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.lti import ags, nrps
    from grader.lti.platforms import platforms

    with open_store(args) as store:
        found, courses, pending = platforms(store), nrps.courses(store), ags.pending(store)
    for platform in found:
        console.print(Text(f"{platform.issuer}  client id {platform.client_id}  deployment(s) "
                           f"{', '.join(platform.deployments)}  tier {platform.tier}"), soft_wrap=True)
        for course in (c for c in courses if c.platform_id == platform.id):
            roster = "roster sync ready" if course.memberships_url else "no roster service"
            console.print(Text(f"  course {course.title or '(untitled)'} (context {course.context_id}): {roster}"),
                          soft_wrap=True)
    if not found:
        console.print("no platform registered: `grader lti add-platform --help`", style="dim")
    for row in pending:
        console.print(Text(f"unsent: {row.student} {row.exercise} {row.score:g}/{row.max_score:g} after "
                           f"{row.attempts} tries: {row.last_error or 'not tried yet'}"), soft_wrap=True)
    return OK


def command_lti_sync_roster(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.lti import nrps
    from grader.lti.services import ServiceError

    with open_store(args) as store:
        courses = [c for c in nrps.courses(store) if args.context in (None, c.context_id)]
        if not courses:
            raise UsageError("no course to sync: a course is known once someone launched the tool from it"
                             + (f" (none has context id {args.context})" if args.context else ""))
        failed = False
        for course in courses:
            try:
                result = nrps.sync_roster(store, course)
            except ServiceError as exc:
                console.print(Text(f"{course.title or course.context_id}: {exc}", style="red"), soft_wrap=True)
                failed = True
                continue
            console.print(Text(f"{course.title or course.context_id}: {len(result.added)} learner(s) added"
                               f"{': ' + ', '.join(result.added) if result.added else ''}; {result.known} on the "
                               "roster already"), soft_wrap=True)
    return BROKEN if failed else OK
