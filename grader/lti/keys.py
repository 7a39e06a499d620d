"""The tool's own RSA key pair: made once, kept in the store's settings, the public half served as a JWKS.

The private key never leaves the store: it signs the tool's messages to the platforms (a deep linking
response, the client assertion that gets a service token) and nothing else reads it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from sqlalchemy import insert, select

from grader.course.store import Store
from grader.db import schema

SETTING = "lti_private_key"
ALGORITHM = "RS256"


@dataclass(frozen=True)
class ToolKey:
    private_pem: str
    kid: str

    def public_jwk(self) -> dict[str, Any]:
        private = serialization.load_pem_private_key(self.private_pem.encode(), password=None)
        assert isinstance(private, rsa.RSAPrivateKey)
        jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
        jwk.pop("key_ops", None)  # `use` says it: some platforms refuse a key with both
        return {**jwk, "kid": self.kid, "alg": ALGORITHM, "use": "sig"}

    def sign(self, claims: dict[str, Any], headers: dict[str, Any] | None = None) -> str:
        return jwt.encode(claims, self.private_pem, algorithm=ALGORITHM, headers={"kid": self.kid, **(headers or {})})


def new_private_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def kid_of(private_pem: str) -> str:
    # The key's id follows from the key, so that a platform caching the JWKS sees a new id if the key ever changes.
    return hashlib.sha256(private_pem.encode()).hexdigest()[:16]


def tool_key(store: Store) -> ToolKey:
    """The tool's key, made on first use. Two processes making it at once: the first insert wins and the
    other reads it."""
    st = schema.settings
    with store.reading() as db:
        pem = db.execute(select(st.c.value).where(st.c.key == SETTING)).scalar()
    if pem is None:
        made = new_private_pem()
        try:
            with store.transaction() as db:
                db.execute(insert(st).values(key=SETTING, value=made))
        except Exception:  # an integrity error: made meanwhile by another process
            pass
        with store.reading() as db:
            pem = db.execute(select(st.c.value).where(st.c.key == SETTING)).scalar()
    assert pem is not None
    return ToolKey(private_pem=str(pem), kid=kid_of(str(pem)))


def jwks(store: Store) -> dict[str, Any]:
    return {"keys": [tool_key(store).public_jwk()]}


def random_token() -> str:
    return secrets.token_urlsafe(24)
