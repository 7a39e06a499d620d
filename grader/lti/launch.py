"""OIDC third-party initiated login and the launch's id_token, checked claim by claim.

Login: the platform names itself (issuer, client id); the tool answers with a redirect to the platform's
auth URL carrying a fresh state (also set as a cookie in this browser) and nonce (kept in the store).
Launch: the platform posts back an id_token and the state. The id_token counts only when the state is this
browser's, its signature is the platform's (its JWKS), it is addressed to this tool (`aud`, `azp`), it is
current (`exp`, `iat`), its nonce is one this tool issued and not used before, and its deployment is
registered. Each failure is a LaunchError with its own status and sentence.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from sqlalchemy import and_, delete, func, insert, select, update

from grader.course.store import Store
from grader.db import schema
from grader.lti.key_sets import ALGORITHMS, KeySetError, KeySets
from grader.lti.platforms import Platform, find_platform, platforms
from grader.lti.roles import CourseRole, course_role

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
DL_CLAIM = "https://purl.imsglobal.org/spec/lti-dl/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
RESOURCE_LAUNCH = "LtiResourceLinkRequest"
DEEP_LINKING = "LtiDeepLinkingRequest"
LOGIN_SECONDS = 600  # a login's state and nonce are good for this long
# Logins begun and not come back, within 2 * LOGIN_SECONDS, that the store keeps: a class launching at
# once is a few hundred; past this, logins are refused (with rate limits per address, grader.lti.routes).
MAX_LOGINS_WAITING = 5000
LEEWAY_S = 60  # clocks of platform and tool differ by up to this much
STATE_COOKIE = "grader_lti_state_"  # + the state: two launches at once in one browser keep apart


class LaunchError(Exception):
    def __init__(self, status: int, title: str, message: str) -> None:
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


@dataclass(frozen=True)
class Launch:
    platform: Platform
    claims: dict[str, Any]

    def claim(self, name: str, default: Any = None) -> Any:
        return self.claims.get(CLAIM + name, default)

    @property
    def sub(self) -> str:
        return str(self.claims.get("sub", ""))

    @property
    def message_type(self) -> str:
        return str(self.claim("message_type", ""))

    @property
    def roles(self) -> list[str]:
        roles = self.claim("roles", [])
        return [str(r) for r in roles] if isinstance(roles, list) else []

    @property
    def course_role(self) -> CourseRole:
        """What the user is in the launch's course (grader.lti.roles): nothing without a course (a context
        claim), since context roles are roles in one."""
        return course_role(self.roles) if self.context_id else CourseRole.NONE

    @property
    def is_instructor(self) -> bool:
        return self.course_role is CourseRole.INSTRUCTOR

    @property
    def name(self) -> str:
        given = " ".join(str(self.claims.get(k, "")) for k in ("given_name", "family_name")).strip()
        return str(self.claims.get("name") or given)

    @property
    def email(self) -> str:
        return str(self.claims.get("email", ""))

    @property
    def context_id(self) -> str:
        context = self.claim("context", {})
        return str(context.get("id", "")) if isinstance(context, dict) else ""

    @property
    def context_title(self) -> str:
        context = self.claim("context", {})
        return str(context.get("title") or context.get("label") or "") if isinstance(context, dict) else ""

    @property
    def deployment_id(self) -> str:
        return str(self.claim("deployment_id", ""))

    @property
    def exercise(self) -> str:
        """The exercise a resource link launches: its custom parameter, else `?exercise=` of its target URL."""
        custom = self.claim("custom", {})
        if isinstance(custom, dict) and custom.get("exercise"):
            return str(custom["exercise"])
        target = str(self.claim("target_link_uri", ""))
        return parse_qs(urlsplit(target).query).get("exercise", [""])[0]

    @property
    def ags(self) -> dict[str, Any]:
        found = self.claims.get(AGS_CLAIM)
        return found if isinstance(found, dict) else {}

    @property
    def memberships_url(self) -> str:
        found = self.claims.get(NRPS_CLAIM)
        return str(found.get("context_memberships_url", "")) if isinstance(found, dict) else ""

    @property
    def deep_linking(self) -> dict[str, Any]:
        found = self.claims.get(DL_CLAIM + "deep_linking_settings")
        return found if isinstance(found, dict) else {}


@dataclass(frozen=True)
class Login:
    redirect: str
    state: str


def login(store: Store, params: dict[str, str], redirect_uri: str) -> Login:
    """The answer to a platform's login initiation: where to send the browser, with the state to set."""
    issuer, client_id = params.get("iss", ""), params.get("client_id") or None
    if not issuer or not params.get("login_hint"):
        raise LaunchError(400, "Not an LTI login", "An LTI login names the platform (iss) and the user "
                                                   "(login_hint): this request did not.")
    platform = find_platform(store, issuer, client_id)
    if platform is None:
        raise LaunchError(403, "Platform not registered",
                          f"The platform {issuer} (client id {client_id or 'not given'}) is not registered with "
                          "this tool: an administrator adds it with `grader lti add-platform`.")
    target, home = params.get("target_link_uri", ""), redirect_uri.rsplit("/lti/", 1)[0] + "/"
    if target and not target.startswith(home):
        # The LMS means another tool, or this one under another address (`--base-url` not the one it knows).
        raise LaunchError(400, "Launch for another address", f"The LMS launches {target}, which is not at this "
                                                             f"tool's address {home}: check `grader serve --base-url` "
                                                             "and the tool's URLs in the LMS.")
    deployment = params.get("lti_deployment_id")
    if deployment and deployment not in platform.deployments:
        raise LaunchError(403, "Deployment not registered",
                          f"The deployment {deployment} of {issuer} is not registered with this tool.")
    state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    moment = time.time()
    no = schema.lti_nonces
    with store.transaction() as db:
        # A nonce is good for LOGIN_SECONDS only (use_nonce): past twice that, used or not, its row tells
        # nothing more (a replay of its token is refused as an unknown nonce then), and goes.
        db.execute(delete(no).where(no.c.issued_at < moment - 2 * LOGIN_SECONDS))
        waiting = db.execute(select(func.count()).select_from(no).where(no.c.used_at.is_(None))).scalar() or 0
        if waiting >= MAX_LOGINS_WAITING:
            raise LaunchError(503, "Too many logins under way",
                              f"{waiting} logins began in the last {2 * LOGIN_SECONDS // 60} minutes and have not come "
                              "back: this tool takes no more until they expire. Try again in a few minutes.")
        db.execute(insert(no).values(nonce=nonce, state=state, platform_id=platform.id, issued_at=moment))
    query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
             "client_id": platform.client_id, "redirect_uri": redirect_uri, "login_hint": params["login_hint"],
             "state": state, "nonce": nonce}
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"]
    separator = "&" if urlsplit(platform.auth_login_url).query else "?"
    return Login(platform.auth_login_url + separator + urlencode(query), state)


