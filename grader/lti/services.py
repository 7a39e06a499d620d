"""Calls to a platform's services (AGS, NRPS) with an OAuth2 access token, got by the client credentials
grant with a JWT client assertion signed by the tool's key (LTI Advantage's security framework): the
platform a call goes to (`registered`), its token (`access_token`) and the request (`call`)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from grader.course.store import Store
from grader.lti.keys import random_token, tool_key
from grader.lti.platforms import Platform, platform_by_id

TIMEOUT_S = 15
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


class ServiceError(Exception):
    """A call to the platform that did not succeed, in a sentence for the dashboard; `unreachable` when no
    answer came at all (the platform is down: its other calls would fail alike)."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


def http(method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> Answer:
    """One HTTP call; ServiceError when it cannot be made or the platform answers other than 2xx."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ServiceError(f"{url!r} is not an http(s) address")
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return Answer(response.status, response.read(), {k.lower(): v for k, v in response.headers.items()})
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace").strip()
        raise ServiceError(f"{method} {url}: HTTP {exc.code}{': ' + detail if detail else ''}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServiceError(f"{method} {url}: {reason}", unreachable=True) from None


def registered(store: Store, platform_id: int) -> Platform:
    """The platform a service call goes to (a score's, a course's); ServiceError once it is no longer registered."""
    platform = platform_by_id(store, platform_id)
    if platform is None:
        raise ServiceError("the platform is no longer registered")
    return platform


# Tokens kept until shortly before they expire, per platform and scopes: one token serves many scores.
_tokens: dict[tuple[int, str], tuple[str, float]] = {}
_tokens_lock = threading.Lock()


def access_token(store: Store, platform: Platform, scopes: list[str]) -> str:
    scope = " ".join(sorted(scopes))
    key = (platform.id, scope)
    with _tokens_lock:
        kept = _tokens.get(key)
    if kept is not None and kept[1] > time.time():
        return kept[0]
    moment = int(time.time())
    assertion = tool_key(store).sign({"iss": platform.client_id, "sub": platform.client_id,
                                      "aud": platform.auth_token_url, "iat": moment, "exp": moment + 300,
                                      "jti": random_token()})
    form = urllib.parse.urlencode({"grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
                                   "client_assertion": assertion, "scope": scope}).encode()
    answer = http("POST", platform.auth_token_url, form, {"Content-Type": "application/x-www-form-urlencoded",
                                                          "Accept": "application/json"})
    try:
        granted = answer.json()
        token = str(granted["access_token"])
        lifetime = float(granted.get("expires_in", 3600))
    except (ValueError, KeyError, TypeError):
        raise ServiceError(f"the token endpoint {platform.auth_token_url} answered without an access token") from None
    with _tokens_lock:
        _tokens[key] = (token, time.time() + max(0.0, lifetime - 30))
    return token


def forget_tokens() -> None:
    with _tokens_lock:
        _tokens.clear()


def call(store: Store, platform: Platform, scopes: list[str], method: str, url: str, body: Any = None,
         content_type: str = "application/json", accept: str = "application/json") -> Answer:
    token = access_token(store, platform, scopes)
    headers = {"Authorization": f"Bearer {token}", "Accept": accept}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = content_type
    return http(method, url, data, headers)
