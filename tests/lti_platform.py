"""An LMS of the tests' own on loopback, for grader's LTI 1.3 tool: its own RSA keys and JWKS, the id_tokens
a launch carries (signed by it, or forged), an OAuth2 token endpoint that checks the tool's client
assertion against the tool's JWKS, an AGS endpoint that records the scores it receives and an NRPS
endpoint listing a course's members (two pages). It runs in a thread under uvicorn; `stop()` takes it
down (connections refused) and `start()` brings it back on the same port."""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
DL_CLAIM = "https://purl.imsglobal.org/spec/lti-dl/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
NRPS_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"
CLIENT_ID = "grader-tool-1"
DEPLOYMENT = "deployment-1"
CONTEXT = "course-42"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass
class TestPlatform:
    """The platform; its URLs are known once `start()` has bound its port."""
    __test__ = False  # not a test class, whatever pytest thinks of its name

    key: rsa.RSAPrivateKey = field(default_factory=rsa_key)
    kid: str = "platform-key-1"
    tool_jwks: dict[str, Any] | None = None  # the tool's /lti/jwks, given by the test
    scores: list[dict[str, Any]] = field(default_factory=list)  # (lineitem path, payload) as received
    tokens: dict[str, str] = field(default_factory=dict)  # access token -> scopes
    assertions: list[dict[str, Any]] = field(default_factory=list)  # the client assertions accepted
    refusals: list[str] = field(default_factory=list)  # why a request was refused
    members: list[dict[str, Any]] = field(default_factory=list)
    # Each line item's own fields by its path (the tool reads and writes scoreMaximum), and the PUTs received.
    lineitems: dict[str, dict[str, Any]] = field(default_factory=dict)
    lineitem_puts: list[dict[str, Any]] = field(default_factory=list)
    jwks_body: bytes | None = None  # what /jwks answers instead of the key set, given by a test
    jwks_delay_s: float = 0.0  # how long /jwks waits before it answers
    jwks_headers: dict[str, str] = field(default_factory=dict)
    jwks_requests: int = 0
    jwks_running: int = 0
    jwks_most_at_once: int = 0  # the most requests for the key set it was answering at one time
    port: int = 0
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    _socket: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return self.url

    @property
    def registration(self) -> dict[str, str]:
        return {"issuer": self.issuer, "client_id": CLIENT_ID, "auth_login_url": f"{self.url}/auth",
                "auth_token_url": f"{self.url}/token", "keyset_url": f"{self.url}/jwks"}

    def lineitem(self, number: int = 1) -> str:
        return f"{self.url}/courses/{CONTEXT}/lineitems/{number}?type=grader"

    @property
    def memberships_url(self) -> str:
        return f"{self.url}/courses/{CONTEXT}/memberships"

    # -- the id_tokens of launches ---------------------------------------------------------------------

    def jwk(self) -> dict[str, Any]:
        import json
        found = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {**found, "kid": self.kid, "alg": "RS256", "use": "sig"}

    def id_token(self, nonce: str, sub: str = "lms-user-1", roles: tuple[str, ...] = (LEARNER,),
                 message_type: str = "LtiResourceLinkRequest", *, exercise: str | None = None,
                 key: rsa.RSAPrivateKey | None = None, kid: str | None = None, aud: Any = CLIENT_ID,
                 lifetime_s: int = 300, issued_ago_s: int = 0, deployment: str = DEPLOYMENT,
                 ags: bool = True, nrps: bool = True, **claims: Any) -> str:
        moment = int(time.time()) - issued_ago_s
        body: dict[str, Any] = {
            "iss": self.issuer, "aud": aud, "sub": sub, "iat": moment, "exp": moment + lifetime_s,
            "nonce": nonce, "name": "Ada Lovelace", "email": "ada.lovelace@uni.example",
            CLAIM + "message_type": message_type, CLAIM + "version": "1.3.0",
            CLAIM + "deployment_id": deployment, CLAIM + "roles": list(roles),
            CLAIM + "context": {"id": CONTEXT, "label": "CS 101", "title": "Systems programming"},
            CLAIM + "resource_link": {"id": "link-1"},
        }
        if exercise is not None:
            body[CLAIM + "target_link_uri"] = f"https://testserver/lti/launch?exercise={exercise}"
            body[CLAIM + "custom"] = {"exercise": exercise}
        if ags:
            body[AGS_CLAIM] = {"scope": [SCORE_SCOPE, LINEITEM_SCOPE], "lineitems": f"{self.url}/courses/{CONTEXT}/lineitems",
                               **({"lineitem": self.lineitem()} if exercise else {})}
        if nrps:
            body[NRPS_CLAIM] = {"context_memberships_url": self.memberships_url, "service_versions": ["2.0"]}
        if message_type == "LtiDeepLinkingRequest":
            body[DL_CLAIM + "deep_linking_settings"] = {
                "deep_link_return_url": f"{self.url}/deep-link-return", "accept_types": ["ltiResourceLink"],
                "accept_presentation_document_targets": ["iframe", "window"], "data": "platform-opaque-data"}
        body.update(claims)
        return jwt.encode(body, pem(key or self.key), algorithm="RS256", headers={"kid": kid or self.kid})

    # -- its endpoints -------------------------------------------------------------------------------------

    async def jwks(self, request: Request) -> Response:
        self.jwks_requests += 1
        self.jwks_running += 1
        self.jwks_most_at_once = max(self.jwks_most_at_once, self.jwks_running)
        try:
            if self.jwks_delay_s:
                await asyncio.sleep(self.jwks_delay_s)
        finally:
            self.jwks_running -= 1
        if self.jwks_body is not None:
            return Response(self.jwks_body, media_type="application/json", headers=self.jwks_headers)
        return JSONResponse({"keys": [self.jwk()]}, headers=self.jwks_headers)

    def refuse(self, status: int, why: str) -> Response:
        self.refusals.append(why)
        return JSONResponse({"error": why}, status_code=status)

    async def token(self, request: Request) -> Response:
        form = await request.form()
        if form.get("grant_type") != "client_credentials" or \
                form.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return self.refuse(400, "unsupported_grant_type")
        assertion = str(form.get("client_assertion", ""))
        try:
            assert self.tool_jwks is not None, "the test did not give the platform the tool's JWKS"
            keys = jwt.PyJWKSet.from_dict(self.tool_jwks)
            kid = jwt.get_unverified_header(assertion).get("kid")
            key = next(k for k in keys.keys if k.key_id == kid)
            claims = jwt.decode(assertion, key.key, algorithms=["RS256"], audience=f"{self.url}/token",
                                options={"require": ["iss", "sub", "aud", "exp", "iat", "jti"]})
        except (jwt.PyJWTError, StopIteration) as exc:
            return self.refuse(401, f"invalid_client: {exc!r}")
        if claims["iss"] != CLIENT_ID or claims["sub"] != CLIENT_ID:
            return self.refuse(401, "invalid_client: wrong iss/sub")
        self.assertions.append(claims)
        token = secrets.token_urlsafe(16)
        self.tokens[token] = str(form.get("scope", ""))
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                             "scope": self.tokens[token]})

    def authorized(self, request: Request, scope: str) -> bool:
        sent = request.headers.get("authorization", "").removeprefix("Bearer ")
        return scope in self.tokens.get(sent, "").split()

    async def score(self, request: Request) -> Response:
        if not self.authorized(request, SCORE_SCOPE):
            return self.refuse(401, "no token with the score scope")
        if request.headers.get("content-type") != "application/vnd.ims.lis.v1.score+json":
            return self.refuse(415, f"content type {request.headers.get('content-type')}")
        payload = await request.json()
        self.scores.append({"lineitem": request.url.path.removesuffix("/scores"), "query": request.url.query,
                            **payload})
        return Response(status_code=204)

    async def lineitem_endpoint(self, request: Request) -> Response:
        """A line item (AGS): GET gives it (a new one is out of 10 points), PUT replaces it."""
        if not self.authorized(request, LINEITEM_SCOPE):
            return self.refuse(401, "no token with the line item scope")
        item = self.lineitems.setdefault(request.url.path, {"id": str(request.url), "label": "Exercise",
                                                            "scoreMaximum": 10})
        if request.method == "PUT":
            if request.headers.get("content-type") != "application/vnd.ims.lis.v2.lineitem+json":
                return self.refuse(415, f"content type {request.headers.get('content-type')}")
            payload = await request.json()
            self.lineitem_puts.append({"lineitem": request.url.path, **payload})
            item.update(payload)
        return JSONResponse(item, media_type="application/vnd.ims.lis.v2.lineitem+json")

    async def memberships(self, request: Request) -> Response:
        if not self.authorized(request, NRPS_SCOPE):
            return self.refuse(401, "no token with the NRPS scope")
        page = int(request.query_params.get("page", "1"))
        half = (len(self.members) + 1) // 2
        members = self.members[:half] if page == 1 else self.members[half:]
        headers = {"link": f'<{self.memberships_url}?page=2>; rel="next"'} if page == 1 else {}
        return JSONResponse({"id": self.memberships_url, "context": {"id": CONTEXT}, "members": members},
                            headers=headers, media_type="application/vnd.ims.lti-nrps.v2.membershipcontainer+json")

    def app(self) -> Starlette:
        return Starlette(routes=[
            Route("/jwks", self.jwks), Route("/token", self.token, methods=["POST"]),
            Route("/courses/{course}/lineitems/{number}/scores", self.score, methods=["POST"]),
            Route("/courses/{course}/lineitems/{number}", self.lineitem_endpoint, methods=["GET", "PUT"]),
            Route("/courses/{course}/memberships", self.memberships),
        ])

    # -- running -------------------------------------------------------------------------------------------

    def start(self) -> TestPlatform:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self._socket = listener
        config = uvicorn.Config(self.app(), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [listener]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the test platform did not start"
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None