@dataclass(frozen=True)
class Claimed:
    """Who an id_token says it comes from, before its signature is checked: the registered platform of its
    issuer and audience, and the id of the key it says signed it."""
    platform: Platform
    kid: str
    audiences: list[str]


def identify(store: Store, id_token: str, state: str, cookie_state: str | None, other_logins: bool = False
             ) -> Claimed:
    """The launch's state checked, and the platform its id_token names (LaunchError at the first check that
    fails). `cookie_state`: the state cookie of this state, if the browser sent it; `other_logins`: whether
    it sent the state cookies of other logins (then this state is not one of this browser's)."""
    if not state:
        raise LaunchError(400, "Launch without state", "The launch did not carry the state of its login: start "
                                                       "it again from the course.")
    if not cookie_state and other_logins:
        raise LaunchError(400, "Launch state mismatch", "The launch's state is not the one this browser's login "
                                                         "made: start it again from the course.")
    if not cookie_state:
        raise LaunchError(400, "Launch state missing",
                          "This browser did not send back the state cookie its login set, so the launch cannot be "
                          "tied to it: the browser may block cookies of this site inside the course's page "
                          "(try opening the tool in a new window), or the login is older than ten minutes.")
    if not secrets.compare_digest(state.encode(), cookie_state.encode()):
        raise LaunchError(400, "Launch state mismatch", "The launch's state is not the one this browser's login "
                                                         "made: start it again from the course.")
    if not id_token:
        raise LaunchError(400, "Launch without id_token", "The launch carried no id_token.")
    try:
        unverified = jwt.decode(id_token, options={"verify_signature": False})
        header = jwt.get_unverified_header(id_token)
    except jwt.InvalidTokenError:
        raise LaunchError(400, "Not an id_token", "The launch's id_token is not a JSON Web Token.") from None
    issuer, aud = str(unverified.get("iss", "")), unverified.get("aud")
    audiences = [str(a) for a in aud] if isinstance(aud, list) else [str(aud)] if aud else []
    known = [p for p in (find_platform(store, issuer, a) for a in audiences) if p is not None]
    if not known:
        if any(p.issuer == issuer for p in platforms(store)):
            raise LaunchError(401, "Wrong audience", f"The id_token is addressed to {', '.join(audiences) or 'no one'}, "
                                                     f"not to this tool's client id for {issuer}.")
        raise LaunchError(403, "Platform not registered", f"The platform {issuer or '(no issuer)'} is not "
                                                           "registered with this tool.")
    return Claimed(known[0], str(header.get("kid") or ""), audiences)


