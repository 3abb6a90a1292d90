"""API tokens: only their SHA-256 is stored."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from optimizer.errors import DomainError
from store.models import ApiToken, now
from store.repositories.base import get_row

SCOPES = ("read", "write")
PREFIX = "mp_"


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenRepository:
    def __init__(self, session: Session) -> None:
        self.s = session

    def create(self, name: str, scopes: list[str]) -> tuple[ApiToken, str]:
        """A new token and its secret (shown once, never stored). `write` implies `read`."""
        bad = [x for x in scopes if x not in SCOPES]
        if bad or not scopes:
            raise DomainError("scope", f"must be one or more of {', '.join(SCOPES)} (got {', '.join(scopes) or '-'})")
        wanted = {"read", "write"} if "write" in scopes else {"read"}
        secret = PREFIX + secrets.token_urlsafe(32)
        row = ApiToken(name=name, token_hash=hash_token(secret), scopes=",".join(sorted(wanted)))
        self.s.add(row)
        self.s.flush()
        return row, secret

    def authenticate(self, secret: str) -> ApiToken | None:
        """The live token with this secret, or None. Reads only (see `touch`)."""
        row = self.s.scalar(select(ApiToken).where(ApiToken.token_hash == hash_token(secret)))
        if row is None or row.revoked:
            return None
        return row

    def touch(self, token_id: int, older_than_s: float) -> None:
        """Set the token's last use to now when it is older than `older_than_s` (one conditional UPDATE)."""
        t = now()
        self.s.execute(
            update(ApiToken)
            .where(ApiToken.id == token_id)
            .where(or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < t - timedelta(seconds=older_than_s)))
            .values(last_used_at=t)
        )

    def list(self) -> list[ApiToken]:
        return list(self.s.scalars(select(ApiToken).order_by(ApiToken.id)))

    def revoke(self, token_id: int) -> ApiToken:
        row = get_row(self.s, ApiToken, token_id, "token")
        row.revoked = True
        self.s.flush()
        return row
