"""The platforms (LMSs) registered with the tool: issuer, client id, deployments and endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlalchemy import and_, insert, select, update

from grader.core.scorecard import utc_now as now
from grader.course.store import Store
from grader.db import schema
from grader.errors import StoreError
from grader.service.accounts import PLANS


@dataclass(frozen=True)
class Platform:
    id: int
    issuer: str
    client_id: str
    auth_login_url: str
    auth_token_url: str
    keyset_url: str
    tier: str
    deployments: tuple[str, ...]


def checked_url(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise StoreError(f"{name} {url!r} is not an http(s) address")
    return url


def add_platform(store: Store, issuer: str, client_id: str, deployments: list[str], auth_login_url: str,
                 auth_token_url: str, keyset_url: str, tier: str = "free") -> Platform:
    """Register a platform, or update the one of that issuer and client id (its deployments added to)."""
    if tier not in PLANS:
        raise StoreError(f"unknown tier {tier!r}: use {' or '.join(PLANS)}")
    if not client_id.strip() or not deployments or not all(d.strip() for d in deployments):
        raise StoreError("a platform needs a client id and at least one deployment id")
    values = {"auth_login_url": checked_url("--auth-login-url", auth_login_url),
              "auth_token_url": checked_url("--auth-token-url", auth_token_url),
              "keyset_url": checked_url("--keyset-url", keyset_url), "tier": tier}
    checked_url("--issuer", issuer)
    pl, de = schema.lti_platforms, schema.lti_deployments
    with store.transaction() as db:
        found = db.execute(select(pl.c.id).where(and_(pl.c.issuer == issuer, pl.c.client_id == client_id))).scalar()
        if found is None:
            made = db.execute(insert(pl).values(issuer=issuer, client_id=client_id, created_at=now(), **values)
                              ).inserted_primary_key
            assert made is not None
            found = made[0]
        else:
            db.execute(update(pl).where(pl.c.id == found).values(**values))
        known = set(db.execute(select(de.c.deployment_id).where(de.c.platform_id == found)).scalars())
        for deployment in dict.fromkeys(d.strip() for d in deployments):
            if deployment not in known:
                db.execute(insert(de).values(platform_id=found, deployment_id=deployment))
    platform = platform_by_id(store, int(found))
    assert platform is not None
    return platform


def platforms(store: Store) -> list[Platform]:
    pl, de = schema.lti_platforms, schema.lti_deployments
    with store.reading() as db:
        rows = db.execute(select(pl).order_by(pl.c.id)).all()
        deployments: dict[int, list[str]] = {}
        for platform_id, deployment in db.execute(select(de.c.platform_id, de.c.deployment_id)
                                                  .order_by(de.c.deployment_id)):
            deployments.setdefault(platform_id, []).append(deployment)
    return [Platform(r.id, r.issuer, r.client_id, r.auth_login_url, r.auth_token_url, r.keyset_url, r.tier,
                     tuple(deployments.get(r.id, ()))) for r in rows]


def platform_by_id(store: Store, platform_id: int) -> Platform | None:
    return next((p for p in platforms(store) if p.id == platform_id), None)


def find_platform(store: Store, issuer: str, client_id: str | None) -> Platform | None:
    """The platform of an issuer and client id; without a client id (a login that names none), the
    issuer's only one."""
    mine = [p for p in platforms(store) if p.issuer == issuer]
    if client_id:
        return next((p for p in mine if p.client_id == client_id), None)
    return mine[0] if len(mine) == 1 else None