async def signing_key(key_sets: KeySets, claimed: Claimed) -> jwt.PyJWK:
    """The platform's key that the id_token names, from its key set (fetched off the request path);
    LaunchError 502 saying what is wrong with a key set that cannot be used (503 while too many launches
    wait for it), 401 for a key not in it."""
    try:
        return await key_sets.signing_key(claimed.platform.keyset_url, claimed.kid)
    except KeySetError as exc:
        raise LaunchError(exc.status, exc.title, exc.message) from None
    except LookupError:
        raise LaunchError(401, "Unknown signing key", "The id_token is signed with a key that is not in the "
                                                      "platform's key set: it was not made by the platform.") from None


def verify(store: Store, id_token: str, state: str, claimed: Claimed, key: jwt.PyJWK, now: float | None = None
           ) -> Launch:
    """The launch an id_token says, once its signature, claims and nonce are checked (LaunchError at the
    first that fails)."""
    platform, audiences = claimed.platform, claimed.audiences
    try:
        claims = jwt.decode(id_token, key.key, algorithms=list(ALGORITHMS), audience=platform.client_id,
                            issuer=platform.issuer, leeway=LEEWAY_S,
                            options={"require": ["exp", "iat", "nonce", "aud", "iss"]})
    except jwt.InvalidSignatureError:
        raise LaunchError(401, "Forged id_token", "The id_token's signature does not match the platform's key: "
                                                  "it was not made by the platform, or was changed.") from None
    except jwt.ExpiredSignatureError:
        raise LaunchError(401, "Expired id_token", "The id_token has expired: start the launch again from the "
                                                   "course.") from None
    except (jwt.ImmatureSignatureError, jwt.InvalidIssuedAtError):
        raise LaunchError(401, "id_token from the future", "The id_token says it was issued later than now: the "
                                                           "platform's clock or the tool's is wrong.") from None
    except jwt.InvalidAudienceError:
        raise LaunchError(401, "Wrong audience", "The id_token is not addressed to this tool.") from None
    except jwt.InvalidTokenError as exc:
        raise LaunchError(401, "Invalid id_token", f"The id_token was refused: {exc}.") from None
    # A token for several audiences names the one it is for (the authorized party): it must be this tool.
    if (len(audiences) > 1 or "azp" in claims) and claims.get("azp") != platform.client_id:
        raise LaunchError(401, "Wrong authorized party", f"The id_token's azp ({claims.get('azp') or 'missing'}) "
                                                         f"is not this tool's client id {platform.client_id}.")
    launch = Launch(platform, claims)
    if launch.deployment_id not in platform.deployments:
        raise LaunchError(403, "Deployment not registered", f"The deployment {launch.deployment_id or '(none)'} of "
                                                            f"{platform.issuer} is not registered with this tool: "
                                                            "add it with `grader lti add-platform --deployment`.")
    if launch.claim("version") != "1.3.0" or launch.message_type not in (RESOURCE_LAUNCH, DEEP_LINKING):
        raise LaunchError(400, "Launch not understood", f"This tool takes LTI 1.3.0 resource link and deep linking "
                                                        f"launches, not {launch.message_type or 'this message'}.")
    use_nonce(store, platform, str(claims["nonce"]), state, time.time() if now is None else now)
    return launch


def use_nonce(store: Store, platform: Platform, nonce: str, state: str, moment: float) -> None:
    """Use up the nonce its login made with this state: once only, within the login's time."""
    no = schema.lti_nonces
    with store.transaction() as db:
        done = db.execute(update(no).where(and_(no.c.nonce == nonce, no.c.state == state,
                                                 no.c.platform_id == platform.id, no.c.used_at.is_(None),
                                                 no.c.issued_at >= moment - LOGIN_SECONDS)).values(used_at=moment))
        if done.rowcount == 1:
            return
        row = db.execute(select(no.c.used_at, no.c.state).where(no.c.nonce == nonce)).first()
    if row is not None and row.used_at is not None:
        raise LaunchError(403, "Replayed launch", "This id_token's nonce was used already: a launch is good once. "
                                                  "Start it again from the course.")
    if row is not None and row.state == state:
        raise LaunchError(403, "Login too old", "The login of this launch is older than ten minutes: start it "
                                                "again from the course.")
    raise LaunchError(403, "Unknown nonce", "The id_token's nonce was not made by this tool's login for this "
                                            "state: start the launch again from the course.")

